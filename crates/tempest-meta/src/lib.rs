//! Engines the language knows but this version does not run (`meta`): their settings are checked like any other's, so a model file
//! written for them is validated now; running one is a located error.

#![warn(missing_docs)]

use std::sync::Arc;
use tempest_core::error::Error;
use tempest_infer::engine::Engine;
use tempest_infer::seam::{Accepts, BuildCx, Def};
use tempest_infer::settings::{EngineConfig, EngineSchema, Nested, Role, SEED, SettingKind, s};
use tempest_ir::bind::Bound;

/// The `meta` engine's settings.
pub const META_SCHEMA: EngineSchema = EngineSchema {
    name: "meta",
    implemented: false,
    doc: "meta-learning over many small tasks",
    roles: &[],
    settings: &[
        s(
            "episodes",
            SettingKind::Int(1, 10_000_000),
            Some("1000"),
            "training episodes",
        ),
        s(
            "ways",
            SettingKind::Int(1, 1000),
            Some("5"),
            "classes per task",
        ),
        s(
            "shots",
            SettingKind::Int(1, 10_000),
            Some("1"),
            "examples per class",
        ),
        s(
            "queries",
            SettingKind::Int(1, 10_000),
            Some("15"),
            "query examples per class",
        ),
        s(
            "inner",
            SettingKind::Engine(Nested(Role::PerTask)),
            Some("mirror_descent { steps = 3, rho = 1 }"),
            "the per-task inference",
        ),
        s(
            "lr",
            SettingKind::Above(0.0, f64::INFINITY),
            Some("0.001"),
            "outer learning rate",
        ),
        SEED,
    ],
};

/// The registered (not yet available) `meta` engine.
pub const META: Def = Def {
    schema: &META_SCHEMA,
    accepts: Accepts::NOTHING,
    build: unavailable,
    restore: None,
};

/// Building an engine this version does not have: the error naming the
/// engines that are available.
fn unavailable(_: Arc<Bound>, cfg: &EngineConfig, cx: &BuildCx) -> Result<Box<dyn Engine>, Error> {
    Err(tempest_infer::seam::unavailable(
        cfg.schema, cfg, cx.engines,
    ))
}
