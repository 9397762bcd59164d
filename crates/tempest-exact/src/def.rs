//! The `exact` engine's definition: what it accepts and how it is built
//! (its settings are `settings.rs`'s).

use super::settings::{ExactSettings, SCHEMA};
use super::{engine::ExactEngine, model::ExactModel};
use tempest_infer::seam::{Accepts, Def, TestData};
use tempest_infer::settings::Settings;

/// Exact GP regression (type-II ML or MAP-II of the hypers).
pub const EXACT: Def = Def {
    schema: &SCHEMA,
    accepts: Accepts {
        test: TestData::Predicts,
        saves_fits: true,
        ..Accepts::NOTHING
    },
    build: |bound, cfg, _| {
        let s = ExactSettings::from_config(cfg)?;
        Ok(Box::new(ExactEngine::new(ExactModel::new(bound, &s)?, &s)?))
    },
    restore: Some(super::saved::restore),
};
