//! W = ααᵀ − A⁻¹ formed from the Cholesky factor of A, in parallel column
//! blocks for large N with a result that does not depend on the number of
//! threads.

use crate::math::linalg::JitteredCholesky;
use crate::math::simd::settle;
use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, Par};
use nalgebra::{DMatrix, DVector};

/// Rows from which [`lml_weight`] works in parallel
/// column blocks.
pub const PAR_INVERSE_MIN: usize = 256;

/// Columns per block of the parallel inverse.
const INVERSE_BLOCK: usize = 64;

/// W = ααᵀ − (A + jitter·I)⁻¹ [N, N] for α [N] and the factor of A
/// [N, N], formed as the inverse is copied out: twice the adjoint K̄ of the
/// log marginal likelihood, so the gradient in a kernel parameter θ is
/// ½ tr(W ∂A/∂θ).
///
/// Above [`PAR_INVERSE_MIN`] rows the inverse is formed in independent
/// column blocks on the threads of the current rayon pool: M = L⁻¹ by
/// one triangular solve per block of the identity, then the lower half
/// of Mᵀ M one block of columns at a time. Each block is computed on
/// one thread with the same operations whatever the number of threads,
/// so the result is the same bit for bit for any thread count.
pub fn lml_weight(chol: &JitteredCholesky, alpha: &DVector<f64>) -> DMatrix<f64> {
    let llt = chol.llt();
    if llt.L().nrows() >= PAR_INVERSE_MIN {
        return lml_weight_blocked(chol, alpha);
    }
    let inv = llt.inverse();
    settle();
    let mut out = DMatrix::zeros(inv.nrows(), inv.ncols());
    for (j, mut col) in out.column_iter_mut().enumerate() {
        let aj = alpha[j];
        for (i, (o, v)) in col.iter_mut().zip(inv.col(j).iter()).enumerate() {
            *o = alpha[i] * aj - v;
        }
    }
    out
}

/// [`lml_weight`] by column blocks.
fn lml_weight_blocked(chol: &JitteredCholesky, alpha: &DVector<f64>) -> DMatrix<f64> {
    use faer::linalg::matmul::triangular::{BlockStructure, matmul};
    use rayon::prelude::*;
    let l = chol.llt().L();
    let n = l.nrows();
    let blocks: Vec<(usize, usize)> = (0..n)
        .step_by(INVERSE_BLOCK)
        .map(|c0| (c0, (c0 + INVERSE_BLOCK).min(n)))
        .collect();
    // Columns c0..c1 of M = L⁻¹, rows c0.. (the rest are 0).
    let parts: Vec<Mat<f64>> = blocks
        .par_iter()
        .map(|&(c0, c1)| {
            let mut x = Mat::zeros(n - c0, c1 - c0);
            for j in 0..c1 - c0 {
                x[(j, j)] = 1.0;
            }
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                l.submatrix(c0, c0, n - c0, n - c0),
                x.as_mut(),
                Par::Seq,
            );
            settle();
            x
        })
        .collect();
    let mut m = Mat::<f64>::zeros(n, n);
    for (&(c0, c1), x) in blocks.iter().zip(&parts) {
        m.as_mut()
            .submatrix_mut(c0, c0, n - c0, c1 - c0)
            .copy_from(x);
    }
    // Rows c0.. of columns c0..c1 of A⁻¹ = Mᵀ M: the rows k < c0 of M
    // are 0 in these columns, and Mᵀ restricted to rows/columns c0.. is
    // upper triangular.
    let outs: Vec<Mat<f64>> = blocks
        .par_iter()
        .map(|&(c0, c1)| {
            let sub = m.as_ref().submatrix(c0, c0, n - c0, n - c0);
            let rhs = m.as_ref().submatrix(c0, c0, n - c0, c1 - c0);
            let mut out = Mat::zeros(n - c0, c1 - c0);
            matmul(
                out.as_mut(),
                BlockStructure::Rectangular,
                faer::Accum::Replace,
                sub.transpose(),
                BlockStructure::TriangularUpper,
                rhs,
                BlockStructure::Rectangular,
                1.0,
                Par::Seq,
            );
            settle();
            out
        })
        .collect();
    let mut w = DMatrix::zeros(n, n);
    for (&(c0, c1), out) in blocks.iter().zip(&outs) {
        for jj in 0..c1 - c0 {
            let j = c0 + jj;
            for ii in jj..n - c0 {
                let i = c0 + ii;
                let v = alpha[i] * alpha[j] - out[(ii, jj)];
                w[(i, j)] = v;
                w[(j, i)] = v;
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::linalg::cholesky_jitter;

    #[test]
    fn the_blocked_inverse_matches_faer_and_any_thread_count() {
        let n = PAR_INVERSE_MIN + 77;
        let a = DMatrix::from_fn(n, n, |i, j| {
            let d = (i as f64 - j as f64) / 9.0;
            (-0.5 * d * d).exp() + if i == j { 0.1 } else { 0.0 }
        });
        let alpha = DVector::from_fn(n, |i, _| (i as f64 * 0.37).sin());
        let c = cholesky_jitter(&a, 0.0, 1e-2, "A").unwrap();
        let mut want = c.inverse();
        want.neg_mut();
        want.ger(1.0, &alpha, &alpha, 1.0);
        let run = |t: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(t)
                .build()
                .unwrap()
                .install(|| lml_weight(&c, &alpha))
        };
        let w1 = run(1);
        let scale = want.amax();
        assert!(
            (&w1 - &want).amax() <= 1e-10 * scale,
            "{}",
            (&w1 - &want).amax()
        );
        for t in [2, 3, 4] {
            assert_eq!(w1, run(t), "{t} threads");
        }
    }
}
