//! The sampling engines (`nuts`, `hmc`, `mala`) under the executor: a
//! [`SamplerRun`] of the model's posterior whose draws stream to the run's
//! draw sinks, checked first against the `estimate` block and turned into
//! an [`McmcFit`] at the end.

use super::density::Density;
use super::fit::McmcFit;
use crate::error::Error;
use std::sync::Arc;
use tempest_infer::engine::{Engine, Progress, Status};
use tempest_infer::fit::Fit;
use tempest_infer::sink::DrawSinks;
use tempest_samplers::run::SamplerRun;
use tempest_samplers::settings::SamplerSettings;

/// A sampling run in progress, as an engine.
pub struct McmcEngine(SamplerRun);

impl McmcEngine {
    /// Start `chains` chains of `s`'s sampler; each chain's draws stream to
    /// a sink opened from every one of `sinks`. The `estimate` block and
    /// its control-variate method are checked at the first chain's initial
    /// point before any sink is written past its header or any draw made
    /// ([`super::fit::check_estimates`]).
    pub fn new(
        density: Density,
        s: &SamplerSettings,
        sinks: &[Arc<dyn DrawSinks>],
        model_name: &str,
    ) -> Result<McmcEngine, Error> {
        let draws = s.chains * s.chain.draws;
        Ok(McmcEngine(SamplerRun::new(
            density,
            s,
            sinks,
            model_name,
            None,
            |d, q| super::fit::check_estimates(d, q, draws),
        )?))
    }
}

impl Engine for McmcEngine {
    fn step(&mut self) -> Result<Status, Error> {
        self.0.step()
    }

    fn progress(&self) -> Progress {
        self.0.progress()
    }

    fn finish(self: Box<Self>, reason: String) -> Result<Box<dyn Fit>, Error> {
        let run = self.0.finish(&reason)?;
        let fit = McmcFit::new(
            run.name,
            run.density,
            run.draws,
            run.values,
            run.cfg,
            run.step_sizes,
            run.metrics,
            run.sampling_seconds,
            run.warmup_seconds,
            run.gradients,
            reason,
        )?
        .predicting(run.seed, run.predictive_draws)
        .warmed_up(run.warmup_ends, run.warmup_gradients)
        .offset_chains(run.chain_offset);
        Ok(Box::new(fit))
    }
}
