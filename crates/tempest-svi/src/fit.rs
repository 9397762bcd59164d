//! The result of the `svi` engine: the ELBO over the whole training data
//! (computed in batches at the end), the epoch trace, the hypers, Z and
//! q(u), and predictions at test data in batches.

use super::def::{QStep, SviSettings};
use super::sets::{InducingSets, Projections};
use crate::error::{Error, ErrorKind, fixed};
use crate::ir::bind::Bound;
use crate::ir::value::Value;
use crate::model::kernel::Inputs;
use crate::model::network::Network;
use nalgebra::DMatrix;
use serde::Serialize;
use serde_json::json;
use std::borrow::Cow;
use std::sync::Arc;
use tempest_infer::hyper_prior::{has_priors, log_prior_value};
use tempest_infer::hypers::{hypers_json, hypers_table};
use tempest_output::report::Report;
use tempest_variational::expect::{Rule, RuleError, expectations_at};
use tempest_variational::model::{LikArgs, ViModel, ViPieces};
use tempest_variational::posterior::Whitened;
use tempest_variational::predict::{Predictions, TestMetrics, outcome_predictions, test_inputs};
use tempest_variational::report::{finite_predictions, test_report, unused_parts};

/// Points per batch when the whole training ELBO or predictions are
/// computed (memory B × M per batch).
pub const EVAL_BATCH: usize = 2048;

/// The ELBO estimate averaged over one epoch.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct TracePoint {
    /// Steps taken when the epoch ended.
    pub step: usize,
    /// Seconds since the engine started.
    pub seconds: f64,
    /// The mean of the epoch's minibatch ELBO estimates.
    pub elbo: f64,
}

/// The learned state of a fit: hypers, Z, q(u) and a network's weights.
pub struct Learned {
    /// The learned hypers on the unconstrained scale.
    pub theta: Vec<f64>,
    /// The pieces at θ.
    pub pieces: ViPieces<f64>,
    /// Z and the factor of K_ZZ (one set, or one per latent GP).
    pub inducing: InducingSets,
    /// q(u_c) for each latent GP, whitened.
    pub qs: Vec<Whitened>,
    /// A deep kernel's network.
    pub net: Option<Network>,
}

/// What a run of the `svi` engine did, beside its final state.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// The epoch trace.
    pub trace: Vec<TracePoint>,
    /// Steps taken.
    pub steps: usize,
    /// Why it stopped.
    pub reason: String,
    /// Steps retried after a rejection.
    pub rejected: usize,
    /// Notes from the run.
    pub notes: Vec<String>,
    /// Seconds the steps took.
    pub seconds: f64,
}

/// What the `svi` engine found.
pub struct SviFit {
    /// The model.
    pub model: Arc<ViModel>,
    /// The settings it ran with.
    pub settings: SviSettings,
    /// How expectations are computed.
    pub rule: Rule,
    /// The learned hypers on the unconstrained scale.
    pub theta: Vec<f64>,
    /// The pieces at θ.
    pub pieces: ViPieces<f64>,
    /// Z and the factor of K_ZZ (one set, or one per latent GP).
    pub inducing: InducingSets,
    /// q(u_c) for each latent GP, whitened.
    pub qs: Vec<Whitened>,
    /// A deep kernel's network with its learned weights.
    pub net: Option<Network>,
    /// The ELBO over the whole training data at the end.
    pub elbo: f64,
    /// The run: its trace, steps, stopping reason, rejections, notes and
    /// seconds.
    pub run: RunRecord,
    /// Every hyper's value.
    pub hypers: Vec<Value<f64>>,
    /// The log prior of the learned hypers, when any has a prior.
    pub log_prior: Option<f64>,
    /// Predictions at the test data, when given.
    pub predictions: Option<Predictions>,
    /// Test metrics, when the test data has outcomes.
    pub test: Option<TestMetrics>,
    /// The expectation rule of the whole-data ELBO and its error estimate.
    pub rule_error: RuleError,
    /// The number of training points.
    pub n_train: usize,
    /// The saved fit this one was read from (`tempest predict`).
    pub loaded_from: Option<String>,
}

impl SviFit {
    /// Add the run's record to an assembled fit and compute the ELBO over
    /// the whole data (with the expectations' error estimate).
    pub fn finish(self, record: RunRecord) -> Result<SviFit, Error> {
        let mut fit = self;
        let (b, layout) = (&fit.model.bound, &fit.model.layout);
        fit.log_prior = has_priors(b, layout)
            .then(|| log_prior_value(b, layout, &fit.theta))
            .transpose()?;
        fit.run = record;
        let finer = fit.rule.finer();
        let (mut total, mut finer_total) = (0.0, 0.0);
        let m = &fit.model;
        let at = At {
            model: m,
            theta: &fit.theta,
            pieces: &fit.pieces,
            ind: &fit.inducing,
            net: fit.net.as_ref(),
        };
        let pass = for_batches_with(&at, &fit.qs, |rows, _, mg| {
            let view = m.batch_view(rows)?;
            let lik = lik_on(m, &fit.theta, &fit.pieces, view.as_ref())?;
            total += expectations_at(m, &lik, &fit.rule, Some(rows), &mg.mean, &mg.var)?.total();
            if let Some(f) = &finer {
                finer_total += expectations_at(m, &lik, f, Some(rows), &mg.mean, &mg.var)?.total();
            }
            Ok(())
        });
        // Stopped during the pass (or before it), the fit keeps what it
        // learned, without the whole-data ELBO.
        match pass {
            Err(e) if e.is_interrupted() => {
                fit.run.notes.push(
                    "the ELBO over the whole training data was not computed: the run was interrupted before its pass over the data ended".into(),
                );
                return Ok(fit);
            }
            r => r?,
        }
        fit.elbo = total - fit.qs.iter().map(|q| q.kl()).sum::<f64>();
        fit.rule_error = RuleError::new(&fit.rule, total, finer.map(|_| finer_total));
        if !fit.elbo.is_finite() {
            return Err(Error::new(
                ErrorKind::Numerical,
                format!("the ELBO over the training data is {}", fit.elbo),
            ));
        }
        Ok(fit)
    }

    /// The fit's state without a run's record (ELBO NaN, no trace): the
    /// part [`SviFit::finish`] and a saved fit share.
    pub fn assemble(
        model: Arc<ViModel>,
        settings: SviSettings,
        rule: Rule,
        learned: Learned,
    ) -> SviFit {
        let Learned {
            theta,
            pieces,
            inducing,
            qs,
            net,
        } = learned;
        let hypers = model.layout.values::<f64>(&model.bound, &theta);
        let rule_error = RuleError::new(&rule, 0.0, None);
        SviFit {
            n_train: model.inputs.len(),
            model,
            settings,
            rule,
            theta,
            pieces,
            inducing,
            qs,
            net,
            elbo: f64::NAN,
            rule_error,
            run: RunRecord {
                trace: Vec::new(),
                steps: 0,
                reason: String::new(),
                rejected: 0,
                notes: Vec::new(),
                seconds: 0.0,
            },
            hypers,
            log_prior: None,
            predictions: None,
            test: None,
            loaded_from: None,
        }
    }

    /// Σₙ E_q\[ℓₙ\] − Σ_c KL over all N training points, in batches.
    pub fn full_elbo(&self) -> Result<f64, Error> {
        let at = At {
            model: &self.model,
            theta: &self.theta,
            pieces: &self.pieces,
            ind: &self.inducing,
            net: self.net.as_ref(),
        };
        whole_elbo(&at, &self.qs, &self.rule)
    }

    /// Latent means and variances [M, C] at the inputs of `test`, in batches.
    pub fn latent(&self, test: &Bound) -> Result<(DMatrix<f64>, DMatrix<f64>), Error> {
        self.latent_at(&test_inputs(&self.model, &self.hypers, test)?, &test.stop)
    }

    /// Latent means and variances [M, C] at inputs `x` [M, D], in batches;
    /// `stop` is read before each batch.
    pub fn latent_at(
        &self,
        x: &crate::model::kernel::Inputs,
        stop: &crate::interrupt::StopFlag,
    ) -> Result<(DMatrix<f64>, DMatrix<f64>), Error> {
        let (m, c) = (x.len(), self.qs.len());
        let mut mean = DMatrix::zeros(m, c);
        let mut var = DMatrix::zeros(m, c);
        for start in (0..m).step_by(EVAL_BATCH) {
            stop.check("predicting at the test data")?;
            let rows: Vec<usize> = (start..(start + EVAL_BATCH).min(m)).collect();
            let xb = kernel_inputs(self.net.as_ref(), x.gather(&rows))?;
            let p = self.inducing.project(&self.pieces.kernel, &xb)?;
            let mg = p.marginals(&self.inducing, &self.qs, self.pieces.mean);
            mean.rows_mut(start, rows.len()).copy_from(&mg.mean);
            var.rows_mut(start, rows.len()).copy_from(&mg.var);
        }
        Ok((mean, var))
    }

    /// Parts of the model this engine does not use, and repairs.
    fn all_notes(&self) -> Vec<String> {
        let mut out = self.run.notes.clone();
        out.extend(unused_parts(&self.model, "svi"));
        if self.run.rejected > 0 {
            out.push(format!(
                "{} step{} retried with a smaller step (K_ZZ could not be factorised, a value was not finite, or q(u) left the family)",
                self.run.rejected,
                if self.run.rejected == 1 { " was" } else { "s were" }
            ));
        }
        if self.inducing.extra_jitter() > 0.0 {
            out.push(format!(
                "jitter {:.1e} was added to K_ZZ beyond the `jitter` setting",
                self.inducing.extra_jitter()
            ));
        }
        out
    }
}

/// The state a whole-data pass reads: the model, θ, the pieces at θ and
/// the inducing points.
pub struct At<'a> {
    /// The model.
    pub model: &'a ViModel,
    /// The learned hypers.
    pub theta: &'a [f64],
    /// The pieces at θ (the likelihood's arguments at all rows only when
    /// they are not row-wise).
    pub pieces: &'a ViPieces<f64>,
    /// Z and the factor of K_ZZ (one set, or one per latent GP).
    pub ind: &'a InducingSets,
    /// A deep kernel's network.
    pub net: Option<&'a Network>,
}

/// The kernel's inputs at points `x` [B, D]: the points, or a deep
/// kernel's features g(x) [B, F].
pub fn kernel_inputs(net: Option<&Network>, x: Inputs) -> Result<Inputs, Error> {
    match net {
        Some(n) => n.map(&x),
        None => Ok(x),
    }
}

/// The likelihood's arguments on a batch view (see
/// [`ViModel::batch_view`]), or the pieces' own (all N rows) without one.
pub fn lik_on<'a>(
    model: &ViModel,
    theta: &[f64],
    pieces: &'a ViPieces<f64>,
    view: Option<&Bound>,
) -> Result<Cow<'a, LikArgs<f64>>, Error> {
    Ok(match view {
        Some(_) => Cow::Owned(model.lik_on::<f64>(theta, view)?),
        None => Cow::Borrowed(&pieces.lik),
    })
}

/// Σₙ E_q\[ℓₙ\] − Σ_c KL over all N training points, in batches of
/// [`EVAL_BATCH`], with expectations by `rule`.
pub fn whole_elbo(at: &At, qs: &[Whitened], rule: &Rule) -> Result<f64, Error> {
    let mut total = 0.0;
    for_batches(at, qs, rule, |_, e| {
        total += e.total();
    })?;
    Ok(total - qs.iter().map(|q| q.kl()).sum::<f64>())
}

/// Visit the training data in batches of [`EVAL_BATCH`]: each batch's
/// projection and its expectations by `rule`.
pub fn for_batches(
    at: &At,
    qs: &[Whitened],
    rule: &Rule,
    mut visit: impl FnMut(&Projections, &tempest_variational::expect::Expectations),
) -> Result<(), Error> {
    for_batches_with(at, qs, |rows, p, mg| {
        let view = at.model.batch_view(rows)?;
        let lik = lik_on(at.model, at.theta, at.pieces, view.as_ref())?;
        let e = expectations_at(at.model, &lik, rule, Some(rows), &mg.mean, &mg.var)?;
        visit(p, &e);
        Ok(())
    })
}

/// Visit the training data in batches of [`EVAL_BATCH`]: each batch's
/// rows, projection and latent marginals.
fn for_batches_with(
    at: &At,
    qs: &[Whitened],
    mut visit: impl FnMut(&[usize], &Projections, &super::sparse::Marginals) -> Result<(), Error>,
) -> Result<(), Error> {
    let n = at.model.inputs.len();
    for start in (0..n).step_by(EVAL_BATCH) {
        at.model
            .bound
            .stop
            .check("passing over the whole training data")?;
        let rows: Vec<usize> = (start..(start + EVAL_BATCH).min(n)).collect();
        let x = kernel_inputs(at.net, at.model.inputs.gather(&rows))?;
        let p = at.ind.project(&at.pieces.kernel, &x)?;
        let mg = p.marginals(at.ind, qs, at.pieces.mean);
        visit(&rows, &p, &mg)?;
    }
    Ok(())
}

impl SviFit {
    /// Predictions (and metrics, with outcomes) at `data`, bound like the
    /// training data: the test data, or the training data itself for a
    /// fit plot.
    pub fn predict_on(&self, data: &Bound) -> Result<(Predictions, Option<TestMetrics>), Error> {
        let (mean, var) = self.latent(data)?;
        let pieces = self.model.pieces::<f64>(&self.theta, data)?;
        let (mut p, m) = outcome_predictions(
            &self.model,
            &self.rule,
            &pieces.lik.untempered(),
            data,
            &mean,
            &var,
            self.settings.bins,
        )?;
        finite_predictions(&p, data)?;
        p.inputs = Some(data.site_inputs(self.model.latent.site, &self.hypers, &[])?);
        Ok((p, m))
    }
}

impl tempest_infer::fit::Fit for SviFit {
    fn hyper(&self, name: &str) -> Option<Vec<f64>> {
        tempest_infer::fit::hyper_by_name(&self.model.bound.graph, &self.hypers, name)
    }

    fn engine(&self) -> &'static str {
        "svi"
    }

    fn saved(
        &self,
        model: &str,
        _cfg: &tempest_infer::settings::EngineConfig,
    ) -> Option<Result<serde_json::Value, Error>> {
        Some(SviFit::saved(self, model))
    }

    fn attach_test(&mut self, test: &Bound) -> Result<(), Error> {
        let (p, m) = self.predict_on(test)?;
        self.predictions = Some(p);
        self.test = m;
        Ok(())
    }

    #[cfg(feature = "plot")]
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, crate::error::Error> {
        super::figure::draw(self, path)
    }

    fn report(&self) -> Report {
        let b = &self.model.bound;
        let mut r = Report::new("svi");
        let (n, m, c) = (self.n_train, self.inducing.len(), self.model.latents);
        let cls = match (c, self.model.latent.mixing.is_some()) {
            (_, true) => format!(
                ", {c} latent GPs mixed into {} class scores",
                self.model.classes
            ),
            (1, false) => String::new(),
            _ => format!(", {c} latent GPs"),
        };
        let how = match self.settings.q_step {
            QStep::Natural(rho) => format!(
                "natural-gradient steps on q(u), rho = {}",
                crate::error::num(rho)
            ),
            QStep::Adam => "Adam on q(u)".to_string(),
        };
        let per = match self.inducing.width {
            Some(w) => format!(
                " per latent GP, each on its own group of {w} feature{}",
                if w == 1 { "" } else { "s" }
            ),
            None => String::new(),
        };
        r.line(format!(
            "engine: sparse variational GP ({n} points, {m} inducing points{per}{cls}; batch {}, {how})",
            self.settings.batch.min(n)
        ));
        if let Some(net) = &self.net {
            r.line(format!(
                "deep kernel: the base kernel sees the outputs of the network {} ({} weights learned, N(0, {}²) prior on each)",
                net.spec.describe(),
                net.weights.len(),
                self.settings.weight_prior
            ));
            r.field(
                "network",
                json!({"shape": net.spec, "weights": net.weights.len()}),
            );
        }
        if let Some(file) = &self.loaded_from {
            r.line(format!(
                "read from the saved fit {file}: the predictions below come from it without training again"
            ));
            r.field("saved_fit", file.clone());
        }
        let elbo = if self.elbo.is_nan() {
            "not computed (interrupted)".to_string()
        } else {
            fixed(self.elbo, 6)
        };
        r.line(format!(
            "ELBO over the training data: {elbo} after {} step{} in {:.2} s ({})",
            self.run.steps,
            if self.run.steps == 1 { "" } else { "s" },
            self.run.seconds,
            self.run.reason
        ));
        let z = self.inducing.rows();
        r.field("elbo", self.elbo)
            .field_ser("elbo_trace", &self.run.trace)
            .field("steps", self.run.steps)
            .field("seconds", self.run.seconds)
            .field("reason", self.run.reason.clone())
            .field("hypers", hypers_json(b, &self.hypers))
            .field("learned", json!(self.model.layout.names(b)))
            .field("n", n)
            .field("inducing_points", m)
            .field("latent_gps", c)
            .field("z", json!(z))
            .field(
                "q_mean",
                json!(
                    self.qs
                        .iter()
                        .map(|q| q.z.as_slice().to_vec())
                        .collect::<Vec<_>>()
                ),
            );
        self.rule_error.report(&mut r, self.elbo);
        if let Some(lp) = self.log_prior {
            r.line(format!(
                "log prior of the hypers: {} (MAP-II objective ELBO + log prior {})",
                fixed(lp, 6),
                fixed(self.elbo + lp, 6)
            ));
            r.field("log_prior", lp).field("objective", self.elbo + lp);
        }
        if !b.graph.hypers.is_empty() {
            r.line("hypers:");
            r.lines(hypers_table(b, &self.hypers, &self.model.layout));
        }
        for note in self.all_notes() {
            r.note(note);
        }
        test_report(&mut r, self.test.as_ref(), self.predictions.as_ref());
        r
    }
}

/// The sparse variational fit behind a [`tempest_infer::fit::Fit`] trait object (an
/// engine's fit is its own type; `fit.as_svi()` with this trait in scope,
/// or `fit.downcast_ref::<SviFit>()`).
pub trait AsSvi {
    /// The sparse variational (`svi`) fit, if this is one.
    fn as_svi(&self) -> Option<&SviFit>;
}

impl AsSvi for dyn tempest_infer::fit::Fit {
    fn as_svi(&self) -> Option<&SviFit> {
        self.downcast_ref()
    }
}
