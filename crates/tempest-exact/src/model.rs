//! The exact engine's model: the shared Gaussian-process marginal
//! likelihood ([`tempest_gp::model::GpModel`]) recognised with this
//! engine's settings. Its fields and the objective's methods
//! ([`tempest_gp::objective`]) are reached through it as through the
//! shared model.

use super::settings::ExactSettings;
use crate::error::Error;
use crate::ir::bind::Bound;
use std::sync::Arc;
use tempest_gp::objective::LmlState;
use tempest_infer::hypers::HyperLayout;
use tempest_infer::structure::latent_observation;

pub use tempest_gp::model::{GpModel, Pieces};

/// A model in the form the exact engine solves: the shared GP model, with
/// the hypers the settings learn.
#[derive(Clone)]
pub struct ExactModel(pub GpModel);

impl ExactModel {
    /// Recognise the exact-GP structure of a bound model.
    pub fn new(bound: Arc<Bound>, s: &ExactSettings) -> Result<ExactModel, Error> {
        let lo = latent_observation(&bound, "exact")?;
        let layout = HyperLayout::new(&bound, s.learn_hypers);
        GpModel::from_structure(
            bound,
            &lo,
            layout,
            (s.jitter, s.max_jitter),
            tempest_gp::model::EXACT,
        )
        .map(ExactModel)
    }

    /// The weight of the gradient at a state ([`GpModel::weight`]).
    pub fn weight(state: &LmlState) -> Option<tempest_math::adjoint::LmlWeight> {
        GpModel::weight(state)
    }
}

impl std::ops::Deref for ExactModel {
    type Target = GpModel;
    fn deref(&self) -> &GpModel {
        &self.0
    }
}

impl std::ops::DerefMut for ExactModel {
    fn deref_mut(&mut self) -> &mut GpModel {
        &mut self.0
    }
}
