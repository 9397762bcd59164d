//! Typed, name-resolved expressions: the checker's output and what the
//! evaluator runs.

use super::types::Ty;
use std::sync::Arc;
use tempest_model::custom::DynKernel;
use tempest_model::kernel::KernelKind;
use tempest_syntax::ast::{BinOp, Span, UnOp};

/// What a name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ref {
    /// A `data` declaration (index into `Graph::data`).
    Data(usize),
    /// A `hyper` declaration.
    Hyper(usize),
    /// A `param` declaration.
    Param(usize),
    /// A `let` in the model block.
    Let(usize),
    /// A parameter, input or local `let` of a user function body.
    Local(usize),
    /// The temperature of a power likelihood (set by the evidence engine).
    Temperature,
}

pub use tempest_model::builtin::Builtin;

/// A typed expression.
#[derive(Clone)]
pub struct TExpr {
    /// What it computes.
    pub kind: TKind,
    /// Its type (sizes may be symbolic).
    pub ty: Ty,
    /// Where it was written.
    pub span: Span,
}

/// The kinds of typed expression.
#[derive(Clone)]
pub enum TKind {
    /// An integer literal.
    Int(i64),
    /// A real literal.
    Real(f64),
    /// A boolean literal.
    Bool(bool),
    /// A string literal.
    Str(String),
    /// A resolved name.
    Ref(Ref),
    /// An array literal (a vector, matrix or list of strings).
    Array(Vec<TExpr>),
    /// An inclusive range.
    Range(Box<TExpr>, Box<TExpr>),
    /// A unary operation.
    Unary(UnOp, Box<TExpr>),
    /// A binary operation (arithmetic, comparison, logic, kernel algebra).
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    /// A built-in function call.
    Builtin(Builtin, Vec<TExpr>),
    /// A built-in kernel; `args` in declaration order, `None` for defaults.
    Kernel {
        /// Which kernel.
        kind: KernelKind,
        /// Its arguments.
        args: Vec<Option<TExpr>>,
        /// The input columns it sees.
        dims: Option<Box<TExpr>>,
    },
    /// A kernel defined in the model file (index into `Graph::functions`).
    UserKernel {
        /// The function.
        func: usize,
        /// Its arguments.
        args: Vec<TExpr>,
        /// The input columns it sees.
        dims: Option<Box<TExpr>>,
    },
    /// A kernel registered from Rust.
    RustKernel {
        /// The kernel.
        kernel: Arc<dyn DynKernel>,
        /// Its arguments.
        args: Vec<TExpr>,
        /// The input columns it sees.
        dims: Option<Box<TExpr>>,
    },
    /// `deep(kernel, mlp([...]))`: a kernel on learned features.
    Deep {
        /// The base kernel.
        kernel: Box<TExpr>,
        /// The feature network.
        net: Box<TExpr>,
        /// `groups = G`: the features split into G equal groups, copy j
        /// of the GP on group j (additive GPs).
        groups: Option<usize>,
    },
    /// `mlp([64, 8], activation = "relu")`: a feature network with these
    /// layer widths and hidden-layer activation.
    Mlp {
        /// The layer widths (the last is the feature dimension).
        widths: Vec<usize>,
        /// The hidden layers' activation.
        activation: tempest_model::network::Activation,
    },
    /// A latent function at inputs: `f(X)`.
    GpApply {
        /// The latent GP (index into `Graph::gps`).
        gp: usize,
        /// The inputs, [N, D] (or a vector of N 1-D inputs).
        input: Box<TExpr>,
        /// The latent site (index into `Graph::sites`), set by lowering.
        site: usize,
    },
    /// Indexing (0-based).
    Index(Box<TExpr>, Vec<TExpr>),
    /// `if c then a else b`.
    If(Box<TExpr>, Box<TExpr>, Box<TExpr>),
    /// `ode(system, x0, t0, ts, p...)`: the solution of an ODE system at
    /// the times ts, a `matrix[T, S]` (row i is the state at ts\[i\]).
    Ode {
        /// The system (index into `Graph::functions`).
        system: usize,
        /// x0 \[S\], t0, ts \[T\], then the system's parameters in order.
        args: Vec<TExpr>,
        /// Tolerances and the step limit.
        settings: tempest_math::ode::OdeSettings,
    },
}

impl TExpr {
    /// A new typed expression.
    pub fn new(kind: TKind, ty: Ty, span: Span) -> Self {
        TExpr { kind, ty, span }
    }

    /// Visit this expression and every sub-expression, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&TExpr)) {
        tempest_core::limits::deep(|| self.walk_inner(f))
    }

    fn walk_inner(&self, f: &mut dyn FnMut(&TExpr)) {
        f(self);
        match &self.kind {
            TKind::Array(xs) | TKind::Builtin(_, xs) | TKind::Ode { args: xs, .. } => {
                xs.iter().for_each(|x| x.walk(f))
            }
            TKind::Range(a, b) | TKind::Binary(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            TKind::Unary(_, a) => a.walk(f),
            TKind::Kernel { args, dims, .. } => {
                args.iter().flatten().for_each(|x| x.walk(f));
                if let Some(d) = dims {
                    d.walk(f);
                }
            }
            TKind::UserKernel { args, dims, .. } | TKind::RustKernel { args, dims, .. } => {
                args.iter().for_each(|x| x.walk(f));
                if let Some(d) = dims {
                    d.walk(f);
                }
            }
            TKind::Deep { kernel, net, .. } => {
                kernel.walk(f);
                net.walk(f);
            }
            TKind::GpApply { input, .. } => input.walk(f),
            TKind::Index(b, idx) => {
                b.walk(f);
                idx.iter().for_each(|x| x.walk(f));
            }
            TKind::If(c, a, b) => {
                c.walk(f);
                a.walk(f);
                b.walk(f);
            }
            TKind::Int(_)
            | TKind::Real(_)
            | TKind::Bool(_)
            | TKind::Str(_)
            | TKind::Ref(_)
            | TKind::Mlp { .. } => {}
        }
    }

    /// Mutable pre-order visit (used by lowering to number latent sites).
    pub fn walk_mut(&mut self, f: &mut dyn FnMut(&mut TExpr)) {
        tempest_core::limits::deep(|| self.walk_mut_inner(f))
    }

    fn walk_mut_inner(&mut self, f: &mut dyn FnMut(&mut TExpr)) {
        f(self);
        match &mut self.kind {
            TKind::Array(xs) | TKind::Builtin(_, xs) | TKind::Ode { args: xs, .. } => {
                xs.iter_mut().for_each(|x| x.walk_mut(f))
            }
            TKind::Range(a, b) | TKind::Binary(_, a, b) => {
                a.walk_mut(f);
                b.walk_mut(f);
            }
            TKind::Unary(_, a) => a.walk_mut(f),
            TKind::Kernel { args, dims, .. } => {
                args.iter_mut().flatten().for_each(|x| x.walk_mut(f));
                if let Some(d) = dims {
                    d.walk_mut(f);
                }
            }
            TKind::UserKernel { args, dims, .. } | TKind::RustKernel { args, dims, .. } => {
                args.iter_mut().for_each(|x| x.walk_mut(f));
                if let Some(d) = dims {
                    d.walk_mut(f);
                }
            }
            TKind::Deep { kernel, net, .. } => {
                kernel.walk_mut(f);
                net.walk_mut(f);
            }
            TKind::GpApply { input, .. } => input.walk_mut(f),
            TKind::Index(b, idx) => {
                b.walk_mut(f);
                idx.iter_mut().for_each(|x| x.walk_mut(f));
            }
            TKind::If(c, a, b) => {
                c.walk_mut(f);
                a.walk_mut(f);
                b.walk_mut(f);
            }
            TKind::Int(_)
            | TKind::Real(_)
            | TKind::Bool(_)
            | TKind::Str(_)
            | TKind::Ref(_)
            | TKind::Mlp { .. } => {}
        }
    }

    /// Every name this expression refers to.
    pub fn refs(&self) -> Vec<Ref> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let TKind::Ref(r) = e.kind {
                out.push(r);
            }
        });
        out
    }

    /// Whether the expression applies a latent function anywhere.
    pub fn uses_latent(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| found |= matches!(e.kind, TKind::GpApply { .. }));
        found
    }
}
