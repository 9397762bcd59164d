//! The compiler of a model-file kernel or likelihood body to the one
//! instruction set ([`Inst`]), for given lengths of its vector parameters.
//!
//! Vector values are unrolled: a vector of length L is L slots, an
//! element-wise operation L instructions, `sum`/`mean`/`dot`/`sqdist` of
//! vectors a chain of additions in the interpreter's order (from 0, left to
//! right), so a compiled body gives the interpreter's numbers. The inputs
//! stay whole where the instruction set reads them whole (`sqdist(x, x2)`,
//! `dot(x, x2)`, `x[k]` with a constant k); used element-wise they are
//! unrolled too, which needs their length: it is the length of the vector
//! they meet (`(x - x2) ./ ells` fixes it to the length of `ells`), found
//! by a first pass that stops at the meeting, and the program then
//! requires inputs of that length ([`KernelProgram::input_len`]). A
//! meeting inside an `if` branch fixes nothing (the interpreter would not
//! reach a branch not taken); there, and where the inputs used
//! element-wise meet no vector of known length, the width binding saw
//! where the kernel is used fixes it when there is one
//! ([`super::ShapedPrograms::note_width`]), and otherwise the body is left
//! to the general evaluator.

use super::{Inst, KernelProgram, Side};
use crate::expr::{Builtin, Ref, TExpr, TKind};
use crate::graph::Function;
use crate::types::Ty;
use tempest_syntax::ast::{BinOp, UnOp};

/// The most instructions one compiled body may have (an unrolled vector
/// body grows with its vectors' lengths; beyond this the body is left to
/// the general evaluator, which needs no memory per element up front).
pub const MAX_INSTS: usize = 8192;

/// What an expression compiles to.
#[derive(Clone, Debug)]
enum Val {
    /// A number in this slot.
    S(usize),
    /// A vector, one slot per element.
    V(Vec<usize>),
    /// One of the two inputs, whole.
    Input(Side),
    /// A vector computed element-wise from the inputs whose length is not
    /// known yet (the first pass; nothing emitted for it).
    Unknown,
}

/// Why a pass stopped.
enum Stop {
    /// The body is outside what programs cover.
    Outside,
    /// The inputs must have this length: compile again knowing it.
    InputLen(usize),
}

type C<T> = Result<T, Stop>;

struct Compiler<'a> {
    insts: Vec<Inst>,
    /// The value of each local (parameters, then the two inputs, then lets).
    locals: Vec<Option<Val>>,
    /// The inputs' length, when known (the second pass).
    d_in: Option<usize>,
    /// Each input's coordinates, once unrolled ([X, Y]).
    unrolled: [Option<Vec<usize>>; 2],
    /// How deep inside `if` branches the expression being compiled is.
    branch: usize,
    f: &'a Function,
}

fn outside<T>() -> C<T> {
    Err(Stop::Outside)
}

fn scalar_ty(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Real | Ty::Bool)
}

impl Compiler<'_> {
    fn push(&mut self, i: Inst) -> C<usize> {
        if self.insts.len() >= MAX_INSTS {
            return outside();
        }
        self.insts.push(i);
        Ok(self.insts.len() - 1)
    }

    /// An input's coordinates as slots (emitted at their first use).
    fn unroll(&mut self, side: Side, len: usize) -> C<Vec<usize>> {
        let k = usize::from(side == Side::Y);
        if let Some(v) = &self.unrolled[k] {
            return Ok(v.clone());
        }
        let v = (0..len)
            .map(|j| self.push(Inst::Input(side, j)))
            .collect::<C<Vec<usize>>>()?;
        self.unrolled[k] = Some(v.clone());
        Ok(v)
    }

    /// A value as an operand of an element-wise operation: an input is
    /// unrolled when its length is known and unknown otherwise.
    fn elementwise(&mut self, v: Val) -> C<Val> {
        match v {
            Val::Input(side) => match self.d_in {
                Some(len) => Ok(Val::V(self.unroll(side, len)?)),
                None => Ok(Val::Unknown),
            },
            other => Ok(other),
        }
    }

    /// An element-wise use of the inputs meets a vector of length `len`.
    fn meet(&self, len: usize) -> Stop {
        if self.branch == 0 && self.d_in.is_none() {
            Stop::InputLen(len)
        } else {
            Stop::Outside
        }
    }

    fn map(&mut self, a: Val, f: impl Fn(usize) -> Inst) -> C<Val> {
        Ok(match self.elementwise(a)? {
            Val::S(x) => Val::S(self.push(f(x))?),
            Val::V(v) => Val::V(v.iter().map(|&x| self.push(f(x))).collect::<C<_>>()?),
            Val::Unknown => Val::Unknown,
            Val::Input(_) => return outside(),
        })
    }

    /// An element-wise binary operation, a number broadcast over a vector.
    fn zip(&mut self, a: Val, b: Val, f: impl Fn(usize, usize) -> Inst) -> C<Val> {
        let (a, b) = (self.elementwise(a)?, self.elementwise(b)?);
        Ok(match (a, b) {
            (Val::S(x), Val::S(y)) => Val::S(self.push(f(x, y))?),
            (Val::S(x), Val::V(v)) => {
                Val::V(v.iter().map(|&y| self.push(f(x, y))).collect::<C<_>>()?)
            }
            (Val::V(u), Val::S(y)) => {
                Val::V(u.iter().map(|&x| self.push(f(x, y))).collect::<C<_>>()?)
            }
            (Val::V(u), Val::V(v)) if u.len() == v.len() => Val::V(
                u.iter()
                    .zip(&v)
                    .map(|(&x, &y)| self.push(f(x, y)))
                    .collect::<C<_>>()?,
            ),
            (Val::Unknown, Val::S(_) | Val::Unknown) | (Val::S(_), Val::Unknown) => Val::Unknown,
            (Val::Unknown, Val::V(v)) | (Val::V(v), Val::Unknown) => return Err(self.meet(v.len())),
            // Vectors of different lengths: the interpreter names the error.
            _ => return outside(),
        })
    }

    /// Σᵢ term(i) from 0, left to right (the interpreter's fold).
    fn fold(&mut self, n: usize, mut term: impl FnMut(&mut Self, usize) -> C<usize>) -> C<usize> {
        let mut acc = self.push(Inst::Const(0.0))?;
        for i in 0..n {
            let t = term(self, i)?;
            acc = self.push(Inst::Bin(BinOp::Add, acc, t))?;
        }
        Ok(acc)
    }

    /// log Σᵢ exp(xᵢ) as the interpreter computes it
    /// ([`tempest_math::scalar::logsumexp`]): m = max xᵢ, then
    /// ln Σᵢ exp(xᵢ − m) + m from 0 left to right, and m as a constant
    /// when it is ±∞ (the differences are then replaced by 0, so that the
    /// branch not taken carries no NaN into the reverse pass); −∞ for an
    /// empty vector. The interpreter holds m constant; here its derivative
    /// flows through the selected element, 1 − Σ softmax = 0 up to
    /// rounding.
    fn logsumexp(&mut self, v: &[usize]) -> C<usize> {
        let Some((&first, rest)) = v.split_first() else {
            return self.push(Inst::Const(f64::NEG_INFINITY));
        };
        let mut m = first;
        for &x in rest {
            let g = self.push(Inst::Bin(BinOp::Gt, x, m))?;
            m = self.push(Inst::Select(g, x, m))?;
        }
        let zero = self.push(Inst::Const(0.0))?;
        let mm = self.push(Inst::Bin(BinOp::Sub, m, m))?;
        let finite = self.push(Inst::Bin(BinOp::Eq, mm, zero))?;
        let s = self.fold(v.len(), |c, i| {
            let d = c.push(Inst::Bin(BinOp::Sub, v[i], m))?;
            let d = c.push(Inst::Select(finite, d, zero))?;
            c.push(Inst::Call(Builtin::Exp, d))
        })?;
        let ln = self.push(Inst::Call(Builtin::Log, s))?;
        let r = self.push(Inst::Bin(BinOp::Add, ln, m))?;
        // Not finite: ±∞ as a constant (NaN stays m), as the interpreter.
        let up = self.push(Inst::Bin(BinOp::Gt, m, zero))?;
        let (pinf, ninf) = (
            self.push(Inst::Const(f64::INFINITY))?,
            self.push(Inst::Const(f64::NEG_INFINITY))?,
        );
        let big = self.push(Inst::Select(up, pinf, ninf))?;
        let number = self.push(Inst::Bin(BinOp::Eq, m, m))?;
        let other = self.push(Inst::Select(number, big, m))?;
        self.push(Inst::Select(finite, r, other))
    }

    fn scalar(&mut self, e: &TExpr) -> C<usize> {
        match self.expr(e)? {
            Val::S(s) => Ok(s),
            _ => outside(),
        }
    }

    fn expr(&mut self, e: &TExpr) -> C<Val> {
        tempest_core::limits::deep(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &TExpr) -> C<Val> {
        Ok(match &e.kind {
            TKind::Int(i) => Val::S(self.push(Inst::Const(*i as f64))?),
            TKind::Real(r) => Val::S(self.push(Inst::Const(*r))?),
            TKind::Bool(b) => Val::S(self.push(Inst::Const(if *b { 1.0 } else { 0.0 }))?),
            TKind::Ref(Ref::Local(i)) => match self.locals.get(*i).cloned().flatten() {
                Some(v) => v,
                None => return outside(),
            },
            TKind::Unary(UnOp::Neg, a) => {
                let a = self.expr(a)?;
                self.map(a, Inst::Neg)?
            }
            TKind::Unary(_, a) => Val::S({
                let a = self.scalar(a)?;
                self.push(Inst::Not(a))?
            }),
            TKind::Binary(BinOp::Pow, a, b) if matches!(b.kind, TKind::Int(k) if k.abs() <= 64) => {
                let TKind::Int(k) = b.kind else {
                    return outside();
                };
                let a = self.expr(a)?;
                self.map(a, |x| Inst::PowI(x, k as i32))?
            }
            TKind::Binary(op, a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                self.binary(*op, a, b)?
            }
            TKind::Builtin(Builtin::Pi, _) => Val::S(self.push(Inst::Const(std::f64::consts::PI))?),
            TKind::Builtin(Builtin::E, _) => Val::S(self.push(Inst::Const(std::f64::consts::E))?),
            TKind::Builtin(Builtin::Pow, args) if args.len() == 2 => {
                let (a, b) = (self.expr(&args[0])?, self.expr(&args[1])?);
                self.zip(a, b, |x, y| Inst::Bin(BinOp::Pow, x, y))?
            }
            TKind::Builtin(b @ (Builtin::Sqdist | Builtin::Dot), args) if args.len() == 2 => {
                let (a, c) = (self.expr(&args[0])?, self.expr(&args[1])?);
                Val::S(self.pair(*b, a, c)?)
            }
            TKind::Builtin(b @ (Builtin::Sum | Builtin::Mean), args) if args.len() == 1 => {
                let a = self.expr(&args[0])?;
                let Val::V(v) = self.elementwise(a)? else {
                    return outside();
                };
                let total = self.fold(v.len(), |_, i| Ok(v[i]))?;
                if *b == Builtin::Sum {
                    Val::S(total)
                } else if v.is_empty() {
                    return outside();
                } else {
                    let n = self.push(Inst::Const(v.len() as f64))?;
                    Val::S(self.push(Inst::Bin(BinOp::Div, total, n))?)
                }
            }
            TKind::Builtin(Builtin::Logsumexp, args) if args.len() == 1 => {
                let a = self.expr(&args[0])?;
                let Val::V(v) = self.elementwise(a)? else {
                    return outside();
                };
                Val::S(self.logsumexp(&v)?)
            }
            TKind::Builtin(b, args) if b.is_elementwise() && args.len() == 1 => {
                let a = self.expr(&args[0])?;
                self.map(a, |x| Inst::Call(*b, x))?
            }
            TKind::Index(base, idx) if idx.len() == 1 => {
                let TKind::Int(k) = idx[0].kind else {
                    return outside();
                };
                let Ok(k) = usize::try_from(k) else {
                    return outside();
                };
                match self.expr(base)? {
                    Val::Input(side) => Val::S(self.push(Inst::Input(side, k))?),
                    Val::V(v) if k < v.len() => Val::S(v[k]),
                    _ => return outside(),
                }
            }
            TKind::If(c, a, b) => {
                let c = self.scalar(c)?;
                self.branch += 1;
                let arms = self.expr(a).and_then(|a| Ok((a, self.expr(b)?)));
                self.branch -= 1;
                match arms? {
                    (Val::S(a), Val::S(b)) => Val::S(self.push(Inst::Select(c, a, b))?),
                    (Val::V(u), Val::V(v)) if u.len() == v.len() => Val::V(
                        u.iter()
                            .zip(&v)
                            .map(|(&a, &b)| self.push(Inst::Select(c, a, b)))
                            .collect::<C<_>>()?,
                    ),
                    _ => return outside(),
                }
            }
            TKind::Array(xs) => Val::V(xs.iter().map(|x| self.scalar(x)).collect::<C<_>>()?),
            _ => return outside(),
        })
    }

    fn binary(&mut self, op: BinOp, a: Val, b: Val) -> C<Val> {
        use BinOp::*;
        let num = |v: &Val| matches!(v, Val::S(_));
        match op {
            Add | Sub | EwMul | EwDiv | Div | Pow => self.zip(a, b, |x, y| Inst::Bin(op, x, y)),
            // A product with a number is element-wise; of two vectors it
            // is no element-wise operation.
            Mul if num(&a) || num(&b) => self.zip(a, b, |x, y| Inst::Bin(op, x, y)),
            Eq | Ne | Lt | Le | Gt | Ge | And | Or if num(&a) && num(&b) => {
                let (Val::S(x), Val::S(y)) = (a, b) else {
                    return outside();
                };
                Ok(Val::S(self.push(Inst::Bin(op, x, y))?))
            }
            _ => outside(),
        }
    }

    /// `sqdist(a, b)` or `dot(a, b)`.
    fn pair(&mut self, b: Builtin, u: Val, v: Val) -> C<usize> {
        let sq = b == Builtin::Sqdist;
        match (u, v) {
            (Val::Input(sa), Val::Input(sb)) => self.push(match (sq, sa == sb) {
                (true, true) => Inst::Const(0.0),
                (true, false) => Inst::Sqdist,
                (false, _) => Inst::Dot(sa, sb),
            }),
            (Val::S(p), Val::S(q)) if sq => {
                let d = self.push(Inst::Bin(BinOp::Sub, p, q))?;
                self.push(Inst::Bin(BinOp::Mul, d, d))
            }
            (u, v) => match (self.elementwise(u)?, self.elementwise(v)?) {
                (Val::V(u), Val::V(v)) if u.len() == v.len() => self.fold(u.len(), |c, i| {
                    if sq {
                        let d = c.push(Inst::Bin(BinOp::Sub, u[i], v[i]))?;
                        c.push(Inst::Bin(BinOp::Mul, d, d))
                    } else {
                        c.push(Inst::Bin(BinOp::Mul, u[i], v[i]))
                    }
                }),
                (Val::Unknown, Val::V(v)) | (Val::V(v), Val::Unknown) => Err(self.meet(v.len())),
                _ => outside(),
            },
        }
    }
}

/// Compile `f` with its first `lens.len()` parameters of these lengths
/// (`None` for a number, `Some(L)` for a vector of L) and, with
/// `inputs`, the two after them as the kernel's inputs. The inputs' length
/// is that of the vector they meet, else `width` when given (the kernel's
/// input columns where it is used). `None` when the body is outside what
/// programs cover.
pub(super) fn compile(
    f: &Function,
    lens: &[Option<usize>],
    inputs: bool,
    width: Option<usize>,
) -> Option<KernelProgram> {
    let fixed = |len: usize| {
        pass(f, lens, inputs, Some(len))
            .ok()
            .map(|p| p.with_input_len(len))
    };
    match pass(f, lens, inputs, None) {
        Ok(p) => Some(p),
        Err(Stop::InputLen(len)) => fixed(len),
        Err(Stop::Outside) => width.and_then(fixed),
    }
}

fn pass(
    f: &Function,
    lens: &[Option<usize>],
    inputs: bool,
    d_in: Option<usize>,
) -> C<KernelProgram> {
    let n = lens.len();
    if f.params.len() < n + if inputs { 2 } else { 0 } {
        return outside();
    }
    for ((_, ty), len) in f.params.iter().zip(lens) {
        let fits = match len {
            None => scalar_ty(ty),
            Some(_) => matches!(ty, Ty::Vector(_)),
        };
        if !fits {
            return outside();
        }
    }
    let mut c = Compiler {
        insts: Vec::new(),
        locals: vec![None; f.n_locals.max(n + 2)],
        d_in,
        unrolled: [None, None],
        branch: 0,
        f,
    };
    let mut next = 0;
    for (p, len) in lens.iter().enumerate() {
        c.locals[p] = Some(match len {
            None => {
                next += 1;
                Val::S(c.push(Inst::Param(next - 1))?)
            }
            Some(l) => Val::V(
                (0..*l)
                    .map(|_| {
                        next += 1;
                        c.push(Inst::Param(next - 1))
                    })
                    .collect::<C<_>>()?,
            ),
        });
    }
    if inputs {
        c.locals[n] = Some(Val::Input(Side::X));
        c.locals[n + 1] = Some(Val::Input(Side::Y));
    }
    for (slot, e) in &c.f.lets {
        let v = c.expr(e)?;
        if *slot >= c.locals.len() {
            c.locals.resize(*slot + 1, None);
        }
        c.locals[*slot] = Some(v);
    }
    let out = c.scalar(&c.f.body)?;
    KernelProgram::new(c.insts, out, next).ok_or(Stop::Outside)
}
