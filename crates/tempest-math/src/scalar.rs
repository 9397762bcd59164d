//! The scalar type every model computation is generic over.
//!
//! [`Real`] is any ad_trait scalar: `f64` for values, forward-mode duals
//! (`adfn<N>`) for derivatives. Functions the `AD` trait lacks (lgamma,
//! digamma, erf, Φ, softplus, ...) are provided once, generically, by
//! [`RealExt`] as a first-order lift: `f(x₀) + f′(x₀)·(x − x₀)` with `f`, `f′`
//! computed in `f64`. This gives exact values and exact first derivatives.

use ad_trait::{AD, ADNumMode};

/// A scalar that model code is written over: `f64` or an ad_trait dual.
pub trait Real: AD + Send + Sync + 'static {}
impl<T: AD + Send + Sync + 'static> Real for T {}

/// Forward-mode dual with one tangent (a directional derivative).
pub type Dual1 = ad_trait::forward_ad::adfn::adfn<1>;
/// Forward-mode dual with eight tangents (a chunk of a gradient).
pub type Dual8 = ad_trait::forward_ad::adfn::adfn<8>;
/// Forward-mode dual with four tangents (gradients in up to four
/// coordinates per pass, e.g. a GP's few hyperparameters).
pub type Dual4 = ad_trait::forward_ad::adfn::adfn<4>;
/// The number of tangents of [`Dual8`].
pub const CHUNK: usize = 8;

/// `f(x)` given `f(x₀)` and `f′(x₀)` where `x₀` is the value of `x`.
#[inline]
pub fn lift<T: Real>(x: T, f: f64, df: f64) -> T {
    if T::ad_num_mode() == ADNumMode::Float || df == 0.0 {
        return T::constant(f);
    }
    (x - T::constant(x.to_constant())) * T::constant(df) + T::constant(f)
}

/// [`lift`] with the derivative computed only when a derivative is carried
/// (not for `f64`), for functions whose derivative costs as much as their
/// value.
#[inline]
pub fn lift_with<T: Real>(x: T, f: f64, df: impl FnOnce() -> f64) -> T {
    if T::ad_num_mode() == ADNumMode::Float {
        return T::constant(f);
    }
    lift(x, f, df())
}

/// Log of the standard normal CDF, accurate far into the lower tail.
pub fn log_phi_f64(x: f64) -> f64 {
    if x > -30.0 {
        (0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)).ln()
    } else {
        // Asymptotic series: Φ(x) ≈ φ(x)/(−x) · (1 − 1/x² + 3/x⁴ − 15/x⁶).
        let x2 = x * x;
        -0.5 * x2 - (-x).ln() - 0.5 * (2.0 * std::f64::consts::PI).ln()
            + (1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2)).ln()
    }
}

/// φ(x)/Φ(x) (the inverse Mills ratio), stable for very negative x.
pub fn mills_f64(x: f64) -> f64 {
    let log_pdf = -0.5 * x * x - 0.5 * (2.0 * std::f64::consts::PI).ln();
    (log_pdf - log_phi_f64(x)).exp()
}

/// The trigamma function ψ′(x) (the derivative of digamma) for any real x
/// (infinite at the poles 0, −1, −2, ...).
pub fn trigamma_f64(mut x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x <= 0.0 {
        // Reflection, ψ′(x) + ψ′(1 − x) = π² / sin²(πx), so the recurrence
        // below runs a bounded number of times for any x.
        let s = (std::f64::consts::PI * x).sin();
        return std::f64::consts::PI.powi(2) / (s * s) - trigamma_f64(1.0 - x);
    }
    let mut acc = 0.0;
    while x < 10.0 {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    let x2 = 1.0 / (x * x);
    acc + 1.0 / x
        + x2 / 2.0
        + (1.0 / 6.0 - x2 * (1.0 / 30.0 - x2 * (1.0 / 42.0 - x2 / 30.0))) * x2 / x
}

/// Special and numerically careful functions for every [`Real`].
pub trait RealExt: Real {
    /// log Γ(x).
    fn lgamma(self) -> Self {
        let v = self.to_constant();
        lift_with(self, statrs::function::gamma::ln_gamma(v), || {
            statrs::function::gamma::digamma(v)
        })
    }
    /// ψ(x) = d/dx log Γ(x).
    fn digamma(self) -> Self {
        let v = self.to_constant();
        lift_with(self, statrs::function::gamma::digamma(v), || {
            trigamma_f64(v)
        })
    }
    /// The error function.
    fn erf(self) -> Self {
        let v = self.to_constant();
        let d = 2.0 / std::f64::consts::PI.sqrt() * (-v * v).exp();
        lift(self, statrs::function::erf::erf(v), d)
    }
    /// Φ(x), the standard normal CDF.
    fn phi(self) -> Self {
        let v = self.to_constant();
        let p = 0.5 * statrs::function::erf::erfc(-v / std::f64::consts::SQRT_2);
        let d = (-0.5 * v * v).exp() / (2.0 * std::f64::consts::PI).sqrt();
        lift(self, p, d)
    }
    /// log Φ(x), accurate in the lower tail.
    fn log_phi(self) -> Self {
        let v = self.to_constant();
        lift_with(self, log_phi_f64(v), || mills_f64(v))
    }
    /// log(1 + x), accurate near 0.
    fn log1p(self) -> Self {
        let v = self.to_constant();
        lift(self, v.ln_1p(), 1.0 / (1.0 + v))
    }
    /// exp(x) − 1, accurate near 0.
    fn expm1(self) -> Self {
        let v = self.to_constant();
        lift(self, v.exp_m1(), v.exp())
    }
    /// xᵏ whose value is `f64::powi`'s, bit for bit, for every scalar type
    /// (ad_trait's duals and [`crate::reverse::Rev`] take `powf(k)`, which
    /// may differ from it in the last bit), with derivative k xᵏ⁻¹: model
    /// code has the same values in `f64` and in derivative-carrying types,
    /// so an ODE solved with its sensitivities takes the `f64` solve's
    /// steps. Where that derivative is not finite (0 to a negative power)
    /// it is the type's own `powi`.
    fn powi_exact(self, k: i32) -> Self {
        let v = self.to_constant();
        if Self::ad_num_mode() == ADNumMode::Float {
            return Self::constant(powi(v, k));
        }
        let d = if k == 0 {
            0.0
        } else {
            k as f64 * powi(v, k - 1)
        };
        if !d.is_finite() {
            return self.powi(k);
        }
        lift(self, powi(v, k), d)
    }
    /// √x with derivative 1/(2√x) (infinite at 0).
    fn sqrt_(self) -> Self {
        let v = self.to_constant();
        let s = v.sqrt();
        lift(self, s, 0.5 / s)
    }
    /// The logistic sigmoid 1/(1 + e^(−x)), stable for large |x|.
    fn sigmoid(self) -> Self {
        let v = self.to_constant();
        let s = if v >= 0.0 {
            1.0 / (1.0 + (-v).exp())
        } else {
            let e = v.exp();
            e / (1.0 + e)
        };
        lift(self, s, s * (1.0 - s))
    }
    /// log(1 + e^x), stable for large |x| (one exp and one log1p).
    fn softplus(self) -> Self {
        let v = self.to_constant();
        let e = (-v.abs()).exp();
        let sp = v.max(0.0) + e.ln_1p();
        let s = if v >= 0.0 {
            1.0 / (1.0 + e)
        } else {
            e / (1.0 + e)
        };
        lift(self, sp, s)
    }
    /// log σ(x) = −softplus(−x).
    fn log_sigmoid(self) -> Self {
        -((-self).softplus())
    }
}
impl<T: Real> RealExt for T {}

/// xᵏ by repeated squaring, inline: the algorithm of the runtime routine
/// `f64::powi` calls (`__powidf2`), so the same bits, without the call.
#[inline]
pub fn powi(x: f64, k: i32) -> f64 {
    let (mut a, mut n, mut r) = (x, k.unsigned_abs(), 1.0);
    loop {
        if n & 1 != 0 {
            r *= a;
        }
        n >>= 1;
        if n == 0 {
            break;
        }
        a *= a;
    }
    if k < 0 { 1.0 / r } else { r }
}

/// log Σ exp(xᵢ), stable; −∞ for an empty slice.
pub fn logsumexp<T: Real>(xs: &[T]) -> T {
    let Some(m) = xs.iter().map(|x| x.to_constant()).reduce(f64::max) else {
        return T::constant(f64::NEG_INFINITY);
    };
    if !m.is_finite() {
        return T::constant(m);
    }
    let mc = T::constant(m);
    let mut s = T::zero();
    for &x in xs {
        s += (x - mc).exp();
    }
    s.ln() + mc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d1(x: f64) -> Dual1 {
        Dual1::new(x, [1.0])
    }

    /// The inline power is f64's powi bit for bit.
    #[test]
    fn the_inline_power_is_f64_powi() {
        let ks = (-12..=12).chain([31, 64, 100, -31, -64, i32::MAX, i32::MIN]);
        for k in ks {
            for i in 0..4000 {
                let x = -5.0 + i as f64 * 0.002_503;
                assert_eq!(powi(x, k).to_bits(), x.powi(k).to_bits(), "{x}^{k}");
            }
            for x in [
                0.0,
                -0.0,
                1e300,
                -1e-300,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                1.0 + 1e-15,
            ] {
                assert_eq!(powi(x, k).to_bits(), x.powi(k).to_bits(), "{x}^{k}");
            }
        }
    }

    /// powi_exact's value is f64's powi bit for bit in duals and in the
    /// reverse-mode scalar, where ad_trait's powi (a powf) may differ, and
    /// its derivative is k xᵏ⁻¹.
    #[test]
    fn exact_powers_have_the_f64_value() {
        let mut differs = 0;
        for i in 0..2000 {
            let x = -3.0 + i as f64 * 0.003_1;
            for k in [-3, -1, 0, 1, 2, 3, 5] {
                if x == 0.0 && k < 0 {
                    continue;
                }
                let want = x.powi(k);
                let d = RealExt::powi_exact(d1(x), k);
                assert_eq!(d.value().to_bits(), want.to_bits(), "{x}^{k}");
                let slope = if k == 0 {
                    0.0
                } else {
                    k as f64 * x.powi(k - 1)
                };
                assert!((d.tangent()[0] - slope).abs() <= 1e-12 * (1.0 + slope.abs()));
                let (v, g) =
                    crate::reverse::sweep(&[x], |a| Ok(RealExt::powi_exact(a[0], k))).unwrap();
                assert_eq!(v.to_bits(), want.to_bits(), "Rev {x}^{k}");
                assert!((g[0] - slope).abs() <= 1e-12 * (1.0 + slope.abs()));
                let own = nalgebra::ComplexField::powi(d1(x), k);
                differs += usize::from(own.value().to_bits() != want.to_bits());
            }
        }
        // The case the method is for: ad_trait's own powi differs somewhere.
        assert!(differs > 0);
        // 0 to a negative power keeps the type's own rule (an infinite value).
        assert!(RealExt::powi_exact(d1(0.0), -1).value().is_infinite());
    }

    fn fd(f: impl Fn(f64) -> f64, x: f64) -> f64 {
        let h = 1e-6 * x.abs().max(1.0);
        (f(x + h) - f(x - h)) / (2.0 * h)
    }

    #[test]
    fn lifted_functions_have_correct_derivatives() {
        type F = fn(Dual1) -> Dual1;
        type G = fn(f64) -> f64;
        let cases: Vec<(&str, F, G, f64)> = vec![
            ("lgamma", |x| x.lgamma(), |x| x.lgamma(), 2.7),
            ("digamma", |x| x.digamma(), |x| x.digamma(), 1.3),
            ("erf", |x| RealExt::erf(x), |x| RealExt::erf(x), 0.4),
            ("phi", |x| x.phi(), |x| x.phi(), -1.2),
            ("log_phi", |x| x.log_phi(), |x| x.log_phi(), -4.0),
            ("log1p", |x| x.log1p(), |x| x.log1p(), 1e-3),
            ("expm1", |x| x.expm1(), |x| x.expm1(), 1e-3),
            ("sigmoid", |x| x.sigmoid(), |x| x.sigmoid(), -0.7),
            ("softplus", |x| x.softplus(), |x| x.softplus(), 3.0),
            (
                "log_sigmoid",
                |x| x.log_sigmoid(),
                |x| x.log_sigmoid(),
                -2.0,
            ),
        ];
        for (name, f, g, x) in cases {
            let ad = f(d1(x));
            assert!((ad.value() - g(x)).abs() < 1e-14, "{name} value");
            let num = fd(g, x);
            assert!(
                (ad.tangent()[0] - num).abs() < 1e-6 * num.abs().max(1.0),
                "{name}: {} vs {num}",
                ad.tangent()[0]
            );
        }
    }

    #[test]
    fn log1p_is_accurate_near_zero() {
        assert_eq!(1e-20f64.log1p(), 1e-20);
        assert!((log_phi_f64(-40.0) - (-804.6084420137538)).abs() < 1e-6);
    }

    #[test]
    fn trigamma_matches_known_values() {
        assert!((trigamma_f64(1.0) - std::f64::consts::PI.powi(2) / 6.0).abs() < 1e-10);
        assert!((trigamma_f64(0.5) - std::f64::consts::PI.powi(2) / 2.0).abs() < 1e-10);
        // Reflection: ψ′(−½) = π² − ψ′(3/2) = π²/2 + 4.
        assert!((trigamma_f64(-0.5) - (std::f64::consts::PI.powi(2) / 2.0 + 4.0)).abs() < 1e-9);
        // Huge negative arguments end at once (they once looped forever).
        assert!(trigamma_f64(-1e300) >= std::f64::consts::PI.powi(2) - 1e-9);
        assert!(trigamma_f64(f64::NEG_INFINITY).is_nan());
    }

    #[test]
    fn logsumexp_is_stable() {
        let v = logsumexp(&[1000.0, 1000.0]);
        assert!((v - (1000.0 + 2f64.ln())).abs() < 1e-12);
    }
}
