//! Column-block evaluation of f64 kernels: the Gram matrix, cross
//! covariances, and the reverse pass p̄ = ½ Σᵢₖ Wᵢₖ ∂Kᵢₖ/∂p over every
//! kernel parameter ("leaf", in the order of [`KernelValue::leaves`]).
//!
//! A kernel expression is flattened once into a [`Plan`]: a post-order
//! list of nodes (built-in kernels, compiled model-file kernels, sums,
//! products, scalings). Entries are evaluated a block of up to [`BLOCK`]
//! rows of one column at a time, node by node over the whole block, so the
//! tree is walked once per block rather than once per entry and the inner
//! loops are plain arithmetic over arrays. The reverse pass runs the nodes
//! backwards over the same block: a sum passes its adjoint to both sides, a
//! product multiplies it by the other side's values (a product of two
//! exponential leaves is one eˣ of their summed exponents, whose leaves read
//! its value and adjoint: `Plan::exponent`), and each leaf kernel
//! turns its entries' adjoints into ∂/∂p with a hand-written rule (and a
//! compiled kernel with its program's block reverse pass), so one pass
//! gives every parameter's derivative whatever their number.
//!
//! Columns run in parallel (the Gram matrix's lower triangle by columns;
//! the reverse pass over the upper triangle by blocks of columns, as the
//! weight hands them out); each column's or block's sums are formed in a
//! fixed order and the partial sums are added in a fixed order, so results
//! do not depend on the number of threads. A Rust kernel is a leaf evaluated
//! entry by entry (its derivatives in its own parameters by forward mode
//! inside the entry); kernels with interpreted model-file parts have no
//! plan and keep the entry-by-entry path.
#![allow(clippy::needless_range_loop)] // loops over parallel arrays

use super::custom::{DynKernel, kernel_entry_grad};
use super::kernel::{Inputs, KernelKind, KernelValue};
use crate::program::{BlockRows, KernelProgram, Prepared};
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::f64::consts::PI;
use tempest_math::adjoint::{SWEEP_COLUMNS, Strided, UpperColumns};
use tempest_math::simd::{Isa, isa};
use tempest_math::tasks::run_largest_first;
use tempest_math::vector::{dot_by, exp_in_place, opaque_inf, sin_cos_in_place, sum_zip3};

/// The number of the next plan made ([`Plan::id`]).
static NEXT_PLAN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

thread_local! {
    /// This thread's scratch and the plan it was made for: a pass over a
    /// Gram matrix runs its columns on each thread with one scratch
    /// instead of allocating and zeroing one for every piece of work the
    /// pool splits off (about fifty per gradient).
    static SCRATCH: std::cell::RefCell<Option<(u64, Work)>> =
        const { std::cell::RefCell::new(None) };
}

/// Rows per block.
pub const BLOCK: usize = 256;

/// One node of a flattened kernel; children come before their parents.
enum Node<'k> {
    /// rbf and the Matérn kernels.
    Stationary {
        kind: KernelKind,
        ell: &'k [f64],
        /// 1/ℓₖ with one lengthscale per column (ARD); empty otherwise.
        inv: Vec<f64>,
        dims: Option<&'k [usize]>,
        dist: usize,
        leaf: usize,
    },
    Periodic {
        ell: f64,
        period: f64,
        dims: Option<&'k [usize]>,
        leaf: usize,
    },
    Linear {
        v: &'k [f64],
        dims: Option<&'k [usize]>,
        leaf: usize,
    },
    Polynomial {
        degree: f64,
        c: f64,
        dims: Option<&'k [usize]>,
        leaf: usize,
    },
    Cosine {
        dims: Option<&'k [usize]>,
    },
    White,
    Constant,
    Sum(usize, usize),
    Product(usize, usize),
    Scale {
        c: f64,
        k: usize,
        leaf: usize,
    },
    Compiled {
        program: &'k KernelProgram,
        prep: Prepared,
        /// Index into [`Plan::gathered`] when the kernel sees some columns.
        sel: Option<usize>,
        dist: usize,
        leaf: usize,
        /// Offset of its instruction slots in the program scratch.
        slots: usize,
    },
    /// A kernel written in Rust, entry by entry, its derivatives in its
    /// parameters by forward mode inside each entry.
    Rust {
        kernel: &'k dyn DynKernel,
        params: &'k [f64],
        /// Index into [`Plan::gathered`] when the kernel sees some columns.
        sel: Option<usize>,
        leaf: usize,
    },
}

/// A kernel flattened for block evaluation on inputs X (rows) and Y
/// (columns).
pub struct Plan<'k> {
    nodes: Vec<Node<'k>>,
    /// The column selections whose squared distances are needed.
    dists: Vec<Option<&'k [usize]>>,
    /// For each selection, a bound on the squared distance between any
    /// point of X and any of Y (the bounding box's diagonal): an rbf
    /// whose exponent cannot pass −708 there skips [`exp_near`]'s test.
    reach: Vec<f64>,
    leaves: usize,
    /// X and Y restricted to a compiled kernel's `dims`.
    gathered: Vec<(Inputs, Inputs)>,
    prog_slots: usize,
    /// This plan's number, unique in the process: a thread's scratch
    /// ([`Plan::with_work`]) is kept for the plan it was made for.
    id: u64,
    /// Each node's value is `vfac[i]` times row `vrow[i]` of the values: a
    /// scaling is no pass of its own, its factor is carried to the node
    /// that reads it.
    vrow: Vec<usize>,
    vfac: Vec<f64>,
    /// Each node's adjoint is `afac[i]` times row `arow[i]` of the
    /// adjoints: a sum's and a scaling's operands share their parent's
    /// row (no copies), and a leaf's sums are scaled once per block.
    arow: Vec<usize>,
    afac: Vec<f64>,
    /// Whether a node's values are read in the reverse pass (by itself
    /// or its parent): a sum under a sum or at the root is not, and the
    /// forward pass before the reverse pass skips it.
    read: Vec<bool>,
    /// Whether a node is an exponential leaf (an rbf with one length
    /// scale, a periodic kernel) under a product of two such leaves (each
    /// possibly scaled): it writes its exponent, and the product forms
    /// e^(sum) once instead of two exponentials and a product. The leaves'
    /// and scalings' reverse rules need only the product's value and
    /// adjoint (āₚ vₚ = ā v for v = vₚ v_q), which their `vrow` and `arow`
    /// point to.
    exponent: Vec<bool>,
    /// For a product of two exponential leaves, the leaves.
    fused: Vec<Option<(usize, usize)>>,
}

/// Scratch for one block (one per worker).
pub struct Work {
    vals: Vec<f64>,
    aux: Vec<f64>,
    aux2: Vec<f64>,
    adj: Vec<f64>,
    d2: Vec<f64>,
    pv: Vec<f64>,
    pa: Vec<f64>,
    /// One compiled kernel's parameter sums over a block.
    g: Vec<f64>,
    /// A periodic kernel's differences, sines and cosines over a block
    /// (3 × [`BLOCK`]).
    trig: Vec<f64>,
    /// An ARD kernel's per-column sums over a block (its D).
    ard: Vec<f64>,
}

/// The rows of one block: X rows `start..start + m` against Y's row `j`;
/// `diag` is the block entry where both are the same point of the same set.
#[derive(Clone, Copy)]
struct Block<'a> {
    x: &'a Inputs,
    y: &'a Inputs,
    j: usize,
    start: usize,
    m: usize,
    diag: Option<usize>,
    /// Whether the entries are k(yⱼ, xₑ) (a column of a Gram matrix's
    /// upper triangle standing for the lower triangle's entries) rather
    /// than k(xₑ, yⱼ); only a compiled kernel can tell them apart.
    swap: bool,
}

/// Calls `f(k, xₖ − yₖ)` for the selected coordinates k (0-based among
/// them), with the selection decided once rather than per coordinate.
#[inline(always)]
fn for_diffs(x: &[f64], y: &[f64], dims: Option<&[usize]>, mut f: impl FnMut(usize, f64)) {
    match dims {
        None => {
            for (k, (u, v)) in x.iter().zip(y).enumerate() {
                f(k, u - v);
            }
        }
        Some(d) => {
            for (k, &j) in d.iter().enumerate() {
                f(k, x[j] - y[j]);
            }
        }
    }
}

/// The selected coordinates of a row.
#[inline(always)]
fn coords<'a>(r: &'a [f64], dims: Option<&'a [usize]>) -> impl Iterator<Item = f64> + 'a {
    let n = dims.map_or(r.len(), |d| d.len());
    (0..n).map(move |k| r[dims.map_or(k, |d| d[k])])
}

/// X restricted to the columns `dims` [N, dims.len()].
pub(crate) fn gather(x: &Inputs, dims: &[usize]) -> Inputs {
    let mut out = Vec::with_capacity(x.len() * dims.len());
    for i in 0..x.len() {
        let r = x.row(i);
        out.extend(dims.iter().map(|&k| r[k]));
    }
    Inputs::from_flat(out, dims.len())
}

impl<'k> Plan<'k> {
    /// Flatten `kernel` for inputs X and Y, or `None` when it has parts
    /// without a block rule (interpreted model-file kernels). The
    /// kernel must already be validated for the inputs' dimension.
    pub fn new(kernel: &'k KernelValue<f64>, x: &Inputs, y: &Inputs) -> Option<Plan<'k>> {
        let mut plan = Plan {
            nodes: Vec::new(),
            dists: Vec::new(),
            reach: Vec::new(),
            leaves: 0,
            gathered: Vec::new(),
            prog_slots: 0,
            id: NEXT_PLAN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            vrow: Vec::new(),
            vfac: Vec::new(),
            arow: Vec::new(),
            afac: Vec::new(),
            read: Vec::new(),
            exponent: Vec::new(),
            fused: Vec::new(),
        };
        plan.add(kernel, x, y)?;
        plan.reach = plan.dists.iter().map(|d| reach(x, y, *d)).collect();
        plan.route();
        Some(plan)
    }

    /// Where each node's values and adjoints live ([`Plan::vrow`],
    /// [`Plan::arow`]): values bottom-up (children come first), adjoints
    /// top-down from the root.
    fn route(&mut self) {
        let n = self.nodes.len();
        self.vrow = (0..n).collect();
        self.vfac = vec![1.0; n];
        for (i, node) in self.nodes.iter().enumerate() {
            match node {
                Node::Scale { c, k, .. } => {
                    self.vrow[i] = self.vrow[*k];
                    self.vfac[i] = c * self.vfac[*k];
                }
                Node::Product(p, q) => self.vfac[i] = self.vfac[*p] * self.vfac[*q],
                _ => {}
            }
        }
        self.exponent = vec![false; n];
        self.fused = vec![None; n];
        for i in 0..n {
            if let Node::Product(p, q) = self.nodes[i]
                && let (Some(lp), Some(lq)) = (self.exponential(p), self.exponential(q))
            {
                self.fused[i] = Some((lp, lq));
                self.exponent[lp] = true;
                self.exponent[lq] = true;
                // The sides (scalings down to the leaf) read the product's
                // row; the leaves' factor is 1, the scalings keep theirs.
                for mut s in [p, q] {
                    loop {
                        self.vrow[s] = i;
                        match self.nodes[s] {
                            Node::Scale { k, .. } => s = k,
                            _ => break,
                        }
                    }
                }
            }
        }
        self.read = self
            .nodes
            .iter()
            .map(|node| !matches!(node, Node::Sum(..)))
            .collect();
        for node in &self.nodes {
            match node {
                Node::Product(p, q) => {
                    self.read[*p] = true;
                    self.read[*q] = true;
                }
                Node::Scale { k, .. } => self.read[*k] = true,
                _ => {}
            }
        }
        self.arow = (0..n).collect();
        self.afac = vec![1.0; n];
        for (i, node) in self.nodes.iter().enumerate().rev() {
            let (row, fac) = (self.arow[i], self.afac[i]);
            match node {
                Node::Sum(p, q) => {
                    for s in [*p, *q] {
                        self.arow[s] = row;
                        self.afac[s] = fac;
                    }
                }
                Node::Scale { c, k, .. } => {
                    self.arow[*k] = row;
                    self.afac[*k] = fac * c;
                }
                Node::Product(p, q) if self.fused[i].is_some() => {
                    self.arow[*p] = row;
                    self.arow[*q] = row;
                    self.afac[*p] = fac * self.vfac[*q];
                    self.afac[*q] = fac * self.vfac[*p];
                }
                Node::Product(p, q) => {
                    self.afac[*p] = fac * self.vfac[*q];
                    self.afac[*q] = fac * self.vfac[*p];
                }
                _ => {}
            }
        }
    }

    /// The leaf under node i (through scalings) when its value is
    /// e^(its exponent) with a reverse rule that reads only the value
    /// ([`Plan::exponent`]).
    fn exponential(&self, mut i: usize) -> Option<usize> {
        loop {
            match &self.nodes[i] {
                Node::Stationary {
                    kind: KernelKind::Rbf,
                    ell,
                    ..
                } if ell.len() == 1 => return Some(i),
                Node::Periodic { .. } => return Some(i),
                Node::Scale { k, .. } => i = *k,
                _ => return None,
            }
        }
    }

    /// The root's values over a block of m rows, written to `out` [m].
    #[inline(always)]
    fn root_values(&self, w: &Work, out: &mut [f64]) {
        let root = self.nodes.len() - 1;
        let (r, f) = (self.vrow[root] * BLOCK, self.vfac[root]);
        let v = &w.vals[r..r + out.len()];
        if f == 1.0 {
            out.copy_from_slice(v);
        } else {
            for (o, x) in out.iter_mut().zip(v) {
                *o = f * x;
            }
        }
    }

    /// The number of leaves.
    pub fn leaves(&self) -> usize {
        self.leaves
    }

    fn dist(&mut self, dims: Option<&'k [usize]>) -> usize {
        if let Some(i) = self.dists.iter().position(|d| *d == dims) {
            return i;
        }
        self.dists.push(dims);
        self.dists.len() - 1
    }

    fn push(&mut self, n: Node<'k>) -> Option<usize> {
        self.nodes.push(n);
        Some(self.nodes.len() - 1)
    }

    fn add(&mut self, k: &'k KernelValue<f64>, x: &Inputs, y: &Inputs) -> Option<usize> {
        tempest_core::limits::deep(|| self.add_inner(k, x, y))
    }

    fn add_inner(&mut self, k: &'k KernelValue<f64>, x: &Inputs, y: &Inputs) -> Option<usize> {
        match k {
            KernelValue::Base {
                kind, args, dims, ..
            } => {
                let leaf = self.leaves;
                self.leaves += args.iter().map(|a| a.as_slice().len()).sum::<usize>();
                let dims = dims.as_deref();
                let node = match kind {
                    KernelKind::Rbf
                    | KernelKind::Matern12
                    | KernelKind::Matern32
                    | KernelKind::Matern52 => {
                        let dist = self.dist(dims);
                        let ell = args[0].as_slice();
                        let inv = match ell {
                            [_] => Vec::new(),
                            _ => ell.iter().map(|l| 1.0 / l).collect(),
                        };
                        Node::Stationary {
                            kind: *kind,
                            ell,
                            inv,
                            dims,
                            dist,
                            leaf,
                        }
                    }
                    KernelKind::Periodic => Node::Periodic {
                        ell: args[0].scalar(),
                        period: args[1].scalar(),
                        dims,
                        leaf,
                    },
                    KernelKind::Linear => Node::Linear {
                        v: args[0].as_slice(),
                        dims,
                        leaf,
                    },
                    KernelKind::Polynomial => Node::Polynomial {
                        degree: args[0].scalar(),
                        c: args[1].scalar(),
                        dims,
                        leaf,
                    },
                    KernelKind::Cosine => Node::Cosine { dims },
                    KernelKind::White => Node::White,
                    KernelKind::Constant => Node::Constant,
                };
                self.push(node)
            }
            KernelValue::Sum(a, b) => {
                let (a, b) = (self.add(a, x, y)?, self.add(b, x, y)?);
                self.push(Node::Sum(a, b))
            }
            KernelValue::Product(a, b) => {
                let (a, b) = (self.add(a, x, y)?, self.add(b, x, y)?);
                self.push(Node::Product(a, b))
            }
            KernelValue::Scale(c, inner) => {
                let leaf = self.leaves;
                self.leaves += 1;
                let k = self.add(inner, x, y)?;
                self.push(Node::Scale { c: *c, k, leaf })
            }
            KernelValue::Compiled {
                program,
                params,
                dims,
                ..
            } => {
                let leaf = self.leaves;
                self.leaves += params.len();
                let dims = dims.as_deref();
                let dist = self.dist(dims);
                let sel = self.select(dims, x, y);
                let slots = self.prog_slots;
                self.prog_slots += program.block_slots();
                self.push(Node::Compiled {
                    program,
                    prep: program.prepare(params),
                    sel,
                    dist,
                    leaf,
                    slots,
                })
            }
            KernelValue::Rust {
                kernel,
                params,
                dims,
                ..
            } => {
                let leaf = self.leaves;
                self.leaves += params.len();
                let sel = self.select(dims.as_deref(), x, y);
                self.push(Node::Rust {
                    kernel: kernel.as_ref(),
                    params,
                    sel,
                    leaf,
                })
            }
            KernelValue::Lang { .. } => None,
        }
    }

    /// X and Y restricted to `dims` for a kernel that sees some columns
    /// (its index into [`Plan::gathered`]), `None` for all columns.
    fn select(&mut self, dims: Option<&[usize]>, x: &Inputs, y: &Inputs) -> Option<usize> {
        let d = dims?;
        self.gathered.push((gather(x, d), gather(y, d)));
        Some(self.gathered.len() - 1)
    }

    /// Runs `f` with this thread's scratch for this plan, made on the
    /// thread's first use of the plan (a fresh one if the thread's is in
    /// use further up the stack). Every value read from the scratch is
    /// written first in the same block, so results do not depend on which
    /// scratch ran a column.
    fn with_work<R>(&self, f: impl FnOnce(&mut Work) -> R) -> R {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut slot) => {
                if !matches!(&*slot, Some((id, _)) if *id == self.id) {
                    *slot = Some((self.id, self.work()));
                }
                match slot.as_mut() {
                    Some((_, w)) => f(w),
                    None => f(&mut self.work()),
                }
            }
            Err(_) => f(&mut self.work()),
        })
    }

    /// Scratch for one worker.
    pub fn work(&self) -> Work {
        let n = self.nodes.len() * BLOCK;
        let mut pv = vec![0.0; self.prog_slots];
        for node in &self.nodes {
            if let Node::Compiled {
                program,
                prep,
                slots,
                ..
            } = node
            {
                program.block_init(prep, &mut pv[*slots..*slots + program.block_slots()]);
            }
        }
        Work {
            vals: vec![0.0; n],
            aux: vec![0.0; n],
            aux2: vec![0.0; n],
            adj: vec![0.0; n],
            d2: vec![0.0; self.dists.len() * BLOCK],
            pv,
            pa: vec![0.0; self.prog_slots],
            g: vec![0.0; self.leaves],
            trig: vec![0.0; 3 * BLOCK],
            ard: vec![
                0.0;
                self.nodes
                    .iter()
                    .map(|n| match n {
                        Node::Stationary { inv, .. } => inv.len(),
                        _ => 0,
                    })
                    .max()
                    .unwrap_or(0)
            ],
        }
    }

    /// Every node's values over the block (into `w.vals`); with `grad`,
    /// also what the reverse pass needs (into `w.aux`, `w.aux2`).
    #[inline(always)]
    fn forward(&self, b: Block, grad: bool, w: &mut Work) {
        let m = b.m;
        let yr = b.y.row(b.j);
        for (s, dims) in self.dists.iter().enumerate() {
            let d2 = &mut w.d2[s * BLOCK..s * BLOCK + m];
            if dims.is_none() && yr.len() == 1 {
                // One input column: a contiguous run of X.
                let y0 = yr[0];
                for (d, x) in d2.iter_mut().zip(b.x.rows_flat(b.start, m)) {
                    let u = x - y0;
                    *d = u * u;
                }
            } else {
                for (e, d) in d2.iter_mut().enumerate() {
                    let mut acc = 0.0;
                    for_diffs(b.x.row(b.start + e), yr, *dims, |_, u| acc += u * u);
                    *d = acc;
                }
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if grad && !self.read[i] {
                continue;
            }
            let (done, rest) = w.vals.split_at_mut(i * BLOCK);
            let out = &mut rest[..m];
            let aux = &mut w.aux[i * BLOCK..i * BLOCK + m];
            let aux2 = &mut w.aux2[i * BLOCK..i * BLOCK + m];
            let val = |s: usize| &done[self.vrow[s] * BLOCK..self.vrow[s] * BLOCK + m];
            match node {
                Node::Stationary {
                    kind,
                    ell,
                    inv,
                    dims,
                    dist,
                    ..
                } => {
                    if let ([l], KernelKind::Rbf) = (ell, kind) {
                        // e^(−r²/2) with r² = d² · ℓ⁻² (a multiplication: a
                        // division per entry was a third of the pass); the
                        // reverse pass forms r² again from d².
                        let d2 = &w.d2[dist * BLOCK..dist * BLOCK + m];
                        let half = -0.5 * (1.0 / (l * l));
                        for (o, d) in out.iter_mut().zip(d2) {
                            *o = d * half;
                        }
                        if self.exponent[i] {
                        } else if self.reach[*dist] * half < -708.0 {
                            // Some entries may lie where eˣ is 0.
                            exp_near(out);
                        } else {
                            exp_in_place(out);
                        }
                        continue;
                    }
                    if let [l] = ell {
                        let d2 = &w.d2[dist * BLOCK..dist * BLOCK + m];
                        let inv = 1.0 / (l * l);
                        for (a, d) in aux.iter_mut().zip(d2) {
                            *a = d * inv;
                        }
                    } else {
                        for (e, a) in aux.iter_mut().enumerate() {
                            let mut acc = 0.0;
                            for_diffs(b.x.row(b.start + e), yr, *dims, |k, u| {
                                let s = u * inv[k];
                                acc += s * s;
                            });
                            *a = acc;
                        }
                    }
                    stationary_values(*kind, aux, out);
                }
                Node::Periodic {
                    ell, period, dims, ..
                } => {
                    // Coordinate by coordinate over the block: the angles,
                    // then their sines and cosines over the block, vectorised.
                    // The first coordinate writes the sums, later ones add.
                    let c = -2.0 / (ell * ell);
                    let n_dims = dims.map_or(yr.len(), |d| d.len());
                    let (d, rest) = w.trig.split_at_mut(BLOCK);
                    let (sn, cs) = rest.split_at_mut(BLOCK);
                    let (xs, dim, w_ang) = (b.x.rows_flat(b.start, m), yr.len(), PI / period);
                    if n_dims == 0 {
                        aux.fill(0.0);
                        aux2.fill(0.0);
                    }
                    for k in 0..n_dims {
                        let j = dims.map_or(k, |d| d[k]);
                        let (d, sn, yj) = (&mut d[..m], &mut sn[..m], yr[j]);
                        if dim == 1 {
                            // One input column: a contiguous run of X.
                            for ((d, s), x) in d.iter_mut().zip(sn.iter_mut()).zip(&xs[..m]) {
                                *d = x - yj;
                                *s = *d * w_ang;
                            }
                        } else {
                            for e in 0..m {
                                d[e] = xs[e * dim + j] - yj;
                                sn[e] = d[e] * w_ang;
                            }
                        }
                        sin_cos_in_place(&mut sn[..m], &mut cs[..m]);
                        let angle = |e: usize| d[e] * 2.0 * sn[e] * cs[e];
                        if k == 0 {
                            (0..m).for_each(|e| aux[e] = sn[e] * sn[e]);
                            if grad {
                                (0..m).for_each(|e| aux2[e] = angle(e));
                            }
                        } else {
                            (0..m).for_each(|e| aux[e] += sn[e] * sn[e]);
                            if grad {
                                (0..m).for_each(|e| aux2[e] += angle(e));
                            }
                        }
                    }
                    for e in 0..m {
                        out[e] = c * aux[e];
                    }
                    if !self.exponent[i] {
                        exp_in_place(out);
                    }
                }
                Node::Linear { v, dims, .. } => {
                    for (e, o) in out.iter_mut().enumerate() {
                        let xr = b.x.row(b.start + e);
                        let prods = coords(xr, *dims).zip(coords(yr, *dims));
                        *o = if let [v0] = v {
                            v0 * prods.map(|(u, w)| u * w).sum::<f64>()
                        } else {
                            prods.zip(v.iter()).map(|((u, w), vk)| vk * u * w).sum()
                        };
                    }
                }
                Node::Polynomial {
                    degree, c, dims, ..
                } => {
                    for e in 0..m {
                        let xr = b.x.row(b.start + e);
                        let base = c + coords(xr, *dims)
                            .zip(coords(yr, *dims))
                            .map(|(u, v)| u * v)
                            .sum::<f64>();
                        aux[e] = base;
                        out[e] = if degree.fract() == 0.0 && degree.abs() < 64.0 {
                            base.powi(*degree as i32)
                        } else {
                            base.powf(*degree)
                        };
                    }
                }
                Node::Cosine { dims } => {
                    for (e, o) in out.iter_mut().enumerate() {
                        let xr = b.x.row(b.start + e);
                        *o = super::kernels::dot_product::cosine::<f64>(xr, yr, *dims);
                    }
                }
                Node::White => {
                    out.fill(0.0);
                    if let Some(d) = b.diag {
                        out[d] = 1.0;
                    }
                }
                Node::Constant => out.fill(1.0),
                Node::Sum(p, q) => {
                    // Each side times the scaling it carries.
                    let (fp, fq) = (self.vfac[*p], self.vfac[*q]);
                    for ((o, a), b) in out.iter_mut().zip(val(*p)).zip(val(*q)) {
                        *o = fp * a + fq * b;
                    }
                }
                Node::Product(..) if self.fused[i].is_some() => {
                    // Two exponential leaves: their exponents, in their
                    // own rows, summed and raised once (the scalings are
                    // carried on, `vfac`).
                    let Some((p, q)) = self.fused[i] else {
                        continue;
                    };
                    let (ep, eq) = (
                        &done[p * BLOCK..p * BLOCK + m],
                        &done[q * BLOCK..q * BLOCK + m],
                    );
                    for ((o, a), b) in out.iter_mut().zip(ep).zip(eq) {
                        *o = a + b;
                    }
                    exp_in_place(out);
                }
                Node::Product(p, q) => {
                    // The sides' scalings are carried on (`vfac`).
                    for ((o, a), b) in out.iter_mut().zip(val(*p)).zip(val(*q)) {
                        *o = a * b;
                    }
                }
                // Carried to the node that reads it (`vfac`).
                Node::Scale { .. } => {}
                Node::Compiled {
                    program,
                    prep,
                    sel,
                    dist,
                    slots,
                    ..
                } => {
                    let (gx, gy) = self.sides(*sel, b);
                    let rows = BlockRows {
                        x: gx,
                        start: b.start,
                        m,
                        y: gy.row(b.j),
                        d2: &w.d2[dist * BLOCK..dist * BLOCK + m],
                        swap: b.swap,
                    };
                    let pv = &mut w.pv[*slots..*slots + program.block_slots()];
                    program.block_forward(prep, &rows, pv, out);
                }
                Node::Rust {
                    kernel,
                    params,
                    sel,
                    ..
                } => {
                    let (gx, gy) = self.sides(*sel, b);
                    let yr = gy.row(b.j);
                    for (e, o) in out.iter_mut().enumerate() {
                        let xr = gx.row(b.start + e);
                        *o = if b.swap {
                            kernel.entry_f64(params, yr, xr)
                        } else {
                            kernel.entry_f64(params, xr, yr)
                        };
                    }
                }
            }
        }
    }

    /// The inputs a kernel that sees some columns reads (`sel`), or the
    /// block's own.
    fn sides<'a>(&'a self, sel: Option<usize>, b: Block<'a>) -> (&'a Inputs, &'a Inputs) {
        match sel {
            Some(s) => (&self.gathered[s].0, &self.gathered[s].1),
            None => (b.x, b.y),
        }
    }

    /// The reverse pass over a block after [`Plan::forward`] with `grad`:
    /// the root's adjoints are in `w.adj` (its row), and Σₑ adjₑ ∂kₑ/∂p is
    /// added to `pbar[leaf]` for every leaf.
    #[inline(always)]
    fn backward(&self, b: Block, w: &mut Work, pbar: &mut [f64]) {
        let m = b.m;
        let yr = b.y.row(b.j);
        // Every node but the root has exactly one parent (the plan is a
        // tree), which runs first: a product writes its operands' rows
        // (their own, below its index), a sum or scaling hands its row on
        // (`arow`), so a node's row is ready when it runs.
        for (i, node) in self.nodes.iter().enumerate().rev() {
            let (lo, hi) = w.adj.split_at_mut(i * BLOCK);
            let ar = (self.arow[i] - i) * BLOCK;
            let (ai, f) = (&hi[ar..ar + m], self.afac[i]);
            let vals = &w.vals;
            let val = |s: usize| &vals[self.vrow[s] * BLOCK..self.vrow[s] * BLOCK + m];
            let (v, aux, aux2) = (val(i), &w.aux[i * BLOCK..], &w.aux2[i * BLOCK..]);
            match node {
                Node::Stationary {
                    kind,
                    ell,
                    inv,
                    dims,
                    dist,
                    leaf,
                } => {
                    if let [l] = ell {
                        // ∂k/∂ℓ = dk/dr² · (−2r²/ℓ), with the kind fixed
                        // outside the loop so that `slope` folds into it;
                        // the rbf forms r² again from d² (its forward pass
                        // keeps none).
                        let c = -2.0 / l;
                        let inv = 1.0 / (l * l);
                        let d2 = &w.d2[dist * BLOCK..dist * BLOCK + m];
                        // Branch-free: the term is formed for every entry
                        // and kept where r² (never negative) is a positive
                        // finite number; two comparisons, which vectorise
                        // (`is_finite` tests bits lane by lane, and so does
                        // a comparison with the constant ∞: `opaque_inf`).
                        let inf = opaque_inf();
                        let term = |k: KernelKind, a: f64, v: f64, r2: f64| {
                            let t = a * slope(k, r2, v) * (c * r2);
                            if (r2 > 0.0) & (r2 < inf) { t } else { 0.0 }
                        };
                        use KernelKind::{Matern12, Matern32, Matern52, Rbf};
                        let aux = &aux[..m];
                        pbar[*leaf] += f * match *kind {
                            Rbf => sum_zip3(ai, v, d2, |a, v, d| term(Rbf, a, v, d * inv)),
                            Matern12 => sum_zip3(ai, v, aux, |a, v, r| term(Matern12, a, v, r)),
                            Matern32 => sum_zip3(ai, v, aux, |a, v, r| term(Matern32, a, v, r)),
                            Matern52 => sum_zip3(ai, v, aux, |a, v, r| term(Matern52, a, v, r)),
                            k => sum_zip3(ai, v, aux, |a, v, r| term(k, a, v, r)),
                        };
                    } else {
                        // ∂k/∂ℓₖ = dk/dr² · (−2 dₖ²/ℓₖ³): Σₑ slopeₑ dₑₖ² per
                        // column over the block, then scaled once per column.
                        let acc = &mut w.ard[..inv.len()];
                        acc.fill(0.0);
                        for e in 0..m {
                            let r2 = aux[e];
                            if !(r2 > 0.0 && r2.is_finite()) || ai[e] == 0.0 {
                                continue;
                            }
                            let sl = ai[e] * slope(*kind, r2, v[e]);
                            for_diffs(b.x.row(b.start + e), yr, *dims, |k, u| {
                                acc[k] += sl * (u * u);
                            });
                        }
                        for (k, (a, i)) in acc.iter().zip(inv).enumerate() {
                            pbar[leaf + k] += f * (-2.0 * i * i * i) * a;
                        }
                    }
                }
                Node::Periodic {
                    ell, period, leaf, ..
                } => {
                    let dl = f * sum_zip3(ai, v, aux, |a, v, x| a * v * x);
                    let dp = f * sum_zip3(ai, v, aux2, |a, v, x| a * v * x);
                    pbar[*leaf] += 4.0 * dl / (ell * ell * ell);
                    pbar[leaf + 1] += 2.0 / (ell * ell) * PI / (period * period) * dp;
                }
                Node::Linear { v: vs, dims, leaf } => {
                    for e in 0..m {
                        let xr = b.x.row(b.start + e);
                        let prods = coords(xr, *dims).zip(coords(yr, *dims));
                        let a = f * ai[e];
                        if vs.len() == 1 {
                            pbar[*leaf] += a * prods.map(|(u, w)| u * w).sum::<f64>();
                        } else {
                            for (k, (u, w)) in prods.enumerate() {
                                pbar[leaf + k] += a * u * w;
                            }
                        }
                    }
                }
                Node::Polynomial { degree, leaf, .. } => {
                    let integral = degree.fract() == 0.0 && degree.abs() < 64.0;
                    for e in 0..m {
                        if ai[e] == 0.0 {
                            continue;
                        }
                        let (base, a) = (aux[e], f * ai[e]);
                        if !integral {
                            pbar[*leaf] += a * v[e] * base.ln();
                        }
                        pbar[leaf + 1] +=
                            a * super::kernels::dot_product::polynomial_slope(*degree, base);
                    }
                }
                // Their operands share their row (`arow`).
                Node::Cosine { .. } | Node::White | Node::Constant | Node::Sum(..) => {}
                // Its sides read its value and adjoint.
                Node::Product(..) if self.fused[i].is_some() => {}
                Node::Product(p, q) => {
                    for (s, t) in [(p, q), (q, p)] {
                        let vt = val(*t);
                        let own = &mut lo[s * BLOCK..s * BLOCK + m];
                        for ((a, x), v) in own.iter_mut().zip(ai).zip(vt) {
                            *a = x * v;
                        }
                    }
                }
                Node::Scale { k, leaf, .. } => {
                    let vk = val(*k);
                    pbar[*leaf] += f * self.vfac[*k] * dot_by(ai, vk);
                }
                Node::Compiled {
                    program,
                    prep,
                    leaf,
                    slots,
                    ..
                } => {
                    let n = program.block_slots();
                    let np = program.n_params();
                    let g = &mut w.g[..np];
                    g.fill(0.0);
                    program.block_backward(
                        prep,
                        m,
                        ai,
                        &w.pv[*slots..*slots + n],
                        &mut w.pa[*slots..*slots + n],
                        g,
                    );
                    for (p, gk) in pbar[*leaf..leaf + np].iter_mut().zip(g.iter()) {
                        *p += f * gk;
                    }
                }
                Node::Rust {
                    kernel,
                    params,
                    sel,
                    leaf,
                } => {
                    let np = params.len();
                    let (gx, gy) = self.sides(*sel, b);
                    let yr = gy.row(b.j);
                    let g = &mut w.g[..np];
                    for (e, a) in ai.iter().enumerate() {
                        let xr = gx.row(b.start + e);
                        if b.swap {
                            kernel_entry_grad(*kernel, params, yr, xr, g);
                        } else {
                            kernel_entry_grad(*kernel, params, xr, yr, g);
                        }
                        for (p, gk) in pbar[*leaf..leaf + np].iter_mut().zip(g.iter()) {
                            *p += f * a * gk;
                        }
                    }
                }
            }
        }
    }

    /// The blocks of column j: rows `j..n` of X when `lower` (the lower
    /// triangle of a Gram matrix), all rows otherwise.
    fn blocks<'a>(
        x: &'a Inputs,
        y: &'a Inputs,
        j: usize,
        lower: bool,
    ) -> impl Iterator<Item = Block<'a>> {
        let first = if lower { j } else { 0 };
        (first..x.len()).step_by(BLOCK).map(move |start| {
            let m = BLOCK.min(x.len() - start);
            let diag = (lower && start == j).then_some(0);
            Block {
                x,
                y,
                j,
                start,
                m,
                diag,
                swap: false,
            }
        })
    }

    /// The blocks of column j of a Gram matrix over rows 0..=j (its
    /// upper triangle), the diagonal entry in the last.
    fn upper_blocks(x: &Inputs, j: usize) -> impl Iterator<Item = Block<'_>> {
        (0..=j).step_by(BLOCK).map(move |start| {
            let m = BLOCK.min(j + 1 - start);
            Block {
                x,
                y: x,
                j,
                start,
                m,
                diag: (j < start + m).then(|| j - start),
                swap: true,
            }
        })
    }

    /// K(X, X) [N, N] (the plan must be built with Y = X): the lower
    /// triangle by [`Plan::gram_lower_into`], mirrored.
    pub fn gram(&self, x: &Inputs) -> DMatrix<f64> {
        let n = x.len();
        let mut lower = tempest_math::pool::take(n * n);
        self.gram_lower_into(x, &mut lower);
        let k = tempest_math::linalg::symmetric_from_lower(&lower, n, |_, _, v| v);
        tempest_math::pool::give(lower);
        k
    }

    /// The lower triangle (diagonal included) of K(X, X) [N, N] written
    /// into `out` by columns (N² values; those above the diagonal are
    /// left as they are). The plan must be built with Y = X.
    pub fn gram_lower_into(&self, x: &Inputs, out: &mut [f64]) {
        let n = x.len();
        if n == 0 {
            return;
        }
        out[..n * n]
            .par_chunks_mut(n)
            .enumerate()
            .with_min_len(8)
            .for_each(|(j, col)| self.with_work(|w| self.gram_column(x, j, col, w)));
    }

    /// K(X, Y) [N, M] (no point of X is the same as a point of Y).
    pub fn cross(&self, x: &Inputs, y: &Inputs) -> DMatrix<f64> {
        let cols: Vec<Vec<f64>> = (0..y.len())
            .into_par_iter()
            .with_min_len(8)
            .map(|j| {
                self.with_work(|w| {
                    let mut col = Vec::with_capacity(x.len());
                    for b in Self::blocks(x, y, j, false) {
                        self.forward(b, false, w);
                        let at = col.len();
                        col.resize(at + b.m, 0.0);
                        self.root_values(w, &mut col[at..]);
                    }
                    col
                })
            })
            .collect();
        DMatrix::from_fn(x.len(), y.len(), |i, j| cols[j][i])
    }

    /// p̄ⱼ = Σᵢₖ K̄ᵢₖ ∂K(X, Y)ᵢₖ/∂pⱼ for every leaf, for K̄ [N, M] (the
    /// entries as [`Plan::cross`] has them: no point of X is the same as
    /// a point of Y). Columns of Y run in parallel, a zero column is
    /// skipped, and the columns' sums are added in column order, so the
    /// result does not depend on the number of threads.
    pub fn cross_adjoints(&self, x: &Inputs, y: &Inputs, k_bar: &DMatrix<f64>) -> Vec<f64> {
        let (n, l) = (x.len(), self.leaves);
        let partial: Vec<Vec<f64>> = (0..y.len())
            .into_par_iter()
            .with_min_len(8)
            .map(|j| {
                let col = &k_bar.as_slice()[j * n..(j + 1) * n];
                let mut acc = vec![0.0; l];
                if col.iter().all(|g| *g == 0.0) {
                    return acc;
                }
                self.with_work(|w| {
                    for b in Self::blocks(x, y, j, false) {
                        self.forward(b, true, w);
                        let root = (self.nodes.len() - 1) * BLOCK;
                        w.adj[root..root + b.m].copy_from_slice(&col[b.start..b.start + b.m]);
                        self.backward(b, w, &mut acc);
                    }
                });
                acc
            })
            .collect();
        let mut out = vec![0.0; l];
        for p in &partial {
            for (a, v) in out.iter_mut().zip(p) {
                *a += v;
            }
        }
        out
    }

    /// p̄ⱼ = ½ Σᵢₖ Wᵢₖ ∂K(X, X)ᵢₖ/∂pⱼ for every leaf, for a symmetric W
    /// [N, N] of which only the upper triangle (diagonal included) is
    /// read, a block of columns at a time as the weight hands them out
    /// ([`UpperColumns`]; the plan must be built with Y = X).
    ///
    /// The blocks run in parallel, the costliest (the most entries) first,
    /// each thread taking the next block when it is free; each block's sums
    /// are formed in a fixed order and the blocks' partial sums are added
    /// in block order, so the result does not depend on the number of
    /// threads or on which thread ran which block.
    pub fn adjoints<W: UpperColumns + ?Sized>(&self, x: &Inputs, wt: &W) -> Vec<f64> {
        let n = x.len();
        let l = self.leaves;
        let nb = n.div_ceil(SWEEP_COLUMNS);
        let block = |b: usize| {
            let i0 = b * SWEEP_COLUMNS;
            let i1 = (i0 + SWEEP_COLUMNS).min(n);
            wt.with_columns(i0, |cols| {
                let mut acc = vec![0.0; l];
                self.with_work(|w| {
                    for i in i0..i1 {
                        let at = Strided {
                            data: &cols.data[(i - i0) * cols.col..],
                            ..cols
                        };
                        self.adjoint_column(x, at, i, w, &mut acc);
                    }
                });
                acc
            })
        };
        // The blocks from the most entries to the fewest, each thread
        // taking the next when it is free (rayon's halving of an index
        // range left one thread a tenth of the pass alone at N = 300).
        let entries = |b: usize| {
            let (i0, i1) = (b * SWEEP_COLUMNS, ((b + 1) * SWEEP_COLUMNS).min(n));
            (i0..i1).map(|i| i + 1).sum::<usize>()
        };
        let slots: Vec<std::sync::OnceLock<Vec<f64>>> =
            (0..nb).map(|_| std::sync::OnceLock::new()).collect();
        run_largest_first(
            (0..nb).collect(),
            |&b| entries(b),
            |b| {
                let _ = slots[b].set(block(b));
            },
        );
        let partial: Vec<Vec<f64>> = slots
            .into_iter()
            .map(|s| s.into_inner().unwrap_or_default())
            .collect();
        let mut out = vec![0.0; l];
        for p in &partial {
            for (a, v) in out.iter_mut().zip(p) {
                *a += v;
            }
        }
        out
    }
}

/// Defines `$name`, which runs `$body` (an `#[inline(always)]` method, so
/// each version is compiled for its target with everything it inlines:
/// the plan's and compiled programs' block passes) compiled for AVX-512F
/// or AVX2 where [`isa`] found them, as it is elsewhere. The block loops
/// are element-wise arithmetic over arrays, so wider registers run them
/// in fewer instructions; no operation is fused or reordered (Rust does
/// not contract a·b + c), so every version gives the same bits.
macro_rules! column_pass {
    ($(#[$m:meta])* fn $name:ident<$($g:ident: $b:path),*>($($arg:ident: $ty:ty),*) => $body:ident, $avx2:ident, $avx512:ident, widest $wide:expr) => {
        $(#[$m])*
        fn $name<$($g: $b + ?Sized),*>(&self, $($arg: $ty),*) {
            match isa() {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `isa` found AVX-512F on this processor.
                Isa::Avx512 if $wide => unsafe { self.$avx512($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `isa` found AVX-512F, which includes AVX2.
                Isa::Avx512 => unsafe { self.$avx2($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `isa` found AVX2 on this processor.
                Isa::Avx2 => unsafe { self.$avx2($($arg),*) },
                Isa::Baseline => self.$body($($arg),*),
            }
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f")]
        fn $avx512<$($g: $b + ?Sized),*>(&self, $($arg: $ty),*) {
            self.$body($($arg),*)
        }

        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $avx2<$($g: $b + ?Sized),*>(&self, $($arg: $ty),*) {
            self.$body($($arg),*)
        }
    };
}

impl Plan<'_> {
    // Which width each pass takes where the processor has AVX-512 was
    // measured on the CO2 model (benches/README.md): the Gram pass runs
    // faster with 512-bit registers, the reverse pass (more loads and
    // stores per operation) with 256-bit ones.
    column_pass! {
        /// Rows j.. of column j of the Gram matrix into `col[j..]`.
        fn gram_column<>(x: &Inputs, j: usize, col: &mut [f64], w: &mut Work)
            => gram_column_body, gram_column_avx2, gram_column_avx512, widest true
    }

    column_pass! {
        /// Column j's share of [`Plan::adjoints`] (its rows 0..=j, their
        /// weights entry j·`wcol.row` of `wcol.data`), added to `acc`
        /// \[leaves\].
        fn adjoint_column<>(x: &Inputs, wcol: Strided<'_>, j: usize, w: &mut Work, acc: &mut [f64])
            => adjoint_column_body, adjoint_column_avx2, adjoint_column_avx512, widest false
    }

    #[inline(always)]
    fn gram_column_body(&self, x: &Inputs, j: usize, col: &mut [f64], w: &mut Work) {
        for b in Self::blocks(x, x, j, true) {
            self.forward(b, false, w);
            self.root_values(w, &mut col[b.start..b.start + b.m]);
        }
    }

    #[inline(always)]
    fn adjoint_column_body(
        &self,
        x: &Inputs,
        wcol: Strided<'_>,
        j: usize,
        w: &mut Work,
        acc: &mut [f64],
    ) {
        for b in Self::upper_blocks(x, j) {
            self.forward(b, true, w);
            let root = (self.nodes.len() - 1) * BLOCK;
            let adj = &mut w.adj[root..root + b.m];
            if wcol.row == 1 {
                adj.copy_from_slice(&wcol.data[b.start..b.start + b.m]);
            } else {
                let from = wcol.data[b.start * wcol.row..].iter().step_by(wcol.row);
                for (a, v) in adj.iter_mut().zip(from) {
                    *a = *v;
                }
            }
            if let Some(d) = b.diag {
                w.adj[root + d] *= 0.5;
            }
            self.backward(b, w, acc);
        }
    }
}

/// An upper bound on the squared distance between a point of X and one of
/// Y over the selected columns: Σₖ (maxₖ − minₖ)² over both sets.
fn reach(x: &Inputs, y: &Inputs, dims: Option<&[usize]>) -> f64 {
    let d = x.dim();
    let mut lo = vec![f64::INFINITY; d];
    let mut hi = vec![f64::NEG_INFINITY; d];
    for set in [x, y] {
        for i in 0..set.len() {
            for (k, v) in set.row(i).iter().enumerate() {
                lo[k] = lo[k].min(*v);
                hi[k] = hi[k].max(*v);
            }
        }
    }
    let span = |k: usize| (hi[k] - lo[k]).max(0.0).powi(2);
    match dims {
        Some(ds) => ds.iter().map(|&k| span(k)).sum(),
        None => (0..d).map(span).sum(),
    }
}

/// eˣ in place for an rbf's exponents −r²/2ℓ², runs of [`FAR_RUN`] all
/// below −708 (entries far apart next to a short length scale, where eˣ
/// is 0) written as zeros without the exponential, the others by one
/// [`exp_in_place`] per span of them: the same numbers as
/// [`exp_in_place`] over the whole.
#[inline(always)]
fn exp_near(xs: &mut [f64]) {
    let n = xs.len();
    // The start of the span of runs not yet raised.
    let mut from = 0;
    for i in (0..n).step_by(FAR_RUN) {
        let end = (i + FAR_RUN).min(n);
        if all_far(&xs[i..end]) {
            if from < i {
                exp_in_place(&mut xs[from..i]);
            }
            xs[i..end].fill(0.0);
            from = end;
        }
    }
    if from < n {
        exp_in_place(&mut xs[from..]);
    }
}

/// Whether every entry is below −708 (NaN is not), by lanes of eight
/// (a comparison and a blend per lane: vectorises).
#[inline(always)]
fn all_far(run: &[f64]) -> bool {
    let (chunks, rest) = run.as_chunks::<8>();
    let mut near = [0.0f64; 8];
    for c in chunks {
        for k in 0..8 {
            near[k] = if c[k] < -708.0 { near[k] } else { 1.0 };
        }
    }
    near.iter().all(|&v| v == 0.0) && rest.iter().all(|&v| v < -708.0)
}

/// Entries per run of [`exp_near`]'s test.
const FAR_RUN: usize = 32;

/// A stationary kernel's values from r² (0 when r² overflowed).
#[inline(always)]
fn stationary_values(kind: KernelKind, r2: &[f64], out: &mut [f64]) {
    use super::kernels::stationary as st;
    match kind {
        KernelKind::Rbf => {
            for (o, r) in out.iter_mut().zip(r2) {
                *o = -0.5 * r;
            }
            exp_in_place(out);
        }
        KernelKind::Matern12 => out
            .iter_mut()
            .zip(r2)
            .for_each(|(o, r)| *o = st::matern12(*r)),
        KernelKind::Matern32 => out
            .iter_mut()
            .zip(r2)
            .for_each(|(o, r)| *o = st::matern32(*r)),
        KernelKind::Matern52 => out
            .iter_mut()
            .zip(r2)
            .for_each(|(o, r)| *o = st::matern52(*r)),
        _ => out.fill(f64::NAN),
    }
}

/// dk/dr² from r² > 0 (finite) and the value k, without a second
/// exponential.
#[inline(always)]
fn slope(kind: KernelKind, r2: f64, k: f64) -> f64 {
    match kind {
        KernelKind::Rbf => -0.5 * k,
        KernelKind::Matern12 => -k / (2.0 * r2.sqrt()),
        KernelKind::Matern32 => {
            let s = (3.0 * r2).sqrt();
            -1.5 * k / (1.0 + s)
        }
        KernelKind::Matern52 => {
            let s = (5.0 * r2).sqrt();
            -(5.0 / 6.0) * (1.0 + s) * k / (1.0 + s + s * s / 3.0)
        }
        _ => f64::NAN,
    }
}

/// p̄ = ½ Σᵢₖ Wᵢₖ ∂K(X, X)ᵢₖ/∂p for every leaf p of the kernel (see
/// [`KernelValue::leaves`]), by one reverse pass over column blocks
/// ([`Plan::adjoints`]): the cost does not grow with the number of
/// parameters. `None` when the kernel has no reverse rule (interpreted
/// model-file or Rust parts). Only the upper triangle (diagonal
/// included) of the symmetric W is read, a block of columns at a time
/// ([`UpperColumns`]). The result does not depend on the number of
/// threads.
pub fn leaf_adjoints<W: UpperColumns + ?Sized>(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    w: &W,
) -> Result<Option<Vec<f64>>, tempest_core::error::Error> {
    kernel.validate(x.dim())?;
    if w.dim() != x.len() {
        return Err(tempest_core::error::Error::internal(format!(
            "a weight of side {} for a Gram matrix of side {}",
            w.dim(),
            x.len()
        )));
    }
    Ok(Plan::new(kernel, x, x).map(|p| p.adjoints(x, w)))
}

/// p̄ = Σᵢₖ K̄ᵢₖ ∂K(X, Y)ᵢₖ/∂p for every leaf of the kernel, K̄ [N, M],
/// by one reverse pass over column blocks ([`Plan::cross_adjoints`]);
/// `None` when the kernel has no plan (interpreted model-file parts) or the
/// inputs' widths differ. The kernel must be validated for X's width.
pub fn cross_leaf_adjoints(
    kernel: &KernelValue<f64>,
    x: &Inputs,
    y: &Inputs,
    k_bar: &DMatrix<f64>,
) -> Option<Vec<f64>> {
    if x.dim() != y.dim() || k_bar.shape() != (x.len(), y.len()) {
        return None;
    }
    Plan::new(kernel, x, y).map(|p| p.cross_adjoints(x, y, k_bar))
}

impl KernelValue<f64> {
    /// Whether the kernel has a compiled model-file part, whose entries
    /// each run a program: by blocks they cost a fraction of that.
    pub fn has_program(&self) -> bool {
        match self {
            KernelValue::Compiled { .. } => true,
            KernelValue::Sum(a, b) | KernelValue::Product(a, b) => {
                a.has_program() || b.has_program()
            }
            KernelValue::Scale(_, k) => k.has_program(),
            _ => false,
        }
    }

    /// K(X, X) [N, N]: by blocks when the kernel has a compiled part
    /// ([`KernelValue::has_program`]) and a plan, else entry by entry
    /// ([`KernelValue::gram`], the built-ins' own entries).
    pub fn gram_programs_by_blocks(
        &self,
        x: &Inputs,
    ) -> Result<DMatrix<f64>, tempest_core::error::Error> {
        if self.has_program() {
            self.gram_fast(x)
        } else {
            self.gram(x)
        }
    }

    /// K(X, Y) [N, M], by blocks when the kernel has a compiled part, as
    /// [`KernelValue::gram_programs_by_blocks`].
    pub fn cross_programs_by_blocks(
        &self,
        x: &Inputs,
        y: &Inputs,
    ) -> Result<DMatrix<f64>, tempest_core::error::Error> {
        if self.has_program() {
            self.cross_fast(x, y)
        } else {
            self.cross(x, y)
        }
    }

    /// K(X, X) [N, N]: by blocks when the kernel has a plan, else entry by
    /// entry ([`KernelValue::gram`]).
    pub fn gram_fast(&self, x: &Inputs) -> Result<DMatrix<f64>, tempest_core::error::Error> {
        self.validate(x.dim())?;
        match Plan::new(self, x, x) {
            Some(p) => Ok(p.gram(x)),
            None => self.gram(x),
        }
    }

    /// The lower triangle (diagonal included) of K(X, X) [N, N] written
    /// into `out` by columns (N² values; those above the diagonal may be
    /// left as they are): by blocks when the kernel has a plan, else from
    /// [`KernelValue::gram`].
    pub fn gram_lower_into(
        &self,
        x: &Inputs,
        out: &mut [f64],
    ) -> Result<(), tempest_core::error::Error> {
        self.validate(x.dim())?;
        match Plan::new(self, x, x) {
            Some(p) => p.gram_lower_into(x, out),
            None => {
                let k = self.gram(x)?;
                out[..k.len()].copy_from_slice(k.as_slice());
            }
        }
        Ok(())
    }

    /// K(X, Y) [N, M]: by blocks when the kernel has a plan, else entry by
    /// entry ([`KernelValue::cross`]).
    pub fn cross_fast(
        &self,
        x: &Inputs,
        y: &Inputs,
    ) -> Result<DMatrix<f64>, tempest_core::error::Error> {
        self.validate(x.dim())?;
        if x.dim() != y.dim() {
            return self.cross(x, y);
        }
        match Plan::new(self, x, y) {
            Some(p) => Ok(p.cross(x, y)),
            None => self.cross(x, y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KernelArg;
    use tempest_syntax::ast::Span;

    /// exp_near gives exp_in_place's bits: runs far below −708, runs
    /// straddling it, NaN and −∞ among far entries, a short last run.
    #[test]
    fn exp_near_is_the_exponential_with_far_runs_skipped() {
        // Runs of 32: near; far; far with NaN and −∞; straddling −708;
        // far; then 37 near and a short far run at the end.
        let mut xs: Vec<f64> = (0..32).map(|i| -700.0 - i as f64 * 0.3).collect();
        xs.extend((0..32).map(|i| -900.0 - i as f64));
        xs.extend((0..32).map(|i| -720.0 - i as f64));
        xs[70] = f64::NAN;
        xs[80] = f64::NEG_INFINITY;
        xs.extend((0..32).map(|i| if i % 2 == 0 { -707.9 } else { -708.1 }));
        xs.extend([-1e300; 32]);
        xs.extend((0..37).map(|i| -3.0 * i as f64));
        xs.extend([-710.0, -800.0, -708.5]);
        let mut want = xs.clone();
        exp_in_place(&mut want);
        let mut got = xs.clone();
        exp_near(&mut got);
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "entry {i}: {} -> {a} vs {b}",
                xs[i]
            );
        }
        assert!(got[70].is_nan() && got[40] == 0.0 && got[0] > 0.0 && got[96] > 0.0);
    }

    /// The baseline, AVX2 and AVX-512 versions of the column passes give
    /// the same bits (those the processor runs), for built-in kernels,
    /// scalings, sums, products and a compiled model-file kernel.
    #[test]
    fn every_compiled_version_of_the_column_passes_gives_the_same_bits() {
        // a² rbf(l) + periodic(l, 2) matern32(l) + a rq(l, al), with rq the
        // program of `(1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha)`.
        let (a, l, al) = (1.3, 0.7, 1.5);
        let n = 300;
        let x = DMatrix::from_fn(n, 2, |i, k| ((i * 7 + k * 3) as f64 * 0.37).sin() * 2.0);
        let base = |kind: KernelKind, args: &[f64]| KernelValue::Base {
            kind,
            args: args.iter().map(|v| KernelArg::Scalar(*v)).collect(),
            dims: None,
            span: Span::default(),
        };
        use crate::program::{Inst, KernelProgram};
        use tempest_syntax::ast::BinOp::{Add, Div, Mul, Pow};
        let rq = KernelProgram::new(
            vec![
                Inst::Param(0),
                Inst::Param(1),
                Inst::Const(1.0),
                Inst::Sqdist,
                Inst::Const(2.0),
                Inst::Bin(Mul, 4, 1),
                Inst::PowI(0, 2),
                Inst::Bin(Mul, 5, 6),
                Inst::Bin(Div, 3, 7),
                Inst::Bin(Add, 2, 8),
                Inst::Neg(1),
                Inst::Bin(Pow, 9, 10),
            ],
            11,
            2,
        )
        .expect("a well-formed program");
        let compiled = KernelValue::Compiled {
            name: "rq".into(),
            program: std::sync::Arc::new(rq),
            params: vec![l, al],
            dims: None,
            span: Span::default(),
        };
        let k = KernelValue::Sum(
            Box::new(KernelValue::Sum(
                Box::new(KernelValue::Scale(
                    a * a,
                    Box::new(base(KernelKind::Rbf, &[l])),
                )),
                Box::new(KernelValue::Product(
                    Box::new(base(KernelKind::Periodic, &[l, 2.0])),
                    Box::new(base(KernelKind::Matern32, &[l])),
                )),
            )),
            Box::new(KernelValue::Scale(a, Box::new(compiled))),
        );
        let xi = Inputs::from_matrix(&x);
        let plan = Plan::new(&k, &xi, &xi).expect("a plan");
        let wt = DMatrix::from_fn(n, n, |i, j| ((i + j) as f64 * 0.11).cos());
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for j in [0, 1, 77, n - 1] {
            let (mut col, mut acc) = (vec![0.0; n], vec![0.0; plan.leaves()]);
            let wcol = Strided {
                data: &wt.as_slice()[j * n..],
                col: n,
                row: 1,
            };
            plan.gram_column_body(&xi, j, &mut col, &mut plan.work());
            plan.adjoint_column_body(&xi, wcol, j, &mut plan.work(), &mut acc);
            // (The first column's upper part is the diagonal alone, where
            // only the scalings' derivatives are not 0.)
            let nonzero = acc.iter().filter(|v| **v != 0.0).count();
            assert!(acc.iter().all(|v| v.is_finite()) && (nonzero == acc.len() || j == 0));
            #[cfg(target_arch = "x86_64")]
            for (wide, detected) in [
                (false, std::arch::is_x86_feature_detected!("avx2")),
                (true, std::arch::is_x86_feature_detected!("avx512f")),
            ] {
                if !detected {
                    continue;
                }
                let (mut c2, mut a2) = (vec![0.0; n], vec![0.0; plan.leaves()]);
                // SAFETY: the processor has the instructions (tested above).
                unsafe {
                    if wide {
                        plan.gram_column_avx512(&xi, j, &mut c2, &mut plan.work());
                        plan.adjoint_column_avx512(&xi, wcol, j, &mut plan.work(), &mut a2);
                    } else {
                        plan.gram_column_avx2(&xi, j, &mut c2, &mut plan.work());
                        plan.adjoint_column_avx2(&xi, wcol, j, &mut plan.work(), &mut a2);
                    }
                }
                assert_eq!(bits(&col), bits(&c2), "Gram column {j}, 512 bits: {wide}");
                assert_eq!(
                    bits(&acc),
                    bits(&a2),
                    "adjoints of column {j}, 512 bits: {wide}"
                );
            }
        }
    }
}
