//! Whole-vector closed forms of the commonest sampling statements, for the
//! samplers' vector–Jacobian product: `bernoulli_logit` and `normal` over N
//! outcomes at once, with the transcendentals vectorised
//! ([`tempest_math::vector`]) and no per-element dispatch. They compute the
//! same formulas as `closed_form` (the tests check each against it
//! element by element), summing the terms in the same order.

use super::{HALF_LOG_2PI, PointwiseGrad};
use crate::value::Value;
use nalgebra::DVector;
use std::borrow::Cow;
use tempest_math::vector::{exp_in_place, ln_in_place};
use tempest_model::dist::Dist;

/// The outcomes as numbers, when they are a vector (borrowed) or an
/// integer array.
fn outcomes(y: &Value<f64>) -> Option<Cow<'_, [f64]>> {
    match y {
        Value::Vector(v) => Some(Cow::Borrowed(v.as_slice())),
        Value::IntArray(v) => Some(Cow::Owned(v.iter().map(|&k| k as f64).collect())),
        _ => None,
    }
}

/// Argument k at outcome i: a vector's entry or a broadcast number.
enum Arg<'a> {
    Each(&'a [f64]),
    One(f64),
}

impl Arg<'_> {
    fn of(v: &Value<f64>, n: usize) -> Option<Arg<'_>> {
        match v {
            Value::Vector(x) if x.len() == n => Some(Arg::Each(x.as_slice())),
            Value::Real(x) => Some(Arg::One(*x)),
            Value::Int(k) => Some(Arg::One(*k as f64)),
            _ => None,
        }
    }
    #[inline(always)]
    fn at(&self, i: usize) -> f64 {
        match self {
            Arg::Each(x) => x[i],
            Arg::One(x) => *x,
        }
    }
}

/// The adjoint of an argument shaped like it: per outcome for a vector, the
/// sum for a broadcast number (0 when it does not vary).
fn adjoint(arg: &Value<f64>, varies: bool, d: &[f64]) -> Value<f64> {
    match arg {
        Value::Vector(_) if varies => Value::Vector(DVector::from_column_slice(d)),
        Value::Vector(x) => Value::Vector(DVector::zeros(x.len())),
        _ if varies => Value::Real(d.iter().sum()),
        _ => Value::Real(0.0),
    }
}

/// t · Σᵢ log p(yᵢ | aᵢ) and its adjoints for `d` over whole vectors, or
/// `None` when this path does not cover the call (another distribution,
/// other shapes): the caller then goes element by element.
pub fn sum_vjp(
    d: Dist,
    y: &Value<f64>,
    args: &[Value<f64>],
    varies: &[bool],
    outcome: bool,
    t: f64,
) -> Option<PointwiseGrad> {
    match d {
        Dist::BernoulliLogit if !outcome && args.len() == 1 => {
            bernoulli_logit(y, &args[0], varies[0], t)
        }
        Dist::Normal if args.len() == 2 => normal(y, args, varies, outcome, t),
        _ => None,
    }
}

/// log σ(±f) = −(max(∓f, 0) + log1p(e^{−|f|})), d/df = y − σ(f).
fn bernoulli_logit(
    y: &Value<f64>,
    f_value: &Value<f64>,
    varies: bool,
    t: f64,
) -> Option<PointwiseGrad> {
    let ys = outcomes(y)?;
    let n = ys.len();
    let Value::Vector(fv) = f_value else {
        return None;
    };
    if fv.len() != n {
        return None;
    }
    let f = fv.as_slice();
    let mut e: Vec<f64> = f.iter().map(|x| -x.abs()).collect();
    exp_in_place(&mut e);
    // log1p(e) as ln(u) − ((u − 1) − e)/u with u = 1 + e: the rounding of
    // 1 + e corrected to first order, as accurate as the library's log1p.
    let mut l: Vec<f64> = e.iter().map(|x| 1.0 + x).collect();
    ln_in_place(&mut l);
    let mut total = 0.0;
    let mut g = vec![0.0; n];
    for i in 0..n {
        let u = 1.0 + e[i];
        let l1p = l[i] - ((u - 1.0) - e[i]) / u;
        let sig = if f[i] >= 0.0 { 1.0 / u } else { e[i] / u };
        total += if ys[i] == 1.0 {
            -((-f[i]).max(0.0) + l1p)
        } else {
            -(f[i].max(0.0) + l1p)
        };
        g[i] = t * (ys[i] - sig);
    }
    Some(PointwiseGrad {
        value: t * total,
        args: vec![adjoint(f_value, varies, &g)],
        outcome: Value::Vector(DVector::zeros(n)),
    })
}

/// log N(y | μ, σ) = −½z² − ln σ − ½ ln 2π with z = (y − μ)/σ; d/dμ = z/σ,
/// d/dσ = (z² − 1)/σ, d/dy = −z/σ. ln σ is taken once when σ is one
/// number.
fn normal(
    y: &Value<f64>,
    args: &[Value<f64>],
    varies: &[bool],
    outcome: bool,
    t: f64,
) -> Option<PointwiseGrad> {
    let Value::Vector(yv) = y else { return None };
    let n = yv.len();
    let (mu, sigma) = (Arg::of(&args[0], n)?, Arg::of(&args[1], n)?);
    let ln_sigma: Vec<f64> = match &sigma {
        Arg::One(s) => vec![s.ln()],
        Arg::Each(s) => {
            let mut l = s.to_vec();
            ln_in_place(&mut l);
            l
        }
    };
    let (mut dmu, mut dsigma, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let mut total = 0.0;
    for i in 0..n {
        let s = sigma.at(i);
        let z = (yv[i] - mu.at(i)) / s;
        let ls = ln_sigma[if ln_sigma.len() == 1 { 0 } else { i }];
        total += -0.5 * z * z - ls - HALF_LOG_2PI;
        dmu[i] = t * (z / s);
        dsigma[i] = t * ((z * z - 1.0) / s);
        dy[i] = t * (-z / s);
    }
    Some(PointwiseGrad {
        value: t * total,
        args: vec![
            adjoint(&args[0], varies[0], &dmu),
            adjoint(&args[1], varies[1], &dsigma),
        ],
        outcome: if outcome {
            Value::Vector(DVector::from_column_slice(&dy))
        } else {
            Value::Vector(DVector::zeros(n))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::closed_form;
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-13 * (1.0 + a.abs().max(b.abs()))
    }

    #[test]
    fn whole_vector_forms_match_the_element_closed_forms() {
        let f = [
            -800.0, -30.0, -2.5, -1e-9, 0.0, 1e-12, 0.7, 3.0, 40.0, 750.0,
        ];
        let ys: Vec<i64> = (0..f.len()).map(|i| (i % 2) as i64).collect();
        let t = 0.7;
        let g = bernoulli_logit(
            &Value::IntArray(ys.clone()),
            &Value::Vector(DVector::from_column_slice(&f)),
            true,
            t,
        )
        .unwrap();
        let Value::Vector(adj) = &g.args[0] else {
            panic!()
        };
        let mut want = 0.0;
        for i in 0..f.len() {
            let (v, da, _) = closed_form(Dist::BernoulliLogit, ys[i] as f64, &[f[i], 0.0]);
            want += v;
            assert!(close(adj[i], t * da[0]), "{i}: {} vs {}", adj[i], t * da[0]);
        }
        assert!(close(g.value, t * want), "{} vs {}", g.value, t * want);

        let y = [0.3, -1.0, 2.5, 7.0];
        let mu = [0.0, -0.5, 3.0, 1.0];
        for sigma in [
            Value::Real(1.7),
            Value::Vector(DVector::from_column_slice(&[0.5, 1.0, 2.0, 9.0])),
        ] {
            let args = [
                Value::Vector(DVector::from_column_slice(&mu)),
                sigma.clone(),
            ];
            let g = normal(
                &Value::Vector(DVector::from_column_slice(&y)),
                &args,
                &[true, true],
                true,
                t,
            )
            .unwrap();
            let (mut want, mut want_s) = (0.0, 0.0);
            let Value::Vector(dmu) = &g.args[0] else {
                panic!()
            };
            let Value::Vector(dy) = &g.outcome else {
                panic!()
            };
            for i in 0..y.len() {
                let s = match &sigma {
                    Value::Real(s) => *s,
                    Value::Vector(s) => s[i],
                    _ => unreachable!(),
                };
                let (v, da, dyi) = closed_form(Dist::Normal, y[i], &[mu[i], s]);
                want += v;
                want_s += t * da[1];
                assert!(close(dmu[i], t * da[0]) && close(dy[i], t * dyi));
                if let Value::Vector(ds) = &g.args[1] {
                    assert!(close(ds[i], t * da[1]));
                }
            }
            assert!(close(g.value, t * want));
            if let Value::Real(ds) = &g.args[1] {
                assert!(close(*ds, want_s));
            }
        }
    }
}
