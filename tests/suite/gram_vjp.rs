//! The Gram and cross-covariance nodes' reverse pass (θ̄, X̄, Z̄) against
//! central finite differences, for built-in kernels, kernel algebra,
//! `dims` and compiled model-file kernels, and θ̄ against the block path.

use crate::common;
use common::{KERNEL_HYPERS, entry_cross_inputs};
use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use tempest::infer::gradients::leaf_adjoints;
use tempest::infer::hypers::HyperLayout;
use tempest::ir::eval::Env;
use tempest::model::gram_vjp::{cross_vjp, gram_vjp};
use tempest::model::kernel::{Inputs, KernelArg, KernelKind, KernelValue};
use tempest::{Data, DataValue, Model, Overrides, Registry};

const KERNELS_AND_DATA: &str = r#"
kernel rq(ell : positive, alpha : positive)(x, x2) {
  (1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha)
}
kernel odd(ell : positive, alpha : positive)(x, x2) {
  let r = sqrt(sqdist(x, x2) + 0.01) / ell
  (if r < 0.5 then 1 - r^2 / 6 else sin(r) / r) * alpha + exp(-abs(x[0] - x2[1])) * dot(x, x2) / (1 + alpha^2)
}
kernel ardk(ls : vector[k])(x, x2) {
  exp(-0.5 * sum(((x - x2) ./ ls) ^ 2)) * (1 + 0.1 * x[1] * x2[0])
}
data { n : int
 X : matrix[n, 3] }
"#;

const KERNELS: [&str; 15] = [
    "rbf(ell)",
    "rbf(ells)",
    "matern12(ell)",
    "matern32(ells)",
    "matern52(ell)",
    "periodic(ell, p)",
    "linear(v)",
    "polynomial(3, c)",
    "polynomial(alpha, c + 20)",
    "cosine()",
    "s^2 * rbf(ell) + 0.1 * white() + constant()",
    "rbf(ell, dims = 0..1) * periodic(ell, p, dims = [2]) + linear() * cosine()",
    "rq(ell, alpha) * matern32(ell, dims = [1, 2])",
    "odd(ell, alpha, dims = [2, 0]) + s * odd(ell, alpha)",
    "s * ardk(ells)",
];

fn matrix(r: usize, c: usize, seed: u64) -> DMatrix<f64> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    DMatrix::from_fn(r, c, |_, _| rng.random_range(-1.5..1.5))
}

/// The kernel of `f ~ gp(0, kexpr)` at the hypers' initial values.
fn kernel(kexpr: &str, x: &DMatrix<f64>) -> KernelValue<f64> {
    let text = format!("{KERNELS_AND_DATA}{KERNEL_HYPERS}\nmodel {{ f ~ gp(0, {kexpr}) }}\n");
    let m =
        Model::from_str("k.tempest", &text, &Registry::default()).unwrap_or_else(|e| panic!("{e}"));
    let data = Data::values().with("X", DataValue::Matrix(x.clone()));
    let b = m
        .bind(&data, &Overrides::default())
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
    let layout = HyperLayout::new(&b, true);
    let hyp = layout.values::<f64>(&b, &layout.initial(&b).unwrap());
    Env::new(&b, &hyp, &[], &[])
        .kernel(&b.graph.gps[0].kernel)
        .unwrap()
}

fn inner(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    a.component_mul(b).sum()
}

fn central(f: impl Fn(f64) -> f64) -> f64 {
    let h = 1e-6;
    (f(h) - f(-h)) / (2.0 * h)
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs().max(1.0),
        "{what}: adjoint {got} vs {want}"
    );
}

#[test]
fn the_gram_adjoint_matches_finite_differences_and_the_block_path() {
    let (n, d) = (11, 3);
    let x = matrix(n, d, 1);
    let k_bar = matrix(n, n, 2);
    let dx = matrix(n, d, 3);
    for kexpr in KERNELS {
        let k = kernel(kexpr, &x);
        let adj = gram_vjp(&k, &Inputs::from_matrix(&x), &k_bar)
            .unwrap()
            .expect("a reverse rule");
        let f = |h: f64| {
            let xh = Inputs::from_matrix(&(&x + &dx * h));
            inner(&k_bar, &k.gram_fast(&xh).unwrap())
        };
        close(inner(&adj.x, &dx), central(f), 1e-6, &format!("{kexpr}: X̄"));
        let w = &k_bar + k_bar.transpose();
        let pbar = leaf_adjoints(&k, &Inputs::from_matrix(&x), &w)
            .unwrap()
            .unwrap();
        assert_eq!(adj.params.len(), pbar.len(), "{kexpr}: θ̄ length");
        for (a, b) in adj.params.iter().zip(&pbar) {
            close(*a, *b, 1e-10, &format!("{kexpr}: θ̄"));
        }
    }
}

#[test]
fn the_cross_adjoint_matches_finite_differences() {
    let (n, m, d) = (9, 6, 3);
    let (x, z) = (matrix(n, d, 4), matrix(m, d, 5));
    let k_bar = matrix(n, m, 6);
    let (dx, dz) = (matrix(n, d, 7), matrix(m, d, 8));
    for kexpr in KERNELS {
        let k = kernel(kexpr, &x);
        let (xi, zi) = (Inputs::from_matrix(&x), Inputs::from_matrix(&z));
        let adj = cross_vjp(&k, &xi, &zi, &k_bar).unwrap().expect("a rule");
        let fx = |h: f64| {
            let xh = Inputs::from_matrix(&(&x + &dx * h));
            inner(&k_bar, &k.cross_fast(&xh, &zi).unwrap())
        };
        close(
            inner(&adj.x, &dx),
            central(fx),
            1e-6,
            &format!("{kexpr}: X̄"),
        );
        let fz = |h: f64| {
            let zh = Inputs::from_matrix(&(&z + &dz * h));
            inner(&k_bar, &k.cross_fast(&xi, &zh).unwrap())
        };
        close(
            inner(&adj.z, &dz),
            central(fz),
            1e-6,
            &format!("{kexpr}: Z̄"),
        );
    }
}

/// s · (rbf(ℓ) + linear(v)) built directly, so θ can be perturbed.
fn direct(s: f64, ell: f64, v: [f64; 2]) -> KernelValue<f64> {
    let base = |kind, args| {
        Box::new(KernelValue::Base {
            kind,
            args,
            dims: None,
            span: Default::default(),
        })
    };
    KernelValue::Scale(
        s,
        Box::new(KernelValue::Product(
            base(KernelKind::Rbf, vec![KernelArg::Scalar(ell)]),
            base(KernelKind::Linear, vec![KernelArg::Vector(v.to_vec())]),
        )),
    )
}

#[test]
fn the_parameter_adjoints_match_finite_differences() {
    let x = matrix(8, 2, 9);
    let xi = Inputs::from_matrix(&x);
    let k_bar = matrix(8, 8, 10);
    let theta = [1.3, 0.7, 0.4, 1.1];
    let k = |t: &[f64]| direct(t[0], t[1], [t[2], t[3]]);
    let adj = gram_vjp(&k(&theta), &xi, &k_bar).unwrap().unwrap();
    for j in 0..theta.len() {
        let f = |h: f64| {
            let mut t = theta;
            t[j] += h;
            inner(&k_bar, &k(&t).gram_fast(&xi).unwrap())
        };
        close(adj.params[j], central(f), 1e-6, &format!("θ{j}"));
    }
}

#[test]
fn shapes_are_checked_and_kernels_without_rules_give_none() {
    let x = matrix(4, 3, 11);
    let xi = Inputs::from_matrix(&x);
    let k = kernel("rbf(ell)", &x);
    assert!(gram_vjp(&k, &xi, &DMatrix::zeros(3, 4)).is_err());
    let z = Inputs::from_matrix(&matrix(2, 2, 12));
    assert!(cross_vjp(&k, &xi, &z, &DMatrix::zeros(4, 2)).is_err());
    let lang = "kernel vk(ell : positive)(x, x2) { exp(-sum((x - x2) .* (x - x2)) / ell) }\n";
    let text = format!("{lang}{KERNELS_AND_DATA}{KERNEL_HYPERS}\nmodel {{ f ~ gp(0, vk(ell)) }}\n");
    let m = Model::from_str("k.tempest", &text, &Registry::default()).unwrap();
    let b = m
        .bind(
            &Data::values().with("X", DataValue::Matrix(x.clone())),
            &Overrides::default(),
        )
        .unwrap();
    let layout = HyperLayout::new(&b, true);
    let hyp = layout.values::<f64>(&b, &layout.initial(&b).unwrap());
    let k = Env::new(&b, &hyp, &[], &[])
        .kernel(&b.graph.gps[0].kernel)
        .unwrap();
    let k_bar = DMatrix::from_element(4, 4, 1.0);
    assert!(gram_vjp(&k, &xi, &k_bar).unwrap().is_none());
}

#[test]
fn the_adjoints_are_identical_for_any_thread_count() {
    let x = matrix(40, 3, 13);
    let (xi, zi) = (
        Inputs::from_matrix(&x),
        Inputs::from_matrix(&matrix(17, 3, 14)),
    );
    let (kb, cb) = (matrix(40, 40, 15), matrix(40, 17, 16));
    let k = kernel(KERNELS[12], &x);
    let run = |t: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap()
            .install(|| {
                let g = gram_vjp(&k, &xi, &kb).unwrap().unwrap();
                let c = cross_vjp(&k, &xi, &zi, &cb).unwrap().unwrap();
                (g.params, g.x, c.params, c.x, c.z)
            })
    };
    let one = run(1);
    for t in [2, 3] {
        assert_eq!(one, run(t), "{t} threads");
    }
}

/// A hand-built kernel value with too few arguments is an error, not a
/// panic; a degree-0 polynomial has zero derivatives where c + xᵀy = 0.
#[test]
fn malformed_kernels_fail_and_degree_zero_is_flat() {
    let xi = Inputs::from_matrix(&DMatrix::from_row_slice(2, 1, &[1.0, -1.0]));
    let k_bar = DMatrix::from_element(2, 2, 1.0);
    let short = KernelValue::Base {
        kind: KernelKind::Periodic,
        args: vec![KernelArg::Scalar(1.0)],
        dims: None,
        span: Default::default(),
    };
    assert!(gram_vjp(&short, &xi, &k_bar).is_err());
    assert!(short.gram_fast(&xi).is_err());
    // c + x·y = 1 − 1 = 0 off the diagonal.
    let flat = KernelValue::Base {
        kind: KernelKind::Polynomial,
        args: vec![KernelArg::Scalar(0.0), KernelArg::Scalar(1.0)],
        dims: None,
        span: Default::default(),
    };
    let adj = gram_vjp(&flat, &xi, &k_bar).unwrap().unwrap();
    assert!(adj.params.iter().all(|g| *g == 0.0), "{:?}", adj.params);
    assert!(adj.x.iter().all(|g| *g == 0.0), "{}", adj.x);
}

/// A gradient that is not finite is an error, never passed on.
#[test]
fn non_finite_adjoints_are_errors() {
    // (c + xᵀy)^1.5 with c + xᵀy = 0.5 − 1 < 0 off the diagonal: NaN.
    let xi = Inputs::from_matrix(&DMatrix::from_row_slice(2, 1, &[1.0, -1.0]));
    let k = KernelValue::Base {
        kind: KernelKind::Polynomial,
        args: vec![KernelArg::Scalar(1.5), KernelArg::Scalar(0.5)],
        dims: None,
        span: Default::default(),
    };
    let err = gram_vjp(&k, &xi, &DMatrix::from_element(2, 2, 1.0)).unwrap_err();
    assert!(
        err.message.contains("kernel gradient is NaN"),
        "{}",
        err.message
    );
}

/// X̄ and Z̄ of `cross_vjp` equal the entry-by-entry reverse passes.
fn cross_agrees_with_the_entries(
    k: &KernelValue<f64>,
    xi: &Inputs,
    zi: &Inputs,
    k_bar: &DMatrix<f64>,
    kexpr: &str,
) {
    let adj = cross_vjp(k, xi, zi, k_bar).unwrap().expect("a rule");
    let (rx, rz) = entry_cross_inputs(k, xi, zi, k_bar);
    let scale = rx.amax().max(rz.amax());
    assert!((&adj.x - &rx).amax() <= 1e-12 * scale, "{kexpr}: X̄");
    assert!((&adj.z - &rz).amax() <= 1e-12 * scale, "{kexpr}: Z̄");
}

#[test]
fn radial_kernels_take_the_matrix_path_with_the_entries_results() {
    // Radial kernels' X̄ and Z̄ come from two matrix products; they must
    // equal the entry-by-entry reverse passes (and coincident points add
    // nothing). Non-radial kernels are unaffected.
    let (n, m, d) = (11, 7, 3);
    let mut x = matrix(n, d, 14);
    let z = matrix(m, d, 15);
    for k in 0..d {
        x[(3, k)] = z[(2, k)];
    }
    let k_bar = matrix(n, m, 16);
    let radial = [
        "rbf(ell)",
        "matern12(ell)",
        "s^2 * rbf(ell) + 0.1 * white() + constant()",
        "matern32(ell) * (0.5 * matern52(ell) + rbf(ell))",
    ];
    for kexpr in radial {
        let k = kernel(kexpr, &x);
        assert!(k.radial(0.7).is_some(), "{kexpr} is radial");
        let (xi, zi) = (Inputs::from_matrix(&x), Inputs::from_matrix(&z));
        cross_agrees_with_the_entries(&k, &xi, &zi, &k_bar, kexpr);
        let g = gram_vjp(&k, &zi, &DMatrix::from_fn(m, m, |i, j| k_bar[(i, j)]))
            .unwrap()
            .expect("a rule");
        let mut rg = DMatrix::<f64>::zeros(m, d);
        for i in 0..m {
            for j in 0..m {
                let (mut ga, mut gb) = (vec![0.0; d], vec![0.0; d]);
                k.entry_vjp_inputs(
                    zi.row(i),
                    zi.row(j),
                    i == j,
                    k_bar[(i, j)],
                    Some(&mut ga),
                    Some(&mut gb),
                )
                .unwrap();
                for c in 0..d {
                    rg[(i, c)] += ga[c];
                    rg[(j, c)] += gb[c];
                }
            }
        }
        assert!(
            (&g.x - &rg).amax() <= 1e-12 * rg.amax().max(1.0),
            "{kexpr}: Gram X̄"
        );
    }
    for kexpr in [
        "rbf(ells)",
        "periodic(ell, p)",
        "rbf(ell, dims = 0..1)",
        "linear(v)",
    ] {
        assert!(
            kernel(kexpr, &x).radial(0.7).is_none(),
            "{kexpr} is not radial"
        );
    }
}

#[test]
fn compiled_kernels_take_the_block_path_with_the_entries_results() {
    // More rows than 16 chunks: several chunks per parallel run.
    let (xl, zl) = (matrix(1100, 3, 28), matrix(3, 3, 29));
    let k = kernel("s * ardk(ells)", &xl);
    cross_agrees_with_the_entries(
        &k,
        &Inputs::from_matrix(&xl),
        &Inputs::from_matrix(&zl),
        &matrix(1100, 3, 30),
        "s * ardk(ells), 1100 rows",
    );
    // A compiled kernel under scalings takes X̄ and Z̄ by blocks of entries
    // (several chunks of rows here); they equal the entry-by-entry reverse
    // passes, for bodies reading their inputs whole, coordinate by
    // coordinate and element-wise, not symmetric, and with `dims`.
    let (n, m, d) = (150, 7, 3);
    let mut x = matrix(n, d, 24);
    let z = matrix(m, d, 25);
    for k in 0..d {
        x[(3, k)] = z[(2, k)];
    }
    let k_bar = matrix(n, m, 26);
    for kexpr in [
        "rq(ell, alpha)",
        "s * odd(ell, alpha)",
        "0.5 * odd(ell, alpha, dims = [2, 0])",
        "s * ardk(ells)",
        "ardk(ells, dims = [2, 1, 0])",
    ] {
        let k = kernel(kexpr, &x);
        let compiled = match &k {
            KernelValue::Scale(_, c) => matches!(**c, KernelValue::Compiled { .. }),
            c => matches!(c, KernelValue::Compiled { .. }),
        };
        assert!(compiled, "{kexpr} is compiled");
        let (xi, zi) = (Inputs::from_matrix(&x), Inputs::from_matrix(&z));
        cross_agrees_with_the_entries(&k, &xi, &zi, &k_bar, kexpr);
        // θ̄ from the same pass equals the block plan's own.
        let theta = cross_vjp(&k, &xi, &zi, &k_bar).unwrap().unwrap().params;
        let plan = tempest::model::block::cross_leaf_adjoints(&k, &xi, &zi, &k_bar).unwrap();
        assert_eq!(theta.len(), plan.len(), "{kexpr}: θ̄ length");
        for (a, b) in theta.iter().zip(&plan) {
            close(*a, *b, 1e-11, &format!("{kexpr}: θ̄"));
        }
        // The Gram node holds k(xᵢ, xⱼ) for i ≥ j, mirrored: K̄ folded
        // onto that triangle.
        let kb = matrix(n, n, 27);
        let g = gram_vjp(&k, &xi, &kb).unwrap().expect("a rule");
        let folded = DMatrix::from_fn(n, n, |i, j| {
            if i == j {
                kb[(i, i)]
            } else if i > j {
                kb[(i, j)] + kb[(j, i)]
            } else {
                0.0
            }
        });
        let (gx, gz) = entry_cross_inputs(&k, &xi, &xi, &folded);
        let want = gx + gz;
        assert!(
            (&g.x - &want).amax() <= 1e-12 * want.amax().max(1.0),
            "{kexpr}: Gram X̄"
        );
    }
}
