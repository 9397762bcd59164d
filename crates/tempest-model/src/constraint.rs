//! Declared bounds, and the bijections between a constrained value and the
//! unconstrained real line that optimisers and samplers work on.
//!
//! | bounds        | x = g(u)                      | log |dx/du|                 |
//! |---------------|-------------------------------|-----------------------------|
//! | none          | u                             | 0                           |
//! | lower a       | a + eᵘ                        | u                           |
//! | upper b       | b − eᵘ                        | u                           |
//! | lower a, upper b | a + (b − a) σ(u)           | log(b − a) + log σ(u) + log σ(−u) |

use ad_trait::F64;
use serde::Serialize;
use tempest_math::scalar::{Real, RealExt};

/// Lower and upper bounds of a declared quantity (both optional).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Bounds {
    /// The lower bound.
    pub lower: Option<f64>,
    /// The upper bound.
    pub upper: Option<f64>,
}

impl Bounds {
    /// No bounds.
    pub const NONE: Bounds = Bounds {
        lower: None,
        upper: None,
    };
    /// `positive`: lower bound 0.
    pub const POSITIVE: Bounds = Bounds {
        lower: Some(0.0),
        upper: None,
    };
    /// `unit`: between 0 and 1.
    pub const UNIT: Bounds = Bounds {
        lower: Some(0.0),
        upper: Some(1.0),
    };

    /// Whether `x` satisfies the bounds (inclusive).
    pub fn contains(&self, x: f64) -> bool {
        !x.is_nan() && self.lower.is_none_or(|a| x >= a) && self.upper.is_none_or(|b| x <= b)
    }

    /// Whether `x` lies strictly inside (needed to unconstrain it).
    pub fn contains_strictly(&self, x: f64) -> bool {
        x.is_finite() && self.lower.is_none_or(|a| x > a) && self.upper.is_none_or(|b| x < b)
    }

    /// `<lower=0, upper=1>` as written in a model.
    pub fn describe(&self) -> String {
        match (self.lower, self.upper) {
            (None, None) => "unbounded".to_string(),
            (Some(a), None) => format!("<lower={a}>"),
            (None, Some(b)) => format!("<upper={b}>"),
            (Some(a), Some(b)) => format!("<lower={a}, upper={b}>"),
        }
    }

    /// x = g(u).
    pub fn constrain<T: Real>(&self, u: T) -> T {
        match (self.lower, self.upper) {
            (None, None) => u,
            (Some(a), None) => u.exp() + F64(a),
            (None, Some(b)) => T::constant(b) - u.exp(),
            (Some(a), Some(b)) => u.sigmoid() * F64(b - a) + F64(a),
        }
    }

    /// u = g⁻¹(x); `None` when x is not strictly inside the bounds.
    pub fn unconstrain(&self, x: f64) -> Option<f64> {
        if !self.contains_strictly(x) {
            return None;
        }
        Some(match (self.lower, self.upper) {
            (None, None) => x,
            (Some(a), None) => (x - a).ln(),
            (None, Some(b)) => (b - x).ln(),
            (Some(a), Some(b)) => {
                let p = (x - a) / (b - a);
                p.ln() - (-p).ln_1p()
            }
        })
    }

    /// log |dg/du|, the term added to a log density on the unconstrained scale.
    pub fn log_jacobian<T: Real>(&self, u: T) -> T {
        match (self.lower, self.upper) {
            (None, None) => T::zero(),
            (Some(_), None) | (None, Some(_)) => u,
            (Some(a), Some(b)) => T::constant((b - a).ln()) + u.log_sigmoid() + (-u).log_sigmoid(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempest_math::scalar::Dual1;

    #[test]
    fn round_trips_and_jacobians() {
        let cases = [
            Bounds::NONE,
            Bounds::POSITIVE,
            Bounds::UNIT,
            Bounds {
                lower: None,
                upper: Some(2.0),
            },
            Bounds {
                lower: Some(-1.0),
                upper: Some(3.0),
            },
        ];
        for b in cases {
            for x in [0.3, 0.9] {
                let u = b.unconstrain(x).unwrap();
                assert!((b.constrain(u) - x).abs() < 1e-12);
                let d = b.constrain(Dual1::new(u, [1.0])).tangent()[0];
                assert!((b.log_jacobian(u) - d.abs().ln()).abs() < 1e-12, "{b:?}");
            }
        }
        assert!(Bounds::POSITIVE.unconstrain(0.0).is_none());
        assert!(Bounds::UNIT.contains(1.0) && !Bounds::UNIT.contains_strictly(1.0));
    }
}
