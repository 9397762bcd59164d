//! The variational engines through the command line: JSON output, the
//! `--plot` reliability diagram and ELBO trace, `plot-trace` overlays of
//! mirror descent and gradient descent, the wine example, and clean failures.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("JSON written")).expect("valid JSON")
}

/// A PNG file of plausible size: the signature, an IHDR with sensible
/// dimensions, and more than a blank image's bytes.
fn assert_png(p: &Path) -> (u32, u32) {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(
        bytes.starts_with(&[0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n']),
        "{} is not a PNG",
        p.display()
    );
    assert_eq!(&bytes[12..16], b"IHDR");
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert!(
        (600..=2000).contains(&w) && (400..=2000).contains(&h),
        "{w}×{h}"
    );
    assert!(
        bytes.len() > 10_000,
        "{}: only {} bytes",
        p.display(),
        bytes.len()
    );
    (w, h)
}

const BC_TRAIN: [&str; 6] = [
    "run",
    "examples/breast_cancer.tempest",
    "--data",
    "examples/data/breast_cancer_prepared.csv",
    "--rows",
    "0..299",
];

const BC_TEST: [&str; 4] = [
    "--test",
    "examples/data/breast_cancer_prepared.csv",
    "--test-rows",
    "300..568",
];

/// The breast-cancer example without its `guide` block (`sites` is for
/// mirror descent only), so that both engines can run it.
fn bc_without_guide(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/breast_cancer.tempest"),
    )
    .expect("example");
    let without = text.replace("guide {\n  f : sites\n}\n", "");
    assert_ne!(without, text, "the example's guide block changed");
    let p = dir.join("breast_cancer_any_engine.tempest");
    std::fs::write(&p, without).unwrap();
    p
}

#[test]
fn breast_cancer_json_has_the_variational_results() {
    let json = out_dir("cli_vi_bc_json").join("bc.json");
    let mut args = BC_TRAIN.to_vec();
    args.extend(BC_TEST);
    args.extend(["--json", s(&json), "-q"]);
    let stdout = assert_ok(&tempest(&args));
    assert!(stdout.contains("mirror-descent VI"), "{stdout}");
    assert!(stdout.contains("ECE"), "{stdout}");
    let j = read_json(&json);
    assert_eq!(j["engine"], "mirror_descent");
    let elbo = j["elbo"].as_f64().expect("elbo");
    let trace: Vec<f64> = j["elbo_trace"]
        .as_array()
        .expect("elbo_trace")
        .iter()
        .map(|v| v.as_f64().expect("finite ELBO"))
        .collect();
    let steps = j["steps"].as_u64().expect("steps") as usize;
    assert_eq!(trace.len(), steps + 1, "the start and one ELBO per step");
    assert_eq!(*trace.last().unwrap(), elbo);
    assert!(elbo.is_finite() && elbo < 0.0, "{elbo}");
    assert!(trace[0] < elbo, "mirror descent raised the ELBO: {trace:?}");
    for w in trace.windows(2) {
        assert!(w[1] >= w[0] - 1e-9 * w[0].abs(), "the ELBO fell: {trace:?}");
    }
    assert!(j["hypers"]["ell"].as_f64().is_some());
    assert!(j["hypers"]["sf2"].as_f64().is_some());
    let t = &j["test"];
    let acc = t["accuracy"].as_f64().expect("accuracy");
    assert!(acc > 0.9, "accuracy {acc}");
    let mlpd = t["mean_log_predictive_density"].as_f64().expect("mlpd");
    assert!(mlpd < 0.0 && mlpd > -0.7, "mlpd {mlpd}");
    let ece = t["ece"].as_f64().expect("ece");
    let mce = t["mce"].as_f64().expect("mce");
    assert!((0.0..=1.0).contains(&ece) && ece <= mce && mce <= 1.0);
    let bins = t["bins"].as_array().expect("bins");
    let n: u64 = bins.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(n, 269, "every test point in a bin");
    let probs = j["predictions"]["probabilities"]
        .as_array()
        .expect("probabilities");
    assert_eq!(probs.len(), 269);
    // One latent GP: latent means and variances flat, one per test point.
    for key in ["mean_f", "var_f"] {
        let v = j["predictions"][key].as_array().expect(key);
        assert_eq!(v.len(), 269);
        assert!(v.iter().all(|x| x.is_f64()), "{key} not flat");
    }
}

#[test]
fn plot_draws_a_reliability_diagram_with_test_outcomes_and_the_trace_without() {
    let dir = out_dir("cli_vi_plot");
    let with_test = dir.join("reliability.png");
    let _ = std::fs::remove_file(&with_test);
    let mut args = BC_TRAIN.to_vec();
    args.extend(BC_TEST);
    args.extend(["--plot", s(&with_test), "-q"]);
    let stdout = assert_ok(&tempest(&args));
    assert!(stdout.contains("plot written to"), "{stdout}");
    let reliability = assert_png(&with_test);

    let without = dir.join("trace.png");
    let _ = std::fs::remove_file(&without);
    let mut args = BC_TRAIN.to_vec();
    args.extend(["--plot", s(&without), "-q"]);
    let stdout = assert_ok(&tempest(&args));
    assert!(stdout.contains("plot written to"), "{stdout}");
    let trace = assert_png(&without);
    assert_ne!(reliability, trace, "two different kinds of plot");

    // A variational fit with test outcomes but no classes: on one input
    // column the fit (960 × 600), on ten the trace.
    let reg = dir.join("regression.png");
    let stdout = assert_ok(&tempest(&[
        "run",
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--test",
        "examples/data/mcycle.csv",
        "--engine",
        "mirror_descent",
        "--plot",
        s(&reg),
        "-q",
    ]));
    assert!(stdout.contains("mean log predictive density"), "{stdout}");
    assert_eq!(assert_png(&reg), (960, 600));
    let reg10 = dir.join("regression10.png");
    assert_ok(&tempest(&[
        "run",
        "examples/diabetes.tempest",
        "--data",
        "examples/data/diabetes_prepared.csv",
        "--rows",
        "0..99",
        "--engine",
        "mirror_descent",
        "--plot",
        s(&reg10),
        "-q",
    ]));
    assert_eq!(assert_png(&reg10), trace);
}

#[test]
fn plot_trace_overlays_mirror_descent_and_gradient_descent() {
    let dir = out_dir("cli_vi_plot_trace");
    let model = bc_without_guide(&dir);
    let md = dir.join("md.json");
    let gd = dir.join("gd.json");
    for (engine, json, extra) in [
        ("mirror_descent", &md, None),
        ("gradient_descent", &gd, Some("steps=200")),
    ] {
        let mut args = vec![
            "run",
            s(&model),
            "--data",
            "examples/data/breast_cancer_prepared.csv",
            "--rows",
            "0..299",
            "--engine",
            engine,
            "--json",
            s(json),
            "-q",
        ];
        if let Some(x) = extra {
            args.extend(["--set", x]);
        }
        assert_ok(&tempest(&args));
        assert_eq!(read_json(json)["engine"], engine);
    }
    let (tm, tg) = (read_json(&md), read_json(&gd));
    let (em, eg) = (tm["elbo"].as_f64().unwrap(), tg["elbo"].as_f64().unwrap());
    assert_eq!(tg["elbo_trace"].as_array().unwrap().len(), 201);
    // Both start from the prior; mirror descent gets higher in far fewer steps.
    assert_rel(
        tm["elbo_trace"][0].as_f64().unwrap(),
        tg["elbo_trace"][0].as_f64().unwrap(),
        1e-9,
        "initial ELBO",
    );
    assert!(em > eg, "mirror descent {em}, gradient descent {eg}");
    assert!(tm["steps"].as_u64().unwrap() < 50);

    for (name, gap) in [("elbo.png", false), ("gap.png", true)] {
        let out = dir.join(name);
        let _ = std::fs::remove_file(&out);
        let mut args = vec!["plot-trace", "--out", s(&out), s(&md), s(&gd)];
        if gap {
            args.push("--gap");
        }
        let stdout = assert_ok(&tempest(&args));
        assert!(stdout.contains("plot written to"), "{stdout}");
        assert_png(&out);
    }
}

#[test]
fn plot_trace_fails_cleanly_on_bad_input() {
    let dir = out_dir("cli_vi_plot_trace_bad");
    let out = dir.join("never.png");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"engine\": \"mirror_descent\", \"elbo_trace\": [1,").unwrap();
    let err = assert_clean_failure(&tempest(&["plot-trace", "--out", s(&out), s(&bad)]));
    assert!(err.contains("not valid JSON"), "{err}");

    let no_trace = dir.join("exact.json");
    std::fs::write(
        &no_trace,
        "{\"engine\": \"exact\", \"log_marginal_likelihood\": -1.0}",
    )
    .unwrap();
    let err = assert_clean_failure(&tempest(&["plot-trace", "--out", s(&out), s(&no_trace)]));
    assert!(err.contains("elbo_trace"), "{err}");

    let missing = dir.join("missing.json");
    let err = assert_clean_failure(&tempest(&["plot-trace", "--out", s(&out), s(&missing)]));
    assert!(err.contains("cannot read"), "{err}");

    let empty = dir.join("empty_trace.json");
    std::fs::write(&empty, "{\"elbo_trace\": []}").unwrap();
    assert_clean_failure(&tempest(&["plot-trace", "--out", s(&out), s(&empty)]));
    assert!(!out.exists(), "no plot from bad input");
}

#[test]
fn wine_example_classifies_held_out_wines() {
    // wine.csv is sorted by class: hold out every third row.
    let dir = out_dir("cli_vi_wine");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/wine.csv"),
    )
    .expect("wine data");
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let (mut train, mut test) = (vec![header], vec![header]);
    for (i, l) in lines.filter(|l| !l.trim().is_empty()).enumerate() {
        if i % 3 == 2 { &mut test } else { &mut train }.push(l);
    }
    assert_eq!((train.len() - 1, test.len() - 1), (119, 59));
    let (tr, te) = (dir.join("train.csv"), dir.join("test.csv"));
    std::fs::write(&tr, train.join("\n") + "\n").unwrap();
    std::fs::write(&te, test.join("\n") + "\n").unwrap();
    let json = dir.join("wine.json");
    let plot = dir.join("wine.png");
    let stdout = assert_ok(&tempest(&[
        "run",
        "examples/wine.tempest",
        "--data",
        s(&tr),
        "--test",
        s(&te),
        "--json",
        s(&json),
        "--plot",
        s(&plot),
        "-q",
    ]));
    assert!(stdout.contains("3 latent GPs"), "{stdout}");
    let j = read_json(&json);
    assert_eq!(j["latent_gps"], 3);
    let acc = j["test"]["accuracy"].as_f64().unwrap();
    assert!(acc >= 0.95, "held-out accuracy {acc}");
    let mlpd = j["test"]["mean_log_predictive_density"].as_f64().unwrap();
    assert!(mlpd > -0.4, "mlpd {mlpd}");
    assert_eq!(j["hypers"]["ells"].as_array().unwrap().len(), 13);
    assert_png(&plot);
}
