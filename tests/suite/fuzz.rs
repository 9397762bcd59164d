//! Fuzzing through the real binary: generated model texts (random
//! expressions, declarations, likelihoods and engine settings, hostile
//! numbers and nesting included) and broken data files go through
//! `tempest check` and `tempest run`. Every run must end within a time
//! bound with exit status 0 or 1, never a signal, a panic or an internal
//! error, and a run that succeeds must not report a non-finite headline
//! number. The seeds are fixed, so CI sees the same inputs every time.

use crate::common;
use common::*;

#[path = "fuzz/found.rs"]
mod found;
#[path = "fuzz/groups.rs"]
mod groups;
#[path = "fuzz/labels.rs"]
mod labels;
#[path = "fuzz/ode.rs"]
mod ode;
#[path = "fuzz/pieces.rs"]
mod pieces;
#[path = "fuzz/saved.rs"]
mod saved;
#[path = "fuzz/splits.rs"]
mod splits;
#[path = "fuzz/summary.rs"]
mod summary;
#[path = "fuzz/svi.rs"]
mod svi;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one command may take (debug build, 2 cores, small settings).
const LIMIT: Duration = Duration::from_secs(60);

/// What a fuzzed command did: its exit status and standard output.
pub struct Ran {
    /// 0 (success), 1 (a user error) or 2 (a malformed command line).
    pub code: i32,
    /// Its standard output.
    pub out: String,
}

/// Headline numbers: a successful run must not report them non-finite.
const HEADLINES: [&str; 7] = [
    "log marginal likelihood",
    "ELBO",
    "log evidence",
    "RMSE",
    "mean log predictive density",
    "accuracy",
    "log p(y)",
];

/// A word of `line` that reads as a non-finite number (`NaN`, `inf`, `-inf`).
fn non_finite_word(line: &str) -> Option<&str> {
    line.split(|c: char| c.is_whitespace() || ",;:()=".contains(c))
        .find(|w| w.parse::<f64>().is_ok_and(|v| !v.is_finite()))
}

/// The first line of a successful run's output with a non-finite headline
/// number, or a non-finite mean in a table (a posterior summary, a
/// prediction table).
fn non_finite_headline(out: &str) -> Option<&str> {
    // The header of the table being read: its width and the mean's column.
    let mut table: Option<(usize, usize)> = None;
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(at) = words.iter().position(|w| *w == "mean")
            && words.contains(&"sd")
        {
            table = Some((words.len(), at));
            continue;
        }
        if let Some((width, at)) = table {
            // A row: a name (absent from a summary's header), then numbers.
            if words.len() >= width && words.len() <= width + 1 {
                let mean = words[at + words.len() - width];
                if mean.parse::<f64>().is_ok_and(|v| !v.is_finite()) {
                    return Some(line);
                }
                if mean.parse::<f64>().is_ok() {
                    continue;
                }
            }
        }
        table = None;
        if HEADLINES.iter().any(|h| line.contains(h)) && non_finite_word(line).is_some() {
            return Some(line);
        }
    }
    None
}

/// Whether `line` holds a run of more than 30 digits (a huge or tiny
/// number written out in full).
fn long_digit_run(line: &str) -> bool {
    let mut run = 0;
    for c in line.chars() {
        run = if c.is_ascii_digit() { run + 1 } else { 0 };
        if run > 30 {
            return true;
        }
    }
    false
}

/// What a fuzzed command did wrong, if anything; else what it did.
pub fn check_run<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Result<Ran, String> {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tempest"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start tempest: {e}"))?;
    // Read the pipes while waiting, so that a large output cannot block.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut v);
        v
    });
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("ran past {LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&err_reader.join().unwrap_or_default()).into_owned();
    match status.code() {
        Some(0) => {
            if let Some(line) = non_finite_headline(&out) {
                return Err(format!("a non-finite headline number: {line}\n{out}"));
            }
        }
        Some(1) => {
            if !err.contains("error[") {
                return Err(format!("exit 1 without an error header:\n{err}"));
            }
        }
        // A malformed command line (a flag's value that is not a number, a
        // negative number read as a flag): the parser's usage error.
        Some(2) if err.starts_with("error: ") && err.contains("--help") => {}
        other => return Err(format!("exit status {other:?}:\n{err}")),
    }
    // A number in a message reads as a number: 1e300, not 301 digits.
    if let Some(line) = err.lines().chain(out.lines()).find(|l| long_digit_run(l)) {
        return Err(format!("a number written out in full: {line}"));
    }
    for bad in [
        "panicked",
        "E-internal",
        "RUST_BACKTRACE",
        "overflowed its stack",
    ] {
        if err.contains(bad) {
            return Err(format!("`{bad}` in:\n{err}"));
        }
    }
    if std::env::var_os("TEMPEST_FUZZ_LOG").is_some() {
        let first = err.lines().find(|l| l.contains("error[")).unwrap_or("");
        let what = args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned());
        eprintln!(
            "[{:?}] {} :: {first}",
            status.code(),
            what.unwrap_or_default()
        );
    }
    Ok(Ran {
        code: status.code().unwrap_or(-1),
        out,
    })
}

/// The number of cases of a generated test: `base`, times the factor in
/// `TEMPEST_FUZZ_SCALE` when it is set (for longer local runs).
pub fn cases(base: u32) -> u32 {
    let scale = std::env::var("TEMPEST_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1);
    base.saturating_mul(scale.max(1))
}

/// Scalar names an expression may use, with the data of [`data_csv`].
const NAMES: [&str; 8] = ["x[3]", "n", "a", "b", "ell", "sigma", "mu", "t[0]"];

/// Numbers, ordinary and hostile.
const NUMBERS: [&str; 12] = [
    "0",
    "1",
    "2.5",
    "-1",
    "1e-300",
    "1e300",
    "1e308",
    "0.0",
    "3",
    "1000000000",
    "1e-8",
    "7",
];

/// A random expression, up to `depth` levels of operators and calls.
fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(NAMES.to_vec()).prop_map(String::from),
        prop::sample::select(NUMBERS.to_vec()).prop_map(String::from),
    ];
    leaf.prop_recursive(6, 48, 3, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/", "^", ".*"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (
                prop::sample::select(vec![
                    "exp", "log", "sqrt", "abs", "lgamma", "digamma", "Phi", "tanh", "log1p"
                ]),
                inner.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(c, a, b)| format!("(if {c} > 0 then {a} else {b})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("pow({a}, {b})")),
            inner.prop_map(|a| format!("sum([{a}, 1.0])")),
        ]
    })
}

/// A kernel argument: mostly ordinary, sometimes any expression.
fn kernel_arg() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec!["ell", "1.0", "2.5", "sigma", "0.3"]).prop_map(String::from),
        1 => expr(),
    ]
}

/// A kernel expression.
fn kernel() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "rbf", "matern12", "matern32", "matern52", "periodic", "linear", "white",
        ]),
        kernel_arg(),
        kernel_arg(),
    )
        .prop_map(|(k, a, s)| match k {
            "periodic" => format!("{s}^2 * periodic({a}, 2.0)"),
            "linear" | "white" => format!("{s}^2 * {k}() + rbf(1.0)"),
            _ => format!("{s}^2 * {k}({a})"),
        })
}

/// Small settings, some out of range.
fn small() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["1", "2", "5", "20", "40", "0", "-3", "1e12"])
}

/// An engine for a model whose quantities are hypers.
fn hyper_engine() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("exact {}".to_string()),
        Just("exact { learn_hypers = true, max_iters = 30 }".to_string()),
        small().prop_map(|s| format!("mirror_descent {{ steps = {s}, learn_hypers = true }}")),
        small().prop_map(|s| format!("gradient_descent {{ steps = {s} }}")),
    ]
}

/// A sampler (or the evidence engine) for a model with params.
fn param_engine() -> impl Strategy<Value = String> {
    prop_oneof![
        (prop::sample::select(vec!["nuts", "hmc", "mala"]), small()).prop_map(|(e, s)| format!(
            "{e} {{ chains = 1, warmup = 20, draws = {s}, max_depth = 6, leapfrog_steps = 8 }}"
        )),
        small().prop_map(|s| format!(
            "evidence {{ rungs = 3, sampler = nuts {{ chains = 1, warmup = 10, draws = {s} }} }}"
        )),
    ]
}

/// A whole model over the data of [`data_csv`].
fn model() -> impl Strategy<Value = String> {
    (
        expr(),
        expr(),
        kernel(),
        prop::sample::select(vec![
            "y ~ normal(f(t), sigma)",
            "y ~ student_t(3, f(t), sigma)",
            "y ~ normal(mu + a * x, sigma)",
            "z ~ poisson_log(f(t))",
            "y ~ normal(f(t), sigma) ^ 0.5",
            "y ~ normal(f(t), exp(a))",
            "z ~ poisson_log(mu + f(t) * b)",
        ]),
        expr(),
        hyper_engine(),
        param_engine(),
        any::<bool>(),
    )
        .prop_map(|(e1, e2, k, lik, e3, hyper_eng, param_eng, params)| {
            let eng = if params { param_eng } else { hyper_eng };
            let (hyper, param) = if params {
                (
                    "hyper { ell : positive = 1.0 }".to_string(),
                    format!(
                        "param {{ a : real ~ normal(0, 1)\n  b : real<lower=-5, upper=5>\n  mu : real ~ normal(0, 10)\n  sigma : positive ~ lognormal(0, 1) }}\nmodel {{\n  let c = {e3}\n}}"
                    ),
                )
            } else {
                (
                    "hyper { ell : positive = 1.0\n  a : real = 0.5\n  b : real = 1.0\n  mu : real = 0.0\n  sigma : positive = 1.0 }".to_string(),
                    String::new(),
                )
            };
            let model = if param.is_empty() {
                format!("model {{\n  let c = {e1}\n  let d = c + {e2}\n  f ~ gp(0, {k})\n  {lik}\n}}")
            } else {
                let p = param.trim_end_matches('}');
                format!("{p}  let d = c + {e2}\n  f ~ gp(0, {k})\n  {lik}\n}}")
            };
            format!(
                "data {{\n  n : int\n  t : vector[n] = column(\"t\")\n  x : vector[n]\n  y : vector[n]\n  z : int<lower=0>[n] = column(\"y\")\n}}\n{hyper}\n{model}\nestimate {{ m = E[{e1}] }}\ninfer {eng}\n"
            )
        })
}

/// A small data file: 12 rows of t, x and a count-like y.
fn data_csv() -> String {
    let mut s = String::from("t,x,y\n");
    for i in 0..12 {
        let t = i as f64 * 0.7;
        s.push_str(&format!("{t},{},{}\n", (t * 1.3).sin(), i % 4));
    }
    s
}

/// A broken variant of [`data_csv`].
fn broken_data() -> impl Strategy<Value = String> {
    let cell = prop::sample::select(vec![
        "",
        "NaN",
        "inf",
        "-inf",
        "1e300",
        "-1e300",
        "abc",
        "1,5",
        "\"3\"",
        "1e309",
        "0x10",
        "  4  ",
        "9999999999999999999999",
    ]);
    (0usize..13, 0usize..3, cell, 0u8..8).prop_map(|(row, col, cell, how)| {
        let base = data_csv();
        let mut lines: Vec<String> = base.lines().map(String::from).collect();
        match how {
            0 => lines = lines.iter().map(|l| l.replace(',', ";")).collect(),
            1 => lines = lines.iter().map(|l| l.replace(',', "\t")).collect(),
            2 => lines[0] = format!("\u{FEFF}{}", lines[0]),
            3 => lines.truncate(1),
            4 => lines[row.max(1)] = "1,2".into(),
            5 => lines[0] = "t,t,y".into(),
            _ => {
                let r = row.max(1);
                let mut cells: Vec<String> = lines[r].split(',').map(String::from).collect();
                cells[col] = cell.to_string();
                lines[r] = cells.join(",");
            }
        }
        lines.join("\n") + "\n"
    })
}

/// A proptest runner with a fixed seed and `cases(n)` cases.
pub fn runner(n: u32, seed: u64) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(n),
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    })
}

/// Write `text` to `dir/name`; its path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

#[test]
fn generated_models_end_cleanly() {
    let dir = out_dir("fuzz_models");
    let data = write(&dir, "data.csv", &data_csv());
    let mut runner = runner(48, 9);
    runner
        .run(&model(), |text| {
            let m = write(&dir, "model.tempest", &text);
            let mut run = vec!["run", m.as_str(), "--data", data.as_str(), "-q"];
            if text.contains("infer exact") || text.contains("_descent") {
                run.extend(["--test", data.as_str()]);
            }
            for args in [vec!["check", m.as_str(), "--data", data.as_str()], run] {
                check_run(&args).map_err(|e| {
                    TestCaseError::fail(format!(
                        "`tempest {}`: {e}\nmodel:\n{text}",
                        args.join(" ")
                    ))
                })?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn broken_data_files_end_cleanly() {
    let dir = out_dir("fuzz_data");
    let model = "data {\n  n : int\n  t : vector[n] = column(\"t\")\n  x : vector[n]\n  y : int<lower=0>[n]\n}\n\
                 hyper { ell : positive = 1.0 }\n\
                 model {\n  f ~ gp(0, rbf(ell))\n  y ~ poisson_log(f(t))\n}\n\
                 infer mirror_descent { steps = 5 }\n";
    let m = write(&dir, "model.tempest", model);
    let mut runner = runner(40, 11);
    runner
        .run(&broken_data(), |text| {
            let d = write(&dir, "data.csv", &text);
            for args in [
                vec!["check", m.as_str(), "--data", d.as_str()],
                vec!["run", m.as_str(), "--data", d.as_str(), "-q"],
            ] {
                check_run(&args).map_err(|e| {
                    TestCaseError::fail(format!("`tempest {}`: {e}\ndata:\n{text}", args.join(" ")))
                })?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn edited_example_models_end_cleanly() {
    // Random cuts, copies and hostile insertions in the examples, checked
    // against their own data.
    const SNIPPETS: [&str; 17] = [
        "ode(",
        ", max_steps = 3",
        " col(x, 5) ",
        "if true then ",
        " else 1.0",
        "exp(",
        ")",
        "{",
        "}",
        " 1e308 ",
        " draws = 1000000000000 ",
        " chains = 1000000 ",
        "\u{FEFF}",
        "[1000000000]",
        " let z = z ",
        "^ ^",
        "0..1000000000000",
    ];
    let examples = [
        ("examples/mcycle.tempest", "examples/data/mcycle.csv"),
        (
            "examples/logistic.tempest",
            "examples/data/breast_cancer_prepared.csv",
        ),
        ("examples/iris.tempest", "examples/data/iris.csv"),
        (
            "examples/evidence.tempest",
            "examples/data/evidence_linreg.csv",
        ),
        ("examples/vanderpol.tempest", "examples/data/vanderpol.csv"),
    ];
    let dir = out_dir("fuzz_edits");
    let strategy = (
        0usize..examples.len(),
        0usize..4096,
        0usize..40,
        0usize..SNIPPETS.len(),
        0u8..3,
        1usize..40,
    );
    let mut runner = runner(40, 13);
    runner
        .run(&strategy, |(which, at, len, snippet, op, times)| {
            let (path, data) = examples[which];
            let mut t = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
                .expect("example");
            let mut cut = at % (t.len() + 1);
            while !t.is_char_boundary(cut) {
                cut -= 1;
            }
            let mut end = (cut + len).min(t.len());
            while !t.is_char_boundary(end) {
                end -= 1;
            }
            match op {
                0 => t.replace_range(cut..end, ""),
                1 => {
                    let piece = t[cut..end].to_string();
                    t.insert_str(end, &piece);
                }
                _ => t.insert_str(cut, &SNIPPETS[snippet].repeat(times)),
            }
            let m = write(&dir, "model.tempest", &t);
            check_run(&["check", &m, "--data", data])
                .map_err(|e| TestCaseError::fail(format!("`tempest check`: {e}\nmodel:\n{t}")))?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
