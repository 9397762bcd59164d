//! The log marginal likelihood of exact GP regression and its gradient.
//!
//! With A = K + diag(σ²/t) (+ jitter), r = y − m − offset and α = A⁻¹r,
//!
//!   log p(y)ᵗ-normalised = −½ rᵀα − ½ log|A| − (N/2) log 2π + Σₙ log cₙ,
//!
//! where log cₙ = (1 − t)/2 · log(2πσₙ²) − ½ log t accounts for the power t
//! (t = 1 gives the usual marginal likelihood; t = 0 gives 0).
//!
//! The gradient uses the matrix identity
//! ∂/∂θ = ½ tr(W ∂A/∂θ) + αᵀ ∂(m + offset)/∂θ + ∂Σlog c/∂θ
//! with W = ααᵀ − A⁻¹: the kernel's part by its block reverse pass, the
//! rest by one reverse sweep through the model-file expressions (a kernel
//! without reverse rules by forward-mode autodiff of its entries, eight
//! directions per pass).
//! [`GpModel::lml_grad_autodiff`] instead pushes duals through the whole
//! computation, including the Cholesky factorisation: slower, and used to
//! check the first.

use super::model::{GpModel, Pieces};
use crate::error::Error;
use crate::math::adjoint::LmlWeight;
use crate::math::linalg::{
    JitteredCholesky, cholesky_generic, cholesky_jitter, cholesky_jitter_with,
    cholesky_jitter_with_inverse, solve_lower_generic,
};
use crate::math::reverse::{self, Rev};
use crate::math::scalar::{CHUNK, Dual8};
use ad_trait::AD;
use ad_trait::forward_ad::adfn::adfn;
use nalgebra::ComplexField;
use nalgebra::{DMatrix, DVector};
use tempest_infer::gradients::{
    half_trace_w_dk_via, kernel_term, leaf_adjoints, reverse_sweeps, seed_chunk,
};
use tempest_model::custom::Scalar;

/// The factorisation and vectors at one θ, reused for gradients and
/// predictions.
pub struct LmlState {
    /// log marginal likelihood (of the tempered model).
    pub lml: f64,
    /// Cholesky of A; `None` when t = 0 (the posterior is the prior).
    pub chol: Option<JitteredCholesky>,
    /// α = A⁻¹ r, \[N\].
    pub alpha: DVector<f64>,
    /// The power t of the likelihood.
    pub t: f64,
}

const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_8;

/// The matrix factored, as errors name it.
const WHAT: &str = "the covariance matrix K + noise";

impl GpModel {
    /// The log marginal likelihood at θ, with the factorisation.
    pub fn lml(&self, theta: &[f64]) -> Result<LmlState, Error> {
        let n = self.inputs.len();
        let p = self.pieces::<f64>(theta, &self.bound, n)?;
        self.lml_of(&p)
    }

    /// The log marginal likelihood for evaluated pieces.
    pub fn lml_of(&self, p: &Pieces<f64>) -> Result<LmlState, Error> {
        let n = self.inputs.len();
        if p.t == 0.0 {
            return Ok(LmlState {
                lml: 0.0,
                chol: None,
                alpha: DVector::zeros(n),
                t: 0.0,
            });
        }
        let chol =
            cholesky_jitter_with(n, |a| self.fill(p, a), self.jitter, self.max_jitter, WHAT)?;
        Ok(self.state(p, chol))
    }

    /// [`GpModel::lml_of`] with the weight of its gradient
    /// ([`GpModel::weight`]): L⁻¹ is formed in the factorisation's pass
    /// ([`cholesky_jitter_with_inverse`]), on threads it would leave idle;
    /// the state is the same bits as [`GpModel::lml_of`]'s.
    pub fn lml_and_weight(&self, p: &Pieces<f64>) -> Result<(LmlState, Option<LmlWeight>), Error> {
        let n = self.inputs.len();
        if p.t == 0.0 {
            return Ok((self.lml_of(p)?, None));
        }
        let (chol, m) = cholesky_jitter_with_inverse(
            n,
            |a| self.fill(p, a),
            self.jitter,
            self.max_jitter,
            WHAT,
        )?;
        let state = self.state(p, chol);
        let w = LmlWeight::from_inverse(m, &state.alpha);
        Ok((state, Some(w)))
    }

    /// K + noise: its lower triangle into `a` [N, N] by columns.
    fn fill(&self, p: &Pieces<f64>, a: &mut [f64]) -> Result<(), Error> {
        let n = self.inputs.len();
        p.kernel.gram_lower_into(&self.inputs, a)?;
        for (i, s) in p.tempered_noise().iter().enumerate() {
            a[i * n + i] += s;
        }
        Ok(())
    }

    /// The log marginal likelihood and α from the factor.
    fn state(&self, p: &Pieces<f64>, chol: JitteredCholesky) -> LmlState {
        let n = self.inputs.len();
        let r = &self.y - &p.loc;
        let (q, alpha) = crate::math::adjoint::quad_form(&chol, &r);
        let lml = -0.5 * q - 0.5 * chol.log_det() - n as f64 * HALF_LOG_2PI + p.log_c();
        LmlState {
            lml,
            chol: Some(chol),
            alpha,
            t: p.t,
        }
    }

    /// W = ααᵀ − A⁻¹ [N, N], the weight of ∂A in the gradient (twice the
    /// adjoint Ā of the log marginal likelihood, [`LmlWeight`]: the lower
    /// triangle of A⁻¹ and α, entries formed where they are read); `None`
    /// when t = 0.
    pub fn weight(state: &LmlState) -> Option<LmlWeight> {
        let chol = state.chol.as_ref()?;
        Some(LmlWeight::new(chol, &state.alpha))
    }

    /// The derivative of the log marginal likelihood in the (up to eight)
    /// directions seeded in dual pieces, given the state and weight
    /// [`GpModel::weight`] at the same point.
    pub fn grad_chunk(
        &self,
        state: &LmlState,
        w: &LmlWeight,
        p: &Pieces<Dual8>,
    ) -> Result<[f64; CHUNK], Error> {
        self.grad_chunk_n(state, w, p, None)
    }

    /// [`GpModel::grad_chunk`] for duals with N tangents; `pbar`, the
    /// kernel's leaf adjoints at this point ([`leaf_adjoints`]), makes the
    /// kernel's part a chain rule instead of a pass over the entries.
    pub fn grad_chunk_n<const N: usize>(
        &self,
        state: &LmlState,
        w: &LmlWeight,
        p: &Pieces<adfn<N>>,
        pbar: Option<&[f64]>,
    ) -> Result<[f64; N], Error>
    where
        adfn<N>: Scalar,
    {
        let alpha = &state.alpha;
        let mut g = half_trace_w_dk_via(&p.kernel, pbar, &self.inputs, || w.full())?;
        for (i, s) in p.tempered_noise().iter().enumerate() {
            let tg = s.tangent();
            let wii = w.diag(i);
            for c in 0..N {
                g[c] += 0.5 * wii * tg[c];
            }
        }
        for (i, l) in p.loc.iter().enumerate() {
            let tg = l.tangent();
            for c in 0..N {
                g[c] += alpha[i] * tg[c];
            }
        }
        let tg = p.log_c().tangent();
        for c in 0..N {
            g[c] += tg[c];
        }
        Ok(g)
    }

    /// The log marginal likelihood's adjoints contracted with its pieces
    /// evaluated with [`Rev`] (at the point of `state` and `w`), for one
    /// reverse sweep: ½ Σᵢ Wᵢᵢ σᵢ²/t + αᵀ(m + offset) + Σ log c, plus
    /// ⟨p̄, leaves⟩ when the kernel's leaf adjoints `pbar` are given and
    /// match its leaves (the flag says whether they did; otherwise the
    /// kernel's part is left to forward-mode chunks).
    pub fn contraction(
        &self,
        state: &LmlState,
        w: &LmlWeight,
        p: &Pieces<Rev>,
        pbar: Option<&[f64]>,
    ) -> (Rev, bool) {
        let n = p.loc.len();
        let noise = p.tempered_noise();
        let mut s = reverse::contract((0..n).map(|i| 0.5 * w.diag(i)), &noise);
        s += reverse::contract(state.alpha.iter().copied(), p.loc.iter());
        s += p.log_c();
        match pbar.and_then(|pb| kernel_term(&p.kernel, pb)) {
            Some(k) => (s + k, true),
            None => (s, false),
        }
    }

    /// The log marginal likelihood and its gradient with respect to θ.
    ///
    /// The kernel's part costs one reverse pass over the Gram entries
    /// whatever the number of hypers ([`leaf_adjoints`]: ∂/∂p for every
    /// kernel parameter p, weighted by W); the hypers' part is the chain
    /// rule through the parameters, the noise, the mean and offsets and
    /// the power, by one reverse sweep ([`crate::math::reverse`]). A Rust
    /// kernel is a leaf of that pass (forward mode inside its entries, in
    /// its own parameters only); a kernel with interpreted model-file parts
    /// takes its part by duals, eight hypers at a time.
    pub fn lml_grad(&self, theta: &[f64]) -> Result<(LmlState, Vec<f64>), Error> {
        let n = self.inputs.len();
        let p64 = self.pieces::<f64>(theta, &self.bound, n)?;
        let (state, w) = self.lml_and_weight(&p64)?;
        let mut grad = vec![0.0; theta.len()];
        let Some(w) = w else {
            return Ok((state, grad));
        };
        let pbar = leaf_adjoints(&p64.kernel, &self.inputs, &w)?.filter(|_| reverse_sweeps());
        // One reverse sweep: ½ Σᵢ Wᵢᵢ ∂(σᵢ²/t) + αᵀ ∂(m + offset) + ∂Σ log c,
        // and ⟨p̄, leaves⟩ when the kernel has reverse rules.
        let mut kernel_done = false;
        let (_, g) = reverse::sweep(theta, |t| {
            let p = self.pieces::<Rev>(t, &self.bound, n)?;
            let (s, k) = self.contraction(&state, &w, &p, pbar.as_deref());
            kernel_done = k;
            Ok(s)
        })?;
        grad.copy_from_slice(&g);
        if !kernel_done {
            // Kernels with interpreted model-file parts: forward-mode chunks.
            for start in (0..theta.len()).step_by(CHUNK) {
                let td = seed_chunk(theta, start);
                let p = self.pieces::<Dual8>(&td, &self.bound, n)?;
                let g = half_trace_w_dk_via(&p.kernel, pbar.as_deref(), &self.inputs, || w.full())?;
                let m = CHUNK.min(theta.len() - start);
                grad[start..start + m]
                    .iter_mut()
                    .zip(&g)
                    .for_each(|(a, b)| *a += b);
            }
        }
        drop(w);
        Ok((state, grad))
    }

    /// The log marginal likelihood and gradient by forward-mode autodiff
    /// through every step, including the Cholesky factorisation.
    pub fn lml_grad_autodiff(&self, theta: &[f64]) -> Result<(f64, Vec<f64>), Error> {
        let n = self.inputs.len();
        let mut grad = vec![0.0; theta.len()];
        let mut value = self.lml(theta)?.lml;
        for start in (0..theta.len().max(1)).step_by(CHUNK) {
            let td = seed_chunk(theta, start);
            let p = self.pieces::<Dual8>(&td, &self.bound, n)?;
            if p.t.to_constant() == 0.0 {
                return Ok((0.0, grad));
            }
            let mut a: DMatrix<Dual8> = p.kernel.gram(&self.inputs)?;
            for (i, s) in p.tempered_noise().into_iter().enumerate() {
                a[(i, i)] += s;
            }
            let l = cholesky_jitter(
                &a.map(|x| x.to_constant()),
                self.jitter,
                self.max_jitter,
                "the covariance matrix K + noise",
            )
            .and_then(|c| {
                for i in 0..n {
                    a[(i, i)] += Dual8::constant(c.jitter);
                }
                cholesky_generic(&a).ok_or_else(|| {
                    Error::internal("generic Cholesky failed where the f64 one succeeded")
                })
            })?;
            let r: DVector<Dual8> =
                DVector::from_iterator(n, (0..n).map(|i| Dual8::constant(self.y[i]) - p.loc[i]));
            let z = solve_lower_generic(&l, &r);
            let mut lml = -z.dot(&z) * ad_trait::F64(0.5) + p.log_c();
            for i in 0..n {
                lml -= l[(i, i)].ln();
            }
            lml -= Dual8::constant(n as f64 * HALF_LOG_2PI);
            value = lml.to_constant();
            let tg = lml.tangent();
            let m = CHUNK.min(theta.len().saturating_sub(start));
            grad[start..start + m].copy_from_slice(&tg[..m]);
        }
        Ok((value, grad))
    }
}
