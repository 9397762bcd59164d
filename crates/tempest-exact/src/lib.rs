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
pub mod objective;
pub mod predict;
pub mod saved;

use tempest_core::{error, limits};
use tempest_ir as ir;
use tempest_math as math;
