//! Recognising the structure GP engines work with: one observation whose
//! likelihood takes a latent GP at some inputs (plus terms without latent
//! functions) in one argument, every other argument free of latent
//! functions:
//!
//! ```text
//! y ~ lik(..., f(X) + offset, ...) ^ t      f ~ gp(mean, kernel)
//! y ~ categorical_logit(g(X))               g ~ gp(mean, kernel)[C]
//! ```

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::expr::{Ref, TExpr, TKind};
use crate::ir::graph::DistRef;
use crate::model::dist::Dist;
use crate::syntax::ast::{BinOp, Span};

/// The latent part of a model's one observation.
#[derive(Clone)]
pub struct LatentObservation {
    /// The observation (index into the graph's observations).
    pub obs: usize,
    /// The latent GP.
    pub gp: usize,
    /// Its site.
    pub site: usize,
    /// Which argument of the likelihood holds the latent values.
    pub latent_arg: usize,
    /// Terms added to the latent values in that argument, with their signs.
    pub offset: Vec<(TExpr, f64)>,
    /// Whether the GP has C copies (`g ~ gp(...)[C]`, for `categorical_logit`).
    pub replicated: bool,
    /// For `categorical_logit(g(X) * A)`: the mixing matrix A [J, C] (an
    /// expression without latent functions) that turns the J latent GPs
    /// into the C class scores.
    pub mixing: Option<TExpr>,
}

/// The power t of observation `obs` (1 when none is written), checked to
/// be finite and ≥ 0 (at the power's span).
pub fn likelihood_power<T: crate::model::custom::Scalar>(
    env: &crate::ir::eval::Env<'_, T>,
    obs: usize,
) -> Result<T, Error> {
    let t = env.temperature_of(obs)?;
    let v = t.to_constant();
    if v < 0.0 || !v.is_finite() {
        let o = &env.bound.graph.observations[obs];
        let span = o.temperature.as_ref().map(|e| e.span).unwrap_or(o.span);
        return Err(Error::at(
            ErrorKind::Numerical,
            span,
            format!("the power of a likelihood must be finite and ≥ 0, found {v}"),
        )
        .with_label("temperature"));
    }
    Ok(t)
}

/// An error for a model an engine cannot run.
pub fn unsupported(span: Span, msg: impl Into<String>) -> Error {
    Error::at(ErrorKind::Unsupported, span, msg).with_label("here")
}

/// Split `e` into the site of one latent GP and the remaining terms.
fn split(
    e: &TExpr,
    sign: f64,
    site: &mut Option<(usize, usize)>,
    rest: &mut Vec<(TExpr, f64)>,
    engine: &str,
) -> Result<(), Error> {
    let shape = || {
        unsupported(
            e.span,
            format!(
                "the {engine} engine needs the latent argument to be `f(X) + terms without latent functions`"
            ),
        )
    };
    match &e.kind {
        TKind::GpApply { gp, site: s, .. } => {
            if site.is_some() || sign < 0.0 {
                return Err(shape());
            }
            *site = Some((*gp, *s));
            Ok(())
        }
        TKind::Binary(BinOp::Add, a, b) => {
            split(a, sign, site, rest, engine)?;
            split(b, sign, site, rest, engine)
        }
        TKind::Binary(BinOp::Sub, a, b) => {
            split(a, sign, site, rest, engine)?;
            split(b, -sign, site, rest, engine)
        }
        _ if !e.uses_latent() => {
            rest.push((e.clone(), sign));
            Ok(())
        }
        _ => Err(shape()),
    }
}

/// Find the latent observation of a bound model, for the engine `engine`
/// (named in messages).
pub fn latent_observation(bound: &Bound, engine: &str) -> Result<LatentObservation, Error> {
    let g = &bound.graph;
    if let Some(p) = g.params.first() {
        return Err(unsupported(
            p.span,
            format!(
                "`{}` is a param (a random quantity); the {engine} engine treats every quantity other than the latent GP as a hyper. \
                 Declare it in `hyper`, or sample it with `infer nuts`",
                p.name
            ),
        ));
    }
    latent_observation_with_params(bound, engine)
}

/// Like [`latent_observation`], for models that may have params (the
/// samplers): the latent argument's other terms, the kernel, the mean and
/// the other arguments may depend on them; the GP's inputs may not.
pub fn latent_observation_with_params(
    bound: &Bound,
    engine: &str,
) -> Result<LatentObservation, Error> {
    let g = &bound.graph;
    let [o] = g.observations.as_slice() else {
        let span = g.observations.get(1).map(|o| o.span).unwrap_or_default();
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "the {engine} engine needs exactly one observation statement, found {}",
                g.observations.len()
            ),
        )
        .with_span(span));
    };
    let latent: Vec<usize> = (0..o.dist.args.len())
        .filter(|&i| o.dist.args[i].uses_latent())
        .collect();
    if latent.is_empty() {
        let through_let = o
            .dist
            .args
            .iter()
            .flat_map(|a| g.dependencies(a))
            .any(|r| matches!(r, Ref::Let(i) if g.lets[i].value.uses_latent()));
        let msg = if through_let {
            format!(
                "the {engine} engine needs the latent GP written in the likelihood's argument itself, not through a `let`: write `y ~ lik(f(X) + ...)`"
            )
        } else {
            format!("the {engine} engine needs a latent GP in the likelihood: `y ~ lik(f(X), ...)`")
        };
        return Err(unsupported(o.dist.span, msg));
    }
    let [latent_arg] = latent.as_slice() else {
        let span = o
            .dist
            .args
            .get(latent.get(1).copied().unwrap_or(0))
            .map(|a| a.span)
            .unwrap_or(o.span);
        return Err(unsupported(
            span,
            format!(
                "the {engine} engine needs the latent GP in exactly one argument of the likelihood, found {}",
                latent.len()
            ),
        ));
    };
    let mut site = None;
    let mut offset = Vec::new();
    // `g(X) * A` for the softmax: J latent GPs mixed into C class scores.
    let categorical = matches!(o.dist.dist, DistRef::Builtin(Dist::CategoricalLogit));
    let (latent_expr, mixing) = match &o.dist.args[*latent_arg].kind {
        TKind::Binary(BinOp::Mul, a, b)
            if categorical && matches!(a.kind, TKind::GpApply { .. }) && !b.uses_latent() =>
        {
            (&**a, Some((**b).clone()))
        }
        _ => (&o.dist.args[*latent_arg], None),
    };
    split(latent_expr, 1.0, &mut site, &mut offset, engine)?;
    let Some((gp, site)) = site else {
        return Err(Error::internal("latent argument without a site"));
    };
    let replicated = g.gps[gp].replicas.is_some();
    if replicated != categorical {
        let msg = if replicated {
            format!(
                "`{}` has several copies, which only `categorical_logit` uses (one per class)",
                g.gps[gp].name
            )
        } else {
            format!(
                "`categorical_logit` needs one latent GP per class: `{} ~ gp(...)[C]`",
                g.gps[gp].name
            )
        };
        return Err(unsupported(g.gps[gp].span, msg));
    }
    if categorical && !offset.is_empty() {
        return Err(unsupported(
            o.dist.args[0].span,
            "for `categorical_logit`, write the class scores as `g(X)` with no added terms",
        ));
    }
    let input = &g.sites[site].input;
    for r in g.dependencies(input) {
        let name = match r {
            Ref::Hyper(i) => &g.hypers[i].name,
            Ref::Param(i) => &g.params[i].name,
            _ => continue,
        };
        return Err(unsupported(
            input.span,
            format!(
                "the inputs of `{}` depend on `{name}`; the {engine} engine needs inputs that are data \
                 (put learned input scalings into the kernel, e.g. `rbf(ell)`)",
                g.gps[gp].name
            ),
        ));
    }
    Ok(LatentObservation {
        obs: 0,
        gp,
        site,
        latent_arg: *latent_arg,
        offset,
        replicated,
        mixing,
    })
}
