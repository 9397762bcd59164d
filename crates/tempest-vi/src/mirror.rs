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
//!
//! With `backtrack = true` (the default) a step whose ELBO would fall is
//! retried with ρ halved, and ρ grows back towards its setting afterwards:
//! log-concave likelihoods at ρ ≤ 1 never need it for one latent value per
//! point, but for the C-class softmax the per-class (diagonal) curvature
//! underestimates the coupled one, and ρ = 1 would otherwise cycle.

use super::core::{Core, elbo_progress, stop_status};
use super::expect::Expectations;
use super::fit::VariationalFit;
use super::model::ViModel;
use super::posterior::Whitened;
use super::settings::{ViSettings, ViStep};
use crate::error::{Error, ErrorKind};
use nalgebra::DMatrix;
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;

/// The mirror-descent engine's state.
pub struct MirrorDescent {
    core: Core,
    lambda1: DMatrix<f64>,
    lambda2: DMatrix<f64>,
    qs: Vec<Whitened>,
    exps: Expectations,
    trace: Vec<f64>,
    rho: f64,
    rho_now: f64,
    rho_trace: Vec<f64>,
    backtrack: bool,
    steps: usize,
    tol: f64,
    step: usize,
}

impl MirrorDescent {
    /// Keep the run's estimated cost for its report.
    pub fn with_cost(mut self, cost: super::cost::Cost) -> Self {
        self.core.cost = Some(cost);
        self
    }

    /// Start at q = prior (θ̃ = 0).
    pub fn new(model: ViModel, s: &ViSettings) -> Result<MirrorDescent, Error> {
        let ViStep::Mirror { rho, backtrack } = s.step else {
            return Err(Error::internal("mirror descent with gradient steps"));
        };
        let core = Core::new(model, s)?;
        let (n, c) = (core.prior.len(), core.model.latents);
        let qs = vec![Whitened::prior(n); c];
        let (exps, elbo) = core.evaluate(&qs)?;
        Ok(MirrorDescent {
            core,
            lambda1: DMatrix::zeros(n, c),
            lambda2: DMatrix::zeros(n, c),
            qs,
            exps,
            trace: vec![elbo],
            rho,
            rho_now: rho,
            rho_trace: Vec::new(),
            backtrack,
            steps: s.steps,
            tol: s.tol,
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

/// What a stop during a step interrupts.
const STEPPING: &str = "taking a mirror-descent step";

impl Engine for MirrorDescent {
    fn step(&mut self) -> Result<Status, Error> {
        self.step += 1;
        let (m, _) = self.core.marginals(&self.qs);
        let prev = *self.trace.last().unwrap_or(&f64::NEG_INFINITY);
        let (old1, old2) = (self.lambda1.clone(), self.lambda2.clone());
        let mut rho = self.rho_now;
        let (qs, exps, elbo) = loop {
            let e = &self.exps;
            for j in 0..self.lambda1.len() {
                let target1 = e.gm[j] - 2.0 * e.gv[j] * m[j];
                self.lambda1[j] = (1.0 - rho) * old1[j] + rho * target1;
                self.lambda2[j] = (1.0 - rho) * old2[j] + rho * e.gv[j];
            }
            // Each factorises N × N: the stop flag is read before each.
            let stop = &self.core.model.bound.stop;
            let tried = stop
                .check(STEPPING)
                .and_then(|_| self.posteriors())
                .and_then(|qs| {
                    stop.check(STEPPING)?;
                    self.core.evaluate(&qs).map(|(e, l)| (qs, e, l))
                });
            let fell = match &tried {
                Ok((_, _, elbo)) => *elbo < prev,
                // Stopped: the step is not taken.
                Err(e) if e.is_interrupted() => {
                    let e = e.clone();
                    self.lambda1 = old1;
                    self.lambda2 = old2;
                    self.step -= 1;
                    return Err(e);
                }
                Err(_) => true,
            };
            if !self.backtrack || !fell {
                break tried?;
            }
            if rho < 1e-6 {
                // No step size raises the ELBO: keep the current q.
                self.lambda1 = old1;
                self.lambda2 = old2;
                self.trace.push(prev);
                self.rho_trace.push(0.0);
                return Ok(Status::Done(
                    "converged: no step size raises the ELBO".into(),
                ));
            }
            rho *= 0.5;
        };
        let (exps, elbo) = if self.core.hyper_opt.is_some() {
            let (theta, hyper_opt) = (self.core.theta.clone(), self.core.hyper_opt.clone());
            let stepped = self.core.hyper_step(&qs).and_then(|_| {
                let qs = self.posteriors()?;
                let (e, l) = self.core.evaluate(&qs)?;
                Ok((qs, e, l))
            });
            match stepped {
                Ok((qs, e, l)) => {
                    self.qs = qs;
                    (e, l)
                }
                // Stopped: q and the hypers stay as they were.
                Err(e) if e.is_interrupted() => {
                    self.lambda1 = old1;
                    self.lambda2 = old2;
                    self.step -= 1;
                    if self.core.theta != theta {
                        self.core.theta = theta;
                        self.core.refresh()?;
                    }
                    self.core.hyper_opt = hyper_opt;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        } else {
            self.qs = qs;
            (exps, elbo)
        };
        // Grow back towards the requested step after a damped one.
        self.rho_now = (2.0 * rho).min(self.rho);
        self.rho_trace.push(rho);
        self.exps = exps;
        self.trace.push(elbo);
        Ok(stop_status(self.step, self.steps, self.tol, prev, elbo))
    }

    fn progress(&self) -> Progress {
        elbo_progress(self.step, self.steps, &self.trace)
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        let this = *self;
        let mut fit = VariationalFit::new(
            "mirror_descent",
            this.core,
            this.qs,
            this.trace,
            this.step,
            reason,
        )?;
        fit.rho_trace = this.rho_trace;
        Ok(Box::new(fit))
    }
}
