//! The matrix-level reverse mode: a tape of matrix-valued operations whose
//! backward pass composes the adjoint rules of [`crate::adjoint`].
//!
//! Code that needs the gradient of a scalar with respect to many inputs
//! (network weights, kernel hypers, variational parameters, and what an
//! inner optimisation makes of them) records its computation on a [`Tape`],
//! one node per operation on whole matrices, then asks for the adjoints of
//! its inputs by one backward pass ([`Tape::gradient`], or [`Tape::vjp`]
//! from a given output adjoint). The cost is a small multiple of one
//! evaluation whatever the number of inputs; scalar functions inside a node
//! (activations, kernel entries) keep their own derivatives.
//!
//! Every value is an `f64` matrix (a number is [1, 1], a vector [n, 1]).
//! The operations:
//!
//! | operation | result | adjoint rule |
//! |---|---|---|
//! | [`Tape::add`], [`Tape::sub`], [`Tape::mul`], [`Tape::div`] | element-wise, broadcasting a [1, n], [m, 1] or [1, 1] operand | summed over the broadcast dimensions |
//! | [`Tape::scale`], [`Tape::shift`] | c·A, A + c | |
//! | [`Tape::map`] | f(A) element-wise ([`Unary`]) | f′ from the input or output |
//! | [`Tape::matmul`] | op(A) op(B) | [`crate::adjoint::matmul_vjp_a`] and `_b` |
//! | [`Tape::transpose`] | Aᵀ | |
//! | [`Tape::sum`], [`Tape::sum_rows`], [`Tape::sum_cols`] | Σ, column sums [1, n], row sums [m, 1] | |
//! | [`Tape::part`] | entries off.. of a vector as an [r, c] matrix by columns | scattered back |
//! | [`Tape::pick`] | chosen entries as [k, 1] | scattered back |
//! | [`Tape::diag`] | the diagonal [n, 1] | |
//! | [`Tape::cholesky`] | L with A + jitter·I = L Lᵀ | [`crate::adjoint::cholesky_vjp`] |
//! | [`Tape::solve_lower`], [`Tape::solve_lower_t`] | L⁻¹ B, L⁻ᵀ B | [`crate::adjoint::solve_lower_vjp`], `_t_vjp` |
//! | [`Tape::log_det_chol`] | 2 Σ ln Lᵢᵢ = ln det(L Lᵀ) | diag(2 / Lᵢᵢ) |
//! | [`Tape::log_softmax_rows`] | each row minus its log-sum-exp | Ā − softmax ∘ rowsum(Ā) |
//! | [`Tape::custom`] | a value and its own vector–Jacobian product | the caller's |
//! | [`Tape::gather`] | reverse-mode scalars ([`crate::reverse::Rev`]) as [k, 1] | into the scalars' adjoints |
//! | [`Tape::entries`] | a node's entries as reverse-mode scalars | from the scalars' adjoints |
//!
//! Inside a reverse sweep ([`crate::reverse::record`]) the tape and the
//! sweep's scalars are one record: [`Tape::gather`] and [`Tape::entries`]
//! join them, and the backward pass visits scalar operations and matrix
//! nodes together, last recorded first, so that model-file code evaluated
//! in `Rev` (hypers through their transforms, a kernel's leaves, a prior
//! mean) and the matrix operations it feeds or reads are differentiated by
//! one pass; [`Grads::rev`] reads a scalar's adjoint.
//!
//! A shape that does not fit is an internal error (the tape is driven by
//! engine code, never by model text); a matrix that is not positive
//! definite after the jitter escalation is a numerical error naming it.
//! Nodes that depend on no [`Tape::input`] carry no adjoint, so constants
//! cost nothing in the backward pass.

mod back;
mod bridge;
mod op;
mod record;
#[cfg(test)]
mod tests;

pub use back::Grads;
pub use op::Unary;

use nalgebra::DMatrix;
use op::Op;
use tempest_core::error::Error;

/// A handle to one node of a [`Tape`] (valid on the tape that made it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Var(usize);

impl Var {
    /// The node's position on its tape (nodes are numbered in the order
    /// they were recorded).
    pub fn index(self) -> usize {
        self.0
    }
}

/// One recorded operation: its value and how it was made.
struct Node {
    value: DMatrix<f64>,
    op: Op,
    /// Whether the node depends on an input (and so carries an adjoint).
    varies: bool,
    /// The number of scalar operations the thread's reverse sweep had
    /// recorded when this node was (0 outside a sweep), and that sweep's
    /// number (0 for none): where the node falls among the scalars.
    mark: usize,
    sweep: u64,
}

/// A record of matrix operations, for one backward pass (or several: the
/// tape is not consumed by [`Tape::gradient`]).
pub struct Tape {
    nodes: Vec<Node>,
    /// This tape's number, unique in the process (for joining a sweep).
    id: u64,
    /// The reverse sweep this tape has been joined to, if any.
    joined: Option<u64>,
}

impl Default for Tape {
    fn default() -> Tape {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Tape {
            nodes: Vec::new(),
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            joined: None,
        }
    }
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Tape {
        Tape::default()
    }

    /// The number of nodes recorded.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A differentiable input: its adjoint is reported by the backward pass.
    pub fn input(&mut self, value: DMatrix<f64>) -> Var {
        self.push(value, Op::Leaf, true)
    }

    /// A vector input [n, 1].
    pub fn input_vector(&mut self, values: &[f64]) -> Var {
        self.input(DMatrix::from_column_slice(values.len(), 1, values))
    }

    /// A constant: no adjoint flows into it.
    pub fn constant(&mut self, value: DMatrix<f64>) -> Var {
        self.push(value, Op::Leaf, false)
    }

    /// A number [1, 1] as a constant.
    pub fn number(&mut self, value: f64) -> Var {
        self.constant(DMatrix::from_element(1, 1, value))
    }

    /// The value of a node. `v` must come from this tape (as an index into
    /// a slice, another tape's handle past its end panics; the recording
    /// and backward methods check their operands and return an internal
    /// error instead).
    pub fn value(&self, v: Var) -> &DMatrix<f64> {
        &self.nodes[v.0].value
    }

    /// The value of a [1, 1] node; an internal error for another shape.
    pub fn scalar(&self, v: Var) -> Result<f64, Error> {
        self.check(&[v])?;
        let m = self.value(v);
        if m.shape() != (1, 1) {
            return Err(Error::internal(format!(
                "a tape node of shape {:?} was read as a number",
                m.shape()
            )));
        }
        Ok(m[(0, 0)])
    }

    /// (rows, columns) of a node (`v` from this tape, as for [`Tape::value`]).
    pub fn shape(&self, v: Var) -> (usize, usize) {
        self.value(v).shape()
    }

    /// Whether the node depends on an input (`v` from this tape, as for
    /// [`Tape::value`]).
    pub fn varies(&self, v: Var) -> bool {
        self.nodes[v.0].varies
    }

    fn push(&mut self, value: DMatrix<f64>, op: Op, varies: bool) -> Var {
        let sweep = crate::reverse::open_sweep();
        let mark = sweep.map_or(0, |_| crate::reverse::recorded());
        self.nodes.push(Node {
            value,
            op,
            varies,
            mark,
            sweep: sweep.unwrap_or(0),
        });
        Var(self.nodes.len() - 1)
    }

    /// Records `op` with its operands, the node varying when one of them
    /// does.
    fn record(&mut self, value: DMatrix<f64>, op: Op) -> Var {
        let varies = op.operands().iter().any(|&v| self.nodes[v.0].varies);
        self.push(value, op, varies)
    }

    /// An internal error unless `v` is a node of this tape.
    fn check(&self, vars: &[Var]) -> Result<(), Error> {
        match vars.iter().find(|v| v.0 >= self.nodes.len()) {
            Some(v) => Err(Error::internal(format!(
                "tape node {} is not on this tape of {} nodes",
                v.0,
                self.nodes.len()
            ))),
            None => Ok(()),
        }
    }
}
