//! The Gram and cross-covariance nodes' vector–Jacobian products.

use crate::block::leaf_adjoints;
use crate::kernel::{Inputs, KernelValue};
use nalgebra::DMatrix;
use rayon::prelude::*;
use tempest_core::error::{Error, ErrorKind};

/// The adjoints of a Gram node K = K(X, X; θ).
#[derive(Clone, Debug)]
pub struct GramAdjoints {
    /// θ̄, one per leaf in the order of [`KernelValue::leaves`].
    pub params: Vec<f64>,
    /// X̄ [N, D].
    pub x: DMatrix<f64>,
}

/// The adjoints of a cross-covariance node K = K(X, Z; θ).
#[derive(Clone, Debug)]
pub struct CrossAdjoints {
    /// θ̄, one per leaf in the order of [`KernelValue::leaves`].
    pub params: Vec<f64>,
    /// X̄ [N, D].
    pub x: DMatrix<f64>,
    /// Z̄ [M, D].
    pub z: DMatrix<f64>,
}

fn shape(msg: String) -> Error {
    Error::new(ErrorKind::Shape, msg)
}

/// Rows of per-row results stacked into a matrix [rows, D].
fn stack(rows: &[Vec<f64>], d: usize) -> DMatrix<f64> {
    DMatrix::from_fn(rows.len(), d, |i, k| rows[i][k])
}

/// An error when an adjoint is not finite (e.g. a polynomial kernel of
/// non-integer degree at a negative c + xᵀy), so none is passed on as a
/// gradient.
fn finite(params: &[f64], inputs: &[&DMatrix<f64>]) -> Result<(), Error> {
    let bad = params.iter().chain(inputs.iter().flat_map(|m| m.iter()));
    if let Some(v) = bad.copied().find(|v| !v.is_finite()) {
        return Err(Error::new(
            ErrorKind::Numerical,
            format!(
                "a kernel gradient is {v}: the kernel is not differentiable at these inputs and parameters"
            ),
        ));
    }
    Ok(())
}

/// Per-row parameter adjoints added up in row order.
fn total(parts: &[Vec<f64>], leaves: usize) -> Vec<f64> {
    let mut out = vec![0.0; leaves];
    for p in parts {
        for (o, v) in out.iter_mut().zip(p) {
            *o += v;
        }
    }
    out
}

/// Adds ḡ ∂k/∂θ of one entry to `acc` [leaves], using `scratch` [leaves].
fn add_params(
    kernel: &KernelValue<f64>,
    x: &[f64],
    y: &[f64],
    same: bool,
    g: f64,
    scratch: &mut [f64],
    acc: &mut [f64],
) {
    if g == 0.0 || acc.is_empty() {
        return;
    }
    kernel.entry_grad(x, y, same, scratch);
    for (a, s) in acc.iter_mut().zip(scratch.iter()) {
        *a += g * s;
    }
}

/// (θ̄, X̄) for the Gram node K = K(X, X; θ) [N, N], given K̄ [N, N] (any
/// matrix; f = ⟨K̄, K⟩ = Σᵢₖ K̄ᵢₖ Kᵢₖ).
///
/// As in [`KernelValue::gram`], Kᵢⱼ = Kⱼᵢ = k(xᵢ, xⱼ) for i ≥ j, so with
/// Gᵢⱼ = K̄ᵢⱼ + K̄ⱼᵢ (i > j) and Gᵢᵢ = K̄ᵢᵢ:
/// θ̄ = Σ_{i≥j} Gᵢⱼ ∂k(xᵢ, xⱼ)/∂θ,
/// x̄ᵣ = Σ_{j≤r} Gᵣⱼ ∂₁k(xᵣ, xⱼ) + Σ_{i≥r} Gᵢᵣ ∂₂k(xᵢ, xᵣ).
/// θ̄ comes from the kernel's block plan ([`leaf_adjoints`] with
/// W = K̄ + K̄ᵀ: one reverse pass over the lower triangle) when it has one,
/// else entry by entry. X̄: rows run in parallel (each pair is visited from
/// both of its rows, so 2·N² entry passes in all); sums run in row order,
/// so the result does not depend on the number of threads.
///
/// `None` when the kernel has interpreted model-file parts (no leaves), or
/// Rust parts when X̄ is wanted; an error when shapes disagree.
pub fn gram_vjp(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    k_bar: &DMatrix<f64>,
) -> Result<Option<GramAdjoints>, Error> {
    gram_vjp_with(kernel, x, k_bar, true)
}

/// [`gram_vjp`], with X̄ left at zero (and not computed) unless `want_x`
/// (inducing inputs that are not learned need θ̄ alone).
pub fn gram_vjp_with(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    k_bar: &DMatrix<f64>,
    want_x: bool,
) -> Result<Option<GramAdjoints>, Error> {
    let (n, d) = (x.len(), x.dim());
    kernel.validate(d)?;
    if k_bar.shape() != (n, n) {
        return Err(shape(format!(
            "the Gram adjoint is {} × {}, but there are {n} inputs",
            k_bar.nrows(),
            k_bar.ncols()
        )));
    }
    let Some(leaves) = kernel.leaves().map(|l| l.len()) else {
        return Ok(None);
    };
    // X̄ needs every part's input rules; θ̄ alone needs only the leaves
    // (a Rust kernel is a leaf of the block plan).
    if want_x && !kernel.input_rules() {
        return Ok(None);
    }
    // A compiled kernel under scalings: θ̄ and X̄ from one block pass.
    if want_x && let Some((params, xb)) = super::compiled::gram_vjp(kernel, x, k_bar, true) {
        finite(&params, &[&xb])?;
        return Ok(Some(GramAdjoints { params, x: xb }));
    }
    // W = K̄ + K̄ᵀ; for a symmetric K̄ (a Cholesky node's adjoint) that is
    // 2K̄, and the pass is linear in W, so it runs on K̄ itself and doubles
    // (the same bits: doubling is exact).
    let planned = if is_symmetric(k_bar) {
        leaf_adjoints(kernel, x, k_bar)?.map(|p| p.into_iter().map(|v| 2.0 * v).collect())
    } else {
        let w = DMatrix::from_fn(n, n, |i, j| k_bar[(i, j)] + k_bar[(j, i)]);
        leaf_adjoints(kernel, x, &w)?
    };
    let entry_params = if planned.is_some() { 0 } else { leaves };
    // A radial kernel's X̄ by matrix products; then the entries serve θ̄ alone.
    let fast_x = if want_x {
        super::radial::gram_inputs(kernel, x, k_bar)
    } else {
        None
    };
    let want_x = want_x && fast_x.is_none();
    if entry_params == 0 && !want_x {
        let params = planned.unwrap_or_default();
        let x = fast_x.unwrap_or_else(|| DMatrix::zeros(n, d));
        finite(&params, &[&x])?;
        return Ok(Some(GramAdjoints { params, x }));
    }
    let weight = |i: usize, j: usize| {
        if i == j {
            k_bar[(i, i)]
        } else {
            k_bar[(i, j)] + k_bar[(j, i)]
        }
    };
    let rows: Vec<(Vec<f64>, Vec<f64>)> = (0..n)
        .into_par_iter()
        .with_min_len(8)
        .map_init(
            || vec![0.0; entry_params],
            |scratch, r| {
                let (mut p, mut xr, mut own_y) =
                    (vec![0.0; entry_params], vec![0.0; d], vec![0.0; d]);
                let xr_in = x.row(r);
                for j in 0..=r {
                    let g = weight(r, j);
                    if g == 0.0 {
                        continue;
                    }
                    let same = j == r;
                    add_params(kernel, xr_in, x.row(j), same, g, scratch, &mut p);
                    if want_x {
                        let gy = same.then_some(own_y.as_mut_slice());
                        kernel.entry_vjp_inputs(xr_in, x.row(j), same, g, Some(&mut xr), gy)?;
                    }
                }
                for i in r + 1..n {
                    let g = weight(i, r);
                    if want_x && g != 0.0 {
                        kernel.entry_vjp_inputs(x.row(i), xr_in, false, g, None, Some(&mut xr))?;
                    }
                }
                for (a, b) in xr.iter_mut().zip(&own_y) {
                    *a += b;
                }
                Ok((p, xr))
            },
        )
        .collect::<Result<_, Error>>()?;
    let (ps, xs): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
    let out = GramAdjoints {
        params: planned.unwrap_or_else(|| total(&ps, leaves)),
        x: fast_x.unwrap_or_else(|| stack(&xs, d)),
    };
    finite(&out.params, &[&out.x])?;
    Ok(Some(out))
}

/// Whether a square `m` equals its transpose exactly.
fn is_symmetric(m: &DMatrix<f64>) -> bool {
    let n = m.nrows();
    (0..n).all(|j| (j + 1..n).all(|i| m[(i, j)] == m[(j, i)]))
}

/// (θ̄, X̄, Z̄) for the cross-covariance node K = K(X, Z; θ) [N, M],
/// Kᵢⱼ = k(xᵢ, zⱼ), given K̄ [N, M]:
/// θ̄ = Σᵢⱼ K̄ᵢⱼ ∂k(xᵢ, zⱼ)/∂θ, x̄ᵢ = Σⱼ K̄ᵢⱼ ∂₁k(xᵢ, zⱼ),
/// z̄ⱼ = Σᵢ K̄ᵢⱼ ∂₂k(xᵢ, zⱼ).
/// θ̄ comes from the kernel's block plan ([`crate::block::cross_leaf_adjoints`])
/// when it has one, X̄ and Z̄ from two matrix products for a radial kernel
/// (`radial.rs`); otherwise one parallel pass over the rows of X (θ̄, X̄)
/// and one over the rows of Z (Z̄). Sums run in a fixed order, so the
/// result does not depend on the number of threads.
///
/// `None` when the kernel has interpreted model-file parts (no leaves), or
/// Rust parts when X̄ or Z̄ is wanted; an error when shapes disagree.
pub fn cross_vjp(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    z: &Inputs,
    k_bar: &DMatrix<f64>,
) -> Result<Option<CrossAdjoints>, Error> {
    cross_vjp_with(kernel, x, z, k_bar, true, true)
}

/// [`cross_vjp`], with X̄ and Z̄ left at zero (and not computed) unless
/// `want_x` and `want_z`: inducing points need θ̄ and Z̄ alone (the
/// data's inputs are fixed), or θ̄ alone when they are not learned.
pub fn cross_vjp_with(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    z: &Inputs,
    k_bar: &DMatrix<f64>,
    want_x: bool,
    want_z: bool,
) -> Result<Option<CrossAdjoints>, Error> {
    let (n, m, d) = (x.len(), z.len(), x.dim());
    kernel.validate(d)?;
    if z.dim() != d {
        return Err(shape(format!(
            "kernel inputs have {d} and {} columns",
            z.dim()
        )));
    }
    if k_bar.shape() != (n, m) {
        return Err(shape(format!(
            "the cross-covariance adjoint is {} × {}, but the inputs give {n} × {m}",
            k_bar.nrows(),
            k_bar.ncols()
        )));
    }
    let Some(leaves) = kernel.leaves().map(|l| l.len()) else {
        return Ok(None);
    };
    // As for the Gram node: X̄ and Z̄ need every part's input rules, θ̄
    // alone only the leaves.
    if (want_x || want_z) && !kernel.input_rules() {
        return Ok(None);
    }
    // A compiled kernel under scalings: θ̄, X̄ and Z̄ from one block pass.
    if (want_x || want_z)
        && let Some((params, xb, zb)) =
            super::compiled::cross_vjp(kernel, x, z, k_bar, (want_x, want_z))
    {
        finite(&params, &[&xb, &zb])?;
        return Ok(Some(CrossAdjoints {
            params,
            x: xb,
            z: zb,
        }));
    }
    // θ̄ by the kernel's block plan when it has one; a radial kernel's X̄
    // and Z̄ by matrix products. The entries then serve what is left.
    let planned = crate::block::cross_leaf_adjoints(kernel, x, z, k_bar);
    let entry_params = if planned.is_some() { 0 } else { leaves };
    let fast = super::radial::cross_inputs(kernel, x, z, k_bar, want_x, want_z);
    let (want_x, want_z) = (want_x && fast.is_none(), want_z && fast.is_none());
    if entry_params == 0 && !want_x && !want_z {
        let params = planned.unwrap_or_default();
        let (x, z) = fast.unwrap_or_else(|| (DMatrix::zeros(n, d), DMatrix::zeros(m, d)));
        finite(&params, &[&x, &z])?;
        return Ok(Some(CrossAdjoints { params, x, z }));
    }
    let rows: Vec<(Vec<f64>, Vec<f64>)> = (0..n)
        .into_par_iter()
        .with_min_len(8)
        .map_init(
            || vec![0.0; entry_params],
            |scratch, i| {
                let (mut p, mut xi) = (vec![0.0; entry_params], vec![0.0; d]);
                for j in 0..m {
                    let g = k_bar[(i, j)];
                    if g != 0.0 {
                        add_params(kernel, x.row(i), z.row(j), false, g, scratch, &mut p);
                        if want_x {
                            kernel.entry_vjp_inputs(
                                x.row(i),
                                z.row(j),
                                false,
                                g,
                                Some(&mut xi),
                                None,
                            )?;
                        }
                    }
                }
                Ok((p, xi))
            },
        )
        .collect::<Result<_, Error>>()?;
    let zs: Vec<Vec<f64>> = (0..m)
        .into_par_iter()
        .with_min_len(8)
        .map(|j| {
            let mut zj = vec![0.0; d];
            for i in 0..if want_z { n } else { 0 } {
                let g = k_bar[(i, j)];
                if g != 0.0 {
                    kernel.entry_vjp_inputs(x.row(i), z.row(j), false, g, None, Some(&mut zj))?;
                }
            }
            Ok(zj)
        })
        .collect::<Result<_, Error>>()?;
    let (ps, xs): (Vec<_>, Vec<_>) = rows.into_iter().unzip();
    let (x, z) = fast.unwrap_or_else(|| (stack(&xs, d), stack(&zs, d)));
    let out = CrossAdjoints {
        params: planned.unwrap_or_else(|| total(&ps, leaves)),
        x,
        z,
    };
    finite(&out.params, &[&out.x, &out.z])?;
    Ok(Some(out))
}
