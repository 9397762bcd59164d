//! The gradient-descent baseline: the same ELBO, maximised by Adam or plain
//! gradient steps in the usual parameterisations of q.
//!
//! - `full_rank` (the default): whitened mean z and lower-triangular factor R
//!   of q(v), f = μ₀ + L v, started at the prior (z = 0, R = I), as GPflow's
//!   VGP. Gradients: ∂/∂z = Lᵀg_m − z; ∂/∂R = tril(Lᵀ · 2 diag(g_v) L R) − R + diag(1/Rᵢᵢ).
//! - `mean_field`: f-space means m and log standard deviations of independent
//!   Gaussians, started at the prior marginals. Gradients:
//!   ∂/∂m = g_m − K⁻¹(m − μ₀); ∂/∂log sᵢ = 2 g_vᵢ sᵢ² − (K⁻¹)ᵢᵢ sᵢ² + 1.
//!
//! With `learn_hypers = true` each step is followed by one Adam step on the
//! hypers at fixed (m, S); a full-rank q is then re-expressed in the new
//! whitened coordinates so that it stays the same distribution.

use super::core::{Core, MAX_REJECTED, elbo_progress, stop_status};
use super::expect::Expectations;
use super::fit::VariationalFit;
use super::model::ViModel;
use super::posterior::Whitened;
use super::settings::{ViSettings, ViStep};
use crate::error::Error;
use crate::math::adjoint;
use crate::math::linalg::{cholesky_jitter, matmul};
use crate::math::optim::Ascent;
use nalgebra::{DMatrix, DVector};
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;

/// Which parameterisation of q.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// Whitened mean and Cholesky factor.
    FullRank,
    /// Independent Gaussians in f.
    MeanField,
}

/// The gradient-descent engine's state.
pub struct GradientDescent {
    core: Core,
    param: Param,
    x: Vec<f64>,
    opt: Ascent,
    qs: Vec<Whitened>,
    exps: Expectations,
    k_inv_diag: DVector<f64>,
    k_inv: DMatrix<f64>,
    trace: Vec<f64>,
    steps: usize,
    tol: f64,
    step: usize,
}

fn tril_len(n: usize) -> usize {
    n * (n + 1) / 2
}

impl GradientDescent {
    /// Keep the run's estimated cost for its report.
    pub fn with_cost(mut self, cost: super::cost::Cost) -> Self {
        self.core.cost = Some(cost);
        self
    }

    /// Start at q = prior.
    pub fn new(model: ViModel, s: &ViSettings, param: Param) -> Result<GradientDescent, Error> {
        let ViStep::Gradient { rule, lr } = s.step else {
            return Err(Error::internal("gradient descent with mirror steps"));
        };
        let core = Core::new(model, s)?;
        let (n, c) = (core.prior.len(), core.model.latents);
        let per = match param {
            Param::FullRank => n + tril_len(n),
            Param::MeanField => 2 * n,
        };
        let mut x = vec![0.0; per * c];
        for cls in 0..c {
            let b = cls * per;
            match param {
                Param::FullRank => {
                    for i in 0..n {
                        x[b + n + i * (i + 1) / 2 + i] = 1.0;
                    }
                }
                Param::MeanField => {
                    for i in 0..n {
                        x[b + i] = core.prior.mean;
                        let kii: f64 = core.prior.l.row(i).norm_squared();
                        x[b + n + i] = 0.5 * kii.ln();
                    }
                }
            }
        }
        let opt = Ascent::new(rule, lr, x.len());
        let k_inv = core.prior.chol.inverse();
        let mut gd = GradientDescent {
            k_inv_diag: k_inv.diagonal(),
            k_inv,
            core,
            param,
            x,
            opt,
            qs: vec![],
            exps: Expectations {
                value: vec![],
                gm: DMatrix::zeros(0, 0),
                gv: DMatrix::zeros(0, 0),
                mixing: None,
            },
            trace: vec![],
            steps: s.steps,
            tol: s.tol,
            step: 0,
        };
        gd.qs = gd.posteriors();
        let (exps, elbo) = gd.core.evaluate(&gd.qs)?;
        gd.exps = exps;
        gd.trace.push(elbo);
        Ok(gd)
    }

    fn per(&self) -> usize {
        let n = self.core.prior.len();
        match self.param {
            Param::FullRank => n + tril_len(n),
            Param::MeanField => 2 * n,
        }
    }

    fn posteriors(&self) -> Vec<Whitened> {
        let n = self.core.prior.len();
        let per = self.per();
        (0..self.core.model.latents)
            .map(|c| {
                let p = &self.x[c * per..(c + 1) * per];
                match self.param {
                    Param::FullRank => {
                        let z = DVector::from_column_slice(&p[..n]);
                        let r = DMatrix::from_fn(n, n, |i, j| {
                            if j <= i {
                                p[n + i * (i + 1) / 2 + j]
                            } else {
                                0.0
                            }
                        });
                        Whitened::from_factor(z, r)
                    }
                    Param::MeanField => {
                        let m = DVector::from_column_slice(&p[..n]);
                        let s = DVector::from_iterator(n, p[n..].iter().map(|l| l.exp()));
                        Whitened::from_mean_field(&self.core.prior, &m, &s)
                    }
                }
            })
            .collect()
    }

    fn gradient(&self) -> Vec<f64> {
        let n = self.core.prior.len();
        let per = self.per();
        let l = &self.core.prior.l;
        let mut g = vec![0.0; self.x.len()];
        for (c, q) in self.qs.iter().enumerate() {
            let gm = self.exps.gm.column(c);
            let gv = self.exps.gv.column(c);
            let p = &self.x[c * per..(c + 1) * per];
            let out = &mut g[c * per..(c + 1) * per];
            match self.param {
                Param::FullRank => {
                    // f = μ + L z: z̄ = Lᵀ ḡ_m, less the KL's z.
                    let gz = adjoint::matvec_vjp_v(l, &gm.into_owned()) - &q.z;
                    out[..n].copy_from_slice(gz.as_slice());
                    let mut lr = matmul(l, false, &q.r, false);
                    for (i, mut row) in lr.row_iter_mut().enumerate() {
                        row *= 2.0 * gv[i];
                    }
                    let gr = matmul(l, true, &lr, false);
                    for i in 0..n {
                        for j in 0..=i {
                            let mut v = gr[(i, j)] - q.r[(i, j)];
                            if i == j {
                                v += 1.0 / q.r[(i, i)];
                            }
                            out[n + i * (i + 1) / 2 + j] = v;
                        }
                    }
                }
                Param::MeanField => {
                    let d = DVector::from_column_slice(&p[..n]).add_scalar(-self.core.prior.mean);
                    let kd = &self.k_inv * d;
                    for i in 0..n {
                        out[i] = gm[i] - kd[i];
                        let s2 = (2.0 * p[n + i]).exp();
                        out[n + i] = 2.0 * gv[i] * s2 - self.k_inv_diag[i] * s2 + 1.0;
                    }
                }
            }
        }
        g
    }

    /// After the prior changed, store the same full-rank q in the new
    /// whitened coordinates.
    fn reexpress(&mut self, old: &[(DVector<f64>, DMatrix<f64>)]) -> Result<(), Error> {
        if self.param != Param::FullRank {
            return Ok(());
        }
        let n = self.core.prior.len();
        let per = self.per();
        for (c, (m, lr)) in old.iter().enumerate() {
            let d = m.add_scalar(-self.core.prior.mean);
            let z = self
                .core
                .prior
                .whiten(&DMatrix::from_column_slice(n, 1, d.as_slice()));
            let b = self.core.prior.whiten(lr);
            let r =
                cholesky_jitter(&(&b * b.transpose()), 0.0, 1e-8, "the whitened covariance")?.l();
            let p = &mut self.x[c * per..(c + 1) * per];
            p[..n].copy_from_slice(z.as_slice());
            for i in 0..n {
                for j in 0..=i {
                    p[n + i * (i + 1) / 2 + j] = r[(i, j)];
                }
            }
        }
        Ok(())
    }
}

impl GradientDescent {
    /// One optimiser step from the current state with gradient `g`: the
    /// new q, the hyper step when hypers are learned, and the ELBO there.
    fn attempt(&mut self, g: &[f64]) -> Result<(Expectations, f64), Error> {
        let stop = self.core.model.bound.stop.clone();
        stop.check("taking a gradient step")?;
        self.opt.step(&mut self.x, g);
        self.qs = self.posteriors();
        if self.core.hyper_opt.is_some() {
            let old: Vec<(DVector<f64>, DMatrix<f64>)> = self
                .qs
                .iter()
                .map(|q| {
                    (
                        (&self.core.prior.l * &q.z).add_scalar(self.core.prior.mean),
                        &self.core.prior.l * &q.r,
                    )
                })
                .collect();
            self.core.hyper_step(&self.qs)?;
            self.reexpress(&old)?;
            self.k_inv = self.core.prior.chol.inverse();
            self.k_inv_diag = self.k_inv.diagonal();
            self.qs = self.posteriors();
        }
        stop.check("taking a gradient step")?;
        self.core.evaluate(&self.qs)
    }
}

impl Engine for GradientDescent {
    /// One step; a step whose ELBO is not finite (or cannot be computed) is
    /// rejected: the state goes back, the learning rate halves and the step
    /// is tried again, at most [`MAX_REJECTED`] times.
    fn step(&mut self) -> Result<Status, Error> {
        self.step += 1;
        let g = self.gradient();
        if g.iter().any(|v| !v.is_finite()) {
            return Ok(Status::Done(format!(
                "stopped at step {}: the gradient of the ELBO is not finite",
                self.step
            )));
        }
        let saved = (
            self.x.clone(),
            self.opt.clone(),
            self.core.theta.clone(),
            self.core.hyper_opt.clone(),
            self.k_inv.clone(),
            self.k_inv_diag.clone(),
        );
        let mut why = String::new();
        let (mut opt_now, mut hyper_now) = (saved.1.clone(), saved.3.clone());
        for _ in 0..MAX_REJECTED {
            let mut stopped = None;
            match self.attempt(&g) {
                Ok((exps, elbo)) if elbo.is_finite() => {
                    self.exps = exps;
                    let prev = *self.trace.last().unwrap_or(&elbo);
                    self.trace.push(elbo);
                    return Ok(stop_status(self.step, self.steps, self.tol, prev, elbo));
                }
                Ok((_, elbo)) => why = format!("an ELBO of {elbo}"),
                // Stopped: the state goes back as for a rejection, and the
                // step is not retried.
                Err(e) if e.is_interrupted() => {
                    stopped = Some(e);
                    opt_now = saved.1.clone();
                    hyper_now = saved.3.clone();
                }
                Err(e) => why = e.message,
            }
            if stopped.is_none() {
                self.core.rejected += 1;
                opt_now.scale_lr(0.5);
                if let Some(o) = &mut hyper_now {
                    o.scale_lr(0.5);
                }
            }
            self.x = saved.0.clone();
            self.opt = opt_now.clone();
            if self.core.theta != saved.2 {
                self.core.theta = saved.2.clone();
                self.core.refresh()?;
                self.k_inv = saved.4.clone();
                self.k_inv_diag = saved.5.clone();
            }
            self.core.hyper_opt = hyper_now.clone();
            self.qs = self.posteriors();
            if let Some(e) = stopped {
                self.step -= 1;
                return Err(e);
            }
        }
        Ok(Status::Done(format!(
            "stopped at step {}: every step size tried led to {why}",
            self.step
        )))
    }

    fn progress(&self) -> Progress {
        elbo_progress(self.step, self.steps, &self.trace)
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        let this = *self;
        Ok(Box::new(VariationalFit::new(
            "gradient_descent",
            this.core,
            this.qs,
            this.trace,
            this.step,
            reason,
        )?))
    }
}
