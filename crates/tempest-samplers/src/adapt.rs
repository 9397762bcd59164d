//! Warm-up adaptation. As Stan does it: dual averaging of the step size
//! towards a target acceptance statistic δ (Hoffman & Gelman 2014, with
//! γ = 0.05, t₀ = 10, κ = 0.75, μ = log 10ε₀), and a diagonal inverse mass
//! matrix estimated from the draws of doubling windows (an initial buffer of
//! 75 iterations, windows from 25 doubling, a terminal buffer of 50), each
//! estimate regularised towards 10⁻³ as (n/(n+5)) var + 10⁻³ · 5/(n+5).
//!
//! A dense metric uses the same windows with the draws' covariance
//! ([`Covariance`], regularised as Stan's `dense_e`).
//!
//! Or from the gradients as well ([`GradAdapt`], the scheme of nutpie):
//! for a Gaussian target N(μ, Σ) with diagonal Σ, Var(xᵢ) = Σᵢᵢ and
//! Var(∂ᵢ log π) = 1/Σᵢᵢ, so √(Var(xᵢ)/Var(gᵢ)) estimates Σᵢᵢ from both the
//! draws and their scores — at every iteration, from the start (the first
//! metric is 1/|∂ᵢ log π(x₀)|), in windows that overlap: a foreground
//! estimate sets the metric, a background one collects the latest draws
//! and replaces it every 20 iterations over the first 30 % of warm-up,
//! every 80 after; over the last 20 % the metric is fixed and only the
//! step size adapts.
//!
//! With early stopping ([`GradAdapt::stopping`]) the phases are counted in
//! iterations instead: switches every 20 over the first 150, every 50
//! after; the metric has settled when two consecutive independent windows
//! of 50 give estimates whose root-mean-square log ratio is within 1.5
//! times what sampling noise alone gives for independent draws,
//! √(2/(n − 1)) (the variance of ln s² from n normal draws is about
//! 2/(n − 1) and the metric is ½ ln(s²ₓ/s²_g)). Warm-up then ends after a
//! final step-size phase of 50 iterations; `warmup` is the longest it may
//! run.

/// Dual averaging of log ε.
#[derive(Clone, Debug)]
pub struct DualAveraging {
    delta: f64,
    mu: f64,
    s_bar: f64,
    x_bar: f64,
    counter: f64,
}

impl DualAveraging {
    /// Start from step size `eps` with target acceptance `delta`.
    pub fn new(eps: f64, delta: f64) -> Self {
        DualAveraging {
            delta,
            mu: (10.0 * eps).ln(),
            s_bar: 0.0,
            x_bar: 0.0,
            counter: 0.0,
        }
    }
    /// Restart around a new step size (after a metric update).
    pub fn restart(&mut self, eps: f64) {
        *self = DualAveraging::new(eps, self.delta);
    }
    /// Learn from one acceptance statistic; returns the next step size.
    pub fn update(&mut self, accept: f64) -> f64 {
        let (gamma, t0, kappa) = (0.05, 10.0, 0.75);
        self.counter += 1.0;
        let accept = if accept.is_finite() {
            accept.min(1.0)
        } else {
            0.0
        };
        let eta = 1.0 / (self.counter + t0);
        self.s_bar = (1.0 - eta) * self.s_bar + eta * (self.delta - accept);
        let x = self.mu - self.s_bar * self.counter.sqrt() / gamma;
        let x_eta = self.counter.powf(-kappa);
        self.x_bar = (1.0 - x_eta) * self.x_bar + x_eta * x;
        x.exp()
    }
    /// The final (averaged) step size.
    pub fn final_step(&self) -> f64 {
        self.x_bar.exp()
    }
}

/// Welford's running variance of each coordinate.
#[derive(Clone, Debug)]
pub struct Variance {
    n: f64,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl Variance {
    /// For `dim` coordinates.
    pub fn new(dim: usize) -> Self {
        Variance {
            n: 0.0,
            mean: vec![0.0; dim],
            m2: vec![0.0; dim],
        }
    }
    /// Add one draw.
    pub fn add(&mut self, x: &[f64]) {
        self.n += 1.0;
        for ((xi, mean), m2) in x.iter().zip(&mut self.mean).zip(&mut self.m2) {
            let d = xi - *mean;
            *mean += d / self.n;
            *m2 += d * (xi - *mean);
        }
    }
    /// The plain variance estimate (1 for fewer than two draws).
    pub fn raw(&self) -> Vec<f64> {
        self.m2
            .iter()
            .map(|m| {
                if self.n > 1.0 {
                    m / (self.n - 1.0)
                } else {
                    1.0
                }
            })
            .collect()
    }
    /// The number of draws added.
    pub fn count(&self) -> usize {
        self.n as usize
    }
    /// The regularised variance estimate.
    pub fn estimate(&self) -> Vec<f64> {
        let n = self.n;
        self.m2
            .iter()
            .map(|m| {
                let var = if n > 1.0 { m / (n - 1.0) } else { 1.0 };
                (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))
            })
            .collect()
    }
}

/// Welford's running covariance of the draws (for a dense metric).
#[derive(Clone, Debug)]
pub struct Covariance {
    n: f64,
    mean: Vec<f64>,
    m2: nalgebra::DMatrix<f64>,
}

impl Covariance {
    /// For `dim` coordinates.
    pub fn new(dim: usize) -> Self {
        Covariance {
            n: 0.0,
            mean: vec![0.0; dim],
            m2: nalgebra::DMatrix::zeros(dim, dim),
        }
    }
    /// Add one draw.
    pub fn add(&mut self, x: &[f64]) {
        self.n += 1.0;
        let before: Vec<f64> = x.iter().zip(&self.mean).map(|(a, m)| a - m).collect();
        for (m, d) in self.mean.iter_mut().zip(&before) {
            *m += d / self.n;
        }
        let after: Vec<f64> = x.iter().zip(&self.mean).map(|(a, m)| a - m).collect();
        // M2 += (x − mean_before)(x − mean_after)ᵀ, one rank-one update.
        let (b, a) = (
            nalgebra::DVector::from_vec(before),
            nalgebra::DVector::from_vec(after),
        );
        self.m2.ger(1.0, &b, &a, 1.0);
    }
    /// The regularised covariance, as Stan's dense metric:
    /// (n/(n+5)) Σ + 10⁻³ · 5/(n+5) · I.
    pub fn estimate(&self) -> nalgebra::DMatrix<f64> {
        let n = self.n;
        let d = self.mean.len();
        let cov = if n > 1.0 {
            &self.m2 / (n - 1.0)
        } else {
            nalgebra::DMatrix::identity(d, d)
        };
        let mut e = cov * (n / (n + 5.0));
        for i in 0..d {
            e[(i, i)] += 1e-3 * (5.0 / (n + 5.0));
        }
        // Symmetric to rounding.
        (&e + e.transpose()) * 0.5
    }
}

/// The bounds of a gradient-based inverse metric entry.
const GRAD_METRIC_RANGE: (f64, f64) = (1e-10, 1e10);

/// Gradient-based adaptation of a diagonal inverse metric (see the module
/// documentation).
#[derive(Clone, Debug)]
pub struct GradAdapt {
    fg: (Variance, Variance),
    bg: (Variance, Variance),
    since_switch: usize,
    /// The first iteration after the early phase (switches every 20).
    early_end: usize,
    /// The first iteration of the final phase (metric fixed).
    pub final_start: usize,
    /// With early stopping: the metric of the previous slow window.
    settled_from: Option<Vec<f64>>,
    /// Whether warm-up may end once the metric has settled.
    early: bool,
    /// The warm-up iterations allowed.
    warmup: usize,
}

/// Early stopping: the early phase's length, the slow windows' and the
/// final step-size phase's.
const STOP_EARLY_PHASE: usize = 150;
const STOP_WINDOW: usize = 50;
/// The final phase after an early stop.
pub const STOP_FINAL: usize = 50;

impl GradAdapt {
    /// For `dim` coordinates and `warmup` iterations.
    pub fn new(dim: usize, warmup: usize) -> Self {
        let pair = || (Variance::new(dim), Variance::new(dim));
        GradAdapt {
            fg: pair(),
            bg: pair(),
            since_switch: 0,
            early_end: (0.3 * warmup as f64) as usize,
            final_start: warmup - (0.2 * warmup as f64) as usize,
            settled_from: None,
            early: false,
            warmup,
        }
    }

    /// Like [`GradAdapt::new`], ending warm-up early once the metric has
    /// settled (see the module documentation); without settling the phases
    /// are those of a `warmup`-long run. Runs too short for two slow
    /// windows and the final phase never stop early.
    pub fn stopping(dim: usize, warmup: usize) -> Self {
        let mut a = Self::new(dim, warmup);
        if warmup >= STOP_EARLY_PHASE + 2 * STOP_WINDOW + STOP_FINAL {
            a.early = true;
            a.early_end = STOP_EARLY_PHASE;
            a.final_start = warmup - STOP_FINAL;
        }
        a
    }

    /// The iteration after the last warm-up iteration: `warmup`, or earlier
    /// once the metric has settled.
    pub fn warmup_end(&self) -> usize {
        if self.early {
            (self.final_start + STOP_FINAL).min(self.warmup)
        } else {
            self.warmup
        }
    }

    /// The first inverse metric, from the score at the initial point:
    /// 1/|gᵢ| (1 where the score is 0), within the bounds.
    pub fn initial(grad: &[f64]) -> Vec<f64> {
        grad.iter()
            .map(|g| {
                if *g == 0.0 || !g.is_finite() {
                    1.0
                } else {
                    (1.0 / g.abs()).clamp(GRAD_METRIC_RANGE.0, GRAD_METRIC_RANGE.1)
                }
            })
            .collect()
    }

    /// Learn from warm-up iteration `w` (0-based) at x with score g; the new
    /// inverse metric when it changes (never in the final phase).
    pub fn update(&mut self, w: usize, x: &[f64], g: &[f64]) -> Option<Vec<f64>> {
        if w >= self.final_start {
            return None;
        }
        for (vx, vg) in [&mut self.fg, &mut self.bg] {
            vx.add(x);
            vg.add(g);
        }
        self.since_switch += 1;
        let slow = if self.early { STOP_WINDOW } else { 80 };
        let every = if w < self.early_end { 20 } else { slow };
        let mut switched = false;
        if self.since_switch >= every && self.bg.0.count() >= 3 {
            self.fg = std::mem::replace(
                &mut self.bg,
                (Variance::new(x.len()), Variance::new(x.len())),
            );
            self.since_switch = 0;
            switched = true;
        }
        if self.fg.0.count() < 3 {
            return None;
        }
        let metric = self.metric();
        if self.early && switched && w >= self.early_end {
            // A slow window just ended: compare it with the one before.
            if let Some(prev) = &self.settled_from
                && settled(prev, &metric, self.fg.0.count())
            {
                self.final_start = w + 1;
            }
            self.settled_from = Some(metric.clone());
        }
        Some(metric)
    }

    /// The metric of the foreground window.
    fn metric(&self) -> Vec<f64> {
        let (vx, vg) = (self.fg.0.raw(), self.fg.1.raw());
        vx.iter()
            .zip(&vg)
            .map(|(a, b)| {
                let r = (a / b).sqrt();
                if r.is_finite() {
                    r.clamp(GRAD_METRIC_RANGE.0, GRAD_METRIC_RANGE.1)
                } else {
                    1.0
                }
            })
            .collect()
    }
}

/// Whether two metrics from independent windows of `n` draws agree to
/// within sampling noise: the root-mean-square of ln(bᵢ/aᵢ) at most 1.5
/// times √(2/(n − 1)).
fn settled(a: &[f64], b: &[f64], n: usize) -> bool {
    if a.is_empty() || n < 3 {
        return false;
    }
    let ms = a
        .iter()
        .zip(b)
        .map(|(x, y)| (y / x).ln().powi(2))
        .sum::<f64>()
        / a.len() as f64;
    ms.is_finite() && ms.sqrt() <= 1.5 * (2.0 / (n as f64 - 1.0)).sqrt()
}

/// Stan's warm-up schedule for `warmup` iterations.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The iterations (0-based) after which the metric is updated.
    pub ends: Vec<usize>,
    /// The first iteration of slow adaptation.
    pub start: usize,
    /// Whether the metric is adapted at all.
    pub metric: bool,
}

impl Schedule {
    /// The windows for `warmup` iterations (no metric adaptation below 20,
    /// Stan's 15%/75%/10% split when the defaults do not fit).
    pub fn new(warmup: usize) -> Schedule {
        if warmup < 20 {
            return Schedule {
                ends: vec![],
                start: warmup,
                metric: false,
            };
        }
        let (mut init, mut term, base) = (75usize, 50usize, 25usize);
        if init + term + base > warmup {
            init = (0.15 * warmup as f64) as usize;
            term = (0.1 * warmup as f64) as usize;
        }
        let last = warmup - term;
        let mut ends = Vec::new();
        let mut start = init;
        let mut size = if init + term + base > warmup {
            warmup - init - term
        } else {
            base
        };
        loop {
            let mut end = start + size;
            // Stretch the last window to the terminal buffer.
            if end + 2 * size > last {
                end = last;
            }
            ends.push(end - 1);
            if end >= last {
                break;
            }
            start = end;
            size *= 2;
        }
        Schedule {
            ends,
            start: init,
            metric: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stan_windows_for_1000_warmup() {
        // Stan: 75 init, windows 25, 50, 100, 200, 500 (stretched), 50 terminal.
        let s = Schedule::new(1000);
        assert_eq!(s.start, 75);
        assert_eq!(s.ends, vec![99, 149, 249, 449, 949]);
    }

    #[test]
    fn gradient_metric_recovers_a_gaussians_scales() {
        // x ~ N(0, diag(s²)) has score −x/s²: √(Var x / Var g) = s².
        use rand::SeedableRng;
        let s = [0.1, 1.0, 30.0];
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let mut a = GradAdapt::new(3, 1000);
        let mut last = None;
        for w in 0..700 {
            let (x, g) = gauss_draw(&mut rng, &s);
            if let Some(m) = a.update(w, &x, &g) {
                last = Some(m);
            }
        }
        let m = last.unwrap();
        for (mi, si) in m.iter().zip(&s) {
            assert!((mi / (si * si) - 1.0).abs() < 1e-9, "{mi} vs {}", si * si);
        }
        // The final 20 % keeps the metric.
        assert!(a.update(900, &[0.0; 3], &[1.0; 3]).is_none());
        assert_eq!(GradAdapt::initial(&[-4.0, 0.0]), vec![0.25, 1.0]);
    }

    /// A draw x of N(0, diag(s²)) and its score −x/s².
    fn gauss_draw(rng: &mut rand::rngs::StdRng, s: &[f64]) -> (Vec<f64>, Vec<f64>) {
        use rand_distr::{Distribution, StandardNormal};
        let x: Vec<f64> = s
            .iter()
            .map(|si| {
                let z: f64 = StandardNormal.sample(rng);
                si * z
            })
            .collect();
        let g = x.iter().zip(s).map(|(xi, si)| -xi / (si * si)).collect();
        (x, g)
    }

    /// Feeds `a` draws of N(0, diag(s(w)²)) with their scores until warm-up
    /// ends or `limit` iterations pass; returns the iterations used.
    fn run_until_settled(a: &mut GradAdapt, s: impl Fn(usize) -> Vec<f64>, limit: usize) -> usize {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let mut w = 0;
        while w < a.warmup_end().min(limit) {
            let (x, g) = gauss_draw(&mut rng, &s(w));
            a.update(w, &x, &g);
            w += 1;
        }
        w
    }

    #[test]
    fn early_stopping_ends_warmup_once_the_metric_settles() {
        // Fixed scales: the first two slow windows agree, so warm-up ends
        // at the earliest, 290 iterations.
        let fixed = |_: usize| vec![0.1, 1.0, 30.0, 2.0];
        let mut a = GradAdapt::stopping(4, 1000);
        assert_eq!(run_until_settled(&mut a, fixed, 1000), 290);
        // Scales still drifting (doubling every 100 iterations until 700):
        // consecutive windows disagree, so warm-up runs on until the drift
        // stops.
        let drifting = |w: usize| {
            let f = 2f64.powf(w.min(700) as f64 / 100.0);
            vec![0.1 * f, 1.0, 30.0 / f, 2.0]
        };
        let mut a = GradAdapt::stopping(4, 1000);
        let n = run_until_settled(&mut a, drifting, 1000);
        assert!(
            n > 700,
            "stopped after {n} iterations while the scales drifted"
        );
        // Without early stopping, and for runs too short for it, warm-up
        // runs its whole length.
        let mut a = GradAdapt::new(4, 1000);
        assert_eq!(run_until_settled(&mut a, fixed, 2000), 1000);
        let mut a = GradAdapt::stopping(4, 299);
        assert_eq!(run_until_settled(&mut a, fixed, 2000), 299);
    }

    #[test]
    fn covariance_of_known_draws_regularised_as_stan() {
        let mut c = Covariance::new(2);
        for x in [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]] {
            c.add(&x);
        }
        let e = c.estimate();
        let (w, r) = (3.0 / 8.0, 1e-3 * 5.0 / 8.0);
        assert!((e[(0, 0)] - (w * 1.0 + r)).abs() < 1e-12);
        assert!((e[(1, 1)] - (w * 4.0 + r)).abs() < 1e-12);
        assert!((e[(0, 1)] - w * 2.0).abs() < 1e-12 && e[(0, 1)] == e[(1, 0)]);
    }

    #[test]
    fn dual_averaging_moves_towards_the_target() {
        let mut da = DualAveraging::new(1.0, 0.8);
        let mut eps: f64 = 1.0;
        for _ in 0..200 {
            // acceptance falls as the step grows
            let accept = (-eps).exp();
            eps = da.update(accept);
        }
        let e = da.final_step();
        assert!(((-e).exp() - 0.8).abs() < 0.05, "{e}");
    }
}
