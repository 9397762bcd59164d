//! The engine seam: what every engine implements and what the layers above
//! read — the engine definitions' traits ([`seam`]), the executor and its
//! observers ([`engine`]), fits ([`fit`]), draw sinks ([`sink`]), the
//! settings' schemas and typed reads ([`settings`]), saved-fit headers
//! ([`saved`], [`saved_json`]), the report every fit builds ([`report`]),
//! and the pieces several engines share (hypers, their priors and
//! gradients, bands, the model's structure).
//!
//! No engine is imported here, and nothing here imports the engines' list
//! (the facade's `infer::registry`): an engine crate depends on this one,
//! never the other way round.

#![warn(missing_docs)]

pub mod band;
pub mod engine;
pub mod finite;
pub mod fit;
pub mod gradients;
pub mod hyper_prior;
pub mod hypers;
pub mod report;
pub mod saved;
pub mod saved_json;
pub mod seam;
pub mod settings;
pub mod sink;
pub mod structure;

use tempest_core::error;
use tempest_data as data;
use tempest_ir as ir;
use tempest_math as math;
use tempest_mc as mc;
use tempest_model as model;
use tempest_syntax as syntax;

/// Whether this build draws figures (the `plot` feature).
pub const PLOTS: bool = cfg!(feature = "plot");

/// `Ok` when this build draws figures (the `plot` feature); otherwise the
/// error of everything that would draw one: "`what`: tempest was built without the `plot`
/// feature; rebuild with `--features plot`". `what` names the request
/// (`--plot`, `plot-trace`).
pub fn require_plot(what: &str) -> Result<(), error::Error> {
    if PLOTS {
        Ok(())
    } else {
        Err(error::Error::new(
            error::ErrorKind::Unsupported,
            format!(
                "{what}: tempest was built without the `plot` feature; rebuild with `--features plot` (a dependency: `features = [\"plot\"]`)"
            ),
        ))
    }
}
