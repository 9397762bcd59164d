//! Helpers for the finite-difference tests of the adjoint rules.

use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};

/// A seeded generator.
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A matrix [r, c] of standard normal entries.
pub fn normal(rng: &mut StdRng, r: usize, c: usize) -> DMatrix<f64> {
    DMatrix::from_fn(r, c, |_, _| StandardNormal.sample(rng))
}

/// A vector [n] of standard normal entries.
pub fn normal_vec(rng: &mut StdRng, n: usize) -> DVector<f64> {
    DVector::from_fn(n, |_, _| StandardNormal.sample(rng))
}

/// A well-conditioned symmetric positive-definite matrix B Bᵀ/N + I [N, N].
pub fn spd(rng: &mut StdRng, n: usize) -> DMatrix<f64> {
    let b = normal(rng, n, n);
    let mut a = &b * b.transpose() / n as f64;
    for i in 0..n {
        a[(i, i)] += 1.0;
    }
    a
}

/// A symmetric direction (B + Bᵀ)/2 [N, N].
pub fn sym_dir(rng: &mut StdRng, n: usize) -> DMatrix<f64> {
    let b = normal(rng, n, n);
    (&b + b.transpose()) * 0.5
}

/// A lower-triangular matrix [N, N] with entries N(0, 1) below the
/// diagonal and 1.5 + |N(0, 1)| on it.
pub fn lower(rng: &mut StdRng, n: usize) -> DMatrix<f64> {
    let mut l = normal(rng, n, n);
    for j in 0..n {
        l[(j, j)] = 1.5 + l[(j, j)].abs();
        for i in 0..j {
            l[(i, j)] = 0.0;
        }
    }
    l
}

/// The lower triangle of a matrix (upper part zeroed).
pub fn tril(m: &DMatrix<f64>) -> DMatrix<f64> {
    DMatrix::from_fn(
        m.nrows(),
        m.ncols(),
        |i, j| if i >= j { m[(i, j)] } else { 0.0 },
    )
}

/// The lower Cholesky factor of a symmetric positive-definite matrix.
pub fn chol(a: &DMatrix<f64>) -> DMatrix<f64> {
    a.clone().cholesky().expect("positive definite").l()
}

/// ⟨X, Y⟩ = Σᵢⱼ Xᵢⱼ Yᵢⱼ.
pub fn inner(x: &DMatrix<f64>, y: &DMatrix<f64>) -> f64 {
    x.component_mul(y).sum()
}

/// The central difference (f(h) − f(−h)) / 2h of a function of a step.
pub fn central(f: impl Fn(f64) -> f64) -> f64 {
    let h = 1e-5;
    (f(h) - f(-h)) / (2.0 * h)
}

/// Asserts |got − want| ≤ 1e-8 · max(1, |want|) (the central
/// difference with h = 1e-5 is good to about 1e-10 on these matrices).
pub fn assert_close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-8 * want.abs().max(1.0),
        "{what}: adjoint {got} vs finite difference {want}"
    );
}
