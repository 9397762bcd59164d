//! Whether Stan CSV files are chains of one run, for `tempest summary`.
//!
//! A file written by tempest carries, under `# tempest`, a fingerprint of
//! the posterior its chain drew from ([`fingerprint`]: the model, its data,
//! hypers, temperature and likelihood power) and the sampler settings that
//! CmdStan's keys do not cover (`adaptation`, `early_stop`, `step_size`,
//! `leapfrog_steps`). Files are compared with the first one ([`compare`]):
//!
//! * another posterior (fingerprints that differ; without fingerprints, a
//!   model name or data file name that differs) or another sampler
//!   (`algorithm`/`engine`) is an error naming both files: their draws are
//!   not chains of one posterior, or their sampler diagnostics do not add
//!   up;
//! * tuning settings that differ (warm-up length, adapt delta, `max_depth`,
//!   metric, adaptation, initial step size, ...) and data paths that differ
//!   only in their folder are warnings that name each setting, its values
//!   and the files: the draws are still of one posterior, and R-hat across
//!   them is still a check of convergence.

use super::density::Density;
use crate::error::{Error, ErrorKind};
use crate::ir::value::Value;
use std::path::{Path, PathBuf};
use tempest_output::stan_csv::StanCsv;

/// The value of `key = value` in a file's comment lines (the first), as
/// its leading word: `seed = 42 (Default)` gives `42`.
pub fn config<'a>(csv: &'a StanCsv, key: &str) -> Option<&'a str> {
    csv.comments.iter().find_map(|c| {
        let body = c.trim_start_matches('#').trim();
        let (k, v) = body.split_once('=')?;
        (k.trim() == key).then(|| v.split_whitespace().next().unwrap_or(""))
    })
}

/// A 64-bit hash over words, stable across platforms and versions (a
/// multiply–rotate mix of each word; not cryptographic).
struct Hash(u64);

impl Hash {
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        for chunk in b.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.word(u64::from_le_bytes(w));
        }
    }
    fn reals<'a>(&mut self, xs: impl ExactSizeIterator<Item = &'a f64>) {
        self.word(xs.len() as u64);
        for x in xs {
            self.word(x.to_bits());
        }
    }
    fn value(&mut self, v: &Value<f64>) {
        match v {
            Value::Int(i) => self.word(*i as u64),
            Value::Real(x) => self.word(x.to_bits()),
            Value::Bool(b) => self.word(u64::from(*b)),
            Value::Vector(x) => self.reals(x.iter()),
            Value::Matrix(x) => {
                self.word(x.nrows() as u64);
                self.reals(x.iter());
            }
            Value::IntArray(x) => {
                self.word(x.len() as u64);
                x.iter().for_each(|i| self.word(*i as u64));
            }
            Value::Str(s) => self.bytes(s.as_bytes()),
            Value::StrArray(ss) => {
                self.word(ss.len() as u64);
                ss.iter().for_each(|s| self.bytes(s.as_bytes()));
            }
            Value::IntRange(a, b) => {
                self.word(*a as u64);
                self.word(*b as u64);
            }
            // A kernel comes from the model text, hashed with the graph.
            Value::Kernel(_) => self.word(u64::MAX),
        }
    }
}

/// The posterior a sampler over `density` draws from, as 16 hex digits:
/// a hash of the model's printed IR without its `infer` block, every data
/// value (with which are present and the text labels), the hypers'
/// values, `temperature` and the likelihood's power. Runs with the same
/// fingerprint sample the same posterior (whatever the model file or the
/// data file is called); any change to the model, the data rows or values,
/// a `--set` of a hyper or of `temperature` changes it.
pub fn fingerprint(density: &Density) -> String {
    let b = &density.bound;
    let mut h = Hash(0x7465_6d70_6573_7431);
    h.bytes(tempest_infer::saved::graph_text(&b.graph).as_bytes());
    h.word(b.data.len() as u64);
    for (v, present) in b.data.iter().zip(&b.present) {
        h.word(u64::from(*present));
        if *present {
            h.value(v);
        }
    }
    for (i, labels) in &b.labels {
        h.word(*i as u64);
        h.value(&Value::StrArray(labels.clone()));
    }
    h.word(density.hypers.len() as u64);
    density.hypers.iter().for_each(|v| h.value(v));
    h.word(b.temperature.to_bits());
    h.word(density.power.to_bits());
    format!("{:016x}", h.0)
}

/// Settings that tune the sampler without changing the posterior: their
/// key in the files and their name in messages. Files that differ in one
/// are merged with a warning.
const TUNING: &[(&str, &str)] = &[
    ("num_warmup", "warm-up iterations"),
    ("engaged", "adaptation engaged"),
    ("delta", "adapt delta (target_accept)"),
    ("max_depth", "max_depth"),
    ("metric", "metric"),
    ("thin", "thinning"),
    ("adaptation", "adaptation"),
    ("early_stop", "early_stop"),
    ("step_size", "initial step_size"),
    ("leapfrog_steps", "leapfrog_steps"),
    ("tempest_version", "tempest version"),
];

/// The sampler a file names: `algorithm`, with `engine` for HMC.
fn sampler(csv: &StanCsv) -> String {
    match (config(csv, "algorithm"), config(csv, "engine")) {
        (Some(a), Some(e)) => format!("{a} ({e})"),
        (Some(a), None) => a.to_string(),
        _ => "unknown".into(),
    }
}

fn refuse(path: &Path, msg: String) -> Error {
    Error::new(ErrorKind::Data, format!("{}: {msg}", path.display()))
}

/// Compare every file with the first: an error for another posterior or
/// another sampler (see the module documentation), and the warnings for
/// tuning settings or data paths that differ.
pub fn compare(paths: &[PathBuf], files: &[StanCsv]) -> Result<Vec<String>, Error> {
    let (Some(p0), Some(f0)) = (paths.first(), files.first()) else {
        return Ok(Vec::new());
    };
    let shown = |v: Option<&str>| v.map_or("(none)".to_string(), |v| format!("`{v}`"));
    for (p, f) in paths.iter().zip(files).skip(1) {
        match (config(f0, "posterior"), config(f, "posterior")) {
            (Some(a), Some(b)) if a != b => {
                return Err(refuse(
                    p,
                    format!(
                        "its chain drew from another posterior than {}'s (posterior {b} against {a}): the model, its data rows or values, the hypers or `temperature` differ, so the draws are not chains of one run",
                        p0.display()
                    ),
                )
                .with_note("summarise each run's files apart"));
            }
            (Some(_), Some(_)) => {}
            _ => {
                for (key, what) in [("model", "model"), ("file", "data file")] {
                    let (a, b) = (config(f0, key), config(f, key));
                    let name = |v: Option<&str>| {
                        v.map(|v| Path::new(v).file_name().map(|n| n.to_os_string()))
                    };
                    if name(a) != name(b) {
                        return Err(refuse(
                            p,
                            format!(
                                "its {what} is {}, but {}'s is {}: the draws are not chains of one posterior",
                                shown(b),
                                p0.display(),
                                shown(a)
                            ),
                        )
                        .with_note("summarise each run's files apart"));
                    }
                }
            }
        }
        let (a, b) = (sampler(f0), sampler(f));
        if a != b {
            return Err(refuse(
                p,
                format!(
                    "its chain was run by {b}, but {}'s by {a}: the chains of one run come from one sampler, whose divergences and tree depths add up",
                    p0.display()
                ),
            ));
        }
    }
    let mut warnings = Vec::new();
    let mut differing = |key: &str, what: &str| {
        let mut values: Vec<(Option<&str>, Vec<String>)> = Vec::new();
        for (p, f) in paths.iter().zip(files) {
            let v = config(f, key);
            let name = p.display().to_string();
            match values.iter_mut().find(|(w, _)| *w == v) {
                Some((_, names)) => names.push(name),
                None => values.push((v, vec![name])),
            }
        }
        if values.len() > 1 {
            let parts: Vec<String> = values
                .iter()
                .map(|(v, names)| format!("{} in {}", shown(*v), names.join(", ")))
                .collect();
            warnings.push(format!(
                "the files were run with different {what}: {}; their draws are summarised as chains of one posterior, but the chains were not tuned alike",
                parts.join("; ")
            ));
        }
    };
    for (key, what) in TUNING {
        differing(key, what);
    }
    // Data paths that name the same file in different folders (the same
    // data on several machines, as far as the files can tell).
    if files.iter().any(|f| config(f, "posterior").is_none()) {
        differing("file", "data paths (the same file name)");
    }
    Ok(warnings)
}
