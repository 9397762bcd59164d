//! L-BFGS minimisation with a bounded strong-Wolfe line search that treats
//! a failed or non-finite evaluation as a rejected trial point.
//!
//! The two-loop recursion gives the direction d = −H g from the last
//! `memory` pairs (s, y), with H₀ = (sᵀy / yᵀy) I (Nocedal & Wright,
//! *Numerical Optimization*, Alg. 7.4). A pair enters the memory only when
//! sᵀy > 0 (curvature condition), so H stays positive definite; a direction
//! that is not a descent direction resets the memory to steepest descent.
//! The line search brackets and zooms (Alg. 3.5 and 3.6) with safeguarded
//! cubic interpolation, at most [`MAX_LINE_EVALS`] evaluations per
//! iteration. A trial point whose value or gradient is not finite (or
//! whose evaluation fails) counts as too far: the step shrinks towards the
//! last good point. Every loop here is bounded.

use std::collections::VecDeque;

/// The most objective evaluations one line search may use.
pub const MAX_LINE_EVALS: usize = 30;

/// Sufficient-decrease constant c₁ of the Wolfe conditions.
const C1: f64 = 1e-4;
/// Curvature constant c₂ of the Wolfe conditions.
const C2: f64 = 0.9;
/// Relative differences in the objective below this are rounding (a log
/// marginal likelihood of a few hundred points carries rounding errors of
/// about 1e-10 of its size, from the log-determinant).
const FLAT: f64 = 1e-9;
/// Trials within rounding of the start after which a search gives up.
const FLAT_TRIALS: usize = 3;
/// The largest step a bracketing phase may reach.
const MAX_STEP: f64 = 1e10;

/// An objective: the value and gradient at x, or `None` when they cannot
/// be computed (or are not finite) there.
pub type Objective<'a> = dyn FnMut(&[f64]) -> Option<(f64, Vec<f64>)> + 'a;

/// What one iteration did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// x moved to a point with a lower value.
    Improved,
    /// No step along the direction lowered the value; the reason, in words.
    NoProgress(String),
    /// Every trial point's value differed from the current one only by
    /// rounding: the objective is flat here at the precision it is
    /// computed with (a minimum, to that precision).
    Flat,
}

/// How a line search ended.
enum Search {
    /// A step and the value and gradient there.
    Step(f64, f64, Vec<f64>),
    /// Trials within rounding of the start value only.
    Flat,
    /// No trial lowered the value.
    Failed,
}

/// The state of an L-BFGS minimisation.
#[derive(Clone, Debug)]
pub struct Lbfgs {
    memory: usize,
    s: VecDeque<Vec<f64>>,
    y: VecDeque<Vec<f64>>,
    /// The current point.
    pub x: Vec<f64>,
    /// The value at x.
    pub f: f64,
    /// The gradient at x.
    pub g: Vec<f64>,
    /// Objective evaluations so far (not counting the first).
    pub evals: usize,
    /// Trial points rejected because the objective failed or was not finite.
    pub rejected: usize,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The Euclidean norm, scaled so that it does not overflow while every
/// entry is finite (entries of 1e200 have a norm, not ∞).
fn norm(a: &[f64]) -> f64 {
    let big = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if big == 0.0 || !big.is_finite() {
        return big;
    }
    big * a.iter().map(|v| (v / big).powi(2)).sum::<f64>().sqrt()
}

/// A point on the line: step a, value f, directional derivative dg.
#[derive(Clone, Copy, Debug)]
struct Point {
    a: f64,
    f: f64,
    dg: f64,
}

impl Lbfgs {
    /// Start at `x` with value `f` and gradient `g` (all finite), keeping
    /// `memory` correction pairs.
    pub fn new(x: Vec<f64>, f: f64, g: Vec<f64>, memory: usize) -> Lbfgs {
        Lbfgs {
            memory: memory.max(1),
            s: VecDeque::new(),
            y: VecDeque::new(),
            x,
            f,
            g,
            evals: 0,
            rejected: 0,
        }
    }

    /// The Euclidean norm of the current gradient.
    pub fn grad_norm(&self) -> f64 {
        norm(&self.g)
    }

    /// −H g by the two-loop recursion.
    fn direction(&self) -> Vec<f64> {
        let k = self.s.len();
        let mut q = self.g.clone();
        let mut alpha = vec![0.0; k];
        for i in (0..k).rev() {
            let rho = 1.0 / dot(&self.y[i], &self.s[i]);
            alpha[i] = rho * dot(&self.s[i], &q);
            for (qj, yj) in q.iter_mut().zip(&self.y[i]) {
                *qj -= alpha[i] * yj;
            }
        }
        let gamma = match (self.s.back(), self.y.back()) {
            (Some(s), Some(y)) => dot(s, y) / norm(y) / norm(y),
            _ => 1.0,
        };
        for qj in q.iter_mut() {
            *qj *= gamma;
        }
        for ((s, y), a) in self.s.iter().zip(&self.y).zip(&alpha) {
            let rho = 1.0 / dot(y, s);
            let beta = rho * dot(y, &q);
            for (qj, sj) in q.iter_mut().zip(s) {
                *qj += (a - beta) * sj;
            }
        }
        q.iter().map(|v| -v).collect()
    }

    /// One iteration: a direction, a line search along it, and the memory
    /// update. A direction that finds no lower value (or only values
    /// within rounding) is retried once as steepest descent with the memory
    /// cleared.
    pub fn iterate(&mut self, obj: &mut Objective) -> Outcome {
        // The search runs along a unit vector u with step lengths in units
        // of x, so that slopes stay finite however large the gradient.
        let steepest = |g: &[f64]| -> (Vec<f64>, f64) {
            let n = norm(g);
            (g.iter().map(|v| -v / n).collect(), n)
        };
        let (mut u, mut dnorm) = {
            let d = self.direction();
            let n = norm(&d);
            (d.iter().map(|v| v / n).collect::<Vec<f64>>(), n)
        };
        let descent = |u: &[f64], g: &[f64]| {
            let dg = dot(g, u);
            dg < 0.0 && dg.is_finite()
        };
        if !(dnorm > 0.0 && dnorm.is_finite() && descent(&u, &self.g)) {
            self.clear();
            (u, dnorm) = steepest(&self.g);
        }
        if !(dnorm > 0.0 && dnorm.is_finite() && descent(&u, &self.g)) {
            return Outcome::NoProgress("the gradient is zero or not finite".into());
        }
        loop {
            let first = self.s.is_empty();
            // Quasi-Newton steps are already scaled (try the full step);
            // steepest-descent steps start at most one unit long in x.
            let a0 = if first { dnorm.min(1.0) } else { dnorm };
            let dg0 = dot(&self.g, &u);
            match self.line_search(obj, &u, dg0, a0) {
                Search::Step(a, f, g) => {
                    let s: Vec<f64> = u.iter().map(|v| a * v).collect();
                    let y: Vec<f64> = g.iter().zip(&self.g).map(|(a, b)| a - b).collect();
                    let sy = dot(&s, &y);
                    if sy > 1e-12 * norm(&s) * norm(&y) && sy.is_finite() {
                        if self.s.len() == self.memory {
                            self.s.pop_front();
                            self.y.pop_front();
                        }
                        self.s.push_back(s.clone());
                        self.y.push_back(y);
                    }
                    for (xi, si) in self.x.iter_mut().zip(&s) {
                        *xi += si;
                    }
                    self.f = f;
                    self.g = g;
                    return Outcome::Improved;
                }
                Search::Failed | Search::Flat if !first => {
                    self.clear();
                    (u, dnorm) = steepest(&self.g);
                }
                Search::Flat => return Outcome::Flat,
                Search::Failed => {
                    return Outcome::NoProgress(format!(
                        "no step along the steepest-descent direction lowers the objective ({} evaluations in the last line search{})",
                        MAX_LINE_EVALS,
                        if self.rejected > 0 {
                            format!(
                                ", {} trial points rejected as not finite so far",
                                self.rejected
                            )
                        } else {
                            String::new()
                        }
                    ));
                }
            }
        }
    }

    /// Forget the correction pairs.
    fn clear(&mut self) {
        self.s.clear();
        self.y.clear();
    }

    /// A step a > 0 along `d` meeting the strong Wolfe conditions, or else
    /// the lowest point found that meets sufficient decrease; `Flat` when
    /// [`FLAT_TRIALS`] trials came within rounding of the start and none
    /// lowered the value by more; `Failed` when no trial point lowered it.
    fn line_search(&mut self, obj: &mut Objective, d: &[f64], dg0: f64, a0: f64) -> Search {
        let f0 = self.f;
        let mut lo = Point {
            a: 0.0,
            f: f0,
            dg: dg0,
        };
        let mut hi: Option<Point> = None;
        let mut best: Option<(f64, f64, Vec<f64>)> = None;
        let mut a = a0;
        let mut trial = vec![0.0; d.len()];
        // Trials whose value differs from f(x) only by rounding: after a
        // few of them the objective is flat at this resolution and the
        // search stops instead of spending its whole budget.
        let mut flat = 0;
        for _ in 0..MAX_LINE_EVALS {
            for ((t, x), di) in trial.iter_mut().zip(&self.x).zip(d) {
                *t = x + a * di;
            }
            self.evals += 1;
            let value =
                obj(&trial).filter(|(f, g)| f.is_finite() && g.iter().all(|v| v.is_finite()));
            match value {
                None => {
                    self.rejected += 1;
                    hi = Some(Point {
                        a,
                        f: f64::INFINITY,
                        dg: f64::NAN,
                    });
                }
                Some((f, g)) => {
                    let rounding = FLAT * f0.abs().max(1.0);
                    if (f - f0).abs() <= rounding {
                        flat += 1;
                        if flat >= FLAT_TRIALS {
                            return match best {
                                Some((a, fb, gb)) if f0 - fb > rounding => Search::Step(a, fb, gb),
                                _ => Search::Flat,
                            };
                        }
                    }
                    let dg = dot(&g, d);
                    if f > f0 + C1 * a * dg0 || f >= lo.f {
                        hi = Some(Point { a, f, dg });
                    } else {
                        if dg.abs() <= -C2 * dg0 {
                            return Search::Step(a, f, g);
                        }
                        if best.as_ref().is_none_or(|b| f < b.1) {
                            best = Some((a, f, g));
                        }
                        let beyond = match hi {
                            Some(h) => dg * (h.a - lo.a) >= 0.0,
                            None => dg >= 0.0,
                        };
                        if beyond {
                            hi = Some(lo);
                        }
                        lo = Point { a, f, dg };
                    }
                }
            }
            a = match hi {
                None => {
                    if a >= MAX_STEP {
                        break;
                    }
                    (2.0 * a).min(MAX_STEP)
                }
                Some(h) => {
                    let w = (h.a - lo.a).abs();
                    if w <= 1e-16 * lo.a.abs().max(1e-300) || w == 0.0 {
                        break;
                    }
                    interpolate(lo, h)
                }
            };
        }
        match best {
            Some((a, f, g)) => Search::Step(a, f, g),
            None => Search::Failed,
        }
    }
}

/// The next trial step between `lo` (the best point so far) and `hi`:
/// the minimiser of the cubic through both (value and slope), or of the
/// quadratic when `hi`'s slope is unknown, kept at least a tenth of the
/// interval from either end; a tenth of the way from `lo` when `hi` could
/// not be evaluated.
fn interpolate(lo: Point, hi: Point) -> f64 {
    let (a, b) = (lo.a.min(hi.a), lo.a.max(hi.a));
    let w = b - a;
    let safe = |t: f64| {
        if t.is_finite() {
            t.clamp(a + 0.1 * w, b - 0.1 * w)
        } else {
            0.5 * (a + b)
        }
    };
    if !hi.f.is_finite() {
        return lo.a + 0.1 * (hi.a - lo.a);
    }
    let h = hi.a - lo.a;
    if hi.dg.is_finite() {
        let d1 = lo.dg + hi.dg - 3.0 * (lo.f - hi.f) / (lo.a - hi.a);
        let disc = d1 * d1 - lo.dg * hi.dg;
        if disc >= 0.0 {
            let d2 = h.signum() * disc.sqrt();
            let t = hi.a - h * (hi.dg + d2 - d1) / (hi.dg - lo.dg + 2.0 * d2);
            return safe(t);
        }
    }
    let denom = 2.0 * (hi.f - lo.f - lo.dg * h);
    safe(lo.a - lo.dg * h * h / denom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(x0: Vec<f64>, f: &mut Objective, iters: usize) -> Lbfgs {
        let (f0, g0) = f(&x0).unwrap();
        let mut opt = Lbfgs::new(x0, f0, g0, 10);
        for _ in 0..iters {
            if opt.grad_norm() < 1e-10 {
                break;
            }
            if let Outcome::NoProgress(_) = opt.iterate(f) {
                break;
            }
        }
        opt
    }

    #[test]
    fn minimises_rosenbrock() {
        let mut f = |x: &[f64]| {
            let (a, b) = (x[0], x[1]);
            let v = (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2);
            let g = vec![
                -2.0 * (1.0 - a) - 400.0 * a * (b - a * a),
                200.0 * (b - a * a),
            ];
            Some((v, g))
        };
        let opt = run(vec![-1.2, 1.0], &mut f, 200);
        assert!(
            (opt.x[0] - 1.0).abs() < 1e-6 && (opt.x[1] - 1.0).abs() < 1e-6,
            "{:?}",
            opt.x
        );
    }

    #[test]
    fn an_ill_conditioned_quadratic_converges() {
        let scales = [1e-3, 1.0, 1e3, 1e4];
        let mut f = |x: &[f64]| {
            let v: f64 = x
                .iter()
                .zip(&scales)
                .map(|(x, s)| 0.5 * s * (x - 1.0).powi(2))
                .sum();
            let g = x.iter().zip(&scales).map(|(x, s)| s * (x - 1.0)).collect();
            Some((v, g))
        };
        let opt = run(vec![0.0; 4], &mut f, 200);
        for x in &opt.x {
            assert!((x - 1.0).abs() < 1e-5, "{:?}", opt.x);
        }
    }

    #[test]
    fn non_finite_regions_are_rejected_steps() {
        // f = log(1 + (x − 3)²) for x < 3.5, not computable beyond: from
        // the flat tail the line search expands its step into the bad
        // region and must come back.
        let mut f = |x: &[f64]| {
            if x[0] >= 3.5 {
                return None;
            }
            let d = x[0] - 3.0;
            Some(((1.0 + d * d).ln(), vec![2.0 * d / (1.0 + d * d)]))
        };
        let (f0, g0) = f(&[-100.0]).unwrap();
        let mut opt = Lbfgs::new(vec![-100.0], f0, g0, 5);
        for _ in 0..50 {
            if opt.grad_norm() < 1e-9 {
                break;
            }
            assert_eq!(opt.iterate(&mut f), Outcome::Improved);
        }
        assert!((opt.x[0] - 3.0).abs() < 1e-6, "{:?}", opt.x);
        assert!(opt.rejected > 0);
    }

    #[test]
    fn an_objective_that_is_never_finite_away_from_the_start_stops() {
        let mut calls = 0;
        let mut f = |x: &[f64]| {
            calls += 1;
            if x[0] == 0.0 {
                Some((0.0, vec![1.0]))
            } else {
                Some((f64::NAN, vec![f64::NAN]))
            }
        };
        let mut opt = Lbfgs::new(vec![0.0], 0.0, vec![1.0], 5);
        assert!(matches!(opt.iterate(&mut f), Outcome::NoProgress(_)));
        assert!(calls <= MAX_LINE_EVALS);
        assert_eq!(opt.x, vec![0.0]);
    }

    #[test]
    fn a_flat_objective_reports_a_zero_gradient() {
        let mut f = |_: &[f64]| Some((1.0, vec![0.0, 0.0]));
        let mut opt = Lbfgs::new(vec![1.0, 2.0], 1.0, vec![0.0, 0.0], 5);
        assert!(matches!(opt.iterate(&mut f), Outcome::NoProgress(_)));
    }
}
