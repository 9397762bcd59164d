//! tempest: a probabilistic-programming language for Gaussian-process models.

pub mod error;
pub mod math;
pub mod model;
pub mod syntax;
