//! The command line end to end: runs, JSON output, plots, and clean failures.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};

const DIABETES: [&str; 9] = [
    "run",
    "examples/diabetes.tempest",
    "--data",
    "examples/data/diabetes_prepared.csv",
    "--rows",
    "0..299",
    "--test",
    "examples/data/diabetes_prepared.csv",
    "--test-rows",
];

#[test]
fn diabetes_example_matches_reference_through_the_cli() {
    let json = out_dir("cli_diabetes").join("fit.json");
    let mut args: Vec<&str> = DIABETES.to_vec();
    args.extend([
        "300..304",
        "--set",
        "ell=1.0",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    let o = tempest(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("log marginal likelihood"), "{stdout}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = reference("gp_regression_exact.json");
    let want = &r["lengthscale_1"]["secondary_l1"]["numpy"];
    assert_eq!(j["engine"], "exact");
    assert_rel(
        j["log_marginal_likelihood"].as_f64().unwrap(),
        want["lml"].as_f64().unwrap(),
        1e-9,
        "lml",
    );
    assert_eq!(j["hypers"]["ell"].as_f64(), Some(1.0));
    for key in ["mean", "var_f", "var_y"] {
        let got = j["predictions"][key].as_array().unwrap();
        let exp = want[key].as_array().unwrap();
        assert_eq!(got.len(), 5);
        for (a, b) in got.iter().zip(exp) {
            assert_rel(a.as_f64().unwrap(), b.as_f64().unwrap(), 1e-9, key);
        }
    }
    assert!(j["predictions"]["mean_log_predictive_density"].is_f64());
}

#[test]
fn learning_hypers_from_the_command_line() {
    let json = out_dir("cli_learn").join("fit.json");
    let o = tempest(&[
        "run",
        "examples/diabetes.tempest",
        "--data",
        "examples/data/diabetes_prepared.csv",
        "--rows",
        "0..299",
        "--set",
        "learn_hypers=true",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(j["log_marginal_likelihood"].as_f64().unwrap() > -548.0);
    assert_eq!(j["optimizer"]["converged"], true);
    assert!(j["optimizer"]["gradient_norm"].as_f64().unwrap() < 1e-5);
    assert_eq!(j["learned"].as_array().unwrap().len(), 3);
}

#[test]
fn one_dimensional_fit_draws_a_plot() {
    let png = out_dir("cli_plot").join("mcycle.png");
    let _ = std::fs::remove_file(&png);
    let o = tempest(&[
        "run",
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--plot",
        png.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&png).expect("plot written");
    assert!(bytes.len() > 10_000 && bytes.starts_with(&[0x89, b'P', b'N', b'G']));
}

#[test]
fn plot_of_a_multi_input_model_is_a_clean_error() {
    let png = out_dir("cli_plot2").join("x.png");
    let mut args: Vec<&str> = DIABETES[..6].to_vec();
    args.extend(["--plot", png.to_str().unwrap(), "-q"]);
    let err = assert_clean_failure(&tempest(&args));
    assert!(err.contains("1-D inputs"), "{err}");
}

#[test]
fn emit_prints_each_stage() {
    let o = tempest(&["emit", "ast", "tests/models/good/kitchen_sink.tempest"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("(program"));
    let o = tempest(&["emit", "ir", "tests/models/good/kitchen_sink.tempest"]);
    assert!(o.status.success());
    let ir = String::from_utf8_lossy(&o.stdout);
    assert!(
        ir.starts_with("graph") && ir.contains("site") && ir.contains("observe"),
        "{ir}"
    );
    let o = tempest(&[
        "check",
        "examples/diabetes.tempest",
        "--data",
        "examples/data/diabetes_prepared.csv",
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("n = 442"));
}

#[test]
fn missing_engines_and_bad_options_fail_cleanly() {
    let mut args: Vec<&str> = DIABETES[..6].to_vec();
    args.extend(["--engine", "meta"]);
    let err = assert_clean_failure(&tempest(&args));
    assert!(err.contains("not available in this version"), "{err}");
    // The flag is named (it has no place in the model file), and an engine
    // that cannot run says so before refusing test data or a CSV prefix.
    assert!(err.contains("--engine meta:"), "{err}");
    let csv = out_dir("missing_engine").join("draws");
    for extra in [
        vec!["--test", "examples/data/diabetes_prepared.csv"],
        vec!["--csv", csv.to_str().unwrap()],
    ] {
        let mut with = args.clone();
        with.extend(extra);
        let err = assert_clean_failure(&tempest(&with));
        assert!(err.contains("not available in this version"), "{err}");
    }

    // A model without params has nothing to sample.
    let mut args: Vec<&str> = DIABETES[..6].to_vec();
    args.extend(["--engine", "nuts"]);
    let err = assert_clean_failure(&tempest(&args));
    assert!(err.contains("no params to sample"), "{err}");

    let mut args: Vec<&str> = DIABETES[..6].to_vec();
    args.extend(["--set", "learn_hyprs=true"]);
    let err = assert_clean_failure(&tempest(&args));
    assert!(err.contains("did you mean `learn_hypers`"), "{err}");

    let err = assert_clean_failure(&tempest(&[
        "run",
        "examples/diabetes.tempest",
        "--data",
        "examples/data/diabetes_prepared.csv",
        "--rows",
        "9..2",
    ]));
    assert!(err.contains("--rows"), "{err}");

    let err = assert_clean_failure(&tempest(&[
        "run",
        "no/such/model.tempest",
        "--data",
        "x.csv",
    ]));
    assert!(err.contains("cannot read model file"), "{err}");

    let err = assert_clean_failure(&tempest(&[
        "run",
        "examples/diabetes.tempest",
        "--data",
        "no/such.csv",
    ]));
    assert!(err.contains("cannot read data file"), "{err}");
}

#[test]
fn usage_errors_exit_with_two() {
    let o = tempest(&["run"]);
    assert_eq!(o.status.code(), Some(2));
    let o = tempest(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn exact_engine_refuses_inputs_that_depend_on_hypers() {
    let err = assert_clean_failure(&tempest(&[
        "run",
        "tests/models/run/inputs_depend_on_hyper.tempest",
        "--data",
        "tests/models/run/inputs_depend_on_hyper.csv",
    ]));
    assert!(err.contains("depend on `s`"), "{err}");
}

#[test]
fn temperature_can_be_set_for_tempered_likelihoods() {
    let dir = out_dir("cli_temperature");
    let model = dir.join("tempered.tempest");
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mcycle.tempest"),
    )
    .unwrap()
    .replace(
        "accel ~ normal(f(t), sigma)",
        "accel ~ normal(f(t), sigma) ^ temperature",
    )
    .replace("learn_hypers = true", "learn_hypers = false");
    std::fs::write(&model, text).unwrap();
    let lml = |t: &str| {
        let json = dir.join(format!("t{t}.json"));
        let setting = format!("temperature={t}");
        let o = tempest(&[
            "run",
            model.to_str().unwrap(),
            "--data",
            "examples/data/mcycle.csv",
            "--set",
            &setting,
            "--json",
            json.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        j["log_marginal_likelihood"].as_f64().unwrap()
    };
    // t = 0 is the prior (log evidence 0); t = 1 is the usual marginal likelihood.
    assert_eq!(lml("0"), 0.0);
    let one = lml("1");
    assert!(one < 0.0);
    let half = lml("0.5");
    assert!(half.is_finite() && half != one);
}

/// `restarts = k` runs L-BFGS k more times from seeded perturbed starts and
/// keeps the best run: the JSON lists every run's log marginal likelihood,
/// the kept one is the highest, and the same seed gives the same result.
#[test]
fn restarts_keep_the_best_run_and_are_reproducible() {
    let dir = out_dir("cli_restarts");
    let run = |name: &str| {
        let json = dir.join(name);
        let o = tempest(&[
            "run",
            "examples/mcycle.tempest",
            "--data",
            "examples/data/mcycle.csv",
            "--set",
            "restarts=3",
            "--seed",
            "7",
            "--json",
            json.to_str().unwrap(),
        ]);
        let out = assert_ok(&o);
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (out, j)
    };
    let (out, j) = run("a.json");
    assert!(out.contains("restarts: 4 runs, the best from"), "{out}");
    let starts: Vec<f64> = j["optimizer"]["starts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(starts.len(), 4);
    let best = j["optimizer"]["best_start"].as_u64().unwrap() as usize;
    let lml = j["log_marginal_likelihood"].as_f64().unwrap();
    assert!(starts.iter().all(|s| *s <= starts[best]), "{starts:?}");
    assert!(
        (lml - starts[best]).abs() <= 1e-9 * lml.abs(),
        "{lml} vs {starts:?}"
    );
    let (_, again) = run("b.json");
    assert_eq!(
        j["log_marginal_likelihood"],
        again["log_marginal_likelihood"]
    );
    assert_eq!(j["optimizer"]["starts"], again["optimizer"]["starts"]);
}

/// A hyper the data do not hold (α of a rational-quadratic kernel fitted
/// to a smooth function grows without bound, the kernel becoming an rbf)
/// is named in a warning and in the JSON.
#[test]
fn a_run_away_hyper_is_named() {
    let dir = out_dir("cli_run_away");
    let data = dir.join("sine.csv");
    let mut text = String::from("x,y\n");
    let mut state: u64 = 3;
    for i in 0..80 {
        let x = i as f64 / 8.0;
        // Noise: a sum of uniforms from a linear congruential sequence.
        let mut noise = 0.0;
        for _ in 0..12 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            noise += (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        }
        text.push_str(&format!("{x},{}\n", x.sin() + 0.1 * noise));
    }
    std::fs::write(&data, text).unwrap();
    let model = dir.join("rq.tempest");
    std::fs::write(
        &model,
        "kernel rq(ell : positive, alpha : positive)(x, x2) {\n  (1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha)\n}\n\
         data { n : int  x : vector[n]  y : vector[n] }\n\
         hyper { ell : positive = 1.0  alpha : positive = 1.0  sf : positive = 1.0  sigma : positive = 1.0 }\n\
         model {\n  f ~ gp(0, sf^2 * rq(ell, alpha))\n  y ~ normal(f(x), sigma)\n}\n\
         infer exact { learn_hypers = true }\n",
    )
    .unwrap();
    let json = dir.join("fit.json");
    let (out, j) = run_json(&model, &data, &[], &json);
    assert!(
        out.contains("warning: `alpha` grew from 1.0000 to"),
        "{out}"
    );
    let r = j["optimizer"]["run_aways"].as_array().unwrap();
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(r[0].as_str().unwrap().starts_with("`alpha` grew"));
    // An upper bound (`positive<upper=…>`) holds it, and the warning says
    // it ended against the bound; a prior (MAP-II) keeps it finite, with no
    // warning, and the log prior reported is the log-normal density at the
    // value found.
    let variant = |decl: &str, name: &str| {
        let text = std::fs::read_to_string(&model)
            .unwrap()
            .replace("alpha : positive = 1.0", decl);
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        run_json(&path, &data, &[], &json)
    };
    let (out, j) = variant("alpha : positive<upper=1e3> = 1.0", "rq_bounded.tempest");
    assert!(out.contains("`alpha` ended at"), "{out}");
    assert!(out.contains("against its upper bound"), "{out}");
    let alpha = j["hypers"]["alpha"].as_f64().unwrap();
    assert!(alpha <= 1e3 && alpha > 900.0, "{alpha}");
    let (out, j) = variant(
        "alpha : positive = 1.0 ~ lognormal(0, 1)",
        "rq_prior.tempest",
    );
    assert!(!out.contains("warning"), "{out}");
    assert!(out.contains("log prior of the hypers:"), "{out}");
    let alpha = j["hypers"]["alpha"].as_f64().unwrap();
    assert!(alpha > 0.1 && alpha < 100.0, "{alpha}");
    let want = -alpha.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() - 0.5 * alpha.ln().powi(2);
    assert_rel(j["log_prior"].as_f64().unwrap(), want, 1e-9, "log prior");
    assert!(j["optimizer"]["run_aways"].as_array().unwrap().is_empty());
}

/// Priors on hypers (MAP-II) on mcycle: the log prior is the closed-form
/// density at the hypers found, on the constrained scale (a hyper that
/// the likelihood ignores ends at its prior's mode, not the mode of its
/// log-transform), and the MAP objective beats the ML hypers' value of it
/// while the ML log marginal likelihood beats the MAP one.
#[test]
fn priors_on_hypers_give_map_ii() {
    let dir = out_dir("cli_map_ii");
    let text = std::fs::read_to_string("examples/mcycle.tempest")
        .unwrap()
        .replace(
            "ell : positive = 5.0",
            "ell : positive = 5.0 ~ lognormal(log(2), 0.3)",
        )
        .replace(
            "sigma : positive = 20.0",
            "sigma : positive = 20.0\n  u : positive = 0.3 ~ gamma(3, 2)",
        );
    assert!(text.contains("~ gamma"));
    let model = dir.join("mcycle_map.tempest");
    std::fs::write(&model, text).unwrap();
    let data = Path::new("examples/data/mcycle.csv");
    let (out, map) = run_json(&model, data, &[], &dir.join("map.json"));
    let ml_model = Path::new("examples/mcycle.tempest");
    let (_, ml) = run_json(ml_model, data, &[], &dir.join("ml.json"));
    assert!(out.contains("MAP-II objective"), "{out}");
    let ln2pi = (2.0 * std::f64::consts::PI).ln();
    let lp_ell =
        |x: f64| -x.ln() - 0.3f64.ln() - 0.5 * ln2pi - 0.5 * ((x.ln() - 2f64.ln()) / 0.3).powi(2);
    // gamma(shape 3, rate 2) at x: 3 log 2 + 2 log x − 2x − log Γ(3).
    let lp_u = |x: f64| 3.0 * 2f64.ln() + 2.0 * x.ln() - 2.0 * x - 2f64.ln();
    let h = &map["hypers"];
    let (ell, u) = (h["ell"].as_f64().unwrap(), h["u"].as_f64().unwrap());
    // The mode of gamma(3, 2) is (3 − 1)/2 = 1; with the log-Jacobian it
    // would be 3/2.
    assert!((u - 1.0).abs() < 1e-3, "u = {u}");
    let lp = map["log_prior"].as_f64().unwrap();
    assert_rel(lp, lp_ell(ell) + lp_u(u), 1e-9, "log prior");
    let lml_map = map["log_marginal_likelihood"].as_f64().unwrap();
    assert_rel(
        map["objective"].as_f64().unwrap(),
        lml_map + lp,
        1e-12,
        "objective",
    );
    let lml_ml = ml["log_marginal_likelihood"].as_f64().unwrap();
    let ell_ml = ml["hypers"]["ell"].as_f64().unwrap();
    assert!(lml_ml > lml_map + 0.1, "{lml_ml} against {lml_map}");
    assert!(
        lml_map + lp > lml_ml + lp_ell(ell_ml) + lp_u(1.0) + 0.1,
        "the MAP objective is not the larger"
    );
    // The prior pulls ell from its ML value toward the prior's mode
    // exp(log 2 − 0.09) ≈ 1.83.
    assert!(ell < ell_ml && ell > 1.83, "{ell} against {ell_ml}");
    assert!(map["optimizer"]["converged"].as_bool().unwrap());
    // Samplers refuse a prior on a hyper, and say where it is.
    let o = tempest(&[
        "run",
        model.to_str().unwrap(),
        "--data",
        "examples/data/mcycle.csv",
        "--engine",
        "nuts",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("declare it in `param`"), "{err}");
    assert!(err.contains("mcycle_map.tempest:12:"), "{err}");
}

/// The first command of the README: the CO2 model learns its 12 hypers to
/// at least the log marginal likelihood scikit-learn reaches on the same
/// kernel (−185.13; −184.79 is the optimum from these starting values),
/// converges, and forecasts the ten years after the record with a band
/// that widens with the horizon.
#[test]
fn the_co2_example_learns_and_forecasts() {
    let dir = out_dir("cli_co2");
    let (json, png) = (dir.join("co2.json"), dir.join("co2.png"));
    let _ = std::fs::remove_file(&png);
    let o = tempest(&[
        "run",
        "examples/co2.tempest",
        "--data",
        "examples/data/co2.csv",
        "--test",
        "examples/data/co2_forecast.csv",
        "--plot",
        png.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let out = assert_ok(&o);
    assert!(!out.contains("warning"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lml = j["log_marginal_likelihood"].as_f64().unwrap();
    assert!(lml >= -184.83, "{lml}");
    assert_eq!(j["optimizer"]["converged"], true);
    assert_eq!(j["learned"].as_array().unwrap().len(), 12);
    let num = |v: &serde_json::Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let mean = num(&j["predictions"]["mean"]);
    let var = num(&j["predictions"]["var_y"]);
    assert_eq!(mean.len(), 120);
    // April 2020 was 416.18 ppm; the next months stay near it, and ten
    // years on the trend has gone up.
    assert!((mean[0] - 416.2).abs() < 3.0, "{}", mean[0]);
    assert!(mean[119] > mean[0] + 10.0, "{} {}", mean[0], mean[119]);
    assert!(var[119] > 4.0 * var[0], "{} {}", var[0], var[119]);
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
}

/// MAP-II in a variational engine: a tight prior on the negative-binomial
/// dispersion of roaches pulls it from its ML-II value (about 0.4 on these
/// rows) to near the prior's mode, and the log prior reported is the
/// closed-form density there.
#[test]
fn a_prior_on_a_hyper_steers_mirror_descent() {
    let dir = out_dir("cli_map_vi");
    let text = std::fs::read_to_string("examples/roaches.tempest")
        .unwrap()
        .replace(
            "r : positive = 1.0",
            "r : positive = 1.0 ~ lognormal(log(2), 0.05)",
        );
    let model = dir.join("roaches_map.tempest");
    std::fs::write(&model, text).unwrap();
    let data = Path::new("examples/data/roaches.csv");
    let extra = ["--rows", "0..59", "--set", "steps=400"];
    let (out, map) = run_json(&model, data, &extra, &dir.join("map.json"));
    let ml_model = Path::new("examples/roaches.tempest");
    let (_, ml) = run_json(ml_model, data, &extra, &dir.join("ml.json"));
    assert!(out.contains("log prior of the hypers:"), "{out}");
    let r = map["hypers"]["r"].as_f64().unwrap();
    let r_ml = ml["hypers"]["r"].as_f64().unwrap();
    assert!(r_ml < 1.0 && r > 1.5 && r < 2.0, "r = {r}, ML r = {r_ml}");
    assert!(ml.get("log_prior").is_none());
    let z = (r.ln() - 2f64.ln()) / 0.05;
    let want = -r.ln() - 0.05f64.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() - 0.5 * z * z;
    assert_rel(map["log_prior"].as_f64().unwrap(), want, 1e-9, "log prior");
    let elbo = map["elbo"].as_f64().unwrap();
    assert_rel(
        map["objective"].as_f64().unwrap(),
        elbo + want,
        1e-9,
        "objective",
    );
}

/// The built-in `neg_binomial_2_log` and the model-file negative binomial
/// of examples/roaches.tempest are the same density: mirror descent gives
/// the same ELBO and hypers with either.
#[test]
fn builtin_and_model_file_negative_binomials_agree() {
    let dir = out_dir("cli_negbin");
    let text = std::fs::read_to_string("examples/roaches.tempest").unwrap();
    let builtin = dir.join("roaches_builtin.tempest");
    std::fs::write(
        &builtin,
        text.replace("y ~ neg_binomial_log(", "y ~ neg_binomial_2_log("),
    )
    .unwrap();
    let data = Path::new("examples/data/roaches.csv");
    let extra = ["--rows", "0..79", "--set", "steps=40"];
    let model = Path::new("examples/roaches.tempest");
    let (_, a) = run_json(model, data, &extra, &dir.join("file.json"));
    let (_, b) = run_json(&builtin, data, &extra, &dir.join("builtin.json"));
    assert_rel(
        a["elbo"].as_f64().unwrap(),
        b["elbo"].as_f64().unwrap(),
        1e-9,
        "ELBO",
    );
    assert_rel(
        a["hypers"]["r"].as_f64().unwrap(),
        b["hypers"]["r"].as_f64().unwrap(),
        1e-7,
        "r",
    );
}

/// A hyper's prior is checked at binding (`tempest check --data` finds a
/// shape error in it), and a hyper outside its prior's support at the start
/// is an error at the prior, not a non-finite objective.
#[test]
fn hyper_priors_are_checked_before_running() {
    let dir = out_dir("cli_hyper_prior_checks");
    let data = dir.join("d.csv");
    std::fs::write(&data, "x,y\n1,2\n2,3\n3,1\n").unwrap();
    let model = dir.join("shape.tempest");
    std::fs::write(
        &model,
        "data { n : int  x : vector[n]  y : vector[n] }\n\
         hyper {\n  v : vector[2] = 0.3 ~ normal(x, 1)\n  s : positive = 1.0\n}\n\
         model {\n  f ~ gp(0, rbf(1.0))\n  y ~ normal(f(x), s)\n}\n",
    )
    .unwrap();
    let o = tempest(&[
        "check",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
    ]);
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("E-shape") && err.contains("shape.tempest:3:32"),
        "{err}"
    );
    let text = std::fs::read_to_string("examples/roaches.tempest")
        .unwrap()
        .replace("r : positive = 1.0", "r : positive = 1.0 ~ uniform(2, 3)");
    let roaches = dir.join("roaches_support.tempest");
    std::fs::write(&roaches, text).unwrap();
    let o = tempest(&[
        "run",
        roaches.to_str().unwrap(),
        "--data",
        "examples/data/roaches.csv",
    ]);
    let err = assert_clean_failure(&o);
    assert!(err.contains("the log prior of `r` is -inf"), "{err}");
    assert!(err.contains("roaches_support.tempest:"), "{err}");
}

/// A model without data runs without `--data`; a model with data says
/// which declarations need the file.
#[test]
fn data_is_needed_only_by_models_that_declare_it() {
    let dir = out_dir("cli_no_data");
    let model = dir.join("prior.tempest");
    std::fs::write(
        &model,
        "param { x : real ~ normal(1, 2) }\nmodel { }\ninfer nuts { }\n",
    )
    .unwrap();
    let out = assert_ok(&tempest(&["run", model.to_str().unwrap(), "-q"]));
    assert!(out.contains("engine: nuts"), "{out}");
    let err = assert_clean_failure(&tempest(&["run", "examples/eight_schools.tempest", "-q"]));
    assert!(
        err.contains(
            "the model declares data (`J`, `y`, `sigma`); give the file with `--data FILE`"
        ),
        "{err}"
    );
    assert!(err.contains("eight_schools.tempest:"), "{err}");
    let err = assert_clean_failure(&tempest(&[
        "run",
        model.to_str().unwrap(),
        "--rows",
        "0..3",
    ]));
    assert!(err.contains("`--rows` selects rows of `--data`"), "{err}");
}

/// `tempest check` with data builds the engine the run would use: a model
/// that engine cannot run fails at check as at run, located.
#[test]
fn check_fails_where_the_engine_cannot_run() {
    let dir = out_dir("cli_check_engine");
    let model = dir.join("md.tempest");
    let text = std::fs::read_to_string("examples/satellite.tempest")
        .unwrap()
        .replace("infer svi { }", "infer mirror_descent { }");
    std::fs::write(&model, text).unwrap();
    let args = |cmd: &'static str| {
        [
            cmd.to_string(),
            model.to_str().unwrap().to_string(),
            "--data".into(),
            "../shared/data/satellite_prepared.csv".into(),
            "--rows".into(),
            "0..99".into(),
            "-q".into(),
        ]
    };
    let check: Vec<String> = args("check")[..6].to_vec();
    let check: Vec<&str> = check.iter().map(String::as_str).collect();
    let err = assert_clean_failure(&tempest(&check));
    assert!(
        err.contains("the `mirror_descent` engine works with the family `sites`"),
        "{err}"
    );
    assert!(err.contains("md.tempest:"), "{err}");
    let run = args("run");
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let err_run = assert_clean_failure(&tempest(&run));
    assert!(
        err_run.contains("works with the family `sites`"),
        "{err_run}"
    );
    // A model without data is checked with its engine too.
    let ok = assert_ok(&tempest(&[
        "check",
        "examples/eight_schools.tempest",
        "--data",
        "examples/eight_schools.json",
    ]));
    assert!(ok.contains(": ok"), "{ok}");
}
