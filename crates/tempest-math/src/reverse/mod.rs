//! One reverse sweep through scalar model-file code: the hypers' (or
//! params') gradient of a contraction ⟨ā, y(θ)⟩ of everything the engines
//! evaluate from them (kernel leaves, prior means, likelihood arguments,
//! log priors), at a cost that does not grow with the number of inputs.
//!
//! The pieces are evaluated once with [`Rev`], a reverse-mode scalar
//! (`scalar.rs`) that records every operation on a tape private to the
//! calling thread (`tape.rs`); the caller contracts them with adjoints known
//! in `f64` (from the matrix-level rules of [`crate::adjoint`], the
//! kernel's block pass, the expectations' derivatives) into one scalar,
//! and one backward pass over the tape gives every input's adjoint.
//!
//! The tape is thread-local, so a sweep runs on one thread from start to
//! end: its `Rev` values are made and used on the thread that opened it
//! (parallel work inside the closure runs in `f64`). A sweep started while
//! another is open on the same thread (work stolen while the outer one
//! waits on parallel work) sets the outer one's operations aside until it
//! closes, so the two tapes never mix.
//!
//! Scalars and matrices share one backward pass: inside an open sweep
//! ([`record`]), a matrix tape ([`crate::tape::Tape`]) takes `Rev` values
//! as a node ([`crate::tape::Tape::gather`]) and hands a node's entries
//! back as `Rev` values ([`crate::tape::Tape::entries`]), and its
//! [`crate::tape::Tape::gradient`] visits the scalar operations and the
//! matrix nodes together, last recorded first (so model-file code
//! evaluated in `Rev` before and after a Gram matrix, a Cholesky factor or
//! a network is differentiated by the same pass). One matrix tape at a
//! time is joined to a sweep.

mod scalar;
pub(crate) mod tape;

pub use scalar::Rev;

use ad_trait::AD;
use std::cell::Cell;
use tempest_core::error::Error;

thread_local! {
    /// The open sweep's number, `None` when none is open on this thread.
    static CURRENT: Cell<Option<u64>> = const { Cell::new(None) };
    /// The number of sweeps opened on this thread so far.
    static OPENED: Cell<u64> = const { Cell::new(0) };
    /// The matrix tape joined to the open sweep, by its number.
    static JOINED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// What a sweep opened inside another set aside: the outer sweep's number,
/// its joined tape and its operations.
struct Outer {
    current: u64,
    joined: Option<u64>,
    tape: tape::Saved,
}

/// Closes the sweep however the closure ends: clears the tape, or gives an
/// outer sweep back its own.
struct Open(Option<Outer>);

impl Drop for Open {
    fn drop(&mut self) {
        match self.0.take() {
            None => {
                tape::clear();
                CURRENT.with(|c| c.set(None));
                JOINED.with(|j| j.set(None));
            }
            Some(outer) => {
                tape::restore(outer.tape);
                CURRENT.with(|c| c.set(Some(outer.current)));
                JOINED.with(|j| j.set(outer.joined));
            }
        }
    }
}

/// The open sweep's number, `None` when no sweep is open on this thread.
pub(crate) fn open_sweep() -> Option<u64> {
    CURRENT.with(|c| c.get())
}

/// Joins the matrix tape numbered `tape` to the open sweep; an internal
/// error when no sweep is open or another matrix tape has joined it.
pub(crate) fn join(tape: u64) -> Result<u64, Error> {
    let Some(sweep) = open_sweep() else {
        return Err(Error::internal(
            "a matrix tape met reverse-mode scalars outside a reverse sweep",
        ));
    };
    JOINED.with(|j| match j.get() {
        None => {
            j.set(Some(tape));
            Ok(sweep)
        }
        Some(t) if t == tape => Ok(sweep),
        Some(_) => Err(Error::internal(
            "two matrix tapes were joined to one reverse sweep",
        )),
    })
}

/// Runs `f` on the inputs `x` as fresh reverse-mode variables (the
/// thread's tape cleared first) and returns its result; the tape is cleared
/// again afterwards.
///
/// A sweep opened while another is open on the same thread (a task that
/// rayon hands a thread while it waits inside the outer sweep's parallel
/// work: a Gram matrix, a factorisation) sets the outer one's operations
/// aside and gives them back when it closes, so the two never mix. The
/// outer sweep's `Rev` values must not be used inside the inner one (its
/// nodes are on the tape set aside); nothing that opens a sweep does so.
pub fn record<R>(x: &[f64], f: impl FnOnce(&[Rev]) -> Result<R, Error>) -> Result<R, Error> {
    let outer = CURRENT.with(|c| c.get()).map(|current| Outer {
        current,
        joined: JOINED.with(|j| j.get()),
        tape: tape::set_aside(),
    });
    let _open = Open(outer);
    let number = OPENED.with(|o| {
        o.set(o.get() + 1);
        o.get()
    });
    CURRENT.with(|c| c.set(Some(number)));
    JOINED.with(|j| j.set(None));
    tape::clear();
    let vars: Vec<Rev> = x.iter().map(|&v| tape::variable(v)).collect();
    f(&vars)
}

/// ∂s/∂x [len x] for the scalar s = `f(x)` (a contraction of the pieces
/// with their adjoints): one evaluation recorded on the tape, one backward
/// pass. Also returns s.
pub fn sweep(
    x: &[f64],
    f: impl FnOnce(&[Rev]) -> Result<Rev, Error>,
) -> Result<(f64, Vec<f64>), Error> {
    record(x, |vars| {
        let s = f(vars)?;
        let Some(out) = s.node() else {
            return Ok((s.to_constant(), vec![0.0; vars.len()]));
        };
        let (adj, bridged) = tape::adjoints(out);
        if bridged {
            return Err(Error::internal(
                "a scalar sweep's result depends on a matrix tape's entries: take its gradient through the tape",
            ));
        }
        let g = vars
            .iter()
            .map(|v| v.node().map_or(0.0, |k| adj[k]))
            .collect();
        Ok((s.to_constant(), g))
    })
}

/// The number of operations recorded so far in the open sweep.
pub fn recorded() -> usize {
    tape::len()
}

/// Σₖ wₖ yₖ as one reverse-mode scalar, skipping zero weights and
/// constants (which add nothing to the gradient); the terms are added in
/// order.
pub fn contract<'a>(w: impl IntoIterator<Item = f64>, y: impl IntoIterator<Item = &'a Rev>) -> Rev {
    let mut acc = Rev::constant(0.0);
    for (wk, yk) in w.into_iter().zip(y) {
        if wk != 0.0 && !yk.is_constant() {
            acc += *yk * ad_trait::F64(wk);
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scalar::{Dual8, Real, RealExt};
    use nalgebra::{ComplexField, RealField};

    /// Every operation model code uses, on any scalar type.
    fn every_op<T: Real>(x: &[T]) -> T {
        let (a, b, c) = (x[0], x[1], x[2]);
        let k = |v: f64| T::constant(v);
        let mut acc = a * b + a / c - b % c + (-a);
        acc += a.sin() * b.cos() + (a * k(0.3)).tan() + (a * k(0.2)).asin();
        acc += (a * k(0.2)).acos() + b.atan() + a.sinh() + a.cosh() + a.tanh();
        acc += b.asinh() + (c + T::one()).acosh() + (a * k(0.5)).atanh();
        acc += c.ln() + c.log(b + T::one()) + c.log2() + c.log10() + a.ln_1p();
        acc += c.sqrt() + a.exp() + a.exp2() + a.exp_m1() + b.powi(3) + c.powf(a);
        acc += c.cbrt() + a.hypot(b) + c.recip() + a.abs() + (-b).abs();
        acc += RealField::max(a, b) + RealField::min(a, c) + a.atan2(b) + a.mul_add(b, c);
        acc += a.lgamma() + b.digamma() + a.erf() + b.phi() + a.log_phi();
        acc + a.floor() + b.ceil() + c.round() + a.trunc() + a.signum()
    }

    /// A reverse sweep gives forward mode's derivatives through every
    /// operation, to rounding (`fract` aside: forward mode gives it a unit
    /// tangent in every direction, reverse mode in its argument's).
    #[test]
    fn reverse_and_forward_mode_agree_on_every_operation() {
        let x = [0.7, 1.3, 2.1];
        let (v, g) = sweep(&x, |r| Ok(every_op(r))).unwrap();
        let d: Vec<Dual8> = (0..3)
            .map(|j| {
                let mut t = [0.0; 8];
                t[j] = 1.0;
                Dual8::new(x[j], t)
            })
            .collect();
        let f = every_op(&d);
        assert!(
            (v - f.value()).abs() <= 1e-12 * v.abs(),
            "{v} against {}",
            f.value()
        );
        for (j, (gj, want)) in g.iter().zip(f.tangent()).enumerate() {
            assert!(
                (gj - want).abs() <= 1e-12 * want.abs().max(1.0),
                "x[{j}]: {gj} against {want}"
            );
        }
    }

    /// The sweep's gradient is the closed form's; a sweep opened inside
    /// another (as work stolen by a waiting thread) is its own, and the
    /// outer one goes on as if it had not run.
    #[test]
    fn a_sweep_gives_the_gradient_and_nested_sweeps_stay_apart() {
        let (v, g) = sweep(&[0.5, 2.0], |x| {
            let y = [x[0].exp() * x[1], x[1].ln()];
            Ok(contract([3.0, -1.0], &y))
        })
        .unwrap();
        let e = 0.5f64.exp();
        assert!((v - (3.0 * e * 2.0 - 2f64.ln())).abs() < 1e-14);
        assert!((g[0] - 3.0 * e * 2.0).abs() < 1e-13);
        assert!((g[1] - (3.0 * e - 0.5)).abs() < 1e-13);
        let (v, g) = sweep(&[0.5, 2.0], |x| {
            let a = x[0] * x[1];
            let (iv, ig) = sweep(&[3.0], |y| Ok(y[0] * y[0] + y[0]))?;
            assert_eq!((iv, ig), (12.0, vec![7.0]));
            Ok(a * a + x[1] * ad_trait::F64(iv))
        })
        .unwrap();
        assert_eq!(v, 1.0 + 24.0);
        assert_eq!(g, vec![2.0 * 1.0 * 2.0, 2.0 * 1.0 * 0.5 + 12.0]);
        assert_eq!(open_sweep(), None);
        // The thread can sweep again afterwards.
        assert_eq!(sweep(&[1.0], |x| Ok(x[0] * x[0])).unwrap().1, vec![2.0]);
    }
}
