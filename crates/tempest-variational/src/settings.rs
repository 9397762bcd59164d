//! Settings the variational engines share (their schemas list them):
//! calibration bins, Gauss–Hermite points, Monte Carlo draws.

use tempest_infer::settings::{SettingKind, SettingSpec, s};

/// The calibration bins of classification test metrics.
pub const BINS: SettingSpec = s(
    "bins",
    SettingKind::Int(1, 1000),
    Some("10"),
    "confidence bins for the calibration errors ECE and MCE",
);

/// Gauss–Hermite points for the expected log likelihood.
pub const QUADRATURE: SettingSpec = s(
    "quadrature",
    SettingKind::Int(1, 1000),
    Some("20"),
    "Gauss–Hermite points (per class for categorical_logit)",
);
/// Monte Carlo draws per minibatch step for multi-class expectations.
pub const MC_SAMPLES: SettingSpec = s(
    "mc_samples",
    SettingKind::Int(2, 1_000_000),
    Some("64"),
    "Monte Carlo draws per minibatch step for multi-class expectations",
);
