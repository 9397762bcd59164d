//! Compiled ODE systems: a `system` body whose value is a vector literal of
//! scalar expressions (`[x[1], theta * (1 - x[0]^2) * x[1] - x[0]]`),
//! compiled once into a flat list of scalar instructions over the time,
//! the state's elements and the parameters' elements, with one output slot
//! per state element. It runs generically over the scalar type without
//! allocating, so a dual-number solve (forward sensitivities) pays no
//! interpretation per right-hand-side evaluation.
//!
//! Bodies outside this form (a vector built by arithmetic, a non-constant
//! index) are not compiled and keep the general evaluator, which gives the
//! same values.

use super::super::expr::{Builtin, Ref, TExpr, TKind};
use super::super::graph::Function;
use super::super::types::Ty;
use super::super::value::Value;
use tempest_model::builtin::call1;
use tempest_model::custom::Scalar;
use tempest_syntax::ast::{BinOp, UnOp};

#[derive(Clone, Debug, PartialEq)]
enum Inst {
    Const(f64),
    Time,
    /// Element k of the state.
    State(usize),
    /// Element k of parameter j (k = 0 for a scalar).
    Param(usize, usize),
    Neg(usize),
    Not(usize),
    Bin(BinOp, usize, usize),
    PowI(usize, i32),
    Call(Builtin, usize),
    Select(usize, usize, usize),
}

/// What a local of the body holds once compiled.
#[derive(Clone, Copy)]
enum Local {
    Scalar(usize),
    State,
    VectorParam(usize),
}

/// A compiled system: dx/dt from (t, x, parameters).
#[derive(Clone, Debug)]
pub struct SystemProgram {
    insts: Vec<Inst>,
    outs: Vec<usize>,
    /// The largest state index read, plus one.
    state_len: usize,
    /// Per parameter, the largest element index read, plus one.
    param_len: Vec<usize>,
}

struct Compiler<'a> {
    f: &'a Function,
    insts: Vec<Inst>,
    locals: Vec<Option<Local>>,
    state_len: usize,
    param_len: Vec<usize>,
}

impl Compiler<'_> {
    fn push(&mut self, i: Inst) -> usize {
        self.insts.push(i);
        self.insts.len() - 1
    }

    fn expr(&mut self, e: &TExpr) -> Option<usize> {
        tempest_core::limits::deep(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &TExpr) -> Option<usize> {
        let scalar = |t: &Ty| matches!(t, Ty::Int | Ty::Real | Ty::Bool);
        Some(match &e.kind {
            TKind::Int(i) => self.push(Inst::Const(*i as f64)),
            TKind::Real(r) => self.push(Inst::Const(*r)),
            TKind::Bool(b) => self.push(Inst::Const(if *b { 1.0 } else { 0.0 })),
            TKind::Ref(Ref::Local(i)) => match self.locals.get(*i).copied().flatten()? {
                Local::Scalar(s) => s,
                _ => return None,
            },
            TKind::Index(base, idx) if idx.len() == 1 => {
                let TKind::Int(k) = idx[0].kind else {
                    return None;
                };
                let k = usize::try_from(k).ok()?;
                let TKind::Ref(Ref::Local(i)) = base.kind else {
                    return None;
                };
                match self.locals.get(i).copied().flatten()? {
                    Local::State => {
                        self.state_len = self.state_len.max(k + 1);
                        self.push(Inst::State(k))
                    }
                    Local::VectorParam(j) => {
                        self.param_len[j] = self.param_len[j].max(k + 1);
                        self.push(Inst::Param(j, k))
                    }
                    Local::Scalar(_) => return None,
                }
            }
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
                if !scalar(&a.ty) || !scalar(&b.ty) {
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
            TKind::Builtin(b, args) if b.is_elementwise() && args.len() == 1 => {
                if !scalar(&args[0].ty) {
                    return None;
                }
                let a = self.expr(&args[0])?;
                self.push(Inst::Call(*b, a))
            }
            TKind::If(c, a, b) => {
                let (c, a, b) = (self.expr(c)?, self.expr(a)?, self.expr(b)?);
                self.push(Inst::Select(c, a, b))
            }
            _ => return None,
        })
    }
}

impl SystemProgram {
    /// Compile a `system` definition, or `None` when its body is outside
    /// what programs cover (see the module documentation).
    pub fn compile(f: &Function) -> Option<SystemProgram> {
        if f.params.len() < 2 {
            return None;
        }
        let n_params = f.params.len() - 2;
        let mut c = Compiler {
            f,
            insts: Vec::new(),
            locals: vec![None; f.n_locals.max(f.params.len())],
            state_len: 0,
            param_len: vec![0; n_params],
        };
        let t = c.push(Inst::Time);
        c.locals[0] = Some(Local::Scalar(t));
        c.locals[1] = Some(Local::State);
        for (j, (_, ty)) in f.params[2..].iter().enumerate() {
            c.locals[2 + j] = Some(if matches!(ty, Ty::Vector(_)) {
                Local::VectorParam(j)
            } else {
                c.param_len[j] = 1;
                Local::Scalar(c.push(Inst::Param(j, 0)))
            });
        }
        for (slot, e) in &c.f.lets {
            if !matches!(e.ty, Ty::Int | Ty::Real | Ty::Bool) {
                return None;
            }
            let s = c.expr(e)?;
            if *slot >= c.locals.len() {
                c.locals.resize(*slot + 1, None);
            }
            c.locals[*slot] = Some(Local::Scalar(s));
        }
        let TKind::Array(xs) = &c.f.body.kind else {
            return None;
        };
        let mut outs = Vec::with_capacity(xs.len());
        for x in xs {
            if !matches!(x.ty, Ty::Int | Ty::Real | Ty::Bool) {
                return None;
            }
            outs.push(c.expr(x)?);
        }
        Some(SystemProgram {
            insts: c.insts,
            outs,
            state_len: c.state_len,
            param_len: c.param_len,
        })
    }

    /// The parameters flattened into one list with each parameter's
    /// offset, when the program fits these values (a state of the length
    /// it computes, every element it reads present); `None` otherwise,
    /// and the general evaluator reports what is wrong.
    pub fn bind<T: Scalar>(
        &self,
        state: usize,
        params: &[Value<T>],
    ) -> Option<(Vec<T>, Vec<usize>)> {
        if state != self.outs.len()
            || self.state_len > state
            || params.len() != self.param_len.len()
        {
            return None;
        }
        let mut flat = Vec::new();
        let mut offsets = Vec::with_capacity(params.len());
        for (p, &need) in params.iter().zip(&self.param_len) {
            offsets.push(flat.len());
            match p {
                Value::Vector(v) if v.len() >= need => flat.extend(v.iter().copied()),
                Value::IntArray(v) if v.len() >= need => {
                    flat.extend(v.iter().map(|&i| T::constant(i as f64)))
                }
                v => flat.push(v.scalar()?),
            }
        }
        Some((flat, offsets))
    }

    /// dx/dt at (t, x) into `dx`, with parameters bound by
    /// [`SystemProgram::bind`]; `vals` is scratch of at least one slot per
    /// instruction.
    pub fn run<T: Scalar>(
        &self,
        t: f64,
        x: &[T],
        flat: &[T],
        offsets: &[usize],
        vals: &mut [T],
        dx: &mut [T],
    ) {
        for (i, inst) in self.insts.iter().enumerate() {
            let v = match *inst {
                Inst::Const(c) => T::constant(c),
                Inst::Time => T::constant(t),
                Inst::State(k) => x[k],
                Inst::Param(j, k) => flat[offsets[j] + k],
                Inst::Neg(a) => -vals[a],
                Inst::Not(a) => tempest_model::program::not_value(vals[a]),
                Inst::PowI(a, k) => vals[a].powi(k),
                Inst::Call(b, a) => call1(b, vals[a]),
                Inst::Select(c, a, b) => {
                    if vals[c].to_constant() != 0.0 {
                        vals[a]
                    } else {
                        vals[b]
                    }
                }
                Inst::Bin(op, a, b) => tempest_model::program::bin_value(op, vals[a], vals[b]),
            };
            vals[i] = v;
        }
        for (d, &o) in dx.iter_mut().zip(&self.outs) {
            *d = vals[o];
        }
    }

    /// The number of scratch slots [`SystemProgram::run`] needs.
    pub fn slots(&self) -> usize {
        self.insts.len()
    }
}
