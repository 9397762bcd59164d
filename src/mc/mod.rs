//! Monte Carlo post-processing on plain arrays: Stein kernels and control
//! variates (polynomial, control functionals, semi-exact control
//! functionals, vector-valued), usable on draws from any engine.

pub mod control_variates;
pub mod spec;
pub mod stein;
pub mod vector_valued;
