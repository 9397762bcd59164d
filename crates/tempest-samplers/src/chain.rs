//! One Markov chain as a state machine: initialisation, warm-up with
//! adaptation, then sampling, one iteration per call to [`Chain::step`].
//! Each chain has its own random stream, derived from the run's seed and the
//! chain's number only, so results do not depend on how chains are scheduled.

use super::adapt::{Covariance, DualAveraging, GradAdapt, Schedule, Variance};
use super::hamiltonian::{
    State, Stats, Target, hmc_transition, leapfrog, nuts_transition, refresh_momentum,
};
use crate::error::{Error, ErrorKind};
use nalgebra::{DMatrix, DVector};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

/// Which transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The No-U-Turn sampler.
    Nuts {
        /// Maximum tree depth.
        max_depth: usize,
    },
    /// Static HMC.
    Hmc {
        /// Leapfrog steps per iteration.
        steps: usize,
    },
    /// The Metropolis-adjusted Langevin algorithm.
    Mala,
}

impl Method {
    /// The engine's name: `nuts`, `hmc` or `mala`.
    pub fn name(&self) -> &'static str {
        match self {
            Method::Nuts { .. } => "nuts",
            Method::Hmc { .. } => "hmc",
            Method::Mala => "mala",
        }
    }
}

/// How a chain runs.
#[derive(Clone, Copy, Debug)]
pub struct ChainConfig {
    /// The transition.
    pub method: Method,
    /// Warm-up iterations.
    pub warmup: usize,
    /// Kept draws.
    pub draws: usize,
    /// The target acceptance statistic δ.
    pub target_accept: f64,
    /// The initial step size, if given.
    pub step_size: Option<f64>,
    /// How warm-up adapts the metric.
    pub adaptation: Adaptation,
    /// With [`Adaptation::Gradient`]: end warm-up once the metric has
    /// settled ([`GradAdapt::stopping`]); `warmup` is then the longest it
    /// may run.
    pub early_stop: bool,
}

/// How warm-up adapts the diagonal inverse metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adaptation {
    /// Stan's windowed variance of the draws ([`super::adapt::Schedule`]).
    Stan,
    /// From the draws and their scores at every iteration
    /// ([`super::adapt::GradAdapt`]).
    Gradient,
    /// A dense metric: Stan's windows with the draws' covariance
    /// ([`super::adapt::Covariance`]); the chain moves in y with x = L y,
    /// L Lᵀ the estimate, under a unit metric.
    Dense,
    /// The gradient-based diagonal with a low-rank correction fitted from
    /// the draws and their scores ([`super::low_rank`]), in windows like
    /// [`Adaptation::Gradient`]'s; the chain moves in y with x = L y.
    LowRank,
}

impl Adaptation {
    /// The setting's value: `stan`, `gradient`, `dense` or `low_rank`.
    pub fn name(&self) -> &'static str {
        match self {
            Adaptation::Stan => "stan",
            Adaptation::Gradient => "gradient",
            Adaptation::Dense => "dense",
            Adaptation::LowRank => "low_rank",
        }
    }
}

/// The target seen through x = L y: log π(L y) and Lᵀ ∇ log π(L y).
struct Linear<'a, T: ?Sized> {
    inner: &'a T,
    l: &'a DMatrix<f64>,
}

impl<T: Target + ?Sized> Target for Linear<'_, T> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn logp_grad(&self, y: &[f64], grad: &mut [f64]) -> Result<f64, Error> {
        let x = self.l * DVector::from_column_slice(y);
        let mut gx = vec![0.0; x.len()];
        let lp = self.inner.logp_grad(x.as_slice(), &mut gx)?;
        let gy = self.l.tr_mul(&DVector::from_vec(gx));
        grad.copy_from_slice(gy.as_slice());
        Ok(lp)
    }
}

/// A dense or low-rank metric's state: the transform L of the current
/// estimate (x = L y) and what the window collects for the next one.
struct DenseMetric {
    /// Shared, so an iteration takes it without copying d² numbers.
    l: Arc<DMatrix<f64>>,
    /// L⁻ᵀ when L is not lower triangular (a low-rank metric's L = S B).
    l_inv_t: Option<Arc<DMatrix<f64>>>,
    window: MetricWindow,
}

/// What a metric's warm-up window collects.
enum MetricWindow {
    /// [`Adaptation::Dense`]: the running covariance of x.
    Dense(Covariance),
    /// [`Adaptation::LowRank`]: the draws and scores.
    LowRank(LowRankWindow),
}

/// The draws and scores (in x) a low-rank metric is fitted from: the
/// previous window and the current one.
struct LowRankWindow {
    xs: Vec<Vec<f64>>,
    gs: Vec<Vec<f64>>,
    /// Draws added since the last fit.
    since: usize,
    /// Fits every 20 draws before this iteration, every 80 after.
    early_end: usize,
    /// No fits from this iteration on.
    final_start: usize,
}

/// One kept draw: the unconstrained position, its log density and gradient
/// (the score), and the sampler statistics.
#[derive(Clone, Debug)]
pub struct Draw {
    /// x.
    pub q: Vec<f64>,
    /// log π(x).
    pub lp: f64,
    /// ∇ log π(x).
    pub score: Vec<f64>,
    /// Statistics of the transition that produced it.
    pub stats: Stats,
}

/// A chain's state.
pub struct Chain {
    /// The chain's number (0-based).
    pub id: usize,
    rng: StdRng,
    state: State,
    /// The step size.
    pub eps: f64,
    /// The diagonal inverse metric.
    pub inv_metric: Vec<f64>,
    da: DualAveraging,
    var: Variance,
    grad_adapt: Option<GradAdapt>,
    /// With a dense metric: the chain's position and score are in y
    /// (x = L y).
    dense: Option<DenseMetric>,
    schedule: Schedule,
    cfg: ChainConfig,
    /// Iterations done (warm-up and sampling).
    pub iter: usize,
    /// Divergences during sampling.
    pub divergences: usize,
    /// The iteration after the last warm-up iteration (`cfg.warmup`, or
    /// earlier when warm-up stops early).
    pub warmup_end: usize,
    /// Gradient evaluations of the warm-up transitions.
    pub warmup_gradients: usize,
}

/// The step sizes the initial search keeps to, and the range of the
/// `step_size` setting: (10⁻¹², 10⁷].
pub const STEP_SIZE_RANGE: (f64, f64) = (1e-12, 1e7);

/// Random initial points tried per chain (uniform in (−2, 2) on the
/// unconstrained scale, as Stan's); the chain starts at the one with the
/// highest log density, which keeps a chain from starting in a far, flat or
/// stiff region it may never leave (a Lotka–Volterra chain stuck at
/// log density −13,000 with a step size of 10⁻³⁰⁰, where the best of eight
/// starts at the posterior).
const INIT_CANDIDATES: usize = 8;

/// The random seed of chain `id` from the run's seed (SplitMix64 mixing).
pub fn chain_seed(seed: u64, id: usize) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(id as u64 + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Chain {
    /// Initialise at the best of `INIT_CANDIDATES` random points with
    /// each coordinate uniform in (−2, 2) on the unconstrained scale (as
    /// Stan's one), retrying where the density fails.
    pub fn new<T: Target + ?Sized>(
        target: &T,
        id: usize,
        seed: u64,
        cfg: ChainConfig,
    ) -> Result<Chain, Error> {
        Self::new_at(target, id, seed, cfg, None)
    }

    /// A chain that starts at `init` when the density there is finite (a
    /// warm start), else like [`Chain::new`].
    pub fn new_at<T: Target + ?Sized>(
        target: &T,
        id: usize,
        seed: u64,
        cfg: ChainConfig,
        init: Option<&[f64]>,
    ) -> Result<Chain, Error> {
        let mut rng = StdRng::seed_from_u64(chain_seed(seed, id));
        let dim = target.dim();
        let mut state = None;
        let mut last_err = None;
        if let Some(q) = init
            && q.len() == dim
            && let Ok(s) = State::at(target, q.to_vec())
            && s.lp.is_finite()
            && s.grad.iter().all(|g| g.is_finite())
        {
            state = Some(s);
        }
        // Without a warm start: the best of the first INIT_CANDIDATES
        // random points with a finite density (of at most 100 tries); a
        // warm start that failed takes the first.
        let warm = state.is_some();
        let wanted = if init.is_some() { 1 } else { INIT_CANDIDATES };
        let mut found = 0;
        for _ in 0..100 {
            if warm || found == wanted {
                break;
            }
            let q: Vec<f64> = (0..dim).map(|_| rng.random::<f64>() * 4.0 - 2.0).collect();
            match State::at(target, q) {
                Ok(s) if s.lp.is_finite() && s.grad.iter().all(|g| g.is_finite()) => {
                    found += 1;
                    if state.as_ref().is_none_or(|b: &State| s.lp > b.lp) {
                        state = Some(s);
                    }
                }
                Ok(_) => {}
                // A stop, a refused setting (a memory budget) or a bug is
                // not a property of the point: another would meet it too.
                Err(e)
                    if e.is_interrupted()
                        || matches!(e.kind, ErrorKind::Settings | ErrorKind::Internal) =>
                {
                    return Err(e);
                }
                Err(e) => last_err = Some(e),
            }
        }
        let Some(state) = state else {
            let mut e = Error::new(
                ErrorKind::Numerical,
                format!(
                    "chain {}: no initial point with a finite log density in 100 tries",
                    id + 1
                ),
            );
            if let Some(le) = last_err {
                e = e.with_note(format!("the last failure: {}", le.message));
            }
            return Err(e);
        };
        let grad_adapt = (cfg.adaptation == Adaptation::Gradient && cfg.warmup > 0).then(|| {
            if cfg.early_stop {
                GradAdapt::stopping(dim, cfg.warmup)
            } else {
                GradAdapt::new(dim, cfg.warmup)
            }
        });
        let inv_metric = match &grad_adapt {
            Some(_) => GradAdapt::initial(&state.grad),
            None => vec![1.0; dim],
        };
        let mut chain = Chain {
            id,
            rng,
            state,
            eps: cfg.step_size.unwrap_or(1.0),
            inv_metric,
            da: DualAveraging::new(1.0, cfg.target_accept),
            var: Variance::new(dim),
            grad_adapt,
            dense: matches!(cfg.adaptation, Adaptation::Dense | Adaptation::LowRank).then(|| {
                DenseMetric {
                    l: Arc::new(DMatrix::identity(dim, dim)),
                    l_inv_t: None,
                    window: if cfg.adaptation == Adaptation::LowRank {
                        MetricWindow::LowRank(LowRankWindow {
                            xs: Vec::new(),
                            gs: Vec::new(),
                            since: 0,
                            early_end: (0.3 * cfg.warmup as f64) as usize,
                            final_start: cfg.warmup - (0.2 * cfg.warmup as f64) as usize,
                        })
                    } else {
                        MetricWindow::Dense(Covariance::new(dim))
                    },
                }
            }),
            schedule: Schedule::new(cfg.warmup),
            cfg,
            iter: 0,
            divergences: 0,
            warmup_end: cfg.warmup,
            warmup_gradients: 0,
        };
        // A dense metric starts from the diagonal 1/|∂ log π(x₀)| (as the
        // gradient-based one), until the first window's covariance.
        let mut start_l = None;
        if cfg.warmup > 0
            && let Some(d) = &mut chain.dense
        {
            let diag = GradAdapt::initial(&chain.state.grad);
            let l =
                DMatrix::from_diagonal(&DVector::from_iterator(dim, diag.iter().map(|v| v.sqrt())));
            let y: Vec<f64> = chain
                .state
                .q
                .iter()
                .zip(&diag)
                .map(|(x, v)| x / v.sqrt())
                .collect();
            if let Ok(s) = State::at(
                &Linear {
                    inner: target,
                    l: &l,
                },
                y,
            ) && s.lp.is_finite()
            {
                chain.state = s;
                d.l = Arc::new(l.clone());
                start_l = Some(l);
            }
        }
        // Without warm-up a given step size is used as is; otherwise (as
        // Stan) the heuristic starts from it, or from 1.
        if cfg.warmup > 0 || cfg.step_size.is_none() {
            match &start_l {
                Some(l) => chain.find_step_size(&Linear { inner: target, l }),
                None => chain.find_step_size(target),
            }
        }
        chain.da.restart(chain.eps);
        Ok(chain)
    }

    /// The chain's current position x.
    pub fn position(&self) -> Vec<f64> {
        match &self.dense {
            Some(d) => (&*d.l * DVector::from_column_slice(&self.state.q))
                .as_slice()
                .to_vec(),
            None => self.state.q.clone(),
        }
    }

    /// The diagonal of the inverse metric in x (for a dense metric, of
    /// L Lᵀ), as output files report it.
    pub fn metric_diagonal(&self) -> Vec<f64> {
        match &self.dense {
            Some(d) => (0..d.l.nrows())
                .map(|i| d.l.row(i).norm_squared())
                .collect(),
            None => self.inv_metric.clone(),
        }
    }

    /// One iteration; returns the draw once past warm-up. With a dense
    /// metric the dynamics run on the target seen through x = L y.
    pub fn step<T: Target + ?Sized>(&mut self, target: &T) -> Option<Draw> {
        let Some(dense) = self.dense.take() else {
            return self.step_in(target);
        };
        let l = Arc::clone(&dense.l);
        self.dense = Some(dense);
        let w = self.iter;
        let seen = Linear {
            inner: target,
            l: &l,
        };
        let draw = self.step_in(&seen);
        let low_rank = self
            .dense
            .as_ref()
            .is_some_and(|d| matches!(d.window, MetricWindow::LowRank(_)));
        if w < self.warmup_end && low_rank {
            self.low_rank_window(&seen, w);
        } else if w < self.warmup_end && self.schedule.metric && w >= self.schedule.start {
            self.dense_window(&seen, w);
        }
        let draw = draw?;
        // Report the draw in x: q = L y, ∇ₓ = L⁻ᵀ ∇_y.
        let q = (&*l * DVector::from_column_slice(&draw.q))
            .as_slice()
            .to_vec();
        let score = self.score_in_x(&l, draw.score.clone());
        Some(Draw { q, score, ..draw })
    }

    /// A score ∇_y in y mapped to ∇ₓ = L⁻ᵀ ∇_y, for the transform L the
    /// chain was using.
    fn score_in_x(&self, l: &DMatrix<f64>, gy: Vec<f64>) -> Vec<f64> {
        let v = DVector::from_column_slice(&gy);
        match self.dense.as_ref().and_then(|d| d.l_inv_t.as_ref()) {
            Some(t) => (&**t * v).as_slice().to_vec(),
            None => l
                .tr_solve_lower_triangular(&v)
                .map(|s| s.as_slice().to_vec())
                .unwrap_or(gy),
        }
    }

    /// A low-rank metric's window step at warm-up iteration `w`: keep x
    /// and ∇ₓ; every 20 iterations over the first 30 % of warm-up and every
    /// 80 until the last 20 %, fit the metric to the previous and current
    /// windows ([`super::low_rank::fit`]) and move the chain to
    /// y′ = L′⁻¹ x. `target` is the target seen through the old L.
    fn low_rank_window<T: Target + ?Sized>(&mut self, target: &Linear<'_, T>, w: usize) {
        let x = self.position();
        let gx = self.score_in_x(target.l, self.state.grad.clone());
        let Some(DenseMetric {
            window: MetricWindow::LowRank(win),
            ..
        }) = &mut self.dense
        else {
            return;
        };
        if w >= win.final_start {
            return;
        }
        win.xs.push(x.clone());
        win.gs.push(gx);
        win.since += 1;
        let every = if w < win.early_end { 20 } else { 80 };
        if win.since < every {
            return;
        }
        let fitted = super::low_rank::fit(&win.xs, &win.gs);
        // Keep the current window for the next fit.
        let drop = win.xs.len() - win.since;
        win.xs.drain(..drop);
        win.gs.drain(..drop);
        win.since = 0;
        let Some(m) = fitted else { return };
        let y = m.l_inv_t.tr_mul(&DVector::from_vec(x));
        let moved = State::at(
            &Linear {
                inner: target.inner,
                l: &m.l,
            },
            y.as_slice().to_vec(),
        );
        if let Ok(s) = moved
            && s.lp.is_finite()
            && let Some(d) = &mut self.dense
        {
            self.state = s;
            d.l = Arc::new(m.l);
            d.l_inv_t = Some(Arc::new(m.l_inv_t));
            let l = Arc::clone(&d.l);
            self.find_step_size(&Linear {
                inner: target.inner,
                l: &l,
            });
            self.da.restart(self.eps);
        }
    }

    /// Stan's heuristic: double or halve ε until the acceptance of one
    /// leapfrog step crosses 0.8. It starts inside [`STEP_SIZE_RANGE`] (a
    /// step size outside it, or not finite, is first brought into it) and
    /// stays there, which it can cross end to end, so any start recovers.
    fn find_step_size<T: Target + ?Sized>(&mut self, target: &T) {
        let (lo, hi) = STEP_SIZE_RANGE;
        self.eps = if self.eps.is_finite() {
            self.eps.clamp(lo, hi)
        } else {
            1.0
        };
        let mut z = self.state.clone();
        refresh_momentum(&mut z, &self.inv_metric, &mut self.rng);
        let h0 = z.energy(&self.inv_metric);
        let try_eps = |eps: f64, z0: &State| {
            let mut z = z0.clone();
            leapfrog(target, &mut z, eps, &self.inv_metric);
            let h = z.energy(&self.inv_metric);
            if h.is_nan() {
                f64::NEG_INFINITY
            } else {
                h0 - h
            }
        };
        let first = try_eps(self.eps, &z);
        let up = first > 0.8f64.ln();
        // log₂(hi/lo) < 64 doublings or halvings cross the whole range.
        for _ in 0..64 {
            let next = if up { 2.0 * self.eps } else { 0.5 * self.eps };
            if !(lo..=hi).contains(&next) {
                break;
            }
            self.eps = next;
            let dh = try_eps(self.eps, &z);
            if up && dh <= 0.8f64.ln() {
                break;
            }
            if !up && dh > 0.8f64.ln() {
                break;
            }
        }
    }

    /// A dense metric's window step at warm-up iteration `w`: add x = L y
    /// to the running covariance; at a window's end, the new estimate's
    /// factor L′ replaces L and the chain moves to y′ = L′⁻¹ x. `target`
    /// is the target seen through the old L.
    fn dense_window<T: Target + ?Sized>(&mut self, target: &Linear<'_, T>, w: usize) {
        let x = self.position();
        let Some(d) = &mut self.dense else { return };
        let MetricWindow::Dense(cov) = &mut d.window else {
            return;
        };
        cov.add(&x);
        if !self.schedule.ends.contains(&w) {
            return;
        }
        let est = cov.estimate();
        *cov = Covariance::new(x.len());
        let Some(chol) = est.cholesky() else {
            return;
        };
        let l = chol.l();
        let Some(y) = l.solve_lower_triangular(&DVector::from_vec(x)) else {
            return;
        };
        let moved = State::at(
            &Linear {
                inner: target.inner,
                l: &l,
            },
            y.as_slice().to_vec(),
        );
        if let Ok(s) = moved
            && s.lp.is_finite()
        {
            self.state = s;
            d.l = Arc::new(l);
            let l = Arc::clone(&d.l);
            self.find_step_size(&Linear {
                inner: target.inner,
                l: &l,
            });
            self.da.restart(self.eps);
        }
    }

    /// Whether every iteration is done.
    pub fn done(&self) -> bool {
        self.iter >= self.warmup_end + self.cfg.draws
    }

    /// Whether the chain is still warming up.
    pub fn warming_up(&self) -> bool {
        self.iter < self.warmup_end
    }

    /// One iteration on `target` as the chain sees it.
    fn step_in<T: Target + ?Sized>(&mut self, target: &T) -> Option<Draw> {
        if self.done() {
            return None;
        }
        let (next, stats) = match self.cfg.method {
            Method::Nuts { max_depth } => nuts_transition(
                target,
                &self.state,
                self.eps,
                &self.inv_metric,
                max_depth,
                &mut self.rng,
            ),
            Method::Hmc { steps } => {
                // The number of steps is drawn uniformly from 1..=2L−1
                // (mean L): a fixed trajectory length can be periodic for
                // some directions (e.g. ε·L ≈ π for a unit Gaussian maps x
                // to −x, so |x| never moves).
                let l = self.rng.random_range(1..=(2 * steps).max(2) - 1);
                hmc_transition(
                    target,
                    &self.state,
                    self.eps,
                    &self.inv_metric,
                    l,
                    &mut self.rng,
                )
            }
            Method::Mala => hmc_transition(
                target,
                &self.state,
                self.eps,
                &self.inv_metric,
                1,
                &mut self.rng,
            ),
        };
        self.state = next;
        let w = self.iter;
        self.iter += 1;
        if w < self.warmup_end {
            self.warmup_gradients += stats.n_leapfrog;
            self.eps = self.da.update(stats.accept_stat);
            if let Some(ga) = &mut self.grad_adapt {
                if let Some(m) = ga.update(w, &self.state.q, &self.state.grad) {
                    self.inv_metric = m;
                }
                self.warmup_end = ga.warmup_end();
                // The final phase tunes the step size to the final metric.
                if w + 1 == ga.final_start {
                    self.find_step_size(target);
                    self.da.restart(self.eps);
                }
            } else if self.dense.is_some() {
                // A dense metric adapts in `step`, which sees the target
                // through L.
            } else if self.schedule.metric && w >= self.schedule.start {
                self.var.add(&self.state.q);
                if self.schedule.ends.contains(&w) {
                    self.inv_metric = self.var.estimate();
                    self.var = Variance::new(self.state.q.len());
                    self.find_step_size(target);
                    self.da.restart(self.eps);
                }
            }
            if w + 1 == self.warmup_end {
                self.eps = self.da.final_step();
            }
            return None;
        }
        if stats.divergent {
            self.divergences += 1;
        }
        Some(Draw {
            q: self.state.q.clone(),
            lp: self.state.lp,
            score: self.state.grad.clone(),
            stats,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// N(0, diag(s²)) with very different scales.
    struct Gauss(Vec<f64>);
    impl Target for Gauss {
        fn dim(&self) -> usize {
            self.0.len()
        }
        fn logp_grad(&self, q: &[f64], g: &mut [f64]) -> Result<f64, Error> {
            let mut lp = 0.0;
            for i in 0..q.len() {
                let s2 = self.0[i] * self.0[i];
                lp -= 0.5 * q[i] * q[i] / s2;
                g[i] = -q[i] / s2;
            }
            Ok(lp)
        }
    }

    fn moments(method: Method) -> (Vec<f64>, Vec<f64>, f64) {
        let target = Gauss(vec![0.1, 1.0, 10.0]);
        let cfg = ChainConfig {
            method,
            warmup: 1000,
            draws: 4000,
            target_accept: 0.8,
            step_size: None,
            adaptation: Adaptation::Stan,
            early_stop: false,
        };
        let mut c = Chain::new(&target, 0, 42, cfg).unwrap();
        let mut draws = Vec::new();
        while !c.done() {
            if let Some(d) = c.step(&target) {
                draws.push(d);
            }
        }
        let n = draws.len() as f64;
        let mean: Vec<f64> = (0..3)
            .map(|i| draws.iter().map(|d| d.q[i]).sum::<f64>() / n)
            .collect();
        let sd: Vec<f64> = (0..3)
            .map(|i| {
                (draws
                    .iter()
                    .map(|d| (d.q[i] - mean[i]).powi(2))
                    .sum::<f64>()
                    / n)
                    .sqrt()
            })
            .collect();
        let acc = draws.iter().map(|d| d.stats.accept_stat).sum::<f64>() / n;
        (mean, sd, acc)
    }

    #[test]
    fn samplers_recover_an_ill_scaled_gaussian() {
        for method in [
            Method::Nuts { max_depth: 10 },
            Method::Hmc { steps: 10 },
            Method::Mala,
        ] {
            let (mean, sd, acc) = moments(method);
            let scales = [0.1, 1.0, 10.0];
            for i in 0..3 {
                let tol = if method == Method::Mala { 0.25 } else { 0.1 };
                assert!(
                    mean[i].abs() < tol * scales[i] * 3.0,
                    "{method:?} mean {i}: {}",
                    mean[i]
                );
                assert!(
                    (sd[i] / scales[i] - 1.0).abs() < tol,
                    "{method:?} sd {i}: {}",
                    sd[i]
                );
            }
            assert!(acc > 0.5, "{method:?} acceptance {acc}");
        }
    }

    #[test]
    fn chains_are_reproducible() {
        let target = Gauss(vec![1.0, 2.0]);
        let cfg = ChainConfig {
            method: Method::Nuts { max_depth: 10 },
            warmup: 100,
            draws: 50,
            target_accept: 0.8,
            step_size: None,
            adaptation: Adaptation::Stan,
            early_stop: false,
        };
        let run = || {
            let mut c = Chain::new(&target, 3, 7, cfg).unwrap();
            let mut out = Vec::new();
            while !c.done() {
                if let Some(d) = c.step(&target) {
                    out.extend(d.q);
                }
            }
            out
        };
        assert_eq!(run(), run());
        assert_ne!(chain_seed(7, 0), chain_seed(7, 1));
    }

    /// N(0, 2²) whose density "fails" (an error, as a failed Cholesky
    /// gives) or is NaN outside a region the sampler must reach.
    struct Failing;
    impl Target for Failing {
        fn dim(&self) -> usize {
            1
        }
        fn logp_grad(&self, q: &[f64], grad: &mut [f64]) -> Result<f64, Error> {
            if q[0] > 2.5 {
                return Err(Error::new(ErrorKind::Numerical, "not positive definite"));
            }
            if q[0] < -2.5 {
                grad[0] = f64::NAN;
                return Ok(f64::NAN);
            }
            grad[0] = -q[0] / 4.0;
            Ok(-q[0] * q[0] / 8.0)
        }
    }

    #[test]
    fn failed_and_non_finite_densities_are_divergences() {
        for method in [
            Method::Nuts { max_depth: 10 },
            Method::Hmc { steps: 10 },
            Method::Mala,
        ] {
            let cfg = ChainConfig {
                method,
                warmup: 300,
                draws: 1000,
                target_accept: 0.8,
                step_size: None,
                adaptation: Adaptation::Stan,
                early_stop: false,
            };
            let mut c = Chain::new(&Failing, 0, 5, cfg).unwrap();
            let mut kept = Vec::new();
            while !c.done() {
                kept.extend(c.step(&Failing));
            }
            assert_eq!(kept.len(), 1000);
            let divergent = kept.iter().filter(|d| d.stats.divergent).count();
            assert!(divergent > 0, "{method:?}: no divergences");
            assert_eq!(divergent, c.divergences);
            // Every kept draw is inside the region where the density exists.
            assert!(kept.iter().all(|d| d.q[0].abs() <= 2.5 && d.lp.is_finite()));
        }
    }
}
