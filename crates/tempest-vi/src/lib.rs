//! Variational inference for GP models with any factorised likelihood:
//! mirror descent (conjugate-computation VI in natural parameters) and the
//! gradient-descent baseline on the same ELBO.

#![warn(missing_docs)]

pub mod core;
pub mod cost;
pub mod def;
pub mod expect;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
pub mod gd;
pub mod lik_adjoint;
pub mod mirror;
pub mod model;
pub mod posterior;
pub mod predict;
pub mod saved;

use tempest_core::{error, interrupt, limits};
use tempest_ir as ir;
use tempest_math as math;
use tempest_syntax as syntax;
