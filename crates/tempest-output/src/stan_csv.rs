//! Stan CSV files: the draws of an MCMC chain in the format CmdStan writes,
//! so that ArviZ (`from_cmdstan`), cmdstanpy and `pandas.read_csv(path,
//! comment='#')` read them.
//!
//! A file is, in order:
//!
//! ```text
//! # tempest_version = 0.1.0           configuration, as `# key = value`
//! # model = gp_regression             comment lines mirroring CmdStan's
//! # method = sample (Default)
//! # ...
//! lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,alpha,beta.1,beta.2
//! # Adaptation terminated             after warmup
//! # Step size = 0.734
//! # Diagonal elements of inverse mass matrix:
//! # 1.2, 0.5, 0.9
//! -7.1,0.93,0.734,2,3,0,8.2,0.41,1.5,-0.2      one line per draw
//! ...
//! #
//! #  Elapsed Time: 0.5 seconds (Warm-up)      at the end
//! #                0.9 seconds (Sampling)
//! #                1.4 seconds (Total)
//! #
//! ```
//!
//! [`StanCsvWriter`] writes a file draw by draw at `PATH.partial` (locked, so
//! that a second run writing the same file fails at once; see
//! [`crate::atomic`]) and renames it to `PATH` when the chain ends.
//! Every draw is handed to the operating system before
//! [`StanCsvWriter::write_draw`] returns, so a crash or a kill later leaves
//! all earlier draws readable in `PATH.partial`. A run stopped by Ctrl-C or
//! SIGTERM cuts its files to the draws its summary keeps
//! ([`StanCsvWriter::keep_first`]) and renames them as usual.
//! [`read_stan_csv`] reads such a file back, ignoring a partially written
//! last line.
//!
//! Numbers are written with the fewest digits that read back to the same
//! `f64` (bit for bit), as `nan`, `inf` and `-inf` where not finite, and in
//! exponent notation (`1.5e-7`) when very small or very large.

use crate::atomic::PartialFile;
use crate::error::{Error, ErrorKind};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
pub use tempest_infer::sink::SamplerStats;
use tempest_infer::sink::{ChainRun, DrawSink, DrawSinks, RunHeader};

/// The sampler columns that come first in every Stan CSV file of NUTS draws,
/// in CmdStan's order.
pub const SAMPLER_COLUMNS: [&str; 7] = [
    "lp__",
    "accept_stat__",
    "stepsize__",
    "treedepth__",
    "n_leapfrog__",
    "divergent__",
    "energy__",
];

/// The comment line CmdStan writes when warmup (adaptation) ends.
const ADAPTATION_TERMINATED: &str = "# Adaptation terminated";
/// The comment line announcing the diagonal inverse metric on the next line.
const DIAG_METRIC: &str = "# Diagonal elements of inverse mass matrix:";
/// CmdStan's title of the timing block; the later lines are indented by its
/// width.
const ELAPSED_TITLE: &str = " Elapsed Time: ";

/// The run configuration written as comment lines at the top of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct StanCsvHeader {
    /// The model's name (CmdStan: the executable's name), e.g. the model
    /// file's stem.
    pub model: String,
    /// The chain's id (CmdStan's `id`, 1-based by convention).
    pub chain_id: usize,
    /// The random seed of the run.
    pub seed: u64,
    /// Number of warmup iterations (not saved in the file).
    pub warmup: usize,
    /// Number of saved draws after warmup.
    pub draws: usize,
    /// CmdStan's `algorithm` (`hmc`, or the sampler's own name such as
    /// `mala`).
    pub algorithm: String,
    /// CmdStan's `engine` of the algorithm (`nuts`, `static`), written with
    /// `max_depth` (when given) and a diagonal metric; `None`: the
    /// algorithm alone.
    pub engine: Option<String>,
    /// The target acceptance rate of step-size adaptation.
    pub adapt_delta: f64,
    /// The largest tree depth, for an engine that builds trees (NUTS).
    pub max_depth: Option<usize>,
    /// The data file of the run (may be empty).
    pub data_file: String,
    /// The version of tempest that wrote the file.
    pub tempest_version: String,
    /// tempest's own `key = value` pairs, written after CmdStan's under
    /// `# tempest` (the posterior's fingerprint and the sampler settings
    /// CmdStan's keys do not cover), so that `tempest summary` can tell
    /// whether files are chains of one run.
    pub tempest: Vec<(String, String)>,
}

impl From<&RunHeader> for StanCsvHeader {
    /// The header of a chain's file: the run as the sampler describes it,
    /// the sampler named as CmdStan names it.
    fn from(h: &RunHeader) -> StanCsvHeader {
        StanCsvHeader {
            model: h.model.clone(),
            chain_id: h.chain_id,
            seed: h.seed,
            warmup: h.warmup,
            draws: h.draws,
            algorithm: h.cmdstan.algorithm.to_string(),
            engine: h.cmdstan.engine.map(String::from),
            adapt_delta: h.adapt_delta,
            max_depth: h.max_depth,
            data_file: h.data_file.clone(),
            tempest_version: h.tempest_version.clone(),
            tempest: h.tempest.clone(),
        }
    }
}

/// The names the language uses for the elements of a parameter of the
/// given shape, in the same order as [`stan_names`]: `name` for a scalar,
/// `name[0]`, `name[1]`, ... for a vector, `name[i, j]` for a matrix
/// (0-based, as the model indexes them).
pub fn language_names(name: &str, shape: &[usize]) -> Vec<String> {
    element_names(shape, |index| {
        let parts: Vec<String> = index.iter().map(usize::to_string).collect();
        format!("{name}[{}]", parts.join(", "))
    })
    .unwrap_or_else(|| vec![name.to_string()])
}

/// The column names Stan uses for a parameter of the given shape: `name` for
/// a scalar (empty shape), `name.1`, `name.2`, ... for a vector, and
/// `name.i.j` for a matrix or array, with 1-based indices in column-major
/// order (the first index varies fastest: `A.1.1, A.2.1, A.1.2, ...`). A
/// shape with a zero extent has no columns.
pub fn stan_names(name: &str, shape: &[usize]) -> Vec<String> {
    element_names(shape, |index| {
        let mut s = String::with_capacity(name.len() + 4 * index.len());
        s.push_str(name);
        for i in index {
            let _ = write!(s, ".{}", i + 1);
        }
        s
    })
    .unwrap_or_else(|| vec![name.to_string()])
}

/// `name_of(index)` for every 0-based index of `shape`, column-major (the
/// first index varies fastest); `None` for a scalar (empty shape).
fn element_names(shape: &[usize], name_of: impl Fn(&[usize]) -> String) -> Option<Vec<String>> {
    if shape.is_empty() {
        return None;
    }
    let total: usize = shape.iter().product();
    let mut names = Vec::with_capacity(total);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..total {
        names.push(name_of(&index));
        for (i, extent) in index.iter_mut().zip(shape) {
            *i += 1;
            if *i < *extent {
                break;
            }
            *i = 0;
        }
    }
    Some(names)
}

/// Append `x` to `out` as Stan writes numbers: the shortest text that reads
/// back to the same `f64`; `nan`, `inf`, `-inf` where not finite.
fn push_num(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("nan");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "inf" } else { "-inf" });
    } else {
        let a = x.abs();
        // Plain decimals in the usual range; exponent notation elsewhere so
        // that 1e-300 does not take 300 characters.
        if a == 0.0 || (1e-5..1e16).contains(&a) {
            let _ = write!(out, "{x}");
        } else {
            let _ = write!(out, "{x:e}");
        }
    }
}

/// One number formatted as [`push_num`] does.
fn num(x: f64) -> String {
    let mut s = String::new();
    push_num(&mut s, x);
    s
}

/// A comment value on one line: line breaks would end the comment.
fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// Parse one number as Stan writes it (also `nan`, `-nan`, `inf`,
/// `Infinity`, ... in any case).
fn parse_num(s: &str) -> Option<f64> {
    let t = s.trim();
    if let Ok(x) = t.parse::<f64>() {
        return Some(x);
    }
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let v = match body.to_ascii_lowercase().as_str() {
        "nan" => f64::NAN,
        "inf" | "infinity" => f64::INFINITY,
        _ => return None,
    };
    Some(if neg { -v } else { v })
}

fn write_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot write the Stan CSV file `{}`: {e}", path.display()),
    )
}

fn read_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot read the Stan CSV file `{}`: {e}", path.display()),
    )
}

/// Writes one chain's draws to a Stan CSV file, one line per draw.
///
/// Lines are written whole and unbuffered to `PATH.partial`: when a method
/// returns, its text has been handed to the operating system, so it
/// survives a crash or a kill of the process (not a power loss: nothing is
/// `fsync`ed). [`StanCsvWriter::finish`] renames the file to `PATH`.
#[derive(Debug)]
pub struct StanCsvWriter {
    file: PartialFile,
    path: PathBuf,
    n_params: usize,
    draws_written: usize,
    line: String,
}

impl StanCsvWriter {
    /// Create (or empty) the file at `path.partial`, lock it, and write the
    /// configuration comments and the column header: the seven
    /// [`SAMPLER_COLUMNS`], then `param_names` (see [`stan_names`]).
    ///
    /// Errors: [`ErrorKind::Io`] naming the file when it cannot be written
    /// or another process is writing it; [`ErrorKind::Internal`] when a
    /// parameter name is empty or holds a comma, quote or line break.
    pub fn create(
        path: &Path,
        header: &StanCsvHeader,
        param_names: &[String],
    ) -> Result<Self, Error> {
        if let Some(bad) = param_names
            .iter()
            .find(|n| n.is_empty() || n.contains([',', '"', '\n', '\r']))
        {
            return Err(Error::internal(format!(
                "cannot write the Stan CSV file `{}`: the column name `{bad}` is empty or \
                 holds a comma, quote or line break",
                path.display()
            )));
        }
        let mut text = String::with_capacity(1024);
        let h = header;
        let mut line = |s: String| {
            text.push_str(&s);
            text.push('\n');
        };
        line(format!(
            "# tempest_version = {}",
            one_line(&h.tempest_version)
        ));
        line(format!("# model = {}", one_line(&h.model)));
        line("# method = sample (Default)".into());
        line("#   sample".into());
        line(format!("#     num_samples = {}", h.draws));
        line(format!("#     num_warmup = {}", h.warmup));
        line("#     save_warmup = 0".into());
        line("#     thin = 1".into());
        line("#     adapt".into());
        line(format!("#       engaged = {}", u8::from(h.warmup > 0)));
        line(format!("#       delta = {}", num(h.adapt_delta)));
        let algorithm = one_line(&h.algorithm);
        line(format!("#     algorithm = {algorithm}"));
        if let Some(engine) = &h.engine {
            let engine = one_line(engine);
            line(format!("#       {algorithm}"));
            line(format!("#         engine = {engine}"));
            if let Some(depth) = h.max_depth {
                line(format!("#           {engine}"));
                line(format!("#             max_depth = {depth}"));
            }
            line("#         metric = diag_e".into());
        }
        line("#     num_chains = 1".into());
        line(format!("# id = {}", h.chain_id));
        line("# data".into());
        line(format!("#   file = {}", one_line(&h.data_file)));
        line("# random".into());
        line(format!("#   seed = {}", h.seed));
        if !h.tempest.is_empty() {
            line("# tempest".into());
            for (k, v) in &h.tempest {
                line(format!("#   {} = {}", one_line(k), one_line(v)));
            }
        }
        let mut columns: Vec<&str> = SAMPLER_COLUMNS.to_vec();
        columns.extend(param_names.iter().map(String::as_str));
        line(columns.join(","));

        let mut file = PartialFile::create(path).map_err(|e| write_err(path, e))?;
        file.file()
            .write_all(text.as_bytes())
            .map_err(|e| write_err(path, e))?;
        Ok(StanCsvWriter {
            file,
            path: path.to_path_buf(),
            n_params: param_names.len(),
            draws_written: 0,
            line: String::with_capacity(32 * (SAMPLER_COLUMNS.len() + param_names.len())),
        })
    }

    /// The file's final path (it is written at `path.partial` until
    /// [`StanCsvWriter::finish`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path the file is written at until [`StanCsvWriter::finish`].
    pub fn partial_path(&self) -> &Path {
        self.file.partial_path()
    }

    /// How many draws have been written so far.
    pub fn draws_written(&self) -> usize {
        self.draws_written
    }

    /// Write the adaptation result as CmdStan does after warmup:
    /// `# Adaptation terminated`, `# Step size = ...`, and, when `inv_metric`
    /// is not empty, `# Diagonal elements of inverse mass matrix:` followed
    /// by the elements on one line. Call it once, before the first draw.
    pub fn write_adaptation(&mut self, step_size: f64, inv_metric: &[f64]) -> Result<(), Error> {
        let mut text = String::with_capacity(64 + 24 * inv_metric.len());
        text.push_str(ADAPTATION_TERMINATED);
        text.push_str("\n# Step size = ");
        push_num(&mut text, step_size);
        text.push('\n');
        if !inv_metric.is_empty() {
            text.push_str(DIAG_METRIC);
            text.push_str("\n# ");
            for (i, &m) in inv_metric.iter().enumerate() {
                if i > 0 {
                    text.push_str(", ");
                }
                push_num(&mut text, m);
            }
            text.push('\n');
        }
        self.write_text(&text)
    }

    /// Write one draw: the sampler statistics, then `params` in the order of
    /// the column header. The line is on its way to disk when this returns.
    ///
    /// Errors: [`ErrorKind::Internal`] when `params` does not have one value
    /// per parameter column; [`ErrorKind::Io`] when writing fails.
    pub fn write_draw(&mut self, sampler: &SamplerStats, params: &[f64]) -> Result<(), Error> {
        if params.len() != self.n_params {
            return Err(Error::internal(format!(
                "cannot write a draw to the Stan CSV file `{}`: {} values for {} parameter columns",
                self.path.display(),
                params.len(),
                self.n_params
            )));
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        push_num(&mut line, sampler.lp);
        line.push(',');
        push_num(&mut line, sampler.accept_stat);
        line.push(',');
        push_num(&mut line, sampler.stepsize);
        let _ = write!(
            line,
            ",{},{},{},",
            sampler.treedepth,
            sampler.n_leapfrog,
            u8::from(sampler.divergent)
        );
        push_num(&mut line, sampler.energy);
        for &x in params {
            line.push(',');
            push_num(&mut line, x);
        }
        line.push('\n');
        let r = self.write_text(&line);
        self.line = line;
        r?;
        // With a draw in it, an unfinished file is worth keeping.
        if self.draws_written == 0 {
            self.file.keep();
        }
        self.draws_written += 1;
        Ok(())
    }

    /// Write CmdStan's timing comments and close the file:
    ///
    /// ```text
    /// #
    /// #  Elapsed Time: 0.5 seconds (Warm-up)
    /// #                0.9 seconds (Sampling)
    /// #                1.4 seconds (Total)
    /// #
    /// ```
    ///
    /// then rename the file from `path.partial` to `path`.
    pub fn finish(mut self, elapsed_warmup_s: f64, elapsed_sampling_s: f64) -> Result<(), Error> {
        let pad = " ".repeat(ELAPSED_TITLE.len());
        let text = format!(
            "# \n# {ELAPSED_TITLE}{} seconds (Warm-up)\n# {pad}{} seconds (Sampling)\n\
             # {pad}{} seconds (Total)\n# \n",
            num(elapsed_warmup_s),
            num(elapsed_sampling_s),
            num(elapsed_warmup_s + elapsed_sampling_s),
        );
        self.write_text(&text)?;
        self.file
            .file()
            .flush()
            .map_err(|e| write_err(&self.path, e))?;
        let path = self.path.clone();
        self.file.commit().map_err(|e| write_err(&path, e))
    }

    /// Keep only the first `kept` draws written (a run stopped early keeps
    /// the same number in every chain), and say so in a comment line
    /// `# Stopped early (REASON): K of N draws kept`.
    pub fn keep_first(&mut self, kept: usize, reason: &str) -> Result<(), Error> {
        if kept < self.draws_written {
            let end = end_of_draw(self.file.partial_path(), kept)
                .map_err(|e| write_err(&self.path, e))?;
            let f = self.file.file();
            f.set_len(end)
                .and_then(|_| f.seek(SeekFrom::Start(end)))
                .map_err(|e| write_err(&self.path, e))?;
            self.draws_written = kept;
        }
        self.write_text(&format!(
            "# Stopped early ({}): {kept} draws kept, as in every chain of the run\n",
            one_line(reason)
        ))
    }

    fn write_text(&mut self, text: &str) -> Result<(), Error> {
        self.file
            .file()
            .write_all(text.as_bytes())
            .map_err(|e| write_err(&self.path, e))
    }
}

/// The byte offset just past the `kept`-th draw line of the Stan CSV file
/// at `path` (past the column header when `kept` is 0, and the adaptation
/// comments that follow it).
fn end_of_draw(path: &Path, kept: usize) -> std::io::Result<u64> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(File::open(path)?);
    let (mut at, mut header, mut draws) = (0u64, false, 0usize);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line)?;
        if n == 0 || line.last() != Some(&b'\n') {
            return Ok(at);
        }
        let is_draw = !line.starts_with(b"#") && !line.trim_ascii().is_empty();
        if is_draw && !header {
            header = true;
        } else if is_draw {
            if draws == kept {
                return Ok(at);
            }
            draws += 1;
        }
        at += n as u64;
    }
}

/// Stan CSV files `PREFIX_<chain>.csv`, one line per draw, written as they
/// are made to `PREFIX_<chain>.csv.partial` (locked against another run
/// writing the same file) and renamed when the chain is over. A stopped
/// run's files keep the draws its fit keeps; a run that fails or is killed
/// leaves the `.partial` files, every complete line readable.
#[derive(Clone, Debug)]
pub struct StanCsvSinks {
    /// The path prefix.
    pub prefix: PathBuf,
}

impl DrawSinks for StanCsvSinks {
    fn open(&self, run: &ChainRun) -> Result<Box<dyn DrawSink>, Error> {
        let id = run.header.chain_id;
        let path = PathBuf::from(format!("{}_{id}.csv", self.prefix.display()));
        Ok(Box::new(StanCsvWriter::create(
            &path,
            &StanCsvHeader::from(&run.header),
            &run.columns,
        )?))
    }
}

impl DrawSink for StanCsvWriter {
    fn adapted(&mut self, step_size: f64, inv_metric: &[f64]) -> Result<(), Error> {
        self.write_adaptation(step_size, inv_metric)
    }
    fn draw(&mut self, stats: &SamplerStats, values: &[f64]) -> Result<(), Error> {
        self.write_draw(stats, values)
    }
    fn stopped(&mut self, kept: usize, reason: &str) -> Result<(), Error> {
        self.keep_first(kept, reason)
    }
    fn finish(self: Box<Self>, warmup_seconds: f64, sampling_seconds: f64) -> Result<(), Error> {
        StanCsvWriter::finish(*self, warmup_seconds, sampling_seconds)
    }
}

/// The contents of a Stan CSV file, as read by [`read_stan_csv`].
#[derive(Clone, Debug, PartialEq)]
pub struct StanCsv {
    /// The column names, in file order (the sampler's `__` columns first in
    /// files of NUTS draws).
    pub columns: Vec<String>,
    /// The draws, one row per data line in file order (warmup draws too, if
    /// the file saved them), each with one value per column.
    pub draws: Vec<Vec<f64>>,
    /// The line of each draw in the file (1-based, as `draws`).
    pub lines: Vec<usize>,
    /// Every comment line (starting with `#`), in file order, without the
    /// line ending.
    pub comments: Vec<String>,
    /// The adapted step size (`# Step size = ...`), if the file has one.
    pub step_size: Option<f64>,
    /// The diagonal of the adapted inverse metric, if the file has one.
    pub inv_metric: Option<Vec<f64>>,
    /// The warmup time in seconds (`Elapsed Time: ... (Warm-up)`), if any.
    pub elapsed_warmup_s: Option<f64>,
    /// The sampling time in seconds (`... seconds (Sampling)`), if any.
    pub elapsed_sampling_s: Option<f64>,
}

impl StanCsv {
    /// The position of the column called `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// All draws of the column called `name`.
    pub fn column(&self, name: &str) -> Option<Vec<f64>> {
        let j = self.column_index(name)?;
        Some(self.draws.iter().map(|row| row[j]).collect())
    }

    /// The names of the columns that are not sampler statistics (names not
    /// ending in `__`).
    pub fn param_names(&self) -> Vec<&str> {
        self.columns
            .iter()
            .map(String::as_str)
            .filter(|c| !c.ends_with("__"))
            .collect()
    }
}

/// The number before `seconds` on a CmdStan timing line, if it is one with
/// the given tag (`(Warm-up)` or `(Sampling)`).
fn parse_elapsed(comment: &str, tag: &str) -> Option<f64> {
    let body = comment.trim_start_matches('#').trim();
    let body = body.strip_suffix(tag)?.trim_end();
    let body = body.strip_suffix("seconds")?.trim_end();
    let body = body.strip_prefix("Elapsed Time:").unwrap_or(body);
    parse_num(body)
}

/// Read a Stan CSV file (written by [`StanCsvWriter`] or by CmdStan).
///
/// Text after the last line break is ignored: a file whose writer was
/// interrupted mid-line reads as the draws completed before. Empty lines are
/// skipped.
///
/// Errors ([`ErrorKind::Io`], naming the file): the file cannot be read, has
/// no column header, or a complete line is malformed (wrong number of
/// values, or a value that is not a number).
pub fn read_stan_csv(path: &Path) -> Result<StanCsv, Error> {
    let bytes = std::fs::read(path).map_err(|e| read_err(path, e))?;
    // Only complete lines count.
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &bytes[..0],
    };
    let text = std::str::from_utf8(complete).map_err(|e| read_err(path, e))?;

    let mut out = StanCsv {
        columns: Vec::new(),
        draws: Vec::new(),
        lines: Vec::new(),
        comments: Vec::new(),
        step_size: None,
        inv_metric: None,
        elapsed_warmup_s: None,
        elapsed_sampling_s: None,
    };
    let mut have_header = false;
    let mut metric_next = false;
    for (lineno, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let at = || format!("line {}", lineno + 1);
        if line.starts_with('#') {
            if metric_next {
                metric_next = false;
                let body = line.trim_start_matches('#').trim();
                let values = body
                    .split(',')
                    .map(parse_num)
                    .collect::<Option<Vec<f64>>>()
                    .ok_or_else(|| {
                        read_err(
                            path,
                            format!(
                                "{}: the inverse metric `{body}` is not a list of numbers",
                                at()
                            ),
                        )
                    })?;
                out.inv_metric = Some(values);
            } else if line.trim_end() == DIAG_METRIC {
                metric_next = true;
            } else if let Some(v) = line
                .trim_start_matches('#')
                .trim()
                .strip_prefix("Step size")
            {
                let v = v.trim_start().strip_prefix('=').unwrap_or(v);
                out.step_size = Some(parse_num(v).ok_or_else(|| {
                    read_err(
                        path,
                        format!("{}: the step size `{}` is not a number", at(), v.trim()),
                    )
                })?);
            } else if let Some(t) = parse_elapsed(line, "(Warm-up)") {
                out.elapsed_warmup_s = Some(t);
            } else if let Some(t) = parse_elapsed(line, "(Sampling)") {
                out.elapsed_sampling_s = Some(t);
            }
            out.comments.push(line.to_string());
            continue;
        }
        metric_next = false;
        if line.trim().is_empty() {
            continue;
        }
        if !have_header {
            out.columns = line.split(',').map(|c| c.trim().to_string()).collect();
            have_header = true;
            continue;
        }
        let mut row = Vec::with_capacity(out.columns.len());
        for field in line.split(',') {
            row.push(parse_num(field).ok_or_else(|| {
                read_err(
                    path,
                    format!("{}: `{}` is not a number", at(), field.trim()),
                )
            })?);
        }
        if row.len() != out.columns.len() {
            return Err(read_err(
                path,
                format!(
                    "{}: {} values for {} columns",
                    at(),
                    row.len(),
                    out.columns.len()
                ),
            ));
        }
        out.draws.push(row);
        out.lines.push(lineno + 1);
    }
    if !have_header {
        return Err(read_err(path, "no column header line"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A unique path in the temp dir; removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(tag: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            TempFile(std::env::temp_dir().join(format!(
                "tempest-stan-csv-{}-{tag}-{n}-{nanos}.csv",
                std::process::id()
            )))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn header() -> StanCsvHeader {
        StanCsvHeader {
            model: "gp_regression".into(),
            chain_id: 2,
            seed: 42,
            warmup: 500,
            draws: 1000,
            algorithm: "hmc".into(),
            engine: Some("nuts".into()),
            adapt_delta: 0.8,
            max_depth: Some(10),
            data_file: "data/mauna.json".into(),
            tempest_version: "0.1.0".into(),
            tempest: vec![
                ("posterior".into(), "0123456789abcdef".into()),
                ("adaptation".into(), "stan".into()),
            ],
        }
    }

    fn stats(i: usize) -> SamplerStats {
        SamplerStats {
            lp: -7.25 - i as f64 * 0.1,
            accept_stat: 0.93,
            stepsize: 0.734,
            treedepth: 3,
            n_leapfrog: 7,
            divergent: i % 5 == 4,
            energy: 8.5 + i as f64,
        }
    }

    fn params() -> Vec<String> {
        let mut p = stan_names("alpha", &[]);
        p.extend(stan_names("beta", &[3]));
        p.extend(stan_names("A", &[2, 2]));
        p
    }

    fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
    }

    #[test]
    fn names_follow_stan_column_major_convention() {
        assert_eq!(stan_names("alpha", &[]), vec!["alpha"]);
        assert_eq!(stan_names("beta", &[3]), vec!["beta.1", "beta.2", "beta.3"]);
        assert_eq!(
            stan_names("A", &[2, 3]),
            vec!["A.1.1", "A.2.1", "A.1.2", "A.2.2", "A.1.3", "A.2.3"]
        );
        assert_eq!(
            stan_names("z", &[2, 1, 2]),
            vec!["z.1.1.1", "z.2.1.1", "z.1.1.2", "z.2.1.2"]
        );
        assert!(stan_names("empty", &[0]).is_empty());
        assert_eq!(language_names("alpha", &[]), vec!["alpha"]);
        assert_eq!(language_names("beta", &[2]), vec!["beta[0]", "beta[1]"]);
        assert_eq!(
            language_names("A", &[2, 2]),
            vec!["A[0, 0]", "A[1, 0]", "A[0, 1]", "A[1, 1]"]
        );
        assert!(stan_names("empty", &[3, 0]).is_empty());
    }

    #[test]
    fn header_and_column_layout() {
        let f = TempFile::new("layout");
        let w = StanCsvWriter::create(&f.0, &header(), &params()).unwrap();
        w.finish(0.5, 1.25).unwrap();
        let text = std::fs::read_to_string(&f.0).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for want in [
            "# tempest_version = 0.1.0",
            "# model = gp_regression",
            "# method = sample (Default)",
            "#   sample",
            "#     num_samples = 1000",
            "#     num_warmup = 500",
            "#     save_warmup = 0",
            "#     thin = 1",
            "#     adapt",
            "#       delta = 0.8",
            "#     algorithm = hmc",
            "#         engine = nuts",
            "#             max_depth = 10",
            "#         metric = diag_e",
            "# id = 2",
            "# data",
            "#   file = data/mauna.json",
            "# random",
            "#   seed = 42",
            "# tempest",
            "#   posterior = 0123456789abcdef",
            "#   adaptation = stan",
            "#  Elapsed Time: 0.5 seconds (Warm-up)",
            "#                1.25 seconds (Sampling)",
            "#                1.75 seconds (Total)",
        ] {
            assert!(lines.contains(&want), "missing line {want:?} in\n{text}");
        }
        let header_line = lines.iter().find(|l| !l.starts_with('#')).unwrap();
        assert_eq!(
            *header_line,
            "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,\
             alpha,beta.1,beta.2,beta.3,A.1.1,A.2.1,A.1.2,A.2.2"
        );
        let csv = read_stan_csv(&f.0).unwrap();
        assert_eq!(&csv.columns[..7], &SAMPLER_COLUMNS[..]);
        assert_eq!(
            csv.param_names(),
            vec![
                "alpha", "beta.1", "beta.2", "beta.3", "A.1.1", "A.2.1", "A.1.2", "A.2.2"
            ]
        );
        assert!(csv.draws.is_empty());
        assert_eq!(csv.elapsed_warmup_s, Some(0.5));
        assert_eq!(csv.elapsed_sampling_s, Some(1.25));
        assert_eq!(csv.step_size, None);
        assert_eq!(csv.inv_metric, None);
    }

    #[test]
    fn values_round_trip_bit_exactly() {
        let f = TempFile::new("roundtrip");
        let names = stan_names("x", &[16]);
        let specials = [
            0.0,
            -0.0,
            0.1 + 0.2,
            std::f64::consts::PI,
            -1e-300,
            5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            1e16,
            123_456_789.123_456_79,
            1e-5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::EPSILON,
        ];
        // A deterministic spread of arbitrary bit patterns as well.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rows = vec![specials.to_vec()];
        for _ in 0..50 {
            let row: Vec<f64> = (0..16)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    f64::from_bits(state)
                })
                .collect();
            rows.push(row);
        }
        let mut w = StanCsvWriter::create(&f.0, &header(), &names).unwrap();
        w.write_adaptation(0.734, &[1.0, 0.5]).unwrap();
        let mut sampler = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let mut s = stats(i);
            s.lp = row[(i + 3) % 16];
            s.energy = row[(i + 7) % 16];
            w.write_draw(&s, row).unwrap();
            sampler.push(s);
        }
        assert_eq!(w.draws_written(), rows.len());
        w.finish(0.1, 0.2).unwrap();

        let text = std::fs::read_to_string(&f.0).unwrap();
        assert!(text.contains(",nan,inf,-inf,"), "{text}");
        assert!(!text.contains("NaN"));

        let csv = read_stan_csv(&f.0).unwrap();
        assert_eq!(csv.draws.len(), rows.len());
        for (i, (got, want)) in csv.draws.iter().zip(&rows).enumerate() {
            let s = &sampler[i];
            assert!(same(got[0], s.lp));
            assert!(same(got[1], s.accept_stat));
            assert!(same(got[2], s.stepsize));
            assert_eq!(got[3], s.treedepth as f64);
            assert_eq!(got[4], s.n_leapfrog as f64);
            assert_eq!(got[5], if s.divergent { 1.0 } else { 0.0 });
            assert!(same(got[6], s.energy));
            for (a, b) in got[7..].iter().zip(want) {
                assert!(same(*a, *b), "draw {i}: wrote {b:e}, read {a:e}");
            }
        }
        // Integer sampler columns are written as integers.
        let first_draw = text.lines().filter(|l| !l.starts_with('#')).nth(1).unwrap();
        let fields: Vec<&str> = first_draw.split(',').collect();
        assert_eq!(&fields[3..6], &["3", "7", "0"]);
        assert_eq!(csv.column("divergent__").unwrap()[4], 1.0);
    }

    #[test]
    fn adaptation_comments_are_parsed_back() {
        let f = TempFile::new("adapt");
        let mut w = StanCsvWriter::create(&f.0, &header(), &params()).unwrap();
        let inv = [1.0, 0.5, 0.123456789, 2e-9, 3.5, 1.0, 1.0, 7.0];
        w.write_adaptation(0.123, &inv).unwrap();
        w.write_draw(&stats(0), &[0.0; 8]).unwrap();
        w.finish(1.0, 2.0).unwrap();
        let text = std::fs::read_to_string(&f.0).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let h = lines.iter().position(|l| l.starts_with("lp__")).unwrap();
        assert_eq!(lines[h + 1], "# Adaptation terminated");
        assert_eq!(lines[h + 2], "# Step size = 0.123");
        assert_eq!(lines[h + 3], "# Diagonal elements of inverse mass matrix:");
        assert_eq!(lines[h + 4], "# 1, 0.5, 0.123456789, 2e-9, 3.5, 1, 1, 7");
        let csv = read_stan_csv(&f.0).unwrap();
        assert_eq!(csv.step_size, Some(0.123));
        assert_eq!(csv.inv_metric.as_deref(), Some(&inv[..]));
        assert_eq!(csv.draws.len(), 1);
        assert!(csv.comments.iter().any(|c| c == "# Adaptation terminated"));
    }

    #[test]
    fn reads_cmdstan_style_text() {
        let f = TempFile::new("cmdstan");
        let text = "# stan_version_major = 2\n# model = bernoulli_model\n\
            lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,theta\r\n\
            # Adaptation terminated\n# Step size = 0.908565\n\
            # Diagonal elements of inverse mass matrix:\n# 0.532599\n\
            -6.74827,1,0.908565,1,1,0,6.78417,0.234801\n\
            -6.8,-nan,0.908565,2,3,0,Inf,1e-3\n\n\
            # \n#  Elapsed Time: 0.005 seconds (Warm-up)\n\
            #                0.013 seconds (Sampling)\n#                0.018 seconds (Total)\n# \n";
        std::fs::write(&f.0, text).unwrap();
        let csv = read_stan_csv(&f.0).unwrap();
        assert_eq!(csv.columns.len(), 8);
        assert_eq!(csv.columns[7], "theta");
        assert_eq!(csv.draws.len(), 2);
        assert!(csv.draws[1][1].is_nan());
        assert_eq!(csv.draws[1][6], f64::INFINITY);
        assert_eq!(csv.step_size, Some(0.908565));
        assert_eq!(csv.inv_metric, Some(vec![0.532599]));
        assert_eq!(csv.elapsed_warmup_s, Some(0.005));
        assert_eq!(csv.elapsed_sampling_s, Some(0.013));
        assert_eq!(csv.column("theta").unwrap(), vec![0.234801, 1e-3]);
    }

    #[test]
    fn truncated_last_line_is_ignored() {
        let f = TempFile::new("truncated");
        let mut w = StanCsvWriter::create(&f.0, &header(), &params()).unwrap();
        w.write_adaptation(0.5, &[1.0; 8]).unwrap();
        for i in 0..10 {
            w.write_draw(&stats(i), &[1.0 / (i as f64 + 3.0); 8])
                .unwrap();
        }
        // Simulate a crash: the writer is dropped without `finish`, and
        // the draws are in the file marked `.partial`.
        let partial = w.partial_path().to_path_buf();
        drop(w);
        assert!(!f.0.exists());
        let full = std::fs::read(&partial).unwrap();
        let _ = std::fs::remove_file(&partial);
        std::fs::write(&f.0, &full).unwrap();
        assert_eq!(read_stan_csv(&f.0).unwrap().draws.len(), 10);

        // Cut the file in the middle of the last draw: 9 complete draws.
        let last_start = full[..full.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .unwrap()
            + 1;
        for cut in [last_start + 1, last_start + 12, full.len() - 1] {
            std::fs::write(&f.0, &full[..cut]).unwrap();
            let csv = read_stan_csv(&f.0).unwrap();
            assert_eq!(csv.draws.len(), 9, "cut at {cut}");
            assert_eq!(csv.draws[8][0], stats(8).lp);
        }
        // Cut right after a line break: the draws before it.
        std::fs::write(&f.0, &full[..last_start]).unwrap();
        assert_eq!(read_stan_csv(&f.0).unwrap().draws.len(), 9);

        // A partly written last line with the right number of fields is
        // still ignored (its last number may be cut short).
        let mut more = full.clone();
        more.extend_from_slice(b"-1,0.9,0.5,2,3,0,4,1,2,3,4,5,6,7,8");
        std::fs::write(&f.0, &more).unwrap();
        assert_eq!(read_stan_csv(&f.0).unwrap().draws.len(), 10);
    }

    #[test]
    fn a_stopped_chain_keeps_the_draws_the_fit_keeps() {
        for (written, kept, adapted) in [(10, 4, true), (10, 0, true), (3, 3, false), (0, 0, false)]
        {
            let f = TempFile::new("stopped");
            let mut w = StanCsvWriter::create(&f.0, &header(), &params()).unwrap();
            if adapted {
                w.write_adaptation(0.5, &[1.0; 8]).unwrap();
            }
            for i in 0..written {
                w.write_draw(&stats(i), &[i as f64; 8]).unwrap();
            }
            w.keep_first(kept, "cancelled").unwrap();
            assert_eq!(w.draws_written(), kept);
            w.finish(1.0, 2.0).unwrap();
            let csv = read_stan_csv(&f.0).unwrap();
            assert_eq!(csv.draws.len(), kept, "{written} {kept}");
            for (i, d) in csv.draws.iter().enumerate() {
                assert_eq!(d[0], stats(i).lp);
            }
            assert_eq!(csv.step_size.is_some(), adapted);
            assert_eq!(csv.elapsed_sampling_s, Some(2.0));
            assert!(
                csv.comments
                    .iter()
                    .any(|c| c.contains(&format!("Stopped early (cancelled): {kept} draws kept"))),
                "{:?}",
                csv.comments
            );
        }
    }

    #[test]
    fn malformed_complete_lines_and_io_failures_are_errors() {
        let f = TempFile::new("malformed");
        std::fs::write(&f.0, "# c\nlp__,a\n1,2\n1,2,3\n").unwrap();
        let e = read_stan_csv(&f.0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.message.contains(&f.0.display().to_string()));
        assert!(e.message.contains("line 4"), "{}", e.message);

        std::fs::write(&f.0, "# only comments\n").unwrap();
        assert_eq!(read_stan_csv(&f.0).unwrap_err().kind, ErrorKind::Io);

        let missing = std::env::temp_dir()
            .join("tempest-no-such-dir-for-stan-csv")
            .join("out.csv");
        let e = StanCsvWriter::create(&missing, &header(), &params()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.message.contains("out.csv"), "{}", e.message);
        let e = read_stan_csv(&missing).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Io);
        assert!(e.message.contains("out.csv"), "{}", e.message);

        let mut w = StanCsvWriter::create(&f.0, &header(), &params()).unwrap();
        assert!(w.write_draw(&stats(0), &[1.0; 3]).is_err());
        assert_eq!(w.draws_written(), 0);
        let bad = vec!["a,b".to_string()];
        assert!(StanCsvWriter::create(&f.0, &header(), &bad).is_err());
    }

    #[test]
    fn writing_4000_draws_of_40_columns_is_fast() {
        let f = TempFile::new("speed");
        let names = stan_names("theta", &[40]);
        let row: Vec<f64> = (0..40).map(|j| (j as f64 + 0.5).sqrt() * 1.2345).collect();
        let start = std::time::Instant::now();
        let mut w = StanCsvWriter::create(&f.0, &header(), &names).unwrap();
        w.write_adaptation(0.5, &row).unwrap();
        for i in 0..4000 {
            w.write_draw(&stats(i), &row).unwrap();
        }
        w.finish(1.0, 1.0).unwrap();
        let elapsed = start.elapsed();
        eprintln!("4000 draws x 47 columns: {elapsed:?}");
        // Generous bound for slow CI machines; typically a few milliseconds.
        assert!(elapsed.as_secs_f64() < 2.0, "{elapsed:?}");
        assert_eq!(read_stan_csv(&f.0).unwrap().draws.len(), 4000);
    }
}
