//! The gradient through a whitened latent GP whose kernel has params:
//! L = chol(K(θ) + 10⁻⁶I) and L̄ (from the log density's reverse pass)
//! back to θ.
//!
//! The first way is the one backward pass: θ as reverse-mode scalars
//! evaluate the kernel's leaves, which a matrix tape joined to the same
//! sweep takes as a node ([`crate::math::tape::Tape::gather`]) into the
//! Gram node ([`record_gram`]) and the Cholesky factor, so the tape's
//! backward pass from L̄ carries K̄, the leaves' adjoints and θ̄ in one go.
//! A kernel without leaves (interpreted model-file parts) takes the
//! second: forward-mode passes over the kernel entries, eight coordinates
//! at a time.

use super::{Density, LATENT_JITTER, Latent, Work};
use crate::error::Error;
use crate::ir::eval::Env;
use crate::ir::logdensity::DensityProgram;
use crate::ir::value::Value;
use crate::math::adjoint;
use crate::math::reverse::{self, Rev};
use crate::math::scalar::CHUNK;
use crate::math::tape::{Tape, Var};
use crate::model::gram_vjp::record_gram;
use ad_trait::forward_ad::adfn::adfn;
use nalgebra::DMatrix;

impl Density {
    /// Whether a latent GP's kernel has params and leaves, so that its
    /// factor is recorded on the tape at every gradient (decided once:
    /// it depends on the kernel's form, not on the params' values).
    pub fn latent_factor_on_tape(&self) -> bool {
        self.latent.as_ref().is_some_and(|lt| lt.on_tape)
    }

    /// Whether a latent GP's kernel has params and leaves (built-in,
    /// compiled model-file or Rust parts; its inputs are data, so their
    /// reverse rules are not needed), read off the kernel at the initial point (its form does
    /// not depend on the values; a kernel that cannot be evaluated there
    /// keeps the other way, which reports its error where it arises).
    pub(super) fn kernel_has_leaves(&self) -> bool {
        let Some(lt) = self
            .latent
            .as_ref()
            .filter(|lt| !lt.kernel_coords.is_empty())
        else {
            return false;
        };
        let (params, _, _) = self.params_at(&self.initial());
        Env::new(&self.bound, &self.hypers, &params, &[])
            .kernel(&lt.kernel)
            .is_ok_and(|k| k.leaves().is_some())
    }

    /// log π(x) and its gradient (into `grad`) with the latent GP's factor
    /// recorded on a tape joined to a reverse sweep over the kernel's
    /// coordinates (for a kernel with leaves:
    /// [`Density::latent_factor_on_tape`]).
    pub(super) fn kernel_on_tape(
        &self,
        lt: &Latent,
        p: &DensityProgram,
        x: &[f64],
        grad: &mut [f64],
        work: &mut Work,
    ) -> Result<f64, Error> {
        let (params, _, dtheta) = self.params_at(x);
        let values = self.coord_values(&params, &lt.kernel_coords);
        reverse::record(&values, |vars| {
            let (tape, l) = self.record_factor(lt, &params, vars)?;
            let (lp, l_bar) = self.compiled_grad_at(p, x, grad, work, Some(tape.value(l)))?;
            if let Some(l_bar) = l_bar {
                let g = tape.vjp(l, l_bar)?;
                for (&coord, v) in lt.kernel_coords.iter().zip(vars) {
                    grad[coord] += g.rev(*v) * dtheta[coord];
                }
            }
            Ok(lp)
        })
    }

    /// θ → the kernel's leaves (in `Rev`, on the open sweep) → K → L on a
    /// fresh tape: the tape and L's node. The factor is
    /// [`Density::factor`]'s, to the bit.
    fn record_factor(
        &self,
        lt: &Latent,
        params: &[Value<f64>],
        vars: &[Rev],
    ) -> Result<(Tape, Var), Error> {
        let ps = self.params_with(params, &lt.kernel_coords, |c, r: &mut Rev| *r = vars[c]);
        let hypers: Vec<Value<Rev>> = self.hypers.iter().map(Value::lift).collect();
        let kernel = Env::new(&self.bound, &hypers, &ps, &[]).kernel(&lt.kernel)?;
        let leaves = kernel
            .leaves()
            .ok_or_else(|| Error::internal("a latent GP's kernel lost its leaves"))?;
        let k64 = Env::new(&self.bound, &self.hypers, params, &[]).kernel(&lt.kernel)?;
        let mut tape = Tape::new();
        let theta = tape.gather(&leaves)?;
        let (n, d) = (lt.inputs.len(), lt.inputs.dim());
        let inputs = tape.constant(DMatrix::from_row_slice(n, d, lt.inputs.as_flat()));
        let k = record_gram(&mut tape, &k64, inputs, Some(theta))?;
        let l = tape.cholesky_jitter(k, LATENT_JITTER, 0.0, "the prior covariance K")?;
        Ok((tape, l))
    }

    /// The values of the params' entries at x coordinates `coords` (x holds
    /// matrices row-major, as `flatten`).
    pub(super) fn coord_values(&self, params: &[Value<f64>], coords: &[usize]) -> Vec<f64> {
        coords
            .iter()
            .map(|&coord| {
                let s = self
                    .slots
                    .iter()
                    .find(|s| coord >= s.offset && coord < s.offset + s.len());
                s.and_then(|s| params[s.param].flatten().get(coord - s.offset).copied())
                    .unwrap_or(0.0)
            })
            .collect()
    }

    /// Push L̄ (the adjoint of the Cholesky factor L of K + 10⁻⁶I, lower
    /// triangular [n, n]) back to the params of the kernel: K̄ by the
    /// Cholesky rule ([`adjoint::cholesky_vjp`], symmetric), and the
    /// derivative in θ is Σᵢⱼ K̄ᵢⱼ ∂Kᵢⱼ/∂θ, one eight-tangent pass over the
    /// kernel entries per eight coordinates.
    pub(super) fn kernel_gradient(
        &self,
        lt: &Latent,
        l: &DMatrix<f64>,
        l_bar: &DMatrix<f64>,
        params: &[Value<f64>],
        dtheta: &[f64],
        grad: &mut [f64],
    ) -> Result<(), Error> {
        // half_trace_w_dk gives ½ Σ W ∂K; W = 2K̄ gives Σ K̄ ∂K.
        let mut w = adjoint::cholesky_vjp(l, l_bar);
        w *= 2.0;
        if lt.kernel_coords.len() <= 4 {
            self.kernel_chunks::<4>(lt, &w, params, dtheta, grad)
        } else {
            self.kernel_chunks::<CHUNK>(lt, &w, params, dtheta, grad)
        }
    }

    /// Σᵢⱼ (W/2)ᵢⱼ ∂Kᵢⱼ/∂θ in the kernel's coordinates, N per dual pass.
    fn kernel_chunks<const N: usize>(
        &self,
        lt: &Latent,
        w: &DMatrix<f64>,
        params: &[Value<f64>],
        dtheta: &[f64],
        grad: &mut [f64],
    ) -> Result<(), Error>
    where
        adfn<N>: crate::model::custom::Scalar,
    {
        let hypers: Vec<Value<adfn<N>>> = self.hypers.iter().map(Value::lift).collect();
        let k64 = Env::new(&self.bound, &self.hypers, params, &[]).kernel(&lt.kernel)?;
        let pbar = tempest_infer::gradients::leaf_adjoints(&k64, &lt.inputs, w)?;
        for chunk in lt.kernel_coords.chunks(N) {
            let seeded = self.seeded_params::<N>(params, chunk);
            let env = Env::new(&self.bound, &hypers, &seeded, &[]);
            let kernel = env.kernel(&lt.kernel)?;
            let g = tempest_infer::gradients::half_trace_w_dk_via(
                &kernel,
                pbar.as_deref(),
                &lt.inputs,
                || w,
            )?;
            for (c, &coord) in chunk.iter().enumerate() {
                grad[coord] += g[c] * dtheta[coord];
            }
        }
        Ok(())
    }
}
