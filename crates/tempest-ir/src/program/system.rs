//! Compiled ODE systems: a `system` body whose value is a vector literal of
//! scalar expressions (`[x[1], theta * (1 - x[0]^2) * x[1] - x[0]]`),
//! compiled once into the instruction set of kernels and likelihoods
//! ([`tempest_model::program::Inst`], one [`KernelProgram`]) over one
//! parameter list — the time, the state's elements, then the elements of
//! the parameters that the body reads — with one output slot per state
//! element. It runs generically over the scalar type without allocating,
//! so a dual-number solve (forward sensitivities) pays no interpretation
//! per right-hand-side evaluation.
//!
//! Bodies outside this form (a vector built by arithmetic, a non-constant
//! index) are not compiled and keep the general evaluator, which gives the
//! same values.

use super::super::expr::{Builtin, Ref, TExpr, TKind};
use super::super::graph::Function;
use super::super::types::Ty;
use super::super::value::Value;
use tempest_model::custom::Scalar;
use tempest_model::program::{Inst, KernelProgram};
use tempest_syntax::ast::{BinOp, UnOp};

/// What a parameter slot of the compiled body reads, before the slots are
/// laid out (the state's and the parameters' lengths are known only once
/// the whole body is compiled).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Read {
    Time,
    /// Element k of the state.
    State(usize),
    /// Element k of parameter j (k = 0 for a scalar).
    Param(usize, usize),
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
    /// The body over the parameter list [t, x₀ … x_{S−1}, the parameters'
    /// elements read].
    program: KernelProgram,
    /// The slot of each output (state element).
    outs: Vec<usize>,
    /// The largest state index read, plus one.
    state_len: usize,
    /// Per parameter, the largest element index read, plus one.
    param_len: Vec<usize>,
}

struct Compiler<'a> {
    f: &'a Function,
    insts: Vec<Inst>,
    /// What each `Inst::Param(r)` reads, by r.
    reads: Vec<Read>,
    locals: Vec<Option<Local>>,
    state_len: usize,
    param_len: Vec<usize>,
}

impl Compiler<'_> {
    fn push(&mut self, i: Inst) -> usize {
        self.insts.push(i);
        self.insts.len() - 1
    }

    /// A slot reading `r` from the parameter list.
    fn read(&mut self, r: Read) -> usize {
        let k = self.reads.len();
        self.reads.push(r);
        self.push(Inst::Param(k))
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
                        self.read(Read::State(k))
                    }
                    Local::VectorParam(j) => {
                        self.param_len[j] = self.param_len[j].max(k + 1);
                        self.read(Read::Param(j, k))
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
            reads: Vec::new(),
            locals: vec![None; f.n_locals.max(f.params.len())],
            state_len: 0,
            param_len: vec![0; n_params],
        };
        let t = c.read(Read::Time);
        c.locals[0] = Some(Local::Scalar(t));
        c.locals[1] = Some(Local::State);
        for (j, (_, ty)) in f.params[2..].iter().enumerate() {
            c.locals[2 + j] = Some(if matches!(ty, Ty::Vector(_)) {
                Local::VectorParam(j)
            } else {
                c.param_len[j] = 1;
                Local::Scalar(c.read(Read::Param(j, 0)))
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
        // The parameter list: t, the S state elements, then each
        // parameter's elements read.
        let states = outs.len();
        if c.state_len > states {
            return None;
        }
        let mut offsets = Vec::with_capacity(c.param_len.len());
        let mut n = 1 + states;
        for &len in &c.param_len {
            offsets.push(n);
            n += len;
        }
        let at = |r: Read| match r {
            Read::Time => 0,
            Read::State(k) => 1 + k,
            Read::Param(j, k) => offsets[j] + k,
        };
        let insts = c
            .insts
            .into_iter()
            .map(|i| match i {
                Inst::Param(r) => Inst::Param(at(c.reads[r])),
                i => i,
            })
            .collect();
        let out = outs.last().copied().unwrap_or(0);
        Some(SystemProgram {
            program: KernelProgram::new(insts, out, n)?,
            outs,
            state_len: c.state_len,
            param_len: c.param_len,
        })
    }

    /// The parameter list [t, x, the parameters' elements read] with t
    /// and x left for [`SystemProgram::run`] to fill, when the program fits
    /// these values (a state of the length it computes, every element it
    /// reads present); `None` otherwise, and the general evaluator reports
    /// what is wrong.
    pub fn bind<T: Scalar>(&self, state: usize, params: &[Value<T>]) -> Option<Vec<T>> {
        if state != self.outs.len()
            || self.state_len > state
            || params.len() != self.param_len.len()
        {
            return None;
        }
        let mut flat = vec![T::zero(); 1 + state];
        for (p, &need) in params.iter().zip(&self.param_len) {
            match p {
                Value::Vector(v) if v.len() >= need => flat.extend(v.iter().take(need).copied()),
                Value::IntArray(v) if v.len() >= need => {
                    flat.extend(v.iter().take(need).map(|&i| T::constant(i as f64)))
                }
                Value::Vector(_) | Value::IntArray(_) => return None,
                v => flat.push(v.scalar()?),
            }
        }
        (flat.len() == self.program.n_params()).then_some(flat)
    }

    /// dx/dt at (t, x) into `dx`, with the parameter list `flat` made by
    /// [`SystemProgram::bind`] (its t and x are written here); `vals` is
    /// scratch of [`SystemProgram::slots`] slots.
    pub fn run<T: Scalar>(&self, t: f64, x: &[T], flat: &mut [T], vals: &mut [T], dx: &mut [T]) {
        flat[0] = T::constant(t);
        flat[1..1 + x.len()].copy_from_slice(x);
        self.program.run(flat, vals);
        for (d, &o) in dx.iter_mut().zip(&self.outs) {
            *d = vals[o];
        }
    }

    /// The right-hand side's vector–Jacobian product at (t, x): with
    /// weights `w` \[S\], Σᵢ wᵢ ∂fᵢ/∂(t, x, parameters) added to `g`, in
    /// the layout of `flat` ([`SystemProgram::bind`]: g\[1..1+S\] is x̄,
    /// the parameters' elements follow, [`SystemProgram::param_lens`] of
    /// each). `vals` and `adj` are scratch of [`SystemProgram::slots`]
    /// slots. Allocates nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn vjp(
        &self,
        t: f64,
        x: &[f64],
        flat: &mut [f64],
        w: &[f64],
        vals: &mut [f64],
        adj: &mut [f64],
        g: &mut [f64],
    ) {
        flat[0] = t;
        flat[1..1 + x.len()].copy_from_slice(x);
        self.program.run_vjp(flat, &self.outs, w, vals, adj, g);
    }

    /// Per parameter of the system, the number of its elements the body
    /// reads (its first ones): their places in [`SystemProgram::bind`]'s
    /// list follow the state's, in order.
    pub fn param_lens(&self) -> &[usize] {
        &self.param_len
    }

    /// The number of scratch slots [`SystemProgram::run`] needs.
    pub fn slots(&self) -> usize {
        self.program.len()
    }
}
