//! tempest: a probabilistic-programming language for Gaussian-process models.
//!
//! A model file is text in the tempest language. The pipeline is a line of
//! stages, one type per stage and one function per arrow:
//!
//! ```text
//!  .tempest text ──parse──▶ ast::Program (spans) ──check──▶ Checked
//!    ──lower──▶ ir::Graph (typed nodes, symbolic shapes) ──bind(data)──▶ ir::bind::Bound
//!    ──run(engine settings, observers)──▶ Fit ──▶ summary, JSON, plots
//! ```
//!
//! [`parse`], [`check`], [`lower`], [`bind`] and [`run`] are those arrows;
//! [`Model`] bundles the first three with the source text so errors render
//! with file, line, column and a caret. Likelihoods and kernels written in
//! Rust ([`UserLikelihood`], [`UserKernel`]) are registered in a [`Registry`]
//! and used by name in model files; autodiff supplies their derivatives.
//!
//! Cargo features, all on by default: `cli` (the `cli` module and the
//! `tempest` binary: clap, anyhow, ctrlc), `plot` (PNG figures through
//! [`Fit::plot`]: plotters) and `progress` (terminal progress bars:
//! indicatif). A program that embeds tempest can leave them out with
//! `default-features = false`: every engine, [`run`], reports, JSON, Stan
//! CSV and saved fits stay; [`Fit::plot`] and [`Fit::plot_with`] remain and
//! return an error naming the missing feature
//! ([`output::require_plot`]), and
//! [`output::progress::BarProgress`] writes plain lines instead of bars.
//!
//! Shapes follow one notation: inputs X are [N, D], outcomes y are \[N\], test
//! inputs X* are [M, D].

#![warn(missing_docs)]

pub mod api;
#[cfg(feature = "cli")]
pub mod cli;
pub mod command;
pub mod infer;
pub use tempest_output as output;

// The lower layers are crates of their own (the workspace's `crates/`),
// each importing only those below it; their modules keep their paths here.
pub use tempest_core::{error, interrupt, limits};
pub use tempest_data as data;
pub use tempest_ir as ir;
pub use tempest_math as math;
pub use tempest_mc as mc;
pub use tempest_model as model;
pub use tempest_semantic as semantic;
pub use tempest_syntax as syntax;

pub use api::{
    Model, Outcome, Rendered, RunOptions, bind, check, engine_config, lower, parse, run,
    run_outcome,
};
pub use data::{Data, DataValue};
pub use error::{Error, ErrorKind, Errors, Result};
pub use infer::evidence::fit::AsEvidence;
pub use infer::exact::fit::AsExact;
pub use infer::fit::Fit;
pub use infer::mcmc::fit::AsMcmc;
pub use infer::svi::fit::AsSvi;
pub use infer::vi::fit::AsVariational;
pub use ir::Graph;
pub use ir::bind::{Bound, Overrides};
pub use math::scalar::{Real, RealExt};
pub use model::custom::{Registry, Scalar, UserKernel, UserLikelihood};
pub use syntax::diagnostics::SourceFile;
