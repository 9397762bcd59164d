//! `tempest run --save FIT.json` on every engine that predicts, and
//! `tempest predict`: the same predictions without training again, class
//! labels carried along, a changed file and an engine without predictions
//! refused.

use crate::common;

use common::{assert_clean_failure, assert_ok, mcycle_split, out_dir, tempest};

/// Two JSON values equal up to a relative `tol` in every number.
fn assert_close(a: &serde_json::Value, b: &serde_json::Value, tol: f64, at: &str) {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= tol * x.abs().max(y.abs()).max(1e-300),
                "{at}: {x} vs {y}"
            );
        }
        (J::Array(x), J::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            for (k, (u, v)) in x.iter().zip(y).enumerate() {
                assert_close(u, v, tol, &format!("{at}[{k}]"));
            }
        }
        (J::Object(x), J::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}"
            );
            for (k, u) in x {
                assert_close(u, &y[k], tol, &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

fn read(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Run `model` with `extra`, saving the fit; predict from the saved fit at
/// the same test rows; both JSON files.
fn run_and_predict(
    dir: &std::path::Path,
    name: &str,
    model: &str,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let (fit, run, pred) = (
        dir.join(format!("{name}.fit.json")),
        dir.join(format!("{name}.run.json")),
        dir.join(format!("{name}.pred.json")),
    );
    let mut args = mcycle_split(
        model,
        &[
            "--save",
            fit.to_str().unwrap(),
            "--json",
            run.to_str().unwrap(),
        ],
    );
    args.extend_from_slice(extra);
    let out = assert_ok(&tempest(&args));
    assert!(out.contains("fit saved to"), "{out}");
    assert_ok(&tempest(&[
        "predict",
        model,
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        "examples/data/mcycle.csv",
        "--test-rows",
        "100..132",
        "--json",
        pred.to_str().unwrap(),
    ]));
    (read(&run), read(&pred))
}

#[test]
fn every_predicting_engine_saves_a_fit_that_predicts_the_same() {
    let dir = out_dir("saved_fits");
    for engine in ["exact", "mirror_descent", "gradient_descent"] {
        let (run, pred) = run_and_predict(
            &dir,
            engine,
            "examples/mcycle.tempest",
            &["--engine", engine],
        );
        // The factorisations are recomputed, equal to rounding.
        assert_close(&run["predictions"], &pred["predictions"], 1e-10, engine);
        assert!(
            run["predictions"]["predictive"]["q97.5"].is_array(),
            "{engine}"
        );
        if engine != "exact" {
            assert_close(&run["test"], &pred["test"], 1e-10, engine);
        } else {
            // The optimiser's record is the run's, not recomputed.
            assert_eq!(
                run["gradient_unconstrained"],
                pred["gradient_unconstrained"]
            );
            assert_eq!(run["optimizer"], pred["optimizer"]);
        }
    }
    let (run, pred) = run_and_predict(
        &dir,
        "nuts",
        "examples/mcycle_nuts.tempest",
        &["--set", "draws=100", "--set", "warmup=100"],
    );
    // The same draws and the same random streams.
    assert_close(&run["predictions"], &pred["predictions"], 1e-10, "nuts");
    assert_eq!(pred["predictions"]["draws"], 400);

    // A changed file is refused: with one training outcome changed, the
    // exact fit's θ no longer gives its log marginal likelihood.
    let fit = dir.join("exact.fit.json");
    let mut j = read(&fit);
    j["data"]["accel"][0] = serde_json::json!(j["data"]["accel"][0].as_f64().unwrap() + 0.5);
    let bad = dir.join("changed.fit.json");
    std::fs::write(&bad, j.to_string()).unwrap();
    let err = assert_clean_failure(&tempest(&[
        "predict",
        "examples/mcycle.tempest",
        "--fit",
        bad.to_str().unwrap(),
        "--test",
        "examples/data/mcycle.csv",
    ]));
    assert!(
        err.contains("does not reproduce its log marginal likelihood"),
        "{err}"
    );
    // Another model's fit is refused.
    let err = assert_clean_failure(&tempest(&[
        "predict",
        "examples/mcycle_nuts.tempest",
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        "examples/data/mcycle.csv",
    ]));
    assert!(err.contains("saved from another model"), "{err}");
}

#[test]
fn saved_fits_carry_their_class_labels_and_evidence_saves_none() {
    let dir = out_dir("saved_labels");
    let m = dir.join("m.tempest");
    std::fs::write(
        &m,
        r#"
data { n : int  x : vector[n]  y : int<lower=0, upper=1>[n] }
param { a : real ~ normal(0, 2)  b : real ~ normal(0, 2) }
model { y ~ bernoulli_logit(a + b * x) }
infer nuts { chains = 2  warmup = 200  draws = 200 }
"#,
    )
    .unwrap();
    let train = dir.join("train.csv");
    std::fs::write(
        &train,
        "x,y\n-2,no\n-1,no\n-0.5,yes\n0.3,no\n1,yes\n2,yes\n",
    )
    .unwrap();
    let test = dir.join("test.csv");
    std::fs::write(&test, "x,y\n1.5,yes\n-2.5,no\n").unwrap();
    let fit = dir.join("fit.json");
    assert_ok(&tempest(&[
        "run",
        m.to_str().unwrap(),
        "--data",
        train.to_str().unwrap(),
        "-q",
        "--save",
        fit.to_str().unwrap(),
    ]));
    let pred = dir.join("pred.json");
    let out = assert_ok(&tempest(&[
        "predict",
        m.to_str().unwrap(),
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        test.to_str().unwrap(),
        "--json",
        pred.to_str().unwrap(),
    ]));
    assert!(out.contains("labels of `y`: 0 = no, 1 = yes"), "{out}");
    let j = read(&pred);
    let o = &j["predictions"]["outcomes"][0];
    assert_eq!(o["y"], serde_json::json!([1.0, 0.0]));
    assert!(o["metrics"]["accuracy"].as_f64().unwrap() >= 0.5);

    let err = assert_clean_failure(&tempest(&[
        "run",
        "examples/evidence.tempest",
        "--data",
        "examples/data/evidence_linreg.csv",
        "-q",
        "--save",
        dir.join("ev.json").to_str().unwrap(),
    ]));
    assert!(
        err.contains("makes no predictions, so it has no fit to save"),
        "{err}"
    );
}
