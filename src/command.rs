//! The pieces of the command line that are useful from Rust too: reading
//! `--rows`, loading data files, splitting `--set` values, and the `check`
//! command as one call (used by the golden tests, so they see exactly what
//! the command line prints).

use crate::data::Data;
use crate::error::{Error, ErrorKind, Errors};
use crate::ir::bind::{Bound, Overrides};
use crate::ir::graph::Graph;
use crate::model::custom::Registry;
use crate::syntax::diagnostics::SourceFile;
use std::path::Path;

/// Read `A..B` (inclusive, 0-based rows); `flag` names the option in errors.
pub fn parse_rows(flag: &str, text: &str) -> Result<(usize, usize), Error> {
    let bad = || {
        Error::new(
            ErrorKind::Settings,
            format!(
                "{flag} {text}: expected two row numbers `A..B` (inclusive, 0-based), e.g. `0..299`, or `COLUMN=VALUE`, e.g. `is_test=0`"
            ),
        )
    };
    let (a, b) = text.split_once("..").ok_or_else(bad)?;
    let a: usize = a.trim().parse().map_err(|_| bad())?;
    let b: usize = b
        .trim()
        .trim_start_matches('=')
        .parse()
        .map_err(|_| bad())?;
    if a > b {
        return Err(bad());
    }
    Ok((a, b))
}

/// Whether every `data` declaration of `graph` has its value in the model
/// (`J : int = 85`), so that no data file is needed.
fn data_all_given(graph: &crate::ir::Graph) -> bool {
    graph
        .data
        .iter()
        .all(|d| matches!(d.source, crate::ir::graph::DataSource::Value))
}

/// The data of a run without `--data`: nothing, for a model that declares
/// no data or only constants; an error naming the first declaration that
/// needs the data otherwise (and for `--rows` without a file).
pub fn no_data(graph: &crate::ir::Graph, rows: bool) -> Result<Data, Errors> {
    let needs =
        |d: &&crate::ir::graph::DataNode| !matches!(d.source, crate::ir::graph::DataSource::Value);
    if let Some(d) = graph.data.iter().find(needs) {
        let names: Vec<String> = graph
            .data
            .iter()
            .filter(needs)
            .map(|d| format!("`{}`", d.name))
            .collect();
        return Err(Error::at(
            ErrorKind::Data,
            d.span,
            format!(
                "the model declares data ({}); give the file with `--data FILE`",
                names.join(", ")
            ),
        )
        .with_label("declared here")
        .into());
    }
    if rows {
        return Err(Error::new(
            ErrorKind::Settings,
            "`--rows` selects rows of `--data`, which is not given",
        )
        .into());
    }
    Ok(Data::Json(crate::data::JsonData {
        file: "(no data)".to_string(),
        map: Default::default(),
    }))
}

/// Read a data file, keeping only `rows` when given: `A..B` (inclusive,
/// 0-based), or `COLUMN=VALUE` (the rows whose column has that value, e.g.
/// `is_test=0`). Every column of a CSV file is read; [`load_data_for`]
/// reads only those a model uses.
pub fn load_data(path: &Path, rows: Option<&str>, flag: &str) -> Result<Data, Errors> {
    select(Data::read(path)?, rows, flag)
}

/// [`load_data`] for the model `graph`: of a CSV file, only the columns
/// its data declarations use (and the column of `--rows COLUMN=VALUE`) are
/// read ([`columns_used`]).
pub fn load_data_for(
    graph: &Graph,
    path: &Path,
    rows: Option<&str>,
    flag: &str,
) -> Result<Data, Errors> {
    let filter = rows
        .filter(|r| !r.contains("..") && r.contains('='))
        .and_then(|r| r.split_once('='))
        .map(|(c, _)| c.trim().to_string());
    let used = columns_used(graph);
    let keep = |h: &str| used(h) || filter.as_deref() == Some(h);
    select(Data::read_columns(path, &keep)?, rows, flag)
}

/// Which CSV columns the data declarations of `graph` use: those named
/// (`column("t")`, `columns("a", "b")`, a declaration's own name), every
/// column but the excluded ones for `columns(except = [...])`, and every
/// column for a matrix that takes the columns no other declaration
/// claims.
pub fn columns_used(graph: &Graph) -> impl Fn(&str) -> bool + use<> {
    use crate::ir::graph::DataSource;
    use crate::ir::types::Ty;
    let mut named = std::collections::BTreeSet::new();
    let mut excepts: Vec<Vec<String>> = Vec::new();
    let mut everything = false;
    for d in &graph.data {
        match &d.source {
            DataSource::Value => {}
            DataSource::Columns(cs) => named.extend(cs.iter().cloned()),
            DataSource::Except(ex) => excepts.push(ex.clone()),
            DataSource::ByName if matches!(d.ty, Ty::Matrix(..)) => everything = true,
            DataSource::ByName => {
                named.insert(d.name.clone());
            }
        }
    }
    move |h: &str| {
        everything || named.contains(h) || excepts.iter().any(|ex| !ex.iter().any(|e| e == h))
    }
}

/// Keep the rows `rows` selects of `d` (see [`load_data`]).
fn select(d: Data, rows: Option<&str>, flag: &str) -> Result<Data, Errors> {
    match rows {
        Some(r) if !r.contains("..") && r.contains('=') => {
            let (col, value) = r.split_once('=').unwrap_or((r, ""));
            // The table's message, prefixed with the option as written.
            d.filter_rows(col.trim(), value).map_err(|e| {
                Errors(
                    e.0.into_iter()
                        .map(|mut x| {
                            x.message = format!("{flag} {r}: {}", x.message);
                            x
                        })
                        .collect(),
                )
            })
        }
        Some(r) => {
            let (a, b) = parse_rows(flag, r)?;
            d.select_rows(a, b)
        }
        None => Ok(d),
    }
}

/// How `--split F --shuffle SEED` divided the rows.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Split {
    /// The fraction of rows for training.
    pub fraction: f64,
    /// The seed the rows were shuffled with, if any.
    pub shuffle: Option<u64>,
    /// Training rows.
    pub train_rows: usize,
    /// Test rows.
    pub test_rows: usize,
    /// The test rows' numbers, in the order they were predicted at (CSV
    /// rows numbered as data errors number them: 0 for the first row after
    /// the header).
    pub test_row_numbers: Vec<usize>,
}

/// `--split F` (with `--shuffle SEED`): the rows of a CSV file (after
/// `--rows`) shuffled when a seed is given, the first round(F·N) for
/// training and the rest for testing (each part keeps the rows' original
/// numbers for messages). `--shuffle` alone shuffles the training rows.
/// The same seed gives the same split on every machine.
pub fn split_data(
    data: Data,
    fraction: Option<f64>,
    shuffle: Option<u64>,
) -> Result<(Data, Option<(Data, Split)>), Errors> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    if fraction.is_none() && shuffle.is_none() {
        return Ok((data, None));
    }
    let Some(n) = data.nrows() else {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--split and --shuffle apply to CSV files, not to {}",
                data.file()
            ),
        )
        .into());
    };
    let mut order: Vec<usize> = (0..n).collect();
    if let Some(seed) = shuffle {
        order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    }
    let Some(f) = fraction else {
        return Ok((data.take_rows(&order)?, None));
    };
    if !(f > 0.0 && f < 1.0) {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--split {}: expected the training fraction, a number between 0 and 1 (exclusive), e.g. 0.8",
                crate::error::num(f)
            ),
        )
        .into());
    }
    let k = (f * n as f64).round() as usize;
    if k == 0 || k == n {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--split {}: {n} row{} give{} {k} training and {} test rows; both parts need at least one",
                crate::error::num(f),
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" },
                n - k
            ),
        )
        .into());
    }
    let test = data.clone().take_rows(&order[k..])?;
    let split = Split {
        fraction: f,
        shuffle,
        train_rows: k,
        test_rows: n - k,
        test_row_numbers: test.row_numbers().unwrap_or_default().to_vec(),
    };
    Ok((data.take_rows(&order[..k])?, Some((test, split))))
}

/// `--split-out FILE`: the rows a run trains and tests on, as CSV with
/// the header `row,part`, one line per row: its number (as data errors
/// number rows: 0 for the first row after the header) and `train` or
/// `test`, the training rows first, each part in the order the run used
/// it. `train` and `test` are CSV data (an error names other sources).
pub fn split_rows_csv(train: &Data, test: Option<&Data>) -> Result<String, Error> {
    fn rows(d: &Data) -> Result<&[usize], Error> {
        d.row_numbers().ok_or_else(|| {
            Error::new(
                ErrorKind::Settings,
                format!(
                    "--split-out writes row numbers of CSV files, not of {}",
                    d.file()
                ),
            )
        })
    }
    let mut out = String::from("row,part\n");
    for (d, part) in std::iter::once((train, "train")).chain(test.map(|t| (t, "test"))) {
        for r in rows(d)? {
            out.push_str(&format!("{r},{part}\n"));
        }
    }
    Ok(out)
}

/// The most labels [`label_lines`] lists one by one.
pub const LABELS_SHOWN: usize = 30;

/// The class labels read from text by binding, one line each (the first
/// [`LABELS_SHOWN`] of each):
/// ``labels of `y`: 0 = a, 1 = b``.
pub fn label_lines(bound: &Bound) -> Vec<String> {
    bound
        .labels
        .iter()
        .map(|(&i, ls)| {
            let pairs: Vec<String> = ls
                .iter()
                .take(LABELS_SHOWN)
                .enumerate()
                .map(|(k, l)| format!("{k} = {l}"))
                .collect();
            let more = if ls.len() > LABELS_SHOWN {
                format!(", … ({} labels; all of them in --json output)", ls.len())
            } else {
                String::new()
            };
            format!(
                "labels of `{}`: {}{more}",
                bound.graph.data[i].name,
                pairs.join(", ")
            )
        })
        .collect()
}

/// The class labels as JSON: `{"y": ["a", "b"]}`.
pub fn labels_json(bound: &Bound) -> serde_json::Value {
    serde_json::Value::Object(
        bound
            .labels
            .iter()
            .map(|(&i, ls)| (bound.graph.data[i].name.clone(), serde_json::json!(ls)))
            .collect(),
    )
}

/// Split `NAME=VALUE` pairs into model overrides (data scalars, hypers and
/// `temperature`) and engine settings.
pub fn split_sets(
    graph: &Graph,
    sets: &[String],
) -> Result<(Overrides, Vec<(String, String)>), Error> {
    let mut model = Overrides::default();
    let mut engine = Vec::new();
    for s in sets {
        let (k, v) = s.split_once('=').ok_or_else(|| {
            Error::new(
                ErrorKind::Settings,
                format!("--set {s}: expected NAME=VALUE"),
            )
        })?;
        let (k, v) = (k.trim().to_string(), v.trim().to_string());
        if graph.data_index(&k).is_some() || graph.hyper_index(&k).is_some() || k == "temperature" {
            model.values.push((k, v));
        } else {
            engine.push((k, v));
        }
    }
    Ok((model, engine))
}

/// Why a command failed: the errors, whether they point into the model
/// source (errors about command-line options do not), and the exit status.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong (may be empty when there is nothing to say, e.g.
    /// standard output was closed by the reader).
    pub errors: Errors,
    /// Whether to render the errors against the model source.
    pub in_source: bool,
    /// The process's exit status: 1 for errors, 130 after Ctrl-C, 141 when
    /// standard output was closed.
    pub code: u8,
}

impl From<Errors> for Failure {
    fn from(errors: Errors) -> Self {
        Failure {
            errors,
            in_source: false,
            code: 1,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            errors: e.into(),
            in_source: false,
            code: 1,
        }
    }
}

fn sourced(errors: Errors) -> Failure {
    Failure {
        errors,
        in_source: true,
        code: 1,
    }
}

/// Check before a run that an output file can be written: its folder
/// exists, it is not a folder itself, and it can be opened for writing (a
/// file created by the check is removed again). `flag` names the option in
/// the error, e.g. `--json`.
pub fn check_output_path(flag: &str, path: &Path) -> Result<(), Error> {
    let shown = path.display();
    let bad = |why: String| {
        Error::new(ErrorKind::Io, format!("{flag} {shown}: {why}"))
            .with_note("output paths are checked before the run starts")
    };
    if path.as_os_str().is_empty() {
        return Err(bad("the path is empty".into()));
    }
    if path.is_dir() {
        return Err(bad("this is a folder; give a file name".into()));
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(bad(format!(
            "the folder `{}` does not exist",
            parent.display()
        )));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| bad(format!("cannot be written: {e}")))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Parse, check and lower a model source with the kernels and likelihoods of `registry`.
pub fn compile(src: &SourceFile, registry: &Registry) -> Result<Graph, Failure> {
    crate::parse(&src.text)
        .and_then(|p| crate::check(&p, registry))
        .and_then(crate::lower)
        .map_err(sourced)
}

/// `tempest check`: compile the model, then (with a data file) read the
/// data, bind it and validate engine settings given with `--set`. Returns
/// the graph and, with data, the bound model.
pub fn check(
    src: &SourceFile,
    data: Option<&Path>,
    rows: Option<&str>,
    sets: &[String],
) -> Result<(Graph, Option<Bound>), Failure> {
    check_with(&Registry::default(), src, data, rows, sets)
}

/// [`check`] with the likelihoods and kernels of `registry`.
pub fn check_with(
    registry: &Registry,
    src: &SourceFile,
    data: Option<&Path>,
    rows: Option<&str>,
    sets: &[String],
) -> Result<(Graph, Option<Bound>), Failure> {
    let graph = compile(src, registry)?;
    let (overrides, engine_sets) = split_sets(&graph, sets)?;
    if !engine_sets.is_empty() {
        let options = crate::RunOptions {
            settings: engine_sets.clone(),
            ..Default::default()
        };
        crate::engine_config(&graph, &options).map_err(|e| sourced(e.into()))?;
    }
    let data = match data {
        Some(path) => load_data_for(&graph, path, rows, "--rows").map_err(sourced)?,
        // A model without data is bound and its engine built all the same.
        None if data_all_given(&graph) => no_data(&graph, rows.is_some()).map_err(sourced)?,
        None => return Ok((graph, None)),
    };
    let bound = crate::bind(graph.clone(), &data, &overrides).map_err(sourced)?;
    drop(data);
    // The engine of the `infer` block is built (not run), so that a model
    // it cannot run fails here as at `run` (without a block the engine is
    // chosen at `run`).
    if graph.infer.is_some() {
        let options = crate::RunOptions {
            settings: engine_sets.clone(),
            ..Default::default()
        };
        crate::api::prepare(&bound, &options).map_err(sourced)?;
    }
    Ok((graph, Some(bound)))
}
