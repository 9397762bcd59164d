//! Inference engines, their settings, the executor that drives them, and
//! their results.
//!
//! The seam every engine implements is its own crate (`tempest-infer`),
//! each engine is a crate above it (`tempest-exact`, `tempest-vi`,
//! `tempest-svi`, `tempest-mcmc`, `tempest-evidence`, `tempest-meta`) on
//! the libraries they share (`tempest-gp`, the GP marginal likelihood;
//! `tempest-samplers`, the log density and the chains;
//! `tempest-variational`, the variational model, posteriors, expectations
//! and predictions), and the one list
//! of them, [`registry`], lives here in the facade: no engine can import
//! it. Their modules keep their paths here
//! (`tempest::infer::fit`, `tempest::infer::vi::def`, ...).

pub use tempest_infer::*;

pub use tempest_evidence as evidence;
pub use tempest_exact as exact;
pub use tempest_gp as gp;
pub use tempest_mcmc as mcmc;
pub use tempest_meta as planned;
pub use tempest_samplers as samplers;
pub use tempest_svi as svi;
pub use tempest_variational as variational;
pub use tempest_vi as vi;

pub mod registry;
