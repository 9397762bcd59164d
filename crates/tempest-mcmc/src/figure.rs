//! The samplers' figures (`--plot`): trace and density per chain, the
//! pair plot, the posterior (or prior) predictive fit, and a classifier's
//! probability map.

use super::density::Density;
use super::fit::McmcFit;
use super::predict::{SamplerPredictions, class_probabilities_at};
use crate::error::{Error, ErrorKind};
use crate::model::kernel::Inputs;
use std::path::{Path, PathBuf};
use tempest_output::figures::{
    MapOf, PointPredictions, axis_labels, beside, fit_at_points, one_column, probability_map_beside,
};
use tempest_output::plot_mcmc::{ChainSeries, trace_density};
use tempest_output::plot_pairs::pair_plot;
use tempest_output::plot_params::{DEFAULT_SHOWN, select};

/// A sampling fit: trace and density per chain of the first params (at
/// most [`DEFAULT_SHOWN`]), or of the params `chosen` (names as
/// `--plot-params` takes them; see [`tempest_output::plot_params`]), with
/// divergent transitions marked, at `path`; the same params' pair plot
/// (when there are two or more) at `STEM_pairs.png`; for a model with a
/// latent GP on one input column and numeric outcomes the fit (the
/// posterior predictive's bands at the training and test points) at
/// `STEM_fit.png`. The files written.
///
/// Errors: a model with nothing sampled; a chosen name that is not a param.
pub fn draw(f: &McmcFit, path: &Path, chosen: Option<&[String]>) -> Result<Vec<PathBuf>, Error> {
    let total = f.density.param_columns().min(f.names.len());
    let columns: Vec<usize> = match chosen {
        Some(names) => select(&f.names[..total], names)?,
        None => (0..total.min(DEFAULT_SHOWN)).collect(),
    };
    if columns.is_empty() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "--plot: the model has nothing sampled to plot",
        ));
    }
    let divergent: Vec<Vec<usize>> = f
        .draws
        .iter()
        .map(|c| {
            c.iter()
                .enumerate()
                .filter(|(_, d)| d.stats.divergent)
                .map(|(i, _)| i)
                .collect()
        })
        .collect();
    let vars: Vec<ChainSeries> = columns
        .iter()
        .map(|&k| ChainSeries {
            name: f.names[k].clone(),
            chains: f.column(k),
            divergent: divergent.clone(),
        })
        .collect();
    let more = if chosen.is_none() && total > columns.len() {
        format!(" (first {} of {total} params)", columns.len())
    } else {
        String::new()
    };
    let title = format!(
        "{}: {} chains × {} draws{more}",
        f.engine,
        f.draws.len(),
        f.draws.first().map_or(0, Vec::len)
    );
    trace_density(path, &vars, &title)?;
    let mut written = vec![path.to_path_buf()];
    if vars.len() >= 2 {
        let pairs = beside(path, "pairs");
        pair_plot(&pairs, &vars, &title)?;
        written.push(pairs);
    }
    if let Some(fit) = mcmc_fit(f, path)? {
        written.push(fit);
    }
    if let Some(map) = mcmc_map(f, path)? {
        written.push(map);
    }
    Ok(written)
}

/// Draws a sampler's probability map averages over.
const MAP_DRAWS: usize = 200;

/// The probability map of a sampled classifier on two input columns at
/// `STEM_map.png` (see [`class_probabilities_at`]).
fn mcmc_map(f: &McmcFit, path: &Path) -> Result<Option<PathBuf>, Error> {
    let g = &f.density.bound.graph;
    let (Some(x), [o]) = (f.density.gp_inputs(), g.observations.as_slice()) else {
        return Ok(None);
    };
    let y = f.density.bound.data[o.data].flatten();
    let qs: Vec<&[f64]> = f.draws.iter().flatten().map(|d| d.q.as_slice()).collect();
    let probs_at = |grid: &Inputs| class_probabilities_at(&f.density, &qs, grid, MAP_DRAWS, f.seed);
    let on = MapOf {
        bound: &f.density.bound,
        // A sampled model has at most one latent GP site.
        site: 0,
        data: o.data,
        inputs: x,
        y: &y,
    };
    let title = format!(
        "{}: class probabilities ({} draws)",
        f.engine,
        qs.len().min(MAP_DRAWS)
    );
    probability_map_beside(path, &on, &probs_at, &title)
}

/// The outcome of a sampler's predictions drawn in a fit plot (the first
/// with a predictive band and no class probabilities) as plot points.
fn sampler_points(density: &Density, p: &SamplerPredictions) -> Option<PointPredictions> {
    let o = p
        .outcomes
        .iter()
        .find(|o| o.predictive.is_some() && o.probabilities.is_none())?;
    let band = o.predictive.clone()?;
    let x = one_column(p.inputs.as_ref()?).ok()?;
    if x.len() != band.mean.len() {
        return None;
    }
    let fb = p
        .latent
        .first()
        .filter(|_| density.gp_is_mean_of_normal())
        .map(|l| (l.q2_5.clone(), l.q97_5.clone()));
    Some(PointPredictions {
        x,
        y: o.y.clone(),
        band,
        f: fb,
    })
}

/// The draws of a sampling run as a fit plot needs them.
pub struct SamplerDraws<'a> {
    /// `nuts`, `hmc` or `mala`.
    pub engine: &'a str,
    /// The model's density.
    pub density: &'a Density,
    /// The draws, unconstrained.
    pub qs: Vec<&'a [f64]>,
    /// At most this many draws enter the predictive.
    pub limit: usize,
    /// The run's seed.
    pub seed: u64,
    /// The predictions at test data, if any.
    pub test: Option<&'a SamplerPredictions>,
}

/// The fit plot of a sampler at `fit_path`, when the model has a latent GP
/// on one input column, or no GP and an `ode` solution (plotted against
/// its output times), and numeric outcomes (`false` otherwise).
pub fn sampler_fit(d: &SamplerDraws, fit_path: &Path) -> Result<bool, Error> {
    let ode = d.density.gp_inputs().is_none()
        && crate::ir::ode::first_times(&d.density.bound.graph).is_some();
    if !ode && d.density.gp_inputs().is_none_or(|x| x.dim() != 1) {
        return Ok(false);
    }
    let train = super::predict::predict(d.density, &d.qs, &d.density.bound, d.limit, d.seed)?;
    let Some(train_pts) = sampler_points(d.density, &train) else {
        return Ok(false);
    };
    let test_pts = d.test.and_then(|p| sampler_points(d.density, p));
    let g = &d.density.bound.graph;
    let obs = train
        .outcomes
        .iter()
        .position(|o| o.predictive.is_some() && o.probabilities.is_none())
        .unwrap_or(0);
    // A sampled model has at most one latent GP site.
    let (xl, yl) = axis_labels(g, 0, obs);
    let kind = if d.engine == super::prior::NAME {
        "prior"
    } else {
        "posterior"
    };
    let title = format!("{}: {kind} predictive ({} draws)", d.engine, train.draws);
    fit_at_points(fit_path, &title, (&xl, &yl), &train_pts, test_pts.as_ref())?;
    Ok(true)
}

/// The fit plot of a sampling fit beside `path`, at `STEM_fit.png`.
fn mcmc_fit(f: &McmcFit, path: &Path) -> Result<Option<PathBuf>, Error> {
    let fit_path = beside(path, "fit");
    let draws = SamplerDraws {
        engine: f.engine,
        density: &f.density,
        qs: f.draws.iter().flatten().map(|d| d.q.as_slice()).collect(),
        limit: f.predictive_draws,
        seed: f.seed,
        test: f.predictions.as_ref(),
    };
    Ok(sampler_fit(&draws, &fit_path)?.then_some(fit_path))
}
