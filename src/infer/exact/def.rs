//! The `exact` engine's definition: its settings and how it is built.

use super::{engine::ExactEngine, model::ExactModel};
use crate::infer::registry::{Accepts, Def, TestData};
use crate::infer::settings::{EngineSchema, SEED, SettingKind, s};

/// The `exact` engine's settings.
pub const SCHEMA: EngineSchema = EngineSchema {
    name: "exact",
    implemented: true,
    doc: "exact GP regression with a Gaussian likelihood",
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

/// Exact GP regression (type-II ML or MAP-II of the hypers).
pub const EXACT: Def = Def {
    schema: &SCHEMA,
    accepts: Accepts {
        test: TestData::Predicts,
        ..Accepts::NOTHING
    },
    build: |bound, cfg, _| {
        Ok(Box::new(ExactEngine::new(
            ExactModel::new(bound, cfg)?,
            cfg,
        )?))
    },
};
