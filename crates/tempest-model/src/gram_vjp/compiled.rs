//! The reverse pass of a compiled model-file kernel, c · k with k a
//! program ([`crate::program::KernelProgram`]), by blocks of entries: for a
//! chunk of rows of X and each point z of Z, one block forward and one
//! block reverse pass over the chunk give every entry's ∂k/∂θ, ∂k/∂x and
//! ∂k/∂z at once (the program run one instruction at a time over the
//! chunk), in place of one scalar forward and reverse pass per entry for
//! the inputs and a second block pass for θ̄.
//!
//! The chunks are fixed (of [`CHUNK`] rows), taken in at most [`GROUPS`]
//! runs of consecutive chunks that run in parallel; each run's sums are
//! formed in order and the runs' Z̄ and θ̄ are added in run order, so the
//! result does not depend on the number of threads, and the Z̄ partials
//! take at most GROUPS × M × D numbers however many rows X has.

use crate::block::gather;
use crate::kernel::{Inputs, KernelValue};
use crate::program::{BlockRows, KernelProgram};
use nalgebra::DMatrix;
use rayon::prelude::*;

/// Rows of X per chunk.
const CHUNK: usize = 64;

/// The most groups of chunks, the tasks that run in parallel (a fixed
/// partition of the rows, so the sums do not depend on the thread count).
const GROUPS: usize = 16;

/// A compiled program under scalings, c₁ · c₂ · … · k: the factors,
/// outermost first, the program, its parameters and its `dims`.
struct Scaled<'k> {
    factors: Vec<f64>,
    program: &'k KernelProgram,
    params: &'k [f64],
    dims: Option<&'k [usize]>,
}

/// c₁ · … · k for a kernel that is a compiled program under scalings.
fn compiled(k: &KernelValue<f64>) -> Option<Scaled<'_>> {
    match k {
        KernelValue::Scale(c, inner) => compiled(inner).map(|mut s| {
            s.factors.insert(0, *c);
            s
        }),
        KernelValue::Compiled {
            program,
            params,
            dims,
            ..
        } => Some(Scaled {
            factors: Vec::new(),
            program,
            params,
            dims: dims.as_deref(),
        }),
        _ => None,
    }
}

/// The reverse pass of K(X, Z) for K̄ [N, M] when the kernel is a
/// compiled program under scalings (`None` otherwise): θ̄ in the order of
/// [`KernelValue::leaves`] (the factors' Σ K̄ ∂K/∂cₗ, then the program's
/// parameters'), x̄ᵢ = Σⱼ K̄ᵢⱼ ∂₁k(xᵢ, zⱼ) when `want_x` and
/// z̄ⱼ = Σᵢ K̄ᵢⱼ ∂₂k(xᵢ, zⱼ) when `want_z` (zeros for the one not wanted),
/// from the same block passes. The columns a kernel's `dims` leave out
/// have zero adjoints.
pub fn cross_vjp(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    z: &Inputs,
    k_bar: &DMatrix<f64>,
    (want_x, want_z): (bool, bool),
) -> Option<(Vec<f64>, DMatrix<f64>, DMatrix<f64>)> {
    let Scaled {
        factors,
        program,
        params,
        dims,
    } = compiled(kernel)?;
    let c: f64 = factors.iter().product();
    let (n, m, d) = (x.len(), z.len(), x.dim());
    if z.dim() != d || k_bar.shape() != (n, m) {
        return None;
    }
    let (xs, zs) = (dims.map(|ds| gather(x, ds)), dims.map(|ds| gather(z, ds)));
    let (xs, zs) = (xs.as_ref().unwrap_or(x), zs.as_ref().unwrap_or(z));
    let ds = xs.dim();
    let prep = program.prepare_inputs(params);
    let slots = program.block_slots();
    let kb = k_bar.as_slice();
    // Per group of consecutive chunks (at most GROUPS of them, however
    // many rows, so the Z̄ partials take GROUPS × M × D at most): X̄ of its
    // rows, Z̄ (all points), the program parameters' adjoint and Σ K̄ k
    // (unscaled), for the factors.
    type Group = (Vec<f64>, Vec<f64>, Vec<f64>, f64);
    let chunks = n.div_ceil(CHUNK);
    let per = chunks.div_ceil(GROUPS).max(1);
    let sqdist = program.reads_sqdist();
    let groups: Vec<Group> = (0..chunks.div_ceil(per))
        .into_par_iter()
        .map(|gi| {
            let first = gi * per * CHUNK;
            let last = ((gi + 1) * per * CHUNK).min(n);
            let (mut vals, mut adj) = (vec![0.0; slots], vec![0.0; slots]);
            program.block_init(&prep, &mut vals);
            let mut gx = vec![0.0; if want_x { (last - first) * ds } else { 0 }];
            let mut gz = vec![0.0; if want_z { m * ds } else { 0 }];
            let (mut out, mut seed, mut d2) =
                (vec![0.0; CHUNK], vec![0.0; CHUNK], vec![0.0; CHUNK]);
            let (mut gy, mut g) = (vec![0.0; ds], vec![0.0; program.n_params()]);
            let mut kk = 0.0;
            for start in (first..last).step_by(CHUNK) {
                let rows_m = CHUNK.min(last - start);
                for j in 0..m {
                    let col = &kb[j * n + start..j * n + start + rows_m];
                    if col.iter().all(|v| *v == 0.0) {
                        continue;
                    }
                    for (s, k) in seed.iter_mut().zip(col) {
                        *s = c * k;
                    }
                    let y = zs.row(j);
                    if sqdist {
                        for (e, v) in d2[..rows_m].iter_mut().enumerate() {
                            *v = xs
                                .row(start + e)
                                .iter()
                                .zip(y)
                                .map(|(a, b)| (a - b) * (a - b))
                                .sum();
                        }
                    }
                    let rows = BlockRows {
                        x: xs,
                        start,
                        m: rows_m,
                        y,
                        d2: &d2,
                        swap: false,
                    };
                    program.block_forward(&prep, &rows, &mut vals, &mut out);
                    program.block_backward(&prep, rows_m, &seed, &vals, &mut adj, &mut g);
                    kk += col.iter().zip(&out).map(|(a, b)| a * b).sum::<f64>();
                    gy.fill(0.0);
                    let off = (start - first) * ds;
                    let sink = if want_x {
                        Some(&mut gx[off..off + rows_m * ds])
                    } else {
                        None
                    };
                    program.block_input_adjoints(&prep, &rows, &seed, &adj, sink, &mut gy);
                    if want_z {
                        for (t, v) in gz[j * ds..(j + 1) * ds].iter_mut().zip(&gy) {
                            *t += v;
                        }
                    }
                }
            }
            (gx, gz, g, kk)
        })
        .collect();
    let col = |k: usize| dims.map_or(k, |ds| ds[k]);
    let mut xb = DMatrix::zeros(n, d);
    let mut zb = DMatrix::zeros(m, d);
    let (mut gp, mut kk) = (vec![0.0; program.n_params()], 0.0);
    for (gi, (gx, gz, g, s)) in groups.iter().enumerate() {
        for (e, r) in gx.chunks(ds.max(1)).enumerate() {
            for (k, v) in r.iter().enumerate() {
                xb[(gi * per * CHUNK + e, col(k))] += v;
            }
        }
        for (j, r) in gz.chunks(ds.max(1)).enumerate() {
            for (k, v) in r.iter().enumerate() {
                zb[(j, col(k))] += v;
            }
        }
        gp.iter_mut().zip(g).for_each(|(a, b)| *a += b);
        kk += s;
    }
    // ∂/∂cₗ of Σ K̄ (Π c) k is the other factors' product times Σ K̄ k.
    let mut theta: Vec<f64> = (0..factors.len())
        .map(|l| {
            let others: f64 = factors
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != l)
                .map(|(_, f)| f)
                .product();
            others * kk
        })
        .collect();
    theta.extend(gp);
    Some((theta, xb, zb))
}

/// The reverse pass of K(X, X) for K̄ [N, N] when the kernel is a
/// compiled program under scalings: θ̄ and X̄, those of the
/// cross-covariance for K̄ folded onto the Gram's lower triangle ([`fold`];
/// chunks above the diagonal are all zero and skipped).
pub fn gram_vjp(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    k_bar: &DMatrix<f64>,
    want_x: bool,
) -> Option<(Vec<f64>, DMatrix<f64>)> {
    (k_bar.shape() == (x.len(), x.len()))
        .then(|| cross_vjp(kernel, x, x, &fold(k_bar), (want_x, want_x)))
        .flatten()
        .map(|(theta, xb, zb)| (theta, xb + zb))
}

/// A Gram matrix holds Kᵢⱼ = Kⱼᵢ = k(xᵢ, xⱼ) for i ≥ j (its lower triangle,
/// mirrored: [`KernelValue::gram`]), so its adjoint K̄ [N, N] acts on that
/// triangle as W: Wᵢⱼ = K̄ᵢⱼ + K̄ⱼᵢ below the diagonal, K̄ᵢᵢ on it, 0 above.
fn fold(k_bar: &DMatrix<f64>) -> DMatrix<f64> {
    DMatrix::from_fn(k_bar.nrows(), k_bar.ncols(), |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Equal => k_bar[(i, i)],
        std::cmp::Ordering::Greater => k_bar[(i, j)] + k_bar[(j, i)],
        std::cmp::Ordering::Less => 0.0,
    })
}
