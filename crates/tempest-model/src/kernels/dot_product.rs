//! Kernels built on inner products of the inputs.
//!
//! | kernel                 | k(x, x′)                                 |
//! |------------------------|------------------------------------------|
//! | `linear(v)`            | Σₖ vₖ xₖ x′ₖ (v one number or one per dimension; default 1) |
//! | `polynomial(degree, c)`| (xᵀx′ + c)^degree; an integer degree is not differentiated |
//! | `cosine()`             | xᵀx′ / (‖x‖ ‖x′‖), 0 when either norm is 0 |

use ad_trait::F64;
use tempest_math::scalar::{Real, RealExt};

fn coords<'a>(x: &'a [f64], dims: Option<&'a [usize]>) -> impl Iterator<Item = (usize, f64)> + 'a {
    let n = dims.map(|d| d.len()).unwrap_or(x.len());
    (0..n).map(move |k| (k, x[dims.map(|d| d[k]).unwrap_or(k)]))
}

fn dot(x: &[f64], y: &[f64], dims: Option<&[usize]>) -> f64 {
    coords(x, dims)
        .zip(coords(y, dims))
        .map(|((_, a), (_, b))| a * b)
        .sum()
}

/// xᵀx′ over `dims`.
pub fn dot_of(x: &[f64], y: &[f64], dims: Option<&[usize]>) -> f64 {
    dot(x, y, dims)
}

/// The products xₖ x′ₖ over `dims`.
pub fn products<'a>(
    x: &'a [f64],
    y: &'a [f64],
    dims: Option<&'a [usize]>,
) -> impl Iterator<Item = f64> + 'a {
    coords(x, dims)
        .zip(coords(y, dims))
        .map(|((_, a), (_, b))| a * b)
}

/// Σₖ vₖ xₖ x′ₖ with one variance (`v.len() == 1`) or one per dimension.
pub fn linear<T: Real>(x: &[f64], y: &[f64], dims: Option<&[usize]>, v: &[T]) -> T {
    if v.len() == 1 {
        return v[0] * F64(dot(x, y, dims));
    }
    let mut acc = T::zero();
    for ((k, a), (_, b)) in coords(x, dims).zip(coords(y, dims)) {
        acc += v[k] * F64(a * b);
    }
    acc
}

/// (xᵀx′ + c)^degree.
pub fn polynomial<T: Real>(x: &[f64], y: &[f64], dims: Option<&[usize]>, degree: T, c: T) -> T {
    let base = c + F64(dot(x, y, dims));
    let p = degree.to_constant();
    if p.fract() == 0.0 && p.abs() < 64.0 {
        // f64's value in every scalar type, as the block plan computes it.
        RealExt::powi_exact(base, p as i32)
    } else {
        base.powf(degree)
    }
}

/// d b^degree / db at b = c + xᵀx′: degree · b^(degree − 1), and 0 for
/// degree 0 (flat, also at b = 0, where the formula would give 0 · ∞). The
/// one rule for the polynomial kernel's derivative in c and in its inputs.
pub fn polynomial_slope(degree: f64, base: f64) -> f64 {
    if degree == 0.0 {
        0.0
    } else {
        degree * base.powf(degree - 1.0)
    }
}

/// xᵀx′ / (‖x‖ ‖x′‖).
pub fn cosine<T: Real>(x: &[f64], y: &[f64], dims: Option<&[usize]>) -> T {
    let nx = dot(x, x, dims).sqrt();
    let ny = dot(y, y, dims).sqrt();
    if nx == 0.0 || ny == 0.0 {
        return T::zero();
    }
    T::constant(dot(x, y, dims) / (nx * ny))
}
