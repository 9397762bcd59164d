//! W = ααᵀ − A⁻¹ and A⁻¹ formed from the Cholesky factor of A, in
//! parallel column blocks for large N with a result that does not depend
//! on the number of threads; and W handed to the kernel's reverse pass a
//! block of columns at a time, formed where it is read ([`UpperColumns`]).

use crate::factor::{split_cols, split_rows_at};
use crate::linalg::{JitteredCholesky, symmetric_from_lower};
use crate::pool;
use crate::simd::settle;
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

/// Columns per block of [`UpperColumns::with_columns`].
pub const SWEEP_COLUMNS: usize = INVERSE_ROWS;

/// A block of columns i0..i1 of a symmetric matrix, rows 0..i1: entry
/// (j, i) is `data[(i − i0)·col + j·row]`.
#[derive(Clone, Copy)]
pub struct Strided<'a> {
    /// The entries.
    pub data: &'a [f64],
    /// The distance between neighbouring columns.
    pub col: usize,
    /// The distance between neighbouring rows.
    pub row: usize,
}

/// A symmetric weight W [N, N] handed to the kernel's reverse pass
/// (`tempest::model::block::leaf_adjoints`) a block of [`SWEEP_COLUMNS`]
/// columns at a time, each column read from its first row down to the
/// diagonal (the upper triangle, which for a symmetric matrix holds the
/// lower triangle's numbers): what the pass needs of W, in pieces small
/// enough to stay in cache while it reads them.
pub trait UpperColumns: Sync {
    /// The side N.
    fn dim(&self) -> usize;
    /// Calls `f` with the columns i0..min(i0 + [`SWEEP_COLUMNS`], N) (i0
    /// a multiple of [`SWEEP_COLUMNS`]), of which rows 0..=i of each
    /// column i are read.
    fn with_columns<R>(&self, i0: usize, f: impl FnOnce(Strided<'_>) -> R) -> R;
}

impl UpperColumns for DMatrix<f64> {
    fn dim(&self) -> usize {
        self.nrows()
    }

    fn with_columns<R>(&self, i0: usize, f: impl FnOnce(Strided<'_>) -> R) -> R {
        let n = self.nrows();
        f(Strided {
            data: &self.as_slice()[i0 * n..],
            col: n,
            row: 1,
        })
    }
}

thread_local! {
    /// One block of columns of W for [`LmlWeight::with_columns`].
    static SWEEP: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// W = ααᵀ − (A + jitter·I)⁻¹ [N, N] held as M = L⁻¹ and α: the inverse
/// Mᵀ M is formed a block of columns at a time where the kernel's reverse
/// pass reads it ([`UpperColumns`]), so it is never stored whole, never
/// written to memory and read back. [`LmlWeight::full`] forms the full
/// matrix (once) for the paths that need it; its entries are the same
/// bits as [`lml_weight`]'s.
pub struct LmlWeight {
    /// M = L⁻¹ by columns [N, N] (pooled): column j holds rows i0.. for
    /// i0 the first column of its block of [`INVERSE_ROWS`] (zero between
    /// i0 and the diagonal; above i0, unspecified), all that
    /// [`inverse_rows`] reads.
    m: Vec<f64>,
    /// The diagonal of the inverse, Σₖ Mₖᵢ² [N].
    inv_diag: Vec<f64>,
    /// α [N].
    alpha: Vec<f64>,
    full: std::sync::OnceLock<DMatrix<f64>>,
}

impl LmlWeight {
    /// The weight for the factor of A and α = A⁻¹r \[N\].
    pub fn new(chol: &JitteredCholesky, alpha: &DVector<f64>) -> LmlWeight {
        let (m, inv_diag) = lower_inverse(chol);
        LmlWeight {
            m,
            inv_diag,
            alpha: alpha.as_slice().to_vec(),
            full: std::sync::OnceLock::new(),
        }
    }

    /// The weight from M = L⁻¹ [N, N] as
    /// [`crate::linalg::cholesky_jitter_with_inverse`] forms it (a
    /// pooled buffer, handed back on drop; rows j.. of column j read) and
    /// α \[N\]; the diagonal of the inverse is formed here, a column per
    /// task.
    pub fn from_inverse(m: Vec<f64>, alpha: &DVector<f64>) -> LmlWeight {
        let n = alpha.len();
        assert_eq!(m.len(), n * n, "M is N × N");
        let norm = |j: usize| -> f64 {
            let c = &m[j * n + j..(j + 1) * n];
            faer::ColRef::from_slice(c).squared_norm_l2()
        };
        let inv_diag: Vec<f64> = if n < PAR_INVERSE_MIN {
            (0..n).map(norm).collect()
        } else {
            (0..n).into_par_iter().with_min_len(32).map(norm).collect()
        };
        settle();
        LmlWeight {
            m,
            inv_diag,
            alpha: alpha.as_slice().to_vec(),
            full: std::sync::OnceLock::new(),
        }
    }

    /// Wᵢᵢ.
    pub fn diag(&self, i: usize) -> f64 {
        self.alpha[i] * self.alpha[i] - self.inv_diag[i]
    }

    /// W as a full symmetric matrix [N, N], formed on first use.
    pub fn full(&self) -> &DMatrix<f64> {
        self.full.get_or_init(|| {
            let a = &self.alpha;
            let inv = inverse_from(&self.m, a.len());
            let w = symmetric_from_lower(&inv, a.len(), |i, j, v| a[i] * a[j] - v);
            pool::give(inv);
            w
        })
    }

    /// W as a full symmetric matrix [N, N], M's buffer handed back to
    /// the pool.
    pub fn into_full(mut self) -> DMatrix<f64> {
        self.full();
        self.full.take().unwrap_or_else(|| DMatrix::zeros(0, 0))
    }
}

impl UpperColumns for LmlWeight {
    fn dim(&self) -> usize {
        self.alpha.len()
    }

    /// Columns i0..i1 of W, rows 0..i1, from rows i0..i1 of Mᵀ M (by
    /// symmetry), formed as [`LmlWeight::full`] forms them (the same
    /// bits): M[i0.., i0..i1]ᵀ M[i0.., 0..i1] (rows k < i0 of M are 0 in
    /// columns i0..i1), then ααᵀ minus it, in a scratch of this thread.
    fn with_columns<R>(&self, i0: usize, f: impl FnOnce(Strided<'_>) -> R) -> R {
        let n = self.alpha.len();
        let i1 = (i0 + SWEEP_COLUMNS).min(n);
        let w = i1 - i0;
        let run = |b: &mut Vec<f64>| {
            if b.len() < w * i1 {
                b.resize(w * i1, 0.0);
            }
            let b = &mut b[..w * i1];
            inverse_rows(
                &self.m,
                n,
                i0,
                MatMut::from_column_major_slice_mut(b, w, i1),
            );
            let (a, ai) = (&self.alpha, &self.alpha[i0..i1]);
            for (col, aj) in b.chunks_exact_mut(w).zip(a) {
                for (v, ai) in col.iter_mut().zip(ai) {
                    *v = ai * aj - *v;
                }
            }
            f(Strided {
                data: b,
                col: 1,
                row: w,
            })
        };
        SWEEP.with(|cell| match cell.try_borrow_mut() {
            Ok(mut b) => run(&mut b),
            Err(_) => run(&mut Vec::new()),
        })
    }
}

impl Drop for LmlWeight {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.m));
    }
}

/// (A + jitter·I)⁻¹ [N, N] from the factor of A, as [`lml_weight`] forms
/// it (the same bits on any number of threads).
pub fn inverse(chol: &JitteredCholesky) -> DMatrix<f64> {
    let n = chol.dim();
    let (m, _) = lower_inverse(chol);
    let inv = inverse_from(&m, n);
    pool::give(m);
    let out = symmetric_from_lower(&inv, n, |_, _, v| v);
    pool::give(inv);
    out
}

/// M = L⁻¹ [N, N] by columns in a pooled buffer ([`crate::pool`];
/// the columns of the block of [`INVERSE_BLOCK`] starting at c0 hold
/// rows c0.., what is above them unspecified) and the diagonal of the
/// inverse Mᵀ M, each column's Σₖ Mₖⱼ² \[N\]. Blocks of columns c0..c1
/// are solved in place (on the pool's threads above [`PAR_INVERSE_MIN`]
/// rows): rows c0.. of those columns start as the identity's (rows above
/// c0 are 0 in M and are never read).
fn lower_inverse(chol: &JitteredCholesky) -> (Vec<f64>, Vec<f64>) {
    let l = chol.factor();
    let n = l.nrows();
    let mut mbuf = pool::take(n * n);
    let mut diag = vec![0.0; n];
    let solve = |((c0, block), d): ((usize, MatMut<'_, f64>), &mut [f64])| {
        let w = block.ncols();
        let mut x = block.subrows_mut(c0, n - c0);
        x.fill(0.0);
        for j in 0..w {
            x[(j, j)] = 1.0;
        }
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            l.submatrix(c0, c0, n - c0, n - c0),
            x.as_mut(),
            Par::Seq,
        );
        settle();
        for (j, dj) in d.iter_mut().enumerate() {
            *dj = x.as_ref().col(j).squared_norm_l2();
        }
    };
    let blocks = split_cols(
        MatMut::from_column_major_slice_mut(&mut mbuf, n, n),
        INVERSE_BLOCK,
    );
    if n < PAR_INVERSE_MIN {
        blocks
            .into_iter()
            .zip(diag.chunks_mut(INVERSE_BLOCK))
            .for_each(solve);
    } else {
        blocks
            .into_par_iter()
            .zip(diag.par_chunks_mut(INVERSE_BLOCK))
            .for_each(solve);
    }
    (mbuf, diag)
}

/// Rows i0..i1 of Mᵀ M, columns 0..i1, into `dst` [i1 − i0, i1], for M
/// [N, N] from [`lower_inverse`]: M[i0.., i0..i1]ᵀ M[i0.., 0..i1], one
/// rectangular product on this thread (see [`inverse_from`]). The one
/// place both the whole inverse and the swept blocks of
/// [`LmlWeight`] are formed, so their entries are the same bits.
fn inverse_rows(mbuf: &[f64], n: usize, i0: usize, dst: MatMut<'_, f64>) {
    let (rows, i1) = (dst.nrows(), dst.ncols());
    let m = MatRef::from_column_major_slice(mbuf, n, n);
    matmul(
        dst,
        Accum::Replace,
        m.submatrix(i0, i0, n - i0, rows).transpose(),
        m.submatrix(i0, 0, n - i0, i1),
        1.0,
        Par::Seq,
    );
    settle();
}

/// The lower triangle of Mᵀ M [N, N] by columns in a pooled buffer (above
/// the diagonal unspecified), for M from [`lower_inverse`].
///
/// Rows i0..i1 of Mᵀ M, columns 0..i1 (the lower triangle and the upper
/// part of the diagonal block): rows k < i0 of M are 0 in columns
/// i0..i1, so the block is M[i0.., i0..i1]ᵀ M[i0.., 0..i1], one
/// rectangular product (faer's triangular product over the same entries
/// ran at two thirds of the speed). Every entry read is written by
/// [`lower_inverse`]: rows ≥ i0 of a column j < i1 lie at or below the
/// top of j's block of the solve, as INVERSE_ROWS divides INVERSE_BLOCK.
fn inverse_from(mbuf: &[f64], n: usize) -> Vec<f64> {
    let mut out = pool::take(n * n);
    let product = |(i0, block): (usize, MatMut<'_, f64>)| {
        let i1 = i0 + block.nrows();
        inverse_rows(mbuf, n, i0, block.subcols_mut(0, i1));
    };
    let blocks = split_rows_at(
        MatMut::from_column_major_slice_mut(&mut out, n, n),
        INVERSE_ROWS,
    );
    if n < PAR_INVERSE_MIN {
        blocks.into_iter().for_each(product);
    } else {
        blocks.into_par_iter().for_each(product);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::cholesky_jitter;

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

    /// The blocks of columns the kernel's reverse pass reads are W's
    /// entries, bit for bit, and so is the diagonal, for a size above and
    /// below the parallel threshold; the pool's scratch is poisoned.
    #[test]
    fn the_swept_columns_are_the_full_weights_entries() {
        for n in [37, PAR_INVERSE_MIN + 77] {
            let a = DMatrix::from_fn(n, n, |i, j| {
                let d = (i as f64 - j as f64) / 9.0;
                (-0.5 * d * d).exp() + if i == j { 0.1 } else { 0.0 }
            });
            let alpha = DVector::from_fn(n, |i, _| (i as f64 * 0.37).sin());
            let c = cholesky_jitter(&a, 0.0, 1e-2, "A").unwrap();
            for _ in 0..2 {
                pool::give(vec![f64::NAN; n * n]);
            }
            let w = LmlWeight::new(&c, &alpha);
            let full = w.full().clone();
            for i0 in (0..n).step_by(SWEEP_COLUMNS) {
                w.with_columns(i0, |cols| {
                    for i in i0..(i0 + SWEEP_COLUMNS).min(n) {
                        for j in 0..=i {
                            let v = cols.data[(i - i0) * cols.col + j * cols.row];
                            assert_eq!(v.to_bits(), full[(j, i)].to_bits(), "({j}, {i}) of {n}");
                        }
                    }
                });
            }
            for i in 0..n {
                let d = w.diag(i);
                assert!((d - full[(i, i)]).abs() <= 1e-12 * full[(i, i)].abs().max(1.0));
            }
        }
    }
}
