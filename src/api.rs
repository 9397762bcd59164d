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
use crate::infer::exact::{engine::ExactEngine, model::ExactModel};
use crate::infer::fit::Fit;
use crate::infer::mcmc::{density::Density, engine::McmcEngine};
use crate::infer::settings::{self, ENGINES, EngineConfig};
use crate::infer::vi::{gd::GradientDescent, gd::Param, mirror::MirrorDescent, model::ViModel};
use crate::ir::bind::{self, Bound, Overrides};
use crate::ir::graph::Graph;
use crate::ir::graph::{Family, GuideTarget};
use crate::model::custom::Registry;
use crate::semantic::Checked;
use crate::syntax::ast::Program;
use crate::syntax::diagnostics::{self, SourceFile};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Parse model text into a spanned AST.
pub fn parse(text: &str) -> Result<Program> {
    crate::syntax::parse(text)
}

/// Resolve names and check types, with kernels and likelihoods from `registry`.
pub fn check(program: &Program, registry: &Registry) -> Result<Checked> {
    crate::semantic::check(program, registry)
}

/// Lower a checked model to its graph.
pub fn lower(checked: Checked) -> Result<Graph> {
    crate::ir::lower::lower(checked)
}

/// Bind data (and `--set` overrides of data scalars and hyper values).
pub fn bind(graph: Graph, data: &Data, overrides: &Overrides) -> Result<Bound> {
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
    /// Stop early when set (Ctrl-C).
    pub cancel: Option<Arc<AtomicBool>>,
    /// Samplers: stream each chain's draws to `PREFIX_<chain>.csv` (Stan CSV).
    pub csv: Option<std::path::PathBuf>,
    /// The model's name, recorded in output headers (the file's stem).
    pub model_name: Option<String>,
}

/// The engine configuration a run will use: the model's `infer` block or
/// `options.engine`, with `options.settings` applied.
pub fn engine_config(graph: &Graph, options: &RunOptions) -> Result<EngineConfig, Error> {
    let mut cfg = match (&options.engine, &graph.engine) {
        (Some(name), existing) => {
            let schema = settings::schema(name).ok_or_else(|| {
                let names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
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
                _ => EngineConfig::defaults(schema, Default::default()),
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
        cfg.set(k, v)?;
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
pub fn run(bound: &Bound, mut options: RunOptions) -> Result<Fit> {
    let cfg = engine_config(&bound.graph, &options)?;
    let schema =
        settings::schema(&cfg.name).ok_or_else(|| Error::internal("engine without schema"))?;
    if !schema.implemented {
        let have: Vec<&str> = ENGINES
            .iter()
            .filter(|e| e.implemented)
            .map(|e| e.name)
            .collect();
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the `{}` engine ({}) is not available in this version of tempest",
                cfg.name, schema.doc
            ),
        )
        .with_span(cfg.span)
        .with_label("engine not available")
        .with_note(format!("available engines: {}", have.join(", ")))
        .into());
    }
    let sampler = matches!(cfg.name.as_str(), "nuts" | "hmc" | "mala");
    if options.test.is_some() && cfg.name == "evidence" {
        return Err(Error::new(
            ErrorKind::Settings,
            "--test: the `evidence` engine estimates the model evidence and makes no predictions",
        )
        .into());
    }
    if options.csv.is_some() && !sampler {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--csv: the `{}` engine has no draws to write; it is for `nuts`, `hmc` and `mala`",
                cfg.name
            ),
        )
        .into());
    }
    if options.test.is_some() && sampler {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--test: predictions from the `{}` engine's draws are not available in this version",
                cfg.name
            ),
        )
        .with_note("use the `estimate` block for posterior expectations")
        .into());
    }
    let test = match &options.test {
        Some(d) => Some(bind::bind_test(bound, d)?),
        None => None,
    };
    let shared = Arc::new(bound.clone());
    let engine: Box<dyn crate::infer::engine::Engine> = match cfg.name.as_str() {
        "exact" => Box::new(ExactEngine::new(ExactModel::new(shared, &cfg)?, &cfg)?),
        "mirror_descent" => {
            check_family(bound, &cfg.name)?;
            Box::new(MirrorDescent::new(
                ViModel::new(shared, &cfg, "mirror_descent")?,
                &cfg,
            )?)
        }
        "gradient_descent" => {
            let param = check_family(bound, &cfg.name)?;
            Box::new(GradientDescent::new(
                ViModel::new(shared, &cfg, "gradient_descent")?,
                &cfg,
                param,
            )?)
        }
        "evidence" => Box::new(crate::infer::evidence::engine::EvidenceEngine::new(
            Density::new(shared)?,
            &cfg,
        )?),
        "nuts" | "hmc" | "mala" => Box::new(McmcEngine::new(
            Density::new(shared)?,
            &cfg,
            options.csv.clone(),
            options.model_name.as_deref().unwrap_or("model"),
        )?),
        other => {
            return Err(Error::internal(format!(
                "engine `{other}` is marked available but has no runner"
            ))
            .into());
        }
    };
    let mut exec = Executor::new();
    for o in std::mem::take(&mut options.observers) {
        exec = exec.observe(o);
    }
    if let Some(c) = &options.cancel {
        exec = exec.cancel_on(c.clone());
    }
    let mut fit = exec.run(engine)?;
    if let Some(t) = &test {
        match &mut fit {
            Fit::Exact(f) => f.attach_test(t)?,
            Fit::Variational(f) => f.attach_test(t, cfg.int("bins").max(1) as usize)?,
            Fit::Mcmc(_) | Fit::Evidence(_) => {
                return Err(Error::internal("test data reached a sampler").into());
            }
        }
    }
    Ok(fit)
}

/// The variational family the model's guide asks for, checked against the
/// engine: mirror descent updates `sites`; gradient descent takes
/// `full_rank` (the default) or `mean_field`. When the engine replaces the
/// model's own (`--engine`), the guide is ignored and the default is used.
fn check_family(bound: &Bound, engine: &str) -> Result<Param, Error> {
    let g = &bound.graph;
    // An engine chosen with `--engine` over the model's own ignores a guide
    // written for the model's engine and uses its default family.
    if g.engine.as_ref().is_some_and(|e| e.name != engine) {
        return Ok(Param::FullRank);
    }
    let latent = crate::infer::structure::latent_observation(bound, engine)?;
    for guide in &g.guides {
        if guide.target != GuideTarget::Gp(latent.gp) {
            continue;
        }
        let ok = match (engine, &guide.family) {
            ("mirror_descent", Family::Sites) => Some(Param::FullRank),
            ("gradient_descent", Family::FullRank) => Some(Param::FullRank),
            ("gradient_descent", Family::MeanField) => Some(Param::MeanField),
            _ => None,
        };
        return ok.ok_or_else(|| {
            let want = if engine == "mirror_descent" { "`sites`" } else { "`full_rank` or `mean_field`" };
            Error::at(ErrorKind::Unsupported, guide.span, format!("the `{engine}` engine works with the family {want}"))
                .with_label("this family")
                .with_note("mirror_descent updates `sites`; gradient_descent fits `full_rank` or `mean_field`; `inducing` is for `svi`")
        });
    }
    Ok(Param::FullRank)
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
        bind::bind(self.graph.clone(), data, overrides)
    }

    /// Render errors against this model's source.
    pub fn render(&self, errors: &Errors) -> String {
        diagnostics::render(errors, Some(&self.source), false)
    }
}
