//! Mirror-descent variational inference (conjugate-computation VI).
//!
//! The family is `sites`: q(f) ∝ p(f) Πₙ exp(θ̃ₙᵀφ(fₙ)), φ(f) = (f, f²), so
//! q's natural parameters are the prior's plus θ̃ (θ = θ̃ + η). One step of
//! mirror descent in the mean parameters with the Bregman divergence of the
//! negative entropy is (Theorems 3.1–3.2 and Eq. 4 of the mirror-descent
//! paper):
//!
//!   θ̃ ← (1 − ρ) θ̃ + ρ ∇_μ E_q[log p(y|f)],
//!
//! and, per point (Section 3.3), ∇_{μ₁} = g_m − 2 g_v m and ∇_{μ₂} = g_v with
//! g_m = ∂E/∂m and g_v = ∂E/∂v ([`super::expect`]). With ρ = 1 and a Gaussian
//! likelihood the first step gives the exact posterior. With
//! `learn_hypers = true` every step is followed by one Adam step on the hypers
//! (Algorithm 1 for one task), keeping the sites θ̃.

use super::core::Core;
use super::expect::Expectations;
use super::fit::VariationalFit;
use super::model::ViModel;
use super::posterior::Whitened;
use crate::error::{Error, ErrorKind};
use crate::infer::engine::{Engine, Progress, Status};
use crate::infer::fit::Fit;
use crate::infer::settings::EngineConfig;
use nalgebra::DMatrix;

/// The mirror-descent engine's state.
pub struct MirrorDescent {
    core: Core,
    lambda1: DMatrix<f64>,
    lambda2: DMatrix<f64>,
    qs: Vec<Whitened>,
    exps: Expectations,
    trace: Vec<f64>,
    rho: f64,
    steps: usize,
    tol: f64,
    step: usize,
}

impl MirrorDescent {
    /// Start at q = prior (θ̃ = 0).
    pub fn new(model: ViModel, cfg: &EngineConfig) -> Result<MirrorDescent, Error> {
        let core = Core::new(model, cfg)?;
        let (n, c) = (core.prior.len(), core.model.classes);
        let qs = vec![Whitened::prior(n); c];
        let (exps, elbo) = core.evaluate(&qs)?;
        Ok(MirrorDescent {
            core,
            lambda1: DMatrix::zeros(n, c),
            lambda2: DMatrix::zeros(n, c),
            qs,
            exps,
            trace: vec![elbo],
            rho: cfg.real("rho"),
            steps: cfg.int("steps").max(1) as usize,
            tol: cfg.real("tol"),
            step: 0,
        })
    }

    fn posteriors(&self) -> Result<Vec<Whitened>, Error> {
        (0..self.lambda1.ncols())
            .map(|c| {
                Whitened::from_sites(&self.core.prior, &self.lambda1.column(c).into_owned(), &self.lambda2.column(c).into_owned()).map_err(|e| {
                    Error::new(ErrorKind::Numerical, format!("mirror descent left the family at step {}: {}", self.step, e.message))
                        .with_note("the site precisions became too negative (a likelihood that is not log-concave?); try a smaller `rho`")
                })
            })
            .collect()
    }
}

impl Engine for MirrorDescent {
    fn step(&mut self) -> Result<Status, Error> {
        self.step += 1;
        let (m, _) = self.core.marginals(&self.qs);
        let (rho, e) = (self.rho, &self.exps);
        for j in 0..self.lambda1.len() {
            let target1 = e.gm[j] - 2.0 * e.gv[j] * m[j];
            self.lambda1[j] = (1.0 - rho) * self.lambda1[j] + rho * target1;
            self.lambda2[j] = (1.0 - rho) * self.lambda2[j] + rho * e.gv[j];
        }
        self.qs = self.posteriors()?;
        if self.core.hyper_opt.is_some() {
            self.core.hyper_step(&self.qs)?;
            self.qs = self.posteriors()?;
        }
        let (exps, elbo) = self.core.evaluate(&self.qs)?;
        self.exps = exps;
        let prev = *self.trace.last().unwrap_or(&elbo);
        self.trace.push(elbo);
        if (elbo - prev).abs() <= self.tol * elbo.abs() {
            return Ok(Status::Done(format!(
                "relative ELBO change below {:.0e}",
                self.tol
            )));
        }
        if self.step >= self.steps {
            return Ok(Status::Done(format!("reached steps = {}", self.steps)));
        }
        Ok(Status::Running)
    }

    fn progress(&self) -> Progress {
        Progress {
            step: self.step,
            total: Some(self.steps),
            objective: self.trace.last().copied(),
            objective_name: "ELBO",
            message: String::new(),
        }
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Fit, Error> {
        let this = *self;
        Ok(Fit::Variational(Box::new(VariationalFit::new(
            "mirror_descent",
            this.core,
            this.qs,
            this.trace,
            this.step,
            reason,
        ))))
    }
}
