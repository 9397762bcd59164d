//! Model evidence by thermodynamic integration over power posteriors, with
//! optional control variates for each rung's mean and variance of the log
//! likelihood.

#![warn(missing_docs)]

pub mod def;
pub mod engine;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;

use tempest_core::{error, limits};
use tempest_mc as mc;
