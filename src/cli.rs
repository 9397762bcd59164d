//! The `tempest` command line: run, check and inspect model files. Built
//! with the `cli` feature (on by default); without `plot` its `--plot` and
//! `plot-trace` are refused before any work, without `progress` it writes
//! plain progress lines instead of bars.
//!
//! The `tempest` binary is [`main_with`] with the default (empty)
//! [`Registry`]. A program that registers its own likelihoods and kernels
//! written in Rust gets the whole command line with them, usable by name in
//! model files, from a `main` of one line:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     let mut registry = tempest::Registry::default();
//!     // registry.add_kernel(MyKernel).add_likelihood(MyLikelihood);
//!     tempest::cli::main_with(registry)
//! }
//! ```

use crate::command::{self, Failure};
use crate::error::{Error, ErrorKind, Errors};
use crate::output::progress::BarProgress;
use crate::syntax::diagnostics::{SourceFile, render};
use crate::{Registry, RunOptions};
use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// tempest: Gaussian-process models from model files.
#[derive(Parser)]
#[command(name = "tempest", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// `Run` carries every option of a run; the command is parsed once per
// process, so its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Fit a model to data and report the results.
    Run {
        /// The model file (.tempest).
        model: PathBuf,
        /// The training data: CSV (columns by name) or JSON (Stan's
        /// convention); not needed by a model that declares no data.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Use only these rows of a CSV file: `0..299` (inclusive, 0-based) or
        /// `COLUMN=VALUE`, e.g. `is_test=0`.
        #[arg(long, value_name = "A..B|COL=V")]
        rows: Option<String>,
        /// Test data to predict at, bound like the training data.
        #[arg(long)]
        test: Option<PathBuf>,
        /// Rows of the test CSV file: `300..304` (inclusive) or `COLUMN=VALUE`.
        #[arg(long = "test-rows", value_name = "A..B|COL=V", requires = "test")]
        test_rows: Option<String>,
        /// Hold out part of the training CSV file as test data: train on
        /// this fraction of its rows (after --rows), e.g. 0.8, test on the rest.
        #[arg(long, value_name = "FRACTION", conflicts_with = "test")]
        split: Option<f64>,
        /// Shuffle the training CSV file's rows with this seed before
        /// --split (the same split on every machine).
        #[arg(long, value_name = "SEED")]
        shuffle: Option<u64>,
        /// Write the rows the run trains and tests on to this CSV file
        /// (`row,part`: each row's number, as data errors number rows, and
        /// `train` or `test`), before it starts; needs --split or --shuffle.
        #[arg(long = "split-out", value_name = "ROWS.csv")]
        split_out: Option<PathBuf>,
        /// Override a data scalar, a hyper's value or an engine setting.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Use this engine instead of the model's `infer` block.
        #[arg(long)]
        engine: Option<String>,
        /// Random seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Samplers: number the chains from K+1 (their seeds and Stan CSV
        /// files), so each process of an array job runs its own chains;
        /// the same as `--set chain_offset=K`.
        #[arg(long = "chain-offset", value_name = "K")]
        chain_offset: Option<u64>,
        /// Write machine-readable results to this JSON file.
        #[arg(long, value_name = "OUT")]
        json: Option<PathBuf>,
        /// Draw the fit to this PNG file: exact engine, the fit (1-D inputs);
        /// variational engines, the reliability diagram when test outcomes of
        /// a classifier are given, the fit for 1-D inputs, else the ELBO
        /// trace; samplers, trace and density plots of the first eight params
        /// (and the fit at OUT_fit.png for a GP on 1-D inputs); evidence, the
        /// rung means against t.
        #[arg(long, value_name = "OUT.png")]
        plot: Option<PathBuf>,
        /// Samplers: the params the trace and pair plots draw, by name,
        /// separated by commas: a whole param (`tau`) or one element
        /// (`a[3]`); checked against the model before the run.
        #[arg(long = "plot-params", value_name = "NAMES", requires = "plot")]
        plot_params: Option<String>,
        /// Samplers: stream each chain's draws to `PREFIX_1.csv`,
        /// `PREFIX_2.csv`, ... (Stan CSV, readable by ArviZ's from_cmdstan).
        #[arg(long, value_name = "PREFIX")]
        csv: Option<PathBuf>,
        /// Save the fit to this JSON file, for `tempest predict` (every engine
        /// that predicts).
        #[arg(long, value_name = "FIT.json")]
        save: Option<PathBuf>,
        /// No progress display.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Predict at new data from a fit saved with `tempest run --save`,
    /// without training again.
    Predict {
        /// The model file the fit was trained with.
        model: PathBuf,
        /// The saved fit.
        #[arg(long, value_name = "FIT.json")]
        fit: PathBuf,
        /// The data to predict at (outcomes, when present, give test metrics).
        #[arg(long)]
        test: PathBuf,
        /// Rows of the test CSV file: `300..304` (inclusive) or `COLUMN=VALUE`.
        #[arg(long = "test-rows", value_name = "A..B|COL=V")]
        test_rows: Option<String>,
        /// Write the predictions and metrics as JSON.
        #[arg(long, value_name = "OUT")]
        json: Option<PathBuf>,
        /// Draw the fit's figure to a PNG file: the reliability diagram
        /// (classifier outcomes) or the fit of a model with one input column.
        #[arg(long, value_name = "OUT.png")]
        plot: Option<PathBuf>,
    },
    /// Check a model (and its data, if given) without running it.
    Check {
        /// The model file.
        model: PathBuf,
        /// Data to bind and check.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Rows of a CSV file (inclusive).
        #[arg(long, value_name = "A..B")]
        rows: Option<String>,
        /// Override a data scalar, a hyper's value, `temperature` or an engine setting.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
    },
    /// Overlay the ELBO traces of variational runs (JSON files written by
    /// `tempest run --json`), e.g. mirror descent against gradient descent.
    #[command(name = "plot-trace")]
    PlotTrace {
        /// The PNG file to write.
        #[arg(long, value_name = "OUT.png")]
        out: PathBuf,
        /// The runs' JSON files (each with an `elbo_trace`).
        #[arg(value_name = "RUN.json", required = true)]
        runs: Vec<PathBuf>,
        /// Plot log10(best ELBO − ELBO), best over all runs, instead of the ELBO.
        #[arg(long)]
        gap: bool,
        /// The plot's title.
        #[arg(long)]
        title: Option<String>,
    },
    /// Summarise Stan CSV files (one chain each, from tempest runs on
    /// several machines or from CmdStan) as one run: the table, diagnostics
    /// and warnings of `tempest run`, names as in the model (`beta[0]`).
    /// Files of another posterior or sampler, or with a draw that is not
    /// finite, are refused; chains of unequal length are cut to the
    /// shortest, and tuning that differs is warned about.
    Summary {
        /// The chains' Stan CSV files, e.g. `draws_*.csv`.
        #[arg(value_name = "DRAWS.csv", required = true)]
        files: Vec<PathBuf>,
        /// Write the summary as JSON (the keys of a run's JSON).
        #[arg(long, value_name = "OUT")]
        json: Option<PathBuf>,
    },
    /// Print a stage of the pipeline.
    Emit {
        /// `ast` (the parse tree) or `ir` (the typed graph).
        stage: Stage,
        /// The model file.
        model: PathBuf,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Stage {
    Ast,
    Ir,
}

/// Run the command line (the process's arguments) with the likelihoods and
/// kernels of `registry`; the exit status: 0, 1 after an error, 2 for a
/// malformed command line, 130 after Ctrl-C, SIGTERM or SIGHUP, 141 when
/// standard output was closed.
pub fn main_with(registry: Registry) -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown cause".into());
        let at = info
            .location()
            .map(|l| format!(" ({}:{})", l.file(), l.line()))
            .unwrap_or_default();
        // Never panic again here (a full or closed standard error).
        let _ = writeln!(
            std::io::stderr(),
            "error[{}]: tempest stopped unexpectedly: {msg}{at}\n  = note: this is a bug in tempest, not in your model; please report it with the model and data",
            ErrorKind::Internal.code()
        );
    }));
    run_args(&registry, std::env::args_os())
}

/// Run the command line on `args` (the program's name first, as
/// `std::env::args_os` gives them) with the likelihoods and kernels of
/// `registry`: what [`main_with`] does, without the panic hook, for
/// programs and tests that call it more than once. Results go to standard
/// output, errors to standard error; the exit status as for
/// [`main_with`].
pub fn run_args<I, T>(registry: &Registry, args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(e.exit_code().clamp(0, 255) as u8);
        }
    };
    let color = std::io::stderr().is_terminal();
    let mut source = None;
    match run_cli(cli, &mut source, registry) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.errors.0.is_empty() {
                let src = if f.in_source { source.as_ref() } else { None };
                // Nothing more can be done when standard error cannot be
                // written; the exit status still says what happened.
                let _ = std::io::stderr().write_all(render(&f.errors, src, color).as_bytes());
            }
            ExitCode::from(f.code)
        }
    }
}

/// Write to standard output. A reader that closed the pipe ends the command
/// quietly (exit status 141, as after SIGPIPE); any other failure (a full
/// disk) is an error.
fn out(text: &str) -> Result<(), Failure> {
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())
        .and_then(|_| o.flush())
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                Failure {
                    errors: Errors(Vec::new()),
                    in_source: false,
                    code: 141,
                }
            } else {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot write to standard output: {e}"),
                )
                .into()
            }
        })
}

/// Check the output paths of `tempest run` before any work starts.
fn check_outputs(
    json: Option<&Path>,
    plot: Option<&Path>,
    csv: Option<&Path>,
) -> Result<(), Failure> {
    if let Some(p) = json {
        command::check_output_path("--json", p)?;
    }
    if let Some(p) = plot {
        check_png("--plot", p)?;
    }
    if let Some(prefix) = csv {
        let first = PathBuf::from(format!("{}_1.csv", prefix.display()));
        command::check_output_path("--csv", &first)?;
    }
    Ok(())
}

/// Check a PNG output path: that this build draws figures (the `plot`
/// feature), the extension, then that it can be written.
fn check_png(flag: &str, p: &Path) -> Result<(), Failure> {
    crate::output::require_plot(flag)?;
    let png = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png"));
    if !png {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "{flag} {}: plots are written as PNG; give a file name ending in `.png`",
                p.display()
            ),
        )
        .into());
    }
    command::check_output_path(flag, p)?;
    Ok(())
}

/// What stops a run from outside, as messages name it.
const SIGNALS: &str = "Ctrl-C, SIGTERM or SIGHUP";

/// Set the returned flag on SIGINT (Ctrl-C), SIGTERM and SIGHUP: the run
/// stops at its next check and keeps its result so far. A second signal
/// while the flag is set ends the process at once (exit status 130), unless
/// it comes within a second of the first: `timeout` and a terminal send the
/// same signal to the process and to its group, so one request can arrive
/// twice. A handler may already be installed (a program embedding the
/// command line); the signals then keep their behaviour and the flag is
/// never set.
fn stop_on_signals() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = cancel.clone();
    let mut first: Option<std::time::Instant> = None;
    let _ = ctrlc::set_handler(move || {
        let again = flag.swap(true, std::sync::atomic::Ordering::SeqCst);
        match first {
            Some(t) if again && t.elapsed() >= std::time::Duration::from_secs(1) => {
                std::process::exit(130)
            }
            Some(_) if again => {}
            _ => first = Some(std::time::Instant::now()),
        }
    });
    cancel
}

/// The failure after an interruption: exit status 130, and what was kept.
fn interrupted(errors: Option<Errors>, csv: bool, in_source: bool) -> Failure {
    let errors = match errors {
        // The error of a run stopped before it had results, or of an
        // output the stop cut short.
        Some(mut errors) => {
            if let Some(first) = errors.0.first_mut() {
                first.notes.push(if first.kind == ErrorKind::Interrupted {
                    format!("stopped by {SIGNALS}")
                } else {
                    format!("the run was interrupted ({SIGNALS})")
                });
            }
            errors
        }
        None => {
            let mut e = Error::new(
                ErrorKind::Interrupted,
                format!(
                    "interrupted ({SIGNALS}): the results above are from the run up to the stop"
                ),
            );
            if csv {
                e = e.with_note(
                    "the Stan CSV files hold the draws summarised above (every chain cut to the same number)",
                );
            }
            e.into()
        }
    };
    Failure {
        errors,
        in_source,
        code: 130,
    }
}

fn read_source(path: &Path) -> Result<SourceFile, Failure> {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.len() > crate::limits::MAX_MODEL_BYTES
    {
        return Err(Error::new(
            ErrorKind::Io,
            format!(
                "the model file `{}` has {} bytes; model files may have at most {}",
                path.display(),
                meta.len(),
                crate::limits::MAX_MODEL_BYTES
            ),
        )
        .into());
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cannot read model file `{}`: {e}", path.display()),
        )
    })?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

/// Errors from a stage that points into the model source.
fn sourced(errors: Errors) -> Failure {
    Failure {
        errors,
        in_source: true,
        code: 1,
    }
}

/// The engines whose runs write an ELBO trace, as the registry lists them:
/// the variational engines (those whose guides name a family), e.g.
/// "mirror_descent, gradient_descent, svi".
fn variational_engines() -> String {
    let names: Vec<&str> = crate::infer::registry::ENGINES
        .iter()
        .filter(|e| !e.accepts().families.is_empty())
        .map(|e| e.schema().name)
        .collect();
    names.join(", ")
}

fn run_cli(cli: Cli, source: &mut Option<SourceFile>, registry: &Registry) -> Result<(), Failure> {
    // A memory budget that cannot be read is refused before any work.
    crate::limits::memory_budget()?;
    match cli.command {
        Command::PlotTrace {
            out,
            runs,
            gap,
            title,
        } => plot_trace(&out, &runs, gap, title),
        Command::Summary { files, json } => {
            if let Some(p) = &json {
                command::check_output_path("--json", p)?;
            }
            let merged = crate::infer::mcmc::merge::merge(&files)?;
            let r = merged.report();
            out(&r.text())?;
            if let Some(p) = &json {
                write_json(p, &r.json())?;
            }
            Ok(())
        }
        Command::Emit { stage, model } => {
            let src = source.insert(read_source(&model)?);
            match stage {
                Stage::Ast => {
                    let p = crate::parse(&src.text).map_err(sourced)?;
                    out(&crate::syntax::print::program(&p, src))?;
                }
                Stage::Ir => {
                    let g = command::compile(src, registry)?;
                    out(&crate::ir::print::graph(&g))?;
                    // The engine as it will run: its settings with defaults.
                    if let Some(cfg) =
                        crate::api::infer_config(&g).map_err(|e| sourced(e.into()))?
                    {
                        out(&format!("  engine   {cfg}\n"))?;
                    }
                }
            }
            Ok(())
        }
        Command::Check {
            model,
            data,
            rows,
            set,
        } => {
            let src = source.insert(read_source(&model)?);
            let (graph, bound) =
                command::check_with(registry, src, data.as_deref(), rows.as_deref(), &set)?;
            let n_obs = graph.observations.len();
            let plural = if n_obs == 1 { "" } else { "s" };
            match (bound, data) {
                (Some(b), Some(d)) => {
                    let sizes: Vec<String> =
                        b.sizes.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    let sizes = if sizes.is_empty() {
                        "no sizes".to_string()
                    } else {
                        sizes.join(", ")
                    };
                    out(&format!(
                        "{}: ok ({n_obs} observation statement{plural}; data {}: {sizes})\n",
                        src.name,
                        d.display()
                    ))?;
                }
                _ => out(&format!(
                    "{}: ok ({n_obs} observation statement{plural})\n",
                    src.name
                ))?,
            }
            Ok(())
        }
        Command::Predict {
            model,
            fit,
            test,
            test_rows,
            json,
            plot,
        } => {
            check_outputs(json.as_deref(), plot.as_deref(), None)?;
            let src = source.insert(read_source(&model)?);
            let graph = command::compile(src, registry)?;
            if let Ok(meta) = std::fs::metadata(&fit)
                && meta.len() > crate::limits::MAX_FIT_BYTES
            {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!(
                        "the saved fit `{}` has {} bytes; tempest reads fits of at most {}",
                        fit.display(),
                        meta.len(),
                        crate::limits::MAX_FIT_BYTES
                    ),
                )
                .into());
            }
            // Parsed whole: checked like a JSON data file from its size first.
            if let Ok(meta) = std::fs::metadata(&fit) {
                crate::data::JsonData::check_size(&fit.display().to_string(), meta.len())?;
            }
            let text = std::fs::read_to_string(&fit).map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot read the saved fit `{}`: {e}", fit.display()),
                )
            })?;
            let name = fit.display().to_string();
            let j: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                Error::new(
                    ErrorKind::Data,
                    format!("{name}, line {}: invalid JSON: {e}", e.line()),
                )
                .with_note("write a saved fit with `tempest run ... --save FIT.json`")
            })?;
            let (mut fit, base) =
                crate::infer::registry::restore(graph, &j, &name).map_err(|e| sourced(e.into()))?;
            let data =
                command::load_data_for(&base.graph, &test, test_rows.as_deref(), "--test-rows")
                    .map_err(sourced)?;
            let mut test_bound = crate::ir::bind::bind_test(&base, &data).map_err(sourced)?;
            test_bound.stop = crate::interrupt::StopFlag::new(Some(stop_on_signals()));
            fit.attach_test(&test_bound).map_err(|e| {
                if e.is_interrupted() {
                    interrupted(Some(e.into()), false, true)
                } else {
                    sourced(e.into())
                }
            })?;
            for line in command::label_lines(&base) {
                out(&format!("{line}\n"))?;
            }
            let report = fit.report();
            out(&report.text())?;
            let files = [
                ("model", serde_json::json!(src.name)),
                ("test_data", serde_json::json!(test.display().to_string())),
            ];
            write_outputs(
                fit.as_ref(),
                &report,
                json.as_deref(),
                plot.as_deref(),
                &Default::default(),
                &files,
            )
        }
        Command::Run {
            model,
            data,
            rows,
            test,
            test_rows,
            split,
            shuffle,
            split_out,
            set,
            engine,
            seed,
            chain_offset,
            json,
            plot,
            plot_params,
            csv,
            save,
            quiet,
        } => {
            check_outputs(json.as_deref(), plot.as_deref(), csv.as_deref())?;
            if let Some(p) = &save {
                command::check_output_path("--save", p)?;
            }
            if let Some(p) = &split_out {
                if split.is_none() && shuffle.is_none() {
                    return Err(Error::new(
                        ErrorKind::Settings,
                        format!(
                            "--split-out {}: there is no split to write; give --split FRACTION (and --shuffle SEED) to hold out rows",
                            p.display()
                        ),
                    )
                    .into());
                }
                command::check_output_path("--split-out", p)?;
            }
            let src = source.insert(read_source(&model)?);
            let graph = command::compile(src, registry)?;
            let train = match &data {
                Some(d) => {
                    command::load_data_for(&graph, d, rows.as_deref(), "--rows").map_err(sourced)?
                }
                None => command::no_data(&graph, rows.is_some()).map_err(sourced)?,
            };
            let (train, held_out) = command::split_data(train, split, shuffle)?;
            if let Some(p) = &split_out {
                let text = command::split_rows_csv(&train, held_out.as_ref().map(|h| &h.0))?;
                std::fs::write(p, text).map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        format!("--split-out: cannot write `{}`: {e}", p.display()),
                    )
                })?;
            }
            let test_data = match (&test, &held_out) {
                (Some(t), _) => Some(
                    command::load_data_for(&graph, t, test_rows.as_deref(), "--test-rows")
                        .map_err(sourced)?,
                ),
                (None, Some((d, _))) => Some(d.clone()),
                (None, None) => None,
            };
            let (overrides, mut settings) = command::split_sets(&graph, &set)?;
            if let Some(k) = chain_offset {
                settings.push(("chain_offset".to_string(), k.to_string()));
            }
            let bound = crate::bind(graph, &train, &overrides).map_err(sourced)?;
            // The table is bound; its memory goes back before the run.
            drop(train);
            if let Some((_, s)) = &held_out {
                out(&format!(
                    "split: {} training rows, {} test rows{}\n",
                    s.train_rows,
                    s.test_rows,
                    s.shuffle
                        .map_or(String::new(), |k| format!(" (shuffled with seed {k})"))
                ))?;
            }
            if let Some(p) = &split_out {
                out(&format!("rows of the split written to {}\n", p.display()))?;
            }
            for line in command::label_lines(&bound) {
                out(&format!("{line}\n"))?;
            }
            // A signal stops the run at its next check and keeps the result
            // so far (the draw files hold the draws it keeps).
            let cancel = stop_on_signals();
            let flag = cancel.clone();
            let was_cancelled = move || flag.load(std::sync::atomic::Ordering::SeqCst);
            let wrote_csv = csv.is_some();
            let mut options = RunOptions {
                engine,
                settings,
                seed,
                test: test_data,
                cancel: Some(cancel.clone()),
                csv,
                model_name: model.file_stem().map(|s| s.to_string_lossy().into_owned()),
                ..Default::default()
            };
            if !quiet {
                options.observers.push(Box::new(BarProgress::new()));
            }
            let plot_options = crate::infer::fit::PlotOptions {
                params: plot_params
                    .as_deref()
                    .map(crate::output::plot_params::split_names),
            };
            crate::api::check_plot_options(&bound, &options, &plot_options).map_err(sourced)?;
            // What the engine says before it starts (a long run's estimate).
            for w in crate::api::preflight(&bound, &options).map_err(sourced)? {
                let _ = writeln!(std::io::stderr(), "warning: {w}");
            }
            let cfg =
                crate::engine_config(&bound.graph, &options).map_err(|e| sourced(e.into()))?;
            if save.is_some()
                && !crate::infer::registry::find(&cfg.name).is_some_and(|d| d.accepts().saves_fits)
            {
                return Err(Error::new(
                    ErrorKind::Unsupported,
                    format!(
                        "--save: the `{}` engine makes no predictions, so it has no fit to save",
                        cfg.name
                    ),
                )
                .into());
            }
            let crate::Outcome {
                fit,
                predictions_stopped,
            } = match crate::run_outcome(&bound, options) {
                Ok(o) => o,
                Err(e) if was_cancelled() => return Err(interrupted(Some(e), wrote_csv, true)),
                Err(e) => return Err(sourced(e)),
            };
            // What the run kept is written in full: the flag is cleared for
            // the outputs (a plot predicts along its axis), and a signal
            // during them stops them.
            let stopped = was_cancelled();
            cancel.store(false, std::sync::atomic::Ordering::SeqCst);
            let mut report = fit.report();
            if predictions_stopped.is_some() {
                report.warning(
                    "the predictions at the test data were not made: the run was interrupted",
                );
            }
            out(&report.text())?;
            let mut files = vec![
                ("model", serde_json::json!(src.name)),
                (
                    "data",
                    serde_json::json!(data.as_ref().map(|d| d.display().to_string())),
                ),
            ];
            if let Some(s) = seed {
                files.push(("seed", serde_json::json!(s)));
            }
            if let Some((_, s)) = &held_out {
                files.push(("split", serde_json::json!(s)));
            }
            if !bound.labels.is_empty() {
                files.push(("labels", command::labels_json(&bound)));
            }
            if stopped {
                files.push(("interrupted", serde_json::json!(true)));
            }
            write_outputs(
                fit.as_ref(),
                &report,
                json.as_deref(),
                plot.as_deref(),
                &plot_options,
                &files,
            )?;
            if let Some(path) = &save {
                let j = fit
                    .saved(&src.name, &cfg)
                    .ok_or_else(|| Error::internal("a fit that cannot be saved"))??;
                write_json_as(path, &j, false)?;
                out(&format!("fit saved to {}\n", path.display()))?;
            }
            if stopped || was_cancelled() {
                return Err(interrupted(None, wrote_csv, false));
            }
            Ok(())
        }
    }
}

/// One point of a run's ELBO trace: the step, the seconds since the start
/// (svi runs), the ELBO.
struct TracePoint {
    step: f64,
    seconds: Option<f64>,
    elbo: f64,
}

/// `tempest plot-trace`: read the runs' JSON and overlay their ELBO traces
/// (against seconds when every run recorded them, else by step).
fn plot_trace(
    out_path: &Path,
    runs: &[PathBuf],
    gap: bool,
    title: Option<String>,
) -> Result<(), Failure> {
    check_png("--out", out_path)?;
    let mut series = Vec::new();
    for path in runs {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!("cannot read run file `{}`: {e}", path.display()),
            )
        })?;
        let j: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            Error::new(
                ErrorKind::Data,
                format!("`{}` is not valid JSON: {e}", path.display()),
            )
            .with_note("plot-trace reads the files written by `tempest run ... --json OUT`")
        })?;
        let trace = j
            .get("elbo_trace")
            .and_then(|t| t.as_array())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Data,
                    format!("`{}` has no `elbo_trace` array", path.display()),
                )
                .with_note(format!(
                    "write one with `tempest run ... --json OUT` and a variational engine ({})",
                    variational_engines()
                ))
            })?;
        // NaN and infinities are written as null; keep their place in the
        // trace. An svi run's entries are objects with step, seconds, elbo.
        let points: Vec<TracePoint> = trace
            .iter()
            .enumerate()
            .map(|(i, v)| match v.as_object() {
                Some(o) => {
                    let num = |k: &str| o.get(k).and_then(|x| x.as_f64()).unwrap_or(f64::NAN);
                    TracePoint {
                        step: num("step"),
                        seconds: Some(num("seconds")),
                        elbo: num("elbo"),
                    }
                }
                None => TracePoint {
                    step: i as f64,
                    seconds: None,
                    elbo: v.as_f64().unwrap_or(f64::NAN),
                },
            })
            .collect();
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| path.display().to_string());
        let label = match j.get("engine").and_then(|e| e.as_str()) {
            Some(e) => format!("{stem} ({e})"),
            None => stem,
        };
        series.push((label, points));
    }
    // Against seconds when every run has times (svi), else by step.
    let timed = series
        .iter()
        .all(|(_, p)| !p.is_empty() && p.iter().all(|q| q.seconds.is_some()));
    let xy: Vec<(String, Vec<(f64, f64)>)> = series
        .into_iter()
        .map(|(l, p)| {
            let pts = p
                .iter()
                .map(|q| {
                    let x = if timed {
                        q.seconds.unwrap_or(f64::NAN)
                    } else {
                        q.step
                    };
                    (x, q.elbo)
                })
                .collect();
            (l, pts)
        })
        .collect();
    let (default_title, y_label) = if gap {
        (
            "convergence: distance to the best ELBO",
            "log₁₀(best ELBO − ELBO)",
        )
    } else {
        ("ELBO by step", "ELBO")
    };
    let title = title.unwrap_or_else(|| {
        if timed {
            default_title.replace("by step", "against time")
        } else {
            default_title.to_string()
        }
    });
    let x_label = timed.then_some("seconds");
    #[cfg(feature = "plot")]
    crate::output::plot::traces_xy(out_path, &xy, &title, x_label, y_label, gap)?;
    // Without figures `check_png` refused the command before any reading.
    #[cfg(not(feature = "plot"))]
    let _ = (xy, title, x_label, y_label, gap);
    out(&format!("plot written to {}\n", out_path.display()))?;
    Ok(())
}

/// A fit's `--json` file (its `report` with `fields` added) and `--plot`
/// figure, when asked for; each file appears whole or not at all.
fn write_outputs(
    fit: &dyn crate::Fit,
    report: &crate::output::report::Report,
    json: Option<&Path>,
    plot: Option<&Path>,
    plot_options: &crate::infer::fit::PlotOptions,
    fields: &[(&str, serde_json::Value)],
) -> Result<(), Failure> {
    if let Some(path) = json {
        let mut j = report.json();
        for (k, v) in fields {
            j[*k] = v.clone();
        }
        write_json(path, &j)?;
    }
    if let Some(path) = plot {
        // Drawn beside the path under a temporary name, then renamed.
        let tmp = crate::output::atomic::temporary_like(path);
        let written = fit.plot_with(&tmp, plot_options).map_err(|e| {
            if e.is_interrupted() {
                interrupted(Some(e.into()), false, false)
            } else {
                e.into()
            }
        })?;
        for w in written {
            let to = crate::output::atomic::final_name(&tmp, path, &w);
            std::fs::rename(&w, &to).map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot write `{}`: {e}", to.display()),
                )
            })?;
            out(&format!("plot written to {}\n", to.display()))?;
        }
    }
    Ok(())
}

fn write_json(path: &Path, j: &serde_json::Value) -> Result<(), Failure> {
    write_json_as(path, j, true)
}

/// Write JSON to `path`, indented for reading or compact (saved fits,
/// whose matrices would triple in size indented).
fn write_json_as(path: &Path, j: &serde_json::Value, pretty: bool) -> Result<(), Failure> {
    let text = if pretty {
        serde_json::to_string_pretty(j)
    } else {
        serde_json::to_string(j)
    }
    .context("serialising results")
    .map_err(|e| Error::internal(e.to_string()))?;
    crate::output::atomic::write_whole(path, (text + "\n").as_bytes()).map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cannot write `{}`: {e}", path.display()),
        )
    })?;
    Ok(())
}
