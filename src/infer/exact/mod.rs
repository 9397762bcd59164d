//! Exact GP regression: log marginal likelihood, its gradient, predictions,
//! and type-II maximum likelihood of the hypers by L-BFGS.

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
