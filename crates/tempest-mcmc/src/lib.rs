//! Markov chain Monte Carlo over a model's params: the log density and its
//! gradient, the samplers (MALA, HMC, NUTS) with adaptation, and their
//! fits. The diagnostics of draws are `crate::mc::diagnostics`.

#![warn(missing_docs)]

pub mod adapt;
pub mod chain;
pub mod def;
pub mod density;
/// The diagnostics of draws (R-hat, ESS, MCSE), at their old path.
pub use crate::mc::diagnostics;
pub mod engine;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
pub mod hamiltonian;
pub mod low_rank;
pub mod merge;
pub mod predict;
pub mod prior;
pub mod same_run;
pub mod saved;

use tempest_core::{error, limits};
use tempest_ir as ir;
use tempest_math as math;
use tempest_mc as mc;
use tempest_model as model;
use tempest_syntax as syntax;
