//! tempest: a probabilistic-programming language for Gaussian-process models.

pub mod data;
pub mod error;
pub mod infer;
pub mod ir;
pub mod math;
pub mod model;
pub mod semantic;
pub mod syntax;
