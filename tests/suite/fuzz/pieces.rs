//! Pieces the feature generators share: hostile numbers and settings,
//! small data files, and a way to run a sequence of commands as one case.

use super::{Ran, check_run, write};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::path::Path;

/// Real numbers for model texts and settings, ordinary and hostile.
pub const REALS: [&str; 14] = [
    "0",
    "1",
    "0.5",
    "2.5",
    "-1",
    "1e-300",
    "1e300",
    "1e308",
    "-1e308",
    "3",
    "1e-12",
    "0.1",
    "1000000000",
    "4.9e-324",
];

/// Integers for sizes and counts, ordinary and hostile.
pub const INTS: [&str; 12] = [
    "1",
    "2",
    "3",
    "5",
    "0",
    "-1",
    "40",
    "1000000000",
    "4294967296",
    "9223372036854775807",
    "18446744073709551616",
    "7",
];

/// One of `values`, as an owned string.
pub fn one_of(values: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(values).prop_map(String::from)
}

/// A small positive integer most of the time, else a hostile one.
pub fn size(ordinary: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![4 => one_of(ordinary), 1 => one_of(&INTS)]
}

/// A real most of the time from `ordinary`, else a hostile one.
pub fn real(ordinary: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![4 => one_of(ordinary), 1 => one_of(&REALS)]
}

/// Some of the `name = value` pieces (each with probability 0.3), joined
/// by commas.
pub fn settings(pieces: Vec<BoxedStrategy<String>>) -> impl Strategy<Value = String> {
    let n = pieces.len();
    (pieces, prop::collection::vec(prop::bool::weighted(0.3), n)).prop_map(|(values, keep)| {
        values
            .into_iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(v, _)| v)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// `name = value` with `value` from `values`.
pub fn setting<S>(name: &'static str, values: S) -> BoxedStrategy<String>
where
    S: Strategy<Value = String> + 'static,
{
    values.prop_map(move |v| format!("{name} = {v}")).boxed()
}

/// A data file of `rows` rows: inputs `t` (increasing), `x1`, `x2`, a real
/// outcome `y`, a count `k`, a 0/1 `b`, a class `cls` (0..classes-1), a
/// text label `lab` (from `labels`, cycling) and an id `g` (1..=ids, cycling).
pub fn table(rows: usize, classes: usize, labels: &[String], ids: usize) -> String {
    let mut s = String::from("t,x1,x2,y,k,b,cls,lab,g\n");
    for i in 0..rows {
        let t = 0.5 * (i + 1) as f64;
        let x1 = (t * 1.3).sin();
        let x2 = (t * 0.7).cos();
        let y = x1 + 0.3 * x2 + 0.1 * ((i * 7) % 5) as f64;
        let lab = if labels.is_empty() {
            String::from("a")
        } else {
            labels[i % labels.len()].clone()
        };
        s.push_str(&format!(
            "{t},{x1:.4},{x2:.4},{y:.4},{},{},{},{lab},{}\n",
            (i * 3) % 5,
            i % 2,
            i % classes.max(1),
            1 + i % ids.max(1),
        ));
    }
    s
}

/// A data file of [`table`] in Stan's JSON convention: one key per column
/// (numbers where a cell reads as one, else strings).
pub fn table_json(csv: &str) -> String {
    let mut lines = csv.lines();
    let names: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let mut m = serde_json::Map::new();
    for (c, name) in names.iter().enumerate() {
        let col: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let cell = r.get(c).copied().unwrap_or("");
                serde_json::from_str::<serde_json::Number>(cell)
                    .map(serde_json::Value::Number)
                    .unwrap_or_else(|_| serde_json::Value::String(cell.to_string()))
            })
            .collect();
        m.insert(name.to_string(), serde_json::Value::Array(col));
    }
    serde_json::Value::Object(m).to_string()
}

/// `table` with one cell of one row replaced (row and column taken modulo
/// the file's), when `cell` is given.
pub fn damage(text: &str, cell: Option<(usize, usize, &str)>) -> String {
    let Some((row, col, value)) = cell else {
        return text.to_string();
    };
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    if lines.len() < 2 {
        return text.to_string();
    }
    let r = 1 + row % (lines.len() - 1);
    let mut cells: Vec<String> = lines[r].split(',').map(String::from).collect();
    let c = col % cells.len();
    cells[c] = value.to_string();
    lines[r] = cells.join(",");
    lines.join("\n") + "\n"
}

/// Cells a damaged data file may hold.
pub const CELLS: [&str; 12] = [
    "", "NaN", "inf", "-1e308", "1e308", "abc", "99", "-3", "0.5", "1e19", "\"x\"", "0",
];

/// A case's commands, run in order; a command that needs an earlier
/// one's success runs only after it succeeded.
pub struct Steps<'a> {
    /// What the case was made of, shown when it fails.
    pub context: String,
    /// The folder its files go to.
    pub dir: &'a Path,
}

impl Steps<'_> {
    /// Write a file of the case.
    pub fn file(&self, name: &str, text: &str) -> String {
        write(self.dir, name, text)
    }

    /// Run one command; a fault fails the case with its context (or,
    /// with `TEMPEST_FUZZ_KEEP_GOING` set, is printed and the case goes on,
    /// to list every fault of a long local run).
    pub fn run(&self, args: &[String]) -> Result<Ran, TestCaseError> {
        check_run(args).or_else(|e| {
            let fault = format!("`tempest {}`: {e}\n{}", args.join(" "), self.context);
            if std::env::var_os("TEMPEST_FUZZ_KEEP_GOING").is_some() {
                eprintln!("FAULT: {fault}\nEND FAULT");
                Ok(Ran {
                    code: -1,
                    out: String::new(),
                })
            } else {
                Err(TestCaseError::fail(fault))
            }
        })
    }
}

/// Owned arguments from string slices.
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Every file in `dir` whose name starts with `prefix`, sorted.
pub fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .map(|e| e.path().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Remove every file in `dir` whose name starts with `prefix`.
pub fn clear(dir: &Path, prefix: &str) {
    for f in files_with_prefix(dir, prefix) {
        let _ = std::fs::remove_file(f);
    }
}
