//! Conformance of every kernel: Gram matrices are positive semi-definite,
//! entries equal a plain double-loop reference, and autodiff derivatives
//! with respect to the hypers equal finite differences.

use crate::common;
use common::KERNEL_HYPERS;
use nalgebra::{DMatrix, SymmetricEigen};
use rand::{RngExt, SeedableRng};
use tempest::infer::hypers::HyperLayout;
use tempest::ir::eval::Env;
use tempest::math::scalar::Dual1;
use tempest::model::kernel::Inputs;
use tempest::{Bound, Data, DataValue, Model, Overrides, Real, Registry, UserKernel};

const RQ: &str = r#"
kernel rq(ell : positive, alpha : positive)(x, x2) {
  (1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha)
}
"#;

/// exp(-0.3 * |x - y|_1): a Laplace kernel registered from Rust.
struct Laplace;
impl UserKernel for Laplace {
    fn name(&self) -> &str {
        "laplace"
    }
    fn params(&self) -> Vec<String> {
        vec!["scale".into()]
    }
    fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let d: f64 = x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum();
        (-(T::constant(d) / p[0])).exp()
    }
}

type Reference = fn(&[f64], &[f64], bool) -> f64;

fn sqd(x: &[f64], y: &[f64], ls: &[f64]) -> f64 {
    x.iter()
        .zip(y)
        .zip(ls.iter().cycle())
        .map(|((a, b), l)| ((a - b) / l).powi(2))
        .sum()
}
fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}
const ELLS: [f64; 3] = [0.5, 1.2, 2.0];

fn cases() -> Vec<(&'static str, Reference)> {
    vec![
        ("rbf(ell)", |x, y, _| (-0.5 * sqd(x, y, &[0.8])).exp()),
        ("rbf(ells)", |x, y, _| (-0.5 * sqd(x, y, &ELLS)).exp()),
        ("matern12(ell)", |x, y, _| (-sqd(x, y, &[0.8]).sqrt()).exp()),
        ("matern12(ells)", |x, y, _| (-sqd(x, y, &ELLS).sqrt()).exp()),
        ("matern32(ell)", |x, y, _| {
            let r = 3f64.sqrt() * sqd(x, y, &[0.8]).sqrt();
            (1.0 + r) * (-r).exp()
        }),
        ("matern52(ells)", |x, y, _| {
            let r2 = sqd(x, y, &ELLS);
            let r = 5f64.sqrt() * r2.sqrt();
            (1.0 + r + 5.0 * r2 / 3.0) * (-r).exp()
        }),
        ("linear()", |x, y, _| dot(x, y)),
        ("linear(v)", |x, y, _| {
            0.3 * x[0] * y[0] + 0.6 * x[1] * y[1] + 0.9 * x[2] * y[2]
        }),
        ("polynomial(2, c)", |x, y, _| (dot(x, y) + 0.5).powi(2)),
        ("polynomial(3)", |x, y, _| (dot(x, y) + 1.0).powi(3)),
        ("cosine()", |x, y, _| {
            dot(x, y) / (dot(x, x).sqrt() * dot(y, y).sqrt())
        }),
        ("periodic(ell, p)", |x, y, _| {
            let s: f64 = x
                .iter()
                .zip(y)
                .map(|(a, b)| (std::f64::consts::PI * (a - b) / 1.7).sin().powi(2))
                .sum();
            (-2.0 * s / 0.64).exp()
        }),
        ("white()", |_, _, same| if same { 1.0 } else { 0.0 }),
        ("constant()", |_, _, _| 1.0),
        ("s^2 * rbf(ell) + 0.1 * white()", |x, y, same| {
            1.69 * (-0.5 * sqd(x, y, &[0.8])).exp() + if same { 0.1 } else { 0.0 }
        }),
        (
            "rbf(ell, dims = 0..1) * periodic(ell, p, dims = [2])",
            |x, y, _| {
                let a = (-0.5 * sqd(&x[..2], &y[..2], &[0.8])).exp();
                let d = (x[2] - y[2]).abs();
                a * (-2.0 * (std::f64::consts::PI * d / 1.7).sin().powi(2) / 0.64).exp()
            },
        ),
        ("matern32(ell, dims = 1) / s", |x, y, _| {
            let r = 3f64.sqrt() * ((x[1] - y[1]) / 0.8).abs();
            (1.0 + r) * (-r).exp() / 1.3
        }),
        ("linear(v) + polynomial(2, c) * cosine()", |x, y, _| {
            0.3 * x[0] * y[0]
                + 0.6 * x[1] * y[1]
                + 0.9 * x[2] * y[2]
                + (dot(x, y) + 0.5).powi(2) * dot(x, y) / (dot(x, x).sqrt() * dot(y, y).sqrt())
        }),
        ("rq(ell, alpha)", |x, y, _| {
            (1.0 + sqd(x, y, &[1.0]) / (2.0 * 1.5 * 0.64)).powf(-1.5)
        }),
        ("s * laplace(ell)", |x, y, _| {
            let d: f64 = x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum();
            1.3 * (-d / 0.8).exp()
        }),
    ]
}

fn inputs(n: usize, seed: u64) -> DMatrix<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    DMatrix::from_fn(n, 3, |_, _| rng.random_range(-2.0..2.0))
}

fn setup(kexpr: &str, x: &DMatrix<f64>) -> (Model, Bound) {
    let text = format!(
        "{RQ}\ndata {{ n : int\n X : matrix[n, 3] }}\n{KERNEL_HYPERS}\nmodel {{ f ~ gp(0, {kexpr}) }}\n"
    );
    let mut reg = Registry::default();
    reg.add_kernel(Laplace);
    let m = Model::from_str("kernel.tempest", &text, &reg).unwrap_or_else(|e| panic!("{e}"));
    let data = Data::values().with("X", DataValue::Matrix(x.clone()));
    let b = m
        .bind(&data, &Overrides::default())
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
    (m, b)
}

#[test]
fn gram_matrices_match_reference_and_are_psd() {
    let x = inputs(14, 7);
    let xi = Inputs::from_matrix(&x);
    for (kexpr, reference) in cases() {
        let (_, b) = setup(kexpr, &x);
        let layout = HyperLayout::new(&b, true);
        let hyp = layout.values::<f64>(&b, &layout.initial(&b).unwrap());
        let env = Env::new(&b, &hyp, &[], &[]);
        let k = env.kernel(&b.graph.gps[0].kernel).unwrap();
        let g = k.gram(&xi).unwrap();
        for i in 0..x.nrows() {
            for j in 0..x.nrows() {
                let xr: Vec<f64> = x.row(i).iter().copied().collect();
                let yr: Vec<f64> = x.row(j).iter().copied().collect();
                let want = reference(&xr, &yr, i == j);
                assert!(
                    (g[(i, j)] - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "{kexpr} entry ({i},{j}): {} vs {want}",
                    g[(i, j)]
                );
            }
        }
        let eig = SymmetricEigen::new(g.clone()).eigenvalues;
        let max = eig.iter().cloned().fold(0.0f64, f64::max);
        let min = eig.iter().cloned().fold(f64::INFINITY, f64::min);
        assert!(min >= -1e-9 * max.max(1.0), "{kexpr}: min eigenvalue {min}");
        // cross(X, X) equals gram except for the white kernel's diagonal.
        let c = k.cross(&xi, &xi).unwrap();
        let d = k.diag(&xi).unwrap();
        for i in 0..x.nrows() {
            assert!((d[i] - g[(i, i)]).abs() < 1e-12, "{kexpr}: diag");
            if !kexpr.contains("white") {
                assert!((c[(i, i)] - g[(i, i)]).abs() < 1e-12, "{kexpr}: cross");
            }
        }
    }
}

#[test]
fn autodiff_derivatives_match_finite_differences() {
    let x = inputs(8, 11);
    let xi = Inputs::from_matrix(&x);
    for (kexpr, _) in cases() {
        let (_, b) = setup(kexpr, &x);
        let layout = HyperLayout::new(&b, true);
        let theta = layout.initial(&b).unwrap();
        let gram_at = |t: &[f64]| {
            let hyp = layout.values::<f64>(&b, t);
            let env = Env::new(&b, &hyp, &[], &[]);
            env.kernel(&b.graph.gps[0].kernel)
                .unwrap()
                .gram(&xi)
                .unwrap()
        };
        for k in 0..theta.len() {
            let td: Vec<Dual1> = theta
                .iter()
                .enumerate()
                .map(|(j, &v)| Dual1::new(v, [if j == k { 1.0 } else { 0.0 }]))
                .collect();
            let hyp = layout.values::<Dual1>(&b, &td);
            let env = Env::new(&b, &hyp, &[], &[]);
            let gd = env
                .kernel(&b.graph.gps[0].kernel)
                .unwrap()
                .gram(&xi)
                .unwrap();
            let h = 1e-6;
            let mut up = theta.clone();
            up[k] += h;
            let mut dn = theta.clone();
            dn[k] -= h;
            let fd = (gram_at(&up) - gram_at(&dn)) / (2.0 * h);
            for i in 0..x.nrows() {
                for j in 0..x.nrows() {
                    let ad = gd[(i, j)].tangent()[0];
                    assert!(
                        (ad - fd[(i, j)]).abs() <= 1e-6 * fd[(i, j)].abs().max(1.0),
                        "{kexpr} θ[{k}] entry ({i},{j}): {ad} vs {}",
                        fd[(i, j)]
                    );
                }
            }
        }
    }
}

/// The reverse pass over a kernel's parameters (one pass per entry for all
/// of them) gives the same ½ Σ W ∂K/∂θ as forward-mode duals entry by
/// entry, for every kernel with reverse rules.
/// ½ Σ W ∂K/∂θ from the leaf adjoints `pbar` by the chain rule equals the
/// entry-by-entry dual computation, in every hyper direction.
fn reverse_matches_duals(
    kexpr: &str,
    b: &Bound,
    theta: &[f64],
    pbar: &[f64],
    xi: &Inputs,
    w: &DMatrix<f64>,
    tol: f64,
) {
    use tempest::infer::gradients::{half_trace_w_dk_n, half_trace_w_dk_via, seed_chunk};
    let layout = HyperLayout::new(b, true);
    for start in (0..theta.len()).step_by(8) {
        let td = seed_chunk(theta, start);
        let hd = layout.values(b, &td);
        let kd = Env::new(b, &hd, &[], &[])
            .kernel(&b.graph.gps[0].kernel)
            .unwrap();
        let via = half_trace_w_dk_via(&kd, Some(pbar), xi, || w).unwrap();
        let dual = half_trace_w_dk_n(&kd, xi, w).unwrap();
        for c in 0..8 {
            assert!(
                (via[c] - dual[c]).abs() <= tol * dual[c].abs().max(1.0),
                "{kexpr} direction {}: reverse {} vs dual {}",
                start + c,
                via[c],
                dual[c]
            );
        }
    }
}

#[test]
fn reverse_pass_over_kernel_parameters_matches_duals() {
    use tempest::infer::gradients::leaf_adjoints;
    let x = inputs(9, 5);
    let xi = Inputs::from_matrix(&x);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let r = DMatrix::from_fn(9, 9, |_, _| rng.random_range(-1.0..1.0));
    let w = &r + r.transpose();
    let mut exprs: Vec<&str> = cases().into_iter().map(|(k, _)| k).collect();
    exprs.extend([
        "polynomial(alpha, c + 20)",
        "s^2 * (rbf(ells) * matern12(ell) + matern52(ell) * periodic(ell, p)) + c * linear(v)",
        // Scalings inside products and of scalings: the plan carries their
        // factors instead of passing over the entries.
        "(s^2 * rbf(ell)) * (c * matern32(ell)) + 3 * (c * (2 * periodic(ell, p)))",
        // Products of two exponential leaves, scaled or not: one eˣ of the
        // summed exponents, the leaves' and scalings' rules reading the
        // product's value.
        "s^2 * periodic(ell, p) * rbf(ell) + rbf(ell) * (c * (2 * rbf(ell))) + rbf(ells) * rbf(ell)",
    ]);
    let mut checked = 0;
    for kexpr in exprs {
        let (_, b) = setup(kexpr, &x);
        let layout = HyperLayout::new(&b, true);
        let theta = layout.initial(&b).unwrap();
        let hyp = layout.values::<f64>(&b, &theta);
        let k64 = Env::new(&b, &hyp, &[], &[])
            .kernel(&b.graph.gps[0].kernel)
            .unwrap();
        let Some(pbar) = leaf_adjoints(&k64, &xi, &w).unwrap() else {
            assert!(kexpr.contains("rq") || kexpr.contains("laplace"), "{kexpr}");
            continue;
        };
        reverse_matches_duals(kexpr, &b, &theta, &pbar, &xi, &w, 1e-10);
        checked += 1;
    }
    assert!(checked >= 20, "{checked}");
}

/// The block evaluator (several blocks per column: 300 rows) gives the
/// Gram and cross matrices of the entry-by-entry path, and its reverse
/// pass the derivatives of the dual path, for every kernel with a plan —
/// model-file kernels with `dims`, `if`, coordinates and inner products
/// included.
#[test]
fn block_evaluation_matches_entries_and_duals() {
    use tempest::infer::gradients::leaf_adjoints;
    let n = 300;
    let x = inputs(n, 11);
    let xi = Inputs::from_matrix(&x);
    let yi = Inputs::from_matrix(&inputs(37, 12));
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let r = DMatrix::from_fn(n, n, |_, _| rng.random_range(-1.0..1.0));
    let w = &r + r.transpose();
    let mut exprs: Vec<&str> = cases().into_iter().map(|(k, _)| k).collect();
    exprs.extend([
        "s^2 * rq(ell, alpha, dims = [0, 2]) * periodic(ell, p) + rbf(ells) * polynomial(alpha, c + 20)",
        "odd(ell, alpha) + 0.5 * white()",
        "flat(alpha, ell) * rbf(ell) + twice(ell, alpha)",
        "s^2 * periodic(ell, p) * rbf(ell) + rbf(ell) * (c * (2 * rbf(ell))) + rbf(ells) * rbf(ell)",
        // Short enough that most runs of entries lie where eˣ is 0.
        "s^2 * rbf(0.05) + rbf(ell)",
    ]);
    // odd: a branch, coordinates, inner products, a let read three times;
    // flat: a value that does not vary over the entries; twice: an
    // operand repeated (u * u), a division by a varying value, a power
    // with a parameter exponent.
    let odd = "kernel odd(ell : positive, alpha : positive)(x, x2) {\n  let r = sqrt(sqdist(x, x2) + 0.01) / ell\n  (if r < 0.5 then 1 - r^2 / 6 else sin(r) / r) * alpha + exp(-abs(x[0] - x2[1])) * dot(x, x2) / (1 + alpha^2)\n}\nkernel flat(alpha : positive, ell : positive)(x, x2) { alpha^2 / ell }\nkernel twice(ell : positive, alpha : positive)(x, x2) {\n  let u = sqdist(x, x2) / ell\n  (u * u + u) / (1 + u) ^ alpha\n}\n";
    let mut planned = 0;
    for kexpr in exprs {
        let text = format!(
            "{RQ}\n{odd}\ndata {{ n : int\n X : matrix[n, 3] }}\n{KERNEL_HYPERS}\nmodel {{ f ~ gp(0, {kexpr}) }}\n"
        );
        let mut reg = Registry::default();
        reg.add_kernel(Laplace);
        let m = Model::from_str("k.tempest", &text, &reg).unwrap_or_else(|e| panic!("{e}"));
        let data = Data::values().with("X", DataValue::Matrix(x.clone()));
        let b = m
            .bind(&data, &Overrides::default())
            .unwrap_or_else(|e| panic!("{}", m.render(&e)));
        let layout = HyperLayout::new(&b, true);
        let theta = layout.initial(&b).unwrap();
        let hyp = layout.values::<f64>(&b, &theta);
        let k = Env::new(&b, &hyp, &[], &[])
            .kernel(&b.graph.gps[0].kernel)
            .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-13 * a.abs().max(b.abs()).max(1.0);
        let (g, gf) = (k.gram(&xi).unwrap(), k.gram_fast(&xi).unwrap());
        assert!(
            g.iter().zip(gf.iter()).all(|(a, b)| close(*a, *b)),
            "{kexpr}: gram"
        );
        // The lower triangle written in place, over a buffer of NaNs: the
        // same bits as the full matrix, and nothing else read or written.
        let mut lower = vec![f64::NAN; n * n];
        k.gram_lower_into(&xi, &mut lower).unwrap();
        for j in 0..n {
            for i in 0..n {
                let v = lower[j * n + i];
                if i >= j {
                    assert_eq!(
                        v.to_bits(),
                        gf[(i, j)].to_bits(),
                        "{kexpr}: lower ({i}, {j})"
                    );
                } else if !kexpr.contains("laplace") {
                    assert!(v.is_nan(), "{kexpr}: ({i}, {j}) above the diagonal written");
                }
            }
        }
        let (c, cf) = (k.cross(&xi, &yi).unwrap(), k.cross_fast(&xi, &yi).unwrap());
        assert!(
            c.iter().zip(cf.iter()).all(|(a, b)| close(*a, *b)),
            "{kexpr}: cross"
        );
        let Some(pbar) = leaf_adjoints(&k, &xi, &w).unwrap() else {
            assert!(kexpr.contains("laplace"), "{kexpr} has no plan");
            continue;
        };
        reverse_matches_duals(kexpr, &b, &theta, &pbar, &xi, &w, 1e-9);
        planned += 1;
    }
    assert!(planned >= 20, "{planned}");
}
