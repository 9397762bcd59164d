//! The result of the `exact` engine: the learned hypers, the factorisation
//! at them, the optimiser's record, and predictions.

use super::model::ExactModel;
use super::objective::LmlState;
use super::predict::Predictions;
use crate::error::Error;
use crate::error::fixed;
use crate::ir::bind::Bound;
use crate::ir::value::Value;
use serde_json::{Map, json};
use tempest_infer::fit::{Fit, UNUSED_HYPER_PRIORS};
use tempest_infer::hypers::{hypers_json, hypers_table};
use tempest_model::kernel::Inputs;
use tempest_output::report::Report;

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
    /// has a prior ([`tempest_infer::hyper_prior`]).
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
    /// ([`crate::diagnose`]).
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
        if tempest_infer::hyper_prior::unused_priors(&self.model.bound, &self.model.layout) {
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
    fn saved(
        &self,
        model: &str,
        cfg: &tempest_infer::settings::EngineConfig,
    ) -> Option<Result<serde_json::Value, crate::error::Error>> {
        Some(Ok(self.saved_json(model, cfg)))
    }

    fn hyper(&self, name: &str) -> Option<Vec<f64>> {
        tempest_infer::fit::hyper_by_name(&self.model.bound.graph, &self.hypers, name)
    }

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

    #[cfg(feature = "plot")]
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, crate::error::Error> {
        super::figure::draw(self, path)?;
        Ok(vec![path.to_path_buf()])
    }

    fn report(&self) -> Report {
        let b = &self.model.bound;
        let mut r = Report::new("exact");
        let dim = self.model.inputs.dim();
        r.line(format!(
            "engine: exact GP regression ({} points, {dim} input column{})",
            self.model.inputs.len(),
            if dim == 1 { "" } else { "s" }
        ));
        r.line(format!(
            "log marginal likelihood: {}",
            fixed(self.log_marginal_likelihood, 10)
        ));
        r.field("log_marginal_likelihood", self.log_marginal_likelihood);
        if let Some(lp) = self.log_prior {
            r.line(format!(
                "log prior of the hypers: {} (MAP-II objective {})",
                fixed(lp, 10),
                fixed(self.log_marginal_likelihood + lp, 10)
            ));
        }
        r.line("hypers:");
        r.lines(hypers_table(b, &self.hypers, &self.model.layout));
        let names = self.model.layout.names(b);
        let mut grad = Map::new();
        for (n, g) in names.iter().zip(&self.gradient) {
            grad.insert(n.clone(), json!(g));
        }
        r.field("hypers", hypers_json(b, &self.hypers));
        r.field("learned", json!(names));
        r.field("gradient_unconstrained", grad);
        r.field(
            "optimizer",
            json!({
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
            }),
        );
        let jitter = self.state.chol.as_ref().map(|c| c.jitter).unwrap_or(0.0);
        r.field("jitter", jitter);
        r.field("n", self.model.inputs.len());
        if let Some(lp) = self.log_prior {
            r.field("log_prior", lp);
            r.field("objective", self.log_marginal_likelihood + lp);
        }
        if !self.model.layout.slots.is_empty() {
            r.line(format!(
                "optimizer: L-BFGS, {} iteration{} ({} evaluations), |gradient| = {:.2e} ({})",
                self.iterations,
                if self.iterations == 1 { "" } else { "s" },
                self.evaluations,
                self.gradient_norm(),
                self.reason
            ));
            if self.starts.len() > 1 {
                r.line(format!(
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
                ));
            }
            if !self.converged {
                r.warning("the optimizer stopped before the gradient norm fell below 1e-5");
            }
            for w in &self.run_aways {
                r.warning(w.clone());
            }
        }
        for n in self.notes() {
            r.note(n);
        }
        if jitter > 0.0 {
            r.note(format!(
                "jitter {jitter:.1e} was added to the covariance diagonal"
            ));
        }
        if let Some(p) = &self.predictions {
            let mut head = format!(
                "predictions: {} test point{}",
                p.mean.len(),
                if p.mean.len() == 1 { "" } else { "s" }
            );
            if let (Some(rm), Some(m)) = (p.rmse, p.mean_log_predictive_density) {
                head.push_str(&format!(
                    ", RMSE {}, mean log predictive density {}",
                    fixed(rm, 4),
                    fixed(m, 4)
                ));
            }
            if let Some(c) = p.coverage_95 {
                head.push_str(&format!(", 95 % interval coverage {c:.3}"));
            }
            r.line(head);
            let names =
                tempest_output::predictions::input_names(&b.graph, Some(self.model.site), dim);
            let index = tempest_output::predictions::PointIndex::new(
                &p.rows,
                self.test_inputs.as_ref(),
                &names,
            );
            tempest_output::predictions::prediction_table(
                &mut r,
                &index,
                &["mean".into(), "sd(f)".into(), "sd(y)".into()],
                p.mean.len(),
                |i| {
                    vec![
                        format!("{:.6}", p.mean[i]),
                        format!("{:.6}", p.var_f[i].sqrt()),
                        format!("{:.6}", p.var_y[i].sqrt()),
                    ]
                },
            );
            r.field_ser("predictions", p);
        }
        r
    }
}

/// The exact fit behind a [`tempest_infer::fit::Fit`] trait object (an
/// engine's fit is its own type; `fit.as_exact()` with this trait in scope,
/// or `fit.downcast_ref::<ExactFit>()`).
pub trait AsExact {
    /// The exact fit, if this is one.
    fn as_exact(&self) -> Option<&ExactFit>;
}

impl AsExact for dyn tempest_infer::fit::Fit {
    fn as_exact(&self) -> Option<&ExactFit> {
        self.downcast_ref()
    }
}
