//! Axis ranges that plotting can draw: finite, non-empty, and with a span
//! that is itself finite. A range whose span overflows (values near ±1e308)
//! or is infinite makes the tick computation of the plotting library loop
//! without end, and a line to a point far outside the drawing area is
//! rasterised pixel by pixel; so values beyond ±[`LIMIT`] are not placed on
//! an axis at all, like NaN and infinities.

/// The largest magnitude placed on an axis.
pub const LIMIT: f64 = 1e300;

/// Whether `v` can be placed on an axis: finite and within ±[`LIMIT`].
pub fn drawable(v: f64) -> bool {
    v.is_finite() && v.abs() <= LIMIT
}

/// The smallest and largest of the drawable values, `None` when there are
/// none.
pub fn extent(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .into_iter()
        .filter(|&v| drawable(v))
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((a.min(v), b.max(v))),
        })
}

/// An axis range around `[lo, hi]` (drawable values, `lo ≤ hi`), padded by
/// `frac` of the span on each side, or, when the span is below rounding
/// (a single value), by `frac` of the value's magnitude (at least `frac`).
/// Its ends and span are finite and it is never empty.
pub fn padded(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    let mag = lo.abs().max(hi.abs());
    let span = hi - lo;
    let pad = if span > 1e-12 * mag && span > 0.0 {
        frac * span
    } else {
        frac * mag.max(1.0)
    };
    (lo - pad, hi + pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_stay_finite_for_extreme_values() {
        let (a, b) = padded(-LIMIT, LIMIT, 0.06);
        assert!(a.is_finite() && b.is_finite() && (b - a).is_finite() && a < b);
        let (a, b) = padded(3.0, 3.0, 0.05);
        assert!(a < 3.0 && b > 3.0);
        let (a, b) = padded(1e300, 1e300, 0.05);
        assert!(a < b && (b - a).is_finite());
        assert_eq!(
            extent([f64::NAN, -1e308, 2.0, 1e308, -1.0]),
            Some((-1.0, 2.0))
        );
        assert_eq!(extent([f64::INFINITY]), None);
    }
}
