//! The variational engines' shared library, under the engines that use
//! it (`mirror_descent` and `gradient_descent` in `tempest-vi`, `svi` in
//! `tempest-svi`): the model a variational engine recognises
//! ([`model::ViModel`]: latent GPs, their likelihood and its arguments),
//! the whitened Gaussian posteriors ([`posterior::Whitened`]), expected
//! log-likelihoods by quadrature or Monte Carlo and their derivatives
//! ([`expect`]), the likelihood's adjoints to the hypers
//! ([`lik_adjoint`]), predictions and test metrics ([`predict`]), what
//! their fits report alike ([`report`]), their figures' pieces, their
//! guide families ([`guide`]), shared settings and the saved posteriors'
//! reader. A library above the engine seam and below the engines, so that
//! no variational engine imports another.

#![warn(missing_docs)]

pub mod expect;
#[cfg(feature = "plot")]
pub mod figure;
pub mod guide;
pub mod lik_adjoint;
pub mod model;
pub mod posterior;
pub mod predict;
pub mod report;
pub mod saved;
pub mod settings;

use tempest_core::{error, interrupt, limits};
use tempest_ir as ir;
use tempest_math as math;
use tempest_syntax as syntax;
