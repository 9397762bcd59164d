//! Tick labels for every plot: as many decimals as the spacing of the
//! ticks needs and no more, so whole numbers read as whole numbers (a year
//! axis reads `1820`, not `1820.0`), and every label of an axis has the
//! same number of decimals (`0.0, 0.5, 1.0`). Very large or very small
//! magnitudes are written in scientific notation.

/// Above this magnitude labels are written in scientific notation.
const LARGE: f64 = 1e7;
/// Below this magnitude (and above 0) labels are written in scientific
/// notation.
const SMALL: f64 = 1e-3;

/// The labels of one axis: the spacing of its ticks and its largest
/// magnitude.
#[derive(Clone, Copy, Debug)]
pub struct Axis {
    /// The distance between neighbouring ticks (0 for an empty range).
    pub step: f64,
    /// The largest magnitude on the axis.
    pub mag: f64,
    /// Whether only whole numbers are labelled (draw and step indices).
    pub whole: bool,
}

impl Axis {
    /// The axis from `lo` to `hi` with at most `max_labels` ticks, placed
    /// as the plotting library places them (multiples of 1, 2 or 5 × 10ᵏ).
    pub fn new(lo: f64, hi: f64, max_labels: usize) -> Axis {
        Axis {
            step: tick_step(lo, hi, max_labels),
            mag: lo.abs().max(hi.abs()),
            whole: false,
        }
    }

    /// The same axis labelled at whole numbers only (other ticks get an
    /// empty label): for counts such as draw indices.
    pub fn whole(mut self) -> Axis {
        self.whole = true;
        self
    }

    /// The decimals the tick spacing needs: 0 for a spacing of 1 or more,
    /// 1 for 0.5, 2 for 0.05, …
    pub fn decimals(&self) -> usize {
        if self.step >= 1.0 || self.step <= 0.0 || !self.step.is_finite() {
            0
        } else {
            ((-self.step.log10()) - 1e-9).ceil().clamp(0.0, 12.0) as usize
        }
    }

    /// The label of the tick at `v`.
    pub fn label(&self, v: f64) -> String {
        // Rounding noise around zero reads as zero (and never as -0).
        let v = if v.abs() < 1e-9 * self.step.max(f64::MIN_POSITIVE) {
            0.0
        } else {
            v + 0.0
        };
        if self.whole {
            return if (v - v.round()).abs() > 1e-9 * v.abs().max(1.0) {
                String::new()
            } else {
                format!("{v:.0}")
            };
        }
        if self.mag >= LARGE || (self.mag > 0.0 && self.mag < SMALL) {
            if v == 0.0 {
                return "0".to_string();
            }
            let digits = if self.step > 0.0 {
                (self.mag / self.step).log10().ceil().clamp(1.0, 6.0) as usize
            } else {
                2
            };
            return format!("{v:.digits$e}");
        }
        let d = self.decimals();
        format!("{v:.d$}")
    }
}

/// The spacing of the ticks the plotting library puts on an axis from `lo`
/// to `hi` with at most `max_labels` ticks: the smallest of 1, 2 or
/// 5 × 10ᵏ that gives no more ticks than that (0 for an empty or
/// non-finite range).
pub fn tick_step(lo: f64, hi: f64, max_labels: usize) -> f64 {
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite()) || max_labels == 0 {
        return 0.0;
    }
    let count = |s: f64| {
        let left = (lo / s).ceil() * s;
        let right = (hi / s).floor() * s;
        (1.0 + (right - left) / s).round() as usize
    };
    let mut scale = 10f64.powf(span.log10().floor());
    if 1 + (span / scale).floor() as usize > max_labels {
        scale *= 10.0;
    }
    // At most 40 decades, so a degenerate range cannot loop for long.
    for _ in 0..40 {
        let old = scale;
        for nxt in [2.0, 5.0, 10.0] {
            if count(old / nxt) > max_labels {
                return scale;
            }
            scale = old / nxt;
        }
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_read_whole() {
        let years = Axis::new(1815.0, 1940.0, 10);
        assert_eq!(years.step, 20.0);
        assert_eq!(years.label(1820.0), "1820");
        assert_eq!(years.label(1900.0), "1900");
        let unit = Axis::new(0.0, 1.0, 11);
        assert_eq!(unit.step, 0.1);
        assert_eq!(unit.label(0.0), "0.0");
        assert_eq!(unit.label(0.5), "0.5");
        assert_eq!(unit.label(1.0), "1.0");
        let halves = Axis::new(0.0, 3.0, 7);
        assert_eq!(halves.step, 0.5);
        assert_eq!(halves.label(2.0), "2.0");
        assert_eq!(Axis::new(-0.3, 0.3, 6).label(-1e-17), "0.0");
        assert_eq!(Axis::new(0.0, 0.012, 10).label(0.006), "0.006");
        assert_eq!(Axis::new(0.0, 0.0004, 5).label(0.0002), "2.0e-4");
        assert_eq!(Axis::new(0.0, 3e8, 5).label(1e8), "1.0e8");
    }

    #[test]
    fn whole_axes_label_only_whole_ticks() {
        let draws = Axis::new(0.0, 2.0, 11).whole();
        assert_eq!(draws.label(1.0), "1");
        assert_eq!(draws.label(0.5), "");
    }

    #[test]
    fn degenerate_ranges_give_labels() {
        assert_eq!(tick_step(1.0, 1.0, 10), 0.0);
        assert_eq!(tick_step(0.0, f64::INFINITY, 10), 0.0);
        assert_eq!(Axis::new(2.0, 2.0, 10).label(2.0), "2");
        assert!(Axis::new(-1e308, 1e308, 10).label(1e308).len() < 12);
    }
}
