//! KISS-GP inducing points for one-dimensional kernel inputs (the `grid(m
//! = M)` guide): M points on a regular grid z_i = lo + i·h, and the
//! cross-covariance by local cubic interpolation, K_XZ ≈ W K_ZZ, with W
//! [B, M] holding four weights per row (Keys's cubic convolution, a = −½,
//! exact for cubic polynomials between the nodes).
//!
//! On the grid a stationary kernel's K_ZZ is Toeplitz: its M distinct
//! entries k(0), k(h), …, k((M−1)h) fill it (M kernel evaluations instead of
//! M²). With K_ZZ + jitter·I = L Lᵀ and K_XZ = W (K_ZZ + jitter·I) the
//! whitened projection is A = K_XZ L⁻ᵀ = W L: four rows of L per point,
//! O(B·M) instead of the O(B·M·D) kernel evaluations and O(B·M²)
//! triangular solve of plain inducing points.
//!
//! The grid spans the training inputs' range widened by a tenth on each
//! side (for features that move as a network learns), plus the two nodes
//! each side cubic interpolation needs; it stays fixed (Z is not learned).
//! A point beyond it is interpolated at the grid's end (its weights and
//! their derivative are those of the end point).

use nalgebra::DMatrix;

/// A regular one-dimensional grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// The first node.
    pub lo: f64,
    /// The spacing h.
    pub step: f64,
    /// The number of nodes M.
    pub m: usize,
}

/// The smallest grid: cubic interpolation needs two nodes beyond each end
/// of the interval it covers.
pub const MIN_GRID: usize = 6;

/// Keys's cubic convolution kernel (a = −½) and its derivative at s.
fn keys(s: f64) -> (f64, f64) {
    let a = -0.5;
    let t = s.abs();
    let sign = if s < 0.0 { -1.0 } else { 1.0 };
    if t <= 1.0 {
        (
            (a + 2.0) * t.powi(3) - (a + 3.0) * t * t + 1.0,
            sign * (3.0 * (a + 2.0) * t * t - 2.0 * (a + 3.0) * t),
        )
    } else if t < 2.0 {
        (
            a * t.powi(3) - 5.0 * a * t * t + 8.0 * a * t - 4.0 * a,
            sign * (3.0 * a * t * t - 10.0 * a * t + 8.0 * a),
        )
    } else {
        (0.0, 0.0)
    }
}

/// One point's interpolation: the first of its four nodes, their weights
/// and the weights' derivatives in x.
#[derive(Clone, Copy, Debug)]
pub struct Stencil {
    /// The first node's index.
    pub first: usize,
    /// The four weights.
    pub w: [f64; 4],
    /// Their derivatives with respect to the point.
    pub dw: [f64; 4],
}

impl Grid {
    /// The grid of `m` (≥ [`MIN_GRID`]) nodes over the values `x`.
    pub fn over(x: impl Iterator<Item = f64>, m: usize) -> Grid {
        let (mut a, mut b) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in x.filter(|v| v.is_finite()) {
            a = a.min(v);
            b = b.max(v);
        }
        if !a.is_finite() {
            (a, b) = (-1.0, 1.0);
        }
        let pad = 0.1 * (b - a).max(1e-6);
        let (a, b) = (a - pad, b + pad);
        let step = (b - a) / (m.max(MIN_GRID) - 5) as f64;
        Grid {
            lo: a - 2.0 * step,
            step,
            m: m.max(MIN_GRID),
        }
    }

    /// The nodes \[M\].
    pub fn nodes(&self) -> Vec<f64> {
        (0..self.m)
            .map(|i| self.lo + i as f64 * self.step)
            .collect()
    }

    /// The interpolation stencil at x (clamped to the grid's ends).
    pub fn stencil(&self, x: f64) -> Stencil {
        let u = (x - self.lo) / self.step;
        let top = (self.m - 3) as f64;
        let (u, inside) = if u < 1.0 {
            (1.0, false)
        } else if u > top || !u.is_finite() {
            (top, false)
        } else {
            (u, true)
        };
        let i = (u.floor() as usize).min(self.m - 3);
        let t = u - i as f64;
        let mut s = Stencil {
            first: i - 1,
            w: [0.0; 4],
            dw: [0.0; 4],
        };
        for k in 0..4 {
            let (w, d) = keys(t + 1.0 - k as f64);
            s.w[k] = w;
            s.dw[k] = if inside { d / self.step } else { 0.0 };
        }
        s
    }

    /// K_ZZ [M, M] from the kernel's value at each spacing, `at(τ)` =
    /// k(z_0, z_τ) (Toeplitz).
    pub fn toeplitz(&self, at: impl Fn(usize) -> f64) -> DMatrix<f64> {
        let c: Vec<f64> = (0..self.m).map(at).collect();
        DMatrix::from_fn(self.m, self.m, |i, j| c[i.abs_diff(j)])
    }

    /// W G for a matrix G [M, K] whose rows are interpolated: row b is
    /// Σ_k w_bk G[first_b + k, :].
    pub fn interpolate(stencils: &[Stencil], g: &DMatrix<f64>) -> DMatrix<f64> {
        let mut out = DMatrix::zeros(stencils.len(), g.ncols());
        for (b, s) in stencils.iter().enumerate() {
            for k in 0..4 {
                let w = s.w[k];
                if w != 0.0 {
                    for j in 0..g.ncols() {
                        out[(b, j)] += w * g[(s.first + k, j)];
                    }
                }
            }
        }
        out
    }
}

/// Add Wᵀ K̄ [M, K] to `acc` for K̄ [B, K]: the adjoint of the rows G an
/// interpolated matrix W G is built from.
pub fn add_transposed(stencils: &[Stencil], k_bar: &DMatrix<f64>, acc: &mut DMatrix<f64>) {
    for (b, s) in stencils.iter().enumerate() {
        for k in 0..4 {
            let w = s.w[k];
            if w != 0.0 {
                for j in 0..k_bar.ncols() {
                    acc[(s.first + k, j)] += w * k_bar[(b, j)];
                }
            }
        }
    }
}

/// The points' adjoints x̄_b = Σ_k ∂w_bk/∂x ⟨K̄[b, :], G[first_b + k, :]⟩
/// of W(x) G, for K̄ [B, K] and G [M, K].
pub fn input_adjoints(stencils: &[Stencil], k_bar: &DMatrix<f64>, g: &DMatrix<f64>) -> Vec<f64> {
    stencils
        .iter()
        .enumerate()
        .map(|(b, s)| {
            (0..4)
                .filter(|&k| s.dw[k] != 0.0)
                .map(|k| {
                    let dot: f64 = (0..g.ncols())
                        .map(|j| k_bar[(b, j)] * g[(s.first + k, j)])
                        .sum();
                    s.dw[k] * dot
                })
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cubic convolution reproduces quadratics exactly and smooth functions
    /// to O(h³); the weights sum to one and their derivatives to zero.
    #[test]
    fn interpolation_is_accurate() {
        let g = Grid::over([0.0, 1.0].into_iter(), 60);
        let nodes = g.nodes();
        let f = |x: f64| (3.0 * x).sin();
        let q = |x: f64| 2.0 * x * x - x + 0.5;
        for i in 0..200 {
            let x = i as f64 / 199.0;
            let s = g.stencil(x);
            let (mut fi, mut qi, mut dq) = (0.0, 0.0, 0.0);
            for k in 0..4 {
                let z = nodes[s.first + k];
                fi += s.w[k] * f(z);
                qi += s.w[k] * q(z);
                dq += s.dw[k] * q(z);
            }
            assert!((s.w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(s.dw.iter().sum::<f64>().abs() < 1e-9);
            assert!((qi - q(x)).abs() < 1e-10, "{qi} vs {}", q(x));
            assert!((dq - (4.0 * x - 1.0)).abs() < 1e-8, "{dq}");
            assert!((fi - f(x)).abs() < 1e-4, "{fi} vs {}", f(x));
        }
    }

    /// The derivative of the weights against central differences.
    #[test]
    fn weight_derivatives_match_finite_differences() {
        let g = Grid::over([-2.0, 3.0].into_iter(), 17);
        for i in 0..50 {
            let x = -1.9 + i as f64 * 0.0987;
            let s = g.stencil(x);
            let (p, m) = (g.stencil(x + 1e-6), g.stencil(x - 1e-6));
            if p.first != s.first || m.first != s.first {
                continue;
            }
            for k in 0..4 {
                let want = (p.w[k] - m.w[k]) / 2e-6;
                assert!((s.dw[k] - want).abs() < 1e-6, "{} vs {want}", s.dw[k]);
            }
        }
    }
}
