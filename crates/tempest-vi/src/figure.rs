//! The variational engines' figures (`--plot`): the reliability diagram
//! of a classifier's test metrics, the fit for one input column, else the
//! ELBO trace; a classifier's probability map on two input columns (the
//! pieces are `tempest_variational::figure`'s, which the sparse engine
//! draws with too).

use super::fit::VariationalFit;
use crate::error::Error;
use std::path::{Path, PathBuf};
use tempest_model::kernel::Inputs;
use tempest_output::plot::traces;
pub use tempest_variational::figure::*;

/// A variational fit: the reliability diagram when there are
/// classification test metrics; for one input column and numeric outcomes
/// the fit (bands of y and f at the training and test points); else the
/// ELBO trace; for a classifier on two input columns also its probability
/// map at `STEM_map.png`. The files written.
pub fn draw(f: &VariationalFit, path: &Path) -> Result<Vec<PathBuf>, Error> {
    let what = super::settings::words(f.engine);
    let lik = f.core.pieces.lik.untempered();
    let latent = |x: &Inputs| super::predict::latent_at(&f.core, &f.qs, &f.core.pieces.kernel, x);
    let title = format!("{what}: class probabilities");
    let map = classifier_map(&f.core.model, &f.core.rule, &lik, &latent, &title, path)?;
    variational_figure(f, what, path)?;
    Ok(std::iter::once(path.to_path_buf()).chain(map).collect())
}

/// A variational fit's main figure at `path` (see [`draw`]).
fn variational_figure(f: &VariationalFit, what: &str, path: &Path) -> Result<(), Error> {
    if let Some(drawn) = reliability(f.test.as_ref(), what, path) {
        return drawn;
    }
    let title = format!("{what}: fit (ELBO {:.4})", f.elbo);
    let train = || super::predict::predict(&f.core, &f.qs, &f.core.model.bound, 1).map(|p| p.0);
    if f.core.model.inputs.dim() == 1
        && let Some(drawn) =
            variational_fit(&f.core.model, train(), f.predictions.as_ref(), &title, path)
    {
        return drawn;
    }
    let title = format!(
        "{what}: ELBO by step (final {:.4}, {} step{})",
        f.elbo,
        f.steps,
        if f.steps == 1 { "" } else { "s" }
    );
    traces(
        path,
        &[(f.engine.to_string(), f.trace.clone())],
        &title,
        "ELBO",
        false,
    )
}
