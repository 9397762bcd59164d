//! Gradient building blocks shared by the GP engines: the kernel's part of
//! the hypers' reverse sweep (⟨p̄, leaves⟩, [`kernel_term`]); and, for
//! kernels without reverse rules, seeding a chunk of hyper directions and
//! the Gram node's backward pass in its kernel parameters, contracting a
//! weight matrix with the derivative of a Gram matrix entry by entry (no
//! dual matrix is stored).
//!
//! The weight W [N, N] is twice the adjoint K̄ of the Gram matrix, as given
//! by the matrix-level rules of [`crate::math::adjoint`]
//! ([`crate::math::adjoint::lml_weight`] for a log marginal likelihood,
//! 2 [`crate::math::adjoint::cholesky_vjp`] behind a Cholesky factor), so
//! ½ Σᵢₖ Wᵢₖ ∂Kᵢₖ/∂θ = ⟨K̄, ∂K/∂θ⟩.

use crate::error::Error;
use crate::math::reverse::{self, Rev};
use crate::math::scalar::{CHUNK, Dual8};
use crate::model::custom::Scalar;
use crate::model::kernel::{Inputs, KernelValue};
use ad_trait::forward_ad::adfn::adfn;
use nalgebra::DMatrix;
use rayon::prelude::*;

thread_local! {
    /// Whether this thread's hypers' gradients take the forward-mode chunks
    /// ([`with_forward_chunks`]).
    static FORWARD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the hypers' gradients on this thread taken by the
/// forward-mode chunks (the path of kernels without reverse rules: the
/// model's pieces as eight-tangent duals per chunk of hypers) instead of
/// one reverse sweep: for checks of the sweep against them.
pub fn with_forward_chunks<R>(f: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            FORWARD.with(|c| c.set(self.0));
        }
    }
    let _reset = Reset(FORWARD.with(|c| c.replace(true)));
    f()
}

/// Whether the hypers' gradients take the reverse sweep on this thread
/// (see [`with_forward_chunks`]).
pub fn reverse_sweeps() -> bool {
    !FORWARD.with(|c| c.get())
}

/// ⟨p̄, leaves⟩ for the kernel evaluated with [`Rev`] in the hypers' sweep,
/// given its leaf adjoints `pbar` at the same point ([`leaf_adjoints`],
/// the Gram and cross-covariance nodes' reverse passes); `None` when the
/// kernel has no leaves (interpreted model-file parts) or another number of
/// them.
pub fn kernel_term(kernel: &KernelValue<Rev>, pbar: &[f64]) -> Option<Rev> {
    let leaves = kernel.leaves()?;
    (leaves.len() == pbar.len()).then(|| reverse::contract(pbar.iter().copied(), &leaves))
}

/// θ as duals, with unit tangents on entries `start..start + CHUNK`.
pub fn seed_chunk(theta: &[f64], start: usize) -> Vec<Dual8> {
    theta
        .iter()
        .enumerate()
        .map(|(j, &v)| {
            let mut t = [0.0; CHUNK];
            if j >= start && j < start + CHUNK {
                t[j - start] = 1.0;
            }
            Dual8::new(v, t)
        })
        .collect()
}

/// ½ Σᵢₖ Wᵢₖ ∂K(X, X)ᵢₖ/∂θ for the (up to eight) directions seeded in the
/// dual kernel; W is symmetric [N, N]. Columns run in parallel and their
/// partial sums are added in column order, so the result does not depend on
/// the number of threads.
pub fn half_trace_w_dk(
    kernel: &KernelValue<Dual8>,
    x: &Inputs,
    w: &DMatrix<f64>,
) -> Result<[f64; CHUNK], Error> {
    half_trace_w_dk_n(kernel, x, w)
}

/// [`half_trace_w_dk`] for duals with any number N of tangents (fewer
/// tangents make each kernel entry cheaper when few directions are seeded).
pub fn half_trace_w_dk_n<const N: usize>(
    kernel: &KernelValue<adfn<N>>,
    x: &Inputs,
    w: &DMatrix<f64>,
) -> Result<[f64; N], Error>
where
    adfn<N>: Scalar,
{
    let n = x.len();
    let partial: Vec<[f64; N]> = (0..n)
        .into_par_iter()
        .with_min_len(32)
        .map(|k| {
            let xk = x.row(k);
            let mut g = [0.0; N];
            for i in k..n {
                let e = kernel.entry(x.row(i), xk, i == k)?;
                let wik = if i == k { 0.5 * w[(i, i)] } else { w[(i, k)] };
                let tg = e.tangent();
                for c in 0..N {
                    g[c] += wik * tg[c];
                }
            }
            Ok(g)
        })
        .collect::<Result<_, Error>>()?;
    let mut g = [0.0; N];
    for pg in &partial {
        for c in 0..N {
            g[c] += pg[c];
        }
    }
    Ok(g)
}

pub use crate::model::block::leaf_adjoints;

/// ½ Σᵢₖ Wᵢₖ ∂K/∂θ for the directions seeded in a dual kernel: from the
/// leaf adjoints `pbar` of [`leaf_adjoints`] (computed once, at the same
/// point) by the chain rule through the leaves' tangents, or else entry
/// by entry in the duals ([`half_trace_w_dk_n`]), with W \[N, N\] from `w`
/// (only called on that path).
pub fn half_trace_w_dk_via<'w, const N: usize>(
    kernel: &KernelValue<adfn<N>>,
    pbar: Option<&[f64]>,
    x: &Inputs,
    w: impl FnOnce() -> &'w DMatrix<f64>,
) -> Result<[f64; N], Error>
where
    adfn<N>: Scalar,
{
    if let Some(g) = pbar.and_then(|pbar| chain_leaves(kernel, pbar)) {
        return Ok(g);
    }
    half_trace_w_dk_n(kernel, x, w())
}

/// Σₗ p̄ₗ ∂leafₗ/∂θ in the directions seeded in a dual kernel, from the
/// leaf adjoints `pbar` at the same point; `None` when the kernel has no
/// leaves or another number of them.
pub fn chain_leaves<const N: usize>(kernel: &KernelValue<adfn<N>>, pbar: &[f64]) -> Option<[f64; N]>
where
    adfn<N>: Scalar,
{
    let leaves = kernel.leaves()?;
    if leaves.len() != pbar.len() {
        return None;
    }
    let mut g = [0.0; N];
    for (p, leaf) in pbar.iter().zip(&leaves) {
        let tg = leaf.tangent();
        for c in 0..N {
            g[c] += p * tg[c];
        }
    }
    Some(g)
}
