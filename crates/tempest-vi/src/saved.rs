//! The saved form of a mirror- or gradient-descent fit (see
//! [`tempest_infer::saved`]): the training data, the settings, θ and each
//! latent GP's q in whitened form; read back, the prior at θ is rebuilt and
//! the ELBO recomputed and checked against the saved one.

use super::core::Core;
use super::fit::VariationalFit;
use super::model::ViModel;
use super::settings::ViSettings;
use crate::error::{Error, ErrorKind, num};
use crate::ir::graph::Graph;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use tempest_infer::saved::{data_json, header, read_theta, restore_full_data, rows_json};
use tempest_infer::saved_json::Field;
use tempest_infer::settings::{EngineConfig, Settings};
use tempest_variational::saved::read_qs;

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
    engine: &'static tempest_infer::settings::EngineSchema,
) -> tempest_infer::seam::Restored {
    let (bound, cfg, name) = restore_full_data(graph, j, file, engine)?;
    let s = ViSettings::from_config(&cfg)?;
    let model = ViModel::new(Arc::new(bound.clone()), s.learn_hypers, s.jitter, name)?;
    let root = Field::root(file, j);
    let sec = root.get("vi");
    sec.object()?;
    // θ, and the hypers written beside it (an edit of either is named
    // at its field); then θ and q must reproduce the run's ELBO.
    let theta = read_theta(&root, &sec.get("theta"), &bound, &model.layout)?;
    let n = model.inputs.len();
    let latents = model.latents;
    let mut core = Core::new(model, &s)?;
    core.theta = theta;
    core.refresh()?;
    let qs = read_qs(&sec.get("q"), latents, n, "training point")?;
    let steps = sec.get("steps").count(0)?;
    let reason = sec.get("reason").str()?.to_string();
    let saved_elbo = sec.get("elbo").number()?;
    // The fit's ELBO is the trace's last value, as in the run.
    let field = sec.get("trace");
    let trace = field.record(None, "the ELBO by step")?;
    if trace.last() != Some(&saved_elbo) {
        return Err(field.expected("the ELBO by step, ending at the saved `elbo`"));
    }
    let (_, elbo) = core.evaluate(&qs).map_err(|e| {
        e.with_note(format!(
            "while recomputing the ELBO of the fit saved in {file}"
        ))
    })?;
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
