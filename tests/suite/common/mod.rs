//! Helpers shared by the integration tests; those that run the `tempest`
//! binary exist with the `cli` feature only.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use tempest::{Bound, Data, Model, Overrides, Registry};

/// The shared folder beside the repository (data and reference numbers).
pub fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
}

/// Parse a JSON file from the shared reference folder.
pub fn reference(name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(shared().join("reference").join(name)).expect("reference file");
    serde_json::from_str(&text).expect("reference JSON")
}

/// Compile a model from text, panicking with the rendered errors.
pub fn model(text: &str) -> Model {
    Model::from_str("test.tempest", text, &Registry::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Bind data, panicking with the rendered errors.
pub fn bind(m: &Model, data: &Data) -> Bound {
    m.bind(data, &Overrides::default())
        .unwrap_or_else(|e| panic!("{}", m.render(&e)))
}

/// A shared CSV file, optionally restricted to rows a..=b.
pub fn csv(name: &str, rows: Option<(usize, usize)>) -> Data {
    let d = Data::read(&shared().join("data").join(name)).expect("data file");
    match rows {
        Some((a, b)) => d.select_rows(a, b).expect("rows"),
        None => d,
    }
}

/// |a − b| ≤ tol · max(|b|, tiny).
pub fn assert_rel(a: f64, b: f64, tol: f64, what: &str) {
    let scale = b.abs().max(1e-300);
    assert!(
        (a - b).abs() <= tol * scale,
        "{what}: {a} vs {b} (relative error {:.3e})",
        (a - b).abs() / scale
    );
}

#[cfg(feature = "cli")]
/// Run the `tempest` binary from the repository root.
pub fn tempest(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tempest"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run tempest")
}

#[cfg(feature = "cli")]
/// Run the `tempest` binary from the repository root with the environment
/// variables `env` added, killing it past `limit` (which fails the caller
/// as a hang). The output and the wall time.
pub fn tempest_within(
    args: &[&str],
    env: &[(&str, &str)],
    limit: std::time::Duration,
) -> (std::process::Output, std::time::Duration) {
    use std::process::Stdio;
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tempest"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_BACKTRACE")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tempest");
    // Drain the pipes while waiting, so a long output cannot block the child.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let read = |r: &mut dyn std::io::Read| {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    };
    let (out, err) = std::thread::scope(|s| {
        let o = s.spawn(|| read(&mut out));
        let e = s.spawn(|| read(&mut err));
        while child.try_wait().expect("wait").is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("`tempest {}` ran past {limit:?}", args.join(" "));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (o.join().expect("stdout"), e.join().expect("stderr"))
    });
    let status = child.wait().expect("status");
    (
        std::process::Output {
            status,
            stdout: out,
            stderr: err,
        },
        start.elapsed(),
    )
}

/// `tempest run MODEL` on the motorcycle data: training rows 0..99, test
/// rows 100..132 (a forecast past the training times), quiet; then
/// `extra`.
pub fn mcycle_split<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        model,
        "--data",
        "examples/data/mcycle.csv",
        "--rows",
        "0..99",
        "--test",
        "examples/data/mcycle.csv",
        "--test-rows",
        "100..132",
        "-q",
    ];
    args.extend_from_slice(extra);
    args
}

/// A fresh folder for one test's output files.
pub fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Write `text` to the file `name` in `dir`; its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

/// Data given as JSON text, through a file `data.json` in the test's own
/// folder `dir` (the path the error messages would name).
pub fn json_data(dir: &str, json: &str) -> Data {
    let path = out_dir(dir).join("data.json");
    std::fs::write(&path, json).expect("write");
    Data::read(&path).expect("data")
}

/// A run that succeeded: its standard output.
pub fn assert_ok(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "stdout: {out}\nstderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// A run that failed as a user error should: exit status 1, a rendered
/// error header, and no panic or internal error. Its standard error.
pub fn assert_clean_failure(o: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("error["), "no error header: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE") && !err.contains("E-internal"),
        "panic: {err}"
    );
    err
}

/// Bayesian logistic regression on the breast-cancer features: an intercept
/// and 30 coefficients, each N(0, 1) a priori (the model of Stan's
/// reference posterior).
pub const LOGISTIC: &str = r#"
data { n : int  X : matrix[n, 30] = columns("x0".."x29")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[30] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
"#;

#[cfg(feature = "cli")]
/// `tempest run MODEL --data DATA [extra...] --json JSON` that must succeed:
/// its standard output and the JSON it wrote.
#[allow(dead_code)]
pub fn run_json(
    model: &Path,
    data: &Path,
    extra: &[&str],
    json: &Path,
) -> (String, serde_json::Value) {
    let mut args = vec![
        "run",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = assert_ok(&tempest(&args));
    let j = serde_json::from_str(&std::fs::read_to_string(json).expect("JSON written"))
        .expect("valid JSON");
    (out, j)
}

/// Hypers of every kind the kernel tests use (scalars, vectors, bounds).
#[allow(dead_code)]
pub const KERNEL_HYPERS: &str = r#"
hyper {
  ell : positive = 0.8
  ells : vector<lower=0>[3] = [0.5, 1.2, 2.0]
  p : positive = 1.7
  c : positive = 0.5
  v : vector<lower=0>[3] = [0.3, 0.6, 0.9]
  s : positive = 1.3
  alpha : positive = 1.5
}
"#;

/// `tempest::run` on a bound model with `engine` (or the model's own) and
/// engine settings, panicking with the error.
pub fn fit_with(
    b: &Bound,
    engine: Option<&str>,
    settings: &[(&str, &str)],
) -> Box<dyn tempest::infer::fit::Fit> {
    let options = tempest::RunOptions {
        engine: engine.map(String::from),
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    tempest::run(b, options).unwrap_or_else(|e| panic!("{e}"))
}

/// The `svi` engine on a bound model with engine settings (name, value).
pub fn svi_engine(b: &Bound, settings: &[(&str, &str)]) -> tempest::infer::svi::engine::Svi {
    use tempest::infer::settings::{EngineConfig, Settings};
    let def = tempest::infer::registry::ENGINES
        .iter()
        .find(|d| d.schema().name == "svi")
        .expect("svi registered");
    let mut cfg = EngineConfig::defaults(def.schema(), Default::default());
    for (k, v) in settings {
        cfg.set(k, v).unwrap();
    }
    let s = tempest::infer::svi::def::SviSettings::from_config(&cfg).unwrap();
    tempest::infer::svi::engine::Svi::new(std::sync::Arc::new(b.clone()), &s)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A whitened q(u) [M] away from the prior, the same for the same seed.
pub fn random_q(m: usize, seed: u64) -> tempest::infer::vi::posterior::Whitened {
    use nalgebra::{DMatrix, DVector};
    let v = |i: usize, j: usize| ((seed as f64 + 1.3 * i as f64 + 0.7 * j as f64).sin()) * 0.3;
    let mut r = DMatrix::from_fn(m, m, |i, j| if i >= j { v(i, j) } else { 0.0 });
    for j in 0..m {
        r[(j, j)] = 0.6 + v(j, j).abs();
    }
    tempest::infer::vi::posterior::Whitened::from_factor(DVector::from_fn(m, |i, _| v(i, 3)), r)
}

/// X̄ [N, D] and Z̄ [M, D] of the cross-covariance K(X, Z) given K̄
/// [N, M], by one reverse pass per entry (the reference for faster paths).
pub fn entry_cross_inputs(
    k: &tempest::model::kernel::KernelValue<f64>,
    x: &tempest::model::kernel::Inputs,
    z: &tempest::model::kernel::Inputs,
    k_bar: &nalgebra::DMatrix<f64>,
) -> (nalgebra::DMatrix<f64>, nalgebra::DMatrix<f64>) {
    let (n, m, d) = (x.len(), z.len(), x.dim());
    let (mut rx, mut rz) = (
        nalgebra::DMatrix::<f64>::zeros(n, d),
        nalgebra::DMatrix::<f64>::zeros(m, d),
    );
    for i in 0..n {
        for j in 0..m {
            let (mut gx, mut gz) = (vec![0.0; d], vec![0.0; d]);
            k.entry_vjp_inputs(
                x.row(i),
                z.row(j),
                false,
                k_bar[(i, j)],
                Some(&mut gx),
                Some(&mut gz),
            )
            .unwrap();
            for c in 0..d {
                rx[(i, c)] += gx[c];
                rz[(j, c)] += gz[c];
            }
        }
    }
    (rx, rz)
}
