//! Each engine's figure (`--plot`), drawn from its fit: the 1-D regression
//! with its forecast band (exact), the reliability diagram or ELBO trace
//! (variational), trace and density per chain (samplers), and the rung
//! means (evidence). The fits' [`crate::infer::fit::Fit::plot`] call these.

use super::plot::{RegressionPlot, regression_1d, reliability_diagram, traces, traces_xy};
use super::plot_mcmc::{ChainSeries, trace_density};
use crate::error::{Error, ErrorKind};
use crate::infer::evidence::fit::EvidenceFit;
use crate::infer::exact::fit::ExactFit;
use crate::infer::mcmc::fit::McmcFit;
use crate::infer::svi::fit::SviFit;
use crate::infer::vi::fit::VariationalFit;
use crate::infer::vi::predict::TestMetrics;
use crate::model::kernel::Inputs;
use std::path::Path;

/// The most variables a sampler's plot shows.
const PLOT_VARS: usize = 8;

/// Points of the grid a 1-D regression is drawn on: fine enough for a
/// seasonal term over several decades.
const GRID: usize = 1000;

/// An engine's name in words, for plot titles and summaries.
pub fn engine_words(engine: &str) -> &str {
    match engine {
        "mirror_descent" => "mirror-descent VI",
        "gradient_descent" => "gradient-descent VI",
        other => other,
    }
}

/// The exact fit of a model with 1-D inputs: the training data, the test
/// data when it has outcomes, and the predictive mean with a band over the
/// span of the training and test inputs (so a forecast is drawn).
///
/// Errors: inputs with more than one column; an offset or noise that
/// depends on per-point data (the grid has none).
pub fn exact(f: &ExactFit, path: &Path) -> Result<(), Error> {
    let x = &f.model.inputs;
    if x.dim() != 1 {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--plot draws fits with 1-D inputs; this model's inputs have {} columns",
                x.dim()
            ),
        ));
    }
    let column = |xs: &Inputs| -> Vec<f64> { (0..xs.len()).map(|i| xs.row(i)[0]).collect() };
    let xs = column(x);
    let test_xs = f.test_inputs.as_ref().map(column).unwrap_or_default();
    let (lo, hi) = xs
        .iter()
        .chain(&test_xs)
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let pad = 0.05 * (hi - lo).max(1e-9);
    let grid: Vec<f64> = (0..GRID)
        .map(|i| lo - pad + (hi - lo + 2.0 * pad) * i as f64 / (GRID - 1) as f64)
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
        .and_then(|ty| Some((column(f.test_inputs.as_ref()?), ty)));
    let g = &f.model.bound.graph;
    let obs = &g.observations[f.model.obs];
    let yname = g.data[obs.data].name.clone();
    let xname = crate::ir::print::expr_in(&g.sites[f.model.site].input, g).replace("data:", "");
    let title = format!(
        "exact GP regression: log marginal likelihood {:.3}",
        f.log_marginal_likelihood
    );
    regression_1d(
        path,
        &RegressionPlot {
            title: &title,
            train: (&xs, &ys),
            test: test_pts.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
            grid: &grid,
            mean: &p.mean,
            var: &p.var_y,
            labels: (&xname, &yname),
        },
    )
}

/// A variational fit: the reliability diagram when there are
/// classification test metrics, else the ELBO trace.
pub fn variational(f: &VariationalFit, path: &Path) -> Result<(), Error> {
    let what = engine_words(f.engine);
    if let Some(drawn) = reliability(f.test.as_ref(), what, path) {
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

/// The reliability diagram of a classifier's test metrics, when there are
/// any (`None` otherwise); `what` names the engine in the title.
fn reliability(t: Option<&TestMetrics>, what: &str, path: &Path) -> Option<Result<(), Error>> {
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

/// An `svi` fit: the reliability diagram on the test data for
/// classification, else the ELBO (epoch means of the minibatch estimates,
/// then the whole-data ELBO of the polishing steps) against seconds.
pub fn svi(f: &SviFit, path: &Path) -> Result<(), Error> {
    if let Some(drawn) = reliability(f.test.as_ref(), "svi", path) {
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

/// A sampling fit: trace and density of the first params (at most
/// `PLOT_VARS`) per chain.
///
/// Errors: a model with nothing sampled.
pub fn mcmc(f: &McmcFit, path: &Path) -> Result<(), Error> {
    let total = f.density.param_columns();
    let shown = total.clamp(1, PLOT_VARS).min(f.names.len());
    if shown == 0 {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "--plot: the model has nothing sampled to plot",
        ));
    }
    let vars: Vec<ChainSeries> = (0..shown)
        .map(|k| ChainSeries {
            name: f.names[k].clone(),
            chains: f.column(k),
        })
        .collect();
    let more = if total > shown {
        format!(" (first {shown} of {total} params)")
    } else {
        String::new()
    };
    let title = format!(
        "{}: {} chains × {} draws{more}",
        f.engine,
        f.draws.len(),
        f.draws.first().map_or(0, Vec::len)
    );
    trace_density(path, &vars, &title)
}

/// An evidence fit: the mean log likelihood at each rung.
pub fn evidence(f: &EvidenceFit, path: &Path) -> Result<(), Error> {
    super::plot_evidence::rung_means(
        path,
        f,
        &format!(
            "thermodynamic integration: log evidence {:.4} ± {:.4}",
            f.log_evidence, f.mcse
        ),
    )
}
