//! Reading a control-variate method as written in a model file:
//! `using control_variates(METHOD)` after an `estimate` block, and the
//! `control_variates = METHOD` setting of `infer evidence`.
//!
//! ```text
//! none | poly1 | poly2 | poly2(ridge = 1e-3)
//! stein | stein(rbf | imq | preconditioned, ell = 1.5 | median | ml,
//!               lambda = 1e-4, split = true, beta = -0.5, alpha = 0.1)
//! secf | secf(rbf, order = 1 | 2, ell = ..., lambda = ...)
//! vector_valued(rbf, B = fixed([[1, 0.5], [0.5, 1]]) | learned | learned(iters = 100, lr = 0.05),
//!               ell = ..., lambda = ...)
//! ```

use super::control_variates::{Lengthscale, Method};
use super::stein::BaseKernel;
use super::vector_valued::TaskMatrix;
use nalgebra::DMatrix;
use tempest_core::error::{Error, ErrorKind};
use tempest_syntax::ast::{Arg, Expr, ExprKind, UnOp};

/// A control-variate method: one integral at a time, or several jointly.
#[derive(Clone, Debug, PartialEq)]
pub enum CvSpec {
    /// Each integral on its own.
    Scalar(Method),
    /// The integrals jointly, with a task matrix.
    VectorValued {
        /// The base kernel.
        kernel: BaseKernel,
        /// How its lengthscale is chosen.
        ell: Lengthscale,
        /// Regularisation λ (relative to the mean diagonal).
        lambda: f64,
        /// The task matrix B.
        b: TaskMatrix,
        /// Degree of per-task polynomial control variates beside the kernel
        /// (0: none).
        order: usize,
    },
}

impl CvSpec {
    /// Plain Monte Carlo.
    pub fn none() -> CvSpec {
        CvSpec::Scalar(Method::None)
    }

    /// Check, before any draw is made, that `n` draws of dimension `d` are
    /// enough for the method estimating `tasks` integrals at once: one at a
    /// time by [`Method::check_size`]; jointly (vector-valued), each task
    /// fitted on `min(n, task_points)` of the draws, which must be at least
    /// 4 and more than the task's polynomial terms, with a fixed task
    /// matrix B of `tasks` × `tasks` and the Gram matrices of all tasks'
    /// points within memory.
    ///
    /// Errors: [`ErrorKind::Settings`], saying what the method needs.
    pub fn check_size(
        &self,
        n: usize,
        d: usize,
        tasks: usize,
        task_points: usize,
    ) -> Result<(), Error> {
        let (b, order) = match self {
            CvSpec::Scalar(m) => return m.check_size(n, d),
            CvSpec::VectorValued { b, order, .. } => (b, order),
        };
        let settings = |msg: String| Error::new(ErrorKind::Settings, msg);
        let m = n.min(task_points);
        if m < 4 {
            return Err(settings(format!(
                "vector-valued control variates fit each integral on at least 4 draws, but the run has {n}; take more draws"
            )));
        }
        let terms = match order {
            0 => 0,
            1 => d,
            _ => d + d * (d + 1) / 2,
        };
        if *order > 0 && m <= terms + 1 {
            return Err(settings(format!(
                "vector-valued control variates with order {order} fit {} terms per integral in {d} dimensions on {m} draws each, which is too few; take more draws or use `order = 0`",
                terms + 1
            )));
        }
        if let TaskMatrix::Fixed(bm) = b
            && bm.nrows() != tasks
        {
            return Err(settings(format!(
                "the task matrix B is {}×{}, but there are {tasks} integrals (estimate components) to estimate jointly: give a {tasks}×{tasks} B",
                bm.nrows(),
                bm.ncols()
            )));
        }
        let points = tasks.saturating_mul(m);
        tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(
            "the vector-valued control variates' Gram matrices",
        )
        .times("matrices", 4u64)
        .times("points", points)
        .times("points", points)])
    }
}

fn err(e: &Expr, msg: impl Into<String>) -> Error {
    Error::at(ErrorKind::Settings, e.span, msg).with_label("here")
}

fn number(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(i) => Some(*i as f64),
        ExprKind::Real(r) => Some(*r),
        ExprKind::Unary(UnOp::Neg, a) => number(a).map(|v| -v),
        _ => None,
    }
}

fn name_of(e: &Expr) -> Option<(&str, &[Arg])> {
    match &e.kind {
        ExprKind::Var(n) => Some((n.as_str(), &[])),
        ExprKind::Call(n, args) => Some((n.name.as_str(), args.as_slice())),
        _ => None,
    }
}

/// Options shared by the kernel methods.
struct KernelOpts {
    kernel: BaseKernel,
    ell: Lengthscale,
    lambda: f64,
}

/// Read the positional kernel name and the named kernel options of `args`;
/// `extra` handles the method's own named options (returns whether it took
/// the option).
fn kernel_opts(
    args: &[Arg],
    extra: &mut dyn FnMut(&str, &Expr) -> Result<bool, Error>,
) -> Result<KernelOpts, Error> {
    let mut kind = "rbf";
    let mut kinds = 0;
    let mut ell_v: Option<f64> = None;
    let mut ell = Lengthscale::Median;
    let mut lambda = 1e-4;
    let mut beta = -0.5;
    let mut alpha = 0.1;
    for a in args {
        match &a.name {
            None => match &a.value.kind {
                ExprKind::Var(k) if ["rbf", "imq", "preconditioned"].contains(&k.as_str()) => {
                    kinds += 1;
                    if kinds > 1 {
                        return Err(err(&a.value, "a method takes one base kernel"));
                    }
                    kind = match k.as_str() {
                        "rbf" => "rbf",
                        "imq" => "imq",
                        _ => "preconditioned",
                    }
                }
                _ => {
                    return Err(err(
                        &a.value,
                        "expected a base kernel: `rbf`, `imq` or `preconditioned`",
                    ));
                }
            },
            Some(n) => {
                let v = &a.value;
                match n.name.as_str() {
                    "ell" => match (&v.kind, number(v)) {
                        (_, Some(x)) if x > 0.0 => {
                            ell_v = Some(x);
                            ell = Lengthscale::Fixed;
                        }
                        (ExprKind::Var(m), _) if m == "median" => ell = Lengthscale::Median,
                        (ExprKind::Var(m), _) if m == "ml" => ell = Lengthscale::MarginalLikelihood,
                        _ => {
                            return Err(err(
                                v,
                                "`ell` is a positive number, `median` (the median heuristic) or `ml` (marginal likelihood)",
                            ));
                        }
                    },
                    "lambda" => match number(v) {
                        Some(x) if x > 0.0 => lambda = x,
                        _ => return Err(err(v, "`lambda` is a positive number")),
                    },
                    "beta" => match number(v) {
                        Some(x) if x < 0.0 => beta = x,
                        _ => {
                            return Err(err(
                                v,
                                "`beta` (the inverse multiquadric's exponent) is a negative number",
                            ));
                        }
                    },
                    "alpha" => match number(v) {
                        Some(x) if x > 0.0 => alpha = x,
                        _ => {
                            return Err(err(
                                v,
                                "`alpha` (the preconditioner's weight) is a positive number",
                            ));
                        }
                    },
                    other => {
                        if !extra(other, v)? {
                            return Err(Error::at(
                                ErrorKind::Settings,
                                n.span,
                                format!("unknown option `{other}`"),
                            )
                            .with_label("not an option here"));
                        }
                    }
                }
            }
        }
    }
    let l = ell_v.unwrap_or(1.0);
    let kernel = match kind {
        "rbf" => BaseKernel::Rbf { ell: l },
        "imq" => BaseKernel::Imq { ell: l, beta },
        _ => BaseKernel::Preconditioned { ell: l, alpha },
    };
    Ok(KernelOpts {
        kernel,
        ell,
        lambda,
    })
}

fn bool_of(v: &Expr, what: &str) -> Result<bool, Error> {
    match v.kind {
        ExprKind::Bool(b) => Ok(b),
        _ => Err(err(v, format!("`{what}` is `true` or `false`"))),
    }
}

/// Read a method.
///
/// Errors ([`ErrorKind::Settings`], at the offending span): an unknown
/// method, kernel or option, or an option value out of range.
pub fn parse(e: &Expr) -> Result<CvSpec, Error> {
    let Some((name, args)) = name_of(e) else {
        return Err(err(e, "expected a control-variate method"));
    };
    Ok(match name {
        "none" => CvSpec::none(),
        "poly1" | "poly2" => {
            let mut ridge = 0.0;
            for a in args {
                match (a.name.as_ref().map(|n| n.name.as_str()), number(&a.value)) {
                    (Some("ridge"), Some(r)) if r >= 0.0 => ridge = r,
                    _ => return Err(err(&a.value, "the only option is `ridge = r` (r ≥ 0)")),
                }
            }
            CvSpec::Scalar(Method::Poly {
                order: if name == "poly1" { 1 } else { 2 },
                ridge,
            })
        }
        "stein" => {
            let mut split = false;
            let o = kernel_opts(args, &mut |n, v| {
                if n == "split" {
                    split = bool_of(v, "split")?;
                    return Ok(true);
                }
                Ok(false)
            })?;
            CvSpec::Scalar(Method::Stein {
                kernel: o.kernel,
                ell: o.ell,
                lambda: o.lambda,
                split,
            })
        }
        "secf" => {
            let mut order = 1;
            let o = kernel_opts(args, &mut |n, v| {
                if n == "order" {
                    order = match number(v) {
                        Some(x) if x == 1.0 || x == 2.0 => x as usize,
                        _ => return Err(err(v, "`order` is 1 or 2")),
                    };
                    return Ok(true);
                }
                Ok(false)
            })?;
            CvSpec::Scalar(Method::Secf {
                kernel: o.kernel,
                ell: o.ell,
                lambda: o.lambda,
                order,
            })
        }
        "vector_valued" => {
            let mut b = TaskMatrix::Learned {
                iters: 100,
                lr: 0.05,
            };
            let mut order = 0;
            let ml = args.iter().any(|a| {
                a.name.as_ref().is_some_and(|n| n.name == "ell")
                    && matches!(&a.value.kind, ExprKind::Var(m) if m == "ml")
            });
            if ml {
                return Err(err(
                    e,
                    "`vector_valued` takes `ell` as a number or `median`; `ml` is for `stein` and `secf`",
                ));
            }
            let o = kernel_opts(args, &mut |n, v| {
                if n == "B" {
                    b = task_matrix(v)?;
                    return Ok(true);
                }
                if n == "order" {
                    order = match number(v) {
                        Some(x) if x == 0.0 || x == 1.0 || x == 2.0 => x as usize,
                        _ => return Err(err(v, "`order` is 0, 1 or 2")),
                    };
                    return Ok(true);
                }
                Ok(false)
            })?;
            CvSpec::VectorValued {
                kernel: o.kernel,
                ell: o.ell,
                lambda: o.lambda,
                b,
                order,
            }
        }
        other => {
            return Err(err(
                e,
                format!(
                    "unknown control-variate method `{other}`; methods: none, poly1, poly2, stein, secf, vector_valued"
                ),
            ));
        }
    })
}

/// `fixed([[...], ...])`, `learned` or `learned(iters = n, lr = r)`.
fn task_matrix(v: &Expr) -> Result<TaskMatrix, Error> {
    let bad = || {
        err(
            v,
            "`B` is `learned`, `learned(iters = 100, lr = 0.05)` or `fixed([[1, 0.5], [0.5, 1]])`",
        )
    };
    let (name, args) = name_of(v).ok_or_else(bad)?;
    match name {
        "learned" => {
            let (mut iters, mut lr) = (100usize, 0.05);
            for a in args {
                match (a.name.as_ref().map(|n| n.name.as_str()), number(&a.value)) {
                    (Some("iters"), Some(x)) if x >= 1.0 => iters = x as usize,
                    (Some("lr"), Some(x)) if x > 0.0 => lr = x,
                    _ => return Err(bad()),
                }
            }
            Ok(TaskMatrix::Learned { iters, lr })
        }
        "fixed" => {
            let [a] = args else { return Err(bad()) };
            let ExprKind::Array(rows) = &a.value.kind else {
                return Err(bad());
            };
            let mut m: Vec<Vec<f64>> = Vec::new();
            for r in rows {
                let ExprKind::Array(cells) = &r.kind else {
                    return Err(err(r, "each row of B is a list of numbers"));
                };
                m.push(
                    cells
                        .iter()
                        .map(|c| number(c).ok_or_else(|| err(c, "expected a number")))
                        .collect::<Result<_, _>>()?,
                );
            }
            let t = m.len();
            if t == 0 || m.iter().any(|r| r.len() != t) {
                return Err(err(&a.value, "B must be a square matrix"));
            }
            let b = DMatrix::from_fn(t, t, |i, j| m[i][j]);
            if (&b - b.transpose()).abs().max() > 1e-12 {
                return Err(err(&a.value, "B must be symmetric"));
            }
            if b.clone().cholesky().is_none() {
                return Err(err(&a.value, "B must be positive definite"));
            }
            Ok(TaskMatrix::Fixed(b))
        }
        _ => Err(bad()),
    }
}
