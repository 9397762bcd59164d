//! What a run of the dense variational engines (`mirror_descent`,
//! `gradient_descent`) will cost, estimated before it starts.
//!
//! Every step works with dense N × N matrices for each of the C latent
//! GPs: factorisations, triangular solves with N right-hand sides and
//! products, each about N³ floating-point operations. Counted from the
//! steps' code (backtracking and rejected steps come on top):
//!
//! | engine, q | per step | with `learn_hypers = true` |
//! |---|---|---|
//! | `mirror_descent`, `sites` | 5⅓ C N³ | 16⅔ C N³ + ⅓ N³ |
//! | `gradient_descent`, `full_rank` | 6 C N³ | 17⅓ C N³ + 1⅓ N³ |
//! | `gradient_descent`, `mean_field` | 3 C N³ | 9 C N³ + 1⅓ N³ |
//!
//! plus, when hypers are learned, the kernel's derivatives at every pair
//! of points (N² entries per eight hypers). The operations are turned into
//! seconds with this machine's speed at the same dense products, measured
//! once per process (a few milliseconds). The estimate is a guide, not a
//! promise: within a factor of two or so.

use super::model::ViModel;
use super::settings::ViSettings;
use crate::error::{Error, ErrorKind};
use std::sync::OnceLock;
use tempest_infer::settings::EngineConfig;

/// Above this many seconds for the whole run, the run warns before it
/// starts (and its report keeps the warning).
pub const WARN_SECONDS: f64 = 60.0;

/// How a dense variational engine moves q, for its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    /// `mirror_descent` on sites.
    Mirror,
    /// `gradient_descent` on a full-rank q.
    FullRank,
    /// `gradient_descent` on a mean-field q.
    MeanField,
}

/// The estimated cost of a run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Cost {
    /// The engine's name.
    pub engine: &'static str,
    /// Training points N.
    pub n: usize,
    /// Latent GPs C.
    pub latents: usize,
    /// Whether the hypers are learned.
    pub learn_hypers: bool,
    /// Floating-point operations per step.
    pub flops_per_step: f64,
    /// Steps at most (the `steps` setting).
    pub steps: usize,
    /// This machine's speed at dense products, operations per second.
    pub flops_per_second: f64,
}

impl Cost {
    /// Seconds per step.
    pub fn seconds_per_step(&self) -> f64 {
        self.flops_per_step / self.flops_per_second
    }

    /// Seconds for every step.
    pub fn seconds(&self) -> f64 {
        self.seconds_per_step() * self.steps as f64
    }

    /// What the run is and what it costs, in words: `mirror_descent with
    /// learn_hypers = true on N = 2400 points: about 2.3e11 floating-point
    /// operations a step, roughly 20 s a step on this machine and 17 min
    /// for steps = 50`.
    pub fn words(&self) -> String {
        let classes = if self.latents > 1 {
            format!(" and {} latent GPs", self.latents)
        } else {
            String::new()
        };
        format!(
            "{} with learn_hypers = {} on N = {} points{classes}: about {:.1e} floating-point operations a step (dense N × N factorisations and products), roughly {} a step on this machine and {} for steps = {}",
            self.engine,
            self.learn_hypers,
            self.n,
            self.flops_per_step,
            duration(self.seconds_per_step()),
            duration(self.seconds()),
            self.steps
        )
    }

    /// The warning a long run gives before it starts (`None` under
    /// [`WARN_SECONDS`]).
    pub fn warning(&self) -> Option<String> {
        (self.seconds() > WARN_SECONDS).then(|| {
            format!(
                "{}; the `svi` engine (inducing points and minibatches) costs O(N M²) a step and fits N = {} points far faster: `--engine svi`",
                self.words(),
                self.n
            )
        })
    }
}

/// A duration in words: `0.4 s`, `20 s`, `17 min`, `2.5 h`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() {
        "forever".to_string()
    } else if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// Floating-point operations of one step for N points, C latent GPs, P
/// learned hypers and D input columns (the table in the module's doc).
pub fn flops_per_step(steps: Steps, n: usize, c: usize, p: usize, d: usize) -> f64 {
    let (n, c) = (n as f64, c as f64);
    let n3 = n * n * n;
    let (base, hypers, shared) = match steps {
        Steps::Mirror => (16.0 / 3.0, 34.0 / 3.0, 1.0 / 3.0),
        Steps::FullRank => (6.0, 34.0 / 3.0, 4.0 / 3.0),
        Steps::MeanField => (3.0, 6.0, 4.0 / 3.0),
    };
    let mut f = base * c * n3;
    if p > 0 {
        // The kernel's derivatives: N² entries per chunk of eight hypers,
        // each about 30 (D + 5) operations in eight-lane duals.
        let chunks = p.div_ceil(8) as f64;
        f += hypers * c * n3 + shared * n3 + n * n * chunks * 30.0 * (d as f64 + 5.0);
    }
    f
}

/// This machine's speed at the dense products of a step, operations per
/// second: the best of three products of 256 × 256 matrices, measured
/// once per process.
pub fn flops_per_second() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let n = 256;
        let a = nalgebra::DMatrix::from_fn(n, n, |i, j| ((i * 7 + j * 13) % 17) as f64 / 17.0);
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let c = crate::math::linalg::matmul(&a, false, &a, true);
            std::hint::black_box(&c);
            best = best.min(t.elapsed().as_secs_f64());
        }
        let rate = 2.0 * (n * n * n) as f64 / best.max(1e-9);
        // A clock too coarse to time it: assume a fast machine.
        if rate.is_finite() { rate } else { 1e11 }
    })
}

/// The cost of running `model` with settings `s`.
pub fn estimate(model: &ViModel, s: &ViSettings, engine: &'static str, steps: Steps) -> Cost {
    Cost {
        engine,
        n: model.inputs.len(),
        latents: model.latents,
        learn_hypers: model.layout.len > 0,
        flops_per_step: flops_per_step(
            steps,
            model.inputs.len(),
            model.latents,
            model.layout.len,
            model.inputs.dim(),
        ),
        steps: s.steps,
        flops_per_second: flops_per_second(),
    }
}

/// Refuse a run estimated to take longer than the `max_minutes` setting
/// (0: no limit), before anything is computed; the estimate otherwise.
/// The error points at the engine in the model file when it is written
/// there.
pub fn check(
    model: &ViModel,
    s: &ViSettings,
    cfg: &EngineConfig,
    engine: &'static str,
    steps: Steps,
) -> Result<Cost, Error> {
    let cost = estimate(model, s, engine, steps);
    if s.max_minutes > 0.0 && cost.seconds() > 60.0 * s.max_minutes {
        let mut e = Error::new(
            ErrorKind::Settings,
            format!(
                "{}: more than max_minutes = {}",
                cost.words(),
                crate::error::num(s.max_minutes)
            ),
        )
        .with_note(format!(
            "the `svi` engine (inducing points and minibatches) costs O(N M²) a step and fits N = {} points far faster: `--engine svi`",
            cost.n
        ))
        .with_note(
            "to run it anyway, raise the bound, e.g. `--set max_minutes=600`, or lift it with `--set max_minutes=0`",
        );
        if cfg.span.end > 0 {
            e = e.with_span(cfg.span).with_label("this engine");
        }
        return Err(e);
    }
    Ok(cost)
}
