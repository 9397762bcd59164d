//! Ordinary differential equations dx/dt = f(t, x): the adaptive explicit
//! Dormand–Prince 5(4) Runge–Kutta method (Hairer, Nørsett & Wanner,
//! *Solving ODEs I*, §II.4–5), generic over the scalar type.
//!
//! The step-size control reads only the `f64` part of the state, so with
//! dual numbers the solver takes exactly the steps of the `f64` run and the
//! tangents are the forward sensitivities ∂x(tᵢ)/∂θ of the discrete
//! solution (discretise, then differentiate): exact derivatives of the
//! value that is reported, whatever the tolerances.
//!
//! Each step is bounded: the run stops with an error when it has attempted
//! `max_steps` steps, when the step size falls below the resolution of the
//! time axis (a stiff system or a solution that blows up), or when an
//! accepted state is not finite. A rejected step (its error estimate above
//! the tolerance, or not a number) shrinks the step and is retried.

pub mod adjoint;

pub use adjoint::{Trajectory, Vjp, adjoint};

use crate::scalar::Real;
use tempest_core::error::num;
use tempest_core::interrupt::StopFlag;

/// Tolerances and the step limit of one solve.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OdeSettings {
    /// Relative tolerance of each step's local error.
    pub rtol: f64,
    /// Absolute tolerance of each step's local error.
    pub atol: f64,
    /// The most steps (accepted and rejected) one solve may attempt.
    pub max_steps: usize,
    /// How a gradient through the solve is taken.
    pub sensitivity: Sensitivity,
}

/// How the derivatives of a solve in its initial state and parameters are
/// taken where a reverse pass needs them (the samplers' gradient).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Sensitivity {
    /// The adjoint from [`ADJOINT_FROM`] varying numbers up, when the
    /// system is compiled and its record fits in memory; forward below.
    #[default]
    Auto,
    /// Forward sensitivities: one solve in dual numbers, one tangent per
    /// varying number (up to eight per solve).
    Forward,
    /// The discrete adjoint ([`adjoint::adjoint`]): one solve in `f64`
    /// and one backward sweep, whatever the number of varying numbers
    /// (forward where the system is not compiled).
    Adjoint,
}

impl Sensitivity {
    /// Every choice, with the name a model file writes for it.
    pub const NAMES: [(&'static str, Sensitivity); 3] = [
        ("auto", Sensitivity::Auto),
        ("forward", Sensitivity::Forward),
        ("adjoint", Sensitivity::Adjoint),
    ];

    /// The choice a model file names `name` (`auto`, `forward`, `adjoint`).
    pub fn from_name(name: &str) -> Option<Sensitivity> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
    }

    /// The name a model file writes for this choice.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("auto", |(n, _)| n)
    }
}

/// The number of varying numbers (initial state and parameters) from
/// which [`Sensitivity::Auto`] takes the adjoint (benches/README.md, "ODE
/// gradients: forward or adjoint").
pub const ADJOINT_FROM: usize = 2;

impl Default for OdeSettings {
    fn default() -> Self {
        OdeSettings {
            rtol: 1e-6,
            atol: 1e-6,
            max_steps: 100_000,
            sensitivity: Sensitivity::Auto,
        }
    }
}

/// Why a solve stopped.
#[derive(Clone, Debug, PartialEq)]
pub enum OdeFailure {
    /// `max_steps` steps were attempted before reaching `t_end`.
    Steps {
        /// Where the solve stood.
        t: f64,
        /// The output time it was heading for.
        t_end: f64,
        /// The step limit.
        max_steps: usize,
        /// Of the steps attempted, those shortened to land on an output
        /// time (each output time after t0 costs at least one).
        at_times: usize,
        /// Of the steps attempted, those rejected (error above tolerance).
        rejected: usize,
    },
    /// The output times alone need more steps than the limit allows: each
    /// distinct output time after t0 ends at least one step. Found before
    /// the first step.
    Times {
        /// Distinct output times after t0.
        times: usize,
        /// The step limit.
        max_steps: usize,
    },
    /// The run was asked to stop (Ctrl-C, SIGTERM) at t.
    Interrupted {
        /// Where the solve stood.
        t: f64,
    },
    /// The step size fell below the resolution of the time axis at t.
    StepSize {
        /// Where the solve stood.
        t: f64,
    },
    /// The state or its derivative was not finite at t.
    NonFinite {
        /// Where the solve stood.
        t: f64,
    },
    /// The right-hand side could not be evaluated.
    Rhs(String),
}

impl std::fmt::Display for OdeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OdeFailure::Steps {
                t,
                t_end,
                max_steps,
                at_times,
                rejected,
            } => {
                write!(
                    f,
                    "the ODE solver reached its step limit max_steps = {max_steps} at t = {} on the way to t = {}",
                    num(*t),
                    num(*t_end)
                )?;
                if 2 * at_times >= *max_steps {
                    write!(
                        f,
                        ": {at_times} of the steps ended at an output time, so the output times themselves need most of the limit; raise `max_steps` (an option of the `ode` call, up to 1e8) above the number of output times, or solve at fewer times"
                    )
                } else if 2 * rejected >= *max_steps {
                    write!(
                        f,
                        ": {rejected} of the steps were rejected (the system is likely stiff there); loosen `rtol`/`atol` or raise `max_steps` (options of the `ode` call)"
                    )
                } else {
                    write!(
                        f,
                        " (the solution changes quickly there or the system is stiff; raise `max_steps` or loosen `rtol`/`atol`, options of the `ode` call)"
                    )
                }
            }
            OdeFailure::Times { times, max_steps } => write!(
                f,
                "the ODE is solved at {times} distinct output times after t0, and each ends at least one solver step, more than its step limit max_steps = {max_steps}; raise `max_steps` (an option of the `ode` call, up to 1e8) to at least {times}, or solve at fewer times"
            ),
            OdeFailure::Interrupted { t } => {
                write!(f, "interrupted while solving the ODE (at t = {})", num(*t))
            }
            OdeFailure::StepSize { t } => write!(
                f,
                "the ODE solver's step size fell below the resolution of t at t = {} (the system is stiff there or its solution blows up)",
                num(*t)
            ),
            OdeFailure::NonFinite { t } => {
                write!(
                    f,
                    "the ODE's state or derivative is not finite at t = {}",
                    num(*t)
                )
            }
            OdeFailure::Rhs(m) => write!(f, "{m}"),
        }
    }
}

/// The right-hand side f(t, x), written into `dx` (same length as x).
pub type Rhs<'a, T> = dyn FnMut(f64, &[T], &mut [T]) -> Result<(), String> + 'a;

// Dormand–Prince 5(4) coefficients.
const C: [f64; 7] = [0.0, 0.2, 0.3, 0.8, 8.0 / 9.0, 1.0, 1.0];
const A: [[f64; 6]; 7] = [
    [0.0; 6],
    [0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
    [3.0 / 40.0, 9.0 / 40.0, 0.0, 0.0, 0.0, 0.0],
    [44.0 / 45.0, -56.0 / 15.0, 32.0 / 9.0, 0.0, 0.0, 0.0],
    [
        19372.0 / 6561.0,
        -25360.0 / 2187.0,
        64448.0 / 6561.0,
        -212.0 / 729.0,
        0.0,
        0.0,
    ],
    [
        9017.0 / 3168.0,
        -355.0 / 33.0,
        46732.0 / 5247.0,
        49.0 / 176.0,
        -5103.0 / 18656.0,
        0.0,
    ],
    [
        35.0 / 384.0,
        0.0,
        500.0 / 1113.0,
        125.0 / 192.0,
        -2187.0 / 6784.0,
        11.0 / 84.0,
    ],
];
/// The fifth-order weights minus the embedded fourth-order ones.
const E: [f64; 7] = [
    71.0 / 57600.0,
    0.0,
    -71.0 / 16695.0,
    71.0 / 1920.0,
    -17253.0 / 339200.0,
    22.0 / 525.0,
    -1.0 / 40.0,
];

/// Solve dx/dt = f(t, x), x(t0) = x0, and return x at each time of `ts`
/// (non-decreasing, none before t0), row i of a \[T × S\] row-major block
/// (S = x0.len()). The caller checks the times. `stop` is read before every
/// step: once set, the solve ends with [`OdeFailure::Interrupted`].
pub fn solve<T: Real>(
    f: &mut Rhs<'_, T>,
    x0: &[T],
    t0: f64,
    ts: &[f64],
    s: &OdeSettings,
    stop: &StopFlag,
) -> Result<Vec<T>, OdeFailure> {
    solve_with(f, x0, t0, ts, s, stop, None)
}

/// [`solve`], and with `record` its accepted steps (their values) written
/// into it, old contents cleared, for the adjoint sweep
/// ([`adjoint::adjoint`]): the same solution, bit for bit. The record
/// grows by 7S + 3 numbers per accepted step; the caller bounds it by the
/// step limit.
pub fn solve_with<T: Real>(
    f: &mut Rhs<'_, T>,
    x0: &[T],
    t0: f64,
    ts: &[f64],
    s: &OdeSettings,
    stop: &StopFlag,
    mut record: Option<&mut Trajectory>,
) -> Result<Vec<T>, OdeFailure> {
    if let Some(r) = record.as_deref_mut() {
        r.clear(x0.len(), t0);
    }
    let times = distinct_times_after(t0, ts);
    if times > s.max_steps {
        return Err(OdeFailure::Times {
            times,
            max_steps: s.max_steps,
        });
    }
    let n = x0.len();
    let mut out = Vec::with_capacity(ts.len() * n);
    let mut x = x0.to_vec();
    let mut k: Vec<Vec<T>> = vec![vec![T::zero(); n]; 7];
    let mut stage = vec![T::zero(); n];
    let mut x_new = vec![T::zero(); n];
    let mut t = t0;
    f(t, &x, &mut k[0]).map_err(OdeFailure::Rhs)?;
    if !finite(&x) || !finite(&k[0]) {
        return Err(OdeFailure::NonFinite { t });
    }
    let mut h = match ts.iter().find(|&&te| te > t0) {
        Some(&te) => initial_step(f, &x, &k[0], t0, te, s)?,
        None => 0.0,
    };
    let (mut steps, mut at_times, mut rejected) = (0usize, 0usize, 0usize);
    let mut rejected_last = false;
    for &t_end in ts {
        while t < t_end {
            if steps >= s.max_steps {
                return Err(OdeFailure::Steps {
                    t,
                    t_end,
                    max_steps: s.max_steps,
                    at_times,
                    rejected,
                });
            }
            if stop.is_set() {
                return Err(OdeFailure::Interrupted { t });
            }
            steps += 1;
            let span = t_end - t;
            // Land on t_end exactly; do not leave a sliver behind.
            let clipped = h >= span || span - h <= 1e-10 * span.max(t.abs());
            at_times += usize::from(clipped);
            let hs = if clipped { span } else { h };
            if hs <= 10.0 * f64::EPSILON * t.abs() || hs <= f64::MIN_POSITIVE {
                return Err(OdeFailure::StepSize { t });
            }
            for st in 1..7 {
                for i in 0..n {
                    let mut acc = T::zero();
                    for (j, kj) in k.iter().enumerate().take(st) {
                        let a = A[st][j];
                        if a != 0.0 {
                            acc += kj[i] * T::constant(a);
                        }
                    }
                    stage[i] = x[i] + acc * T::constant(hs);
                }
                f(t + C[st] * hs, &stage, &mut k[st]).map_err(OdeFailure::Rhs)?;
                if st == 6 {
                    x_new.copy_from_slice(&stage);
                }
            }
            // k[6] = f(t + h, x_new): the first stage of the next step (FSAL).
            let mut err = 0.0;
            for i in 0..n {
                let mut e = 0.0;
                for (j, kj) in k.iter().enumerate() {
                    e += E[j] * kj[i].to_constant();
                }
                let sc =
                    s.atol + s.rtol * x[i].to_constant().abs().max(x_new[i].to_constant().abs());
                let r = hs * e / sc;
                err += r * r;
            }
            let err = (err / n.max(1) as f64).sqrt();
            if err.is_finite() && err <= 1.0 {
                if !finite(&x_new) || !finite(&k[6]) {
                    return Err(OdeFailure::NonFinite { t: t + hs });
                }
                if let Some(r) = record.as_deref_mut() {
                    r.push_step(t, hs, &x, &k[..6]);
                }
                t = if clipped { t_end } else { t + hs };
                std::mem::swap(&mut x, &mut x_new);
                k.swap(0, 6);
                let fac = if err == 0.0 {
                    10.0
                } else {
                    (0.9 * err.powf(-0.2)).clamp(0.2, 10.0)
                };
                let fac = if rejected_last { fac.min(1.0) } else { fac };
                // A step shortened to land on an output time does not
                // shrink the next one.
                h = if clipped { h.max(hs * fac) } else { hs * fac };
                rejected_last = false;
            } else {
                let fac = if err.is_finite() {
                    (0.9 * err.powf(-0.2)).clamp(0.2, 1.0)
                } else {
                    0.2
                };
                h = hs * fac;
                rejected_last = true;
                rejected += 1;
            }
        }
        out.extend_from_slice(&x);
        if let Some(r) = record.as_deref_mut() {
            r.push_output();
        }
    }
    Ok(out)
}

/// The number of distinct times in `ts` (non-decreasing) after `t0`: the
/// fewest steps a solve to all of them takes.
fn distinct_times_after(t0: f64, ts: &[f64]) -> usize {
    let mut last = t0;
    let mut count = 0;
    for &t in ts {
        if t > last {
            count += 1;
            last = t;
        }
    }
    count
}

fn finite<T: Real>(x: &[T]) -> bool {
    x.iter().all(|v| v.to_constant().is_finite())
}

/// Hairer's starting step (Solving ODEs I, §II.4), capped at the first
/// output interval.
fn initial_step<T: Real>(
    f: &mut Rhs<'_, T>,
    x: &[T],
    dx: &[T],
    t0: f64,
    t_end: f64,
    s: &OdeSettings,
) -> Result<f64, OdeFailure> {
    let n = x.len().max(1) as f64;
    let sc: Vec<f64> = x
        .iter()
        .map(|v| s.atol + s.rtol * v.to_constant().abs())
        .collect();
    let norm =
        |v: &[f64]| (v.iter().zip(&sc).map(|(a, c)| (a / c).powi(2)).sum::<f64>() / n).sqrt();
    let xv: Vec<f64> = x.iter().map(|v| v.to_constant()).collect();
    let dv: Vec<f64> = dx.iter().map(|v| v.to_constant()).collect();
    let (d0, d1) = (norm(&xv), norm(&dv));
    let h0 = if d0 < 1e-5 || d1 < 1e-5 {
        1e-6
    } else {
        0.01 * d0 / d1
    };
    let h0 = h0.min(t_end - t0);
    let x1: Vec<T> = x
        .iter()
        .zip(&dv)
        .map(|(a, d)| T::constant(a.to_constant() + h0 * d))
        .collect();
    let mut f1 = vec![T::zero(); x.len()];
    f(t0 + h0, &x1, &mut f1).map_err(OdeFailure::Rhs)?;
    let diff: Vec<f64> = f1
        .iter()
        .zip(&dv)
        .map(|(a, d)| (a.to_constant() - d) / h0)
        .collect();
    let d2 = norm(&diff);
    let m = d1.max(d2);
    let h1 = if !m.is_finite() {
        h0 * 1e-3
    } else if m <= 1e-15 {
        (h0 * 1e-3).max(1e-6)
    } else {
        (0.01 / m).powf(0.2)
    };
    Ok((100.0 * h0).min(h1).min(t_end - t0).max(f64::MIN_POSITIVE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scalar::Dual1;
    use ad_trait::AD;

    /// A solve from t0 = 0 that is never stopped.
    fn from_zero<T: Real>(
        f: &mut Rhs<'_, T>,
        x0: &[T],
        ts: &[f64],
        s: &OdeSettings,
    ) -> Result<Vec<T>, OdeFailure> {
        solve(f, x0, 0.0, ts, s, &StopFlag::default())
    }

    fn vdp<T: Real>(theta: T) -> impl FnMut(f64, &[T], &mut [T]) -> Result<(), String> {
        move |_t, x, dx| {
            dx[0] = x[1];
            dx[1] = theta * (T::one() - x[0] * x[0]) * x[1] - x[0];
            Ok(())
        }
    }

    #[test]
    fn linear_systems_match_their_closed_forms() {
        // x' = -2x and the harmonic oscillator (x, v)' = (v, -x).
        let s = OdeSettings {
            rtol: 1e-10,
            atol: 1e-12,
            ..Default::default()
        };
        let ts = [0.0, 0.5, 1.0, 3.0, 10.0];
        let mut decay = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = -2.0 * x[0];
            Ok(())
        };
        let x = from_zero(&mut decay, &[1.5], &ts, &s).unwrap();
        for (i, t) in ts.iter().enumerate() {
            assert!((x[i] - 1.5 * (-2.0 * t).exp()).abs() < 1e-10, "{t}");
        }
        let mut osc = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = x[1];
            dx[1] = -x[0];
            Ok(())
        };
        let x = from_zero(&mut osc, &[0.0, 1.0], &ts, &s).unwrap();
        for (i, t) in ts.iter().enumerate() {
            assert!((x[2 * i] - t.sin()).abs() < 1e-8, "{t}");
            assert!((x[2 * i + 1] - t.cos()).abs() < 1e-8, "{t}");
        }
    }

    #[test]
    fn the_error_shrinks_with_the_tolerance() {
        // Van der Pol at θ = 1: a tight solve is the truth for looser ones.
        let ts: Vec<f64> = (1..=10).map(f64::from).collect();
        let tight = OdeSettings {
            rtol: 1e-12,
            atol: 1e-12,
            ..Default::default()
        };
        let truth: Vec<f64> = from_zero(&mut vdp(1.0), &[0.0, 2.0], &ts, &tight).unwrap();
        let mut last = f64::INFINITY;
        for tol in [1e-4, 1e-6, 1e-8] {
            let s = OdeSettings {
                rtol: tol,
                atol: tol,
                ..Default::default()
            };
            let x: Vec<f64> = from_zero(&mut vdp(1.0), &[0.0, 2.0], &ts, &s).unwrap();
            let e = x
                .iter()
                .zip(&truth)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(e < 100.0 * tol && e < last, "tol {tol}: error {e}");
            last = e;
        }
    }

    #[test]
    fn dual_tangents_are_the_derivatives_of_the_discrete_solution() {
        let ts = [1.0, 4.0, 10.0];
        let s = OdeSettings::default();
        let th = 0.8;
        let xd = from_zero(
            &mut vdp(Dual1::new(th, [1.0])),
            &[Dual1::constant(0.0), Dual1::constant(2.0)],
            &ts,
            &s,
        )
        .unwrap();
        let xv = from_zero(&mut vdp(th), &[0.0, 2.0], &ts, &s).unwrap();
        for (d, v) in xd.iter().zip(&xv) {
            assert_eq!(d.value(), *v);
        }
        // Against a tightly solved finite difference.
        let tight = OdeSettings {
            rtol: 1e-12,
            atol: 1e-12,
            ..Default::default()
        };
        let h = 1e-6;
        let up = from_zero(&mut vdp(th + h), &[0.0, 2.0], &ts, &tight).unwrap();
        let dn = from_zero(&mut vdp(th - h), &[0.0, 2.0], &ts, &tight).unwrap();
        for i in 0..xd.len() {
            let fd = (up[i] - dn[i]) / (2.0 * h);
            assert!(
                (xd[i].tangent()[0] - fd).abs() < 1e-3 * fd.abs().max(1.0),
                "{i}: {} vs {fd}",
                xd[i].tangent()[0]
            );
        }
    }

    #[test]
    fn output_times_beyond_the_step_limit_are_named_as_the_cause() {
        let mut decay = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = -x[0];
            Ok(())
        };
        let s = OdeSettings {
            max_steps: 1000,
            ..Default::default()
        };
        // 2000 distinct times (repeats and t0 itself cost nothing): refused
        // before the first step.
        let mut ts: Vec<f64> = (0..=2000).map(|i| i as f64 * 1e-3).collect();
        ts.push(2.0);
        let e = from_zero(&mut decay, &[1.0], &ts, &s).unwrap_err();
        assert_eq!(
            e,
            OdeFailure::Times {
                times: 2000,
                max_steps: 1000
            }
        );
        let m = e.to_string();
        assert!(
            m.contains("2000 distinct output times") && m.contains("max_steps"),
            "{m}"
        );
        assert!(!m.contains("stiff"), "{m}");
        // 900 times fit under 905 steps, but the first interval takes
        // several: the limit is hit, and the message still blames the
        // output times.
        let ts: Vec<f64> = (0..900).map(|i| 100.0 + i as f64 * 0.1).collect();
        let s = OdeSettings {
            max_steps: 905,
            ..s
        };
        let e = from_zero(&mut decay, &[1.0], &ts, &s).unwrap_err();
        assert!(matches!(e, OdeFailure::Steps { .. }), "{e:?}");
        let m = e.to_string();
        assert!(m.contains("output times themselves"), "{m}");
        let s = OdeSettings {
            max_steps: 850,
            ..s
        };
        let e = from_zero(&mut decay, &[1.0], &ts, &s).unwrap_err();
        assert!(matches!(e, OdeFailure::Times { times: 900, .. }), "{e:?}");
    }

    #[test]
    fn a_set_stop_flag_ends_the_solve() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let mut decay = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = -x[0];
            Ok(())
        };
        let stop = StopFlag::new(Some(Arc::new(AtomicBool::new(true))));
        let e = solve(
            &mut decay,
            &[1.0],
            0.0,
            &[1.0],
            &OdeSettings::default(),
            &stop,
        );
        assert_eq!(e.unwrap_err(), OdeFailure::Interrupted { t: 0.0 });
    }

    #[test]
    fn failures_are_reported_not_looped() {
        // Blow-up: x' = x², x(0) = 1 has a pole at t = 1.
        let mut blow = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = x[0] * x[0];
            Ok(())
        };
        let e = from_zero(&mut blow, &[1.0], &[2.0], &OdeSettings::default()).unwrap_err();
        assert!(
            matches!(
                e,
                OdeFailure::StepSize { .. }
                    | OdeFailure::NonFinite { .. }
                    | OdeFailure::Steps { .. }
            ),
            "{e:?}"
        );
        // A stiff system with a small step budget.
        let mut stiff = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = -1e6 * (x[0] - 1.0);
            Ok(())
        };
        let s = OdeSettings {
            max_steps: 1000,
            ..Default::default()
        };
        let e = from_zero(&mut stiff, &[0.0], &[100.0], &s).unwrap_err();
        assert!(matches!(e, OdeFailure::Steps { .. }), "{e:?}");
        assert!(e.to_string().contains("stiff"), "{e}");
        // A right-hand side that fails.
        let mut bad = |_t: f64, _x: &[f64], _dx: &mut [f64]| Err("no".to_string());
        assert_eq!(
            from_zero(&mut bad, &[0.0], &[1.0], &s).unwrap_err(),
            OdeFailure::Rhs("no".into())
        );
        // Output at t0 is the initial state.
        let mut decay = |_t: f64, x: &[f64], dx: &mut [f64]| {
            dx[0] = -x[0];
            Ok(())
        };
        assert_eq!(
            from_zero(&mut decay, &[3.0], &[0.0, 0.0], &s).unwrap(),
            vec![3.0, 3.0]
        );
    }
}
