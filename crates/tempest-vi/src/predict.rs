//! Predictions of the variational engines' fits: the posteriors q at
//! test inputs through the whitened prior of a fit's [`Core`]; the
//! outcomes' predictive distributions and test metrics are
//! `tempest_variational::predict`'s.

use super::core::Core;
use crate::error::Error;
use nalgebra::DMatrix;
use tempest_ir::bind::Bound;
use tempest_variational::posterior::Whitened;
pub use tempest_variational::predict::*;

/// Predict at the inputs of `test`; metrics when it has outcomes.
pub fn predict(
    core: &Core,
    qs: &[Whitened],
    test: &Bound,
    n_bins: usize,
) -> Result<(Predictions, Option<TestMetrics>), Error> {
    let model = &core.model;
    let hypers = model.layout.values::<f64>(&model.bound, &core.theta);
    let x = test_inputs(model, &hypers, test)?;
    let pieces = model.pieces::<f64>(&core.theta, test)?;
    let (mean, var) = latent_at(core, qs, &pieces.kernel, &x)?;
    let (mut p, metrics) = outcome_predictions(
        model,
        &core.rule,
        &pieces.lik.untempered(),
        test,
        &mean,
        &var,
        n_bins,
    )?;
    p.input_names = tempest_output::predictions::input_names(
        &model.bound.graph,
        Some(model.latent.site),
        x.dim(),
    );
    p.inputs = Some(x);
    Ok((p, metrics))
}

/// The latent means and variances [M, C] of the posteriors `qs` at inputs
/// `x` [M, D], with the kernel at the fit's hypers.
pub fn latent_at(
    core: &Core,
    qs: &[Whitened],
    kernel: &tempest_model::kernel::KernelValue<f64>,
    x: &tempest_model::kernel::Inputs,
) -> Result<(DMatrix<f64>, DMatrix<f64>), Error> {
    let (m, c) = (x.len(), qs.len());
    crate::limits::check_memory(&[crate::limits::Request::new(
        "the cross-covariance between training and predicted points",
    )
    .times("training points", core.model.inputs.len())
    .times("predicted points", m)
    .times("copies", 3)])?;
    let ks = kernel.cross_programs_by_blocks(&core.model.inputs, x)?;
    let kss = kernel.diag(x)?;
    let u = core.prior.whiten(&ks);
    let mut mean = DMatrix::zeros(m, c);
    let mut var = DMatrix::zeros(m, c);
    for (j, q) in qs.iter().enumerate() {
        let (mu, v) = q.predict(&core.prior, &u, &kss);
        mean.set_column(j, &mu);
        var.set_column(j, &v);
    }
    Ok((mean, var))
}
