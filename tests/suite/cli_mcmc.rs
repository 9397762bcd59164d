//! The samplers through the command line: the logistic example with Stan
//! CSV files, JSON and plots; the GP-hyper example; and clean failures.

use crate::common;
use common::*;

#[test]
fn logistic_example_writes_csv_json_and_plot() {
    let dir = out_dir("cli_mcmc_logistic");
    let prefix = dir.join("logistic");
    let json = dir.join("run.json");
    let png = dir.join("trace.png");
    let o = tempest(&[
        "run",
        "examples/logistic.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--set",
        "chains=2",
        "--set",
        "warmup=200",
        "--set",
        "draws=150",
        "--seed",
        "5",
        "--csv",
        prefix.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
        "--quiet",
    ]);
    let out = assert_ok(&o);
    for want in [
        "engine: nuts",
        "rhat",
        "ess_bulk",
        "ess_tail",
        "alpha",
        "beta[29]",
        "p_average",
        "divergences:",
    ] {
        assert!(out.contains(want), "missing {want} in\n{out}");
    }
    for c in 1..=2 {
        let text = std::fs::read_to_string(dir.join(format!("logistic_{c}.csv"))).unwrap();
        assert!(
            text.starts_with('#') && text.contains("# model = logistic"),
            "{}",
            &text[..80]
        );
        let header = text.lines().find(|l| !l.starts_with('#')).unwrap();
        assert!(header.starts_with(
            "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,alpha,beta.1,beta.2,"
        ));
        assert!(header.ends_with(",beta.30"));
        let rows = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        assert_eq!(rows, 151, "header and 150 draws");
        assert!(text.contains("seed = 5"), "the seed is recorded");
    }
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["engine"], "nuts");
    for key in ["mean", "sd", "rhat", "ess_bulk", "ess_tail"] {
        assert!(
            j["summary"]["alpha"][key].is_number(),
            "summary.alpha.{key}"
        );
    }
    assert!(j["sampling_seconds"].as_f64().unwrap() > 0.0);
    assert!(j["divergences"].is_u64());
    let est = &j["estimates"]["p_average"];
    assert!(
        est["mc"].is_number() && est["mc_se"].as_f64().unwrap() > 0.0,
        "{est}"
    );
    let png_bytes = std::fs::read(&png).unwrap();
    assert!(png_bytes.starts_with(b"\x89PNG"));
}

#[test]
fn seed_makes_runs_identical() {
    let run = |seed: &str| {
        let o = tempest(&[
            "run",
            "examples/logistic.tempest",
            "--data",
            "examples/data/breast_cancer_prepared.csv",
            "--rows",
            "0..99",
            "--set",
            "chains=2",
            "--set",
            "warmup=100",
            "--set",
            "draws=100",
            "--seed",
            seed,
            "--quiet",
        ]);
        let out = assert_ok(&o);
        // Drop the timing line.
        out.lines()
            .filter(|l| !l.starts_with("engine:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (a, b, c) = (run("3"), run("3"), run("4"));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn gp_hyper_example_samples_the_hypers() {
    let o = tempest(&[
        "run",
        "examples/mcycle_nuts.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--set",
        "chains=2",
        "--set",
        "warmup=150",
        "--set",
        "draws=100",
        "--quiet",
    ]);
    let out = assert_ok(&o);
    for want in ["ell", "sf", "sigma", "signal_to_noise"] {
        assert!(out.contains(want), "missing {want} in\n{out}");
    }
}

#[test]
fn sampler_misuse_fails_cleanly() {
    let dir = out_dir("cli_mcmc_errors");
    // --csv with an engine that has no draws.
    let o = tempest(&[
        "run",
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--csv",
        dir.join("x").to_str().unwrap(),
        "--quiet",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("--csv"), "{err}");
    // Test data without the model's columns.
    let o = tempest(&[
        "run",
        "examples/logistic.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--test",
        "examples/data/mcycle.csv",
        "--quiet",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("mcycle.csv") && err.contains("x0"), "{err}");
    // A bad sampler setting names the setting.
    let o = tempest(&[
        "run",
        "examples/logistic.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--set",
        "target_accept=1.5",
        "--quiet",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("target_accept"), "{err}");
    // An unwritable CSV prefix.
    let o = tempest(&[
        "run",
        "examples/logistic.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--csv",
        "/nonexistent/dir/draws",
        "--quiet",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("/nonexistent/dir/draws_1.csv"), "{err}");
}

/// Models the samplers refuse: each error names the file, line and column
/// with the source line, and says what is expected.
#[test]
fn sampler_model_errors_point_at_the_source() {
    let cases = [
        (
            "nuts_param_temperature",
            "nuts_param_temperature.tempest:10:23",
            "the power of a likelihood cannot depend on a param",
        ),
        (
            "nuts_inputs_depend_on_param",
            "nuts_inputs_depend_on_param.tempest:9:25",
            "sampling needs inputs that are data",
        ),
        (
            "nuts_estimate_of_integrated_gp",
            "nuts_estimate_of_integrated_gp.tempest:12:10",
            "integrated out when sampling",
        ),
    ];
    for (name, at, what) in cases {
        let model = format!("tests/models/run/{name}.tempest");
        let o = tempest(&[
            "run",
            &model,
            "--data",
            "tests/models/run/sampler_small.csv",
            "--quiet",
        ]);
        let err = assert_clean_failure(&o);
        assert!(err.contains(at), "{name}: no location {at} in\n{err}");
        assert!(err.contains(what), "{name}: no `{what}` in\n{err}");
        assert!(err.contains('│'), "{name}: no source excerpt in\n{err}");
    }
}

#[test]
fn evidence_example_writes_json_and_plot() {
    let dir = out_dir("cli_evidence");
    let json = dir.join("ev.json");
    let png = dir.join("ev.png");
    let o = tempest(&[
        "run",
        "examples/evidence.tempest",
        "--data",
        "examples/data/evidence_linreg.csv",
        "--set",
        "rungs=11",
        "--set",
        "control_variates=poly2",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        png.to_str().unwrap(),
        "--quiet",
    ]);
    let out = assert_ok(&o);
    assert!(out.contains("log evidence:"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["engine"], "evidence");
    assert!(j["log_evidence"].is_number() && j["mcse"].is_number());
    let rungs = j["rungs"].as_array().unwrap();
    assert_eq!(rungs.len(), 11);
    for key in ["t", "mean", "var"] {
        assert!(rungs[3][key].is_number(), "rungs[3].{key}");
    }
    assert_eq!(rungs[0]["t"], 0.0);
    assert_eq!(rungs[10]["t"], 1.0);
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn estimates_with_control_variates_from_the_command_line() {
    let dir = out_dir("cli_cv");
    let model = dir.join("cv.tempest");
    let text = std::fs::read_to_string("examples/logistic.tempest")
        .unwrap()
        .replace("\ninfer nuts", " using control_variates(poly1)\ninfer nuts");
    std::fs::write(&model, text).unwrap();
    let json = dir.join("cv.json");
    let o = tempest(&[
        "run",
        model.to_str().unwrap(),
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--rows",
        "0..199",
        "--set",
        "chains=2",
        "--set",
        "warmup=200",
        "--set",
        "draws=300",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    let out = assert_ok(&o);
    assert!(out.contains("control variates (poly1)"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let e = &j["estimates"]["p_average"];
    for key in ["mc", "mc_se", "cv", "cv_se", "variance_reduction"] {
        assert!(e[key].is_number(), "estimates.p_average.{key}: {e}");
    }
    assert_eq!(e["method"], "poly1");
    assert!(e["variance_reduction"].as_f64().unwrap() > 1.0, "{e}");
}

/// Control-variate methods that cannot work with the run's draws fail
/// before sampling, at the method's place in the model.
#[test]
fn unusable_control_variates_fail_before_sampling() {
    let dir = out_dir("cli_cv_errors");
    let model = dir.join("secf2.tempest");
    let text = std::fs::read_to_string("examples/logistic_cv.tempest")
        .unwrap()
        .replace(
            "control_variates(poly2)",
            "control_variates(secf(rbf, order = 2))",
        );
    std::fs::write(&model, text).unwrap();
    let o = tempest(&[
        "run",
        model.to_str().unwrap(),
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--quiet",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("secf2.tempest:25:9"), "{err}");
    assert!(err.contains("too few"), "{err}");
    let o = tempest(&[
        "run",
        "examples/evidence.tempest",
        "--data",
        "examples/data/evidence_linreg.csv",
        "--set",
        "control_variates=vector_valued(rbf, B = fixed([[1, 0], [0, 1]]))",
        "--quiet",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("give a 4×4 B"), "{err}");
}

#[test]
fn coarse_evidence_ladders_are_warned_about() {
    // The model's estimate block asks for poly2 control variates, which 300
    // draws could not fit; the evidence engine does not use the block, so
    // it neither checks nor fails on it.
    let dir = out_dir("cli_evidence_coarse");
    let json = dir.join("ev.json");
    let o = tempest(&[
        "run",
        "examples/logistic_cv.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--rows",
        "0..199",
        "--engine",
        "evidence",
        "--set",
        "rungs=3",
        "--set",
        "sampler=nuts { chains = 2  warmup = 150  draws = 150 }",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    let out = assert_ok(&o);
    assert!(out.contains("the ladder is too coarse"), "{out}");
    assert!(
        out.contains("note: the `estimate` block is not used"),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["warnings"].as_array().unwrap().len(), 1);
}
