//! A sampling run: many chains over one density, each step advancing
//! every chain for a time slice, chains in parallel (rayon), kept draws
//! streamed to the run's draw sinks (e.g. a Stan CSV file per chain) as
//! they are made. The samplers' engines (`tempest-mcmc`) and the evidence
//! engine's rungs drive one; [`SamplerRun::finish`] hands back its draws.

use super::chain::{Chain, ChainConfig, Draw, Method};
use super::density::Density;
use super::hamiltonian::Target;
use super::settings::SamplerSettings;
use crate::error::{Error, ErrorKind};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempest_infer::engine::{Lane, Progress, Status};
use tempest_infer::sink::{ChainRun, DrawSink, DrawSinks, RunHeader, SamplerStats};

impl Target for Density {
    fn dim(&self) -> usize {
        self.dim
    }
    fn logp_grad(&self, q: &[f64], grad: &mut [f64]) -> Result<f64, Error> {
        self.log_density_grad(q, grad)
    }
}

/// A sampling run in progress.
pub struct SamplerRun {
    density: Arc<Density>,
    name: &'static str,
    chains: Vec<Chain>,
    draws: Vec<Vec<Draw>>,
    /// Each kept draw's output values (`Density::stan_values`), computed
    /// once inside the chain's slice and used for the CSV line and the
    /// summaries [chains][draws][columns].
    values: Vec<Vec<Vec<f64>>>,
    /// Whether to keep `values` (off for runs whose draws only feed
    /// another engine).
    keep_values: bool,
    /// Each chain's draw sinks [chains][sinks].
    writers: Vec<Vec<Box<dyn DrawSink>>>,
    cfg: ChainConfig,
    seed: u64,
    predictive_draws: usize,
    chain_offset: usize,
    started: Instant,
    sampling_started: Option<Instant>,
    warmup_seconds: f64,
    gradients: usize,
}

/// How long each chain runs between two steps of the engine (progress
/// updates and Ctrl-C checks).
const SLICE: std::time::Duration = std::time::Duration::from_millis(25);

impl SamplerRun {
    /// Start `s.chains` chains of `s`'s sampler over `density`; each
    /// chain's draws stream to a sink opened from every one of `sinks`, and
    /// chain k starts at `init[k]` when given (a warm start), else at a
    /// random point the prior's supports admit. `check` sees the density
    /// and the first chain's initial point once the chains exist, before
    /// any sink is written past its header (the samplers' engines check
    /// the `estimate` block there); its error ends the run.
    ///
    /// Errors: the draws (and a dense or low-rank metric) beyond the memory
    /// budget, at `draws`; a sink that cannot be opened; a chain with no
    /// finite initial point; `check`'s.
    pub fn new(
        density: Density,
        s: &SamplerSettings,
        sinks: &[Arc<dyn DrawSinks>],
        model_name: &str,
        init: Option<&[Vec<f64>]>,
        check: impl FnOnce(&Density, &[f64]) -> Result<(), Error>,
    ) -> Result<SamplerRun, Error> {
        let chain_cfg = s.chain;
        let method = chain_cfg.method;
        let (n, seed) = (s.chains, s.seed);
        // Counted, not named: the names of a hundred million latent values
        // would take gigabytes before the check below refuses them.
        let columns = density.columns();
        let mut requests = vec![
            crate::limits::Request::new("keeping the draws")
                .times("chains", n)
                .times("draws", chain_cfg.draws)
                .times(
                    "numbers per draw (position, score, output columns, statistics)",
                    2 * density.dim + columns + 8,
                ),
        ];
        use super::chain::Adaptation;
        let metric = match chain_cfg.adaptation {
            Adaptation::Dense => Some((
                "the dense metric (its factor, the draws' covariance and its estimate)",
                3u64,
            )),
            Adaptation::LowRank => Some((
                "the low-rank metric (its transform L and L⁻ᵀ, old and new while one replaces the other)",
                4u64,
            )),
            _ => None,
        };
        if let Some((what, matrices)) = metric {
            requests.push(
                crate::limits::Request::new(what)
                    .times("chains", n)
                    .times("matrices", matrices)
                    .times("params", density.dim)
                    .times("params", density.dim),
            );
        }
        crate::limits::check_memory(&requests)
        .map_err(|e| {
            density.at_largest(s.written.at(e, "draws"))
                .with_note("lower `draws` or `chains`, or sample fewer quantities (with `adaptation = dense` or `low_rank`, a diagonal metric needs no d × d matrices)")
        })?;
        let density = Arc::new(density);
        let mut writers = Vec::with_capacity(n);
        if !sinks.is_empty() {
            let mut run = ChainRun {
                header: RunHeader {
                    model: model_name.to_string(),
                    chain_id: 0,
                    seed,
                    warmup: chain_cfg.warmup,
                    draws: chain_cfg.draws,
                    sampler: method.name(),
                    cmdstan: s.cmdstan,
                    adapt_delta: chain_cfg.target_accept,
                    max_depth: match method {
                        Method::Nuts { max_depth } => Some(max_depth),
                        _ => None,
                    },
                    data_file: density.bound.data_file.clone(),
                    tempest_version: env!("CARGO_PKG_VERSION").to_string(),
                    tempest: tempest_header(&density, &chain_cfg),
                },
                columns: density.stan_names(),
            };
            for c in 0..n {
                run.header.chain_id = s.chain_offset + c + 1;
                writers.push(
                    sinks
                        .iter()
                        .map(|s| s.open(&run))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
        } else {
            writers.resize_with(n, Vec::new);
        }
        // After the sinks: a run that cannot write its files (another run
        // holds them) fails before the chains' first evaluations.
        let chains: Vec<Chain> = (0..n)
            .into_par_iter()
            .map(|i| {
                let at = init.and_then(|v| v.get(i)).map(Vec::as_slice);
                Chain::new_at(&*density, s.chain_offset + i, seed, chain_cfg, at)
            })
            .collect::<Result<_, _>>()?;
        if let Some(c) = chains.first() {
            check(&density, &c.position())?;
        }
        let sampling_started = if chain_cfg.warmup == 0 {
            for (ws, c) in writers.iter_mut().zip(&chains) {
                for w in ws {
                    w.adapted(c.eps, &c.metric_diagonal())?;
                }
            }
            Some(Instant::now())
        } else {
            None
        };
        Ok(SamplerRun {
            density,
            name: method.name(),
            draws: vec![Vec::with_capacity(chain_cfg.draws); n],
            values: vec![Vec::with_capacity(chain_cfg.draws); n],
            keep_values: true,
            chains,
            writers,
            cfg: chain_cfg,
            seed,
            predictive_draws: s.predictive_draws,
            chain_offset: s.chain_offset,
            started: Instant::now(),
            sampling_started,
            warmup_seconds: 0.0,
            gradients: 0,
        })
    }
}

/// The `# tempest` lines of a chain's Stan CSV header: the posterior's
/// fingerprint and the settings CmdStan's keys do not cover
/// (`tempest summary` compares them across files).
fn tempest_header(density: &Density, cfg: &ChainConfig) -> Vec<(String, String)> {
    let mut h = vec![
        (
            "posterior".to_string(),
            super::same_run::fingerprint(density),
        ),
        ("adaptation".into(), cfg.adaptation.name().into()),
        ("early_stop".into(), cfg.early_stop.to_string()),
    ];
    if let Some(e) = cfg.step_size {
        h.push(("step_size".into(), crate::error::num(e)));
    }
    if let Method::Hmc { steps } = cfg.method {
        h.push(("leapfrog_steps".into(), steps.to_string()));
    }
    h
}

impl SamplerRun {
    /// Do not keep the draws' output values (for a run whose draws only
    /// feed another engine, read through [`SamplerRun::into_draws`]).
    pub fn without_values(mut self) -> Self {
        self.keep_values = false;
        self
    }

    /// The kept draws per chain and each chain's current position (after
    /// `step` has returned `Done`).
    pub fn into_draws(self) -> (Vec<Vec<Draw>>, Vec<Vec<f64>>) {
        let pos = self.chains.iter().map(|c| c.position()).collect();
        (self.draws, pos)
    }

    /// Advance every chain for one time slice (or to its last draw, or a
    /// stop): `Done` once every chain has taken its draws.
    ///
    /// Errors: a draw sink that cannot be written, output values that
    /// cannot be computed at a draw.
    pub fn step(&mut self) -> Result<Status, Error> {
        let density = &*self.density;
        // Each chain runs on for a time slice, so chains with short
        // trajectories do not wait at every iteration for chains with long
        // ones. The chains are independent, so the draws do not depend on
        // the slicing.
        let keep = self.keep_values;
        let t0 = self.started;
        let stop = &density.bound.stop;
        // A chain's draws and values of the slice, and when (seconds since
        // the start) it ended its warm-up in the slice.
        type Slice = (Vec<Draw>, Vec<Vec<f64>>, Option<f64>);
        let results: Vec<Result<Slice, Error>> = self
            .chains
            .par_iter_mut()
            .zip(self.writers.par_iter_mut())
            .map(|(chain, writer)| {
                let started = Instant::now();
                let mut draws = Vec::new();
                let mut values = Vec::new();
                let mut adapted = None;
                while !chain.done() && !stop.is_set() {
                    let was_warming = chain.warming_up();
                    let draw = chain.step(density);
                    // A stop during the iteration may have cut its
                    // evaluations short (a trajectory read as divergent):
                    // its draw is not kept.
                    if stop.is_set() {
                        break;
                    }
                    let adapted_now = was_warming && !chain.warming_up();
                    if adapted_now {
                        adapted = Some(t0.elapsed().as_secs_f64());
                        for w in writer.iter_mut() {
                            w.adapted(chain.eps, &chain.metric_diagonal())?;
                        }
                    }
                    if let Some(d) = &draw
                        && (keep || !writer.is_empty())
                    {
                        let v = density.stan_values(&d.q)?;
                        if !writer.is_empty() {
                            let s = d.stats;
                            let stats = SamplerStats {
                                lp: d.lp,
                                accept_stat: s.accept_stat,
                                stepsize: s.step_size,
                                treedepth: s.tree_depth,
                                n_leapfrog: s.n_leapfrog,
                                divergent: s.divergent,
                                energy: s.energy,
                            };
                            for w in writer.iter_mut() {
                                w.draw(&stats, &v)?;
                            }
                        }
                        if keep {
                            values.push(v);
                        }
                    }
                    draws.extend(draw);
                    if started.elapsed() >= SLICE {
                        break;
                    }
                }
                Ok((draws, values, adapted))
            })
            .collect();
        for (c, r) in results.into_iter().enumerate() {
            let (draws, values, adapted) = r?;
            self.values[c].extend(values);
            // Warm-up lasts until the last chain has ended its own.
            if let Some(at) = adapted {
                self.warmup_seconds = self.warmup_seconds.max(at);
            }
            for d in draws {
                self.gradients += d.stats.n_leapfrog;
                self.draws[c].push(d);
            }
        }
        if self.sampling_started.is_none() && self.chains.iter().all(|c| !c.warming_up()) {
            self.sampling_started =
                Some(self.started + Duration::from_secs_f64(self.warmup_seconds));
        }
        if self.chains.iter().all(|c| c.done()) {
            return Ok(Status::Done("all draws taken".into()));
        }
        Ok(Status::Running)
    }

    /// Where the run is: the slowest chain's iteration, and a lane per
    /// chain (its phase, step size and divergences).
    pub fn progress(&self) -> Progress {
        let total = self.cfg.warmup + self.cfg.draws;
        let lanes = self
            .chains
            .iter()
            .map(|c| Lane {
                label: format!("chain {}", c.id + 1),
                pos: c.iter,
                len: total,
                message: format!(
                    "{} ε {:.3} divergences {}",
                    if c.warming_up() {
                        "warm-up"
                    } else {
                        "sampling"
                    },
                    c.eps,
                    c.divergences
                ),
            })
            .collect();
        Progress {
            step: self.chains.iter().map(|c| c.iter).min().unwrap_or(0),
            total: Some(total),
            objective: None,
            objective_name: "",
            message: String::new(),
            lanes,
        }
    }

    /// End the run (after `Done`, or a stop with `reason`): every chain is
    /// cut to the draws of the one with fewest, the sinks are closed (told
    /// of the stop), and the draws handed back.
    ///
    /// Errors: no draw kept in some chain (a stop during warm-up), a sink
    /// that cannot be written.
    pub fn finish(self, reason: &str) -> Result<Finished, Error> {
        let mut this = self;
        // A run stopped early keeps the same number of draws in every
        // chain (the fewest any chain has), so the diagnostics compare
        // like with like; with none, there is nothing to report.
        let kept = this.draws.iter().map(Vec::len).min().unwrap_or(0);
        for (d, v) in this.draws.iter_mut().zip(this.values.iter_mut()) {
            d.truncate(kept);
            if !v.is_empty() {
                v.truncate(kept);
            }
        }
        let sampling_seconds = this
            .sampling_started
            .map(|s| s.elapsed().as_secs_f64())
            .unwrap_or(0.0);
        // The sinks hold what the fit holds: a stopped run's sinks drop
        // the draws past `kept`.
        let stopped = this.chains.iter().any(|c| !c.done());
        let mut writers = this.writers;
        let sinks = writers.iter().any(|w| !w.is_empty());
        for mut w in writers.drain(..).flatten() {
            if stopped {
                w.stopped(kept, reason)?;
            }
            w.finish(this.warmup_seconds, sampling_seconds)?;
        }
        if kept == 0 {
            let warming: Vec<&Chain> = this.chains.iter().filter(|c| c.warming_up()).collect();
            let warmup = this.cfg.warmup;
            let past = this.draws.iter().map(Vec::len).max().unwrap_or(0);
            let mut e = Error::new(
                ErrorKind::Interrupted,
                match warming.iter().min_by_key(|c| c.iter) {
                    Some(c) => format!(
                        "the run stopped ({reason}) during warm-up, at iteration {} of {warmup} in the slowest chain (chain {}): no draws were kept",
                        c.iter,
                        c.id + 1
                    ),
                    None => format!(
                        "the run stopped ({reason}) before its first draw: no draws were kept"
                    ),
                },
            );
            if past > 0 {
                e = e.with_note(format!(
                    "{} of {} chains were still warming up; every chain is cut to the draws of the slowest, so the draws the others had taken (up to {past} per chain) are dropped",
                    warming.len(),
                    this.chains.len()
                ));
            }
            if sinks {
                e = e.with_note("the draw files (Stan CSV) hold each chain's header and no draws");
            }
            return Err(e);
        }
        Ok(Finished {
            step_sizes: this.chains.iter().map(|c| c.eps).collect(),
            metrics: this.chains.iter().map(|c| c.metric_diagonal()).collect(),
            warmup_ends: this
                .chains
                .iter()
                .map(|c| c.warmup_end.min(c.iter))
                .collect(),
            warmup_gradients: this.chains.iter().map(|c| c.warmup_gradients).sum(),
            name: this.name,
            density: this.density,
            draws: this.draws,
            values: this.values,
            cfg: this.cfg,
            sampling_seconds,
            warmup_seconds: this.warmup_seconds,
            gradients: this.gradients,
            seed: this.seed,
            predictive_draws: this.predictive_draws,
            chain_offset: this.chain_offset,
        })
    }
}

/// A finished run's draws and what the fit reports of them.
pub struct Finished {
    /// The sampler's name (`nuts`, `hmc`, `mala`).
    pub name: &'static str,
    /// The density sampled.
    pub density: Arc<Density>,
    /// Each chain's kept draws, all of one length \[chains\]\[draws\].
    pub draws: Vec<Vec<Draw>>,
    /// Each kept draw's output values \[chains\]\[draws\]\[columns\] (empty
    /// when the run kept none).
    pub values: Vec<Vec<Vec<f64>>>,
    /// Each chain's transition and warm-up.
    pub cfg: ChainConfig,
    /// Each chain's adapted step size \[chains\].
    pub step_sizes: Vec<f64>,
    /// Each chain's adapted metric's diagonal \[chains\]\[params\].
    pub metrics: Vec<Vec<f64>>,
    /// Seconds from the end of warm-up to the end of sampling.
    pub sampling_seconds: f64,
    /// Seconds until the last chain ended its warm-up.
    pub warmup_seconds: f64,
    /// Gradients evaluated after warm-up.
    pub gradients: usize,
    /// The iteration at which each chain ended its warm-up \[chains\].
    pub warmup_ends: Vec<usize>,
    /// Gradients evaluated during warm-up, over every chain.
    pub warmup_gradients: usize,
    /// The run's seed.
    pub seed: u64,
    /// Draws the posterior predictive averages over.
    pub predictive_draws: usize,
    /// The first chain's id minus one.
    pub chain_offset: usize,
}
