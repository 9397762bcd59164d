//! Compiled kernel programs: a kernel written in the model file, compiled
//! once (at lowering) into a flat list of scalar instructions over its
//! parameters and its two input rows, evaluated per Gram entry without
//! interpreting expressions or allocating, and with a reverse pass that
//! gives the derivatives with respect to every parameter at a small
//! constant multiple of one evaluation.
//!
//! The program is in SSA form: instruction i writes slot i, and a `let`
//! is the slot of its value. An `if` evaluates both branches and selects
//! one; the reverse pass skips instructions whose adjoint is zero, so a
//! non-finite value in the branch not taken never reaches a derivative.
//! The partial derivative of each element-wise built-in comes from one
//! forward-mode dual evaluation of the same definition the interpreter
//! uses, so both give the same numbers.
//!
//! The same reverse pass also gives the derivatives with respect to every
//! coordinate of both inputs ([`KernelProgram::eval_grad_inputs`]).
//!
//! Bodies that use their inputs other than through `sqdist(x, x2)`,
//! `dot(·, ·)` of the two inputs and `x[k]` with a constant k, or that take
//! vector parameters, are not compiled and keep the general evaluator.

mod block;
mod inputs;
mod system;

pub use block::{BlockRows, Prepared};
pub use system::SystemProgram;

use super::compile::call1;
use super::expr::{Builtin, Ref, TExpr, TKind};
use super::graph::Function;
use super::types::Ty;
use crate::math::scalar::Dual1;
use crate::model::custom::Scalar;
use crate::syntax::ast::{BinOp, UnOp};

/// Which inputs an input instruction reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    X,
    Y,
}

/// One instruction; operands are earlier slots.
#[derive(Clone, Debug, PartialEq)]
enum Inst {
    Const(f64),
    Param(usize),
    /// Σₖ (xₖ − yₖ)².
    Sqdist,
    /// Σₖ aₖ bₖ for two of the inputs.
    Dot(Side, Side),
    /// One coordinate of an input.
    Input(Side, usize),
    Neg(usize),
    Not(usize),
    Bin(BinOp, usize, usize),
    PowI(usize, i32),
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
}

/// Slots of up to this many instructions live on the stack.
const STACK_SLOTS: usize = 64;

struct Compiler<'a> {
    f: &'a Function,
    insts: Vec<Inst>,
    /// The slot of each local (parameters, then the two inputs, then lets).
    locals: Vec<Option<Slot>>,
}

/// What a local holds once compiled.
#[derive(Clone, Copy)]
enum Slot {
    /// A scalar in this slot.
    Value(usize),
    /// One of the input rows.
    Input(Side),
}

impl Compiler<'_> {
    fn push(&mut self, i: Inst) -> usize {
        self.insts.push(i);
        self.insts.len() - 1
    }

    fn input_of(&self, e: &TExpr) -> Option<Side> {
        match &e.kind {
            TKind::Ref(Ref::Local(i)) => match self.locals.get(*i).copied().flatten() {
                Some(Slot::Input(s)) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    fn expr(&mut self, e: &TExpr) -> Option<usize> {
        crate::limits::deep(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &TExpr) -> Option<usize> {
        Some(match &e.kind {
            TKind::Int(i) => self.push(Inst::Const(*i as f64)),
            TKind::Real(r) => self.push(Inst::Const(*r)),
            TKind::Bool(b) => self.push(Inst::Const(if *b { 1.0 } else { 0.0 })),
            TKind::Ref(Ref::Local(i)) => match self.locals.get(*i).copied().flatten()? {
                Slot::Value(s) => s,
                Slot::Input(_) => return None,
            },
            TKind::Unary(op, a) => {
                let a = self.expr(a)?;
                self.push(if *op == UnOp::Neg {
                    Inst::Neg(a)
                } else {
                    Inst::Not(a)
                })
            }
            TKind::Binary(BinOp::Pow, a, b) if matches!(b.kind, TKind::Int(k) if k.abs() <= 64) => {
                let TKind::Int(k) = b.kind else { return None };
                let a = self.expr(a)?;
                self.push(Inst::PowI(a, k as i32))
            }
            TKind::Binary(op, a, b) => {
                if !is_scalar(&a.ty) || !is_scalar(&b.ty) {
                    return None;
                }
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                self.push(Inst::Bin(*op, a, b))
            }
            TKind::Builtin(Builtin::Pi, _) => self.push(Inst::Const(std::f64::consts::PI)),
            TKind::Builtin(Builtin::E, _) => self.push(Inst::Const(std::f64::consts::E)),
            TKind::Builtin(Builtin::Pow, args) => {
                let (a, b) = (self.expr(&args[0])?, self.expr(&args[1])?);
                self.push(Inst::Bin(BinOp::Pow, a, b))
            }
            TKind::Builtin(b @ (Builtin::Sqdist | Builtin::Dot), args) if args.len() == 2 => {
                let (sa, sb) = (self.input_of(&args[0])?, self.input_of(&args[1])?);
                if *b == Builtin::Sqdist {
                    if sa == sb {
                        self.push(Inst::Const(0.0))
                    } else {
                        self.push(Inst::Sqdist)
                    }
                } else {
                    self.push(Inst::Dot(sa, sb))
                }
            }
            TKind::Builtin(b, args) if b.is_elementwise() && args.len() == 1 => {
                if !is_scalar(&args[0].ty) {
                    return None;
                }
                let a = self.expr(&args[0])?;
                self.push(Inst::Call(*b, a))
            }
            TKind::Index(base, idx) if idx.len() == 1 => {
                let side = self.input_of(base)?;
                let TKind::Int(k) = idx[0].kind else {
                    return None;
                };
                self.push(Inst::Input(side, usize::try_from(k).ok()?))
            }
            TKind::If(c, a, b) => {
                let (c, a, b) = (self.expr(c)?, self.expr(a)?, self.expr(b)?);
                self.push(Inst::Select(c, a, b))
            }
            _ => return None,
        })
    }
}

fn is_scalar(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Real | Ty::Bool)
}

/// The partial derivatives (∂/∂a, ∂/∂b) of a binary operation at (a, b)
/// with value v.
fn bin_partials(op: BinOp, a: f64, b: f64, v: f64) -> (f64, f64) {
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
fn call_partial_of(b: Builtin, a: f64, v: f64) -> f64 {
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
pub(super) fn bin_value<T: Scalar>(op: BinOp, u: T, w: T) -> T {
    match op {
        BinOp::Add => u + w,
        BinOp::Sub => u - w,
        BinOp::Mul | BinOp::EwMul => u * w,
        BinOp::Div | BinOp::EwDiv => u / w,
        BinOp::Pow => crate::ir::ops::pow(u, w),
        test => T::constant(truth(
            test.holds(u.to_constant(), w.to_constant()) == Some(true),
        )),
    }
}

/// A logical not of a program's scalar (1 when it is 0).
pub(super) fn not_value<T: Scalar>(a: T) -> T {
    T::constant(truth(a.to_constant() == 0.0))
}

impl KernelProgram {
    /// Compile a kernel definition, or `None` when its body is outside what
    /// programs cover (see the module documentation).
    pub fn compile(f: &Function) -> Option<KernelProgram> {
        Self::compile_with(f, f.params.len().checked_sub(2)?, true)
    }

    /// Compile a likelihood definition as a program over all its
    /// parameters (the outcome first) and no inputs, or `None` when its
    /// body is outside what programs cover. [`KernelProgram::value_grad`]
    /// gives its value and derivatives by one reverse pass.
    pub fn compile_likelihood(f: &Function) -> Option<KernelProgram> {
        Self::compile_with(f, f.params.len(), false)
    }

    /// The first `n_params` parameters are scalars; with `inputs`, the
    /// two after them are the kernel's inputs.
    fn compile_with(f: &Function, n_params: usize, inputs: bool) -> Option<KernelProgram> {
        if !f.params[..n_params].iter().all(|(_, t)| is_scalar(t)) {
            return None;
        }
        let mut c = Compiler {
            f,
            insts: Vec::new(),
            locals: vec![None; f.n_locals.max(n_params + 2)],
        };
        for p in 0..n_params {
            let s = c.push(Inst::Param(p));
            c.locals[p] = Some(Slot::Value(s));
        }
        if inputs {
            c.locals[n_params] = Some(Slot::Input(Side::X));
            c.locals[n_params + 1] = Some(Slot::Input(Side::Y));
        }
        for (slot, e) in &c.f.lets {
            if !is_scalar(&e.ty) {
                return None;
            }
            let s = c.expr(e)?;
            if *slot >= c.locals.len() {
                c.locals.resize(*slot + 1, None);
            }
            c.locals[*slot] = Some(Slot::Value(s));
        }
        if !is_scalar(&c.f.body.ty) {
            return None;
        }
        let out = c.expr(&c.f.body)?;
        Some(KernelProgram {
            insts: c.insts,
            out,
            n_params,
        })
    }

    /// The number of parameters.
    pub fn n_params(&self) -> usize {
        self.n_params
    }

    fn input_value(side: (Side, Side), x: &[f64], y: &[f64]) -> f64 {
        let pick = |s: Side| if s == Side::X { x } else { y };
        let (a, b) = (pick(side.0), pick(side.1));
        a.iter().zip(b).map(|(u, v)| u * v).sum()
    }

    /// Run the forward pass into `vals` (one per instruction).
    fn forward<T: Scalar>(&self, p: &[T], x: &[f64], y: &[f64], vals: &mut [T]) {
        for (i, inst) in self.insts.iter().enumerate() {
            let v = match *inst {
                Inst::Const(c) => T::constant(c),
                Inst::Param(k) => p[k],
                Inst::Sqdist => T::constant(x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()),
                Inst::Dot(a, b) => T::constant(Self::input_value((a, b), x, y)),
                Inst::Input(s, k) => {
                    let row = if s == Side::X { x } else { y };
                    T::constant(row.get(k).copied().unwrap_or(f64::NAN))
                }
                Inst::Neg(a) => -vals[a],
                Inst::Not(a) => not_value(vals[a]),
                Inst::PowI(a, k) => vals[a].powi(k),
                Inst::Call(b, a) => call1(b, vals[a]),
                Inst::Select(c, a, b) => {
                    if vals[c].to_constant() != 0.0 {
                        vals[a]
                    } else {
                        vals[b]
                    }
                }
                Inst::Bin(op, a, b) => bin_value(op, vals[a], vals[b]),
            };
            vals[i] = v;
        }
    }

    /// k(x, y) with parameters `p`, in any scalar type (duals carry the
    /// parameters' tangents through).
    pub fn eval<T: Scalar>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let n = self.insts.len();
        if n <= STACK_SLOTS {
            let mut vals = [T::zero(); STACK_SLOTS];
            self.forward(p, x, y, &mut vals[..n]);
            vals[self.out]
        } else {
            let mut vals = vec![T::zero(); n];
            self.forward(p, x, y, &mut vals);
            vals[self.out]
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
    /// [`KernelProgram::compile_likelihood`]) and ∂f/∂pⱼ written into `g`
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
        mut inputs: Option<(&mut [f64], &mut [f64])>,
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
        for i in (0..self.insts.len()).rev() {
            let a_i = adj[i];
            if a_i == 0.0 || !visit(i) {
                continue;
            }
            match self.insts[i] {
                Inst::Param(k) => g[k] += a_i,
                Inst::Neg(a) => adj[a] -= a_i,
                Inst::PowI(a, k) => {
                    if k != 0 {
                        adj[a] += a_i * k as f64 * vals[a].powi(k - 1);
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
        vals[self.out]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Model, Registry};

    fn program(body: &str, params: &str) -> KernelProgram {
        let text = format!("kernel k({params})(x, x2) {{ {body} }}\nmodel {{ }}\n");
        let m = Model::from_str("k.tempest", &text, &Registry::default())
            .unwrap_or_else(|e| panic!("{e}"));
        KernelProgram::compile(&m.graph.functions[0]).expect("compiles")
    }

    #[test]
    fn values_and_derivatives_match_finite_differences() {
        let cases = [
            (
                "(1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha)",
                "ell : positive, alpha : positive",
            ),
            (
                "let r = sqrt(sqdist(x, x2)) / ell; if r == 0 then 1 else sin(r) / r * alpha",
                "ell : positive, alpha : positive",
            ),
            (
                "exp(-sqdist(x, x2) / (2 * ell^2)) + alpha * dot(x, x2) + x[0] * x2[1]",
                "ell : positive, alpha : real",
            ),
            (
                "log1p(alpha * exp(-abs(x[0] - x2[0]) / ell)) * tanh(ell)",
                "ell : positive, alpha : positive",
            ),
        ];
        let (x, y) = ([0.3, -1.2], [1.1, 0.4]);
        let p = [0.7, 1.3];
        for (body, params) in cases {
            let prog = program(body, params);
            let mut g = [0.0; 2];
            let v = prog.eval_grad(&p, &x, &y, &mut g);
            assert!((v - prog.eval::<f64>(&p, &x, &y)).abs() < 1e-15, "{body}");
            for j in 0..2 {
                let h = 1e-6;
                let (mut up, mut dn) = (p, p);
                up[j] += h;
                dn[j] -= h;
                let fd =
                    (prog.eval::<f64>(&up, &x, &y) - prog.eval::<f64>(&dn, &x, &y)) / (2.0 * h);
                assert!(
                    (g[j] - fd).abs() <= 1e-7 * fd.abs().max(1.0),
                    "{body} ∂p{j}: {} vs {fd}",
                    g[j]
                );
            }
        }
    }

    #[test]
    fn the_branch_not_taken_does_not_poison_the_derivative() {
        // At r = 0 the other branch is 0/0.
        let prog = program(
            "let r = sqrt(sqdist(x, x2)) / ell; if r == 0 then alpha else sin(r) / r",
            "ell : positive, alpha : positive",
        );
        let mut g = [0.0; 2];
        let v = prog.eval_grad(&[0.7, 1.3], &[0.5], &[0.5], &mut g);
        assert_eq!(v, 1.3);
        assert_eq!(g, [0.0, 1.0]);
    }

    #[test]
    fn bodies_outside_programs_are_not_compiled() {
        let text = "kernel k(ell : positive)(x, x2) { exp(-sum((x - x2) .* (x - x2)) / ell) }\nmodel { }\n";
        let m = Model::from_str("k.tempest", text, &Registry::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(KernelProgram::compile(&m.graph.functions[0]).is_none());
    }
}
