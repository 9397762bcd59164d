//! W = ααᵀ − A⁻¹ and A⁻¹ formed from the Cholesky factor of A, in
//! parallel column blocks for large N with a result that does not depend
//! on the number of threads.

use crate::math::factor::{split_cols, split_rows_at};
use crate::math::linalg::{JitteredCholesky, symmetric_from_lower};
use crate::math::pool;
use crate::math::simd::settle;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

/// Rows from which the inverse is formed in parallel column blocks.
pub const PAR_INVERSE_MIN: usize = 256;

/// Columns per block of the parallel inverse's triangular solve.
const INVERSE_BLOCK: usize = 64;

/// Rows per block of the parallel inverse's product Mᵀ M (a divisor of
/// [`INVERSE_BLOCK`]).
const INVERSE_ROWS: usize = 32;
const _: () = assert!(INVERSE_BLOCK.is_multiple_of(INVERSE_ROWS));

/// W = ααᵀ − (A + jitter·I)⁻¹ [N, N] for α \[N\] and the factor of A
/// [N, N]: twice the adjoint K̄ of the log marginal likelihood, so the
/// gradient in a kernel parameter θ is ½ tr(W ∂A/∂θ). Exactly symmetric.
///
/// Above [`PAR_INVERSE_MIN`] rows the inverse is formed in independent
/// blocks on the threads of the current rayon pool: M = L⁻¹ by one
/// triangular solve per block of columns of the identity, then the lower
/// half of Mᵀ M one block of rows at a time. Each block is computed on
/// one thread with the same operations whatever the number of threads,
/// so the result is the same bit for bit for any thread count.
pub fn lml_weight(chol: &JitteredCholesky, alpha: &DVector<f64>) -> DMatrix<f64> {
    LmlWeight::new(chol, alpha).into_full()
}

/// A symmetric weight [N, N] read one stretch of a lower-triangle column
/// at a time: what the kernel's reverse pass needs of W
/// ([`crate::model::block::leaf_adjoints`]).
pub trait LowerColumns: Sync {
    /// The side N.
    fn dim(&self) -> usize;
    /// Rows `start..start + out.len()` (all ≥ j) of column j.
    fn lower_column(&self, j: usize, start: usize, out: &mut [f64]);
}

impl LowerColumns for DMatrix<f64> {
    fn dim(&self) -> usize {
        self.nrows()
    }

    #[inline]
    fn lower_column(&self, j: usize, start: usize, out: &mut [f64]) {
        let n = self.nrows();
        out.copy_from_slice(&self.as_slice()[j * n + start..j * n + start + out.len()]);
    }
}

/// W = ααᵀ − (A + jitter·I)⁻¹ [N, N] held as the lower triangle of the
/// inverse (a pooled buffer) and α: its entries are formed where they
/// are read, so the gradient neither mirrors W into a full matrix nor
/// passes over it once more. [`LmlWeight::full`] forms the full matrix
/// (once) for the paths that need it; the entries are the same bits as
/// [`lml_weight`]'s.
pub struct LmlWeight {
    /// The lower triangle of the inverse by columns [N, N] (above the
    /// diagonal unspecified).
    inv: Vec<f64>,
    /// α [N].
    alpha: Vec<f64>,
    full: std::sync::OnceLock<DMatrix<f64>>,
}

impl LmlWeight {
    /// The weight for the factor of A and α = A⁻¹r [N].
    pub fn new(chol: &JitteredCholesky, alpha: &DVector<f64>) -> LmlWeight {
        LmlWeight {
            inv: inverse_lower(chol),
            alpha: alpha.as_slice().to_vec(),
            full: std::sync::OnceLock::new(),
        }
    }

    /// Wᵢⱼ for i ≥ j.
    #[inline]
    fn lower(&self, i: usize, j: usize) -> f64 {
        self.alpha[i] * self.alpha[j] - self.inv[j * self.alpha.len() + i]
    }

    /// Wᵢᵢ.
    pub fn diag(&self, i: usize) -> f64 {
        self.lower(i, i)
    }

    /// W as a full symmetric matrix [N, N], formed on first use.
    pub fn full(&self) -> &DMatrix<f64> {
        self.full.get_or_init(|| {
            let a = &self.alpha;
            symmetric_from_lower(&self.inv, a.len(), |i, j, v| a[i] * a[j] - v)
        })
    }

    /// W as a full symmetric matrix [N, N], the inverse's buffer handed
    /// back to the pool.
    pub fn into_full(mut self) -> DMatrix<f64> {
        self.full();
        self.full.take().unwrap_or_else(|| DMatrix::zeros(0, 0))
    }
}

impl LowerColumns for LmlWeight {
    fn dim(&self) -> usize {
        self.alpha.len()
    }

    #[inline]
    fn lower_column(&self, j: usize, start: usize, out: &mut [f64]) {
        let n = self.alpha.len();
        let (a, aj) = (&self.alpha[start..start + out.len()], self.alpha[j]);
        let inv = &self.inv[j * n + start..j * n + start + out.len()];
        for ((o, ai), v) in out.iter_mut().zip(a).zip(inv) {
            *o = ai * aj - v;
        }
    }
}

impl Drop for LmlWeight {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.inv));
    }
}

/// (A + jitter·I)⁻¹ [N, N] from the factor of A, as [`lml_weight`] forms
/// it (the same bits on any number of threads).
pub fn inverse(chol: &JitteredCholesky) -> DMatrix<f64> {
    let inv = inverse_lower(chol);
    let out = symmetric_from_lower(&inv, chol.dim(), |_, _, v| v);
    pool::give(inv);
    out
}

/// The lower triangle of (A + jitter·I)⁻¹ [N, N] by columns, in a
/// pooled buffer ([`crate::math::pool`]; what is above the diagonal is
/// unspecified).
fn inverse_lower(chol: &JitteredCholesky) -> Vec<f64> {
    let l = chol.factor();
    let n = l.nrows();
    let mut out = pool::take(n * n);
    if n < PAR_INVERSE_MIN {
        use faer::linalg::cholesky::llt::inverse as llt;
        let mut mem = MemBuffer::new(llt::inverse_scratch::<f64>(n, Par::Seq));
        llt::inverse(
            MatMut::from_column_major_slice_mut(&mut out, n, n),
            l,
            Par::Seq,
            MemStack::new(&mut mem),
        );
        settle();
        return out;
    }
    // M = L⁻¹, columns c0..c1 at a time: rows c0.. of those columns start
    // as the identity's and are solved in place (rows above c0 are 0 in M
    // and are never read).
    let mut mbuf = pool::take(n * n);
    split_cols(
        MatMut::from_column_major_slice_mut(&mut mbuf, n, n),
        INVERSE_BLOCK,
    )
    .into_par_iter()
    .for_each(|(c0, block)| {
        let w = block.ncols();
        let mut x = block.subrows_mut(c0, n - c0);
        x.fill(0.0);
        for j in 0..w {
            x[(j, j)] = 1.0;
        }
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            l.submatrix(c0, c0, n - c0, n - c0),
            x,
            Par::Seq,
        );
        settle();
    });
    // Rows i0..i1 of A⁻¹ = Mᵀ M, columns 0..i1 (the lower triangle and
    // the upper part of the diagonal block): rows k < i0 of M are 0 in
    // columns i0..i1, so the block is M[i0.., i0..i1]ᵀ M[i0.., 0..i1], one
    // rectangular product (faer's triangular product over the same
    // entries ran at two thirds of the speed). Every entry read is
    // written above: rows ≥ i0 of a column j < i1 lie at or below the top
    // of j's block of the solve, as INVERSE_ROWS divides INVERSE_BLOCK.
    let m = MatRef::from_column_major_slice(&mbuf, n, n);
    split_rows_at(
        MatMut::from_column_major_slice_mut(&mut out, n, n),
        INVERSE_ROWS,
    )
    .into_par_iter()
    .for_each(|(i0, block)| {
        let i1 = i0 + block.nrows();
        matmul(
            block.subcols_mut(0, i1),
            Accum::Replace,
            m.submatrix(i0, i0, n - i0, i1 - i0).transpose(),
            m.submatrix(i0, 0, n - i0, i1),
            1.0,
            Par::Seq,
        );
        settle();
    });
    pool::give(mbuf);
    out
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
        let mut want = a.clone().try_inverse().unwrap();
        want.neg_mut();
        want.ger(1.0, &alpha, &alpha, 1.0);
        let run = |t: usize| {
            // Scratch from the pool holds an earlier computation's numbers:
            // poisoned, so an entry read before it is written shows.
            for _ in 0..2 {
                pool::give(vec![f64::NAN; n * n]);
            }
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
