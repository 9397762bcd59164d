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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Model, Registry};

    fn program(body: &str) -> KernelProgram {
        let text =
            format!("kernel k(ell : positive, alpha : real)(x, x2) {{ {body} }}\nmodel {{ }}\n");
        let m = Model::from_str("k.tempest", &text, &Registry::default())
            .unwrap_or_else(|e| panic!("{e}"));
        KernelProgram::compile(&m.graph.functions[0]).expect("compiles")
    }

    #[test]
    fn input_derivatives_match_finite_differences() {
        let bodies = [
            "exp(-sqdist(x, x2) / (2 * ell^2))",
            "let r = sqrt(sqdist(x, x2) + 0.1) / ell; (1 + r) * exp(-r) * alpha",
            "alpha * dot(x, x2) + dot(x, x) * dot(x2, x2) / ell",
            "x[0] * x2[1] + tanh(x[1] - x2[0]) * ell + (if x[0] > 0 then x2[0]^2 else 0)",
        ];
        let p = [0.8, 1.3];
        let (x, y) = ([0.3, -1.2], [1.1, 0.4]);
        for body in bodies {
            let prog = program(body);
            let (mut g, mut gx, mut gy) = ([0.0; 2], [0.0; 2], [0.0; 2]);
            let v = prog.eval_grad_inputs(&p, &x, &y, &mut g, &mut gx, &mut gy);
            let mut g0 = [0.0; 2];
            assert_eq!(v, prog.eval_grad(&p, &x, &y, &mut g0), "{body}");
            assert_eq!(g, g0, "{body}");
            let h = 1e-6;
            for k in 0..2 {
                let (mut xu, mut xd, mut yu, mut yd) = (x, x, y, y);
                xu[k] += h;
                xd[k] -= h;
                yu[k] += h;
                yd[k] -= h;
                let e = |a: &[f64], b: &[f64]| prog.eval::<f64>(&p, a, b);
                let fx = (e(&xu, &y) - e(&xd, &y)) / (2.0 * h);
                let fy = (e(&x, &yu) - e(&x, &yd)) / (2.0 * h);
                assert!(
                    (gx[k] - fx).abs() <= 1e-7 * fx.abs().max(1.0),
                    "{body} ∂x{k}: {} vs {fx}",
                    gx[k]
                );
                assert!(
                    (gy[k] - fy).abs() <= 1e-7 * fy.abs().max(1.0),
                    "{body} ∂y{k}: {} vs {fy}",
                    gy[k]
                );
            }
        }
    }
}
