//! The dense variational engines' settings: their schemas
//! (`mirror_descent`, `gradient_descent`), the typed settings each reads
//! once when it is built, and their names in words.

use crate::error::Error;
use crate::math::optim::Rule;
use tempest_infer::settings::{
    EngineConfig, EngineSchema, Role, SettingKind, SettingSpec, Settings, s,
};
use tempest_variational::settings::{BINS, QUADRATURE};

/// The variational engines' jitter.
const VI_JITTER: SettingSpec = s(
    "jitter",
    SettingKind::Real(0.0, f64::INFINITY),
    Some("1e-6"),
    "added to the diagonal of the prior covariance K (as GPflow does)",
);
/// The bound on a dense variational run's estimated time.
const MAX_MINUTES: SettingSpec = s(
    "max_minutes",
    SettingKind::Real(0.0, f64::INFINITY),
    Some("30"),
    "refuse to start when the run's estimated time (from N, the latent GPs, the hypers and `steps`) exceeds this many minutes; 0: no limit",
);
/// The hypers' Adam learning rate.
const HYPER_LR: SettingSpec = s(
    "hyper_lr",
    SettingKind::Above(0.0, f64::INFINITY),
    Some("0.01"),
    "Adam learning rate for the hypers",
);
/// The `mirror_descent` engine's settings.
pub const MIRROR_SCHEMA: EngineSchema = EngineSchema {
    name: "mirror_descent",
    implemented: true,
    doc: "mirror-descent (conjugate-computation) variational inference",
    roles: &[Role::PerTask],
    settings: &[
        s(
            "steps",
            SettingKind::Int(1, 1_000_000),
            Some("50"),
            "mirror-descent steps",
        ),
        s(
            "rho",
            SettingKind::Above(0.0, 1.0),
            Some("1.0"),
            "step size in natural parameters",
        ),
        s(
            "learn_hypers",
            SettingKind::Bool,
            Some("false"),
            "learn the hypers by maximising the ELBO",
        ),
        HYPER_LR,
        QUADRATURE,
        s(
            "tol",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("1e-10"),
            "stop when the relative ELBO change falls below this",
        ),
        s(
            "backtrack",
            SettingKind::Bool,
            Some("true"),
            "halve rho for a step whose ELBO would fall (then grow it back)",
        ),
        VI_JITTER,
        BINS,
        MAX_MINUTES,
    ],
};

/// The `gradient_descent` engine's settings.
pub const GD_SCHEMA: EngineSchema = EngineSchema {
    name: "gradient_descent",
    implemented: true,
    doc: "gradient-descent variational inference in the (mean, Cholesky) parameterisation",
    roles: &[Role::PerTask],
    settings: &[
        s(
            "steps",
            SettingKind::Int(1, 1_000_000),
            Some("500"),
            "optimiser steps",
        ),
        s(
            "lr",
            SettingKind::Above(0.0, f64::INFINITY),
            Some("0.01"),
            "learning rate",
        ),
        s(
            "optimizer",
            SettingKind::Choice(&["adam", "sgd"]),
            Some("adam"),
            "the optimiser",
        ),
        s(
            "learn_hypers",
            SettingKind::Bool,
            Some("false"),
            "learn the hypers too",
        ),
        QUADRATURE,
        HYPER_LR,
        s(
            "tol",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("0"),
            "stop when the relative ELBO change falls below this (0: run every step)",
        ),
        VI_JITTER,
        BINS,
        MAX_MINUTES,
    ],
};

/// A variational engine's settings, read once when it is built.
#[derive(Clone, Debug)]
pub struct ViSettings {
    /// Learn the hypers by maximising the ELBO.
    pub learn_hypers: bool,
    /// Adam learning rate of the hypers.
    pub hyper_lr: f64,
    /// Gauss–Hermite points for the expected log likelihood (per class for
    /// the softmax).
    pub quadrature: usize,
    /// Most steps.
    pub steps: usize,
    /// Stop when the relative ELBO change falls below this.
    pub tol: f64,
    /// Jitter added to the diagonal of the prior covariance.
    pub jitter: f64,
    /// Confidence bins of the calibration errors at test data.
    pub bins: usize,
    /// How q moves at each step.
    pub step: ViStep,
    /// Refuse to start when the estimated time exceeds this many minutes
    /// (0: no limit; see [`super::cost`]).
    pub max_minutes: f64,
}

/// How a variational engine moves q.
#[derive(Clone, Copy, Debug)]
pub enum ViStep {
    /// Mirror descent in natural parameters with step ρ, halved for a step
    /// whose ELBO would fall when `backtrack`.
    Mirror {
        /// The step size ρ in (0, 1].
        rho: f64,
        /// Halve ρ for a falling step (then grow it back).
        backtrack: bool,
    },
    /// Gradient steps on (mean, Cholesky) or (mean, log sd).
    Gradient {
        /// The optimiser.
        rule: Rule,
        /// Its learning rate.
        lr: f64,
    },
}

impl Settings for ViSettings {
    fn from_config(cfg: &EngineConfig) -> Result<Self, Error> {
        let step = if cfg.name == MIRROR_SCHEMA.name {
            ViStep::Mirror {
                rho: cfg.number("rho")?,
                backtrack: cfg.flag("backtrack")?,
            }
        } else {
            ViStep::Gradient {
                rule: match cfg.choice("optimizer")? {
                    "sgd" => Rule::Sgd,
                    _ => Rule::Adam,
                },
                lr: cfg.number("lr")?,
            }
        };
        Ok(ViSettings {
            learn_hypers: cfg.flag("learn_hypers")?,
            hyper_lr: cfg.number("hyper_lr")?,
            quadrature: cfg.count("quadrature")?,
            steps: cfg.count("steps")?,
            tol: cfg.number("tol")?,
            jitter: cfg.number("jitter")?,
            bins: cfg.count("bins")?,
            step,
            max_minutes: cfg.number("max_minutes")?,
        })
    }
}

/// The variational engine called `engine` in words (`mirror-descent VI`);
/// other names as they are.
pub fn words(engine: &str) -> &str {
    if engine == MIRROR_SCHEMA.name {
        "mirror-descent VI"
    } else if engine == GD_SCHEMA.name {
        "gradient-descent VI"
    } else {
        engine
    }
}
