//! The samplers' log density and gradient: gradients against finite
//! differences on models with vector products, lets, hierarchical priors,
//! bounded params, user likelihoods and latent GPs; values against closed forms.

use crate::common;
use common::*;
use std::sync::Arc;
use tempest::infer::mcmc::density::Density;

fn check_gradient(d: &Density, x: &[f64]) {
    let mut g = vec![0.0; d.dim];
    let lp = d.log_density_grad(x, &mut g).unwrap();
    assert!(lp.is_finite());
    // The value-only path and the gradient path agree.
    assert_rel(d.log_density(x).unwrap(), lp, 1e-12, "log density");
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
    let m = model(LOGISTIC);
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

/// Integer-array indexing (`a[g]`, repeated indices; rows of a matrix
/// `B[g]` in a product; a nested `a[g[k]]`): the gather's adjoint scatters
/// back and adds at repeated indices.
#[test]
fn integer_array_index_gradient() {
    let m = model(
        r#"
data {
  n : int
  g : int<lower=0, upper=2>[n] = column("target")
  x : vector[n] = column("petal width (cm)")
  y : vector[n] = column("sepal length (cm)")
}
param {
  tau : positive ~ normal(0, 5)
  a : vector[3] ~ normal(0, tau)
  B : matrix[3, 2]
  sigma : positive
}
model {
  let X2 = B[g]
  y ~ normal(a[g] + x .* (X2 * [1.0, 0.5]) + a[g[3]], sigma)
}
"#,
    );
    let b = bind(&m, &csv("iris.csv", Some((40, 119))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 1 + 3 + 6 + 1);
    check_gradient(&d, &point(&d, 0.4));
}

#[test]
fn latent_gp_classification_gradient() {
    // A fixed kernel (the model the sampling bench times).
    let m = model(include_str!(
        "../../benches/models/latent_gp_fixed_kernel.tempest"
    ));
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

const GP_REGRESSION: &str = r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : vector[n] = column("x3") }
param {
  ell : positive ~ lognormal(0, 1)
  sf : positive ~ lognormal(0, 1)
  sigma : positive ~ half_normal(1)
  c : real ~ normal(0, 1)
}
model {
  f ~ gp(c, sf^2 * rbf(ell))
  y ~ normal(f(X) + 0.5 * c, sigma)
}
"#;

#[test]
fn gp_regression_hypers_marginal_gradient() {
    // The latent GP is integrated out: x holds only the four params.
    let b = bind(
        &model(GP_REGRESSION),
        &csv("breast_cancer_prepared.csv", Some((0, 29))),
    );
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 4);
    check_gradient(&d, &point(&d, 0.4));
    check_gradient(&d, &[-0.5, 0.3, -1.0, 0.2]);
}

#[test]
fn gp_regression_hypers_marginal_value_is_closed_form() {
    use nalgebra::{DMatrix, DVector};
    let b = bind(
        &model(GP_REGRESSION),
        &csv("breast_cancer_prepared.csv", Some((0, 19))),
    );
    let xs = b.data[b.graph.data_index("X").unwrap()].flatten();
    let ys = b.data[b.graph.data_index("y").unwrap()].flatten();
    let d = Density::new(Arc::new(b)).unwrap();
    let u: [f64; 4] = [0.3, -0.2, -0.7, 0.4];
    let (ell, sf, sigma, c) = (u[0].exp(), u[1].exp(), u[2].exp(), u[3]);
    let n = ys.len();
    let ln2pi = (2.0 * std::f64::consts::PI).ln();
    let a = DMatrix::from_fn(n, n, |i, j| {
        let r2 = (xs[2 * i] - xs[2 * j]).powi(2) + (xs[2 * i + 1] - xs[2 * j + 1]).powi(2);
        sf * sf * (-0.5 * r2 / (ell * ell)).exp() + if i == j { sigma * sigma } else { 0.0 }
    });
    let r = DVector::from_iterator(n, ys.iter().map(|y| y - 1.5 * c));
    let chol = a.cholesky().unwrap();
    let lml = -0.5 * r.dot(&chol.solve(&r))
        - chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>()
        - 0.5 * n as f64 * ln2pi;
    let lognormal01 = |x: f64| -x.ln() - 0.5 * ln2pi - 0.5 * x.ln().powi(2);
    let priors = lognormal01(ell)
        + lognormal01(sf)
        + (2f64.ln() - 0.5 * ln2pi - 0.5 * sigma * sigma)
        + (-0.5 * ln2pi - 0.5 * c * c);
    let logjac = u[0] + u[1] + u[2];
    assert_rel(
        d.log_density(&u).unwrap(),
        lml + priors + logjac,
        1e-10,
        "marginal log density",
    );
}

#[test]
fn latent_gp_with_kernel_params_gradient() {
    // Whitened latent values with K(θ) refactorised at each point: the
    // gradient in ell, sf and m0 goes through the Cholesky factor (the
    // model the sampling bench times).
    let m = model(include_str!(
        "../../benches/models/latent_gp_kernel_params.tempest"
    ));
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 11))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 3 + 12);
    check_gradient(&d, &point(&d, 0.5));
    check_gradient(&d, &point(&d, -0.8));
    // The factor is recorded on the tape joined to the params' reverse
    // sweep; the forward-mode chunks it stands beside give the same
    // gradient to rounding.
    assert!(d.latent_factor_on_tape());
    for scale in [0.5, -0.8] {
        let x = point(&d, scale);
        let mut g = vec![0.0; d.dim];
        let lp = d.log_density_grad(&x, &mut g).unwrap();
        let mut gf = vec![0.0; d.dim];
        let lpf = tempest::infer::gradients::with_forward_chunks(|| {
            d.log_density_grad(&x, &mut gf).unwrap()
        });
        assert_eq!(lp.to_bits(), lpf.to_bits(), "the same factor");
        for k in 0..d.dim {
            assert_rel(g[k], gf[k], 1e-10, &format!("coordinate {k}"));
        }
    }
}

#[test]
fn latent_gp_with_an_interpreted_kernel_keeps_forward_mode() {
    // A kernel body outside the compiler (`rows`) has no reverse rules in
    // its inputs: the factor is not on the tape and the gradient takes the
    // forward-mode passes, still exact.
    let m = model(
        r#"
kernel wig(s : positive)(x, x2) {
  let i = rows(x) - 1
  s * exp(-(x[i] - x2[i])^2)
}
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { s : positive ~ lognormal(0, 1) }
model {
  f ~ gp(0, wig(s))
  y ~ bernoulli_logit(f(X))
}
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 9))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert!(!d.latent_factor_on_tape());
    check_gradient(&d, &point(&d, 0.4));
}

#[test]
fn multi_class_latent_gp_with_kernel_params_gradient() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=2>[n] = column("y") }
param { ell : positive ~ lognormal(0, 1) }
model {
  g ~ gp(0, rbf(ell))[3]
  y ~ categorical_logit(g(X))
}
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 7))));
    let d = Density::new(Arc::new(b)).unwrap();
    assert_eq!(d.dim, 1 + 8 * 3);
    check_gradient(&d, &point(&d, 0.6));
}

#[test]
fn power_posterior_scores_combine_two_parts() {
    // log π_t = log prior + t · log p(y|x): the value path, the gradient
    // path and the score parts agree at several t, for a model with a
    // marginalised GP and one with a sampled (whitened) GP.
    for (text, rows) in [
        (GP_REGRESSION, (0usize, 19usize)),
        (
            r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { ell : positive ~ lognormal(0, 1) }
model {
  f ~ gp(0, rbf(ell))
  y ~ bernoulli_logit(f(X))
}
"#,
            (0, 9),
        ),
    ] {
        let b = bind(&model(text), &csv("breast_cancer_prepared.csv", Some(rows)));
        let d = Density::new(Arc::new(b)).unwrap();
        let x = point(&d, 0.3);
        let (prior, lik) = d.score_parts(&x).unwrap();
        let ll = d.log_likelihood(&x).unwrap();
        let lp0 = d.clone().with_power(0.0).log_density(&x).unwrap();
        for t in [0.0, 0.01, 0.5, 1.0] {
            let dt = d.clone().with_power(t);
            let mut g = vec![0.0; d.dim];
            let lp = dt.log_density_grad(&x, &mut g).unwrap();
            assert_rel(lp, lp0 + t * ll, 1e-10, "log π_t");
            assert_rel(dt.log_density(&x).unwrap(), lp, 1e-12, "value path");
            for k in 0..d.dim {
                let want = prior[k] + t * lik[k];
                assert!(
                    (g[k] - want).abs() < 1e-9 * want.abs().max(1.0),
                    "t = {t}, coordinate {k}"
                );
            }
            if t > 0.0 {
                check_gradient(&dt, &x);
            }
        }
    }
}
