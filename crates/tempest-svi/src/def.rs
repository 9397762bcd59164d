//! The `svi` engine's definition: its settings, the guide family it takes
//! (`inducing(m = M)`), and how it is built.

use super::engine::Svi;
use crate::error::Error;
use crate::ir::graph::Family;
use tempest_infer::seam::{Accepts, Def, TestData};
use tempest_infer::settings::{EngineConfig, EngineSchema, Role, SEED, SettingKind, Settings, s};
use tempest_variational::settings::{BINS, MC_SAMPLES, QUADRATURE};

/// The `svi` engine's settings.
pub const SVI_SCHEMA: EngineSchema = EngineSchema {
    name: "svi",
    implemented: true,
    doc: "stochastic variational inference: a sparse GP with inducing points, minibatches, natural-gradient steps on q(u)",
    roles: &[Role::PerTask],
    settings: &[
        s(
            "steps",
            SettingKind::Int(1, 100_000_000),
            Some("2000"),
            "optimiser steps (one minibatch each)",
        ),
        s(
            "batch",
            SettingKind::Int(1, 100_000_000),
            Some("256"),
            "minibatch size (the whole data when larger)",
        ),
        s(
            "q_step",
            SettingKind::Choice(&["natural", "adam"]),
            Some("natural"),
            "how q(u) moves: natural-gradient (mirror-descent) steps of size rho, or Adam on (mean, Cholesky factor)",
        ),
        s(
            "rho",
            SettingKind::Above(0.0, 1.0),
            Some("0.1"),
            "natural-gradient step size",
        ),
        s(
            "polish",
            SettingKind::Int(0, 1000),
            Some("5"),
            "whole-data natural-gradient steps on q(u) after the minibatch steps (hypers and Z fixed; rho from 1, halved until the ELBO rises)",
        ),
        s(
            "lr",
            SettingKind::Above(0.0, f64::INFINITY),
            Some("0.01"),
            "Adam learning rate for the hypers and inducing inputs (and q(u) with q_step = adam)",
        ),
        s(
            "anneal",
            SettingKind::Choice(&["cosine", "none"]),
            Some("cosine"),
            "step sizes over the steps: rho and lr follow a half cosine down to 1/20 of their values, or stay fixed",
        ),
        s(
            "learn_hypers",
            SettingKind::Bool,
            Some("true"),
            "learn the hypers too",
        ),
        s(
            "learn_inducing",
            SettingKind::Bool,
            Some("true"),
            "learn the inducing inputs Z (k-means of the inputs at the start)",
        ),
        s(
            "weight_prior",
            SettingKind::Above(0.0, f64::INFINITY),
            Some("0.3"),
            "standard deviation of the N(0, σ²) prior on each weight of a deep kernel's network (the weights are its MAP estimate)",
        ),
        QUADRATURE,
        MC_SAMPLES,
        s(
            "jitter",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("1e-6"),
            "added to the diagonal of K_ZZ",
        ),
        BINS,
        SEED,
    ],
};

/// The smallest factor of the cosine annealing (at the last step).
pub const ANNEAL_FLOOR: f64 = 0.05;

impl SviSettings {
    /// The factor of ρ and the learning rates at minibatch step `step`
    /// (1-based): 1 without annealing, else
    /// f + (1 − f) · ½(1 + cos(π (step − 1) / (steps − 1))), f = [`ANNEAL_FLOOR`],
    /// from 1 at the first step to f at the last.
    pub fn anneal_factor(&self, step: usize) -> f64 {
        if !self.anneal || self.steps < 2 {
            return 1.0;
        }
        let x = (step.clamp(1, self.steps) - 1) as f64 / (self.steps - 1) as f64;
        ANNEAL_FLOOR + (1.0 - ANNEAL_FLOOR) * 0.5 * (1.0 + (std::f64::consts::PI * x).cos())
    }
}

/// How q(u) moves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum QStep {
    /// Natural-gradient (mirror-descent) steps of size ρ.
    Natural(f64),
    /// Adam on the mean and the Cholesky factor.
    Adam,
}

/// The `svi` engine's settings, read once when it is built.
#[derive(Clone, Debug)]
pub struct SviSettings {
    /// Optimiser steps.
    pub steps: usize,
    /// Minibatch size.
    pub batch: usize,
    /// Whole-data natural steps on q(u) at the end.
    pub polish: usize,
    /// How q(u) moves.
    pub q_step: QStep,
    /// Adam's learning rate.
    pub lr: f64,
    /// Whether ρ and the learning rates follow a half cosine over the steps.
    pub anneal: bool,
    /// Learn the hypers.
    pub learn_hypers: bool,
    /// Learn Z.
    pub learn_inducing: bool,
    /// The standard deviation of the prior on each network weight.
    pub weight_prior: f64,
    /// Gauss–Hermite points.
    pub quadrature: usize,
    /// Monte Carlo samples for multi-class expectations.
    pub mc_samples: usize,
    /// Added to the diagonal of K_ZZ.
    pub jitter: f64,
    /// Confidence bins.
    pub bins: usize,
    /// The seed of minibatches, k-means and Monte Carlo draws.
    pub seed: u64,
}

impl Settings for SviSettings {
    fn from_config(cfg: &EngineConfig) -> Result<Self, Error> {
        Ok(SviSettings {
            steps: cfg.count("steps")?,
            batch: cfg.count("batch")?,
            polish: cfg.count("polish")?,
            q_step: match cfg.choice("q_step")? {
                "adam" => QStep::Adam,
                _ => QStep::Natural(cfg.number("rho")?),
            },
            lr: cfg.number("lr")?,
            anneal: cfg.choice("anneal")? == "cosine",
            learn_hypers: cfg.flag("learn_hypers")?,
            learn_inducing: cfg.flag("learn_inducing")?,
            weight_prior: cfg.number("weight_prior")?,
            quadrature: cfg.count("quadrature")?,
            mc_samples: cfg.count("mc_samples")?,
            jitter: cfg.number("jitter")?,
            bins: cfg.count("bins")?,
            seed: cfg.seed()?,
        })
    }
}

/// The `svi` engine.
pub const SVI: Def = Def {
    schema: &SVI_SCHEMA,
    accepts: Accepts {
        test: TestData::Predicts,
        draw_sinks: false,
        families: &[Family::Inducing { m: 0 }, Family::Grid { m: 0 }],
        saves_fits: true,
        plot_params: false,
    },
    build: |bound, cfg, cx| {
        let s = SviSettings::from_config(cfg)?;
        // The guide's family, refused with every engine's families named.
        tempest_variational::guide::guide_family_among(&bound, &SVI, cx.engines)?;
        Ok(Box::new(Svi::new(bound, &s)?))
    },
    restore: Some(|graph, j, file| {
        let (fit, base) = super::fit::SviFit::restore(graph, j, file)?;
        Ok((Box::new(fit), base))
    }),
};

#[cfg(test)]
mod tests {
    use super::*;
    use tempest_infer::settings::EngineConfig;

    #[test]
    fn the_cosine_runs_from_one_to_the_floor() {
        let cfg = EngineConfig::defaults(&SVI_SCHEMA, Default::default());
        let mut s = SviSettings::from_config(&cfg).unwrap();
        s.steps = 101;
        assert_eq!(s.anneal_factor(1), 1.0);
        assert!((s.anneal_factor(51) - (ANNEAL_FLOOR + 1.0) / 2.0).abs() < 1e-12);
        assert!((s.anneal_factor(101) - ANNEAL_FLOOR).abs() < 1e-12);
        assert!(s.anneal_factor(30) > s.anneal_factor(31));
        s.anneal = false;
        assert_eq!(s.anneal_factor(101), 1.0);
    }
}
