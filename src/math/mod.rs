//! Scalars, special functions and dense linear algebra.

pub mod lbfgs;
pub mod linalg;
pub mod optim;
pub mod quadrature;
pub mod scalar;
