//! Adjoints of the log-determinant of a symmetric positive-definite matrix
//! through its Cholesky factor.

use crate::linalg::JitteredCholesky;
use nalgebra::DMatrix;

/// Ā = ḡ A⁻¹ [N, N] for d = log|A| = 2 Σᵢ log Lᵢᵢ, given ḡ = ∂f/∂d and the
/// factor of A [N, N] (with its jitter: A⁻¹ is (A + jitter·I)⁻¹).
///
/// d log|A| = tr(A⁻¹ dA).
pub fn log_det_vjp(chol: &JitteredCholesky, g: f64) -> DMatrix<f64> {
    let mut a = chol.inverse();
    a *= g;
    a
}

/// L̄ = ḡ diag(1/Lᵢᵢ) [N, N] for d = log det L = Σᵢ log Lᵢᵢ, with L lower
/// triangular [N, N], given ḡ = ∂f/∂d.
///
/// Through [`crate::adjoint::cholesky_vjp`], L̄ = 2 diag(1/Lᵢᵢ) (the
/// adjoint of log|A| = 2 log det L) gives Ā = A⁻¹, as [`log_det_vjp`].
pub fn log_det_factor_vjp(l: &DMatrix<f64>, g: f64) -> DMatrix<f64> {
    let n = l.nrows().min(l.ncols());
    let mut l_bar = DMatrix::zeros(l.nrows(), l.ncols());
    for i in 0..n {
        l_bar[(i, i)] = g / l[(i, i)];
    }
    l_bar
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adjoint::cholesky_vjp;
    use crate::adjoint::testing::*;
    use crate::linalg::cholesky_jitter;

    fn log_det(a: &DMatrix<f64>) -> f64 {
        cholesky_jitter(a, 0.0, 0.0, "A").unwrap().log_det()
    }

    #[test]
    fn log_det_adjoints_match_finite_differences() {
        let mut r = rng(31);
        for n in [1, 3, 9] {
            let a = spd(&mut r, n);
            let da = sym_dir(&mut r, n);
            let c = cholesky_jitter(&a, 0.0, 0.0, "A").unwrap();
            let g = 0.7;
            let want = central(|h| g * log_det(&(&a + &da * h)));
            assert_close(inner(&log_det_vjp(&c, g), &da), want, "log|A|");
            // Through the factor: log|A| = 2 log det L.
            let l = c.l();
            let l_bar = log_det_factor_vjp(&l, 2.0 * g);
            assert_close(inner(&cholesky_vjp(&l, &l_bar), &da), want, "log det L");
            let dl = tril(&normal(&mut r, n, n));
            let fl = |h: f64| {
                let lh = &l + &dl * h;
                (0..n).map(|i| lh[(i, i)].ln()).sum::<f64>()
            };
            assert_close(inner(&log_det_factor_vjp(&l, 1.0), &dl), central(fl), "L");
        }
    }
}
