//! The adjoint of the Cholesky factorisation A = L Lᵀ.

use nalgebra::DMatrix;

/// Ā = sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹) [N, N]: the adjoint of a symmetric
/// positive-definite A [N, N] given L̄ [N, N], the adjoint of its lower
/// Cholesky factor L [N, N] (A = L Lᵀ).
///
/// From dA = dL Lᵀ + L dLᵀ: L⁻¹ dL is lower triangular, so
/// dL = L Φ(L⁻¹ dA L⁻ᵀ) and ⟨L̄, dL⟩ = ⟨L⁻ᵀ Φ(Lᵀ L̄) L⁻¹, dA⟩ (Murray 2016,
/// "Differentiation of the Cholesky decomposition"; Stan's rule). Only the
/// lower triangle of L̄ matters. The result is symmetrised,
/// sym(P) = ½(P + Pᵀ), the gradient for symmetric dA: ⟨Ā, dA⟩ = ⟨L̄, dL⟩.
/// Two triangular solves with L, O(N³).
pub fn cholesky_vjp(l: &DMatrix<f64>, l_bar: &DMatrix<f64>) -> DMatrix<f64> {
    let mut a = cholesky_vjp_unsymmetric(l, l_bar);
    // ½(P + Pᵀ) in place.
    for j in 0..a.ncols() {
        for i in j + 1..a.nrows() {
            let s = 0.5 * (a[(i, j)] + a[(j, i)]);
            a[(i, j)] = s;
            a[(j, i)] = s;
        }
    }
    a
}

/// P = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹ [N, N] before symmetrising (see [`cholesky_vjp`]):
/// ⟨P, dA⟩ = ⟨L̄, dL⟩ for symmetric dA. L must be zero above its
/// diagonal.
fn cholesky_vjp_unsymmetric(l: &DMatrix<f64>, l_bar: &DMatrix<f64>) -> DMatrix<f64> {
    let n = l.nrows();
    let mut p = DMatrix::zeros(n, n);
    unsymmetric_into(l.as_slice(), l_bar.as_slice(), p.as_mut_slice(), n);
    p
}

/// P of [`cholesky_vjp_unsymmetric`] into `p`, from column-major L and L̄
/// [N, N]: the product and the two triangular solves by faer's blocked
/// kernels on one thread, in place (the same bits on any number of threads
/// and wherever the buffers lie in memory: checked at eight alignments).
fn unsymmetric_into(l: &[f64], l_bar: &[f64], p: &mut [f64], n: usize) {
    use faer::linalg::triangular_solve::solve_upper_triangular_in_place;
    use faer::{Accum, MatMut, MatRef, Par};
    let lf = MatRef::from_column_major_slice(l, n, n);
    let lb = MatRef::from_column_major_slice(l_bar, n, n);
    let mut pm = MatMut::from_column_major_slice_mut(p, n, n);
    faer::linalg::matmul::matmul(
        pm.as_mut(),
        Accum::Replace,
        lf.transpose(),
        lb,
        1.0,
        Par::Seq,
    );
    // Φ(M) = P ∘ M with Pᵢⱼ = 1 (i > j), ½ (i = j), 0 (i < j): the lower
    // triangle with its diagonal halved (self-adjoint as a linear map).
    for j in 0..n {
        pm[(j, j)] *= 0.5;
        for i in 0..j {
            pm[(i, j)] = 0.0;
        }
    }
    // L⁻ᵀ Φ, then (L⁻ᵀ (L⁻ᵀ Φ)ᵀ)ᵀ = L⁻ᵀ Φ L⁻¹ by solving on the transpose.
    solve_upper_triangular_in_place(lf.transpose(), pm.as_mut(), Par::Seq);
    solve_upper_triangular_in_place(lf.transpose(), pm.transpose_mut(), Par::Seq);
    crate::simd::settle();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adjoint::testing::*;

    #[test]
    fn the_cholesky_adjoint_matches_finite_differences() {
        let mut r = rng(11);
        for n in [1, 2, 5, 12] {
            let a = spd(&mut r, n);
            let l = chol(&a);
            let l_bar = normal(&mut r, n, n);
            let da = sym_dir(&mut r, n);
            let f = |h: f64| inner(&l_bar, &chol(&(&a + &da * h)));
            let a_bar = cholesky_vjp(&l, &l_bar);
            assert_close(inner(&a_bar, &da), central(f), "Cholesky");
        }
    }

    #[test]
    fn only_the_lower_triangle_of_the_factor_adjoint_counts() {
        let mut r = rng(12);
        let a = spd(&mut r, 6);
        let l = chol(&a);
        let l_bar = normal(&mut r, 6, 6);
        let a1 = cholesky_vjp(&l, &l_bar);
        let a2 = cholesky_vjp(&l, &tril(&l_bar));
        assert!((&a1 - &a2).amax() <= 1e-12 * a1.amax());
    }

    /// The rule's bits do not depend on where its buffers lie (faer's
    /// kernels read them in place): eight offsets, 64 bytes of alignment.
    #[test]
    fn the_cholesky_adjoint_is_the_same_at_any_alignment() {
        let mut r = rng(13);
        for n in [7usize, 50, 133] {
            let l = chol(&spd(&mut r, n));
            let lb = normal(&mut r, n, n);
            let at = |off: usize| {
                let mut lbuf = vec![0.0; n * n + off];
                lbuf[off..].copy_from_slice(l.as_slice());
                let mut bbuf = vec![0.0; n * n + off];
                bbuf[off..].copy_from_slice(lb.as_slice());
                let mut pbuf = vec![0.0; n * n + off];
                unsymmetric_into(&lbuf[off..], &bbuf[off..], &mut pbuf[off..], n);
                pbuf[off..]
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<u64>>()
            };
            let first = at(0);
            for off in 1..8 {
                assert_eq!(at(off), first, "n = {n}, offset {off}");
            }
        }
    }
}
