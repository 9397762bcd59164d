//! A classifier's calibration as a reliability diagram draws it: the
//! bins of predicted confidence, each with its points' mean confidence
//! and accuracy (every engine that classifies fills them; the figures
//! draw them).

use serde::Serialize;

/// One bin of a reliability diagram.
#[derive(Clone, Debug, Serialize)]
pub struct Bin {
    /// Lower edge of the confidence bin.
    pub lower: f64,
    /// Points in the bin.
    pub count: usize,
    /// Mean confidence of its points.
    pub confidence: f64,
    /// Fraction of its points classified correctly.
    pub accuracy: f64,
}
