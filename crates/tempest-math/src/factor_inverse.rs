//! The Cholesky factor L of A and M = L⁻¹ in one blocked pass: the rows
//! of M in a panel of L are formed, one block of columns per task, while
//! the factorisation's trailing update runs, on the same threads, so the
//! inverse fills the time the factorisation leaves a thread idle.
//!
//! L is formed with exactly the operations of
//! [`crate::factor::factor_lower_in_place`] (the same bits). Rows
//! P = p0..p1 of M (a panel of [`PANEL`] rows, whose rows of L are final
//! once the panel is factored) follow from L M = I by blocks of
//! [`INVERSE_COLUMNS`] columns J:
//!
//! * left of P, M[P, J] = −L_PP⁻¹ L[P, j0..p0] M[j0..p0, J] (one
//!   product over the rows of M already formed, then a triangular solve);
//! * inside P, M[P, J] = L_PP⁻¹ E[P, J] (a triangular solve on the
//!   identity's columns, zero above the diagonal).
//!
//! Each task owns its block of columns of M, reads only its own rows
//! above P, and is one fixed sequence of operations on one thread, so M
//! is the same bit for bit on any number of threads.

use crate::factor::{PANEL, PAR_CHOLESKY_MIN, factor_block, solve_panel, split_cols};
use crate::simd::settle;
use crate::tasks::run_largest_first;
use faer::linalg::matmul::matmul;
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, MatMut, MatRef, Par};

/// Columns of M per task (a divisor of [`PANEL`], so that a block of
/// columns lies inside one panel).
pub const INVERSE_COLUMNS: usize = 32;
const _: () = assert!(PANEL.is_multiple_of(INVERSE_COLUMNS));

/// One piece of work of a panel step.
enum Task<'a> {
    /// The trailing matrix's columns j0.. (rows k1.. of A) lose the
    /// panel's outer product.
    Update(usize, MatMut<'a, f64>),
    /// Rows P of M in the columns c0.. of this block (each N long).
    Inverse(usize, &'a mut [f64]),
}

/// Factors A = L Lᵀ in place (the lower triangle of `a` [N, N] becomes L,
/// as [`crate::factor::factor_lower_in_place`] leaves it, bit for
/// bit) and writes M = L⁻¹ into `m` [N, N] by columns: rows j.. of column
/// j (zero above the diagonal inside its block of [`INVERSE_COLUMNS`]
/// columns; what lies above that block's first row is unspecified).
/// `Err(k)` when the pivot of column k is not positive.
pub fn factor_and_invert(mut a: MatMut<'_, f64>, m: &mut [f64]) -> Result<(), usize> {
    let n = a.nrows();
    assert_eq!(n, a.ncols(), "a square matrix");
    assert_eq!(m.len(), n * n, "M is N × N");
    let par = n >= PAR_CHOLESKY_MIN;
    // Below the parallel size the factor is faer's whole (one panel).
    let panel = if par { PANEL } else { n.max(1) };
    for k0 in (0..n).step_by(panel) {
        let k1 = (k0 + panel).min(n);
        let kb = k1 - k0;
        let (mut left, mut right) = a.as_mut().split_at_col_mut(k1);
        let (mut diag, mut below) = left
            .as_mut()
            .submatrix_mut(k0, k0, n - k0, kb)
            .split_at_row_mut(kb);
        factor_block(diag.as_mut()).map_err(|i| k0 + i)?;
        if k1 < n {
            solve_panel(diag.as_ref(), below.as_mut());
        }
        let l = left.as_ref();
        let mut tasks = Vec::new();
        if k1 < n {
            let r = n - k1;
            tasks.extend(
                split_cols(right.as_mut().submatrix_mut(k1, 0, r, r), PANEL)
                    .into_iter()
                    .map(|(j0, b)| Task::Update(j0, b)),
            );
        }
        tasks.extend(
            m[..k1 * n]
                .chunks_mut(n * INVERSE_COLUMNS)
                .enumerate()
                .map(|(b, cols)| Task::Inverse(b * INVERSE_COLUMNS, cols)),
        );
        let cost = |t: &Task| match t {
            Task::Update(j0, b) => (n - k1 - j0) * b.ncols() * kb * 2,
            Task::Inverse(c0, cols) => {
                let w = cols.len() / n;
                kb * w * (2 * (k0 + kb / 2).saturating_sub(*c0) + INVERSE_COLUMNS)
            }
        };
        let run = |t: Task| match t {
            Task::Update(j0, block) => {
                let p = l.submatrix(k1, k0, n - k1, kb);
                let (m_rows, w) = (n - k1 - j0, block.ncols());
                matmul(
                    block.subrows_mut(j0, m_rows),
                    Accum::Add,
                    p.subrows(j0, m_rows),
                    p.subrows(j0, w).transpose(),
                    -1.0,
                    Par::Seq,
                );
                settle();
            }
            Task::Inverse(c0, cols) => inverse_rows(l, n, k0, k1, c0, cols),
        };
        if par {
            run_largest_first(tasks, cost, run);
        } else {
            tasks.into_iter().for_each(run);
        }
    }
    Ok(())
}

/// Rows P = k0..k1 of M = L⁻¹ in the columns c0.. of `cols` (each N
/// long), from L's columns 0..k1 (final) and M's rows c0..k0 of the same
/// columns (formed by earlier panels), [`INVERSE_COLUMNS`] rows at a time
/// (each block of rows reads the ones above it: a short triangular solve
/// per block rather than one over the whole panel).
fn inverse_rows(l: MatRef<'_, f64>, n: usize, k0: usize, k1: usize, c0: usize, cols: &mut [f64]) {
    let w = cols.len() / n;
    let mut dst = MatMut::from_column_major_slice_mut(cols, n, w);
    for r0 in (k0..k1).step_by(INVERSE_COLUMNS) {
        let rb = INVERSE_COLUMNS.min(k1 - r0);
        let (top, bottom) = dst.as_mut().split_at_row_mut(r0);
        let mut z = bottom.subrows_mut(0, rb);
        if r0 < c0 {
            // Above the diagonal.
            z.fill(0.0);
            continue;
        }
        if r0 == c0 {
            z.fill(0.0);
            for j in 0..w.min(rb) {
                z[(j, j)] = 1.0;
            }
        } else {
            matmul(
                z.as_mut(),
                Accum::Replace,
                l.submatrix(r0, c0, rb, r0 - c0),
                top.as_ref().subrows(c0, r0 - c0),
                -1.0,
                Par::Seq,
            );
        }
        solve_lower_triangular_in_place(l.submatrix(r0, r0, rb, rb), z, Par::Seq);
    }
    settle();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::factor::factor_lower_in_place;
    use faer::Mat;

    fn spd(n: usize) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| {
            let d = (i as f64 - j as f64) / 7.0;
            (-0.5 * d * d).exp() + if i == j { 0.05 } else { 0.0 }
        })
    }

    fn run(a: &Mat<f64>, threads: usize) -> (Mat<f64>, Vec<f64>) {
        let n = a.nrows();
        let mut l = a.clone();
        // Unread and unwritten places are poisoned.
        for j in 0..n {
            for i in 0..j {
                l[(i, j)] = f64::NAN;
            }
        }
        let mut m = vec![f64::NAN; n * n];
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| factor_and_invert(l.as_mut(), &mut m))
            .unwrap();
        (l, m)
    }

    #[test]
    fn the_factor_is_the_plain_ones_and_m_is_its_inverse_on_any_thread_count() {
        for n in [
            1,
            7,
            PAR_CHOLESKY_MIN - 3,
            PAR_CHOLESKY_MIN + 2 * PANEL + 13,
        ] {
            let a = spd(n);
            let (l, m) = run(&a, 1);
            let mut plain = a.clone();
            factor_lower_in_place(plain.as_mut()).unwrap();
            let mut lt = Mat::<f64>::zeros(n, n);
            let mut mt = Mat::<f64>::zeros(n, n);
            for j in 0..n {
                for i in j..n {
                    assert_eq!(l[(i, j)].to_bits(), plain[(i, j)].to_bits(), "L ({i}, {j})");
                    lt[(i, j)] = l[(i, j)];
                    mt[(i, j)] = m[j * n + i];
                }
                // Zero above the diagonal inside the column's block.
                for i in (j / INVERSE_COLUMNS) * INVERSE_COLUMNS..j {
                    assert_eq!(m[j * n + i], 0.0, "M ({i}, {j})");
                }
            }
            let err = (&lt * &mt - Mat::<f64>::identity(n, n)).norm_max();
            assert!(err < 1e-10, "n = {n}: |LM − I| = {err}");
            for t in [2, 3] {
                let (l2, m2) = run(&a, t);
                for j in 0..n {
                    for i in j..n {
                        assert_eq!(l2[(i, j)].to_bits(), l[(i, j)].to_bits());
                        assert_eq!(
                            m2[j * n + i].to_bits(),
                            m[j * n + i].to_bits(),
                            "{t} threads"
                        );
                    }
                }
            }
        }
    }

    /// A singular matrix (a repeated point) takes the same jitter and
    /// gives the same factor with the inverse as without it, and a pivot
    /// that fails in a later panel is named.
    #[test]
    fn jitter_and_failed_pivots_go_as_without_the_inverse() {
        use crate::linalg::{cholesky_jitter_with, cholesky_jitter_with_inverse};
        let n = PAR_CHOLESKY_MIN + PANEL + 5;
        let a = Mat::from_fn(n, n, |i, j| {
            let (x, y) = ((i.min(n - 2)) as f64, (j.min(n - 2)) as f64);
            (-0.5 * ((x - y) / 9.0).powi(2)).exp()
        });
        let fill = |l: &mut [f64]| {
            for j in 0..n {
                for i in j..n {
                    l[j * n + i] = a[(i, j)];
                }
            }
            Ok(())
        };
        let plain = cholesky_jitter_with(n, fill, 0.0, 1e-2, "A").unwrap();
        let (with, m) = cholesky_jitter_with_inverse(n, fill, 0.0, 1e-2, "A").unwrap();
        assert!(plain.jitter > 0.0);
        assert_eq!(plain.jitter.to_bits(), with.jitter.to_bits());
        assert_eq!(plain.log_det().to_bits(), with.log_det().to_bits());
        let l = with.factor();
        // (L M)ᵢⱼ = Σₖ Lᵢₖ Mₖⱼ over j ≤ k ≤ i (both are lower triangular).
        let mut err = 0.0f64;
        for j in (0..n).step_by(7) {
            for i in j..n {
                let v: f64 = (j..=i).map(|k| l[(i, k)] * m[j * n + k]).sum();
                err = err.max((v - f64::from(u8::from(i == j))).abs());
            }
        }
        assert!(err < 1e-6, "|LM − I| = {err}");
        let mut b = Mat::<f64>::identity(n, n);
        let k = 2 * PANEL + 3;
        b[(k, k)] = 0.0;
        let mut m = vec![0.0; n * n];
        assert_eq!(factor_and_invert(b.as_mut(), &mut m), Err(k));
    }
}
