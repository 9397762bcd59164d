//! Stationary kernels: functions of the scaled distance between inputs.
//!
//! With lengthscales ℓ (one for all dimensions, or one per dimension) the
//! scaled squared distance is r² = Σₖ ((xₖ − x′ₖ)/ℓₖ)² and r = √r².
//!
//! | kernel     | k(x, x′)                                   |
//! |------------|--------------------------------------------|
//! | `rbf`      | exp(−r²/2)                                 |
//! | `matern12` | exp(−r)                                    |
//! | `matern32` | (1 + √3 r) exp(−√3 r)                      |
//! | `matern52` | (1 + √5 r + 5r²/3) exp(−√5 r)              |
//! | `periodic` | exp(−2 Σₖ sin²(π (xₖ − x′ₖ) / p) / ℓ²)      |
//!
//! All have unit variance: scale with `sf^2 * rbf(ell)`. In one dimension the
//! periodic kernel is Rasmussen & Williams Eq. 4.31; in several it is the
//! product of one-dimensional periodic kernels (positive semi-definite in any
//! dimension, unlike a sine of the Euclidean distance).

use ad_trait::F64;
use tempest_math::scalar::{Real, RealExt};

/// The lengthscale(s) of a stationary kernel.
#[derive(Clone, Debug)]
pub enum Lengthscale<T> {
    /// One lengthscale for every input dimension.
    Shared(T),
    /// One lengthscale per input dimension (ARD).
    PerDim(Vec<T>),
}

/// Iterate over the selected coordinates of two inputs.
#[inline]
fn pairs<'a>(
    x: &'a [f64],
    y: &'a [f64],
    dims: Option<&'a [usize]>,
) -> impl Iterator<Item = (usize, f64)> + 'a {
    let n = dims.map(|d| d.len()).unwrap_or(x.len());
    (0..n).map(move |k| {
        let j = dims.map(|d| d[k]).unwrap_or(k);
        (k, x[j] - y[j])
    })
}

/// The scaled squared distance r² between `x` and `y` over `dims`.
#[inline]
pub fn scaled_sqdist<T: Real>(
    x: &[f64],
    y: &[f64],
    dims: Option<&[usize]>,
    ell: &Lengthscale<T>,
) -> T {
    match ell {
        Lengthscale::Shared(l) => {
            let d2: f64 = pairs(x, y, dims).map(|(_, d)| d * d).sum();
            T::constant(d2) / (*l * *l)
        }
        Lengthscale::PerDim(ls) => {
            let mut acc = T::zero();
            for (k, d) in pairs(x, y, dims) {
                let s = T::constant(d) / ls[k];
                acc += s * s;
            }
            acc
        }
    }
}

/// Whether r² overflowed: inputs so far apart that every stationary
/// kernel is 0 there (with zero derivatives), computed as such rather than
/// as ∞ · 0.
#[inline]
fn infinitely_far<T: Real>(r2: T) -> bool {
    r2.to_constant() == f64::INFINITY
}

/// exp(−r²/2).
pub fn rbf<T: Real>(r2: T) -> T {
    if infinitely_far(r2) {
        return T::zero();
    }
    (-r2 * F64(0.5)).exp()
}

/// exp(−r).
pub fn matern12<T: Real>(r2: T) -> T {
    if r2.to_constant() == 0.0 {
        return T::one();
    }
    if infinitely_far(r2) {
        return T::zero();
    }
    (-r2.sqrt_()).exp()
}

/// (1 + √3 r) exp(−√3 r).
pub fn matern32<T: Real>(r2: T) -> T {
    if r2.to_constant() == 0.0 {
        return T::one();
    }
    if infinitely_far(r2) {
        return T::zero();
    }
    let s = r2.sqrt_() * F64(3f64.sqrt());
    (T::one() + s) * (-s).exp()
}

/// (1 + √5 r + 5r²/3) exp(−√5 r).
pub fn matern52<T: Real>(r2: T) -> T {
    if r2.to_constant() == 0.0 {
        return T::one();
    }
    if infinitely_far(r2) {
        return T::zero();
    }
    let s = r2.sqrt_() * F64(5f64.sqrt());
    (T::one() + s + r2 * F64(5.0 / 3.0)) * (-s).exp()
}

/// exp(−2 Σₖ sin²(π (xₖ − x′ₖ) / p) / ℓ²).
pub fn periodic<T: Real>(x: &[f64], y: &[f64], dims: Option<&[usize]>, ell: T, period: T) -> T {
    let mut acc = T::zero();
    for (_, d) in pairs(x, y, dims) {
        let s = (T::constant(std::f64::consts::PI * d) / period).sin();
        acc += s * s;
    }
    (-acc * F64(2.0) / (ell * ell)).exp()
}

/// A stationary kernel's value k and its derivative dk/dr² at r² (for
/// the reverse pass over kernel parameters); r² = 0 gives dk/dr² = 0 for
/// `matern12`, whose derivative there is unbounded but is always
/// multiplied by ∂r²/∂ℓ = 0.
pub fn value_and_slope(kind: crate::kernel::KernelKind, r2: f64) -> (f64, f64) {
    use crate::kernel::KernelKind as K;
    if r2 == f64::INFINITY {
        return (0.0, 0.0);
    }
    match kind {
        K::Rbf => {
            let k = (-0.5 * r2).exp();
            (k, -0.5 * k)
        }
        K::Matern12 => {
            if r2 == 0.0 {
                return (1.0, 0.0);
            }
            let r = r2.sqrt();
            let k = (-r).exp();
            (k, -k / (2.0 * r))
        }
        K::Matern32 => {
            let s = (3.0 * r2).sqrt();
            let e = (-s).exp();
            ((1.0 + s) * e, -1.5 * e)
        }
        K::Matern52 => {
            let s = (5.0 * r2).sqrt();
            let e = (-s).exp();
            ((1.0 + s + s * s / 3.0) * e, -(5.0 / 6.0) * (1.0 + s) * e)
        }
        _ => (f64::NAN, f64::NAN),
    }
}

/// The periodic kernel's value and its derivatives with respect to ℓ and
/// the period p:
/// k = exp(−2S/ℓ²) with S = Σₖ sin²(uₖ), uₖ = π dₖ / p;
/// ∂k/∂ℓ = 4kS/ℓ³; ∂k/∂p = (2k/ℓ²)(π/p²) Σₖ dₖ sin(2uₖ).
pub fn periodic_grad(
    x: &[f64],
    y: &[f64],
    dims: Option<&[usize]>,
    ell: f64,
    period: f64,
) -> (f64, f64, f64) {
    let (mut s, mut t) = (0.0, 0.0);
    for (_, d) in pairs(x, y, dims) {
        let u = std::f64::consts::PI * d / period;
        let sn = u.sin();
        s += sn * sn;
        t += d * (2.0 * u).sin();
    }
    let k = (-2.0 * s / (ell * ell)).exp();
    let dell = 4.0 * k * s / (ell * ell * ell);
    let dp = 2.0 * k / (ell * ell) * std::f64::consts::PI / (period * period) * t;
    (k, dell, dp)
}

/// The squared differences dₖ² over `dims` (for per-dimension lengthscales).
pub fn sq_diffs<'a>(
    x: &'a [f64],
    y: &'a [f64],
    dims: Option<&'a [usize]>,
) -> impl Iterator<Item = f64> + 'a {
    pairs(x, y, dims).map(|(_, d)| d * d)
}
