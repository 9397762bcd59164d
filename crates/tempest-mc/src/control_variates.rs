//! Control variates for Monte Carlo estimates of E_π[f(x)], from samples
//! xᵢ ~ π (iid or Markov chains), their scores uᵢ = ∇log π(xᵢ) and the
//! integrand values fᵢ. Every control variate here is a Stein-operator
//! image g = L φ = ∇·φ + φ·u, which has mean zero under π, so
//! f − g has the same mean as f and, for a good g, a smaller variance:
//!
//! * `Poly { order }` — zero-variance polynomial control variates: φ = ∇P
//!   for P a polynomial of degree 1 or 2, fitted by least squares (with an
//!   optional ridge); the estimate is the regression's intercept.
//! * `Stein` — control functionals: the interpolant
//!   f̃ = β + Σⱼ aⱼ k₀(·, xⱼ) in the Stein kernel's space, fitted in closed
//!   form; the estimate is β (all samples), or the two-fold split estimator
//!   β + mean of the held-out residuals (unbiased). The standard error is
//!   the MCSE of every sample's out-of-fit residual.
//! * `Secf` — semi-exact control functionals: the same interpolant plus the
//!   degree-1 or -2 polynomial control variates, exact for polynomials of
//!   that degree under Gaussian targets.
//!
//! Shapes: x and u are [n, d] (one row per sample), f is \[n\]; `chains`
//! gives the lengths of consecutive chains (n for one iid sample), used for
//! Monte Carlo standard errors that account for autocorrelation.

use super::diagnostics::mcse_mean;
use super::stein::{BaseKernel, median_distance, stein_gram};
use nalgebra::{DMatrix, DVector};
use tempest_core::error::{Error, ErrorKind};
use tempest_math::linalg::{cholesky_jitter, matmul};

/// Samples, their scores, and how they split into chains.
#[derive(Clone, Debug)]
pub struct Samples {
    /// The samples, [n, d].
    pub x: DMatrix<f64>,
    /// Their scores ∇log π, [n, d].
    pub u: DMatrix<f64>,
    /// Lengths of consecutive chains (summing to n).
    pub chains: Vec<usize>,
    /// Whether the samples are independent draws: standard errors are then
    /// sd/√n, not the chains' autocorrelation MCSE.
    pub independent: bool,
}

impl Samples {
    /// Samples as one block of independent draws (standard errors sd/√n).
    pub fn iid(x: DMatrix<f64>, u: DMatrix<f64>) -> Samples {
        let n = x.nrows();
        Samples {
            x,
            u,
            chains: vec![n],
            independent: true,
        }
    }

    /// Samples from Markov chains of the given lengths, consecutive in x
    /// and u (standard errors from the chains' autocorrelation).
    pub fn chains(x: DMatrix<f64>, u: DMatrix<f64>, chains: Vec<usize>) -> Samples {
        Samples {
            x,
            u,
            chains,
            independent: false,
        }
    }

    /// The standard error of the mean of `v` (one value per sample):
    /// [`se_of`] over the chains, or sd/√n for independent samples.
    pub fn se(&self, v: &[f64]) -> f64 {
        se_of(v, if self.independent { &[] } else { &self.chains })
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.x.nrows()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.x.nrows() == 0
    }
}

/// How the Stein kernel's lengthscale is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lengthscale {
    /// The median pairwise distance of the samples.
    Median,
    /// The value of the base kernel as given.
    Fixed,
    /// The best of a grid (median × 0.1 … 10) by the marginal likelihood of
    /// f under a GP with covariance k₀ (+ constant), σ² profiled out.
    MarginalLikelihood,
}

/// Which control-variate estimate.
#[derive(Clone, Debug, PartialEq)]
pub enum Method {
    /// Plain Monte Carlo.
    None,
    /// Zero-variance polynomial control variates of degree 1 or 2.
    Poly {
        /// 1 or 2.
        order: usize,
        /// Ridge penalty on the coefficients (times n); 0 for least squares.
        ridge: f64,
    },
    /// Control functionals with a Stein kernel.
    Stein {
        /// The base kernel.
        kernel: BaseKernel,
        /// How its lengthscale is chosen.
        ell: Lengthscale,
        /// Regularisation λ, relative to the mean diagonal of K₀.
        lambda: f64,
        /// The two-fold split estimator instead of the all-samples one.
        split: bool,
    },
    /// Semi-exact control functionals: Stein kernel plus polynomials.
    Secf {
        /// The base kernel.
        kernel: BaseKernel,
        /// How its lengthscale is chosen.
        ell: Lengthscale,
        /// Regularisation λ, relative to the mean diagonal of K₀.
        lambda: f64,
        /// Degree of the polynomial part (1 or 2).
        order: usize,
    },
}

impl Method {
    /// The name reported with an estimate (`none`, `poly1`, `stein(rbf)`, ...).
    pub fn name(&self) -> String {
        let kname = |k: &BaseKernel| match k {
            BaseKernel::Rbf { .. } => "rbf",
            BaseKernel::Imq { .. } => "imq",
            BaseKernel::Preconditioned { .. } => "preconditioned",
        };
        match self {
            Method::None => "none".into(),
            Method::Poly { order, .. } => format!("poly{order}"),
            Method::Stein { kernel, split, .. } => format!(
                "stein({}{})",
                kname(kernel),
                if *split { ", split" } else { "" }
            ),
            Method::Secf { kernel, order, .. } => format!("secf({}, poly{order})", kname(kernel)),
        }
    }
}

/// An estimate with and without control variates.
#[derive(Clone, Debug, PartialEq)]
pub struct CvEstimate {
    /// The plain Monte Carlo mean of f.
    pub mc: f64,
    /// Its Monte Carlo standard error.
    pub mc_se: f64,
    /// The control-variate estimate.
    pub cv: f64,
    /// Its estimated standard error.
    pub cv_se: f64,
    /// The method's name.
    pub method: String,
    /// Whether the all-samples fit disagreed with the held-out (split)
    /// estimate by more than twice the held-out standard error, so the
    /// held-out estimate is reported instead (kernel methods).
    pub held_out: bool,
    /// The held-out (split) estimate of the kernel methods, unbiased, and
    /// its standard error (for the others, `cv` and `cv_se`): a sum of
    /// many estimates (an evidence ladder) checks itself against the sum
    /// of these, where errors of one sign add up.
    pub split: (f64, f64),
}

/// A kernel method's closed-form estimate (all samples) checked against
/// its two-fold held-out estimate `split` with standard error `se`: when
/// they disagree by more than 2·se the closed form is not supported by
/// the held-out data and `split` is reported (`true`); otherwise the closed
/// form, with their gap added to its error in quadrature, so a fit that
/// moves the estimate away from what held-out points support never
/// reports a smaller error than that move.
pub fn checked_against_split(full: f64, split: f64, se: f64) -> (f64, f64, bool) {
    let gap = (full - split).abs();
    // A NaN gap or error counts as disagreement.
    if gap.is_finite() && se.is_finite() && gap <= 2.0 * se {
        (full, se.hypot(gap), false)
    } else {
        (split, se, true)
    }
}

impl CvEstimate {
    /// The estimated variance reduction (mc_se / cv_se)².
    pub fn variance_reduction(&self) -> f64 {
        (self.mc_se / self.cv_se).powi(2)
    }
}

/// The most samples a kernel method fits (evenly thinned beyond this).
pub const MAX_KERNEL_POINTS: usize = 1000;

fn cv_err(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Settings, msg)
}

/// Split a series into the chains' pieces.
fn by_chain(v: &[f64], chains: &[usize]) -> Vec<Vec<f64>> {
    let mut out = Vec::with_capacity(chains.len());
    let mut at = 0;
    for &c in chains {
        out.push(v[at..(at + c).min(v.len())].to_vec());
        at += c;
    }
    out
}

/// The mean and the sample variance (n − 1 denominator) of a series.
pub fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, var)
}

/// The standard error of the mean of a series split into chains (their
/// lengths, summing to the series' length): the MCSE of the sampler
/// diagnostics (sd/√ESS) when every chain has at least 4 values, else
/// sd/√n (iid values: pass one chain of fewer than 4, or use
/// `&[]`).
pub fn se_of(v: &[f64], chains: &[usize]) -> f64 {
    if !chains.is_empty()
        && chains.iter().all(|&c| c >= 4)
        && chains.iter().sum::<usize>() == v.len()
    {
        let s = mcse_mean(&by_chain(v, chains));
        if s.is_finite() {
            return s;
        }
    }
    (mean_var(v).1 / v.len() as f64).sqrt()
}

/// The polynomial control variates L P for the monomials P of degree 1
/// (and 2): [n, d] or [n, d + d(d+1)/2].
pub fn poly_features(x: &DMatrix<f64>, u: &DMatrix<f64>, order: usize) -> DMatrix<f64> {
    let (n, d) = x.shape();
    let p = if order >= 2 { d + d * (d + 1) / 2 } else { d };
    let mut phi = DMatrix::zeros(n, p);
    for i in 0..n {
        let mut c = 0;
        // P = xⱼ: L P = uⱼ.
        for j in 0..d {
            phi[(i, c)] = u[(i, j)];
            c += 1;
        }
        if order >= 2 {
            for j in 0..d {
                for k in j..d {
                    phi[(i, c)] = if j == k {
                        // P = xⱼ²: ΔP = 2, ∇P = 2xⱼ eⱼ.
                        2.0 + 2.0 * x[(i, j)] * u[(i, j)]
                    } else {
                        // P = xⱼxₖ: ∇P = xₖ eⱼ + xⱼ eₖ.
                        x[(i, k)] * u[(i, j)] + x[(i, j)] * u[(i, k)]
                    };
                    c += 1;
                }
            }
        }
    }
    phi
}

impl Method {
    /// Check that `n` samples of dimension `d` are enough for the method
    /// (before any sampling): every method needs two samples, polynomial
    /// least squares more samples than coefficients (unless ridged), the
    /// kernel methods four (two folds of two), and the semi-exact control
    /// functional's two folds (of at most [`MAX_KERNEL_POINTS`] samples)
    /// more samples than polynomial terms.
    pub fn check_size(&self, n: usize, d: usize) -> Result<(), Error> {
        if *self == Method::None {
            return Ok(());
        }
        let p = |order: usize| if order >= 2 { d + d * (d + 1) / 2 } else { d };
        let features = match self {
            Method::Poly { order, .. } | Method::Secf { order, .. } => p(*order),
            _ => d,
        };
        tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(
            "the control variates' design matrix",
        )
        .times("draws", n)
        .times("features", features.saturating_add(1))])
        .map_err(|e| cv_err(e.message))?;
        let draws = |k: usize| format!("{k} draw{}", if k == 1 { "" } else { "s" });
        match self {
            _ if n < 2 => Err(cv_err(format!(
                "{} control variates need at least 2 draws, but the run has {}",
                self.name(),
                draws(n)
            ))),
            Method::Poly { order, ridge } if *ridge == 0.0 && n <= p(*order) + 1 => {
                let fixes = if *order == 2 {
                    "take more draws, give a ridge penalty (`poly2(ridge = 1e-3)`) or use poly1"
                        .to_string()
                } else {
                    format!("take more draws or give a ridge penalty (`poly{order}(ridge = 1e-3)`)")
                };
                Err(cv_err(format!(
                    "poly{order} control variates fit {} coefficients in {d} dimensions and need more than {} draws, but the run has {}; {fixes}",
                    p(*order),
                    p(*order) + 1,
                    draws(n)
                )))
            }
            Method::Stein { .. } | Method::Secf { .. } if n < 4 => Err(cv_err(format!(
                "{} control variates fit on two folds of at least two draws and need 4, but the run has {}; take more draws",
                self.name(),
                draws(n)
            ))),
            Method::Secf { order, .. } if n.min(MAX_KERNEL_POINTS) / 2 <= p(*order) + 1 => {
                let instead = if *order == 2 { "`order = 1`, " } else { "" };
                Err(cv_err(format!(
                    "the semi-exact control functional with order {order} fits {} polynomial terms in {d} dimensions on folds of {}, which is too few; take more draws, or use {instead}`stein`",
                    p(*order) + 1,
                    draws(n.min(MAX_KERNEL_POINTS) / 2)
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The control-variate estimate of E\[f\] by `method`.
///
/// Errors ([`ErrorKind::Settings`]): shapes disagree, too few samples for
/// the method (polynomial least squares needs more samples than features;
/// a kernel method needs at least 4), or a factorisation fails.
pub fn estimate(method: &Method, s: &Samples, f: &[f64]) -> Result<CvEstimate, Error> {
    let n = s.len();
    if f.len() != n || s.u.shape() != s.x.shape() {
        return Err(cv_err(format!(
            "control variates: {} samples, {} scores and {} integrand values",
            n,
            s.u.nrows(),
            f.len()
        )));
    }
    if n < 2 {
        return Err(cv_err("control variates need at least 2 samples"));
    }
    let mc = f.iter().sum::<f64>() / n as f64;
    let mc_se = s.se(f);
    let (cv, cv_se, held_out, split) = match method {
        Method::None => (mc, mc_se, false, (mc, mc_se)),
        Method::Poly { order, ridge } => {
            let (cv, se) = poly(s, f, *order, *ridge)?;
            (cv, se, false, (cv, se))
        }
        Method::Stein {
            kernel,
            ell,
            lambda,
            split,
        } => kernel_cv(s, f, *kernel, *ell, *lambda, 0, *split)?,
        Method::Secf {
            kernel,
            ell,
            lambda,
            order,
        } => kernel_cv(s, f, *kernel, *ell, *lambda, *order, false)?,
    };
    Ok(CvEstimate {
        mc,
        mc_se,
        cv,
        cv_se,
        method: method.name(),
        held_out,
        split,
    })
}

/// Least squares of f on [1, Φ]: the intercept, and the residuals' MCSE.
fn poly(s: &Samples, f: &[f64], order: usize, ridge: f64) -> Result<(f64, f64), Error> {
    let phi = poly_features(&s.x, &s.u, order);
    let (n, p) = phi.shape();
    if ridge == 0.0 && n <= p + 1 {
        return Err(cv_err(format!(
            "poly{order} control variates fit {p} coefficients and need more than {} samples, found {n}; give a ridge penalty or use poly1",
            p + 1
        )));
    }
    let fv = DVector::from_column_slice(f);
    let mean_phi = phi.row_mean();
    let mut pc = phi.clone();
    for mut row in pc.row_iter_mut() {
        row -= &mean_phi;
    }
    let fc = fv.add_scalar(-fv.mean());
    let mut a = matmul(&pc, true, &pc, false);
    for j in 0..p {
        a[(j, j)] += ridge * n as f64;
    }
    let chol = cholesky_jitter(&a, 0.0, 1e-6, "the control variates' normal equations")?;
    let beta = chol.solve(&pc.tr_mul(&fc));
    let resid: Vec<f64> = (0..n)
        .map(|i| f[i] - phi.row(i).dot(&beta.transpose()))
        .collect();
    let cv = resid.iter().sum::<f64>() / n as f64;
    // In-sample residuals understate the noise by the p fitted
    // coefficients (n − p − 1 degrees of freedom), and the intercept also
    // carries the coefficients' error at the features' sample mean:
    // Var = σ²/n + σ² φ̄ᵀ(PcᵀPc)⁻¹φ̄ for iid draws (the first term by the
    // chains' MCSE for MCMC draws).
    let dof = (n as f64 - p as f64 - 1.0).max(1.0);
    let sigma2 = resid.iter().map(|r| (r - cv) * (r - cv)).sum::<f64>() / dof;
    let g = chol.solve(&mean_phi.transpose());
    let coef_var = sigma2 * mean_phi.dot(&g.transpose()).max(0.0);
    let se = s.se(&resid) * ((n as f64 - 1.0) / dof).sqrt();
    Ok((cv, (se * se + coef_var).sqrt()))
}

/// Evenly spaced indices, at most `m` of `n` (all of them when n ≤ m).
pub fn thin(n: usize, m: usize) -> Vec<usize> {
    if n <= m {
        return (0..n).collect();
    }
    (0..m).map(|i| i * n / m).collect()
}

fn rows(m: &DMatrix<f64>, idx: &[usize]) -> DMatrix<f64> {
    m.select_rows(idx)
}

/// A fitted kernel interpolant f̃ = P b + K₀(·, X) a.
struct Interpolant {
    x: DMatrix<f64>,
    u: DMatrix<f64>,
    a: DVector<f64>,
    b: DVector<f64>,
}

/// The columns P: 1, then the polynomial control variates of `order`.
fn p_matrix(x: &DMatrix<f64>, u: &DMatrix<f64>, order: usize) -> DMatrix<f64> {
    let n = x.nrows();
    if order == 0 {
        return DMatrix::from_element(n, 1, 1.0);
    }
    let phi = poly_features(x, u, order);
    let mut p = DMatrix::from_element(n, phi.ncols() + 1, 1.0);
    p.columns_mut(1, phi.ncols()).copy_from(&phi);
    p
}

/// Fit [K₀ + λI, P; Pᵀ, 0] [a; b] = [f; 0] (λ relative to the mean
/// diagonal of K₀).
fn fit(
    kernel: &BaseKernel,
    x: DMatrix<f64>,
    u: DMatrix<f64>,
    f: &DVector<f64>,
    lambda: f64,
    order: usize,
) -> Result<Interpolant, Error> {
    let mut k0 = stein_gram(kernel, &x, &u, &x, &u);
    let n = k0.nrows();
    let mean_diag = k0.diagonal().mean().abs().max(f64::MIN_POSITIVE);
    for i in 0..n {
        k0[(i, i)] += lambda * mean_diag;
    }
    let chol = cholesky_jitter(&k0, 0.0, 1e-4, "the Stein kernel matrix")?;
    let p = p_matrix(&x, &u, order);
    if p.ncols() >= n {
        return Err(cv_err(format!(
            "the semi-exact control functional fits {} polynomial terms and needs more than {} samples",
            p.ncols(),
            p.ncols()
        )));
    }
    let ainv_p = chol.solve_upper_t(&chol.solve_lower(&p));
    let ainv_f = chol.solve(f);
    let m = matmul(&p, true, &ainv_p, false);
    let mchol = cholesky_jitter(&m, 0.0, 1e-6, "the control functional's constant terms")?;
    let b = mchol.solve(&p.tr_mul(&ainv_f));
    let a = chol.solve(&(f - &p * &b));
    Ok(Interpolant { x, u, a, b })
}

impl Interpolant {
    /// f̃ at the rows of x [m, d] with scores u.
    fn predict(
        &self,
        kernel: &BaseKernel,
        x: &DMatrix<f64>,
        u: &DMatrix<f64>,
        order: usize,
    ) -> DVector<f64> {
        let k = stein_gram(kernel, x, u, &self.x, &self.u);
        p_matrix(x, u, order) * &self.b + k * &self.a
    }
}

/// Control functionals (order 0) or semi-exact control functionals.
/// Each coordinate's standard deviation over the samples x [n, d]; 1 for
/// a coordinate that does not vary.
pub fn coordinate_scales(x: &DMatrix<f64>) -> Vec<f64> {
    let n = x.nrows().max(1) as f64;
    (0..x.ncols())
        .map(|j| {
            let c = x.column(j);
            let m = c.sum() / n;
            let v = c.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / n;
            if v > 0.0 && v.is_finite() {
                v.sqrt()
            } else {
                1.0
            }
        })
        .collect()
}

/// Samples x and scores u in units of `scale` per coordinate
/// (x̃ⱼ = xⱼ / sⱼ, and by the chain rule ũⱼ = uⱼ sⱼ).
pub fn rescaled(x: &DMatrix<f64>, u: &DMatrix<f64>, scale: &[f64]) -> (DMatrix<f64>, DMatrix<f64>) {
    (
        DMatrix::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)] / scale[j]),
        DMatrix::from_fn(u.nrows(), u.ncols(), |i, j| u[(i, j)] * scale[j]),
    )
}

/// The samples in units where every coordinate has unit spread
/// ([`coordinate_scales`], [`rescaled`]): the same distribution, so an
/// isotropic base kernel on them has a lengthscale per coordinate in the
/// original units, proportional to its spread.
pub fn standardise(x: &DMatrix<f64>, u: &DMatrix<f64>) -> (DMatrix<f64>, DMatrix<f64>) {
    rescaled(x, u, &coordinate_scales(x))
}

fn kernel_cv(
    s: &Samples,
    f: &[f64],
    kernel: BaseKernel,
    ell: Lengthscale,
    lambda: f64,
    order: usize,
    split: bool,
) -> Result<(f64, f64, bool, (f64, f64)), Error> {
    let n = s.len();
    if n < 4 {
        return Err(cv_err("kernel control variates need at least 4 samples"));
    }
    let fit_idx = thin(n, MAX_KERNEL_POINTS);
    let (sx, su) = standardise(&s.x, &s.u);
    let s = &Samples {
        x: sx,
        u: su,
        chains: s.chains.clone(),
        independent: s.independent,
    };
    let xf = rows(&s.x, &fit_idx);
    let uf = rows(&s.u, &fit_idx);
    let ff = DVector::from_iterator(fit_idx.len(), fit_idx.iter().map(|&i| f[i]));
    let kernel = match ell {
        Lengthscale::Fixed => kernel,
        Lengthscale::Median => kernel.with_ell(median_distance(&xf)),
        Lengthscale::MarginalLikelihood => {
            best_lengthscale(&kernel, &xf, &uf, &ff, lambda, median_distance(&xf))?
        }
    };
    // Two folds of the fit set (the first and second half of each chain,
    // so that a held-out point's neighbours in its chain, which resemble
    // it, are not in the fold that predicts it): each is fitted on one
    // and evaluated on the other; the means of the held-out residuals give
    // the split estimator. Every sample gets an out-of-fit residual (the
    // other fold's for the fit set, the final interpolant's for the
    // thinned-out rest), and the standard error is that series' MCSE over
    // the chains, so autocorrelation counts as it does for plain MC.
    let fold = halves(&fit_idx, &s.chains);
    let mut resid_all = vec![f64::NAN; n];
    let mut split_est = 0.0;
    let mut first = None;
    for k in 0..2 {
        let (tr, te) = (&fold[k], &fold[1 - k]);
        let ftr = DVector::from_iterator(tr.len(), tr.iter().map(|&i| ff[i]));
        let it = fit(&kernel, rows(&xf, tr), rows(&uf, tr), &ftr, lambda, order)?;
        let pred = it.predict(&kernel, &rows(&xf, te), &rows(&uf, te), order);
        let mut sum = 0.0;
        for (&i, p) in te.iter().zip(pred.iter()) {
            let r = ff[i] - p;
            sum += r;
            resid_all[fit_idx[i]] = r;
        }
        split_est += 0.5 * (it.b[0] + sum / te.len() as f64);
        first.get_or_insert(it);
    }
    let (full, last) = if split {
        (None, first.ok_or_else(|| Error::internal("no fold"))?)
    } else {
        let it = fit(&kernel, xf, uf, &ff, lambda, order)?;
        (Some(it.b[0]), it)
    };
    let rest: Vec<usize> = (0..n).filter(|&i| resid_all[i].is_nan()).collect();
    if !rest.is_empty() {
        let pred = last.predict(&kernel, &rows(&s.x, &rest), &rows(&s.u, &rest), order);
        for (&i, p) in rest.iter().zip(pred.iter()) {
            resid_all[i] = f[i] - p;
        }
    }
    let se = s.se(&resid_all);
    let (est, est_se, held) = match full {
        Some(full) => checked_against_split(full, split_est, se),
        None => (split_est, se, false),
    };
    Ok((est, est_se, held, (split_est, se)))
}

/// Two folds of the fit set (positions into `fit_idx`, whose entries are
/// sample indices over consecutive chains of the given lengths): the
/// points in the first half of their chain, and those in the second half.
/// Without chain lengths, or when a fold would be empty, alternate points.
pub fn halves(fit_idx: &[usize], chains: &[usize]) -> [Vec<usize>; 2] {
    let mut starts = Vec::with_capacity(chains.len());
    let mut acc = 0;
    for &c in chains {
        starts.push(acc);
        acc += c;
    }
    let mut f: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    // Chain lengths that cover every fitted index place each in its chain.
    if !chains.is_empty() && fit_idx.last().is_none_or(|&l| l < acc) {
        for (p, &i) in fit_idx.iter().enumerate() {
            let c = starts.partition_point(|&s| s <= i) - 1;
            let second = 2 * (i - starts[c]) >= chains[c];
            f[usize::from(second)].push(p);
        }
    }
    if f[0].len() < 2 || f[1].len() < 2 {
        let m = fit_idx.len();
        return [(0..m).step_by(2).collect(), (1..m).step_by(2).collect()];
    }
    f
}

/// The lengthscale (median × 0.1 … 10) maximising the profiled marginal
/// likelihood −(n/2) log(f̂ᵀA⁻¹f̂/n) − ½ log|A| of the centred f under
/// A = K₀ + λI.
fn best_lengthscale(
    kernel: &BaseKernel,
    x: &DMatrix<f64>,
    u: &DMatrix<f64>,
    f: &DVector<f64>,
    lambda: f64,
    median: f64,
) -> Result<BaseKernel, Error> {
    let fc = f.add_scalar(-f.mean());
    let n = f.len() as f64;
    let mut best: Option<(f64, BaseKernel)> = None;
    for scale in [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0] {
        let k = kernel.with_ell(median * scale);
        let mut a = stein_gram(&k, x, u, x, u);
        let md = a.diagonal().mean().abs().max(f64::MIN_POSITIVE);
        for i in 0..a.nrows() {
            a[(i, i)] += lambda * md;
        }
        let Ok(chol) = cholesky_jitter(&a, 0.0, 1e-4, "the Stein kernel matrix") else {
            continue;
        };
        let q = fc.dot(&chol.solve(&fc)).max(f64::MIN_POSITIVE);
        let ll = -0.5 * n * (q / n).ln() - 0.5 * chol.log_det();
        if best.as_ref().is_none_or(|(b, _)| ll > *b) {
            best = Some((ll, k));
        }
    }
    best.map(|(_, k)| k)
        .ok_or_else(|| cv_err("no lengthscale gave a positive definite Stein kernel matrix"))
}

#[cfg(test)]
mod fold_tests {
    use super::halves;

    #[test]
    fn folds_are_the_halves_of_each_chain_or_alternate_draws() {
        let idx: Vec<usize> = (0..8).collect();
        assert_eq!(halves(&idx, &[4, 4]), [vec![0, 1, 4, 5], vec![2, 3, 6, 7]]);
        // Thinned fit sets keep each index's chain.
        assert_eq!(halves(&[0, 2, 4, 6], &[4, 4]), [vec![0, 2], vec![1, 3]]);
        // No chain lengths, or lengths that do not cover the indices.
        assert_eq!(halves(&idx, &[]), [vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        assert_eq!(halves(&idx, &[3]), [vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
    }
}
