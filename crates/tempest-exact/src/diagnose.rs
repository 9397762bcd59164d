//! What ran away in a type-II maximum-likelihood fit, in the model's
//! terms: a learned hyper with one bound (`positive`, `lower=a`, `upper=b`)
//! that moved by a factor of 10⁴ or more from its initial value (measured
//! from the bound), or a hyper with two bounds that ended within 10⁻⁶ of
//! their width from one of them. The likelihood keeps improving as such a
//! hyper runs off, so the part of the kernel it controls has usually
//! degenerated (an `rq` with a huge α is an `rbf`; a lengthscale far beyond
//! the inputs' range makes its term a constant).

use super::model::ExactModel;
use crate::error::{Error, ErrorKind};
use crate::ir::bind::element_location;

/// The factor beyond which a one-sided hyper counts as run away.
const FACTOR: f64 = 1e4;

/// One line per run-away entry of θ (unconstrained: `theta0` at the
/// start, `theta` at the end), naming the hyper as the model does.
pub fn run_aways(model: &ExactModel, theta0: &[f64], theta: &[f64]) -> Vec<String> {
    let bound = &model.bound;
    let names = model.layout.names(bound);
    let mut out = Vec::new();
    for s in &model.layout.slots {
        let b = bound.hyper_bounds[s.hyper];
        for k in s.offset..s.offset + s.len {
            let (x0, x) = (b.constrain(theta0[k]), b.constrain(theta[k]));
            let name = &names[k];
            match (b.lower, b.upper) {
                (Some(lo), Some(hi)) => {
                    let near = 1e-6 * (hi - lo);
                    let side = if x - lo <= near {
                        Some("lower")
                    } else if hi - x <= near {
                        Some("upper")
                    } else {
                        None
                    };
                    if let Some(side) = side {
                        out.push(format!(
                            "`{name}` ended at {x:.4e}, against its {side} bound: the data pull it beyond the range it was given"
                        ));
                    }
                }
                (Some(edge), None) | (None, Some(edge)) => {
                    let (d0, d) = ((x0 - edge).abs(), (x - edge).abs());
                    if d0 == 0.0 || !d0.is_finite() || !d.is_finite() {
                        continue;
                    }
                    let ratio = d / d0;
                    if ratio >= FACTOR || ratio <= 1.0 / FACTOR {
                        let verb = if ratio >= FACTOR { "grew" } else { "shrank" };
                        out.push(format!(
                            "`{name}` {verb} from {x0:.4} to {x:.4e} ({ratio:.1e} times its distance from {edge} at the start): nothing in the data holds it; the kernel term it controls has likely degenerated — bound it (e.g. `upper=`) or fix it"
                        ));
                    }
                }
                (None, None) => {}
            }
        }
    }
    out
}

/// How far the outcomes' largest variance may shrink from the start
/// before the log marginal likelihood counts as unbounded.
const COLLAPSE: f64 = 1e-100;

/// The largest variance of an outcome, k(xᵢ, xᵢ) + σᵢ²/t, at θ.
fn largest_variance(model: &ExactModel, theta: &[f64]) -> Result<f64, Error> {
    let n = model.inputs.len();
    let p = model.pieces::<f64>(theta, &model.bound, n)?;
    let k = p.kernel.diag(&model.inputs)?;
    Ok(p.tempered_noise()
        .iter()
        .zip(k.iter())
        .map(|(s, k)| s + k)
        .fold(0.0, f64::max))
}

/// An error when learning drove every outcome's variance to 0 (by a
/// factor of 10¹⁰⁰ or more from the initial hypers `theta0` to `theta`):
/// the GP's mean then fits every training outcome exactly and the log
/// marginal likelihood grows without bound as the variances shrink, so the
/// value reached is where f64 gave out, not a maximum. With one training
/// row the error points at it.
pub fn collapse(model: &ExactModel, theta0: &[f64], theta: &[f64]) -> Result<(), Error> {
    let (v0, v) = (
        largest_variance(model, theta0)?,
        largest_variance(model, theta)?,
    );
    if !(v0 > 0.0 && v0.is_finite() && v <= COLLAPSE * v0) {
        return Ok(());
    }
    let g = &model.bound.graph;
    let obs = &g.observations[model.obs];
    let decl = &g.data[obs.data];
    let show = tempest_infer::finite::show;
    let why = if model.y.len() == 1 {
        format!(
            "the one training outcome ({}) equals the GP's mean there",
            show(model.y[0])
        )
    } else {
        "the GP's mean fits every training outcome exactly".to_string()
    };
    let mut e = Error::new(
        ErrorKind::Numerical,
        format!(
            "the log marginal likelihood has no maximum: {why}, so it grows without bound as the outcomes' variance shrinks to 0 (from {} at the initial hypers to {})",
            show(v0),
            show(v)
        ),
    )
    .with_span(obs.span)
    .with_label("observed here")
    .with_note("nothing in the data sets the variances: fix one (e.g. the noise, `sigma : positive = 1.0 fixed`), give it a prior (`~ lognormal(0, 1)`), or train on more rows");
    if model.y.len() == 1 {
        let (row, col) = element_location(&model.bound.data[obs.data], 0, &decl.name, &decl.source);
        e = e.in_data(model.bound.location(row, col));
    }
    Err(e)
}
