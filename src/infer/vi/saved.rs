//! The saved form of a mirror- or gradient-descent fit (see
//! [`crate::infer::saved`]): the training data, the settings, θ and each
//! latent GP's q in whitened form; read back, the prior at θ is rebuilt and
//! the ELBO recomputed and checked against the saved one.

use super::core::Core;
use super::def::ViSettings;
use super::fit::VariationalFit;
use super::model::ViModel;
use super::posterior::Whitened;
use crate::error::{Error, ErrorKind, num};
use crate::infer::fit::Fit;
use crate::infer::saved::{bad, data_json, header, matrix, numbers, restore_full_data, rows_json};
use crate::infer::settings::{EngineConfig, Settings};
use crate::ir::bind::Bound;
use crate::ir::graph::Graph;
use nalgebra::DVector;
use serde_json::{Value as Json, json};
use std::sync::Arc;

impl VariationalFit {
    /// The saved form; `model` names the model file, `cfg` is the run's
    /// engine configuration.
    pub fn saved_json(&self, model: &str, cfg: &EngineConfig) -> Json {
        let b = &self.core.model.bound;
        let mut m = header(self.engine, model, b, &self.hypers, Some(cfg));
        m.insert("data".into(), data_json(b));
        let q: Vec<Json> = self
            .qs
            .iter()
            .map(|q| json!({"mean": q.z.iter().collect::<Vec<_>>(), "factor": rows_json(&q.r)}))
            .collect();
        m.insert(
            "vi".into(),
            json!({
                "theta": self.core.theta,
                "elbo": self.elbo,
                "steps": self.steps,
                "reason": self.reason,
                "trace": self.trace,
                "q": q,
            }),
        );
        Json::Object(m)
    }
}

/// Rebuild a saved variational fit of `engine` for `graph`.
pub fn restore(
    graph: Graph,
    j: &Json,
    file: &str,
    engine: &str,
) -> Result<(Box<dyn Fit>, Bound), Error> {
    let (bound, cfg, name) = restore_full_data(graph, j, file, engine)?;
    let s = ViSettings::from_config(&cfg)?;
    let model = ViModel::new(Arc::new(bound.clone()), &s, name)?;
    let sec = j.get("vi").ok_or_else(|| bad(file, "no `vi` section"))?;
    let theta = numbers(sec.get("theta")).ok_or_else(|| bad(file, "theta"))?;
    if theta.len() != model.layout.len {
        return Err(bad(file, "the learned hypers do not match the model's"));
    }
    let n = model.inputs.len();
    let latents = model.latents;
    let mut core = Core::new(model, &s)?;
    core.theta = theta;
    core.refresh()?;
    let qs = sec
        .get("q")
        .and_then(Json::as_array)
        .filter(|q| q.len() == latents)
        .ok_or_else(|| bad(file, "q for each latent GP"))?
        .iter()
        .map(|q| {
            let mean = numbers(q.get("mean")).filter(|m| m.len() == n)?;
            let r = matrix(q.get("factor")).filter(|r| r.shape() == (n, n))?;
            Some(Whitened::from_factor(DVector::from_vec(mean), r))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad(file, "q's mean and factor"))?;
    let steps = sec.get("steps").and_then(Json::as_u64).unwrap_or(0) as usize;
    let reason = sec
        .get("reason")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let saved_elbo = sec
        .get("elbo")
        .and_then(Json::as_f64)
        .ok_or_else(|| bad(file, "elbo"))?;
    // The fit's ELBO is the trace's last value, as in the run.
    let trace = numbers(sec.get("trace"))
        .filter(|t| t.last() == Some(&saved_elbo))
        .ok_or_else(|| bad(file, "the ELBO trace, which ends at the saved ELBO"))?;
    let (_, elbo) = core.evaluate(&qs)?;
    if (elbo - saved_elbo).abs() > 1e-6 * saved_elbo.abs().max(1.0) {
        return Err(Error::new(
            ErrorKind::Data,
            format!(
                "{file}: the saved fit does not reproduce its ELBO ({} against the saved {}): the file was changed",
                num(elbo),
                num(saved_elbo)
            ),
        ));
    }
    let fit = VariationalFit::new(name, core, qs, trace, steps, reason)?;
    Ok((Box::new(fit), bound))
}
