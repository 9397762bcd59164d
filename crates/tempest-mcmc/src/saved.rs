//! The saved form of a sampling run (see [`tempest_infer::saved`]): the
//! training data, the settings, and at most `predictive_draws` draws
//! (evenly spaced over the chains) on the unconstrained scale — what the
//! posterior predictive needs. Read back, it is a [`SavedDraws`] fit that
//! predicts at test data exactly as the run would have (the same draws,
//! the same seed).

use super::density::Density;
use super::fit::McmcFit;
use super::predict::{SamplerPredictions, predict, spaced};
use crate::error::Error;
use crate::ir::bind::Bound;
use crate::ir::graph::Graph;
use serde_json::{Value as Json, json};
use std::sync::Arc;
use tempest_infer::fit::Fit;
use tempest_infer::saved::{data_json, header, restore_full_data};
use tempest_infer::saved_json::Field;
use tempest_infer::settings::EngineConfig;
use tempest_output::report::Report;

impl McmcFit {
    /// The saved form; `model` names the model file, `cfg` is the run's
    /// engine configuration.
    pub fn saved_json(&self, model: &str, cfg: &EngineConfig) -> Json {
        let b = &self.density.bound;
        let mut m = header(self.engine, model, b, &self.density.hypers, Some(cfg));
        m.insert("data".into(), data_json(b));
        let qs: Vec<&Vec<f64>> = self.draws.iter().flatten().map(|d| &d.q).collect();
        let positions: Vec<&Vec<f64>> = spaced(qs.len(), self.predictive_draws)
            .into_iter()
            .map(|i| qs[i])
            .collect();
        m.insert(
            "draws".into(),
            json!({
                "chains": self.draws.len(),
                "kept": self.kept(),
                "seed": self.seed,
                "predictive_draws": self.predictive_draws,
                "positions": positions,
            }),
        );
        Json::Object(m)
    }
}

/// A sampling run read back from a saved fit: its draws, for predictions.
pub struct SavedDraws {
    /// `nuts`, `hmc` or `mala`.
    pub engine: &'static str,
    /// The model's density (for transforms and the latent GP).
    pub density: Arc<Density>,
    /// The saved draws, unconstrained \[draws\]\[dimension\].
    pub positions: Vec<Vec<f64>>,
    /// Chains and draws per chain of the run.
    pub chains: (usize, usize),
    /// The run's seed.
    pub seed: u64,
    /// The file it was read from.
    pub file: String,
    /// The posterior predictive at test data, once attached.
    pub predictions: Option<SamplerPredictions>,
}

/// Rebuild a saved sampling run of `engine` for `graph`.
pub fn restore(
    graph: Graph,
    j: &Json,
    file: &str,
    engine: &'static tempest_infer::settings::EngineSchema,
) -> tempest_infer::seam::Restored {
    let (bound, _, name) = restore_full_data(graph, j, file, engine)?;
    let density = Density::new(Arc::new(bound.clone()))?;
    let sec = Field::root(file, j).get("draws");
    sec.object()?;
    let chains = sec.get("chains").count(1)?;
    // Draws per chain (the shortest chain's, after a stop).
    let kept = sec.get("kept").count(0)?;
    let seed = sec.get("seed").u64()?;
    let most = sec.get("predictive_draws").count(1)?;
    let positions_field = sec.get("positions");
    let items = positions_field.items(None, "draws")?;
    if items.is_empty() || items.len() > most {
        return Err(
            positions_field.expected(&format!("from 1 to {most} draws (`predictive_draws`)"))
        );
    }
    let positions: Vec<Vec<f64>> = items
        .iter()
        .map(|p| {
            p.numbers(
                Some(density.dim),
                "a draw on the sampler's unconstrained scale",
            )
        })
        .collect::<Result<_, _>>()?;
    let fit = SavedDraws {
        engine: name,
        density: Arc::new(density),
        positions,
        chains: (chains, kept),
        seed,
        file: file.to_string(),
        predictions: None,
    };
    Ok((Box::new(fit), bound))
}

impl Fit for SavedDraws {
    fn engine(&self) -> &'static str {
        self.engine
    }

    fn report(&self) -> Report {
        let mut r = Report::new(self.engine);
        r.line(format!(
            "engine: {} (saved fit {}: {} draws of {} chains × {} draws)",
            self.engine,
            self.file,
            self.positions.len(),
            self.chains.0,
            self.chains.1
        ));
        r.field("saved_fit", self.file.clone());
        if let Some(p) = &self.predictions {
            p.report_into(&mut r, self.engine);
        }
        r
    }

    fn attach_test(&mut self, test: &Bound) -> Result<(), Error> {
        let qs: Vec<&[f64]> = self.positions.iter().map(Vec::as_slice).collect();
        self.predictions = Some(predict(
            &self.density,
            &qs,
            test,
            self.positions.len(),
            self.seed,
        )?);
        Ok(())
    }

    fn hyper(&self, name: &str) -> Option<Vec<f64>> {
        tempest_infer::fit::hyper_by_name(&self.density.bound.graph, &self.density.hypers, name)
    }

    #[cfg(feature = "plot")]
    /// The fit (the posterior predictive at the training and test points)
    /// of a model with a latent GP on one input column.
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, Error> {
        let draws = super::figure::SamplerDraws {
            engine: self.engine,
            density: &self.density,
            qs: self.positions.iter().map(Vec::as_slice).collect(),
            limit: self.positions.len(),
            seed: self.seed,
            test: self.predictions.as_ref(),
        };
        if super::figure::sampler_fit(&draws, path)? {
            Ok(vec![path.to_path_buf()])
        } else {
            Err(Error::new(
                crate::error::ErrorKind::Unsupported,
                "--plot with a saved sampler fit draws the fit of a latent GP on one input column with numeric outcomes; this model has none (its traces are in the run's --plot)",
            ))
        }
    }
}
