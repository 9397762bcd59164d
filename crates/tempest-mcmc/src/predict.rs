//! The posterior predictive of a sampling run at test data.
//!
//! For each of S draws θₛ (at most `predictive_draws`, evenly spaced over
//! the chains' kept draws, chain by chain):
//!
//! - a latent GP's values at the M test inputs are drawn given the draw:
//!   sampled in whitened form (f = μ + L v), f* | v ~ N(μ + Wᵀv, k** − ‖W‖²_col)
//!   with W = L⁻¹ K(X, X*); integrated out (Gaussian likelihood), f* | θₛ, y
//!   ~ N(μ + K*ᵀ α, k** − ‖L⁻¹K*‖²_col) with α = (K + σ²/t I)⁻¹ (y − loc),
//!   the exact GP's posterior at the draw's hypers — so a model whose hypers
//!   are sampled predicts with the mixture over draws;
//! - every observation's arguments are evaluated on the test data with θₛ
//!   and f*, and one outcome y*ₛ is drawn from the likelihood
//!   ([`crate::model::dist::Dist::draw`]).
//!
//! Per test point: the mean, sd and 2.5/25/50/75/97.5 % quantiles of the S
//! draws of y* (and of f*); class probabilities E[p(y* = k | θ, f*)] for
//! binary and categorical outcomes; with test outcomes, the log predictive
//! density log (1/S) Σₛ p(yᵢ | θₛ, f*ₛ), RMSE of the predictive mean, accuracy
//! (classification) and the fraction of outcomes inside the central 50 %
//! and 95 % intervals. Each draw has its own random stream (from the run's
//! seed and the draw's index), so results do not depend on the thread
//! count.

use super::chain::chain_seed;
use super::density::Density;
use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::eval::Env;
use crate::ir::graph::DistRef;
use crate::ir::pointwise::{Pointwise, class_scores};
use crate::ir::value::Value;
use crate::limits::{self, Request};
use crate::model::dist::Support;
use crate::model::kernel::Inputs;
use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use serde::Serialize;
pub use tempest_infer::band::Band;

/// Mixed into the run's seed for the predictive draws' random streams.
const SALT: u64 = 0x7072_6564_6963_7421;

/// Metrics of the predictions against test outcomes.
#[derive(Clone, Debug, Serialize)]
pub struct PredictiveMetrics {
    /// Mean of log p(yᵢ | data) over the test points.
    pub mean_log_predictive_density: f64,
    /// Root mean squared error of the predictive mean (outcomes that are
    /// numbers, not classes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    /// Fraction classified correctly by the most probable class
    /// (binary and categorical outcomes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// Fraction of outcomes inside the central 50 % predictive interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_50: Option<f64>,
    /// Fraction of outcomes inside the central 95 % predictive interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_95: Option<f64>,
}

/// The posterior predictive of one observed variable at the test data.
#[derive(Clone, Debug, Serialize)]
pub struct OutcomePredictions {
    /// The observed variable (its data name).
    pub name: String,
    /// Test points (outcomes) M.
    pub points: usize,
    /// The data row of each point \[M\] ([`Bound::row_numbers`]).
    pub rows: Vec<usize>,
    /// The draws of y* summarised per point (absent for likelihoods
    /// written in the model file or in Rust, which cannot be drawn from).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictive: Option<Band>,
    /// Class probabilities per point \[M\]\[K\] (binary: K = 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probabilities: Option<Vec<Vec<f64>>>,
    /// Binary outcomes: P(y* = 1) per point, summarised over the draws of
    /// the probability p(y* = 1 | θₛ, f*ₛ) (its mean is
    /// `probabilities[i][1]`; its quantiles the interval of P(y* = 1)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probability: Option<Band>,
    /// The test outcomes, when the test data has them \[M\].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub y: Option<Vec<f64>>,
    /// log p(yᵢ | data) per test point \[M\].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_density: Option<Vec<f64>>,
    /// Metrics against the test outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<PredictiveMetrics>,
}

/// A sampling run's predictions at test data.
#[derive(Clone, Debug, Serialize)]
pub struct SamplerPredictions {
    /// Draws S the predictions average over.
    pub draws: usize,
    /// The latent GP's values at the test inputs, one band per latent GP
    /// (class); empty without a latent GP.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latent: Vec<Band>,
    /// The test inputs of the latent GP \[M, D\] (for plots and tables).
    #[serde(skip)]
    pub inputs: Option<Inputs>,
    /// The names of the input columns (for tables).
    #[serde(skip)]
    pub input_names: Vec<String>,
    /// One entry per sampling statement of the model, in order.
    pub outcomes: Vec<OutcomePredictions>,
}

/// What one draw gives: f* \[M, C\] and per observation the drawn outcomes,
/// their log densities at the test outcomes and the class probabilities.
struct DrawOut {
    f: Option<DMatrix<f64>>,
    y: Vec<Option<Vec<f64>>>,
    logp: Vec<Option<Vec<f64>>>,
    probs: Vec<Option<Vec<Vec<f64>>>>,
}

/// The outcomes' values in the test data, when it has them.
fn outcome(test: &Bound, data: usize) -> Option<Value<f64>> {
    test.present[data].then(|| test.data[data].clone())
}

/// The number of outcomes of a statement: the outcome's length, else the
/// longest argument's (a score matrix's rows), else 1.
fn points(y: Option<&Value<f64>>, args: &[Value<f64>]) -> usize {
    if let Some(n) = y.and_then(|y| y.len()) {
        return n;
    }
    args.iter()
        .filter_map(|a| match a {
            Value::Matrix(m) => Some(m.nrows()),
            a => a.len(),
        })
        .max()
        .unwrap_or(1)
}

/// The classes K of a discrete outcome with a fixed number of classes.
fn classes(d: &DistRef, args: &[Value<f64>]) -> Option<usize> {
    match d {
        DistRef::Builtin(b) => match b.support() {
            Support::Binary => Some(2),
            Support::Category => match args.first() {
                Some(Value::Matrix(m)) => Some(m.ncols()),
                Some(Value::Vector(v)) => Some(v.len()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// The latent GP's values at the test inputs `x` drawn given the draw
/// (params `params`, position `q`); `None` without a latent GP.
fn latent_at_test(
    density: &Density,
    params: &[Value<f64>],
    q: &[f64],
    x: &Inputs,
    rng: &mut StdRng,
) -> Result<Option<(usize, DMatrix<f64>)>, Error> {
    let g = &density.bound.graph;
    let env = Env::new(&density.bound, &density.hypers, params, &[]);
    let m = x.len();
    let (site, mean, var) = match density.gp_parts() {
        (_, Some(mg)) => {
            let model = &mg.model;
            let pieces = model.pieces_in(&env, model.inputs.len())?;
            let state = model.lml_of(&pieces)?;
            let mu = env.scalar(&g.gps[model.gp].mean)?;
            let ks = pieces.kernel.cross_programs_by_blocks(&model.inputs, x)?;
            let mut var = pieces.kernel.diag(x)?;
            let mut mean = ks.tr_mul(&state.alpha).add_scalar(mu);
            if let Some(chol) = &state.chol {
                let w = chol.solve_lower(&ks);
                for j in 0..m {
                    var[j] -= w.column(j).norm_squared();
                }
            } else {
                mean = DVector::from_element(m, mu);
            }
            (
                model.site,
                DMatrix::from_column_slice(m, 1, mean.as_slice()),
                var,
            )
        }
        (Some(lt), None) => {
            let l = density.factor(lt, params)?;
            let k = env.kernel(&lt.kernel)?;
            let ks = k.cross_programs_by_blocks(&lt.inputs, x)?;
            let mut var = k.diag(x)?;
            let w = l
                .solve_lower_triangular(&ks)
                .ok_or_else(|| Error::internal("a singular prior factor"))?;
            for j in 0..m {
                var[j] -= w.column(j).norm_squared();
            }
            let mu = env.scalar(&lt.mean)?;
            let mut mean = DMatrix::zeros(m, lt.classes);
            for c in 0..lt.classes {
                let v = DVector::from_column_slice(
                    &q[lt.offset + c * lt.n..lt.offset + (c + 1) * lt.n],
                );
                mean.set_column(c, &w.tr_mul(&v).add_scalar(mu));
            }
            (lt.site, mean, var)
        }
        (None, None) => return Ok(None),
    };
    let mut f = mean;
    for c in 0..f.ncols() {
        for j in 0..m {
            let z: f64 = StandardNormal.sample(rng);
            f[(j, c)] += var[j].max(0.0).sqrt() * z;
        }
    }
    Ok(Some((site, f)))
}

/// Mixed into the seed for a probability map's draws of f*.
const MAP_SALT: u64 = 0x006d_6170;

/// The sites' values for evaluating a model's expressions: the latent
/// GP's values f [M, C] at its site (a vector for C = 1), none elsewhere.
fn site_values(
    g: &crate::ir::Graph,
    latent: Option<&(usize, DMatrix<f64>)>,
) -> Vec<Option<Value<f64>>> {
    let mut sites: Vec<Option<Value<f64>>> = vec![None; g.sites.len()];
    if let Some((site, f)) = latent {
        sites[*site] = Some(if f.ncols() > 1 {
            Value::Matrix(f.clone())
        } else {
            Value::Vector(f.column(0).into_owned())
        });
    }
    sites
}

/// A sampling statement's likelihood arguments evaluated in `env`.
fn eval_args(env: &Env<f64>, o: &crate::ir::graph::ObsNode) -> Result<Vec<Value<f64>>, Error> {
    o.dist.args.iter().map(|a| env.eval(a)).collect()
}

/// One draw's latent values and outcomes at the test data.
fn one_draw(
    density: &Density,
    test: &Bound,
    x: Option<&Inputs>,
    q: &[f64],
    rng: &mut StdRng,
) -> Result<DrawOut, Error> {
    let g = &density.bound.graph;
    let (params, _, _) = density.params_at(q);
    let latent = match x {
        Some(x) => latent_at_test(density, &params, q, x, rng)?,
        None => None,
    };
    let sites = site_values(g, latent.as_ref());
    let env = Env::new(test, &density.hypers, &params, &sites);
    let mut out = DrawOut {
        f: latent.map(|(_, f)| f),
        y: vec![],
        logp: vec![],
        probs: vec![],
    };
    for o in &g.observations {
        let args = eval_args(&env, o)?;
        let y = outcome(test, o.data);
        let pw = Pointwise::new(g, &o.dist);
        if let Some(y) = &y {
            pw.check_lengths(y, &args, o.span)?;
        }
        let n = points(y.as_ref(), &args);
        let opts: Vec<f64> = o.dist.options.iter().map(|(_, v)| *v).collect();
        let k = classes(&o.dist.dist, &args);
        let mut draws = matches!(o.dist.dist, DistRef::Builtin(_)).then(|| Vec::with_capacity(n));
        let mut logp = y.as_ref().map(|_| Vec::with_capacity(n));
        let mut probs = k.map(|_| Vec::with_capacity(n));
        for i in 0..n {
            let a = point_args(&pw, &args, i, o.dist.span)?;
            let density_at = |v: f64| log_density_at(&pw, &a, v);
            if let (Some(d), DistRef::Builtin(b)) = (draws.as_mut(), &o.dist.dist) {
                let v = b.draw(&a, &opts, rng).ok_or_else(|| {
                    let row = test.row_ids.get(i).copied().unwrap_or(i);
                    let shown: Vec<String> = a.iter().map(|v| crate::error::num(*v)).collect();
                    Error::at(
                        ErrorKind::Numerical,
                        o.dist.span,
                        format!(
                            "a posterior predictive draw of `{}` at test row {row} failed: the arguments ({}) lie outside the parameter space of `{}`",
                            g.data[o.data].name,
                            shown.join(", "),
                            b.name()
                        ),
                    )
                    .with_label("this likelihood")
                })?;
                d.push(v);
            }
            if let (Some(lp), Some(y)) = (logp.as_mut(), &y) {
                let yi = y.element(i).unwrap_or(f64::NAN);
                lp.push(density_at(yi)?);
            }
            if let (Some(p), Some(k)) = (probs.as_mut(), k) {
                p.push(class_row(&pw, &a, k)?);
            }
        }
        out.y.push(draws);
        out.logp.push(logp);
        out.probs.push(probs);
    }
    Ok(out)
}

/// The likelihood's arguments at point `i`: the class scores of a
/// categorical, else each argument's element (a scalar for every point).
fn point_args(
    pw: &Pointwise,
    args: &[Value<f64>],
    i: usize,
    span: crate::syntax::ast::Span,
) -> Result<Vec<f64>, Error> {
    if pw.is_categorical() {
        class_scores(&args[0], i, span)
    } else {
        Ok(args.iter().map(|a| a.element(i).unwrap_or(0.0)).collect())
    }
}

/// log p(v | a) of one point with arguments `a`.
fn log_density_at(pw: &Pointwise, a: &[f64], v: f64) -> Result<f64, Error> {
    if pw.is_categorical() {
        Ok(pw.classes(v as usize, a))
    } else {
        pw.point(v, a)
    }
}

/// The class probabilities p(k | a), k < `k`, of one point.
fn class_row(pw: &Pointwise, a: &[f64], k: usize) -> Result<Vec<f64>, Error> {
    (0..k)
        .map(|c| log_density_at(pw, a, c as f64).map(f64::exp))
        .collect()
}

/// Whether `e` reads data that differ from point to point (a data vector
/// or matrix, directly or through `let`s) outside its latent GP
/// applications, so that it has no value between the data points.
fn reads_point_data(e: &crate::ir::expr::TExpr, g: &crate::ir::Graph, depth: usize) -> bool {
    use crate::ir::expr::{Ref, TKind};
    let mut inside = Vec::new();
    e.walk(&mut |x| {
        if let TKind::GpApply { input, .. } = &x.kind {
            inside.extend(input.refs());
        }
    });
    let mut outside = e.refs();
    for r in inside {
        if let Some(k) = outside.iter().position(|o| *o == r) {
            outside.swap_remove(k);
        }
    }
    outside.iter().any(|r| match r {
        Ref::Data(d) => !g.data[*d].ty.is_scalar(),
        Ref::Let(l) => depth > 32 || reads_point_data(&g.lets[*l].value, g, depth + 1),
        _ => false,
    })
}

/// Class probabilities E[p(y* = k | θ, f*)] over at most `limit` draws
/// `qs` at inputs `x` [M, D] that are no data rows (a probability map's
/// grid) \[M\]\[K\]: for a model whose one sampling statement is a
/// classifier (binary or categorical) of a latent GP sampled in whitened
/// form, whose other arguments read no per-point data; `None` for other
/// models. `seed` is the run's.
pub fn class_probabilities_at(
    density: &Density,
    qs: &[&[f64]],
    x: &Inputs,
    limit: usize,
    seed: u64,
) -> Result<Option<Vec<Vec<f64>>>, Error> {
    let g = &density.bound.graph;
    let ([o], (Some(lt), None)) = (g.observations.as_slice(), density.gp_parts()) else {
        return Ok(None);
    };
    if lt.inputs.dim() != x.dim()
        || !matches!(o.dist.dist, DistRef::Builtin(b) if matches!(b.support(), Support::Binary | Support::Category))
        || o.dist.args.iter().any(|a| reads_point_data(a, g, 0))
    {
        return Ok(None);
    }
    let picks = spaced(qs.len(), limit);
    let m = x.len();
    limits::check_memory(
        &[Request::new("the class probabilities at the map's points")
            .times("threads", rayon::current_num_threads())
            .times("training points", lt.n)
            .times("map points", m)],
    )?;
    let pw = Pointwise::new(g, &o.dist);
    let sums: Vec<Vec<Vec<f64>>> = picks
        .par_iter()
        .enumerate()
        .map(|(d, &i)| {
            let mut rng = StdRng::seed_from_u64(chain_seed(seed ^ SALT ^ MAP_SALT, d));
            let (params, _, _) = density.params_at(qs[i]);
            let latent = latent_at_test(density, &params, qs[i], x, &mut rng)?;
            let sites = site_values(g, latent.as_ref());
            let env = Env::new(&density.bound, &density.hypers, &params, &sites);
            let args = eval_args(&env, o)?;
            let k = classes(&o.dist.dist, &args).unwrap_or(2);
            (0..m)
                .map(|j| class_row(&pw, &point_args(&pw, &args, j, o.dist.span)?, k))
                .collect()
        })
        .collect::<Result<_, Error>>()?;
    let s = sums.len().max(1) as f64;
    let mut out = sums.first().cloned().unwrap_or_default();
    for row in out.iter_mut() {
        row.iter_mut().for_each(|v| *v = 0.0);
    }
    for draw in &sums {
        for (o, p) in out.iter_mut().zip(draw) {
            for (a, b) in o.iter_mut().zip(p) {
                *a += b / s;
            }
        }
    }
    Ok(Some(out))
}

/// The indices (into the chains' kept draws, chain by chain) of at most
/// `limit` draws, evenly spaced.
pub fn spaced(total: usize, limit: usize) -> Vec<usize> {
    let s = total.min(limit.max(1));
    (0..s).map(|k| k * total / s).collect()
}

/// The posterior predictive at `test` from the draws `qs` (positions,
/// chain by chain), with at most `limit` draws; `seed` is the run's.
pub fn predict(
    density: &Density,
    qs: &[&[f64]],
    test: &Bound,
    limit: usize,
    seed: u64,
) -> Result<SamplerPredictions, Error> {
    crate::ir::bind::check_param_shapes(&density.bound, test)?;
    let g = &density.bound.graph;
    let x = match density.gp_parts() {
        (_, Some(mg)) => Some(test.site_inputs(mg.model.site, &density.hypers, &[])?),
        (Some(lt), None) => Some(test.site_inputs(lt.site, &density.hypers, &[])?),
        (None, None) => None,
    };
    // Without a latent GP, an ODE model's output times at the test data
    // (data only) are the inputs a fit plot shows.
    let ode_x = match (&x, crate::ir::ode::first_times(g)) {
        (None, Some(ts)) => Env::new(test, &density.hypers, &[], &[])
            .eval(&ts)
            .ok()
            .and_then(|v| v.vector())
            .map(|v| Inputs::from_vector(&v)),
        _ => None,
    };
    let train_dim = match density.gp_parts() {
        (_, Some(mg)) => mg.model.inputs.dim(),
        (Some(lt), None) => lt.inputs.dim(),
        _ => 0,
    };
    if let Some(x) = &x
        && x.dim() != train_dim
    {
        return Err(Error::new(
            ErrorKind::Data,
            format!(
                "the test inputs have {} columns, the training inputs {train_dim}",
                x.dim()
            ),
        ));
    }
    let picks = spaced(qs.len(), limit);
    let s = picks.len();
    let m = x.as_ref().map_or(0, Inputs::len);
    let n_train = match density.gp_parts() {
        (_, Some(mg)) => mg.model.inputs.len(),
        (Some(lt), None) => lt.n,
        _ => 0,
    };
    let outcomes: usize = g
        .observations
        .iter()
        .map(|o| test.data[o.data].len().unwrap_or(1).max(m))
        .sum();
    limits::check_memory(&[
        Request::new("the posterior predictive draws")
            .times("draws", s)
            .times(
                "values per draw (latent values and outcomes)",
                4 * (m + outcomes),
            ),
        Request::new("the cross-covariance between training and test inputs")
            .times("threads", rayon::current_num_threads())
            .times("training points", n_train)
            .times("test points", m.max(1)),
    ])?;
    let outs: Vec<DrawOut> = picks
        .par_iter()
        .enumerate()
        .map(|(k, &i)| {
            test.stop.check("predicting at the test data")?;
            let mut rng = StdRng::seed_from_u64(chain_seed(seed ^ SALT, k));
            one_draw(density, test, x.as_ref(), qs[i], &mut rng)
        })
        .collect::<Result<_, _>>()?;
    let latent = match outs.first().and_then(|o| o.f.as_ref()) {
        Some(f0) => (0..f0.ncols())
            .map(|c| {
                let d: Vec<Vec<f64>> = outs
                    .iter()
                    .map(|o| {
                        o.f.as_ref()
                            .map_or(vec![], |f| f.column(c).iter().copied().collect())
                    })
                    .collect();
                Band::of(&d, m)
            })
            .collect(),
        None => vec![],
    };
    let mut preds = Vec::with_capacity(g.observations.len());
    for (j, o) in g.observations.iter().enumerate() {
        // Borrowed per draw, not copied: S × M values each.
        let y_draws: Option<Vec<&[f64]>> = outs.iter().map(|d| d.y[j].as_deref()).collect();
        let logps: Option<Vec<&[f64]>> = outs.iter().map(|d| d.logp[j].as_deref()).collect();
        let n = y_draws
            .as_ref()
            .and_then(|d| d.first().map(|r| r.len()))
            .or_else(|| outs.first().and_then(|d| d.logp[j].as_ref().map(Vec::len)))
            .or_else(|| outs.first().and_then(|d| d.probs[j].as_ref().map(Vec::len)))
            .unwrap_or(0);
        let predictive = y_draws.as_ref().map(|d| Band::of(d, n));
        let probabilities: Option<Vec<Vec<f64>>> =
            outs.first().and_then(|d| d.probs[j].as_ref()).map(|first| {
                let k = first.first().map_or(0, Vec::len);
                (0..n)
                    .map(|i| {
                        let mut row = vec![0.0; k];
                        for d in &outs {
                            if let Some(p) = &d.probs[j] {
                                for (r, v) in row.iter_mut().zip(&p[i]) {
                                    *r += v / s as f64;
                                }
                            }
                        }
                        row
                    })
                    .collect()
            });
        // Binary outcomes: the draws of p(y* = 1) summarised per point.
        let probability: Option<Band> = probabilities
            .as_ref()
            .filter(|p| p.first().is_some_and(|r| r.len() == 2))
            .map(|_| {
                let mut b = Band::default();
                for i in 0..n {
                    let col: Vec<f64> = outs
                        .iter()
                        .filter_map(|d| d.probs[j].as_ref().map(|p| p[i][1]))
                        .collect();
                    b.push_draws(&col);
                }
                b
            });
        let log_density: Option<Vec<f64>> = logps.map(|lp| {
            (0..n)
                .map(|i| {
                    let col: Vec<f64> = lp.iter().map(|d| d[i]).collect();
                    crate::math::scalar::logsumexp(&col) - (s as f64).ln()
                })
                .collect()
        });
        let y: Option<Vec<f64>> = outcome(test, o.data)
            .map(|v| v.flatten())
            .filter(|v| v.len() == n);
        if let (Some(_), Some(ld)) = (&y, &log_density) {
            tempest_infer::finite::test_log_densities(ld, test, o.data, |i| {
                draws_prediction(probabilities.as_deref(), predictive.as_ref(), i, s)
            })?;
        }
        let metrics = match (&y, &log_density) {
            (Some(y), Some(ld)) => Some(metrics(
                y,
                ld,
                predictive.as_ref(),
                probabilities.as_deref(),
            )),
            _ => None,
        };
        if let Some(rmse) = metrics.as_ref().and_then(|m| m.rmse) {
            tempest_infer::finite::number("the test RMSE", rmse, || {
                tempest_infer::band::OVERFLOW.to_string()
            })?;
        }
        preds.push(OutcomePredictions {
            name: g.data[o.data].name.clone(),
            points: n,
            rows: test.row_numbers(n),
            predictive,
            probabilities,
            probability,
            y,
            log_density,
            metrics,
        });
    }
    let site = match density.gp_parts() {
        (_, Some(mg)) => Some(mg.model.site),
        (Some(lt), None) => Some(lt.site),
        (None, None) => None,
    };
    let inputs = x.or(ode_x);
    let input_names = inputs.as_ref().map_or(vec![], |x| {
        tempest_output::predictions::input_names(g, site, x.dim())
    });
    Ok(SamplerPredictions {
        draws: s,
        latent,
        inputs,
        input_names,
        outcomes: preds,
    })
}

/// What `s` draws predicted at point `i`, for errors: the class
/// probabilities, or the predictive mean and sd.
fn draws_prediction(probs: Option<&[Vec<f64>]>, band: Option<&Band>, i: usize, s: usize) -> String {
    use tempest_infer::finite::{list, show};
    match (probs, band) {
        (Some(p), _) => format!("class probabilities {} over {s} draws", list(&p[i])),
        (None, Some(b)) => format!(
            "predictive mean {}, sd {} over {s} draws",
            show(b.mean[i]),
            show(b.sd[i])
        ),
        (None, None) => format!("over {s} draws"),
    }
}

/// The metrics of predictions against outcomes `y`.
fn metrics(
    y: &[f64],
    log_density: &[f64],
    band: Option<&Band>,
    probs: Option<&[Vec<f64>]>,
) -> PredictiveMetrics {
    let n = y.len().max(1) as f64;
    let frac = |hit: &dyn Fn(usize) -> bool| (0..y.len()).filter(|&i| hit(i)).count() as f64 / n;
    let accuracy = probs.map(|p| {
        frac(&|i| {
            let best = p[i]
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(k, _)| k);
            best as f64 == y[i]
        })
    });
    let numeric = band.filter(|_| probs.is_none());
    let coverage = numeric.map(|b| b.coverage(y));
    PredictiveMetrics {
        mean_log_predictive_density: log_density.iter().sum::<f64>() / n,
        rmse: numeric.map(|b| b.rmse(y)),
        accuracy,
        coverage_50: coverage.map(|c| c.0),
        coverage_95: coverage.map(|c| c.1),
    }
}

impl SamplerPredictions {
    /// Add the predictions to a report: per observed variable a line with
    /// the metrics and a table of the first ten points; the whole
    /// predictions under `predictions` in the JSON. `engine` names the
    /// draws' source: `sample_prior`'s give the prior predictive.
    pub fn report_into(&self, r: &mut tempest_output::report::Report, engine: &str) {
        let kind = if engine == super::prior::NAME {
            "prior"
        } else {
            "posterior"
        };
        for o in &self.outcomes {
            let mut head = format!(
                "{kind} predictive of `{}`: {} test point{} ({} draws)",
                o.name,
                o.points,
                if o.points == 1 { "" } else { "s" },
                self.draws
            );
            if let Some(m) = &o.metrics {
                if let Some(rm) = m.rmse {
                    head.push_str(&format!(", RMSE {}", crate::error::fixed(rm, 4)));
                }
                if let Some(a) = m.accuracy {
                    head.push_str(&format!(", accuracy {a:.4}"));
                }
                head.push_str(&format!(
                    ", mean log predictive density {}",
                    crate::error::fixed(m.mean_log_predictive_density, 4)
                ));
                if let Some(c) = m.coverage_95 {
                    head.push_str(&format!(", 95 % interval coverage {c:.3}"));
                }
            }
            r.line(head);
            let index = tempest_output::predictions::PointIndex::new(
                &o.rows,
                self.inputs.as_ref(),
                &self.input_names,
            );
            use tempest_output::predictions::{
                band_cells, band_heads, class_cells, prediction_table,
            };
            let n = o.points;
            match (&o.probability, &o.probabilities, &o.predictive) {
                (Some(b), _, _) => {
                    let heads = band_heads(&format!("P({}=1)", o.name));
                    prediction_table(r, &index, &heads, n, |i| band_cells(b, i));
                }
                (None, Some(p), _) => {
                    let heads = ["class".to_string(), "P(class)".to_string()];
                    prediction_table(r, &index, &heads, n, |i| class_cells(&p[i]));
                }
                (None, None, Some(b)) => {
                    prediction_table(r, &index, &band_heads("mean"), n, |i| band_cells(b, i));
                }
                (None, None, None) => {
                    r.note(format!(
                        "`{}`'s likelihood is not a built-in distribution, so outcomes cannot be drawn from it: the predictions give its log predictive density only",
                        o.name
                    ));
                }
            }
        }
        r.field_ser("predictions", self);
    }
}
