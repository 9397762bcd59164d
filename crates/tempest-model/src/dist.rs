//! Built-in distributions and likelihoods: their parameters, support and log
//! density, generic over the scalar type so derivatives come from autodiff.
//!
//! | name                 | parameters          | support   | log density |
//! |----------------------|---------------------|-----------|-------------|
//! | `normal`             | μ, σ                | real      | −½((y−μ)/σ)² − log σ − ½ log 2π |
//! | `student_t`          | ν, μ, σ             | real      | log Γ((ν+1)/2) − log Γ(ν/2) − ½ log(νπ) − log σ − (ν+1)/2 · log(1 + ((y−μ)/σ)²/ν) |
//! | `cauchy`             | μ, σ                | real      | −log(πσ(1 + ((y−μ)/σ)²)) |
//! | `bernoulli_logit`    | f                   | {0, 1}    | y log σ(f) + (1−y) log σ(−f) |
//! | `bernoulli_probit`   | f; option `squash=ε`| {0, 1}    | log p or log(1−p), p = Φ(f)(1 − 2ε) + ε |
//! | `categorical_logit`  | f (a row of C)      | {0..C−1}  | f_y − log Σ_c exp f_c |
//! | `poisson_log`        | f                   | {0, 1, …} | y f − eᶠ − log y! |
//! | `lognormal`          | μ, σ                | y > 0     | normal(log y; μ, σ) − log y |
//! | `gamma`              | α (shape), β (rate) | y > 0     | α log β − log Γ(α) + (α−1) log y − β y |
//! | `beta`               | a, b                | 0 < y < 1 | (a−1) log y + (b−1) log(1−y) − log B(a, b) |
//! | `exponential`        | λ (rate)            | y ≥ 0     | log λ − λ y |
//! | `half_normal`        | σ                   | y ≥ 0     | log 2 + normal(y; 0, σ) |
//! | `uniform`            | a, b                | a ≤ y ≤ b | −log(b − a) |

use ad_trait::F64;
use tempest_math::scalar::{Real, RealExt, logsumexp};

/// The built-in distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dist {
    /// `normal(mu, sigma)`
    Normal,
    /// `student_t(nu, mu, sigma)`
    StudentT,
    /// `cauchy(mu, sigma)`
    Cauchy,
    /// `bernoulli_logit(f)`
    BernoulliLogit,
    /// `bernoulli_probit(f, squash = 0)`
    BernoulliProbit,
    /// `categorical_logit(F)` with a row of C latent values per observation
    CategoricalLogit,
    /// `poisson_log(f)`
    PoissonLog,
    /// `neg_binomial_2_log(f, phi)`: counts with mean e^f and variance
    /// e^f + e^{2f}/φ (Stan's parametrisation).
    NegBinomial2Log,
    /// `lognormal(mu, sigma)`
    Lognormal,
    /// `gamma(alpha, beta)`
    Gamma,
    /// `beta(a, b)`
    Beta,
    /// `exponential(rate)`
    Exponential,
    /// `half_normal(sigma)`
    HalfNormal,
    /// `uniform(a, b)`
    Uniform,
}

/// The values a distribution puts mass on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Any real number.
    Real,
    /// y > 0.
    Positive,
    /// y ≥ 0.
    NonNegative,
    /// 0 < y < 1.
    Unit,
    /// 0 or 1.
    Binary,
    /// 0, 1, 2, ...
    Count,
    /// 0 .. C−1.
    Category,
    /// Between the two parameters.
    Interval,
}

impl Support {
    /// Whether `y` lies in the support (for `Category`, `classes` gives C).
    pub fn contains(self, y: f64, classes: Option<usize>) -> bool {
        match self {
            Support::Real | Support::Interval => y.is_finite(),
            Support::Positive => y > 0.0 && y.is_finite(),
            Support::NonNegative => y >= 0.0 && y.is_finite(),
            Support::Unit => y > 0.0 && y < 1.0,
            Support::Binary => y == 0.0 || y == 1.0,
            Support::Count => y >= 0.0 && y.fract() == 0.0 && y.is_finite(),
            Support::Category => {
                y >= 0.0 && y.fract() == 0.0 && classes.is_none_or(|c| (y as usize) < c)
            }
        }
    }
    /// In words, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Support::Real => "a finite real number",
            Support::Positive => "a positive number",
            Support::NonNegative => "a non-negative number",
            Support::Unit => "a number strictly between 0 and 1",
            Support::Binary => "0 or 1",
            Support::Count => "a non-negative integer",
            Support::Category => "a class label 0..C-1",
            Support::Interval => "a number between the bounds",
        }
    }
    /// Whether observations must be integers.
    pub fn is_discrete(self) -> bool {
        matches!(self, Support::Binary | Support::Count | Support::Category)
    }
}

/// The name and role of a distribution parameter.
#[derive(Clone, Copy, Debug)]
pub struct DistParam {
    /// Its name.
    pub name: &'static str,
    /// Must it be positive?
    pub positive: bool,
}

impl Dist {
    /// All built-in distributions.
    pub const ALL: [Dist; 14] = [
        Dist::Normal,
        Dist::StudentT,
        Dist::Cauchy,
        Dist::BernoulliLogit,
        Dist::BernoulliProbit,
        Dist::CategoricalLogit,
        Dist::PoissonLog,
        Dist::NegBinomial2Log,
        Dist::Lognormal,
        Dist::Gamma,
        Dist::Beta,
        Dist::Exponential,
        Dist::HalfNormal,
        Dist::Uniform,
    ];

    /// The name used in model files.
    pub fn name(self) -> &'static str {
        match self {
            Dist::Normal => "normal",
            Dist::StudentT => "student_t",
            Dist::Cauchy => "cauchy",
            Dist::BernoulliLogit => "bernoulli_logit",
            Dist::BernoulliProbit => "bernoulli_probit",
            Dist::CategoricalLogit => "categorical_logit",
            Dist::PoissonLog => "poisson_log",
            Dist::NegBinomial2Log => "neg_binomial_2_log",
            Dist::Lognormal => "lognormal",
            Dist::Gamma => "gamma",
            Dist::Beta => "beta",
            Dist::Exponential => "exponential",
            Dist::HalfNormal => "half_normal",
            Dist::Uniform => "uniform",
        }
    }

    /// Look a distribution up by name.
    pub fn from_name(name: &str) -> Option<Dist> {
        Dist::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The positional parameters.
    pub fn params(self) -> &'static [DistParam] {
        match self {
            Dist::Normal | Dist::Cauchy | Dist::Lognormal => &[
                DistParam {
                    name: "mu",
                    positive: false,
                },
                DistParam {
                    name: "sigma",
                    positive: true,
                },
            ],
            Dist::StudentT => &[
                DistParam {
                    name: "nu",
                    positive: true,
                },
                DistParam {
                    name: "mu",
                    positive: false,
                },
                DistParam {
                    name: "sigma",
                    positive: true,
                },
            ],
            Dist::BernoulliLogit
            | Dist::BernoulliProbit
            | Dist::PoissonLog
            | Dist::CategoricalLogit => &[DistParam {
                name: "f",
                positive: false,
            }],
            Dist::NegBinomial2Log => &[
                DistParam {
                    name: "f",
                    positive: false,
                },
                DistParam {
                    name: "phi",
                    positive: true,
                },
            ],
            Dist::Gamma => &[
                DistParam {
                    name: "alpha",
                    positive: true,
                },
                DistParam {
                    name: "beta",
                    positive: true,
                },
            ],
            Dist::Beta => &[
                DistParam {
                    name: "a",
                    positive: true,
                },
                DistParam {
                    name: "b",
                    positive: true,
                },
            ],
            Dist::Exponential => &[DistParam {
                name: "rate",
                positive: true,
            }],
            Dist::HalfNormal => &[DistParam {
                name: "sigma",
                positive: true,
            }],
            Dist::Uniform => &[
                DistParam {
                    name: "a",
                    positive: false,
                },
                DistParam {
                    name: "b",
                    positive: false,
                },
            ],
        }
    }

    /// Named options (constants) and their defaults.
    pub fn options(self) -> &'static [(&'static str, f64)] {
        match self {
            Dist::BernoulliProbit => &[("squash", 0.0)],
            _ => &[],
        }
    }

    /// The support of the observed value.
    pub fn support(self) -> Support {
        match self {
            Dist::Normal | Dist::StudentT | Dist::Cauchy => Support::Real,
            Dist::BernoulliLogit | Dist::BernoulliProbit => Support::Binary,
            Dist::CategoricalLogit => Support::Category,
            Dist::PoissonLog | Dist::NegBinomial2Log => Support::Count,
            Dist::Lognormal | Dist::Gamma => Support::Positive,
            Dist::Exponential | Dist::HalfNormal => Support::NonNegative,
            Dist::Beta => Support::Unit,
            Dist::Uniform => Support::Interval,
        }
    }

    /// log p(y | args) for one observation of a scalar distribution.
    /// `args` are the positional parameters, `opts` the option values.
    /// For `categorical_logit`, `args` is the row of C latent values.
    pub fn log_density<T: Real>(self, y: T, args: &[T], opts: &[f64]) -> T {
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let normal = |y: T, mu: T, sigma: T| {
            let z = (y - mu) / sigma;
            -(z * z) * F64(0.5) - sigma.ln() - T::constant(half_log_2pi)
        };
        let yv = y.to_constant();
        let neg_inf = T::constant(f64::NEG_INFINITY);
        match self {
            Dist::Normal => normal(y, args[0], args[1]),
            Dist::StudentT => {
                let (nu, mu, sigma) = (args[0], args[1], args[2]);
                let z = (y - mu) / sigma;
                ((nu + F64(1.0)) * F64(0.5)).lgamma()
                    - (nu * F64(0.5)).lgamma()
                    - (nu * F64(std::f64::consts::PI)).ln() * F64(0.5)
                    - sigma.ln()
                    - (nu + F64(1.0)) * F64(0.5) * (z * z / nu).log1p()
            }
            Dist::Cauchy => {
                let z = (y - args[0]) / args[1];
                -((args[1] * F64(std::f64::consts::PI)).ln() + (z * z).log1p())
            }
            Dist::BernoulliLogit => {
                if yv == 1.0 {
                    args[0].log_sigmoid()
                } else {
                    (-args[0]).log_sigmoid()
                }
            }
            Dist::BernoulliProbit => {
                let eps = opts.first().copied().unwrap_or(0.0);
                let f = if yv == 1.0 { args[0] } else { -args[0] };
                if eps == 0.0 {
                    f.log_phi()
                } else {
                    (f.phi() * F64(1.0 - 2.0 * eps) + F64(eps)).ln()
                }
            }
            Dist::CategoricalLogit => categorical_logit(yv as usize, args),
            Dist::PoissonLog => y * args[0] - args[0].exp() - (y + F64(1.0)).lgamma(),
            Dist::NegBinomial2Log => {
                // With z = f − log φ: log φ − log(μ + φ) = −softplus(z) and
                // f − log(μ + φ) = log σ(z), without cancellation when φ is
                // large (φ·softplus(z) → μ).
                let (f, phi) = (args[0], args[1]);
                let z = f - phi.ln();
                (y + phi).lgamma() - phi.lgamma() - (y + F64(1.0)).lgamma() - phi * z.softplus()
                    + y * z.log_sigmoid()
            }
            Dist::Lognormal => {
                if yv <= 0.0 {
                    return neg_inf;
                }
                normal(y.ln(), args[0], args[1]) - y.ln()
            }
            Dist::Gamma => {
                if yv <= 0.0 {
                    return neg_inf;
                }
                let (a, b) = (args[0], args[1]);
                a * b.ln() - a.lgamma() + (a - F64(1.0)) * y.ln() - b * y
            }
            Dist::Beta => {
                if yv <= 0.0 || yv >= 1.0 {
                    return neg_inf;
                }
                let (a, b) = (args[0], args[1]);
                (a - F64(1.0)) * y.ln() + (b - F64(1.0)) * (-y).log1p()
                    - (a.lgamma() + b.lgamma() - (a + b).lgamma())
            }
            Dist::Exponential => {
                if yv < 0.0 {
                    return neg_inf;
                }
                args[0].ln() - args[0] * y
            }
            Dist::HalfNormal => {
                if yv < 0.0 {
                    return neg_inf;
                }
                normal(y, T::zero(), args[0]) + T::constant(2f64.ln())
            }
            Dist::Uniform => {
                let (a, b) = (args[0], args[1]);
                if yv < a.to_constant() || yv > b.to_constant() {
                    return neg_inf;
                }
                -(b - a).ln()
            }
        }
    }
}

/// log softmax(f)_y for one row f of C latent values.
pub fn categorical_logit<T: Real>(y: usize, f: &[T]) -> T {
    if y >= f.len() {
        return T::constant(f64::NEG_INFINITY);
    }
    f[y] - logsumexp(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempest_math::scalar::Dual1;

    /// The negative binomial against an exact form for integer y:
    /// Σₖ<y log(φ + k) − log y! − φ log1p(μ/φ) + y log(μ/(μ + φ)), over a
    /// range of φ up to where its lgamma difference still holds 1e-9.
    #[test]
    fn negative_binomial_matches_its_product_form() {
        for &phi in &[0.3, 2.0, 50.0, 1e3, 1e5] {
            for &(y, f) in &[(0.0, -2.0), (3.0, 1.0), (17.0, 2.5)] {
                let mu: f64 = f64::exp(f);
                let sum: f64 = (0..y as usize).map(|k| (phi + k as f64).ln()).sum();
                let want = sum - (y + 1.0).lgamma() - phi * (mu / phi).ln_1p()
                    + y * (mu / (mu + phi)).ln();
                let got = Dist::NegBinomial2Log.log_density(y, &[f, phi], &[]);
                assert!(
                    (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                    "phi {phi} y {y} f {f}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn densities_match_closed_forms() {
        let n = Dist::Normal.log_density(1.0, &[0.5, 2.0], &[]);
        let want = -0.5 * (0.25f64 / 4.0) - 2f64.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
        assert!((n - want).abs() < 1e-14);
        // student_t with nu = 1 is Cauchy
        let t: f64 = Dist::StudentT.log_density(0.3, &[1.0, 0.1, 1.5], &[]);
        let c = Dist::Cauchy.log_density(0.3, &[0.1, 1.5], &[]);
        assert!((t - c).abs() < 1e-12);
        // Poisson pmf at 3 with rate e^0.2
        let lam = 0.2f64.exp();
        let want = 3.0 * lam.ln() - lam - 6f64.ln();
        assert!((Dist::PoissonLog.log_density(3.0, &[0.2], &[]) - want).abs() < 1e-12);
        // Negative binomial at 4 with mean e^0.7 and φ = 2.5:
        // Γ(y + φ)/(Γ(φ) y!) (φ/(μ + φ))^φ (μ/(μ + φ))^y
        let (mu, phi) = (0.7f64.exp(), 2.5f64);
        let want = statrs::function::gamma::ln_gamma(4.0 + phi)
            - statrs::function::gamma::ln_gamma(phi)
            - 24f64.ln()
            + phi * (phi / (mu + phi)).ln()
            + 4.0 * (mu / (mu + phi)).ln();
        let got = Dist::NegBinomial2Log.log_density(4.0, &[0.7, phi], &[]);
        assert!((got - want).abs() < 1e-12, "{got} against {want}");
        // Far in the tails it stays finite.
        assert!(
            Dist::NegBinomial2Log
                .log_density(3.0f64, &[800.0, 1e-3], &[])
                .is_finite()
        );
        assert!(
            Dist::NegBinomial2Log
                .log_density(3.0f64, &[-800.0, 1e3], &[])
                .is_finite()
        );
        // Beta(2, 3) at 0.4: 12 * 0.4 * 0.36
        let want = (12.0 * 0.4 * 0.36f64).ln();
        assert!((Dist::Beta.log_density(0.4, &[2.0, 3.0], &[]) - want).abs() < 1e-12);
        // squashed probit at f = 0
        let sq = Dist::BernoulliProbit.log_density(1.0, &[0.0], &[1e-3]);
        assert!((sq - 0.5f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn bernoulli_densities_sum_to_one() {
        for d in [Dist::BernoulliLogit, Dist::BernoulliProbit] {
            for f in [-3.0, 0.2, 5.0] {
                let s = d.log_density(0.0f64, &[f], &[1e-3]).exp()
                    + d.log_density(1.0f64, &[f], &[1e-3]).exp();
                assert!((s - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        for d in Dist::ALL {
            if d == Dist::CategoricalLogit {
                continue;
            }
            let y = match d.support() {
                Support::Binary => 1.0,
                Support::Count => 2.0,
                Support::Unit => 0.3,
                Support::Interval => 0.5,
                _ => 0.7,
            };
            let args: Vec<f64> = match d {
                Dist::Uniform => vec![-1.0, 2.0],
                _ => d
                    .params()
                    .iter()
                    .map(|p| if p.positive { 1.3 } else { 0.4 })
                    .collect(),
            };
            for k in 0..args.len() {
                let dargs: Vec<Dual1> = args
                    .iter()
                    .enumerate()
                    .map(|(j, &a)| Dual1::new(a, [if j == k { 1.0 } else { 0.0 }]))
                    .collect();
                let ad = d.log_density(Dual1::new_constant(y), &dargs, &[]).tangent()[0];
                let h = 1e-6;
                let mut up = args.clone();
                up[k] += h;
                let mut dn = args.clone();
                dn[k] -= h;
                let fd = (d.log_density(y, &up, &[]) - d.log_density(y, &dn, &[])) / (2.0 * h);
                assert!(
                    (ad - fd).abs() < 1e-6 * fd.abs().max(1.0),
                    "{} arg {k}: {ad} vs {fd}",
                    d.name()
                );
            }
        }
    }
}
