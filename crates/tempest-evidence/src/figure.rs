//! The evidence engine's figure (`--plot`): the mean log likelihood at
//! each rung.

use super::fit::EvidenceFit;
use crate::error::Error;
use std::path::Path;

/// An evidence fit: the mean log likelihood at each rung, with ±2
/// standard-error bars.
pub fn draw(f: &EvidenceFit, path: &Path) -> Result<(), Error> {
    let rungs: Vec<(f64, f64, f64)> = f.rungs.iter().map(|r| (r.t, r.mean, r.mean_se)).collect();
    tempest_output::plot_evidence::rung_means(
        path,
        &rungs,
        &f.method,
        &format!(
            "thermodynamic integration: log evidence {:.4} ± {:.4}",
            f.log_evidence, f.mcse
        ),
    )
}
