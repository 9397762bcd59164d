//! The samplers' compiled log density (`ir::logdensity`), their one
//! reverse mode, against the evaluator: on every model here its value
//! equals the evaluator's to rounding and its gradient matches central
//! differences of the evaluator's value, at several points, untempered and
//! tempered, for every kind of node (matrix params and products, rows and
//! columns, `if` on a condition that varies, ODE solutions, statements
//! outside the prepared ones, a GP integrated out).

use crate::common;
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

/// The compiled density against the evaluator: its value (with the
/// gradient and alone) and its log-likelihood equal to the evaluator's
/// (`Density::log_density_interpreted`, which interprets the expressions)
/// to rounding and its gradient against central differences of that value,
/// at three points and two powers of the likelihood.
fn agree(d: Density, what: &str) {
    for power in [1.0, 0.37] {
        let d = d.clone().with_power(power);
        for scale in [0.0, 0.3, 1.1] {
            let x: Vec<f64> = (0..d.dim)
                .map(|i| scale * ((i as f64 * 0.731 + 0.2).sin()))
                .collect();
            let mut g = vec![f64::NAN; d.dim];
            let v = d.log_density_grad(&x, &mut g).unwrap();
            assert!(v.is_finite(), "{what}: {v}");
            let lp = |x: &[f64]| d.log_density_interpreted(x).unwrap();
            assert_rel(
                d.log_density(&x).unwrap(),
                lp(&x),
                1e-12,
                &format!("{what}: value alone at {scale}, t = {power}"),
            );
            assert_rel(
                d.log_likelihood(&x).unwrap(),
                d.log_likelihood_interpreted(&x).unwrap(),
                1e-12,
                &format!("{what}: log-likelihood at {scale}"),
            );
            assert_rel(
                v,
                lp(&x),
                1e-12,
                &format!("{what}: value at {scale}, t = {power}"),
            );
            let (e1, e2) = (
                d.estimate_values(&x).unwrap(),
                d.estimate_values_interpreted(&x).unwrap(),
            );
            assert_eq!(e1.len(), e2.len(), "{what}: estimates");
            for (a, b) in e1.iter().zip(&e2) {
                assert_eq!(a.len(), b.len(), "{what}: an estimate's components");
                for (a, b) in a.iter().zip(b) {
                    assert_rel(*a, *b, 1e-12, &format!("{what}: estimate at {scale}"));
                }
            }
            for k in 0..d.dim {
                // Richardson's extrapolation of central differences (error
                // of order h⁴).
                let diff = |h: f64| {
                    let (mut up, mut dn) = (x.clone(), x.clone());
                    up[k] += h;
                    dn[k] -= h;
                    (lp(&up) - lp(&dn)) / (2.0 * h)
                };
                let h = 1e-3;
                let fd = (4.0 * diff(h / 2.0) - diff(h)) / 3.0;
                let tol = 1e-6 * fd.abs().max(1.0) + 1e-10 * v.abs();
                assert!(
                    (g[k] - fd).abs() <= tol,
                    "{what}: coordinate {k} at {scale}, t = {power}: gradient {} vs differences {fd}",
                    g[k]
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
    let iris = example_data("data/iris.csv");
    agree(
        density(&example_model("iris_varying_intercept.tempest"), &iris),
        "iris, varying intercept (with estimates)",
    );
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
estimate { p = E[sigmoid(f(X))]  m = E[m0] }
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

/// A mixing matrix that is a param: a replicated GP's values [N, 2] times
/// A [2, 3] into three classes' scores.
#[test]
fn a_varying_matrix_agrees() {
    let text = r#"
data { n : int  X : matrix[n, 2] = columns("sepal length (cm)", "petal width (cm)")
       y : int<lower=0, upper=2>[n] = column("target") }
param { A : matrix[2, 3] }
model {
  f ~ gp(0, rbf(1.0))[2]
  y ~ categorical_logit(f(X) * A)
}
"#;
    agree(
        density(text, &csv("iris.csv", Some((40, 69)))),
        "mixing matrix",
    );
}

/// Matrix params: rows gathered by group, single rows and entries, columns,
/// matrix products on either side, element-wise matrix arithmetic, sums of
/// matrices, array literals of vectors, squared distances, sizes of
/// matrices that vary.
#[test]
fn matrix_params_rows_and_products_agree() {
    let text = r#"
data { n : int  g : int<lower=0, upper=2>[n] = column("target")
       X : matrix[n, 2] = columns("sepal length (cm)", "petal width (cm)")
       y : vector[n] = column("sepal width (cm)") }
param {
  B : matrix[3, 2]
  W : matrix[2, 2]
  c : vector[2] ~ normal(0, 1)
  sigma : positive ~ lognormal(0, 1)
}
model {
  let R = B[g]
  let M = X * W .* exp(W[0, 1]) + R
  let S = [c, B[1]]
  let eta = col(M, 0) - col(M, 1) + X * col(W, 1) + sum(S .* S) / 10 + sqdist(c, B[2]) / 5
  y ~ normal(eta + mean(B * W) + (W * c)[1], sigma * cols(B) / rows(W))
}
estimate { BW = E[col(B * W, 1)]  row = E[R[4]]  pos = E[if B[0, 1] > 0 then 1 else 0]  s2 = E[sigma ^ 2] }
"#;
    agree(
        density(text, &csv("iris.csv", Some((20, 119)))),
        "matrix params",
    );
}

/// `if` on a condition that varies: the branch taken at each point, and
/// the branch not taken (here a log of a negative number) adds nothing.
#[test]
fn a_condition_that_varies_agrees() {
    let text = r#"
data { n : int  y : vector[n] = column("sepal length (cm)") }
param { a : real ~ normal(0, 1)  b : real ~ normal(0, 1) }
model {
  let m = if a > 0.1 && !(b < -2) then 5 + log(a) * b else 5 - a ^ 2 + log(-a + 0.2)
  y ~ normal(m, 1 + exp(b) / (if b >= 0.05 then 2 else 3))
}
"#;
    agree(density(text, &csv("iris.csv", Some((0, 39)))), "if");
}

/// A statement outside the prepared terms (seven arguments, all varying):
/// the general statement VJP.
#[test]
fn general_statements_agree() {
    let text = r#"
likelihood wide(y : real, a : real, b : real, c : real, d : real, e : real, f : real, g : real) {
  let m = a + b * 0.1 + c * 0.01 + d * 0.2 + e * 0.3 + f * 0.4
  log(1 / g) - 0.5 * ((y - m) / g) ^ 2
}
data { n : int  y : vector[n] = column("sepal length (cm)") }
param { a : real ~ normal(5, 1)  b : real ~ normal(0, 1)  c : real ~ normal(0, 1)
        d : real ~ normal(0, 1)  e : real ~ normal(0, 1)  f : real ~ normal(0, 1)
        s : positive ~ lognormal(0, 1) }
model { y ~ wide(a, b, c, d, e, f, s) }
"#;
    agree(
        density(text, &csv("iris.csv", Some((30, 89)))),
        "general statements",
    );
}

/// A GP integrated out of its Gaussian likelihood beside other statements.
#[test]
fn a_gp_integrated_out_agrees() {
    let text = r#"
data { n : int  x : vector[n] = column("sepal width (cm)")
       y : vector[n] = column("sepal length (cm)")  z : vector[n] = column("petal width (cm)") }
param { ell : positive ~ lognormal(0, 1)  s : positive ~ lognormal(-1, 1)
        m : real ~ normal(5, 2)  w : real ~ normal(0, 1) }
model {
  f ~ gp(m, rbf(ell))
  y ~ normal(f(x), s)
  z ~ normal(w * x, 1)
}
"#;
    agree(
        density(text, &csv("iris.csv", Some((0, 29)))),
        "GP integrated out",
    );
}

/// An ODE solution through `col`, with a vector param as its initial state.
#[test]
fn an_ode_agrees() {
    let text = r#"
system lv(t : real, z : vector[2], alpha : real, beta : real, gamma : real, delta : real) {
  [(alpha - beta * z[1]) * z[0], (-gamma + delta * z[0]) * z[1]]
}
data { n : int  year : vector[n]  hare : vector[n]  lynx : vector[n] }
param {
  alpha : positive ~ normal(1, 0.5)
  beta : positive ~ normal(0.05, 0.05)
  z_init : positive[2] ~ lognormal(log(10), 1)
  sigma : positive ~ lognormal(-1, 1)
}
model {
  let z = ode(lv, z_init, 0, year - 1900, alpha, beta, 0.8, 0.024, rtol = 1e-11, atol = 1e-11)
  hare ~ lognormal(log(col(z, 0)), sigma)
  lynx ~ lognormal(log(col(z, 1)) + z[3, 1] / 1000, sigma)
}
"#;
    let d = density(text, &csv("hare_lynx_1900_1920.csv", None));
    // A run with gradients solves once, with the sensitivities (the f64
    // solve is not repeated): the same solution, so the same value, bit
    // for bit, as the value alone.
    let x: Vec<f64> = (0..d.dim).map(|i| 0.2 * (i as f64).cos()).collect();
    let mut g = vec![0.0; d.dim];
    assert_eq!(
        d.log_density_grad(&x, &mut g).unwrap().to_bits(),
        d.log_density(&x).unwrap().to_bits()
    );
    agree(d, "ODE");
    // x[0]^2 in the system: its power is f64's in the duals too (ad_trait's
    // duals take powf, whose value may differ in the last bit), so the
    // solve with sensitivities is the f64 solve here as well.
    let d = density(
        &example_model("vanderpol.tempest"),
        &Data::read(std::path::Path::new("examples/data/vanderpol.csv")).unwrap(),
    );
    for x in [0.3, -0.2, 0.05] {
        let mut g = vec![0.0; d.dim];
        assert_eq!(
            d.log_density_grad(&[x], &mut g).unwrap().to_bits(),
            d.log_density(&[x]).unwrap().to_bits(),
            "van der Pol at {x}"
        );
    }
    agree(d, "van der Pol");
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
