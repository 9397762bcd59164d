//! Stopping runs from outside: real SIGINT and SIGTERM sent to the binary
//! while it is inside a loop that runs for many seconds (a stiff ODE
//! solve, svi's whole-data pass with many classes, sampling), and what
//! the stopped run leaves: a prompt exit with status 130, a report, JSON
//! and Stan CSV files that agree, and files another run cannot corrupt.
//! Also the ODE's step-limit message and test data checked before a run.

#![cfg(unix)]

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest any command here may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(60);
/// How soon after a signal a run must have ended (debug build, 2 busy
/// cores): the loops read the flag every few milliseconds.
const PROMPT: Duration = Duration::from_secs(15);

fn start(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tempest"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tempest")
}

/// Send `signal` (`INT`, `TERM`) to the child with `kill`.
fn signal(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{signal} failed");
}

/// Wait for the child to end within `limit` (killing it and failing the
/// test otherwise); its output and how long the wait took.
fn finish(mut child: Child, limit: Duration, what: &str) -> (Output, Duration) {
    let t = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!(
                "{what}: still running {limit:?} later\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (child.wait_with_output().expect("output"), t.elapsed())
}

/// Poll `ready` until it holds (failing the test after [`LIMIT`]).
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(t.elapsed() < LIMIT, "{what} never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The run ended because of the signal, cleanly: status 130 and an
/// `E-interrupted` message, no panic. Its standard output and error.
fn assert_interrupted(o: &Output) -> (String, String) {
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(130), "stdout: {out}\nstderr: {err}");
    assert!(err.contains("E-interrupted"), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("E-internal"),
        "{err}"
    );
    (out, err)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

/// Draw lines (not comments, not the header) in a Stan CSV file's text.
fn draw_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count()
        .saturating_sub(1)
}

fn draws_in(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| draw_lines(&t))
}

/// Draws written so far to chain `chain`'s file, under either name.
fn draws_so_far(prefix: &Path, chain: usize) -> usize {
    let (f, p) = csv_paths(prefix, chain);
    draws_in(&p).max(draws_in(&f))
}

/// `PREFIX_K.csv`, and its name while the run writes it.
fn csv_paths(prefix: &Path, chain: usize) -> (PathBuf, PathBuf) {
    let f = PathBuf::from(format!("{}_{chain}.csv", prefix.display()));
    let p = PathBuf::from(format!("{}.partial", f.display()));
    (f, p)
}

fn clear(prefix: &Path, chains: usize) {
    for c in 1..=chains {
        let (f, p) = csv_paths(prefix, c);
        let _ = std::fs::remove_file(f);
        let _ = std::fs::remove_file(p);
    }
}

/// A relaxation ODE made stiff by its parameter: dx/dt = −10⁶ a² (x − 1)
/// to t = 100 takes millions of steps for most a, but none at a = 0, where
/// binding evaluates the model.
const STIFF: &str = "system relax(t : real, x : vector[1], k : real) { [-k * (x[0] - 1)] }\n\
    data { n : int  ts : vector[n]  y : vector[n] }\n\
    param { a : real ~ normal(0, 1) }\n\
    model {\n  let x = ode(relax, [0.0], 0, ts, 1e6 * a^2, max_steps = 100000000)\n  y ~ normal(col(x, 0), 0.1)\n}\n\
    infer nuts { chains = 1  seed = 3 }\n";

/// Ctrl-C and SIGTERM reach a solve that runs for minutes (before, Ctrl-C
/// was ignored until the solve ended and SIGTERM killed the process with
/// no message).
#[test]
fn a_long_ode_solve_stops_on_sigint_and_sigterm() {
    let dir = out_dir("signals_ode");
    let m = write(&dir, "stiff.tempest", STIFF);
    let d = write(&dir, "stiff.csv", "ts,y\n1,1\n50,1\n100,1\n");
    for sig in ["INT", "TERM"] {
        let child = start(&["run", &m, "--data", &d, "-q"]);
        std::thread::sleep(Duration::from_millis(1000));
        signal(&child, sig);
        let (o, took) = finish(child, PROMPT, &format!("SIG{sig} during the solve"));
        let (_, err) = assert_interrupted(&o);
        assert!(err.contains("interrupted while solving the ODE"), "{err}");
        assert!(err.contains("stiff.tempest:5:"), "{err}");
        assert!(took < Duration::from_secs(5), "SIG{sig}: {took:?} to stop");
    }
}

/// `timeout` sends SIGTERM to the process and to its group: the same
/// request twice at once stops the run as one does (before, the process
/// died without a word).
#[test]
fn a_doubled_sigterm_still_reports_the_stop() {
    let dir = out_dir("signals_double");
    let m = write(&dir, "stiff.tempest", STIFF);
    let d = write(&dir, "stiff.csv", "ts,y\n1,1\n50,1\n100,1\n");
    let child = start(&["run", &m, "--data", &d, "-q"]);
    std::thread::sleep(Duration::from_millis(1000));
    signal(&child, "TERM");
    signal(&child, "TERM");
    let (o, _) = finish(child, PROMPT, "a doubled SIGTERM");
    assert_interrupted(&o);
}

/// svi's whole-data pass with 200 classes takes minutes; a signal during
/// it keeps what was learned, says the ELBO was not computed, and writes
/// the JSON (before, the pass ran to its end).
#[test]
fn svi_whole_data_pass_with_many_classes_stops() {
    let dir = out_dir("signals_svi");
    let mut csv = String::from("x1,x2,y\n");
    for i in 0..2000 {
        let y = i % 200;
        let (a, b) = ((i as f64 * 0.37).sin(), (i as f64 * 0.73).cos());
        csv.push_str(&format!(
            "{},{},{y}\n",
            (y % 20) as f64 + a,
            (y / 20) as f64 + b
        ));
    }
    let d = write(&dir, "classes.csv", &csv);
    let m = write(
        &dir,
        "classes.tempest",
        "data { n : int  X : matrix[n, 2] = columns([\"x1\", \"x2\"])  y : int<lower=0, upper=199>[n] }\n\
         hyper { ell : positive = 3.0  sf2 : positive = 1.0 }\n\
         model { f ~ gp(0, sf2 * rbf(ell))[200]\n y ~ categorical_logit(f(X)) }\n\
         guide { f : inducing(m = 20) }\n\
         infer svi { steps = 1, polish = 0, batch = 4 }\n",
    );
    let json = dir.join("svi.json");
    let _ = std::fs::remove_file(&json);
    let child = start(&[
        "run",
        &m,
        "--data",
        &d,
        "-q",
        "--json",
        json.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "INT");
    let (o, took) = finish(child, PROMPT, "SIGINT during svi");
    let (out, err) = assert_interrupted(&o);
    assert!(took < Duration::from_secs(5), "{took:?} to stop");
    assert!(
        out.contains("ELBO over the training data: not computed (interrupted)"),
        "{out}"
    );
    assert!(
        out.contains("sf2"),
        "the learned hypers are reported: {out}"
    );
    assert!(
        err.contains("the results above are from the run up to the stop"),
        "{err}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written")).unwrap();
    assert_eq!(j["interrupted"], serde_json::json!(true));
    assert!(j["elbo"].is_null(), "{}", j["elbo"]);
    assert!(
        j["notes"].to_string().contains("not computed"),
        "{}",
        j["notes"]
    );
}

/// Start a sampling run of the logistic regression writing `PREFIX_K.csv`.
fn sampling_run(dir: &Path, prefix: &Path, warmup: usize, json: Option<&Path>) -> Child {
    let text =
        format!("{LOGISTIC}infer nuts {{ chains = 2, warmup = {warmup}, draws = 1000000 }}\n");
    let m = write(dir, &format!("logistic{warmup}.tempest"), &text);
    let mut args = vec![
        "run".to_string(),
        m,
        "--data".into(),
        "examples/data/breast_cancer_prepared.csv".into(),
        "--csv".into(),
        prefix.to_string_lossy().into_owned(),
        "-q".into(),
    ];
    if let Some(j) = json {
        args.extend(["--json".into(), j.to_string_lossy().into_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    start(&args)
}

/// A stop while one chain is still warming up and another has draws: the
/// report and the CSV files agree (no draws in either); a stop when both
/// chains have draws: every file holds exactly the draws the report and
/// the JSON summarise, and `tempest summary` reads them back to the same
/// table (before, the files kept more draws than the report, or draws the
/// report said did not exist).
#[test]
fn a_stopped_run_leaves_csv_files_that_agree_with_its_report() {
    let dir = out_dir("signals_agree");
    // (warm-up, draws in some chain's file before the signal, in both)
    for (warmup, some, both) in [(150, 1, 0), (30, 20, 20)] {
        let prefix = dir.join(format!("draws{warmup}"));
        let json = dir.join(format!("run{warmup}.json"));
        clear(&prefix, 2);
        let _ = std::fs::remove_file(&json);
        let child = sampling_run(&dir, &prefix, warmup, Some(&json));
        wait_for("draws in the CSV files", || {
            let n: Vec<usize> = (1..=2).map(|c| draws_so_far(&prefix, c)).collect();
            n.iter().any(|&k| k >= some) && n.iter().all(|&k| k >= both)
        });
        signal(&child, "INT");
        let (o, _) = finish(child, PROMPT, "SIGINT while sampling");
        let (out, err) = assert_interrupted(&o);
        let in_files: Vec<usize> = (1..=2).map(|c| draws_so_far(&prefix, c)).collect();
        if err.contains("no draws were kept") {
            // Some chain was still warming up: no summary, no draws.
            assert!(out.is_empty(), "{out}");
            assert_eq!(in_files, vec![0, 0], "{err}");
            assert!(
                err.contains("hold each chain's header and no draws"),
                "{err}"
            );
            continue;
        }
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let kept = j["draws"].as_u64().expect("draws") as usize;
        assert!(
            out.contains(&format!("stopped early (cancelled): {kept} of 1000000")),
            "{out}"
        );
        assert_eq!(in_files, vec![kept, kept], "{out}");
        assert_eq!(j["interrupted"], serde_json::json!(true));
        assert!(
            err.contains("the Stan CSV files hold the draws summarised above"),
            "{err}"
        );
        for c in 1..=2 {
            let (f, p) = csv_paths(&prefix, c);
            assert!(!p.exists(), "{} left behind", p.display());
            let t = std::fs::read_to_string(&f).expect("CSV file");
            assert!(t.contains("# Stopped early (cancelled)"), "{t}");
        }
        if kept < 2 {
            continue;
        }
        let files: Vec<String> = (1..=2)
            .map(|c| csv_paths(&prefix, c).0.to_string_lossy().into_owned())
            .collect();
        let summary = assert_ok(&tempest(&["summary", &files[0], &files[1]]));
        assert!(
            summary.contains(&format!("{} draws after warm-up", 2 * kept)),
            "{summary}"
        );
        let alpha = |s: &str| {
            s.lines()
                .find(|l| l.trim_start().starts_with("alpha "))
                .map(str::to_string)
        };
        assert_eq!(
            alpha(&out),
            alpha(&summary),
            "run:\n{out}\nsummary:\n{summary}"
        );
    }
}

/// Two runs writing the same `--csv` prefix: the second is refused at once
/// (before, both wrote the same files and their lines interleaved), and
/// the first one's files stay whole.
#[test]
fn a_second_run_cannot_write_the_same_csv_files() {
    let dir = out_dir("signals_concurrent");
    let prefix = dir.join("shared");
    clear(&prefix, 2);
    let first = sampling_run(&dir, &prefix, 20, None);
    // Something written in the first run's file, so it holds the lock (a
    // file that merely exists may be between its creation and its lock,
    // and then the second run takes the lock and the first is refused).
    wait_for("the first run's CSV file", || {
        let (_, p) = csv_paths(&prefix, 1);
        std::fs::metadata(&p).is_ok_and(|m| m.len() > 0)
    });
    let second = sampling_run(&dir, &prefix, 20, None);
    let (o, took) = finish(second, PROMPT, "the second run");
    let err = assert_clean_failure(&o);
    assert!(err.contains("another run is writing it now"), "{err}");
    assert!(err.contains("shared_1.csv"), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    wait_for("draws in both files", || {
        (1..=2).all(|c| draws_so_far(&prefix, c) >= 5)
    });
    signal(&first, "INT");
    let (o, _) = finish(first, PROMPT, "the first run");
    assert_interrupted(&o);
    let files: Vec<String> = (1..=2)
        .map(|c| csv_paths(&prefix, c).0.to_string_lossy().into_owned())
        .collect();
    assert_ok(&tempest(&["summary", &files[0], &files[1]]));
}

/// An ODE solved at more output times than its step limit allows says so
/// when the data are bound, naming the limit and how to raise it (before:
/// "the system may be stiff", after the solve had used up its steps).
#[test]
fn too_many_output_times_are_named_as_the_cause() {
    let dir = out_dir("signals_ode_times");
    let m = write(
        &dir,
        "times.tempest",
        "system decay(t : real, x : vector[1], r : real) { [-r * x[0]] }\n\
         data { n : int  ts : vector[n]  y : vector[n] }\n\
         param { r : positive ~ lognormal(0, 1) }\n\
         model {\n  let x = ode(decay, [1.0], 0, ts, r, max_steps = 1000)\n  y ~ normal(col(x, 0), 0.1)\n}\n\
         infer nuts { }\n",
    );
    let mut csv = String::from("ts,y\n");
    for i in 1..=2000 {
        csv.push_str(&format!("{},0.5\n", i as f64 * 1e-3));
    }
    let d = write(&dir, "times.csv", &csv);
    let err = assert_clean_failure(&tempest(&["run", &m, "--data", &d, "-q"]));
    assert!(err.contains("2000 distinct output times"), "{err}");
    assert!(err.contains("max_steps = 1000"), "{err}");
    assert!(err.contains("raise `max_steps`"), "{err}");
    assert!(!err.contains("stiff"), "{err}");
    assert!(err.contains("times.tempest:5:"), "{err}");
}

/// Output times out of order in the test data are an error before the
/// sampler starts, at the test file's row (before, 20,000 draws were
/// written first and no JSON).
#[test]
fn ode_test_data_are_checked_before_sampling() {
    let dir = out_dir("signals_ode_test");
    let t = write(&dir, "bad_times.csv", "s,y\n1,1\n3,1\n2,1\n");
    let prefix = dir.join("vdp");
    let json = dir.join("vdp.json");
    clear(&prefix, 4);
    let _ = std::fs::remove_file(&json);
    let start = Instant::now();
    let err = assert_clean_failure(&tempest(&[
        "run",
        "examples/vanderpol.tempest",
        "--data",
        "examples/data/vanderpol.csv",
        "--test",
        &t,
        "--csv",
        prefix.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]));
    assert!(err.contains("bad_times.csv, row 2"), "{err}");
    assert!(err.contains("non-decreasing"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(20));
    for c in 1..=4 {
        let (f, p) = csv_paths(&prefix, c);
        assert!(
            !f.exists() && !p.exists(),
            "draws were written: {}",
            f.display()
        );
    }
}

/// From Rust, `RunOptions::cancel` reaches the same loops: a flag set from
/// another thread ends a run inside a long ODE solve at once.
#[test]
fn the_cancel_flag_of_run_options_stops_a_long_solve() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let m = model(STIFF);
    let csv = write(
        &out_dir("signals_api"),
        "stiff.csv",
        "ts,y\n1,1\n50,1\n100,1\n",
    );
    let data = tempest::Data::read(Path::new(&csv)).expect("data");
    let b = bind(&m, &data);
    let flag = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let cancel = flag.clone();
    std::thread::spawn(move || {
        let r = tempest::run(
            &b,
            tempest::RunOptions {
                cancel: Some(cancel),
                ..Default::default()
            },
        );
        let _ = tx.send(r.map(|_| ()));
    });
    std::thread::sleep(Duration::from_millis(500));
    flag.store(true, Ordering::SeqCst);
    let r = rx
        .recv_timeout(PROMPT)
        .expect("the run went on after the flag was set");
    let e = r.expect_err("a run stopped before its first draw has no fit");
    assert!(e.first().is_interrupted(), "{e}");
    assert!(e.first().message.contains("solving the ODE"), "{e}");
}
