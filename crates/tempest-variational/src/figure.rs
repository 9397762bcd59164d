//! The pieces of the variational engines' figures (`--plot`): the
//! reliability diagram of a classifier's test metrics, the fit for one
//! input column, a classifier's probability map on two input columns.

use super::model::ViModel;
use super::predict::{Predictions, TestMetrics};
use crate::error::Error;
use std::path::{Path, PathBuf};
use tempest_model::kernel::Inputs;
use tempest_output::figures::{
    MapOf, PointPredictions, Z975, axis_labels, fit_at_points, one_column, probability_map_beside,
};
use tempest_output::plot::reliability_diagram;

/// A variational fit's predictions as points of a fit plot: `None` unless
/// the inputs have one column and the outcome has a predictive band (one
/// latent GP, numeric outcomes).
fn variational_points(model: &ViModel, p: &Predictions) -> Option<PointPredictions> {
    let band = p.predictive.clone()?;
    let x = one_column(p.inputs.as_ref()?).ok()?;
    let normal = matches!(
        model.bound.graph.observations[model.latent.obs].dist.dist,
        crate::ir::graph::DistRef::Builtin(tempest_model::dist::Dist::Normal)
    );
    // For `normal` the band's mean is f + offset: f's interval is centred there.
    let f = normal.then(|| {
        let half: Vec<f64> = p
            .var_f
            .iter()
            .map(|v| Z975 * v[0].max(0.0).sqrt())
            .collect();
        (
            band.mean.iter().zip(&half).map(|(m, h)| m - h).collect(),
            band.mean.iter().zip(&half).map(|(m, h)| m + h).collect(),
        )
    });
    Some(PointPredictions {
        x,
        y: p.y.clone(),
        band,
        f,
    })
}

/// The fit plot of a variational engine (`what` in words), when the model
/// has one input column and numeric outcomes: predictions at the training
/// points (`train`) and at the test points.
pub fn variational_fit(
    model: &ViModel,
    train: Result<Predictions, Error>,
    test: Option<&Predictions>,
    title: &str,
    path: &Path,
) -> Option<Result<(), Error>> {
    if model.inputs.dim() != 1 || model.classes != 1 {
        return None;
    }
    let train = match train {
        Ok(p) => variational_points(model, &p)?,
        Err(e) => return Some(Err(e)),
    };
    let test = test.and_then(|p| variational_points(model, p));
    let (xl, yl) = axis_labels(&model.bound.graph, model.latent.site, model.latent.obs);
    Some(fit_at_points(
        path,
        title,
        (&xl, &yl),
        &train,
        test.as_ref(),
    ))
}

/// The latent means and variances [M, C] of a fit at any inputs [M, D].
pub type LatentAt<'a> =
    &'a dyn Fn(&Inputs) -> Result<(nalgebra::DMatrix<f64>, nalgebra::DMatrix<f64>), Error>;

/// The probability map of a classifier with two input columns at
/// `STEM_map.png` (`None` for other models, and for likelihoods whose
/// other arguments differ from point to point, which have no value
/// between the data): the class probabilities under q over the inputs'
/// plane, `latent` giving the latent means and variances at any inputs.
pub fn classifier_map(
    model: &ViModel,
    rule: &crate::expect::Rule,
    lik: &crate::model::LikArgs<f64>,
    latent: LatentAt,
    title: &str,
    path: &Path,
) -> Result<Option<PathBuf>, Error> {
    use crate::predict::{class_probabilities, classes, pointless_arguments};
    if classes(model).is_none() || !pointless_arguments(model, lik) {
        return Ok(None);
    }
    let probs_at = |x: &Inputs| {
        let (mean, var) = latent(x)?;
        class_probabilities(model, rule, lik, &mean, &var, &model.bound.stop)
    };
    let g = &model.bound.graph;
    let data = g.observations[model.latent.obs].data;
    let on = MapOf {
        bound: &model.bound,
        site: model.latent.site,
        data,
        inputs: &model.inputs,
        y: &model.y,
    };
    probability_map_beside(path, &on, &probs_at, title)
}

/// The reliability diagram of a classifier's test metrics, when there are
/// any (`None` otherwise); `what` names the engine in the title.
pub fn reliability(t: Option<&TestMetrics>, what: &str, path: &Path) -> Option<Result<(), Error>> {
    let t = t?;
    let (Some(ece), Some(mce)) = (t.ece, t.mce) else {
        return None;
    };
    if t.bins.is_empty() {
        return None;
    }
    let n: usize = t.bins.iter().map(|b| b.count).sum();
    let title = format!("{what}: reliability diagram on the test data ({n} points)");
    Some(reliability_diagram(
        path, &t.bins, t.n_bins, ece, mce, &title,
    ))
}
