//! The `svi` engine against truth: with every training point as an
//! inducing point it is the exact GP for a Gaussian likelihood (one
//! natural step at ρ = 1) and reaches GPflow's variational optimum for a
//! Bernoulli one; its minibatch gradients in the hypers (kernel, mean,
//! noise, a model-file kernel) and the inducing inputs match finite
//! differences; it is a lower bound that learns; results repeat with the
//! seed on any thread count.

use crate::common;
use common::*;
use tempest::AsSvi;
use tempest::infer::svi::def::SVI_SCHEMA;
use tempest::infer::svi::engine::Svi;
use tempest::infer::svi::fit::SviFit;
use tempest::{Bound, Fit};

const DIABETES: &str = r#"
data {
  n : int
  X : matrix[n, 10] = columns("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")
  y : vector[n]
}
hyper { ell : positive = 3.0  sf2 : positive = 1.0  noise : positive = 0.1 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ normal(f(X), sqrt(noise))
}
GUIDE
infer svi { learn_hypers = LEARN }
"#;

fn diabetes(guide: &str, learn: bool, rows: (usize, usize)) -> Bound {
    let text = DIABETES
        .replace("GUIDE", guide)
        .replace("LEARN", if learn { "true" } else { "false" });
    bind(
        &model(&text),
        &csv("diabetes_prepared.csv", Some(rows)).clone(),
    )
}

fn run(b: &Bound, engine: &str, settings: &[(&str, &str)]) -> Box<dyn tempest::infer::fit::Fit> {
    fit_with(b, Some(engine), settings)
}

fn svi(b: &Bound, settings: &[(&str, &str)]) -> Box<SviFit> {
    run(b, "svi", settings)
        .downcast::<SviFit>()
        .expect("an svi fit")
}

#[test]
fn every_point_inducing_is_the_exact_gp_in_one_natural_step() {
    let b = diabetes("guide { f : inducing(m = 1000) }", false, (0, 299));
    let exact = run(&b, "exact", &[("learn_hypers", "false")]);
    let lml = exact.to_json()["log_marginal_likelihood"].as_f64().unwrap();
    let fit = svi(
        &b,
        &[
            ("steps", "1"),
            ("batch", "100000"),
            ("rho", "1"),
            ("learn_hypers", "false"),
            ("jitter", "0"),
        ],
    );
    assert_eq!(fit.inducing.len(), 300);
    assert_rel(fit.elbo, lml, 1e-9, "ELBO with Z = X against the exact lml");
}

/// KISS-GP against the exact GP on one input (bmi, 300 points): the
/// optimal q for a fine grid (one natural step at ρ = 1 over the whole
/// data) gives an ELBO within 1e-4 of the exact log marginal likelihood,
/// and a coarse grid a lower bound below it.
#[test]
fn a_fine_grid_is_the_exact_gp_on_one_input() {
    let text = DIABETES
        .replace(
            r#"X : matrix[n, 10] = columns("age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6")"#,
            r#"X : matrix[n, 1] = columns("bmi")"#,
        )
        .replace("ell : positive = 3.0", "ell : positive = 0.8")
        .replace("LEARN", "false");
    let data = csv("diabetes_prepared.csv", Some((0, 299)));
    let b = bind(&model(&text.replace("GUIDE", "")), &data);
    let exact = run(&b, "exact", &[("learn_hypers", "false")]);
    let lml = exact.to_json()["log_marginal_likelihood"].as_f64().unwrap();
    let settings = [
        ("steps", "1"),
        ("batch", "100000"),
        ("rho", "1"),
        ("polish", "0"),
        ("learn_hypers", "false"),
    ];
    let elbo = |m: usize| {
        let guide = format!("guide {{ f : grid(m = {m}) }}");
        svi(
            &bind(&model(&text.replace("GUIDE", &guide)), &data),
            &settings,
        )
        .elbo
    };
    let (fine, coarse) = (elbo(400), elbo(12));
    assert_rel(fine, lml, 1e-4, "fine-grid ELBO against the exact lml");
    assert!(coarse < fine && coarse < lml, "{coarse} {fine} {lml}");
}

#[test]
fn every_point_inducing_reaches_gpflows_bernoulli_optimum() {
    let r = reference("gp_classification_binary.json");
    let opt = r["problems"]["breast_cancer_logit"]["elbo_optimum"]
        .as_f64()
        .unwrap();
    let text = r#"
data {
  n : int
  X : matrix[n, 30] = columns("x0".."x29")
  y : int<lower=0, upper=1>[n]
}
hyper { ell : positive = 5.0  sf2 : positive = 1.0 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ bernoulli_logit(f(X))
}
guide { f : inducing(m = 300) }
infer svi { steps = 12, batch = 300, rho = 1, learn_hypers = false, polish = 0 }
"#;
    let b = bind(
        &model(text),
        &csv("breast_cancer_prepared.csv", Some((0, 299))),
    );
    let fit = svi(&b, &[]);
    assert_rel(fit.elbo, opt, 1e-6, "ELBO against GPflow's optimum");
    // Adam on (mean, factor) from the same start climbs more slowly...
    let adam = svi(&b, &[("q_step", "adam"), ("steps", "12")]);
    assert!(
        adam.elbo < fit.elbo - 1.0,
        "adam {} natural {}",
        adam.elbo,
        fit.elbo
    );
    // ...and whole-data natural steps at the end take it to the optimum.
    let polished = svi(&b, &[("q_step", "adam"), ("steps", "12"), ("polish", "6")]);
    assert_rel(
        polished.elbo,
        opt,
        1e-6,
        "polished Adam against GPflow's optimum",
    );
    assert!(
        polished.run.reason.contains("whole-data natural"),
        "{}",
        polished.run.reason
    );
}

/// A six-class softmax model on four satellite features: the data block,
/// then `rest` (its hyper, model, guide and infer blocks).
fn satellite4(rest: &str) -> String {
    format!(
        "data {{\n  n : int\n  X : matrix[n, 4] = columns(\"x0\", \"x1\", \"x2\", \"x3\")\n  y : int<lower=0, upper=5>[n] = column(\"y\")\n}}\n{rest}"
    )
}

/// A softmax model's minibatch gradient (16 draws, rows 10..41 of the
/// first 80 satellite rows) at random q's for its `latents` GPs (`m`
/// points each, seeded from `seed`) against central differences; the
/// engine, for more checks.
fn check_softmax_gradient(text: &str, latents: u64, m: usize, seed: u64) -> Svi {
    let b = bind(&model(text), &csv("satellite_prepared.csv", Some((0, 79))));
    let mut e = engine(&b, &[("mc_samples", "16")]);
    e.set_posteriors((0..latents).map(|c| random_q(m, seed + c)).collect());
    check_gradient(&mut e, &(10..42).collect::<Vec<_>>(), 2e-5);
    e
}

fn engine(b: &Bound, settings: &[(&str, &str)]) -> Svi {
    assert_eq!(SVI_SCHEMA.name, "svi");
    svi_engine(b, settings)
}

/// Central differences of the minibatch objective in every optimised
/// coordinate against the engine's reverse pass.
fn check_gradient(e: &mut Svi, rows: &[usize], tol: f64) {
    let x0 = e.point();
    let (_, g) = e.batch_gradient(rows).unwrap();
    assert_eq!(g.len(), x0.len());
    for k in 0..x0.len() {
        let h = 1e-5 * (1.0 + x0[k].abs());
        let mut f = |d: f64| {
            let mut x = x0.clone();
            x[k] += d;
            e.set_point(&x).unwrap();
            e.batch_gradient(rows).unwrap().0
        };
        let want = (f(h) - f(-h)) / (2.0 * h);
        assert!(
            (g[k] - want).abs() <= tol * (1.0 + want.abs()),
            "coordinate {k}: {} vs {want}",
            g[k]
        );
    }
    e.set_point(&x0).unwrap();
}

#[test]
fn minibatch_gradients_match_finite_differences() {
    // A learned mean, noise, a built-in kernel and a model-file one.
    let text = r#"
data {
  n : int
  X : matrix[n, 3] = columns("age", "bmi", "bp")
  y : vector[n]
}
kernel my_rq(ell : positive, alpha : positive)(x, x2) { (1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha) }
hyper {
  ell : positive = 1.5  sf2 : positive = 0.8  noise : positive = 0.3
  mu : real = 0.1  l2 : positive = 2.0  a : positive = 1.2
}
model {
  f ~ gp(mu, sf2 * rbf(ell) + 0.5 * my_rq(l2, a))
  y ~ normal(f(X), sqrt(noise))
}
guide { f : inducing(m = 6) }
infer svi { }
"#;
    let b = bind(&model(text), &csv("diabetes_prepared.csv", Some((0, 59))));
    let mut e = engine(&b, &[]);
    e.set_posteriors(vec![random_q(6, 2)]);
    let rows: Vec<usize> = (5..25).collect();
    check_gradient(&mut e, &rows, 2e-5);
    // With Z fixed the same pass gives the hypers alone (no input adjoints).
    let mut fixed = engine(&b, &[("learn_inducing", "false")]);
    fixed.set_posteriors(vec![random_q(6, 2)]);
    assert_eq!(fixed.point().len(), 6);
    check_gradient(&mut fixed, &rows, 2e-5);

    // Six latent GPs of a softmax share Z (Monte Carlo expectations).
    let text = satellite4(
        r#"
hyper { ell : positive = 2.0  sf2 : positive = 1.5 }
model {
  f ~ gp(0, sf2 * rbf(ell))[6]
  y ~ categorical_logit(f(X))
}
guide { f : inducing(m = 5) }
infer svi { }
"#,
    );
    check_softmax_gradient(&text, 6, 5, 10);
}

/// A deep kernel: the gradient in the hypers, the inducing features and
/// every network weight (backpropagation through the layers, with the
/// diagonal's input adjoint from a non-stationary part) against central
/// differences, for both activations and for the softmax.
#[test]
fn deep_kernel_gradients_match_finite_differences() {
    let text = r#"
data {
  n : int
  X : matrix[n, 3] = columns("age", "bmi", "bp")
  y : vector[n]
}
hyper { ell : positive = 1.5  sf2 : positive = 0.8  noise : positive = 0.3 }
model {
  let net = mlp([5, 2], activation = "ACT")
  f ~ gp(0, deep(sf2 * rbf(ell) + 0.3 * linear(), net))
  y ~ normal(f(X), sqrt(noise))
}
guide { f : inducing(m = 6) }
infer svi { }
"#;
    for act in ["tanh", "relu"] {
        let b = bind(
            &model(&text.replace("ACT", act)),
            &csv("diabetes_prepared.csv", Some((0, 59))),
        );
        let mut e = engine(&b, &[]);
        e.set_posteriors(vec![random_q(6, 2)]);
        // 3 hypers, Z [6, 2], weights 3·5 + 5 + 5·2 + 2.
        assert_eq!(e.point().len(), 3 + 12 + 32);
        let rows: Vec<usize> = (5..25).collect();
        check_gradient(&mut e, &rows, 2e-5);
    }
    let text = satellite4(
        r#"
hyper { ell : positive = 2.0  sf2 : positive = 1.5 }
model {
  f ~ gp(0, deep(sf2 * rbf(ell), mlp([6, 3], activation = "tanh")))[6]
  y ~ categorical_logit(f(X))
}
guide { f : inducing(m = 5) }
infer svi { }
"#,
    );
    check_softmax_gradient(&text, 6, 5, 10);
}

const MIXED: &str = r#"
hyper { ell : positive = 2.0  sf2 : positive = 1.5  A : matrix[J, 6] = INIT }
model {
  f ~ gp(0, sf2 * rbf(ell))[J]
  y ~ categorical_logit(f(X) * A)
}
guide { f : inducing(m = 5) }
infer svi { }
"#;

/// J latent GPs mixed into six class scores by a learned matrix A: the
/// gradient in the hypers, Z and every entry of A against central
/// differences.
#[test]
fn mixed_latent_gp_gradients_match_finite_differences() {
    let init = "[[1.29, 1.45, 0.07, -0.76, -1.09, 0.03], [-1.02, -1.44, 0.20, 0.13, 0.55, -0.91], [0.01, -0.06, -1.51, 0.54, 0.32, 2.39]]";
    let text = satellite4(&MIXED.replace("J", "3").replace("INIT", init));
    let e = check_softmax_gradient(&text, 3, 5, 10);
    // ell, sf2, A [3, 6], Z [5, 4].
    assert_eq!(e.point().len(), 2 + 18 + 20);
}

/// SV-DKL's whole model: a network, additive GPs on groups of its
/// features (one inducing set per GP), mixed into class scores: the
/// gradient in the hypers, every set's Z, A and every weight against
/// central differences.
#[test]
fn additive_deep_mixed_gradients_match_finite_differences() {
    let text = satellite4(
        r#"
hyper {
  ell : positive = 1.2  sf2 : positive = 1.5
  A : matrix[3, 6] = [[1.29, 1.45, 0.07, -0.76, -1.09, 0.03], [-1.02, -1.44, 0.20, 0.13, 0.55, -0.91], [0.01, -0.06, -1.51, 0.54, 0.32, 2.39]]
}
model {
  f ~ gp(0, deep(sf2 * rbf(ell) + 0.2 * linear(), mlp([5, 6], activation = "tanh"), groups = 3))[3]
  y ~ categorical_logit(f(X) * A)
}
guide { f : inducing(m = 4) }
infer svi { }
"#,
    );
    let e = check_softmax_gradient(&text, 3, 4, 20);
    // ell, sf2, A [3, 6]; three sets of 4 points in 2 features; weights.
    assert_eq!(
        e.point().len(),
        2 + 18 + 3 * 4 * 2 + (4 * 5 + 5 + 5 * 6 + 6)
    );
}

/// KISS-GP: inducing points on a grid with cubic interpolation. The
/// gradient in the hypers (through the Toeplitz K_ZZ and the interpolated
/// cross-covariance) for a one-dimensional regression, and in the hypers,
/// A and every weight for additive grid GPs on a network's features,
/// against central differences.
#[test]
fn grid_gradients_match_finite_differences() {
    let text = r#"
data {
  n : int
  X : matrix[n, 1] = columns("bmi")
  y : vector[n]
}
hyper { ell : positive = 0.7  sf2 : positive = 0.8  noise : positive = 0.4 }
model {
  f ~ gp(0, sf2 * matern52(ell))
  y ~ normal(f(X), sqrt(noise))
}
guide { f : grid(m = 12) }
infer svi { }
"#;
    let b = bind(&model(text), &csv("diabetes_prepared.csv", Some((0, 59))));
    let mut e = engine(&b, &[]);
    e.set_posteriors(vec![random_q(12, 4)]);
    // The grid is fixed: the hypers alone.
    assert_eq!(e.point().len(), 3);
    check_gradient(&mut e, &(5..25).collect::<Vec<_>>(), 2e-5);

    let text = satellite4(
        r#"
hyper {
  ell : positive = 1.2  sf2 : positive = 1.5
  A : matrix[3, 6] = [[1.29, 1.45, 0.07, -0.76, -1.09, 0.03], [-1.02, -1.44, 0.20, 0.13, 0.55, -0.91], [0.01, -0.06, -1.51, 0.54, 0.32, 2.39]]
}
model {
  f ~ gp(0, deep(sf2 * rbf(ell), mlp([5, 3], activation = "tanh"), groups = 3))[3]
  y ~ categorical_logit(f(X) * A)
}
guide { f : grid(m = 9) }
infer svi { }
"#,
    );
    let e = check_softmax_gradient(&text, 3, 9, 30);
    assert_eq!(e.point().len(), 2 + 18 + (4 * 5 + 5 + 5 * 3 + 3));
}

/// With A = I the mixed model is the plain one: the same minibatch steps
/// (the same draws), so the same q(u) to rounding; its whole-data ELBO by
/// moment-matched Monte Carlo agrees with the product rule's within the
/// reported error estimate.
#[test]
fn identity_mixing_is_the_plain_softmax() {
    let eye: Vec<String> = (0..6)
        .map(|i| {
            let row: Vec<&str> = (0..6).map(|j| if i == j { "1" } else { "0" }).collect();
            format!("[{}]", row.join(", "))
        })
        .collect();
    let mixed = satellite4(
        &MIXED
            .replace("J", "6")
            .replace("INIT", &format!("[{}]", eye.join(", "))),
    );
    let plain = mixed
        .replace(" * A)", ")")
        .replace("A : matrix[6, 6]", "unused : matrix[6, 6]");
    let data = csv("satellite_prepared.csv", Some((0, 299)));
    let settings = [("steps", "40"), ("polish", "0"), ("learn_hypers", "false")];
    let fm = svi(&bind(&model(&mixed), &data), &settings);
    let fp = svi(&bind(&model(&plain), &data), &settings);
    assert_eq!(fm.qs.len(), 6);
    for (a, b) in fm.qs.iter().zip(&fp.qs) {
        assert!((&a.z - &b.z).amax() < 1e-9, "{} vs {}", a.z, b.z);
        assert!((&a.r - &b.r).amax() < 1e-9);
    }
    let err = fm.rule_error.estimate.expect("an error estimate");
    assert!(
        fm.rule_error.rule.contains("Monte Carlo"),
        "{}",
        fm.rule_error.rule
    );
    assert!(
        (fm.elbo - fp.elbo).abs() < 3.0 * err + 1e-3 * fp.elbo.abs(),
        "{} vs {} (error estimate {err})",
        fm.elbo,
        fp.elbo
    );
}

#[test]
fn minibatches_learn_a_lower_bound_close_to_the_exact_optimum() {
    let b = diabetes("guide { f : inducing(m = 40) }", true, (0, 441));
    let exact = run(&b, "exact", &[("learn_hypers", "true")]);
    let lml = exact.to_json()["log_marginal_likelihood"].as_f64().unwrap();
    let fit = svi(&b, &[("steps", "600"), ("batch", "64"), ("lr", "0.03")]);
    // ELBO(θ) ≤ log p(y | θ) ≤ max over θ.
    assert!(fit.elbo <= lml + 1e-9, "ELBO {} above lml {lml}", fit.elbo);
    assert!(
        fit.elbo > lml - 0.02 * lml.abs(),
        "ELBO {} far below lml {lml}",
        fit.elbo
    );
    assert!(fit.run.trace.len() >= 80, "{} epochs", fit.run.trace.len());
}

#[test]
fn results_repeat_with_the_seed_on_any_thread_count() {
    let b = diabetes("guide { f : inducing(m = 20) }", true, (0, 199));
    let settings = [("steps", "40"), ("batch", "32")];
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| svi(&b, &settings).elbo);
    let two = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap()
        .install(|| svi(&b, &settings).elbo);
    assert_eq!(one.to_bits(), two.to_bits());
    let other = svi(&b, &[("steps", "40"), ("batch", "32"), ("seed", "7")]).elbo;
    assert_ne!(one.to_bits(), other.to_bits());
    // SV-DKL's model: a network, additive grid GPs, mixing (the mixed
    // softmax runs its points in parallel).
    let text = std::fs::read_to_string("examples/satellite_svdkl.tempest")
        .unwrap()
        .replace("inducing(m = 20)", "grid(m = 12)");
    let b = bind(
        &model(&text),
        &csv("satellite_prepared.csv", Some((0, 299))),
    );
    let settings = [("steps", "20"), ("batch", "64"), ("polish", "1")];
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| svi(&b, &settings).elbo)
    };
    assert_eq!(run(1).to_bits(), run(2).to_bits());
}

#[test]
fn the_trace_stays_bounded_whatever_the_steps() {
    let b = diabetes("guide { f : inducing(m = 5) }", true, (0, 29));
    let fit = svi(&b, &[("steps", "9000"), ("batch", "1000"), ("polish", "0")]);
    // Every step is an epoch here; the trace thins itself to stay bounded.
    assert!(
        fit.run.trace.len() <= 4096,
        "{} points",
        fit.run.trace.len()
    );
    assert!(
        fit.run.trace.len() >= 2048,
        "{} points",
        fit.run.trace.len()
    );
    assert_eq!(fit.run.trace.last().unwrap().step, 9000);
    assert!(fit.run.trace.windows(2).all(|w| w[0].step < w[1].step));
}

/// A rational-quadratic kernel written in Rust: no reverse rule, so the
/// hypers' gradient goes entry by entry in duals and Z stays fixed.
struct RustRq;

impl tempest::UserKernel for RustRq {
    fn name(&self) -> &str {
        "rust_rq"
    }
    fn params(&self) -> Vec<String> {
        vec!["ell".into(), "alpha".into()]
    }
    fn entry<T: tempest::Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
        (T::one() + T::constant(r2) / (p[1] * p[0] * p[0] * T::constant(2.0))).powf(-p[1])
    }
}

#[test]
fn a_rust_kernel_learns_its_hypers_with_z_fixed() {
    let text = r#"
data {
  n : int
  X : matrix[n, 3] = columns("age", "bmi", "bp")
  y : vector[n]
}
hyper { ell : positive = 1.5  a : positive = 1.2  sf2 : positive = 0.8  noise : positive = 0.3 }
model {
  f ~ gp(0, sf2 * rust_rq(ell, a))
  y ~ normal(f(X), sqrt(noise))
}
guide { f : inducing(m = 6) }
infer svi { }
"#;
    let mut registry = tempest::Registry::default();
    registry.add_kernel(RustRq);
    let m = tempest::Model::from_str("rust.tempest", text, &registry).unwrap();
    let b = m
        .bind(
            &csv("diabetes_prepared.csv", Some((0, 59))),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
    let mut e = engine(&b, &[]);
    // Four hypers and no inducing inputs among the coordinates.
    assert_eq!(e.point().len(), 4);
    e.set_posteriors(vec![random_q(6, 4)]);
    let rows: Vec<usize> = (3..30).collect();
    check_gradient(&mut e, &rows, 2e-5);
    // On a KISS-GP grid (one input): the duals' path goes through the
    // interpolated cross-covariance W K_ZZ too.
    let grid = text
        .replace(r#"columns("age", "bmi", "bp")"#, r#"columns("bmi")"#)
        .replace("matrix[n, 3]", "matrix[n, 1]")
        .replace("inducing(m = 6)", "grid(m = 9)");
    let m = tempest::Model::from_str("rust_grid.tempest", &grid, &registry).unwrap();
    let bg = m
        .bind(
            &csv("diabetes_prepared.csv", Some((0, 59))),
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
    let mut e = engine(&bg, &[]);
    e.set_posteriors(vec![random_q(9, 4)]);
    check_gradient(&mut e, &rows, 2e-5);
    let fit = svi(&b, &[("steps", "30")]);
    let via_api = fit_with(&b, None, &[("steps", "30")]);
    assert_eq!(
        via_api.as_svi().expect("an svi fit").elbo.to_bits(),
        fit.elbo.to_bits()
    );
    assert!(
        fit.report()
            .text()
            .contains("the inducing inputs stay at their k-means start"),
        "{}",
        fit.report().text()
    );
}

/// A likelihood whose latent argument has a data-dependent offset, `shift`
/// being how the column is centred.
fn offset_model(shift: &str) -> Bound {
    let text = r#"
data {
  n : int
  X : matrix[n, 2] = columns("age", "bp")
  bmi : vector[n] = column("bmi")
  y : vector[n]
}
hyper { ell : positive = 1.5  sf2 : positive = 0.8  noise : positive = 0.3  b : real = 0.4 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ normal(f(X) + b * (bmi - (SHIFT)), sqrt(noise))
}
guide { f : inducing(m = 5) }
infer svi { }
"#
    .replace("SHIFT", shift);
    bind(&model(&text), &csv("diabetes_prepared.csv", Some((0, 79))))
}

#[test]
fn row_wise_arguments_are_evaluated_at_the_batch_alone() {
    // `bmi - c`, with c the column's mean, is row-wise: each step evaluates
    // it at the batch's rows. `bmi - mean(bmi)` is the same number at every
    // row but not row-wise (a mean over a batch differs), so that engine
    // evaluates it at all rows: both must give the same objective and
    // gradient, and the batch path must match finite differences.
    let centred = offset_model("mean(bmi)");
    let d = centred
        .graph
        .data
        .iter()
        .position(|d| d.name == "bmi")
        .unwrap();
    let c = match &centred.data[d] {
        tempest::ir::value::Value::Vector(v) => v.mean(),
        _ => unreachable!(),
    };
    let rows: Vec<usize> = (7..31).rev().collect();
    let mut fast = engine(&offset_model(&format!("{c:.17e}")), &[]);
    let mut slow = engine(&centred, &[]);
    assert!(fast.row_wise(), "a row-wise offset");
    assert!(!slow.row_wise(), "a mean over the data");
    // An expression whose value does not depend on the rows it sees is
    // row-wise in effect.
    assert!(engine(&offset_model("mean(bmi) + (0.3 - mean(bmi))"), &[]).row_wise());
    for e in [&mut fast, &mut slow] {
        e.set_posteriors(vec![random_q(5, 4)]);
    }
    let (vf, gf) = fast.batch_gradient(&rows).unwrap();
    let (vs, gs) = slow.batch_gradient(&rows).unwrap();
    assert!((vf - vs).abs() < 1e-9 * vf.abs(), "{vf} vs {vs}");
    for (a, b) in gf.iter().zip(&gs) {
        assert!((a - b).abs() < 1e-9 * (1.0 + a.abs()), "{gf:?} vs {gs:?}");
    }
    check_gradient(&mut fast, &rows, 2e-5);
    // A whole run through the library: the fallback says so in its notes.
    let fit = svi(&offset_model("mean(bmi)"), &[("steps", "20")]);
    assert!(
        fit.run.notes.iter().any(|n| n.contains("not row-wise")),
        "{:?}",
        fit.run.notes
    );
    let fit = svi(&offset_model("0.3"), &[("steps", "20")]);
    assert!(fit.elbo.is_finite() && !fit.run.notes.iter().any(|n| n.contains("row-wise")));
}
