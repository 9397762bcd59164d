//! Model evidence by thermodynamic integration over power posteriors, with
//! optional control variates for each rung's mean and variance of the log
//! likelihood.

pub mod def;
pub mod engine;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
