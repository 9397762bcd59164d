//! The samplers' compiled log density (`ir::logdensity`) against the
//! general reverse pass over the expressions: on every model here the
//! density compiles, and its value and gradient agree with the general
//! path's to rounding, at several points, untempered and tempered; a
//! model with a varying matrix keeps the general path.

mod common;
use common::*;
use std::sync::Arc;
use tempest::Data;
use tempest::infer::mcmc::density::Density;

fn example_data(name: &str) -> Data {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    Data::read(&path).expect("example data")
}

fn example_model(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    std::fs::read_to_string(path).expect("example model")
}

/// The compiled and the general gradient agree at three points and two
/// powers of the likelihood.
fn agree(d: Density, what: &str) {
    assert!(d.is_compiled(), "{what}: the density did not compile");
    let general = d.clone().without_program();
    assert!(!general.is_compiled());
    for power in [1.0, 0.37] {
        let (d, general) = (
            d.clone().with_power(power),
            general.clone().with_power(power),
        );
        for scale in [0.0, 0.3, 1.1] {
            let x: Vec<f64> = (0..d.dim)
                .map(|i| scale * ((i as f64 * 0.731 + 0.2).sin()))
                .collect();
            let (mut g1, mut g2) = (vec![f64::NAN; d.dim], vec![f64::NAN; d.dim]);
            let v1 = d.log_density_grad(&x, &mut g1).unwrap();
            let v2 = general.log_density_grad(&x, &mut g2).unwrap();
            assert!(v1.is_finite(), "{what}: {v1}");
            assert_rel(
                v1,
                v2,
                1e-12,
                &format!("{what}: value at {scale}, t = {power}"),
            );
            for k in 0..d.dim {
                let tol = 1e-10 * g2[k].abs().max(1.0);
                assert!(
                    (g1[k] - g2[k]).abs() <= tol,
                    "{what}: coordinate {k} at {scale}, t = {power}: compiled {} vs general {}",
                    g1[k],
                    g2[k]
                );
            }
        }
    }
}

fn density(text: &str, data: &Data) -> Density {
    let m = model(text);
    Density::new(Arc::new(bind(&m, data))).unwrap()
}

#[test]
fn the_examples_compile_and_agree() {
    let logistic = csv("breast_cancer_prepared.csv", Some((0, 199)));
    agree(
        density(&example_model("logistic.tempest"), &logistic),
        "logistic",
    );
    let schools = example_data("eight_schools.json");
    agree(
        density(&example_model("eight_schools.tempest"), &schools),
        "eight schools",
    );
    agree(
        density(&example_model("eight_schools_centred.tempest"), &schools),
        "eight schools, centred",
    );
    let radon = example_data("data/radon.csv");
    agree(density(&example_model("radon.tempest"), &radon), "radon");
}

#[test]
fn lets_bounds_builtins_and_reductions_agree() {
    let data = csv("breast_cancer_prepared.csv", Some((0, 59)));
    let text = r#"
data { n : int  X : matrix[n, 3] = columns("x0", "x1", "x2")  y : vector[n] = column("x3")
       k : int<lower=0, upper=1>[n] = column("y") }
param {
  tau : positive ~ half_normal(1)
  w : vector[3] ~ normal(0, tau)
  rho : unit ~ beta(2, 2)
  s : real<lower=-1, upper=3> ~ cauchy(0, 2)
  nu : positive ~ gamma(2, 0.5)
  c : real ~ student_t(3, 0, 1)
}
model {
  let eta = X * w .* exp(rho) + s
  let z = sum(eta .* eta) / n + dot(w, w) + mean(log1p(exp(-eta)))
  let v = [w[0], tanh(c), 2.0 ^ s]
  y ~ student_t(nu + 1, eta - 0.1 * z + logsumexp(v) / (1 + sqrt(tau)), tau + 0.5)
  k ~ bernoulli_logit(-eta / (1 + w[2] ^ 2) + pow(rho, 1.5) + sigmoid(c))
}
"#;
    agree(density(text, &data), "lets and built-ins");
}

#[test]
fn model_file_likelihoods_and_gathers_agree() {
    let data = csv("iris.csv", Some((30, 129)));
    let text = r#"
likelihood lap(y : real, f : real, b : positive) { -abs(y - f) / b - log(2 * b) }
data {
  n : int
  g : int<lower=0, upper=2>[n] = column("target")
  x : vector[n] = column("petal width (cm)")
  y : vector[n] = column("sepal length (cm)")
}
param {
  tau : positive ~ normal(0, 5)
  a : vector[3] ~ normal(0, tau)
  b : real ~ normal(0, 1)
  sigma : positive ~ lognormal(0, 1)
}
model {
  let mu = a[g] + b * x + a[1]
  y ~ lap(mu, sigma) ^ 0.5
  x ~ normal(if n > 10 then mu else -mu, sigma * 2)
}
"#;
    agree(density(text, &data), "model-file likelihood");
}

/// A latent GP in whitened form: a fixed kernel with a learned mean, and a
/// kernel with params (L refactorised at each point).
#[test]
fn latent_gps_agree() {
    let data = csv("breast_cancer_prepared.csv", Some((0, 24)));
    let fixed = r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { m0 : real ~ normal(0, 1)  s : positive ~ normal(0, 1) }
model {
  f ~ gp(m0 * 2, 1.5 * rbf(2.0))
  y ~ bernoulli_logit(f(X) / (1 + s))
}
"#;
    agree(density(fixed, &data), "latent GP, fixed kernel");
    let learned = r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { m0 : real ~ normal(0, 1)  ell : positive ~ lognormal(0, 0.5) }
model {
  f ~ gp(m0, 1.5 * rbf(ell))
  y ~ bernoulli_logit(f(X))
}
"#;
    agree(density(learned, &data), "latent GP, kernel with a param");
}

/// A replicated latent GP (one copy per class) through `categorical_logit`,
/// with a kernel param.
#[test]
fn replicated_gps_agree() {
    let text = r#"
data { n : int  X : matrix[n, 2] = columns("sepal length (cm)", "petal width (cm)")
       y : int<lower=0, upper=2>[n] = column("target") }
param { ell : positive ~ lognormal(0, 1)  m : real ~ normal(0, 1) }
model {
  f ~ gp(m, rbf(ell))[3]
  y ~ categorical_logit(f(X))
}
"#;
    agree(
        density(text, &csv("iris.csv", Some((40, 69)))),
        "replicated GP",
    );
}

/// A mixing matrix that is a param: matrices that vary are outside the
/// program, and the density keeps the general path.
#[test]
fn a_varying_matrix_keeps_the_general_path() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 2] = columns("sepal length (cm)", "petal width (cm)")
       y : int<lower=0, upper=2>[n] = column("target") }
param { A : matrix[2, 3] }
model {
  f ~ gp(0, rbf(1.0))[2]
  y ~ categorical_logit(f(X) * A)
}
"#,
    );
    let b = bind(&m, &csv("iris.csv", Some((40, 69))));
    assert!(!Density::new(Arc::new(b)).unwrap().is_compiled());
}

/// A vector param of size 0 is refused where its size is written (it used
/// to be sampled as one number).
#[test]
fn an_empty_vector_param_is_a_located_error() {
    let m = model(
        r#"
data { n : int  K : int = 0  y : vector[n] = column("x3") }
param { mu : real ~ normal(0, 1)  w : vector[K] ~ normal(mu, 2) }
model { y ~ normal(mu + sum(w), 1) }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 19))));
    let Err(e) = Density::new(Arc::new(b)) else {
        panic!("an empty vector param was accepted")
    };
    let text = m.render(&e.into());
    assert!(text.contains("has no entries"), "{text}");
    assert!(text.contains("test.tempest:3:"), "{text}");
}
