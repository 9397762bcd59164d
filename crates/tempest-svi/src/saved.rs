//! A saved `svi` fit: everything prediction needs (the hypers, Z, q(u) and
//! the settings that shape predictions), written as versioned JSON by
//! `tempest run --save FIT.json` and read back by `tempest predict`, which
//! predicts at new data without training again.
//!
//! The file (`"format": "tempest fit"`, `"version": 1`) holds `engine`,
//! `model` (the file name), `graph` (the model's printed IR without its
//! `infer` line, checked against the model given to `predict`), `hypers`
//! (every hyper's value by name), `theta` (the learned hypers on the
//! unconstrained scale, exactly), `base` (the training data's first row in
//! Stan's JSON convention: the values prediction reuses when the test data
//! lacks them, such as scalars), `temperature`, and `svi`: `n` (training
//! points), `elbo`, `steps`, `seconds`, `reason`, `trace` (the epoch trace:
//! `step`, `seconds`, `elbo`), `settings` (`quadrature`,
//! `bins`, `jitter`, `learn_hypers`), `z` (M rows of D; with feature groups the
//! G sets of M rows of W one after another) and `q` (per latent
//! GP the whitened mean `mean` \[M\] and lower-triangular factor `factor`
//! [M, M] as rows), and with a deep kernel `network`: `shape` (`input`,
//! `widths`, `activation`) and `weights` (laid out as in
//! [`crate::model::network`]); Z then holds M rows of features.

use super::def::{SVI_SCHEMA, SviSettings};
use super::fit::{Learned, SviFit, TracePoint};
use super::sets::InducingSets;
use super::sparse::Inducing;
use crate::error::Error;
use crate::ir::bind::Bound;
use crate::ir::graph::Graph;
use crate::model::kernel::Inputs;
use crate::model::network::{NetSpec, Network};
use serde_json::{Value as Json, json};
use std::sync::Arc;
use tempest_infer::saved::{check_header, data_json, header, read_theta, restore_bound, rows_json};
use tempest_infer::saved_json::Field;
use tempest_infer::settings::{EngineConfig, Settings};
use tempest_variational::expect::{Rule, RuleError};
use tempest_variational::model::ViModel;
use tempest_variational::saved::read_qs;

impl SviFit {
    /// The saved form of this fit; `model` names the model file.
    pub fn saved(&self, model: &str) -> Result<Json, Error> {
        let b = &self.model.bound;
        let o = &b.graph.observations[self.model.latent.obs];
        let first = match b.leading_size(o.data) {
            Some(size) if !self.model.y.is_empty() => b.gather_rows(size, &[0])?,
            _ => (**b).clone(),
        };
        let base = data_json(&first);
        let q: Vec<Json> = self
            .qs
            .iter()
            .map(|q| json!({"mean": q.z.iter().collect::<Vec<_>>(), "factor": rows_json(&q.r)}))
            .collect();
        let s = &self.settings;
        let network = self
            .net
            .as_ref()
            .map(|n| json!({"shape": n.spec, "weights": n.weights}));
        let mut m = header("svi", model, b, &self.hypers, None);
        m.insert("theta".into(), json!(self.theta));
        m.insert("base".into(), base);
        m.insert(
            "svi".into(),
            json!({
                "n": self.n_train,
                "elbo": self.elbo,
                "steps": self.run.steps,
                "seconds": self.run.seconds,
                "reason": self.run.reason,
                "trace": self.run.trace,
                "settings": {
                    "quadrature": s.quadrature,
                    "bins": s.bins,
                    "jitter": s.jitter,
                    "learn_hypers": s.learn_hypers,
                },
                "z": self.inducing.rows(),
                "q": q,
                "network": network,
            }),
        );
        Ok(Json::Object(m))
    }

    /// Rebuild a saved fit for `graph` (the model given to `predict`) from
    /// the file's JSON; `file` names it in messages. Returns the fit and
    /// the bound base data (to bind test data against).
    pub fn restore(graph: Graph, j: &Json, file: &str) -> Result<(SviFit, Bound), Error> {
        let root = Field::root(file, j);
        if check_header(&graph, j, file)? != "svi" {
            return Err(root.get("engine").expected("\"svi\""));
        }
        let base = restore_bound(graph, j, file, "base", "the training data's first row")?;
        let svi = root.get("svi");
        svi.object()?;
        let set = svi.get("settings");
        set.object()?;
        // The saved settings go through the schema's own checks.
        let mut cfg = EngineConfig::defaults(&SVI_SCHEMA, Default::default());
        for key in ["quadrature", "bins", "jitter", "learn_hypers"] {
            let f = set.get(key);
            let text = match f.raw() {
                Some(Json::Number(x)) => x.to_string(),
                Some(Json::Bool(b)) => b.to_string(),
                _ => return Err(f.expected("a number or true/false (the setting's value)")),
            };
            cfg.set(key, &text)
                .map_err(|e| f.error(format!("the setting `{key}`: {}", e.message)))?;
        }
        let s = SviSettings::from_config(&cfg)?;
        let base = Arc::new(base);
        let model = ViModel::sparse(base.clone(), s.learn_hypers, s.jitter, "svi")?;
        // θ, and the hypers written beside it (an edit of either is named
        // at its field).
        let theta = read_theta(&root, &root.get("theta"), &base, &model.layout)?;
        let net = match &model.deep {
            Some(d) => {
                let n = svi.get("network");
                let shape_field = n.get("shape");
                let shape: Option<NetSpec> = shape_field
                    .raw()
                    .and_then(|v| serde_json::from_value(v.clone()).ok());
                if shape.as_ref() != Some(&d.spec) {
                    return Err(shape_field.expected(&format!(
                        "the shape of the model's network, {}",
                        d.spec.describe()
                    )));
                }
                let weights = n
                    .get("weights")
                    .numbers(Some(d.spec.len()), "the network's weights")?;
                Some(Network::new(d.spec.clone(), weights)?)
            }
            None => None,
        };
        let groups = model.deep.as_ref().and_then(|d| d.groups);
        let features = net
            .as_ref()
            .map_or(model.inputs.dim(), |n| n.spec.features());
        let (sets, dim) = match groups {
            Some(g) => (g, features / g.max(1)),
            None => (1, features),
        };
        let z_field = svi.get("z");
        let rows = z_field.items(None, "rows (the inducing inputs)")?.len();
        if rows == 0 || rows % sets != 0 {
            return Err(z_field.expected(&format!(
                "a positive multiple of {sets} rows (the inducing inputs of {sets} set{})",
                if sets == 1 { "" } else { "s" }
            )));
        }
        let z = z_field.matrix(
            (rows, dim),
            &format!("the inducing inputs, {dim} columns as the model's inputs"),
        )?;
        let mm = z.nrows() / sets;
        let qs = read_qs(&svi.get("q"), model.latents, mm, "inducing point")?;
        let pieces = model.pieces_rows::<f64>(&theta, &[0][..model.y.len().min(1)])?;
        let zs: Vec<Inputs> = (0..sets)
            .map(|k| Inputs::from_matrix(&z.rows(k * mm, mm).into_owned()))
            .collect();
        let width = groups.map(|_| dim);
        let on_grid = matches!(
            tempest_variational::guide::guide_family(&model.bound, &super::def::SVI)?,
            Some(crate::ir::graph::Family::Grid { .. })
        );
        let inducing = if on_grid {
            // The grid from its nodes: the first and the spacing.
            let sets = zs
                .iter()
                .map(|z: &Inputs| {
                    let nodes = z.as_flat();
                    let step = nodes.get(1).map_or(0.0, |b| b - nodes[0]);
                    if z.dim() != 1
                        || nodes.len() < super::grid::MIN_GRID
                        || step.is_nan()
                        || step <= 0.0
                    {
                        return Err(z_field.expected(&format!(
                            "the nodes of a regular grid: at least {} increasing values",
                            super::grid::MIN_GRID
                        )));
                    }
                    let grid = super::grid::Grid {
                        lo: nodes[0],
                        step,
                        m: nodes.len(),
                    };
                    Inducing::on_grid(&pieces.kernel, grid, s.jitter)
                })
                .collect::<Result<_, _>>()?;
            InducingSets { sets, width }
        } else {
            InducingSets::new(&pieces.kernel, zs, width, s.jitter)?
        };
        let rule = Rule::for_model(&model, s.quadrature);
        let mut fit = SviFit::assemble(
            Arc::new(model),
            s,
            rule,
            Learned {
                theta,
                pieces,
                inducing,
                qs,
                net,
            },
        );
        fit.n_train = svi.get("n").count(1)?;
        // A fit saved from a run stopped before its whole-data pass has no
        // ELBO (null).
        fit.elbo = svi.get("elbo").number_or_nan()?;
        fit.run.steps = svi.get("steps").count(0)?;
        fit.run.seconds = svi.get("seconds").number_or_nan()?;
        fit.run.reason = svi.get("reason").str()?.to_string();
        let trace = svi.get("trace");
        fit.run.trace = trace
            .items(None, "objects (the ELBO by epoch)")?
            .iter()
            .map(|p| {
                Ok(TracePoint {
                    step: p.get("step").count(0)?,
                    seconds: p.get("seconds").number_or_nan()?,
                    elbo: p.get("elbo").number_or_nan()?,
                })
            })
            .collect::<Result<_, Error>>()?;
        fit.rule_error = RuleError::new(&fit.rule, 0.0, None);
        fit.loaded_from = Some(file.to_string());
        Ok((fit, (*base).clone()))
    }
}
