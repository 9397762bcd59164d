//! Runtime values of expressions, generic over the scalar type.

use nalgebra::{DMatrix, DVector};
use std::fmt;
use tempest_model::custom::Scalar;
use tempest_model::kernel::KernelValue;

/// A value of an expression. Numbers are of scalar type `T`; integers,
/// truth values and strings are exact.
#[derive(Clone)]
pub enum Value<T> {
    /// An integer.
    Int(i64),
    /// A real number.
    Real(T),
    /// A truth value.
    Bool(bool),
    /// A vector \[N\].
    Vector(DVector<T>),
    /// A matrix [N, M].
    Matrix(DMatrix<T>),
    /// An integer array \[N\].
    IntArray(Vec<i64>),
    /// A string.
    Str(String),
    /// A list of strings.
    StrArray(Vec<String>),
    /// An inclusive integer range.
    IntRange(i64, i64),
    /// A kernel.
    Kernel(Box<KernelValue<T>>),
}

impl<T: Scalar> Value<T> {
    /// The shape in words, for messages: `vector[3]`, `matrix[2, 4]`.
    pub fn shape(&self) -> String {
        match self {
            Value::Int(_) => "int".into(),
            Value::Real(_) => "real".into(),
            Value::Bool(_) => "bool".into(),
            Value::Vector(v) => format!("vector[{}]", v.len()),
            Value::Matrix(m) => format!("matrix[{}, {}]", m.nrows(), m.ncols()),
            Value::IntArray(v) => format!("int[{}]", v.len()),
            Value::Str(_) => "string".into(),
            Value::StrArray(v) => format!("string[{}]", v.len()),
            Value::IntRange(..) => "range".into(),
            Value::Kernel(_) => "kernel".into(),
        }
    }

    /// A number as a scalar of type `T`.
    pub fn scalar(&self) -> Option<T> {
        match self {
            Value::Int(i) => Some(T::constant(*i as f64)),
            Value::Real(r) => Some(*r),
            _ => None,
        }
    }

    /// A vector or int array as a vector of `T`.
    pub fn vector(&self) -> Option<DVector<T>> {
        match self {
            Value::Vector(v) => Some(v.clone()),
            Value::IntArray(v) => Some(DVector::from_iterator(
                v.len(),
                v.iter().map(|&i| T::constant(i as f64)),
            )),
            _ => None,
        }
    }

    /// The number of elements of a vector-like value (None for scalars).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> Option<usize> {
        match self {
            Value::Vector(v) => Some(v.len()),
            Value::IntArray(v) => Some(v.len()),
            Value::StrArray(v) => Some(v.len()),
            Value::Matrix(m) => Some(m.nrows()),
            _ => None,
        }
    }

    /// Element i of a scalar (broadcast) or vector-like value.
    pub fn element(&self, i: usize) -> Option<T> {
        match self {
            Value::Int(v) => Some(T::constant(*v as f64)),
            Value::Real(r) => Some(*r),
            Value::Vector(v) => v.get(i).copied(),
            Value::IntArray(v) => v.get(i).map(|&x| T::constant(x as f64)),
            _ => None,
        }
    }

    /// The value with every number as an `f64`.
    pub fn to_f64(&self) -> Value<f64> {
        match self {
            Value::Int(i) => Value::Int(*i),
            Value::Real(r) => Value::Real(r.to_constant()),
            Value::Bool(b) => Value::Bool(*b),
            Value::Vector(v) => Value::Vector(v.map(|x| x.to_constant())),
            Value::Matrix(m) => Value::Matrix(m.map(|x| x.to_constant())),
            Value::IntArray(v) => Value::IntArray(v.clone()),
            Value::Str(s) => Value::Str(s.clone()),
            Value::StrArray(s) => Value::StrArray(s.clone()),
            Value::IntRange(a, b) => Value::IntRange(*a, *b),
            Value::Kernel(_) => Value::Str("<kernel>".into()),
        }
    }

    /// All numbers of the value, flattened (row-major for matrices).
    pub fn flatten(&self) -> Vec<T> {
        match self {
            Value::Int(i) => vec![T::constant(*i as f64)],
            Value::Real(r) => vec![*r],
            Value::Vector(v) => v.iter().copied().collect(),
            Value::Matrix(m) => (0..m.nrows())
                .flat_map(|i| (0..m.ncols()).map(move |j| m[(i, j)]))
                .collect(),
            Value::IntArray(v) => v.iter().map(|&i| T::constant(i as f64)).collect(),
            _ => vec![],
        }
    }
}

impl Value<f64> {
    /// The same value with numbers lifted to scalar type `T` (constants).
    pub fn lift<T: Scalar>(&self) -> Value<T> {
        match self {
            Value::Int(i) => Value::Int(*i),
            Value::Real(r) => Value::Real(T::constant(*r)),
            Value::Bool(b) => Value::Bool(*b),
            Value::Vector(v) => Value::Vector(v.map(T::constant)),
            Value::Matrix(m) => Value::Matrix(m.map(T::constant)),
            Value::IntArray(v) => Value::IntArray(v.clone()),
            Value::Str(s) => Value::Str(s.clone()),
            Value::StrArray(s) => Value::StrArray(s.clone()),
            Value::IntRange(a, b) => Value::IntRange(*a, *b),
            Value::Kernel(_) => Value::Str("<kernel>".into()),
        }
    }
}

impl<T: Scalar> fmt::Display for Value<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Real(r) => write!(f, "{}", r.to_constant()),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Kernel(k) => write!(f, "{}", k.describe()),
            v => {
                let xs: Vec<String> = v
                    .flatten()
                    .iter()
                    .map(|x| format!("{}", x.to_constant()))
                    .collect();
                write!(f, "[{}]", xs.join(", "))
            }
        }
    }
}

/// A zero of the same shape.
pub fn zero_like(v: &Value<f64>) -> Value<f64> {
    match v {
        Value::Vector(x) => Value::Vector(nalgebra::DVector::zeros(x.len())),
        Value::IntArray(x) => Value::Vector(nalgebra::DVector::zeros(x.len())),
        Value::Matrix(m) => Value::Matrix(nalgebra::DMatrix::zeros(m.nrows(), m.ncols())),
        _ => Value::Real(0.0),
    }
}
