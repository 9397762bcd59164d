//! The reverse pass of a compiled kernel program with respect to its two
//! inputs x and x2: the rules of the instructions that read them.

use super::{Inst, KernelProgram, Side};

/// Adds a_i ∂v/∂x [D] and a_i ∂v/∂y [D] of an input instruction with value
/// v and adjoint a_i to `gx` and `gy`:
/// `sqdist`: ∂/∂xₖ = 2(xₖ − yₖ), ∂/∂yₖ = −2(xₖ − yₖ);
/// `dot(a, b)`: ∂/∂aₖ = bₖ, ∂/∂bₖ = aₖ (both when a and b are one input);
/// `x[k]`: ∂/∂xₖ = 1. Coordinates past the end of a row are skipped.
pub(super) fn push_input_adjoint(
    inst: &Inst,
    a_i: f64,
    x: &[f64],
    y: &[f64],
    gx: &mut [f64],
    gy: &mut [f64],
) {
    match *inst {
        Inst::Sqdist => {
            for (k, (u, v)) in x.iter().zip(y).enumerate() {
                let d = 2.0 * a_i * (u - v);
                if let Some(g) = gx.get_mut(k) {
                    *g += d;
                }
                if let Some(g) = gy.get_mut(k) {
                    *g -= d;
                }
            }
        }
        Inst::Dot(a, b) => {
            let row = |s: Side| if s == Side::X { x } else { y };
            let (ra, rb) = (row(a), row(b));
            for (side, other) in [(a, rb), (b, ra)] {
                let g = if side == Side::X { &mut *gx } else { &mut *gy };
                for (gk, o) in g.iter_mut().zip(other) {
                    *gk += a_i * o;
                }
            }
        }
        Inst::Input(s, k) => {
            let g = if s == Side::X { gx } else { gy };
            if let Some(g) = g.get_mut(k) {
                *g += a_i;
            }
        }
        _ => {}
    }
}

impl KernelProgram {
    /// k(x, y) with ∂k/∂pⱼ written into `g` \[n_params\], and ∂k/∂xₖ and
    /// ∂k/∂yₖ added to `gx` \[D\] and `gy` \[D\], by one forward and one reverse
    /// pass (the same reverse pass as [`KernelProgram::eval_grad`]).
    pub fn eval_grad_inputs(
        &self,
        p: &[f64],
        x: &[f64],
        y: &[f64],
        g: &mut [f64],
        gx: &mut [f64],
        gy: &mut [f64],
    ) -> f64 {
        self.grad(p, x, y, g, Some((gx, gy)), None)
    }

    /// [`KernelProgram::eval_grad_inputs`] with the input adjoints
    /// `(gx, gy)` and the caller's scratch `(vals, adj)`, each of at least
    /// [`KernelProgram::len`] numbers (a caller evaluating many entries
    /// keeps them, so no entry allocates).
    pub fn eval_grad_inputs_in(
        &self,
        (p, x, y): (&[f64], &[f64], &[f64]),
        g: &mut [f64],
        inputs: (&mut [f64], &mut [f64]),
        (vals, adj): (&mut [f64], &mut [f64]),
    ) -> f64 {
        let n = self.len();
        self.grad_with(
            p,
            x,
            y,
            g,
            Some(inputs),
            None,
            &mut vals[..n],
            &mut adj[..n],
        )
    }
}
