//! Predictive bands: the mean, sd and 2.5 / 25 / 50 / 75 / 97.5 %
//! quantiles of a predictive distribution at M points, from draws or from a
//! normal distribution. Every engine's predictions at test data use it.

use crate::mc::diagnostics::quantile_sorted;
use serde::Serialize;

/// The standard normal quantiles of 0.975 and 0.75.
const Z975: f64 = 1.959_963_984_540_054;
const Z75: f64 = 0.674_489_750_196_081_7;

/// Why a root mean squared error overflows.
pub const OVERFLOW: &str =
    "the squared errors overflow: a test outcome lies 1e154 or more from its predictive mean";

/// Summaries of a predictive distribution at each of M points.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Band {
    /// Mean \[M\].
    pub mean: Vec<f64>,
    /// Standard deviation \[M\].
    pub sd: Vec<f64>,
    /// 2.5 % quantile \[M\].
    #[serde(rename = "q2.5")]
    pub q2_5: Vec<f64>,
    /// 25 % quantile \[M\].
    pub q25: Vec<f64>,
    /// Median \[M\].
    pub q50: Vec<f64>,
    /// 75 % quantile \[M\].
    pub q75: Vec<f64>,
    /// 97.5 % quantile \[M\].
    #[serde(rename = "q97.5")]
    pub q97_5: Vec<f64>,
}

impl Band {
    /// The summaries of `draws` \[S\]\[M\] at each of the M points.
    pub fn of<R: AsRef<[f64]>>(draws: &[R], m: usize) -> Band {
        let mut b = Band::default();
        for i in 0..m {
            let col: Vec<f64> = draws.iter().map(|d| d.as_ref()[i]).collect();
            b.push_draws(&col);
        }
        b
    }

    /// Add a point summarised from its draws.
    pub fn push_draws(&mut self, col: &[f64]) {
        let s = col.len().max(1) as f64;
        let mean = col.iter().sum::<f64>() / s;
        let var = col.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (s - 1.0).max(1.0);
        self.mean.push(mean);
        self.sd.push(var.sqrt());
        // One sort for the five quantiles (NaN for a NaN draw, as
        // `quantile` gives it).
        let q: [f64; 5] = if col.is_empty() || col.iter().any(|x| x.is_nan()) {
            [f64::NAN; 5]
        } else {
            let mut sorted = col.to_vec();
            sorted.sort_by(f64::total_cmp);
            [0.025, 0.25, 0.5, 0.75, 0.975].map(|p| quantile_sorted(&sorted, p))
        };
        self.q2_5.push(q[0]);
        self.q25.push(q[1]);
        self.q50.push(q[2]);
        self.q75.push(q[3]);
        self.q97_5.push(q[4]);
    }

    /// Add the points of another band after these.
    pub fn append(&mut self, other: Band) {
        self.mean.extend(other.mean);
        self.sd.extend(other.sd);
        self.q2_5.extend(other.q2_5);
        self.q25.extend(other.q25);
        self.q50.extend(other.q50);
        self.q75.extend(other.q75);
        self.q97_5.extend(other.q97_5);
    }

    /// Add a point whose predictive distribution is N(mean, sd²).
    pub fn push_normal(&mut self, mean: f64, sd: f64) {
        self.mean.push(mean);
        self.sd.push(sd);
        self.q2_5.push(mean - Z975 * sd);
        self.q25.push(mean - Z75 * sd);
        self.q50.push(mean);
        self.q75.push(mean + Z75 * sd);
        self.q97_5.push(mean + Z975 * sd);
    }

    /// The fractions of `y` inside the central 50 % and 95 % intervals.
    pub fn coverage(&self, y: &[f64]) -> (f64, f64) {
        let n = y.len().max(1) as f64;
        let inside = |lo: &[f64], hi: &[f64]| {
            y.iter()
                .enumerate()
                .filter(|&(i, v)| lo[i] <= *v && *v <= hi[i])
                .count() as f64
                / n
        };
        (
            inside(&self.q25, &self.q75),
            inside(&self.q2_5, &self.q97_5),
        )
    }

    /// The root mean squared error of the mean against `y`.
    pub fn rmse(&self, y: &[f64]) -> f64 {
        let n = y.len().max(1) as f64;
        (y.iter()
            .zip(&self.mean)
            .map(|(a, m)| (a - m).powi(2))
            .sum::<f64>()
            / n)
            .sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_band_and_metrics() {
        let mut b = Band::default();
        b.push_normal(1.0, 2.0);
        b.push_normal(0.0, 1.0);
        assert!((b.q97_5[0] - (1.0 + 2.0 * Z975)).abs() < 1e-12);
        assert!((b.q25[1] + Z75).abs() < 1e-12);
        // 1.5 is inside both intervals of point 0; 1.0 only inside the 95 % one of point 1.
        assert_eq!(b.coverage(&[1.5, 1.0]), (0.5, 1.0));
        assert!((b.rmse(&[1.5, 1.0]) - (0.625f64).sqrt()).abs() < 1e-12);
        // Draws: 1..=5.
        let mut d = Band::default();
        d.push_draws(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((d.mean[0], d.q50[0], d.q25[0]), (3.0, 3.0, 2.0));
        assert!((d.sd[0] - 2.5f64.sqrt()).abs() < 1e-12);
    }
}
