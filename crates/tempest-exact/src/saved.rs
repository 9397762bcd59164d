//! The saved form of an exact fit (see [`tempest_infer::saved`]): the
//! training data, the settings and θ; read back, the factorisation at θ is
//! recomputed and its log marginal likelihood checked against the saved one.

use super::fit::ExactFit;
use super::model::ExactModel;
use super::settings::ExactSettings;
use crate::error::{Error, ErrorKind};
use crate::ir::graph::Graph;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use tempest_infer::saved::{data_json, header, read_theta, restore_full_data};
use tempest_infer::saved_json::Field;
use tempest_infer::settings::{EngineConfig, Settings};

impl ExactFit {
    /// The saved form; `model` names the model file, `cfg` is the run's
    /// engine configuration.
    pub fn saved_json(&self, model: &str, cfg: &EngineConfig) -> Json {
        let b = &self.model.bound;
        let mut m = header("exact", model, b, &self.hypers, Some(cfg));
        m.insert("data".into(), data_json(b));
        m.insert(
            "exact".into(),
            json!({
                "theta": self.theta,
                "log_marginal_likelihood": self.log_marginal_likelihood,
                "iterations": self.iterations,
                "evaluations": self.evaluations,
                "gradient": self.gradient,
                "reason": self.reason,
                "converged": self.converged,
                "trace": self.trace,
            }),
        );
        Json::Object(m)
    }
}

/// Rebuild a saved exact fit for `graph`.
pub fn restore(graph: Graph, j: &Json, file: &str) -> tempest_infer::seam::Restored {
    let (bound, cfg, _) = restore_full_data(graph, j, file, &super::settings::SCHEMA)?;
    let s = ExactSettings::from_config(&cfg)?;
    let root = Field::root(file, j);
    let sec = root.get("exact");
    sec.object()?;
    let model = ExactModel::new(Arc::new(bound.clone()), &s)?;
    // θ, and the hypers written beside it (an edit of either is named
    // at its field); then θ must reproduce the run.
    let theta = read_theta(&root, &sec.get("theta"), &bound, &model.layout)?;
    let saved = sec.get("log_marginal_likelihood").number()?;
    let state = model.lml(&theta).map_err(|e| {
        e.with_note(format!(
            "while recomputing the log marginal likelihood of the fit saved in {file}"
        ))
    })?;
    if !state.lml.is_finite() || (state.lml - saved).abs() > 1e-8 * saved.abs().max(1.0) {
        return Err(Error::new(
            ErrorKind::Data,
            format!(
                "{file}: the saved fit does not reproduce its log marginal likelihood ({} against the saved {}): the file was changed",
                crate::error::num(state.lml),
                crate::error::num(saved)
            ),
        ));
    }
    // The optimiser's record as the run left it: the summary's gradient
    // norm and evaluation count are the run's.
    let trace = sec
        .get("trace")
        .record(None, "the log marginal likelihood by iteration")?;
    let iterations = sec.get("iterations").count(0)?;
    let evaluations = sec.get("evaluations").count(0)?;
    let reason = sec.get("reason").str()?.to_string();
    let converged = sec.get("converged").bool()?;
    let gradient = sec
        .get("gradient")
        .record(Some(theta.len()), "the gradient at θ")?;
    let mut fit = ExactFit::new(
        model, theta, state, gradient, iterations, trace, reason, converged,
    );
    fit.evaluations = evaluations;
    Ok((Box::new(fit), bound))
}
