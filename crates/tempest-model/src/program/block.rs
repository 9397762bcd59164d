//! Block evaluation of a compiled kernel program: one instruction at a time
//! over a block of up to [`BLOCK`](crate::block::BLOCK) Gram entries
//! (structure of arrays), so the per-entry cost is the arithmetic alone, and
//! a reverse pass over the same block that accumulates ∂/∂p for every
//! parameter weighted by the entries' adjoints.
//!
//! Instructions that depend on the parameters only ("uniform", such as
//! `2 * alpha * ell^2`) are computed once per parameter value
//! ([`Prepared`]) and broadcast; their adjoints are summed over the block
//! and pushed back through the uniform instructions once.
#![allow(clippy::needless_range_loop)] // loops over parallel arrays

use super::{Inst, KernelProgram, Side, bin_partials, call_partial_of as call_partial, truth};
use crate::block::BLOCK;
use crate::builtin::{Builtin, call1};
use crate::kernel::Inputs;
use tempest_math::scalar::powi;
use tempest_syntax::ast::BinOp;

/// The inputs of one block: rows `start..start + m` of X (each restricted
/// to `dims`) against one point y.
pub struct BlockRows<'a> {
    /// X, its columns already selected.
    pub x: &'a Inputs,
    /// The first row.
    pub start: usize,
    /// The number of rows.
    pub m: usize,
    /// The (column-selected) point y.
    pub y: &'a [f64],
    /// Σₖ (xₖ − yₖ)² for each row of the block, \[m\].
    pub d2: &'a [f64],
    /// Whether the rows are the kernel's second argument and y its first
    /// (k(y, xₑ) instead of k(xₑ, y)): a Gram matrix's lower-triangle
    /// entries read a column of its upper triangle at a time, which
    /// differ for a kernel that is not symmetric.
    pub swap: bool,
}

/// A program with its parameters bound: the uniform instructions'
/// values, computed once, and the routing of the block reverse pass.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Whether each instruction's value varies from entry to entry.
    varying: Vec<bool>,
    /// Each uniform instruction's value (unused for varying ones).
    uni: Vec<f64>,
    /// Whether each varying slot receives an adjoint in the reverse pass
    /// (the output, or an operand of a reached instruction that passes
    /// one back); the others have a zero adjoint and are skipped.
    reached: Vec<bool>,
    /// Where each operand of each instruction sends its adjoint.
    to: Vec<[To; 3]>,
    /// The adjoint row each varying slot reads in the reverse pass: its
    /// own, or (when its one adjoint comes from a sum with partial 1) its
    /// consumer's, or [`SEED`] for the output's.
    arow: Vec<usize>,
    /// The scratch row of each power instruction's ln(base) (usize::MAX
    /// for other instructions).
    aux: Vec<usize>,
}

/// How an operand's adjoint is delivered in the block reverse pass.
#[derive(Clone, Copy, Debug, PartialEq)]
enum To {
    /// The first contribution to a varying slot: written.
    Assign,
    /// A later contribution to a varying slot: added.
    Add,
    /// A uniform slot: summed over the block into one scalar.
    Sum,
    /// No adjoint (a condition, or an instruction that is not reached).
    Skip,
    /// The operand's only adjoint, with partial 1: it reads the
    /// instruction's own row instead of a copy ([`Prepared::arow`]).
    Alias,
}

/// The row of the seed (the entries' adjoints) in [`Prepared::arow`].
const SEED: usize = usize::MAX;

/// The operand slots that receive adjoints, in the order the reverse
/// pass delivers them.
fn adjoint_operands(inst: &Inst) -> ([usize; 2], usize) {
    match *inst {
        Inst::Neg(a) | Inst::PowI(a, _) | Inst::Call(_, a) => ([a, 0], 1),
        Inst::Select(_, a, b) | Inst::Bin(_, a, b) => ([a, b], 2),
        _ => ([0, 0], 0),
    }
}

impl KernelProgram {
    /// Bind the parameters `p` \[n_params\] for block evaluation.
    pub fn prepare(&self, p: &[f64]) -> Prepared {
        self.prepare_for(p, false)
    }

    /// [`KernelProgram::prepare`] with the adjoints routed to the inputs
    /// as well, for [`KernelProgram::block_input_adjoints`].
    pub fn prepare_inputs(&self, p: &[f64]) -> Prepared {
        self.prepare_for(p, true)
    }

    fn prepare_for(&self, p: &[f64], inputs: bool) -> Prepared {
        let n = self.insts.len();
        let mut varying = vec![false; n];
        for (i, inst) in self.insts.iter().enumerate() {
            varying[i] = match *inst {
                Inst::Const(_) | Inst::Param(_) => false,
                Inst::Sqdist | Inst::Dot(..) | Inst::Input(..) => true,
                Inst::Neg(a) | Inst::Not(a) | Inst::PowI(a, _) | Inst::Call(_, a) => varying[a],
                Inst::Bin(_, a, b) => varying[a] || varying[b],
                Inst::Select(c, a, b) => varying[c] || varying[a] || varying[b],
            };
        }
        // Uniform values: the scalar forward pass with inputs that are never
        // read by a uniform instruction.
        let mut uni = vec![0.0; n];
        self.forward::<f64>(p, &[], &[], &mut uni);
        // The reverse pass visits the reached varying instructions from the
        // last; the first delivery to a slot writes it, later ones add.
        // Slots that do not depend on a parameter need no adjoint.
        let mut param = self.live(&vec![true; self.n_params]);
        if inputs {
            // Every slot that varies from entry to entry depends on an input.
            for (p, v) in param.iter_mut().zip(&varying) {
                *p |= v;
            }
        }
        let mut reached = vec![false; n];
        reached[self.out] = true;
        let mut to = vec![[To::Skip; 3]; n];
        // How many adjoints each varying slot receives.
        let mut count = vec![0usize; n];
        for i in (0..n).rev() {
            if !varying[i] || !reached[i] {
                continue;
            }
            let (ops, k) = adjoint_operands(&self.insts[i]);
            for (slot, t) in ops[..k].iter().zip(to[i].iter_mut()) {
                *t = if !param[*slot] {
                    To::Skip
                } else if !varying[*slot] {
                    To::Sum
                } else if reached[*slot] {
                    count[*slot] += 1;
                    To::Add
                } else {
                    count[*slot] += 1;
                    reached[*slot] = true;
                    To::Assign
                };
            }
        }
        // A slot whose one adjoint is its consumer's own (an operand of a
        // sum, or the left of a difference) reads the consumer's row.
        let mut arow: Vec<usize> = (0..n).collect();
        arow[self.out] = SEED;
        for i in (0..n).rev() {
            if !varying[i] || !reached[i] {
                continue;
            }
            let (ops, k) = adjoint_operands(&self.insts[i]);
            for (side, slot) in ops[..k].iter().enumerate() {
                let unit = match self.insts[i] {
                    Inst::Bin(BinOp::Add, ..) => true,
                    Inst::Bin(BinOp::Sub, ..) => side == 0,
                    _ => false,
                };
                if unit && to[i][side] == To::Assign && count[*slot] == 1 {
                    to[i][side] = To::Alias;
                    arow[*slot] = arow[i];
                }
            }
        }
        let mut aux = vec![usize::MAX; n];
        let mut next = n;
        for (i, inst) in self.insts.iter().enumerate() {
            if matches!(inst, Inst::Bin(BinOp::Pow, ..)) {
                aux[i] = next;
                next += 1;
            }
        }
        Prepared {
            varying,
            uni,
            reached,
            to,
            arow,
            aux,
        }
    }

    /// The number of value slots a block needs: one row of [`BLOCK`]
    /// entries per instruction, one more per power (its ln(base)), and
    /// two spare rows for the reverse pass when there is a power.
    pub fn block_slots(&self) -> usize {
        (self.insts.len() + self.pows() + self.spare_rows()) * BLOCK
    }

    /// Whether the program reads Σₖ (xₖ − yₖ)² (so a block needs
    /// [`BlockRows::d2`]).
    pub fn reads_sqdist(&self) -> bool {
        self.insts.iter().any(|i| matches!(i, Inst::Sqdist))
    }

    /// The number of power instructions.
    fn pows(&self) -> usize {
        self.insts
            .iter()
            .filter(|i| matches!(i, Inst::Bin(BinOp::Pow, ..)))
            .count()
    }

    /// Rows at the end of the slots for a power's partials in the reverse
    /// pass (two when there is a power).
    fn spare_rows(&self) -> usize {
        if self.pows() > 0 { 2 } else { 0 }
    }

    /// Write the uniform instructions' values into their rows of `vals`
    /// \[block_slots\] once, before the first [`KernelProgram::block_forward`]
    /// with these values (which never writes them).
    pub fn block_init(&self, prep: &Prepared, vals: &mut [f64]) {
        for (i, v) in prep.uni.iter().enumerate() {
            if !prep.varying[i] {
                vals[i * BLOCK..(i + 1) * BLOCK].fill(*v);
            }
        }
    }

    /// k for every entry of the block, written to `out` \[m\]; `vals`
    /// \[block_slots\], prepared by [`KernelProgram::block_init`], keeps every
    /// instruction's values for [`KernelProgram::block_backward`].
    #[inline(always)]
    pub fn block_forward(
        &self,
        prep: &Prepared,
        rows: &BlockRows,
        vals: &mut [f64],
        out: &mut [f64],
    ) {
        let m = rows.m;
        let n = self.insts.len();
        let (vals, aux_rows) = vals.split_at_mut(n * BLOCK);
        for (i, inst) in self.insts.iter().enumerate() {
            if !prep.varying[i] {
                continue;
            }
            let (before, rest) = vals.split_at_mut(i * BLOCK);
            let dst = &mut rest[..m];
            let src = |s: usize| &before[s * BLOCK..s * BLOCK + m];
            match *inst {
                Inst::Const(_) | Inst::Param(_) => unreachable_uniform(dst),
                Inst::Sqdist => dst.copy_from_slice(&rows.d2[..m]),
                Inst::Dot(a, b) => {
                    for (e, d) in dst.iter_mut().enumerate() {
                        let xr = rows.x.row(rows.start + e);
                        let pick = |s: Side| {
                            if (s == Side::X) != rows.swap {
                                xr
                            } else {
                                rows.y
                            }
                        };
                        *d = pick(a).iter().zip(pick(b)).map(|(u, v)| u * v).sum();
                    }
                }
                Inst::Input(s, k) => {
                    for (e, d) in dst.iter_mut().enumerate() {
                        let r = if (s == Side::X) != rows.swap {
                            rows.x.row(rows.start + e)
                        } else {
                            rows.y
                        };
                        *d = r.get(k).copied().unwrap_or(f64::NAN);
                    }
                }
                Inst::Neg(a) => dst.iter_mut().zip(src(a)).for_each(|(d, v)| *d = -v),
                Inst::Not(a) => dst
                    .iter_mut()
                    .zip(src(a))
                    .for_each(|(d, v)| *d = truth(*v == 0.0)),
                Inst::PowI(a, k) => dst
                    .iter_mut()
                    .zip(src(a))
                    .for_each(|(d, v)| *d = powi(*v, k)),
                Inst::Call(b, a) => call_block(b, src(a), dst),
                Inst::Select(c, a, b) => {
                    let (c, a, b) = (src(c), src(a), src(b));
                    for e in 0..m {
                        dst[e] = if c[e] != 0.0 { a[e] } else { b[e] };
                    }
                }
                Inst::Bin(BinOp::Pow, a, b) => {
                    let r = prep.aux[i] - n;
                    let ln_u = &mut aux_rows[r * BLOCK..r * BLOCK + m];
                    pow_block(src(a), src(b), ln_u, dst)
                }
                Inst::Bin(BinOp::Div | BinOp::EwDiv, a, b)
                    if !prep.varying[b] && reciprocal(prep.uni[b]).is_some() =>
                {
                    // Division by a uniform value: one reciprocal, then
                    // multiplications.
                    let r = reciprocal(prep.uni[b]).unwrap_or(f64::NAN);
                    dst.iter_mut().zip(src(a)).for_each(|(d, v)| *d = v * r);
                }
                Inst::Bin(op, a, b) => bin_block(op, src(a), src(b), dst),
            }
        }
        out[..m].copy_from_slice(&vals[self.out * BLOCK..self.out * BLOCK + m]);
    }

    /// The reverse pass over a block: with `seed` \[m\] the adjoints of the
    /// entries, adds Σₑ seedₑ ∂kₑ/∂pⱼ to `g[j]` for every parameter.
    /// `vals` comes from [`KernelProgram::block_forward`] on the same
    /// block; `adj` [insts × BLOCK] is scratch.
    ///
    /// Each reached slot's adjoints are written by the first instruction
    /// that passes one back and added to by the later ones (the routing
    /// is fixed in [`Prepared`]), so nothing is cleared; a slot whose only
    /// adjoint passes through a sum unchanged reads its consumer's row,
    /// and the output reads `seed` itself; a uniform slot's adjoint is one
    /// scalar, the sum over the block, kept in the first entry of its row
    /// and pushed back through the uniform instructions once. The loops
    /// are branch-free over the block (a power's slow cases are put right
    /// afterwards), so they vectorise.
    #[inline(always)]
    pub fn block_backward(
        &self,
        prep: &Prepared,
        m: usize,
        seed: &[f64],
        vals: &[f64],
        adj: &mut [f64],
        g: &mut [f64],
    ) {
        let n = self.insts.len();
        let (adj, spare) = adj.split_at_mut(adj.len() - self.spare_rows() * BLOCK);
        for i in 0..n {
            if !prep.varying[i] {
                adj[i * BLOCK] = 0.0;
            }
        }
        let seed = &seed[..m];
        if !prep.varying[self.out] {
            adj[self.out * BLOCK] = tempest_math::vector::sum_by(m, |e| seed[e]);
        }
        let val = |s: usize| &vals[s * BLOCK..s * BLOCK + m];
        for i in (0..n).rev() {
            if !prep.varying[i] || !prep.reached[i] {
                continue;
            }
            let (lo, hi) = adj.split_at_mut(i * BLOCK);
            let ai = match prep.arow[i] {
                SEED => seed,
                r => &hi[(r - i) * BLOCK..(r - i) * BLOCK + m],
            };
            let [ta, tb, _] = prep.to[i];
            let vi = val(i);
            match self.insts[i] {
                Inst::Neg(a) => push(lo, ta, a, ai, vi, vi, |_, _| -1.0),
                Inst::PowI(a, k) => push(lo, ta, a, ai, val(a), vi, |x, _| {
                    if k == 0 {
                        0.0
                    } else {
                        k as f64 * powi(x, k - 1)
                    }
                }),
                Inst::Call(b, a) => match b {
                    Builtin::Exp => push(lo, ta, a, ai, val(a), vi, |_, v| v),
                    Builtin::Log => push(lo, ta, a, ai, val(a), vi, |x, _| 1.0 / x),
                    Builtin::Sqrt => push(lo, ta, a, ai, val(a), vi, |_, v| 0.5 / v),
                    _ => push(lo, ta, a, ai, val(a), vi, |x, v| call_partial(b, x, v)),
                },
                Inst::Select(c, a, b) => {
                    let vc = val(c);
                    push(lo, ta, a, ai, vc, vc, |c, _| truth(c != 0.0));
                    push(lo, tb, b, ai, vc, vc, |c, _| truth(c == 0.0));
                }
                Inst::Bin(op, a, b) => {
                    let (va, vb) = (val(a), val(b));
                    // The common operations with their partials written out;
                    // the rest through the scalar rules.
                    match op {
                        BinOp::Add => {
                            push(lo, ta, a, ai, vi, vi, |_, _| 1.0);
                            push(lo, tb, b, ai, vi, vi, |_, _| 1.0);
                        }
                        BinOp::Sub => {
                            push(lo, ta, a, ai, vi, vi, |_, _| 1.0);
                            push(lo, tb, b, ai, vi, vi, |_, _| -1.0);
                        }
                        BinOp::Mul | BinOp::EwMul => {
                            push(lo, ta, a, ai, vb, vb, |y, _| y);
                            push(lo, tb, b, ai, va, va, |x, _| x);
                        }
                        BinOp::Div | BinOp::EwDiv => match reciprocal(prep.uni[b]) {
                            Some(r) if !prep.varying[b] => {
                                push(lo, ta, a, ai, vi, vi, |_, _| r);
                                push(lo, tb, b, ai, vi, vi, |v, _| -v * r);
                            }
                            _ => {
                                push(lo, ta, a, ai, vb, vb, |y, _| 1.0 / y);
                                push(lo, tb, b, ai, vi, vb, |v, y| -v / y);
                            }
                        },
                        BinOp::Pow => {
                            // ∂/∂a = b·v/a, ∂/∂b = v·ln a, with ln a kept by
                            // the forward pass, where a > 0 and b ≠ 0; the
                            // other entries through the scalar rule after.
                            let ln_a = &vals[prep.aux[i] * BLOCK..prep.aux[i] * BLOCK + m];
                            // Comparisons without short-circuit; the partials
                            // are formed for every entry and the slow ones
                            // zeroed after, so the loops are branch-free and
                            // vectorise.
                            let fast = |e: usize| (va[e] > 0.0) & (vb[e] != 0.0);
                            let (da, db) = spare.split_at_mut(BLOCK);
                            let (da, db) = (&mut da[..m], &mut db[..m]);
                            let (va, vb, vi, ln_a) = (&va[..m], &vb[..m], &vi[..m], &ln_a[..m]);
                            pow_partials(da, db, va, vb, vi, ln_a);
                            let slow = (0..m).fold(0usize, |n, e| n + usize::from(!fast(e))) > 0;
                            if slow {
                                for e in (0..m).filter(|&e| !fast(e)) {
                                    da[e] = 0.0;
                                    db[e] = 0.0;
                                }
                            }
                            push(lo, ta, a, ai, &da[..m], &da[..m], |d, _| d);
                            push(lo, tb, b, ai, &db[..m], &db[..m], |d, _| d);
                            if slow {
                                for e in (0..m).filter(|&e| !fast(e)) {
                                    let (da, db) = bin_partials(op, va[e], vb[e], vi[e]);
                                    fix(lo, ta, a, e, ai[e], da);
                                    fix(lo, tb, b, e, ai[e], db);
                                }
                            }
                        }
                        _ => {
                            push(lo, ta, a, ai, va, vb, |x, y| bin_partials(op, x, y, 0.0).0);
                            push(lo, tb, b, ai, va, vb, |x, y| bin_partials(op, x, y, 0.0).1);
                        }
                    }
                }
                Inst::Const(_)
                | Inst::Param(_)
                | Inst::Sqdist
                | Inst::Dot(..)
                | Inst::Input(..)
                | Inst::Not(_) => {}
            }
        }
        // One scalar reverse pass through the uniform instructions, their
        // adjoints in the first entry of their rows.
        let u = |i: usize| i * BLOCK;
        for i in (0..n).rev() {
            if prep.varying[i] || adj[u(i)] == 0.0 {
                continue;
            }
            let a_i = adj[u(i)];
            let v = &prep.uni;
            match self.insts[i] {
                Inst::Param(k) => g[k] += a_i,
                Inst::Neg(a) => adj[u(a)] -= a_i,
                Inst::PowI(a, k) => {
                    if k != 0 {
                        adj[u(a)] += a_i * k as f64 * powi(v[a], k - 1);
                    }
                }
                Inst::Call(b, a) => adj[u(a)] += a_i * call_partial(b, v[a], v[i]),
                Inst::Select(c, a, b) => {
                    if v[c] != 0.0 {
                        adj[u(a)] += a_i;
                    } else {
                        adj[u(b)] += a_i;
                    }
                }
                Inst::Bin(op, a, b) => {
                    let (da, db) = bin_partials(op, v[a], v[b], v[i]);
                    adj[u(a)] += a_i * da;
                    adj[u(b)] += a_i * db;
                }
                Inst::Const(_) | Inst::Sqdist | Inst::Dot(..) | Inst::Input(..) | Inst::Not(_) => {}
            }
        }
    }
}

impl KernelProgram {
    /// After [`KernelProgram::block_backward`] on a block, with `prep` from
    /// [`KernelProgram::prepare_inputs`]: adds Σ seedₑ ∂kₑ/∂xₑ to row e of
    /// `gx` [m × D, row-major] (the block's rows, when given) and
    /// Σₑ seedₑ ∂kₑ/∂y to `gy` \[D\] (the block's one point), by the rules
    /// of the instructions that read the inputs (those of
    /// [`KernelProgram::eval_grad_inputs`]); `rows.swap` says which of the
    /// kernel's arguments the rows are. Coordinates past the end of a row
    /// are skipped.
    pub fn block_input_adjoints(
        &self,
        prep: &Prepared,
        rows: &BlockRows,
        seed: &[f64],
        adj: &[f64],
        mut gx: Option<&mut [f64]>,
        gy: &mut [f64],
    ) {
        let (m, d) = (rows.m, rows.y.len());
        let row = |e: usize| rows.x.row(rows.start + e);
        // Whether an input side is the block's rows (else its point).
        let is_rows = |s: Side| (s == Side::X) != rows.swap;
        for (i, inst) in self.insts.iter().enumerate() {
            if !prep.varying[i] || !prep.reached[i] {
                continue;
            }
            let ai = match prep.arow[i] {
                SEED => &seed[..m],
                r => &adj[r * BLOCK..r * BLOCK + m],
            };
            match *inst {
                Inst::Input(s, k) if k < d => {
                    if is_rows(s) {
                        if let Some(gx) = gx.as_deref_mut() {
                            for (e, a) in ai.iter().enumerate() {
                                gx[e * d + k] += a;
                            }
                        }
                    } else {
                        gy[k] += ai.iter().sum::<f64>();
                    }
                }
                Inst::Sqdist => {
                    for (e, a) in ai.iter().enumerate() {
                        let xr = row(e);
                        for k in 0..d {
                            let t = 2.0 * a * (xr[k] - rows.y[k]);
                            if let Some(gx) = gx.as_deref_mut() {
                                gx[e * d + k] += t;
                            }
                            gy[k] -= t;
                        }
                    }
                }
                Inst::Dot(sa, sb) => {
                    for (e, a) in ai.iter().enumerate() {
                        let xr = row(e);
                        let pick = |s: Side| if is_rows(s) { xr } else { rows.y };
                        for (side, other) in [(sa, pick(sb)), (sb, pick(sa))] {
                            if is_rows(side) {
                                if let Some(gx) = gx.as_deref_mut() {
                                    for k in 0..d {
                                        gx[e * d + k] += a * other[k];
                                    }
                                }
                            } else {
                                for k in 0..d {
                                    gy[k] += a * other[k];
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// 1/b where multiplying by it is as good as dividing by b (b finite,
/// normal and its reciprocal normal); `None` otherwise.
#[inline(always)]
fn reciprocal(b: f64) -> Option<f64> {
    let r = 1.0 / b;
    (b.is_normal() && r.is_normal()).then_some(r)
}

/// Delivers aᵢ[e] · ∂(xₑ, yₑ) to the operand in slot `s` as `to` says,
/// over the entries with a non-zero adjoint (a partial that is not
/// finite where the adjoint is zero, as in the branch an `if` did not
/// take, never reaches a derivative). `x` and `y` are the block's
/// values the partial needs (\[m\] or longer); the loop is branch-free.
#[inline(always)]
fn push(
    adj: &mut [f64],
    to: To,
    s: usize,
    ai: &[f64],
    x: &[f64],
    y: &[f64],
    d: impl Fn(f64, f64) -> f64,
) {
    let m = ai.len();
    let term = |w: f64, x: f64, y: f64| {
        let t = w * d(x, y);
        if w != 0.0 { t } else { 0.0 }
    };
    match to {
        To::Assign => {
            let dst = &mut adj[s * BLOCK..s * BLOCK + m];
            for (((o, w), x), y) in dst.iter_mut().zip(ai).zip(&x[..m]).zip(&y[..m]) {
                *o = term(*w, *x, *y);
            }
        }
        To::Add => {
            let dst = &mut adj[s * BLOCK..s * BLOCK + m];
            for (((o, w), x), y) in dst.iter_mut().zip(ai).zip(&x[..m]).zip(&y[..m]) {
                *o += term(*w, *x, *y);
            }
        }
        To::Sum => adj[s * BLOCK] += tempest_math::vector::sum_zip3(ai, x, y, term),
        To::Skip | To::Alias => {}
    }
}

/// A power's partials over a block, ∂/∂a = b·v/a into `da` and
/// ∂/∂b = v·ln a into `db` (all \[m\]). A function of its own so that
/// its slices are known not to overlap: written inline, where `da` and
/// `db` are carved from the same scratch as the loop runs, the loop was
/// compiled one entry at a time.
#[inline(always)]
fn pow_partials(da: &mut [f64], db: &mut [f64], va: &[f64], vb: &[f64], vi: &[f64], ln_a: &[f64]) {
    let m = da.len();
    let (db, va, vb, vi, ln_a) = (&mut db[..m], &va[..m], &vb[..m], &vi[..m], &ln_a[..m]);
    for e in 0..m {
        da[e] = vb[e] * vi[e] / va[e];
        db[e] = vi[e] * ln_a[e];
    }
}

/// Adds entry e's term w · d to what [`push`] delivered to slot `s` with
/// a zero partial there (a power's slow cases).
fn fix(adj: &mut [f64], to: To, s: usize, e: usize, w: f64, d: f64) {
    if w == 0.0 {
        return;
    }
    match to {
        To::Assign | To::Add => adj[s * BLOCK + e] += w * d,
        To::Sum => adj[s * BLOCK] += w * d,
        To::Skip | To::Alias => {}
    }
}

/// Const and Param are always uniform.
fn unreachable_uniform(dst: &mut [f64]) {
    dst.fill(f64::NAN);
}

/// An element-wise built-in over a block.
#[inline(always)]
fn call_block(b: Builtin, a: &[f64], dst: &mut [f64]) {
    match b {
        Builtin::Exp => {
            dst.copy_from_slice(&a[..dst.len()]);
            tempest_math::vector::exp_in_place(dst);
        }
        Builtin::Sin | Builtin::Cos => {
            let mut other = [0.0; crate::block::BLOCK];
            for (d, o) in dst.chunks_mut(other.len()).zip(a.chunks(other.len())) {
                d.copy_from_slice(&o[..d.len()]);
                let cos = &mut other[..d.len()];
                tempest_math::vector::sin_cos_in_place(d, cos);
                if b == Builtin::Cos {
                    d.copy_from_slice(cos);
                }
            }
        }
        Builtin::Log => {
            dst.copy_from_slice(&a[..dst.len()]);
            tempest_math::vector::ln_in_place(dst);
        }
        Builtin::Sqrt => dst.iter_mut().zip(a).for_each(|(d, v)| *d = v.sqrt()),
        _ => dst
            .iter_mut()
            .zip(a)
            .for_each(|(d, v)| *d = call1::<f64>(b, *v)),
    }
}

/// A binary operation over a block, with the scalar program's rules.
#[inline(always)]
fn bin_block(op: BinOp, a: &[f64], b: &[f64], dst: &mut [f64]) {
    let m = dst.len();
    let (a, b) = (&a[..m], &b[..m]);
    match op {
        BinOp::Add => (0..m).for_each(|e| dst[e] = a[e] + b[e]),
        BinOp::Sub => (0..m).for_each(|e| dst[e] = a[e] - b[e]),
        BinOp::Mul | BinOp::EwMul => (0..m).for_each(|e| dst[e] = a[e] * b[e]),
        BinOp::Div | BinOp::EwDiv => (0..m).for_each(|e| dst[e] = a[e] / b[e]),
        BinOp::Pow => pow_block(a, b, &mut [0.0; BLOCK][..m], dst),
        test => (0..m).for_each(|e| dst[e] = truth(test.holds(a[e], b[e]) == Some(true))),
    }
}

/// The largest |w·ln u| for which [`pow_block`] takes e^(w·ln u): the
/// rounding of w·ln u is amplified |w·ln u|-fold, so up to this bound the
/// result is within about 40 ulp of `powf`; beyond it, `powf` itself.
const POW_EXP_LIMIT: f64 = 32.0;

/// uᵂ over a block, with ln u written to `ln_u` [m] for the reverse
/// pass: for a positive finite base with |w·ln u| ≤ [`POW_EXP_LIMIT`],
/// e^(w·ln u) with the vectorised logarithm and exponential
/// ([`tempest_math::vector::ln_in_place`],
/// [`tempest_math::vector::exp_in_place`]);
/// otherwise the scalar program's rule ([`crate::builtin::pow`]), so signs,
/// zeros, subnormals and infinities follow it exactly.
#[inline(always)]
fn pow_block(a: &[f64], b: &[f64], ln_u: &mut [f64], dst: &mut [f64]) {
    let m = dst.len();
    ln_u[..m].copy_from_slice(&a[..m]);
    tempest_math::vector::ln_in_place(&mut ln_u[..m]);
    let mut slow = false;
    let inf = tempest_math::vector::opaque_inf();
    // Comparisons only (NaN fails them), so the loop vectorises.
    let fast = |u: f64, t: f64| (u > 0.0) & (u < inf) & (t.abs() <= POW_EXP_LIMIT);
    for e in 0..m {
        let (u, t) = (a[e], b[e] * ln_u[e]);
        let ok = fast(u, t);
        dst[e] = if ok { t } else { 0.0 };
        slow |= !ok;
    }
    tempest_math::vector::exp_in_place(dst);
    if slow {
        for e in 0..m {
            let (u, w) = (a[e], b[e]);
            if !fast(u, w * ln_u[e]) {
                dst[e] = crate::builtin::pow(u, w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pow_block;

    /// The block power agrees with `powf` within 40 ulp (unscaled) where
    /// it takes e^(w·ln u), and is `powf` itself (bit for bit) beyond, for
    /// bases that are not positive, infinities, NaN and subnormal results.
    #[test]
    fn the_block_power_matches_powf() {
        let mut worst: f64 = 0.0;
        for i in 0..4000 {
            let u: Vec<f64> = (0..7).map(|k| 1.0 + (i * 7 + k) as f64 * 0.37).collect();
            let w: Vec<f64> = (0..7).map(|k| -3.0 + (i % 13 + k) as f64 * 0.41).collect();
            let mut out = vec![0.0; 7];
            pow_block(&u, &w, &mut vec![0.0; u.len()], &mut out);
            for k in 0..7 {
                let want = u[k].powf(w[k]);
                worst = worst.max(((out[k] - want) / want).abs());
            }
        }
        assert!(worst < 40.0 * f64::EPSILON, "relative error {worst:e}");
        let u = [
            0.0,
            -2.0,
            -2.0,
            f64::INFINITY,
            f64::NAN,
            2.0,
            0.5,
            1e-300,
            1e-3,
            7.0,
        ];
        let w = [
            -0.5,
            3.0,
            0.5,
            -1.0,
            2.0,
            f64::INFINITY,
            800.0,
            2.0,
            105.0,
            40.0,
        ];
        let mut out = [0.0; 10];
        pow_block(&u, &w, &mut vec![0.0; u.len()], &mut out);
        for k in 0..10 {
            let want = crate::builtin::pow(u[k], w[k]);
            assert!(
                out[k].to_bits() == want.to_bits() || (out[k].is_nan() && want.is_nan()),
                "{}^{} = {} (powf {want})",
                u[k],
                w[k],
                out[k]
            );
        }
    }
}
