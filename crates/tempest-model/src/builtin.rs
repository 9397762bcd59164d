//! The built-in functions of the language, and their definitions on one
//! scalar: the one place the interpreter, the compiled programs and the
//! samplers' reverse pass take an element-wise built-in's value from.

use crate::custom::Scalar;
use tempest_math::scalar::RealExt;

/// Built-in functions. Element-wise ones map over vectors and matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `exp(x)`
    Exp,
    /// `log(x)`
    Log,
    /// `log1p(x)`
    Log1p,
    /// `expm1(x)`
    Expm1,
    /// `sqrt(x)`
    Sqrt,
    /// `abs(x)`
    Abs,
    /// `sin(x)`
    Sin,
    /// `cos(x)`
    Cos,
    /// `tanh(x)`
    Tanh,
    /// `sigmoid(x)`
    Sigmoid,
    /// `log_sigmoid(x)`
    LogSigmoid,
    /// `softplus(x)`
    Softplus,
    /// `lgamma(x)`
    Lgamma,
    /// `digamma(x)`
    Digamma,
    /// `erf(x)`
    Erf,
    /// `Phi(x)` (standard normal CDF)
    Phi,
    /// `pow(x, y)`
    Pow,
    /// `logsumexp(v)`
    Logsumexp,
    /// `sum(v)`
    Sum,
    /// `mean(v)`
    Mean,
    /// `dot(a, b)`
    Dot,
    /// `sqdist(a, b)`
    Sqdist,
    /// `rows(m)`
    Rows,
    /// `cols(m)`
    Cols,
    /// `col(m, j)`: column j of a matrix.
    Col,
    /// `pi()`
    Pi,
    /// `e()`
    E,
}

impl Builtin {
    /// All built-in functions.
    pub const ALL: [Builtin; 27] = [
        Builtin::Exp,
        Builtin::Log,
        Builtin::Log1p,
        Builtin::Expm1,
        Builtin::Sqrt,
        Builtin::Abs,
        Builtin::Sin,
        Builtin::Cos,
        Builtin::Tanh,
        Builtin::Sigmoid,
        Builtin::LogSigmoid,
        Builtin::Softplus,
        Builtin::Lgamma,
        Builtin::Digamma,
        Builtin::Erf,
        Builtin::Phi,
        Builtin::Pow,
        Builtin::Logsumexp,
        Builtin::Sum,
        Builtin::Mean,
        Builtin::Dot,
        Builtin::Sqdist,
        Builtin::Rows,
        Builtin::Cols,
        Builtin::Col,
        Builtin::Pi,
        Builtin::E,
    ];

    /// The name used in model files.
    pub fn name(self) -> &'static str {
        use Builtin::*;
        match self {
            Exp => "exp",
            Log => "log",
            Log1p => "log1p",
            Expm1 => "expm1",
            Sqrt => "sqrt",
            Abs => "abs",
            Sin => "sin",
            Cos => "cos",
            Tanh => "tanh",
            Sigmoid => "sigmoid",
            LogSigmoid => "log_sigmoid",
            Softplus => "softplus",
            Lgamma => "lgamma",
            Digamma => "digamma",
            Erf => "erf",
            Phi => "Phi",
            Pow => "pow",
            Logsumexp => "logsumexp",
            Sum => "sum",
            Mean => "mean",
            Dot => "dot",
            Sqdist => "sqdist",
            Rows => "rows",
            Cols => "cols",
            Col => "col",
            Pi => "pi",
            E => "e",
        }
    }

    /// Look a function up by name.
    /// `inv_logit` (Stan's name) is accepted for `sigmoid`.
    pub fn from_name(name: &str) -> Option<Builtin> {
        if name == "inv_logit" {
            return Some(Builtin::Sigmoid);
        }
        Builtin::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The number of arguments.
    pub fn arity(self) -> usize {
        use Builtin::*;
        match self {
            Pi | E => 0,
            Pow | Dot | Sqdist | Col => 2,
            _ => 1,
        }
    }

    /// Whether it maps element by element over vectors and matrices.
    pub fn is_elementwise(self) -> bool {
        use Builtin::*;
        !matches!(
            self,
            Pow | Logsumexp | Sum | Mean | Dot | Sqdist | Rows | Cols | Col | Pi | E
        )
    }
}

/// An element-wise built-in on one scalar (the same definitions as
/// `tempest::ir::ops::builtin`).
pub fn call1<T: Scalar>(b: Builtin, v: T) -> T {
    use Builtin::*;
    match b {
        Exp => v.exp(),
        Log => v.ln(),
        Log1p => v.log1p(),
        Expm1 => v.expm1(),
        Sqrt => v.sqrt_(),
        Abs => v.abs(),
        Sin => v.sin(),
        Cos => v.cos(),
        Tanh => v.tanh(),
        Sigmoid => v.sigmoid(),
        LogSigmoid => v.log_sigmoid(),
        Softplus => v.softplus(),
        Lgamma => v.lgamma(),
        Digamma => v.digamma(),
        Erf => RealExt::erf(v),
        Phi => v.phi(),
        _ => T::constant(f64::NAN),
    }
}

/// x^y: exp(y log x) for x > 0 (differentiable in both); for x ≤ 0 an
/// integral y gives the integer power (not differentiable in y). The one
/// rule for `^` of the interpreter, the compiled likelihoods and the kernel
/// programs.
pub fn pow<T: Scalar>(x: T, y: T) -> T {
    let (xv, yv) = (x.to_constant(), y.to_constant());
    if xv <= 0.0 && yv.fract() == 0.0 && yv.abs() <= i32::MAX as f64 {
        RealExt::powi_exact(x, yv as i32)
    } else {
        x.powf(y)
    }
}
