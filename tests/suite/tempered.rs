//! Power (tempered) likelihoods in the exact engine against the closed form
//! ∫ p(y|f)ᵗ p(f) df = Πₙ cₙ · N(y | 0, K + σ²/t·I), with
//! log cₙ = (1 − t)/2 · log(2πσ²) − ½ log t, and against numerical integration
//! in one dimension.

use crate::common;
use common::*;
use nalgebra::{DMatrix, DVector};
use tempest::AsExact;
use tempest::{Data, DataValue, RunOptions};

const MODEL: &str = r#"
data { n : int  x : vector[n]  y : vector[n] }
hyper { ell : positive = 0.7  sigma : positive = 0.3 }
model {
  f ~ gp(0, 1.5 * rbf(ell))
  y ~ normal(f(x), sigma) ^ temperature
}
infer exact {}
"#;

fn lml_at(x: &[f64], y: &[f64], t: f64) -> f64 {
    let m = model(MODEL);
    let data = Data::values()
        .with("x", DataValue::Vector(x.to_vec()))
        .with("y", DataValue::Vector(y.to_vec()));
    let overrides = tempest::Overrides {
        values: vec![("temperature".into(), t.to_string())],
    };
    let b = m
        .bind(&data, &overrides)
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
    let fit = tempest::run(&b, RunOptions::default()).unwrap();
    fit.as_exact().unwrap().log_marginal_likelihood
}

fn closed_form(x: &[f64], y: &[f64], t: f64) -> f64 {
    let n = x.len();
    let (ell, s2) = (0.7, 0.09);
    let mut a = DMatrix::from_fn(n, n, |i, j| {
        1.5 * (-0.5 * ((x[i] - x[j]) / ell).powi(2)).exp()
    });
    for i in 0..n {
        a[(i, i)] += s2 / t;
    }
    let c = a.clone().cholesky().unwrap();
    let yv = DVector::from_column_slice(y);
    let quad = yv.dot(&c.solve(&yv));
    let logdet = 2.0 * c.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    let log_c =
        n as f64 * (0.5 * (1.0 - t) * (2.0 * std::f64::consts::PI * s2).ln() - 0.5 * t.ln());
    -0.5 * quad - 0.5 * logdet - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln() + log_c
}

#[test]
fn tempered_marginal_likelihood_matches_the_closed_form() {
    let x = [0.1, 0.5, 1.3, 2.0, 2.2];
    let y = [0.3, -0.1, 0.8, 0.2, 0.5];
    for t in [1.0, 0.5, 0.1, 2.0] {
        assert_rel(
            lml_at(&x, &y, t),
            closed_form(&x, &y, t),
            1e-12,
            &format!("t = {t}"),
        );
    }
    assert_eq!(lml_at(&x, &y, 0.0), 0.0);
}

#[test]
fn tempered_evidence_matches_numerical_integration_for_one_point() {
    // One observation: ∫ N(y | f, σ²)ᵗ N(f | 0, 1.5) df by the trapezoid rule.
    let (y, s2, v) = (0.8f64, 0.09f64, 1.5f64);
    for t in [0.3, 1.0, 1.7] {
        let (lo, hi, k) = (-12.0, 12.0, 200_000);
        let h = (hi - lo) / k as f64;
        let mut acc = 0.0;
        for i in 0..=k {
            let f = lo + i as f64 * h;
            let lik =
                (-(y - f) * (y - f) / (2.0 * s2)).exp() / (2.0 * std::f64::consts::PI * s2).sqrt();
            let prior = (-f * f / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt();
            let w = if i == 0 || i == k { 0.5 } else { 1.0 };
            acc += w * lik.powf(t) * prior;
        }
        assert_rel(
            lml_at(&[0.0], &[y], t),
            (acc * h).ln(),
            1e-9,
            &format!("t = {t}"),
        );
    }
}

/// A power below zero that comes from data (not a literal the checker
/// sees) is an error from every engine that runs the likelihood, at the
/// power's place in the file, not a tempered fit of the wrong sign.
#[test]
fn a_negative_power_is_refused_by_every_engine() {
    let gp = MODEL
        .replace("y : vector[n] }", "y : vector[n]  tp : real }")
        .replace("^ temperature", "^ tp");
    let vi = gp.replace("infer exact {}", "infer mirror_descent { steps = 5 }");
    let sampled = "data { n : int  x : vector[n]  y : vector[n]  tp : real }\n\
                   param { mu : real ~ normal(0, 1) }\n\
                   model { y ~ normal(mu, 1) ^ tp }\n\
                   infer nuts { chains = 1, warmup = 20, draws = 20 }\n";
    for text in [gp.as_str(), vi.as_str(), sampled] {
        let m = model(text);
        let data = Data::values()
            .with("x", DataValue::Vector(vec![0.1, 0.5, 1.3]))
            .with("y", DataValue::Vector(vec![0.3, -0.1, 0.8]))
            .with("tp", DataValue::Real(-1.0));
        let b = m
            .bind(&data, &tempest::Overrides::default())
            .unwrap_or_else(|e| panic!("{}", m.render(&e)));
        let e = match tempest::run(&b, RunOptions::default()) {
            Ok(_) => panic!("a negative power ran:\n{text}"),
            Err(e) => m.render(&e),
        };
        assert!(
            e.contains("the power of a likelihood must be finite and ≥ 0, found -1"),
            "{text}\n{e}"
        );
        assert!(e.contains("^ tp"), "{e}");
    }
}
