//! Recognising a model whose latent GP can be integrated out (the exact
//! engine's, the samplers' GP models), and evaluating its pieces (kernel,
//! mean, offset, noise, temperature) at hyper values θ.
//!
//! The exact engine needs one latent GP f (not replicated) observed through
//! one Gaussian likelihood whose location is f(X) plus terms without latent
//! functions: `y ~ normal(f(X) + offset, sigma) ^ t`.

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::eval::Env;
use crate::ir::expr::TExpr;
use crate::ir::graph::DistRef;
use nalgebra::DVector;
use std::sync::Arc;
use tempest_infer::hypers::HyperLayout;
use tempest_infer::structure::{LatentObservation, likelihood_power, unsupported};
use tempest_model::custom::Scalar;
use tempest_model::dist::Dist;
use tempest_model::kernel::{Inputs, KernelValue};

/// A model in the form the exact engine solves: one latent GP observed
/// through `normal`.
#[derive(Clone)]
pub struct GpModel {
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
    /// Outcomes y, \[N\].
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

/// Who builds a [`GpModel`] ([`GpModel::from_structure`]), as its errors
/// name it.
#[derive(Clone, Copy, Debug)]
pub struct User {
    /// The subject of its messages ("the exact engine").
    pub who: &'static str,
    /// What the memory check calls the work ("exact GP regression").
    pub work: &'static str,
}

/// The exact engine.
pub const EXACT: User = User {
    who: "the exact engine",
    work: "exact GP regression",
};

/// A GP the samplers integrate out.
pub const SAMPLED: User = User {
    who: "a GP integrated out when sampling",
    work: "a GP integrated out when sampling",
};

impl GpModel {
    /// Build from a recognised latent observation (which must use
    /// `normal`), with `layout` choosing the learned hypers and the jitter
    /// settings of the Cholesky factorisation. Samplers use this with params
    /// in the model: the kernel, mean, offset and noise may then depend on
    /// params, which [`GpModel::pieces_in`] evaluates. `user` ([`EXACT`],
    /// [`SAMPLED`]) is named in the errors.
    pub fn from_structure(
        bound: Arc<Bound>,
        lo: &LatentObservation,
        layout: HyperLayout,
        (jitter, max_jitter): (f64, f64),
        User { who, work }: User,
    ) -> Result<GpModel, Error> {
        let g = bound.graph.clone();
        let obs = &g.observations[lo.obs];
        let DistRef::Builtin(Dist::Normal) = obs.dist.dist else {
            return Err(Error::at(
                ErrorKind::Unsupported,
                obs.dist.span,
                format!(
                    "{who} needs a Gaussian likelihood (`normal`); for `{}` use `infer mirror_descent` (or `gradient_descent`)",
                    obs.dist.name
                ),
            )
            .with_label("non-Gaussian likelihood"));
        };
        if lo.latent_arg != 0 {
            return Err(unsupported(
                obs.dist.args[lo.latent_arg].span,
                format!("{who} needs the latent GP in the mean of `normal`, not in its scale"),
            ));
        }
        let sigma = obs.dist.args[1].clone();
        let hypers = layout.values::<f64>(&bound, &layout.initial(&bound)?);
        let inputs = bound.site_inputs(lo.site, &hypers, &[])?;
        crate::limits::check_memory(&[crate::limits::Request::new(format!(
            "{work} (the kernel matrix, its Cholesky factor and the gradient's weight matrix)"
        ))
        .times("matrices", 3u64)
        .times("points", inputs.len())
        .times("points", inputs.len())])
        .map_err(|e| e.with_note("use fewer rows (`--rows A..B`) for an exact GP"))?;
        let y = bound.data[obs.data].vector().ok_or_else(|| {
            Error::at(
                ErrorKind::Type,
                obs.span,
                format!("{who} needs a vector of outcomes"),
            )
        })?;
        Ok(GpModel {
            obs: lo.obs,
            bound,
            gp: lo.gp,
            site: lo.site,
            inputs,
            y,
            offset: lo.offset.clone(),
            sigma,
            layout,
            jitter,
            max_jitter,
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
        self.pieces_in(&env, n)
    }

    /// Evaluate the model's pieces in an environment (hypers and params
    /// of type `T`) for `n` points.
    pub fn pieces_in<T: Scalar>(&self, env: &Env<'_, T>, n: usize) -> Result<Pieces<T>, Error> {
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
        let t = likelihood_power(env, self.obs)?;
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
    /// Mean plus offset at each point, \[N\].
    pub loc: DVector<T>,
    /// Noise standard deviation at each point, \[N\].
    pub sigma: Vec<T>,
    /// The power t of the likelihood.
    pub t: T,
}

impl<T: Scalar> Pieces<T> {
    /// The noise variance of the tempered likelihood, σ²/t, \[N\].
    pub fn tempered_noise(&self) -> Vec<T> {
        self.sigma.iter().map(|&s| s * s / self.t).collect()
    }

    /// Σₙ log cₙ, where p(yₙ|fₙ)ᵗ = cₙ N(yₙ | fₙ, σₙ²/t):
    /// log cₙ = (1 − t)/2 · log(2πσₙ²) − ½ log t.
    pub fn log_c(&self) -> T {
        let mut acc = T::zero();
        // Untempered (t = 1 exactly, with no derivative): every term is 0.
        if self.t.is_constant() && self.t.to_constant() == 1.0 {
            return acc;
        }
        let two_pi = T::constant(2.0 * std::f64::consts::PI);
        for &s in &self.sigma {
            acc += (T::one() - self.t) * ad_trait::F64(0.5) * (two_pi * s * s).ln()
                - self.t.ln() * ad_trait::F64(0.5);
        }
        acc
    }
}
