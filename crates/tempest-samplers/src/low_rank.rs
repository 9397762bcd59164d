//! A diagonal metric with a low-rank correction, fitted from warm-up draws
//! *and their scores* (the scheme of nutpie's low-rank mass matrix).
//!
//! For a Gaussian target N(μ, Σ), Cov(x) = Σ and Cov(∇ log π) = Σ⁻¹, so Σ
//! solves Σ Cov(g) Σ = Cov(x). With a window of n draws xₖ and scores gₖ
//! [d each]:
//!
//! 1. the diagonal scale sᵢ = (Var xᵢ / Var gᵢ)^¼ (the square root of the
//!    diagonal metric of [`super::adapt::GradAdapt`]), so that x̃ = x/s and
//!    g̃ = g·s are of unit scale;
//! 2. an orthonormal basis Q [d, k] of the span of the centred x̃ and g̃
//!    (k ≤ min(d, 2n));
//! 3. their covariances in that subspace, Cₓ and C_g [k, k] (plus 10⁻⁵ I),
//!    and the Σ̃ [k, k] that solves Σ̃ C_g Σ̃ = Cₓ:
//!    Σ̃ = C_g^{−½} (C_g^{½} Cₓ C_g^{½})^{½} C_g^{−½};
//! 4. Σ̃'s eigenvectors V and eigenvalues λ, keeping those with λ ≥ 2 or
//!    λ ≤ ½ (directions the diagonal misjudges by more than a factor 2):
//!    U = Q V [d, r] orthonormal.
//!
//! The inverse metric is then M⁻¹ = S (I + U(Λ − I)Uᵀ) S with S = diag(s),
//! and the chain moves in y with x = L y for L = S B, B = I + U(Λ^½ − I)Uᵀ
//! (symmetric, B² = I + U(Λ − I)Uᵀ), so L Lᵀ = M⁻¹; scores map back by
//! L⁻ᵀ = S⁻¹ B⁻¹, B⁻¹ = I + U(Λ^−½ − I)Uᵀ. Outside the r directions the
//! metric is the gradient-based diagonal.

use nalgebra::DMatrix;

/// Eigenvalues within [1/CUTOFF, CUTOFF] are left to the diagonal.
const CUTOFF: f64 = 2.0;
/// Regularisation of the subspace covariances.
const GAMMA: f64 = 1e-5;

/// A fitted metric: x = L y with L Lᵀ the inverse metric, and L⁻ᵀ for the
/// scores [d, d] each.
pub struct LowRankMetric {
    /// L = S B.
    pub l: DMatrix<f64>,
    /// L⁻ᵀ = S⁻¹ B⁻¹.
    pub l_inv_t: DMatrix<f64>,
    /// The number of corrected directions r.
    pub rank: usize,
}

/// The metric from draws `xs` and their scores `gs` (n ≥ 3 of each, all of
/// length d), or `None` when they give no usable estimate (too few,
/// non-finite, or a failed decomposition).
pub fn fit(xs: &[Vec<f64>], gs: &[Vec<f64>]) -> Option<LowRankMetric> {
    let n = xs.len();
    if n < 3 || gs.len() != n {
        return None;
    }
    let d = xs[0].len();
    let mean = |v: &[Vec<f64>], i: usize| v.iter().map(|r| r[i]).sum::<f64>() / n as f64;
    let var = |v: &[Vec<f64>], i: usize, m: f64| {
        v.iter().map(|r| (r[i] - m).powi(2)).sum::<f64>() / (n as f64 - 1.0)
    };
    let (mx, mg): (Vec<f64>, Vec<f64>) = (0..d).map(|i| (mean(xs, i), mean(gs, i))).unzip();
    let s: Vec<f64> = (0..d)
        .map(|i| {
            let r = (var(xs, i, mx[i]) / var(gs, i, mg[i])).powf(0.25);
            if r.is_finite() && r > 0.0 {
                r.clamp(1e-5, 1e5)
            } else {
                1.0
            }
        })
        .collect();
    // Centred, scaled draws and scores side by side [d, 2n].
    let both = DMatrix::from_fn(d, 2 * n, |i, k| {
        if k < n {
            (xs[k][i] - mx[i]) / s[i]
        } else {
            (gs[k - n][i] - mg[i]) * s[i]
        }
    });
    if !both.iter().all(|v| v.is_finite()) {
        return None;
    }
    let q = both.clone().qr().q(); // [d, min(d, 2n)]
    let p = q.tr_mul(&both); // [k, 2n]
    let k = q.ncols();
    let cov = |cols: std::ops::Range<usize>| {
        let part = p.columns(cols.start, cols.len());
        let mut c = part * part.transpose() / n as f64;
        for i in 0..k {
            c[(i, i)] += GAMMA;
        }
        c
    };
    let (cx, cg) = (cov(0..n), cov(n..2 * n));
    let sigma = geometric_solve(&cx, &cg)?;
    let eig = sigma.symmetric_eigen();
    let keep: Vec<usize> = (0..k)
        .filter(|&j| {
            let l = eig.eigenvalues[j];
            l.is_finite() && l > 0.0 && (l >= CUTOFF || l <= 1.0 / CUTOFF)
        })
        .collect();
    let u = &q * eig.eigenvectors.select_columns(&keep); // [d, r]
    let lam: Vec<f64> = keep.iter().map(|&j| eig.eigenvalues[j]).collect();
    // S^{±1} (I + U diag(f(λ) − 1) Uᵀ) for f = √ and 1/√, each formed in
    // one d × d buffer.
    let transform = |f: &dyn Fn(f64) -> f64, row: &dyn Fn(f64) -> f64| {
        let scaled = DMatrix::from_fn(d, keep.len(), |i, j| u[(i, j)] * (f(lam[j]) - 1.0));
        let mut m = scaled * u.transpose();
        for i in 0..d {
            m[(i, i)] += 1.0;
            m.row_mut(i).scale_mut(row(s[i]));
        }
        m
    };
    let l = transform(&|l| l.sqrt(), &|si| si);
    let l_inv_t = transform(&|l| 1.0 / l.sqrt(), &|si| 1.0 / si);
    (l.iter().chain(l_inv_t.iter()).all(|v| v.is_finite())).then_some(LowRankMetric {
        l,
        l_inv_t,
        rank: keep.len(),
    })
}

/// The symmetric positive definite Σ with Σ B Σ = A:
/// B^{−½} (B^{½} A B^{½})^{½} B^{−½}.
fn geometric_solve(a: &DMatrix<f64>, b: &DMatrix<f64>) -> Option<DMatrix<f64>> {
    let pow = |m: &DMatrix<f64>, e: f64| -> Option<DMatrix<f64>> {
        let sym = (m + m.transpose()) * 0.5;
        let eig = sym.symmetric_eigen();
        if eig.eigenvalues.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            return None;
        }
        let v = &eig.eigenvectors;
        let scaled = DMatrix::from_fn(v.nrows(), v.ncols(), |i, j| {
            v[(i, j)] * eig.eigenvalues[j].powf(e)
        });
        Some(scaled * v.transpose())
    };
    let bh = pow(b, 0.5)?;
    let bmh = pow(b, -0.5)?;
    let mid = pow(&(&bh * a * &bh), 0.5)?;
    Some(&bmh * mid * &bmh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    /// The diagonal scale sᵢ of `fit` for coordinate i.
    fn sd_of(xs: &[Vec<f64>], gs: &[Vec<f64>], i: usize) -> f64 {
        let v = |r: &[Vec<f64>]| {
            let m = r.iter().map(|x| x[i]).sum::<f64>() / r.len() as f64;
            r.iter().map(|x| (x[i] - m).powi(2)).sum::<f64>()
        };
        (v(xs) / v(gs)).powf(0.25)
    }

    /// Draws of N(0, Σ) for Σ = D (I + 8 v vᵀ) D, one strongly correlated
    /// direction on top of scales 0.1 to 10, with their scores −Σ⁻¹x.
    #[test]
    fn recovers_a_correlated_gaussians_covariance() {
        let d = 12;
        let dv: Vec<f64> = (0..d).map(|i| 0.1 * 100f64.powf(i as f64 / 11.0)).collect();
        let v = DVector::from_element(d, 1.0 / (d as f64).sqrt());
        let dm = DMatrix::from_diagonal(&DVector::from_vec(dv));
        let sigma = &dm * (DMatrix::<f64>::identity(d, d) + &v * v.transpose() * 8.0) * &dm;
        let chol = sigma.clone().cholesky().unwrap();
        let prec = chol.inverse();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (mut xs, mut gs) = (Vec::new(), Vec::new());
        for _ in 0..200 {
            let z = DVector::from_fn(d, |_, _| StandardNormal.sample(&mut rng));
            let x = chol.l() * z;
            gs.push((-(&prec * &x)).as_slice().to_vec());
            xs.push(x.as_slice().to_vec());
        }
        let m = fit(&xs, &gs).unwrap();
        assert!(m.rank >= 1, "no direction corrected");
        // The target seen through x = L y has Hessian Lᵀ Σ⁻¹ L; directions
        // left to the diagonal are within a factor 2 of it, so its
        // condition number is at most about 4, where the diagonal alone
        // leaves the shared direction 9× too narrow.
        let cond = |l: &DMatrix<f64>| {
            let h = l.transpose() * &prec * l;
            let e = h.symmetric_eigen().eigenvalues;
            e.max() / e.min()
        };
        let diag = DMatrix::from_fn(d, d, |i, j| if i == j { sd_of(&xs, &gs, i) } else { 0.0 });
        assert!(cond(&m.l) < 4.5, "low rank: condition {}", cond(&m.l));
        assert!(cond(&diag) > 8.0, "diagonal: condition {}", cond(&diag));
        // L⁻ᵀ is the inverse transpose of L.
        let id = m.l.transpose() * &m.l_inv_t;
        assert!((id - DMatrix::<f64>::identity(d, d)).amax() < 1e-9);
        assert!(fit(&xs[..2], &gs[..2]).is_none());
    }
}
