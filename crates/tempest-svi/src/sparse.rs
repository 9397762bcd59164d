//! The sparse variational GP in whitened form, one minibatch at a time.
//!
//! With inducing inputs Z [M, D], K_ZZ + jitter·I = L Lᵀ and u = L v, each
//! latent GP c has q(v_c) = N(m_c, S_c), S_c = R_c R_cᵀ, and the prior
//! p(v) = N(0, I). For a batch of B points X_b, with A = K_XZ L⁻ᵀ [B, M]:
//!
//!   mean_bc = μ₀ + (A m_c)_b,   var_bc = k(x_b, x_b) − ‖a_b‖² + ‖R_cᵀ a_b‖²,
//!
//! and the unbiased minibatch ELBO is
//! (N/B) Σ_b E_q\[ℓ_b\] − Σ_c KL(N(m_c, S_c) ‖ N(0, I)).
//!
//! Its reverse pass, with s = N/B, g_m = ∂E/∂mean and g_v = ∂E/∂var
//! ([`tempest_variational::expect`]):
//!
//! - Ā = s Σ_c [g_m,c m_cᵀ + 2 diag(g_v,c) A (S_c − I)],
//!   k̄_diag = s Σ_c g_v,c, μ̄₀ = s Σ_bc g_m,bc;
//! - A Lᵀ = K_XZ gives K̄_XZ = Ā L⁻¹ and L̄ = −tril(K̄_XZᵀ A);
//! - K̄_ZZ from L̄ by [`crate::math::adjoint::cholesky_vjp`];
//! - then the kernel's parameters and both inputs (Z̄) by the Gram and
//!   cross-covariance nodes of [`crate::model::gram_vjp`].
//!
//! The natural-gradient (mirror-descent) step on q(v_c) in its natural
//! parameters (h = S⁻¹m, P = S⁻¹) with step ρ is seed 000's update applied
//! to the sparse posterior:
//!
//!   P ← (1 − ρ) P + ρ (I − 2 s Aᵀ diag(g_v) A),
//!   h ← (1 − ρ) h + ρ s Aᵀ (g_m − 2 g_v ∘ (A m)),
//!
//! which for a Gaussian likelihood over the whole data at ρ = 1 is the
//! optimal q (Titsias's bound) in one step.

use super::grid::{Grid, Stencil};
use crate::error::{Error, ErrorKind};
use crate::math::adjoint::cholesky_vjp;
use crate::math::linalg::{JitteredCholesky, cholesky_jitter, matmul};
use crate::model::kernel::{Inputs, KernelValue};
use nalgebra::{DMatrix, DVector};
use tempest_variational::posterior::Whitened;

/// The sparse prior at the current hypers and inducing inputs.
pub struct Inducing {
    /// Z [M, D].
    pub z: Inputs,
    /// K_ZZ + jitter·I = L Lᵀ.
    pub chol: JitteredCholesky,
    /// L [M, M].
    pub l: DMatrix<f64>,
    /// With a `grid(m)` guide: the grid and K_ZZ + jitter·I = L Lᵀ (see
    /// [`super::grid`]).
    pub grid: Option<(Grid, DMatrix<f64>)>,
}

impl Inducing {
    /// Factor K_ZZ + jitter·I (with escalation).
    pub fn new(kernel: &KernelValue<f64>, z: Inputs, jitter: f64) -> Result<Inducing, Error> {
        let mut k = kernel.gram_programs_by_blocks(&z)?;
        for i in 0..k.nrows() {
            k[(i, i)] += jitter;
        }
        let chol = cholesky_jitter(&k, 0.0, 1e-2, "the inducing covariance K_ZZ")?;
        Ok(Inducing {
            l: chol.l(),
            z,
            chol,
            grid: None,
        })
    }

    /// Inducing points on a one-dimensional grid (KISS-GP): K_ZZ from its
    /// M distinct entries when the kernel is stationary (Toeplitz), else
    /// entry by entry.
    pub fn on_grid(kernel: &KernelValue<f64>, grid: Grid, jitter: f64) -> Result<Inducing, Error> {
        let nodes = grid.nodes();
        let z = Inputs::from_flat(nodes.clone(), 1);
        let mut k = if kernel.radial(1.0).is_some() {
            let mut col = Vec::with_capacity(grid.m);
            for t in 0..grid.m {
                col.push(kernel.entry(&nodes[..1], &nodes[t..t + 1], t == 0)?);
            }
            grid.toeplitz(|t| col[t])
        } else {
            kernel.gram(&z)?
        };
        for i in 0..k.nrows() {
            k[(i, i)] += jitter;
        }
        let chol = cholesky_jitter(&k, 0.0, 1e-2, "the inducing covariance K_ZZ on the grid")?;
        for i in 0..k.nrows() {
            k[(i, i)] += chol.jitter;
        }
        Ok(Inducing {
            l: chol.l(),
            z,
            chol,
            grid: Some((grid, k)),
        })
    }

    /// M, the number of inducing points.
    pub fn len(&self) -> usize {
        self.z.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.z.is_empty()
    }

    /// The projection of a batch: K_XZ [B, M], A = K_XZ L⁻ᵀ [B, M] and
    /// k(x_b, x_b) \[B\].
    pub fn project(&self, kernel: &KernelValue<f64>, x: &Inputs) -> Result<Projection, Error> {
        if let Some((grid, kj)) = &self.grid {
            // K_XZ = W (K_ZZ + jitter·I) and A = W L.
            let stencils: Vec<Stencil> = (0..x.len()).map(|i| grid.stencil(x.row(i)[0])).collect();
            return Ok(Projection {
                kxz: Grid::interpolate(&stencils, kj),
                a: Grid::interpolate(&stencils, &self.l),
                kdiag: kernel.diag(x)?,
                stencils: Some(stencils),
            });
        }
        let kxz = kernel.cross_programs_by_blocks(x, &self.z)?;
        // A = K_XZ L⁻ᵀ: Aᵀ = L⁻¹ K_ZX.
        let a = self.chol.solve_lower(&kxz.transpose()).transpose();
        let kdiag = kernel.diag(x)?;
        Ok(Projection {
            kxz,
            a,
            kdiag,
            stencils: None,
        })
    }
}

/// A batch projected on the inducing points.
pub struct Projection {
    /// K_XZ [B, M].
    pub kxz: DMatrix<f64>,
    /// A = K_XZ L⁻ᵀ [B, M].
    pub a: DMatrix<f64>,
    /// k(x_b, x_b) \[B\].
    pub kdiag: DVector<f64>,
    /// On a grid: each point's interpolation stencil.
    pub stencils: Option<Vec<Stencil>>,
}

/// A batch's latent marginals under the posteriors q(v_c).
pub struct Marginals {
    /// Means [B, C].
    pub mean: DMatrix<f64>,
    /// Variances [B, C].
    pub var: DMatrix<f64>,
    /// A R_c [B, M] per latent GP (kept for the reverse pass).
    pub ar: Vec<DMatrix<f64>>,
}

impl Projection {
    /// Latent means and variances [B, C] under the posteriors `qs` with
    /// prior mean μ₀.
    pub fn marginals(&self, qs: &[Whitened], mean0: f64) -> Marginals {
        let b = self.a.nrows();
        let mut mean = DMatrix::zeros(b, qs.len());
        let mut var = DMatrix::zeros(b, qs.len());
        let prior_var: Vec<f64> = (0..b)
            .map(|i| self.kdiag[i] - self.a.row(i).norm_squared())
            .collect();
        let mut ars = Vec::with_capacity(qs.len());
        for (c, q) in qs.iter().enumerate() {
            let mu = &self.a * &q.z;
            let ar = matmul(&self.a, false, &q.r, false);
            for i in 0..b {
                mean[(i, c)] = mean0 + mu[i];
                var[(i, c)] = (prior_var[i] + ar.row(i).norm_squared()).max(0.0);
            }
            ars.push(ar);
        }
        Marginals { mean, var, ar: ars }
    }
}

/// Aᵀ diag(w) A [M, M] for A [B, M] and weights w \[B\].
pub fn weighted_gram(a: &DMatrix<f64>, w: impl Fn(usize) -> f64) -> DMatrix<f64> {
    let mut wa = a.clone();
    for i in 0..a.nrows() {
        wa.row_mut(i).scale_mut(w(i));
    }
    matmul(a, true, &wa, false)
}

/// The adjoints of a batch's kernel matrices and prior mean.
pub struct BatchAdjoints {
    /// K̄_XZ [B, M].
    pub kxz: DMatrix<f64>,
    /// K̄_ZZ [M, M] (symmetric).
    pub kzz: DMatrix<f64>,
    /// k̄_diag \[B\].
    pub kdiag: DVector<f64>,
    /// μ̄₀.
    pub mean: f64,
}

/// The reverse pass of the expected log-likelihood term s Σ_b E\[ℓ_b\]
/// through the projection, given the batch's marginals (for A R_c),
/// g_m and g_v [B, C] (unscaled) and the batch scale s = N/B, for the
/// latent GPs `latents` (those that use this projection).
#[allow(clippy::too_many_arguments)]
pub fn batch_adjoints(
    ind: &Inducing,
    p: &Projection,
    qs: &[Whitened],
    marg: &Marginals,
    gm: &DMatrix<f64>,
    gv: &DMatrix<f64>,
    latents: std::ops::Range<usize>,
    scale: f64,
) -> BatchAdjoints {
    let (b, m) = p.a.shape();
    let mut a_bar = DMatrix::zeros(b, m);
    let mut kdiag = DVector::zeros(b);
    let mut mean = 0.0;
    for c in latents {
        let (q, ar) = (&qs[c], &marg.ar[c]);
        // A (S − I) = (A R) Rᵀ − A.
        let mut as_i = matmul(ar, false, &q.r, true);
        as_i -= &p.a;
        for i in 0..b {
            let (g_m, g_v) = (scale * gm[(i, c)], scale * gv[(i, c)]);
            mean += g_m;
            kdiag[i] += g_v;
            for j in 0..m {
                a_bar[(i, j)] += g_m * q.z[j] + 2.0 * g_v * as_i[(i, j)];
            }
        }
    }
    // K̄_XZ = Ā L⁻¹, i.e. K̄_XZᵀ = L⁻ᵀ Āᵀ.
    let kxz_bar_t = ind.chol.solve_upper_t(&a_bar.transpose());
    // L̄ = −tril(K̄_XZᵀ A).
    let mut l_bar = -matmul(&kxz_bar_t, false, &p.a, false);
    for j in 0..m {
        for i in 0..j {
            l_bar[(i, j)] = 0.0;
        }
    }
    BatchAdjoints {
        kxz: kxz_bar_t.transpose(),
        kzz: cholesky_vjp(&ind.l, &l_bar),
        kdiag,
        mean,
    }
}

/// q(v) in natural parameters: h = S⁻¹m \[M\] and P = S⁻¹ [M, M].
#[derive(Clone, Debug)]
pub struct Natural {
    /// h = S⁻¹ m.
    pub h: DVector<f64>,
    /// P = S⁻¹.
    pub p: DMatrix<f64>,
}

impl Natural {
    /// q = prior: h = 0, P = I.
    pub fn prior(m: usize) -> Natural {
        Natural {
            h: DVector::zeros(m),
            p: DMatrix::identity(m, m),
        }
    }

    /// The natural parameters of a whitened q (S = R Rᵀ): P = S⁻¹, h = P m.
    pub fn from_whitened(q: &Whitened) -> Result<Natural, Error> {
        let s = matmul(&q.r, false, &q.r, true);
        let chol = cholesky_jitter(&s, 0.0, 0.0, "the covariance of q(u)")?;
        let p = chol.inverse();
        Ok(Natural { h: &p * &q.z, p })
    }

    /// The same q as a mean and a factor: with P = L_P L_Pᵀ, R = L_P⁻ᵀ
    /// (S = R Rᵀ) and m = S h. An error when P is not positive definite.
    pub fn whitened(&self) -> Result<Whitened, Error> {
        let m = self.h.len();
        let chol = cholesky_jitter(&self.p, 0.0, 0.0, "the precision of q(u)")?;
        let z = chol.solve(&self.h);
        if let Some(v) = z.iter().find(|v| !v.is_finite()) {
            return Err(Error::new(
                ErrorKind::Numerical,
                format!("the mean of q(u) became {v}"),
            ));
        }
        let r = chol.solve_lower(&DMatrix::identity(m, m)).transpose();
        Ok(Whitened {
            z,
            r,
            log_det: -chol.log_det(),
        })
    }

    /// The mirror-descent step with size ρ from the batch's g_m, g_v \[B\]
    /// (unscaled), the projection A [B, M], the current mean m and the
    /// batch scale s (see the module documentation).
    pub fn step(
        &self,
        a: &DMatrix<f64>,
        m: &DVector<f64>,
        gm: &[f64],
        gv: &[f64],
        scale: f64,
        rho: f64,
    ) -> Natural {
        let mut target = Natural {
            h: DVector::zeros(m.len()),
            p: DMatrix::identity(m.len(), m.len()),
        };
        target.add_batch(a, m, gm, gv, scale);
        self.toward(&target, rho)
    }

    /// Add one batch's part of the step's target: h += s Aᵀ(g_m − 2g_v ∘ Am),
    /// P −= 2s Aᵀdiag(g_v)A. Started at (0, I) and summed over batches
    /// that cover the data once with s = 1, it is the whole-data target.
    pub fn add_batch(
        &mut self,
        a: &DMatrix<f64>,
        m: &DVector<f64>,
        gm: &[f64],
        gv: &[f64],
        scale: f64,
    ) {
        let am = a * m;
        let r = DVector::from_fn(a.nrows(), |i, _| gm[i] - 2.0 * gv[i] * am[i]);
        self.p -= weighted_gram(a, |i| gv[i]) * (2.0 * scale);
        self.h += a.tr_mul(&r) * scale;
    }

    /// (1 − ρ)·self + ρ·target, with P kept exactly symmetric.
    pub fn toward(&self, target: &Natural, rho: f64) -> Natural {
        let p = &self.p * (1.0 - rho) + &target.p * rho;
        Natural {
            h: &self.h * (1.0 - rho) + &target.h * rho,
            p: (&p + p.transpose()) * 0.5,
        }
    }
}

/// The error for a q(u) that left the family (its precision is no longer
/// positive definite).
pub fn left_family(step: usize, e: Error) -> Error {
    Error::new(
        ErrorKind::Numerical,
        format!(
            "the natural-gradient step left the Gaussian family at step {step}: {}",
            e.message
        ),
    )
    .with_note("the likelihood is not log-concave here; try a smaller `rho` or `q_step = adam`")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::adjoint::testing::{central, normal, rng};
    use crate::model::kernel::KernelKind;

    fn rbf(ell: f64, sf2: f64) -> KernelValue<f64> {
        KernelValue::Scale(
            sf2,
            Box::new(KernelValue::Base {
                kind: KernelKind::Rbf,
                args: vec![crate::model::kernel::KernelArg::Scalar(ell)],
                dims: None,
                span: crate::syntax::ast::Span::default(),
            }),
        )
    }

    fn q(rng: &mut rand::rngs::StdRng, m: usize) -> Whitened {
        let mut r = normal(rng, m, m) * 0.3;
        for j in 0..m {
            r[(j, j)] = 0.5 + r[(j, j)].abs();
            for i in 0..j {
                r[(i, j)] = 0.0;
            }
        }
        Whitened::from_factor(normal(rng, m, 1).column(0).into_owned(), r)
    }

    /// f = s Σ (w_m ∘ mean + w_v ∘ var): its reverse pass with g_m = w_m,
    /// g_v = w_v against finite differences in K_XZ entries, Z and the
    /// kernel's variance (through K_ZZ, K_XZ and the diagonal together).
    #[test]
    fn batch_adjoints_match_finite_differences() {
        let mut r = rng(5);
        let (b, m, d) = (7, 4, 2);
        let x = Inputs::from_matrix(&normal(&mut r, b, d));
        let z0 = normal(&mut r, m, d);
        let qs = vec![q(&mut r, m), q(&mut r, m)];
        let (wm, wv) = (normal(&mut r, b, 2), normal(&mut r, b, 2));
        let scale = 3.0;
        let f = |kern: &KernelValue<f64>, z: &DMatrix<f64>| -> f64 {
            let ind = Inducing::new(kern, Inputs::from_matrix(z), 1e-8).unwrap();
            let p = ind.project(kern, &x).unwrap();
            let mg = p.marginals(&qs, 0.0);
            scale * (mg.mean.component_mul(&wm).sum() + mg.var.component_mul(&wv).sum())
        };
        let kern = rbf(0.9, 1.3);
        let ind = Inducing::new(&kern, Inputs::from_matrix(&z0), 1e-8).unwrap();
        let p = ind.project(&kern, &x).unwrap();
        let marg = p.marginals(&qs, 0.0);
        let adj = batch_adjoints(&ind, &p, &qs, &marg, &wm, &wv, 0..2, scale);
        // Z̄ from the cross-covariance and Gram nodes.
        let cz = crate::model::gram_vjp::cross_vjp(&kern, &x, &ind.z, &adj.kxz)
            .unwrap()
            .unwrap();
        let gz = crate::model::gram_vjp::gram_vjp(&kern, &ind.z, &adj.kzz)
            .unwrap()
            .unwrap();
        for i in 0..m {
            for k in 0..d {
                let want = central(|h| {
                    let mut z = z0.clone();
                    z[(i, k)] += h;
                    f(&kern, &z)
                });
                let got = cz.z[(i, k)] + gz.x[(i, k)];
                assert!(
                    (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                    "Z[{i},{k}]: {got} vs {want}"
                );
            }
        }
        // The variance sf2 (leaf 0): K_XZ, K_ZZ and the diagonal.
        let mut g = [0.0; 2];
        let mut sf2_bar = cz.params[0] + gz.params[0];
        for i in 0..b {
            kern.entry_grad(x.row(i), x.row(i), true, &mut g);
            sf2_bar += adj.kdiag[i] * g[0];
        }
        let want = central(|h| f(&rbf(0.9, 1.3 + h), &z0));
        assert!(
            (sf2_bar - want).abs() < 1e-5 * (1.0 + want.abs()),
            "{sf2_bar} vs {want}"
        );
    }

    /// With the whole data, a Gaussian likelihood and ρ = 1, one natural
    /// step gives Titsias's optimal q: P = I + Aᵀ A / σ², h = Aᵀ (y − μ₀) / σ².
    #[test]
    fn one_natural_step_is_the_optimum_for_a_gaussian() {
        let mut r = rng(9);
        let (n, m) = (6, 3);
        let a = normal(&mut r, n, m);
        let y = normal(&mut r, n, 1).column(0).into_owned();
        let s2 = 0.3;
        // At q = prior (m = 0): g_m = (y − mean)/σ² with mean = 0, g_v = −1/(2σ²).
        let gm: Vec<f64> = y.iter().map(|v| v / s2).collect();
        let gv = vec![-0.5 / s2; n];
        let q = Natural::prior(m).step(&a, &DVector::zeros(m), &gm, &gv, 1.0, 1.0);
        let p_want = DMatrix::identity(m, m) + a.tr_mul(&a) / s2;
        let h_want = a.tr_mul(&y) / s2;
        assert!((q.p - p_want).norm() < 1e-12);
        assert!((q.h - h_want).norm() < 1e-12);
    }
}
