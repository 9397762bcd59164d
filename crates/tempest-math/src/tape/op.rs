//! What each node of a tape was made by.

use super::Var;
use nalgebra::DMatrix;
use tempest_core::error::Error;

/// An element-wise function with its derivative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unary {
    /// tanh x.
    Tanh,
    /// max(x, 0) (slope 0 at 0).
    Relu,
    /// eˣ.
    Exp,
    /// ln x.
    Ln,
    /// ln(1 + eˣ), computed without overflow.
    Softplus,
    /// 1 / (1 + e⁻ˣ).
    Sigmoid,
    /// x².
    Square,
    /// √x.
    Sqrt,
}

impl Unary {
    /// f(x).
    pub fn apply(self, x: f64) -> f64 {
        match self {
            Unary::Tanh => x.tanh(),
            Unary::Relu => x.max(0.0),
            Unary::Exp => x.exp(),
            Unary::Ln => x.ln(),
            Unary::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
            Unary::Sigmoid => {
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            Unary::Square => x * x,
            Unary::Sqrt => x.sqrt(),
        }
    }

    /// f′(x), given x and y = f(x).
    pub fn slope(self, x: f64, y: f64) -> f64 {
        match self {
            Unary::Tanh => 1.0 - y * y,
            Unary::Relu => {
                if x > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Unary::Exp => y,
            Unary::Ln => 1.0 / x,
            Unary::Softplus => Unary::Sigmoid.apply(x),
            Unary::Sigmoid => y * (1.0 - y),
            Unary::Square => 2.0 * x,
            Unary::Sqrt => 0.5 / y,
        }
    }
}

/// A caller's vector–Jacobian product: the operands' adjoints (one per
/// operand, each of its shape) from the node's adjoint.
pub(super) type Vjp = Box<dyn Fn(&DMatrix<f64>) -> Result<Vec<DMatrix<f64>>, Error>>;

/// How a node was made.
pub(super) enum Op {
    /// An input or a constant.
    Leaf,
    /// A + B, broadcasting.
    Add(Var, Var),
    /// A − B, broadcasting.
    Sub(Var, Var),
    /// A ∘ B, broadcasting.
    Mul(Var, Var),
    /// A ⊘ B, broadcasting.
    Div(Var, Var),
    /// c·A.
    Scale(Var, f64),
    /// A + c.
    Shift(Var),
    /// f(A) element-wise.
    Map(Var, Unary),
    /// op(A) op(B), transposing where the flags say.
    MatMul(Var, bool, Var, bool),
    /// Aᵀ.
    Transpose(Var),
    /// Σᵢⱼ Aᵢⱼ [1, 1].
    Sum(Var),
    /// Column sums [1, n].
    SumRows(Var),
    /// Row sums [m, 1].
    SumCols(Var),
    /// Entries off..off + r·c of A (by columns) as an [r, c] matrix.
    Part(Var, usize),
    /// The listed entries (row, column) of A as [k, 1].
    Pick(Var, Vec<(usize, usize)>),
    /// The diagonal [n, 1].
    Diag(Var),
    /// The lower Cholesky factor of A + jitter·I.
    Cholesky(Var),
    /// L⁻¹ B (`false`) or L⁻ᵀ B (`true`).
    Solve(Var, Var, bool),
    /// 2 Σ ln Lᵢᵢ.
    LogDetChol(Var),
    /// Each row minus its log-sum-exp.
    LogSoftmaxRows(Var),
    /// A caller's node.
    Custom(Vec<Var>, Vjp),
    /// Reverse-mode scalars as [k, 1]: each entry's node on the sweep's
    /// tape (`None` for a constant).
    Gather(Vec<Option<usize>>),
}

impl Op {
    /// The nodes this one reads.
    pub(super) fn operands(&self) -> Vec<Var> {
        match self {
            Op::Leaf | Op::Gather(_) => vec![],
            Op::Add(a, b) | Op::Sub(a, b) | Op::Mul(a, b) | Op::Div(a, b) => vec![*a, *b],
            Op::MatMul(a, _, b, _) | Op::Solve(a, b, _) => vec![*a, *b],
            Op::Scale(a, _)
            | Op::Shift(a)
            | Op::Map(a, _)
            | Op::Transpose(a)
            | Op::Sum(a)
            | Op::SumRows(a)
            | Op::SumCols(a)
            | Op::Part(a, _)
            | Op::Pick(a, _)
            | Op::Diag(a)
            | Op::Cholesky(a)
            | Op::LogDetChol(a)
            | Op::LogSoftmaxRows(a) => vec![*a],
            Op::Custom(vs, _) => vs.clone(),
        }
    }
}
