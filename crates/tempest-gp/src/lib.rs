//! The Gaussian-process marginal likelihood that engines share: a model
//! whose one latent GP is observed through a Gaussian likelihood, read off
//! the graph ([`model::GpModel`]), and its log marginal likelihood,
//! gradient and Cholesky factor ([`objective`]). The `exact` engine learns
//! its hypers and predicts with it; the samplers integrate such a GP out
//! when its kernel or noise depends on params. A library above the engine
//! seam and below the engines, so that neither engine imports the other.

#![warn(missing_docs)]

pub mod model;
pub mod objective;

use tempest_core::{error, limits};
use tempest_ir as ir;
use tempest_math as math;
