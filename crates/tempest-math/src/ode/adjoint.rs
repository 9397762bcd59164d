//! The discrete adjoint of a Dormand–Prince solve: the gradient of a
//! scalar of the reported solution, ⟨x̄, x(t₁…t_T)⟩, in the initial state
//! and the system's parameters, by one backward sweep over the accepted
//! steps, whatever the number of parameters.
//!
//! The forward solve ([`super::solve_with`] with a record) keeps each accepted step's start
//! time, size, starting state and six stage derivatives (7S + 3 numbers a
//! step). The sweep then walks the steps backwards and carries the adjoint
//! λ of the state through the step's stages (reverse mode through the Runge–Kutta formula
//! x₊ = x + h Σⱼ bⱼ kⱼ, kᵢ = f(t + cᵢh, x + h Σⱼ₍ⱼ₍ᵢ₎ aᵢⱼ kⱼ)), each stage
//! asking the right-hand side's vector–Jacobian product
//! (wᵀ∂f/∂x, wᵀ∂f/∂p) once. The step sizes are constants, as in the
//! dual-number solve, so the result is the derivative of the discrete
//! solution that is reported — the forward sensitivities' contraction
//! with x̄, to rounding (discretise, then differentiate) — not of the
//! exact flow; it costs one solve in `f64` and one forward and reverse
//! pass of f per stage, where the forward sensitivities cost one solve in
//! duals with one tangent per varying number.

use super::{A, C, OdeFailure};
use tempest_core::interrupt::StopFlag;

/// The vector–Jacobian product of the right-hand side at (t, x): with
/// weights w \[S\], add wᵀ∂f/∂x to `x_bar` \[S\] and wᵀ∂f/∂p to `p_bar`
/// (the caller's parameters, in its own layout).
pub type Vjp<'a> =
    dyn FnMut(f64, &[f64], &[f64], &mut [f64], &mut [f64]) -> Result<(), String> + 'a;

/// A forward solve's accepted steps, for [`adjoint`]: per step its start
/// time, its size, the time its first stage was evaluated at (the
/// previous step's end, carried over by the first-same-as-last stage), its
/// starting state and its six stage derivatives; per output time, the
/// number of steps taken before it was reported.
#[derive(Clone, Debug, Default)]
pub struct Trajectory {
    /// The state's length S.
    n: usize,
    /// (t, h, t of the first stage) per accepted step.
    steps: Vec<(f64, f64, f64)>,
    /// The starting state of each step, S numbers each.
    states: Vec<f64>,
    /// The stage derivatives k₀ … k₅ of each step, 6S numbers each.
    stages: Vec<f64>,
    /// Per output time, the accepted steps before it.
    outputs: Vec<usize>,
    /// Where the next step's first stage was evaluated.
    next_first: f64,
}

impl Trajectory {
    /// Empty, for a state of length `n` solved from `t0`.
    pub(super) fn clear(&mut self, n: usize, t0: f64) {
        self.n = n;
        self.steps.clear();
        self.states.clear();
        self.stages.clear();
        self.outputs.clear();
        self.next_first = t0;
    }

    /// An accepted step from (t, x) of size h, with its stages' derivatives
    /// `k` (six of S).
    pub(super) fn push_step<T: crate::scalar::Real>(
        &mut self,
        t: f64,
        h: f64,
        x: &[T],
        k: &[Vec<T>],
    ) {
        self.steps.push((t, h, self.next_first));
        self.states.extend(x.iter().map(|v| v.to_constant()));
        for kj in k {
            self.stages.extend(kj.iter().map(|v| v.to_constant()));
        }
        // The first-same-as-last stage: f(t + c₆h, x₊), c₆ = 1.
        self.next_first = t + C[6] * h;
    }

    /// An output time reported after the steps so far.
    pub(super) fn push_output(&mut self) {
        self.outputs.push(self.steps.len());
    }

    /// The number of accepted steps.
    pub fn steps(&self) -> usize {
        self.steps.len()
    }

    /// The state's length S.
    pub fn state_len(&self) -> usize {
        self.n
    }

    /// The number of output times.
    pub fn outputs(&self) -> usize {
        self.outputs.len()
    }
}

/// The adjoint sweep: with `seed` \[T × S\] (row i the weights of the
/// state reported at output time i, row-major as [`super::solve`]'s
/// output) and the record of that solve, add ∂⟨seed, x⟩/∂x₀ to `x0_bar`
/// \[S\] and pass each stage's weights to `vjp`, which adds ∂/∂p into
/// `p_bar`. A non-finite adjoint (of the state at a step, or of the
/// parameters at the end) is [`OdeFailure::NonFinite`]. Allocates its
/// scratch (ten vectors of S) once; `stop` is read before every step.
pub fn adjoint(
    vjp: &mut Vjp<'_>,
    traj: &Trajectory,
    seed: &[f64],
    x0_bar: &mut [f64],
    p_bar: &mut [f64],
    stop: &StopFlag,
) -> Result<(), OdeFailure> {
    let n = traj.n;
    if seed.len() != traj.outputs.len() * n || x0_bar.len() != n {
        return Err(OdeFailure::Rhs(
            "an ODE adjoint seed of another shape than the solution".into(),
        ));
    }
    let mut lambda = vec![0.0; n];
    let mut k_bar = vec![vec![0.0; n]; 6];
    let mut stage = vec![0.0; n];
    let mut y_bar = vec![0.0; n];
    // Output times in reverse: those reported after step j seed λ before
    // step j is reversed.
    let mut out = traj.outputs.len();
    let add_outputs = |lambda: &mut [f64], out: &mut usize, after: usize| {
        while *out > 0 && traj.outputs[*out - 1] == after {
            *out -= 1;
            let row = &seed[*out * n..(*out + 1) * n];
            lambda.iter_mut().zip(row).for_each(|(l, s)| *l += s);
        }
    };
    for j in (0..traj.steps.len()).rev() {
        add_outputs(&mut lambda, &mut out, j + 1);
        if stop.is_set() {
            return Err(OdeFailure::Interrupted { t: traj.steps[j].0 });
        }
        let (t, h, t_first) = traj.steps[j];
        let x = &traj.states[j * n..(j + 1) * n];
        let k = &traj.stages[6 * j * n..6 * (j + 1) * n];
        // x₊ = x + h Σⱼ a₆ⱼ kⱼ: k̄ⱼ = h a₆ⱼ λ, x̄ = λ.
        for (jj, kb) in k_bar.iter_mut().enumerate() {
            let w = h * A[6][jj];
            kb.iter_mut().zip(&lambda).for_each(|(b, l)| *b = w * l);
        }
        for st in (0..6).rev() {
            if k_bar[st].iter().all(|v| *v == 0.0) {
                continue;
            }
            y_bar.iter_mut().for_each(|v| *v = 0.0);
            if st == 0 {
                vjp(t_first, x, &k_bar[0], &mut y_bar, p_bar).map_err(OdeFailure::Rhs)?;
            } else {
                stage_state(x, k, st, h, &mut stage);
                vjp(t + C[st] * h, &stage, &k_bar[st], &mut y_bar, p_bar)
                    .map_err(OdeFailure::Rhs)?;
            }
            // The stage state x + h Σⱼ aₛⱼ kⱼ: its adjoint goes to x and to
            // the earlier stages.
            lambda.iter_mut().zip(&y_bar).for_each(|(l, y)| *l += y);
            for jj in 0..st {
                let a = A[st][jj];
                if a != 0.0 {
                    let w = h * a;
                    k_bar[jj]
                        .iter_mut()
                        .zip(&y_bar)
                        .for_each(|(b, y)| *b += w * y);
                }
            }
        }
        if !lambda.iter().all(|v| v.is_finite()) {
            return Err(OdeFailure::NonFinite { t });
        }
    }
    add_outputs(&mut lambda, &mut out, 0);
    // λ was checked step by step; the parameters' adjoints once, at the end.
    if !p_bar.iter().all(|v| v.is_finite()) {
        return Err(OdeFailure::NonFinite {
            t: traj.steps.first().map_or(traj.next_first, |s| s.0),
        });
    }
    x0_bar.iter_mut().zip(&lambda).for_each(|(b, l)| *b += l);
    Ok(())
}

/// Stage `st`'s state x + h Σⱼ₍ⱼ₍ₛₜ₎ a_{st,j} kⱼ into `stage` (`k` the
/// six stage derivatives, S each, one after another), summed in the
/// forward solve's order so it is the same number.
fn stage_state(x: &[f64], k: &[f64], st: usize, h: f64, stage: &mut [f64]) {
    let n = x.len();
    for i in 0..n {
        let mut acc = 0.0;
        for j in 0..st {
            let a = A[st][j];
            if a != 0.0 {
                acc += k[j * n + i] * a;
            }
        }
        stage[i] = x[i] + acc * h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ode::{OdeSettings, solve, solve_with};
    use crate::scalar::Dual1;

    /// Van der Pol with a time-dependent forcing, x'' = θ(1 − x²)x' − x +
    /// a sin(t): the stage times matter.
    fn forced<T: crate::scalar::Real>(
        theta: T,
        a: T,
    ) -> impl FnMut(f64, &[T], &mut [T]) -> Result<(), String> {
        move |t, x, dx| {
            dx[0] = x[1];
            dx[1] = theta * (T::one() - x[0] * x[0]) * x[1] - x[0] + a * T::constant(t.sin());
            Ok(())
        }
    }

    /// Its vector–Jacobian product in (x, θ, a), by hand.
    #[allow(clippy::type_complexity)]
    fn forced_vjp(
        theta: f64,
        a: f64,
    ) -> impl FnMut(f64, &[f64], &[f64], &mut [f64], &mut [f64]) -> Result<(), String> {
        let _ = a; // f is linear in a: its partial reads no a.
        move |t, x, w, xb, pb| {
            xb[0] += w[1] * (-2.0 * theta * x[0] * x[1] - 1.0);
            xb[1] += w[0] + w[1] * theta * (1.0 - x[0] * x[0]);
            pb[0] += w[1] * (1.0 - x[0] * x[0]) * x[1];
            pb[1] += w[1] * t.sin();
            Ok(())
        }
    }

    /// The adjoint equals the forward sensitivities' contraction, in every
    /// input, for output times that repeat, start at t0 and fall between
    /// steps; and the recorded solve is the plain one, bit for bit.
    #[test]
    fn the_adjoint_is_the_contraction_of_the_forward_sensitivities() {
        let ts = [0.0, 0.5, 0.5, 2.0, 7.5, 10.0];
        let s = OdeSettings::default();
        let stop = StopFlag::default();
        let (th, a, x0) = (0.8, 0.3, [0.5, 1.5]);
        let mut traj = Trajectory::default();
        let xv = solve_with(
            &mut forced(th, a),
            &x0,
            0.0,
            &ts,
            &s,
            &stop,
            Some(&mut traj),
        )
        .unwrap();
        let plain = solve(&mut forced(th, a), &x0, 0.0, &ts, &s, &stop).unwrap();
        assert_eq!(xv, plain);
        assert_eq!(traj.outputs(), ts.len());
        assert!(traj.steps() > 10);
        let seed: Vec<f64> = (0..xv.len()).map(|i| ((i * 7 % 5) as f64) - 1.7).collect();
        let (mut x0b, mut pb) = ([0.0; 2], [0.0; 2]);
        adjoint(
            &mut forced_vjp(th, a),
            &traj,
            &seed,
            &mut x0b,
            &mut pb,
            &stop,
        )
        .unwrap();
        // Four forward solves in duals, one tangent each: x0[0], x0[1], θ, a.
        let want: Vec<f64> = (0..4)
            .map(|c| {
                let d = |i: usize, v: f64| Dual1::new(v, [if c == i { 1.0 } else { 0.0 }]);
                let xd = solve(
                    &mut forced(d(2, th), d(3, a)),
                    &[d(0, x0[0]), d(1, x0[1])],
                    0.0,
                    &ts,
                    &s,
                    &stop,
                )
                .unwrap();
                xd.iter().zip(&seed).map(|(x, w)| x.tangent()[0] * w).sum()
            })
            .collect();
        let got = [x0b[0], x0b[1], pb[0], pb[1]];
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-10 * w.abs().max(1.0),
                "{got:?} vs {want:?}"
            );
        }
    }

    /// A seed of the wrong shape, a set stop flag and a non-finite
    /// parameter adjoint are errors, not answers.
    #[test]
    fn a_wrong_seed_or_a_stop_ends_the_sweep() {
        let ts = [1.0, 2.0];
        let s = OdeSettings::default();
        let stop = StopFlag::default();
        let mut traj = Trajectory::default();
        solve_with(
            &mut forced(1.0, 0.0),
            &[0.0, 2.0],
            0.0,
            &ts,
            &s,
            &stop,
            Some(&mut traj),
        )
        .unwrap();
        let (mut x0b, mut pb) = ([0.0; 2], [0.0; 2]);
        let mut run = |seed: &[f64], stop: &StopFlag| {
            adjoint(
                &mut forced_vjp(1.0, 0.0),
                &traj,
                seed,
                &mut x0b,
                &mut pb,
                stop,
            )
        };
        assert!(run(&[1.0; 3], &stop).is_err());
        let set = StopFlag::new(Some(std::sync::Arc::new(
            std::sync::atomic::AtomicBool::new(true),
        )));
        assert!(matches!(
            run(&[1.0; 4], &set),
            Err(OdeFailure::Interrupted { .. })
        ));
        // A parameter's adjoint that is not finite (∂f/∂p infinite where f
        // is finite, as √p at 0) is no gradient.
        let mut infinite = |_t: f64, _x: &[f64], w: &[f64], _xb: &mut [f64], pb: &mut [f64]| {
            pb[0] += w[1] * f64::INFINITY;
            Ok(())
        };
        let mut pb = [0.0; 1];
        assert!(matches!(
            adjoint(&mut infinite, &traj, &[1.0; 4], &mut x0b, &mut pb, &stop),
            Err(OdeFailure::NonFinite { .. })
        ));
    }
}
