//! The result of a sampling run: draws (with their scores ∇ log π, kept for
//! control variates), posterior summaries with R-hat and ESS, sampler
//! diagnostics with warnings, and the `estimate` block evaluated over draws.

use super::chain::{ChainConfig, Draw, Method};
use super::density::Density;
use super::predict::SamplerPredictions;
use crate::error::{Error, ErrorKind, fixed};
use crate::mc::control_variates::{CvEstimate, Method as CvMethod, Samples};
use crate::mc::diagnostics::{
    MIN_DRAWS_ESS, MIN_DRAWS_RHAT, Summary, ebfmi, summarize, summarize_independent,
};
use crate::mc::spec::CvSpec;
use crate::mc::vector_valued::{Task, vector_valued_poly};
use nalgebra::DMatrix;
use serde_json::{Map, json};
use std::sync::Arc;
use tempest_output::report::{Report, Table};

/// One estimate E\[expr\] over the draws, per component.
#[derive(Clone, Debug)]
pub struct Estimate {
    /// The estimate's name (with `[k]` for vector components).
    pub name: String,
    /// The Monte Carlo summary of the integrand's draws.
    pub summary: Summary,
    /// The control-variate estimate (`using control_variates(...)`), if
    /// asked for.
    pub cv: Option<CvEstimate>,
}

/// What a sampler produced.
pub struct McmcFit {
    /// `nuts`, `hmc` or `mala`.
    pub engine: &'static str,
    /// The model's density (for names and transforms).
    pub density: Arc<Density>,
    /// Kept draws per chain.
    pub draws: Vec<Vec<Draw>>,
    /// Column names in the language's convention (`beta[0]`; Stan CSV files
    /// keep Stan's `beta.1`).
    pub names: Vec<String>,
    /// The draws' values per chain, per draw, per column of `names`
    /// (params constrained, then latent GP values) \[chains\]\[draws\]\[columns\].
    pub values: Vec<Vec<Vec<f64>>>,
    /// Summaries per column.
    pub summaries: Vec<Summary>,
    /// The estimates of the `estimate` block.
    pub estimates: Vec<Estimate>,
    /// Divergent transitions after warm-up.
    pub divergences: usize,
    /// Transitions that hit the maximum tree depth (NUTS).
    pub max_depth_hits: usize,
    /// E-BFMI per chain.
    pub ebfmi: Vec<f64>,
    /// The adapted step size per chain.
    pub step_sizes: Vec<f64>,
    /// The adapted inverse metric per chain.
    pub inv_metrics: Vec<Vec<f64>>,
    /// Seconds spent sampling (after warm-up).
    pub sampling_seconds: f64,
    /// Seconds spent in warm-up.
    pub warmup_seconds: f64,
    /// Gradient evaluations after warm-up.
    pub gradients: usize,
    /// Warnings about the run.
    pub warnings: Vec<String>,
    /// Why the run ended.
    pub reason: String,
    /// The posterior predictive at test data (`--test`), once attached.
    pub predictions: Option<SamplerPredictions>,
    /// The run's seed (the predictive draws' streams derive from it).
    pub seed: u64,
    /// Draws the posterior predictive averages over (at most).
    pub predictive_draws: usize,
    /// The first chain's id minus one (`chain_offset`).
    pub chain_offset: usize,
    /// Each chain's warm-up iterations (shorter than `warmup` when warm-up
    /// stopped early) \[chains\].
    pub warmup_iterations: Vec<usize>,
    /// Gradient evaluations of the warm-up transitions, all chains.
    pub warmup_gradients: usize,
    cfg: ChainConfig,
}

/// The most latent values the summary table lists one by one.
const LATENT_ROWS: usize = 20;

impl McmcFit {
    /// Column `k`'s draws per chain \[chains\]\[draws\].
    pub fn column(&self, k: usize) -> Vec<Vec<f64>> {
        self.values
            .iter()
            .map(|c| c.iter().map(|v| v[k]).collect())
            .collect()
    }

    /// Summarise the draws, with their output values
    /// ([`Density::stan_values`], \[chains\]\[draws\]\[columns\]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: &'static str,
        density: Arc<Density>,
        draws: Vec<Vec<Draw>>,
        values: Vec<Vec<Vec<f64>>>,
        cfg: ChainConfig,
        step_sizes: Vec<f64>,
        inv_metrics: Vec<Vec<f64>>,
        sampling_seconds: f64,
        warmup_seconds: f64,
        gradients: usize,
        reason: String,
    ) -> Result<McmcFit, Error> {
        let names = density.language_names();
        let independent = engine == super::prior::NAME;
        let summaries: Vec<Summary> = (0..names.len())
            .map(|k| {
                let chains: Vec<Vec<f64>> = values
                    .iter()
                    .map(|c| c.iter().map(|v| v[k]).collect())
                    .collect();
                summary_of(&chains, independent)
            })
            .collect();
        check_finite(&names, &values, &summaries)?;
        let divergences = draws.iter().flatten().filter(|d| d.stats.divergent).count();
        let max_depth_hits = match cfg.method {
            Method::Nuts { max_depth } => draws
                .iter()
                .flatten()
                .filter(|d| d.stats.tree_depth >= max_depth)
                .count(),
            _ => 0,
        };
        let ebfmi: Vec<f64> = draws
            .iter()
            .map(|c| ebfmi(&c.iter().map(|d| d.stats.energy).collect::<Vec<_>>()))
            .collect();
        // A stopped run reports its draws; the estimates and their control
        // variates, which take more evaluations, only when they are done.
        let mut skipped = None;
        // A run stopped before this point still evaluates its estimates
        // (except through an ODE solve, which reads the flag); a stop
        // that comes during them ends them.
        let check = !density.bound.stop.is_set();
        let (mut estimates, series, owners) =
            match estimate_draws(&density, &draws, &names, &values, check) {
                Ok(v) => estimates(&density, &v, independent),
                Err(e) if e.is_interrupted() => {
                    skipped = Some("the `estimate` block was not evaluated");
                    (Vec::new(), Vec::new(), Vec::new())
                }
                Err(e) => return Err(e),
            };
        let spec = cv_spec(&density.bound.graph)?;
        if !matches!(spec, CvSpec::Scalar(CvMethod::None)) && !estimates.is_empty() {
            let cols = task_coordinates(&density, engine, &owners);
            let done = !density.bound.stop.is_set()
                && apply_control_variates(
                    &spec,
                    &draws,
                    independent,
                    &mut estimates,
                    &density,
                    &series,
                    &cols,
                )?;
            if !done {
                skipped = Some("the control variates of the estimates were not all computed");
            }
        }
        finite_estimates(&density, &estimates, &owners)?;
        let mut fit = McmcFit {
            engine,
            density,
            draws,
            names,
            values,
            summaries,
            estimates,
            divergences,
            max_depth_hits,
            ebfmi,
            step_sizes,
            inv_metrics,
            sampling_seconds,
            warmup_seconds,
            gradients,
            warnings: vec![],
            reason,
            predictions: None,
            seed: 0,
            predictive_draws: 1000,
            chain_offset: 0,
            warmup_iterations: Vec::new(),
            warmup_gradients: 0,
            cfg,
        };
        fit.warnings = fit.warn();
        if let Some(what) = skipped {
            fit.warnings
                .push(format!("{what}: the run was interrupted"));
        }
        Ok(fit)
    }

    fn warn(&self) -> Vec<String> {
        // Independent draws have no chains to mix or transitions to judge.
        if self.engine == super::prior::NAME {
            return match self.kept() {
                1 => vec![
                    "one draw: its sd and Monte Carlo standard error cannot be computed (shown as NaN); take more draws".into(),
                ],
                _ => vec![],
            };
        }
        let stuck: Vec<usize> = (0..self.draws.len())
            .filter(|&c| did_not_move(self.draws[c].iter().map(|d| d.q.as_slice())))
            .collect();
        warnings(&RunDiagnostics {
            names: &self.names,
            summaries: &self.summaries,
            chains: self.draws.len(),
            total: self.draws.iter().map(|c| c.len()).sum(),
            per_chain: self.kept(),
            divergences: self.divergences,
            max_depth_hits: self.max_depth_hits,
            ebfmi: &self.ebfmi,
            first_chain: self.chain_offset + 1,
            stuck: &stuck,
            step_sizes: &self.step_sizes,
        })
    }

    /// The smallest bulk ESS and the largest R-hat over the params.
    pub fn extremes(&self) -> (f64, f64) {
        extremes(&self.summaries)
    }

    /// The seed and the number of draws for the posterior predictive at
    /// test data.
    pub fn predicting(mut self, seed: u64, draws: usize) -> McmcFit {
        self.seed = seed;
        self.predictive_draws = draws;
        self
    }

    /// Record each chain's warm-up length and the warm-up's gradient
    /// evaluations.
    pub fn warmed_up(mut self, iterations: Vec<usize>, gradients: usize) -> McmcFit {
        self.warmup_iterations = iterations;
        self.warmup_gradients = gradients;
        self
    }

    /// The warm-up as the report states it: `1000`, or `312–398` when
    /// chains stopped early at different iterations.
    fn warmup_text(&self) -> String {
        let (lo, hi) = (
            self.warmup_iterations.iter().min().copied(),
            self.warmup_iterations.iter().max().copied(),
        );
        match (lo, hi) {
            (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
            (Some(a), _) => a.to_string(),
            _ => self.cfg.warmup.to_string(),
        }
    }

    /// Number the chains from `offset + 1` (in warnings and the JSON).
    pub fn offset_chains(mut self, offset: usize) -> McmcFit {
        self.chain_offset = offset;
        self.warnings = self.warn();
        self
    }

    /// The draws of one column by its name in the model's convention
    /// (`sigma`, `beta[0]`, `A[1, 0]`), per chain \[chains\]\[draws\];
    /// `None` for a name that is not a column.
    pub fn draws_of(&self, name: &str) -> Option<Vec<Vec<f64>>> {
        let k = self.names.iter().position(|n| n == name)?;
        Some(self.column(k))
    }

    /// The summary (mean, sd, quantiles, R-hat, ESS) of one column by name.
    pub fn summary_of(&self, name: &str) -> Option<&Summary> {
        let k = self.names.iter().position(|n| n == name)?;
        self.summaries.get(k)
    }

    /// Draws kept per chain (the fewest over chains; fewer than asked for
    /// when the run was stopped early).
    pub fn kept(&self) -> usize {
        self.draws.iter().map(Vec::len).min().unwrap_or(0)
    }
}

impl tempest_infer::fit::Fit for McmcFit {
    fn saved(
        &self,
        model: &str,
        cfg: &tempest_infer::settings::EngineConfig,
    ) -> Option<Result<serde_json::Value, crate::error::Error>> {
        Some(Ok(self.saved_json(model, cfg)))
    }

    fn hyper(&self, name: &str) -> Option<Vec<f64>> {
        tempest_infer::fit::hyper_by_name(&self.density.bound.graph, &self.density.hypers, name)
    }

    fn engine(&self) -> &'static str {
        self.engine
    }

    fn attach_test(&mut self, test: &crate::ir::bind::Bound) -> Result<(), Error> {
        let qs: Vec<&[f64]> = self
            .draws
            .iter()
            .flatten()
            .map(|d| d.q.as_slice())
            .collect();
        self.predictions = Some(super::predict::predict(
            &self.density,
            &qs,
            test,
            self.predictive_draws,
            self.seed,
        )?);
        Ok(())
    }

    #[cfg(feature = "plot")]
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, crate::error::Error> {
        super::figure::draw(self, path, None)
    }

    #[cfg(feature = "plot")]
    fn plot_with(
        &self,
        path: &std::path::Path,
        options: &tempest_infer::fit::PlotOptions,
    ) -> Result<Vec<std::path::PathBuf>, crate::error::Error> {
        super::figure::draw(self, path, options.params.as_deref())
    }

    /// The summary table, estimates, control variates and warnings.
    fn report(&self) -> Report {
        let mut r = Report::new(self.engine);
        let total: usize = self.draws.iter().map(|c| c.len()).sum();
        let chains = self.draws.len();
        let independent = self.engine == super::prior::NAME;
        r.line(if independent {
            format!(
                "engine: {} ({} independent draws from the prior, MCSE = sd/√n; {:.2} s, {} gradient evaluations)",
                self.engine,
                self.kept(),
                self.sampling_seconds,
                self.gradients
            )
        } else {
            format!(
                "engine: {} ({chains} chain{} × {} draw{} after {} warm-up; {:.2} s warm-up, {:.2} s sampling, {} gradient evaluations)",
                self.engine,
                if chains == 1 { "" } else { "s" },
                self.kept(),
                if self.kept() == 1 { "" } else { "s" },
                self.warmup_text(),
                self.warmup_seconds,
                self.sampling_seconds,
                self.gradients
            )
        });
        if self.kept() < self.cfg.draws {
            r.line(format!(
                "stopped early ({}): {} of {} draws per chain taken",
                self.reason,
                self.kept(),
                self.cfg.draws
            ));
        }
        let width = self
            .names
            .iter()
            .chain(self.estimates.iter().map(|e| &e.name))
            .map(|n| n.len())
            .max()
            .unwrap_or(4)
            .max(4);
        // The latent values of a sampled GP get one row each when there are
        // few; otherwise one line with their worst diagnostics (all of them
        // are in the JSON and the CSV files).
        let params = self.density.param_columns().min(self.names.len());
        let latent = self.names.len() - params;
        let show = if latent <= LATENT_ROWS {
            self.names.len()
        } else {
            params
        };
        // Independent draws have no R-hat, and their ESS is their number.
        let cols = if independent { 6 } else { SUMMARY_HEADER.len() };
        let table = || Table::new(0, Some(width), 1, &SUMMARY_WIDTHS[..cols]);
        let cells = |x: &Summary| {
            let mut c = summary_cells(x);
            c.truncate(cols);
            c
        };
        let mut t = table();
        if show > 0 || !self.estimates.is_empty() {
            t.header(&SUMMARY_HEADER[..cols]);
        }
        for (n, x) in self.names.iter().zip(&self.summaries).take(show) {
            t.row(n.clone(), cells(x));
        }
        r.table(t);
        if show < self.names.len() {
            let rest = &self.summaries[params..];
            let rhat = rest
                .iter()
                .map(|x| x.rhat)
                .fold(f64::NEG_INFINITY, f64::max);
            let ess = rest
                .iter()
                .map(|x| x.ess_bulk)
                .fold(f64::INFINITY, f64::min);
            let gp = self.names[params].split('[').next().unwrap_or("f");
            r.line(format!(
                "{gp}: {latent} latent values (listed in --json and --csv output); max R-hat {}, min bulk ESS {}",
                fixed(rhat, 3),
                fixed(ess, 0)
            ));
        }
        if !self.estimates.is_empty() {
            r.line("estimates:");
            let mut t = table();
            for e in &self.estimates {
                t.row(e.name.clone(), cells(&e.summary));
            }
            r.table(t);
        }
        if let Some(method) = self
            .estimates
            .iter()
            .find_map(|e| e.cv.as_ref().map(|c| c.method.clone()))
        {
            r.line(format!("control variates ({method}):"));
            let mut t = Table::new(0, Some(width), 1, &[12, 10, 12, 10, 10]);
            t.header(&["cv", "cv_se", "mc", "mc_se", "var. red."]);
            for e in &self.estimates {
                if let Some(c) = &e.cv {
                    t.row(
                        e.name.clone(),
                        vec![
                            fixed(c.cv, 6),
                            format!("{:.2e}", c.cv_se),
                            fixed(c.mc, 6),
                            format!("{:.2e}", c.mc_se),
                            format!("{:.1}", c.variance_reduction()),
                        ],
                    );
                }
            }
            r.table(t);
        }
        if !independent {
            r.line(format!(
                "divergences: {} of {total}; step sizes: {}",
                self.divergences,
                self.step_sizes
                    .iter()
                    .map(|e| format!("{e:.3}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let held: Vec<&str> = self
            .estimates
            .iter()
            .filter(|e| e.cv.as_ref().is_some_and(|c| c.held_out))
            .map(|e| e.name.as_str())
            .collect();
        if !held.is_empty() {
            r.warning(format!(
                "the control-variate fit of {} moved its estimate by more than twice the held-out error; the held-out (split) estimate is reported",
                held.join(", ")
            ));
        }
        for w in &self.warnings {
            r.warning(w.clone());
        }
        let mut summary = Map::new();
        for (n, s) in self.names.iter().zip(&self.summaries) {
            summary.insert(n.clone(), summary_json(s));
        }
        let mut est = Map::new();
        for e in &self.estimates {
            let mut j = json!({"mc": e.summary.mean, "mc_se": e.summary.mcse, "sd": e.summary.sd, "ess_bulk": e.summary.ess_bulk, "method": "none"});
            if let Some(cv) = &e.cv {
                j["cv"] = json!(cv.cv);
                j["cv_se"] = json!(cv.cv_se);
                j["held_out"] = json!(cv.held_out);
                j["method"] = json!(cv.method);
                j["variance_reduction"] = json!(cv.variance_reduction());
            }
            est.insert(e.name.clone(), j);
        }
        let (min_ess, max_rhat) = self.extremes();
        r.field("summary", summary)
            .field("estimates", est)
            .field("sampling_seconds", self.sampling_seconds)
            .field("warmup_seconds", self.warmup_seconds)
            .field("divergences", self.divergences)
            .field("max_depth_hits", self.max_depth_hits)
            .field("chains", chains)
            .field("draws", self.kept())
            .field("draws_requested", self.cfg.draws)
            .field("stop_reason", self.reason.clone())
            .field("warmup", self.cfg.warmup)
            .field("warmup_iterations", json!(self.warmup_iterations))
            .field("warmup_gradient_evaluations", self.warmup_gradients)
            .field("step_size", json!(self.step_sizes))
            .field("ebfmi", json!(self.ebfmi))
            .field("gradient_evaluations", self.gradients)
            .field("ess_bulk_min", min_ess)
            .field("rhat_max", max_rhat);
        if self.chain_offset > 0 {
            r.field("chain_offset", self.chain_offset);
        }
        if let Some(p) = &self.predictions {
            p.report_into(&mut r, self.engine);
        }
        r
    }
}

/// The summary of one column's draws per chain \[chains\]\[draws\]: by
/// [`summarize`] for Markov chains, by [`summarize_independent`] over all
/// draws for independent ones.
fn summary_of(chains: &[Vec<f64>], independent: bool) -> Summary {
    if independent {
        summarize_independent(&chains.concat())
    } else {
        summarize(chains)
    }
}

/// Every draw's value is finite, and so are the means and (given two draws
/// or more) the sds of the columns; otherwise an error naming the column
/// and, for a draw that is not finite, the chain and the draw
/// (values \[chains\]\[draws\]\[columns\]).
fn check_finite(
    names: &[String],
    values: &[Vec<Vec<f64>>],
    summaries: &[Summary],
) -> Result<(), Error> {
    let improper = "the posterior may be improper (a param with a flat prior that the data do not constrain) or badly scaled; give every param a proper prior";
    for (c, chain) in values.iter().enumerate() {
        for (i, row) in chain.iter().enumerate() {
            if let Some(k) = row.iter().position(|v| !v.is_finite()) {
                return Err(Error::new(
                    ErrorKind::Numerical,
                    format!(
                        "the draws of `{}` are not finite (draw {} of chain {} is {}): the chains ran off to infinity",
                        names[k],
                        i + 1,
                        c + 1,
                        crate::error::num(row[k])
                    ),
                )
                .with_note(improper));
            }
        }
    }
    let draws: usize = values.iter().map(Vec::len).sum();
    if let Some(k) = summaries
        .iter()
        .position(|s| !s.mean.is_finite() || (draws >= 2 && !s.sd.is_finite()))
    {
        let s = &summaries[k];
        return Err(Error::new(
            ErrorKind::Numerical,
            format!(
                "the draws of `{}` are not finite (mean {}, sd {}): the chains ran off to infinity, past what a floating-point sum can hold",
                names[k],
                crate::error::num(s.mean),
                crate::error::num(s.sd)
            ),
        )
        .with_note(improper));
    }
    Ok(())
}

/// Whether a chain of two draws or more stayed at its first point (every
/// transition rejected).
pub fn did_not_move<'a>(mut points: impl Iterator<Item = &'a [f64]>) -> bool {
    let Some(first) = points.next() else {
        return false;
    };
    let mut rest = points.peekable();
    rest.peek().is_some() && rest.all(|p| p == first)
}

/// A sampling run's diagnostics, as [`warnings`] reads them.
pub struct RunDiagnostics<'a> {
    /// Column names.
    pub names: &'a [String],
    /// Their summaries.
    pub summaries: &'a [Summary],
    /// Chains.
    pub chains: usize,
    /// Draws after warm-up, all chains.
    pub total: usize,
    /// Draws per chain the summaries use.
    pub per_chain: usize,
    /// Divergent transitions after warm-up.
    pub divergences: usize,
    /// Transitions at the maximum tree depth.
    pub max_depth_hits: usize,
    /// E-BFMI per chain.
    pub ebfmi: &'a [f64],
    /// The first chain's id (1 unless chains were offset).
    pub first_chain: usize,
    /// The chains (0-based) whose draws are all one point.
    pub stuck: &'a [usize],
    /// Each chain's step size after warm-up, when known (else empty).
    pub step_sizes: &'a [f64],
}

/// The warnings a sampling run's diagnostics call for: too few draws for
/// R-hat or the ESS, chains that did not move, divergences, trees at the
/// maximum depth, R-hat above 1.01, bulk ESS below 100 per chain, E-BFMI
/// below 0.3.
pub fn warnings(d: &RunDiagnostics) -> Vec<String> {
    let mut w = Vec::new();
    let total = d.total;
    let n = d.per_chain;
    if total == 1 {
        w.push("one draw in all: its sd, Monte Carlo standard error, R-hat and ESS cannot be computed (shown as NaN); take more draws".into());
    } else if n < MIN_DRAWS_ESS {
        let what = if n < MIN_DRAWS_RHAT {
            format!(
                "R-hat, the ESS and the Monte Carlo standard error cannot be computed (shown as NaN; R-hat needs {MIN_DRAWS_RHAT} draws per chain, the ESS {MIN_DRAWS_ESS})"
            )
        } else {
            format!(
                "the ESS and the Monte Carlo standard error cannot be computed (shown as NaN; the ESS needs {MIN_DRAWS_ESS} draws per chain)"
            )
        };
        w.push(format!(
            "{n} draw{} per chain: {what}; take more draws",
            if n == 1 { "" } else { "s" }
        ));
    }
    if !d.stuck.is_empty() {
        let ids: Vec<String> = d
            .stuck
            .iter()
            .map(|&c| match d.step_sizes.get(c) {
                Some(e) => format!(
                    "{} (step size {})",
                    c + d.first_chain,
                    crate::error::num(*e)
                ),
                None => (c + d.first_chain).to_string(),
            })
            .collect();
        w.push(format!(
            "chain{} {} did not move (every transition after warm-up was rejected): the step size does not suit the posterior; run a longer warm-up, or give a smaller `step_size`",
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", ")
        ));
    }
    if d.divergences > 0 {
        w.push(format!("{} of {total} transitions after warm-up diverged: the posterior may be biased; raise target_accept or reparameterise", d.divergences));
    }
    if d.max_depth_hits > 0 {
        w.push(format!("{} transitions hit the maximum tree depth: the sampler may be inefficient; consider raising max_depth", d.max_depth_hits));
    }
    if let Some((i, s)) = d
        .summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.rhat.is_finite())
        .max_by(|a, b| a.1.rhat.total_cmp(&b.1.rhat))
        && s.rhat > 1.01
    {
        w.push(format!(
            "R-hat of {} is {} (> 1.01): the chains have not mixed; run longer",
            d.names[i],
            fixed(s.rhat, 3)
        ));
    }
    let min_ess = 100.0 * d.chains as f64;
    if let Some((i, s)) = d
        .summaries
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ess_bulk.is_finite())
        .min_by(|a, b| a.1.ess_bulk.total_cmp(&b.1.ess_bulk))
        && s.ess_bulk < min_ess
    {
        w.push(format!(
            "the bulk ESS of {} is {:.0} (< 100 per chain): estimates may be unreliable",
            d.names[i], s.ess_bulk
        ));
    }
    for (c, e) in d.ebfmi.iter().enumerate() {
        if *e < 0.3 {
            w.push(format!("chain {}: E-BFMI {e:.2} (< 0.3): the momentum resampling explores the energy poorly", c + d.first_chain));
        }
    }
    w
}

/// The summary table's cells of one column: mean, mcse, sd, 5 %, 50 %,
/// 95 %, R-hat, bulk and tail ESS (huge values in scientific notation).
pub fn summary_cells(x: &Summary) -> Vec<String> {
    let f4 = |v: f64| fixed(v, 4);
    vec![
        f4(x.mean),
        f4(x.mcse),
        f4(x.sd),
        f4(x.q5),
        f4(x.q50),
        f4(x.q95),
        fixed(x.rhat, 3),
        fixed(x.ess_bulk, 0),
        fixed(x.ess_tail, 0),
    ]
}

/// The summary table's column headers.
pub const SUMMARY_HEADER: [&str; 9] = [
    "mean", "mcse", "sd", "5%", "50%", "95%", "rhat", "ess_bulk", "ess_tail",
];

/// The summary table's column widths.
pub const SUMMARY_WIDTHS: [usize; 9] = [10, 10, 10, 10, 10, 10, 7, 8, 8];

/// The smallest bulk ESS and the largest R-hat over `summaries`.
pub fn extremes(summaries: &[Summary]) -> (f64, f64) {
    let min_ess = summaries
        .iter()
        .map(|s| s.ess_bulk)
        .fold(f64::INFINITY, f64::min);
    let max_rhat = summaries
        .iter()
        .map(|s| s.rhat)
        .fold(f64::NEG_INFINITY, f64::max);
    (min_ess, max_rhat)
}

/// One column's summary as JSON.
pub fn summary_json(s: &Summary) -> serde_json::Value {
    json!({"mean": s.mean, "sd": s.sd, "mcse": s.mcse, "q5": s.q5, "q50": s.q50, "q95": s.q95, "rhat": s.rhat, "ess_bulk": s.ess_bulk, "ess_tail": s.ess_tail})
}

/// The model's control-variate method (`using control_variates(...)`),
/// plain Monte Carlo when there is none.
pub fn cv_spec(g: &crate::ir::graph::Graph) -> Result<CvSpec, Error> {
    match &g.estimate_method {
        Some(call) => match call.args.first() {
            Some(a) => crate::mc::spec::parse(&a.value),
            None => Ok(CvSpec::none()),
        },
        None => Ok(CvSpec::none()),
    }
}

/// Control variates for every estimate component, from the draws x (on
/// the unconstrained scale) and their scores ∇log π(x). `false` when the
/// run's stop flag left some without.
fn apply_control_variates(
    spec: &CvSpec,
    draws: &[Vec<Draw>],
    independent: bool,
    estimates: &mut [Estimate],
    density: &Density,
    f: &[Vec<f64>],
    cols: &[Option<Vec<usize>>],
) -> Result<bool, Error> {
    let all: Vec<&Draw> = draws.iter().flatten().collect();
    let n = all.len();
    let d = density.dim;
    let x = DMatrix::from_fn(n, d, |i, j| all[i].q[j]);
    let u = DMatrix::from_fn(n, d, |i, j| all[i].score[j]);
    // A task's control variates on its own coordinates ([`task_coordinates`]:
    // a Stein image of a function of those coordinates alone, with the
    // joint score's components there, still has mean zero).
    let on = |m: &DMatrix<f64>, c: &Option<Vec<usize>>| match c {
        Some(c) => m.select_columns(c),
        None => m.clone(),
    };
    match spec {
        CvSpec::Scalar(m) => {
            let samples = if independent {
                Samples::iid(x, u)
            } else {
                Samples::chains(x, u, draws.iter().map(Vec::len).collect())
            };
            // One estimate at a time (each may take seconds): a stop
            // leaves the rest without.
            for (e, fk) in estimates.iter_mut().zip(f) {
                if density.bound.stop.is_set() {
                    return Ok(false);
                }
                e.cv = Some(crate::mc::control_variates::estimate(m, &samples, fk)?);
            }
        }
        CvSpec::VectorValued {
            kernel,
            ell,
            lambda,
            b,
            order,
        } => {
            // The integrals share one target: every task has the same draws,
            // thinned so that the joint system stays small.
            let t = estimates.len();
            let idx = crate::mc::control_variates::thin(n, vv_task_points(t));
            let tasks: Vec<Task> = f
                .iter()
                .zip(cols)
                .map(|(fk, c)| Task {
                    x: on(&x, c).select_rows(&idx),
                    u: on(&u, c).select_rows(&idx),
                    f: idx.iter().map(|&i| fk[i]).collect(),
                })
                .collect();
            let vv = vector_valued_poly(&tasks, *kernel, *ell, *lambda, b, *order)?;
            for (e, mut cv) in estimates.iter_mut().zip(vv.estimates) {
                // The plain Monte Carlo figures use every draw.
                cv.mc = e.summary.mean;
                cv.mc_se = e.summary.mcse;
                e.cv = Some(cv);
            }
        }
    }
    Ok(true)
}

/// The most draws of each integral that vector-valued control variates
/// fit on, with `tasks` integrals (the joint system stays small).
pub fn vv_task_points(tasks: usize) -> usize {
    (crate::mc::control_variates::MAX_KERNEL_POINTS / tasks.max(1)).max(20)
}

/// Check the `estimate` block and its control-variate method before any
/// draw is made, so a mistake fails now rather than after the last draw:
/// every integrand at `at` (a chain's initial point, or the first
/// independent draw), and the method against `draws` draws in all, the
/// density's dimension and the block's components
/// ([`CvSpec::check_size`], at the method's span).
pub fn check_estimates(density: &Density, at: &[f64], draws: usize) -> Result<(), Error> {
    let values = density.estimate_values(at).map_err(|e| {
        if density.integrates_out_gp() {
            e.with_note("with a `normal` likelihood the latent GP is integrated out when sampling, so its values are not drawn; estimate functions of the params, or write the likelihood in the model file to sample the GP's values")
        } else {
            e
        }
    })?;
    let tasks: usize = values.iter().map(Vec::len).sum();
    let g = &density.bound.graph;
    cv_spec(g)?
        .check_size(draws, density.dim, tasks, vv_task_points(tasks))
        .map_err(|e| match &g.estimate_method {
            Some(call) => e.with_span(call.span).with_label("this method"),
            None => e,
        })
}

/// The `estimate` block's integrands at every draw: per estimate, per
/// chain, per draw, its components [estimates][chains][draws][components].
type EstimateDraws = Vec<Vec<Vec<Vec<f64>>>>;

/// An integrand that is not finite at one draw is an error at its
/// estimate, naming the draw and the params there (`names`, and `values`
/// per chain and draw). `check`: read the stop flag at every draw.
fn estimate_draws(
    density: &Density,
    draws: &[Vec<Draw>],
    names: &[String],
    values: &[Vec<Vec<f64>>],
    check: bool,
) -> Result<EstimateDraws, Error> {
    let g = &density.bound.graph;
    let k = g.estimates.len();
    let mut out: EstimateDraws = vec![vec![Vec::new(); draws.len()]; k];
    for (c, chain) in draws.iter().enumerate() {
        for (i, d) in chain.iter().enumerate() {
            if check && k > 0 {
                density.bound.stop.check("evaluating the estimates")?;
            }
            for (e, v) in density.estimate_values(&d.q)?.into_iter().enumerate() {
                if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                    let at = values.get(c).and_then(|v| v.get(i));
                    return Err(not_finite_estimate(
                        &g.estimates[e],
                        format!(
                            "its integrand is {} at draw {} of chain {}, where {}",
                            tempest_infer::finite::show(*x),
                            i + 1,
                            c + 1,
                            tempest_infer::finite::named(names, at.map_or(&[][..], Vec::as_slice))
                        ),
                    ));
                }
                out[e][c].push(v);
            }
        }
    }
    Ok(out)
}

/// The error for an estimate that is not finite, and why (`cause`).
fn not_finite_estimate(e: &crate::ir::graph::EstimateNode, cause: String) -> Error {
    Error::at(
        ErrorKind::Numerical,
        e.span,
        format!("the estimate `{}` is not finite: {cause}", e.name),
    )
    .with_label("this expectation")
    .with_note("an expectation is reported only when its integrand is finite at every draw and its average is finite: rewrite it so that it cannot overflow (e.g. estimate a logarithm)")
}

/// Every estimate component's mean (and control-variate estimate) must be
/// finite: a mean that overflows is an error at its estimate (`owners`:
/// each component's estimate).
fn finite_estimates(density: &Density, est: &[Estimate], owners: &[usize]) -> Result<(), Error> {
    for (e, &owner) in est.iter().zip(owners) {
        let node = &density.bound.graph.estimates[owner];
        let cv = e.cv.as_ref().map_or(0.0, |c| c.cv);
        if !e.summary.mean.is_finite() {
            return Err(not_finite_estimate(
                node,
                format!(
                    "the average of its draws ({}) overflows",
                    tempest_infer::finite::show(e.summary.mean)
                ),
            ));
        }
        if !cv.is_finite() {
            return Err(not_finite_estimate(
                node,
                format!(
                    "its control-variate estimate is {}",
                    tempest_infer::finite::show(cv)
                ),
            ));
        }
    }
    Ok(())
}

/// The coordinates of x (unconstrained params) an integrand depends on,
/// directly or through lets ([`crate::ir::graph::Graph::dependencies`]),
/// in order; `None` when it depends on a latent GP or on every coordinate.
pub fn coordinates_of(density: &Density, e: &crate::ir::expr::TExpr) -> Option<Vec<usize>> {
    use crate::ir::expr::Ref;
    let g = &density.bound.graph;
    let deps = g.dependencies(e);
    let latent = e.uses_latent()
        || deps
            .iter()
            .any(|r| matches!(r, Ref::Let(j) if g.lets[*j].value.uses_latent()));
    if latent {
        return None;
    }
    let mut params = vec![false; g.params.len()];
    for r in &deps {
        if let Ref::Param(i) = r {
            params[*i] = true;
        }
    }
    let cols: Vec<usize> = density
        .slots
        .iter()
        .filter(|s| params[s.param])
        .flat_map(|s| s.offset..s.offset + s.len())
        .collect();
    (cols.len() < density.dim).then_some(cols)
}

/// The coordinates each vector-valued task works on: its integrand's own
/// when the draws are independent draws from priors under which every
/// integrand's params are independent of the others' (disjoint sets of
/// equal size whose priors mention no param of another set — the same
/// inputs declared once per integrand, as in multi-fidelity studies), so
/// each task has draws of its own; otherwise every coordinate for every
/// task (under a posterior, the other coordinates' scores carry
/// information about any integrand).
fn task_coordinates(density: &Density, engine: &str, owners: &[usize]) -> Vec<Option<Vec<usize>>> {
    let all = vec![None; owners.len()];
    if engine != super::prior::NAME || owners.len() < 2 {
        return all;
    }
    let g = &density.bound.graph;
    let cols: Vec<Option<Vec<usize>>> = owners
        .iter()
        .map(|&k| coordinates_of(density, &g.estimates[k].expr))
        .collect();
    let Some(first) = cols[0].as_ref() else {
        return all;
    };
    let mut owner_of = vec![usize::MAX; density.dim];
    for (t, c) in cols.iter().enumerate() {
        match c {
            Some(c) if c.len() == first.len() => {
                for &j in c {
                    if owner_of[j] != usize::MAX && owners[owner_of[j]] != owners[t] {
                        return all;
                    }
                    owner_of[j] = t;
                }
            }
            _ => return all,
        }
    }
    // No prior may tie a param of one set to a param of another.
    let set_of = |param: usize| {
        density
            .slots
            .iter()
            .find(|s| s.param == param)
            .and_then(|s| owner_of.get(s.offset).copied())
    };
    for p in &g.priors {
        let mine = set_of(p.param);
        for a in &p.dist.args {
            for r in a.refs() {
                if let crate::ir::expr::Ref::Param(q) = r
                    && set_of(q) != mine
                {
                    return all;
                }
            }
        }
    }
    cols
}

/// Each estimate component's summary, its draws (chains concatenated)
/// and the estimate (index into the graph's estimates) it belongs to.
type Components = (Vec<Estimate>, Vec<Vec<f64>>, Vec<usize>);

/// Summarise each component of each estimate; also returns each
/// component's draws in chain order (for control variates) and the
/// estimate it belongs to.
fn estimates(density: &Density, values: &EstimateDraws, independent: bool) -> Components {
    let g = &density.bound.graph;
    let mut out = Vec::new();
    let mut series = Vec::new();
    let mut owners = Vec::new();
    for (owner, (e, per_chain)) in g.estimates.iter().zip(values).enumerate() {
        let k = per_chain
            .first()
            .and_then(|c| c.first())
            .map(|v| v.len())
            .unwrap_or(1);
        for j in 0..k {
            let chains: Vec<Vec<f64>> = per_chain
                .iter()
                .map(|c| c.iter().map(|v| v[j]).collect())
                .collect();
            let name = if k == 1 {
                e.name.clone()
            } else {
                format!("{}[{j}]", e.name)
            };
            out.push(Estimate {
                name,
                summary: summary_of(&chains, independent),
                cv: None,
            });
            series.push(chains.concat());
            owners.push(owner);
        }
    }
    (out, series, owners)
}

/// The sampler fit behind a [`tempest_infer::fit::Fit`] trait object (an
/// engine's fit is its own type; `fit.as_mcmc()` with this trait in scope,
/// or `fit.downcast_ref::<McmcFit>()`).
pub trait AsMcmc {
    /// The sampling fit, if this is one.
    fn as_mcmc(&self) -> Option<&McmcFit>;
}

impl AsMcmc for dyn tempest_infer::fit::Fit {
    fn as_mcmc(&self) -> Option<&McmcFit> {
        self.downcast_ref()
    }
}
