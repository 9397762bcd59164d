//! Input adjoints of radial kernels by matrix products.
//!
//! A kernel whose entries depend on two distinct points only through
//! ρ = ‖x − z‖² (built-in stationary kernels with one lengthscale on all
//! columns, `white`, `constant`, and their sums, products and scalings) has
//! ∂k/∂x = 2 (dk/dρ) (x − z). With W = K̄ ⊙ (dk/dρ) over the entries of a
//! cross-covariance K(X, Z):
//!
//!   X̄ = 2 (diag(W 1) X − W Z),   Z̄ = 2 (diag(Wᵀ 1) Z − Wᵀ X),
//!
//! two matrix products instead of a D-dimensional reverse pass per entry.
//! Coincident points (ρ = 0) contribute nothing, as in the entry path.
//!
//! The same holds for kernels radial in weighted coordinates, where every
//! stationary part has the same lengthscales ℓ [D] (one per column, ARD):
//! with ρ = Σₖ (xₖ − zₖ)²/ℓₖ², ∂k/∂xₖ = 2 (dk/dρ) (xₖ − zₖ)/ℓₖ², so the
//! products above are taken with W = K̄ ⊙ dk/dρ and column k of X̄ and Z̄
//! is then divided by ℓₖ².

use crate::kernel::{Inputs, KernelKind, KernelValue};
use crate::kernels::stationary;
use nalgebra::DMatrix;
use rayon::prelude::*;
use tempest_math::linalg::matmul;

/// The squared distance a radial kernel is a function of.
#[derive(Clone, Debug, PartialEq)]
enum Metric {
    /// ‖x − z‖² (lengthscales, if any, inside the kernel).
    Plain,
    /// Σₖ wₖ (xₖ − zₖ)² with wₖ = 1/ℓₖ², shared by every stationary part.
    Weighted(Vec<f64>),
}

impl Metric {
    /// ρ between two rows.
    fn rho(&self, x: &[f64], z: &[f64]) -> f64 {
        let d2 = x.iter().zip(z).map(|(a, b)| (a - b) * (a - b));
        match self {
            Metric::Plain => d2.sum(),
            Metric::Weighted(w) => d2.zip(w).map(|(d, w)| d * w).sum(),
        }
    }
}

/// k and dk/dρ of one base kernel at a fixed ρ (`None`: not radial).
type BaseRadial<'a> = dyn Fn(&KernelValue<f64>) -> Option<(f64, f64)> + 'a;

impl KernelValue<f64> {
    /// The metric the kernel is radial in, if it is: [`Metric::Plain`]
    /// when every stationary part has one lengthscale (or there is none),
    /// [`Metric::Weighted`] when every one has the same D lengthscales.
    fn metric(&self) -> Option<Metric> {
        let mut weights: Option<&[f64]> = None;
        let mut plain = false;
        self.stationary_scales(&mut weights, &mut plain)?;
        match (weights, plain) {
            (Some(_), true) => None,
            (Some(ls), false) => Some(Metric::Weighted(ls.iter().map(|l| 1.0 / (l * l)).collect())),
            (None, _) => Some(Metric::Plain),
        }
    }

    /// Walks the kernel for [`KernelValue::metric`]: records the one
    /// vector of lengthscales of ARD parts (`None` if two differ or a part
    /// is not radial) and whether an isotropic stationary part was seen.
    fn stationary_scales<'a>(
        &'a self,
        ard: &mut Option<&'a [f64]>,
        plain: &mut bool,
    ) -> Option<()> {
        match self {
            KernelValue::Base {
                kind,
                args,
                dims: None,
                ..
            } => match kind {
                KernelKind::Rbf
                | KernelKind::Matern12
                | KernelKind::Matern32
                | KernelKind::Matern52 => {
                    let ls = args[0].as_slice();
                    if ls.len() == 1 {
                        *plain = true;
                    } else if ard.is_some_and(|a| a != ls) {
                        return None;
                    } else {
                        *ard = Some(ls);
                    }
                    Some(())
                }
                KernelKind::White | KernelKind::Constant => Some(()),
                _ => None,
            },
            KernelValue::Sum(a, b) | KernelValue::Product(a, b) => {
                a.stationary_scales(ard, plain)?;
                b.stationary_scales(ard, plain)
            }
            KernelValue::Scale(_, k) => k.stationary_scales(ard, plain),
            _ => None,
        }
    }

    /// k and dk/dρ for a kernel radial in weighted coordinates (see
    /// [`Metric::Weighted`]) at the weighted ρ of two distinct points.
    fn weighted_radial(&self, rho: f64) -> Option<(f64, f64)> {
        self.radial_by(&|k: &KernelValue<f64>| match k {
            KernelValue::Base { kind, args, .. } => match kind {
                KernelKind::White => Some((0.0, 0.0)),
                KernelKind::Constant => Some((1.0, 0.0)),
                _ if args[0].as_slice().len() > 1 => Some(stationary::value_and_slope(*kind, rho)),
                _ => None,
            },
            _ => None,
        })
    }

    /// k and dk/dρ at ρ = ‖x − z‖² for two distinct points, when the kernel
    /// is radial in the plain metric (see the module); `None` otherwise.
    pub fn radial(&self, rho: f64) -> Option<(f64, f64)> {
        self.radial_by(&|k: &KernelValue<f64>| match k {
            KernelValue::Base {
                kind,
                args,
                dims: None,
                ..
            } => match kind {
                KernelKind::Rbf
                | KernelKind::Matern12
                | KernelKind::Matern32
                | KernelKind::Matern52 => {
                    let ls = args[0].as_slice();
                    if ls.len() != 1 {
                        return None;
                    }
                    let l2 = ls[0] * ls[0];
                    let (k, slope) = stationary::value_and_slope(*kind, rho / l2);
                    Some((k, slope / l2))
                }
                KernelKind::White => Some((0.0, 0.0)),
                KernelKind::Constant => Some((1.0, 0.0)),
                _ => None,
            },
            _ => None,
        })
    }

    /// k and dk/dρ through sums, products and scales, with `base` giving
    /// them at each base kernel (at the ρ it holds; `None` from any part:
    /// `None`).
    fn radial_by(&self, base: &BaseRadial) -> Option<(f64, f64)> {
        match self {
            KernelValue::Sum(a, b) => {
                let ((ka, da), (kb, db)) = (a.radial_by(base)?, b.radial_by(base)?);
                Some((ka + kb, da + db))
            }
            KernelValue::Product(a, b) => {
                let ((ka, da), (kb, db)) = (a.radial_by(base)?, b.radial_by(base)?);
                Some((ka * kb, da * kb + ka * db))
            }
            KernelValue::Scale(c, k) => {
                let (v, d) = k.radial_by(base)?;
                Some((c * v, c * d))
            }
            other => base(other),
        }
    }
}

/// Inputs as a dense [N, D] matrix.
fn dense(x: &Inputs) -> DMatrix<f64> {
    DMatrix::from_row_slice(x.len(), x.dim(), x.as_flat())
}

/// W = K̄ ⊙ dk/dρ for the entries of K(X, Z) (0 where the points coincide
/// or ρ is not finite), with ρ in the kernel's `metric`.
fn weights(
    kernel: &KernelValue<f64>,
    metric: &Metric,
    x: &Inputs,
    z: &Inputs,
    k_bar: &DMatrix<f64>,
) -> DMatrix<f64> {
    let (n, m) = (x.len(), z.len());
    let slope = |rho: f64| match metric {
        Metric::Plain => kernel.radial(rho),
        Metric::Weighted(_) => kernel.weighted_radial(rho),
    };
    let cols: Vec<Vec<f64>> = (0..m)
        .into_par_iter()
        .with_min_len(8)
        .map(|j| {
            let zj = z.row(j);
            (0..n)
                .map(|i| {
                    let g = k_bar[(i, j)];
                    if g == 0.0 {
                        return 0.0;
                    }
                    let rho = metric.rho(x.row(i), zj);
                    if rho == 0.0 || !rho.is_finite() {
                        return 0.0;
                    }
                    slope(rho).map_or(0.0, |(_, s)| g * s)
                })
                .collect()
        })
        .collect();
    DMatrix::from_fn(n, m, |i, j| cols[j][i])
}

/// X̄ [N, D] and Z̄ [M, D] of K(X, Z) for a radial kernel (see the module),
/// each only when wanted; `None` when the kernel is not radial in either
/// metric.
pub fn cross_inputs(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    z: &Inputs,
    k_bar: &DMatrix<f64>,
    want_x: bool,
    want_z: bool,
) -> Option<(DMatrix<f64>, DMatrix<f64>)> {
    let (n, m, d) = (x.len(), z.len(), x.dim());
    if !want_x && !want_z {
        return Some((DMatrix::zeros(n, d), DMatrix::zeros(m, d)));
    }
    let metric = kernel.metric()?;
    let w = weights(kernel, &metric, x, z, k_bar);
    let (xd, zd) = (dense(x), dense(z));
    // ∂ρ/∂xₖ carries wₖ in the weighted metric.
    let scale = |mut out: DMatrix<f64>| {
        if let Metric::Weighted(wk) = &metric {
            for (k, wk) in wk.iter().enumerate() {
                out.column_mut(k).scale_mut(*wk);
            }
        }
        out
    };
    let side = |w: &DMatrix<f64>, t: bool, own: &DMatrix<f64>, other: &DMatrix<f64>| {
        let sums: Vec<f64> = if t {
            w.column_iter().map(|c| c.sum()).collect()
        } else {
            w.row_iter().map(|r| r.sum()).collect()
        };
        let mut out = matmul(w, t, other, false) * -2.0;
        for (i, s) in sums.iter().enumerate() {
            for k in 0..d {
                out[(i, k)] += 2.0 * s * own[(i, k)];
            }
        }
        out
    };
    let xb = if want_x {
        scale(side(&w, false, &xd, &zd))
    } else {
        DMatrix::zeros(n, d)
    };
    let zb = if want_z {
        scale(side(&w, true, &zd, &xd))
    } else {
        DMatrix::zeros(m, d)
    };
    Some((xb, zb))
}

/// X̄ [N, D] of the Gram matrix K(X, X) for a radial kernel, from its
/// adjoint K̄ (both arguments are X); `None` when the kernel is not radial.
pub fn gram_inputs(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    k_bar: &DMatrix<f64>,
) -> Option<DMatrix<f64>> {
    let (xb, zb) = cross_inputs(kernel, x, x, k_bar, true, true)?;
    Some(xb + zb)
}
