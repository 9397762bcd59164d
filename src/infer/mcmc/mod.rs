//! Markov chain Monte Carlo over a model's params: the log density and its
//! gradient, the samplers (MALA, HMC, NUTS) with adaptation, and
//! diagnostics.

pub mod density;
pub mod tape;
