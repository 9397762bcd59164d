//! Priors on hypers (MAP-II).
//!
//! A hyper declared with a prior, `a3 : positive ~ lognormal(0, 1)`, adds
//!
//!   log p(θ) = Σₕ log pₕ(h(θ))
//!
//! to the objective of the engines that learn hypers (the log marginal
//! likelihood of the exact engine, the ELBO of the variational ones). The
//! density is taken on the constrained scale, without the Jacobian of the
//! map θ → h, as Stan's optimizer does: the maximum is the mode of
//! p(y | h) p(h) in the hypers themselves, whatever their transform. Its
//! gradient with respect to θ comes from one reverse sweep
//! ([`crate::math::reverse`]).
//!
//! Only learned hypers count: `fixed` ones cannot carry a prior (the checker
//! refuses it), and with `learn_hypers = false` the priors are not used.

use crate::error::{Error, ErrorKind};
use crate::gradients::seed_chunk;
use crate::hypers::HyperLayout;
use crate::ir::bind::Bound;
use crate::ir::eval::{Env, dist_terms};
use crate::ir::value::Value;
use crate::math::reverse::{self, Rev};
use crate::math::scalar::{CHUNK, Dual8};
use crate::model::custom::Scalar;

/// Whether any learned hyper carries a prior.
pub fn has_priors(bound: &Bound, layout: &HyperLayout) -> bool {
    layout
        .slots
        .iter()
        .any(|s| bound.graph.hypers[s.hyper].prior.is_some())
}

/// Whether some hyper carries a prior that this run does not use (hypers
/// are not learned).
pub fn unused_priors(bound: &Bound, layout: &HyperLayout) -> bool {
    bound.graph.hypers.iter().any(|h| h.prior.is_some()) && !has_priors(bound, layout)
}

/// log p(θ) of the learned hypers' priors at hyper values `hypers`, as a
/// scalar of type T; an error names the first prior whose density is not
/// finite.
fn total<T: Scalar>(bound: &Bound, layout: &HyperLayout, hypers: &[Value<T>]) -> Result<T, Error> {
    let env = Env::new(bound, hypers, &[], &[]);
    let mut sum = T::zero();
    for s in &layout.slots {
        let h = &bound.graph.hypers[s.hyper];
        let Some(dist) = &h.prior else { continue };
        let terms = dist_terms(&env, dist, &hypers[s.hyper], dist.span)?;
        let lp = terms.into_iter().fold(T::zero(), |a, t| a + t);
        let v = lp.to_constant();
        if !v.is_finite() {
            let at = hypers[s.hyper].to_f64();
            return Err(Error::at(
                ErrorKind::Numerical,
                dist.span,
                format!("the log prior of `{}` is {v} at `{}` = {at}", h.name, h.name),
            )
            .with_label("this prior")
            .with_note("the hyper is outside the support of its prior, or the prior's arguments are invalid"));
        }
        sum += lp;
    }
    Ok(sum)
}

/// log p(θ) alone (zero when no learned hyper has a prior); an error names
/// a prior whose density is not finite at θ.
pub fn log_prior_value(bound: &Bound, layout: &HyperLayout, theta: &[f64]) -> Result<f64, Error> {
    if !has_priors(bound, layout) {
        return Ok(0.0);
    }
    total(bound, layout, &layout.values::<f64>(bound, theta))
}

/// log p(θ) and its gradient with respect to θ (both zero when no learned
/// hyper has a prior).
pub fn log_prior(
    bound: &Bound,
    layout: &HyperLayout,
    theta: &[f64],
) -> Result<(f64, Vec<f64>), Error> {
    let mut grad = vec![0.0; theta.len()];
    if !has_priors(bound, layout) {
        return Ok((0.0, grad));
    }
    if !crate::gradients::reverse_sweeps() {
        // The value is every dual pass's constant part; the first one's is kept.
        let mut value = 0.0;
        for start in (0..theta.len()).step_by(CHUNK) {
            let td = seed_chunk(theta, start);
            let hd = layout.values::<Dual8>(bound, &td);
            let t = total(bound, layout, &hd)?;
            if start == 0 {
                value = t.value();
            }
            let m = CHUNK.min(theta.len() - start);
            grad[start..start + m].copy_from_slice(&t.tangent()[..m]);
        }
        return Ok((value, grad));
    }
    let (value, grad) = reverse::sweep(theta, |t| {
        total(bound, layout, &layout.values::<Rev>(bound, t))
    })?;
    Ok((value, grad))
}
