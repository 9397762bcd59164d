//! Hamiltonian dynamics with a diagonal metric, and the three transitions:
//! the No-U-Turn sampler with multinomial sampling along the trajectory and
//! the generalised no-U-turn criterion (as Stan's `base_nuts`), static HMC
//! with a fixed number of leapfrog steps, and MALA (one leapfrog step with a
//! Metropolis correction, which is the Langevin proposal).
//!
//! H(q, p) = −log π(q) + ½ Σᵢ pᵢ² M⁻¹ᵢ with p ~ N(0, M). A non-finite log
//! density, or an energy error above 1000, ends the trajectory as a
//! divergence; it is counted, never a crash.

use crate::error::Error;
use rand::RngExt;
use rand::rngs::StdRng;
use rand_distr::StandardNormal;

/// What the sampler needs from a model.
pub trait Target: Sync {
    /// The dimension.
    fn dim(&self) -> usize;
    /// log π(q) and its gradient (into `grad`).
    fn logp_grad(&self, q: &[f64], grad: &mut [f64]) -> Result<f64, Error>;
}

/// A point in phase space with its log density and gradient.
#[derive(Clone, Debug)]
pub struct State {
    /// Position.
    pub q: Vec<f64>,
    /// Momentum.
    pub p: Vec<f64>,
    /// log π(q).
    pub lp: f64,
    /// ∇ log π(q).
    pub grad: Vec<f64>,
}

impl State {
    /// A state at q (momentum zero); `Err` when the density fails there.
    pub fn at<T: Target + ?Sized>(target: &T, q: Vec<f64>) -> Result<State, Error> {
        let mut grad = vec![0.0; q.len()];
        let lp = target.logp_grad(&q, &mut grad)?;
        Ok(State {
            p: vec![0.0; q.len()],
            q,
            lp,
            grad,
        })
    }
    /// H = −log π + ½ pᵀM⁻¹p.
    pub fn energy(&self, inv_metric: &[f64]) -> f64 {
        -self.lp
            + 0.5
                * self
                    .p
                    .iter()
                    .zip(inv_metric)
                    .map(|(p, m)| p * p * m)
                    .sum::<f64>()
    }
}

/// One leapfrog step of size `eps` (negative goes backwards). A failed
/// density evaluation leaves lp = −∞.
pub fn leapfrog<T: Target + ?Sized>(target: &T, s: &mut State, eps: f64, inv_metric: &[f64]) {
    for (((q, p), g), m) in s.q.iter_mut().zip(&mut s.p).zip(&s.grad).zip(inv_metric) {
        *p += 0.5 * eps * g;
        *q += eps * m * *p;
    }
    match target.logp_grad(&s.q, &mut s.grad) {
        Ok(lp) if lp.is_finite() && s.grad.iter().all(|g| g.is_finite()) => {
            s.lp = lp;
            for (p, g) in s.p.iter_mut().zip(&s.grad) {
                *p += 0.5 * eps * g;
            }
        }
        _ => s.lp = f64::NEG_INFINITY,
    }
}

/// Draw p ~ N(0, M).
pub fn refresh_momentum(s: &mut State, inv_metric: &[f64], rng: &mut StdRng) {
    for (p, m) in s.p.iter_mut().zip(inv_metric) {
        let z: f64 = rng.sample(StandardNormal);
        *p = z / m.sqrt();
    }
}

/// Sampler statistics of one transition (Stan's `__` columns).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// The acceptance statistic.
    pub accept_stat: f64,
    /// The step size used.
    pub step_size: f64,
    /// Tree depth (NUTS; 0 otherwise).
    pub tree_depth: usize,
    /// Leapfrog steps taken.
    pub n_leapfrog: usize,
    /// Whether the trajectory diverged.
    pub divergent: bool,
    /// The Hamiltonian at the returned point (Stan's `energy__`).
    pub energy: f64,
}

const MAX_DELTA_H: f64 = 1000.0;

fn log_add(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

fn sharp(p: &[f64], inv_metric: &[f64]) -> Vec<f64> {
    p.iter().zip(inv_metric).map(|(p, m)| p * m).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// The generalised no-U-turn criterion.
fn criterion(p_sharp_minus: &[f64], p_sharp_plus: &[f64], rho: &[f64]) -> bool {
    dot(p_sharp_plus, rho) > 0.0 && dot(p_sharp_minus, rho) > 0.0
}

/// The No-U-Turn sampler's working state for one transition.
struct Nuts<'a, T: Target + ?Sized> {
    target: &'a T,
    inv_metric: &'a [f64],
    eps: f64,
    h0: f64,
    rng: &'a mut StdRng,
    n_leapfrog: usize,
    sum_metro: f64,
    divergent: bool,
}

/// The ends of a subtree: momenta and sharp momenta at both ends, rho (sum
/// of momenta), the multinomial proposal and its log weight.
struct Tree {
    p_beg: Vec<f64>,
    p_end: Vec<f64>,
    ps_beg: Vec<f64>,
    ps_end: Vec<f64>,
    rho: Vec<f64>,
    propose: State,
    log_w: f64,
}

impl<T: Target + ?Sized> Nuts<'_, T> {
    /// Extend from `z` (moved along) by 2^depth leapfrog steps in direction
    /// `sign`; `None` when the subtree is invalid (divergence or U-turn).
    fn build(&mut self, z: &mut State, depth: usize, sign: f64) -> Option<Tree> {
        if depth == 0 {
            leapfrog(self.target, z, sign * self.eps, self.inv_metric);
            self.n_leapfrog += 1;
            let h = z.energy(self.inv_metric);
            let h = if h.is_nan() { f64::INFINITY } else { h };
            if h - self.h0 > MAX_DELTA_H {
                self.divergent = true;
            }
            let dh = self.h0 - h;
            self.sum_metro += if dh > 0.0 { 1.0 } else { dh.exp() };
            if self.divergent {
                return None;
            }
            let ps = sharp(&z.p, self.inv_metric);
            return Some(Tree {
                p_beg: z.p.clone(),
                p_end: z.p.clone(),
                ps_beg: ps.clone(),
                ps_end: ps,
                rho: z.p.clone(),
                propose: z.clone(),
                log_w: dh,
            });
        }
        let init = self.build(z, depth - 1, sign)?;
        let fin = self.build(z, depth - 1, sign)?;
        let log_w = log_add(init.log_w, fin.log_w);
        let propose = if fin.log_w > log_w || self.rng.random::<f64>() < (fin.log_w - log_w).exp() {
            fin.propose
        } else {
            init.propose
        };
        let rho = add(&init.rho, &fin.rho);
        let mut persist = criterion(&init.ps_beg, &fin.ps_end, &rho);
        persist &= criterion(&init.ps_beg, &fin.ps_beg, &add(&init.rho, &fin.p_beg));
        persist &= criterion(&init.ps_end, &fin.ps_end, &add(&fin.rho, &init.p_end));
        if !persist {
            return None;
        }
        Some(Tree {
            p_beg: init.p_beg,
            p_end: fin.p_end,
            ps_beg: init.ps_beg,
            ps_end: fin.ps_end,
            rho,
            propose,
            log_w,
        })
    }
}

/// One NUTS transition from `current` (its momentum is redrawn).
pub fn nuts_transition<T: Target + ?Sized>(
    target: &T,
    current: &State,
    eps: f64,
    inv_metric: &[f64],
    max_depth: usize,
    rng: &mut StdRng,
) -> (State, Stats) {
    let mut z0 = current.clone();
    refresh_momentum(&mut z0, inv_metric, rng);
    let h0 = z0.energy(inv_metric);
    let ps0 = sharp(&z0.p, inv_metric);
    // The two ends of the whole trajectory.
    let mut fwd = z0.clone();
    let mut bck = z0.clone();
    let (mut p_fwd, mut ps_fwd, mut p_bck, mut ps_bck) =
        (z0.p.clone(), ps0.clone(), z0.p.clone(), ps0);
    let mut rho = z0.p.clone();
    let mut sample = z0.clone();
    let mut log_w = 0.0;
    let mut depth = 0;
    let mut nuts = Nuts {
        target,
        inv_metric,
        eps,
        h0,
        rng,
        n_leapfrog: 0,
        sum_metro: 0.0,
        divergent: false,
    };
    while depth < max_depth {
        let forward = nuts.rng.random::<f64>() > 0.5;
        let sub = if forward {
            nuts.build(&mut fwd, depth, 1.0)
        } else {
            nuts.build(&mut bck, depth, -1.0)
        };
        let Some(sub) = sub else { break };
        depth += 1;
        if sub.log_w > log_w || nuts.rng.random::<f64>() < (sub.log_w - log_w).exp() {
            sample = sub.propose.clone();
        }
        log_w = log_add(log_w, sub.log_w);
        // Merge: the old trajectory and the new subtree, in trajectory order.
        let (beg_ps, beg_p_end, end_ps, end_p_beg, rho_old);
        rho_old = rho.clone();
        if forward {
            rho = add(&rho, &sub.rho);
            beg_ps = ps_bck.clone();
            beg_p_end = p_fwd.clone();
            end_ps = sub.ps_end.clone();
            end_p_beg = sub.p_beg.clone();
            let ok = criterion(&beg_ps, &end_ps, &rho)
                && criterion(&beg_ps, &sub.ps_beg, &add(&rho_old, &end_p_beg))
                && criterion(&ps_fwd, &end_ps, &add(&sub.rho, &beg_p_end));
            p_fwd = sub.p_end;
            ps_fwd = sub.ps_end;
            if !ok {
                break;
            }
        } else {
            rho = add(&rho, &sub.rho);
            // The new subtree runs backwards: its end is the trajectory's start.
            let ok = criterion(&sub.ps_end, &ps_fwd, &rho)
                && criterion(&sub.ps_end, &ps_bck, &add(&sub.rho, &p_bck))
                && criterion(&sub.ps_beg, &ps_fwd, &add(&rho_old, &sub.p_beg));
            p_bck = sub.p_end;
            ps_bck = sub.ps_end;
            if !ok {
                break;
            }
        }
    }
    let n = nuts.n_leapfrog.max(1);
    let stats = Stats {
        accept_stat: nuts.sum_metro / n as f64,
        step_size: eps,
        tree_depth: depth,
        n_leapfrog: nuts.n_leapfrog,
        divergent: nuts.divergent,
        // As Stan: the Hamiltonian at the chosen point (with its momentum).
        energy: sample.energy(inv_metric),
    };
    (sample, stats)
}

/// One static-HMC transition with `steps` leapfrog steps (`steps = 1` is MALA).
pub fn hmc_transition<T: Target + ?Sized>(
    target: &T,
    current: &State,
    eps: f64,
    inv_metric: &[f64],
    steps: usize,
    rng: &mut StdRng,
) -> (State, Stats) {
    let mut z = current.clone();
    refresh_momentum(&mut z, inv_metric, rng);
    let h0 = z.energy(inv_metric);
    let mut divergent = false;
    for _ in 0..steps {
        leapfrog(target, &mut z, eps, inv_metric);
        if !z.lp.is_finite() {
            divergent = true;
            break;
        }
    }
    let h = z.energy(inv_metric);
    let dh = if divergent || h.is_nan() {
        f64::NEG_INFINITY
    } else {
        h0 - h
    };
    if dh < -MAX_DELTA_H {
        divergent = true;
    }
    let accept = dh.min(0.0).exp();
    let stats = Stats {
        accept_stat: accept,
        step_size: eps,
        tree_depth: 0,
        n_leapfrog: steps,
        divergent,
        energy: h0,
    };
    // As Stan: energy__ is the Hamiltonian at the returned point, with the
    // refreshed momentum when the proposal is rejected.
    if rng.random::<f64>() < accept {
        (z, Stats { energy: h, ..stats })
    } else {
        (current.clone(), stats)
    }
}
