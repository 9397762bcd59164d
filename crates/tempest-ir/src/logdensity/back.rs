//! The reverse pass of a [`DensityProgram`]: each node's adjoint pushed
//! back to its operands, last node first: an element-wise node by the
//! instruction set's partial rules (`bin_partials`, `call_partial_of`,
//! [`Inst::elem_partials`]), the structural nodes by their own.

use super::run::slice;
use super::{DensityProgram, Node, OdeCall, Op, Sh, Src};
use crate::bound::Bound;
use crate::value::Value;
use nalgebra::DMatrix;
use tempest_core::error::Error;
use tempest_model::program::{Inst, bin_partials, call_partial_of};
use tempest_syntax::ast::BinOp;

impl DensityProgram {
    /// Push each node's adjoint in `g` back to its operands, last node
    /// first; `v` holds the forward values.
    pub(super) fn reverse(
        &self,
        bound: &Bound,
        v: &[f64],
        g: &mut [f64],
        ode: &[(usize, crate::ode::Sensitivities)],
    ) -> Result<(), Error> {
        let view = |s: Src| self.view(bound, v, s);
        for (k, node) in self.nodes.iter().enumerate().rev() {
            let (before, rest) = g.split_at_mut(node.off);
            let gk = &rest[..node.len];
            // A node of a branch not taken has a zero adjoint (and values
            // that may be anything): it adds nothing.
            if node.guarded && gk.iter().all(|&x| x == 0.0) {
                continue;
            }
            macro_rules! back {
                ($s:expr, $d:expr) => {
                    push_back(&self.nodes, before, node.len, $s, $d)
                };
            }
            match &node.op {
                Op::Param(_) | Op::ParamMat(_) => {}
                Op::Elem(inst, ops) => {
                    let vk = &v[node.off..node.off + node.len];
                    let args = ops.map(view);
                    match *inst {
                        Inst::Bin(op, 0, 1) => {
                            let (va, vb) = (args[0], args[1]);
                            // One rule per operation, so the loops hold no
                            // branch per entry; the rule is bin_partials.
                            macro_rules! bin {
                                ($op:expr) => {{
                                    let d = |i: usize| bin_partials($op, va.at(i), vb.at(i), vk[i]);
                                    back!(ops[0], |i| gk[i] * d(i).0);
                                    back!(ops[1], |i| gk[i] * d(i).1);
                                }};
                            }
                            match op {
                                BinOp::Add => {
                                    back!(ops[0], |i| gk[i]);
                                    back!(ops[1], |i| gk[i]);
                                }
                                BinOp::Sub => {
                                    back!(ops[0], |i| gk[i]);
                                    back!(ops[1], |i| -gk[i]);
                                }
                                BinOp::Mul => {
                                    back!(ops[0], |i| gk[i] * vb.at(i));
                                    back!(ops[1], |i| gk[i] * va.at(i));
                                }
                                BinOp::Div => bin!(BinOp::Div),
                                BinOp::Pow => bin!(BinOp::Pow),
                                // Comparisons and logic carry no adjoint.
                                _ => {}
                            }
                        }
                        Inst::Neg(0) => back!(ops[0], |i| -gk[i]),
                        Inst::Select(..) => {
                            let taken = if args[0].at(0) != 0.0 { ops[1] } else { ops[2] };
                            back!(taken, |i| gk[i]);
                        }
                        Inst::Call(f, 0) => {
                            let va = args[0];
                            back!(ops[0], |i| gk[i] * call_partial_of(f, va.at(i), vk[i]));
                        }
                        _ => {
                            for (j, &s) in ops.iter().enumerate() {
                                back!(s, |i| {
                                    let (ds, n) = inst.elem_partials(|o| args[o].at(i), vk[i]);
                                    ds[..n]
                                        .iter()
                                        .filter(|(o, _)| *o == j)
                                        .map(|(_, d)| gk[i] * d)
                                        .sum()
                                });
                            }
                        }
                    }
                }
                Op::MatVec(m, x) => {
                    let (r, k) = (node.len, self.sh(bound, *x).len());
                    let (vm, vx) = (slice(view(*m)), slice(view(*x)));
                    // x̄ += Aᵀ ḡ.
                    if let Src::Node(xn) = x {
                        let n = &self.nodes[*xn];
                        if vm.len() != r * k || n.len != k {
                            return Err(Error::internal("a matrix product of another shape"));
                        }
                        tempest_math::vector::mat_t_vec_add(vm, gk, &mut before[n.off..n.off + k]);
                    }
                    // Ā += ḡ xᵀ.
                    if let Src::Node(mn) = m {
                        let off = self.nodes[*mn].off;
                        for (j, xj) in vx.iter().enumerate() {
                            for (a, gi) in before[off + j * r..off + (j + 1) * r].iter_mut().zip(gk)
                            {
                                *a += gi * xj;
                            }
                        }
                    }
                }
                Op::MatMul(a, b) => {
                    let (Sh::Mat(r, k), Sh::Mat(_, c)) = (self.sh(bound, *a), self.sh(bound, *b))
                    else {
                        continue;
                    };
                    let (va, vb) = (slice(view(*a)), slice(view(*b)));
                    // Ā = ḡ Bᵀ: Ā[i, l] += Σⱼ ḡ[i, j] B[l, j].
                    if let Src::Node(an) = a {
                        let off = self.nodes[*an].off;
                        for j in 0..c {
                            for l in 0..k {
                                let blj = vb[j * k + l];
                                let col = &mut before[off + l * r..off + (l + 1) * r];
                                for (x, gij) in col.iter_mut().zip(&gk[j * r..(j + 1) * r]) {
                                    *x += gij * blj;
                                }
                            }
                        }
                    }
                    // B̄ = Aᵀ ḡ: B̄[l, j] += Σᵢ A[i, l] ḡ[i, j].
                    if let Src::Node(bn) = b {
                        let off = self.nodes[*bn].off;
                        if va.len() != r * k || gk.len() != r * c {
                            return Err(Error::internal("a matrix product of another shape"));
                        }
                        for j in 0..c {
                            tempest_math::vector::mat_t_vec_add(
                                va,
                                &gk[j * r..(j + 1) * r],
                                &mut before[off + j * k..off + (j + 1) * k],
                            );
                        }
                    }
                }
                Op::Sum(a) => back!(*a, |_| gk[0]),
                Op::Mean(a) => {
                    let n = slice(view(*a)).len() as f64;
                    back!(*a, |_| gk[0] / n);
                }
                Op::Logsumexp(a) => {
                    let xs = slice(view(*a));
                    let m = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = xs.iter().map(|x| (x - m).exp()).sum();
                    back!(*a, |i| gk[0] * (xs[i] - m).exp() / z);
                }
                Op::Dot(a, b) => {
                    let (va, vb) = (view(*a), view(*b));
                    back!(*a, |i| gk[0] * vb.at(i));
                    back!(*b, |i| gk[0] * va.at(i));
                }
                Op::Sqdist(a, b) => {
                    let (va, vb) = (view(*a), view(*b));
                    back!(*a, |i| 2.0 * gk[0] * (va.at(i) - vb.at(i)));
                    back!(*b, |i| -2.0 * gk[0] * (va.at(i) - vb.at(i)));
                }
                Op::Index(a, i) => {
                    if let Src::Node(m) = a {
                        before[self.nodes[*m].off + i] += gk[0];
                    }
                }
                Op::Gather(a, k) => {
                    if let Src::Node(m) = a {
                        let off = self.nodes[*m].off;
                        for (r, &k) in self.ints(*k).iter().enumerate() {
                            before[off + k as usize] += gk[r];
                        }
                    }
                }
                Op::Array(xs) => {
                    for (i, x) in xs.iter().enumerate() {
                        if let Src::Node(m) = x {
                            before[self.nodes[*m].off] += gk[i];
                        }
                    }
                }
                Op::Stack(xs) => {
                    let n = xs.len();
                    for (k, x) in xs.iter().enumerate() {
                        if let Src::Node(m) = x {
                            let xn = &self.nodes[*m];
                            for j in 0..xn.len {
                                before[xn.off + j] += gk[j * n + k];
                            }
                        }
                    }
                }
                Op::Site(mu) => back!(*mu, |i| gk[i]),
                Op::Ode(call) => {
                    let Some((_, sens)) = ode.iter().find(|(j, _)| *j == k) else {
                        return Err(Error::internal(
                            "an ODE node without the sensitivities of its forward pass",
                        ));
                    };
                    self.ode_back(bound, v, call, node.sh, gk, before, sens)?
                }
            }
        }
        Ok(())
    }

    /// An ODE solution's adjoint \[T, S\] pushed to its arguments by the
    /// vector–Jacobian product of what the forward pass kept (`sens`): the
    /// forward sensitivities or the record for the adjoint sweep.
    #[allow(clippy::too_many_arguments)]
    fn ode_back(
        &self,
        bound: &Bound,
        v: &[f64],
        call: &OdeCall,
        sh: Sh,
        gk: &[f64],
        before: &mut [f64],
        sens: &crate::ode::Sensitivities,
    ) -> Result<(), Error> {
        let srcs = &call.args;
        let Sh::Mat(t, s) = sh else {
            return Err(Error::internal("an ODE node without its shape"));
        };
        let vals: Vec<Value<f64>> = srcs.iter().map(|x| self.value(bound, v, *x)).collect();
        let adj = DMatrix::from_column_slice(t, s, gk);
        let adjs = sens.vjp(bound, &vals, &adj)?;
        for (x, a) in srcs.iter().zip(adjs) {
            if let (Src::Node(m), Some(a)) = (x, a) {
                let n = &self.nodes[*m];
                let d: &[f64] = match &a {
                    Value::Real(r) => std::slice::from_ref(r),
                    Value::Vector(v) => v.as_slice(),
                    Value::Matrix(m) => m.as_slice(),
                    _ => &[],
                };
                super::run::add_to(before, n, d);
            }
        }
        Ok(())
    }
}

/// Add d(i) for each entry i of a node of `len` entries to the adjoint of
/// its operand `s` (summed when the operand is a number); constants have
/// none.
#[inline(always)]
fn push_back(nodes: &[Node], before: &mut [f64], len: usize, s: Src, d: impl Fn(usize) -> f64) {
    if let Src::Node(m) = s {
        let n = &nodes[m];
        if n.scalar() {
            before[n.off] += (0..len).fold(0.0, |acc, i| acc + d(i));
        } else {
            for (i, gi) in before[n.off..n.off + n.len].iter_mut().enumerate() {
                *gi += d(i);
            }
        }
    }
}
