//! Expectations of the log-likelihood under the marginals q(fₙ) = N(mₙ, vₙ),
//! and their derivatives with respect to mₙ and vₙ:
//!
//!   eₙ = E[ℓₙ(f)],   g_mₙ = E[ℓₙ′(f)],   g_vₙ = ½ E[ℓₙ″(f)] = ½ E[(f − mₙ)/vₙ · ℓₙ′(f)].
//!
//! The last form (Bonnet's and Price's identities) needs only first
//! derivatives, which come from forward-mode autodiff, so built-in,
//! model-file and Rust likelihoods work alike. For one latent value per
//! point the expectations use Gauss–Hermite quadrature; on the same nodes
//! g_m and g_v are the exact derivatives of the quadrature value. For the
//! C-class softmax, E[log softmax_y(f)] = m_y − E[log Σ exp f_c] by the
//! Gauss–Hermite product rule computed in O(C·n) per point
//! ([`crate::math::lse`]), deterministic and exact in its derivatives; the
//! `svi` engine's minibatch steps use fresh antithetic Monte Carlo draws
//! instead (unbiased and cheaper), with ∇ log softmax_y = e_y − p and the
//! same identity for g_v. [`Rule::finer`] gives the rule with twice the
//! points, whose difference is the reported error estimate.

use super::model::{LikArgs, ViModel};
use crate::error::Error;
use crate::math::lse::LseRule;
use crate::math::quadrature::GaussHermite;
use crate::math::scalar::Dual1;
use crate::math::vector::{exp_in_place, ln_in_place};
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use tempest_model::custom::Scalar;

/// Draws of the whole-data rule when latent GPs are mixed into class
/// scores (`categorical_logit(g(X) * A)`), where no product rule applies.
pub const MIXED_DRAWS: usize = 1024;
/// Their seed (fixed: the whole-data ELBO is a deterministic function).
const MIXED_SEED: u64 = 0x6d69_7865_6400;

/// How expectations are computed.
#[derive(Clone, Debug)]
pub enum Rule {
    /// Gauss–Hermite quadrature (one latent value per point).
    Quadrature(GaussHermite),
    /// The Gauss–Hermite product rule for the C-class softmax.
    Softmax(LseRule),
    /// Monte Carlo with fixed draws ε [S, C] of N(0, I) (softmax only).
    MonteCarlo(DMatrix<f64>),
}

impl Rule {
    /// The rule for a model: `k` Gauss–Hermite points for a scalar latent,
    /// `k` points per class for the softmax.
    pub fn for_model(model: &ViModel, k: usize) -> Rule {
        if model.latent.mixing.is_some() {
            // Correlated class scores: no product rule; fixed draws.
            Rule::monte_carlo_matched(model.latents, MIXED_DRAWS, MIXED_SEED)
        } else if model.categorical() {
            Rule::Softmax(LseRule::new(k))
        } else {
            Rule::Quadrature(GaussHermite::new(k))
        }
    }

    /// `samples` antithetic Monte Carlo draws (seeded) for `classes`
    /// classes: the count is rounded up to an even number, at least 2.
    pub fn monte_carlo(classes: usize, samples: usize, seed: u64) -> Rule {
        let half = samples.div_ceil(2).max(1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut eps = DMatrix::zeros(2 * half, classes);
        for s in 0..half {
            for j in 0..classes {
                let e: f64 = StandardNormal.sample(&mut rng);
                eps[(2 * s, j)] = e;
                eps[(2 * s + 1, j)] = -e;
            }
        }
        Rule::MonteCarlo(eps)
    }

    /// `samples` antithetic draws (as [`Rule::monte_carlo`]) transformed
    /// so that their second moments are exactly the identity's (ε ← ε L⁻ᵀ
    /// with εᵀε/S = L Lᵀ): a deterministic rule whose error starts at the
    /// fourth moments, for whole-data passes.
    pub fn monte_carlo_matched(classes: usize, samples: usize, seed: u64) -> Rule {
        let Rule::MonteCarlo(eps) = Rule::monte_carlo(classes, samples, seed) else {
            unreachable!("monte_carlo gives draws")
        };
        let cov = eps.tr_mul(&eps) / eps.nrows() as f64;
        match cov.cholesky() {
            Some(l) => {
                // ε L⁻ᵀ: solve L X = εᵀ, then transpose.
                let x = l
                    .l()
                    .solve_lower_triangular(&eps.transpose())
                    .unwrap_or_else(|| eps.transpose());
                Rule::MonteCarlo(x.transpose())
            }
            None => Rule::MonteCarlo(eps),
        }
    }

    /// The same kind of rule with twice the points (for Monte Carlo, twice
    /// the draws from another seed): the difference between the two is the
    /// error estimate.
    pub fn finer(&self) -> Option<Rule> {
        match self {
            Rule::Quadrature(gh) => Some(Rule::Quadrature(GaussHermite::new(2 * gh.points.len()))),
            Rule::Softmax(r) => Some(Rule::Softmax(LseRule::new(2 * r.points()))),
            Rule::MonteCarlo(eps) => Some(Rule::monte_carlo_matched(
                eps.ncols(),
                2 * eps.nrows(),
                MIXED_SEED ^ 0x2,
            )),
        }
    }

    /// The rule in words, for reports.
    pub fn describe(&self) -> String {
        match self {
            Rule::Quadrature(gh) => format!("{}-point Gauss–Hermite", gh.points.len()),
            Rule::Softmax(r) => format!(
                "Gauss–Hermite product rule, {} points per class",
                r.points()
            ),
            Rule::MonteCarlo(eps) => format!("Monte Carlo, {} draws", eps.nrows()),
        }
    }
}

/// The rule of a fit's expected log-likelihood and its error estimate:
/// the change of Σₙ E\[ℓₙ\] at the fit's q when the rule's points double.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RuleError {
    /// The rule in words.
    pub rule: String,
    /// |Σₙ E\[ℓₙ\] by the finer rule − by the rule|, when it was computed.
    pub estimate: Option<f64>,
    /// Whether the rule is Monte Carlo (mixed latent GPs), held to a
    /// looser bound in the report's note.
    #[serde(skip)]
    pub monte_carlo: bool,
}

impl RuleError {
    /// The error estimate from the totals by `rule` and by its finer rule.
    pub fn new(rule: &Rule, total: f64, finer_total: Option<f64>) -> RuleError {
        RuleError {
            rule: rule.describe(),
            estimate: finer_total.map(|f| (f - total).abs()),
            monte_carlo: matches!(rule, Rule::MonteCarlo(_)),
        }
    }

    /// The report line, and a note when the estimate exceeds 1e-4 of |elbo|
    /// (1e-3 for Monte Carlo).
    pub fn report(&self, r: &mut tempest_output::report::Report, elbo: f64) {
        let Some(e) = self.estimate else {
            r.line(format!("expected log-likelihood: {}", self.rule));
            return;
        };
        r.line(format!(
            "expected log-likelihood: {} (error estimate {e:.1e}, from twice the points)",
            self.rule
        ));
        r.field("expectation_rule", self.rule.clone())
            .field("expectation_error", e);
        // Monte Carlo (mixed latent GPs) is held to 1e-3, the rules to 1e-4.
        let mc = self.monte_carlo;
        let bound = if mc { 1e-3 } else { 1e-4 };
        if e > bound * elbo.abs().max(1.0) {
            r.note(if mc {
                format!(
                    "the expected log-likelihood's error estimate {e:.1e} exceeds 1e-3 of the ELBO: the whole-data passes of mixed latent GPs use {MIXED_DRAWS} moment-matched Monte Carlo draws"
                )
            } else {
                format!(
                    "the expected log-likelihood's error estimate {e:.1e} exceeds 1e-4 of the ELBO (wide latent marginals): raise `quadrature`"
                )
            });
        }
    }
}

/// Per-point expectations; matrices are [N, C] (C = 1 for a scalar latent).
#[derive(Clone, Debug)]
pub struct Expectations {
    /// eₙ = E\[ℓₙ\].
    pub value: Vec<f64>,
    /// ∂eₙ/∂mₙ.
    pub gm: DMatrix<f64>,
    /// ∂eₙ/∂vₙ.
    pub gv: DMatrix<f64>,
    /// For mixed latent GPs: Σₙ E\[log softmax_y(Aᵀf)\] (untempered) and
    /// its derivative Ā [J, C] in the mixing matrix, for the hypers'
    /// gradient without another pass ([`mixed_total`]).
    pub mixing: Option<(f64, DMatrix<f64>)>,
}

impl Expectations {
    /// Zeros for n points and c latent values each.
    pub fn zeros(n: usize, c: usize) -> Expectations {
        Expectations {
            value: vec![0.0; n],
            gm: DMatrix::zeros(n, c),
            gv: DMatrix::zeros(n, c),
            mixing: None,
        }
    }

    /// Σₙ eₙ.
    pub fn total(&self) -> f64 {
        self.value.iter().sum()
    }
}

/// Expectations under marginal means m and variances v, both [N, C].
pub fn expectations(
    model: &ViModel,
    lik: &LikArgs<f64>,
    rule: &Rule,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<Expectations, Error> {
    expectations_at(model, lik, rule, None, m, v)
}

/// Expectations at some of the points: row i of m and v (both [B, C])
/// belongs to data point `rows[i]` (all N points in order when `rows` is
/// `None`). The results are \[B\] and [B, C].
pub fn expectations_at(
    model: &ViModel,
    lik: &LikArgs<f64>,
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<Expectations, Error> {
    expectations_with(model, lik, rule, rows, m, v, false)
}

/// [`expectations_at`] for an optimiser step that also moves a mixing
/// matrix: with mixed latent GPs, [`Expectations::mixing`] holds the
/// untempered total and Ā from the same pass (whole-data passes, which
/// need neither, skip its product).
pub fn expectations_for_step(
    model: &ViModel,
    lik: &LikArgs<f64>,
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<Expectations, Error> {
    expectations_with(model, lik, rule, rows, m, v, true)
}

fn expectations_with(
    model: &ViModel,
    lik: &LikArgs<f64>,
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
    want_mix_bar: bool,
) -> Result<Expectations, Error> {
    let n = m.nrows();
    let c = m.ncols();
    let at = |i: usize| rows.map_or(i, |r| r[i]);
    // Read at every point: a pass over many points with many classes
    // takes seconds.
    let stop = &model.bound.stop;
    const DURING: &str = "computing the expected log-likelihood";
    let mut out = Expectations::zeros(n, c);
    match rule {
        Rule::Quadrature(gh) => {
            let lik1: LikArgs<Dual1> = lik.lift();
            for i in 0..n {
                stop.check(DURING)?;
                let (mi, vi) = (m[(i, 0)], v[(i, 0)].max(0.0));
                let sd = vi.sqrt();
                let (mut e, mut gm, mut gz) = (0.0, 0.0, 0.0);
                let k = at(i);
                let a = if lik.local { i } else { k };
                for (z, w) in gh.points.iter().zip(&gh.weights) {
                    let f = Dual1::new(mi + sd * z, [1.0]);
                    let l = lik1.log_lik(model, a, model.y[k], &[f])?;
                    let (val, d) = (l.value(), l.tangent()[0]);
                    e += w * val;
                    gm += w * d;
                    gz += w * d * z;
                }
                out.value[i] = e;
                out.gm[(i, 0)] = gm;
                out.gv[(i, 0)] = if sd > 0.0 { 0.5 * gz / sd } else { 0.0 };
            }
        }
        Rule::Softmax(r) => softmax(model, r, lik.t, &at, m, v, &mut out)?,
        Rule::MonteCarlo(eps) if lik.mixing(model).is_some() => {
            // Untempered (with Ā for a step's gradient); then times t.
            let a = lik.mixing(model).expect("checked");
            let mut a_bar = want_mix_bar.then(|| DMatrix::zeros(a.nrows(), a.ncols()));
            mixed_softmax(model, a, eps, 1.0, &at, m, v, &mut out, a_bar.as_mut())?;
            out.mixing = a_bar.map(|ab| (out.total(), ab));
            let t = lik.t;
            out.value.iter_mut().for_each(|x| *x *= t);
            out.gm *= t;
            out.gv *= t;
        }
        Rule::MonteCarlo(eps) => {
            let s = eps.nrows() as f64;
            let t = lik.t;
            let rows = eps.nrows();
            // Per point: the draws' scores less their maximum, [S, C] row
            // by row, exponentiated in one vectorised pass, and the log
            // normalisers [S] in another.
            let (mut buf, mut top, mut norm) =
                (vec![0.0; rows * c], vec![0.0; rows], vec![0.0; rows]);
            for i in 0..n {
                stop.check(DURING)?;
                let yi = model.y[at(i)] as usize;
                let (mut e, mut gm, mut gv) = (0.0, vec![0.0; c], vec![0.0; c]);
                let sd: Vec<f64> = (0..c).map(|j| v[(i, j)].max(0.0).sqrt()).collect();
                for (r, row) in eps.row_iter().enumerate() {
                    let f = &mut buf[r * c..(r + 1) * c];
                    for j in 0..c {
                        f[j] = m[(i, j)] + sd[j] * row[j];
                    }
                    top[r] = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    e += f[yi] - top[r];
                    f.iter_mut().for_each(|x| *x -= top[r]);
                }
                exp_in_place(&mut buf);
                for r in 0..rows {
                    norm[r] = buf[r * c..(r + 1) * c].iter().sum();
                }
                let mut logs = norm.clone();
                ln_in_place(&mut logs);
                e -= logs.iter().sum::<f64>();
                for (r, row) in eps.row_iter().enumerate() {
                    let p = &buf[r * c..(r + 1) * c];
                    for j in 0..c {
                        let d = if j == yi { 1.0 } else { 0.0 } - p[j] / norm[r];
                        gm[j] += d;
                        gv[j] += d * row[j];
                    }
                }
                out.value[i] = t * e / s;
                for j in 0..c {
                    out.gm[(i, j)] = t * gm[j] / s;
                    out.gv[(i, j)] = if sd[j] > 0.0 {
                        0.5 * t * gv[j] / (s * sd[j])
                    } else {
                        0.0
                    };
                }
            }
        }
    }
    Ok(out)
}

/// The expectations of ℓ = t · log softmax_y(Aᵀf) over J independent
/// latent values f ~ N(m, diag v) by the draws ε [S, J]: with
/// f = m + √v ∘ ε, p = softmax(Aᵀf) and g = A(e_y − p) = ∇_f ℓ / t,
/// g_m = t·mean(g) and g_v = ½ t·mean(g ∘ ε) / √v (Bonnet's and Price's
/// identities, as for the independent scores). Row i is data point `at(i)`.
/// Per point the draws' scores F A [S, C] and the gradients (E_y − P) Aᵀ
/// [S, J] are two matrix products. With `a_bar`, adds ∂/∂A of
/// Σ_i E\[ℓ_i\] there: t·Fᵀ(E_y − P)/S, a third product.
#[allow(clippy::too_many_arguments)]
pub fn mixed_softmax(
    model: &ViModel,
    a: &DMatrix<f64>,
    eps: &DMatrix<f64>,
    t: f64,
    at: &dyn Fn(usize) -> usize,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
    out: &mut Expectations,
    a_bar: Option<&mut DMatrix<f64>>,
) -> Result<(), Error> {
    use rayon::prelude::*;
    /// Points per parallel task; the parts are put together in order, so
    /// the result does not depend on the number of threads.
    const PART: usize = 32;
    let (n, j) = m.shape();
    let ys: Vec<usize> = (0..n).map(|i| model.y[at(i)] as usize).collect();
    let want_bar = a_bar.is_some();
    // Each task reads the stop flag before it starts.
    let stop = &model.bound.stop;
    let parts: Vec<MixedPart> = (0..n.div_ceil(PART))
        .into_par_iter()
        .map(|p| {
            stop.check("computing the expected log-likelihood")?;
            Ok(mixed_part(
                a,
                eps,
                t,
                &ys,
                m,
                v,
                p * PART..((p + 1) * PART).min(n),
                want_bar,
            ))
        })
        .collect::<Result<_, Error>>()?;
    let mut total_bar = a_bar;
    for part in parts {
        for (k, i) in part.rows.clone().enumerate() {
            out.value[i] = part.value[k];
            for c in 0..j {
                out.gm[(i, c)] = part.gm[(k, c)];
                out.gv[(i, c)] = part.gv[(k, c)];
            }
        }
        if let (Some(tb), Some(pb)) = (total_bar.as_deref_mut(), &part.a_bar) {
            *tb += pb;
        }
    }
    Ok(())
}

/// One parallel task's share of [`mixed_softmax`]: its rows' values, g_m
/// and g_v, and their part of Ā.
struct MixedPart {
    rows: std::ops::Range<usize>,
    value: Vec<f64>,
    gm: DMatrix<f64>,
    gv: DMatrix<f64>,
    a_bar: Option<DMatrix<f64>>,
}

#[allow(clippy::too_many_arguments)]
fn mixed_part(
    a: &DMatrix<f64>,
    eps: &DMatrix<f64>,
    t: f64,
    ys: &[usize],
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
    rows: std::ops::Range<usize>,
    want_bar: bool,
) -> MixedPart {
    use crate::math::linalg::matmul;
    let j = m.ncols();
    let s = eps.nrows();
    let w = t / s as f64;
    let mut part = MixedPart {
        rows: rows.clone(),
        value: vec![0.0; rows.len()],
        gm: DMatrix::zeros(rows.len(), j),
        gv: DMatrix::zeros(rows.len(), j),
        a_bar: want_bar.then(|| DMatrix::zeros(a.nrows(), a.ncols())),
    };
    let mut f = DMatrix::zeros(s, j);
    for (k, i) in rows.enumerate() {
        let yi = ys[i];
        let sd: Vec<f64> = (0..j).map(|c| v[(i, c)].max(0.0).sqrt()).collect();
        for (c, &sc) in sd.iter().enumerate() {
            let mc = m[(i, c)];
            for (fr, er) in f.column_mut(c).iter_mut().zip(eps.column(c).iter()) {
                *fr = mc + sc * er;
            }
        }
        // Scores [S, C], then softmax residuals E_y − P in place.
        let mut r = matmul(&f, false, a, false);
        let mut e = 0.0;
        for mut row in r.row_iter_mut() {
            let top = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            row.apply(|x| *x = (*x - top).exp());
            let norm = row.sum();
            e += (row[yi] / norm).ln();
            row.apply(|x| *x = -*x / norm);
            row[yi] += 1.0;
        }
        let g = matmul(&r, false, a, true);
        part.value[k] = w * e;
        for (c, &sc) in sd.iter().enumerate() {
            let col = g.column(c);
            part.gm[(k, c)] = w * col.sum();
            part.gv[(k, c)] = if sc > 0.0 {
                0.5 * w * col.dot(&eps.column(c)) / sc
            } else {
                0.0
            };
        }
        if let Some(ab) = part.a_bar.as_mut() {
            *ab += matmul(&f, true, &r, false) * w;
        }
    }
    part
}

/// t · (Σ E\[log softmax_y(Aᵀf)\] + ⟨Ā, A − A₀⟩) from the untempered total and Ā
/// at A₀ (see [`Expectations::mixing`]): the value t times the total, and
/// the tangents of t and of A (the likelihood's arguments as duals).
pub fn mixed_total<T: Scalar>(
    model: &ViModel,
    lik: &LikArgs<T>,
    total: f64,
    a_bar: &DMatrix<f64>,
) -> Result<T, Error> {
    let Some(crate::ir::value::Value::Matrix(a_t)) = lik.args.get(model.latent.latent_arg) else {
        return Err(Error::internal("the mixing matrix is not a matrix"));
    };
    let mut inner = T::constant(total);
    for (x, b) in a_t.iter().zip(a_bar.iter()) {
        inner += (*x - T::constant(x.to_constant())) * T::constant(*b);
    }
    Ok(lik.t * inner)
}

/// Class probabilities E[softmax(Aᵀf)] \[C\] for f ~ N(m, diag v) \[J\] by the
/// draws ε [S, J], for the mixing matrix A [J, C].
pub fn mixed_probabilities(a: &DMatrix<f64>, eps: &DMatrix<f64>, m: &[f64], v: &[f64]) -> Vec<f64> {
    let j = m.len();
    let c = a.ncols();
    let mut p = vec![0.0; c];
    let (mut f, mut scores) = (vec![0.0; j], vec![0.0; c]);
    for row in eps.row_iter() {
        for k in 0..j {
            f[k] = m[k] + v[k].max(0.0).sqrt() * row[k];
        }
        for (cc, sc) in scores.iter_mut().enumerate() {
            *sc = (0..j).map(|k| a[(k, cc)] * f[k]).sum();
        }
        let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let norm: f64 = scores.iter().map(|x| (x - top).exp()).sum();
        for (pc, sc) in p.iter_mut().zip(&scores) {
            *pc += (sc - top).exp() / norm;
        }
    }
    p.iter().map(|x| x / eps.nrows() as f64).collect()
}

/// The softmax's expectations ℓ = t · log softmax_y(f) by the product
/// rule `r`, into `out` ([B] and [B, C]); row i is data point `at(i)`.
/// The model's stop flag is read at every point.
fn softmax(
    model: &ViModel,
    r: &LseRule,
    t: f64,
    at: &dyn Fn(usize) -> usize,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
    out: &mut Expectations,
) -> Result<(), Error> {
    let (n, c) = m.shape();
    let (mut mi, mut vi) = (vec![0.0; c], vec![0.0; c]);
    for i in 0..n {
        model
            .bound
            .stop
            .check("computing the expected log-likelihood")?;
        let yi = model.y[at(i)] as usize;
        for j in 0..c {
            mi[j] = m[(i, j)];
            vi[j] = v[(i, j)];
        }
        let l = r.eval(&mi, &vi);
        out.value[i] = t * (mi[yi] - l.value);
        for j in 0..c {
            let d = if j == yi { 1.0 } else { 0.0 } - l.dm[j];
            out.gm[(i, j)] = t * d;
            out.gv[(i, j)] = -t * l.dv[j];
        }
    }
    Ok(())
}

/// Σₙ E\[ℓₙ\] with the likelihood's arguments as duals (latent values held
/// fixed): its tangents are the derivatives with respect to the hypers that
/// enter the likelihood (noise scales, offsets, the temperature).
pub fn expected_total<T: Scalar>(
    model: &ViModel,
    lik: &LikArgs<T>,
    rule: &Rule,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<T, Error> {
    expected_total_at(model, lik, rule, None, m, v)
}

/// [`expected_total`] over some of the points, with m and v [B, C] as in
/// [`expectations_at`].
pub fn expected_total_at<T: Scalar>(
    model: &ViModel,
    lik: &LikArgs<T>,
    rule: &Rule,
    rows: Option<&[usize]>,
    m: &DMatrix<f64>,
    v: &DMatrix<f64>,
) -> Result<T, Error> {
    let mut total = T::zero();
    let at = |i: usize| rows.map_or(i, |r| r[i]);
    match rule {
        Rule::Quadrature(gh) => {
            for i in 0..m.nrows() {
                let sd = v[(i, 0)].max(0.0).sqrt();
                let k = at(i);
                let a = if lik.local { i } else { k };
                for (z, w) in gh.points.iter().zip(&gh.weights) {
                    let f = T::constant(m[(i, 0)] + sd * z);
                    total += lik.log_lik(model, a, model.y[k], &[f])? * T::constant(*w);
                }
            }
        }
        Rule::Softmax(r) => {
            // ℓ = t · log softmax_y(f): the expectation is t times a number.
            let at = |i: usize| rows.map_or(i, |r| r[i]);
            let (n, c) = m.shape();
            let mut out = Expectations::zeros(n, c);
            softmax(model, r, 1.0, &at, m, v, &mut out)?;
            total += lik.t * T::constant(out.total());
        }
        Rule::MonteCarlo(eps) if model.latent.mixing.is_some() => {
            let Some(crate::ir::value::Value::Matrix(a_t)) = lik.args.get(model.latent.latent_arg)
            else {
                return Err(Error::internal("the mixing matrix is not a matrix"));
            };
            let a = a_t.map(|x| x.to_constant());
            let (n, j) = m.shape();
            let mut out = Expectations::zeros(n, j);
            let mut a_bar = DMatrix::zeros(a.nrows(), a.ncols());
            mixed_softmax(model, &a, eps, 1.0, &at, m, v, &mut out, Some(&mut a_bar))?;
            total += mixed_total(model, lik, out.total(), &a_bar)?;
        }
        Rule::MonteCarlo(eps) => {
            let s = eps.nrows() as f64;
            for i in 0..m.nrows() {
                let k = at(i);
                for row in eps.row_iter() {
                    let f: Vec<T> = (0..m.ncols())
                        .map(|j| T::constant(m[(i, j)] + v[(i, j)].max(0.0).sqrt() * row[j]))
                        .collect();
                    let a = if lik.local { i } else { k };
                    total += lik.log_lik(model, a, model.y[k], &f)? * T::constant(1.0 / s);
                }
            }
        }
    }
    Ok(total)
}
