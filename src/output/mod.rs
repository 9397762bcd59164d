//! Output: plots, progress display and result files.
//!
//! The figures (`figures` and the `plot*` drawing modules, with `axis` and
//! `ticks`) are built with the `plot` feature only; without it
//! [`crate::infer::fit::Fit::plot`] and `plot_with` return
//! [`require_plot`]'s error. [`progress::BarProgress`] draws bars with
//! the `progress` feature and writes plain lines without it.

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
pub mod report;
pub mod stan_csv;
#[cfg(feature = "plot")]
pub mod ticks;

/// Whether this build draws figures (the `plot` feature).
pub const PLOTS: bool = cfg!(feature = "plot");

/// `Ok` when this build draws figures (the `plot` feature); otherwise the
/// error of everything that would draw one: "`what`: tempest was built without the `plot`
/// feature; rebuild with `--features plot`". `what` names the request
/// (`--plot`, `plot-trace`).
pub fn require_plot(what: &str) -> Result<(), crate::error::Error> {
    if PLOTS {
        Ok(())
    } else {
        Err(crate::error::Error::new(
            crate::error::ErrorKind::Unsupported,
            format!(
                "{what}: tempest was built without the `plot` feature; rebuild with `--features plot` (a dependency: `features = [\"plot\"]`)"
            ),
        ))
    }
}
