//! Monte Carlo post-processing on plain arrays: diagnostics of draws
//! (R-hat, ESS, MCSE, quantiles, E-BFMI), Stein kernels and control
//! variates (polynomial, control functionals, semi-exact control
//! functionals, vector-valued), usable on draws from any engine.

#![warn(missing_docs)]

pub mod control_variates;
pub mod diagnostics;
pub mod spec;
pub mod stein;
pub mod vector_valued;
