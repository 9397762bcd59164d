//! Stein kernels: from a base kernel k(x, x′) on ℝᵈ and the score
//! u(x) = ∇log π(x) of a target π, the Langevin Stein kernel
//!
//!   k₀(x, x′) = ∇ₓ·∇ₓ′ k + u(x)·∇ₓ′ k + u(x′)·∇ₓ k + k u(x)·u(x′),
//!
//! whose functions x ↦ k₀(x, x′) all have mean zero under π (for π with
//! enough decay and k smooth), so they serve as control variates.

use nalgebra::DMatrix;

/// A base kernel on ℝᵈ (all isotropic in x − x′ except the preconditioned
/// one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BaseKernel {
    /// exp(−‖x − x′‖² / (2ℓ²)).
    Rbf {
        /// Lengthscale ℓ.
        ell: f64,
    },
    /// (1 + ‖x − x′‖²/ℓ²)^β with β < 0 (β = −½ is the usual choice).
    Imq {
        /// Lengthscale ℓ.
        ell: f64,
        /// Exponent β < 0.
        beta: f64,
    },
    /// The preconditioned kernel of Oates et al. (2017):
    /// (1 + α‖x‖²)⁻¹ (1 + α‖x′‖²)⁻¹ exp(−‖x − x′‖² / (2ℓ²)).
    Preconditioned {
        /// Lengthscale ℓ.
        ell: f64,
        /// The weight α > 0 of the polynomial factors.
        alpha: f64,
    },
}

/// k, ∇ₓk, ∇ₓ′k and ∇ₓ·∇ₓ′k of a base kernel at (x, x′).
pub struct KernelDerivs {
    /// k(x, x′).
    pub k: f64,
    /// ∇ₓ k \[d\].
    pub dx: Vec<f64>,
    /// ∇ₓ′ k \[d\].
    pub dy: Vec<f64>,
    /// Σⱼ ∂²k/∂xⱼ∂x′ⱼ.
    pub trace: f64,
}

impl BaseKernel {
    /// The kernel and its derivatives at (x, y).
    pub fn derivs(&self, x: &[f64], y: &[f64]) -> KernelDerivs {
        let d = x.len();
        let r: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
        let r2: f64 = r.iter().map(|v| v * v).sum();
        match *self {
            BaseKernel::Rbf { ell } => {
                let l2 = ell * ell;
                let k = (-0.5 * r2 / l2).exp();
                let dx: Vec<f64> = r.iter().map(|ri| -ri / l2 * k).collect();
                let dy: Vec<f64> = dx.iter().map(|v| -v).collect();
                let trace = (d as f64 / l2 - r2 / (l2 * l2)) * k;
                KernelDerivs { k, dx, dy, trace }
            }
            BaseKernel::Imq { ell, beta } => {
                let l2 = ell * ell;
                let s = 1.0 + r2 / l2;
                let k = s.powf(beta);
                let g = beta * s.powf(beta - 1.0) * 2.0 / l2;
                let dx: Vec<f64> = r.iter().map(|ri| g * ri).collect();
                let dy: Vec<f64> = dx.iter().map(|v| -v).collect();
                let trace = -4.0 * beta * (beta - 1.0) * s.powf(beta - 2.0) * r2 / (l2 * l2)
                    - 2.0 * d as f64 * beta * s.powf(beta - 1.0) / l2;
                KernelDerivs { k, dx, dy, trace }
            }
            BaseKernel::Preconditioned { ell, alpha } => {
                // k = a(x) a(y) e(x, y), a(z) = 1/(1 + α‖z‖²).
                let l2 = ell * ell;
                let nx: f64 = x.iter().map(|v| v * v).sum();
                let ny: f64 = y.iter().map(|v| v * v).sum();
                let ax = 1.0 / (1.0 + alpha * nx);
                let ay = 1.0 / (1.0 + alpha * ny);
                let e = (-0.5 * r2 / l2).exp();
                let k = ax * ay * e;
                // ∇a(z) = −2α z a(z)²; ∇ₓe = −r/ℓ² e; ∇_y e = r/ℓ² e.
                let dx: Vec<f64> = (0..d)
                    .map(|j| ay * (-2.0 * alpha * x[j] * ax * ax * e + ax * (-r[j] / l2) * e))
                    .collect();
                let dy: Vec<f64> = (0..d)
                    .map(|j| ax * (-2.0 * alpha * y[j] * ay * ay * e + ay * (r[j] / l2) * e))
                    .collect();
                // ∂²k/∂xⱼ∂yⱼ = ∂ₓa ∂_y a e + ∂ₓa a(y) ∂_y e + a(x) ∂_y a ∂ₓe
                //              + a(x) a(y) ∂ₓ∂_y e, with ∂ₓ∂_y e = (1/ℓ² − rⱼ²/ℓ⁴) e.
                let mut trace = 0.0;
                for j in 0..d {
                    let dax = -2.0 * alpha * x[j] * ax * ax;
                    let day = -2.0 * alpha * y[j] * ay * ay;
                    let dex = -r[j] / l2 * e;
                    let dey = r[j] / l2 * e;
                    let dexy = (1.0 / l2 - r[j] * r[j] / (l2 * l2)) * e;
                    trace += dax * day * e + dax * ay * dey + ax * day * dex + ax * ay * dexy;
                }
                KernelDerivs { k, dx, dy, trace }
            }
        }
    }

    /// The kernel's lengthscale.
    pub fn ell(&self) -> f64 {
        match *self {
            BaseKernel::Rbf { ell }
            | BaseKernel::Imq { ell, .. }
            | BaseKernel::Preconditioned { ell, .. } => ell,
        }
    }

    /// The same kernel with lengthscale `ell`.
    pub fn with_ell(self, ell: f64) -> BaseKernel {
        match self {
            BaseKernel::Rbf { .. } => BaseKernel::Rbf { ell },
            BaseKernel::Imq { beta, .. } => BaseKernel::Imq { ell, beta },
            BaseKernel::Preconditioned { alpha, .. } => BaseKernel::Preconditioned { ell, alpha },
        }
    }
}

/// The Stein kernel k₀ at (x, y) with scores ux = u(x), uy = u(y).
pub fn stein_kernel(k: &BaseKernel, x: &[f64], y: &[f64], ux: &[f64], uy: &[f64]) -> f64 {
    let kd = k.derivs(x, y);
    let uxuy: f64 = ux.iter().zip(uy).map(|(a, b)| a * b).sum();
    let ux_dy: f64 = ux.iter().zip(&kd.dy).map(|(a, b)| a * b).sum();
    let uy_dx: f64 = uy.iter().zip(&kd.dx).map(|(a, b)| a * b).sum();
    kd.trace + ux_dy + uy_dx + kd.k * uxuy
}

/// The Stein Gram matrix K₀[i, j] = k₀(xᵢ, x′ⱼ) between rows of `x` [n, d]
/// (scores `ux` [n, d]) and rows of `y` [m, d] (scores `uy` [m, d]): [n, m].
pub fn stein_gram(
    k: &BaseKernel,
    x: &DMatrix<f64>,
    ux: &DMatrix<f64>,
    y: &DMatrix<f64>,
    uy: &DMatrix<f64>,
) -> DMatrix<f64> {
    use rayon::prelude::*;
    let rows = |m: &DMatrix<f64>| -> Vec<Vec<f64>> {
        (0..m.nrows())
            .map(|i| m.row(i).iter().copied().collect())
            .collect()
    };
    let (xr, uxr, yr, uyr) = (rows(x), rows(ux), rows(y), rows(uy));
    let cols: Vec<Vec<f64>> = (0..yr.len())
        .into_par_iter()
        .map(|j| {
            (0..xr.len())
                .map(|i| stein_kernel(k, &xr[i], &yr[j], &uxr[i], &uyr[j]))
                .collect()
        })
        .collect();
    DMatrix::from_fn(xr.len(), yr.len(), |i, j| cols[j][i])
}

/// The median heuristic: the median of the pairwise distances between
/// rows of `x` [n, d] (at most 500 rows, evenly spaced, are used); 1 when
/// every distance is 0.
pub fn median_distance(x: &DMatrix<f64>) -> f64 {
    let n = x.nrows();
    let step = n.div_ceil(500).max(1);
    let idx: Vec<usize> = (0..n).step_by(step).collect();
    let mut d = Vec::with_capacity(idx.len() * idx.len() / 2);
    for (a, &i) in idx.iter().enumerate() {
        for &j in &idx[a + 1..] {
            d.push((x.row(i) - x.row(j)).norm());
        }
    }
    if d.is_empty() {
        return 1.0;
    }
    d.sort_by(f64::total_cmp);
    let m = d[d.len() / 2];
    if m > 0.0 { m } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Derivatives of every base kernel against finite differences.
    #[test]
    fn base_kernel_derivatives_match_finite_differences() {
        let x = [0.3, -0.7, 1.1];
        let y = [-0.2, 0.4, 0.9];
        for k in [
            BaseKernel::Rbf { ell: 0.8 },
            BaseKernel::Imq {
                ell: 1.3,
                beta: -0.5,
            },
            BaseKernel::Preconditioned {
                ell: 0.9,
                alpha: 0.3,
            },
        ] {
            let kd = k.derivs(&x, &y);
            let h = 1e-5;
            let f = |a: &[f64], b: &[f64]| k.derivs(a, b).k;
            let mut trace = 0.0;
            for j in 0..3 {
                let mut xp = x;
                xp[j] += h;
                let mut xm = x;
                xm[j] -= h;
                let gx = (f(&xp, &y) - f(&xm, &y)) / (2.0 * h);
                assert!((gx - kd.dx[j]).abs() < 1e-7, "{k:?} dx {j}");
                let mut yp = y;
                yp[j] += h;
                let mut ym = y;
                ym[j] -= h;
                let gy = (f(&x, &yp) - f(&x, &ym)) / (2.0 * h);
                assert!((gy - kd.dy[j]).abs() < 1e-7, "{k:?} dy {j}");
                // ∂²k/∂xⱼ∂yⱼ from differences of ∂k/∂yⱼ in xⱼ.
                let dyp = k.derivs(&xp, &y).dy[j];
                let dym = k.derivs(&xm, &y).dy[j];
                trace += (dyp - dym) / (2.0 * h);
            }
            assert!((trace - kd.trace).abs() < 1e-6, "{k:?} trace");
        }
    }
}
