//! Output: plots, progress display and result files.

pub mod axis;
pub mod figures;
pub mod plot;
pub mod plot_box;
pub mod plot_evidence;
pub mod plot_map;
pub mod plot_mcmc;
pub mod plot_pairs;
pub mod plot_params;
pub mod predictions;
pub mod progress;
pub mod report;
pub mod stan_csv;
pub mod ticks;
