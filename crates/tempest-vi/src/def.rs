//! The variational engines' definitions (`mirror_descent`,
//! `gradient_descent`): the guide families they accept and how they are
//! built (their settings are `settings.rs`'s).

use super::cost::{Cost, Steps};
use super::gd::{GradientDescent, Param};
use super::mirror::MirrorDescent;
use super::model::ViModel;
use super::settings::{GD_SCHEMA, MIRROR_SCHEMA, ViSettings, words};
use crate::error::Error;
use crate::ir::Graph;
use crate::ir::bind::Bound;
use crate::ir::graph::Family;
use serde_json::Value as Json;
use std::sync::Arc;
use tempest_infer::engine::Engine;
use tempest_infer::seam::{Accepts, BuildCx, Def, EngineDef, Restored, TestData};
use tempest_infer::settings::{EngineConfig, EngineSchema, Settings};
use tempest_variational::guide::guide_family_among;

/// What both variational engines accept: test data, and a guide of one of
/// `families`.
const fn accepts(families: &'static [Family]) -> Accepts {
    Accepts {
        test: TestData::Predicts,
        draw_sinks: false,
        families,
        saves_fits: true,
        plot_params: false,
    }
}

/// A dense variational engine: its definition, and how its steps move q
/// (for the estimate of its cost, [`super::cost`]).
pub struct ViDef {
    /// The schema, what it accepts and its build.
    pub def: Def,
    /// `mirror_descent`, or `gradient_descent` (full-rank or mean-field
    /// by the guide).
    mirror: bool,
}

impl ViDef {
    /// The model and its estimated cost, refused when it exceeds the
    /// `max_minutes` setting.
    fn model_and_cost(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<(ViModel, ViSettings, Cost, Steps), Error> {
        let engine = self.def.schema.name;
        let steps = match guide_family_among(&bound, &self.def, cx.engines)? {
            _ if self.mirror => Steps::Mirror,
            Some(Family::MeanField) => Steps::MeanField,
            _ => Steps::FullRank,
        };
        let s = ViSettings::from_config(cfg)?;
        let model = ViModel::new(bound, s.learn_hypers, s.jitter, engine)?;
        let cost = super::cost::check(&model, &s, cfg, engine, steps)?;
        Ok((model, s, cost, steps))
    }
}

impl EngineDef for ViDef {
    fn schema(&self) -> &EngineSchema {
        self.def.schema
    }
    fn accepts(&self) -> Accepts {
        self.def.accepts
    }
    fn words(&self) -> &'static str {
        words(self.def.schema.name)
    }
    fn build(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<Box<dyn Engine>, Error> {
        let (model, s, cost, steps) = self.model_and_cost(bound, cfg, cx)?;
        let param = match steps {
            Steps::Mirror => {
                return Ok(Box::new(MirrorDescent::new(model, &s)?.with_cost(cost)));
            }
            Steps::MeanField => Param::MeanField,
            Steps::FullRank => Param::FullRank,
        };
        Ok(Box::new(
            GradientDescent::new(model, &s, param)?.with_cost(cost),
        ))
    }
    /// The estimated cost: a warning when the run is long, the build's
    /// error when it is longer than `max_minutes`.
    fn preflight(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<Vec<String>, Error> {
        let (_, _, cost, _) = self.model_and_cost(bound, cfg, cx)?;
        Ok(cost.warning().into_iter().collect())
    }
    fn restore(&self, graph: Graph, j: &Json, file: &str) -> Restored {
        super::saved::restore(graph, j, file, self.def.schema)
    }
}

/// Mirror-descent (conjugate-computation) variational inference.
pub const MIRROR_DESCENT: ViDef = ViDef {
    def: Def {
        schema: &MIRROR_SCHEMA,
        accepts: accepts(&[Family::Sites]),
        build: |_, _, _| Err(Error::internal("mirror_descent is built by its ViDef")),
        restore: None,
    },
    mirror: true,
};

/// Gradient-descent variational inference.
pub const GRADIENT_DESCENT: ViDef = ViDef {
    def: Def {
        schema: &GD_SCHEMA,
        accepts: accepts(&[Family::FullRank, Family::MeanField]),
        build: |_, _, _| Err(Error::internal("gradient_descent is built by its ViDef")),
        restore: None,
    },
    mirror: false,
};
