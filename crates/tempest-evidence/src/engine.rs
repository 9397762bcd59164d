//! The evidence engine: thermodynamic integration over power posteriors.
//!
//! The ladder is tᵢ = ((i − 1)/(w − 1))^power, i = 1..w. For each rung, a
//! sampler run (a [`SamplerRun`]) draws from the power posterior
//! πᵢ(x) ∝ p(y|x)^{tᵢ} p(x), warm-started at the previous rung's final
//! positions; each draw keeps log p(y|x) and the score ∇log πᵢ(x) for
//! control variates. [`super::fit::EvidenceFit`] then integrates.

use super::def::EvidenceSettings;
use super::fit::{EvidenceFit, RungDraws};
use crate::error::{Error, ErrorKind};
use crate::mc::diagnostics::MIN_DRAWS_ESS;
use crate::mc::spec::CvSpec;
use std::time::Instant;
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;
use tempest_samplers::density::Density;
use tempest_samplers::run::SamplerRun;
use tempest_samplers::settings::SamplerSettings;

/// The ladder tᵢ = ((i − 1)/(rungs − 1))^power, \[rungs\], from 0 to 1.
pub fn ladder(rungs: usize, power: f64) -> Vec<f64> {
    (0..rungs)
        .map(|i| (i as f64 / (rungs - 1) as f64).powf(power))
        .collect()
}

/// Thermodynamic integration as a state machine: each step advances the
/// current rung's sampler by one slice.
pub struct EvidenceEngine {
    density: Density,
    sampler: SamplerSettings,
    ladder: Vec<f64>,
    spec: CvSpec,
    seed: u64,
    rung: usize,
    current: Option<SamplerRun>,
    positions: Option<Vec<Vec<f64>>>,
    done: Vec<RungDraws>,
    started: Instant,
}

impl EvidenceEngine {
    /// Set up from the `infer evidence { ... }` settings.
    ///
    /// Errors, before any rung is sampled: fewer than
    /// [`MIN_DRAWS_ESS`] draws per chain (a rung's Monte Carlo error comes
    /// from its chains' ESS; at `sampler`), a control-variate method the
    /// draws of a rung do not suffice for (at `control_variates`), memory
    /// beyond the budget (at `rungs`).
    pub fn new(density: Density, s: EvidenceSettings) -> Result<EvidenceEngine, Error> {
        let per_chain = s.sampler.chain.draws;
        if per_chain < MIN_DRAWS_ESS {
            let e = Error::new(
                ErrorKind::Settings,
                format!(
                    "the evidence engine's sampler takes {per_chain} draw{} per chain at each rung; a rung's mean and its Monte Carlo error need at least {MIN_DRAWS_ESS} (the ESS of each chain)",
                    if per_chain == 1 { "" } else { "s" }
                ),
            );
            return Err(if s.sampler.written.in_file("draws") {
                s.sampler.written.at(e, "draws")
            } else {
                s.written.at(e, "sampler")
            });
        }
        let draws = s.sampler.chains * per_chain;
        let group = super::fit::GROUP.min(s.rungs);
        s.control_variates
            .check_size(draws, density.dim, group, super::fit::VV_POINTS)
            .map_err(|e| s.written.at(e, "control_variates"))?;
        crate::limits::check_memory(&[crate::limits::Request::new(
            "keeping every rung's draws and scores",
        )
        .times("rungs", s.rungs)
        .times("draws per rung", draws)
        .times("numbers per draw", 2 * density.dim + 1)])
        .map_err(|e| {
            density
                .at_largest(s.written.at(e, "rungs"))
                .with_note("lower `rungs`, or the sampler's `draws` or `chains`")
        })?;
        Ok(EvidenceEngine {
            density,
            ladder: ladder(s.rungs, s.power),
            sampler: s.sampler,
            spec: s.control_variates,
            seed: s.seed,
            rung: 0,
            current: None,
            positions: None,
            done: Vec::new(),
            started: Instant::now(),
        })
    }

    fn start_rung(&mut self) -> Result<SamplerRun, Error> {
        let t = self.ladder[self.rung];
        let mut s = self.sampler.clone();
        // Rung i's chains are seeded from seed + i.
        s.seed = self.seed + self.rung as u64;
        // The rung's draws feed only the integral: no sinks, no output
        // values.
        Ok(SamplerRun::new(
            self.density.clone().with_power(t),
            &s,
            &[],
            "",
            self.positions.as_deref(),
            |_, _| Ok(()),
        )?
        .without_values())
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
        let stop = &self.density.bound.stop;
        for chain in &draws {
            let mut ll = Vec::with_capacity(chain.len());
            for d in chain {
                stop.check("evaluating the rung's log-likelihoods")?;
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
        finite_rungs(&self.density, &self.done)?;
        let mut fit =
            EvidenceFit::new(self.done, &self.spec, self.started.elapsed().as_secs_f64())?;
        tempest_infer::finite::number("the log evidence", fit.log_evidence, || {
            "the rung means overflow when integrated over t".into()
        })?;
        if !self.density.bound.graph.estimates.is_empty() {
            fit.notes.push(
                "the `estimate` block is not used by the evidence engine (run a sampler for posterior expectations)"
                    .into(),
            );
        }
        Ok(Box::new(fit))
    }
}

/// Every draw's log-likelihood on every rung must be finite: one that is
/// not makes the rung's mean, and the integral over t, not finite. The
/// error names the rung, the draw and the params there.
fn finite_rungs(density: &Density, done: &[RungDraws]) -> Result<(), Error> {
    for (k, r) in done.iter().enumerate() {
        let mut first = 0;
        for (c, chain) in r.loglik.iter().enumerate() {
            if let Some(i) = chain.iter().position(|v| !v.is_finite()) {
                let at =
                    r.x.get(first + i)
                        .and_then(|x| density.stan_values(x).ok())
                        .unwrap_or_default();
                let mut e = Error::new(
                    ErrorKind::Numerical,
                    format!(
                        "the log evidence is not finite: on rung {} (t = {}) the log-likelihood is {} at draw {} of chain {}, where {}",
                        k + 1,
                        tempest_infer::finite::show(r.t),
                        tempest_infer::finite::show(chain[i]),
                        i + 1,
                        c + 1,
                        tempest_infer::finite::named(&density.language_names(), &at)
                    ),
                )
                .with_note("the power posterior there puts mass where the likelihood is 0 (at t = 0, the prior): the integral over t diverges; give the params priors under which the likelihood stays finite");
                if let Some(o) = density.bound.graph.observations.first() {
                    e = e.with_span(o.span).with_label("the likelihood");
                }
                return Err(e);
            }
            first += chain.len();
        }
    }
    Ok(())
}
