//! Types and symbolic shapes of the IR, and the typing rules shared by the
//! checker (symbolic sizes) and the evaluator (concrete sizes).

use serde::Serialize;
use std::fmt;
use tempest_syntax::ast::BinOp;

/// A dimension: a literal, or the name of an `int` declared in `data`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Size {
    /// A known number.
    Lit(usize),
    /// The value of an `int` data declaration, known after binding.
    Sym(String),
    /// Not known until run time (e.g. the input dimension inside a kernel body).
    Any,
}

impl Size {
    /// Whether two sizes can be equal: `Some(true)` if certainly, `Some(false)`
    /// if certainly not, `None` if it depends on the data.
    pub fn compatible(&self, other: &Size) -> Option<bool> {
        match (self, other) {
            (Size::Lit(a), Size::Lit(b)) => Some(a == b),
            (Size::Sym(a), Size::Sym(b)) if a == b => Some(true),
            _ => None,
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Lit(n) => write!(f, "{n}"),
            Size::Sym(s) => write!(f, "{s}"),
            Size::Any => write!(f, "?"),
        }
    }
}

/// The type of an expression.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Ty {
    /// An integer.
    Int,
    /// A real number.
    Real,
    /// A truth value.
    Bool,
    /// A string (column names only).
    Str,
    /// A column vector of reals.
    Vector(Size),
    /// A matrix of reals, `[rows, cols]`.
    Matrix(Size, Size),
    /// An array of integers (labels, counts).
    IntArray(Size),
    /// A list of strings.
    StrArray(Size),
    /// A covariance function.
    Kernel,
    /// A feature network for deep kernels.
    Network,
    /// A latent function; `Some(C)` for `C` independent copies.
    Gp(Option<Size>),
    /// An inclusive range of integers.
    IntRange,
    /// An inclusive range of strings with a numeric suffix.
    StrRange,
    /// An unknown type, after an error (suppresses follow-on errors).
    Unknown,
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Int => write!(f, "int"),
            Ty::Real => write!(f, "real"),
            Ty::Bool => write!(f, "bool"),
            Ty::Str => write!(f, "string"),
            Ty::Vector(n) => write!(f, "vector[{n}]"),
            Ty::Matrix(n, m) => write!(f, "matrix[{n}, {m}]"),
            Ty::IntArray(n) => write!(f, "int[{n}]"),
            Ty::StrArray(n) => write!(f, "string[{n}]"),
            Ty::Kernel => write!(f, "kernel"),
            Ty::Network => write!(f, "network"),
            Ty::Gp(None) => write!(f, "latent function"),
            Ty::Gp(Some(c)) => write!(f, "latent function[{c}]"),
            Ty::IntRange => write!(f, "int range"),
            Ty::StrRange => write!(f, "string range"),
            Ty::Unknown => write!(f, "?"),
        }
    }
}

impl Ty {
    /// Whether two types have the same rank and possibly equal sizes.
    pub fn compatible_shape(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Vector(a), Ty::Vector(b)) => a.compatible(b) != Some(false),
            (Ty::Matrix(a, b), Ty::Matrix(c, d)) => {
                a.compatible(c) != Some(false) && b.compatible(d) != Some(false)
            }
            (a, b) => a == b,
        }
    }

    /// `int` or `real`.
    pub fn is_scalar(&self) -> bool {
        matches!(self, Ty::Int | Ty::Real | Ty::Unknown)
    }
    /// A number, a vector, a matrix or an int array.
    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            Ty::Int | Ty::Real | Ty::Vector(_) | Ty::Matrix(..) | Ty::IntArray(_) | Ty::Unknown
        )
    }
    /// The numeric type as reals: `int` → `real`, `int[n]` → `vector[n]`.
    pub fn as_real(&self) -> Ty {
        match self {
            Ty::Int => Ty::Real,
            Ty::IntArray(n) => Ty::Vector(n.clone()),
            t => t.clone(),
        }
    }
    /// Whether this is the unknown type left by an earlier error.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Ty::Unknown)
    }
}

/// Check that two sizes may agree; `Err` with a message if they certainly differ.
fn same(a: &Size, b: &Size, what: &str) -> Result<(), String> {
    match a.compatible(b) {
        Some(false) => Err(format!("{what}: {a} vs {b}")),
        _ => Ok(()),
    }
}

/// The type of an element-wise combination of two numeric values with
/// broadcasting of scalars.
pub fn elementwise(op: &str, a: &Ty, b: &Ty) -> Result<Ty, String> {
    if a.is_unknown() || b.is_unknown() {
        return Ok(Ty::Unknown);
    }
    if !a.is_numeric() || !b.is_numeric() {
        return Err(format!(
            "`{op}` needs numbers, vectors or matrices, found {a} and {b}"
        ));
    }
    let (a, b) = (a.as_real(), b.as_real());
    Ok(match (&a, &b) {
        (Ty::Real, Ty::Real) => Ty::Real,
        (Ty::Real, t) | (t, Ty::Real) => t.clone(),
        (Ty::Vector(n), Ty::Vector(m)) => {
            same(n, m, &format!("`{op}` needs vectors of the same length"))?;
            Ty::Vector(n.clone())
        }
        (Ty::Matrix(n, d), Ty::Matrix(m, e)) => {
            same(
                n,
                m,
                &format!("`{op}` needs matrices with the same number of rows"),
            )?;
            same(
                d,
                e,
                &format!("`{op}` needs matrices with the same number of columns"),
            )?;
            Ty::Matrix(n.clone(), d.clone())
        }
        _ => {
            return Err(format!(
                "`{op}` cannot combine {a} and {b} element by element"
            ));
        }
    })
}

/// The type of `+`, `-`, `*` or `.*` when both operands are integers
/// (`int` or `int[n]`): an integer, element by element, an `int` broadcast
/// over an `int[n]`. `None` when either operand is not an integer.
fn int_elementwise(op: &str, a: &Ty, b: &Ty) -> Option<Result<Ty, String>> {
    Some(match (a, b) {
        (Ty::Int, Ty::Int) => Ok(Ty::Int),
        (Ty::Int, Ty::IntArray(n)) | (Ty::IntArray(n), Ty::Int) => Ok(Ty::IntArray(n.clone())),
        (Ty::IntArray(n), Ty::IntArray(m)) => {
            same(n, m, &format!("`{op}` needs arrays of the same length"))
                .map(|_| Ty::IntArray(n.clone()))
        }
        _ => return None,
    })
}

/// The type of `a op b` for a binary operator.
pub fn binary(op: BinOp, a: &Ty, b: &Ty) -> Result<Ty, String> {
    use BinOp::*;
    if a.is_unknown() || b.is_unknown() {
        return Ok(match op {
            Eq | Ne | Lt | Le | Gt | Ge | And | Or => Ty::Bool,
            _ => Ty::Unknown,
        });
    }
    let sym = op.symbol();
    match op {
        Or | And => match (a, b) {
            (Ty::Bool, Ty::Bool) => Ok(Ty::Bool),
            _ => Err(format!("`{sym}` needs two conditions, found {a} and {b}")),
        },
        Eq | Ne | Lt | Le | Gt | Ge => {
            if a.is_scalar() && b.is_scalar() {
                Ok(Ty::Bool)
            } else {
                Err(format!("`{sym}` compares two numbers, found {a} and {b}"))
            }
        }
        Add | Sub => match (a, b) {
            (Ty::Kernel, Ty::Kernel) if op == Add => Ok(Ty::Kernel),
            (Ty::Kernel, _) | (_, Ty::Kernel) => Err(format!(
                "`{sym}` between {a} and {b}: kernels can only be added to kernels \
                 (write `c * constant()` for a constant kernel)"
            )),
            _ => int_elementwise(sym, a, b).unwrap_or_else(|| elementwise(sym, a, b)),
        },
        Mul => match (a, b) {
            (Ty::Kernel, Ty::Kernel) => Ok(Ty::Kernel),
            (Ty::Kernel, t) | (t, Ty::Kernel) => {
                if t.is_scalar() {
                    Ok(Ty::Kernel)
                } else {
                    Err(format!(
                        "a kernel can be scaled only by a real number, found {t}"
                    ))
                }
            }
            _ if a.is_scalar() || b.is_scalar() => {
                int_elementwise(sym, a, b).unwrap_or_else(|| elementwise(sym, a, b))
            }
            (Ty::Matrix(n, k), Ty::Vector(m)) => {
                same(
                    k,
                    m,
                    "matrix times vector needs the vector's length to equal the matrix's columns",
                )?;
                Ok(Ty::Vector(n.clone()))
            }
            (Ty::Matrix(n, k), Ty::IntArray(m)) => {
                same(
                    k,
                    m,
                    "matrix times vector needs the vector's length to equal the matrix's columns",
                )?;
                Ok(Ty::Vector(n.clone()))
            }
            (Ty::Matrix(n, k), Ty::Matrix(m, d)) => {
                same(
                    k,
                    m,
                    "matrix product needs the left columns to equal the right rows",
                )?;
                Ok(Ty::Matrix(n.clone(), d.clone()))
            }
            _ => Err(format!(
                "`*` cannot multiply {a} by {b} (use `.*` for element-wise products and `dot` for inner products)"
            )),
        },
        Div => match (a, b) {
            (Ty::Kernel, t) if t.is_scalar() => Ok(Ty::Kernel),
            (Ty::Kernel, _) | (_, Ty::Kernel) => Err(format!("`/` cannot divide {a} by {b}")),
            _ if b.is_scalar() || a.is_scalar() => elementwise(sym, a, b),
            _ => Err(format!(
                "`/` divides by a number; use `./` to divide {a} by {b} element by element"
            )),
        },
        EwMul => int_elementwise(sym, a, b).unwrap_or_else(|| elementwise(sym, a, b)),
        EwDiv => elementwise(sym, a, b),
        Pow => match (a, b) {
            (Ty::Kernel, _) | (_, Ty::Kernel) => Err(format!(
                "`^` cannot raise {a} to {b} (multiply kernels with `*`)"
            )),
            _ if b.is_scalar() => match a {
                Ty::Int | Ty::Real => Ok(Ty::Real),
                _ => elementwise(sym, a, &Ty::Real),
            },
            _ => elementwise(sym, a, b),
        },
    }
}

/// The type of `base[indices]`.
/// The type of `base[idx]` for one index that is an integer array
/// `int[n]`: the elements (or rows) it picks, in its order (a gather).
pub fn gather(base: &Ty, n: &Size) -> Result<Ty, String> {
    match base {
        Ty::Unknown => Ok(Ty::Unknown),
        Ty::Vector(_) => Ok(Ty::Vector(n.clone())),
        Ty::IntArray(_) => Ok(Ty::IntArray(n.clone())),
        Ty::Matrix(_, d) => Ok(Ty::Matrix(n.clone(), d.clone())),
        t => Err(format!("{t} cannot be indexed by an integer array")),
    }
}

/// The type of `base[i]`, `base[i, j]` for integer indices.
pub fn index(base: &Ty, n_indices: usize) -> Result<Ty, String> {
    match (base, n_indices) {
        (Ty::Unknown, _) => Ok(Ty::Unknown),
        (Ty::Vector(_), 1) => Ok(Ty::Real),
        (Ty::IntArray(_), 1) => Ok(Ty::Int),
        (Ty::Matrix(_, d), 1) => Ok(Ty::Vector(d.clone())),
        (Ty::Matrix(..), 2) => Ok(Ty::Real),
        (Ty::Vector(_) | Ty::IntArray(_), k) => Err(format!("a vector takes one index, found {k}")),
        (Ty::Matrix(..), k) => Err(format!("a matrix takes one or two indices, found {k}")),
        (t, _) => Err(format!("{t} cannot be indexed")),
    }
}
