//! Each engine's figure (`--plot`), drawn from its fit: the 1-D regression
//! with its forecast band (exact), the reliability diagram or ELBO trace
//! (variational), trace and density per chain (samplers), and the rung
//! means (evidence). The fits' [`crate::infer::fit::Fit::plot`] call these.

use super::labels::{engine_words, input_label};
use super::plot::{RegressionPlot, regression_1d, reliability_diagram, traces, traces_xy};
use super::plot_mcmc::{ChainSeries, trace_density};
use super::plot_pairs::pair_plot;
use super::plot_params::{DEFAULT_SHOWN, select};
use crate::error::{Error, ErrorKind};
use crate::infer::band::Band;
use crate::infer::evidence::fit::EvidenceFit;
use crate::infer::exact::fit::ExactFit;
use crate::infer::mcmc::density::Density;
use crate::infer::mcmc::fit::McmcFit;
use crate::infer::mcmc::predict::{SamplerPredictions, class_probabilities_at};
use crate::infer::svi::fit::SviFit;
use crate::infer::vi::fit::VariationalFit;
use crate::infer::vi::model::ViModel;
use crate::infer::vi::predict::{Predictions, TestMetrics};
use crate::model::kernel::Inputs;
use std::path::{Path, PathBuf};

/// Points of the grid a 1-D regression is drawn on: fine enough for a
/// seasonal term over several decades.
const GRID: usize = 1000;

/// The exact fit of a model with 1-D inputs: the training data, the test
/// data when it has outcomes, and the predictive mean with a band over the
/// span of the training and test inputs (so a forecast is drawn).
///
/// Errors: inputs with more than one column; an offset or noise that
/// depends on per-point data (the grid has none).
pub fn exact(f: &ExactFit, path: &Path) -> Result<(), Error> {
    let xs = one_column(&f.model.inputs)?;
    let test_xs = match &f.test_inputs {
        Some(t) => one_column(t)?,
        None => vec![],
    };
    let (lo, hi) =
        crate::output::axis::extent(xs.iter().chain(&test_xs).copied()).unwrap_or((0.0, 1.0));
    let (lo, hi) = crate::output::axis::padded(lo, hi, 0.05);
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

/// The standard normal's 97.5 % quantile.
const Z975: f64 = 1.959_963_984_540_054;

/// Predictions at one set of points for a fit plot: the inputs (one
/// column), the outcomes where known, the predictive band of y and, for an
/// identity link, the latent f's centre and sd (f on y's scale).
pub struct PointPredictions {
    /// Inputs \[M\].
    pub x: Vec<f64>,
    /// Outcomes \[M\], when known.
    pub y: Option<Vec<f64>>,
    /// The predictive distribution of y.
    pub band: Band,
    /// The 95 % interval of f (lower, upper) \[M\] each, when f is on y's scale.
    pub f: Option<(Vec<f64>, Vec<f64>)>,
}

/// The first (only) column of 1-D inputs; an error naming the columns
/// otherwise.
pub fn one_column(x: &Inputs) -> Result<Vec<f64>, Error> {
    if x.dim() != 1 {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--plot draws fits with 1-D inputs; this model's inputs have {} columns",
                x.dim()
            ),
        ));
    }
    Ok((0..x.len()).map(|i| x.row(i)[0]).collect())
}

/// A fit drawn at the training points and the test points (a forecast
/// where the test inputs lie beyond the training inputs): the points
/// sorted by input, the bands joined through them. `labels` names the
/// input and the outcome.
pub fn fit_at_points(
    path: &Path,
    title: &str,
    labels: (&str, &str),
    train: &PointPredictions,
    test: Option<&PointPredictions>,
) -> Result<(), Error> {
    let parts: Vec<&PointPredictions> = std::iter::once(train).chain(test).collect();
    let mut order: Vec<(usize, usize)> = parts
        .iter()
        .enumerate()
        .flat_map(|(k, p)| (0..p.x.len()).map(move |i| (k, i)))
        .filter(|&(k, i)| parts[k].x[i].is_finite())
        .collect();
    order.sort_by(|a, b| parts[a.0].x[a.1].total_cmp(&parts[b.0].x[b.1]));
    let mut grid = Vec::with_capacity(order.len());
    let mut y = Band::default();
    let with_f = parts.iter().all(|p| p.f.is_some());
    let (mut f_lo, mut f_hi) = (vec![], vec![]);
    for &(k, i) in &order {
        let p = parts[k];
        grid.push(p.x[i]);
        let b = &p.band;
        y.mean.push(b.mean[i]);
        y.sd.push(b.sd[i]);
        y.q2_5.push(b.q2_5[i]);
        y.q25.push(b.q25[i]);
        y.q50.push(b.q50[i]);
        y.q75.push(b.q75[i]);
        y.q97_5.push(b.q97_5[i]);
        if let Some((lo, hi)) = &p.f {
            f_lo.push(lo[i]);
            f_hi.push(hi[i]);
        }
    }
    let train_y = train.y.clone().unwrap_or_default();
    let test_pts = test.and_then(|t| Some((t.x.clone(), t.y.clone()?)));
    regression_1d(
        path,
        &RegressionPlot {
            title,
            train: (&train.x, &train_y),
            test: test_pts.as_ref().map(|(a, b)| (a.as_slice(), b.as_slice())),
            grid: &grid,
            y: &y,
            f: with_f.then_some((f_lo.as_slice(), f_hi.as_slice())),
            labels,
        },
    )
}

/// The names of a latent GP's input and of an observed variable, for axis
/// labels.
fn axis_labels(g: &crate::ir::Graph, site: usize, obs: usize) -> (String, String) {
    (
        input_label(g, Some(site)),
        g.data[g.observations[obs].data].name.clone(),
    )
}

/// A variational fit's predictions as points of a fit plot: `None` unless
/// the inputs have one column and the outcome has a predictive band (one
/// latent GP, numeric outcomes).
fn variational_points(model: &ViModel, p: &Predictions) -> Option<PointPredictions> {
    let band = p.predictive.clone()?;
    let x = one_column(p.inputs.as_ref()?).ok()?;
    let normal = matches!(
        model.bound.graph.observations[model.latent.obs].dist.dist,
        crate::ir::graph::DistRef::Builtin(crate::model::dist::Dist::Normal)
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
fn variational_fit(
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

/// A variational fit: the reliability diagram when there are
/// classification test metrics; for one input column and numeric outcomes
/// the fit (bands of y and f at the training and test points); else the
/// ELBO trace; for a classifier on two input columns also its probability
/// map at `STEM_map.png`. The files written.
pub fn variational(f: &VariationalFit, path: &Path) -> Result<Vec<PathBuf>, Error> {
    let what = engine_words(f.engine);
    let lik = f.core.pieces.lik.untempered();
    let latent =
        |x: &Inputs| crate::infer::vi::predict::latent_at(&f.core, &f.qs, &f.core.pieces.kernel, x);
    let title = format!("{what}: class probabilities");
    let map = classifier_map(&f.core.model, &f.core.rule, &lik, &latent, &title, path)?;
    variational_figure(f, what, path)?;
    Ok(std::iter::once(path.to_path_buf()).chain(map).collect())
}

/// The latent means and variances [M, C] of a fit at any inputs [M, D].
type LatentAt<'a> =
    &'a dyn Fn(&Inputs) -> Result<(nalgebra::DMatrix<f64>, nalgebra::DMatrix<f64>), Error>;

/// The probability map of a classifier with two input columns at
/// `STEM_map.png` (`None` for other models, and for likelihoods whose
/// other arguments differ from point to point, which have no value
/// between the data): the class probabilities under q over the inputs'
/// plane, `latent` giving the latent means and variances at any inputs.
fn classifier_map(
    model: &ViModel,
    rule: &crate::infer::vi::expect::Rule,
    lik: &crate::infer::vi::model::LikArgs<f64>,
    latent: LatentAt,
    title: &str,
    path: &Path,
) -> Result<Option<PathBuf>, Error> {
    use crate::infer::vi::predict::{class_probabilities, classes, pointless_arguments};
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

/// The class probabilities \[M\]\[K\] of a fit at any inputs [M, D], when
/// it has them there.
type ProbsAt<'a> = &'a dyn Fn(&Inputs) -> Result<Option<Vec<Vec<f64>>>, Error>;

/// What a probability map is drawn of: the bound training data, the
/// latent GP's site, the outcome (a data index), the training inputs
/// [N, D] and classes \[N\].
struct MapOf<'a> {
    bound: &'a crate::ir::bind::Bound,
    site: usize,
    data: usize,
    inputs: &'a Inputs,
    y: &'a [f64],
}

/// The probability map at `STEM_map.png` of a classifier on two input
/// columns (`None` for other inputs, or when `probs_at` — the class
/// probabilities at any inputs — gives none): the map's grid over the
/// training inputs, the training points on top.
fn probability_map_beside(
    path: &Path,
    on: &MapOf,
    probs_at: ProbsAt,
    title: &str,
) -> Result<Option<PathBuf>, Error> {
    let x = on.inputs;
    if x.dim() != 2 {
        return Ok(None);
    }
    let x0: Vec<f64> = (0..x.len()).map(|i| x.row(i)[0]).collect();
    let x1: Vec<f64> = (0..x.len()).map(|i| x.row(i)[1]).collect();
    let extent = super::plot_map::extent(&x0, &x1);
    let grid = Inputs::from_rows(&super::plot_map::grid_points(extent));
    let Some(probs) = probs_at(&grid)? else {
        return Ok(None);
    };
    let k = probs.first().map_or(0, Vec::len);
    let g = &on.bound.graph;
    let names = match on.bound.labels.get(&on.data) {
        Some(ls) if ls.len() == k => ls.clone(),
        _ => (0..k).map(|c| c.to_string()).collect(),
    };
    let input = input_label(g, Some(on.site));
    let (l0, l1) = (format!("{input}[0]"), format!("{input}[1]"));
    let map_path = beside(path, "map");
    super::plot_map::probability_map(
        &map_path,
        &super::plot_map::ProbabilityMap {
            title,
            extent,
            probs: &probs,
            train: (&x0, &x1, on.y),
            labels: (&l0, &l1),
            classes: names,
            outcome: &g.data[on.data].name,
        },
    )?;
    Ok(Some(map_path))
}

/// A variational fit's main figure at `path` (see [`variational`]).
fn variational_figure(f: &VariationalFit, what: &str, path: &Path) -> Result<(), Error> {
    if let Some(drawn) = reliability(f.test.as_ref(), what, path) {
        return drawn;
    }
    let title = format!("{what}: fit (ELBO {:.4})", f.elbo);
    let train =
        || crate::infer::vi::predict::predict(&f.core, &f.qs, &f.core.model.bound, 1).map(|p| p.0);
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
/// classification, the fit for one input column and numeric outcomes,
/// else the ELBO (epoch means of the minibatch estimates, then the
/// whole-data ELBO of the polishing steps) against seconds; for a
/// classifier on two input columns also its probability map at
/// `STEM_map.png`. The files written.
pub fn svi(f: &SviFit, path: &Path) -> Result<Vec<PathBuf>, Error> {
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

/// An `svi` fit's main figure at `path` (see [`svi`]).
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

/// A sampling fit: trace and density per chain of the first params (at
/// most [`DEFAULT_SHOWN`]), or of the params `chosen` (names as
/// `--plot-params` takes them; see [`crate::output::plot_params`]), with
/// divergent transitions marked, at `path`; the same params' pair plot
/// (when there are two or more) at `STEM_pairs.png`; for a model with a
/// latent GP on one input column and numeric outcomes the fit (the
/// posterior predictive's bands at the training and test points) at
/// `STEM_fit.png`. The files written.
///
/// Errors: a model with nothing sampled; a chosen name that is not a param.
pub fn mcmc(f: &McmcFit, path: &Path, chosen: Option<&[String]>) -> Result<Vec<PathBuf>, Error> {
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

/// The file beside `path` named `STEM_tag.png`.
fn beside(path: &Path, tag: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or("plot".into(), |s| s.to_string_lossy().to_string());
    path.with_file_name(format!("{stem}_{tag}.png"))
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
    let train =
        crate::infer::mcmc::predict::predict(d.density, &d.qs, &d.density.bound, d.limit, d.seed)?;
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
    let kind = if d.engine == crate::infer::mcmc::prior::NAME {
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
