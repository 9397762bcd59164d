//! The saved form of an exact fit (see [`crate::infer::saved`]): the
//! training data, the settings and θ; read back, the factorisation at θ is
//! recomputed and its log marginal likelihood checked against the saved one.

use super::def::ExactSettings;
use super::fit::ExactFit;
use super::model::ExactModel;
use crate::error::{Error, ErrorKind};
use crate::infer::fit::Fit;
use crate::infer::saved::{bad, data_json, header, numbers, restore_full_data};
use crate::infer::settings::{EngineConfig, Settings};
use crate::ir::bind::Bound;
use crate::ir::graph::Graph;
use serde_json::{Value as Json, json};
use std::sync::Arc;

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
pub fn restore(graph: Graph, j: &Json, file: &str) -> Result<(Box<dyn Fit>, Bound), Error> {
    let (bound, cfg, _) = restore_full_data(graph, j, file, "exact")?;
    let s = ExactSettings::from_config(&cfg)?;
    let sec = j
        .get("exact")
        .ok_or_else(|| bad(file, "no `exact` section"))?;
    let theta = numbers(sec.get("theta")).ok_or_else(|| bad(file, "theta"))?;
    let model = ExactModel::new(Arc::new(bound.clone()), &s)?;
    if theta.len() != model.layout.len {
        return Err(bad(file, "the learned hypers do not match the model's"));
    }
    let state = model.lml(&theta)?;
    let saved = sec
        .get("log_marginal_likelihood")
        .and_then(Json::as_f64)
        .ok_or_else(|| bad(file, "log_marginal_likelihood"))?;
    if (state.lml - saved).abs() > 1e-8 * saved.abs().max(1.0) {
        return Err(Error::new(
            ErrorKind::Data,
            format!(
                "{file}: the saved fit does not reproduce its log marginal likelihood ({} against the saved {}): the file was changed",
                crate::error::num(state.lml),
                crate::error::num(saved)
            ),
        ));
    }
    let trace = numbers(sec.get("trace")).unwrap_or_default();
    let iterations = sec.get("iterations").and_then(Json::as_u64).unwrap_or(0) as usize;
    let reason = sec
        .get("reason")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let converged = sec
        .get("converged")
        .and_then(Json::as_bool)
        .unwrap_or(false);
    // The optimiser's record as the run left it: the summary's gradient
    // norm and evaluation count are the run's.
    let gradient = numbers(sec.get("gradient"))
        .filter(|g| g.len() == theta.len())
        .ok_or_else(|| bad(file, "gradient"))?;
    let mut fit = ExactFit::new(
        model, theta, state, gradient, iterations, trace, reason, converged,
    );
    fit.evaluations = sec.get("evaluations").and_then(Json::as_u64).unwrap_or(0) as usize;
    Ok((Box::new(fit), bound))
}
