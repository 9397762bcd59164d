//! The exact engine as a state machine: each step is one L-BFGS iteration
//! on −log p(y | θ) over the learned hypers (none: a single step), or on
//! −log p(y | θ) − log p(θ) when learned hypers carry priors (MAP-II,
//! [`tempest_infer::hyper_prior`]). With
//! `restarts = k`, k further runs start from the initial values perturbed
//! on the unconstrained scale (seeded), and the run with the highest log
//! marginal likelihood is kept.
//!
//! The optimiser ([`crate::math::lbfgs`]) treats hypers where the log
//! marginal likelihood cannot be computed (a kernel matrix that is not
//! positive definite even with jitter, a non-finite value) as rejected
//! trial points, and every line search is bounded, so a run always ends
//! with a reason.

use super::fit::ExactFit;
use super::model::ExactModel;
use super::objective::LmlState;
use super::settings::ExactSettings;
use crate::error::{Error, ErrorKind};
use crate::math::lbfgs::{Lbfgs, Outcome};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use std::sync::Arc;
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;
use tempest_infer::hyper_prior::{has_priors, log_prior};

/// Perturbed starts tried for one restart before it is given up.
const START_TRIES: usize = 20;

/// One finished L-BFGS run.
#[derive(Clone, Debug)]
struct Run {
    opt: Lbfgs,
    iter: usize,
    trace: Vec<f64>,
    reason: String,
    stalled_flat: bool,
}

/// Correction pairs kept by L-BFGS.
const MEMORY: usize = 20;

/// The exact engine's state.
pub struct ExactEngine {
    model: Arc<ExactModel>,
    autodiff: bool,
    opt: Option<Lbfgs>,
    learn: bool,
    max_iters: usize,
    grad_tol: f64,
    f_tol: f64,
    /// Whether the run stopped on the relative-change test.
    stalled_flat: bool,
    iter: usize,
    trace: Vec<f64>,
    theta0: Vec<f64>,
    last_grad_norm: f64,
    /// The last error met at a rejected trial point.
    last_error: Option<String>,
    /// Further runs still to start.
    restarts_left: usize,
    /// Finished runs, in order.
    runs: Vec<Run>,
    rng: StdRng,
}

impl ExactEngine {
    /// Set up the engine at the hypers' initial values.
    pub fn new(model: ExactModel, s: &ExactSettings) -> Result<ExactEngine, Error> {
        let theta0 = model.layout.initial(&model.bound)?;
        let learn = model.layout.len > 0;
        Ok(ExactEngine {
            model: Arc::new(model),
            autodiff: s.autodiff,
            opt: None,
            learn,
            max_iters: s.max_iters,
            grad_tol: s.grad_tol,
            f_tol: s.f_tol,
            stalled_flat: false,
            iter: 0,
            trace: Vec::new(),
            theta0,
            last_grad_norm: f64::NAN,
            last_error: None,
            restarts_left: if learn { s.restarts } else { 0 },
            runs: Vec::new(),
            rng: StdRng::seed_from_u64(s.seed),
        })
    }

    /// What is maximised, in words.
    fn what(&self) -> &'static str {
        if has_priors(&self.model.bound, &self.model.layout) {
            "log marginal likelihood + log prior"
        } else {
            "log marginal likelihood"
        }
    }

    /// A start for the next run: the initial values with a standard normal
    /// step on the unconstrained scale, where −log p(y) and its gradient are
    /// finite; `None` when [`START_TRIES`] perturbations all fail.
    fn perturbed_start(&mut self) -> Option<(Vec<f64>, f64, Vec<f64>)> {
        for _ in 0..START_TRIES {
            // Stopped: no further run starts.
            if self.model.bound.stop.is_set() {
                return None;
            }
            let theta: Vec<f64> = self
                .theta0
                .iter()
                .map(|u| {
                    let z: f64 = StandardNormal.sample(&mut self.rng);
                    u + z
                })
                .collect::<Vec<f64>>();
            if let Ok((v, g)) = Self::evaluate(&self.model, self.autodiff, &theta)
                && v.is_finite()
                && g.iter().all(|x| x.is_finite())
            {
                return Some((theta, v, g));
            }
        }
        None
    }

    /// Keep the current run, if one is under way, as finished with `reason`.
    fn close_run(&mut self, reason: &str) {
        if let Some(opt) = self.opt.take() {
            self.runs.push(Run {
                opt,
                iter: self.iter,
                trace: std::mem::take(&mut self.trace),
                reason: reason.to_string(),
                stalled_flat: self.stalled_flat,
            });
        }
    }

    /// Close the current run with `reason`; start the next one if any is
    /// left, or say the engine is done.
    fn end_run(&mut self, reason: String) -> Status {
        self.close_run(&reason);
        while self.restarts_left > 0 {
            self.restarts_left -= 1;
            if let Some((theta, v, g)) = self.perturbed_start() {
                self.iter = 0;
                self.stalled_flat = false;
                self.last_error = None;
                self.trace = vec![-v];
                self.last_grad_norm = norm(&g);
                self.opt = Some(Lbfgs::new(theta, v, g, MEMORY));
                return Status::Running;
            }
        }
        Status::Done(reason)
    }

    /// −(lml + log prior) and its gradient at θ.
    fn evaluate(
        model: &ExactModel,
        autodiff: bool,
        theta: &[f64],
    ) -> Result<(f64, Vec<f64>), Error> {
        let (v, g) = if autodiff {
            model.lml_grad_autodiff(theta)?
        } else {
            let (s, g) = model.lml_grad(theta)?;
            (s.lml, g)
        };
        let (lp, gp) = log_prior(&model.bound, &model.layout, theta)?;
        Ok((
            -(v + lp),
            g.iter().zip(&gp).map(|(x, y)| -(x + y)).collect(),
        ))
    }
}

/// An error for a log marginal likelihood that is not finite at θ, with
/// its most likely cause: an outcome or input too large to square, or a
/// hyper at an extreme value.
pub fn non_finite_lml(model: &ExactModel, theta: &[f64], lml: f64, at: &str) -> Error {
    let mut e = Error::new(
        ErrorKind::Numerical,
        format!("the log marginal likelihood is {lml} at {at}"),
    );
    let g = &model.bound.graph;
    let obs = &g.observations[model.obs];
    let decl = &g.data[obs.data];
    const HUGE: f64 = 1e150;
    if let Some((k, v)) = model.y.iter().enumerate().find(|(_, v)| v.abs() >= HUGE) {
        let (row, col) = crate::ir::bind::element_location(
            &model.bound.data[obs.data],
            k,
            &decl.name,
            &decl.source,
        );
        e.message = format!(
            "{}: the outcome {v:e} is too large (its square overflows)",
            e.message
        );
        return e
            .in_data(model.bound.location(row, col))
            .with_note("rescale the outcomes, e.g. to thousands or millions of the unit");
    }
    if let Some(i) =
        (0..model.inputs.len()).find(|&i| model.inputs.row(i).iter().any(|x| x.abs() >= HUGE))
    {
        return e.with_note(format!(
            "input row {i} holds a value of magnitude ≥ 1e150, whose square overflows; rescale the inputs"
        ));
    }
    let hypers = model.layout.values::<f64>(&model.bound, theta);
    for (h, v) in g.hypers.iter().zip(&hypers) {
        if v.flatten()
            .iter()
            .any(|x| !x.is_finite() || x.abs() >= HUGE || (*x != 0.0 && x.abs() <= 1e-150))
        {
            return e.with_note(format!(
                "the hyper `{}` is {v} there; give it a less extreme value",
                h.name
            ));
        }
    }
    e.with_note("check the kernel's hyperparameters and the data's scale")
}

fn norm(g: &[f64]) -> f64 {
    g.iter().fold(0.0, |a, x| a + x * x).sqrt()
}

impl Engine for ExactEngine {
    fn step(&mut self) -> Result<Status, Error> {
        if !self.learn {
            let s = self.model.lml(&self.theta0)?;
            if !s.lml.is_finite() {
                return Err(non_finite_lml(
                    &self.model,
                    &self.theta0,
                    s.lml,
                    "the given hypers",
                ));
            }
            self.trace.push(s.lml);
            return Ok(Status::Done("no hypers to learn".into()));
        }
        let Some(opt) = self.opt.as_mut() else {
            // Fail early with the real error if the start is infeasible.
            let (v, g) = Self::evaluate(&self.model, self.autodiff, &self.theta0)?;
            if !v.is_finite() {
                return Err(non_finite_lml(
                    &self.model,
                    &self.theta0,
                    -v,
                    "the initial hypers",
                ));
            }
            if g.iter().any(|x| !x.is_finite()) {
                return Err(Error::new(
                    ErrorKind::Numerical,
                    format!(
                        "the gradient of the {} is not finite at the initial hypers",
                        self.what()
                    ),
                )
                .with_note("give the hypers less extreme initial values"));
            }
            self.trace.push(-v);
            self.last_grad_norm = norm(&g);
            let done = self.last_grad_norm < self.grad_tol;
            self.opt = Some(Lbfgs::new(self.theta0.clone(), v, g, MEMORY));
            if done {
                return Ok(Status::Done(
                    "gradient norm below tolerance at the start".into(),
                ));
            }
            return Ok(Status::Running);
        };
        let (model, autodiff) = (&self.model, self.autodiff);
        let last_error = &mut self.last_error;
        // Each evaluation factorises N × N: the stop flag is read before
        // every one, and a stop ends the iteration with the hypers where
        // they were.
        let mut stopped = None;
        let mut objective = |theta: &[f64]| {
            if let Err(e) = model.bound.stop.check("optimising the hypers") {
                stopped = Some(e);
                return None;
            }
            match Self::evaluate(model, autodiff, theta) {
                Ok(v) => Some(v),
                Err(e) if e.is_interrupted() => {
                    stopped = Some(e);
                    None
                }
                Err(e) => {
                    *last_error = Some(e.message);
                    None
                }
            }
        };
        let before = opt.clone();
        let f_before = opt.f;
        let outcome = opt.iterate(&mut objective);
        if let Some(e) = stopped {
            *opt = before;
            return Err(e);
        }
        self.iter += 1;
        self.trace.push(-opt.f);
        self.last_grad_norm = opt.grad_norm();
        let status = match outcome {
            Outcome::Flat => {
                self.stalled_flat = true;
                Status::Done(format!(
                    "the {} is flat to rounding along the search direction",
                    self.what()
                ))
            }
            Outcome::NoProgress(why) => Status::Done(match &self.last_error {
                Some(e) => format!("stopped: {why}; the last rejected point failed with: {e}"),
                None => format!("stopped: {why}"),
            }),
            Outcome::Improved if self.last_grad_norm < self.grad_tol => Status::Done(format!(
                "gradient norm {:.2e} below {:.0e}",
                self.last_grad_norm, self.grad_tol
            )),
            Outcome::Improved
                if f_before - opt.f <= self.f_tol * f_before.abs().max(opt.f.abs()).max(1.0) =>
            {
                self.stalled_flat = true;
                Status::Done(format!(
                    "relative change of the {} below f_tol = {:.0e}",
                    self.what(),
                    self.f_tol
                ))
            }
            Outcome::Improved if self.iter >= self.max_iters => {
                Status::Done(format!("reached max_iters = {}", self.max_iters))
            }
            Outcome::Improved => Status::Running,
        };
        Ok(match status {
            Status::Done(reason) => self.end_run(reason),
            other => other,
        })
    }

    fn progress(&self) -> Progress {
        Progress {
            step: self.iter,
            total: Some(self.max_iters),
            objective: self.trace.last().copied(),
            objective_name: self.what(),
            message: format!("|grad| = {:.3e}", self.last_grad_norm),
            lanes: vec![],
        }
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        let mut this = *self;
        // A run cut short (cancelled) counts as a finished one.
        this.close_run(&reason);
        let starts: Vec<f64> = this.runs.iter().map(|r| -r.opt.f).collect();
        // The best run: the lowest objective (the first among equals).
        let best = (0..this.runs.len()).fold(None, |b: Option<usize>, i| match b {
            Some(j) if this.runs[j].opt.f <= this.runs[i].opt.f => Some(j),
            _ => Some(i),
        });
        let (reason, run) = match best {
            Some(i) => {
                let r = this.runs.swap_remove(i);
                (r.reason.clone(), Some((i, r)))
            }
            None => (reason, None),
        };
        if let Some((_, r)) = &run {
            this.iter = r.iter;
            this.trace = r.trace.clone();
            this.stalled_flat = r.stalled_flat;
            this.opt = Some(r.opt.clone());
        }
        let theta = match &this.opt {
            Some(opt) => opt.x.clone(),
            None => this.theta0.clone(),
        };
        let model = Arc::try_unwrap(this.model).unwrap_or_else(|m| (*m).clone());
        let (state, mut grad): (LmlState, Vec<f64>) = model.lml_grad(&theta)?;
        if !state.lml.is_finite() {
            return Err(non_finite_lml(
                &model,
                &theta,
                state.lml,
                "the final hypers",
            ));
        }
        if this.learn {
            super::diagnose::collapse(&model, &this.theta0, &theta)?;
        }
        let prior = has_priors(&model.bound, &model.layout)
            .then(|| log_prior(&model.bound, &model.layout, &theta))
            .transpose()?;
        if let Some((_, gp)) = &prior {
            grad.iter_mut().zip(gp).for_each(|(g, p)| *g += p);
        }
        let converged = !this.learn || this.stalled_flat || norm(&grad) < this.grad_tol.max(1e-5);
        let mut fit = ExactFit::new(
            model, theta, state, grad, this.iter, this.trace, reason, converged,
        );
        fit.log_prior = prior.map(|p| p.0);
        fit.rejected = this.opt.as_ref().map_or(0, |o| o.rejected);
        fit.evaluations = this.opt.as_ref().map_or(0, |o| o.evals + 1);
        if starts.len() > 1 {
            fit.starts = starts;
            fit.best_start = run.map_or(0, |(i, _)| i);
        }
        fit.run_aways = super::diagnose::run_aways(&fit.model, &this.theta0, &fit.theta);
        Ok(Box::new(fit))
    }
}
