//! Adjoints of matrix products. Each operand's adjoint has its own
//! function, so a caller computes only the sides that vary.

use nalgebra::{DMatrix, DVector};

/// Ā = C̄ Bᵀ [N, K] for C = A B, with A [N, K], B [K, M], given C̄ [N, M].
pub fn matmul_vjp_a(c_bar: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
    c_bar * b.transpose()
}

/// B̄ = Aᵀ C̄ [K, M] for C = A B, with A [N, K], B [K, M], given C̄ [N, M].
pub fn matmul_vjp_b(a: &DMatrix<f64>, c_bar: &DMatrix<f64>) -> DMatrix<f64> {
    a.tr_mul(c_bar)
}

/// Ā = ȳ vᵀ [N, K] for y = A v, with A [N, K], v \[K\], given ȳ \[N\].
pub fn matvec_vjp_a(y_bar: &DVector<f64>, v: &DVector<f64>) -> DMatrix<f64> {
    y_bar * v.transpose()
}

/// v̄ = Aᵀ ȳ \[K\] for y = A v, with A [N, K], v \[K\], given ȳ \[N\].
pub fn matvec_vjp_v(a: &DMatrix<f64>, y_bar: &DVector<f64>) -> DVector<f64> {
    a.tr_mul(y_bar)
}

/// L̄ += tril(ȳ vᵀ) for y = L v with L lower triangular [N, N], v \[N\],
/// given ȳ \[N\]: the matrix side of [`matvec_vjp_a`] restricted to the
/// entries of L that can vary. The sizes are those of `l_bar`; extra
/// entries of `y_bar` or `v` are ignored.
pub fn lower_matvec_vjp_l_add(l_bar: &mut DMatrix<f64>, y_bar: &[f64], v: &[f64]) {
    let n = l_bar.nrows().min(y_bar.len());
    for j in 0..l_bar.ncols().min(v.len()) {
        for i in j..n {
            l_bar[(i, j)] += y_bar[i] * v[j];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adjoint::testing::*;

    #[test]
    fn product_adjoints_match_finite_differences() {
        let mut r = rng(41);
        let (n, k, m) = (4, 3, 5);
        let (a, b, c_bar) = (
            normal(&mut r, n, k),
            normal(&mut r, k, m),
            normal(&mut r, n, m),
        );
        let (da, db) = (normal(&mut r, n, k), normal(&mut r, k, m));
        let fa = |h: f64| inner(&c_bar, &((&a + &da * h) * &b));
        assert_close(inner(&matmul_vjp_a(&c_bar, &b), &da), central(fa), "AB, A");
        let fb = |h: f64| inner(&c_bar, &(&a * (&b + &db * h)));
        assert_close(inner(&matmul_vjp_b(&a, &c_bar), &db), central(fb), "AB, B");

        let (v, y_bar, dv) = (
            normal_vec(&mut r, k),
            normal_vec(&mut r, n),
            normal_vec(&mut r, k),
        );
        let fa = |h: f64| y_bar.dot(&((&a + &da * h) * &v));
        assert_close(inner(&matvec_vjp_a(&y_bar, &v), &da), central(fa), "Av, A");
        let fv = |h: f64| y_bar.dot(&(&a * (&v + &dv * h)));
        assert_close(matvec_vjp_v(&a, &y_bar).dot(&dv), central(fv), "Av, v");

        let l = lower(&mut r, n);
        let (w, yl, dl) = (
            normal_vec(&mut r, n),
            normal_vec(&mut r, n),
            tril(&normal(&mut r, n, n)),
        );
        let mut l_bar = DMatrix::zeros(n, n);
        lower_matvec_vjp_l_add(&mut l_bar, yl.as_slice(), w.as_slice());
        assert_eq!(l_bar, tril(&l_bar));
        let fl = |h: f64| yl.dot(&((&l + &dl * h) * &w));
        assert_close(inner(&l_bar, &dl), central(fl), "Lv, L");
    }
}
