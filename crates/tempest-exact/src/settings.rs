//! The `exact` engine's settings: its schema and the typed settings it
//! reads once when it is built.

use crate::error::Error;
use tempest_infer::settings::{EngineConfig, EngineSchema, SEED, SettingKind, Settings, s};

/// The `exact` engine's settings.
pub const SCHEMA: EngineSchema = EngineSchema {
    name: "exact",
    implemented: true,
    doc: "exact GP regression with a Gaussian likelihood",
    roles: &[],
    settings: &[
        s(
            "learn_hypers",
            SettingKind::Bool,
            Some("false"),
            "maximise the log marginal likelihood over the non-fixed hypers",
        ),
        s(
            "max_iters",
            SettingKind::Int(1, 1_000_000),
            Some("500"),
            "maximum L-BFGS iterations",
        ),
        s(
            "grad_tol",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("1e-6"),
            "stop when the gradient norm (unconstrained scale) falls below this",
        ),
        s(
            "f_tol",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("1e-11"),
            "stop when an iteration lowers −log p(y) by at most this times max(|log p(y)|, 1)",
        ),
        s(
            "restarts",
            SettingKind::Int(0, 1000),
            Some("0"),
            "further L-BFGS runs from perturbed starts (initial values · e^(±1) on the unconstrained scale); the best is kept",
        ),
        SEED,
        s(
            "jitter",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("0"),
            "added to the diagonal of K before the first Cholesky attempt",
        ),
        s(
            "max_jitter",
            SettingKind::Real(0.0, f64::INFINITY),
            Some("1e-2"),
            "largest jitter tried (relative to mean diag K) before giving up",
        ),
        s(
            "gradient",
            SettingKind::Choice(&["analytic", "autodiff"]),
            Some("analytic"),
            "analytic: matrix identities with one reverse pass over the kernel entries; autodiff: forward mode through every step (slower; a check)",
        ),
    ],
};

/// The `exact` engine's settings, read once when it is built.
#[derive(Clone, Debug)]
pub struct ExactSettings {
    /// Maximise the objective over the non-fixed hypers.
    pub learn_hypers: bool,
    /// Most L-BFGS iterations per run.
    pub max_iters: usize,
    /// Stop when the gradient norm (unconstrained scale) falls below this.
    pub grad_tol: f64,
    /// Stop when an iteration lowers −log p(y) by at most this times
    /// max(|log p(y)|, 1).
    pub f_tol: f64,
    /// Further runs from perturbed starts.
    pub restarts: usize,
    /// The seed of the perturbations.
    pub seed: u64,
    /// Jitter added to diag K before the first Cholesky attempt.
    pub jitter: f64,
    /// The largest jitter tried, relative to mean diag K.
    pub max_jitter: f64,
    /// Gradients by forward mode through every step (a check) instead of
    /// the analytic reverse pass.
    pub autodiff: bool,
}

impl Settings for ExactSettings {
    fn from_config(cfg: &EngineConfig) -> Result<Self, Error> {
        Ok(ExactSettings {
            learn_hypers: cfg.flag("learn_hypers")?,
            max_iters: cfg.count("max_iters")?,
            grad_tol: cfg.number("grad_tol")?,
            f_tol: cfg.number("f_tol")?,
            restarts: cfg.count("restarts")?,
            seed: cfg.seed()?,
            jitter: cfg.number("jitter")?,
            max_jitter: cfg.number("max_jitter")?,
            autodiff: cfg.choice("gradient")? == "autodiff",
        })
    }
}
