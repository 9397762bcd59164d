//! The hypers' gradient in one reverse sweep (`math::reverse`) against the
//! forward-mode chunks it replaced (`gradients::with_forward_chunks`) and
//! against five-point finite differences, for the svi, mirror-descent and
//! exact objectives: isotropic and ARD kernels, sums and products with
//! hypers inside expressions, likelihoods with hypers (a Gaussian's noise,
//! a Student-t's scale), the softmax, a mixing matrix and a Rust kernel
//! (which keeps the chunks). Also: ARD kernels' input adjoints by matrix
//! products equal the entry-by-entry passes, and the gradient is the same
//! bits on any number of threads.

use crate::common;
use common::*;
use nalgebra::DMatrix;
use std::sync::Arc;
use tempest::infer::exact::model::ExactModel;
use tempest::infer::gradients::with_forward_chunks;
use tempest::infer::settings::Settings;
use tempest::infer::vi::fit::VariationalFit;
use tempest::ir::eval::Env;
use tempest::model::gram_vjp::cross_vjp;
use tempest::model::kernel::{Inputs, KernelValue};
use tempest::{Bound, Data, DataValue, Model, Overrides, Real, Registry, RunOptions, UserKernel};

/// Five-point central differences of `f` at x₀ in coordinate k (error of
/// order h⁴, so about 1e-10 relative at h = 1e-3 for smooth objectives).
fn five_point(x0: &[f64], k: usize, mut f: impl FnMut(&[f64]) -> f64) -> f64 {
    let h = 1e-3 * (1.0 + x0[k].abs());
    let mut at = |d: f64| {
        let mut x = x0.to_vec();
        x[k] += d;
        f(&x)
    };
    (8.0 * (at(h) - at(-h)) - (at(2.0 * h) - at(-2.0 * h))) / (12.0 * h)
}

/// The reverse gradient `g` against the forward chunks' `gf` (to 1e-11)
/// and against the differences `fd` (to `tol`), relative to the largest.
fn agree(g: &[f64], gf: &[f64], fd: &[f64], tol: f64, what: &str) {
    let scale = fd.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    for k in 0..g.len() {
        assert!(
            (g[k] - gf[k]).abs() <= 1e-11 * scale,
            "{what}, θ[{k}]: reverse {} vs forward {}",
            g[k],
            gf[k]
        );
        assert!(
            (g[k] - fd[k]).abs() <= tol * scale,
            "{what}, θ[{k}]: reverse {} vs differences {}",
            g[k],
            fd[k]
        );
    }
}

/// The svi minibatch gradient in the hypers (Z fixed) three ways.
fn check_svi(b: &Bound, latents: u64, m: usize, settings: &[(&str, &str)], what: &str) {
    let mut set = vec![("learn_inducing", "false")];
    set.extend_from_slice(settings);
    let mut e = svi_engine(b, &set);
    e.set_posteriors((0..latents).map(|c| random_q(m, 3 + c)).collect());
    let rows: Vec<usize> = (4..36).collect();
    let x0 = e.point();
    let (_, g) = e.batch_gradient(&rows).unwrap();
    let (_, gf) = with_forward_chunks(|| e.batch_gradient(&rows).unwrap());
    let fd: Vec<f64> = (0..x0.len())
        .map(|k| {
            five_point(&x0, k, |x| {
                e.set_point(x).unwrap();
                e.batch_gradient(&rows).unwrap().0
            })
        })
        .collect();
    e.set_point(&x0).unwrap();
    agree(&g, &gf, &fd, 1e-8, what);
}

const DIABETES4: &str = r#"
data {
  n : int
  X : matrix[n, 4] = columns("age", "bmi", "bp", "s1")
  y : vector[n]
}
"#;

#[test]
fn svi_hyper_gradients_agree_with_forward_mode_and_differences() {
    let data = csv("diabetes_prepared.csv", Some((0, 59)));
    let cases = [
        // Isotropic, with a learned mean and the noise through sqrt.
        (
            "hyper { ell : positive = 1.5  sf2 : positive = 0.8  noise : positive = 0.3  mu : real = 0.1 }
model { f ~ gp(mu, sf2 * rbf(ell))  y ~ normal(f(X), sqrt(noise)) }",
            "isotropic rbf, normal noise",
        ),
        // ARD, in a sum and a product with hypers inside expressions.
        (
            "hyper { ell : vector<lower=0>[4] = [0.8, 1.5, 2.0, 1.1]  a : positive = 0.7  b : real = 0.4  noise : positive = 0.3 }
model { f ~ gp(0, (a + b^2) * rbf(ell) + exp(b) * matern32(ell) * rbf(a * 3))  y ~ normal(f(X), noise * 2) }",
            "ARD sum and product",
        ),
        // A Student-t likelihood whose scale is a hyper expression, tempered
        // by a power that is one too.
        (
            "hyper { ell : vector<lower=0>[4] = 1.3  sf2 : positive = 1.1  s : positive = 0.4  nu : positive = 4.0  w : real = 0.3 }
model { f ~ gp(0, sf2 * rbf(ell))  y ~ student_t(nu + 1, f(X), s * s + 0.1) ^ (0.5 + w * w) }",
            "Student-t scale, tempered",
        ),
    ];
    for (rest, what) in cases {
        let text = format!("{DIABETES4}{rest}\nguide {{ f : inducing(m = 6) }}\ninfer svi {{ }}\n");
        let b = bind(&model(&text), &data);
        check_svi(&b, 1, 6, &[], what);
    }
}

/// Six classes on four satellite features.
fn satellite(rest: &str) -> Bound {
    let text = format!(
        "data {{\n  n : int\n  X : matrix[n, 4] = columns(\"x0\", \"x1\", \"x2\", \"x3\")\n  y : int<lower=0, upper=5>[n] = column(\"y\")\n}}\n{rest}\nguide {{ f : inducing(m = 5) }}\ninfer svi {{ }}\n"
    );
    bind(&model(&text), &csv("satellite_prepared.csv", Some((0, 79))))
}

#[test]
fn softmax_hyper_gradients_agree_with_forward_mode_and_differences() {
    // ARD, as in the satellite benchmark; then tempered by a hyper.
    let ard = "hyper { ell : vector<lower=0>[4] = [1.5, 2.0, 0.9, 3.0]  sf2 : positive = 1.5  w : real = 0.2 }
model { f ~ gp(0, sf2 * rbf(ell))[6]  y ~ categorical_logit(f(X)) POWER }";
    check_svi(
        &satellite(&ard.replace("POWER", "")),
        6,
        5,
        &[("mc_samples", "16")],
        "softmax ARD",
    );
    let tempered = satellite(&ard.replace("POWER", "^ (0.7 + w * w)"));
    check_svi(&tempered, 6, 5, &[("mc_samples", "16")], "tempered softmax");
    // A mixing matrix learned as a hyper (its adjoint from the step's pass).
    let b = satellite(
        "hyper { ell : positive = 2.0  sf2 : positive = 1.5  A : matrix[2, 6] = 0.3 }
model { f ~ gp(0, sf2 * rbf(ell))[2]  y ~ categorical_logit(f(X) * A) }",
    );
    check_svi(&b, 2, 5, &[("mc_samples", "16")], "mixed softmax");
}

#[test]
fn variational_hyper_gradients_agree_with_forward_mode() {
    // The mirror-descent core's gradient at a fitted q: the likelihood's
    // arguments (a Student-t scale, an offset) through the sweep.
    let text = format!(
        "{DIABETES4}hyper {{ ell : vector<lower=0>[4] = 1.2  sf2 : positive = 0.9  s : positive = 0.5  c : real = 0.2 }}
model {{ f ~ gp(c, sf2 * rbf(ell) + 0.1 * linear())  y ~ student_t(5, f(X) + c * c, sqrt(s)) }}
infer mirror_descent {{ steps = 4, learn_hypers = true }}\n"
    );
    let b = bind(&model(&text), &csv("diabetes_prepared.csv", Some((0, 39))));
    let fit = fit_with(&b, None, &[])
        .downcast::<VariationalFit>()
        .expect("a variational fit");
    let g = fit.core.hyper_gradient(&fit.qs).unwrap();
    let gf = with_forward_chunks(|| fit.core.hyper_gradient(&fit.qs).unwrap());
    assert_eq!(g.len(), 7);
    let scale = g.iter().fold(1.0f64, |a, v| a.max(v.abs()));
    for k in 0..g.len() {
        assert!(
            (g[k] - gf[k]).abs() <= 1e-11 * scale,
            "θ[{k}]: reverse {} vs forward {}",
            g[k],
            gf[k]
        );
    }
}

fn exact_model(b: &Bound) -> ExactModel {
    let cfg = tempest::engine_config(&b.graph, &RunOptions::default()).unwrap();
    ExactModel::new(Arc::new(b.clone()), &Settings::from_config(&cfg).unwrap()).unwrap()
}

#[test]
fn exact_hyper_gradients_agree_with_forward_mode_autodiff_and_differences() {
    let text = format!(
        "{DIABETES4}hyper {{ ell : vector<lower=0>[4] = [0.8, 1.5, 2.0, 1.1]  a : positive = 0.7  b : real = 0.4  noise : positive = 0.3  mu : real = 0.2  w : real = 0.3 }}
model {{ f ~ gp(mu, (a + b^2) * rbf(ell) * periodic(a, 2 + b) + exp(b) * matern52(ell))  y ~ normal(f(X) + b * col(X, 1), noise * noise + 0.05) ^ (0.6 + w * w) }}
infer exact {{ learn_hypers = true }}\n"
    );
    let b = bind(&model(&text), &csv("diabetes_prepared.csv", Some((0, 49))));
    let m = exact_model(&b);
    let theta = m.layout.initial(&b).unwrap();
    assert_eq!(theta.len(), 9, "every hyper learned");
    let (s, g) = m.lml_grad(&theta).unwrap();
    let (_, gf) = with_forward_chunks(|| m.lml_grad(&theta).unwrap());
    let (v, ga) = m.lml_grad_autodiff(&theta).unwrap();
    assert!((v - s.lml).abs() <= 1e-10 * v.abs());
    let fd: Vec<f64> = (0..theta.len())
        .map(|k| five_point(&theta, k, |x| m.lml(x).unwrap().lml))
        .collect();
    agree(&g, &gf, &fd, 1e-8, "exact");
    agree(
        &g,
        &ga,
        &fd,
        1e-8,
        "exact, autodiff through the factorisation",
    );
}

/// k(x, x′) = (1 + r²/(2αℓ²))^(−α), from Rust: a leaf of the kernel's
/// reverse pass whose derivatives in its own parameters come from forward
/// mode inside each entry.
struct Rq;
impl UserKernel for Rq {
    fn name(&self) -> &str {
        "rq"
    }
    fn params(&self) -> Vec<String> {
        vec!["ell".into(), "alpha".into()]
    }
    fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
        (T::one() + T::constant(r2) / (p[1] * p[0] * p[0] * T::constant(2.0))).powf(-p[1])
    }
}

#[test]
fn a_rust_kernel_takes_the_reverse_pass() {
    let mut reg = Registry::default();
    reg.add_kernel(Rq);
    let text = format!(
        "{DIABETES4}hyper {{ ell : positive = 1.4  al : positive = 2.0  noise : positive = 0.4 }}
model {{ f ~ gp(0, 0.5 * rq(ell, al) + rbf(ell))  y ~ normal(f(X), noise) }}
infer exact {{ learn_hypers = true }}\n"
    );
    let m = Model::from_str("rq.tempest", &text, &reg).unwrap_or_else(|e| panic!("{e}"));
    let b = bind(&m, &csv("diabetes_prepared.csv", Some((0, 39))));
    let em = exact_model(&b);
    let theta = em.layout.initial(&b).unwrap();
    assert_eq!(theta.len(), 3, "every hyper learned");
    let (_, g) = em.lml_grad(&theta).unwrap();
    let (_, gf) = with_forward_chunks(|| em.lml_grad(&theta).unwrap());
    let fd: Vec<f64> = (0..theta.len())
        .map(|k| five_point(&theta, k, |x| em.lml(x).unwrap().lml))
        .collect();
    agree(&g, &gf, &fd, 1e-8, "Rust kernel");
}

/// The kernel of `f ~ gp(0, kexpr)` with D = 4 inputs at the hypers'
/// initial values.
fn kernel4(kexpr: &str, x: &DMatrix<f64>) -> KernelValue<f64> {
    let text = format!(
        "data {{ n : int\n X : matrix[n, 4] }}\nhyper {{ ls : vector<lower=0>[4] = [0.5, 1.2, 2.0, 0.9]  s : positive = 1.3 }}\nmodel {{ f ~ gp(0, {kexpr}) }}\n"
    );
    let m = Model::from_str("k.tempest", &text, &Registry::default()).unwrap();
    let data = Data::values().with("X", DataValue::Matrix(x.clone()));
    let b = m.bind(&data, &Overrides::default()).unwrap();
    let layout = tempest::infer::hypers::HyperLayout::new(&b, true);
    let hyp = layout.values::<f64>(&b, &layout.initial(&b).unwrap());
    Env::new(&b, &hyp, &[], &[])
        .kernel(&b.graph.gps[0].kernel)
        .unwrap()
}

#[test]
fn ard_kernels_input_adjoints_by_matrix_products_equal_the_entry_passes() {
    let (n, m, d) = (13, 6, 4);
    let wave = |r: usize, c: usize, s: f64| {
        DMatrix::from_fn(r, c, |i, j| ((i * c + j) as f64 * s).sin() * 1.4)
    };
    let mut x = wave(n, d, 0.77);
    let z = wave(m, d, 1.31);
    // A point of X on a point of Z adds nothing.
    for k in 0..d {
        x[(5, k)] = z[(1, k)];
    }
    let k_bar = wave(n, m, 0.53);
    for kexpr in [
        "rbf(ls)",
        "s^2 * matern32(ls) + 0.1 * white() + constant()",
        "matern52(ls) * (0.5 * rbf(ls) + matern12(ls))",
    ] {
        let k = kernel4(kexpr, &x);
        let (xi, zi) = (Inputs::from_matrix(&x), Inputs::from_matrix(&z));
        let adj = cross_vjp(&k, &xi, &zi, &k_bar).unwrap().expect("a rule");
        let (rx, rz) = entry_cross_inputs(&k, &xi, &zi, &k_bar);
        let mut rp = vec![0.0; adj.params.len()];
        let mut gp = vec![0.0; adj.params.len()];
        for i in 0..n {
            for j in 0..m {
                k.entry_grad(xi.row(i), zi.row(j), false, &mut gp);
                rp.iter_mut()
                    .zip(&gp)
                    .for_each(|(r, g)| *r += k_bar[(i, j)] * g);
            }
        }
        let scale = rx.amax().max(rz.amax());
        assert!((&adj.x - &rx).amax() <= 1e-12 * scale, "{kexpr}: X̄");
        assert!((&adj.z - &rz).amax() <= 1e-12 * scale, "{kexpr}: Z̄");
        for (a, r) in adj.params.iter().zip(&rp) {
            assert!(
                (a - r).abs() <= 1e-11 * r.abs().max(1.0),
                "{kexpr}: θ̄ {a} vs {r}"
            );
        }
    }
}

#[test]
fn the_reverse_gradient_is_the_same_bits_on_any_thread_count() {
    let b = satellite(
        "hyper { ell : vector<lower=0>[4] = [1.5, 2.0, 0.9, 3.0]  sf2 : positive = 1.5 }
model { f ~ gp(0, sf2 * rbf(ell))[6]  y ~ categorical_logit(f(X)) }",
    );
    let mut e = svi_engine(&b, &[("mc_samples", "16")]);
    e.set_posteriors((0..6).map(|c| random_q(5, 7 + c)).collect());
    let rows: Vec<usize> = (0..64).collect();
    let bits = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let (v, g) = e.batch_gradient(&rows).unwrap();
                (
                    v.to_bits(),
                    g.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                )
            })
    };
    let one = bits(1);
    for t in [2, 3, 8] {
        assert_eq!(bits(t), one, "{t} threads");
    }
}

/// The sampler's log density gradient at x, the reverse sweep's and the
/// forward chunks', against five-point differences.
fn check_density(d: &tempest::infer::mcmc::density::Density, x: &[f64], what: &str) {
    let grad = |x: &[f64]| {
        let mut g = vec![0.0; d.dim];
        d.log_density_grad(x, &mut g).unwrap();
        g
    };
    let g = grad(x);
    let gf = with_forward_chunks(|| grad(x));
    let fd: Vec<f64> = (0..d.dim)
        .map(|k| five_point(x, k, |y| d.log_density(y).unwrap()))
        .collect();
    agree(&g, &gf, &fd, 1e-8, what);
}

#[test]
fn sampler_gradients_agree_with_forward_mode_and_differences() {
    use tempest::infer::mcmc::density::Density;
    // A GP integrated out: ARD lengthscales, signal and noise as params,
    // the noise through an expression.
    let marginal = format!(
        "{DIABETES4}param {{ ell : vector<lower=0>[4] ~ lognormal(0, 1)  sf : positive ~ normal(0, 2)  s : positive ~ normal(0, 1)  c : real ~ normal(0, 1) }}
model {{ f ~ gp(c, sf^2 * rbf(ell) + 0.2 * matern32(ell))  y ~ normal(f(X), s * s + 0.1) }}\n"
    );
    // A latent GP sampled in whitened form, with params in its kernel.
    let latent =
        "data { n : int  X : matrix[n, 2] = columns(\"x0\", \"x1\")  y : int<lower=0, upper=1>[n] }
param { ell : vector<lower=0>[2] ~ lognormal(0, 1)  a : positive ~ normal(0, 1) }
model { f ~ gp(0, (1 + a) * rbf(ell) * rbf(a + 2))  y ~ bernoulli_logit(f(X)) }\n";
    for (text, data, what) in [
        (
            marginal.as_str(),
            csv("diabetes_prepared.csv", Some((0, 29))),
            "marginal GP",
        ),
        (
            latent,
            csv("breast_cancer_prepared.csv", Some((0, 11))),
            "latent GP",
        ),
    ] {
        let d = Density::new(Arc::new(bind(&model(text), &data))).unwrap();
        let x: Vec<f64> = (0..d.dim).map(|i| 0.4 * (i as f64 * 0.731).sin()).collect();
        check_density(&d, &x, what);
    }
}

/// A latent GP whose kernel has a Rust part and params, sampled: the Rust
/// kernel is a leaf, so its factor goes on the tape joined to the params'
/// sweep (the inputs are data: no input rules needed), with the gradient
/// of the forward chunks and of finite differences.
#[test]
fn a_rust_kernel_in_a_sampled_latent_gp_goes_on_the_tape() {
    let mut reg = Registry::default();
    reg.add_kernel(Rq);
    let text =
        "data { n : int  X : matrix[n, 4] = columns(\"x0\"..\"x3\")  y : int<lower=0, upper=1>[n] }
param { ell : positive ~ lognormal(0, 1)  al : positive ~ lognormal(0, 1) }
model { f ~ gp(0, 0.5 * rq(ell, al) + rbf(ell))  y ~ bernoulli_logit(f(X)) }\n";
    let m = Model::from_str("rq_latent.tempest", text, &reg).unwrap_or_else(|e| panic!("{e}"));
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 11))));
    let d = tempest::infer::mcmc::density::Density::new(Arc::new(b)).unwrap();
    assert!(d.latent_factor_on_tape());
    let x: Vec<f64> = (0..d.dim).map(|i| 0.3 * (i as f64 * 0.7).sin()).collect();
    let mut g = vec![0.0; d.dim];
    d.log_density_grad(&x, &mut g).unwrap();
    let mut gf = vec![0.0; d.dim];
    with_forward_chunks(|| d.log_density_grad(&x, &mut gf).unwrap());
    let fd: Vec<f64> = (0..d.dim)
        .map(|k| five_point(&x, k, |y| d.log_density(y).unwrap()))
        .collect();
    agree(&g, &gf, &fd, 1e-7, "Rust kernel, sampled");
}
