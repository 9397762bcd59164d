//! Output: plots, progress display and result files.
//!
//! The figures (`figures` and the `plot*` drawing modules, with `axis` and
//! `ticks`) are built with the `plot` feature only; without it
//! [`tempest_infer::fit::Fit::plot`] and `plot_with` return
//! [`require_plot`]'s error. [`progress::BarProgress`] draws bars with
//! the `progress` feature and writes plain lines without it.

#![warn(missing_docs)]

pub mod atomic;
#[cfg(feature = "plot")]
pub mod axis;
pub mod calibration;
#[cfg(feature = "plot")]
pub mod figures;
pub mod labels;
#[cfg(feature = "plot")]
pub mod plot;
#[cfg(feature = "plot")]
pub mod plot_box;
#[cfg(feature = "plot")]
pub mod plot_evidence;
#[cfg(feature = "plot")]
pub mod plot_map;
#[cfg(feature = "plot")]
pub mod plot_mcmc;
#[cfg(feature = "plot")]
pub mod plot_pairs;
pub mod plot_params;
pub mod predictions;
pub mod progress;
pub mod stan_csv;
#[cfg(feature = "plot")]
pub mod ticks;

// The report type and the plot gate live in the seam, which every fit
// reaches; they keep their paths here.
pub use tempest_infer::{PLOTS, report, require_plot};

use tempest_core::error;
use tempest_ir as ir;
use tempest_model as model;
