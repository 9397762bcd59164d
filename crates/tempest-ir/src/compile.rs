//! Scalar programs: a user-defined likelihood whose parameters, lets and
//! body are all numbers is compiled once to a small stack machine, so that
//! the millions of per-point evaluations an engine makes (quadrature nodes
//! times points times steps) run without building runtime values. Bodies that
//! use vectors (e.g. kernels over their inputs) keep the general evaluator.
//! Both give the same numbers and the same derivatives (tested).

use super::expr::{Builtin, Ref, TExpr, TKind};
use super::graph::Function;
use super::types::Ty;
pub(crate) use tempest_model::builtin::call1;
use tempest_model::custom::Scalar;
use tempest_syntax::ast::{BinOp, UnOp};

/// One instruction.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Const(f64),
    Local(usize),
    Store(usize),
    Neg,
    Not,
    /// The arithmetic operators, dispatched on directly (the hot ones).
    Add,
    Sub,
    Mul,
    Div,
    /// Comparisons and logic, on values (1 for true, 0 for false).
    Test(BinOp),
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
    /// An upper bound on the operand stack's depth.
    max_stack: usize,
}

/// Locals and stack up to these sizes live in arrays on the machine stack,
/// so a call allocates nothing (and zeroes little).
const TINY: usize = 8;
const SMALL: usize = 24;

/// An upper bound on the operand stack's depth: the depth along the
/// instructions in order, which counts the value of a taken `then` branch
/// into its `else` branch (one too many per `if`, never too few).
fn stack_bound(ops: &[Op]) -> usize {
    let (mut depth, mut max) = (0usize, 1usize);
    for op in ops {
        match op {
            Op::Const(_) | Op::Local(_) => depth += 1,
            Op::Store(_)
            | Op::Add
            | Op::Sub
            | Op::Mul
            | Op::Div
            | Op::Test(_)
            | Op::Pow
            | Op::JumpIfFalse(_) => depth = depth.saturating_sub(1),
            Op::Neg | Op::Not | Op::PowI(_) | Op::Call1(_) | Op::Jump(_) => {}
        }
        max = max.max(depth);
    }
    max
}

fn scalar_ty(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Real | Ty::Bool)
}

fn emit(e: &TExpr, ops: &mut Vec<Op>) -> Option<()> {
    tempest_core::limits::deep(|| emit_inner(e, ops))
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
            ops.push(match op {
                BinOp::Add => Op::Add,
                BinOp::Sub => Op::Sub,
                BinOp::Mul | BinOp::EwMul => Op::Mul,
                BinOp::Div | BinOp::EwDiv => Op::Div,
                _ => Op::Test(*op),
            });
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
        let max_stack = stack_bound(&ops);
        Some(ScalarProgram {
            ops,
            n_locals: f.n_locals,
            max_stack,
        })
    }

    /// Run with the parameters' values (the remaining locals are the lets).
    pub fn run<T: Scalar>(&self, params: &[T]) -> T {
        self.run_outcome(None, params)
    }

    /// Run a likelihood with its outcome `y` (when given, the first
    /// parameter) and the other parameters `args`, without allocating when
    /// the program is small.
    pub fn run_outcome<T: Scalar>(&self, y: Option<T>, args: &[T]) -> T {
        let n = self.n_locals.max(args.len() + usize::from(y.is_some()));
        if n <= TINY && self.max_stack <= TINY {
            self.run_fixed::<T, TINY>(y, args)
        } else if n <= SMALL && self.max_stack <= SMALL {
            self.run_fixed::<T, SMALL>(y, args)
        } else {
            let mut locals = vec![T::zero(); n];
            let mut stack = vec![T::zero(); self.max_stack];
            fill(&mut locals, y, args);
            self.exec(&mut locals, &mut stack)
        }
    }

    /// [`ScalarProgram::run_outcome`] with locals and stack in arrays of K.
    fn run_fixed<T: Scalar, const K: usize>(&self, y: Option<T>, args: &[T]) -> T {
        let mut locals = [T::zero(); K];
        let mut stack = [T::zero(); K];
        fill(&mut locals, y, args);
        self.exec(&mut locals, &mut stack)
    }

    /// The stack machine over given locals and an operand stack of at
    /// least `max_stack` entries.
    fn exec<T: Scalar>(&self, locals: &mut [T], stack: &mut [T]) -> T {
        let truth = |x: bool| if x { T::one() } else { T::zero() };
        let mut sp = 0;
        let mut pc = 0;
        macro_rules! push {
            ($v:expr) => {{
                let v = $v;
                stack[sp] = v;
                sp += 1;
            }};
        }
        macro_rules! pop {
            () => {{
                sp -= 1;
                stack[sp]
            }};
        }
        while pc < self.ops.len() {
            match &self.ops[pc] {
                Op::Const(c) => push!(T::constant(*c)),
                Op::Local(i) => push!(locals[*i]),
                Op::Store(i) => {
                    let v = pop!();
                    locals[*i] = v;
                }
                Op::Neg => {
                    let a = pop!();
                    push!(-a);
                }
                Op::Not => {
                    let a = pop!();
                    push!(truth(a.to_constant() == 0.0));
                }
                Op::PowI(k) => {
                    let a = pop!();
                    push!(a.powi(*k));
                }
                Op::Pow => {
                    let b = pop!();
                    let a = pop!();
                    push!(crate::ops::pow(a, b));
                }
                Op::Add => {
                    let b = pop!();
                    let a = pop!();
                    push!(a + b);
                }
                Op::Sub => {
                    let b = pop!();
                    let a = pop!();
                    push!(a - b);
                }
                Op::Mul => {
                    let b = pop!();
                    let a = pop!();
                    push!(a * b);
                }
                Op::Div => {
                    let b = pop!();
                    let a = pop!();
                    push!(a / b);
                }
                Op::Test(op) => {
                    let b = pop!();
                    let a = pop!();
                    push!(truth(
                        op.holds(a.to_constant(), b.to_constant()) == Some(true)
                    ));
                }
                Op::Call1(b) => {
                    let x = pop!();
                    // A constant argument (a function of the outcome or of
                    // data) needs no derivative.
                    push!(if x.is_constant() {
                        T::constant(call1(*b, x.to_constant()))
                    } else {
                        call1(*b, x)
                    });
                }
                Op::JumpIfFalse(to) => {
                    let c = pop!();
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
        if sp == 0 { T::zero() } else { pop!() }
    }
}

/// The parameters as the first locals: the outcome (when given), then `args`.
fn fill<T: Scalar>(locals: &mut [T], y: Option<T>, args: &[T]) {
    let first = usize::from(y.is_some());
    if let Some(y) = y {
        locals[0] = y;
    }
    locals[first..first + args.len()].copy_from_slice(args);
}
