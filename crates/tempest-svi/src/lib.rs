//! The `svi` engine: sparse variational GPs (whitened inducing points,
//! seed 004) trained on minibatches, with natural-gradient (mirror-descent)
//! steps on q(u) — seed 000's update on the sparse posterior — or Adam,
//! and Adam on the hypers and inducing inputs. Memory is linear in N:
//! nothing N × N or N × M is formed; batches are B × M.
//!
//! - [`sparse`]: the projection, marginals, reverse pass and natural step;
//! - [`kmeans`]: the initial inducing inputs; [`sets`]: one shared set of
//!   inducing points, or one per latent GP (additive groups);
//! - [`engine`]: the state machine; [`fit`]: the result; [`def`]: settings;
//! - [`saved`]: the saved fit (`--save`, `tempest predict`).

#![warn(missing_docs)]

pub mod def;
pub mod engine;
#[cfg(feature = "plot")]
pub mod figure;
pub mod fit;
pub mod grid;
pub mod kmeans;
pub mod saved;
pub mod sets;
pub mod sparse;

use tempest_core::{error, interrupt, limits};
use tempest_ir as ir;
use tempest_math as math;
use tempest_model as model;
#[cfg(test)]
use tempest_syntax as syntax;
