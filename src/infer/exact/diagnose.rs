//! What ran away in a type-II maximum-likelihood fit, in the model's
//! terms: a learned hyper with one bound (`positive`, `lower=a`, `upper=b`)
//! that moved by a factor of 10⁴ or more from its initial value (measured
//! from the bound), or a hyper with two bounds that ended within 10⁻⁶ of
//! their width from one of them. The likelihood keeps improving as such a
//! hyper runs off, so the part of the kernel it controls has usually
//! degenerated (an `rq` with a huge α is an `rbf`; a lengthscale far beyond
//! the inputs' range makes its term a constant).

use super::model::ExactModel;

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
