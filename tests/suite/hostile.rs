//! Hostile input through the real binary: every fault found by trying
//! tempest as a hostile user would ends in a clean error or a correct
//! result, within a time bound, never in a signal, a hang or a silent
//! non-finite success. One test per fault.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest any one of these commands may take (debug build, 2 cores).
const LIMIT: Duration = Duration::from_secs(60);

/// Run the binary with a time limit; a run past it is killed and fails the
/// test as a hang. Returns the output and the wall time.
fn run_bounded(args: &[&str], stdout: Stdio, stderr: Stdio) -> (Output, Duration) {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tempest"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUST_BACKTRACE")
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("start tempest");
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("`tempest {}` ran past {LIMIT:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (out, start.elapsed())
}

/// [`run_bounded`] with standard output and error captured.
fn run(args: &[&str]) -> Output {
    run_bounded(args, Stdio::piped(), Stdio::piped()).0
}

/// Write `text` to a file in this test's folder.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

const MCYCLE: &str = "examples/data/mcycle.csv";

/// mcycle's exact GP with fixed or learned hypers.
fn mcycle_model(learn: bool) -> String {
    format!(
        "data {{ n : int\n t : vector[n] = column(\"times\")\n accel : vector[n] }}\n\
         hyper {{ ell : positive = 5.0\n sf : positive = 30.0\n sigma : positive = 20.0 }}\n\
         model {{ f ~ gp(0, sf^2 * matern52(ell))\n accel ~ normal(f(t), sigma) }}\n\
         infer exact {{ learn_hypers = {learn} }}\n"
    )
}

/// mcycle with one outcome replaced, or every time scaled.
fn mcycle_variant(dir: &Path, name: &str, big_outcome: bool, scale_times: f64) -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(MCYCLE))
        .expect("mcycle");
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            out.push_str(line);
        } else {
            let (t, a) = line.split_once(',').expect("two columns");
            let t: f64 = t.parse().unwrap();
            let a = if big_outcome && i == 5 { "1e300" } else { a };
            out.push_str(&format!("{},{a}", t * scale_times));
        }
        out.push('\n');
    }
    file(dir, name, &out)
}

#[test]
fn nested_ifs_are_a_syntax_error_in_check_and_run() {
    let dir = out_dir("hostile_ifs");
    for (depth, cmd) in [(9000, "check"), (4000, "run")] {
        let text = format!(
            "hyper {{ a : real = {}1.0{} }}\ninfer exact {{}}\n",
            "if true then ".repeat(depth),
            " else 1.0".repeat(depth)
        );
        let m = file(&dir, &format!("ifs{depth}.tempest"), &text);
        let mut args = vec![cmd, m.as_str()];
        if cmd == "run" {
            args.extend(["--data", MCYCLE]);
        }
        let err = assert_clean_failure(&run(&args));
        assert!(err.contains("nested more than 100 deep"), "{err}");
        // A long line is shown as a window around the error.
        assert!(err.lines().all(|l| l.chars().count() < 300), "{err}");
    }
}

#[test]
fn five_thousand_chained_lets_check_and_run() {
    let dir = out_dir("hostile_lets");
    let lets: Vec<String> = (0..5000)
        .map(|i| format!("let a{} = a{i} + 0.0", i + 1))
        .collect();
    let text = format!(
        "data {{ n : int\n t : vector[n] = column(\"times\")\n accel : vector[n] }}\n\
         hyper {{ sigma : positive = 20.0 }}\n\
         model {{ let a0 = 1.0\n{}\n f ~ gp(0, rbf(5.0))\n accel ~ normal(f(t), sigma * a5000) }}\n\
         infer exact {{}}\n",
        lets.join("\n")
    );
    let m = file(&dir, "lets.tempest", &text);
    assert_ok(&run(&["check", &m]));
    let out = assert_ok(&run(&["run", &m, "--data", MCYCLE, "-q"]));
    assert!(out.contains("log marginal likelihood: -"), "{out}");
}

#[test]
fn nested_calls_parse_at_once() {
    let dir = out_dir("hostile_calls");
    for depth in [22, 99] {
        let text = format!(
            "hyper {{ a : real = {}0.0{} }}\n",
            "sin(".repeat(depth),
            ")".repeat(depth)
        );
        let m = file(&dir, &format!("sin{depth}.tempest"), &text);
        let (o, took) = run_bounded(&["check", &m], Stdio::piped(), Stdio::piped());
        assert_ok(&o);
        assert!(took < Duration::from_secs(20), "{depth} deep took {took:?}");
    }
}

#[test]
fn absurd_sizes_are_refused_before_allocation() {
    let dir = out_dir("hostile_sizes");
    const CANCER: &str = "examples/data/breast_cancer_prepared.csv";
    // Beyond a setting's range, and within it but beyond the machine (the
    // memory a request needs, as a product of its sizes).
    for (name, infer, says) in [
        (
            "draws",
            "draws = 1000000000000",
            "`draws` expects an integer from 1 to 10000000",
        ),
        (
            "chains",
            "chains = 1024, draws = 10000000",
            "1024 chains × 10000000 draws",
        ),
    ] {
        let text = format!("{LOGISTIC}infer nuts {{ {infer} }}\n");
        let m = file(&dir, &format!("{name}.tempest"), &text);
        let err = assert_clean_failure(&run(&["run", &m, "--data", CANCER]));
        assert!(err.contains(says), "{err}");
    }
    let err = assert_clean_failure(&run(&[
        "run",
        "examples/wine.tempest",
        "--data",
        "examples/data/wine.csv",
        "--set",
        "quadrature=1e12",
    ]));
    assert!(err.contains("`quadrature` expects an integer"), "{err}");
    let text = "data { n : int\n t : vector[n] = column(\"times\")\n accel : vector[n] }\n\
                model { g ~ gp(0, rbf(5.0))[1000000000]\n accel ~ normal(g(t)[1], 1.0) }\n\
                infer mirror_descent {}\n";
    let m = file(&dir, "copies.tempest", text);
    let err = assert_clean_failure(&run(&["run", &m, "--data", MCYCLE]));
    assert!(err.contains("133 points × 1000000000 copies"), "{err}");
    let m = file(
        &dir,
        "hyper.tempest",
        "hyper { w : vector[1000000000000] = 0.0 }\nparam { a : real ~ normal(0, 1) }\ninfer nuts {}\n",
    );
    let err = assert_clean_failure(&run(&["run", &m, "--data", MCYCLE]));
    assert!(err.contains("the hyper `w` would need 32.0 TB"), "{err}");
}

#[test]
fn endless_sampler_settings_are_refused_and_improper_posteriors_named() {
    let dir = out_dir("hostile_sampler");
    let improper = "param { a : real\n b : positive }\ninfer nuts { chains = 2 }\n";
    let m = file(&dir, "improper.tempest", improper);
    for (set, says) in [
        (
            "chains=1000000",
            "`chains` expects an integer from 1 to 1024",
        ),
        (
            "max_depth=40",
            "`max_depth` expects an integer from 1 to 20",
        ),
        ("max_depth=20", "improper"),
    ] {
        let err = assert_clean_failure(&run(&["run", &m, "--data", MCYCLE, "--set", set]));
        assert!(err.contains(says), "{err}");
    }
    // Flat priors the data do not constrain: the draws run off to
    // infinity, which is an error, not a table of inf.
    let drift = "data { n : int\n y : vector[n] = column(\"times\") }\n\
                 param { a : real\n s : positive }\n\
                 model { y ~ normal(a, s) }\ninfer nuts { chains = 2, warmup = 200, draws = 200 }\n";
    let m = file(&dir, "drift.tempest", drift);
    let one_row = file(&dir, "one_row.csv", "times\n1.0\n");
    let o = run(&["run", &m, "--data", &one_row, "-q"]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("the draws of `s` are not finite"), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn a_huge_outcome_is_an_error_with_its_row_learning_or_not() {
    let dir = out_dir("hostile_outcome");
    let data = mcycle_variant(&dir, "big.csv", true, 1.0);
    for learn in [false, true] {
        let m = file(&dir, &format!("m{learn}.tempest"), &mcycle_model(learn));
        let err = assert_clean_failure(&run(&["run", &m, "--data", &data, "-q"]));
        assert!(
            err.contains("row 4") && err.contains("column `accel`") && err.contains("too large"),
            "{err}"
        );
    }
}

#[test]
fn test_inputs_far_away_predict_the_prior() {
    let dir = out_dir("hostile_far");
    let far = mcycle_variant(&dir, "far.csv", false, 1e300);
    let m = file(&dir, "m.tempest", &mcycle_model(false));
    let json = dir.join("fit.json");
    let out = assert_ok(&run(&[
        "run",
        &m,
        "--data",
        MCYCLE,
        "--test",
        &far,
        "--test-rows",
        "0..3",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]));
    assert!(!out.contains("NaN"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for (k, want) in [("mean", 0.0), ("var_f", 900.0)] {
        for v in j["predictions"][k].as_array().unwrap() {
            let v = v.as_f64().expect("a number, not null");
            assert!((v - want).abs() < 1e-9, "{k}: {v}");
        }
    }
}

#[test]
fn an_output_path_in_a_missing_folder_fails_before_the_run() {
    let (o, took) = run_bounded(
        &[
            "run",
            "examples/logistic.tempest",
            "--data",
            "examples/data/breast_cancer_prepared.csv",
            "--json",
            "/nonexistent-folder/fit.json",
        ],
        Stdio::piped(),
        Stdio::piped(),
    );
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("does not exist") && err.contains("before the run"),
        "{err}"
    );
    // The 4 × 2000-iteration run would take far longer than this.
    assert!(took < Duration::from_secs(10), "{took:?}");
    for (flag, path) in [
        ("--plot", "fit.jpg"),
        ("--csv", "/nonexistent-folder/draws"),
    ] {
        let o = run(&[
            "run",
            "examples/logistic.tempest",
            "--data",
            "examples/data/breast_cancer_prepared.csv",
            flag,
            path,
        ]);
        let err = assert_clean_failure(&o);
        assert!(err.contains(flag), "{err}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn full_devices_give_clean_exits() {
    let full = || Stdio::from(std::fs::File::create("/dev/full").expect("/dev/full"));
    let m = mcycle_model(false);
    let dir = out_dir("hostile_full");
    let m = file(&dir, "m.tempest", &m);
    let (o, _) = run_bounded(&["run", &m, "--data", MCYCLE, "-q"], full(), Stdio::piped());
    let err = assert_clean_failure(&o);
    assert!(err.contains("cannot write to standard output"), "{err}");
    let (o, _) = run_bounded(
        &["run", &m, "--data", "no-such-file.csv", "-q"],
        Stdio::piped(),
        full(),
    );
    assert_eq!(o.status.code(), Some(1), "exit status {:?}", o.status);
}

#[cfg(unix)]
#[test]
fn ctrl_c_keeps_what_was_written_and_exits_130() {
    let dir = out_dir("hostile_ctrl_c");
    for (warmup, draws, in_warmup) in [(200_000, 10, true), (50, 1_000_000, false)] {
        let text =
            format!("{LOGISTIC}infer nuts {{ chains = 2, warmup = {warmup}, draws = {draws} }}\n");
        let m = file(&dir, &format!("m{warmup}.tempest"), &text);
        let prefix = dir.join(format!("draws{warmup}"));
        let first = PathBuf::from(format!("{}_1.csv", prefix.display()));
        let _ = std::fs::remove_file(&first);
        let _ = std::fs::remove_file(format!("{}.partial", first.display()));
        let child = Command::new(env!("CARGO_BIN_EXE_tempest"))
            .args([
                "run",
                &m,
                "--data",
                "examples/data/breast_cancer_prepared.csv",
                "--csv",
                prefix.to_str().unwrap(),
                "-q",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start");
        // The CSV files appear (as `.partial` until the run ends) once
        // sampling is set up (the handler is installed before); give the
        // sampler a moment to make draws.
        let partial = PathBuf::from(format!("{}.partial", first.display()));
        let start = Instant::now();
        while !partial.exists() {
            assert!(start.elapsed() < LIMIT, "no CSV file appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
        let wait_draws = Instant::now();
        if !in_warmup {
            // Every chain must be past warm-up (a stop while any chain is
            // still warming up keeps no draws): wait for draw rows, not
            // comment lines, in both chains' files.
            let draw_rows = |chain: usize| {
                let path = format!("{}_{chain}.csv.partial", prefix.display());
                std::fs::read_to_string(path).map_or(0, |t| {
                    t.lines()
                        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit() || c == '-'))
                        .count()
                })
            };
            while draw_rows(1) < 20 || draw_rows(2) < 20 {
                assert!(wait_draws.elapsed() < LIMIT, "no draws were written");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let o = child.wait_with_output().expect("output");
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(130), "stdout: {out}\nstderr: {err}");
        assert!(err.contains("E-interrupted"), "{err}");
        assert!(!out.contains("NaN"), "{out}");
        if in_warmup {
            assert!(err.contains("no draws were kept"), "{err}");
            assert!(out.is_empty(), "{out}");
        } else {
            assert!(out.contains("stopped early (cancelled)"), "{out}");
            assert!(err.contains("Stan CSV files hold the draws"), "{err}");
        }
        assert!(first.exists());
    }
}

#[test]
fn a_byte_order_mark_may_open_a_model() {
    let dir = out_dir("hostile_bom");
    let m = file(
        &dir,
        "bom.tempest",
        &format!("\u{FEFF}{}", mcycle_model(false)),
    );
    let out = assert_ok(&run(&["check", &m]));
    assert!(out.contains(": ok ("), "{out}");
    // Columns on the first line count from the first visible character.
    let m = file(&dir, "bom_bad.tempest", "\u{FEFF}data { x : reel }\n");
    let err = assert_clean_failure(&run(&["check", &m]));
    assert!(err.contains("bom_bad.tempest:1:"), "{err}");
}

/// A likelihood declared with too few parameters and then used is the
/// definition's error, not a crash where it is used (found by
/// `no_panic::edited_models_never_panic`).
#[test]
fn a_likelihood_without_parameters_is_an_error_where_used() {
    let dir = out_dir("hostile_likelihood_arity");
    for params in ["", "y : real"] {
        let text = format!(
            "likelihood bad({params}) {{ 1.0 }}\ndata {{ n : int  y : vector[n] }}\nparam {{ m : real }}\nmodel {{ y ~ bad(m) }}\n"
        );
        let m = file(&dir, "bad.tempest", &text);
        let (o, _) = run_bounded(&["check", &m], Stdio::piped(), Stdio::piped());
        let err = assert_clean_failure(&o);
        assert!(
            err.contains("a likelihood takes the observation and the latent value first"),
            "{err}"
        );
    }
}

#[test]
fn an_ode_solution_too_large_for_memory_is_refused_before_solving() {
    // 300,000 output times of a 300,000-element state: 720 GB of numbers.
    let dir = out_dir("hostile_ode");
    let n = 300_000;
    let ts: Vec<String> = (0..n).map(|i| format!("{}", i as f64 * 1e-3)).collect();
    let data = file(
        &dir,
        "big.json",
        &format!("{{\"n\": {n}, \"m\": {n}, \"ts\": [{}]}}", ts.join(",")),
    );
    let model = file(
        &dir,
        "big.tempest",
        "system big(t : real, x : vector[n], k : real) { -k * x }\n\
         data { n : int  m : int  ts : vector[m]  x0 : vector[n] = ts }\n\
         param { k : positive ~ lognormal(0, 1) }\n\
         model { let x = ode(big, x0, 0, ts, k) }\n\
         infer nuts { chains = 1  warmup = 5  draws = 5 }\n",
    );
    let err = assert_clean_failure(&run(&["run", &model, "--data", &data, "-q"]));
    assert!(
        err.contains("the ODE solution") && err.contains("memory"),
        "{err}"
    );
}
