//! The typed graph of a model: declarations, latent GPs and their sites,
//! deterministic definitions, observation and prior terms, variational
//! families, estimates and the `infer` block as written. Expressions refer
//! to nodes by index.

use super::expr::TExpr;
use super::types::Ty;
use std::sync::Arc;
use tempest_model::custom::DynLikelihood;
use tempest_model::dist::Dist;
use tempest_syntax::ast::{self, Span};

/// Bound expressions of a declaration (evaluated at binding).
#[derive(Clone, Default)]
pub struct BoundExprs {
    /// `lower = ...`
    pub lower: Option<TExpr>,
    /// `upper = ...`
    pub upper: Option<TExpr>,
}

/// Where a data declaration takes its values from.
#[derive(Clone, Debug)]
pub enum DataSource {
    /// The JSON key or CSV column of the declaration's name (a matrix with no
    /// such column takes all columns no other declaration claims).
    ByName,
    /// `columns("a", "b".."d")`: these CSV columns, in order.
    Columns(Vec<String>),
    /// `columns(except = ["row", "y"])`: every CSV column but these.
    Except(Vec<String>),
    /// `= expr`: a constant.
    Value,
}

/// A `data` declaration.
#[derive(Clone)]
pub struct DataNode {
    /// Its name.
    pub name: String,
    /// Its type, sizes possibly symbolic.
    pub ty: Ty,
    /// Its bounds.
    pub bounds: BoundExprs,
    /// Where its values come from.
    pub source: DataSource,
    /// The constant value for `DataSource::Value`.
    pub value: Option<TExpr>,
    /// `column("c", levels = ["a", "b"])`: the class labels of an int array
    /// in the order they are numbered (0, 1, …).
    pub levels: Option<Vec<String>>,
    /// `column("c", levels = 1..J)` (or a list of integers): the integer
    /// ids of an int array, numbered 0, 1, … in this order at binding
    /// (an `int range` or `int[k]` expression of literals and data).
    pub ids: Option<TExpr>,
    /// The declaration.
    pub span: Span,
}

/// A `hyper` declaration.
#[derive(Clone)]
pub struct HyperNode {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: Ty,
    /// Its bounds.
    pub bounds: BoundExprs,
    /// The initial (or fixed) value; a scalar broadcasts over a vector.
    pub init: Option<TExpr>,
    /// `fixed`: never learned.
    pub fixed: bool,
    /// Its prior (`~ dist(...)`, MAP-II): a log density added to the
    /// objective of the engines that learn hypers; the arguments use data,
    /// literals and hypers only.
    pub prior: Option<DistCall>,
    /// The declaration.
    pub span: Span,
    /// Its sizes as written (`[1000, d]`; the type when it has none): where
    /// errors about its size point.
    pub size_span: Span,
}

/// A `param` declaration.
#[derive(Clone)]
pub struct ParamNode {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: Ty,
    /// Its bounds.
    pub bounds: BoundExprs,
    /// The declaration.
    pub span: Span,
    /// Its sizes as written (see [`HyperNode::size_span`]).
    pub size_span: Span,
}

/// A `let` in the model block.
#[derive(Clone)]
pub struct LetNode {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: TExpr,
    /// The statement.
    pub span: Span,
}

/// A latent GP `f ~ gp(mean, kernel)[C]`.
#[derive(Clone)]
pub struct GpNode {
    /// Its name.
    pub name: String,
    /// The constant mean (a scalar expression).
    pub mean: TExpr,
    /// The kernel expression.
    pub kernel: TExpr,
    /// `[C]`: the number of independent copies.
    pub replicas: Option<TExpr>,
    /// The statement.
    pub span: Span,
}

/// A latent site: a latent GP evaluated at one input expression, `f(X)`.
/// Each distinct (GP, inputs) pair in the model is one site.
#[derive(Clone)]
pub struct SiteNode {
    /// The GP.
    pub gp: usize,
    /// The inputs.
    pub input: TExpr,
    /// The first application.
    pub span: Span,
}

/// Which distribution a term uses.
#[derive(Clone)]
pub enum DistRef {
    /// A built-in one.
    Builtin(Dist),
    /// A `likelihood` defined in the model file (index into `Graph::functions`).
    User(usize),
    /// A likelihood registered from Rust.
    Rust(Arc<dyn DynLikelihood>),
}

/// A distribution applied to arguments.
#[derive(Clone)]
pub struct DistCall {
    /// The distribution.
    pub dist: DistRef,
    /// Its name as written.
    pub name: String,
    /// Positional arguments (broadcast over observations).
    pub args: Vec<TExpr>,
    /// Named options with constant values (e.g. `squash`).
    pub options: Vec<(String, f64)>,
    /// The call.
    pub span: Span,
}

/// An observation `y ~ dist(...) ^ t`.
#[derive(Clone)]
pub struct ObsNode {
    /// The observed data declaration.
    pub data: usize,
    /// The likelihood.
    pub dist: DistCall,
    /// The power of the likelihood (1 when absent).
    pub temperature: Option<TExpr>,
    /// The statement.
    pub span: Span,
}

/// A prior on a parameter (from `param` or the model block).
#[derive(Clone)]
pub struct PriorNode {
    /// The parameter.
    pub param: usize,
    /// Its distribution.
    pub dist: DistCall,
    /// Where it was written.
    pub span: Span,
}

/// What a guide entry approximates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuideTarget {
    /// A latent GP.
    Gp(usize),
    /// A parameter.
    Param(usize),
}

/// The variational families.
#[derive(Clone, Debug, PartialEq)]
pub enum Family {
    /// Prior times Gaussian pseudo-observations (mirror descent).
    Sites,
    /// Independent Gaussians.
    MeanField,
    /// A full-covariance Gaussian.
    FullRank,
    /// A sparse GP with `m` inducing points.
    Inducing {
        /// The number of inducing points.
        m: usize,
    },
    /// A sparse GP with `m` inducing points on a regular grid, the
    /// cross-covariance by cubic interpolation (KISS-GP; one-dimensional
    /// kernel inputs).
    Grid {
        /// The number of grid points.
        m: usize,
    },
    /// A Gaussian over a parameter; `diag` or full covariance.
    Gaussian {
        /// Diagonal covariance?
        diag: bool,
    },
}

impl Family {
    /// The family's name in the language (`sites`, `full_rank`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Family::Sites => "sites",
            Family::MeanField => "mean_field",
            Family::FullRank => "full_rank",
            Family::Inducing { .. } => "inducing",
            Family::Grid { .. } => "grid",
            Family::Gaussian { .. } => "gaussian",
        }
    }
}

/// A guide entry.
#[derive(Clone)]
pub struct GuideNode {
    /// What it approximates.
    pub target: GuideTarget,
    /// The family.
    pub family: Family,
    /// The entry.
    pub span: Span,
}

/// A named expectation `name = E[expr]`.
#[derive(Clone)]
pub struct EstimateNode {
    /// Its name.
    pub name: String,
    /// The integrand.
    pub expr: TExpr,
    /// The entry.
    pub span: Span,
}

/// A user-defined likelihood or kernel.
#[derive(Clone)]
pub struct Function {
    /// Likelihood or kernel.
    pub kind: ast::FunctionKind,
    /// Its name.
    pub name: String,
    /// Parameter names and types, in order (a kernel's two inputs last).
    pub params: Vec<(String, Ty)>,
    /// Local lets: (local slot, value).
    pub lets: Vec<(usize, TExpr)>,
    /// The body's value.
    pub body: TExpr,
    /// Number of local slots (parameters, inputs and lets).
    pub n_locals: usize,
    /// Its compiled program (one instruction set for kernels and
    /// likelihoods, evaluated in any scalar type, with a reverse pass),
    /// when its body is within what programs cover (set by lowering): for
    /// a kernel over its parameters and inputs
    /// ([`super::program::compile_kernel`]), for a likelihood over its
    /// outcome and parameters ([`super::program::compile_likelihood`]).
    pub program: Option<std::sync::Arc<super::program::KernelProgram>>,
    /// A kernel's programs for the lengths of its vector parameters and
    /// the input widths of its uses, compiled at their first evaluation
    /// ([`super::program::ShapedPrograms`]).
    pub shaped: super::program::ShapedPrograms,
    /// A `system`'s compiled right-hand side, when its body is within what
    /// system programs cover (set by lowering).
    pub system_program: Option<std::sync::Arc<super::program::SystemProgram>>,
    /// The definition.
    pub span: Span,
}

/// A whole model as a graph.
#[derive(Clone, Default)]
pub struct Graph {
    /// User-defined likelihoods and kernels.
    pub functions: Vec<Function>,
    /// `data` declarations.
    pub data: Vec<DataNode>,
    /// `hyper` declarations.
    pub hypers: Vec<HyperNode>,
    /// `param` declarations.
    pub params: Vec<ParamNode>,
    /// Model `let`s, in order.
    pub lets: Vec<LetNode>,
    /// Latent GPs.
    pub gps: Vec<GpNode>,
    /// Latent sites (GP, inputs).
    pub sites: Vec<SiteNode>,
    /// Observation terms.
    pub observations: Vec<ObsNode>,
    /// Prior terms.
    pub priors: Vec<PriorNode>,
    /// Variational families.
    pub guides: Vec<GuideNode>,
    /// Named expectations.
    pub estimates: Vec<EstimateNode>,
    /// How to compute them (`using ...`).
    pub estimate_method: Option<ast::Call>,
    /// The `infer` block as written: syntax, which the facade turns into
    /// an engine configuration (each engine validates its own settings),
    /// so the graph imports no engine.
    pub infer: Option<ast::EngineSpec>,
}

impl Graph {
    /// Every name `e` depends on, looking through `let`s (which are listed
    /// too), without repeats.
    pub fn dependencies(&self, e: &TExpr) -> Vec<super::expr::Ref> {
        use super::expr::Ref;
        let mut out: Vec<Ref> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut todo = e.refs();
        while let Some(r) = todo.pop() {
            if !seen.insert(r) {
                continue;
            }
            out.push(r);
            if let Ref::Let(i) = r {
                todo.extend(self.lets[i].value.refs());
            }
        }
        out
    }

    /// The index of a data declaration by name.
    pub fn data_index(&self, name: &str) -> Option<usize> {
        self.data.iter().position(|d| d.name == name)
    }
    /// The index of a hyper by name.
    pub fn hyper_index(&self, name: &str) -> Option<usize> {
        self.hypers.iter().position(|d| d.name == name)
    }
}
