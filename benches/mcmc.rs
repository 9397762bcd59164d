//! Sampling cost on Bayesian logistic regression (breast cancer, all 569
//! rows, intercept + 30 coefficients): one log density, one log density with
//! its gradient, and a whole NUTS run (4 chains × 1000 warm-up × 1000
//! draws) whose min bulk ESS per second and per 1000 gradients are printed;
//! the marginal log density of a GP regression over its hypers (mcycle); and
//! one gradient of a negative-binomial (and a Poisson) regression on roaches
//! with the likelihood written in the model file against the built-in one it
//! copies; one gradient of a latent GP classifier whose kernel has params
//! (its factor and L̄ back to them). See benches/README.md.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use tempest::AsMcmc;
use tempest::infer::mcmc::density::Density;
use tempest::{Data, Model, Overrides, Registry, RunOptions};

const MODEL: &str = r#"
data { n : int  X : matrix[n, 30] = columns("x0".."x29")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[30] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
infer nuts { chains = 4  warmup = 1000  draws = 1000 }
"#;

/// The breast-cancer features x0..x29 [569, 30] and outcomes y [569].
fn logistic_columns(path: &std::path::Path) -> (nalgebra::DMatrix<f64>, Vec<f64>) {
    let text = std::fs::read_to_string(path).expect("data");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect("column");
    let xs: Vec<usize> = (0..30).map(|k| col(&format!("x{k}"))).collect();
    let yc = col("y");
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().expect("number")).collect())
        .collect();
    let xm = nalgebra::DMatrix::from_fn(rows.len(), 30, |i, j| rows[i][xs[j]]);
    (xm, rows.iter().map(|r| r[yc]).collect())
}

fn bench(c: &mut Criterion) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/breast_cancer_prepared.csv");
    let data = Data::read(&path).expect("data");
    let m = Model::from_str("logistic.tempest", MODEL, &Registry::default()).expect("model");
    let b = m.bind(&data, &Overrides::default()).expect("bind");
    let d = Density::new(Arc::new(b.clone())).expect("density");
    let x: Vec<f64> = (0..d.dim).map(|i| 0.1 * (i as f64 * 0.731).sin()).collect();
    let mut g = c.benchmark_group("logistic_569x31");
    g.bench_function("log_density", |bench| {
        bench.iter(|| black_box(d.log_density(black_box(&x)).expect("lp")))
    });
    let mut grad = vec![0.0; d.dim];
    g.bench_function("log_density_and_gradient", |bench| {
        bench.iter(|| black_box(d.log_density_grad(black_box(&x), &mut grad).expect("lp")))
    });
    // The floor of one gradient: the two matrix–vector products X·β and
    // Xᵀ·r and the 569 exponentials and logarithms of the element terms,
    // vectorised, with nothing else.
    let (xm, y) = logistic_columns(&path);
    let beta = nalgebra::DVector::from_fn(30, |i, _| x[i + 1]);
    let mut e = vec![0.0; y.len()];
    let mut l = vec![0.0; y.len()];
    g.bench_function("gradient_floor", |bench| {
        bench.iter(|| {
            let eta = &xm * &beta;
            for (ei, h) in e.iter_mut().zip(eta.iter()) {
                *ei = -(x[0] + h).abs();
            }
            tempest::math::vector::exp_in_place(&mut e);
            for (li, ei) in l.iter_mut().zip(&e) {
                *li = 1.0 + ei;
            }
            tempest::math::vector::ln_in_place(&mut l);
            let mut lp = 0.0;
            let r = nalgebra::DVector::from_fn(y.len(), |i, _| {
                let f = x[0] + eta[i];
                lp -= if y[i] == 1.0 {
                    (-f).max(0.0)
                } else {
                    f.max(0.0)
                } + l[i];
                let sig = if f >= 0.0 {
                    1.0 / (1.0 + e[i])
                } else {
                    e[i] / (1.0 + e[i])
                };
                y[i] - sig
            });
            black_box((lp, r.sum(), xm.tr_mul(&r)))
        })
    });
    g.sample_size(10);
    g.bench_function("nuts_4x1000", |bench| {
        bench.iter(|| {
            let fit = tempest::run(&b, RunOptions::default()).expect("run");
            let f = fit.as_mcmc().expect("mcmc");
            let (ess, _) = f.extremes();
            eprintln!(
                "    min bulk ESS {ess:.0}; {:.0} per second of sampling, {:.0} per second of warm-up and sampling; {:.1} per 1000 gradients",
                ess / f.sampling_seconds,
                ess / (f.sampling_seconds + f.warmup_seconds),
                1000.0 * ess / f.gradients as f64
            );
            black_box(ess)
        })
    });
    g.finish();

    // GP regression with its three hypers as params (the latent GP
    // integrated out): mcycle, n = 133.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mcycle_nuts.tempest");
    let src = std::fs::read_to_string(&path).expect("model");
    let m = Model::from_str("mcycle_nuts.tempest", &src, &Registry::default()).expect("model");
    let data =
        Data::read(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/mcycle.csv"))
            .expect("data");
    let b = m.bind(&data, &Overrides::default()).expect("bind");
    let d = Density::new(Arc::new(b)).expect("density");
    let x = vec![1.8, 3.6, 3.1];
    let mut grad = vec![0.0; d.dim];
    let mut g = c.benchmark_group("gp_hypers_mcycle_133");
    g.bench_function("log_density", |bench| {
        bench.iter(|| black_box(d.log_density(black_box(&x)).expect("lp")))
    });
    g.bench_function("log_density_and_gradient", |bench| {
        bench.iter(|| black_box(d.log_density_grad(black_box(&x), &mut grad).expect("lp")))
    });
    g.finish();

    // A latent GP classifier sampled in whitened form with its kernel's
    // params (breast cancer, first 200 rows, two features): K(θ) and its
    // factor at every gradient, and L̄ back to θ.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("benches/models/latent_gp_kernel_params.tempest");
    let src = std::fs::read_to_string(&path).expect("model");
    let m = Model::from_str(
        "latent_gp_kernel_params.tempest",
        &src,
        &Registry::default(),
    )
    .expect("model");
    let rows =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/breast_cancer_prepared.csv");
    let data = Data::read(&rows)
        .and_then(|d| d.select_rows(0, 199))
        .expect("data");
    gradient_group(c, "latent_gp_kernel_params_200", &m, &data);

    // The same classifier with a fixed kernel: L factorised once, so a
    // gradient is L v, the likelihood and Lᵀ f̄.
    let src = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("benches/models/latent_gp_fixed_kernel.tempest"),
    )
    .expect("model");
    let fixed = Model::from_str("latent_gp_fixed_kernel.tempest", &src, &Registry::default())
        .expect("model");
    gradient_group(c, "latent_gp_fixed_kernel_200", &fixed, &data);
}

/// A group `name` timing one gradient with its value of `m`'s density on
/// `data`, at a fixed point.
fn gradient_group(c: &mut Criterion, name: &str, m: &Model, data: &Data) {
    let b = m.bind(data, &Overrides::default()).expect("bind");
    let d = Density::new(Arc::new(b)).expect("density");
    let x: Vec<f64> = (0..d.dim).map(|i| 0.5 * (i as f64 * 0.731).sin()).collect();
    let mut grad = vec![0.0; d.dim];
    let mut g = c.benchmark_group(name);
    g.bench_function("log_density_and_gradient", |bench| {
        bench.iter(|| black_box(d.log_density_grad(black_box(&x), &mut grad).expect("lp")))
    });
    g.finish();
}

/// The roaches count regression (n = 262, 5 params) with likelihood `LIK`.
fn roaches(lik: &str) -> String {
    format!(
        r#"
likelihood my_neg_binomial_2_log(y : int, f : real, phi : positive) {{
  let l = log(exp(f) + phi)
  lgamma(y + phi) - lgamma(phi) - lgamma(y + 1) + phi * (log(phi) - l) + y * (f - l)
}}
likelihood my_poisson_log(y : int, f : real) {{
  y * f - exp(f) - lgamma(y + 1)
}}
data {{
  n : int
  X : matrix[n, 3] = columns("roach1", "treatment", "senior")
  y : int<lower=0>[n]
  exposure2 : vector[n]
}}
param {{
  a : real ~ normal(0, 5)
  b : vector[3] ~ normal(0, 2.5)
  phi : positive ~ exponential(1)
}}
model {{ y ~ {lik} }}
"#
    )
}

/// One log density + gradient of the roaches regression, model-file
/// likelihoods against the built-ins they copy.
fn bench_likelihoods(c: &mut Criterion) {
    let data =
        Data::read(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/roaches.csv"))
            .expect("data");
    let eta = "a + X * b + log(exposure2)";
    let mut g = c.benchmark_group("roaches_262_gradient");
    for (name, lik) in [
        (
            "neg_binomial_2_log_builtin",
            format!("neg_binomial_2_log({eta}, phi)"),
        ),
        (
            "neg_binomial_2_log_model_file",
            format!("my_neg_binomial_2_log({eta}, phi)"),
        ),
        ("poisson_log_builtin", format!("poisson_log({eta})")),
        ("poisson_log_model_file", format!("my_poisson_log({eta})")),
    ] {
        let m = Model::from_str("roaches.tempest", &roaches(&lik), &Registry::default())
            .expect("model");
        let b = m.bind(&data, &Overrides::default()).expect("bind");
        let d = Density::new(Arc::new(b)).expect("density");
        let x = [2.8, 0.012, -0.7, -0.3, -1.2];
        let mut grad = vec![0.0; d.dim];
        g.bench_function(name, |bench| {
            bench.iter(|| {
                black_box(
                    d.log_density_grad(black_box(&x[..d.dim]), &mut grad)
                        .expect("lp"),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_likelihoods);
criterion_main!(benches);
