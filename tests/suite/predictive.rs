//! The samplers' posterior predictive at test data, checked against truth:
//! the closed-form predictive of conjugate linear regression, the exact GP's
//! predictions (a GP integrated out with its hypers pinned by tight priors;
//! a GP sampled in whitened form through a likelihood written in the model
//! file), class probabilities against the outcomes drawn, identical results
//! for any thread count, and the command line.

use crate::common;
use tempest::{AsExact, AsVariational};

use common::{assert_clean_failure, assert_ok, bind, csv, mcycle_split, model, out_dir, tempest};
use nalgebra::{DMatrix, DVector};
use tempest::infer::mcmc::fit::McmcFit;
use tempest::infer::mcmc::predict::SamplerPredictions;
use tempest::{Bound, Data, DataValue, RunOptions};

/// Run the model's engine on `b` with `settings` and predict at `test`.
fn run_test(b: &Bound, settings: &[(&str, &str)], test: Data) -> Box<dyn tempest::Fit> {
    let options = RunOptions {
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        test: Some(test),
        ..Default::default()
    };
    tempest::run(b, options).unwrap_or_else(|e| panic!("{e}"))
}

/// Run a sampler on `b` with `settings` and predict at `test`.
fn sample_predict(b: &Bound, settings: &[(&str, &str)], test: Data) -> SamplerPredictions {
    run_test(b, settings, test)
        .downcast::<McmcFit>()
        .expect("a sampler fit")
        .predictions
        .expect("predictions")
}

fn line_data(x: &[f64], y: &[f64]) -> Data {
    Data::values()
        .with("n", DataValue::Int(x.len() as i64))
        .with("x", DataValue::Vector(x.to_vec()))
        .with("y", DataValue::Vector(y.to_vec()))
        .with("sigma", DataValue::Real(0.4))
}

#[test]
fn linear_regression_predictive_matches_the_closed_form() {
    let m = model(
        r#"
data { n : int  x : vector[n]  y : vector[n]  sigma : real }
param { a : real ~ normal(0, 2)  b : real ~ normal(0, 2) }
model { y ~ normal(a + b * x, sigma) }
infer nuts { chains = 4  warmup = 500  draws = 1000  seed = 3 }
"#,
    );
    let n = 20;
    let x: Vec<f64> = (0..n).map(|i| -1.0 + 2.0 * i as f64 / 19.0).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| 0.5 + 1.5 * x[i] + 0.3 * (7.0 * i as f64).sin())
        .collect();
    let b = bind(&m, &line_data(&x, &y));
    let xs = [-1.5, 0.0, 2.0];
    let ys = [-1.9, 0.7, 3.0];
    let p = sample_predict(&b, &[("predictive_draws", "4000")], line_data(&xs, &ys));
    assert_eq!(p.draws, 4000);
    // Posterior N(m, P⁻¹) with P = I/4 + ΦᵀΦ/σ², m = P⁻¹Φᵀy/σ².
    let s2 = 0.16;
    let phi = DMatrix::from_fn(n, 2, |i, j| if j == 0 { 1.0 } else { x[i] });
    let prec = DMatrix::identity(2, 2) / 4.0 + phi.tr_mul(&phi) / s2;
    let cov = prec.try_inverse().unwrap();
    let mean = &cov * phi.tr_mul(&DVector::from_vec(y.clone())) / s2;
    let o = &p.outcomes[0];
    assert_eq!(o.name, "y");
    let band = o.predictive.as_ref().expect("outcome draws");
    let mut lpd = 0.0;
    for (i, (&xi, &yi)) in xs.iter().zip(&ys).enumerate() {
        let f = DVector::from_vec(vec![1.0, xi]);
        let mu = f.dot(&mean);
        let sd = ((f.transpose() * &cov * &f)[(0, 0)] + s2).sqrt();
        assert!(
            (band.mean[i] - mu).abs() < 0.08 * sd,
            "mean {i}: {} vs {mu}",
            band.mean[i]
        );
        assert!(
            (band.sd[i] / sd - 1.0).abs() < 0.05,
            "sd {i}: {} vs {sd}",
            band.sd[i]
        );
        assert!(
            (band.q97_5[i] - (mu + 1.959_964 * sd)).abs() < 0.12 * sd,
            "97.5 % {i}"
        );
        assert!(
            (band.q2_5[i] - (mu - 1.959_964 * sd)).abs() < 0.12 * sd,
            "2.5 % {i}"
        );
        let exact = -0.5 * ((yi - mu) / sd).powi(2) - sd.ln() - 0.918_938_533;
        let got = o.log_density.as_ref().unwrap()[i];
        assert!((got - exact).abs() < 0.03, "lpd {i}: {got} vs {exact}");
        lpd += exact / 3.0;
    }
    let metrics = o.metrics.as_ref().unwrap();
    assert!((metrics.mean_log_predictive_density - lpd).abs() < 0.03);
    assert!(metrics.rmse.is_some() && metrics.accuracy.is_none());
}

/// The motorcycle data's first 60 rows, and rows 60..=69 as test points.
fn mcycle(rows: (usize, usize)) -> Data {
    let d = Data::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/data/mcycle.csv"
    )))
    .unwrap();
    d.select_rows(rows.0, rows.1).unwrap()
}

/// The exact GP's predictions at rows 60..=69 with ell = 4, sf = 40,
/// sigma = 20.
fn exact_predictions() -> tempest::infer::exact::predict::Predictions {
    let m = model(
        r#"
data { n : int  t : vector[n] = column("times")  accel : vector[n] }
hyper { ell : positive = 4  sf : positive = 40  sigma : positive = 20 }
model { f ~ gp(0, sf^2 * matern52(ell))  accel ~ normal(f(t), sigma) }
infer exact { learn_hypers = false }
"#,
    );
    let b = bind(&m, &mcycle((0, 59)));
    let fit = run_test(&b, &[], mcycle((60, 69)));
    fit.as_exact().unwrap().predictions.clone().unwrap()
}

#[test]
fn integrated_out_gp_predicts_as_the_exact_engine_at_pinned_hypers() {
    let exact = exact_predictions();
    let m = model(
        r#"
data { n : int  t : vector[n] = column("times")  accel : vector[n] }
param {
  ell : positive ~ lognormal(log(4), 0.0005)
  sf : positive ~ lognormal(log(40), 0.0005)
  sigma : positive ~ lognormal(log(20), 0.0005)
}
model { f ~ gp(0, sf^2 * matern52(ell))  accel ~ normal(f(t), sigma) }
infer nuts { chains = 4  warmup = 300  draws = 1000  seed = 5 }
"#,
    );
    let b = bind(&m, &mcycle((0, 59)));
    let p = sample_predict(&b, &[("predictive_draws", "4000")], mcycle((60, 69)));
    let band = p.outcomes[0].predictive.as_ref().unwrap();
    let f = &p.latent[0];
    for i in 0..10 {
        let sd_y = exact.var_y[i].sqrt();
        let sd_f = exact.var_f[i].sqrt();
        assert!(
            (band.mean[i] - exact.mean[i]).abs() < 0.06 * sd_y,
            "y mean {i}: {} vs {}",
            band.mean[i],
            exact.mean[i]
        );
        assert!((band.sd[i] / sd_y - 1.0).abs() < 0.05, "y sd {i}");
        assert!(
            (f.mean[i] - exact.mean[i]).abs() < 0.06 * sd_f,
            "f mean {i}"
        );
        assert!((f.sd[i] / sd_f - 1.0).abs() < 0.06, "f sd {i}");
    }
    let got = p.outcomes[0]
        .metrics
        .as_ref()
        .unwrap()
        .mean_log_predictive_density;
    let want = exact.mean_log_predictive_density.unwrap();
    assert!((got - want).abs() < 0.03, "mlpd {got} vs {want}");
}

#[test]
fn whitened_gp_predicts_its_latent_values_as_the_exact_engine() {
    // A Gaussian likelihood written in the model file is not integrated
    // out: the GP's 60 values are sampled in whitened form.
    let exact = exact_predictions();
    let m = model(
        r#"
likelihood gauss(y : real, f : real, s : positive) {
  -0.5 * ((y - f) / s)^2 - log(s) - 0.9189385332046727
}
data { n : int  t : vector[n] = column("times")  accel : vector[n] }
hyper { ell : positive = 4  sf : positive = 40  sigma : positive = 20 }
model { f ~ gp(0, sf^2 * matern52(ell))  accel ~ gauss(f(t), sigma) }
infer nuts { chains = 4  warmup = 500  draws = 1000  seed = 9 }
"#,
    );
    let b = bind(&m, &mcycle((0, 59)));
    let p = sample_predict(&b, &[("predictive_draws", "4000")], mcycle((60, 69)));
    let o = &p.outcomes[0];
    assert!(
        o.predictive.is_none(),
        "a model-file likelihood cannot be drawn from"
    );
    let f = &p.latent[0];
    for i in 0..10 {
        let sd_f = exact.var_f[i].sqrt();
        assert!(
            (f.mean[i] - exact.mean[i]).abs() < 0.1 * sd_f,
            "f mean {i}: {} vs {}",
            f.mean[i],
            exact.mean[i]
        );
        assert!(
            (f.sd[i] / sd_f - 1.0).abs() < 0.1,
            "f sd {i}: {} vs {sd_f}",
            f.sd[i]
        );
    }
    let got = o.metrics.as_ref().unwrap().mean_log_predictive_density;
    let want = exact.mean_log_predictive_density.unwrap();
    assert!((got - want).abs() < 0.05, "mlpd {got} vs {want}");
}

const LOGISTIC3: &str = r#"
data { n : int  X : matrix[n, 3] = columns("x0", "x1", "x2")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[3] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
infer nuts { chains = 2  warmup = 300  draws = 500  seed = 2 }
"#;

#[test]
fn classifier_probabilities_agree_with_the_outcomes_drawn() {
    let m = model(LOGISTIC3);
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 199))));
    let p = sample_predict(&b, &[], csv("breast_cancer_prepared.csv", Some((200, 299))));
    let o = &p.outcomes[0];
    let probs = o.probabilities.as_ref().expect("class probabilities");
    let band = o.predictive.as_ref().unwrap();
    assert_eq!(probs.len(), 100);
    for (i, row) in probs.iter().enumerate() {
        assert_eq!(row.len(), 2);
        assert!((row[0] + row[1] - 1.0).abs() < 1e-9);
        // The share of draws y* = 1 estimates P(y* = 1) (1000 draws).
        assert!((band.mean[i] - row[1]).abs() < 0.06, "point {i}");
    }
    let metrics = o.metrics.as_ref().unwrap();
    let acc = metrics.accuracy.unwrap();
    assert!(acc > 0.85, "accuracy {acc}");
    assert!(metrics.rmse.is_none());
    // The log density of each outcome is that of its averaged probability.
    let y = o.y.as_ref().unwrap();
    for (i, ld) in o.log_density.as_ref().unwrap().iter().enumerate() {
        assert!((ld - probs[i][y[i] as usize].ln()).abs() < 1e-9);
    }
}

#[test]
fn predictions_are_identical_for_any_thread_count() {
    let m = model(LOGISTIC3);
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 99))));
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let p = sample_predict(
                    &b,
                    &[("draws", "200"), ("warmup", "200")],
                    csv("breast_cancer_prepared.csv", Some((100, 149))),
                );
                serde_json::to_string(&p).unwrap()
            })
    };
    assert_eq!(run(1), run(2));
}

#[test]
fn command_line_predicts_from_draws_and_refuses_other_sizes() {
    let dir = out_dir("predictive_cli");
    let json = dir.join("m.json");
    let out = assert_ok(&tempest(&mcycle_split(
        "examples/mcycle_nuts.tempest",
        &[
            "--set",
            "draws=200",
            "--set",
            "warmup=200",
            "--json",
            json.to_str().unwrap(),
        ],
    )));
    assert!(
        out.contains("posterior predictive of `accel`: 33 test points (800 draws), RMSE"),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let o = &j["predictions"]["outcomes"][0];
    assert_eq!(o["predictive"]["q97.5"].as_array().unwrap().len(), 33);
    let cover = o["metrics"]["coverage_95"].as_f64().unwrap();
    assert!(cover > 0.8, "coverage {cover}");
    assert_eq!(
        j["predictions"]["latent"][0]["mean"]
            .as_array()
            .unwrap()
            .len(),
        33
    );

    // Eight schools' params have one value per school: test data with
    // three schools cannot reuse the draws.
    let test = dir.join("three.json");
    std::fs::write(&test, r#"{"J": 3, "y": [1, 2, 3], "sigma": [10, 10, 10]}"#).unwrap();
    let err = assert_clean_failure(&tempest(&[
        "run",
        "examples/eight_schools.tempest",
        "--data",
        "examples/eight_schools.json",
        "--test",
        test.to_str().unwrap(),
        "--set",
        "draws=100",
        "--set",
        "warmup=100",
        "-q",
    ]));
    assert!(
        err.contains(
            "`theta_raw` has 8 values with the training data, but the test data's sizes give it 3 values"
        ),
        "{err}"
    );
}

#[test]
fn variational_predictive_bands_match_the_exact_and_closed_forms() {
    // Mirror descent with ρ = 1 on a Gaussian likelihood is the exact
    // posterior after one step: the same predictive distribution of y.
    let exact = exact_predictions();
    let m = model(
        r#"
data { n : int  t : vector[n] = column("times")  accel : vector[n] }
hyper { ell : positive = 4  sf : positive = 40  sigma : positive = 20 }
model { f ~ gp(0, sf^2 * matern52(ell))  accel ~ normal(f(t), sigma) }
infer mirror_descent { steps = 1, rho = 1, learn_hypers = false }
"#,
    );
    let b = bind(&m, &mcycle((0, 59)));
    let fit = run_test(&b, &[], mcycle((60, 69)));
    let v = fit.as_variational().unwrap();
    let band = v.predictions.as_ref().unwrap().predictive.as_ref().unwrap();
    for i in 0..10 {
        let e = &exact.predictive;
        for (a, b) in [
            (band.mean[i], e.mean[i]),
            (band.sd[i], e.sd[i]),
            (band.q2_5[i], e.q2_5[i]),
            (band.q97_5[i], e.q97_5[i]),
        ] {
            assert!((a - b).abs() < 1e-6 * e.sd[i], "point {i}: {a} vs {b}");
        }
    }
    let t = v.test.as_ref().unwrap();
    assert!((t.rmse.unwrap() - exact.rmse.unwrap()).abs() < 1e-6);
    assert_eq!(t.coverage_95, exact.coverage_95);

    // Counts: y* ~ Poisson(e^f), f ~ N(m, v), so E[y*] = e^{m + v/2} and
    // Var[y*] = E[y*] + (e^v − 1) e^{2m + v}; the band comes from 1000 draws.
    let m = model(
        r#"
data { n : int  x : vector[n]  y : int<lower=0>[n] }
hyper { ell : positive = 1  sf2 : positive = 1 }
model { f ~ gp(1, sf2 * rbf(ell))  y ~ poisson_log(f(x)) }
infer mirror_descent { steps = 50, learn_hypers = false }
"#,
    );
    let x: Vec<f64> = (0..30).map(|i| i as f64 / 5.0).collect();
    let y: Vec<i64> = x
        .iter()
        .map(|v| (2.0 + 2.0 * v.sin()).round() as i64)
        .collect();
    let data = |x: &[f64], y: &[i64]| {
        Data::values()
            .with("n", DataValue::Int(x.len() as i64))
            .with("x", DataValue::Vector(x.to_vec()))
            .with("y", DataValue::IntArray(y.to_vec()))
    };
    let b = bind(&m, &data(&x, &y));
    let fit = run_test(&b, &[], data(&[0.5, 3.3, 9.0], &[3, 2, 1]));
    let p = fit.as_variational().unwrap().predictions.clone().unwrap();
    let band = p.predictive.unwrap();
    for i in 0..3 {
        let (mf, vf) = (p.mean_f[i][0], p.var_f[i][0]);
        let mean = (mf + vf / 2.0).exp();
        let var = mean + (vf.exp() - 1.0) * (2.0 * mf + vf).exp();
        let se = (var / 1000.0).sqrt();
        assert!(
            (band.mean[i] - mean).abs() < 4.0 * se,
            "point {i}: {} vs {mean}",
            band.mean[i]
        );
        assert!((band.sd[i] / var.sqrt() - 1.0).abs() < 0.12, "sd {i}");
        assert!(band.q2_5[i] <= band.q50[i] && band.q50[i] <= band.q97_5[i]);
        assert_eq!(band.q50[i].fract(), 0.0, "counts have integer quantiles");
    }
}

/// A PNG file written by a run: its signature and a size that holds more
/// than an empty canvas.
fn assert_png(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|_| panic!("{} not written", path.display()));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    assert!(bytes.len() > 20_000, "{} is nearly empty", path.display());
}

#[test]
fn every_engine_draws_the_fit_of_a_one_input_model() {
    let dir = out_dir("predictive_plots");
    for engine in ["mirror_descent", "gradient_descent", "svi"] {
        let png = dir.join(format!("{engine}.png"));
        let args = mcycle_split(
            "examples/mcycle.tempest",
            &["--engine", engine, "--plot", png.to_str().unwrap()],
        );
        let out = assert_ok(&tempest(&args));
        assert!(out.contains("RMSE"), "{engine}: {out}");
        assert_png(&png);
    }
    // A sampler draws its traces and, beside them, the fit.
    let png = dir.join("nuts.png");
    let out = assert_ok(&tempest(&mcycle_split(
        "examples/mcycle_nuts.tempest",
        &[
            "--set",
            "draws=100",
            "--set",
            "warmup=100",
            "--plot",
            png.to_str().unwrap(),
        ],
    )));
    let fit = dir.join("nuts_fit.png");
    assert!(
        out.contains(&format!("plot written to {}", fit.display())),
        "{out}"
    );
    assert_png(&png);
    assert_png(&fit);
}

/// Test data without the outcome column are predicted at, never scored
/// against the training outcomes (even with as many rows).
#[test]
fn test_data_without_outcomes_are_not_scored() {
    let dir = out_dir("predictive_no_outcomes");
    let inputs: String = std::iter::once("times".to_string())
        .chain((0..10).map(|k| k.to_string()))
        .collect::<Vec<_>>()
        .join("\n");
    let test = dir.join("t10.csv");
    std::fs::write(&test, inputs + "\n").unwrap();
    for (model, extra) in [
        ("examples/mcycle.tempest", vec![]),
        (
            "examples/mcycle.tempest",
            vec!["--engine", "mirror_descent"],
        ),
        (
            "examples/mcycle_nuts.tempest",
            vec!["--set", "draws=50", "--set", "warmup=50"],
        ),
    ] {
        let mut args = vec![
            "run",
            model,
            "--data",
            "examples/data/mcycle.csv",
            "--rows",
            "0..9",
            "--test",
            test.to_str().unwrap(),
            "-q",
        ];
        args.extend(extra);
        let out = assert_ok(&tempest(&args));
        assert!(!out.contains("RMSE"), "{model}: {out}");
        assert!(!out.contains("log predictive density"), "{model}: {out}");
    }
}
