//! The inducing points of the latent GPs: one set Z [M, D] shared by all
//! of them, or, for additive GPs on groups of a deep kernel's features
//! (`deep(k, net, groups = G)`), one set Z_j [M, W] per latent GP j, on
//! its own W = F / G columns jW .. (j + 1)W of the features.
//!
//! Every set has its own K_ZZ and projection; the kernel (and its hypers)
//! is shared. The optimised coordinates hold the sets' Z back to back,
//! each row-major.

use super::grid::Grid;
use super::kmeans::centres;
use super::sparse::{Inducing, Marginals, Projection};
use crate::error::Error;
use crate::model::kernel::{Inputs, KernelValue};
use nalgebra::DMatrix;
use std::ops::Range;
use tempest_variational::posterior::Whitened;

/// One shared set of inducing points, or one per latent GP.
pub struct InducingSets {
    /// The sets: one, or one per latent GP.
    pub sets: Vec<Inducing>,
    /// With groups: the width W of each set's columns.
    pub width: Option<usize>,
}

/// A batch projected on every set: with groups the inputs each set sees
/// [B, W], and the projections.
pub struct Projections {
    /// Each group's inputs (none for one shared set: it sees the batch's
    /// kernel inputs themselves; see [`Projections::inputs`]).
    pub x: Vec<Inputs>,
    /// Each set's projection.
    pub p: Vec<Projection>,
}

/// Columns `range` of every point of `x`.
fn columns(x: &Inputs, range: Range<usize>) -> Inputs {
    let mut out = Vec::with_capacity(x.len() * range.len());
    for i in 0..x.len() {
        out.extend_from_slice(&x.row(i)[range.clone()]);
    }
    Inputs::from_flat(out, range.len())
}

impl InducingSets {
    /// `m` inducing points per set by k-means of the kernel's inputs `x`
    /// (each group's columns with `groups = Some(G)`), seeded; with
    /// `grid`, on a regular grid over each set's (one-dimensional) inputs.
    ///
    /// k-means reads `stop` (see [`centres`]).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        kernel: &KernelValue<f64>,
        x: &Inputs,
        m: usize,
        groups: Option<usize>,
        seed: u64,
        jitter: f64,
        grid: bool,
        stop: &crate::interrupt::StopFlag,
    ) -> Result<InducingSets, Error> {
        let width = groups.map(|g| x.dim() / g.max(1));
        if grid {
            let sets = (0..groups.unwrap_or(1))
                .map(|j| {
                    let g = Grid::over((0..x.len()).map(|i| x.row(i)[j]), m);
                    Inducing::on_grid(kernel, g, jitter)
                })
                .collect::<Result<_, _>>()?;
            return Ok(InducingSets { sets, width });
        }
        let zs: Vec<Inputs> = match (groups, width) {
            (Some(g), Some(w)) => (0..g)
                .map(|j| {
                    centres(
                        &columns(x, j * w..(j + 1) * w),
                        m,
                        seed.wrapping_add(j as u64),
                        stop,
                    )
                })
                .collect::<Result<_, _>>()?,
            _ => vec![centres(x, m, seed, stop)?],
        };
        InducingSets::new(kernel, zs, width, jitter)
    }

    /// The sets at inputs `zs`, each K_ZZ factored.
    pub fn new(
        kernel: &KernelValue<f64>,
        zs: Vec<Inputs>,
        width: Option<usize>,
        jitter: f64,
    ) -> Result<InducingSets, Error> {
        let sets = zs
            .into_iter()
            .map(|z| Inducing::new(kernel, z, jitter))
            .collect::<Result<_, _>>()?;
        Ok(InducingSets { sets, width })
    }

    /// M, the points per set.
    pub fn len(&self) -> usize {
        self.sets.first().map_or(0, Inducing::len)
    }

    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The columns each set's points have.
    pub fn dim(&self) -> usize {
        self.sets.first().map_or(0, |s| s.z.dim())
    }

    /// The set of latent GP `c`.
    pub fn set_of(&self, c: usize) -> usize {
        if self.sets.len() == 1 { 0 } else { c }
    }

    /// The latent GPs of set `s` among `latents`.
    pub fn latents_of(&self, s: usize, latents: usize) -> Range<usize> {
        if self.sets.len() == 1 {
            0..latents
        } else {
            s..s + 1
        }
    }

    /// The first column of set `s`'s inputs in the kernel's inputs.
    pub fn first_column(&self, s: usize) -> usize {
        self.width.map_or(0, |w| s * w)
    }

    /// Project a batch's kernel inputs on every set.
    pub fn project(&self, kernel: &KernelValue<f64>, x: &Inputs) -> Result<Projections, Error> {
        let mut out = Projections {
            x: Vec::new(),
            p: Vec::with_capacity(self.sets.len()),
        };
        for (s, set) in self.sets.iter().enumerate() {
            match self.width {
                // Each group's columns, kept for the reverse pass.
                Some(w) => {
                    let xs = columns(x, s * w..(s + 1) * w);
                    out.p.push(set.project(kernel, &xs)?);
                    out.x.push(xs);
                }
                None => out.p.push(set.project(kernel, x)?),
            }
        }
        Ok(out)
    }

    /// Every set's Z, back to back, row-major.
    pub fn flat(&self) -> Vec<f64> {
        self.sets
            .iter()
            .flat_map(|s| s.z.as_flat().iter().copied())
            .collect()
    }

    /// The number of coordinates in [`InducingSets::flat`].
    pub fn flat_len(&self) -> usize {
        self.sets.iter().map(|s| s.z.as_flat().len()).sum()
    }

    /// The same sets at other inputs (as [`InducingSets::flat`] lays them
    /// out), each K_ZZ factored again.
    pub fn moved(
        &self,
        kernel: &KernelValue<f64>,
        flat: &[f64],
        jitter: f64,
    ) -> Result<InducingSets, Error> {
        let per = self.len() * self.dim();
        let zs = (0..self.sets.len())
            .map(|s| Inputs::from_flat(flat[s * per..(s + 1) * per].to_vec(), self.dim()))
            .collect();
        InducingSets::new(kernel, zs, self.width, jitter)
    }

    /// The same sets' inputs with the kernel refactored (new hypers).
    pub fn refactored(
        &self,
        kernel: &KernelValue<f64>,
        jitter: f64,
    ) -> Result<InducingSets, Error> {
        let sets = self
            .sets
            .iter()
            .map(|s| match &s.grid {
                Some((g, _)) => Inducing::on_grid(kernel, g.clone(), jitter),
                None => Inducing::new(kernel, s.z.clone(), jitter),
            })
            .collect::<Result<_, _>>()?;
        Ok(InducingSets {
            sets,
            width: self.width,
        })
    }

    /// The largest jitter any K_ZZ needed beyond the setting.
    pub fn extra_jitter(&self) -> f64 {
        self.sets.iter().map(|s| s.chol.jitter).fold(0.0, f64::max)
    }

    /// Every set's Z as rows, the sets one after another.
    pub fn rows(&self) -> Vec<Vec<f64>> {
        self.sets
            .iter()
            .flat_map(|s| (0..s.len()).map(move |i| s.z.row(i).to_vec()))
            .collect()
    }
}

impl Projections {
    /// The inputs set `s` sees, given the batch's kernel inputs `all`.
    pub fn inputs<'a>(&'a self, all: &'a Inputs, s: usize) -> &'a Inputs {
        self.x.get(s).unwrap_or(all)
    }

    /// The projection latent GP `c` uses.
    pub fn of<'a>(&'a self, sets: &InducingSets, c: usize) -> &'a Projection {
        &self.p[sets.set_of(c)]
    }

    /// Latent means and variances [B, J] of every latent GP under its q,
    /// with prior mean μ₀.
    pub fn marginals(&self, sets: &InducingSets, qs: &[Whitened], mean0: f64) -> Marginals {
        if self.p.len() == 1 {
            return self.p[0].marginals(qs, mean0);
        }
        let b = self.p.first().map_or(0, |p| p.a.nrows());
        let mut out = Marginals {
            mean: DMatrix::zeros(b, qs.len()),
            var: DMatrix::zeros(b, qs.len()),
            ar: Vec::with_capacity(qs.len()),
        };
        for (c, q) in qs.iter().enumerate() {
            let one = self.of(sets, c).marginals(std::slice::from_ref(q), mean0);
            out.mean.set_column(c, &one.mean.column(0));
            out.var.set_column(c, &one.var.column(0));
            out.ar.extend(one.ar);
        }
        out
    }
}
