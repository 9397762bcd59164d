//! The exact engine's figure (`--plot`): the 1-D regression with its
//! forecast band.

use super::fit::ExactFit;
use crate::error::{Error, ErrorKind};
use std::path::Path;
use tempest_infer::band::Band;
use tempest_model::kernel::Inputs;
use tempest_output::figures::{Z975, one_column};
use tempest_output::plot::{RegressionPlot, regression_1d};

/// Points of the grid a 1-D regression is drawn on: fine enough for a
/// seasonal term over several decades.
const GRID: usize = 1000;

/// The exact fit of a model with 1-D inputs: the training data, the test
/// data when it has outcomes, and the predictive mean with a band over the
/// span of the training and test inputs (so a forecast is drawn).
///
/// Errors: inputs with more than one column; an offset or noise that
/// depends on per-point data (the grid has none).
pub fn draw(f: &ExactFit, path: &Path) -> Result<(), Error> {
    let xs = one_column(&f.model.inputs)?;
    let test_xs = match &f.test_inputs {
        Some(t) => one_column(t)?,
        None => vec![],
    };
    let (lo, hi) =
        tempest_output::axis::extent(xs.iter().chain(&test_xs).copied()).unwrap_or((0.0, 1.0));
    let (lo, hi) = tempest_output::axis::padded(lo, hi, 0.05);
    let grid: Vec<f64> = (0..GRID)
        .map(|i| lo + (hi - lo) * i as f64 / (GRID - 1) as f64)
        .collect();
    let gi = Inputs::from_rows(&grid.iter().map(|&g| vec![g]).collect::<Vec<_>>());
    let p = f.predict_inputs(&gi).map_err(|e| {
        Error::new(
            ErrorKind::Unsupported,
            format!(
                "--plot needs the offset and noise to be the same at every point: {}",
                e.message
            ),
        )
    })?;
    let ys: Vec<f64> = f.model.y.iter().copied().collect();
    let test_pts: Option<(Vec<f64>, Vec<f64>)> = f
        .predictions
        .as_ref()
        .and_then(|pr| pr.y.clone())
        .map(|ty| (test_xs.clone(), ty));
    let g = &f.model.bound.graph;
    let obs = &g.observations[f.model.obs];
    let yname = g.data[obs.data].name.clone();
    let xname = crate::ir::print::expr_in(&g.sites[f.model.site].input, g).replace("data:", "");
    let title = format!(
        "exact GP regression: log marginal likelihood {:.3}",
        f.log_marginal_likelihood
    );
    let mut y = Band::default();
    for (m, v) in p.mean.iter().zip(&p.var_y) {
        y.push_normal(*m, v.sqrt());
    }
    let f_lo: Vec<f64> = p
        .mean
        .iter()
        .zip(&p.var_f)
        .map(|(m, v)| m - Z975 * v.sqrt())
        .collect();
    let f_hi: Vec<f64> = p
        .mean
        .iter()
        .zip(&p.var_f)
        .map(|(m, v)| m + Z975 * v.sqrt())
        .collect();
    regression_1d(
        path,
        &RegressionPlot {
            title: &title,
            train: (&xs, &ys),
            test: test_pts.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
            grid: &grid,
            y: &y,
            f: Some((&f_lo, &f_hi)),
            labels: (&xname, &yname),
        },
    )
}
