//! Kernels: the built-in catalogue, kernel algebra, and Gram matrices.
//!
//! The formulas of the stationary kernels are in [`super::kernels::stationary`],
//! those built on inner products in [`super::kernels::dot_product`]; the two
//! simplest are here: `white()` is k(x, x′) = 1 when x and x′ are the same
//! point of the same set (the diagonal of a Gram matrix) and 0 otherwise, and
//! `constant()` is k(x, x′) = 1. Kernel algebra: (k₁ + k₂)(x, x′) =
//! k₁(x, x′) + k₂(x, x′), (k₁ · k₂)(x, x′) = k₁(x, x′) k₂(x, x′), (c · k)(x, x′) =
//! c k(x, x′).
//!
//! A kernel expression in a model evaluates to a [`KernelValue`] whose
//! hyperparameters are scalars of type `T`, so Gram matrices and their
//! derivatives come from the same code. Inputs are rows of an [`Inputs`]
//! matrix X of shape [N, D]; `dims = ...` restricts a kernel to a subset of
//! the D columns.

use super::custom::{DynKernel, Scalar};
use super::kernels::{dot_product, stationary};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use std::sync::Arc;
use tempest_core::error::{Error, ErrorKind};
use tempest_syntax::ast::Span;

/// The built-in kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// `rbf(ell)`
    Rbf,
    /// `matern12(ell)`
    Matern12,
    /// `matern32(ell)`
    Matern32,
    /// `matern52(ell)`
    Matern52,
    /// `linear()` or `linear(v)`
    Linear,
    /// `polynomial(degree)` or `polynomial(degree, c)`
    Polynomial,
    /// `cosine()`
    Cosine,
    /// `periodic(ell, p)`
    Periodic,
    /// `white()`
    White,
    /// `constant()`
    Constant,
}

/// How one argument of a built-in kernel is declared.
#[derive(Clone, Copy, Debug)]
pub struct KernelParam {
    /// The argument's name (for messages and named arguments).
    pub name: &'static str,
    /// May it be a vector with one entry per input dimension?
    pub per_dim: bool,
    /// The value when omitted, or `None` when required.
    pub default: Option<f64>,
    /// Must it be positive?
    pub positive: bool,
}

const ELL: KernelParam = KernelParam {
    name: "ell",
    per_dim: true,
    default: None,
    positive: true,
};

impl KernelKind {
    /// All built-in kernels.
    pub const ALL: [KernelKind; 10] = [
        KernelKind::Rbf,
        KernelKind::Matern12,
        KernelKind::Matern32,
        KernelKind::Matern52,
        KernelKind::Linear,
        KernelKind::Polynomial,
        KernelKind::Cosine,
        KernelKind::Periodic,
        KernelKind::White,
        KernelKind::Constant,
    ];

    /// The name used in model files.
    pub fn name(self) -> &'static str {
        match self {
            KernelKind::Rbf => "rbf",
            KernelKind::Matern12 => "matern12",
            KernelKind::Matern32 => "matern32",
            KernelKind::Matern52 => "matern52",
            KernelKind::Linear => "linear",
            KernelKind::Polynomial => "polynomial",
            KernelKind::Cosine => "cosine",
            KernelKind::Periodic => "periodic",
            KernelKind::White => "white",
            KernelKind::Constant => "constant",
        }
    }

    /// Look a kernel up by name.
    pub fn from_name(name: &str) -> Option<KernelKind> {
        KernelKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kernel's arguments, in order.
    pub fn params(self) -> &'static [KernelParam] {
        match self {
            KernelKind::Rbf
            | KernelKind::Matern12
            | KernelKind::Matern32
            | KernelKind::Matern52 => &[ELL],
            KernelKind::Linear => &[KernelParam {
                name: "v",
                per_dim: true,
                default: Some(1.0),
                positive: true,
            }],
            KernelKind::Polynomial => &[
                KernelParam {
                    name: "degree",
                    per_dim: false,
                    default: None,
                    positive: true,
                },
                KernelParam {
                    name: "c",
                    per_dim: false,
                    default: Some(1.0),
                    positive: false,
                },
            ],
            KernelKind::Periodic => &[
                KernelParam {
                    name: "ell",
                    per_dim: false,
                    default: None,
                    positive: true,
                },
                KernelParam {
                    name: "p",
                    per_dim: false,
                    default: None,
                    positive: true,
                },
            ],
            KernelKind::Cosine | KernelKind::White | KernelKind::Constant => &[],
        }
    }
}

/// One evaluated kernel argument.
#[derive(Clone, Debug)]
pub enum KernelArg<T> {
    /// A single number.
    Scalar(T),
    /// One number per input dimension.
    Vector(Vec<T>),
}

impl<T: Copy> KernelArg<T> {
    pub(crate) fn scalar(&self) -> T {
        match self {
            KernelArg::Scalar(s) => *s,
            KernelArg::Vector(v) => v[0],
        }
    }
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            KernelArg::Scalar(s) => std::slice::from_ref(s),
            KernelArg::Vector(v) => v,
        }
    }
    fn len(&self) -> Option<usize> {
        match self {
            KernelArg::Scalar(_) => None,
            KernelArg::Vector(v) => Some(v.len()),
        }
    }
}

/// A kernel defined in a model file, evaluated by the interpreter.
pub trait EntryFn<T>: Send + Sync {
    /// k(x, x′) for two (already column-selected) input rows.
    fn entry(&self, x: &[f64], y: &[f64]) -> Result<T, Error>;
}

/// A kernel with its hyperparameters evaluated to scalars of type `T`.
#[derive(Clone)]
pub enum KernelValue<T> {
    /// A built-in kernel.
    Base {
        /// Which one.
        kind: KernelKind,
        /// Its arguments, defaults filled in.
        args: Vec<KernelArg<T>>,
        /// The input columns it sees (all when `None`).
        dims: Option<Vec<usize>>,
        /// Where the kernel was written.
        span: Span,
    },
    /// k₁ + k₂.
    Sum(Box<KernelValue<T>>, Box<KernelValue<T>>),
    /// k₁ · k₂.
    Product(Box<KernelValue<T>>, Box<KernelValue<T>>),
    /// c · k.
    Scale(T, Box<KernelValue<T>>),
    /// A kernel registered from Rust.
    Rust {
        /// The kernel.
        kernel: Arc<dyn DynKernel>,
        /// Its parameters.
        params: Vec<T>,
        /// The input columns it sees.
        dims: Option<Vec<usize>>,
        /// Where it was written.
        span: Span,
    },
    /// A kernel defined in the model file and compiled to a program
    /// (evaluated without interpretation, with a reverse pass).
    Compiled {
        /// Its name.
        name: String,
        /// The program.
        program: Arc<crate::program::KernelProgram>,
        /// Its scalar parameters.
        params: Vec<T>,
        /// The input columns it sees.
        dims: Option<Vec<usize>>,
        /// Where it was written.
        span: Span,
    },
    /// A kernel defined in the model file, run by the general evaluator.
    Lang {
        /// Its name.
        name: String,
        /// The entry function with parameters bound.
        entry: Arc<dyn EntryFn<T>>,
        /// The input columns it sees.
        dims: Option<Vec<usize>>,
        /// Where it was written.
        span: Span,
    },
}

/// Input points X, shape [N, D], stored row by row.
#[derive(Clone, Debug, PartialEq)]
pub struct Inputs {
    n: usize,
    d: usize,
    data: Vec<f64>,
}

impl Inputs {
    /// From a matrix [N, D].
    pub fn from_matrix(x: &DMatrix<f64>) -> Self {
        let (n, d) = x.shape();
        let mut data = Vec::with_capacity(n * d);
        for i in 0..n {
            for j in 0..d {
                data.push(x[(i, j)]);
            }
        }
        Inputs { n, d, data }
    }
    /// From a vector of 1-D inputs, shape [N, 1].
    pub fn from_vector(x: &DVector<f64>) -> Self {
        Inputs {
            n: x.len(),
            d: 1,
            data: x.iter().copied().collect(),
        }
    }
    /// From rows of equal length.
    pub fn from_rows(rows: &[Vec<f64>]) -> Self {
        let d = rows.first().map(|r| r.len()).unwrap_or(0);
        Inputs {
            n: rows.len(),
            d,
            data: rows.iter().flatten().copied().collect(),
        }
    }
    /// N, the number of points.
    pub fn len(&self) -> usize {
        self.n
    }
    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// D, the input dimension.
    pub fn dim(&self) -> usize {
        self.d
    }
    /// Row i.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.d..(i + 1) * self.d]
    }
    /// Rows `start..start + m` back to back, row-major [m, D].
    pub fn rows_flat(&self, start: usize, m: usize) -> &[f64] {
        &self.data[start * self.d..(start + m) * self.d]
    }
    /// The rows `idx` (in that order) as inputs of their own, [idx.len(), D].
    pub fn gather(&self, idx: &[usize]) -> Inputs {
        let mut data = Vec::with_capacity(idx.len() * self.d);
        for &i in idx {
            data.extend_from_slice(self.row(i));
        }
        Inputs {
            n: idx.len(),
            d: self.d,
            data,
        }
    }
    /// The points row by row, [N·D].
    pub fn as_flat(&self) -> &[f64] {
        &self.data
    }
    /// Points from a row-major buffer [N·D] (`data.len()` must be a
    /// multiple of `d`).
    pub fn from_flat(data: Vec<f64>, d: usize) -> Inputs {
        Inputs {
            n: data.len().checked_div(d).unwrap_or(0),
            d,
            data,
        }
    }
    /// Rows `range` as inputs of their own.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Inputs {
        Inputs {
            n: range.len(),
            d: self.d,
            data: self.data[range.start * self.d..range.end * self.d].to_vec(),
        }
    }
}

fn shape_error(span: Span, msg: String) -> Error {
    Error::at(ErrorKind::Shape, span, msg).with_label("this kernel")
}

fn gather(x: &[f64], dims: &Option<Vec<usize>>) -> Vec<f64> {
    match dims {
        Some(d) => d.iter().map(|&j| x[j]).collect(),
        None => x.to_vec(),
    }
}

impl<T: Scalar> KernelValue<T> {
    /// Check that the kernel fits inputs with `d` columns: column subsets in
    /// range, per-dimension arguments of the right length.
    pub fn validate(&self, d: usize) -> Result<(), Error> {
        let check_dims = |dims: &Option<Vec<usize>>, span: Span| -> Result<usize, Error> {
            match dims {
                None => Ok(d),
                Some(ds) => {
                    if let Some(&bad) = ds.iter().find(|&&j| j >= d) {
                        return Err(shape_error(
                            span,
                            format!(
                                "`dims` selects column {bad}, but the inputs have {d} columns (0..{})",
                                d.saturating_sub(1)
                            ),
                        ));
                    }
                    Ok(ds.len())
                }
            }
        };
        match self {
            KernelValue::Base {
                kind,
                args,
                dims,
                span,
            } => {
                let seen = check_dims(dims, *span)?;
                // The checker gives every built-in its arguments; a kernel
                // value built by hand through the public fields may not.
                if args.len() != kind.params().len() {
                    return Err(Error::internal(format!(
                        "`{}` has {} arguments for {} parameters",
                        kind.name(),
                        args.len(),
                        kind.params().len()
                    )));
                }
                for (a, p) in args.iter().zip(kind.params()) {
                    if let Some(len) = a.len()
                        && len != seen
                    {
                        return Err(shape_error(
                            *span,
                            format!(
                                "`{}` has {len} per-dimension values for `{}`, but the kernel sees {seen} input columns",
                                kind.name(),
                                p.name
                            ),
                        ));
                    }
                }
                Ok(())
            }
            KernelValue::Sum(a, b) | KernelValue::Product(a, b) => {
                a.validate(d)?;
                b.validate(d)
            }
            KernelValue::Scale(_, k) => k.validate(d),
            KernelValue::Rust { dims, span, .. } | KernelValue::Lang { dims, span, .. } => {
                check_dims(dims, *span).map(|_| ())
            }
            KernelValue::Compiled {
                name,
                program,
                dims,
                span,
                ..
            } => {
                let seen = check_dims(dims, *span)?;
                match program.input_len() {
                    Some(len) if len != seen => Err(shape_error(
                        *span,
                        format!(
                            "`{name}` uses its inputs element by element with vectors of length {len}, but the kernel sees {seen} input columns"
                        ),
                    )),
                    _ => Ok(()),
                }
            }
        }
    }

    /// k(x, y); `same` is true when x and y are the same point of the same
    /// set (it switches on `white()`).
    pub fn entry(&self, x: &[f64], y: &[f64], same: bool) -> Result<T, Error> {
        Ok(match self {
            KernelValue::Base {
                kind, args, dims, ..
            } => {
                let dims = dims.as_deref();
                let ell = |a: &KernelArg<T>| match a {
                    KernelArg::Scalar(s) => stationary::Lengthscale::Shared(*s),
                    KernelArg::Vector(v) => stationary::Lengthscale::PerDim(v.clone()),
                };
                match kind {
                    KernelKind::Rbf => {
                        stationary::rbf(stationary::scaled_sqdist(x, y, dims, &ell(&args[0])))
                    }
                    KernelKind::Matern12 => {
                        stationary::matern12(stationary::scaled_sqdist(x, y, dims, &ell(&args[0])))
                    }
                    KernelKind::Matern32 => {
                        stationary::matern32(stationary::scaled_sqdist(x, y, dims, &ell(&args[0])))
                    }
                    KernelKind::Matern52 => {
                        stationary::matern52(stationary::scaled_sqdist(x, y, dims, &ell(&args[0])))
                    }
                    KernelKind::Periodic => {
                        stationary::periodic(x, y, dims, args[0].scalar(), args[1].scalar())
                    }
                    KernelKind::Linear => dot_product::linear(x, y, dims, args[0].as_slice()),
                    KernelKind::Polynomial => {
                        dot_product::polynomial(x, y, dims, args[0].scalar(), args[1].scalar())
                    }
                    KernelKind::Cosine => dot_product::cosine(x, y, dims),
                    KernelKind::White => {
                        if same {
                            T::one()
                        } else {
                            T::zero()
                        }
                    }
                    KernelKind::Constant => T::one(),
                }
            }
            KernelValue::Sum(a, b) => a.entry(x, y, same)? + b.entry(x, y, same)?,
            KernelValue::Product(a, b) => a.entry(x, y, same)? * b.entry(x, y, same)?,
            KernelValue::Scale(c, k) => *c * k.entry(x, y, same)?,
            KernelValue::Rust {
                kernel,
                params,
                dims,
                ..
            } => T::call_kernel(kernel.as_ref(), params, &gather(x, dims), &gather(y, dims)),
            KernelValue::Lang { entry, dims, .. } => {
                entry.entry(&gather(x, dims), &gather(y, dims))?
            }
            KernelValue::Compiled {
                program,
                params,
                dims,
                ..
            } => match dims {
                None => program.eval(params, x, y),
                Some(_) => program.eval(params, &gather(x, dims), &gather(y, dims)),
            },
        })
    }

    /// The Gram matrix K(X, X), shape [N, N].
    pub fn gram(&self, x: &Inputs) -> Result<DMatrix<T>, Error> {
        self.validate(x.dim())?;
        let n = x.len();
        // Columns in parallel; each entry is computed once and mirrored.
        let cols: Vec<Vec<T>> = (0..n)
            .into_par_iter()
            .with_min_len(32)
            .map(|j| {
                (j..n)
                    .map(|i| self.entry(x.row(i), x.row(j), i == j))
                    .collect::<Result<Vec<T>, Error>>()
            })
            .collect::<Result<_, _>>()?;
        let mut k = DMatrix::from_element(n, n, T::zero());
        for (j, col) in cols.into_iter().enumerate() {
            for (off, v) in col.into_iter().enumerate() {
                k[(j + off, j)] = v;
                k[(j, j + off)] = v;
            }
        }
        Ok(k)
    }

    /// The cross-covariance K(X, Y), shape [N, M]; no point of X is the same
    /// as a point of Y.
    pub fn cross(&self, x: &Inputs, y: &Inputs) -> Result<DMatrix<T>, Error> {
        self.validate(x.dim())?;
        if x.dim() != y.dim() {
            return Err(Error::new(
                ErrorKind::Shape,
                format!("kernel inputs have {} and {} columns", x.dim(), y.dim()),
            ));
        }
        let cols: Vec<Vec<T>> = (0..y.len())
            .into_par_iter()
            .with_min_len(32)
            .map(|j| {
                (0..x.len())
                    .map(|i| self.entry(x.row(i), y.row(j), false))
                    .collect::<Result<Vec<T>, Error>>()
            })
            .collect::<Result<_, _>>()?;
        Ok(DMatrix::from_fn(x.len(), y.len(), |i, j| cols[j][i]))
    }

    /// The diagonal k(xᵢ, xᵢ), shape \[N\].
    pub fn diag(&self, x: &Inputs) -> Result<DVector<T>, Error> {
        self.validate(x.dim())?;
        let mut d = DVector::from_element(x.len(), T::zero());
        for i in 0..x.len() {
            d[i] = self.entry(x.row(i), x.row(i), true)?;
        }
        Ok(d)
    }

    /// A short description: `1.0 * rbf + white`.
    pub fn describe(&self) -> String {
        match self {
            KernelValue::Base { kind, .. } => kind.name().to_string(),
            KernelValue::Sum(a, b) => format!("({} + {})", a.describe(), b.describe()),
            KernelValue::Product(a, b) => format!("{} * {}", a.describe(), b.describe()),
            KernelValue::Scale(c, k) => format!("{} * {}", c.to_constant(), k.describe()),
            KernelValue::Rust { kernel, .. } => kernel.name().to_string(),
            KernelValue::Lang { name, .. } | KernelValue::Compiled { name, .. } => name.clone(),
        }
    }
}

impl<T: Scalar> KernelValue<T> {
    /// The kernel's numeric parameters ("leaves") in a fixed order: each
    /// built-in kernel's arguments (every entry of a per-dimension one),
    /// then a scale factor before the kernel it scales, children left to
    /// right; a Rust kernel's parameters in order. `None` when the kernel
    /// contains an interpreted model-file kernel, which has no reverse rule
    /// here.
    pub fn leaves(&self) -> Option<Vec<T>> {
        let mut out = Vec::new();
        self.push_leaves(&mut out).then_some(out)
    }

    /// Whether every part has reverse rules in its inputs too (the
    /// gradients of a Gram matrix in X, for deep kernels and learned
    /// inducing inputs): not a Rust or an interpreted model-file kernel.
    pub fn input_rules(&self) -> bool {
        match self {
            KernelValue::Base { .. } | KernelValue::Compiled { .. } => true,
            KernelValue::Sum(a, b) | KernelValue::Product(a, b) => {
                a.input_rules() && b.input_rules()
            }
            KernelValue::Scale(_, k) => k.input_rules(),
            KernelValue::Rust { .. } | KernelValue::Lang { .. } => false,
        }
    }

    fn push_leaves(&self, out: &mut Vec<T>) -> bool {
        match self {
            KernelValue::Base { args, .. } => {
                for a in args {
                    out.extend_from_slice(a.as_slice());
                }
                true
            }
            KernelValue::Sum(a, b) | KernelValue::Product(a, b) => {
                a.push_leaves(out) && b.push_leaves(out)
            }
            KernelValue::Scale(c, k) => {
                out.push(*c);
                k.push_leaves(out)
            }
            KernelValue::Compiled { params, .. } => {
                out.extend_from_slice(params);
                true
            }
            KernelValue::Rust { params, .. } => {
                out.extend_from_slice(params);
                true
            }
            KernelValue::Lang { .. } => false,
        }
    }

    /// The same kernel with every parameter's value (tangents dropped);
    /// `None` for kernels with model-file or Rust parts.
    pub fn to_f64(&self) -> Option<KernelValue<f64>> {
        Some(match self {
            KernelValue::Base {
                kind,
                args,
                dims,
                span,
            } => KernelValue::Base {
                kind: *kind,
                args: args
                    .iter()
                    .map(|a| match a {
                        KernelArg::Scalar(s) => KernelArg::Scalar(s.to_constant()),
                        KernelArg::Vector(v) => {
                            KernelArg::Vector(v.iter().map(|s| s.to_constant()).collect())
                        }
                    })
                    .collect(),
                dims: dims.clone(),
                span: *span,
            },
            KernelValue::Sum(a, b) => {
                KernelValue::Sum(Box::new(a.to_f64()?), Box::new(b.to_f64()?))
            }
            KernelValue::Product(a, b) => {
                KernelValue::Product(Box::new(a.to_f64()?), Box::new(b.to_f64()?))
            }
            KernelValue::Scale(c, k) => KernelValue::Scale(c.to_constant(), Box::new(k.to_f64()?)),
            KernelValue::Compiled {
                name,
                program,
                params,
                dims,
                span,
            } => KernelValue::Compiled {
                name: name.clone(),
                program: program.clone(),
                params: params.iter().map(|p| p.to_constant()).collect(),
                dims: dims.clone(),
                span: *span,
            },
            KernelValue::Rust {
                kernel,
                params,
                dims,
                span,
            } => KernelValue::Rust {
                kernel: kernel.clone(),
                params: params.iter().map(|p| p.to_constant()).collect(),
                dims: dims.clone(),
                span: *span,
            },
            KernelValue::Lang { .. } => return None,
        })
    }
}

impl KernelValue<f64> {
    /// k(x, y) and, written into `g` (one slot per leaf, in the order of
    /// [`KernelValue::leaves`]), ∂k/∂p for every leaf p: one reverse pass
    /// with hand-derived rules for each built-in kernel and for sums,
    /// products and scalings, and the compiled program's reverse pass for
    /// a model-file kernel, so the cost does not grow with the number of
    /// parameters; a Rust kernel's derivatives by forward mode inside the
    /// entry. Kernels without leaves (interpreted model-file kernels) give
    /// NaN (see [`KernelValue::leaves`]).
    pub fn entry_grad(&self, x: &[f64], y: &[f64], same: bool, g: &mut [f64]) -> f64 {
        self.entry_grad_n(x, y, same, g).0
    }

    /// [`KernelValue::entry_grad`], also returning the number of leaves
    /// written.
    fn entry_grad_n(&self, x: &[f64], y: &[f64], same: bool, g: &mut [f64]) -> (f64, usize) {
        match self {
            KernelValue::Base {
                kind, args, dims, ..
            } => {
                let n: usize = args.iter().map(|a| a.as_slice().len()).sum();
                (base_grad(*kind, args, dims.as_deref(), x, y, same, g), n)
            }
            KernelValue::Sum(a, b) => {
                let (ka, na) = a.entry_grad_n(x, y, same, g);
                let (kb, nb) = b.entry_grad_n(x, y, same, &mut g[na..]);
                (ka + kb, na + nb)
            }
            KernelValue::Product(a, b) => {
                let (ka, na) = a.entry_grad_n(x, y, same, g);
                let (kb, nb) = b.entry_grad_n(x, y, same, &mut g[na..]);
                g[..na].iter_mut().for_each(|v| *v *= kb);
                g[na..na + nb].iter_mut().for_each(|v| *v *= ka);
                (ka * kb, na + nb)
            }
            KernelValue::Scale(c, k) => {
                let (kv, nk) = k.entry_grad_n(x, y, same, &mut g[1..]);
                g[1..1 + nk].iter_mut().for_each(|v| *v *= c);
                g[0] = kv;
                (c * kv, 1 + nk)
            }
            KernelValue::Compiled {
                program,
                params,
                dims,
                ..
            } => {
                let n = params.len();
                let k = match dims {
                    None => program.eval_grad(params, x, y, &mut g[..n]),
                    Some(_) => {
                        program.eval_grad(params, &gather(x, dims), &gather(y, dims), &mut g[..n])
                    }
                };
                (k, n)
            }
            KernelValue::Rust {
                kernel,
                params,
                dims,
                ..
            } => {
                let n = params.len();
                let (gx, gy) = (gather(x, dims), gather(y, dims));
                let k = super::custom::kernel_entry_grad(
                    kernel.as_ref(),
                    params,
                    &gx,
                    &gy,
                    &mut g[..n],
                );
                (k, n)
            }
            KernelValue::Lang { .. } => (f64::NAN, 0),
        }
    }

    /// The number of leaves (see [`KernelValue::leaves`]).
    pub fn leaf_count(&self) -> usize {
        match self {
            KernelValue::Base { args, .. } => args.iter().map(|a| a.as_slice().len()).sum(),
            KernelValue::Sum(a, b) | KernelValue::Product(a, b) => a.leaf_count() + b.leaf_count(),
            KernelValue::Scale(_, k) => 1 + k.leaf_count(),
            KernelValue::Compiled { params, .. } => params.len(),
            KernelValue::Rust { params, .. } => params.len(),
            KernelValue::Lang { .. } => 0,
        }
    }
}

/// k(x, y) of a built-in kernel and its derivatives with respect to its
/// arguments (every entry of a per-dimension one), written into `g`.
fn base_grad(
    kind: KernelKind,
    args: &[KernelArg<f64>],
    dims: Option<&[usize]>,
    x: &[f64],
    y: &[f64],
    same: bool,
    g: &mut [f64],
) -> f64 {
    match kind {
        KernelKind::Rbf | KernelKind::Matern12 | KernelKind::Matern32 | KernelKind::Matern52 => {
            match &args[0] {
                KernelArg::Scalar(l) => {
                    let d2: f64 = stationary::sq_diffs(x, y, dims).sum();
                    let r2 = d2 / (l * l);
                    let (k, slope) = stationary::value_and_slope(kind, r2);
                    // ∂r²/∂ℓ = −2r²/ℓ.
                    g[0] = if r2 == 0.0 || !r2.is_finite() {
                        0.0
                    } else {
                        slope * (-2.0 * r2 / l)
                    };
                    k
                }
                KernelArg::Vector(ls) => {
                    let mut r2 = 0.0;
                    for (d2, l) in stationary::sq_diffs(x, y, dims).zip(ls) {
                        r2 += d2 / (l * l);
                    }
                    let (k, slope) = stationary::value_and_slope(kind, r2);
                    for ((gk, d2), l) in g.iter_mut().zip(stationary::sq_diffs(x, y, dims)).zip(ls)
                    {
                        // ∂r²/∂ℓₖ = −2dₖ²/ℓₖ³.
                        *gk = if d2 == 0.0 || !r2.is_finite() {
                            0.0
                        } else {
                            slope * (-2.0 * d2 / (l * l * l))
                        };
                    }
                    k
                }
            }
        }
        KernelKind::Periodic => {
            let (k, dl, dp) =
                stationary::periodic_grad(x, y, dims, args[0].scalar(), args[1].scalar());
            g[0] = dl;
            g[1] = dp;
            k
        }
        KernelKind::Linear => {
            let v = args[0].as_slice();
            if v.len() == 1 {
                let xy = dot_product::dot_of(x, y, dims);
                g[0] = xy;
                v[0] * xy
            } else {
                let mut k = 0.0;
                for ((gk, p), vk) in g.iter_mut().zip(dot_product::products(x, y, dims)).zip(v) {
                    *gk = p;
                    k += vk * p;
                }
                k
            }
        }
        KernelKind::Polynomial => {
            let (degree, c) = (args[0].scalar(), args[1].scalar());
            let base = c + dot_product::dot_of(x, y, dims);
            let k = dot_product::polynomial::<f64>(x, y, dims, degree, c);
            // An integer degree is not differentiated (as in the dual path).
            g[0] = if degree.fract() == 0.0 && degree.abs() < 64.0 {
                0.0
            } else {
                k * base.ln()
            };
            g[1] = dot_product::polynomial_slope(degree, base);
            k
        }
        KernelKind::Cosine => dot_product::cosine::<f64>(x, y, dims),
        KernelKind::White => {
            if same {
                1.0
            } else {
                0.0
            }
        }
        KernelKind::Constant => 1.0,
    }
}
