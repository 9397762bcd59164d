//! Gauss–Hermite quadrature for expectations under a normal distribution:
//!
//!   E[g(f)], f ~ N(m, v)  ≈  Σₖ wₖ g(m + √(2v) xₖ) / √π,
//!
//! with nodes xₖ and weights wₖ of the physicists' Hermite rule, computed by
//! the Golub–Welsch method (eigen-decomposition of the Jacobi matrix). The
//! crates that provide this rule depend on another nalgebra version.

use nalgebra::{DMatrix, SymmetricEigen};

/// A Gauss–Hermite rule for N(0, 1): points zₖ = √2 xₖ and weights wₖ/√π
/// (which sum to 1), so E[g(z)] ≈ Σ weightₖ g(zₖ).
#[derive(Clone, Debug)]
pub struct GaussHermite {
    /// Standard-normal points, ascending.
    pub points: Vec<f64>,
    /// Their weights (sum 1).
    pub weights: Vec<f64>,
}

impl GaussHermite {
    /// The rule with `k` points (k ≥ 1); exact for polynomials of degree < 2k.
    pub fn new(k: usize) -> GaussHermite {
        let k = k.max(1);
        let mut j = DMatrix::zeros(k, k);
        for i in 1..k {
            let b = (i as f64 / 2.0).sqrt();
            j[(i, i - 1)] = b;
            j[(i - 1, i)] = b;
        }
        let eig = SymmetricEigen::new(j);
        let mut pairs: Vec<(f64, f64)> = (0..k)
            .map(|i| {
                let v0 = eig.eigenvectors[(0, i)];
                (eig.eigenvalues[i] * std::f64::consts::SQRT_2, v0 * v0)
            })
            .collect();
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: f64 = pairs.iter().map(|p| p.1).sum();
        GaussHermite {
            points: pairs.iter().map(|p| p.0).collect(),
            weights: pairs.iter().map(|p| p.1 / total).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_of_the_standard_normal_are_exact() {
        let gh = GaussHermite::new(20);
        let moment = |p: i32| {
            gh.points
                .iter()
                .zip(&gh.weights)
                .map(|(z, w)| w * z.powi(p))
                .sum::<f64>()
        };
        assert!((moment(0) - 1.0).abs() < 1e-14);
        assert!(moment(1).abs() < 1e-13);
        assert!((moment(2) - 1.0).abs() < 1e-12);
        assert!((moment(4) - 3.0).abs() < 1e-11);
        assert!((moment(10) - 945.0).abs() < 1e-7);
        // E[exp(z)] = exp(1/2)
        let e: f64 = gh
            .points
            .iter()
            .zip(&gh.weights)
            .map(|(z, w)| w * z.exp())
            .sum();
        assert!((e - 0.5f64.exp()).abs() < 1e-12);
    }
}
