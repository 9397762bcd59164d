//! Exact GP regression: log marginal likelihood, its gradient, predictions,
//! and type-II maximum likelihood of the hypers by L-BFGS.

#![warn(missing_docs)]

pub mod def;
pub mod diagnose;
pub mod engine;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
pub mod model;
pub mod predict;
pub mod saved;
pub mod settings;

/// The log marginal likelihood and its gradient (the shared GP model's).
pub use tempest_gp::objective;

use tempest_core::error;
use tempest_ir as ir;
use tempest_math as math;
