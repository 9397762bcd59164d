//! The Gaussian as an exponential family: q(f) = h(f) exp(θᵀφ(f) − A(θ)) with
//! sufficient statistics φ(f) = (f, f fᵀ).
//!
//! | quantity | formula |
//! |---|---|
//! | natural parameters | θ₁ = S⁻¹m, Θ₂ = −½ S⁻¹ |
//! | mean parameters | μ₁ = E\[f\] = m, μ₂ = E[f fᵀ] = S + m mᵀ |
//! | log-partition | A(θ) = ½ mᵀS⁻¹m + ½ log\|S\| + (N/2) log 2π |
//! | entropy | ½ log\|2πe S\| |
//! | KL(q ‖ p) | ½ [tr(Sₚ⁻¹S) + (mₚ − m)ᵀSₚ⁻¹(mₚ − m) − N + log\|Sₚ\| − log\|S\|] |
//!
//! ∇A(θ) = μ and the two maps natural ↔ mean are inverse (tested). The
//! variational families of a guide are parameterisations of this family:
//! `sites` (the prior times Gaussian pseudo-observations, whose natural
//! parameters add to the prior's), `full_rank` and `mean_field`; see
//! `infer::vi::posterior` for their efficient forms. Shapes: N latent values.

use nalgebra::{DMatrix, DVector};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use tempest_core::error::{Error, ErrorKind};
use tempest_math::linalg::cholesky_jitter;

const LOG_2PI: f64 = 1.837_877_066_409_345_5;

/// N(mean, cov) over N values.
#[derive(Clone, Debug, PartialEq)]
pub struct Gaussian {
    /// m, \[N\].
    pub mean: DVector<f64>,
    /// S, [N, N], symmetric positive definite.
    pub cov: DMatrix<f64>,
}

fn spd_inverse(a: &DMatrix<f64>, what: &str) -> Result<(DMatrix<f64>, f64), Error> {
    let c = cholesky_jitter(a, 0.0, 0.0, what)?;
    Ok((c.inverse(), c.log_det()))
}

impl Gaussian {
    /// From natural parameters θ₁ \[N\] and Θ₂ [N, N] (Θ₂ negative definite).
    pub fn from_natural(theta1: &DVector<f64>, theta2: &DMatrix<f64>) -> Result<Gaussian, Error> {
        let prec = theta2 * -2.0;
        let (cov, _) = spd_inverse(&prec, "the precision −2Θ₂").map_err(|e| {
            Error::new(
                ErrorKind::Numerical,
                format!("not a Gaussian: {}", e.message),
            )
        })?;
        Ok(Gaussian {
            mean: &cov * theta1,
            cov,
        })
    }
    /// The natural parameters (θ₁, Θ₂).
    pub fn natural(&self) -> Result<(DVector<f64>, DMatrix<f64>), Error> {
        let (prec, _) = spd_inverse(&self.cov, "the covariance")?;
        Ok((&prec * &self.mean, prec * -0.5))
    }
    /// The mean parameters (E\[f\], E[f fᵀ]).
    pub fn mean_params(&self) -> (DVector<f64>, DMatrix<f64>) {
        (
            self.mean.clone(),
            &self.cov + &self.mean * self.mean.transpose(),
        )
    }
    /// From mean parameters (μ₁, μ₂).
    pub fn from_mean_params(mu1: &DVector<f64>, mu2: &DMatrix<f64>) -> Gaussian {
        Gaussian {
            mean: mu1.clone(),
            cov: mu2 - mu1 * mu1.transpose(),
        }
    }
    /// The log-partition A(θ).
    pub fn log_partition(&self) -> Result<f64, Error> {
        let (prec, logdet) = spd_inverse(&self.cov, "the covariance")?;
        let n = self.mean.len() as f64;
        Ok(0.5 * self.mean.dot(&(&prec * &self.mean)) + 0.5 * logdet + 0.5 * n * LOG_2PI)
    }
    /// The entropy −E[log q].
    pub fn entropy(&self) -> Result<f64, Error> {
        let c = cholesky_jitter(&self.cov, 0.0, 0.0, "the covariance")?;
        Ok(0.5 * c.log_det() + 0.5 * self.mean.len() as f64 * (LOG_2PI + 1.0))
    }
    /// KL(self ‖ p).
    pub fn kl_to(&self, p: &Gaussian) -> Result<f64, Error> {
        let cp = cholesky_jitter(&p.cov, 0.0, 0.0, "the prior covariance")?;
        let cq = cholesky_jitter(&self.cov, 0.0, 0.0, "the covariance")?;
        let d = &p.mean - &self.mean;
        let tr = (cp.inverse() * &self.cov).trace();
        Ok(
            0.5 * (tr + d.dot(&cp.solve(&d)) - self.mean.len() as f64 + cp.log_det()
                - cq.log_det()),
        )
    }
    /// log q(f).
    pub fn log_density(&self, f: &DVector<f64>) -> Result<f64, Error> {
        let c = cholesky_jitter(&self.cov, 0.0, 0.0, "the covariance")?;
        let d = f - &self.mean;
        Ok(-0.5 * d.dot(&c.solve(&d)) - 0.5 * c.log_det() - 0.5 * f.len() as f64 * LOG_2PI)
    }
    /// One draw m + L ε.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> Result<DVector<f64>, Error> {
        let c = cholesky_jitter(&self.cov, 0.0, 0.0, "the covariance")?;
        let eps = DVector::from_fn(self.mean.len(), |_, _| rng.sample::<f64, _>(StandardNormal));
        Ok(&self.mean + c.l() * eps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn example() -> Gaussian {
        Gaussian {
            mean: DVector::from_vec(vec![0.3, -1.0, 2.0]),
            cov: DMatrix::from_row_slice(3, 3, &[2.0, 0.3, 0.1, 0.3, 1.0, -0.2, 0.1, -0.2, 0.5]),
        }
    }

    #[test]
    fn natural_and_mean_parameters_round_trip() {
        let q = example();
        let (t1, t2) = q.natural().unwrap();
        let back = Gaussian::from_natural(&t1, &t2).unwrap();
        assert!(
            (back.mean - &q.mean).abs().max() < 1e-12 && (back.cov - &q.cov).abs().max() < 1e-12
        );
        let (m1, m2) = q.mean_params();
        let back = Gaussian::from_mean_params(&m1, &m2);
        assert!((back.cov - &q.cov).abs().max() < 1e-12);
    }

    #[test]
    fn gradient_of_the_log_partition_is_the_mean_parameter() {
        let q = example();
        let (t1, t2) = q.natural().unwrap();
        let a = |t1: &DVector<f64>, t2: &DMatrix<f64>| {
            Gaussian::from_natural(t1, t2)
                .unwrap()
                .log_partition()
                .unwrap()
        };
        let (m1, m2) = q.mean_params();
        let h = 1e-6;
        for i in 0..3 {
            let mut up = t1.clone();
            up[i] += h;
            let mut dn = t1.clone();
            dn[i] -= h;
            assert!(((a(&up, &t2) - a(&dn, &t2)) / (2.0 * h) - m1[i]).abs() < 1e-6);
            let mut up = t2.clone();
            up[(i, i)] += h;
            let mut dn = t2.clone();
            dn[(i, i)] -= h;
            assert!(((a(&t1, &up) - a(&t1, &dn)) / (2.0 * h) - m2[(i, i)]).abs() < 1e-5);
        }
    }

    #[test]
    fn entropy_and_kl_agree_with_monte_carlo() {
        let q = example();
        let p = Gaussian {
            mean: DVector::zeros(3),
            cov: DMatrix::identity(3, 3) * 1.5,
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (mut h, mut kl) = (0.0, 0.0);
        let s = 40_000;
        for _ in 0..s {
            let f = q.sample(&mut rng).unwrap();
            let lq = q.log_density(&f).unwrap();
            h -= lq;
            kl += lq - p.log_density(&f).unwrap();
        }
        assert!((h / s as f64 - q.entropy().unwrap()).abs() < 0.03);
        assert!((kl / s as f64 - q.kl_to(&p).unwrap()).abs() < 0.03);
        assert!(q.kl_to(&q).unwrap().abs() < 1e-12);
    }
}
