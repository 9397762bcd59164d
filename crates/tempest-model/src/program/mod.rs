//! Compiled programs: a kernel or likelihood written in the model file,
//! compiled once (at lowering, by `tempest::ir::program`) into a flat list
//! of scalar instructions over its parameters and its two input rows,
//! evaluated per Gram entry without interpreting expressions or
//! allocating, and with a reverse pass that gives the derivatives with
//! respect to every parameter at a small constant multiple of one
//! evaluation.
//!
//! The program is in SSA form: instruction i writes slot i, and a `let`
//! is the slot of its value. An `if` evaluates both branches and selects
//! one; the reverse pass skips instructions whose adjoint is zero, so a
//! non-finite value in the branch not taken never reaches a derivative.
//! The partial derivative of each element-wise built-in comes from one
//! forward-mode dual evaluation of the same definition the interpreter
//! uses ([`call1`]), so both give the same numbers.
//!
//! The same reverse pass also gives the derivatives with respect to every
//! coordinate of both inputs ([`KernelProgram::eval_grad_inputs`]).

mod block;
mod inputs;

pub use block::{BlockRows, Prepared};

use crate::builtin::{Builtin, call1, pow};
use crate::custom::Scalar;
use std::mem::MaybeUninit;
use tempest_math::scalar::{Dual1, RealExt, powi};
use tempest_syntax::ast::BinOp;

/// Which inputs an input instruction reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The kernel's first input x.
    X,
    /// The kernel's second input x′.
    Y,
}

/// One instruction; instruction i writes slot i and its operands are
/// earlier slots.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// A constant.
    Const(f64),
    /// The k-th scalar parameter.
    Param(usize),
    /// Σₖ (xₖ − yₖ)².
    Sqdist,
    /// Σₖ aₖ bₖ for two of the inputs.
    Dot(Side, Side),
    /// One coordinate of an input.
    Input(Side, usize),
    /// −a.
    Neg(usize),
    /// Logical not: 1 when a is 0, else 0.
    Not(usize),
    /// A binary operation (arithmetic, or a comparison or logic giving 1 or 0).
    Bin(BinOp, usize, usize),
    /// aᵏ for a constant integer k.
    PowI(usize, i32),
    /// An element-wise built-in of one operand.
    Call(Builtin, usize),
    /// `if c then a else b`.
    Select(usize, usize, usize),
}

/// A compiled kernel: k(x, x′) from its scalar parameters.
#[derive(Clone, Debug)]
pub struct KernelProgram {
    insts: Vec<Inst>,
    out: usize,
    n_params: usize,
    /// The length its inputs must have (a body that reads them
    /// coordinate by coordinate where they meet a vector parameter).
    input_len: Option<usize>,
}

/// Slots of up to this many instructions live on the stack.
const STACK_SLOTS: usize = 64;

/// A short program's slots: few enough that zeroing them costs little next
/// to one evaluation (a likelihood is evaluated per point and per
/// quadrature node, often in dual numbers).
const SHORT_SLOTS: usize = 16;

/// The partial derivatives (∂/∂a, ∂/∂b) of a binary operation at (a, b)
/// with value v.
pub fn bin_partials(op: BinOp, a: f64, b: f64, v: f64) -> (f64, f64) {
    match op {
        BinOp::Add => (1.0, 1.0),
        BinOp::Sub => (1.0, -1.0),
        BinOp::Mul | BinOp::EwMul => (b, a),
        BinOp::Div | BinOp::EwDiv => (1.0 / b, -a / (b * b)),
        BinOp::Pow => {
            let da = if b == 0.0 { 0.0 } else { b * a.powf(b - 1.0) };
            let db = if a > 0.0 { v * a.ln() } else { 0.0 };
            (da, db)
        }
        _ => (0.0, 0.0),
    }
}

/// d b(a)/da at a, with v = b(a): closed forms for the common built-ins,
/// one dual evaluation of the same definition for the rest.
pub fn call_partial_of(b: Builtin, a: f64, v: f64) -> f64 {
    match b {
        Builtin::Exp => v,
        Builtin::Log => 1.0 / a,
        Builtin::Sqrt => 0.5 / v,
        _ => call1(b, Dual1::new(a, [1.0])).tangent()[0],
    }
}

fn truth(x: bool) -> f64 {
    if x { 1.0 } else { 0.0 }
}

/// A binary operation on two scalars of a program (arithmetic, or a
/// comparison or logic giving 1 or 0), in any scalar type: the one
/// definition kernel, likelihood and system programs share.
#[inline]
pub fn bin_value<T: Scalar>(op: BinOp, u: T, w: T) -> T {
    match op {
        BinOp::Add => u + w,
        BinOp::Sub => u - w,
        BinOp::Mul | BinOp::EwMul => u * w,
        BinOp::Div | BinOp::EwDiv => u / w,
        BinOp::Pow => pow(u, w),
        test => T::constant(truth(
            test.holds(u.to_constant(), w.to_constant()) == Some(true),
        )),
    }
}

/// A logical not of a program's scalar (1 when it is 0).
#[inline]
pub fn not_value<T: Scalar>(a: T) -> T {
    T::constant(truth(a.to_constant() == 0.0))
}

impl Inst {
    /// Whether it is element-wise: `Neg`, `Not`, `Bin`, `PowI`, `Call` or
    /// `Select`, an instruction that reads other values only (no
    /// constant, parameter or input). These are the part of the one
    /// instruction set that the samplers' density program
    /// (`tempest_ir::logdensity`) applies entry by entry over vectors, its
    /// operands numbered 0, 1, 2 in the node's list instead of slots.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Inst::Neg(_)
                | Inst::Not(_)
                | Inst::Bin(..)
                | Inst::PowI(..)
                | Inst::Call(..)
                | Inst::Select(..)
        )
    }

    /// The value of an element-wise instruction in any scalar type, with
    /// operand `a` read as `at(a)`; `None` for the others. The one
    /// definition every compiled program evaluates: kernels, likelihoods
    /// and ODE systems per slot, the samplers' density program per entry.
    #[inline(always)]
    pub fn elem_value<T: Scalar>(&self, at: impl Fn(usize) -> T) -> Option<T> {
        self.is_elementwise().then(|| self.elem(at))
    }

    /// [`Inst::elem_value`] of an element-wise instruction (0 for the
    /// others, which callers handle first).
    #[inline(always)]
    fn elem<T: Scalar>(&self, at: impl Fn(usize) -> T) -> T {
        match *self {
            Inst::Neg(a) => -at(a),
            Inst::Not(a) => not_value(at(a)),
            Inst::PowI(a, k) => RealExt::powi_exact(at(a), k),
            Inst::Call(b, a) => {
                let u = at(a);
                // A constant argument (a function of data or of the
                // outcome alone) needs no derivative.
                if u.is_constant() {
                    T::constant(call1(b, u.to_constant()))
                } else {
                    call1(b, u)
                }
            }
            Inst::Select(c, a, b) => {
                if at(c).to_constant() != 0.0 {
                    at(a)
                } else {
                    at(b)
                }
            }
            Inst::Bin(op, a, b) => bin_value(op, at(a), at(b)),
            Inst::Const(_) | Inst::Param(_) | Inst::Sqdist | Inst::Dot(..) | Inst::Input(..) => {
                T::zero()
            }
        }
    }

    /// The partial derivatives of an element-wise instruction whose value
    /// is `v`, its operand `a` read as `at(a)`: the operands that carry an
    /// adjoint, each with ∂value/∂operand (the first `n` of the pairs).
    /// A condition, a logical not and a comparison carry none. The rule
    /// of every compiled program's reverse pass: the density program's
    /// element-wise nodes call it (or, for arithmetic and built-ins, the
    /// same `bin_partials` and `call_partial_of` in loops of their own),
    /// and the scalar programs' reverse pass matches the same rules
    /// directly (checked equal in a unit test).
    #[inline(always)]
    pub fn elem_partials(&self, at: impl Fn(usize) -> f64, v: f64) -> ([(usize, f64); 2], usize) {
        match *self {
            Inst::Neg(a) => ([(a, -1.0), (a, 0.0)], 1),
            Inst::PowI(a, k) if k != 0 => ([(a, k as f64 * powi(at(a), k - 1)), (a, 0.0)], 1),
            Inst::Call(b, a) => ([(a, call_partial_of(b, at(a), v)), (a, 0.0)], 1),
            Inst::Select(c, a, b) => {
                let taken = if at(c) != 0.0 { a } else { b };
                ([(taken, 1.0), (taken, 0.0)], 1)
            }
            Inst::Bin(op, a, b) => {
                let (da, db) = bin_partials(op, at(a), at(b), v);
                ([(a, da), (b, db)], 2)
            }
            _ => ([(0, 0.0), (0, 0.0)], 0),
        }
    }
}

impl KernelProgram {
    /// A program from its instructions, the slot of its output and its
    /// number of parameters, or `None` when an operand is not an earlier
    /// slot, a parameter index is out of range or the output is no slot
    /// (the form [`Inst`] states; the compiler, `tempest::ir::program`,
    /// produces only such programs).
    pub fn new(insts: Vec<Inst>, out: usize, n_params: usize) -> Option<KernelProgram> {
        let earlier = |i: usize, ops: &[usize]| ops.iter().all(|&a| a < i);
        let ok = insts.iter().enumerate().all(|(i, inst)| match *inst {
            Inst::Param(k) => k < n_params,
            Inst::Const(_) | Inst::Sqdist | Inst::Dot(..) | Inst::Input(..) => true,
            Inst::Neg(a) | Inst::Not(a) | Inst::PowI(a, _) | Inst::Call(_, a) => earlier(i, &[a]),
            Inst::Bin(_, a, b) => earlier(i, &[a, b]),
            Inst::Select(c, a, b) => earlier(i, &[c, a, b]),
        });
        (ok && out < insts.len()).then_some(KernelProgram {
            insts,
            out,
            n_params,
            input_len: None,
        })
    }

    /// The same program, for inputs of length `len` only: its body reads
    /// them coordinate by coordinate up to `len` (unrolled where they
    /// meet a vector of that length), so a kernel on it refuses inputs of
    /// any other length ([`KernelProgram::input_len`]).
    pub fn with_input_len(mut self, len: usize) -> KernelProgram {
        self.input_len = Some(len);
        self
    }

    /// The length its inputs must have, when it was compiled for one
    /// ([`KernelProgram::with_input_len`]); `None` for any length.
    pub fn input_len(&self) -> Option<usize> {
        self.input_len
    }

    /// The number of parameters.
    pub fn n_params(&self) -> usize {
        self.n_params
    }

    /// The number of instructions (slots of [`KernelProgram::run`]).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    /// Every slot's value into `vals` (one per instruction, its first
    /// [`KernelProgram::len`] used) for a program with parameters `p` and
    /// no inputs, in any scalar type: the form of a program with several
    /// outputs (an ODE system's right-hand side), whose caller reads the
    /// slots it needs. Allocates nothing.
    pub fn run<T: Scalar>(&self, p: &[T], vals: &mut [T]) {
        let n = self.insts.len();
        self.forward(p, &[], &[], &mut vals[..n]);
    }

    fn input_value(side: (Side, Side), x: &[f64], y: &[f64]) -> f64 {
        let pick = |s: Side| if s == Side::X { x } else { y };
        let (a, b) = (pick(side.0), pick(side.1));
        a.iter().zip(b).map(|(u, v)| u * v).sum()
    }

    /// Run the forward pass into `vals` (one per instruction).
    fn forward<T: Scalar>(&self, p: &[T], x: &[f64], y: &[f64], vals: &mut [T]) {
        // SAFETY: `MaybeUninit<T>` has `T`'s layout, every `T` is a valid
        // `MaybeUninit<T>`, and `forward_into` writes only initialised
        // values, so `vals` holds valid `T`s afterwards.
        let slots = unsafe { &mut *(vals as *mut [T] as *mut [MaybeUninit<T>]) };
        self.forward_into(p, x, y, slots);
    }

    /// The forward pass into slots that need not be initialised: slot i is
    /// written at step i, from earlier slots only, so a short program's
    /// scratch on the machine stack is not zeroed first. `vals` has one
    /// slot per instruction.
    fn forward_into<T: Scalar>(&self, p: &[T], x: &[f64], y: &[f64], vals: &mut [MaybeUninit<T>]) {
        assert_eq!(vals.len(), self.insts.len(), "one slot per instruction");
        let base = vals.as_mut_ptr();
        for (i, inst) in self.insts.iter().enumerate() {
            // SAFETY: `KernelProgram::new` admits only programs whose
            // operands are earlier slots (a < i < vals.len()), and slots
            // 0..i were written at steps 0..i, so `a` is in bounds and
            // initialised.
            let at = |a: usize| unsafe { (*base.add(a)).assume_init() };
            let v = match *inst {
                Inst::Const(c) => T::constant(c),
                Inst::Param(k) => p[k],
                Inst::Sqdist => T::constant(x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()),
                Inst::Dot(a, b) => T::constant(Self::input_value((a, b), x, y)),
                Inst::Input(s, k) => {
                    let row = if s == Side::X { x } else { y };
                    T::constant(row.get(k).copied().unwrap_or(f64::NAN))
                }
                // Every other instruction is element-wise.
                _ => inst.elem(at),
            };
            // SAFETY: i < vals.len() (one slot per instruction).
            unsafe { (*base.add(i)).write(v) };
        }
    }

    /// k(x, y) with parameters `p`, in any scalar type (duals carry the
    /// parameters' tangents through).
    pub fn eval<T: Scalar>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let n = self.insts.len();
        if n <= SHORT_SLOTS {
            self.eval_in::<T, SHORT_SLOTS>(p, x, y)
        } else if n <= 2 * SHORT_SLOTS {
            self.eval_in::<T, { 2 * SHORT_SLOTS }>(p, x, y)
        } else if n <= STACK_SLOTS {
            self.eval_in::<T, STACK_SLOTS>(p, x, y)
        } else {
            let mut vals = vec![T::zero(); n];
            self.forward(p, x, y, &mut vals);
            vals[self.out]
        }
    }

    /// [`KernelProgram::eval`] with its slots in an array of K on the
    /// machine stack, left uninitialised (K ≥ the number of instructions).
    fn eval_in<T: Scalar, const K: usize>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let n = self.insts.len();
        let mut vals = [const { MaybeUninit::<T>::uninit() }; K];
        self.forward_into(p, x, y, &mut vals[..n]);
        // SAFETY: `out` < n (checked by `KernelProgram::new`) and the
        // forward pass wrote every slot below n.
        unsafe { vals[self.out].assume_init() }
    }

    /// A likelihood program ([`KernelProgram::new`] over the outcome and
    /// the other parameters, no inputs) at outcome `y` and parameters
    /// `args`, in any scalar type: log p(y | args). Allocates nothing for
    /// up to 16 parameters and 64 instructions.
    pub fn eval_likelihood<T: Scalar>(&self, y: T, args: &[T]) -> T {
        let k = args.len() + 1;
        if k <= SHORT_SLOTS {
            let mut p = [T::zero(); SHORT_SLOTS];
            p[0] = y;
            p[1..k].copy_from_slice(args);
            self.eval(&p[..k], &[], &[])
        } else {
            let mut p = Vec::with_capacity(k);
            p.push(y);
            p.extend_from_slice(args);
            self.eval(&p, &[], &[])
        }
    }

    /// k(x, y) and ∂k/∂pⱼ for every parameter, written into `g` \[n_params\],
    /// by one forward and one reverse pass.
    pub fn eval_grad(&self, p: &[f64], x: &[f64], y: &[f64], g: &mut [f64]) -> f64 {
        self.grad(p, x, y, g, None, None)
    }

    /// The forward and reverse passes ([`KernelProgram::grad_with`]) with
    /// their scratch on the machine stack for programs of up to
    /// [`STACK_SLOTS`] instructions (a short one for small programs, so
    /// little is zeroed per call), on the heap beyond.
    fn grad(
        &self,
        p: &[f64],
        x: &[f64],
        y: &[f64],
        g: &mut [f64],
        inputs: Option<(&mut [f64], &mut [f64])>,
        live: Option<&[bool]>,
    ) -> f64 {
        const SHORT: usize = 16;
        let n = self.insts.len();
        if n <= SHORT {
            let (mut vals, mut adj) = ([0.0; SHORT], [0.0; SHORT]);
            self.grad_with(p, x, y, g, inputs, live, &mut vals[..n], &mut adj[..n])
        } else if n <= STACK_SLOTS {
            let (mut vals, mut adj) = ([0.0; STACK_SLOTS], [0.0; STACK_SLOTS]);
            self.grad_with(p, x, y, g, inputs, live, &mut vals[..n], &mut adj[..n])
        } else {
            let (mut vals, mut adj) = (vec![0.0; n], vec![0.0; n]);
            self.grad_with(p, x, y, g, inputs, live, &mut vals, &mut adj)
        }
    }

    /// Which slots depend on a parameter flagged in `need` \[n_params\]:
    /// the slots [`KernelProgram::value_grad`] passes adjoints through.
    pub fn live(&self, need: &[bool]) -> Vec<bool> {
        let mut live = vec![false; self.insts.len()];
        for (i, inst) in self.insts.iter().enumerate() {
            live[i] = match *inst {
                Inst::Param(k) => need.get(k).copied().unwrap_or(false),
                Inst::Const(_) | Inst::Sqdist | Inst::Dot(..) | Inst::Input(..) | Inst::Not(_) => {
                    false
                }
                Inst::Neg(a) | Inst::PowI(a, _) | Inst::Call(_, a) => live[a],
                Inst::Bin(_, a, b) | Inst::Select(_, a, b) => live[a] || live[b],
            };
        }
        live
    }

    /// f(p) for a program without inputs (a likelihood,
    /// compiled by `tempest_ir::program::compile_likelihood`) and ∂f/∂pⱼ written into `g`
    /// \[n_params\] for the parameters flagged in the `live` mask of
    /// [`KernelProgram::live`] (0 for the others), by one forward pass in
    /// f64 and one reverse pass over the live slots only: a term of data
    /// alone, such as lgamma(y + 1) of an observed outcome, costs its
    /// value and no derivative. No allocation for programs of up to 64
    /// instructions.
    pub fn value_grad(&self, p: &[f64], live: &[bool], g: &mut [f64]) -> f64 {
        self.grad(p, &[], &[], g, None, Some(live))
    }

    /// The forward and reverse passes: ∂k/∂p written to `g`, and with
    /// `inputs` = (gx, gy), ∂k/∂x and ∂k/∂y added to them. With a `live`
    /// mask ([`KernelProgram::live`]) the reverse pass visits only the
    /// live slots.
    #[allow(clippy::too_many_arguments)]
    fn grad_with(
        &self,
        p: &[f64],
        x: &[f64],
        y: &[f64],
        g: &mut [f64],
        inputs: Option<(&mut [f64], &mut [f64])>,
        live: Option<&[bool]>,
        vals: &mut [f64],
        adj: &mut [f64],
    ) -> f64 {
        self.forward(p, x, y, vals);
        g.iter_mut().for_each(|v| *v = 0.0);
        let visit = |i: usize| live.is_none_or(|l| l[i]);
        if !visit(self.out) {
            return vals[self.out];
        }
        adj.iter_mut().for_each(|v| *v = 0.0);
        adj[self.out] = 1.0;
        self.reverse(x, y, g, inputs, live, vals, adj);
        vals[self.out]
    }

    /// Every slot's value into `vals` and, with the weights `w[i]` of the
    /// slots `outs[i]`, Σᵢ wᵢ ∂slotᵢ/∂pⱼ added to `g` \[n_params\]: one
    /// forward and one reverse pass from several outputs at once, for a
    /// program without inputs (an ODE system's right-hand side, whose
    /// vector–Jacobian product this is). `vals` and `adj` are scratch of
    /// [`KernelProgram::len`] slots. Allocates nothing.
    pub fn run_vjp(
        &self,
        p: &[f64],
        outs: &[usize],
        w: &[f64],
        vals: &mut [f64],
        adj: &mut [f64],
        g: &mut [f64],
    ) {
        let n = self.insts.len();
        self.forward(p, &[], &[], &mut vals[..n]);
        let adj = &mut adj[..n];
        adj.iter_mut().for_each(|v| *v = 0.0);
        for (&o, &wi) in outs.iter().zip(w) {
            adj[o] += wi;
        }
        self.reverse(&[], &[], g, None, None, &vals[..n], adj);
    }

    /// The reverse pass over slot adjoints `adj` already seeded, adding
    /// ∂/∂p into `g` (and with `inputs`, ∂/∂x, ∂/∂y into them), visiting
    /// only the `live` slots when given.
    #[allow(clippy::too_many_arguments)]
    fn reverse(
        &self,
        x: &[f64],
        y: &[f64],
        g: &mut [f64],
        mut inputs: Option<(&mut [f64], &mut [f64])>,
        live: Option<&[bool]>,
        vals: &[f64],
        adj: &mut [f64],
    ) {
        let visit = |i: usize| live.is_none_or(|l| l[i]);
        for i in (0..self.insts.len()).rev() {
            let a_i = adj[i];
            if a_i == 0.0 || !visit(i) {
                continue;
            }
            // The element-wise rules are `Inst::elem_partials`'s, matched
            // here directly: through it, the roaches model-file
            // likelihoods' gradients measured 6–7 % slower (benches/mcmc.rs).
            match self.insts[i] {
                Inst::Param(k) => g[k] += a_i,
                Inst::Neg(a) => adj[a] -= a_i,
                Inst::PowI(a, k) => {
                    if k != 0 {
                        adj[a] += a_i * k as f64 * powi(vals[a], k - 1);
                    }
                }
                Inst::Call(b, a) => adj[a] += a_i * call_partial_of(b, vals[a], vals[i]),
                Inst::Select(c, a, b) => {
                    if vals[c] != 0.0 {
                        adj[a] += a_i;
                    } else {
                        adj[b] += a_i;
                    }
                }
                Inst::Bin(op, a, b) => {
                    let (da, db) = bin_partials(op, vals[a], vals[b], vals[i]);
                    adj[a] += a_i * da;
                    adj[b] += a_i * db;
                }
                Inst::Sqdist | Inst::Dot(..) | Inst::Input(..) => {
                    if let Some((gx, gy)) = &mut inputs {
                        inputs::push_input_adjoint(&self.insts[i], a_i, x, y, gx, gy);
                    }
                }
                Inst::Const(_) | Inst::Not(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempest_math::scalar::Dual1;
    use tempest_syntax::ast::BinOp::{Add, Mul};

    #[test]
    fn a_program_must_read_only_earlier_slots_and_its_own_parameters() {
        let ok = vec![Inst::Param(0), Inst::Const(2.0), Inst::Bin(Mul, 0, 1)];
        assert!(KernelProgram::new(ok.clone(), 2, 1).is_some());
        // An operand that is not an earlier slot, a parameter beyond the
        // count, an output past the end.
        let later = vec![Inst::Param(0), Inst::Bin(Add, 0, 2), Inst::Const(1.0)];
        assert!(KernelProgram::new(later, 1, 1).is_none());
        assert!(KernelProgram::new(vec![Inst::Param(1)], 0, 1).is_none());
        assert!(KernelProgram::new(ok, 3, 1).is_none());
        assert!(KernelProgram::new(vec![Inst::Neg(0)], 0, 0).is_none());
    }

    /// The one element-wise rule: for every element-wise instruction,
    /// `elem_partials` against central differences of `elem_value`, and
    /// the scalar program's reverse pass gives the same partials.
    #[test]
    fn element_partials_match_differences_of_element_values() {
        use crate::builtin::Builtin::{Exp, Lgamma, Log1p, Tanh};
        use tempest_syntax::ast::BinOp::{Div, Gt, Pow, Sub};
        let at = [0.7, 1.3, -0.4];
        let cases = [
            Inst::Neg(0),
            Inst::Bin(Add, 0, 1),
            Inst::Bin(Sub, 2, 0),
            Inst::Bin(Mul, 1, 2),
            Inst::Bin(Div, 0, 2),
            Inst::Bin(Pow, 1, 0),
            Inst::PowI(2, 3),
            Inst::Call(Exp, 2),
            Inst::Call(Log1p, 0),
            Inst::Call(Lgamma, 1),
            Inst::Call(Tanh, 2),
            Inst::Select(0, 1, 2),
            Inst::Select(2, 1, 0),
            Inst::Bin(Gt, 0, 1),
            Inst::Not(2),
        ];
        for inst in &cases {
            assert!(inst.is_elementwise());
            let v: f64 = inst.elem_value(|a| at[a]).expect("element-wise");
            let (ds, n) = inst.elem_partials(|a| at[a], v);
            for j in 0..3 {
                let d: f64 = ds[..n]
                    .iter()
                    .filter(|(o, _)| *o == j)
                    .map(|(_, d)| d)
                    .sum();
                let h = 1e-6;
                let moved = |e: f64| {
                    let mut x = at;
                    x[j] += e;
                    inst.elem_value(|a| x[a]).expect("element-wise")
                };
                // Conditions and comparisons are piecewise constant: their
                // differences vanish away from the switch.
                let fd = (moved(h) - moved(-h)) / (2.0 * h);
                assert!(
                    (d - fd).abs() < 1e-7 * (1.0 + fd.abs()),
                    "{inst:?} ∂/∂{j}: {d} vs {fd}"
                );
            }
            // The same partials from a program's reverse pass.
            let mut insts = vec![Inst::Param(0), Inst::Param(1), Inst::Param(2)];
            insts.push(inst.clone());
            let p = KernelProgram::new(insts, 3, 3).expect("well formed");
            let mut g = [0.0; 3];
            assert_eq!(p.eval_grad(&at, &[], &[], &mut g), v);
            for (j, gj) in g.iter().enumerate() {
                let d: f64 = ds[..n]
                    .iter()
                    .filter(|(o, _)| *o == j)
                    .map(|(_, d)| d)
                    .sum();
                assert_eq!(*gj, d, "{inst:?} reverse pass ∂/∂{j}");
            }
        }
        assert!(!Inst::Const(1.0).is_elementwise());
        assert!(Inst::Param(0).elem_value::<f64>(|_| 0.0).is_none());
    }

    /// A likelihood program in duals: log p(y | f) = y f − exp(f) −
    /// lgamma(y + 1) (Poisson), its value and ∂/∂f = y − eᶠ, for short and
    /// long parameter lists alike.
    #[test]
    fn a_likelihood_program_gives_its_value_and_derivative_in_duals() {
        use crate::builtin::Builtin::{Exp, Lgamma};
        use tempest_syntax::ast::BinOp::Sub;
        let insts = vec![
            Inst::Param(0),
            Inst::Param(1),
            Inst::Bin(Mul, 0, 1),
            Inst::Call(Exp, 1),
            Inst::Bin(Sub, 2, 3),
            Inst::Const(1.0),
            Inst::Bin(Add, 0, 5),
            Inst::Call(Lgamma, 6),
            Inst::Bin(Sub, 4, 7),
        ];
        for extra in [0, 20] {
            let p = KernelProgram::new(insts.clone(), 8, 2 + extra).expect("well formed");
            let (y, f) = (3.0, 0.4);
            let mut args = vec![Dual1::new(f, [1.0])];
            args.extend((0..extra).map(|_| Dual1::new(0.0, [0.0])));
            let v = p.eval_likelihood(Dual1::new(y, [0.0]), &args);
            let want = y * f - f.exp() - 6.0f64.ln(); // lgamma(4) = ln 3!
            assert!((v.value() - want).abs() < 1e-12, "{} vs {want}", v.value());
            assert!((v.tangent()[0] - (y - f.exp())).abs() < 1e-12);
            let plain: f64 = p.eval_likelihood(y, &[f]);
            assert_eq!(plain, v.value());
        }
    }
}
