//! Compiled likelihoods (programs of the one instruction set kernels
//! share) give the same values and derivatives as the
//! general evaluator.

use crate::common;
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
likelihood nested(y : real, f : real, r : positive) {
  let a = if f > 0 then (if r > 1 then log(r) else -r) else (if y > 1 then exp(-y) else lgamma(y + 2))
  a + lgamma(y * y + 1) * sigmoid(f) - if y > f then (if r < 2 then r else 2) else f
}
likelihood deeply(y : real, f : real, r : positive) {
  f + (r + (y + (f + (r + (y + (f + (r + (y + (f + (r + (y + (f + (r + (y + (f + (r + (y
    + (f + (r + (y + (f + (r + (y + (f + (r * exp(y) + lgamma(y + 1))))))))))))))))))))))))))
}
data { n : int  y : int[n] }
model { f ~ gp(0, rbf(1.0)) }
"#;

/// Function `k` of `g`, compiled and interpreted, at many points: equal
/// values and equal derivatives in the latent value, the parameter and (for
/// a real outcome) the outcome.
fn agree(g: &tempest::ir::graph::Graph, k: usize, outcome_seeded: bool) {
    assert!(
        g.functions[k].program.is_some(),
        "`{}` should compile",
        g.functions[k].name
    );
    for y in [0.0, 1.0, 3.0, 7.0] {
        for f in [-2.0, -0.3, 0.0, 1.4] {
            for r in [0.05, 0.8, 3.0] {
                let a: f64 = call_likelihood(g, k, y, &[f, r]).unwrap();
                let b: f64 = call_likelihood_interpreted(g, k, y, &[f, r]).unwrap();
                assert_rel(a, b, 1e-14, "value");
                let seeds = if outcome_seeded { 3 } else { 2 };
                for s in 0..seeds {
                    let t = |j: usize| [if j == s { 1.0 } else { 0.0 }];
                    let args = [Dual1::new(f, t(0)), Dual1::new(r, t(1))];
                    let yd = Dual1::new(y, t(2));
                    let da = call_likelihood(g, k, yd, &args).unwrap().tangent()[0];
                    let db = call_likelihood_interpreted(g, k, yd, &args)
                        .unwrap()
                        .tangent()[0];
                    assert_rel(da, db, 1e-12, "derivative");
                }
            }
        }
    }
}

#[test]
fn compiled_and_interpreted_likelihoods_agree() {
    let m = model(MODEL);
    // A count likelihood; nested conditionals (whose stack bound counts a
    // `then` value into its `else`); an expression deeper than the
    // programs kept on the machine stack.
    agree(&m.graph, 0, false);
    agree(&m.graph, 1, true);
    agree(&m.graph, 2, true);
}
