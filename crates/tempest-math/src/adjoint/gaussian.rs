//! Adjoints of the Gaussian log density through a Cholesky factor: the
//! quadratic form bᵀA⁻¹b and the GP log marginal likelihood.

use super::inverse::lml_weight;
use crate::linalg::JitteredCholesky;
use nalgebra::{DMatrix, DVector};

/// (Ā, r̄) for the Gaussian log density
/// ℓ = −½ rᵀA⁻¹r − ½ log|A| − (N/2) log 2π, with A symmetric positive
/// definite [N, N] given by its factor, r \[N\] and α = A⁻¹r \[N\], given
/// ḡ = ∂f/∂ℓ.
///
/// Ā = ½ ḡ (ααᵀ − A⁻¹) [N, N] (½ ḡ times [`lml_weight`]) and r̄ = −ḡ α \[N\].
/// In GP regression, A = K + σ²I and r = y − m: K̄ = Ā, m̄ = ḡ α.
pub fn gaussian_lml_vjp(
    chol: &JitteredCholesky,
    alpha: &DVector<f64>,
    g: f64,
) -> (DMatrix<f64>, DVector<f64>) {
    let mut a_bar = lml_weight(chol, alpha);
    a_bar *= 0.5 * g;
    (a_bar, alpha * -g)
}

/// q = bᵀA⁻¹b and α = A⁻¹b \[N\], for b \[N\] and the factor of A [N, N].
pub fn quad_form(chol: &JitteredCholesky, b: &DVector<f64>) -> (f64, DVector<f64>) {
    let alpha = chol.solve(b);
    (b.dot(&alpha), alpha)
}

/// (Ā, b̄) for q = bᵀA⁻¹b, given α = A⁻¹b \[N\] and q̄ = ∂f/∂q:
/// Ā = −q̄ ααᵀ [N, N] (dA⁻¹ = −A⁻¹ dA A⁻¹) and b̄ = 2 q̄ α \[N\].
pub fn quad_form_vjp(alpha: &DVector<f64>, g: f64) -> (DMatrix<f64>, DVector<f64>) {
    (alpha * alpha.transpose() * -g, alpha * (2.0 * g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adjoint::testing::*;
    use crate::linalg::cholesky_jitter;

    fn factor(a: &DMatrix<f64>) -> JitteredCholesky {
        cholesky_jitter(a, 0.0, 0.0, "A").unwrap()
    }

    /// −½ rᵀA⁻¹r − ½ log|A| − (N/2) log 2π.
    fn lml(a: &DMatrix<f64>, r: &DVector<f64>) -> f64 {
        let c = factor(a);
        let (q, _) = quad_form(&c, r);
        -0.5 * q - 0.5 * c.log_det() - 0.5 * r.len() as f64 * (2.0 * std::f64::consts::PI).ln()
    }

    #[test]
    fn the_quadratic_form_adjoint_matches_finite_differences() {
        let mut r = rng(51);
        for n in [1, 4, 10] {
            let (a, b) = (spd(&mut r, n), normal_vec(&mut r, n));
            let (da, db) = (sym_dir(&mut r, n), normal_vec(&mut r, n));
            let g = -1.3;
            let (_, alpha) = quad_form(&factor(&a), &b);
            let (a_bar, b_bar) = quad_form_vjp(&alpha, g);
            let fa = |h: f64| g * quad_form(&factor(&(&a + &da * h)), &b).0;
            assert_close(inner(&a_bar, &da), central(fa), "bᵀA⁻¹b, A");
            let fb = |h: f64| g * quad_form(&factor(&a), &(&b + &db * h)).0;
            assert_close(b_bar.dot(&db), central(fb), "bᵀA⁻¹b, b");
        }
    }

    #[test]
    fn the_log_marginal_likelihood_adjoint_matches_finite_differences() {
        let mut r = rng(52);
        for n in [1, 5, 12] {
            let (a, y) = (spd(&mut r, n), normal_vec(&mut r, n));
            let (da, dy) = (sym_dir(&mut r, n), normal_vec(&mut r, n));
            let c = factor(&a);
            let alpha = c.solve(&y);
            let g = 0.8;
            let (a_bar, r_bar) = gaussian_lml_vjp(&c, &alpha, g);
            assert_eq!(a_bar, a_bar.transpose());
            let fa = |h: f64| g * lml(&(&a + &da * h), &y);
            assert_close(inner(&a_bar, &da), central(fa), "lml, A");
            let fy = |h: f64| g * lml(&a, &(&y + &dy * h));
            assert_close(r_bar.dot(&dy), central(fy), "lml, r");
        }
    }

    #[test]
    fn the_weight_is_the_sum_of_the_quadratic_and_log_det_adjoints() {
        let mut r = rng(53);
        let (a, y) = (spd(&mut r, 7), normal_vec(&mut r, 7));
        let c = factor(&a);
        let (_, alpha) = quad_form(&c, &y);
        // ℓ = −½ q − ½ log|A|: Ā = −½(−ααᵀ) − ½ A⁻¹ = ½ W.
        let (aq, _) = quad_form_vjp(&alpha, -0.5);
        let ad = crate::adjoint::log_det_vjp(&c, -0.5);
        let w = lml_weight(&c, &alpha);
        assert!((&aq + &ad - &w * 0.5).amax() <= 1e-12 * w.amax());
    }
}
