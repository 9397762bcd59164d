//! The samplers' log density and gradient: gradients against finite
//! differences on models with vector products, lets, hierarchical priors,
//! bounded params, user likelihoods and latent GPs; values against closed forms.

mod common;
use common::*;
use std::sync::Arc;
use tempest::infer::mcmc::density::Density;

fn check_gradient(d: &Density, x: &[f64]) {
    let mut g = vec![0.0; d.dim];
    let lp = d.log_density_grad(x, &mut g).unwrap();
    assert!(lp.is_finite());
    for k in 0..d.dim {
        let h = 1e-6;
        let mut up = x.to_vec();
        up[k] += h;
        let mut dn = x.to_vec();
        dn[k] -= h;
        let fd = (d.log_density(&up).unwrap() - d.log_density(&dn).unwrap()) / (2.0 * h);
        assert!(
            (fd - g[k]).abs() < 1e-5 * fd.abs().max(1.0),
            "coordinate {k}: gradient {} vs finite differences {fd}",
            g[k]
        );
    }
}

fn point(d: &Density, scale: f64) -> Vec<f64> {
    (0..d.dim)
        .map(|i| scale * ((i as f64 * 0.731).sin()))
        .collect()
}

#[test]
fn logistic_regression_gradient() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 30] = columns("x0".."x29")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[30] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 99))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 31);
    check_gradient(&d, &point(&d, 0.1));
}

#[test]
fn hierarchical_bounded_and_let_gradient() {
    let m = model(
        r#"
likelihood lap(y : real, f : real, b : positive) { -abs(y - f) / b - log(2 * b) }
data { n : int  X : matrix[n, 3] = columns("x0", "x1", "x2")  y : vector[n] = column("x3") }
param {
  tau : positive ~ half_normal(1)
  w : vector[3] ~ normal(0, tau)
  rho : unit ~ beta(2, 2)
  s : real<lower=-1, upper=3>
}
model {
  let eta = X * w .* exp(rho) + s
  let z = sum(eta .* eta) / n + dot(w, w)
  y ~ lap(eta + 0.1 * z, tau + 0.5)
  s ~ normal(0, 2)
}
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 39))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 6);
    check_gradient(&d, &point(&d, 0.3));
}

#[test]
fn latent_gp_classification_gradient() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { m0 : real ~ normal(0, 1) }
model {
  f ~ gp(m0, 1.5 * rbf(2.0))
  y ~ bernoulli_logit(f(X))
}
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 14))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 16);
    check_gradient(&d, &point(&d, 0.5));
}

#[test]
fn conjugate_normal_log_density_is_exact() {
    // log π(μ) = log N(μ | 0, 1) + Σ log N(yᵢ | μ, 1), unconstrained = constrained.
    let m = model(
        r#"
data { n : int  y : vector[n] = column("x0") }
param { mu : real ~ normal(0, 1) }
model { y ~ normal(mu, 1) }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 9))));
    let ys = b.data[b.graph.data_index("y").unwrap()].flatten();
    let d = Density::new(Arc::new(b)).unwrap();
    let mu = 0.37;
    let lnorm = |x: f64, m: f64| -0.5 * (x - m) * (x - m) - 0.5 * (2.0 * std::f64::consts::PI).ln();
    let want = lnorm(mu, 0.0) + ys.iter().map(|y| lnorm(*y, mu)).sum::<f64>();
    assert_rel(d.log_density(&[mu]).unwrap(), want, 1e-12, "log density");
}
