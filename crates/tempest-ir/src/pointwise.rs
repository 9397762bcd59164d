//! The one element-wise likelihood path: a sampling statement's log density
//! over its N outcomes, log p(yᵢ | a₁ᵢ, …, aₖᵢ) for i < N, with every
//! argument broadcast (a scalar) or indexed (a vector of N), and
//! `categorical_logit` reading row i of an [N, C] score matrix.
//!
//! Every engine goes through [`Pointwise`]: the general evaluator for any
//! scalar type ([`Pointwise::terms`]), the samplers' value
//! ([`Pointwise::sum`]) and vector–Jacobian product ([`Pointwise::sum_vjp`]),
//! and the variational engines one point at a time ([`Pointwise::point`],
//! [`Pointwise::classes`]). Built-in, model-file (compiled or interpreted)
//! and Rust-registered densities are dispatched in one place
//! (`point_log_density`); the common built-ins have hand-written
//! derivatives in f64 (`closed_form`), the rest are differentiated by one
//! forward-mode pass per element with one tangent per varying coordinate.

/// One statement prepared for evaluation over slices, allocation-free.
pub mod term;
/// Whole-vector closed forms of the commonest statements.
pub mod vec;

use super::eval::call_likelihood;
use super::graph::{DistCall, DistRef, Graph};
use super::value::{Value, zero_like};
use ad_trait::forward_ad::adfn::adfn;
use statrs::function::gamma::{digamma, ln_gamma};
use tempest_core::error::{Error, ErrorKind};
use tempest_math::scalar::RealExt;
use tempest_model::custom::Scalar;
use tempest_model::dist::{Dist, categorical_logit};
use tempest_syntax::ast::Span;

/// Up to this many arguments sit on the stack when one point is evaluated
/// (no allocation per element).
const STACK: usize = 6;

/// One sampling statement's density, ready to evaluate element by element.
pub struct Pointwise<'g> {
    graph: &'g Graph,
    dist: &'g DistCall,
    opts: Vec<f64>,
}

/// The value of [`Pointwise::sum_vjp`] and its adjoints.
pub struct PointwiseGrad {
    /// t · Σᵢ log p(yᵢ | aᵢ).
    pub value: f64,
    /// The adjoint of each argument, shaped like the argument (zero for
    /// arguments that do not vary).
    pub args: Vec<Value<f64>>,
    /// The adjoint of the outcome, shaped like it (zero unless asked for).
    pub outcome: Value<f64>,
}

impl<'g> Pointwise<'g> {
    /// The density of `dist`, a distribution call of `graph`.
    pub fn new(graph: &'g Graph, dist: &'g DistCall) -> Self {
        Pointwise {
            graph,
            dist,
            opts: dist.options.iter().map(|(_, v)| *v).collect(),
        }
    }

    /// Whether the density is `categorical_logit` (its one argument holds C
    /// class scores per outcome).
    pub fn is_categorical(&self) -> bool {
        matches!(self.dist.dist, DistRef::Builtin(Dist::CategoricalLogit))
    }

    /// Check that every vector argument has one value per outcome (and a
    /// score matrix one row per outcome); `span` is the statement's.
    pub fn check_lengths<T: Scalar>(
        &self,
        y: &Value<T>,
        args: &[Value<T>],
        span: Span,
    ) -> Result<(), Error> {
        let n = y.len().unwrap_or(1);
        for (a, e) in args.iter().zip(&self.dist.args) {
            if let Some(m) = a.len()
                && m != n
                && !(self.is_categorical() && y.len().is_none())
            {
                return Err(Error::at(
                    ErrorKind::Shape,
                    e.span,
                    format!(
                        "this argument of `{}` has {m} values, but there are {n} outcomes",
                        self.dist.name
                    ),
                )
                .with_label("length mismatch")
                .with_secondary(span, "in this statement"));
            }
        }
        Ok(())
    }

    /// log p(y | a) for one outcome of a scalar distribution, given the
    /// arguments' values at that outcome.
    pub fn point<T: Scalar>(&self, y: T, a: &[T]) -> Result<T, Error> {
        point_log_density(self.graph, &self.dist.dist, y, a, &self.opts)
    }

    /// log p(y | a) with the arguments given by `arg(k)` for k below
    /// `n_args`, on the stack when there are few.
    pub fn point_with<T: Scalar>(
        &self,
        y: T,
        n_args: usize,
        arg: impl Fn(usize) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if n_args <= STACK {
            let mut a = [T::zero(); STACK];
            for (k, slot) in a.iter_mut().enumerate().take(n_args) {
                *slot = arg(k)?;
            }
            self.point(y, &a[..n_args])
        } else {
            let a: Vec<T> = (0..n_args).map(arg).collect::<Result<_, _>>()?;
            self.point(y, &a)
        }
    }

    /// log p(y | scores) of `categorical_logit` for class y.
    pub fn classes<T: Scalar>(&self, y: usize, scores: &[T]) -> T {
        categorical_logit(y, scores)
    }

    /// The log density of outcome i, the arguments read at i.
    fn element<T: Scalar>(
        &self,
        y: &Value<T>,
        args: &[Value<T>],
        i: usize,
        span: Span,
    ) -> Result<T, Error> {
        let yi = y
            .element(i)
            .ok_or_else(|| Error::internal("outcome element"))?;
        if self.is_categorical() {
            let row = class_scores(&args[0], i, span)?;
            return Ok(categorical_logit(yi.to_constant() as usize, &row));
        }
        self.point_with(yi, args.len(), |k| {
            Ok(args[k].element(i).unwrap_or_else(T::zero))
        })
    }

    /// Each outcome's log density (not tempered), shape \[N\] (or \[1\] for a
    /// scalar outcome), in any scalar type; `args` are the arguments'
    /// values, `span` the statement's.
    pub fn terms<T: Scalar>(
        &self,
        y: &Value<T>,
        args: &[Value<T>],
        span: Span,
    ) -> Result<Vec<T>, Error> {
        self.check_lengths(y, args, span)?;
        (0..y.len().unwrap_or(1))
            .map(|i| self.element(y, args, i, span))
            .collect()
    }

    /// Σᵢ log p(yᵢ | aᵢ) in f64, by the closed forms where they exist.
    pub fn sum(&self, y: &Value<f64>, args: &[Value<f64>]) -> Result<f64, Error> {
        self.check_lengths(y, args, self.dist.span)?;
        let none = vec![false; args.len()];
        if let Some(g) = self.by_term(y, args, &none, false, 1.0, false)? {
            return Ok(g.value);
        }
        let mut total = 0.0;
        for i in 0..y.len().unwrap_or(1) {
            total += self.element(y, args, i, self.dist.span)?;
        }
        Ok(total)
    }

    /// The statement through [`term::Term`], the path of the compiled
    /// log density, with its adjoints (when `grad`) shaped like the
    /// arguments and the outcome; `None` where that path does not cover it
    /// (more than six arguments or eight varying coordinates, class scores
    /// that are one vector).
    fn by_term(
        &self,
        y: &Value<f64>,
        args: &[Value<f64>],
        varies: &[bool],
        outcome: bool,
        t: f64,
        grad: bool,
    ) -> Result<Option<PointwiseGrad>, Error> {
        use std::borrow::Cow;
        use vec::Arg;
        let ys: Cow<[f64]> = match y {
            Value::Vector(v) => Cow::Borrowed(v.as_slice()),
            Value::IntArray(k) => Cow::Owned(k.iter().map(|&k| k as f64).collect()),
            Value::Real(x) => Cow::Owned(vec![*x]),
            Value::Int(k) => Cow::Owned(vec![*k as f64]),
            _ => return Ok(None),
        };
        let n = ys.len();
        let (mut a, mut each, mut cols) = (Vec::with_capacity(args.len()), vec![], 0);
        for v in args {
            let (arg, per_outcome) = match v {
                Value::Real(x) => (Arg::One(*x), false),
                Value::Int(k) => (Arg::One(*k as f64), false),
                Value::Vector(x) if x.len() == n => (Arg::Each(x.as_slice()), true),
                Value::Matrix(m) if args.len() == 1 && m.nrows() == n => {
                    cols = m.ncols();
                    (Arg::Each(m.as_slice()), true)
                }
                _ => return Ok(None),
            };
            a.push(arg);
            each.push(per_outcome);
        }
        let Some(term) = term::Term::new(
            self.graph,
            self.dist,
            varies.to_vec(),
            &each,
            outcome,
            (n, cols),
        ) else {
            return Ok(None);
        };
        let mut scratch = vec![0.0; term.scratch_len()];
        let value = term.eval(self.graph, &ys, &a, t, grad, &mut scratch)?;
        let shaped = |like: &Value<f64>, d: &[f64]| match like {
            Value::Vector(_) | Value::IntArray(_) => Value::Vector(d.to_vec().into()),
            Value::Matrix(m) => Value::Matrix(nalgebra::DMatrix::from_column_slice(
                m.nrows(),
                m.ncols(),
                d,
            )),
            _ => Value::Real(d.iter().sum()),
        };
        let args = args
            .iter()
            .enumerate()
            .map(|(k, v)| {
                if grad && varies[k] {
                    shaped(v, term.arg_adjoint(&scratch, k))
                } else {
                    zero_like(v)
                }
            })
            .collect();
        let outcome = if grad && outcome {
            shaped(y, term.outcome_adjoint(&scratch))
        } else {
            zero_like(y)
        };
        Ok(Some(PointwiseGrad {
            value,
            args,
            outcome,
        }))
    }

    /// t · Σᵢ log p(yᵢ | aᵢ) and its vector–Jacobian product: the adjoints
    /// of the arguments flagged in `varies` and, when `outcome` is set, of
    /// the outcome (a param's prior), each times t.
    pub fn sum_vjp(
        &self,
        y: &Value<f64>,
        args: &[Value<f64>],
        varies: &[bool],
        outcome: bool,
        t: f64,
    ) -> Result<PointwiseGrad, Error> {
        self.check_lengths(y, args, self.dist.span)?;
        // The path of the compiled log density covers nearly every
        // statement (closed forms, whole vectors, compiled likelihoods,
        // class scores, forward mode with up to eight tangents).
        if let Some(g) = self.by_term(y, args, varies, outcome, t, true)? {
            return Ok(g);
        }
        // The rest: more arguments or varying coordinates than that path
        // holds, or class scores given as one vector, by forward mode per
        // element.
        let mut g = PointwiseGrad {
            value: 0.0,
            args: args.iter().map(zero_like).collect(),
            outcome: zero_like(y),
        };
        let mut seeds: Vec<Seed> = (0..args.len())
            .filter(|&k| varies[k])
            .map(Seed::Arg)
            .collect();
        if outcome {
            seeds.push(Seed::Outcome);
        }
        let mut a = vec![0.0; args.len()];
        let mut total = 0.0;
        for i in 0..y.len().unwrap_or(1) {
            let yi = y
                .element(i)
                .ok_or_else(|| Error::internal("outcome element"))?;
            if self.is_categorical() {
                let row = class_scores(&args[0], i, self.dist.span)?;
                total += categorical_logit(yi as usize, &row);
                if varies[0]
                    && let Value::Vector(m) = &mut g.args[0]
                {
                    // One score vector for every outcome: the adjoints add.
                    term::softmax_adjoint(&row, yi as usize, t, |c, d| m[c] += d);
                }
                continue;
            }
            for (slot, v) in a.iter_mut().zip(args) {
                *slot = v.element(i).unwrap_or(0.0);
            }
            // One forward-mode pass with the narrowest dual that holds every
            // seed gives the value and the derivatives in every varying
            // coordinate (the args that vary, then y).
            macro_rules! pass {
                ($n:literal) => {{
                    let (v, d) = self.point_dual::<$n>(yi, &a, &seeds)?;
                    push_adjoints(&seeds, &d, i, t, &mut g);
                    v
                }};
            }
            total += match seeds.len() {
                0 => self.point(yi, &a)?,
                1 => pass!(1),
                2..=4 => pass!(4),
                5..=8 => pass!(8),
                _ => {
                    let mut d = Vec::with_capacity(seeds.len());
                    let mut v = 0.0;
                    for s in 0..seeds.len() {
                        let (vs, ds) = self.point_dual::<1>(yi, &a, &seeds[s..=s])?;
                        v = vs;
                        d.push(ds[0]);
                    }
                    push_adjoints(&seeds, &d, i, t, &mut g);
                    v
                }
            };
        }
        g.value = t * total;
        Ok(g)
    }

    /// One element's log density and its derivatives in the `seeds`
    /// coordinates (at most N), by one forward-mode pass with N tangents.
    fn point_dual<const N: usize>(
        &self,
        y: f64,
        a: &[f64],
        seeds: &[Seed],
    ) -> Result<(f64, [f64; N]), Error>
    where
        adfn<N>: Scalar,
    {
        point_dual(self.graph, &self.dist.dist, &self.opts, y, a, seeds)
    }
}

/// One element's log density of `dist` and its derivatives in the `seeds`
/// coordinates (at most N), by one forward-mode pass with N tangents; the
/// arguments sit on the stack when there are few.
fn point_dual<const N: usize>(
    graph: &Graph,
    dist: &DistRef,
    opts: &[f64],
    y: f64,
    a: &[f64],
    seeds: &[Seed],
) -> Result<(f64, [f64; N]), Error>
where
    adfn<N>: Scalar,
{
    let tangent = |which: &dyn Fn(Seed) -> bool| {
        let mut t = [0.0; N];
        for (s, seed) in seeds.iter().enumerate() {
            if which(*seed) {
                t[s] = 1.0;
            }
        }
        t
    };
    let arg = |k: usize| adfn::new(a[k], tangent(&|s| matches!(s, Seed::Arg(j) if j == k)));
    let yd = adfn::new(y, tangent(&|s| matches!(s, Seed::Outcome)));
    let r = if a.len() <= STACK {
        let mut ad = [adfn::<N>::new_constant(0.0); STACK];
        for (k, slot) in ad.iter_mut().enumerate().take(a.len()) {
            *slot = arg(k);
        }
        point_log_density(graph, dist, yd, &ad[..a.len()], opts)?
    } else {
        let ad: Vec<adfn<N>> = (0..a.len()).map(arg).collect();
        point_log_density(graph, dist, yd, &ad, opts)?
    };
    Ok((r.value(), r.tangent()))
}

/// log p(y | args) for one outcome of a scalar distribution (any but
/// `categorical_logit`): built-in, model-file or Rust-registered. `args` are
/// the positional arguments' values at this outcome, `opts` the options.
fn point_log_density<T: Scalar>(
    graph: &Graph,
    dist: &DistRef,
    y: T,
    args: &[T],
    opts: &[f64],
) -> Result<T, Error> {
    Ok(match dist {
        DistRef::Builtin(d) => d.log_density(y, args, opts),
        DistRef::User(f) => call_likelihood(graph, *f, y, args)?,
        DistRef::Rust(l) => T::call_likelihood(l.as_ref(), y.to_constant(), args[0], &args[1..]),
    })
}

/// A coordinate a sampling statement's log density is differentiated in.
#[derive(Clone, Copy, Debug)]
enum Seed {
    /// The k-th argument of the distribution.
    Arg(usize),
    /// The outcome (a param with a prior).
    Outcome,
}

/// The C class scores of outcome i of `categorical_logit`: row i of the
/// [N, C] score matrix (a vector holds one row).
pub fn class_scores<T: Scalar>(scores: &Value<T>, i: usize, span: Span) -> Result<Vec<T>, Error> {
    match scores {
        Value::Matrix(m) => Ok(m.row(i).iter().copied().collect()),
        Value::Vector(v) => Ok(v.iter().copied().collect()),
        v => Err(Error::at(
            ErrorKind::Type,
            span,
            format!(
                "`categorical_logit` needs class scores, found {}",
                v.shape()
            ),
        )),
    }
}

/// Add one element's derivatives (times t) to the adjoints of the args and
/// the outcome.
fn push_adjoints(seeds: &[Seed], d: &[f64], i: usize, t: f64, g: &mut PointwiseGrad) {
    for (seed, di) in seeds.iter().zip(d) {
        match seed {
            Seed::Arg(k) => add_at(&mut g.args[*k], i, t * di),
            Seed::Outcome => add_at(&mut g.outcome, i, t * di),
        }
    }
}

fn add_at(v: &mut Value<f64>, i: usize, d: f64) {
    match v {
        Value::Vector(x) => x[i] += d,
        Value::Real(x) => *x += d,
        _ => {}
    }
}

const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_8;

/// Whether `closed_form` covers `d` (with the derivative in the outcome
/// when `outcome` is set: a param's prior).
pub fn has_closed_form(d: Dist, outcome: bool) -> bool {
    match d {
        Dist::Normal => true,
        Dist::BernoulliLogit | Dist::PoissonLog | Dist::NegBinomial2Log => !outcome,
        _ => false,
    }
}

/// The value of a built-in element log density and its derivatives in the
/// (at most two) args and in y, in f64 — the same formulas as
/// [`Dist::log_density`], differentiated by hand.
fn closed_form(d: Dist, y: f64, a: &[f64]) -> (f64, [f64; 2], f64) {
    match d {
        Dist::Normal => {
            let (mu, sigma) = (a[0], a[1]);
            let z = (y - mu) / sigma;
            (
                -0.5 * z * z - sigma.ln() - HALF_LOG_2PI,
                [z / sigma, (z * z - 1.0) / sigma],
                -z / sigma,
            )
        }
        Dist::BernoulliLogit => {
            // log σ(±f) = −(max(∓f, 0) + log1p(e^{−|f|})); d/df = y − σ(f).
            let f = a[0];
            let e = (-f.abs()).exp();
            let l = e.ln_1p();
            let sig = if f >= 0.0 {
                1.0 / (1.0 + e)
            } else {
                e / (1.0 + e)
            };
            let v = if y == 1.0 {
                -((-f).max(0.0) + l)
            } else {
                -(f.max(0.0) + l)
            };
            (v, [y - sig, 0.0], 0.0)
        }
        Dist::PoissonLog => {
            let e = a[0].exp();
            (y * a[0] - e - ln_gamma(y + 1.0), [y - e, 0.0], 0.0)
        }
        Dist::NegBinomial2Log => {
            // With μ = e^f and L = log(μ + φ): the value
            // lgamma(y + φ) − lgamma(φ) − lgamma(y + 1) + φ(log φ − L) + y(f − L);
            // d/df = y − (y + φ)p with p = μ/(μ + φ) = σ(f − log φ);
            // d/dφ = ψ(y + φ) − ψ(φ) + log φ + 1 − L − (y + φ)/(μ + φ).
            // With z = f − log φ, log φ − L = −softplus(z) and f − L = log σ(z)
            // (as the generic density), so large φ does not cancel.
            let (f, phi) = (a[0], a[1]);
            let lphi = phi.ln();
            let z = f - lphi;
            let sp = z.softplus();
            let l = lphi + sp;
            let ls = z.log_sigmoid();
            let p = ls.exp();
            let v = ln_gamma(y + phi) - ln_gamma(phi) - ln_gamma(y + 1.0) - phi * sp + y * ls;
            let dphi = digamma(y + phi) - digamma(phi) + 1.0 - sp - (y + phi) * (-l).exp();
            (v, [y - (y + phi) * p, dphi], 0.0)
        }
        _ => (f64::NAN, [0.0; 2], 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempest_math::scalar::Dual1;

    /// The closed forms equal the generic densities in value, and their
    /// derivatives equal forward-mode autodiff of the generic densities.
    #[test]
    fn closed_forms_match_the_generic_densities() {
        let cases: [(Dist, &[f64], &[f64]); 4] = [
            (Dist::Normal, &[-1.3, 0.0, 2.5], &[-0.7, 0.4, 1.9]),
            (
                Dist::BernoulliLogit,
                &[0.0, 1.0],
                &[-40.0, -2.5, 0.0, 0.3, 3.0, 40.0],
            ),
            (Dist::PoissonLog, &[0.0, 1.0, 7.0], &[-3.0, 0.2, 2.5]),
            (
                Dist::NegBinomial2Log,
                &[0.0, 1.0, 7.0, 120.0],
                &[-30.0, -2.5, 0.2, 2.5, 30.0],
            ),
        ];
        for (d, ys, points) in cases {
            for &y in ys {
                for &p in points {
                    let a: Vec<f64> = match d {
                        Dist::Normal => vec![p, 0.5 + p.abs()],
                        // φ from 0.05 to 20: both sides of e^f.
                        Dist::NegBinomial2Log => vec![p, 0.05 + 0.75 * p.abs()],
                        _ => vec![p],
                    };
                    let (v, da, dy) = closed_form(d, y, &a);
                    let want = d.log_density(y, &a, &[]);
                    assert!(
                        (v - want).abs() <= 1e-12 * want.abs().max(1.0),
                        "{d:?} {y} {a:?}"
                    );
                    for (k, dak) in da.iter().enumerate().take(a.len()) {
                        let ad: Vec<Dual1> = a
                            .iter()
                            .enumerate()
                            .map(|(j, &x)| Dual1::new(x, [if j == k { 1.0 } else { 0.0 }]))
                            .collect();
                        let g = d.log_density(Dual1::new(y, [0.0]), &ad, &[]).tangent()[0];
                        assert!((dak - g).abs() <= 1e-12 * g.abs().max(1.0), "{d:?} arg {k}");
                    }
                    if has_closed_form(d, true) {
                        let ad: Vec<Dual1> = a.iter().map(|&x| Dual1::new(x, [0.0])).collect();
                        let g = d.log_density(Dual1::new(y, [1.0]), &ad, &[]).tangent()[0];
                        assert!((dy - g).abs() <= 1e-12 * g.abs().max(1.0), "{d:?} outcome");
                    }
                }
            }
        }
    }
}
