//! Reading the variational posteriors back from a saved fit.

use super::posterior::Whitened;
use crate::error::Error;
use nalgebra::DVector;
use tempest_infer::saved_json::Field;

/// The whitened q of each of `latents` latent GPs from `q` (an array of
/// objects with `mean` \[n\] and a triangular `factor` \[n, n\]); `unit`
/// names what n counts, for errors (`training point`).
pub fn read_qs(q: &Field, latents: usize, n: usize, unit: &str) -> Result<Vec<Whitened>, Error> {
    q.items(Some(latents), "objects (q of each latent GP)")?
        .iter()
        .map(|q| {
            let mean = q
                .get("mean")
                .numbers(Some(n), &format!("q's whitened mean, one per {unit}"))?;
            let r = q
                .get("factor")
                .factor(n, &format!("q's factor, a row and a column per {unit}"))?;
            Ok(Whitened::from_factor(DVector::from_vec(mean), r))
        })
        .collect()
}
