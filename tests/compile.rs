//! Compiled scalar likelihoods give the same values and derivatives as the
//! general evaluator.

mod common;
use common::*;
use tempest::ir::eval::{call_likelihood, call_likelihood_interpreted};
use tempest::math::scalar::Dual1;

const MODEL: &str = r#"
likelihood odd(y : int, f : real, r : positive) {
  let mu = exp(f)
  let k = if y > 2 && !(r < 0.1) then 2 else -1
  lgamma(y + r) - lgamma(r) + r * log(r / (r + mu)) + y * (f - log(r + mu))
    + k * sigmoid(f)^2 - pow(r, 0.5) * tanh(f / 3) + sqrt(abs(f) + 1) - softplus(-f) / pi()
}
data { n : int  y : int[n] }
model { f ~ gp(0, rbf(1.0)) }
"#;

#[test]
fn compiled_and_interpreted_likelihoods_agree() {
    let m = model(MODEL);
    let g = &m.graph;
    assert!(
        g.functions[0].compiled.is_some(),
        "the likelihood should compile"
    );
    for y in [0.0, 1.0, 3.0, 7.0] {
        for f in [-2.0, -0.3, 0.0, 1.4] {
            for r in [0.05, 0.8, 3.0] {
                let a: f64 = call_likelihood(g, 0, y, &[f, r]).unwrap();
                let b: f64 = call_likelihood_interpreted(g, 0, y, &[f, r]).unwrap();
                assert_rel(a, b, 1e-14, "value");
                for k in 0..2 {
                    let args = [
                        Dual1::new(f, [if k == 0 { 1.0 } else { 0.0 }]),
                        Dual1::new(r, [if k == 1 { 1.0 } else { 0.0 }]),
                    ];
                    let da = call_likelihood(g, 0, Dual1::new_constant(y), &args)
                        .unwrap()
                        .tangent()[0];
                    let db = call_likelihood_interpreted(g, 0, Dual1::new_constant(y), &args)
                        .unwrap()
                        .tangent()[0];
                    assert_rel(da, db, 1e-12, "derivative");
                }
            }
        }
    }
}
