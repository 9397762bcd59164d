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
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// One value per outcome.
    Each(&'a [f64]),
    /// One value for every outcome.
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
    /// The value at outcome i.
    #[inline(always)]
    pub fn at(&self, i: usize) -> f64 {
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
    let (mut e, mut l, mut g) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let value = bernoulli_logit_into(&ys, fv.as_slice(), t, &mut e, &mut l, Some(&mut g));
    Some(PointwiseGrad {
        value,
        args: vec![adjoint(f_value, varies, &g)],
        outcome: Value::Vector(DVector::zeros(n)),
    })
}

/// t · Σᵢ log σ(±fᵢ) over the outcomes `ys` \[N\] (0 or 1) and logits `f`
/// \[N\], with t · (yᵢ − σ(fᵢ)) written to `g` \[N\] when given; `e` and `l`
/// \[N\] are scratch. Nothing is allocated.
pub fn bernoulli_logit_into(
    ys: &[f64],
    f: &[f64],
    t: f64,
    e: &mut [f64],
    l: &mut [f64],
    mut g: Option<&mut [f64]>,
) -> f64 {
    let n = ys.len();
    for (ei, fi) in e.iter_mut().zip(f) {
        *ei = -fi.abs();
    }
    exp_in_place(&mut e[..n]);
    // log1p(e) as ln(u) − ((u − 1) − e)/u with u = 1 + e: the rounding of
    // 1 + e corrected to first order, as accurate as the library's log1p.
    for (li, ei) in l.iter_mut().zip(e.iter()) {
        *li = 1.0 + ei;
    }
    ln_in_place(&mut l[..n]);
    let mut total = 0.0;
    for i in 0..n {
        let u = 1.0 + e[i];
        let l1p = l[i] - ((u - 1.0) - e[i]) / u;
        let sig = if f[i] >= 0.0 { 1.0 / u } else { e[i] / u };
        total += if ys[i] == 1.0 {
            -((-f[i]).max(0.0) + l1p)
        } else {
            -(f[i].max(0.0) + l1p)
        };
        if let Some(g) = g.as_deref_mut() {
            g[i] = t * (ys[i] - sig);
        }
    }
    t * total
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
    let mut ln_sigma = vec![0.0; n];
    let (mut dmu, mut dsigma, mut dy) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let value = normal_into(
        yv.as_slice(),
        &mu,
        &sigma,
        t,
        &mut ln_sigma,
        [Some(&mut dmu), Some(&mut dsigma), Some(&mut dy)],
    );
    Some(PointwiseGrad {
        value,
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

/// t · Σᵢ log N(yᵢ | μᵢ, σᵢ) over the outcomes `y` \[N\], with t times the
/// derivatives in μ, σ and y written to the buffers \[N\] given in `d` (in
/// that order); `ln_sigma` \[N\] is scratch. Nothing is allocated.
pub fn normal_into(
    y: &[f64],
    mu: &Arg,
    sigma: &Arg,
    t: f64,
    ln_sigma: &mut [f64],
    mut d: [Option<&mut [f64]>; 3],
) -> f64 {
    let n = y.len();
    let one = match sigma {
        Arg::One(s) => Some(s.ln()),
        Arg::Each(s) => {
            ln_sigma[..n].copy_from_slice(&s[..n]);
            ln_in_place(&mut ln_sigma[..n]);
            None
        }
    };
    let mut total = 0.0;
    for i in 0..n {
        let s = sigma.at(i);
        let z = (y[i] - mu.at(i)) / s;
        let ls = one.unwrap_or_else(|| ln_sigma[i]);
        total += -0.5 * z * z - ls - HALF_LOG_2PI;
        if let Some(g) = d[0].as_deref_mut() {
            g[i] = t * (z / s);
        }
        if let Some(g) = d[1].as_deref_mut() {
            g[i] = t * ((z * z - 1.0) / s);
        }
        if let Some(g) = d[2].as_deref_mut() {
            g[i] = t * (-z / s);
        }
    }
    t * total
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
