//! q(f) for one latent GP in whitened form: with the prior N(μ₀, K),
//! K = L Lᵀ, write f = μ₀ + L v and q(v) = N(z, R Rᵀ). Every family of a
//! guide maps to this form:
//!
//! | family | z | R |
//! |---|---|---|
//! | `sites` (natural parameters λ₁, λ₂ per point, Λ = −2λ₂) | A⁻¹ Lᵀ(λ₁ − Λμ₀), A = I + Lᵀ Λ L | L_A⁻ᵀ |
//! | `full_rank` (whitened mean and Cholesky factor) | m_v | L_v |
//! | `mean_field` (f-space mean m and scales s) | L⁻¹(m − μ₀) | L⁻¹ diag(s) |
//!
//! and then, for N points,
//!
//! - marginals: m = μ₀ + L z, vₙ = ‖(L R)ₙ‖²;
//! - KL(q ‖ p) = ½ [‖R‖²_F + ‖z‖² − N − log\|R Rᵀ\|];
//! - at new inputs with u = L⁻¹ K(X, X*): mean* = μ₀ + uᵀz,
//!   var* = k** − ‖u‖² + ‖Rᵀu‖² (Eq. 6 of the mirror-descent paper);
//! - the ELBO's gradient with respect to the kernel at fixed (m, S) is
//!   ½ tr(W ∂K/∂θ) with W = L⁻ᵀ(R Rᵀ + z zᵀ − I)L⁻¹.

use crate::error::Error;
use crate::math::linalg::{JitteredCholesky, cholesky_jitter, matmul};
use nalgebra::{DMatrix, DVector};
use tempest_model::family::Gaussian;

/// The prior at the training inputs: N(μ₀, K + jitter·I) with its factor.
pub struct Prior {
    /// μ₀.
    pub mean: f64,
    /// L, lower-triangular [N, N].
    pub l: DMatrix<f64>,
    /// The factorisation (with any extra jitter it needed).
    pub chol: JitteredCholesky,
}

impl Prior {
    /// Factor K (already with the requested jitter) with jitter escalation.
    pub fn new(mean: f64, k: &DMatrix<f64>) -> Result<Prior, Error> {
        let chol = cholesky_jitter(k, 0.0, 1e-2, "the prior covariance K")?;
        Ok(Prior {
            mean,
            l: chol.l(),
            chol,
        })
    }
    /// The number of points N.
    pub fn len(&self) -> usize {
        self.l.nrows()
    }
    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.l.nrows() == 0
    }
    /// L⁻¹ B.
    pub fn whiten(&self, b: &DMatrix<f64>) -> DMatrix<f64> {
        self.chol.solve_lower(b)
    }
}

/// q(v) = N(z, R Rᵀ) in whitened coordinates, with log|R Rᵀ|.
#[derive(Clone, Debug)]
pub struct Whitened {
    /// z, \[N\].
    pub z: DVector<f64>,
    /// R, [N, N] (triangular).
    pub r: DMatrix<f64>,
    /// log |R Rᵀ|.
    pub log_det: f64,
}

impl Whitened {
    /// q = prior: z = 0, R = I.
    pub fn prior(n: usize) -> Whitened {
        Whitened {
            z: DVector::zeros(n),
            r: DMatrix::identity(n, n),
            log_det: 0.0,
        }
    }

    /// From Gaussian sites: natural parameters λ₁, λ₂ per point (Λ = −2λ₂).
    pub fn from_sites(
        prior: &Prior,
        lambda1: &DVector<f64>,
        lambda2: &DVector<f64>,
    ) -> Result<Whitened, Error> {
        let n = prior.len();
        let l = &prior.l;
        let big_lambda = lambda2 * -2.0;
        // A = I + Lᵀ Λ L
        let mut ll = l.clone();
        for (i, mut row) in ll.row_iter_mut().enumerate() {
            row *= big_lambda[i];
        }
        let mut a = matmul(l, true, &ll, false);
        for i in 0..n {
            a[(i, i)] += 1.0;
        }
        let ca = cholesky_jitter(&a, 0.0, 0.0, "the site-updated precision I + LᵀΛL")?;
        let shifted = lambda1 - &big_lambda * prior.mean;
        let z = ca.solve(&l.tr_mul(&shifted));
        // R = L_A⁻ᵀ: R Rᵀ = A⁻¹.
        let la_inv = ca.solve_lower(&DMatrix::identity(n, n));
        Ok(Whitened {
            z,
            r: la_inv.transpose(),
            log_det: -ca.log_det(),
        })
    }

    /// From a whitened mean and a lower-triangular factor.
    pub fn from_factor(z: DVector<f64>, r: DMatrix<f64>) -> Whitened {
        let log_det = (0..r.nrows()).map(|i| r[(i, i)].abs().ln()).sum::<f64>() * 2.0;
        Whitened { z, r, log_det }
    }

    /// From an f-space mean m and standard deviations s (mean field).
    pub fn from_mean_field(prior: &Prior, m: &DVector<f64>, s: &DVector<f64>) -> Whitened {
        let n = prior.len();
        let d = m.add_scalar(-prior.mean);
        let z = prior
            .whiten(&DMatrix::from_column_slice(n, 1, d.as_slice()))
            .column(0)
            .into_owned();
        let r = prior.whiten(&DMatrix::from_diagonal(s));
        let log_det = s.iter().map(|x| (x * x).ln()).sum::<f64>() - prior.chol.log_det();
        Whitened { z, r, log_det }
    }

    /// Marginal means and variances of f, \[N\] each.
    pub fn marginals(&self, prior: &Prior) -> (DVector<f64>, DVector<f64>) {
        let m = (&prior.l * &self.z).add_scalar(prior.mean);
        let lr = matmul(&prior.l, false, &self.r, false);
        let v = DVector::from_fn(lr.nrows(), |i, _| lr.row(i).norm_squared());
        (m, v)
    }

    /// KL(q ‖ p).
    pub fn kl(&self) -> f64 {
        let n = self.z.len() as f64;
        0.5 * (self.r.norm_squared() + self.z.norm_squared() - n - self.log_det)
    }

    /// The weight matrix W = L⁻ᵀ(R Rᵀ + z zᵀ − I)L⁻¹ of the kernel gradient.
    pub fn kernel_weight(&self, prior: &Prior) -> DMatrix<f64> {
        let n = self.z.len();
        let mut p = matmul(&self.r, false, &self.r, true) + &self.z * self.z.transpose();
        for i in 0..n {
            p[(i, i)] -= 1.0;
        }
        // Y = L⁻ᵀP; L⁻ᵀ P L⁻¹ = L⁻ᵀ Yᵀ, P symmetric.
        let y = prior.chol.solve_upper_t(&p);
        prior.chol.solve_upper_t(&y.transpose())
    }

    /// K⁻¹(m − μ₀) = L⁻ᵀ z, the weight of the prior mean's gradient.
    pub fn mean_weight(&self, prior: &Prior) -> DVector<f64> {
        let n = self.z.len();
        prior
            .chol
            .solve_upper_t(&DMatrix::from_column_slice(n, 1, self.z.as_slice()))
            .column(0)
            .into_owned()
    }

    /// Predictive mean and latent variance at new inputs, given
    /// u = L⁻¹ K(X, X*) [N, M] and k** \[M\].
    pub fn predict(
        &self,
        prior: &Prior,
        u: &DMatrix<f64>,
        kss: &DVector<f64>,
    ) -> (DVector<f64>, DVector<f64>) {
        let mean = u.tr_mul(&self.z).add_scalar(prior.mean);
        let rt_u = matmul(&self.r, true, u, false);
        let var = DVector::from_fn(u.ncols(), |j, _| {
            (kss[j] - u.column(j).norm_squared() + rt_u.column(j).norm_squared()).max(0.0)
        });
        (mean, var)
    }

    /// The same q as a dense Gaussian over f.
    pub fn to_gaussian(&self, prior: &Prior) -> Gaussian {
        let lr = &prior.l * &self.r;
        Gaussian {
            mean: (&prior.l * &self.z).add_scalar(prior.mean),
            cov: &lr * lr.transpose(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prior() -> Prior {
        let x: [f64; 4] = [0.0, 0.4, 1.1, 2.0];
        let k = DMatrix::from_fn(4, 4, |i, j| {
            (-0.5 * (x[i] - x[j]) * (x[i] - x[j])).exp() + if i == j { 1e-6 } else { 0.0 }
        });
        Prior::new(0.3, &k).unwrap()
    }

    #[test]
    fn sites_give_the_conjugate_posterior() {
        // Gaussian observations y with noise σ²: sites λ₁ = y/σ², λ₂ = −1/(2σ²).
        let p = prior();
        let y = DVector::from_vec(vec![0.5, -0.2, 1.0, 0.1]);
        let s2 = 0.2;
        let q = Whitened::from_sites(&p, &(&y / s2), &DVector::from_element(4, -0.5 / s2)).unwrap();
        let k = &p.l * p.l.transpose();
        let a = &k + DMatrix::identity(4, 4) * s2;
        let ai = a.clone().try_inverse().unwrap();
        let mean = &k * &ai * (&y - DVector::from_element(4, 0.3)) + DVector::from_element(4, 0.3);
        let cov = &k - &k * &ai * &k;
        let g = q.to_gaussian(&p);
        assert!((g.mean - mean).abs().max() < 1e-10);
        assert!((g.cov - &cov).abs().max() < 1e-10);
        let (m, v) = q.marginals(&p);
        assert!((v - cov.diagonal()).abs().max() < 1e-10 && m.len() == 4);
        let prior_g = Gaussian {
            mean: DVector::from_element(4, 0.3),
            cov: k,
        };
        assert!((q.kl() - q.to_gaussian(&p).kl_to(&prior_g).unwrap()).abs() < 1e-9);
    }

    #[test]
    fn kl_of_every_form_matches_the_dense_formula() {
        let p = prior();
        let k = &p.l * p.l.transpose();
        let prior_g = Gaussian {
            mean: DVector::from_element(4, 0.3),
            cov: k,
        };
        let r = DMatrix::from_row_slice(
            4,
            4,
            &[
                0.9, 0.0, 0.0, 0.0, 0.1, 0.7, 0.0, 0.0, -0.2, 0.3, 0.5, 0.0, 0.0, 0.1, 0.2, 0.4,
            ],
        );
        let q = Whitened::from_factor(DVector::from_vec(vec![0.1, -0.3, 0.2, 0.5]), r);
        assert!((q.kl() - q.to_gaussian(&p).kl_to(&prior_g).unwrap()).abs() < 1e-9);
        let mf = Whitened::from_mean_field(
            &p,
            &DVector::from_vec(vec![0.0, 0.2, 0.4, 0.1]),
            &DVector::from_vec(vec![0.3, 0.2, 0.25, 0.5]),
        );
        let g = mf.to_gaussian(&p);
        assert!(
            (g.cov.clone()
                - DMatrix::from_diagonal(&DVector::from_vec(vec![0.09, 0.04, 0.0625, 0.25])))
            .abs()
            .max()
                < 1e-9
        );
        assert!((mf.kl() - g.kl_to(&prior_g).unwrap()).abs() < 1e-8);
    }
}
