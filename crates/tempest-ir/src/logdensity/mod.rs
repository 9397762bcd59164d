//! The samplers' log density compiled once: the model's lets, priors and
//! observations lowered to a flat program over whole vectors, with a
//! forward pass and a reverse pass that read and write buffers sized when
//! the program is made ([`Workspace`]), so that a gradient allocates
//! nothing.
//!
//! Everything that does not depend on a param is evaluated once, when the
//! program is compiled (data items are read in place, never copied). What
//! remains is a list of nodes in evaluation order, each a number or a
//! vector of N numbers laid out in one array: params, element-wise
//! arithmetic with broadcasting, a data matrix times a vector, element-wise
//! built-ins, sums, dot products, indexing and gathers. Each sampling
//! statement is then one [`Term`] over its N outcomes (whole-vector closed
//! forms, element closed forms, a model-file likelihood's compiled
//! program, or forward mode per element). The reverse pass visits the
//! nodes last first, each adding its operands' adjoints by a hand-derived
//! rule (Xᵀ ḡ for a matrix–vector product, a sum for a broadcast number).
//!
//! A latent GP sampled in whitened form (one site, replicated or not) is a
//! leaf f = μ + L v whose L v the caller computes; the run returns f's
//! adjoint for the caller's Lᵀ f̄. A replicated GP's values \[N, C\] feed
//! `categorical_logit` only. A model with more latent sites, an ODE, a
//! param that is a matrix, or an expression outside this list has no program
//! ([`DensityProgram::compile`] returns `None`), and the samplers keep the
//! general reverse pass over the expressions.

mod compile;
mod run;

use crate::pointwise::term::Term;
use crate::value::Value;
use tempest_model::builtin::Builtin;

pub use run::{At, Workspace};

/// Where an operand's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    /// A node of the program (it varies with the params).
    Node(usize),
    /// A constant evaluated when the program was compiled.
    Const(usize),
    /// A data item of the bound model, read in place.
    Data(usize),
}

/// An element-wise binary operation.
#[derive(Clone, Copy, Debug)]
enum EOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

/// What a node computes.
#[derive(Clone, Debug)]
enum Op {
    /// Entries `x .. x + len` of the params' values.
    Param(usize),
    /// −a.
    Neg(Src),
    /// a ∘ b element-wise, a number broadcast.
    Bin(EOp, Src, Src),
    /// A v for a constant matrix A [len, K] and a vector v [K].
    MatVec(Src, Src),
    /// f(a) element-wise.
    Unary(Builtin, Src),
    /// Σ a.
    Sum(Src),
    /// Σ a / N.
    Mean(Src),
    /// log Σ exp(a).
    Logsumexp(Src),
    /// Σ aᵢ bᵢ.
    Dot(Src, Src),
    /// a\[i\].
    Index(Src, usize),
    /// a\[k\] for each k of a constant integer array.
    Gather(Src, Src),
    /// A vector of numbers.
    Array(Vec<Src>),
    /// The latent GP's values f = μ + L v at its training inputs: the mean
    /// μ (a number) plus L v, given to each run.
    Site(Src),
}

/// One node: its operation and where its value lies in the workspace.
#[derive(Clone, Debug)]
struct Node {
    op: Op,
    /// First entry in the value (and adjoint) array.
    off: usize,
    /// Entries (1 for a number).
    len: usize,
    /// Whether it is a number (broadcast) rather than a vector.
    scalar: bool,
    /// Columns of a matrix node (a replicated latent GP's values \[N, C\],
    /// column-major); 0 for a number or a vector.
    cols: usize,
}

/// One sampling statement of the program.
#[derive(Clone)]
struct TermNode {
    term: Term,
    /// The outcomes \[N\].
    y: Src,
    /// The arguments.
    args: Vec<Src>,
    /// Its power: 1 for a prior; for an observation the power written in
    /// the model, multiplied by the density's power when run.
    power: f64,
    /// Whether it is an observation (tempered by the density's power).
    observation: bool,
    /// First entry of its scratch.
    scratch: usize,
}

/// A model's log density over its params, compiled.
#[derive(Clone)]
pub struct DensityProgram {
    nodes: Vec<Node>,
    consts: Vec<Value<f64>>,
    terms: Vec<TermNode>,
    /// Params' nodes and their first entries in the params' values.
    params: Vec<(usize, usize)>,
    /// The latent GP's node, if the model has one.
    site: Option<usize>,
    /// The value array's length.
    values: usize,
    /// The scratch's length.
    scratch: usize,
}
