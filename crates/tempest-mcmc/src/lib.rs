//! The samplers' engines (MALA, HMC, NUTS) over a model's params and their
//! fits: reports, predictions, saved fits, summaries merged across runs,
//! prior draws and control-variate estimates. The log density and the
//! chains are the samplers' library (`tempest-samplers`). The diagnostics of draws are `crate::mc::diagnostics`.

#![warn(missing_docs)]

/// The samplers' library, at their old paths.
pub use tempest_samplers::{adapt, chain, density, hamiltonian, low_rank, same_run};
pub mod def;
/// The diagnostics of draws (R-hat, ESS, MCSE), at their old path.
pub use crate::mc::diagnostics;
pub mod engine;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
pub mod merge;
pub mod predict;
pub mod prior;
pub mod saved;

use tempest_core::{error, limits};
use tempest_ir as ir;
use tempest_math as math;
use tempest_mc as mc;
use tempest_model as model;
use tempest_syntax as syntax;
