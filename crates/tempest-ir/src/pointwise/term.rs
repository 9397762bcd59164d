//! One sampling statement prepared for repeated evaluation over slices:
//! its value and the adjoints of the arguments that vary (and of the
//! outcome, for a param's prior), written into buffers the caller owns, so
//! that evaluating it allocates nothing. The compiled log density of the
//! samplers ([`crate::logdensity`]) evaluates its statements through it.
//!
//! It computes what [`crate::pointwise::Pointwise::sum_vjp`] computes, by the same
//! formulas in the same order: the whole-vector forms of [`crate::pointwise::vec`],
//! the element closed forms, a model-file likelihood's compiled program,
//! or one forward-mode pass per element with a tangent per varying
//! coordinate.

use super::vec::{Arg, bernoulli_logit_into, normal_into};
use super::{STACK, Seed, closed_form, has_closed_form, point_dual, point_log_density};
use crate::graph::{DistCall, DistRef, Graph};
use ad_trait::forward_ad::adfn::adfn;
use tempest_core::error::Error;
use tempest_model::custom::Scalar;
use tempest_model::dist::{Dist, categorical_logit};

/// How a statement's elements are evaluated.
#[derive(Clone, Debug)]
enum Way {
    /// `bernoulli_logit` over whole vectors.
    BernoulliLogit,
    /// `normal` over whole vectors.
    Normal,
    /// An element closed form.
    Closed(Dist),
    /// A model-file likelihood's compiled program, with the slots that
    /// carry adjoints.
    Program(Vec<bool>),
    /// Forward mode with this many tangents (1 to 8).
    Dual(usize),
    /// Values only (nothing varies).
    Value,
    /// `categorical_logit` over the rows of class scores \[N, C\].
    Categorical,
}

/// A sampling statement over N outcomes, ready to evaluate.
#[derive(Clone)]
pub struct Term {
    /// The distribution.
    dist: DistRef,
    opts: Vec<f64>,
    /// Whether each argument varies (gets an adjoint).
    pub varies: Vec<bool>,
    /// Whether the outcome varies (a param's prior).
    pub outcome: bool,
    /// The number of outcomes N.
    pub n: usize,
    /// The classes C of `categorical_logit`'s scores (0 otherwise).
    cols: usize,
    seeds: Vec<Seed>,
    way: Way,
}

/// The values of a statement's arguments, each broadcast or one per outcome.
pub type Args<'a> = [Arg<'a>];

impl Term {
    /// Prepare `dist` over N outcomes, with `each` telling which
    /// arguments hold one value per outcome (the rest are broadcast);
    /// `(n, cols)` are N and, for `categorical_logit`, the C columns of its
    /// scores \[N, C\] (column-major; 0 for other statements). `None` when
    /// this path does not cover the statement (more than six arguments or
    /// eight varying coordinates, scores that are not a matrix): the
    /// caller then keeps the general path.
    pub fn new(
        graph: &Graph,
        dist: &DistCall,
        varies: Vec<bool>,
        each: &[bool],
        outcome: bool,
        (n, cols): (usize, usize),
    ) -> Option<Term> {
        let k = dist.args.len();
        if k > STACK || varies.len() != k {
            return None;
        }
        let mut seeds: Vec<Seed> = (0..k).filter(|&j| varies[j]).map(Seed::Arg).collect();
        if outcome {
            seeds.push(Seed::Outcome);
        }
        let way = match &dist.dist {
            DistRef::Builtin(Dist::CategoricalLogit) if k == 1 && cols > 0 && !outcome => {
                Way::Categorical
            }
            DistRef::Builtin(Dist::CategoricalLogit) => return None,
            // The closed forms serve values alone too.
            DistRef::Builtin(Dist::BernoulliLogit) if !outcome && k == 1 && each[0] => {
                Way::BernoulliLogit
            }
            DistRef::Builtin(Dist::Normal) if k == 2 => Way::Normal,
            DistRef::Builtin(d) if has_closed_form(*d, outcome) => Way::Closed(*d),
            _ if seeds.is_empty() => Way::Value,
            DistRef::User(f) => match graph.functions[*f].program.as_deref() {
                Some(p) if p.n_params() == k + 1 => {
                    let need: Vec<bool> = std::iter::once(outcome)
                        .chain(varies.iter().copied())
                        .collect();
                    Way::Program(p.live(&need))
                }
                _ if seeds.len() <= 8 => Way::Dual(seeds.len()),
                _ => return None,
            },
            _ if seeds.len() <= 8 => Way::Dual(seeds.len()),
            _ => return None,
        };
        Some(Term {
            dist: dist.dist.clone(),
            opts: dist.options.iter().map(|(_, v)| *v).collect(),
            varies,
            outcome,
            n,
            cols,
            seeds,
            way,
        })
    }

    /// The scratch [`Term::eval`] needs, in numbers.
    pub fn scratch_len(&self) -> usize {
        if matches!(self.way, Way::Categorical) {
            return (self.n + 1) * self.cols;
        }
        let k = self.varies.len();
        (k + 1) * self.n + 2 * self.n + 2 * (k + 1)
    }

    /// The adjoint of argument j (t · ∂/∂aⱼ per outcome, \[N\], or \[N, C\]
    /// for class scores) after [`Term::eval`] with gradients, in its
    /// scratch.
    pub fn arg_adjoint<'s>(&self, scratch: &'s [f64], j: usize) -> &'s [f64] {
        if matches!(self.way, Way::Categorical) {
            return &scratch[..self.n * self.cols];
        }
        &scratch[j * self.n..(j + 1) * self.n]
    }

    /// The adjoint of the outcome (t · ∂/∂y per outcome, \[N\]) after
    /// [`Term::eval`] with gradients, in its scratch.
    pub fn outcome_adjoint<'s>(&self, scratch: &'s [f64]) -> &'s [f64] {
        let k = self.varies.len();
        &scratch[k * self.n..(k + 1) * self.n]
    }

    /// t · Σᵢ log p(yᵢ | aᵢ) for the outcomes `y` \[N\] and the arguments'
    /// values `args`; with `grad`, the adjoints of the varying arguments and
    /// of the outcome are written to `scratch` ([`Term::arg_adjoint`],
    /// [`Term::outcome_adjoint`]). `scratch` holds [`Term::scratch_len`]
    /// numbers. Nothing is allocated unless a model-file likelihood has no
    /// compiled form.
    pub fn eval(
        &self,
        graph: &Graph,
        y: &[f64],
        args: &Args,
        t: f64,
        grad: bool,
        scratch: &mut [f64],
    ) -> Result<f64, Error> {
        let (n, k) = (self.n, self.varies.len());
        if matches!(self.way, Way::Categorical) {
            return self.categorical(y, args, t, grad && self.varies[0], scratch);
        }
        let (adj, rest) = scratch.split_at_mut((k + 1) * n);
        let (work, pbuf) = rest.split_at_mut(2 * n);
        let (w1, w2) = work.split_at_mut(n);
        match (&self.way, grad) {
            (Way::BernoulliLogit, _) => {
                let Arg::Each(f) = &args[0] else {
                    return Err(Error::internal("bernoulli_logit term without a vector"));
                };
                let g = grad.then_some(&mut adj[..n]);
                return Ok(bernoulli_logit_into(y, f, t, w1, w2, g));
            }
            (Way::Normal, _) => {
                let (a0, r) = adj.split_at_mut(n);
                let (a1, r) = r.split_at_mut(n);
                let d = [
                    (grad && self.varies[0]).then_some(a0),
                    (grad && self.varies[1]).then_some(a1),
                    (grad && self.outcome).then_some(&mut r[..n]),
                ];
                return Ok(normal_into(y, &args[0], &args[1], t, w1, d));
            }
            _ => {}
        }
        let mut a = [0.0; STACK];
        let mut total = 0.0;
        let (pv, pg) = pbuf.split_at_mut(k + 1);
        for i in 0..n {
            let yi = y[i];
            for (slot, v) in a.iter_mut().zip(args) {
                *slot = v.at(i);
            }
            let a = &a[..k];
            let put = |adj: &mut [f64], seed: Seed, d: f64| match seed {
                Seed::Arg(j) => adj[j * n + i] = t * d,
                Seed::Outcome => adj[k * n + i] = t * d,
            };
            total += match (&self.way, grad) {
                (Way::Closed(d), true) => {
                    let (v, da, dy) = closed_form(*d, yi, a);
                    for &s in &self.seeds {
                        let di = match s {
                            Seed::Arg(j) => da[j],
                            Seed::Outcome => dy,
                        };
                        put(adj, s, di);
                    }
                    v
                }
                (Way::Closed(d), false) => closed_form(*d, yi, a).0,
                (Way::Program(live), true) => {
                    let p = self.program(graph)?;
                    pv[0] = yi;
                    pv[1..].copy_from_slice(a);
                    let v = p.value_grad(pv, live, pg);
                    for &s in &self.seeds {
                        let di = match s {
                            Seed::Arg(j) => pg[j + 1],
                            Seed::Outcome => pg[0],
                        };
                        put(adj, s, di);
                    }
                    v
                }
                (Way::Dual(m), true) => {
                    macro_rules! pass {
                        ($n:literal) => {{
                            let (v, d) = self.point_dual::<$n>(graph, yi, a)?;
                            for (&s, di) in self.seeds.iter().zip(d) {
                                put(adj, s, di);
                            }
                            v
                        }};
                    }
                    match m {
                        1 => pass!(1),
                        2..=4 => pass!(4),
                        _ => pass!(8),
                    }
                }
                _ => point_log_density(graph, &self.dist, yi, a, &self.opts)?,
            };
        }
        Ok(t * total)
    }

    /// t · Σᵢ log softmax(sᵢ)_{yᵢ} over the rows sᵢ of the scores \[N, C\]
    /// (column-major), with t (e_y − softmax(sᵢ)) per row written to the
    /// scratch's first N·C numbers when `grad`.
    fn categorical(
        &self,
        y: &[f64],
        args: &Args,
        t: f64,
        grad: bool,
        scratch: &mut [f64],
    ) -> Result<f64, Error> {
        let (n, c) = (self.n, self.cols);
        let Arg::Each(f) = &args[0] else {
            return Err(Error::internal("categorical_logit term without scores"));
        };
        let (adj, row) = scratch.split_at_mut(n * c);
        let mut total = 0.0;
        for i in 0..n {
            for (k, r) in row.iter_mut().enumerate() {
                *r = f[i + k * n];
            }
            let yi = y[i] as usize;
            total += categorical_logit(yi, row);
            if grad {
                softmax_adjoint(row, yi, t, |k, d| adj[i + k * n] = d);
            }
        }
        Ok(t * total)
    }

    /// The compiled program of a model-file likelihood's term.
    fn program<'g>(
        &self,
        graph: &'g Graph,
    ) -> Result<&'g tempest_model::program::KernelProgram, Error> {
        match &self.dist {
            DistRef::User(f) => graph.functions[*f].program.as_deref(),
            _ => None,
        }
        .ok_or_else(|| Error::internal("a program term without its program"))
    }

    /// One element's value and its derivatives in the seeds, by one
    /// forward-mode pass with N tangents.
    fn point_dual<const N: usize>(
        &self,
        graph: &Graph,
        y: f64,
        a: &[f64],
    ) -> Result<(f64, [f64; N]), Error>
    where
        adfn<N>: Scalar,
    {
        point_dual(graph, &self.dist, &self.opts, y, a, &self.seeds)
    }
}

/// t (e_y − softmax(s)), the adjoint of log softmax(s)_y in the scores s,
/// handed to `put(k, value)` class by class.
pub(super) fn softmax_adjoint(row: &[f64], y: usize, t: f64, mut put: impl FnMut(usize, f64)) {
    let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = row.iter().map(|x| (x - mx).exp()).sum();
    for (k, s) in row.iter().enumerate() {
        let hit = if k == y { 1.0 } else { 0.0 };
        put(k, t * (hit - (s - mx).exp() / z));
    }
}
