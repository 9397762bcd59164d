//! The samplers as a library, under the engines that drive them: the
//! model's log density and its gradient ([`density::Density`]), MALA, HMC
//! and NUTS chains with their warm-up adaptation ([`chain`], [`adapt`],
//! [`hamiltonian`], [`low_rank`]), the samplers' settings and how they
//! are named ([`settings`]), and a sampling run over many chains
//! ([`run::SamplerRun`]). The `mala`, `hmc` and `nuts` engines
//! (`tempest-mcmc`) turn a run into a fit; the `evidence` engine runs one
//! per rung of its ladder. A library above the engine seam and below the
//! engines, so that neither engine imports the other.

#![warn(missing_docs)]

pub mod adapt;
pub mod chain;
pub mod density;
pub mod hamiltonian;
pub mod low_rank;
pub mod run;
pub mod same_run;
pub mod settings;

use tempest_core::{error, limits};
use tempest_ir as ir;
use tempest_math as math;
use tempest_model as model;
use tempest_syntax as syntax;
