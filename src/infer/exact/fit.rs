//! The result of the `exact` engine: the learned hypers, the factorisation
//! at them, the optimiser's record, and predictions.

use super::model::ExactModel;
use super::objective::LmlState;
use super::predict::Predictions;
use crate::error::Error;
use crate::infer::fit::{Fit, UNUSED_HYPER_PRIORS};
use crate::infer::hypers::{hypers_json, hypers_table};
use crate::ir::bind::Bound;
use crate::ir::value::Value;
use crate::model::kernel::Inputs;
use serde_json::{Map, json};
use std::fmt::Write;

/// The result of exact GP regression.
pub struct ExactFit {
    /// The model.
    pub model: ExactModel,
    /// The final θ (unconstrained learned hypers).
    pub theta: Vec<f64>,
    /// The factorisation at θ.
    pub state: LmlState,
    /// Every hyper's value at θ.
    pub hypers: Vec<Value<f64>>,
    /// The log marginal likelihood at θ.
    pub log_marginal_likelihood: f64,
    /// The log prior of the learned hypers at θ (MAP-II), when any of them
    /// has a prior ([`crate::infer::hyper_prior`]).
    pub log_prior: Option<f64>,
    /// ∂(lml + log prior)/∂θ at θ (unconstrained scale).
    pub gradient: Vec<f64>,
    /// L-BFGS iterations taken.
    pub iterations: usize,
    /// The objective (log marginal likelihood, plus the log prior with
    /// priors on hypers) after each iteration.
    pub trace: Vec<f64>,
    /// Why the optimiser stopped.
    pub reason: String,
    /// Whether the gradient norm fell below 1e-5 (or nothing was learned).
    pub converged: bool,
    /// Evaluations of the log marginal likelihood and its gradient by the
    /// optimiser (the start included).
    pub evaluations: usize,
    /// With restarts: the final objective of every run, the given start
    /// first (empty without restarts).
    pub starts: Vec<f64>,
    /// The run kept (an index into `starts`).
    pub best_start: usize,
    /// Learned hypers that ran away, in words
    /// ([`crate::infer::exact::diagnose`]).
    pub run_aways: Vec<String>,
    /// Trial points the line searches rejected (the log marginal
    /// likelihood could not be computed there or was not finite).
    pub rejected: usize,
    /// Predictions at the test data, when given.
    pub predictions: Option<Predictions>,
    /// The test inputs X* [M, D] of those predictions.
    pub test_inputs: Option<Inputs>,
}

impl ExactFit {
    /// Collect the result.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: ExactModel,
        theta: Vec<f64>,
        state: LmlState,
        gradient: Vec<f64>,
        iterations: usize,
        trace: Vec<f64>,
        reason: String,
        converged: bool,
    ) -> Self {
        let hypers = model.layout.values::<f64>(&model.bound, &theta);
        ExactFit {
            log_marginal_likelihood: state.lml,
            model,
            theta,
            state,
            hypers,
            gradient,
            iterations,
            trace,
            reason,
            converged,
            log_prior: None,
            rejected: 0,
            evaluations: 0,
            starts: Vec::new(),
            best_start: 0,
            run_aways: Vec::new(),
            predictions: None,
            test_inputs: None,
        }
    }

    /// Predict at the inputs of test data bound like the training data.
    pub fn predict(&self, test: &Bound) -> Result<Predictions, Error> {
        self.model.predict(&self.theta, &self.state, test)
    }

    /// Predict at given inputs (offset and noise evaluated on the training
    /// data, so they must not depend on per-point data).
    pub fn predict_inputs(&self, x: &Inputs) -> Result<Predictions, Error> {
        self.model
            .predict_at(&self.theta, &self.state, x, &self.model.bound)
    }

    /// Parts of the model this engine does not use, in words.
    pub fn notes(&self) -> Vec<String> {
        let g = &self.model.bound.graph;
        let mut out = Vec::new();
        if !g.estimates.is_empty() {
            out.push("the `estimate` block is not used by the exact engine (expectations come from sampling engines)".to_string());
        }
        if !g.guides.is_empty() {
            out.push("the `guide` block is not used by the exact engine (the posterior is computed exactly)".to_string());
        }
        if crate::infer::hyper_prior::unused_priors(&self.model.bound, &self.model.layout) {
            out.push(UNUSED_HYPER_PRIORS.to_string());
        }
        if self.rejected > 0 {
            out.push(format!(
                "the line searches rejected {} trial point{}: the log marginal likelihood could not be computed there or was not finite",
                self.rejected,
                if self.rejected == 1 { "" } else { "s" }
            ));
        }
        out
    }

    /// The gradient norm on the unconstrained scale.
    pub fn gradient_norm(&self) -> f64 {
        self.gradient.iter().fold(0.0, |a, g| a + g * g).sqrt()
    }
}

impl Fit for ExactFit {
    fn engine(&self) -> &'static str {
        "exact"
    }

    /// Predict at test data and keep the predictions (and test inputs) in
    /// the fit.
    fn attach_test(&mut self, test: &Bound) -> Result<(), Error> {
        let p = self.predict(test)?;
        self.test_inputs = Some(test.site_inputs(self.model.site, &self.hypers, &[])?);
        self.predictions = Some(p);
        Ok(())
    }

    fn plot(&self, path: &std::path::Path) -> Result<(), Error> {
        crate::output::figures::exact(self, path)
    }

    fn to_json(&self) -> serde_json::Value {
        let b = &self.model.bound;
        let names = self.model.layout.names(b);
        let mut grad = Map::new();
        for (n, g) in names.iter().zip(&self.gradient) {
            grad.insert(n.clone(), json!(g));
        }
        let mut out = json!({
            "engine": "exact",
            "log_marginal_likelihood": self.log_marginal_likelihood,
            "hypers": hypers_json(b, &self.hypers),
            "learned": names,
            "gradient_unconstrained": grad,
            "optimizer": {
                "method": "L-BFGS",
                "iterations": self.iterations,
                "evaluations": self.evaluations,
                "converged": self.converged,
                "reason": self.reason,
                "gradient_norm": self.gradient_norm(),
                "trace": self.trace,
                "starts": self.starts,
                "best_start": self.best_start,
                "run_aways": self.run_aways,
            },
            "jitter": self.state.chol.as_ref().map(|c| c.jitter).unwrap_or(0.0),
            "n": self.model.inputs.len(),
        });
        if let Some(lp) = self.log_prior {
            out["log_prior"] = json!(lp);
            out["objective"] = json!(self.log_marginal_likelihood + lp);
        }
        let notes = self.notes();
        if !notes.is_empty() {
            out["notes"] = serde_json::json!(notes);
        }
        if let Some(p) = &self.predictions {
            out["predictions"] = serde_json::to_value(p).unwrap_or(serde_json::Value::Null);
        }
        out
    }

    fn summary(&self) -> String {
        let b = &self.model.bound;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "engine: exact GP regression ({} points, {} input column{})",
            self.model.inputs.len(),
            self.model.inputs.dim(),
            if self.model.inputs.dim() == 1 {
                ""
            } else {
                "s"
            }
        );
        let _ = writeln!(
            s,
            "log marginal likelihood: {}",
            crate::error::fixed(self.log_marginal_likelihood, 10)
        );
        if let Some(lp) = self.log_prior {
            let _ = writeln!(
                s,
                "log prior of the hypers: {} (MAP-II objective {})",
                crate::error::fixed(lp, 10),
                crate::error::fixed(self.log_marginal_likelihood + lp, 10)
            );
        }
        let learned = !self.model.layout.slots.is_empty();
        let _ = writeln!(s, "hypers:");
        s.push_str(&hypers_table(b, &self.hypers, &self.model.layout));
        if learned {
            let _ = writeln!(
                s,
                "optimizer: L-BFGS, {} iteration{} ({} evaluations), |gradient| = {:.2e} ({})",
                self.iterations,
                if self.iterations == 1 { "" } else { "s" },
                self.evaluations,
                self.gradient_norm(),
                self.reason
            );
            if self.starts.len() > 1 {
                let _ = writeln!(
                    s,
                    "restarts: {} runs, the best from {} ({}: {})",
                    self.starts.len(),
                    if self.best_start == 0 {
                        "the given start".to_string()
                    } else {
                        format!("restart {}", self.best_start)
                    },
                    if self.log_prior.is_some() {
                        "objectives"
                    } else {
                        "log marginal likelihoods"
                    },
                    self.starts
                        .iter()
                        .map(|v| format!("{v:.4}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            if !self.converged {
                let _ = writeln!(
                    s,
                    "warning: the optimizer stopped before the gradient norm fell below 1e-5"
                );
            }
            for r in &self.run_aways {
                let _ = writeln!(s, "warning: {r}");
            }
        }
        for n in self.notes() {
            let _ = writeln!(s, "note: {n}");
        }
        if let Some(c) = &self.state.chol
            && c.jitter > 0.0
        {
            let _ = writeln!(
                s,
                "note: jitter {:.1e} was added to the covariance diagonal",
                c.jitter
            );
        }
        if let Some(p) = &self.predictions {
            let _ = write!(
                s,
                "predictions: {} test point{}",
                p.mean.len(),
                if p.mean.len() == 1 { "" } else { "s" }
            );
            if let (Some(r), Some(m)) = (p.rmse, p.mean_log_predictive_density) {
                let _ = write!(s, ", RMSE {r:.4}, mean log predictive density {m:.4}");
            }
            s.push('\n');
            let show = p.mean.len().min(10);
            let _ = writeln!(
                s,
                "  {:>6}  {:>12}  {:>12}  {:>12}",
                "point", "mean", "sd(f)", "sd(y)"
            );
            for i in 0..show {
                let _ = writeln!(
                    s,
                    "  {:>6}  {:>12.6}  {:>12.6}  {:>12.6}",
                    i,
                    p.mean[i],
                    p.var_f[i].sqrt(),
                    p.var_y[i].sqrt()
                );
            }
            if p.mean.len() > show {
                let _ = writeln!(s, "  ... {} more in the JSON output", p.mean.len() - show);
            }
        }
        s
    }
}
