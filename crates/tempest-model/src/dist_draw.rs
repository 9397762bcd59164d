//! Draws of an outcome from the built-in distributions, for posterior
//! predictive simulation: y ~ p(y | args) with the same parameters and
//! options as [`Dist::log_density`].
//!
//! `neg_binomial_2_log(f, φ)` is drawn as Stan does, as a gamma–Poisson
//! mixture: λ ~ Gamma(shape φ, rate φ/eᶠ), y ~ Poisson(λ).

use super::dist::Dist;
use rand::Rng;
use rand_distr::{
    Beta, Cauchy, Distribution, Exp, Gamma, LogNormal, Normal, Poisson, StandardNormal,
    StandardUniform, StudentT,
};

impl Dist {
    /// One draw of y given the positional `args` and the option values
    /// `opts` (for `categorical_logit`, `args` is the row of C class
    /// scores and the draw is a class 0..C−1). `None` when the arguments lie
    /// outside the parameter space (a scale that is not positive and finite,
    /// a Poisson mean of 1.8·10¹⁹ or more, a NaN).
    pub fn draw<R: Rng + ?Sized>(self, args: &[f64], opts: &[f64], rng: &mut R) -> Option<f64> {
        if args.iter().any(|a| a.is_nan()) {
            return None;
        }
        // Scales, shapes and rates must be positive and finite.
        if self != Dist::CategoricalLogit
            && self
                .params()
                .iter()
                .zip(args)
                .any(|(p, a)| p.positive && !(*a > 0.0 && a.is_finite()))
        {
            return None;
        }
        let u = |rng: &mut R| -> f64 { StandardUniform.sample(rng) };
        let y = match self {
            Dist::Normal => Normal::new(args[0], args[1]).ok()?.sample(rng),
            Dist::StudentT => {
                let (nu, mu, sigma) = (args[0], args[1], args[2]);
                if !(sigma > 0.0 && sigma.is_finite()) {
                    return None;
                }
                mu + sigma * StudentT::new(nu).ok()?.sample(rng)
            }
            Dist::Cauchy => Cauchy::new(args[0], args[1]).ok()?.sample(rng),
            Dist::BernoulliLogit => f64::from(u(rng) < sigmoid(args[0])),
            Dist::BernoulliProbit => {
                let eps = opts.first().copied().unwrap_or(0.0);
                let z: f64 = StandardNormal.sample(rng);
                // P(y = 1) = Φ(f)(1 − 2ε) + ε: with probability 2ε a fair coin.
                if u(rng) < 2.0 * eps {
                    f64::from(u(rng) < 0.5)
                } else {
                    f64::from(z < args[0])
                }
            }
            Dist::CategoricalLogit => {
                let m = args.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                if !m.is_finite() {
                    return None;
                }
                let w: Vec<f64> = args.iter().map(|a| (a - m).exp()).collect();
                let mut t = u(rng) * w.iter().sum::<f64>();
                let mut k = w.len() - 1;
                for (c, wc) in w.iter().enumerate() {
                    if t < *wc {
                        k = c;
                        break;
                    }
                    t -= wc;
                }
                k as f64
            }
            Dist::PoissonLog => poisson(args[0].exp(), rng)?,
            Dist::NegBinomial2Log => {
                let (mu, phi) = (args[0].exp(), args[1]);
                if !(phi > 0.0 && phi.is_finite()) {
                    return None;
                }
                let lambda = Gamma::new(phi, mu / phi).ok()?.sample(rng);
                poisson(lambda, rng)?
            }
            Dist::Lognormal => LogNormal::new(args[0], args[1]).ok()?.sample(rng),
            Dist::Gamma => Gamma::new(args[0], 1.0 / args[1]).ok()?.sample(rng),
            Dist::Beta => Beta::new(args[0], args[1]).ok()?.sample(rng),
            Dist::Exponential => Exp::new(args[0]).ok()?.sample(rng),
            Dist::HalfNormal => Normal::new(0.0, args[0]).ok()?.sample(rng).abs(),
            Dist::Uniform => {
                let (a, b) = (args[0], args[1]);
                if !(a < b && a.is_finite() && b.is_finite()) {
                    return None;
                }
                a + (b - a) * u(rng)
            }
        };
        y.is_finite().then_some(y)
    }
}

fn sigmoid(f: f64) -> f64 {
    1.0 / (1.0 + (-f).exp())
}

/// A Poisson draw with mean λ (0 at λ = 0).
fn poisson<R: Rng + ?Sized>(lambda: f64, rng: &mut R) -> Option<f64> {
    if lambda == 0.0 {
        return Some(0.0);
    }
    Some(Poisson::new(lambda).ok()?.sample(rng))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// The mean and variance of 200,000 draws.
    fn moments(d: Dist, args: &[f64], opts: &[f64]) -> (f64, f64) {
        let mut rng = StdRng::seed_from_u64(7);
        let n = 200_000;
        let xs: Vec<f64> = (0..n)
            .map(|_| d.draw(args, opts, &mut rng).expect("a draw"))
            .collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
        (m, v)
    }

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() < tol * b.abs().max(1.0), "{a} vs {b}");
    }

    #[test]
    fn draws_have_the_moments_of_the_distribution() {
        // (distribution, arguments, options, mean, variance)
        type Case = (Dist, &'static [f64], &'static [f64], f64, f64);
        let cases: &[Case] = &[
            (Dist::Normal, &[1.5, 2.0], &[], 1.5, 4.0),
            (Dist::StudentT, &[5.0, 1.0, 2.0], &[], 1.0, 4.0 * 5.0 / 3.0),
            (
                Dist::BernoulliLogit,
                &[0.7],
                &[],
                0.668_187_772,
                0.221_712_86,
            ),
            (Dist::PoissonLog, &[1.2], &[], 1.2f64.exp(), 1.2f64.exp()),
            (
                Dist::NegBinomial2Log,
                &[1.0, 3.0],
                &[],
                1f64.exp(),
                1f64.exp() + 1f64.exp().powi(2) / 3.0,
            ),
            (
                Dist::Lognormal,
                &[0.1, 0.5],
                &[],
                (0.1f64 + 0.125).exp(),
                (0.25f64.exp() - 1.0) * (0.2f64 + 0.25).exp(),
            ),
            (Dist::Gamma, &[3.0, 2.0], &[], 1.5, 0.75),
            (Dist::Beta, &[2.0, 3.0], &[], 0.4, 0.04),
            (Dist::Exponential, &[2.0], &[], 0.5, 0.25),
            (
                Dist::HalfNormal,
                &[2.0],
                &[],
                2.0 * (2.0 / std::f64::consts::PI).sqrt(),
                4.0 * (1.0 - 2.0 / std::f64::consts::PI),
            ),
            (Dist::Uniform, &[-1.0, 3.0], &[], 1.0, 16.0 / 12.0),
        ];
        for &(d, args, opts, mean, var) in cases {
            let (m, v) = moments(d, args, opts);
            close(m, mean, 0.02);
            close(v, var, 0.03);
        }
        // Probit with squash ε: P(y = 1) = Φ(f)(1 − 2ε) + ε.
        let p = 0.5 * statrs::function::erf::erfc(-0.4 / std::f64::consts::SQRT_2);
        let (m, _) = moments(Dist::BernoulliProbit, &[0.4], &[0.1]);
        close(m, p * 0.8 + 0.1, 0.02);
        // Categorical: the class frequencies are the softmax.
        let mut rng = StdRng::seed_from_u64(3);
        let mut counts = [0usize; 3];
        for _ in 0..100_000 {
            let k = Dist::CategoricalLogit
                .draw(&[0.0, 1.0, -1.0], &[], &mut rng)
                .unwrap();
            counts[k as usize] += 1;
        }
        let z = 1.0 + 1f64.exp() + (-1f64).exp();
        close(counts[1] as f64 / 1e5, 1f64.exp() / z, 0.02);
        close(counts[2] as f64 / 1e5, (-1f64).exp() / z, 0.03);
    }

    #[test]
    fn arguments_outside_the_parameter_space_give_no_draw() {
        let mut rng = StdRng::seed_from_u64(1);
        assert!(Dist::Normal.draw(&[0.0, -1.0], &[], &mut rng).is_none());
        assert!(Dist::Normal.draw(&[f64::NAN, 1.0], &[], &mut rng).is_none());
        assert!(Dist::PoissonLog.draw(&[100.0], &[], &mut rng).is_none());
        assert!(Dist::Uniform.draw(&[2.0, 1.0], &[], &mut rng).is_none());
        assert_eq!(
            Dist::PoissonLog.draw(&[f64::NEG_INFINITY], &[], &mut rng),
            Some(0.0)
        );
    }
}
