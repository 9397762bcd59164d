//! The Cholesky factorisation in place, by blocks on the threads of the
//! current rayon pool, with a result that does not depend on their number.
//!
//! Right-looking blocked algorithm on the lower triangle of A [N, N], in
//! panels of [`PANEL`] columns: factor the panel's diagonal block (faer,
//! one thread), solve for the panel below it in blocks of rows, then
//! subtract the panel's outer product from the trailing matrix one block
//! of [`PANEL`] columns at a time. Every block is computed on one thread
//! with the same operations whatever the number of threads (the blocks
//! depend only on N), so the factor is the same bit for bit on one thread
//! or many; faer's own multi-threaded factorisation splits its products by
//! the number of threads and differs in the last bits.
//!
//! Below [`PAR_CHOLESKY_MIN`] rows the whole factorisation is faer's, on
//! one thread.

use crate::simd::settle;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{
    LltRegularization, cholesky_in_place, cholesky_in_place_scratch,
};
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

/// Rows from which [`factor_lower_in_place`] works by panels on several
/// threads.
pub const PAR_CHOLESKY_MIN: usize = 256;

/// Columns per panel (and rows per block of the panel solve).
pub const PANEL: usize = 160;

/// Factor A = L Lᵀ in place: on return the lower triangle of `a` [N, N]
/// holds L; the strict upper triangle is left as it was (unspecified).
/// Only the lower triangle of A is read. `Err(k)` when the pivot of
/// column k is not positive (A is then partly overwritten).
pub fn factor_lower_in_place(mut a: MatMut<'_, f64>) -> Result<(), usize> {
    let n = a.nrows();
    assert_eq!(n, a.ncols(), "a square matrix");
    if n < PAR_CHOLESKY_MIN {
        factor_block(a.as_mut())
    } else {
        factor_panels(a.as_mut())
    }
}

/// faer's factorisation of a (small) block on this thread.
pub(crate) fn factor_block(a: MatMut<'_, f64>) -> Result<(), usize> {
    let n = a.nrows();
    let mut mem = MemBuffer::new(cholesky_in_place_scratch::<f64>(
        n,
        Par::Seq,
        Default::default(),
    ));
    let res = cholesky_in_place(
        a,
        LltRegularization::default(),
        Par::Seq,
        MemStack::new(&mut mem),
        Default::default(),
    );
    settle();
    res.map(|_| ()).map_err(|e| match e {
        faer::linalg::cholesky::llt::factor::LltError::NonPositivePivot { index } => index,
    })
}

/// The blocked factorisation by panels.
fn factor_panels(mut a: MatMut<'_, f64>) -> Result<(), usize> {
    let n = a.nrows();
    for k0 in (0..n).step_by(PANEL) {
        let k1 = (k0 + PANEL).min(n);
        let kb = k1 - k0;
        let (left, right) = a.as_mut().split_at_col_mut(k1);
        // The panel: columns k0..k1 from row k0, its diagonal block on top.
        let (mut diag, below) = left.submatrix_mut(k0, k0, n - k0, kb).split_at_row_mut(kb);
        factor_block(diag.as_mut()).map_err(|i| k0 + i)?;
        if k1 == n {
            break;
        }
        let mut below = below;
        solve_panel(diag.as_ref(), below.as_mut());
        // The trailing matrix, one block of columns j0..j1 at a time:
        // A[j0.., j0..j1] −= P[j0.., :] P[j0..j1, :]ᵀ (its lower part).
        let p = below.as_ref();
        let m = n - k1;
        split_cols(right.submatrix_mut(k1, 0, m, m), PANEL)
            .into_par_iter()
            .for_each(|(j0, block)| {
                let w = block.ncols();
                matmul(
                    block.subrows_mut(j0, m - j0),
                    Accum::Add,
                    p.subrows(j0, m - j0),
                    p.subrows(j0, w).transpose(),
                    -1.0,
                    Par::Seq,
                );
                settle();
            });
    }
    Ok(())
}

/// The panel's rows below its diagonal block: P = B L_kk⁻ᵀ (L_kk Pᵀ =
/// Bᵀ), in place, by blocks of [`PANEL`] rows on the pool's threads.
pub(crate) fn solve_panel(diag: MatRef<'_, f64>, below: MatMut<'_, f64>) {
    split_rows(below, PANEL).into_par_iter().for_each(|b| {
        solve_lower_triangular_in_place(diag, b.transpose_mut(), Par::Seq);
        settle();
    });
}

/// `a` cut into blocks of `size` rows (the last may be shorter).
fn split_rows(a: MatMut<'_, f64>, size: usize) -> Vec<MatMut<'_, f64>> {
    let mut out = Vec::new();
    let mut rest = a;
    while rest.nrows() > size {
        let (top, bottom) = rest.split_at_row_mut(size);
        out.push(top);
        rest = bottom;
    }
    out.push(rest);
    out
}

/// `a` cut into blocks of `size` rows, each with its first row's index.
pub(crate) fn split_rows_at(a: MatMut<'_, f64>, size: usize) -> Vec<(usize, MatMut<'_, f64>)> {
    let mut i0 = 0;
    split_rows(a, size)
        .into_iter()
        .map(|b| {
            let at = i0;
            i0 += b.nrows();
            (at, b)
        })
        .collect()
}

/// `a` cut into blocks of `size` columns, each with its first column's
/// index.
pub(crate) fn split_cols(a: MatMut<'_, f64>, size: usize) -> Vec<(usize, MatMut<'_, f64>)> {
    let mut out = Vec::new();
    let mut rest = a;
    let mut j0 = 0;
    while rest.ncols() > 0 {
        let w = size.min(rest.ncols());
        let (block, others) = rest.split_at_col_mut(w);
        out.push((j0, block));
        rest = others;
        j0 += w;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::Mat;

    fn spd(n: usize) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| {
            let d = (i as f64 - j as f64) / 7.0;
            (-0.5 * d * d).exp()
                + 0.3 * ((i * j) as f64).sin() / n as f64
                + if i == j { 0.2 } else { 0.0 }
        })
    }

    fn factor_with(a: &Mat<f64>, threads: usize) -> Result<Mat<f64>, usize> {
        // Only the lower triangle may be read: poison the upper one.
        let mut l = a.clone();
        for j in 0..l.ncols() {
            for i in 0..j {
                l[(i, j)] = f64::NAN;
            }
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| factor_lower_in_place(l.as_mut()))?;
        Ok(l)
    }

    #[test]
    fn the_factor_reproduces_the_matrix_on_any_thread_count() {
        for n in [
            5,
            PAR_CHOLESKY_MIN - 1,
            PAR_CHOLESKY_MIN,
            2 * PANEL + PAR_CHOLESKY_MIN + 13,
        ] {
            let a0 = spd(n);
            // Symmetrise (the lower triangle is what counts).
            let a = Mat::from_fn(n, n, |i, j| if i >= j { a0[(i, j)] } else { a0[(j, i)] });
            let mut l = factor_with(&a, 1).unwrap();
            // Above the diagonal is unspecified (here still the poison).
            for j in 0..n {
                for i in 0..j {
                    assert!(l[(i, j)].is_nan());
                    l[(i, j)] = 0.0;
                }
            }
            let llt = &l * l.transpose();
            let err = (&llt - &a).norm_max();
            assert!(err < 1e-12, "n = {n}: |LLᵀ − A| = {err}");
            for j in 0..n {
                assert!(l[(j, j)] > 0.0);
                for i in 0..j {
                    assert_eq!(l[(i, j)], 0.0);
                }
            }
            for t in [2, 3, 4] {
                let lt = factor_with(&a, t).unwrap();
                for j in 0..n {
                    for i in j..n {
                        assert_eq!(
                            lt[(i, j)].to_bits(),
                            l[(i, j)].to_bits(),
                            "n = {n}, {t} threads"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_matrix_that_is_not_positive_definite_names_its_pivot() {
        let n = PAR_CHOLESKY_MIN + PANEL + 5;
        let mut a = Mat::<f64>::identity(n, n);
        let k = PANEL + 17;
        a[(k, k)] = -1.0;
        assert_eq!(factor_with(&a, 2), Err(k));
        let mut a = Mat::<f64>::identity(40, 40);
        a[(3, 3)] = 0.0;
        assert_eq!(factor_with(&a, 1), Err(3));
    }
}
