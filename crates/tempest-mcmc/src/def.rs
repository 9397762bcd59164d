//! The samplers' engines (`mala`, `hmc`, `nuts`): each a sampler of the
//! library (`tempest_samplers::settings::Sampler`: its settings, transition
//! and CmdStan name) registered as an engine that streams draws to the
//! run's sinks and ends in a fit; another engine finds the sampler through
//! [`EngineDef::as_sampler`].

use super::density::Density;
use super::engine::McmcEngine;
use crate::error::Error;
use crate::ir::Graph;
use crate::ir::bind::Bound;
use serde_json::Value as Json;
use std::sync::Arc;
use tempest_infer::engine::Engine;
use tempest_infer::seam::{Accepts, BuildCx, EngineDef, Restored, TestData};
use tempest_infer::settings::{EngineConfig, EngineSchema};

use tempest_samplers::settings::{Sampler, SamplerSettings};

/// A sampler as a registered engine: its draws stream to the run's sinks
/// and end in a fit that reports, predicts and is saved.
pub struct SamplerEngine(pub &'static Sampler);

/// The registered `mala` engine.
pub const MALA: SamplerEngine = SamplerEngine(&tempest_samplers::settings::MALA);

/// The registered `hmc` engine (CmdStan's static HMC).
pub const HMC: SamplerEngine = SamplerEngine(&tempest_samplers::settings::HMC);

/// The registered `nuts` engine (CmdStan's HMC with the NUTS engine).
pub const NUTS: SamplerEngine = SamplerEngine(&tempest_samplers::settings::NUTS);

impl EngineDef for SamplerEngine {
    fn schema(&self) -> &EngineSchema {
        self.0.schema
    }
    fn accepts(&self) -> Accepts {
        Accepts {
            test: TestData::Predicts,
            draw_sinks: true,
            families: &[],
            saves_fits: true,
            plot_params: true,
        }
    }
    fn build(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<Box<dyn Engine>, Error> {
        Ok(Box::new(McmcEngine::new(
            Density::new(bound)?,
            &SamplerSettings::read(self.0, cfg)?,
            &cx.sinks,
            &cx.model_name,
        )?))
    }
    fn restore(&self, graph: Graph, j: &Json, file: &str) -> Restored {
        super::saved::restore(graph, j, file, self.0.schema)
    }
    fn as_sampler(&self) -> Option<&dyn std::any::Any> {
        Some(self.0)
    }
}
