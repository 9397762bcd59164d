//! What every engine's figure (`--plot`) is drawn with: a fit drawn
//! through its predictions at the training and test points, a
//! classifier's probability map beside the main figure, the names of the
//! files beside it. The engines' own figures are in their folders
//! (`infer/exact/figure.rs`, `infer/vi/figure.rs`, ...), called by their
//! fits' [`tempest_infer::fit::Fit::plot`]; this module imports no engine.

use super::labels::input_label;
use super::plot::{RegressionPlot, regression_1d};
use crate::error::{Error, ErrorKind};
use crate::model::kernel::Inputs;
use std::path::{Path, PathBuf};
use tempest_infer::band::Band;

/// The standard normal's 97.5 % quantile.
pub const Z975: f64 = 1.959_963_984_540_054;

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
pub fn axis_labels(g: &crate::ir::Graph, site: usize, obs: usize) -> (String, String) {
    (
        input_label(g, Some(site)),
        g.data[g.observations[obs].data].name.clone(),
    )
}

/// The class probabilities \[M\]\[K\] of a fit at any inputs [M, D], when
/// it has them there.
pub type ProbsAt<'a> = &'a dyn Fn(&Inputs) -> Result<Option<Vec<Vec<f64>>>, Error>;

/// What a probability map is drawn of: the bound training data, the
/// latent GP's site, the outcome (a data index), the training inputs
/// [N, D] and classes \[N\].
pub struct MapOf<'a> {
    /// The bound training data.
    pub bound: &'a crate::ir::bind::Bound,
    /// The latent GP's site.
    pub site: usize,
    /// The outcome, a data index.
    pub data: usize,
    /// The training inputs [N, D].
    pub inputs: &'a Inputs,
    /// The training classes \[N\].
    pub y: &'a [f64],
}

/// The probability map at `STEM_map.png` of a classifier on two input
/// columns (`None` for other inputs, or when `probs_at` — the class
/// probabilities at any inputs — gives none): the map's grid over the
/// training inputs, the training points on top.
pub fn probability_map_beside(
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

/// The file beside `path` named `STEM_tag.png`.
pub fn beside(path: &Path, tag: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or("plot".into(), |s| s.to_string_lossy().to_string());
    path.with_file_name(format!("{stem}_{tag}.png"))
}
