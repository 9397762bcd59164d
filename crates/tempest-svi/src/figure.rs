//! The sparse engine's figure (`--plot`), drawn with the variational
//! engines' pieces.

use super::fit::SviFit;
use crate::error::Error;
use crate::model::kernel::Inputs;
use std::path::{Path, PathBuf};
use tempest_output::plot::traces_xy;
use tempest_variational::figure::{classifier_map, reliability, variational_fit};

/// An `svi` fit: the reliability diagram on the test data for
/// classification, the fit for one input column and numeric outcomes,
/// else the ELBO (epoch means of the minibatch estimates, then the
/// whole-data ELBO of the polishing steps) against seconds; for a
/// classifier on two input columns also its probability map at
/// `STEM_map.png`. The files written.
pub fn draw(f: &SviFit, path: &Path) -> Result<Vec<PathBuf>, Error> {
    // A saved fit keeps one training row (the base for test data): no map.
    let map = if f.loaded_from.is_none() {
        let lik = f
            .model
            .pieces::<f64>(&f.theta, &f.model.bound)?
            .lik
            .untempered();
        let latent = |x: &Inputs| f.latent_at(x, &f.model.bound.stop);
        classifier_map(
            &f.model,
            &f.rule,
            &lik,
            &latent,
            "svi: class probabilities",
            path,
        )?
    } else {
        None
    };
    svi_figure(f, path)?;
    Ok(std::iter::once(path.to_path_buf()).chain(map).collect())
}

/// An `svi` fit's main figure at `path` (see [`draw`]).
fn svi_figure(f: &SviFit, path: &Path) -> Result<(), Error> {
    if let Some(drawn) = reliability(f.test.as_ref(), "svi", path) {
        return drawn;
    }
    let title = format!("svi: fit (whole-data ELBO {:.4})", f.elbo);
    if f.model.inputs.dim() == 1
        && let Some(drawn) = variational_fit(
            &f.model,
            f.predict_on(&f.model.bound).map(|p| p.0),
            f.predictions.as_ref(),
            &title,
            path,
        )
    {
        return drawn;
    }
    let title = format!(
        "svi: ELBO against time (whole-data ELBO {:.4} after {} steps, {:.1} s)",
        f.elbo, f.run.steps, f.run.seconds
    );
    let trace: Vec<(f64, f64)> = f.run.trace.iter().map(|t| (t.seconds, t.elbo)).collect();
    traces_xy(
        path,
        &[("svi".to_string(), trace)],
        &title,
        Some("seconds"),
        "ELBO",
        false,
    )
}
