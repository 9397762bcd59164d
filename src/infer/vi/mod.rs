//! Variational inference for GP models with any factorised likelihood:
//! mirror descent (conjugate-computation VI in natural parameters) and the
//! gradient-descent baseline on the same ELBO.

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
