//! Expectations of the log-likelihood under the marginals q(fₙ) = N(mₙ, vₙ),
//! and their derivatives with respect to mₙ and vₙ:
//!
//!   eₙ = E[ℓₙ(f)],   g_mₙ = E[ℓₙ′(f)],   g_vₙ = ½ E[ℓₙ″(f)] = ½ E[(f − mₙ)/vₙ · ℓₙ′(f)].
//!
//! The last form (Bonnet's and Price's identities) needs only first
//! derivatives, which come from forward-mode autodiff, so built-in,
//! model-file and Rust likelihoods work alike. For one latent value per
//! point the expectations use Gauss–Hermite quadrature; on the same nodes
//! g_m and g_v are the exact derivatives of the quadrature value. For the
//! C-class softmax they use Monte Carlo with fixed antithetic draws (the same
//! at every step, so the objective is deterministic), with ∇ log softmax_y =
//! e_y − p and the same identity for g_v, so that g_m and g_v are the exact
//! derivatives of the Monte Carlo ELBO that is reported.

use super::model::{LikArgs, ViModel};
use crate::error::Error;
use crate::math::quadrature::GaussHermite;
use crate::math::scalar::Dual1;
use crate::model::custom::Scalar;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

/// How expectations are computed.
#[derive(Clone, Debug)]
pub enum Rule {
    /// Gauss–Hermite quadrature (one latent value per point).
    Quadrature(GaussHermite),
    /// Monte Carlo with fixed draws ε [S, C] of N(0, I).
    MonteCarlo(DMatrix<f64>),
}

impl Rule {
    /// The rule for a model: `k` Gauss–Hermite points for scalar latents,
    /// `samples` antithetic Monte Carlo draws (seeded) for C classes.
    pub fn for_model(model: &ViModel, k: usize, samples: usize, seed: u64) -> Rule {
        if !model.categorical() {
            return Rule::Quadrature(GaussHermite::new(k));
        }
        let c = model.classes;
        let half = samples.div_ceil(2).max(1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut eps = DMatrix::zeros(2 * half, c);
        for s in 0..half {
            for j in 0..c {
                let e: f64 = StandardNormal.sample(&mut rng);
                eps[(2 * s, j)] = e;
                eps[(2 * s + 1, j)] = -e;
            }
        }
        Rule::MonteCarlo(eps)
    }
}

/// Per-point expectations; matrices are [N, C] (C = 1 for a scalar latent).
#[derive(Clone, Debug)]
pub struct Expectations {
    /// eₙ = E\[ℓₙ\].
    pub value: Vec<f64>,
    /// ∂eₙ/∂mₙ.
    pub gm: DMatrix<f64>,
    /// ∂eₙ/∂vₙ.
    pub gv: DMatrix<f64>,
}

impl Expectations {
    /// Σₙ eₙ.
    pub fn total(&self) -> f64 {
        self.value.iter().sum()
    }
}

/// Expectations under marginal means m and variances v, both [N, C].
pub fn expectations(
    model: &ViModel,
    lik: &LikArgs<f64>,
    rule: &Rule,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<Expectations, Error> {
    expectations_at(model, lik, rule, None, m, v)
}

/// Expectations at some of the points: row i of m and v (both [B, C])
/// belongs to data point `rows[i]` (all N points in order when `rows` is
/// `None`). The results are [B] and [B, C].
pub fn expectations_at(
    model: &ViModel,
    lik: &LikArgs<f64>,
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<Expectations, Error> {
    let n = m.nrows();
    let c = m.ncols();
    let at = |i: usize| rows.map_or(i, |r| r[i]);
    let mut out = Expectations {
        value: vec![0.0; n],
        gm: DMatrix::zeros(n, c),
        gv: DMatrix::zeros(n, c),
    };
    match rule {
        Rule::Quadrature(gh) => {
            let lik1: LikArgs<Dual1> = lik.lift();
            for i in 0..n {
                let (mi, vi) = (m[(i, 0)], v[(i, 0)].max(0.0));
                let sd = vi.sqrt();
                let (mut e, mut gm, mut gz) = (0.0, 0.0, 0.0);
                let k = at(i);
                for (z, w) in gh.points.iter().zip(&gh.weights) {
                    let f = Dual1::new(mi + sd * z, [1.0]);
                    let l = lik1.log_lik(model, k, model.y[k], &[f])?;
                    let (val, d) = (l.value(), l.tangent()[0]);
                    e += w * val;
                    gm += w * d;
                    gz += w * d * z;
                }
                out.value[i] = e;
                out.gm[(i, 0)] = gm;
                out.gv[(i, 0)] = if sd > 0.0 { 0.5 * gz / sd } else { 0.0 };
            }
        }
        Rule::MonteCarlo(eps) => {
            let s = eps.nrows() as f64;
            let t = lik.t;
            for i in 0..n {
                let yi = model.y[at(i)] as usize;
                let (mut e, mut gm, mut gv) = (0.0, vec![0.0; c], vec![0.0; c]);
                let sd: Vec<f64> = (0..c).map(|j| v[(i, j)].max(0.0).sqrt()).collect();
                for row in eps.row_iter() {
                    let f: Vec<f64> = (0..c).map(|j| m[(i, j)] + sd[j] * row[j]).collect();
                    let mx = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = f.iter().map(|x| (x - mx).exp()).sum();
                    e += f[yi] - mx - z.ln();
                    for j in 0..c {
                        let d = if j == yi { 1.0 } else { 0.0 } - (f[j] - mx).exp() / z;
                        gm[j] += d;
                        gv[j] += d * row[j];
                    }
                }
                out.value[i] = t * e / s;
                for j in 0..c {
                    out.gm[(i, j)] = t * gm[j] / s;
                    out.gv[(i, j)] = if sd[j] > 0.0 {
                        0.5 * t * gv[j] / (s * sd[j])
                    } else {
                        0.0
                    };
                }
            }
        }
    }
    Ok(out)
}

/// Σₙ E\[ℓₙ\] with the likelihood's arguments as duals (latent values held
/// fixed): its tangents are the derivatives with respect to the hypers that
/// enter the likelihood (noise scales, offsets, the temperature).
pub fn expected_total<T: Scalar>(
    model: &ViModel,
    lik: &LikArgs<T>,
    rule: &Rule,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<T, Error> {
    expected_total_at(model, lik, rule, None, m, v)
}

/// [`expected_total`] over some of the points, with m and v [B, C] as in
/// [`expectations_at`].
pub fn expected_total_at<T: Scalar>(
    model: &ViModel,
    lik: &LikArgs<T>,
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<T, Error> {
    let mut total = T::zero();
    let at = |i: usize| rows.map_or(i, |r| r[i]);
    match rule {
        Rule::Quadrature(gh) => {
            for i in 0..m.nrows() {
                let sd = v[(i, 0)].max(0.0).sqrt();
                let k = at(i);
                for (z, w) in gh.points.iter().zip(&gh.weights) {
                    let f = T::constant(m[(i, 0)] + sd * z);
                    total += lik.log_lik(model, k, model.y[k], &[f])? * T::constant(*w);
                }
            }
        }
        Rule::MonteCarlo(eps) => {
            let s = eps.nrows() as f64;
            for i in 0..m.nrows() {
                let k = at(i);
                for row in eps.row_iter() {
                    let f: Vec<T> = (0..m.ncols())
                        .map(|j| T::constant(m[(i, j)] + v[(i, j)].max(0.0).sqrt() * row[j]))
                        .collect();
                    total += lik.log_lik(model, k, model.y[k], &f)? * T::constant(1.0 / s);
                }
            }
        }
    }
    Ok(total)
}
