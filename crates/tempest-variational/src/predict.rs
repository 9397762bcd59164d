//! Predictions of the variational engines at test inputs X* [M, D]:
//! latent means and variances per class (Eq. 6 of the mirror-descent paper,
//! [`super::posterior::Whitened::predict`]), class probabilities
//! p(y* = r) = E_q[p(r | f*)] (Gauss–Hermite for one latent value, the fixed
//! Monte Carlo draws for C classes), and test metrics: accuracy, mean log
//! predictive density, and the expected and maximum calibration errors
//! (ECE, MCE; Guo et al. 2017) over equal-width confidence bins.

use super::expect::Rule;
use super::model::{LikArgs, ViModel};
use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::graph::DistRef;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use serde::Serialize;
use tempest_infer::band::Band;
use tempest_infer::finite;
use tempest_model::dist::{Dist, Support};

/// Predictions at M points.
#[derive(Clone, Debug, Serialize)]
pub struct Predictions {
    /// The data row of each point \[M\] ([`Bound::row_numbers`]).
    pub rows: Vec<usize>,
    /// Latent means, M rows of C values (written flat, M numbers, when C = 1,
    /// as the exact engine writes its means).
    #[serde(serialize_with = "rows_or_flat")]
    pub mean_f: Vec<Vec<f64>>,
    /// Latent variances, M rows of C values (flat when C = 1).
    #[serde(serialize_with = "rows_or_flat")]
    pub var_f: Vec<Vec<f64>>,
    /// Class probabilities, M rows (classes 0..K−1), for discrete outcomes
    /// with a fixed number of classes (binary or categorical).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<Vec<Vec<f64>>>,
    /// Binary outcomes: P(y* = 1) = p(y* = 1 | f*) under q(f*) per point:
    /// its mean (`probabilities[i][1]`) and sd by the engine's
    /// Gauss–Hermite rule, its quantiles p(1 | f*) at the quantiles of
    /// q(f*) (exact: p is monotone in f*).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probability: Option<Band>,
    /// Log predictive density of each test outcome, when the test data has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_density: Option<Vec<f64>>,
    /// The predictive distribution of the outcome y* per point (mean, sd
    /// and quantiles; outcomes that are numbers, from a built-in
    /// likelihood of one latent value): closed form for `normal`, else
    /// from [`Y_DRAWS`] draws f ~ q(f*), y ~ p(y | f).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictive: Option<Band>,
    /// The test outcomes, when the test data has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub y: Option<Vec<f64>>,
    /// The test inputs of the latent GP \[M, D\] (for plots and tables).
    #[serde(skip)]
    pub inputs: Option<tempest_model::kernel::Inputs>,
    /// The names of the input columns (for tables).
    #[serde(skip)]
    pub input_names: Vec<String>,
    /// The outcome's name (for tables).
    #[serde(skip)]
    pub outcome: String,
}

/// Draws per test point of the outcome's predictive distribution, for
/// likelihoods other than `normal`.
pub const Y_DRAWS: usize = 1000;

/// Mixed into the seed of each point's draws.
const SALT: u64 = 0x7661_7269_6174_696f;

/// Rows of one value each as a flat list, other rows as they are.
fn rows_or_flat<S: serde::Serializer>(rows: &[Vec<f64>], s: S) -> Result<S::Ok, S::Error> {
    if rows.iter().all(|r| r.len() == 1) {
        s.collect_seq(rows.iter().map(|r| r[0]))
    } else {
        s.collect_seq(rows)
    }
}

pub use tempest_output::calibration::Bin;

/// Metrics on test outcomes.
#[derive(Clone, Debug, Serialize)]
pub struct TestMetrics {
    /// Fraction classified correctly (classification only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// Mean of log p(y*ₙ | data).
    pub mean_log_predictive_density: f64,
    /// Root mean squared error of the predictive mean (outcomes that are
    /// numbers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    /// Fraction of outcomes inside the central 50 % predictive interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_50: Option<f64>,
    /// Fraction of outcomes inside the central 95 % predictive interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_95: Option<f64>,
    /// Expected calibration error (classification only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ece: Option<f64>,
    /// Maximum calibration error (classification only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mce: Option<f64>,
    /// The reliability diagram's bins (classification only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<Bin>,
    /// How many equal-width bins `bins` was counted in (the `bins`
    /// setting; only the non-empty ones are listed).
    #[serde(skip)]
    pub n_bins: usize,
}

/// The latent GP's inputs at the test data [M, D], with an error when they
/// have another number of columns than the training inputs.
pub fn test_inputs(
    model: &ViModel,
    hypers: &[crate::ir::value::Value<f64>],
    test: &Bound,
) -> Result<tempest_model::kernel::Inputs, Error> {
    let x = test.site_inputs(model.latent.site, hypers, &[])?;
    if x.dim() != model.inputs.dim() {
        return Err(Error::new(
            ErrorKind::Data,
            format!(
                "the test inputs have {} columns, the training inputs {}",
                x.dim(),
                model.inputs.dim()
            ),
        ));
    }
    Ok(x)
}

/// Predictions of the outcomes at the M points of `test` from the latent
/// means and variances [M, C] there: class probabilities for discrete
/// outcomes, the log predictive density of each test outcome (when the
/// test data has them) by `rule`, and the metrics; `lik` holds the
/// likelihood's arguments at the test data, untempered.
pub fn outcome_predictions(
    model: &ViModel,
    rule: &Rule,
    lik: &LikArgs<f64>,
    test: &Bound,
    mean: &DMatrix<f64>,
    var: &DMatrix<f64>,
    n_bins: usize,
) -> Result<(Predictions, Option<TestMetrics>), Error> {
    let (m, c) = mean.shape();
    let obs = &model.bound.graph.observations[model.latent.obs];
    let y: Option<Vec<f64>> = test.present[obs.data]
        .then(|| test.data[obs.data].flatten())
        .filter(|y| y.len() == m);
    let expect_exp = |i: usize, yv: f64| log_expected_lik(model, rule, lik, mean, var, i, yv);
    let classes = classes(model);
    let probs = class_probabilities(model, rule, lik, mean, var, &test.stop)?;
    let probability = match (rule, classes) {
        (Rule::Quadrature(gh), Some(2)) if c == 1 => Some(binary_band(model, gh, lik, mean, var)?),
        _ => None,
    };
    let log_density = match (&y, &probs) {
        (Some(y), Some(p)) => Some(
            y.iter()
                .enumerate()
                .map(|(i, &yi)| p[i].get(yi as usize).copied().unwrap_or(0.0).ln())
                .collect(),
        ),
        (Some(y), None) => Some(
            y.iter()
                .enumerate()
                .map(|(i, &yi)| expect_exp(i, yi))
                .collect::<Result<Vec<f64>, _>>()?,
        ),
        _ => None,
    };
    if let Some(ld) = &log_density {
        finite::test_log_densities(ld, test, obs.data, |i| match &probs {
            Some(p) => format!("class probabilities {}", finite::list(&p[i])),
            None => format!(
                "latent mean {}, variance {}",
                finite::list(&mean.row(i).iter().copied().collect::<Vec<_>>()),
                finite::list(&var.row(i).iter().copied().collect::<Vec<_>>())
            ),
        })?;
    }
    let predictive = match (&obs.dist.dist, classes) {
        (DistRef::Builtin(d), None) if c == 1 => {
            Some(y_band(model, *d, lik, test, mean, var, &obs.dist.options)?)
        }
        _ => None,
    };
    let metrics = match (&y, &log_density) {
        (Some(y), Some(ld)) => {
            let mut t = metrics(y, ld, probs.as_deref(), n_bins);
            if let Some(b) = &predictive {
                let (c50, c95) = b.coverage(y);
                t.rmse = Some(finite::number("the test RMSE", b.rmse(y), || {
                    OVERFLOW.to_string()
                })?);
                t.coverage_50 = Some(c50);
                t.coverage_95 = Some(c95);
            }
            Some(t)
        }
        _ => None,
    };
    let rows = |a: &DMatrix<f64>| (0..m).map(|i| a.row(i).iter().copied().collect()).collect();
    Ok((
        Predictions {
            rows: test.row_numbers(m),
            mean_f: rows(mean),
            var_f: rows(var),
            probabilities: probs,
            probability,
            log_density,
            predictive,
            y,
            inputs: None,
            input_names: Vec::new(),
            outcome: model.bound.graph.data[obs.data].name.clone(),
        },
        metrics,
    ))
}

/// log E_q[p(y | f)] at point `i` under q(f) ~ N(mean, var) [M, 1] by the
/// engine's Gauss–Hermite `rule`, computed stably.
fn log_expected_lik(
    model: &ViModel,
    rule: &Rule,
    lik: &LikArgs<f64>,
    mean: &DMatrix<f64>,
    var: &DMatrix<f64>,
    i: usize,
    yv: f64,
) -> Result<f64, Error> {
    let mut terms = Vec::new();
    let mut weights = Vec::new();
    match rule {
        Rule::Quadrature(gh) => {
            for (z, w) in gh.points.iter().zip(&gh.weights) {
                let f = mean[(i, 0)] + var[(i, 0)].sqrt() * z;
                terms.push(lik.log_lik(model, i, yv, &[f])?);
                weights.push(*w);
            }
        }
        // The softmax (the only model with several latent values per
        // point) predicts through its product rule; Monte Carlo serves
        // only svi's minibatch steps.
        Rule::Softmax(_) | Rule::MonteCarlo(_) => {
            return Err(Error::internal(
                "the softmax's probabilities come from its product rule",
            ));
        }
    }
    let mx = terms.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !mx.is_finite() {
        return Ok(mx);
    }
    Ok(mx
        + terms
            .iter()
            .zip(&weights)
            .map(|(t, w)| w * (t - mx).exp())
            .sum::<f64>()
            .ln())
}

/// The classes K of a discrete outcome with a fixed number of classes
/// (binary: 2), `None` for other outcomes.
pub fn classes(model: &ViModel) -> Option<usize> {
    match model.support() {
        Support::Binary => Some(2),
        Support::Category => Some(model.classes),
        _ => None,
    }
}

/// Class probabilities p(y = k) = E_q[p(k | f)] at M points from the latent
/// means and variances [M, C] there, each row summing to one (`None` for
/// outcomes that are not classes): the softmax by its product rule, mixed
/// latent GPs by the rule's draws, else by Gauss–Hermite; `stop` is read at every point.
pub fn class_probabilities(
    model: &ViModel,
    rule: &Rule,
    lik: &LikArgs<f64>,
    mean: &DMatrix<f64>,
    var: &DMatrix<f64>,
    stop: &crate::interrupt::StopFlag,
) -> Result<Option<Vec<Vec<f64>>>, Error> {
    let Some(k) = classes(model) else {
        return Ok(None);
    };
    let (m, c) = mean.shape();
    let mut rows = Vec::with_capacity(m);
    let (mut mi, mut vi) = (vec![0.0; c], vec![0.0; c]);
    for i in 0..m {
        stop.check("predicting class probabilities")?;
        for j in 0..c {
            mi[j] = mean[(i, j)];
            vi[j] = var[(i, j)];
        }
        let row: Vec<f64> = if let Rule::Softmax(r) = rule {
            // E[softmax_c(f)] = ∂ E[log Σ exp f]/∂m_c.
            r.eval(&mi, &vi).dm
        } else if let (Rule::MonteCarlo(eps), Some(a)) = (rule, lik.mixing(model)) {
            // Mixed latent GPs: E[softmax(Aᵀf)] by the rule's draws.
            crate::expect::mixed_probabilities(a, eps, &mi, &vi)
        } else {
            (0..k)
                .map(|r| log_expected_lik(model, rule, lik, mean, var, i, r as f64).map(f64::exp))
                .collect::<Result<_, _>>()?
        };
        let s: f64 = row.iter().sum();
        rows.push(row.iter().map(|p| p / s).collect());
    }
    Ok(Some(rows))
}

/// Whether the likelihood's arguments other than the latent GP are the
/// same at every point (numbers, or the mixing matrix), so that class
/// probabilities can be computed at inputs that are no data rows (a
/// probability map's grid).
pub fn pointless_arguments(model: &ViModel, lik: &LikArgs<f64>) -> bool {
    use crate::ir::value::Value;
    lik.args.iter().enumerate().all(|(k, a)| {
        matches!(a, Value::Real(_) | Value::Int(_))
            || (k == model.latent.latent_arg && model.latent.mixing.is_some())
    })
}

/// The standard normal quantiles of the five quantiles of a [`Band`].
const BAND_Z: [f64; 5] = [
    -1.959_963_984_540_054,
    -0.674_489_750_196_081_7,
    0.0,
    0.674_489_750_196_081_7,
    1.959_963_984_540_054,
];

/// P(y = 1) under q(f) ~ N(mean, var) [M, 1] at each point, for a binary
/// likelihood: its mean and sd by the Gauss–Hermite rule `gh`, its
/// quantiles p(1 | f) at the quantiles of q(f) (p is monotone in f for the
/// binary likelihoods, so these are its exact quantiles).
fn binary_band(
    model: &ViModel,
    gh: &crate::math::quadrature::GaussHermite,
    lik: &LikArgs<f64>,
    mean: &DMatrix<f64>,
    var: &DMatrix<f64>,
) -> Result<Band, Error> {
    let mut band = Band::default();
    for i in 0..mean.nrows() {
        let sd = var[(i, 0)].max(0.0).sqrt();
        let p1 = |f: f64| lik.log_lik(model, i, 1.0, &[f]).map(f64::exp);
        let (mut m1, mut m2) = (0.0, 0.0);
        for (z, w) in gh.points.iter().zip(&gh.weights) {
            let p = p1(mean[(i, 0)] + sd * z)?;
            m1 += w * p;
            m2 += w * p * p;
        }
        let mut q = BAND_Z
            .iter()
            .map(|z| p1(mean[(i, 0)] + sd * z))
            .collect::<Result<Vec<f64>, _>>()?;
        q.sort_by(f64::total_cmp);
        band.mean.push(m1);
        band.sd.push((m2 - m1 * m1).max(0.0).sqrt());
        band.q2_5.push(q[0]);
        band.q25.push(q[1]);
        band.q50.push(q[2]);
        band.q75.push(q[3]);
        band.q97_5.push(q[4]);
    }
    Ok(band)
}

/// The predictive distribution of the outcome at each of the M points,
/// from the latent means and variances [M, 1]: N(f + offset, var_f + σ²)
/// for `normal`, else [`Y_DRAWS`] draws per point (f ~ N(mean, var),
/// y ~ p(y | f)), each point with its own random stream.
fn y_band(
    model: &ViModel,
    d: Dist,
    lik: &LikArgs<f64>,
    test: &Bound,
    mean: &DMatrix<f64>,
    var: &DMatrix<f64>,
    options: &[(String, f64)],
) -> Result<Band, Error> {
    let m = mean.nrows();
    let opts: Vec<f64> = options.iter().map(|(_, v)| *v).collect();
    let mut band = Band::default();
    if d == Dist::Normal {
        for i in 0..m {
            let a = lik.point_args(model, i, mean[(i, 0)]);
            band.push_normal(a[0], (var[(i, 0)].max(0.0) + a[1] * a[1]).sqrt());
        }
        return Ok(band);
    }
    // Each point's draws are summarised where they are made (one point's
    // 1000 draws in memory per thread).
    let points: Vec<Band> = (0..m)
        .into_par_iter()
        .map(|i| {
            let mut rng = StdRng::seed_from_u64(SALT.wrapping_add(i as u64));
            let sd = var[(i, 0)].max(0.0).sqrt();
            (0..Y_DRAWS)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    let a = lik.point_args(model, i, mean[(i, 0)] + sd * z);
                    d.draw(&a, &opts, &mut rng).ok_or_else(|| {
                        let row = test.row_ids.get(i).copied().unwrap_or(i);
                        let shown: Vec<String> = a.iter().map(|v| crate::error::num(*v)).collect();
                        Error::new(
                            ErrorKind::Numerical,
                            format!(
                                "a predictive draw of the outcome at test row {row} failed: the arguments ({}) lie outside the parameter space of `{}`",
                                shown.join(", "),
                                d.name()
                            ),
                        )
                    })
                })
                .collect::<Result<Vec<f64>, _>>()
                .map(|col| {
                    let mut b = Band::default();
                    b.push_draws(&col);
                    b
                })
        })
        .collect::<Result<_, _>>()?;
    for p in points {
        band.append(p);
    }
    Ok(band)
}

/// Why a root mean squared error overflows (the seam's, shared by every
/// engine's test metrics).
pub use tempest_infer::band::OVERFLOW;

/// Accuracy, mean log predictive density, ECE and MCE.
pub fn metrics(
    y: &[f64],
    log_density: &[f64],
    probs: Option<&[Vec<f64>]>,
    n_bins: usize,
) -> TestMetrics {
    let n = y.len().max(1) as f64;
    let mlpd = log_density.iter().sum::<f64>() / n;
    let Some(probs) = probs else {
        return TestMetrics {
            accuracy: None,
            mean_log_predictive_density: mlpd,
            rmse: None,
            coverage_50: None,
            coverage_95: None,
            ece: None,
            mce: None,
            bins: vec![],
            n_bins: 0,
        };
    };
    let n_bins = n_bins.max(1);
    let mut count = vec![0usize; n_bins];
    let mut conf = vec![0.0; n_bins];
    let mut hits = vec![0.0; n_bins];
    let mut correct = 0.0;
    for (p, &yi) in probs.iter().zip(y) {
        let (best, &pmax) = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap_or((0, &0.0));
        let hit = if best == yi as usize { 1.0 } else { 0.0 };
        correct += hit;
        let b = ((pmax * n_bins as f64) as usize).min(n_bins - 1);
        count[b] += 1;
        conf[b] += pmax;
        hits[b] += hit;
    }
    let mut ece = 0.0;
    let mut mce: f64 = 0.0;
    let mut bins = Vec::new();
    for b in 0..n_bins {
        if count[b] == 0 {
            continue;
        }
        let k = count[b] as f64;
        let gap = (hits[b] / k - conf[b] / k).abs();
        ece += k / n * gap;
        mce = mce.max(gap);
        bins.push(Bin {
            lower: b as f64 / n_bins as f64,
            count: count[b],
            confidence: conf[b] / k,
            accuracy: hits[b] / k,
        });
    }
    TestMetrics {
        accuracy: Some(correct / n),
        mean_log_predictive_density: mlpd,
        rmse: None,
        coverage_50: None,
        coverage_95: None,
        ece: Some(ece),
        mce: Some(mce),
        bins,
        n_bins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_errors_of_a_known_case() {
        // Two bins: [0.5, 0.6) holds 0.55, 0.55 (one right), [0.9, 1.0] holds 0.95 (right).
        let probs: Vec<Vec<f64>> = vec![vec![0.45, 0.55], vec![0.55, 0.45], vec![0.05, 0.95]];
        let y = [1.0, 1.0, 1.0];
        let ld: Vec<f64> = probs
            .iter()
            .zip(&y)
            .map(|(p, &yi)| p[yi as usize].ln())
            .collect();
        let m = metrics(&y, &ld, Some(&probs), 10);
        assert!((m.accuracy.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        let ece = 2.0 / 3.0 * (0.5f64 - 0.55).abs() + 1.0 / 3.0 * (1.0f64 - 0.95).abs();
        assert!((m.ece.unwrap() - ece).abs() < 1e-12);
        assert!((m.mce.unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(m.bins.len(), 2);
    }
}
