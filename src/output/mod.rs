//! Output: plots, progress display and result files.

pub mod atomic;
pub mod figures;
pub mod plot;
pub mod plot_box;
pub mod plot_evidence;
pub mod plot_mcmc;
pub mod progress;
pub mod report;
pub mod stan_csv;
