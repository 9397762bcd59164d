//! Variational inference for GP models with any factorised likelihood:
//! mirror descent (conjugate-computation VI in natural parameters) and the
//! gradient-descent baseline on the same ELBO. The model, the posteriors,
//! the expectations and the predictions they share with the sparse engine
//! are the variational library's (`tempest-variational`), re-exported here
//! at their old paths.

#![warn(missing_docs)]

pub mod core;
pub mod cost;
pub mod def;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
pub mod gd;
pub mod mirror;
pub mod predict;
pub mod saved;
pub mod settings;
/// The variational library's modules, at their old paths.
pub use tempest_variational::{expect, lik_adjoint, model, posterior};

use tempest_core::{error, limits};
use tempest_ir as ir;
use tempest_math as math;
