//! Adjoints of triangular solves with a lower-triangular factor L.

use crate::linalg::{matmul, solve_lower_in_place};
use nalgebra::DMatrix;

/// The strict upper triangle of `m` set to zero.
fn tril_mut(m: &mut DMatrix<f64>) {
    for j in 0..m.ncols() {
        for i in 0..j.min(m.nrows()) {
            m[(i, j)] = 0.0;
        }
    }
}

/// (B̄, L̄) for X = L⁻¹ B, with L lower triangular [N, N], B and X [N, K],
/// given X̄ [N, K].
///
/// dX = L⁻¹(dB − dL X), so B̄ = L⁻ᵀ X̄ [N, K] and L̄ = −tril(B̄ Xᵀ) [N, N]
/// (lower triangular: L has no upper entries to perturb).
pub fn solve_lower_vjp(
    l: &DMatrix<f64>,
    x: &DMatrix<f64>,
    x_bar: &DMatrix<f64>,
) -> (DMatrix<f64>, DMatrix<f64>) {
    let mut b_bar = x_bar.clone();
    solve_lower_in_place(l, &mut b_bar, true);
    let mut l_bar = -matmul(&b_bar, false, x, true);
    tril_mut(&mut l_bar);
    (b_bar, l_bar)
}

/// (B̄, L̄) for X = L⁻ᵀ B, with L lower triangular [N, N], B and X [N, K],
/// given X̄ [N, K].
///
/// dX = L⁻ᵀ(dB − dLᵀ X), so B̄ = L⁻¹ X̄ [N, K] and L̄ = −tril(X B̄ᵀ) [N, N].
pub fn solve_lower_t_vjp(
    l: &DMatrix<f64>,
    x: &DMatrix<f64>,
    x_bar: &DMatrix<f64>,
) -> (DMatrix<f64>, DMatrix<f64>) {
    let mut b_bar = x_bar.clone();
    solve_lower_in_place(l, &mut b_bar, false);
    let mut l_bar = -matmul(x, false, &b_bar, true);
    tril_mut(&mut l_bar);
    (b_bar, l_bar)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adjoint::testing::*;

    fn solve(l: &DMatrix<f64>, b: &DMatrix<f64>, transposed: bool) -> DMatrix<f64> {
        let mut x = b.clone();
        if transposed {
            l.tr_solve_lower_triangular_mut(&mut x);
        } else {
            l.solve_lower_triangular_mut(&mut x);
        }
        x
    }

    #[test]
    fn triangular_solve_adjoints_match_finite_differences() {
        let mut r = rng(21);
        for (n, k) in [(1, 1), (4, 1), (7, 3)] {
            for transposed in [false, true] {
                let l = lower(&mut r, n);
                let b = normal(&mut r, n, k);
                let x_bar = normal(&mut r, n, k);
                let (dl, db) = (tril(&normal(&mut r, n, n)), normal(&mut r, n, k));
                let x = solve(&l, &b, transposed);
                let (b_bar, l_bar) = if transposed {
                    solve_lower_t_vjp(&l, &x, &x_bar)
                } else {
                    solve_lower_vjp(&l, &x, &x_bar)
                };
                assert_eq!(l_bar, tril(&l_bar));
                let fb = |h: f64| inner(&x_bar, &solve(&l, &(&b + &db * h), transposed));
                assert_close(inner(&b_bar, &db), central(fb), "solve, B");
                let fl = |h: f64| inner(&x_bar, &solve(&(&l + &dl * h), &b, transposed));
                assert_close(inner(&l_bar, &dl), central(fl), "solve, L");
            }
        }
    }
}
