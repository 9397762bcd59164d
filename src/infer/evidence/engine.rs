//! The evidence engine: thermodynamic integration over power posteriors.
//!
//! The ladder is tᵢ = ((i − 1)/(w − 1))^power, i = 1..w. For each rung, a
//! sampler run (a [`McmcEngine`]) draws from the power posterior
//! πᵢ(x) ∝ p(y|x)^{tᵢ} p(x), warm-started at the previous rung's final
//! positions; each draw keeps log p(y|x) and the score ∇log πᵢ(x) for
//! control variates. [`super::fit::EvidenceFit`] then integrates.

use super::fit::{EvidenceFit, RungDraws};
use crate::error::{Error, ErrorKind};
use crate::infer::engine::{Engine, Progress, Status};
use crate::infer::fit::Fit;
use crate::infer::mcmc::def::SamplerDef;
use crate::infer::mcmc::density::Density;
use crate::infer::mcmc::engine::McmcEngine;
use crate::infer::settings::{EngineConfig, SettingVal};
use crate::mc::spec::{CvSpec, parse};
use std::time::Instant;

/// The ladder tᵢ = ((i − 1)/(rungs − 1))^power, [rungs], from 0 to 1.
pub fn ladder(rungs: usize, power: f64) -> Vec<f64> {
    (0..rungs)
        .map(|i| (i as f64 / (rungs - 1) as f64).powf(power))
        .collect()
}

/// Thermodynamic integration as a state machine: each step advances the
/// current rung's sampler by one slice.
pub struct EvidenceEngine {
    density: Density,
    sampler: EngineConfig,
    /// The sampler's definition, found in the registry once.
    def: &'static dyn SamplerDef,
    ladder: Vec<f64>,
    spec: CvSpec,
    seed: u64,
    rung: usize,
    current: Option<McmcEngine>,
    positions: Option<Vec<Vec<f64>>>,
    done: Vec<RungDraws>,
    started: Instant,
}

impl EvidenceEngine {
    /// Set up from the `infer evidence { ... }` settings.
    ///
    /// Errors: a bad `control_variates` method (at its span), a sampler
    /// setting out of range.
    pub fn new(density: Density, cfg: &EngineConfig) -> Result<EvidenceEngine, Error> {
        let rungs = cfg.int("rungs").max(2) as usize;
        let power = cfg.real("power");
        let mut sampler = match cfg.values.get("sampler") {
            Some(SettingVal::Engine(e)) => (**e).clone(),
            _ => return Err(Error::internal("evidence: no sampler")),
        };
        // A method given with `--set` has no place in the model file: its
        // errors then carry the setting's name instead of a location.
        let in_file = cfg.spans.contains_key("control_variates");
        let spec = match cfg.values.get("control_variates") {
            Some(SettingVal::Method(e)) => parse(e).map_err(|mut err| {
                if !in_file {
                    err.span = None;
                    err.label = None;
                    err.message = format!("control_variates: {}", err.message);
                }
                err
            })?,
            _ => CvSpec::none(),
        };
        if let CvSpec::VectorValued {
            b: crate::mc::vector_valued::TaskMatrix::Fixed(m),
            ..
        } = &spec
            && m.nrows() != super::fit::GROUP.min(rungs)
        {
            return Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "control_variates: the task matrix B is {}×{}, but the rungs are grouped in {}s: give a {n}×{n} B",
                    m.nrows(),
                    m.ncols(),
                    super::fit::GROUP.min(rungs),
                    n = super::fit::GROUP.min(rungs)
                ),
            ));
        }
        // The sampler comes from the registry (the setting's schema admits
        // only samplers).
        let def = crate::infer::registry::find(&sampler.name)
            .and_then(|d| d.as_sampler())
            .ok_or_else(|| {
                Error::internal(format!("evidence: `{}` is not a sampler", sampler.name))
            })?;
        let draws = (sampler.int("chains").max(1) * sampler.int("draws").max(1)) as usize;
        if let CvSpec::Scalar(m) = &spec {
            let at = cfg.spans.get("control_variates").copied();
            m.check_size(draws, density.dim).map_err(|e| match at {
                Some(span) => e.with_span(span).with_label("this setting"),
                None => e,
            })?;
        }
        crate::limits::check_memory(&[crate::limits::Request::new(
            "keeping every rung's draws and scores",
        )
        .times("rungs", rungs)
        .times("draws per rung", draws)
        .times("numbers per draw", 2 * density.dim + 1)])
        .map_err(|e| {
            cfg.at_setting(e, "rungs")
                .with_note("lower `rungs`, or the sampler's `draws` or `chains`")
        })?;
        // The run's seed decides every rung's seed.
        let seed = cfg.int("seed").max(0) as u64;
        sampler.values.remove("seed");
        Ok(EvidenceEngine {
            density,
            sampler,
            def,
            ladder: ladder(rungs, power),
            spec,
            seed,
            rung: 0,
            current: None,
            positions: None,
            done: Vec::new(),
            started: Instant::now(),
        })
    }

    fn start_rung(&mut self) -> Result<McmcEngine, Error> {
        let t = self.ladder[self.rung];
        let mut cfg = self.sampler.clone();
        // Rung i's chains are seeded from seed + i.
        cfg.set("seed", &(self.seed + self.rung as u64).to_string())?;
        self.def.build_sampler(
            self.density.clone().with_power(t),
            &cfg,
            self.positions.as_deref(),
        )
    }
}

impl Engine for EvidenceEngine {
    fn step(&mut self) -> Result<Status, Error> {
        if self.current.is_none() {
            self.current = Some(self.start_rung()?);
        }
        let Some(engine) = self.current.as_mut() else {
            return Err(Error::internal("evidence: no current rung"));
        };
        if engine.step()? == Status::Running {
            return Ok(Status::Running);
        }
        let Some(engine) = self.current.take() else {
            return Err(Error::internal("evidence: no current rung"));
        };
        let (draws, positions) = engine.into_draws();
        let t = self.ladder[self.rung];
        let mut rd = RungDraws {
            t,
            loglik: Vec::with_capacity(draws.len()),
            x: Vec::new(),
            u: Vec::new(),
            gradients: 0,
            divergences: 0,
        };
        for chain in &draws {
            let mut ll = Vec::with_capacity(chain.len());
            for d in chain {
                ll.push(self.density.log_likelihood(&d.q)?);
                rd.x.push(d.q.clone());
                rd.u.push(d.score.clone());
                rd.gradients += d.stats.n_leapfrog;
                rd.divergences += usize::from(d.stats.divergent);
            }
            rd.loglik.push(ll);
        }
        self.done.push(rd);
        self.positions = Some(positions);
        self.rung += 1;
        if self.rung == self.ladder.len() {
            return Ok(Status::Done("every rung sampled".into()));
        }
        Ok(Status::Running)
    }

    fn progress(&self) -> Progress {
        let inner = self.current.as_ref().map(|e| e.progress());
        Progress {
            step: self.rung,
            total: Some(self.ladder.len()),
            objective: None,
            objective_name: "",
            message: format!(
                "rung {}/{} (t = {:.3e})",
                (self.rung + 1).min(self.ladder.len()),
                self.ladder.len(),
                self.ladder[self.rung.min(self.ladder.len() - 1)]
            ),
            lanes: inner.map(|p| p.lanes).unwrap_or_default(),
        }
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        if self.done.len() < self.ladder.len() {
            let kind = if reason == "cancelled" {
                ErrorKind::Interrupted
            } else {
                ErrorKind::Unsupported
            };
            return Err(Error::new(
                kind,
                format!(
                    "the evidence run stopped ({reason}) after {} of {} rungs; the integral over t needs every rung",
                    self.done.len(),
                    self.ladder.len()
                ),
            ));
        }
        let mut fit =
            EvidenceFit::new(self.done, &self.spec, self.started.elapsed().as_secs_f64())?;
        if !self.density.bound.graph.estimates.is_empty() {
            fit.notes.push(
                "the `estimate` block is not used by the evidence engine (run a sampler for posterior expectations)"
                    .into(),
            );
        }
        Ok(Box::new(fit))
    }
}
