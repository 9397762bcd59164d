//! The result of a variational engine: the ELBO and its trace, the hypers,
//! q, and predictions with test metrics.

use super::core::Core;
use super::expect::{RuleError, expectations};
use super::posterior::Whitened;
use super::predict::{Predictions, TestMetrics, predict};
use crate::error::Error;
use crate::error::fixed;
use crate::ir::bind::Bound;
use crate::ir::value::Value;
use serde_json::json;
use tempest_infer::hyper_prior::{has_priors, log_prior_value};
use tempest_infer::hypers::{hypers_json, hypers_table};
use tempest_output::report::Report;
use tempest_variational::report::{finite_predictions, test_report, unused_parts};

/// What a variational engine found.
pub struct VariationalFit {
    /// `mirror_descent` or `gradient_descent`.
    pub engine: &'static str,
    /// Hypers, prior and model.
    pub core: Core,
    /// q for each latent GP (C of them for `categorical_logit`).
    pub qs: Vec<Whitened>,
    /// The final ELBO.
    pub elbo: f64,
    /// The ELBO at the start and after every step.
    pub trace: Vec<f64>,
    /// Steps taken.
    pub steps: usize,
    /// The step size ρ used at each mirror-descent step (after any backtracking).
    pub rho_trace: Vec<f64>,
    /// Why it stopped.
    pub reason: String,
    /// Every hyper's value.
    pub hypers: Vec<Value<f64>>,
    /// The log prior of the learned hypers (MAP-II), when any has a prior;
    /// the hypers maximise ELBO + log prior.
    pub log_prior: Option<f64>,
    /// Predictions at the test data, when given.
    pub predictions: Option<Predictions>,
    /// Test metrics, when the test data has outcomes.
    pub test: Option<TestMetrics>,
    /// The expectation rule and its error estimate at the final q.
    pub rule_error: RuleError,
}

impl VariationalFit {
    /// Collect the result (an error only if the hypers' log prior is not
    /// finite, which the engines' steps never allow).
    pub fn new(
        engine: &'static str,
        core: Core,
        qs: Vec<Whitened>,
        trace: Vec<f64>,
        steps: usize,
        reason: String,
    ) -> Result<VariationalFit, Error> {
        let hypers = core
            .model
            .layout
            .values::<f64>(&core.model.bound, &core.theta);
        let (b, layout) = (&core.model.bound, &core.model.layout);
        let log_prior = has_priors(b, layout)
            .then(|| log_prior_value(b, layout, &core.theta))
            .transpose()?;
        let totals = || {
            let (m, v) = core.marginals(&qs);
            let lik = &core.pieces.lik;
            let e = expectations(&core.model, lik, &core.rule, &m, &v)?;
            let finer = match core.rule.finer() {
                Some(f) => Some(expectations(&core.model, lik, &f, &m, &v)?.total()),
                None => None,
            };
            Ok((e.total(), finer))
        };
        // A stopped run goes without the rule's error estimate.
        let stop = &core.model.bound.stop;
        let totals = match stop.check("estimating the expectation rule's error") {
            Ok(()) => totals(),
            Err(e) => Err(e),
        };
        let (rule_error, total) = match totals {
            Ok((total, finer)) => (RuleError::new(&core.rule, total, finer), Some(total)),
            Err(e) if e.is_interrupted() => (RuleError::new(&core.rule, 0.0, None), None),
            Err(e) => return Err(e),
        };
        let elbo = *trace.last().unwrap_or(&f64::NAN);
        tempest_infer::finite::number("the ELBO", elbo, || {
            let kl: f64 = qs.iter().map(|q| q.kl()).sum();
            let show = tempest_infer::finite::show;
            match total {
                Some(total) => format!(
                    "the expected log-likelihood is {} and the KL divergence of q from the prior {}",
                    show(total),
                    show(kl)
                ),
                None => format!("the KL divergence of q from the prior is {}", show(kl)),
            }
        })?;
        Ok(VariationalFit {
            rule_error,
            log_prior,
            engine,
            elbo,
            core,
            qs,
            trace,
            steps,
            rho_trace: Vec::new(),
            reason,
            hypers,
            predictions: None,
            test: None,
        })
    }

    /// Predict at test data and keep the predictions and metrics, with
    /// `bins` confidence bins for the calibration errors.
    fn attach_test_binned(&mut self, test: &Bound, bins: usize) -> Result<(), Error> {
        let (p, m) = predict(&self.core, &self.qs, test, bins)?;
        finite_predictions(&p, test)?;
        self.predictions = Some(p);
        self.test = m;
        Ok(())
    }

    /// Parts of the model this engine does not use, and numerical repairs.
    pub fn notes(&self) -> Vec<String> {
        let mut out = unused_parts(&self.core.model, self.engine);
        if self.core.rejected > 0 {
            out.push(format!(
                "{} step{} rejected (a non-finite ELBO or a prior that could not be factorised) and tried again with half the learning rate",
                self.core.rejected,
                if self.core.rejected == 1 { " was" } else { "s were" }
            ));
        }
        if self.core.prior.chol.jitter > 0.0 {
            out.push(format!(
                "jitter {:.1e} was added to the prior covariance beyond the `jitter` setting",
                self.core.prior.chol.jitter
            ));
        }
        out
    }
}

impl tempest_infer::fit::Fit for VariationalFit {
    fn saved(
        &self,
        model: &str,
        cfg: &tempest_infer::settings::EngineConfig,
    ) -> Option<Result<serde_json::Value, crate::error::Error>> {
        Some(Ok(self.saved_json(model, cfg)))
    }

    fn hyper(&self, name: &str) -> Option<Vec<f64>> {
        tempest_infer::fit::hyper_by_name(&self.core.model.bound.graph, &self.hypers, name)
    }

    fn engine(&self) -> &'static str {
        self.engine
    }

    /// Predict at test data with the run's `bins` for the calibration
    /// errors.
    fn attach_test(&mut self, test: &Bound) -> Result<(), Error> {
        self.attach_test_binned(test, self.core.bins)
    }

    #[cfg(feature = "plot")]
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, crate::error::Error> {
        super::figure::draw(self, path)
    }

    fn report(&self) -> Report {
        let b = &self.core.model.bound;
        let mut r = Report::new(self.engine);
        let what = super::settings::words(self.engine);
        let cls = if self.core.model.latents > 1 {
            format!(", {} latent GPs", self.core.model.latents)
        } else {
            String::new()
        };
        r.line(format!(
            "engine: {what} ({} points{cls})",
            self.core.prior.len()
        ));
        r.line(format!(
            "ELBO: {} after {} step{} ({})",
            fixed(self.elbo, 10),
            self.steps,
            if self.steps == 1 { "" } else { "s" },
            self.reason
        ));
        r.field("elbo", self.elbo)
            .field("elbo_trace", json!(self.trace))
            .field("steps", self.steps)
            .field("reason", self.reason.clone())
            .field("hypers", hypers_json(b, &self.hypers))
            .field("learned", json!(self.core.model.layout.names(b)))
            .field("n", self.core.prior.len())
            .field("latent_gps", self.core.model.latents);
        self.rule_error.report(&mut r, self.elbo);
        if let Some(lp) = self.log_prior {
            r.line(format!(
                "log prior of the hypers: {} (MAP-II objective ELBO + log prior {})",
                fixed(lp, 10),
                fixed(self.elbo + lp, 10)
            ));
            r.field("log_prior", lp).field("objective", self.elbo + lp);
        }
        if !b.graph.hypers.is_empty() {
            r.line("hypers:");
            r.lines(hypers_table(b, &self.hypers, &self.core.model.layout));
        }
        if let Some(c) = &self.core.cost {
            if let Some(w) = c.warning() {
                r.warning(w);
            }
            r.field_ser("cost_estimate", c);
        }
        for n in self.notes() {
            r.note(n);
        }
        if !self.rho_trace.is_empty() {
            r.field("rho_trace", json!(self.rho_trace));
        }
        test_report(&mut r, self.test.as_ref(), self.predictions.as_ref());
        r
    }
}

/// The variational fit behind a [`tempest_infer::fit::Fit`] trait object (an
/// engine's fit is its own type; `fit.as_variational()` with this trait in scope,
/// or `fit.downcast_ref::<VariationalFit>()`).
pub trait AsVariational {
    /// The variational fit, if this is one.
    fn as_variational(&self) -> Option<&VariationalFit>;
}

impl AsVariational for dyn tempest_infer::fit::Fit {
    fn as_variational(&self) -> Option<&VariationalFit> {
        self.downcast_ref()
    }
}
