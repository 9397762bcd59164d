//! Dense linear algebra: Cholesky with jitter escalation in f64 (faer's
//! blocked factorisation, run on one thread so results never depend on the
//! machine: faer's multi-threaded factorisation and inverse give results
//! that differ in the last bits with the number of threads), and a plain
//! generic Cholesky for dual numbers (used to check hand-derived gradients
//! against forward-mode autodiff).

use crate::error::{Error, ErrorKind};
use crate::math::scalar::Real;
use crate::math::simd::settle;
use faer::linalg::solvers::{DenseSolveCore, Llt, Solve};
use faer::{Mat, Par, Side};
use nalgebra::{DMatrix, DVector};

/// A Cholesky factor A + jitter·I = L Lᵀ, with the jitter that was needed.
pub struct JitteredCholesky {
    llt: Llt<f64>,
    /// The jitter added to the diagonal (0 when none was needed).
    pub jitter: f64,
}

/// A view of a (column-major) nalgebra matrix as a faer matrix.
fn view(a: &DMatrix<f64>) -> faer::MatRef<'_, f64> {
    faer::MatRef::from_column_major_slice(a.as_slice(), a.nrows(), a.ncols())
}

fn to_faer(a: &DMatrix<f64>) -> Mat<f64> {
    view(a).to_owned()
}

fn from_faer(a: &Mat<f64>) -> DMatrix<f64> {
    let mut out = DMatrix::zeros(a.nrows(), a.ncols());
    for (j, mut col) in out.column_iter_mut().enumerate() {
        for (o, v) in col.iter_mut().zip(a.col(j).iter()) {
            *o = *v;
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

impl JitteredCholesky {
    /// The lower-triangular factor L, [N, N].
    pub fn l(&self) -> DMatrix<f64> {
        let l = self.llt.L();
        DMatrix::from_fn(l.nrows(), l.ncols(), |i, j| l[(i, j)])
    }
    /// log |A + jitter·I| = 2 Σ log Lᵢᵢ.
    pub fn log_det(&self) -> f64 {
        let l = self.llt.L();
        (0..l.nrows()).map(|i| l[(i, i)].ln()).sum::<f64>() * 2.0
    }
    /// Solve (A + jitter·I) x = b.
    pub fn solve(&self, b: &DVector<f64>) -> DVector<f64> {
        let rhs = Mat::from_fn(b.len(), 1, |i, _| b[i]);
        let x = self.llt.solve(&rhs);
        settle();
        DVector::from_fn(b.len(), |i, _| x[(i, 0)])
    }
    /// L⁻¹ B (forward substitution), shape of B.
    pub fn solve_lower(&self, b: &DMatrix<f64>) -> DMatrix<f64> {
        let mut x = to_faer(b);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.llt.L(),
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
            self.llt.L().transpose(),
            x.as_mut(),
            Par::Seq,
        );
        settle();
        from_faer(&x)
    }
    /// (A + jitter·I)⁻¹.
    pub fn inverse(&self) -> DMatrix<f64> {
        let inv = self.llt.inverse();
        settle();
        from_faer(&inv)
    }
    /// The faer factorisation, for the column-blocked inverse of
    /// [`crate::math::adjoint::lml_weight`].
    pub(crate) fn llt(&self) -> &Llt<f64> {
        &self.llt
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
    if let Some(k) = a.iter().position(|x| !x.is_finite()) {
        return Err(Error::new(
            ErrorKind::Numerical,
            format!(
                "{what} has a non-finite entry {} at ({}, {})",
                a[k],
                k % n.max(1),
                k / n.max(1)
            ),
        )
        .with_note("check the kernel's hyperparameters and the inputs"));
    }
    let mean_diag = if n == 0 {
        1.0
    } else {
        (a.diagonal().sum() / n as f64).abs().max(f64::MIN_POSITIVE)
    };
    let mut tries = vec![initial];
    let mut rel = 1e-10;
    while rel <= max_rel * (1.0 + 1e-12) {
        if rel * mean_diag > initial {
            tries.push(rel * mean_diag);
        }
        rel *= 10.0;
    }
    for jitter in tries {
        let llt = if jitter > 0.0 {
            let mut m = to_faer(a);
            for i in 0..n {
                m[(i, i)] += jitter;
            }
            Llt::new(m.as_ref(), Side::Lower)
        } else {
            Llt::new(view(a), Side::Lower)
        };
        settle();
        if let Ok(llt) = llt {
            return Ok(JitteredCholesky { llt, jitter });
        }
    }
    Err(Error::new(
        ErrorKind::Numerical,
        format!("{what} ({n} × {n}) is not positive definite, even with jitter {:.1e} added to its diagonal", max_rel * mean_diag),
    )
    .with_note("the kernel may be degenerate at these hyperparameters (e.g. a huge lengthscale) or the inputs may repeat; add a `white()` term or noise"))
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

    #[test]
    fn jitter_rescues_a_singular_matrix() {
        let a = DMatrix::from_element(3, 3, 1.0);
        let c = cholesky_jitter(&a, 0.0, 1e-2, "K").unwrap();
        assert!(c.jitter > 0.0 && c.jitter < 1e-6);
        let bad = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        let e = cholesky_jitter(&bad, 0.0, 1e-2, "K").err().unwrap();
        assert_eq!(e.kind, ErrorKind::Numerical);
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
