//! The samplers' log density compiled once: the model's lets, priors and
//! observations lowered to a flat program over numbers, vectors and
//! matrices, with a forward pass and a reverse pass that read and write
//! buffers sized when the program is made ([`Workspace`]), so that a
//! gradient allocates nothing (an ODE solution's sensitivities aside).
//! It is the samplers' one reverse mode: every model a sampler accepts
//! compiles, and a construct outside it is an error at its place in the
//! file.
//!
//! Everything that does not depend on a param is evaluated once, when the
//! program is compiled (data items are read in place, never copied). What
//! remains is a list of nodes in evaluation order, each a number, a vector
//! \[N\] or a matrix \[R, C\] (column-major) laid out in one array: params,
//! element-wise instructions with broadcasting, matrix products, sums, dot
//! products, indexing, gathers and columns, array literals, and `ode`
//! solutions. The element-wise nodes (arithmetic, built-ins, comparisons,
//! `!`, and `if`, whose condition, when it varies, selects at each run)
//! are instructions of the one instruction set of compiled programs
//! ([`Inst`], the set kernel, likelihood and ODE-system programs are
//! made of), applied entry by entry with the same values and partial
//! derivatives ([`Inst::elem_value`], [`Inst::elem_partials`]); the other
//! nodes are the vector and matrix structure around them. Each sampling
//! statement is then one [`Term`] over its N outcomes (whole-vector closed forms, element closed forms, a
//! model-file likelihood's compiled program, or forward mode per element),
//! or, for the few statements a term does not hold (more than six
//! arguments or eight varying coordinates), the general statement VJP
//! ([`crate::pointwise::Pointwise::sum_vjp`]). The reverse pass visits the
//! nodes last first, each adding its operands' adjoints by its rule (the
//! instruction set's partials for an element-wise node, Xᵀ ḡ for a
//! matrix–vector product, a sum for a broadcast number,
//! the forward sensitivities' or the adjoint sweep's vector–Jacobian
//! product for an ODE).
//!
//! A latent GP sampled in whitened form (one site, replicated or not) is a
//! leaf f = μ + L v whose L v the caller computes; the run returns f's
//! adjoint for the caller's Lᵀ f̄. A replicated GP's values are a matrix
//! \[N, C\]. A GP integrated out is the caller's: its observation is left
//! out of the program (power 0).

mod back;
mod compile;
mod general;
mod run;

use crate::pointwise::term::Term;
use crate::value::Value;
use tempest_model::program::Inst;

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

/// The shape of an operand.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sh {
    /// A number.
    One,
    /// A vector of N.
    Each(usize),
    /// A matrix \[R, C\].
    Mat(usize, usize),
    /// Anything else (a truth value, text, a kernel).
    Other,
}

impl Sh {
    /// The number of entries.
    fn len(self) -> usize {
        match self {
            Sh::One => 1,
            Sh::Each(n) => n,
            Sh::Mat(r, c) => r * c,
            Sh::Other => 0,
        }
    }
}

/// The shape of a constant or data operand (an integer array counts as a
/// vector of numbers, a truth value as a number).
fn shape_of(v: &Value<f64>) -> Sh {
    match v {
        Value::Real(_) | Value::Int(_) | Value::Bool(_) => Sh::One,
        Value::Vector(x) => Sh::Each(x.len()),
        Value::Matrix(m) => Sh::Mat(m.nrows(), m.ncols()),
        Value::IntArray(k) => Sh::Each(k.len()),
        _ => Sh::Other,
    }
}

/// What a node computes.
#[derive(Clone)]
enum Op {
    /// Entries `x .. x + len` of the params' values.
    Param(usize),
    /// A matrix param \[R, C\] from entries `x ..` of the params' values,
    /// which hold it row by row.
    ParamMat(usize),
    /// An element-wise instruction of the one instruction set of compiled
    /// programs ([`Inst`]: `Neg`, `Not`, `Bin`, `Call` or `Select`, see
    /// [`Inst::is_elementwise`]) applied entry by entry, its operands 0,
    /// 1, 2 being the sources listed here (a number broadcast; unused ones
    /// repeat the first). Its values and partial derivatives are
    /// [`Inst::elem_value`] and [`Inst::elem_partials`], the same
    /// definitions kernel, likelihood and ODE-system programs run.
    Elem(Inst, [Src; 3]),
    /// A b for a matrix A \[R, K\] and a vector b \[K\].
    MatVec(Src, Src),
    /// A B for matrices A \[R, K\] and B \[K, C\].
    MatMul(Src, Src),
    /// Σ a.
    Sum(Src),
    /// Σ a / N.
    Mean(Src),
    /// log Σ exp(a).
    Logsumexp(Src),
    /// Σ aᵢ bᵢ.
    Dot(Src, Src),
    /// Σ (aᵢ − bᵢ)².
    Sqdist(Src, Src),
    /// Entry i of a (column-major for a matrix).
    Index(Src, usize),
    /// Entries k of a for each k of a constant integer array (positions,
    /// column-major for a matrix): a gather, a row, rows or a column.
    Gather(Src, Src),
    /// A vector of numbers.
    Array(Vec<Src>),
    /// A matrix whose row k is vector k.
    Stack(Vec<Src>),
    /// The latent GP's values f = μ + L v at its training inputs: the mean
    /// μ (a number) plus L v, given to each run.
    Site(Src),
    /// The solution of an ODE system at its output times \[T, S\].
    Ode(Box<OdeCall>),
}

/// An `ode(...)` call of the program.
#[derive(Clone)]
struct OdeCall {
    /// The system (index into the graph's functions).
    system: usize,
    /// The arguments' expressions (for the solver's messages) and their
    /// sources: x0, t0, ts, then the system's parameters.
    exprs: Vec<crate::expr::TExpr>,
    args: Vec<Src>,
    /// Which arguments vary (are nodes): those with sensitivities.
    varying: Vec<bool>,
    /// Tolerances and the step limit.
    settings: tempest_math::ode::OdeSettings,
    /// The call's place in the file.
    span: tempest_syntax::ast::Span,
    /// Whether the adjoint's record at the step limit fits in memory,
    /// asked at the first gradient (`ir::ode::solve_with_sensitivities`).
    record_fits: std::sync::OnceLock<bool>,
}

/// One node: its operation and where its value lies in the workspace.
#[derive(Clone)]
struct Node {
    op: Op,
    /// First entry in the value (and adjoint) array.
    off: usize,
    /// Its shape.
    sh: Sh,
    /// Entries (1 for a number).
    len: usize,
    /// Whether it lies in a branch of an `if` whose condition varies: its
    /// reverse rule is skipped when its adjoint is zero, so the branch not
    /// taken (whose values may be anything) adds nothing.
    guarded: bool,
}

impl Node {
    /// Whether it is a number (broadcast) rather than a vector or matrix.
    fn scalar(&self) -> bool {
        self.sh == Sh::One
    }
}

/// How a statement is evaluated.
#[derive(Clone)]
enum Way {
    /// Prepared over slices.
    Term(Term),
    /// By the general statement VJP over values (argument `j` of
    /// observation or prior `stmt`), which allocates.
    General(Stmt),
}

/// A statement of the model.
#[derive(Clone, Copy, Debug)]
enum Stmt {
    /// The prior of a param (index into the graph's priors).
    Prior(usize),
    /// An observation (index into the graph's observations).
    Observation(usize),
}

/// One sampling statement of the program.
#[derive(Clone)]
struct TermNode {
    way: Way,
    /// The outcomes \[N\].
    y: Src,
    /// The arguments.
    args: Vec<Src>,
    /// Its power: 1 for a prior; for an observation the power written in
    /// the model, multiplied by the density's power when run.
    power: f64,
    /// Whether it is an observation (tempered by the density's power).
    observation: bool,
    /// Whether the outcome varies (a param's prior).
    outcome: bool,
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
    /// The values a program of expressions gives
    /// ([`DensityProgram::compile_values`]).
    outputs: Vec<Src>,
    /// The value array's length.
    values: usize,
    /// The scratch's length.
    scratch: usize,
}
