//! The compiler of model-file kernels and likelihoods to programs
//! ([`tempest_model::program`], the instruction set and its evaluation and
//! reverse passes), and the ODE systems' own multi-output programs
//! ([`SystemProgram`]).
//!
//! Bodies that use their inputs other than through `sqdist(x, x2)`,
//! `dot(·, ·)` of the two inputs and `x[k]` with a constant k, or that take
//! vector parameters, are not compiled and keep the general evaluator.

mod system;

pub use system::SystemProgram;
pub use tempest_model::program::{BlockRows, Inst, KernelProgram, Prepared, Side};

use super::expr::{Builtin, Ref, TExpr, TKind};
use super::graph::Function;
use super::types::Ty;
use tempest_syntax::ast::{BinOp, UnOp};

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
        tempest_core::limits::deep(|| self.expr_inner(e))
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

/// Compile a kernel definition, or `None` when its body is outside what
/// programs cover (see the module documentation).
pub fn compile_kernel(f: &Function) -> Option<KernelProgram> {
    compile_with(f, f.params.len().checked_sub(2)?, true)
}

/// Compile a likelihood definition as a program over all its
/// parameters (the outcome first) and no inputs, or `None` when its
/// body is outside what programs cover. [`KernelProgram::value_grad`]
/// gives its value and derivatives by one reverse pass.
pub fn compile_likelihood(f: &Function) -> Option<KernelProgram> {
    compile_with(f, f.params.len(), false)
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
    KernelProgram::new(c.insts, out, n_params)
}
