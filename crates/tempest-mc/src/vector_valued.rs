//! Vector-valued control variates: T related integrals Π_t\[f_t\], each with
//! samples from its own target Π_t, estimated jointly with a separable
//! matrix-valued Stein kernel K₀(x, y)_{tt′} = B_{tt′} k₀^{tt′}(x, y), where
//! k₀^{tt′} is the Stein kernel of the base kernel with the score of Π_t at x
//! and of Π_{t′} at y. The T × T matrix B couples the tasks: B = I gives T
//! independent control functionals.
//!
//! Closed form (the representer form of the penalised least squares, with
//! one unpenalised constant β_t per task): with G [M, M] the Gram matrix
//! G_{(tj),(t′j′)} = B_{tt′} k₀^{tt′}(x_tj, x_t′j′) over all M = Σ m_t
//! samples, E [M, T] the task indicator and D = diag(m_t / m̄),
//!
//!   β̂ = [Eᵀ A⁻¹ E]⁻¹ Eᵀ A⁻¹ y,   α = A⁻¹ (y − E β̂),   A = G + λ D,
//!
//! and β̂_t estimates Π_t\[f_t\]. A learned B = L Lᵀ (L lower triangular with a
//! positive diagonal, starting at I) maximises the marginal likelihood of
//! the values under a GP with covariance A = G(B) + λD and the tasks'
//! constants at their GLS values, by Adam on L (the gradient in B with β̂
//! held fixed, by the envelope theorem).

use super::control_variates::{CvEstimate, Lengthscale, mean_var, poly_features, se_of};
use super::stein::{BaseKernel, median_distance, stein_gram};
use nalgebra::{DMatrix, DVector};
use tempest_core::error::{Error, ErrorKind};
use tempest_math::linalg::{JitteredCholesky, cholesky_jitter, matmul};

/// One task: samples from Π_t [m_t, d], their scores under Π_t [m_t, d],
/// and the integrand values f_t \[m_t\].
#[derive(Clone, Debug)]
pub struct Task {
    /// Samples, [m_t, d].
    pub x: DMatrix<f64>,
    /// Scores ∇log π_t at the samples, [m_t, d].
    pub u: DMatrix<f64>,
    /// Integrand values, \[m_t\].
    pub f: Vec<f64>,
}

/// The task matrix B.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskMatrix {
    /// B given.
    Fixed(DMatrix<f64>),
    /// B = L Lᵀ learned by Adam from B = I.
    Learned {
        /// Adam steps.
        iters: usize,
        /// Adam learning rate.
        lr: f64,
    },
}

/// The estimates, one per task, and the B used.
#[derive(Clone, Debug)]
pub struct VvEstimate {
    /// One estimate per task (`mc`, `mc_se` from the task's own samples).
    pub estimates: Vec<CvEstimate>,
    /// The task matrix.
    pub b: DMatrix<f64>,
}

fn vv_err(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::Settings, msg)
}

/// The base Gram blocks k₀^{tt′} over all samples [M, M], the task of each
/// sample, and y [M].
struct Problem {
    k: DMatrix<f64>,
    task: Vec<usize>,
    y: DVector<f64>,
    e: DMatrix<f64>,
    nugget: DVector<f64>,
    t: usize,
    /// Columns per task in `e`: the constant, then the polynomial control
    /// variates of the task's degree.
    width: usize,
}

/// α [M], β [T] and G [M, M].
type Solution = (DVector<f64>, DVector<f64>, DMatrix<f64>);

impl Problem {
    fn new(
        tasks: &[Task],
        kernel: &BaseKernel,
        lambda: f64,
        order: usize,
        pick: &dyn Fn(usize, usize) -> bool,
    ) -> Problem {
        let t = tasks.len();
        let idx: Vec<Vec<usize>> = tasks
            .iter()
            .enumerate()
            .map(|(ti, task)| (0..task.f.len()).filter(|&j| pick(ti, j)).collect())
            .collect();
        let m: usize = idx.iter().map(Vec::len).sum();
        let mut k = DMatrix::zeros(m, m);
        let mut task = Vec::with_capacity(m);
        let mut y = DVector::zeros(m);
        let mut off = vec![0; t + 1];
        for ti in 0..t {
            off[ti + 1] = off[ti] + idx[ti].len();
            for (j, &s) in idx[ti].iter().enumerate() {
                task.push(ti);
                y[off[ti] + j] = tasks[ti].f[s];
            }
        }
        let sel = |ti: usize| {
            (
                tasks[ti].x.select_rows(&idx[ti]),
                tasks[ti].u.select_rows(&idx[ti]),
            )
        };
        let parts: Vec<(DMatrix<f64>, DMatrix<f64>)> = (0..t).map(sel).collect();
        for a in 0..t {
            for b in 0..t {
                let blk = stein_gram(kernel, &parts[a].0, &parts[a].1, &parts[b].0, &parts[b].1);
                k.view_mut((off[a], off[b]), blk.shape()).copy_from(&blk);
            }
        }
        let mean_diag = k.diagonal().mean().abs().max(f64::MIN_POSITIVE);
        let mbar = m as f64 / t as f64;
        let nugget = DVector::from_iterator(
            m,
            task.iter()
                .map(|&ti| lambda * mean_diag * idx[ti].len() as f64 / mbar),
        );
        // Per task: its indicator, and (semi-exact) its polynomial control
        // variates on its own rows.
        let q = if order == 0 {
            0
        } else {
            poly_features(&parts[0].0, &parts[0].1, order).ncols()
        };
        let width = 1 + q;
        let mut e = DMatrix::zeros(m, t * width);
        for ti in 0..t {
            for j in 0..idx[ti].len() {
                e[(off[ti] + j, ti * width)] = 1.0;
            }
            if q > 0 {
                let phi = poly_features(&parts[ti].0, &parts[ti].1, order);
                e.view_mut((off[ti], ti * width + 1), (idx[ti].len(), q))
                    .copy_from(&phi);
            }
        }
        Problem {
            width,
            k,
            task,
            y,
            e,
            nugget,
            t,
        }
    }

    fn gram(&self, b: &DMatrix<f64>) -> DMatrix<f64> {
        DMatrix::from_fn(self.k.nrows(), self.k.ncols(), |i, j| {
            b[(self.task[i], self.task[j])] * self.k[(i, j)]
        })
    }

    /// (α, β) at B, with the Gram matrix G.
    fn solve(&self, b: &DMatrix<f64>) -> Result<Solution, Error> {
        self.solve_factored(b).map(|(solution, _)| solution)
    }

    /// [`Problem::solve`] with the Cholesky factor of A = G + λ̄D it used.
    fn solve_factored(&self, b: &DMatrix<f64>) -> Result<(Solution, JitteredCholesky), Error> {
        let g = self.gram(b);
        let mut a = g.clone();
        for i in 0..a.nrows() {
            a[(i, i)] += self.nugget[i];
        }
        let chol = cholesky_jitter(&a, 0.0, 1e-4, "the vector-valued Stein kernel matrix")?;
        let ainv_e = chol.solve_upper_t(&chol.solve_lower(&self.e));
        let m = matmul(&self.e, true, &ainv_e, false);
        let mchol = cholesky_jitter(&m, 0.0, 1e-6, "the per-task constants")?;
        let ainv_y = chol.solve(&self.y);
        let beta = mchol.solve(&self.e.tr_mul(&ainv_y));
        let alpha = chol.solve(&(&self.y - &self.e * &beta));
        Ok(((alpha, beta, g), chol))
    }
}

/// Estimate Π_t\[f_t\] for every task jointly.
///
/// Errors ([`ErrorKind::Settings`]): no tasks, tasks of different
/// dimension, a task with fewer than 4 samples, shapes that disagree, B not
/// T × T, or a factorisation that fails.
pub fn vector_valued(
    tasks: &[Task],
    kernel: BaseKernel,
    ell: Lengthscale,
    lambda: f64,
    b: &TaskMatrix,
) -> Result<VvEstimate, Error> {
    vector_valued_poly(tasks, kernel, ell, lambda, b, 0)
}

/// [`vector_valued`] with, per task, the polynomial control variates of
/// degree `order` (0: none; 1 or 2: semi-exact, exact for polynomial
/// integrands of that degree under Gaussian targets) beside the kernel.
pub fn vector_valued_poly(
    tasks: &[Task],
    kernel: BaseKernel,
    ell: Lengthscale,
    lambda: f64,
    b: &TaskMatrix,
    order: usize,
) -> Result<VvEstimate, Error> {
    let t = tasks.len();
    if t == 0 {
        return Err(vv_err(
            "vector-valued control variates need at least one task",
        ));
    }
    let d = tasks[0].x.ncols();
    for (i, task) in tasks.iter().enumerate() {
        if task.x.ncols() != d || task.u.shape() != task.x.shape() || task.f.len() != task.x.nrows()
        {
            return Err(vv_err(format!(
                "vector-valued control variates: task {i} has {} samples of dimension {}, {} scores and {} values (dimension {d} expected)",
                task.x.nrows(),
                task.x.ncols(),
                task.u.nrows(),
                task.f.len()
            )));
        }
        if task.f.len() < 4 {
            return Err(vv_err(format!(
                "task {i} has {} samples; at least 4 are needed",
                task.f.len()
            )));
        }
    }
    if let TaskMatrix::Fixed(bm) = b
        && bm.shape() != (t, t)
    {
        return Err(vv_err(format!(
            "the task matrix B is {}×{}, but there are {t} tasks",
            bm.nrows(),
            bm.ncols()
        )));
    }
    // One scale per coordinate over all tasks' samples.
    let scale = super::control_variates::coordinate_scales(&stacked(tasks, d));
    // Each task's values centred and scaled to unit spread, so that B
    // couples tasks in comparable units whatever their scales (the
    // estimates are mapped back at the end: the estimator is linear in f).
    let f_scale: Vec<(f64, f64)> = tasks
        .iter()
        .map(|t| {
            let (m, v) = mean_var(&t.f);
            (
                m,
                if v > 0.0 && v.is_finite() {
                    v.sqrt()
                } else {
                    1.0
                },
            )
        })
        .collect();
    let raw = tasks;
    let scaled: Vec<Task> = tasks
        .iter()
        .zip(&f_scale)
        .map(|(t, &(m, sd))| {
            let (x, u) = super::control_variates::rescaled(&t.x, &t.u, &scale);
            Task {
                x,
                u,
                f: t.f.iter().map(|v| (v - m) / sd).collect(),
            }
        })
        .collect();
    let tasks = &scaled[..];
    let kernel = match ell {
        Lengthscale::Fixed => kernel,
        Lengthscale::MarginalLikelihood => {
            return Err(vv_err(
                "vector-valued control variates take a fixed lengthscale or the median heuristic",
            ));
        }
        Lengthscale::Median => kernel.with_ell(median_distance(&stacked(tasks, d))),
    };
    let full = Problem::new(tasks, &kernel, lambda, order, &|_, _| true);
    let bm = match b {
        TaskMatrix::Fixed(bm) => bm.clone(),
        TaskMatrix::Learned { iters, lr } => {
            // Each step of the marginal likelihood's gradient costs O(M³):
            // B is learned on every k-th draw of each task, at most
            // LEARN_POINTS in all, and used with all of them.
            let m: usize = tasks.iter().map(|s| s.f.len()).sum();
            let stride = m.div_ceil(LEARN_POINTS).max(1);
            if stride == 1 {
                learn_b(&full, *iters, *lr)?
            } else {
                let sub = Problem::new(tasks, &kernel, lambda, order, &|_, j| j % stride == 0);
                learn_b(&sub, *iters, *lr)?
            }
        }
    };
    let (_, beta, _) = full.solve(&bm)?;
    // Standard errors and held-out estimates from two folds: the first
    // and the second half of every task's samples (contiguous, so that
    // with MCMC draws a held-out point's neighbours in its chain are not
    // in the fold that predicts it).
    let half = |ti: usize, j: usize| usize::from(2 * j >= tasks[ti].f.len());
    let mut resid: Vec<Vec<f64>> = vec![Vec::new(); t];
    let mut split = vec![0.0; t];
    for fold in 0..2 {
        let train = Problem::new(tasks, &kernel, lambda, order, &|ti, j| half(ti, j) == fold);
        let (alpha, beta_f, _) = train.solve(&bm)?;
        // Predict each task's held-out samples: f̃ = β_t + Σ_b B_{t,t(b)} k₀(x, x_b) α_b.
        let tr_idx: Vec<Vec<usize>> = tasks
            .iter()
            .enumerate()
            .map(|(ti, s)| (0..s.f.len()).filter(|&j| half(ti, j) == fold).collect())
            .collect();
        for (ti, task) in tasks.iter().enumerate() {
            let te: Vec<usize> = (0..task.f.len()).filter(|&j| half(ti, j) != fold).collect();
            let (xt, ut) = (task.x.select_rows(&te), task.u.select_rows(&te));
            let w = train.width;
            let mut pred = DVector::from_element(te.len(), beta_f[ti * w]);
            if w > 1 {
                pred += poly_features(&xt, &ut, order) * beta_f.rows(ti * w + 1, w - 1);
            }
            let mut off = 0;
            for (tj, other) in tasks.iter().enumerate() {
                let n = tr_idx[tj].len();
                let kk = stein_gram(
                    &kernel,
                    &xt,
                    &ut,
                    &other.x.select_rows(&tr_idx[tj]),
                    &other.u.select_rows(&tr_idx[tj]),
                );
                pred += kk * alpha.rows(off, n) * bm[(ti, tj)];
                off += n;
            }
            let r: Vec<f64> = te
                .iter()
                .zip(pred.iter())
                .map(|(&j, p)| task.f[j] - p)
                .collect();
            split[ti] += 0.5 * (beta_f[ti * w] + r.iter().sum::<f64>() / r.len().max(1) as f64);
            resid[ti].extend(r);
        }
    }
    let estimates = raw
        .iter()
        .enumerate()
        .map(|(ti, task)| {
            let (m, sd) = f_scale[ti];
            let held = (m + sd * split[ti], sd * se_of(&resid[ti], &[]));
            let (cv, cv_se, held_out) = super::control_variates::checked_against_split(
                m + sd * beta[ti * full.width],
                held.0,
                held.1,
            );
            CvEstimate {
                mc: mean_var(&task.f).0,
                // The tasks' samples are taken as independent.
                mc_se: se_of(&task.f, &[]),
                cv,
                cv_se,
                held_out,
                split: held,
                method: format!(
                    "vector_valued(B = {}{})",
                    match b {
                        TaskMatrix::Fixed(_) => "fixed",
                        TaskMatrix::Learned { .. } => "learned",
                    },
                    if order > 0 {
                        format!(", poly{order}")
                    } else {
                        String::new()
                    }
                ),
            }
        })
        .collect();
    Ok(VvEstimate { estimates, b: bm })
}

/// The most draws (over all tasks) B is learned on.
const LEARN_POINTS: usize = 400;

/// All tasks' samples, one task after another [Σ m_t, d].
fn stacked(tasks: &[Task], d: usize) -> DMatrix<f64> {
    let rows: usize = tasks.iter().map(|s| s.x.nrows()).sum();
    let mut all = DMatrix::zeros(rows, d);
    let mut at = 0;
    for s in tasks {
        all.view_mut((at, 0), s.x.shape()).copy_from(&s.x);
        at += s.x.nrows();
    }
    all
}

/// Adam on L (B = L Lᵀ, diagonal of L = exp(raw)) from B = I.
fn learn_b(p: &Problem, iters: usize, lr: f64) -> Result<DMatrix<f64>, Error> {
    let t = p.t;
    let mut raw = DMatrix::<f64>::zeros(t, t);
    let (mut m1, mut m2) = (DMatrix::<f64>::zeros(t, t), DMatrix::<f64>::zeros(t, t));
    let (b1, b2, eps) = (0.9, 0.999, 1e-8);
    let to_l = |raw: &DMatrix<f64>| {
        DMatrix::from_fn(t, t, |i, j| {
            if i == j {
                raw[(i, i)].exp()
            } else if i > j {
                raw[(i, j)]
            } else {
                0.0
            }
        })
    };
    for step in 1..=iters {
        let l = to_l(&raw);
        let b = &l * l.transpose();
        // The marginal likelihood of the values under a GP with covariance
        // A = G(B) + λ̄D and the tasks' constants at their GLS values:
        // −L = ½ r̃ᵀA⁻¹r̃ + ½ log|A|, whose gradient in B_tt′ (entries taken
        // as independent) is Σ_{a∈t, b∈t′} ½((A⁻¹)_ab − α_a α_b) k_ab with
        // α = A⁻¹ r̃. A coupling between tasks is learned when it explains
        // the values (the in-sample residual of an interpolant does not
        // see it).
        let ((alpha, _, _), chol) = p.solve_factored(&b)?;
        let m = alpha.len();
        let ainv = chol.solve_upper_t(&chol.solve_lower(&DMatrix::identity(m, m)));
        let mut s = DMatrix::<f64>::zeros(t, t);
        for i in 0..p.k.nrows() {
            for c in 0..p.k.ncols() {
                let h = 0.5 * (ainv[(i, c)] - alpha[i] * alpha[c]);
                s[(p.task[i], p.task[c])] += h * p.k[(i, c)];
            }
        }
        let gl = (&s + s.transpose()) * &l;
        let mut graw = DMatrix::from_fn(t, t, |i, j| if i >= j { gl[(i, j)] } else { 0.0 });
        for i in 0..t {
            graw[(i, i)] *= l[(i, i)];
        }
        m1 = &m1 * b1 + &graw * (1.0 - b1);
        m2 = &m2 * b2 + graw.component_mul(&graw) * (1.0 - b2);
        let c1 = 1.0 - b1.powi(step as i32);
        let c2 = 1.0 - b2.powi(step as i32);
        for i in 0..t {
            for j in 0..=i {
                raw[(i, j)] -= lr * (m1[(i, j)] / c1) / ((m2[(i, j)] / c2).sqrt() + eps);
            }
        }
    }
    let l = to_l(&raw);
    Ok(&l * l.transpose())
}
