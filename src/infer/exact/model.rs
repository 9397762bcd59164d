//! Recognising a model the exact engine can run, and evaluating its pieces
//! (kernel, mean, offset, noise, temperature) at hyper values θ.
//!
//! The exact engine needs one latent GP f (not replicated) observed through
//! one Gaussian likelihood whose location is f(X) plus terms without latent
//! functions: `y ~ normal(f(X) + offset, sigma) ^ t`.

use crate::error::{Error, ErrorKind};
use crate::infer::hypers::HyperLayout;
use crate::infer::settings::EngineConfig;
use crate::ir::bind::Bound;
use crate::ir::eval::Env;
use crate::ir::expr::{TExpr, TKind};
use crate::ir::graph::DistRef;
use crate::model::custom::Scalar;
use crate::model::dist::Dist;
use crate::model::kernel::{Inputs, KernelValue};
use crate::syntax::ast::{BinOp, Span};
use nalgebra::DVector;
use std::sync::Arc;

/// A model in the form the exact engine solves.
#[derive(Clone)]
pub struct ExactModel {
    /// The bound model.
    pub bound: Arc<Bound>,
    /// The latent GP.
    pub gp: usize,
    /// Its site in the observation.
    pub site: usize,
    /// The observation term.
    pub obs: usize,
    /// Training inputs X, [N, D].
    pub inputs: Inputs,
    /// Outcomes y, [N].
    pub y: DVector<f64>,
    /// Terms added to f(X) in the location, with their sign.
    pub offset: Vec<(TExpr, f64)>,
    /// The noise standard deviation σ (a number or one per outcome).
    pub sigma: TExpr,
    /// Which hypers are learned.
    pub layout: HyperLayout,
    /// Jitter tried first.
    pub jitter: f64,
    /// Largest relative jitter.
    pub max_jitter: f64,
}

fn unsupported(span: Span, msg: impl Into<String>) -> Error {
    Error::at(ErrorKind::Unsupported, span, msg).with_label("here")
}

/// Split `loc` into the site of one latent GP and the remaining terms.
fn split_location(
    e: &TExpr,
    sign: f64,
    site: &mut Option<(usize, usize)>,
    rest: &mut Vec<(TExpr, f64)>,
) -> Result<(), Error> {
    match &e.kind {
        TKind::GpApply { gp, site: s, .. } => {
            if site.is_some() || sign < 0.0 {
                return Err(unsupported(
                    e.span,
                    "the exact engine needs the location to be `f(X) + terms without latent functions`",
                ));
            }
            *site = Some((*gp, *s));
            Ok(())
        }
        TKind::Binary(BinOp::Add, a, b) => {
            split_location(a, sign, site, rest)?;
            split_location(b, sign, site, rest)
        }
        TKind::Binary(BinOp::Sub, a, b) => {
            split_location(a, sign, site, rest)?;
            split_location(b, -sign, site, rest)
        }
        _ if !e.uses_latent() => {
            rest.push((e.clone(), sign));
            Ok(())
        }
        _ => Err(unsupported(
            e.span,
            "the exact engine needs the location to be `f(X) + terms without latent functions`",
        )),
    }
}

impl ExactModel {
    /// Recognise the exact-GP structure of a bound model.
    pub fn new(bound: Arc<Bound>, cfg: &EngineConfig) -> Result<ExactModel, Error> {
        let g = bound.graph.clone();
        if let Some(p) = g.params.first() {
            return Err(unsupported(
                p.span,
                format!(
                    "`{}` is a param (a random quantity); the exact engine treats every quantity as a hyper. \
                 Declare it in `hyper`, or sample it with `infer nuts`, which this version of tempest does not have yet",
                    p.name
                ),
            ));
        }
        let [obs] = g.observations.as_slice() else {
            let span = g.observations.get(1).map(|o| o.span).unwrap_or_default();
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "the exact engine needs exactly one observation statement, found {}",
                    g.observations.len()
                ),
            )
            .with_span(span));
        };
        let DistRef::Builtin(Dist::Normal) = obs.dist.dist else {
            return Err(Error::at(ErrorKind::Unsupported, obs.dist.span, format!(
                "the exact engine needs a Gaussian likelihood (`normal`); `{}` needs `infer mirror_descent`, which this version of tempest does not have yet",
                obs.dist.name
            ))
            .with_label("non-Gaussian likelihood"));
        };
        let mut site = None;
        let mut offset = Vec::new();
        split_location(&obs.dist.args[0], 1.0, &mut site, &mut offset)?;
        let Some((gp, site)) = site else {
            return Err(unsupported(
                obs.dist.args[0].span,
                "the exact engine needs a latent GP in the location: `y ~ normal(f(X), sigma)`",
            ));
        };
        if g.gps[gp].replicas.is_some() {
            return Err(unsupported(
                g.gps[gp].span,
                "the exact engine handles one latent GP, not replicated copies",
            ));
        }
        let input = &g.sites[site].input;
        for r in g.dependencies(input) {
            let name = match r {
                crate::ir::expr::Ref::Hyper(i) => &g.hypers[i].name,
                crate::ir::expr::Ref::Param(i) => &g.params[i].name,
                _ => continue,
            };
            return Err(unsupported(
                input.span,
                format!(
                    "the inputs of `{}` depend on `{name}`; the exact engine needs inputs that are data \
                 (put learned input scalings into the kernel, e.g. `rbf(ell)`)",
                    g.gps[gp].name
                ),
            ));
        }
        let sigma = obs.dist.args[1].clone();
        if sigma.uses_latent() {
            return Err(unsupported(
                sigma.span,
                "the exact engine needs a noise scale without latent functions",
            ));
        }
        let layout = HyperLayout::new(&bound, cfg.bool("learn_hypers"));
        let hypers = layout.values::<f64>(&bound, &layout.initial(&bound)?);
        let inputs = bound.site_inputs(site, &hypers, &[])?;
        let y = bound.data[obs.data].vector().ok_or_else(|| {
            Error::at(
                ErrorKind::Type,
                obs.span,
                "the exact engine needs a vector of outcomes",
            )
        })?;
        Ok(ExactModel {
            obs: 0,
            bound,
            gp,
            site,
            inputs,
            y,
            offset,
            sigma,
            layout,
            jitter: cfg.real("jitter"),
            max_jitter: cfg.real("max_jitter"),
        })
    }

    /// Evaluate the model's pieces at θ in scalar type `T`, with data from
    /// `bound` (the training data, or test data for prediction). `n` is the
    /// number of points.
    pub fn pieces<T: Scalar>(
        &self,
        theta: &[T],
        bound: &Bound,
        n: usize,
    ) -> Result<Pieces<T>, Error> {
        let hypers = self.layout.values::<T>(&self.bound, theta);
        let env = Env::new(bound, &hypers, &[], &[]);
        let g = &self.bound.graph;
        let gp = &g.gps[self.gp];
        let kernel = env.kernel(&gp.kernel)?;
        let mean = env.scalar(&gp.mean)?;
        let mut loc = DVector::from_element(n, mean);
        for (e, sign) in &self.offset {
            let v = env.eval(e)?;
            for i in 0..n {
                let x = v.element(i).ok_or_else(|| {
                    Error::at(
                        ErrorKind::Shape,
                        e.span,
                        format!(
                            "this term has shape {}, but there are {n} points",
                            v.shape()
                        ),
                    )
                })?;
                loc[i] += x * ad_trait::F64(*sign);
            }
            if let Some(m) = v.len()
                && m != n
            {
                return Err(Error::at(
                    ErrorKind::Shape,
                    e.span,
                    format!("this term has {m} values, but there are {n} points"),
                ));
            }
        }
        let s = env.eval(&self.sigma)?;
        if let Some(m) = s.len()
            && m != n
        {
            return Err(Error::at(
                ErrorKind::Shape,
                self.sigma.span,
                format!("the noise scale has {m} values, but there are {n} points"),
            ));
        }
        let sigma: Vec<T> = (0..n)
            .map(|i| s.element(i).unwrap_or_else(T::zero))
            .collect();
        if let Some(i) = sigma
            .iter()
            .position(|x| x.to_constant().partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
        {
            return Err(Error::at(
                ErrorKind::Numerical,
                self.sigma.span,
                format!(
                    "the noise scale must be positive, found {} (point {i})",
                    sigma[i].to_constant()
                ),
            )
            .with_label("noise scale"));
        }
        let t = match &g.observations[self.obs].temperature {
            Some(e) => env.scalar(e)?,
            None => T::one(),
        };
        if t.to_constant() < 0.0 || !t.to_constant().is_finite() {
            let span = g.observations[self.obs]
                .temperature
                .as_ref()
                .map(|e| e.span)
                .unwrap_or_default();
            return Err(Error::at(
                ErrorKind::Numerical,
                span,
                format!(
                    "the power of a likelihood must be ≥ 0, found {}",
                    t.to_constant()
                ),
            )
            .with_label("temperature"));
        }
        Ok(Pieces {
            kernel,
            loc,
            sigma,
            t,
        })
    }
}

/// The model's pieces at one θ.
pub struct Pieces<T> {
    /// The kernel.
    pub kernel: KernelValue<T>,
    /// Mean plus offset at each point, [N].
    pub loc: DVector<T>,
    /// Noise standard deviation at each point, [N].
    pub sigma: Vec<T>,
    /// The power t of the likelihood.
    pub t: T,
}

impl<T: Scalar> Pieces<T> {
    /// The noise variance of the tempered likelihood, σ²/t, [N].
    pub fn tempered_noise(&self) -> Vec<T> {
        self.sigma.iter().map(|&s| s * s / self.t).collect()
    }

    /// Σₙ log cₙ, where p(yₙ|fₙ)ᵗ = cₙ N(yₙ | fₙ, σₙ²/t):
    /// log cₙ = (1 − t)/2 · log(2πσₙ²) − ½ log t.
    pub fn log_c(&self) -> T {
        let mut acc = T::zero();
        let two_pi = T::constant(2.0 * std::f64::consts::PI);
        for &s in &self.sigma {
            acc += (T::one() - self.t) * ad_trait::F64(0.5) * (two_pi * s * s).ln()
                - self.t.ln() * ad_trait::F64(0.5);
        }
        acc
    }
}
