//! Scalars, special functions and dense linear algebra.

pub mod scalar;
