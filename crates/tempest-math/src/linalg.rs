//! Dense linear algebra: Cholesky with jitter escalation in f64 (the
//! blocked factorisation of [`crate::factor`], whose result does not
//! depend on the number of threads: faer's own multi-threaded
//! factorisation and inverse differ in the last bits with it), and a plain
//! generic Cholesky for dual numbers (used to check hand-derived gradients
//! against forward-mode autodiff).

use crate::factor::factor_lower_in_place;
use crate::scalar::Real;
use crate::simd::settle;
use faer::{Mat, MatRef, Par};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use tempest_core::error::{Error, ErrorKind};

/// A Cholesky factor A + jitter·I = L Lᵀ, with the jitter that was needed.
pub struct JitteredCholesky {
    /// L [N, N] by columns, zero above the diagonal (a pooled buffer).
    l: Vec<f64>,
    n: usize,
    /// The jitter added to the diagonal (0 when none was needed).
    pub jitter: f64,
}

impl Drop for JitteredCholesky {
    fn drop(&mut self) {
        crate::pool::give(std::mem::take(&mut self.l));
    }
}

/// A view of a (column-major) nalgebra matrix as a faer matrix.
fn view(a: &DMatrix<f64>) -> faer::MatRef<'_, f64> {
    faer::MatRef::from_column_major_slice(a.as_slice(), a.nrows(), a.ncols())
}

/// A faer copy of `a`.
fn to_faer(a: &DMatrix<f64>) -> Mat<f64> {
    view(a).to_owned()
}

/// An nalgebra copy of `a` (column by column).
fn from_faer(a: &Mat<f64>) -> DMatrix<f64> {
    let (m, n) = (a.nrows(), a.ncols());
    let mut out = DMatrix::zeros(m, n);
    for j in 0..n {
        let dst = &mut out.as_mut_slice()[j * m..(j + 1) * m];
        match a.col(j).try_as_col_major() {
            // A faer matrix's columns are contiguous: one copy each.
            Some(col) => dst.copy_from_slice(col.as_slice()),
            None => {
                for (o, v) in dst.iter_mut().zip(a.col(j).iter()) {
                    *o = *v;
                }
            }
        }
    }
    out
}

/// The dense product op(A) op(B) with faer's blocked kernels (one thread),
/// where op transposes when the flag is set.
pub fn matmul(a: &DMatrix<f64>, ta: bool, b: &DMatrix<f64>, tb: bool) -> DMatrix<f64> {
    let (fa, fb) = (to_faer(a), to_faer(b));
    let (ra, rb) = (
        if ta { fa.transpose() } else { fa.as_ref() },
        if tb { fb.transpose() } else { fb.as_ref() },
    );
    let mut out = Mat::<f64>::zeros(ra.nrows(), rb.ncols());
    faer::linalg::matmul::matmul(out.as_mut(), faer::Accum::Replace, ra, rb, 1.0, Par::Seq);
    settle();
    from_faer(&out)
}

/// B ← L⁻¹ B, or L⁻ᵀ B when `transposed`, in place, for a lower-triangular
/// L [N, N] (its upper triangle is not read) and B [N, K], with faer's
/// blocked kernels on one thread.
pub fn solve_lower_in_place(l: &DMatrix<f64>, b: &mut DMatrix<f64>, transposed: bool) {
    use faer::linalg::triangular_solve::{
        solve_lower_triangular_in_place, solve_upper_triangular_in_place,
    };
    let (n, k) = b.shape();
    let lf = view(l);
    let bm = faer::MatMut::from_column_major_slice_mut(b.as_mut_slice(), n, k);
    if transposed {
        solve_upper_triangular_in_place(lf.transpose(), bm, Par::Seq);
    } else {
        solve_lower_triangular_in_place(lf, bm, Par::Seq);
    }
    settle();
}

impl JitteredCholesky {
    /// The lower-triangular factor L, [N, N] (zero above the diagonal).
    pub fn l(&self) -> DMatrix<f64> {
        let n = self.n;
        DMatrix::from_fn(n, n, |i, j| if i >= j { self.l[j * n + i] } else { 0.0 })
    }
    /// The number of rows N.
    pub fn dim(&self) -> usize {
        self.n
    }
    /// log |A + jitter·I| = 2 Σ log Lᵢᵢ.
    pub fn log_det(&self) -> f64 {
        let n = self.n;
        (0..n).map(|i| self.l[i * n + i].ln()).sum::<f64>() * 2.0
    }
    /// Solve (A + jitter·I) x = b.
    pub fn solve(&self, b: &DVector<f64>) -> DVector<f64> {
        let mut x = Mat::from_fn(b.len(), 1, |i, _| b[i]);
        let l = self.factor();
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(l, x.as_mut(), Par::Seq);
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            l.transpose(),
            x.as_mut(),
            Par::Seq,
        );
        settle();
        DVector::from_fn(b.len(), |i, _| x[(i, 0)])
    }
    /// L⁻¹ B (forward substitution), shape of B.
    pub fn solve_lower(&self, b: &DMatrix<f64>) -> DMatrix<f64> {
        let mut x = to_faer(b);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.factor(),
            x.as_mut(),
            Par::Seq,
        );
        settle();
        from_faer(&x)
    }
    /// L⁻ᵀ B (back substitution), shape of B.
    pub fn solve_upper_t(&self, b: &DMatrix<f64>) -> DMatrix<f64> {
        let mut x = to_faer(b);
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            self.factor().transpose(),
            x.as_mut(),
            Par::Seq,
        );
        settle();
        from_faer(&x)
    }
    /// (A + jitter·I)⁻¹ [N, N] (by [`crate::adjoint::inverse`]'s
    /// column blocks, the same bits on any number of threads).
    pub fn inverse(&self) -> DMatrix<f64> {
        crate::adjoint::inverse(self)
    }
    /// The factor L as a faer view [N, N]: its lower triangle (diagonal
    /// included); what is above the diagonal is unspecified, so only
    /// routines that read the lower triangle take it (triangular solves
    /// and products as lower triangular).
    pub fn factor(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(&self.l, self.n, self.n)
    }
}

/// Factor a symmetric matrix, adding jitter to the diagonal when it is not
/// numerically positive definite: first `initial` (may be 0), then
/// 1e-10, 1e-9, ... up to `max_rel`, each times the mean diagonal. `what`
/// names the matrix in the error.
pub fn cholesky_jitter(
    a: &DMatrix<f64>,
    initial: f64,
    max_rel: f64,
    what: &str,
) -> Result<JitteredCholesky, Error> {
    let n = a.nrows();
    cholesky_jitter_with(
        n,
        |l: &mut [f64]| {
            for j in 0..n {
                l[j * n + j..(j + 1) * n].copy_from_slice(&a.as_slice()[j * n + j..(j + 1) * n]);
            }
            Ok(())
        },
        initial,
        max_rel,
        what,
    )
}

/// [`cholesky_jitter`] for a symmetric matrix A [N, N] that `build` writes
/// into the lower triangle (diagonal included) of a column-major buffer
/// of N² values, whose other entries it may leave as they are; it is
/// called again before each try with more jitter, so the matrix is never
/// copied. The factor is formed in place.
pub fn cholesky_jitter_with(
    n: usize,
    build: impl FnMut(&mut [f64]) -> Result<(), Error>,
    initial: f64,
    max_rel: f64,
    what: &str,
) -> Result<JitteredCholesky, Error> {
    jittered(n, build, initial, max_rel, what, |l| {
        factor_lower_in_place(faer::MatMut::from_column_major_slice_mut(l, n, n)).is_ok()
    })
}

/// [`cholesky_jitter_with`] that also forms M = L⁻¹ [N, N] (by columns,
/// in a pooled buffer: rows j.. of column j hold it, zero above the
/// diagonal inside its block of
/// [`crate::factor_inverse::INVERSE_COLUMNS`] columns, and what lies
/// above that block's first row is unspecified), in the same pass as the
/// factorisation ([`crate::factor_inverse::factor_and_invert`]);
/// the factor is the same bits as [`cholesky_jitter_with`]'s.
pub fn cholesky_jitter_with_inverse(
    n: usize,
    build: impl FnMut(&mut [f64]) -> Result<(), Error>,
    initial: f64,
    max_rel: f64,
    what: &str,
) -> Result<(JitteredCholesky, Vec<f64>), Error> {
    let mut m = crate::pool::take(square_len(n, what)?);
    let chol = jittered(n, build, initial, max_rel, what, |l| {
        crate::factor_inverse::factor_and_invert(
            faer::MatMut::from_column_major_slice_mut(l, n, n),
            &mut m,
        )
        .is_ok()
    });
    match chol {
        Ok(c) => Ok((c, m)),
        Err(e) => {
            crate::pool::give(m);
            Err(e)
        }
    }
}

/// N², or an error naming the matrix when it overflows (checked before
/// any N × N buffer is taken).
fn square_len(n: usize, what: &str) -> Result<usize, Error> {
    n.checked_mul(n).ok_or_else(|| {
        Error::new(
            ErrorKind::Numerical,
            format!("{what} ({n} × {n}) is too large"),
        )
    })
}

/// The jitter escalation of [`cholesky_jitter_with`], with `factor`
/// factoring the lower triangle in place (false when a pivot is not
/// positive).
fn jittered(
    n: usize,
    mut build: impl FnMut(&mut [f64]) -> Result<(), Error>,
    initial: f64,
    max_rel: f64,
    what: &str,
    mut factor: impl FnMut(&mut [f64]) -> bool,
) -> Result<JitteredCholesky, Error> {
    let len = square_len(n, what)?;
    let mut l = crate::pool::take(len);
    let mut build =
        |l: &mut Vec<f64>| build(l).inspect_err(|_| crate::pool::give(std::mem::take(l)));
    build(&mut l)?;
    let mean_diag = if n == 0 {
        1.0
    } else {
        ((0..n).map(|i| l[i * n + i]).sum::<f64>() / n as f64)
            .abs()
            .max(f64::MIN_POSITIVE)
    };
    let mut tries = vec![initial];
    let mut rel = 1e-10;
    while rel <= max_rel * (1.0 + 1e-12) {
        if rel * mean_diag > initial {
            tries.push(rel * mean_diag);
        }
        rel *= 10.0;
    }
    // A factorisation that succeeds with a finite diagonal had only
    // finite entries to factor (a non-finite entry of the lower triangle
    // makes a later pivot NaN or −∞, or a diagonal entry of L infinite),
    // so the matrix is scanned only after the first failure.
    let mut scanned = false;
    for (t, jitter) in tries.into_iter().enumerate() {
        if t > 0 {
            build(&mut l)?;
        }
        if t > 0 && !scanned {
            scanned = true;
            if let Err(e) = non_finite_entry(&l, n, what) {
                crate::pool::give(l);
                return Err(e);
            }
        }
        for i in 0..n {
            l[i * n + i] += jitter;
        }
        if factor(&mut l) && (0..n).all(|i| l[i * n + i].is_finite()) {
            return Ok(JitteredCholesky { l, n, jitter });
        }
    }
    if !scanned {
        build(&mut l)?;
        if let Err(e) = non_finite_entry(&l, n, what) {
            crate::pool::give(l);
            return Err(e);
        }
    }
    crate::pool::give(l);
    Err(Error::new(
        ErrorKind::Numerical,
        format!("{what} ({n} × {n}) is not positive definite, even with jitter {:.1e} added to its diagonal", max_rel * mean_diag),
    )
    .with_note("the kernel may be degenerate at these hyperparameters (e.g. a huge lengthscale) or the inputs may repeat; add a `white()` term or noise"))
}

/// An error naming the first column (in order) of the lower triangle of
/// A [N, N] (by columns) with a non-finite entry, if there is one;
/// columns are scanned in parallel.
fn non_finite_entry(l: &[f64], n: usize, what: &str) -> Result<(), Error> {
    let bad = (0..n).into_par_iter().with_min_len(32).find_map_first(|j| {
        l[j * n + j..(j + 1) * n]
            .iter()
            .position(|x| !x.is_finite())
            .map(|k| (j, k))
    });
    match bad {
        Some((j, k)) => {
            let v = l[j * n + j + k];
            Err(Error::new(
                ErrorKind::Numerical,
                format!("{what} has a non-finite entry {v} at ({}, {j})", j + k),
            )
            .with_note("check the kernel's hyperparameters and the inputs"))
        }
        None => Ok(()),
    }
}

/// Columns per parallel block of [`symmetric_from_lower`].
const SYM_BLOCK: usize = 64;

/// The symmetric matrix S [N, N] with Sᵢⱼ = Sⱼᵢ = f(i, j, Lᵢⱼ) for i ≥ j,
/// from the lower triangle of L [N, N] by columns; columns in parallel
/// blocks, the part above the diagonal read from L's rows in tiles. S is
/// in a pooled buffer ([`crate::pool::give`] it back when done, or
/// let it go).
pub fn symmetric_from_lower(
    lower: &[f64],
    n: usize,
    f: impl Fn(usize, usize, f64) -> f64 + Sync,
) -> DMatrix<f64> {
    const TILE: usize = 32;
    let col = |j: usize| &lower[j * n..(j + 1) * n];
    let mut data = crate::pool::take(n * n);
    data.par_chunks_mut((n * SYM_BLOCK).max(1))
        .enumerate()
        .for_each(|(b, chunk)| {
            let c0 = b * SYM_BLOCK;
            let w = chunk.len() / n;
            for jj in 0..w {
                let j = c0 + jj;
                let src = &col(j)[j..];
                let col = &mut chunk[jj * n..(jj + 1) * n];
                for (i, (o, v)) in col[j..].iter_mut().zip(src).enumerate() {
                    *o = f(j + i, j, *v);
                }
            }
            // Above the diagonal: Sᵢⱼ = f(j, i, Lⱼᵢ) for i < j, reading
            // column i of L over rows c0..c0 + w.
            for r0 in (0..c0 + w).step_by(TILE) {
                for i in r0..(r0 + TILE).min(c0 + w) {
                    let src = col(i);
                    for jj in 0..w {
                        let j = c0 + jj;
                        if i < j {
                            chunk[jj * n + i] = f(j, i, src[j]);
                        }
                    }
                }
            }
        });
    DMatrix::from_vec(n, n, data)
}

/// Cholesky factor L of a symmetric positive-definite matrix over any
/// [`Real`] scalar, by the plain algorithm; `None` when a pivot is not
/// positive.
pub fn cholesky_generic<T: Real>(a: &DMatrix<T>) -> Option<DMatrix<T>> {
    let n = a.nrows();
    let mut l = DMatrix::from_element(n, n, T::zero());
    for j in 0..n {
        let mut d = a[(j, j)];
        for k in 0..j {
            d -= l[(j, k)] * l[(j, k)];
        }
        if d.to_constant().partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let djj = d.sqrt();
        l[(j, j)] = djj;
        for i in j + 1..n {
            let mut s = a[(i, j)];
            for k in 0..j {
                s -= l[(i, k)] * l[(j, k)];
            }
            l[(i, j)] = s / djj;
        }
    }
    Some(l)
}

/// Solve L x = b for lower-triangular L, over any [`Real`] scalar.
pub fn solve_lower_generic<T: Real>(l: &DMatrix<T>, b: &DVector<T>) -> DVector<T> {
    let n = l.nrows();
    let mut x = b.clone();
    for i in 0..n {
        let mut s = x[i];
        for k in 0..i {
            s -= l[(i, k)] * x[k];
        }
        x[i] = s / l[(i, i)];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side whose square overflows is an error naming the matrix, before
    /// any buffer is taken, with the inverse or without it.
    #[test]
    fn an_overflowing_size_is_an_error_not_a_panic() {
        let n = usize::MAX / 2;
        let fill = |_: &mut [f64]| -> Result<(), Error> { unreachable!("no buffer is filled") };
        let e = cholesky_jitter_with(n, fill, 0.0, 1e-2, "K").err().unwrap();
        assert!(e.to_string().contains("too large"), "{e}");
        let e = cholesky_jitter_with_inverse(n, fill, 0.0, 1e-2, "K")
            .err()
            .unwrap();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    /// A non-finite entry anywhere in the lower triangle is reported with
    /// its place, whether jitter may be tried or not, and a factorisation
    /// never succeeds with one (the scan runs only after a failed try).
    #[test]
    fn a_non_finite_entry_is_named_after_the_failed_try() {
        let n = 300;
        for (i, j, v) in [
            (7, 3, f64::NAN),
            (250, 249, f64::INFINITY),
            (100, 100, f64::INFINITY),
            (299, 299, f64::NAN),
            (5, 0, f64::NEG_INFINITY),
        ] {
            for max_rel in [1e-2, 0.0] {
                let build = |a: &mut [f64]| {
                    for c in 0..n {
                        for r in c..n {
                            let d = (r as f64 - c as f64) / 9.0;
                            a[c * n + r] = (-0.5 * d * d).exp() + if r == c { 0.1 } else { 0.0 };
                        }
                    }
                    a[j * n + i] = v;
                    Ok(())
                };
                let Err(e) = cholesky_jitter_with(n, build, 0.0, max_rel, "K") else {
                    panic!("({i}, {j}) = {v}: factored");
                };
                assert!(
                    e.to_string()
                        .contains(&format!("non-finite entry {v} at ({i}, {j})")),
                    "{e}"
                );
            }
        }
    }

    #[test]
    fn jitter_rescues_a_singular_matrix() {
        let a = DMatrix::from_element(3, 3, 1.0);
        let c = cholesky_jitter(&a, 0.0, 1e-2, "K").unwrap();
        assert!(c.jitter > 0.0 && c.jitter < 1e-6);
        let bad = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        let e = cholesky_jitter(&bad, 0.0, 1e-2, "K").err().unwrap();
        assert_eq!(e.kind, ErrorKind::Numerical);
    }

    /// A large singular matrix (the blocked path) built in place: each try
    /// rebuilds it, the factor is of A + jitter·I, and a reused buffer's
    /// old contents above the diagonal never leak into the result.
    #[test]
    fn jitter_rescues_a_large_singular_matrix_built_in_place() {
        let n = crate::factor::PAR_CHOLESKY_MIN + 40;
        // Rank 2: x xᵀ + y yᵀ.
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.1).sin()).collect();
        let y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.03).cos()).collect();
        let a = DMatrix::from_fn(n, n, |i, j| x[i] * x[j] + y[i] * y[j]);
        // Leave garbage in the pool for the buffer to come from.
        crate::pool::give(vec![f64::NAN; n * n]);
        let mut builds = 0;
        let c = cholesky_jitter_with(
            n,
            |l| {
                builds += 1;
                for j in 0..n {
                    for i in j..n {
                        l[j * n + i] = a[(i, j)];
                    }
                }
                Ok(())
            },
            0.0,
            1e-2,
            "K",
        )
        .unwrap();
        assert!(c.jitter > 0.0, "{}", c.jitter);
        let k = (c.jitter / (1e-10 * a.diagonal().mean())).log10().round() as usize;
        assert_eq!(builds, 2 + k, "one build, then one per try with jitter");
        let l = c.l();
        assert!(l.iter().all(|v| v.is_finite()));
        let mut want = a.clone();
        for i in 0..n {
            want[(i, i)] += c.jitter;
        }
        assert!((&l * l.transpose() - want).amax() < 1e-9);
        assert_eq!(c.inverse().nrows(), n);
    }

    #[test]
    fn generic_cholesky_matches_nalgebra() {
        let a = DMatrix::from_row_slice(3, 3, &[4.0, 1.0, 0.5, 1.0, 3.0, 0.2, 0.5, 0.2, 2.0]);
        let l = cholesky_generic(&a).unwrap();
        let c = cholesky_jitter(&a, 0.0, 1e-2, "A").unwrap();
        assert!((&l - c.l()).abs().max() < 1e-14);
        let b = DVector::from_vec(vec![1.0, 2.0, 3.0]);
        let x = solve_lower_generic(&c.l(), &b);
        assert!((c.l() * x - &b).abs().max() < 1e-14);
        assert!((&a * c.solve(&b) - &b).abs().max() < 1e-13);
        assert!((&a * c.inverse() - DMatrix::identity(3, 3)).abs().max() < 1e-13);
        let y = c.solve_lower(&DMatrix::from_column_slice(3, 1, b.as_slice()));
        assert!(
            (c.l() * y - DMatrix::from_column_slice(3, 1, b.as_slice()))
                .abs()
                .max()
                < 1e-14
        );
        assert!((c.log_det() - a.determinant().ln()).abs() < 1e-13);
    }
}
