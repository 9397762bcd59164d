//! The pipeline as library calls: parse → check → lower → bind → run.
//!
//! ```no_run
//! use tempest::{Data, Model, Overrides, Registry, RunOptions};
//!
//! let model = Model::from_file("examples/diabetes.tempest", &Registry::default())
//!     .map_err(|e| e.to_string())?;
//! let data = Data::read("examples/data/diabetes_train.csv".as_ref()).map_err(|e| e.to_string())?;
//! let bound = model.bind(&data, &Overrides::default()).map_err(|e| model.render(&e))?;
//! let fit = tempest::run(&bound, RunOptions::default()).map_err(|e| model.render(&e))?;
//! println!("{}", fit.summary());
//! # Ok::<(), String>(())
//! ```

use crate::data::Data;
use crate::error::{Error, ErrorKind, Errors, Result};
use crate::infer::engine::{Executor, Observer};
use crate::infer::fit::Fit;
use crate::infer::registry::{self, TestData};
use crate::infer::settings::EngineConfig;
use crate::infer::sink::DrawSinks;
use crate::interrupt::StopFlag;
use crate::ir::bind::{self, Bound, Overrides};
use crate::ir::graph::Graph;
use crate::model::custom::Registry;
use crate::output::stan_csv::StanCsvSinks;
use crate::semantic::Checked;
use crate::syntax::ast::Program;
use crate::syntax::diagnostics::{self, SourceFile};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Parse model text into a spanned AST.
pub fn parse(text: &str) -> Result<Program> {
    crate::syntax::parse(text)
}

/// Resolve names and check types, with kernels and likelihoods from
/// `registry`, and the `infer` block's engine and settings against the
/// engine registry: every error of both, in the order of the source.
pub fn check(program: &Program, registry: &Registry) -> Result<Checked> {
    let infer = program.items.iter().find_map(|item| match item {
        crate::syntax::ast::Item::Block(b) => match &b.kind {
            crate::syntax::ast::BlockKind::Infer(spec) => Some(spec),
            _ => None,
        },
        _ => None,
    });
    let settings = match infer.map(|spec| EngineConfig::from_ast(spec, &registry::schemas())) {
        Some(Err(es)) => es,
        _ => Vec::new(),
    };
    match crate::semantic::check(program, registry) {
        Ok(c) if settings.is_empty() => Ok(c),
        Ok(_) => Err(Errors(sorted(settings))),
        Err(Errors(mut es)) => {
            es.extend(settings);
            Err(Errors(sorted(es)))
        }
    }
}

/// Errors in the order of their places in the source (unplaced first).
fn sorted(mut es: Vec<Error>) -> Vec<Error> {
    es.sort_by_key(|e| e.span.unwrap_or_default().start);
    es
}

/// The engine configuration of the model's `infer` block, its settings
/// checked against the engine's schema (`None`: no block).
pub fn infer_config(graph: &Graph) -> Result<Option<EngineConfig>, Error> {
    graph
        .infer
        .as_ref()
        .map(|spec| {
            EngineConfig::from_ast(spec, &registry::schemas()).map_err(|es| {
                es.into_iter()
                    .next()
                    .unwrap_or_else(|| Error::internal("an `infer` block failed without an error"))
            })
        })
        .transpose()
}

/// Lower a checked model to its graph.
pub fn lower(checked: Checked) -> Result<Graph> {
    crate::semantic::lower::lower(checked)
}

/// Bind data (and `--set` overrides of data scalars and hyper values).
pub fn bind(graph: Graph, data: &Data, overrides: &Overrides) -> Result<Bound> {
    crate::limits::memory_budget()?;
    bind::bind(graph, data, overrides)
}

/// How to run an engine.
#[derive(Default)]
pub struct RunOptions {
    /// Use this engine instead of the model's `infer` block.
    pub engine: Option<String>,
    /// Engine settings `(name, value)`, in model syntax (`"true"`, `"200"`).
    pub settings: Vec<(String, String)>,
    /// Random seed (overrides the engine's `seed` setting).
    pub seed: Option<u64>,
    /// Test data to predict at, bound like the training data.
    pub test: Option<Data>,
    /// Observers of the run (progress bars, traces).
    pub observers: Vec<Box<dyn Observer>>,
    /// Stop early when set (Ctrl-C, SIGTERM): every long loop of the run
    /// reads it ([`crate::interrupt`]), and the run keeps its result so far.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Samplers: stream each chain's draws to `PREFIX_<chain>.csv` (Stan CSV).
    pub csv: Option<std::path::PathBuf>,
    /// Samplers: further sinks each chain's draws stream to, one opened per
    /// chain ([`crate::infer::sink`]).
    pub sinks: Vec<Arc<dyn DrawSinks>>,
    /// The model's name, recorded in output headers (the file's stem).
    pub model_name: Option<String>,
}

/// The model's name a run records in output headers (`model` when
/// `options` gives none).
fn model_name(options: &RunOptions) -> String {
    options.model_name.clone().unwrap_or_else(|| "model".into())
}

/// The engine configuration a run will use: the model's `infer` block or
/// `options.engine`, with `options.settings` applied.
pub fn engine_config(graph: &Graph, options: &RunOptions) -> Result<EngineConfig, Error> {
    let written = infer_config(graph)?;
    let mut cfg = match (&options.engine, &written) {
        (Some(name), existing) => {
            let schema = registry::schema(name).ok_or_else(|| {
                let names = registry::names(false);
                Error::new(
                    ErrorKind::Settings,
                    format!(
                        "--engine {name}: unknown engine; engines: {}",
                        names.join(", ")
                    ),
                )
            })?;
            match existing {
                Some(e) if e.name == *name => e.clone(),
                _ => EngineConfig::defaults_among(schema, Default::default(), &registry::schemas()),
            }
        }
        (None, Some(e)) => e.clone(),
        (None, None) => {
            return Err(Error::new(
                ErrorKind::Settings,
                "the model has no `infer` block: add one, e.g. `infer exact {}` (or pass `--engine exact` to `tempest run`)",
            ));
        }
    };
    for (k, v) in &options.settings {
        cfg.set_with(k, v, &registry::schemas())?;
    }
    if let Some(seed) = options.seed
        && cfg.values.contains_key("seed")
    {
        if seed > i64::MAX as u64 {
            return Err(Error::new(
                ErrorKind::Settings,
                format!("--seed {seed}: a seed is at most {}", i64::MAX),
            ));
        }
        cfg.set("seed", &seed.to_string())?;
    }
    Ok(cfg)
}

/// Run the engine on a bound model, then predict at the test data if given.
///
/// The engine is found in [`crate::infer::registry::ENGINES`]; what it does
/// not accept (test data, draw sinks) is refused before anything runs.
///
/// When `options.cancel` is set during the run, the engine stops at its
/// next check and its result so far comes back (an `E-interrupted` error
/// where there is none, e.g. a sampler still in warm-up); set during the
/// predictions, the fit comes back without them ([`run_outcome`] says so).
pub fn run(bound: &Bound, options: RunOptions) -> Result<Box<dyn Fit>> {
    run_outcome(bound, options).map(|o| o.fit)
}

/// [`run`], saying whether the predictions at the test data were stopped
/// by `options.cancel`.
pub fn run_outcome(bound: &Bound, mut options: RunOptions) -> Result<Outcome> {
    let cfg = engine_config(&bound.graph, &options)?;
    let def =
        registry::find(&cfg.name).ok_or_else(|| Error::internal("engine without definition"))?;
    if !def.schema().implemented {
        return Err(registry::unavailable(def.schema(), &cfg).into());
    }
    let accepts = def.accepts();
    if options.test.is_some()
        && let TestData::Refused(why, note) = accepts.test
    {
        let mut e = Error::new(
            ErrorKind::Settings,
            format!("--test: {}", why.replace("{engine}", &cfg.name)),
        );
        if let Some(n) = note {
            e = e.with_note(n);
        }
        return Err(e.into());
    }
    let mut cx = registry::build_cx(std::mem::take(&mut options.sinks), model_name(&options));
    if let Some(prefix) = &options.csv {
        cx.sinks.push(Arc::new(StanCsvSinks {
            prefix: prefix.clone(),
        }));
    }
    if !cx.sinks.is_empty() && !accepts.draw_sinks {
        let what = if options.csv.is_some() {
            "--csv"
        } else {
            "draw sinks"
        };
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "{what}: the `{}` engine has no draws to write; it is for {}",
                cfg.name,
                registry::draw_engines()
            ),
        )
        .into());
    }
    let stop = StopFlag::new(options.cancel.clone());
    let test = match &options.test {
        Some(d) => {
            let mut t = bind::bind_test(bound, d)?;
            bind::check_param_shapes(bound, &t)?;
            t.stop = stop.clone();
            crate::ir::check_test::check_test(bound, &t)?;
            Some(t)
        }
        None => None,
    };
    let mut bound = bound.clone();
    bound.stop = stop;
    let engine = def.build(Arc::new(bound), &cfg, &cx)?;
    let mut exec = Executor::new();
    for o in std::mem::take(&mut options.observers) {
        exec = exec.observe(o);
    }
    if let Some(c) = &options.cancel {
        exec = exec.cancel_on(c.clone());
    }
    let mut fit = exec.run(engine)?;
    let mut predictions_stopped = None;
    if let Some(t) = &test {
        match fit.attach_test(t) {
            Err(e) if e.is_interrupted() => predictions_stopped = Some(e),
            r => r?,
        }
    }
    Ok(Outcome {
        fit,
        predictions_stopped,
    })
}

/// What [`run_outcome`] gives: the fit, and whether the stop flag
/// (`RunOptions::cancel`) cut its predictions short.
pub struct Outcome {
    /// The fit (with its predictions at the test data, unless stopped).
    pub fit: Box<dyn Fit>,
    /// The interruption that stopped the predictions at the test data (the
    /// fit then has none).
    pub predictions_stopped: Option<Error>,
}

/// What the engine a run would use says before it starts on `bound`
/// ([`crate::infer::seam::EngineDef::preflight`]): warnings, such as a
/// dense variational run's estimated time when it is long (the command
/// line prints them before the run); the error the run would give when the
/// engine refuses to start (a run estimated to exceed `max_minutes`).
pub fn preflight(bound: &Bound, options: &RunOptions) -> Result<Vec<String>> {
    let cfg = engine_config(&bound.graph, options)?;
    match registry::find(&cfg.name) {
        Some(def) if def.schema().implemented => {
            let cx = registry::build_cx(Vec::new(), model_name(options));
            Ok(def.preflight(Arc::new(bound.clone()), &cfg, &cx)?)
        }
        _ => Ok(Vec::new()),
    }
}

/// Check a run's figure choices before it starts: `--plot-params` names
/// (see [`crate::output::plot_params`]) need an engine whose figure draws
/// params (the samplers and `sample_prior`) and must name the model's
/// params.
pub fn check_plot_options(
    bound: &Bound,
    options: &RunOptions,
    plot: &crate::infer::fit::PlotOptions,
) -> Result<()> {
    let Some(names) = &plot.params else {
        return Ok(());
    };
    let cfg = engine_config(&bound.graph, options)?;
    let draws_params = registry::find(&cfg.name).is_some_and(|d| d.accepts().plot_params);
    if !draws_params {
        // The samplers, then the other engines whose figures draw params.
        let mut which = vec![registry::draw_engines()];
        which.extend(
            registry::ENGINES
                .iter()
                .filter(|e| e.accepts().plot_params && !e.accepts().draw_sinks)
                .map(|e| format!("`{}`", e.schema().name)),
        );
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--plot-params: the `{}` engine's figure draws no params; the samplers' trace and pair plots do ({})",
                cfg.name,
                which.join(", ")
            ),
        )
        .into());
    }
    crate::output::plot_params::check_bound(bound, names)?;
    Ok(())
}

/// Build the engine a run would use on `bound` without running it: the
/// engine's own checks of the model (its structure, guide family,
/// settings) fail here as they would at `run`. `tempest check` with data
/// uses it.
pub fn prepare(bound: &Bound, options: &RunOptions) -> Result<String> {
    let cfg = engine_config(&bound.graph, options)?;
    let def =
        registry::find(&cfg.name).ok_or_else(|| Error::internal("engine without definition"))?;
    if !def.schema().implemented {
        return Err(registry::unavailable(def.schema(), &cfg).into());
    }
    let cx = registry::build_cx(Vec::new(), model_name(options));
    def.build(Arc::new(bound.clone()), &cfg, &cx)?;
    Ok(cfg.name.to_string())
}

/// A model's source and graph together, so errors can be rendered against
/// the source.
pub struct Model {
    /// The model text and its name.
    pub source: SourceFile,
    /// The lowered graph.
    pub graph: Graph,
}

/// Errors rendered against their source, ready to print.
#[derive(Debug)]
pub struct Rendered(pub String);

impl std::fmt::Display for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Rendered {}

impl Model {
    /// Parse, check and lower model text. Errors come back rendered.
    pub fn from_str(
        name: &str,
        text: &str,
        registry: &Registry,
    ) -> std::result::Result<Model, Rendered> {
        let source = SourceFile::new(name, text);
        let graph = parse(&source.text)
            .and_then(|p| check(&p, registry))
            .and_then(lower)
            .map_err(|e| Rendered(diagnostics::render(&e, Some(&source), false)))?;
        Ok(Model { source, graph })
    }

    /// Read and compile a model file.
    pub fn from_file(path: &str, registry: &Registry) -> std::result::Result<Model, Rendered> {
        if let Ok(meta) = std::fs::metadata(path)
            && meta.len() > crate::limits::MAX_MODEL_BYTES
        {
            return Err(Rendered(format!(
                "error[{}]: the model file `{path}` has {} bytes; model files may have at most {}\n",
                ErrorKind::Io.code(),
                meta.len(),
                crate::limits::MAX_MODEL_BYTES
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            Rendered(format!(
                "error[{}]: cannot read model file `{path}`: {e}\n",
                ErrorKind::Io.code()
            ))
        })?;
        Model::from_str(path, &text, registry)
    }

    /// Bind data to this model.
    pub fn bind(&self, data: &Data, overrides: &Overrides) -> Result<Bound> {
        bind(self.graph.clone(), data, overrides)
    }

    /// Render errors against this model's source.
    pub fn render(&self, errors: &Errors) -> String {
        diagnostics::render(errors, Some(&self.source), false)
    }
}
