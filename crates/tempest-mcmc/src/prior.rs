//! `sample_prior`: plain Monte Carlo from the model's priors. Each draw is
//! ancestral: the params are drawn in an order where every prior's
//! arguments are drawn first (a hierarchical prior `w ~ normal(0, tau)`
//! after `tau`), each element from its built-in distribution truncated to
//! the param's bounds (by rejection), and a sampled latent GP's whitened
//! values from N(0, I). Each draw carries the prior's log density and score
//! ∇ log p(x) on the unconstrained scale (the likelihood at power 0), so
//! the `estimate` block and its control variates run on draws from a known
//! distribution: the borehole function's expectation under its input
//! distribution, a prior predictive, a power posterior at t = 0.
//!
//! The draws come from one random stream seeded by `seed`, so they are the
//! same for any number of threads.

use super::chain::{Adaptation, ChainConfig, Draw, Method};
use super::density::Density;
use super::fit::McmcFit;
use crate::error::{Error, ErrorKind};
use crate::ir::Graph;
use crate::ir::bind::Bound;
use crate::ir::eval::Env;
use crate::ir::expr::Ref;
use crate::ir::graph::DistRef;
use crate::ir::value::Value;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use serde_json::Value as Json;
use std::sync::Arc;
use std::time::Instant;
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;
use tempest_infer::seam::{Accepts, BuildCx, EngineDef, Restored, TestData};
use tempest_infer::settings::{EngineConfig, EngineSchema, SEED, SettingKind, SettingSpec, s};

/// The name of the engine.
pub const NAME: &str = "sample_prior";

const SETTINGS: &[SettingSpec] = &[
    s(
        "draws",
        SettingKind::Int(1, 10_000_000),
        Some("1000"),
        "independent draws from the prior",
    ),
    SEED,
    s(
        "predictive_draws",
        SettingKind::Int(1, 1_000_000),
        Some("1000"),
        "draws the prior predictive at `--test` averages over",
    ),
];

const SCHEMA: EngineSchema = EngineSchema {
    name: NAME,
    implemented: true,
    doc: "plain Monte Carlo: independent draws from the params' priors, with their scores",
    roles: &[],
    settings: SETTINGS,
};

/// The registered `sample_prior` engine.
pub struct PriorDef;

/// The `sample_prior` engine's definition.
pub const SAMPLE_PRIOR: PriorDef = PriorDef;

impl EngineDef for PriorDef {
    fn schema(&self) -> &EngineSchema {
        &SCHEMA
    }
    fn accepts(&self) -> Accepts {
        Accepts {
            test: TestData::Predicts,
            draw_sinks: false,
            families: &[],
            saves_fits: true,
            plot_params: true,
        }
    }
    fn restore(&self, graph: Graph, j: &Json, file: &str) -> Restored {
        super::saved::restore(graph, j, file, &SCHEMA)
    }
    fn build(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        _cx: &BuildCx,
    ) -> Result<Box<dyn Engine>, Error> {
        let draws = cfg.count("draws")?;
        let density = Density::new(bound)?.with_power(0.0);
        crate::limits::check_memory(&[crate::limits::Request::new("keeping the draws")
            .times("draws", draws)
            .times(
                "numbers per draw (position, score, output columns)",
                3 * density.dim + 8,
            )])
        .map_err(|e| density.at_largest(cfg.written().at(e, "draws")))?;
        Ok(Box::new(PriorEngine::new(
            density,
            draws,
            cfg.seed()?,
            cfg.count("predictive_draws")?,
        )?))
    }
}

/// Plain Monte Carlo from the priors, in progress.
pub struct PriorEngine {
    density: Arc<Density>,
    /// Prior statements (indices into the graph's priors) in an order
    /// where each one's arguments are drawn before it.
    order: Vec<usize>,
    draws: Vec<Draw>,
    values: Vec<Vec<f64>>,
    target: usize,
    rng: StdRng,
    seed: u64,
    predictive_draws: usize,
    started: Instant,
}

/// Draws made per step of the engine (progress and Ctrl-C checks).
const BLOCK: usize = 256;
/// Tries to draw one element inside its param's bounds before giving up.
const MAX_TRIES: usize = 10_000;

impl PriorEngine {
    /// An engine drawing `draws` times from the priors of `density` (a
    /// density at power 0).
    pub fn new(
        density: Density,
        draws: usize,
        seed: u64,
        predictive_draws: usize,
    ) -> Result<PriorEngine, Error> {
        let order = ancestral_order(&density)?;
        let mut e = PriorEngine {
            density: Arc::new(density),
            order,
            draws: Vec::with_capacity(draws),
            values: Vec::with_capacity(draws),
            target: draws,
            rng: StdRng::seed_from_u64(seed),
            seed,
            predictive_draws,
            started: Instant::now(),
        };
        // The first draw now, so a prior that cannot be drawn fails before
        // the run starts; and the estimates and their control-variate
        // method at it.
        let first = e.draw()?;
        super::fit::check_estimates(&e.density, &first.q, draws)?;
        e.keep(first)?;
        Ok(e)
    }

    fn keep(&mut self, d: Draw) -> Result<(), Error> {
        self.values.push(self.density.stan_values(&d.q)?);
        self.draws.push(d);
        Ok(())
    }

    /// One draw from the prior, with its log density and score.
    fn draw(&mut self) -> Result<Draw, Error> {
        let density = &*self.density;
        let bound = &density.bound;
        let g = &bound.graph;
        let mut x = vec![0.0; density.dim];
        let (mut params, _, _) = density.params_at(&x);
        for &pi in &self.order {
            let prior = &g.priors[pi];
            let slot = density
                .slots
                .iter()
                .find(|s| s.param == prior.param)
                .ok_or_else(|| Error::internal("a prior without its param's slot"))?;
            let DistRef::Builtin(dist) = &prior.dist.dist else {
                return Err(Error::at(
                    ErrorKind::Unsupported,
                    prior.dist.span,
                    format!(
                        "`{NAME}` draws from the built-in distributions; `{}` is written in the model file or in Rust",
                        prior.dist.name
                    ),
                )
                .with_label("cannot draw from this prior"));
            };
            let env = Env::new(bound, &density.hypers, &params, &[]);
            let args: Vec<Value<f64>> = prior
                .dist
                .args
                .iter()
                .map(|a| env.eval(a))
                .collect::<Result<_, _>>()?;
            let opts: Vec<f64> = prior.dist.options.iter().map(|(_, v)| *v).collect();
            let mut flat = Vec::with_capacity(slot.len());
            for k in 0..slot.len() {
                let a: Vec<f64> = args.iter().map(|v| element(v, k)).collect();
                let mut value = None;
                for _ in 0..MAX_TRIES {
                    match dist.draw(&a, &opts, &mut self.rng) {
                        Some(v) if slot.bounds.contains_strictly(v) => {
                            value = Some(v);
                            break;
                        }
                        Some(_) => {}
                        None => {
                            let shown: Vec<String> =
                                a.iter().map(|v| crate::error::num(*v)).collect();
                            return Err(Error::at(
                                ErrorKind::Numerical,
                                prior.dist.span,
                                format!(
                                    "a draw of `{}` failed: the arguments ({}) lie outside the parameter space of `{}`",
                                    g.params[prior.param].name,
                                    shown.join(", "),
                                    dist.name()
                                ),
                            )
                            .with_label("this prior"));
                        }
                    }
                }
                let Some(v) = value else {
                    return Err(Error::at(
                        ErrorKind::Numerical,
                        prior.dist.span,
                        format!(
                            "no draw of `{}` from its prior fell inside its bounds ({}) in {MAX_TRIES} tries",
                            g.params[prior.param].name,
                            slot.bounds.describe()
                        ),
                    )
                    .with_label("this prior")
                    .with_note("the prior puts almost no mass inside the declared bounds"));
                };
                flat.push(v);
                x[slot.offset + k] = slot.bounds.unconstrain(v).ok_or_else(|| {
                    Error::internal("a draw inside the bounds that does not unconstrain")
                })?;
            }
            params[prior.param] = match &params[prior.param] {
                Value::Real(_) => Value::Real(flat[0]),
                Value::Vector(_) => Value::Vector(nalgebra::DVector::from_vec(flat)),
                Value::Matrix(m) => Value::Matrix(nalgebra::DMatrix::from_row_slice(
                    m.nrows(),
                    m.ncols(),
                    &flat,
                )),
                other => other.clone(),
            };
        }
        // A sampled latent GP's whitened values: N(0, I) under the prior.
        if let (Some(lt), _) = density.gp_parts() {
            for v in &mut x[lt.offset..lt.offset + lt.n * lt.classes] {
                *v = StandardNormal.sample(&mut self.rng);
            }
        }
        let mut score = vec![0.0; density.dim];
        let lp = density.log_density_grad(&x, &mut score)?;
        if !lp.is_finite() || score.iter().any(|s| !s.is_finite()) {
            return Err(Error::new(
                ErrorKind::Numerical,
                format!(
                    "the prior's log density or score is not finite at a draw (log density {lp})"
                ),
            ));
        }
        Ok(Draw {
            q: x,
            lp,
            score,
            stats: Default::default(),
        })
    }
}

/// Element k of an argument (a number broadcasts; a matrix is read row by
/// row, as params are laid out).
fn element(v: &Value<f64>, k: usize) -> f64 {
    match v {
        Value::Matrix(_) => v.flatten().get(k).copied().unwrap_or(f64::NAN),
        v => v.element(k).unwrap_or(f64::NAN),
    }
}

/// The prior statements in an order where every param a prior's
/// arguments mention is drawn before it; every param needs a prior.
fn ancestral_order(density: &Density) -> Result<Vec<usize>, Error> {
    let g = &density.bound.graph;
    let mut prior_of = vec![None; g.params.len()];
    for (i, p) in g.priors.iter().enumerate() {
        prior_of[p.param] = Some(i);
    }
    for s in &density.slots {
        if prior_of[s.param].is_none() {
            let p = &g.params[s.param];
            return Err(Error::at(
                ErrorKind::Unsupported,
                p.span,
                format!(
                    "`{NAME}` draws every param from its prior; `{}` has none",
                    p.name
                ),
            )
            .with_label("no prior")
            .with_note(format!("give it one: `{} : ... ~ normal(0, 1)`", p.name)));
        }
    }
    let deps: Vec<Vec<usize>> = g
        .priors
        .iter()
        .map(|p| {
            let mut d: Vec<usize> = p
                .dist
                .args
                .iter()
                .flat_map(|a| a.refs())
                .filter_map(|r| match r {
                    Ref::Param(j) => Some(j),
                    _ => None,
                })
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    let mut done = vec![false; g.params.len()];
    let mut order = Vec::with_capacity(g.priors.len());
    while order.len() < g.priors.len() {
        let next = (0..g.priors.len()).find(|&i| {
            !done[g.priors[i].param] && deps[i].iter().all(|&j| done[j] || j == g.priors[i].param)
        });
        let Some(i) = next else {
            let stuck = (0..g.priors.len())
                .find(|&i| !done[g.priors[i].param])
                .unwrap_or(0);
            return Err(Error::at(
                ErrorKind::Unsupported,
                g.priors[stuck].span,
                format!("`{NAME}` cannot order the priors: they depend on each other in a cycle"),
            )
            .with_label("part of the cycle"));
        };
        if deps[i].contains(&g.priors[i].param) {
            return Err(Error::at(
                ErrorKind::Unsupported,
                g.priors[i].span,
                format!(
                    "the prior of `{}` depends on `{}` itself",
                    g.params[g.priors[i].param].name, g.params[g.priors[i].param].name
                ),
            )
            .with_label("here"));
        }
        done[g.priors[i].param] = true;
        order.push(i);
    }
    Ok(order)
}

impl Engine for PriorEngine {
    fn step(&mut self) -> Result<Status, Error> {
        let end = (self.draws.len() + BLOCK).min(self.target);
        // Each draw may solve ODEs: the stop flag is read at every one, and
        // a draw it cut short is not kept.
        while self.draws.len() < end {
            self.density.bound.stop.check("drawing from the prior")?;
            let d = self.draw()?;
            self.keep(d)?;
        }
        if self.draws.len() >= self.target {
            return Ok(Status::Done("all draws taken".into()));
        }
        Ok(Status::Running)
    }

    fn progress(&self) -> Progress {
        Progress {
            step: self.draws.len(),
            total: Some(self.target),
            objective: None,
            objective_name: "",
            message: String::new(),
            lanes: vec![],
        }
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        let this = *self;
        let n = this.draws.len();
        if n == 0 {
            return Err(Error::new(
                ErrorKind::Interrupted,
                format!("the run stopped ({reason}) before its first draw: no draws were kept"),
            ));
        }
        let seconds = this.started.elapsed().as_secs_f64();
        // No transition: the configuration records the draws, and no
        // warm-up; its method is never used to move.
        let cfg = ChainConfig {
            method: Method::Mala,
            warmup: 0,
            draws: this.target,
            target_accept: 0.0,
            step_size: None,
            adaptation: Adaptation::Stan,
            early_stop: false,
        };
        let fit = McmcFit::new(
            NAME,
            this.density,
            vec![this.draws],
            vec![this.values],
            cfg,
            vec![],
            vec![],
            seconds,
            0.0,
            n,
            reason,
        )?
        .predicting(this.seed, this.predictive_draws);
        Ok(Box::new(fit))
    }
}
