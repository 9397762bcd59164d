//! Operators and built-in functions on runtime values, with shape checks
//! that report the expression's span.

use super::expr::Builtin;
use super::value::Value;
use ad_trait::F64;
use nalgebra::{DMatrix, DVector};
use tempest_core::error::{Error, ErrorKind};
use tempest_math::scalar::{RealExt, logsumexp};
pub(crate) use tempest_model::builtin::pow;
use tempest_model::custom::Scalar;
use tempest_model::kernel::KernelValue;
use tempest_syntax::ast::{BinOp, Span, UnOp};

type R<T> = Result<Value<T>, Error>;

fn shape_err(span: Span, msg: String) -> Error {
    Error::at(ErrorKind::Shape, span, msg).with_label("here")
}

fn type_err(span: Span, msg: String) -> Error {
    Error::at(ErrorKind::Type, span, msg).with_label("here")
}

/// Apply `f` to every number of a numeric value (integers become reals).
pub fn map_num<T: Scalar>(v: &Value<T>, f: &dyn Fn(T) -> T, span: Span) -> R<T> {
    Ok(match v {
        Value::Int(i) => Value::Real(f(T::constant(*i as f64))),
        Value::Real(r) => Value::Real(f(*r)),
        Value::Vector(x) => Value::Vector(x.map(f)),
        Value::Matrix(x) => Value::Matrix(x.map(f)),
        Value::IntArray(x) => Value::Vector(DVector::from_iterator(
            x.len(),
            x.iter().map(|&i| f(T::constant(i as f64))),
        )),
        other => {
            return Err(type_err(
                span,
                format!(
                    "expected a number, vector or matrix, found {}",
                    other.shape()
                ),
            ));
        }
    })
}

enum Num<T> {
    S(T),
    V(DVector<T>),
    M(DMatrix<T>),
}

fn num<T: Scalar>(v: &Value<T>, span: Span) -> Result<Num<T>, Error> {
    Ok(match v {
        Value::Int(i) => Num::S(T::constant(*i as f64)),
        Value::Real(r) => Num::S(*r),
        Value::Vector(x) => Num::V(x.clone()),
        Value::IntArray(_) => Num::V(v.vector().unwrap_or_else(|| DVector::zeros(0))),
        Value::Matrix(m) => Num::M(m.clone()),
        other => {
            return Err(type_err(
                span,
                format!(
                    "expected a number, vector or matrix, found {}",
                    other.shape()
                ),
            ));
        }
    })
}

/// Combine two numeric values element by element, broadcasting scalars.
pub fn zip_num<T: Scalar>(
    a: &Value<T>,
    b: &Value<T>,
    f: &dyn Fn(T, T) -> T,
    op: &str,
    span: Span,
) -> R<T> {
    Ok(match (num(a, span)?, num(b, span)?) {
        (Num::S(x), Num::S(y)) => Value::Real(f(x, y)),
        (Num::S(x), Num::V(v)) => Value::Vector(v.map(|y| f(x, y))),
        (Num::V(v), Num::S(y)) => Value::Vector(v.map(|x| f(x, y))),
        (Num::S(x), Num::M(m)) => Value::Matrix(m.map(|y| f(x, y))),
        (Num::M(m), Num::S(y)) => Value::Matrix(m.map(|x| f(x, y))),
        (Num::V(u), Num::V(v)) => {
            if u.len() != v.len() {
                return Err(shape_err(
                    span,
                    format!(
                        "`{op}` needs vectors of the same length, found vector[{}] and vector[{}]",
                        u.len(),
                        v.len()
                    ),
                ));
            }
            Value::Vector(u.zip_map(&v, f))
        }
        (Num::M(u), Num::M(v)) => {
            if u.shape() != v.shape() {
                return Err(shape_err(
                    span,
                    format!(
                        "`{op}` needs matrices of the same shape, found matrix[{}, {}] and matrix[{}, {}]",
                        u.nrows(),
                        u.ncols(),
                        v.nrows(),
                        v.ncols()
                    ),
                ));
            }
            Value::Matrix(u.zip_map(&v, f))
        }
        _ => {
            return Err(type_err(
                span,
                format!(
                    "`{op}` cannot combine {} and {} element by element",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
    })
}

/// `-x` and `!x`.
pub fn unary<T: Scalar>(op: UnOp, v: &Value<T>, span: Span) -> R<T> {
    match (op, v) {
        (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
        (UnOp::Neg, Value::Int(i)) => i
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| overflow(span)),
        (UnOp::Neg, Value::IntArray(xs)) => xs
            .iter()
            .map(|x| x.checked_neg().ok_or_else(|| overflow(span)))
            .collect::<Result<_, _>>()
            .map(Value::IntArray),
        (UnOp::Neg, v) => map_num(v, &|x| -x, span),
        (UnOp::Not, v) => Err(type_err(
            span,
            format!("`!` needs a condition, found {}", v.shape()),
        )),
    }
}

/// `a op b`, including kernel algebra.
pub fn binary<T: Scalar>(op: BinOp, a: Value<T>, b: Value<T>, span: Span) -> R<T> {
    use BinOp::*;
    match (op, &a, &b) {
        (Add, Value::Kernel(_), Value::Kernel(_)) => {
            let (Value::Kernel(x), Value::Kernel(y)) = (a, b) else {
                unreachable!()
            };
            return Ok(Value::Kernel(Box::new(KernelValue::Sum(x, y))));
        }
        (Mul, Value::Kernel(_), Value::Kernel(_)) => {
            let (Value::Kernel(x), Value::Kernel(y)) = (a, b) else {
                unreachable!()
            };
            return Ok(Value::Kernel(Box::new(KernelValue::Product(x, y))));
        }
        (Mul, Value::Kernel(_), _) | (Mul, _, Value::Kernel(_)) | (Div, Value::Kernel(_), _) => {
            let (k, c, div) = match (a, b) {
                (Value::Kernel(k), c) => (k, c, op == Div),
                (c, Value::Kernel(k)) => (k, c, false),
                _ => unreachable!(),
            };
            let c = c
                .scalar()
                .ok_or_else(|| type_err(span, "a kernel can be scaled only by a number".into()))?;
            let c = if div { T::one() / c } else { c };
            return Ok(Value::Kernel(Box::new(KernelValue::Scale(c, k))));
        }
        (_, Value::Kernel(_), _) | (_, _, Value::Kernel(_)) => {
            return Err(type_err(
                span,
                format!("`{}` is not defined for kernels", op.symbol()),
            ));
        }
        _ => {}
    }
    match op {
        Or | And => match (&a, &b) {
            (Value::Bool(x), Value::Bool(y)) => {
                Ok(Value::Bool(if op == Or { *x || *y } else { *x && *y }))
            }
            _ => Err(type_err(
                span,
                format!("`{}` needs two conditions", op.symbol()),
            )),
        },
        Eq | Ne | Lt | Le | Gt | Ge => {
            let (x, y) = match (a.scalar(), b.scalar()) {
                (Some(x), Some(y)) => (x.to_constant(), y.to_constant()),
                _ => {
                    return Err(type_err(
                        span,
                        format!(
                            "`{}` compares two numbers, found {} and {}",
                            op.symbol(),
                            a.shape(),
                            b.shape()
                        ),
                    ));
                }
            };
            Ok(Value::Bool(op.holds(x, y) == Some(true)))
        }
        Add | Sub | EwMul if is_int(&a) && is_int(&b) => int_zip(op, &a, &b, span),
        Mul if is_int(&a) && is_int(&b) && (a.scalar().is_some() || b.scalar().is_some()) => {
            int_zip(op, &a, &b, span)
        }
        Add => zip_num(&a, &b, &|x, y| x + y, "+", span),
        Sub => zip_num(&a, &b, &|x, y| x - y, "-", span),
        EwMul => zip_num(&a, &b, &|x, y| x * y, ".*", span),
        EwDiv | Div => zip_num(&a, &b, &|x, y| x / y, op.symbol(), span),
        Pow => match b {
            Value::Int(k) if k.abs() <= i32::MAX as i64 => {
                map_num(&a, &|x| RealExt::powi_exact(x, k as i32), span)
            }
            _ => zip_num(&a, &b, &pow, "^", span),
        },
        Mul => mul(a, b, span),
    }
}

fn overflow(span: Span) -> Error {
    Error::at(ErrorKind::Numerical, span, "integer overflow").with_label("here")
}

/// An `int` or an `int[n]`.
fn is_int<T>(v: &Value<T>) -> bool {
    matches!(v, Value::Int(_) | Value::IntArray(_))
}

/// `+`, `-`, `*` or `.*` of two integers or integer arrays: integers,
/// element by element (an `int` broadcast over an array), each checked
/// for overflow.
fn int_zip<T: Scalar>(op: BinOp, a: &Value<T>, b: &Value<T>, span: Span) -> R<T> {
    let f = |x: i64, y: i64| {
        match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            _ => x.checked_mul(y),
        }
        .ok_or_else(|| overflow(span))
    };
    let all = |it: &mut dyn Iterator<Item = Result<i64, Error>>| {
        it.collect::<Result<Vec<i64>, Error>>().map(Value::IntArray)
    };
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => f(*x, *y).map(Value::Int),
        (Value::Int(x), Value::IntArray(ys)) => all(&mut ys.iter().map(|y| f(*x, *y))),
        (Value::IntArray(xs), Value::Int(y)) => all(&mut xs.iter().map(|x| f(*x, *y))),
        (Value::IntArray(xs), Value::IntArray(ys)) if xs.len() == ys.len() => {
            all(&mut xs.iter().zip(ys).map(|(x, y)| f(*x, *y)))
        }
        _ => Err(shape_err(
            span,
            format!(
                "`{}` needs arrays of the same length, found {} and {}",
                op.symbol(),
                a.shape(),
                b.shape()
            ),
        )),
    }
}

/// `*`: scalar scaling, matrix–vector and matrix–matrix products.
fn mul<T: Scalar>(a: Value<T>, b: Value<T>, span: Span) -> R<T> {
    if a.scalar().is_some() || b.scalar().is_some() {
        return zip_num(&a, &b, &|x, y| x * y, "*", span);
    }
    match (num(&a, span)?, num(&b, span)?) {
        (Num::M(m), Num::V(v)) => {
            if m.ncols() != v.len() {
                return Err(shape_err(
                    span,
                    format!(
                        "matrix[{}, {}] * vector[{}]: the vector's length must equal the matrix's columns",
                        m.nrows(),
                        m.ncols(),
                        v.len()
                    ),
                ));
            }
            Ok(Value::Vector(matvec(&m, &v)))
        }
        (Num::M(m), Num::M(n)) => {
            if m.ncols() != n.nrows() {
                return Err(shape_err(
                    span,
                    format!(
                        "matrix[{}, {}] * matrix[{}, {}]: the left columns must equal the right rows",
                        m.nrows(),
                        m.ncols(),
                        n.nrows(),
                        n.ncols()
                    ),
                ));
            }
            tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(
                "this matrix product",
            )
            .times("rows", m.nrows())
            .times("columns", n.ncols())])
            .map_err(|e| e.with_span(span).with_label("this product"))?;
            let mut out = DMatrix::from_element(m.nrows(), n.ncols(), T::zero());
            for j in 0..n.ncols() {
                let col = matvec(&m, &n.column(j).into_owned());
                out.set_column(j, &col);
            }
            Ok(Value::Matrix(out))
        }
        _ => Err(type_err(
            span,
            format!(
                "`*` cannot multiply {} by {} (use `.*` or `dot`)",
                a.shape(),
                b.shape()
            ),
        )),
    }
}

/// A matrix–vector product written as a plain loop (fast for dual numbers).
pub fn matvec<T: Scalar>(m: &DMatrix<T>, v: &DVector<T>) -> DVector<T> {
    let mut out = DVector::from_element(m.nrows(), T::zero());
    for j in 0..m.ncols() {
        let vj = v[j];
        for i in 0..m.nrows() {
            out[i] += m[(i, j)] * vj;
        }
    }
    out
}

/// Call a built-in function.
pub fn builtin<T: Scalar>(b: Builtin, args: &[Value<T>], span: Span) -> R<T> {
    use Builtin::*;
    let x = || {
        args.first()
            .ok_or_else(|| Error::internal("builtin without argument"))
    };
    match b {
        Exp => map_num(x()?, &|v| v.exp(), span),
        Log => map_num(x()?, &|v| v.ln(), span),
        Log1p => map_num(x()?, &|v| v.log1p(), span),
        Expm1 => map_num(x()?, &|v| v.expm1(), span),
        Sqrt => map_num(x()?, &|v| v.sqrt_(), span),
        Abs => map_num(x()?, &|v| v.abs(), span),
        Sin => map_num(x()?, &|v| v.sin(), span),
        Cos => map_num(x()?, &|v| v.cos(), span),
        Tanh => map_num(x()?, &|v| v.tanh(), span),
        Sigmoid => map_num(x()?, &|v| v.sigmoid(), span),
        LogSigmoid => map_num(x()?, &|v| v.log_sigmoid(), span),
        Softplus => map_num(x()?, &|v| v.softplus(), span),
        Lgamma => map_num(x()?, &|v| v.lgamma(), span),
        Digamma => map_num(x()?, &|v| v.digamma(), span),
        Erf => map_num(x()?, &|v| RealExt::erf(v), span),
        Phi => map_num(x()?, &|v| v.phi(), span),
        Pow => zip_num(&args[0], &args[1], &pow, "pow", span),
        Pi => Ok(Value::Real(T::constant(std::f64::consts::PI))),
        E => Ok(Value::Real(T::constant(std::f64::consts::E))),
        Sum | Mean | Logsumexp => {
            let xs = x()?.flatten();
            if xs.is_empty()
                && !matches!(
                    x()?,
                    Value::Vector(_) | Value::Matrix(_) | Value::IntArray(_)
                )
            {
                return Err(type_err(
                    span,
                    format!("`{}` needs a vector or matrix", b.name()),
                ));
            }
            Ok(Value::Real(match b {
                Sum => xs.iter().fold(T::zero(), |s, &v| s + v),
                Mean => {
                    if xs.is_empty() {
                        return Err(shape_err(span, "`mean` of an empty vector".into()));
                    }
                    xs.iter().fold(T::zero(), |s, &v| s + v) / F64(xs.len() as f64)
                }
                _ => logsumexp(&xs),
            }))
        }
        Dot | Sqdist => {
            if b == Sqdist
                && let (Some(p), Some(q)) = (args[0].scalar(), args[1].scalar())
            {
                return Ok(Value::Real((p - q) * (p - q)));
            }
            let (Some(u), Some(v)) = (args[0].vector(), args[1].vector()) else {
                return Err(type_err(
                    span,
                    format!(
                        "`{}` needs two vectors, found {} and {}",
                        b.name(),
                        args[0].shape(),
                        args[1].shape()
                    ),
                ));
            };
            if u.len() != v.len() {
                return Err(shape_err(
                    span,
                    format!(
                        "`{}` needs vectors of the same length, found vector[{}] and vector[{}]",
                        b.name(),
                        u.len(),
                        v.len()
                    ),
                ));
            }
            let mut acc = T::zero();
            for i in 0..u.len() {
                acc += if b == Dot {
                    u[i] * v[i]
                } else {
                    (u[i] - v[i]) * (u[i] - v[i])
                };
            }
            Ok(Value::Real(acc))
        }
        Col => match (x()?, &args[1]) {
            (Value::Matrix(m), Value::Int(j)) => {
                if *j < 0 || *j as usize >= m.ncols() {
                    return Err(Error::at(
                        tempest_core::error::ErrorKind::Shape,
                        span,
                        format!(
                            "column {j} is out of range for {} (valid: 0..{})",
                            x()?.shape(),
                            m.ncols() as i64 - 1
                        ),
                    )
                    .with_label("column out of range"));
                }
                Ok(Value::Vector(m.column(*j as usize).into_owned()))
            }
            (v, j) => Err(type_err(
                span,
                format!(
                    "`col` takes a matrix and an int, found {} and {}",
                    v.shape(),
                    j.shape()
                ),
            )),
        },
        Rows | Cols => match x()? {
            Value::Matrix(m) => Ok(Value::Int(
                if b == Rows { m.nrows() } else { m.ncols() } as i64
            )),
            v => match v.len() {
                Some(n) => Ok(Value::Int(if b == Rows { n as i64 } else { 1 })),
                None => Err(type_err(
                    span,
                    format!(
                        "`{}` needs a matrix or vector, found {}",
                        b.name(),
                        v.shape()
                    ),
                )),
            },
        },
    }
}

/// `base[i]` or `base[i, j]` (0-based).
pub fn index<T: Scalar>(base: &Value<T>, idx: &[i64], span: Span) -> R<T> {
    let check = |i: i64, n: usize, what: &str| -> Result<usize, Error> {
        if i < 0 || i as usize >= n {
            Err(shape_err(
                span,
                format!(
                    "{what} {i} is out of range for {} (valid: 0..{})",
                    base.shape(),
                    n as i64 - 1
                ),
            ))
        } else {
            Ok(i as usize)
        }
    };
    match (base, idx) {
        (Value::Vector(v), [i]) => Ok(Value::Real(v[check(*i, v.len(), "index")?])),
        (Value::IntArray(v), [i]) => Ok(Value::Int(v[check(*i, v.len(), "index")?])),
        (Value::Matrix(m), [i]) => {
            let r = check(*i, m.nrows(), "row")?;
            Ok(Value::Vector(m.row(r).transpose()))
        }
        (Value::Matrix(m), [i, j]) => Ok(Value::Real(
            m[(
                check(*i, m.nrows(), "row")?,
                check(*j, m.ncols(), "column")?,
            )],
        )),
        (v, _) => Err(type_err(
            span,
            format!("{} cannot be indexed with {} indices", v.shape(), idx.len()),
        )),
    }
}
