//! Scalars, special functions and dense linear algebra.

pub mod linalg;
pub mod scalar;
