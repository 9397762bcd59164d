//! Scalars, special functions, dense linear algebra and its adjoint rules
//! (the matrix-level reverse mode).

#![warn(missing_docs)]

pub mod adjoint;
pub mod factor;
pub mod factor_inverse;
pub mod lbfgs;
pub mod linalg;
pub mod lse;
pub mod ode;
pub mod optim;
pub mod pool;
pub mod quadrature;
pub mod reverse;
pub mod scalar;
pub mod simd;
pub mod tape;
pub mod tasks;
pub mod vector;
