//! The one element-wise likelihood path: its value in f64 equals the sum of
//! its per-outcome terms in any scalar type, and its vector–Jacobian product
//! matches central finite differences — for closed-form built-ins,
//! model-file likelihoods (one f64 forward and reverse pass of their
//! compiled program, over what varies only), and `categorical_logit`.

use crate::common;
use common::*;
use nalgebra::{DMatrix, DVector};
use tempest::ir::graph::DistCall;
use tempest::ir::pointwise::Pointwise;
use tempest::ir::value::Value;
use tempest::math::scalar::Dual1;

const MODEL: &str = r#"
likelihood skew(y : real, f : real, s : positive, a : real) {
  let z = (y - f) / s
  log(sigmoid(a * z)) - 0.5 * z^2 - log(s)
}
likelihood counts(y : int, f : real, s : positive) {
  if y > 2 then y * f - exp(f) - lgamma(y + 1) else s * f - lgamma(s + y)
}
likelihood wide(y : real, a1 : real, a2 : real, a3 : real, a4 : real, a5 : real,
                a6 : real, a7 : real, a8 : real, a9 : positive) {
  let m = a1 + 0.5 * a2 - a3 * a4 + sin(a5) + a6 * a7 - a8^2
  (-0.5) * ((y - m) / a9)^2 - log(a9)
}
data { n : int  x : vector[n]  y : vector[n]  y2 : vector[n]  y3 : vector[n]  y4 : int[n]  y5 : int[n]  c : int[n] }
param { b : real  s : positive  w : real  v : vector[9]  S : matrix[n, 3] }
model {
  s ~ normal(0.5, 2)
  y ~ normal(b * x, s)
  y2 ~ skew(b * x, s, w)
  y3 ~ wide(v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], exp(v[9]))
  c ~ categorical_logit(S)
  y4 ~ neg_binomial_2_log(b * x, s)
  y5 ~ counts(b * x, s)
}
"#;

fn vector(xs: &[f64]) -> Value<f64> {
    Value::Vector(DVector::from_row_slice(xs))
}

/// Every number of `v` in order (vectors; matrices column-major).
fn numbers(v: &Value<f64>) -> Vec<f64> {
    match v {
        Value::Real(r) => vec![*r],
        Value::Vector(x) => x.iter().copied().collect(),
        Value::Matrix(m) => m.iter().copied().collect(),
        _ => vec![],
    }
}

/// `v` with its k-th number (as in [`numbers`]) moved by h.
fn nudge(v: &Value<f64>, k: usize, h: f64) -> Value<f64> {
    let mut v = v.clone();
    match &mut v {
        Value::Real(r) => *r += h,
        Value::Vector(x) => x[k] += h,
        Value::Matrix(m) => m[k] += h,
        _ => {}
    }
    v
}

/// The value and every adjoint of t · Σ log p against the terms and central
/// differences of `sum`.
fn check(pw: &Pointwise, y: &Value<f64>, args: &[Value<f64>], outcome: bool, what: &str) {
    let t = 0.7;
    let varies = vec![true; args.len()];
    let g = pw.sum_vjp(y, args, &varies, outcome, t).unwrap();
    let sum = pw.sum(y, args).unwrap();
    let terms: f64 = pw.terms(y, args, Default::default()).unwrap().iter().sum();
    assert_rel(g.value, t * sum, 1e-13, &format!("{what}: value"));
    assert_rel(sum, terms, 1e-12, &format!("{what}: terms"));
    // The terms in duals carry the same value.
    let lifted: Vec<Value<Dual1>> = args.iter().map(Value::lift).collect();
    let dual: f64 = pw
        .terms(&y.lift::<Dual1>(), &lifted, Default::default())
        .unwrap()
        .iter()
        .map(|d| d.value())
        .sum();
    assert_rel(dual, terms, 1e-13, &format!("{what}: dual terms"));
    let h = 1e-6;
    let fd = |f: &dyn Fn(f64) -> f64| (f(h) - f(-h)) / (2.0 * h);
    for (j, a) in args.iter().enumerate() {
        for (k, want) in numbers(&g.args[j]).iter().enumerate() {
            let got = fd(&|e| {
                let mut moved = args.to_vec();
                moved[j] = nudge(a, k, e);
                t * pw.sum(y, &moved).unwrap()
            });
            assert!(
                (want - got).abs() <= 1e-6 * got.abs().max(1.0),
                "{what}: argument {j}, number {k}: {want} vs {got}"
            );
        }
    }
    if outcome {
        for (k, want) in numbers(&g.outcome).iter().enumerate() {
            let got = fd(&|e| t * pw.sum(&nudge(y, k, e), args).unwrap());
            assert!(
                (want - got).abs() <= 1e-6 * got.abs().max(1.0),
                "{what}: outcome {k}: {want} vs {got}"
            );
        }
    }
}

#[test]
fn the_element_wise_path_matches_its_terms_and_finite_differences() {
    let m = model(MODEL);
    let g = &m.graph;
    let dist = |k: usize| -> &DistCall { &g.observations[k].dist };
    let y = vector(&[0.3, -1.2, 2.0, 0.9]);
    let f = vector(&[0.1, -0.8, 1.5, 0.4]);
    // A closed form, with the outcome seeded (a param's prior) and a
    // broadcast scale.
    let normal = Pointwise::new(g, dist(0));
    check(&normal, &y, &[f.clone(), Value::Real(0.6)], true, "normal");
    // A model-file likelihood: one forward pass with four tangents.
    let skew = Pointwise::new(g, dist(1));
    let args = [f.clone(), Value::Real(0.6), Value::Real(-0.4)];
    check(&skew, &y, &args, true, "skew");
    // Nine arguments.
    let wide = Pointwise::new(g, dist(2));
    let args: Vec<Value<f64>> = (0..9)
        .map(|k| match k {
            0 => f.clone(),
            8 => Value::Real(0.8),
            _ => Value::Real(0.1 * k as f64 - 0.3),
        })
        .collect();
    check(&wide, &y, &args, true, "wide");
    // Class scores, one row per outcome.
    let cat = Pointwise::new(g, dist(3));
    assert!(cat.is_categorical());
    let scores = DMatrix::from_fn(4, 3, |i, c| 0.3 * i as f64 - 0.5 * c as f64 + 0.1);
    let classes = vector(&[0.0, 2.0, 1.0, 2.0]);
    check(
        &cat,
        &classes,
        &[Value::Matrix(scores)],
        false,
        "categorical",
    );
    // A count closed form with its shape argument.
    let nb = Pointwise::new(g, dist(4));
    let counts = vector(&[0.0, 3.0, 1.0, 12.0]);
    check(
        &nb,
        &counts,
        &[f, Value::Real(2.5)],
        false,
        "neg_binomial_2_log",
    );
}

#[test]
fn arguments_of_the_wrong_length_are_refused_at_the_argument() {
    let m = model(MODEL);
    let pw = Pointwise::new(&m.graph, &m.graph.observations[0].dist);
    let y = vector(&[0.3, -1.2, 2.0]);
    let short = [vector(&[0.1, 0.2]), Value::Real(1.0)];
    let span = Some(m.graph.observations[0].dist.args[0].span);
    for e in [
        pw.terms(&y, &short, Default::default()).unwrap_err(),
        pw.sum(&y, &short).unwrap_err(),
        pw.sum_vjp(&y, &short, &[true, false], false, 1.0)
            .err()
            .unwrap(),
    ] {
        assert!(
            e.message.contains("has 2 values, but there are 3 outcomes"),
            "{}",
            e.message
        );
        assert_eq!(e.span, span);
    }
}

/// A compiled model-file likelihood differentiated in some of its
/// arguments: those match central differences, the others get nothing
/// (and a branch on the data picks the terms).
#[test]
fn a_compiled_likelihood_differentiates_only_what_varies() {
    let m = model(MODEL);
    let g = &m.graph;
    let pw = Pointwise::new(g, &g.observations[5].dist);
    let y = vector(&[0.0, 3.0, 1.0, 12.0]);
    let f = vector(&[0.1, -0.8, 1.5, 0.4]);
    let t = 0.7;
    let h = 1e-6;
    for varies in [[true, false], [false, true], [true, true]] {
        let args = [f.clone(), vector(&[0.5, 1.5, 2.5, 3.5])];
        let gr = pw.sum_vjp(&y, &args, &varies, false, t).unwrap();
        assert_rel(gr.value, t * pw.sum(&y, &args).unwrap(), 1e-13, "value");
        for (j, a) in args.iter().enumerate() {
            for (k, got) in numbers(&gr.args[j]).iter().enumerate() {
                let want = if varies[j] {
                    let at = |e: f64| {
                        let mut moved = args.to_vec();
                        moved[j] = nudge(a, k, e);
                        t * pw.sum(&y, &moved).unwrap()
                    };
                    (at(h) - at(-h)) / (2.0 * h)
                } else {
                    0.0
                };
                assert!(
                    (want - got).abs() <= 1e-6 * want.abs().max(1.0),
                    "{varies:?}: argument {j}, number {k}: {got} vs {want}"
                );
            }
        }
    }
}
