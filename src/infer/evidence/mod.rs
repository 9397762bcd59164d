//! Model evidence by thermodynamic integration over power posteriors, with
//! optional control variates for each rung's mean and variance of the log
//! likelihood.

pub mod def;
pub mod engine;
pub mod fit;
