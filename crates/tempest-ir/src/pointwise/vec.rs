//! Whole-vector closed forms of the commonest sampling statements:
//! `bernoulli_logit` and `normal` over N outcomes at once, with the
//! transcendentals vectorised ([`tempest_math::vector`]) and no
//! per-element dispatch, writing into buffers the caller owns
//! ([`crate::pointwise::term::Term`] chooses them). They compute the same formulas as
//! `closed_form` (the tests check each against it element by element),
//! summing the terms in the same order.

use super::HALF_LOG_2PI;
use tempest_math::vector::{exp_in_place, ln_in_place};

/// Argument k at outcome i: a vector's entry or a broadcast number.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// One value per outcome.
    Each(&'a [f64]),
    /// One value for every outcome.
    One(f64),
}

impl Arg<'_> {
    /// The value at outcome i.
    #[inline(always)]
    pub fn at(&self, i: usize) -> f64 {
        match self {
            Arg::Each(x) => x[i],
            Arg::One(x) => *x,
        }
    }
}

/// log σ(±f) = −(max(∓f, 0) + log1p(e^{−|f|})), d/df = y − σ(f):
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

/// t · Σᵢ log N(yᵢ | μᵢ, σᵢ), with log N(y | μ, σ) = −½z² − ln σ − ½ ln 2π
/// and z = (y − μ)/σ; d/dμ = z/σ, d/dσ = (z² − 1)/σ, d/dy = −z/σ. ln σ is
/// taken once when σ is one number.
///
/// Over the outcomes `y` \[N\], with t times the
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
    use tempest_model::dist::Dist;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-13 * (1.0 + a.abs().max(b.abs()))
    }

    #[test]
    fn whole_vector_forms_match_the_element_closed_forms() {
        let f = [
            -800.0, -30.0, -2.5, -1e-9, 0.0, 1e-12, 0.7, 3.0, 40.0, 750.0,
        ];
        let n = f.len();
        let ys: Vec<f64> = (0..n).map(|i| (i % 2) as f64).collect();
        let t = 0.7;
        let (mut e, mut l, mut adj) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let value = bernoulli_logit_into(&ys, &f, t, &mut e, &mut l, Some(&mut adj));
        let mut want = 0.0;
        for i in 0..n {
            let (v, da, _) = closed_form(Dist::BernoulliLogit, ys[i], &[f[i], 0.0]);
            want += v;
            assert!(close(adj[i], t * da[0]), "{i}: {} vs {}", adj[i], t * da[0]);
        }
        assert!(close(value, t * want), "{value} vs {}", t * want);

        let y = [0.3, -1.0, 2.5, 7.0];
        let mu = [0.0, -0.5, 3.0, 1.0];
        let sigmas = [0.5, 1.0, 2.0, 9.0];
        for sigma in [Arg::One(1.7), Arg::Each(&sigmas)] {
            let mut scratch = [0.0; 4];
            let (mut dmu, mut ds, mut dy) = ([0.0; 4], [0.0; 4], [0.0; 4]);
            let value = normal_into(
                &y,
                &Arg::Each(&mu),
                &sigma,
                t,
                &mut scratch,
                [Some(&mut dmu), Some(&mut ds), Some(&mut dy)],
            );
            let mut want = 0.0;
            for i in 0..y.len() {
                let (v, da, dyi) = closed_form(Dist::Normal, y[i], &[mu[i], sigma.at(i)]);
                want += v;
                assert!(close(dmu[i], t * da[0]) && close(dy[i], t * dyi));
                assert!(close(ds[i], t * da[1]));
            }
            assert!(close(value, t * want));
        }
    }
}
