//! Scalar programs: a user-defined likelihood whose parameters, lets and
//! body are all numbers is compiled once to a small stack machine, so that
//! the millions of per-point evaluations an engine makes (quadrature nodes
//! times points times steps) run without building runtime values. Bodies that
//! use vectors (e.g. kernels over their inputs) keep the general evaluator.
//! Both give the same numbers and the same derivatives (tested).

use super::expr::{Builtin, Ref, TExpr, TKind};
use super::graph::Function;
use super::types::Ty;
use crate::math::scalar::RealExt;
use crate::model::custom::Scalar;
use crate::syntax::ast::{BinOp, UnOp};

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Const(f64),
    Local(usize),
    Store(usize),
    Neg,
    Not,
    Bin(BinOp),
    PowI(i32),
    Call1(Builtin),
    Pow,
    /// Jump to the address when the top (popped) is false.
    JumpIfFalse(usize),
    Jump(usize),
}

/// A compiled scalar function: lets, then the value.
#[derive(Clone, Debug)]
pub struct ScalarProgram {
    ops: Vec<Op>,
    n_locals: usize,
}

fn scalar_ty(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Real | Ty::Bool)
}

fn emit(e: &TExpr, ops: &mut Vec<Op>) -> Option<()> {
    crate::limits::deep(|| emit_inner(e, ops))
}

fn emit_inner(e: &TExpr, ops: &mut Vec<Op>) -> Option<()> {
    if !scalar_ty(&e.ty) {
        return None;
    }
    match &e.kind {
        TKind::Int(i) => ops.push(Op::Const(*i as f64)),
        TKind::Real(r) => ops.push(Op::Const(*r)),
        TKind::Bool(b) => ops.push(Op::Const(if *b { 1.0 } else { 0.0 })),
        TKind::Ref(Ref::Local(i)) => ops.push(Op::Local(*i)),
        TKind::Unary(op, a) => {
            emit(a, ops)?;
            ops.push(if *op == UnOp::Neg { Op::Neg } else { Op::Not });
        }
        TKind::Binary(BinOp::Pow, a, b) => {
            emit(a, ops)?;
            match b.kind {
                TKind::Int(k) if k.abs() <= i32::MAX as i64 => ops.push(Op::PowI(k as i32)),
                _ => {
                    emit(b, ops)?;
                    ops.push(Op::Pow);
                }
            }
        }
        TKind::Binary(op, a, b) => {
            emit(a, ops)?;
            emit(b, ops)?;
            ops.push(Op::Bin(*op));
        }
        TKind::Builtin(Builtin::Pi, _) => ops.push(Op::Const(std::f64::consts::PI)),
        TKind::Builtin(Builtin::E, _) => ops.push(Op::Const(std::f64::consts::E)),
        TKind::Builtin(Builtin::Pow, args) => {
            emit(&args[0], ops)?;
            emit(&args[1], ops)?;
            ops.push(Op::Pow);
        }
        TKind::Builtin(b, args) if b.is_elementwise() && args.len() == 1 => {
            emit(&args[0], ops)?;
            ops.push(Op::Call1(*b));
        }
        TKind::If(c, a, b) => {
            emit(c, ops)?;
            let jf = ops.len();
            ops.push(Op::JumpIfFalse(0));
            emit(a, ops)?;
            let j = ops.len();
            ops.push(Op::Jump(0));
            ops[jf] = Op::JumpIfFalse(ops.len());
            emit(b, ops)?;
            ops[j] = Op::Jump(ops.len());
        }
        _ => return None,
    }
    Some(())
}

impl ScalarProgram {
    /// Compile a function whose parameters, lets and body are all scalars.
    pub fn compile(f: &Function) -> Option<ScalarProgram> {
        if !f.params.iter().all(|(_, t)| scalar_ty(t)) {
            return None;
        }
        let mut ops = Vec::new();
        for (slot, e) in &f.lets {
            emit(e, &mut ops)?;
            ops.push(Op::Store(*slot));
        }
        emit(&f.body, &mut ops)?;
        Some(ScalarProgram {
            ops,
            n_locals: f.n_locals,
        })
    }

    /// Run with the parameters' values (the remaining locals are the lets).
    pub fn run<T: Scalar>(&self, params: &[T]) -> T {
        let mut locals: Vec<T> = Vec::with_capacity(self.n_locals);
        locals.extend_from_slice(params);
        locals.resize(self.n_locals.max(params.len()), T::zero());
        let mut stack: Vec<T> = Vec::with_capacity(16);
        let truth = |x: bool| if x { T::one() } else { T::zero() };
        let mut pc = 0;
        while pc < self.ops.len() {
            match &self.ops[pc] {
                Op::Const(c) => stack.push(T::constant(*c)),
                Op::Local(i) => stack.push(locals[*i]),
                Op::Store(i) => {
                    let v = stack.pop().unwrap_or_else(T::zero);
                    locals[*i] = v;
                }
                Op::Neg => {
                    let a = stack.pop().unwrap_or_else(T::zero);
                    stack.push(-a);
                }
                Op::Not => {
                    let a = stack.pop().unwrap_or_else(T::zero);
                    stack.push(truth(a.to_constant() == 0.0));
                }
                Op::PowI(k) => {
                    let a = stack.pop().unwrap_or_else(T::zero);
                    stack.push(a.powi(*k));
                }
                Op::Pow => {
                    let b = stack.pop().unwrap_or_else(T::zero);
                    let a = stack.pop().unwrap_or_else(T::zero);
                    let (av, bv) = (a.to_constant(), b.to_constant());
                    stack.push(
                        if av <= 0.0 && bv.fract() == 0.0 && bv.abs() <= i32::MAX as f64 {
                            a.powi(bv as i32)
                        } else {
                            a.powf(b)
                        },
                    );
                }
                Op::Bin(op) => {
                    let b = stack.pop().unwrap_or_else(T::zero);
                    let a = stack.pop().unwrap_or_else(T::zero);
                    let (av, bv) = (a.to_constant(), b.to_constant());
                    stack.push(match op {
                        BinOp::Add => a + b,
                        BinOp::Sub => a - b,
                        BinOp::Mul | BinOp::EwMul => a * b,
                        BinOp::Div | BinOp::EwDiv => a / b,
                        BinOp::Pow => a.powf(b),
                        BinOp::Eq => truth(av == bv),
                        BinOp::Ne => truth(av != bv),
                        BinOp::Lt => truth(av < bv),
                        BinOp::Le => truth(av <= bv),
                        BinOp::Gt => truth(av > bv),
                        BinOp::Ge => truth(av >= bv),
                        BinOp::And => truth(av != 0.0 && bv != 0.0),
                        BinOp::Or => truth(av != 0.0 || bv != 0.0),
                    });
                }
                Op::Call1(b) => {
                    let x = stack.pop().unwrap_or_else(T::zero);
                    stack.push(call1(*b, x));
                }
                Op::JumpIfFalse(to) => {
                    let c = stack.pop().unwrap_or_else(T::zero);
                    if c.to_constant() == 0.0 {
                        pc = *to;
                        continue;
                    }
                }
                Op::Jump(to) => {
                    pc = *to;
                    continue;
                }
            }
            pc += 1;
        }
        stack.pop().unwrap_or_else(T::zero)
    }
}

/// An element-wise built-in on one scalar (the same definitions as
/// [`super::ops::builtin`]).
pub(crate) fn call1<T: Scalar>(b: Builtin, v: T) -> T {
    use Builtin::*;
    match b {
        Exp => v.exp(),
        Log => v.ln(),
        Log1p => v.log1p(),
        Expm1 => v.expm1(),
        Sqrt => v.sqrt_(),
        Abs => v.abs(),
        Sin => v.sin(),
        Cos => v.cos(),
        Tanh => v.tanh(),
        Sigmoid => v.sigmoid(),
        LogSigmoid => v.log_sigmoid(),
        Softplus => v.softplus(),
        Lgamma => v.lgamma(),
        Digamma => v.digamma(),
        Erf => RealExt::erf(v),
        Phi => v.phi(),
        _ => T::constant(f64::NAN),
    }
}
