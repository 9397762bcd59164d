//! The result of a variational engine: the ELBO and its trace, the hypers,
//! q, and predictions with test metrics.

use super::core::Core;
use super::expect::{RuleError, expectations};
use super::model::ViModel;
use super::posterior::Whitened;
use super::predict::{Predictions, TestMetrics, predict};
use crate::error::fixed;
use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::value::Value;
use serde_json::json;
use tempest_infer::fit::UNUSED_HYPER_PRIORS;
use tempest_infer::hyper_prior::{self, has_priors, log_prior_value};
use tempest_infer::hypers::{hypers_json, hypers_table};
use tempest_output::report::Report;

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
        let what = super::def::words(self.engine);
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

/// The test metrics' line (or the number of predictions) and their JSON
/// fields, for the variational engines' reports.
pub fn test_report(r: &mut Report, test: Option<&TestMetrics>, predictions: Option<&Predictions>) {
    if let Some(t) = test {
        let n = predictions.map(|p| p.mean_f.len()).unwrap_or(0);
        let mut line = format!(
            "test ({n} points): mean log predictive density {}",
            fixed(t.mean_log_predictive_density, 4)
        );
        if let (Some(a), Some(e), Some(m)) = (t.accuracy, t.ece, t.mce) {
            line.push_str(&format!(", accuracy {a:.4}, ECE {e:.4}, MCE {m:.4}"));
        }
        if let (Some(e), Some(c)) = (t.rmse, t.coverage_95) {
            line.push_str(&format!(
                ", RMSE {}, 95 % interval coverage {c:.3}",
                fixed(e, 4)
            ));
        }
        r.line(line);
        r.field_ser("test", t);
    } else if let Some(p) = predictions {
        let n = p.mean_f.len();
        r.line(format!(
            "predictions: {n} test point{}",
            if n == 1 { "" } else { "s" }
        ));
    }
    if let Some(p) = predictions {
        prediction_table(r, p);
        r.field_ser("predictions", p);
    }
}

/// The table of the first test points: each point's data row and inputs,
/// then P(y = 1) with its interval (binary outcomes), the most probable
/// class (categorical), the predictive mean and interval of y (numeric
/// outcomes), or else the latent mean and sd.
fn prediction_table(r: &mut Report, p: &Predictions) {
    use tempest_output::predictions::{
        PointIndex, band_cells, band_heads, class_cells, prediction_table,
    };
    let index = PointIndex::new(&p.rows, p.inputs.as_ref(), &p.input_names);
    let n = p.mean_f.len();
    if let Some(b) = &p.probability {
        let heads = band_heads(&format!("P({}=1)", p.outcome));
        prediction_table(r, &index, &heads, n, |i| band_cells(b, i));
    } else if let Some(probs) = &p.probabilities {
        let heads = ["class".to_string(), "P(class)".to_string()];
        prediction_table(r, &index, &heads, n, |i| class_cells(&probs[i]));
    } else if let Some(b) = &p.predictive {
        prediction_table(r, &index, &band_heads("mean"), n, |i| band_cells(b, i));
    } else {
        let c = p.mean_f.first().map_or(1, Vec::len);
        let heads: Vec<String> = (0..c)
            .flat_map(|k| {
                let k = if c == 1 { String::new() } else { k.to_string() };
                [format!("mean(f{k})"), format!("sd(f{k})")]
            })
            .collect();
        prediction_table(r, &index, &heads, n, |i| {
            (0..c)
                .flat_map(|k| [p.mean_f[i][k], p.var_f[i][k].max(0.0).sqrt()])
                .map(|x| format!("{x:.4}"))
                .collect()
        });
    }
}

/// An error naming the first test row whose prediction is not finite.
pub fn finite_predictions(p: &Predictions, test: &Bound) -> Result<(), Error> {
    let finite = |rows: &Vec<Vec<f64>>| rows.iter().position(|r| r.iter().any(|v| !v.is_finite()));
    let bad = finite(&p.mean_f)
        .or_else(|| finite(&p.var_f))
        .or_else(|| p.probabilities.as_ref().and_then(finite));
    if let Some(i) = bad {
        let row = test.row_ids.get(i).copied().unwrap_or(i);
        return Err(Error::new(
            ErrorKind::Numerical,
            format!(
                "the prediction at test row {row} is not finite (latent mean {:?}, variance {:?})",
                p.mean_f[i], p.var_f[i]
            ),
        )
        .with_note("check the test inputs' scale: inputs of magnitude 1e150 or more overflow the kernel's distances"));
    }
    Ok(())
}

/// Notes on the parts of the model a variational engine does not use: the
/// `estimate` block, and priors on hypers it does not learn.
pub fn unused_parts(model: &ViModel, engine: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !model.bound.graph.estimates.is_empty() {
        out.push(format!("the `estimate` block is not used by the {engine} engine (expectations come from sampling engines)"));
    }
    if hyper_prior::unused_priors(&model.bound, &model.layout) {
        out.push(UNUSED_HYPER_PRIORS.to_string());
    }
    out
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
