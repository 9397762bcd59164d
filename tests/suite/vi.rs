//! Variational engines against truth: GPflow's natural-gradient and Adam
//! runs on breast cancer, the exact posterior (one mirror-descent step with a
//! Gaussian likelihood), the prior at temperature 0, monotone ELBOs,
//! multi-class convergence, and hyper gradients against finite differences.

use crate::common;
use common::*;
use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use tempest::AsExact;
use tempest::infer::vi::fit::VariationalFit;
use tempest::infer::vi::{core::Core, expect, model::ViModel};
use tempest::model::family::Gaussian;
use tempest::{Bound, Overrides, RunOptions};

const BREAST: &str = r#"
data {
  n : int
  X : matrix[n, 30] = columns("x0".."x29")
  y : int<lower=0, upper=1>[n]
}
hyper { ell : positive = 5.0  sf2 : positive = 1.0 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ LIKELIHOOD
}
infer mirror_descent { steps = 60, rho = 1.0 }
"#;

fn breast(lik: &str) -> Bound {
    let m = model(&BREAST.replace("LIKELIHOOD", lik));
    bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 299))))
}

fn run(
    b: &Bound,
    settings: &[(&str, &str)],
    engine: Option<&str>,
) -> Box<tempest::infer::vi::fit::VariationalFit> {
    fit_with(b, engine, settings)
        .downcast::<VariationalFit>()
        .expect("not a variational fit")
}

fn steps_to(trace: &[f64], opt: f64, rel: f64) -> Option<usize> {
    trace.iter().position(|e| ((e - opt) / opt).abs() < rel)
}

#[test]
fn binary_classification_matches_gpflow() {
    let r = reference("gp_classification_binary.json");
    for (lik, key, max_steps) in [
        ("bernoulli_logit(f(X))", "breast_cancer_logit", 4),
        (
            "bernoulli_probit(f(X), squash = 1e-3)",
            "breast_cancer_probit_gpflow_default",
            6,
        ),
    ] {
        let p = &r["problems"][key];
        let opt = p["elbo_optimum"].as_f64().unwrap();
        let b = breast(lik);
        let fit = run(&b, &[], None);
        assert_rel(fit.elbo, opt, 1e-6, &format!("{key} ELBO optimum"));
        assert_rel(
            fit.trace[0],
            p["elbo_init"].as_f64().unwrap(),
            1e-10,
            "ELBO at the prior",
        );
        let s = steps_to(&fit.trace, opt, 1e-6).expect("reached the optimum");
        assert!(
            s <= max_steps,
            "{key}: {s} steps to 1e-6, GPflow needs {max_steps}"
        );
        // ρ = γ reproduces GPflow's natural-gradient trajectories step by step.
        for gamma in ["1.0", "0.5", "0.1"] {
            let fit = run(
                &b,
                &[
                    ("rho", gamma),
                    ("backtrack", "false"),
                    ("steps", "12"),
                    ("tol", "0"),
                ],
                None,
            );
            let want = p["natgrad"][format!("gamma_{gamma}")]["trajectory_first_30"]
                .as_array()
                .unwrap();
            for (i, w) in want.iter().take(12).enumerate() {
                assert_rel(
                    fit.trace[i],
                    w.as_f64().unwrap(),
                    1e-8,
                    &format!("{key} γ = {gamma} step {i}"),
                );
            }
        }
        let test = csv("breast_cancer_prepared.csv", Some((300, 568)));
        let mut fit = fit_with_test(&b, &test);
        let t = fit.test.take().unwrap();
        assert!((t.accuracy.unwrap() - p["test_accuracy"].as_f64().unwrap()).abs() < 0.01);
        assert!(
            (t.mean_log_predictive_density - p["test_mean_log_pred_density"].as_f64().unwrap())
                .abs()
                < 0.01
        );
        let pred = fit.predictions.take().unwrap();
        for i in 0..5 {
            assert_rel(
                pred.mean_f[i][0],
                p["predict_f_first5_test"]["mean"][i][0].as_f64().unwrap(),
                1e-4,
                "latent mean",
            );
            assert_rel(
                pred.var_f[i][0],
                p["predict_f_first5_test"]["var"][i][0].as_f64().unwrap(),
                1e-4,
                "latent variance",
            );
            assert_rel(
                pred.probabilities.as_ref().unwrap()[i][1],
                p["predict_y_first5_test"][i][0].as_f64().unwrap(),
                1e-4,
                "class probability",
            );
        }
    }
}

fn fit_with_test(b: &Bound, test: &tempest::Data) -> Box<tempest::infer::vi::fit::VariationalFit> {
    let options = RunOptions {
        test: Some(test.clone()),
        ..Default::default()
    };
    tempest::run(b, options)
        .unwrap()
        .downcast::<VariationalFit>()
        .expect("not variational")
}

#[test]
fn gradient_descent_follows_gpflows_adam() {
    let r = reference("gp_classification_binary.json");
    let b = breast("bernoulli_logit(f(X))");
    let fit = run(
        &b,
        &[("steps", "300"), ("lr", "0.01")],
        Some("gradient_descent"),
    );
    let cp = &r["problems"]["breast_cancer_logit"]["adam_lr0.01_summary"]["checkpoints"];
    assert_rel(
        fit.trace[100],
        cp["100"]["elbo"].as_f64().unwrap(),
        1e-3,
        "Adam at 100 steps",
    );
    assert_rel(
        fit.trace[300],
        cp["300"]["elbo"].as_f64().unwrap(),
        1e-3,
        "Adam at 300 steps",
    );
}

const REGRESSION: &str = r#"
data { n : int  X : matrix[n, 10] = columns(except = ["row", "y"])  y : vector[n] }
hyper { ell : positive = 3.0  sf2 : positive = 1.0  noise : positive = 0.1 }
model {
  f ~ gp(0.2, sf2 * rbf(ell))
  y ~ normal(f(X), sqrt(noise)) ^ temperature
}
infer mirror_descent { steps = 1, rho = 1.0, jitter = 0 }
"#;

#[test]
fn one_step_with_a_gaussian_likelihood_is_the_exact_posterior() {
    let m = model(REGRESSION);
    let b = bind(&m, &csv("diabetes_prepared.csv", Some((0, 149))));
    let fit = run(&b, &[], None);
    let exact = tempest::run(
        &b,
        RunOptions {
            engine: Some("exact".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let lml = exact.as_exact().unwrap().log_marginal_likelihood;
    assert_rel(
        fit.elbo,
        lml,
        1e-9,
        "ELBO after one step = log marginal likelihood",
    );
    // The posterior N(m, S) by hand.
    let q = fit.qs[0].to_gaussian(&fit.core.prior);
    let k = &fit.core.prior.l * fit.core.prior.l.transpose();
    let y = DVector::from_vec(b.data[b.graph.data_index("y").unwrap()].flatten());
    let a = (&k + DMatrix::identity(k.nrows(), k.nrows()) * 0.1)
        .try_inverse()
        .unwrap();
    let mean = &k * &a * y.add_scalar(-0.2);
    let cov = &k - &k * &a * &k;
    assert!((q.mean.add_scalar(-0.2) - mean).abs().max() < 1e-9);
    assert!((q.cov - cov).abs().max() < 1e-9);
}

#[test]
fn temperature_zero_returns_the_prior() {
    let m = model(REGRESSION);
    let b = m
        .bind(
            &csv("diabetes_prepared.csv", Some((0, 99))),
            &Overrides {
                values: vec![("temperature".into(), "0".into())],
            },
        )
        .unwrap();
    let fit = run(&b, &[("steps", "5")], None);
    assert!(fit.elbo.abs() < 1e-12, "ELBO {}", fit.elbo);
    assert!(fit.qs[0].z.norm() < 1e-12);
    assert!(
        (&fit.qs[0].r * fit.qs[0].r.transpose() - DMatrix::identity(100, 100))
            .abs()
            .max()
            < 1e-9
    );
}

#[test]
fn elbo_rises_monotonically_for_log_concave_likelihoods() {
    for lik in [
        "bernoulli_logit(f(X))",
        "bernoulli_probit(f(X))",
        "poisson_log(f(X))",
    ] {
        let b = breast(lik);
        for rho in ["0.3", "0.7", "1.0"] {
            let fit = run(
                &b,
                &[
                    ("rho", rho),
                    ("backtrack", "false"),
                    ("steps", "15"),
                    ("tol", "0"),
                ],
                None,
            );
            for w in fit.trace.windows(2) {
                assert!(
                    w[1] >= w[0] - 1e-9 * w[0].abs(),
                    "{lik} ρ = {rho}: {} then {}",
                    w[0],
                    w[1]
                );
            }
        }
    }
}

#[test]
fn multi_class_at_rho_one_reaches_a_finite_optimum() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/iris.tempest"),
    )
    .unwrap();
    let m = model(&text);
    let b = bind(
        &m,
        &tempest::Data::read(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/iris.csv"),
        )
        .unwrap(),
    );
    let fit = run(&b, &[("steps", "200")], None);
    assert!(fit.trace.iter().all(|e| e.is_finite()));
    assert!(
        fit.reason.contains("below") || fit.reason.contains("converged"),
        "did not converge: {}",
        fit.reason
    );
    for w in fit.trace.windows(2) {
        assert!(
            w[1] >= w[0] - 1e-9 * w[0].abs(),
            "ELBO fell: {} then {}",
            w[0],
            w[1]
        );
    }
    // Determinism: the same seed gives the same run.
    let again = run(&b, &[("steps", "200")], None);
    assert_eq!(fit.trace, again.trace);
}

const NEGBIN: &str = r#"
likelihood nb(y : int, f : real, r : positive) {
  lgamma(y + r) - lgamma(r) - lgamma(y + 1) + r * log(r / (r + exp(f))) + y * (f - log(r + exp(f)))
}
data { n : int  X : matrix[n, 2] = columns("roach1", "treatment")  y : int<lower=0>[n]  exposure2 : vector[n] }
hyper { ell : vector<lower=0>[2] = [80.0, 1.5]  sf2 : positive = 1.3  mu0 : real = 1.5  r : positive = 0.8  s : real = 0.3 }
model {
  f ~ gp(mu0, sf2 * rbf(ell))
  y ~ nb(f(X) + s * log(exposure2), r)
}
infer mirror_descent { steps = 6, learn_hypers = true }
"#;

/// ELBO at fixed q (mean m, covariance S) as a function of the hypers θ.
fn elbo_at(core: &Core, model: &ViModel, q: &Gaussian, theta: &[f64]) -> f64 {
    let pieces = model.pieces::<f64>(theta, &model.bound).unwrap();
    let mut k = pieces.kernel.gram(&model.inputs).unwrap();
    for i in 0..k.nrows() {
        k[(i, i)] += model.jitter;
    }
    let prior = Gaussian {
        mean: DVector::from_element(k.nrows(), pieces.mean),
        cov: k,
    };
    let m = DMatrix::from_column_slice(q.mean.len(), 1, q.mean.as_slice());
    let v = DMatrix::from_column_slice(q.mean.len(), 1, q.cov.diagonal().as_slice());
    let e: f64 = expect::expected_total(model, &pieces.lik, &core.rule, &m, &v).unwrap();
    e - q.kl_to(&prior).unwrap()
}

#[test]
fn hyper_gradients_match_finite_differences() {
    let m = model(NEGBIN);
    let b = bind(&m, &csv("roaches.csv", Some((0, 59))));
    let fit = run(&b, &[], None);
    let core = &fit.core;
    let s: tempest::infer::vi::settings::ViSettings =
        tempest::infer::settings::Settings::from_config(
            &tempest::engine_config(&b.graph, &RunOptions::default()).unwrap(),
        )
        .unwrap();
    let vm = ViModel::new(Arc::new(b.clone()), s.learn_hypers, s.jitter, "test").unwrap();
    let q = fit.qs[0].to_gaussian(&core.prior);
    let g = core.hyper_gradient(&fit.qs).unwrap();
    assert_eq!(g.len(), 6);
    for k in 0..g.len() {
        let h = 1e-5;
        let mut up = core.theta.clone();
        up[k] += h;
        let mut dn = core.theta.clone();
        dn[k] -= h;
        let fd = (elbo_at(core, &vm, &q, &up) - elbo_at(core, &vm, &q, &dn)) / (2.0 * h);
        assert!(
            (fd - g[k]).abs() < 1e-5 * fd.abs().max(1.0),
            "θ[{k}]: autodiff {} vs finite differences {fd}",
            g[k]
        );
    }
}

#[test]
fn learning_hypers_raises_the_elbo() {
    let m = model(NEGBIN);
    let b = bind(&m, &csv("roaches.csv", Some((0, 59))));
    let fixed = run(&b, &[("learn_hypers", "false"), ("steps", "40")], None);
    let learned = run(&b, &[("steps", "150"), ("hyper_lr", "0.05")], None);
    assert!(
        learned.elbo > fixed.elbo + 1.0,
        "learned {} vs fixed {}",
        learned.elbo,
        fixed.elbo
    );
}

#[test]
fn engines_refuse_families_and_models_they_cannot_fit() {
    let text = BREAST.replace("LIKELIHOOD", "bernoulli_logit(f(X))");
    let data = csv("breast_cancer_prepared.csv", Some((0, 49)));
    let err = |t: &str, engine: &str| {
        let m = model(t);
        let b = bind(&m, &data);
        let e = tempest::run(
            &b,
            RunOptions {
                engine: Some(engine.into()),
                ..Default::default()
            },
        )
        .err()
        .expect("an error");
        m.render(&e)
    };
    let mf = text.replace(
        "infer mirror_descent",
        "guide { f : mean_field }\ninfer mirror_descent",
    );
    assert!(err(&mf, "mirror_descent").contains("works with the family `sites`"));
    let sites = text.replace(
        "infer mirror_descent { steps = 60, rho = 1.0 }",
        "guide { f : sites }\ninfer gradient_descent {}",
    );
    assert!(err(&sites, "gradient_descent").contains("`full_rank` or `mean_field`"));
    let with_param = text
        .replace("model {", "param { b : real ~ normal(0, 1) }\nmodel {")
        .replace("f ~ gp(0,", "f ~ gp(b,");
    assert!(err(&with_param, "mirror_descent").contains("is a param"));
}

#[test]
fn non_log_concave_likelihoods_stay_finite() {
    let m = model(&REGRESSION.replace(
        "y ~ normal(f(X), sqrt(noise)) ^ temperature",
        "y ~ student_t(3, f(X), sqrt(noise))",
    ));
    let b = bind(&m, &csv("diabetes_prepared.csv", Some((0, 99))));
    let fit = run(&b, &[("steps", "60"), ("jitter", "1e-6")], None);
    assert!(fit.trace.iter().all(|e| e.is_finite()));
    for w in fit.trace.windows(2) {
        assert!(
            w[1] >= w[0] - 1e-9 * w[0].abs(),
            "ELBO fell: {} then {}",
            w[0],
            w[1]
        );
    }
    let mf = run(
        &b,
        &[("steps", "200"), ("lr", "0.05")],
        Some("gradient_descent"),
    );
    assert!(mf.elbo.is_finite() && mf.elbo > mf.trace[0]);
}

#[test]
fn mean_field_gradient_descent_improves_the_elbo() {
    let text = BREAST
        .replace("LIKELIHOOD", "bernoulli_logit(f(X))")
        .replace(
            "infer mirror_descent { steps = 60, rho = 1.0 }",
            "guide { f : mean_field }\ninfer gradient_descent {}",
        );
    let m = model(&text);
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 99))));
    let fit = run(
        &b,
        &[("steps", "200"), ("lr", "0.05"), ("learn_hypers", "true")],
        None,
    );
    assert!(
        fit.elbo > fit.trace[0] + 10.0,
        "{} vs {}",
        fit.elbo,
        fit.trace[0]
    );
    assert!(fit.trace.iter().all(|e| e.is_finite()));
}

// The dense engines' cost estimate (tempest-vi/src/cost.rs).
mod cost {
    use tempest::infer::vi::cost::{Cost, Steps, duration, flops_per_second, flops_per_step};

    #[test]
    fn a_step_costs_what_its_dense_operations_cost() {
        // Mirror descent with two learned hypers on 2400 points in two
        // columns: 17 N³ and the kernel's derivatives.
        let n = 2400f64;
        let f = flops_per_step(Steps::Mirror, 2400, 1, 2, 2);
        assert!((f - (17.0 * n * n * n + n * n * 30.0 * 7.0)).abs() < 1e-3 * f);
        // Without hypers, 5⅓ N³ per latent GP.
        let f = flops_per_step(Steps::Mirror, 100, 3, 0, 2);
        assert!((f - 16.0 * 1e6).abs() < 1e-6);
        assert!(
            flops_per_step(Steps::MeanField, 10, 1, 0, 1)
                < flops_per_step(Steps::FullRank, 10, 1, 0, 1)
        );
    }

    #[test]
    fn durations_read_in_their_unit() {
        assert_eq!(duration(0.42), "0.4 s");
        assert_eq!(duration(20.4), "20 s");
        assert_eq!(duration(1020.0), "17 min");
        assert_eq!(duration(9000.0), "2.5 h");
    }

    #[test]
    fn a_long_run_warns_and_points_to_svi() {
        let cost = Cost {
            engine: "mirror_descent",
            n: 2400,
            latents: 1,
            learn_hypers: true,
            flops_per_step: 2.35e11,
            steps: 50,
            flops_per_second: 1.2e10,
        };
        let w = cost.warning().unwrap();
        assert!(w.contains("roughly 20 s a step"), "{w}");
        assert!(w.contains("16 min for steps = 50"), "{w}");
        assert!(w.contains("--engine svi"), "{w}");
        let short = Cost { steps: 2, ..cost };
        assert!(short.warning().is_none());
        assert!(flops_per_second() > 0.0);
    }
}
