//! What the variational engines share: the hypers θ and the prior they
//! define, the ELBO, and its gradient with respect to θ.
//!
//! ELBO(q, θ) = Σₙ E_q\[ℓₙ\] − Σ_c KL(q_c ‖ p). Its gradient with respect to θ
//! is taken at fixed (m, S) of each q_c:
//! ½ tr(W ∂K/∂θ) + (K⁻¹(m − μ₀))ᵀ 1 ∂μ₀/∂θ + ∂ Σₙ E_q\[ℓₙ\]/∂θ, with
//! W = K⁻¹(S + (m − μ₀)(m − μ₀)ᵀ)K⁻¹ − K⁻¹ (see [`super::posterior`]):
//! the kernel's leaf adjoints by the block reverse pass, the likelihood
//! arguments' by [`super::lik_adjoint`], and all of them carried back to θ
//! through the model-file expressions by one reverse sweep
//! ([`crate::math::reverse`]); kernels with interpreted model-file parts take
//! forward-mode chunks of eight directions.

use super::expect::{Expectations, Rule, expectations, expected_total};
use super::lik_adjoint::{LikAdjoints, hyper_sweep};
use super::model::{ViModel, ViPieces};
use super::posterior::{Prior, Whitened};
use super::settings::ViSettings;
use crate::error::Error;
use crate::math::optim::{Ascent, Rule as OptRule};
use crate::math::reverse::Rev;
use crate::math::scalar::{CHUNK, Dual8};
use nalgebra::DMatrix;
use std::sync::Arc;
use tempest_infer::engine::{Progress, Status};
use tempest_infer::gradients::{half_trace_w_dk_via, leaf_adjoints, reverse_sweeps, seed_chunk};
use tempest_infer::hyper_prior::{log_prior, log_prior_value};

/// Hypers, prior and expectation rule of a variational engine.
pub struct Core {
    /// The model.
    pub model: Arc<ViModel>,
    /// How expectations are computed.
    pub rule: Rule,
    /// θ, the learned hypers on the unconstrained scale.
    pub theta: Vec<f64>,
    /// The pieces at θ.
    pub pieces: ViPieces<f64>,
    /// The prior at θ.
    pub prior: Prior,
    /// The optimiser of θ, when hypers are learned.
    pub hyper_opt: Option<Ascent>,
    /// Steps rejected so far because they led to a prior that could not be
    /// factorised or to a non-finite value.
    pub rejected: usize,
    /// Confidence bins of the calibration errors at test data.
    pub bins: usize,
    /// The run's estimated cost, when it was estimated before the start.
    pub cost: Option<super::cost::Cost>,
}

/// The most times one step is halved and tried again after a rejection.
pub const MAX_REJECTED: usize = 30;

impl Core {
    /// Set up at the initial hypers.
    pub fn new(model: ViModel, s: &ViSettings) -> Result<Core, Error> {
        let rule = Rule::for_model(&model, s.quadrature);
        let theta = model.layout.initial(&model.bound)?;
        // A prior on a hyper that is not finite at the start is the
        // model's error, reported where the prior is written.
        log_prior_value(&model.bound, &model.layout, &theta)?;
        let hyper_opt = (model.layout.len > 0)
            .then(|| Ascent::new(OptRule::Adam, s.hyper_lr, model.layout.len));
        let (pieces, prior) = Self::at(&model, &theta)?;
        Ok(Core {
            model: Arc::new(model),
            rule,
            theta,
            pieces,
            prior,
            hyper_opt,
            rejected: 0,
            bins: s.bins,
            cost: None,
        })
    }

    fn at(model: &ViModel, theta: &[f64]) -> Result<(ViPieces<f64>, Prior), Error> {
        let pieces = model.pieces::<f64>(theta, &model.bound)?;
        let mut k = pieces.kernel.gram(&model.inputs)?;
        for i in 0..k.nrows() {
            k[(i, i)] += model.jitter;
        }
        let prior = Prior::new(pieces.mean, &k)?;
        Ok((pieces, prior))
    }

    /// Recompute pieces and prior after θ changed.
    pub fn refresh(&mut self) -> Result<(), Error> {
        let (p, q) = Self::at(&self.model, &self.theta)?;
        self.pieces = p;
        self.prior = q;
        Ok(())
    }

    /// Marginal means and variances [N, C] of the C posteriors.
    pub fn marginals(&self, qs: &[Whitened]) -> (DMatrix<f64>, DMatrix<f64>) {
        let n = self.prior.len();
        let mut m = DMatrix::zeros(n, qs.len());
        let mut v = DMatrix::zeros(n, qs.len());
        for (c, q) in qs.iter().enumerate() {
            let (mc, vc) = q.marginals(&self.prior);
            m.set_column(c, &mc);
            v.set_column(c, &vc);
        }
        (m, v)
    }

    /// Expectations and the ELBO at the posteriors `qs`.
    pub fn evaluate(&self, qs: &[Whitened]) -> Result<(Expectations, f64), Error> {
        let (m, v) = self.marginals(qs);
        let e = expectations(&self.model, &self.pieces.lik, &self.rule, &m, &v)?;
        if let Some(i) = e.value.iter().position(|x| !x.is_finite()) {
            return Err(self.model.non_finite_expectation(i, e.value[i]));
        }
        let elbo = e.total() - qs.iter().map(|q| q.kl()).sum::<f64>();
        Ok((e, elbo))
    }

    /// ∂(ELBO + log p(θ))/∂θ at fixed (m, S) of each posterior; log p(θ)
    /// is the log prior of the learned hypers (MAP-II, zero without priors).
    pub fn hyper_gradient(&self, qs: &[Whitened]) -> Result<Vec<f64>, Error> {
        let p = self.theta.len();
        let mut grad = vec![0.0; p];
        if p == 0 {
            return Ok(grad);
        }
        let (m, v) = self.marginals(qs);
        let mut w = DMatrix::zeros(self.prior.len(), self.prior.len());
        let mut mean_weight = 0.0;
        for q in qs {
            w += q.kernel_weight(&self.prior);
            mean_weight += q.mean_weight(&self.prior).sum();
        }
        let pbar = leaf_adjoints(&self.pieces.kernel, &self.model.inputs, &w)?;
        let reverse = reverse_sweeps();
        let lik_adj = match reverse {
            true => LikAdjoints::new(
                &self.model,
                &self.theta,
                None,
                || Ok::<_, Error>(&self.pieces.lik),
                &self.rule,
                None,
                &m,
                &v,
                None,
            )?,
            false => None,
        };
        // One reverse sweep through the hypers' expressions: the kernel's
        // leaves, the prior mean and the likelihood's arguments.
        let (g, kernel_done) = hyper_sweep(
            &self.theta,
            |t| self.model.pieces::<Rev>(t, &self.model.bound),
            mean_weight,
            pbar.as_deref().filter(|_| reverse),
            lik_adj.as_ref(),
            1.0,
        )?;
        grad.copy_from_slice(&g);
        // Forward-mode chunks for what has no reverse path.
        if !kernel_done || lik_adj.is_none() {
            for start in (0..p).step_by(CHUNK) {
                self.model
                    .bound
                    .stop
                    .check("computing the hypers' gradient")?;
                let td = seed_chunk(&self.theta, start);
                let pd = self.model.pieces::<Dual8>(&td, &self.model.bound)?;
                let mut g = [0.0; CHUNK];
                if !kernel_done {
                    g = half_trace_w_dk_via(
                        &pd.kernel,
                        pbar.as_deref(),
                        &self.model.inputs,
                        || &w,
                    )?;
                }
                if lik_adj.is_none() {
                    let tl = expected_total(&self.model, &pd.lik, &self.rule, &m, &v)?.tangent();
                    (0..CHUNK).for_each(|c| g[c] += tl[c]);
                }
                let k = CHUNK.min(p - start);
                grad[start..start + k]
                    .iter_mut()
                    .zip(&g)
                    .for_each(|(a, b)| *a += b);
            }
        }
        let (_, gp) = log_prior(&self.model.bound, &self.model.layout, &self.theta)?;
        grad.iter_mut().zip(&gp).for_each(|(g, p)| *g += p);
        Ok(grad)
    }

    /// One optimiser step on θ, then the new prior.
    ///
    /// A step to hypers where the prior cannot be factorised (or whose
    /// gradient is not finite) is rejected: θ and the optimiser go back,
    /// the learning rate halves and the step is tried again, at most
    /// [`MAX_REJECTED`] times; then θ stays where it was.
    pub fn hyper_step(&mut self, qs: &[Whitened]) -> Result<(), Error> {
        let g = self.hyper_gradient(qs)?;
        if g.iter().any(|v| !v.is_finite()) {
            self.rejected += 1;
            return Ok(());
        }
        let Some(opt) = self.hyper_opt.clone() else {
            return Ok(());
        };
        let theta = self.theta.clone();
        let mut opt_now = opt;
        for _ in 0..MAX_REJECTED {
            let mut trial = opt_now.clone();
            trial.step(&mut self.theta, &g);
            if self.theta.iter().all(|v| v.is_finite())
                && log_prior_value(&self.model.bound, &self.model.layout, &self.theta).is_ok()
                && self.refresh().is_ok()
            {
                self.hyper_opt = Some(trial);
                return Ok(());
            }
            self.rejected += 1;
            self.theta = theta.clone();
            opt_now.scale_lr(0.5);
        }
        // θ is back where it was, and a failed refresh changes nothing.
        self.hyper_opt = Some(opt_now);
        Ok(())
    }
}

/// Whether a variational engine is done after step `step` of `steps`: when
/// the relative ELBO change is within `tol` (if `tol` > 0) or the steps are
/// used up.
pub fn stop_status(step: usize, steps: usize, tol: f64, prev: f64, elbo: f64) -> Status {
    if tol > 0.0 && (elbo - prev).abs() <= tol * elbo.abs() {
        return Status::Done(format!("relative ELBO change below {tol:.0e}"));
    }
    if step >= steps {
        return Status::Done(format!("reached steps = {steps}"));
    }
    Status::Running
}

/// Progress of a variational engine: the step and the latest ELBO.
pub fn elbo_progress(step: usize, steps: usize, trace: &[f64]) -> Progress {
    Progress {
        step,
        total: Some(steps),
        objective: trace.last().copied(),
        objective_name: "ELBO",
        message: String::new(),
        lanes: vec![],
    }
}
