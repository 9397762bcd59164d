//! Convergence diagnostics for MCMC draws of one scalar quantity: split and
//! rank-normalized R-hat, bulk, tail and mean effective sample sizes, Monte
//! Carlo standard errors, quantiles, and the E-BFMI of Hamiltonian energies.
//!
//! The estimators follow Vehtari, Gelman, Simpson, Carpenter and Bürkner
//! (2021), "Rank-normalization, folding, and localization: an improved R-hat
//! for assessing convergence of MCMC", *Bayesian Analysis* 16(2), as
//! implemented by the `posterior` R package (`rhat`, `ess_bulk`, `ess_tail`,
//! `ess_mean`, `mcse_mean`, `mcse_quantile`), which Stan and ArviZ match.
//!
//! # Input
//!
//! Every function taking `chains: &[Vec<f64>]` reads one `Vec` per chain, in
//! draw order. Chains of unequal length are truncated to the shortest one
//! (later draws are ignored), as Stan does. No chains, or chains of length
//! zero, give NaN.
//!
//! # Shared building blocks
//!
//! * **Splitting.** Each chain of `n` draws becomes two chains: its first
//!   `⌊n/2⌋` and its last `⌊n/2⌋` draws (the middle draw of an odd `n` is
//!   dropped). A chain of one draw is left whole.
//! * **Rank normalization.** Pooling all `S` draws, each draw `x` is replaced
//!   by `z = Φ⁻¹((r − 3/8) / (S + 1/4))`, where `r` is its rank among the `S`
//!   draws, ties getting the average of their ranks (Blom's offset).
//! * **Folding.** `|x − median(x)|` with the median of all draws.
//! * **Non-finite and constant draws.** As in `posterior`, an R-hat or ESS is
//!   NaN when a draw it is computed from is NaN or ±∞, or when those draws are
//!   all equal (`max − min < f64::EPSILON`). Rank normalization maps ±∞ to
//!   finite scores, so the rank-based diagnostics ([`rank_normalized_rhat`],
//!   [`ess_bulk`]) accept infinite draws; NaN draws give NaN everywhere.
//!   Chains whose draws are constant within each chain but differ between
//!   chains give R-hat = +∞ (no within-chain variance), or NaN from
//!   [`rank_normalized_rhat`] when their folded draws are all equal (two
//!   such chains).

use serde::Serialize;
use statrs::function::beta::inv_beta_reg;
use statrs::function::erf::erfc_inv;

/// The fewest draws per chain for which R-hat is defined (each chain is
/// split into two halves of at least two draws).
pub const MIN_DRAWS_RHAT: usize = 4;

/// The fewest draws per chain for which the ESS (and the MCSE, sd/√ESS) is
/// defined (split halves of at least three draws).
pub const MIN_DRAWS_ESS: usize = 6;

/// Split R-hat ("basic" R-hat) of the draws themselves.
///
/// After splitting each chain in two (see the module docs) into `m` chains of
/// `n` draws, with chain means `x̄ⱼ` and sample variances `sⱼ²`:
///
/// ```text
/// W = mean(sⱼ²)            B/n = var(x̄ⱼ)  (sample variance, m − 1)
/// R̂ = sqrt( ((n − 1)/n · W + B/n) / W ) = sqrt( (n·var(x̄ⱼ)/W + n − 1) / n )
/// ```
///
/// NaN for non-finite or constant draws and for split chains shorter than two
/// draws (chains shorter than four draws); +∞ when every chain is constant but
/// the chains differ.
pub fn split_rhat(chains: &[Vec<f64>]) -> f64 {
    match common_chains(chains) {
        Some(chains) => rhat_core(&split_chains(&chains)),
        None => f64::NAN,
    }
}

/// Rank-normalized split R-hat (Vehtari et al. 2021): the larger of the split
/// R-hat ([`split_rhat`]'s formula) of the rank-normalized split draws (bulk)
/// and of the rank-normalized split folded draws `|x − median(x)|` (tails).
///
/// ```text
/// R̂ = max( R̂(z(split(x))), R̂(z(split(|x − median(x)|))) )
/// ```
///
/// where `z` is the rank normalization `Φ⁻¹((r − 3/8)/(S + 1/4))` over all
/// `S` split draws. Values above 1.01 suggest the chains have not mixed. NaN
/// when a draw is NaN, when all draws are equal, or for chains shorter than
/// four draws.
pub fn rank_normalized_rhat(chains: &[Vec<f64>]) -> f64 {
    let Some(chains) = common_chains(chains) else {
        return f64::NAN;
    };
    if chains.iter().any(|c| c.iter().any(|x| x.is_nan())) {
        return f64::NAN;
    }
    let bulk = rhat_core(&z_scale(&split_chains(&chains)));
    let median = quantile(&pooled(&chains), 0.5);
    let folded: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| c.iter().map(|x| (x - median).abs()).collect())
        .collect();
    let tail = rhat_core(&z_scale(&split_chains(&folded)));
    nan_max(bulk, tail)
}

/// Bulk effective sample size: the ESS (see [`ess_mean`] for the estimator)
/// of the rank-normalized split chains, `ESS(z(split(x)))`.
///
/// It measures how well the chains explore the bulk of the distribution and
/// is defined even when the mean does not exist. NaN when a draw is NaN, when
/// all draws are equal, or for split chains shorter than three draws (chains
/// shorter than six draws).
pub fn ess_bulk(chains: &[Vec<f64>]) -> f64 {
    let Some(chains) = common_chains(chains) else {
        return f64::NAN;
    };
    if chains.iter().any(|c| c.iter().any(|x| x.is_nan())) {
        return f64::NAN;
    }
    ess_core(&z_scale(&split_chains(&chains)))
}

/// Tail effective sample size: the smaller of the quantile ESS at 5 % and at
/// 95 % ([`ess_quantile`]),
///
/// ```text
/// ESS_tail = min( ESS(split(I(x ≤ q₀.₀₅))), ESS(split(I(x ≤ q₀.₉₅))) )
/// ```
///
/// with the type-7 quantiles `q` of all draws. It measures how reliably the
/// 5 % and 95 % quantiles are estimated. NaN when either one is NaN (a
/// non-finite draw, all draws equal, an indicator that is constant, or chains
/// shorter than six draws).
pub fn ess_tail(chains: &[Vec<f64>]) -> f64 {
    nan_min(ess_quantile(chains, 0.05), ess_quantile(chains, 0.95))
}

/// Effective sample size for the `p` quantile: the ESS (see [`ess_mean`]) of
/// the split indicator chains `I(x ≤ q_p)`, where `q_p` is the type-7
/// quantile ([`quantile`]) of all draws. For `p = 1` the quantile is taken at
/// `(S − 1/2)/S` instead, as in `posterior`.
///
/// NaN for `p` outside `[0, 1]`, for a non-finite draw, when all draws are
/// equal, when the indicator is constant, and for chains shorter than six
/// draws.
pub fn ess_quantile(chains: &[Vec<f64>], p: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let Some(chains) = common_chains(chains) else {
        return f64::NAN;
    };
    let all = pooled(&chains);
    if !all.iter().all(|x| x.is_finite()) || is_constant(&all) {
        return f64::NAN;
    }
    let p = if p == 1.0 {
        let s = all.len() as f64;
        (s - 0.5) / s
    } else {
        p
    };
    let q = quantile(&all, p);
    let indicator: Vec<Vec<f64>> = chains
        .iter()
        .map(|c| c.iter().map(|&x| if x <= q { 1.0 } else { 0.0 }).collect())
        .collect();
    ess_core(&split_chains(&indicator))
}

/// Effective sample size for the mean ("basic" split ESS of the draws
/// themselves), following Geyer's initial monotone sequence estimator as in
/// Stan and `posterior`.
///
/// With the `m` split chains of `n` draws, the biased autocovariances
/// `γⱼ(t) = (1/n) Σₖ₌₀ⁿ⁻¹⁻ᵗ (xⱼₖ − x̄ⱼ)(xⱼ,ₖ₊ₜ − x̄ⱼ)` and their mean over
/// chains `γ(t)`:
///
/// ```text
/// W    = γ(0) · n/(n − 1)                    (mean within-chain variance)
/// var⁺ = W·(n − 1)/n + var(x̄ⱼ)              (var(x̄ⱼ) only when m > 1)
/// ρ(t) = 1 − (W − γ(t)) / var⁺
/// ```
///
/// Pairs `(ρ(2k), ρ(2k+1))` are examined from `k = 1` while the previous
/// pair sum is positive and `2k < n − 3`; a pair with a negative sum is set
/// to zero (Geyer's initial positive sequence). Each pair sum before the last
/// examined pair is then capped by the previous one, both members set to half
/// the previous sum (initial monotone sequence), giving `ρ̃`. With `T` the
/// even lag of the last pair examined,
///
/// ```text
/// τ = −1 + 2 Σ_{t<T} ρ̃(t) + ρ̃(T),     ρ̃(T) = ρ(T) when ρ(T) > 0
/// ```
///
/// (otherwise `ρ̃(T)` is 0 for a dropped pair, `ρ(T)` for a kept one). The
/// once-counted even term is Stan's correction that reduces the variance for
/// antithetic chains. When no pair beyond the first is examined (`n ≤ 5`, or
/// `ρ(0) + ρ(1) ≤ 0`), `τ = −1 + 2ρ(0) + ρ(0) = 2`, as in Stan and
/// `posterior`. Finally `τ ≥ 1/log₁₀(mn)`, so `ESS = mn/τ ≤ mn·log₁₀(mn)`.
///
/// NaN for a non-finite draw, when all draws are equal, or for split chains
/// shorter than three draws (chains shorter than six draws).
pub fn ess_mean(chains: &[Vec<f64>]) -> f64 {
    match common_chains(chains) {
        Some(chains) => ess_core(&split_chains(&chains)),
        None => f64::NAN,
    }
}

/// Monte Carlo standard error of the mean: `sd(x) / sqrt(ESS_mean)`, with the
/// sample standard deviation (divisor `S − 1`) of all draws and
/// [`ess_mean`]. NaN whenever [`ess_mean`] is.
pub fn mcse_mean(chains: &[Vec<f64>]) -> f64 {
    let Some(chains) = common_chains(chains) else {
        return f64::NAN;
    };
    let all = pooled(&chains);
    sample_sd(&all) / ess_core(&split_chains(&chains)).sqrt()
}

/// Monte Carlo standard error of the `p` quantile, as in `posterior`: with
/// `E` = [`ess_quantile`]`(chains, p)` and the `S` draws sorted `x₍₁₎ ≤ … ≤
/// x₍S₎`,
///
/// ```text
/// a₁, a₂ = Beta⁻¹(0.1586553, 0.8413447; E·p + 1, E·(1 − p) + 1)
/// MCSE   = ( x₍min(⌈a₂S⌉, S)₎ − x₍max(⌊a₁S⌋, 1)₎ ) / 2
/// ```
///
/// (half the width of the central ±1σ interval of the quantile's rank). NaN
/// whenever the quantile ESS is.
pub fn mcse_quantile(chains: &[Vec<f64>], p: f64) -> f64 {
    let ess = ess_quantile(chains, p);
    if !ess.is_finite() || ess <= 0.0 {
        return f64::NAN;
    }
    let Some(chains) = common_chains(chains) else {
        return f64::NAN;
    };
    let mut sorted = pooled(&chains);
    sorted.sort_by(f64::total_cmp);
    let s = sorted.len();
    let (a, b) = (ess * p + 1.0, ess * (1.0 - p) + 1.0);
    let a1 = inv_beta_reg(a, b, 0.158_655_3);
    let a2 = inv_beta_reg(a, b, 0.841_344_7);
    // One-based ranks clamped to [1, S], then zero-based indices.
    let lo = ((a1 * s as f64).floor() as usize).clamp(1, s) - 1;
    let hi = ((a2 * s as f64).ceil() as usize).clamp(1, s) - 1;
    (sorted[hi] - sorted[lo]) / 2.0
}

/// Sample quantile of `xs` at probability `p`, type 7 of Hyndman and Fan
/// (R's and NumPy's default): with the draws sorted `x₍₀₎ ≤ … ≤ x₍ₙ₋₁₎`,
/// `h = (n − 1)p` and `l = ⌊h⌋`,
///
/// ```text
/// Q(p) = x₍ₗ₎ + (h − l)(x₍ₗ₊₁₎ − x₍ₗ₎)
/// ```
///
/// computed as R does (`(1 − f)·x₍ₗ₎ + f·x₍ₗ₊₁₎`, only where the two differ).
/// NaN for an empty slice, a NaN element, or `p` outside `[0, 1]`.
pub fn quantile(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() || !(0.0..=1.0).contains(&p) || xs.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile_sorted(&sorted, p)
}

/// Energy Bayesian fraction of missing information of one chain's Hamiltonian
/// energies `E₀, …, E_{n−1}` (Betancourt 2016, as in CmdStan):
///
/// ```text
/// E-BFMI = Σₖ₌₁ⁿ⁻¹ (Eₖ − Eₖ₋₁)² / Σₖ₌₀ⁿ⁻¹ (Eₖ − Ē)²
/// ```
///
/// Values below about 0.3 indicate that momentum resampling explores the
/// energy distribution poorly. (ArviZ's `bfmi` divides means instead of sums,
/// which is this value times `n/(n − 1)`.) NaN for fewer than two energies, a
/// non-finite energy, or constant energies.
pub fn ebfmi(energy: &[f64]) -> f64 {
    let n = energy.len();
    if n < 2 || !energy.iter().all(|e| e.is_finite()) {
        return f64::NAN;
    }
    let mean = energy.iter().sum::<f64>() / n as f64;
    let num: f64 = energy.windows(2).map(|w| (w[1] - w[0]).powi(2)).sum();
    let den: f64 = energy.iter().map(|e| (e - mean).powi(2)).sum();
    if den == 0.0 {
        return f64::NAN;
    }
    num / den
}

/// Posterior summary of one scalar quantity over all chains, as in
/// `posterior::summarise_draws` with its default measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    /// Mean of all draws.
    pub mean: f64,
    /// Sample standard deviation of all draws (divisor `S − 1`).
    pub sd: f64,
    /// Monte Carlo standard error of the mean ([`mcse_mean`]).
    pub mcse: f64,
    /// 5 % quantile of all draws (type 7, [`quantile`]).
    pub q5: f64,
    /// Median of all draws (type 7, [`quantile`]).
    pub q50: f64,
    /// 95 % quantile of all draws (type 7, [`quantile`]).
    pub q95: f64,
    /// Rank-normalized split R-hat ([`rank_normalized_rhat`]).
    pub rhat: f64,
    /// Bulk effective sample size ([`ess_bulk`]).
    pub ess_bulk: f64,
    /// Tail effective sample size ([`ess_tail`]).
    pub ess_tail: f64,
}

/// Summarizes the draws of one scalar quantity: mean, sd, MCSE of the mean,
/// 5/50/95 % quantiles, rank-normalized R-hat, bulk and tail ESS (see
/// [`Summary`]). Fields that cannot be computed (see the individual
/// functions) are NaN; the function never panics.
pub fn summarize(chains: &[Vec<f64>]) -> Summary {
    let all = common_chains(chains)
        .map(|c| pooled(&c))
        .unwrap_or_default();
    let (mean, q5, q50, q95) = location(&all);
    Summary {
        mean,
        sd: sample_sd(&all),
        mcse: mcse_mean(chains),
        q5,
        q50,
        q95,
        rhat: rank_normalized_rhat(chains),
        ess_bulk: ess_bulk(chains),
        ess_tail: ess_tail(chains),
    }
}

/// Summarizes independent draws of one scalar quantity (not a Markov
/// chain: `sample_prior`'s draws), where the effective sample size is the
/// number of draws `n` and no chains are compared:
///
/// ```text
/// mcse = sd / √n      ess_bulk = ess_tail = n      rhat = NaN
/// ```
///
/// with the mean, sd and type-7 quantiles of [`summarize`]. An
/// autocorrelation estimate of the ESS would only add noise here (between
/// 9 and 80 for 50 independent draws). NaN fields but the ESS (0) for no
/// draws, sd and MCSE NaN for one draw, and every field but the ESS NaN
/// when a draw is NaN.
pub fn summarize_independent(draws: &[f64]) -> Summary {
    let n = draws.len();
    let (mean, q5, q50, q95) = location(draws);
    let sd = sample_sd(draws);
    Summary {
        mean,
        sd,
        mcse: sd / (n as f64).sqrt(),
        q5,
        q50,
        q95,
        rhat: f64::NAN,
        ess_bulk: n as f64,
        ess_tail: n as f64,
    }
}

// ---------------------------------------------------------------------------
// Internals
// ---------------------------------------------------------------------------

/// The mean and the 5, 50 and 95 % quantiles (type 7) of pooled draws; NaN
/// for no draws, and quantiles NaN when a draw is NaN.
fn location(all: &[f64]) -> (f64, f64, f64, f64) {
    if all.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN, f64::NAN);
    }
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    if all.iter().any(|x| x.is_nan()) {
        return (mean, f64::NAN, f64::NAN, f64::NAN);
    }
    let mut sorted = all.to_vec();
    sorted.sort_by(f64::total_cmp);
    (
        mean,
        quantile_sorted(&sorted, 0.05),
        quantile_sorted(&sorted, 0.5),
        quantile_sorted(&sorted, 0.95),
    )
}

/// The chains truncated to their common (shortest) length; `None` when there
/// are no chains or that length is zero.
fn common_chains(chains: &[Vec<f64>]) -> Option<Vec<&[f64]>> {
    let n = chains.iter().map(Vec::len).min()?;
    if n == 0 {
        return None;
    }
    Some(chains.iter().map(|c| &c[..n]).collect())
}

/// All draws of all chains in one vector.
fn pooled<C: AsRef<[f64]>>(chains: &[C]) -> Vec<f64> {
    chains
        .iter()
        .flat_map(|c| c.as_ref().iter().copied())
        .collect()
}

/// Splits each chain of `n` draws into its first and last `⌊n/2⌋` draws (the
/// middle draw of an odd `n` is dropped); chains of one draw stay whole. The
/// chains must share one length.
fn split_chains<C: AsRef<[f64]>>(chains: &[C]) -> Vec<Vec<f64>> {
    let n = chains.first().map_or(0, |c| c.as_ref().len());
    if n < 2 {
        return chains.iter().map(|c| c.as_ref().to_vec()).collect();
    }
    let half = n / 2;
    let mut out = Vec::with_capacity(2 * chains.len());
    for c in chains {
        let c = c.as_ref();
        out.push(c[..half].to_vec());
        out.push(c[n - half..].to_vec());
    }
    out
}

/// Rank normalization `Φ⁻¹((r − 3/8)/(S + 1/4))` over all draws of all
/// (equal-length) chains, ties getting average ranks. The draws must not be
/// NaN.
fn z_scale(chains: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let all = pooled(chains);
    let s = all.len() as f64;
    let ranks = average_ranks(&all);
    let mut z = ranks
        .into_iter()
        .map(|r| normal_quantile((r - 0.375) / (s + 0.25)));
    chains
        .iter()
        .map(|c| z.by_ref().take(c.len()).collect())
        .collect()
}

/// One-based ranks of `xs`, ties getting the average of their ranks (R's
/// `rank(ties.method = "average")`). The values must not be NaN.
fn average_ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut ranks = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
            j += 1;
        }
        // Zero-based positions i..=j share the one-based rank (i + j)/2 + 1.
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// Standard normal quantile `Φ⁻¹(p) = −√2 · erfc⁻¹(2p)`.
fn normal_quantile(p: f64) -> f64 {
    -std::f64::consts::SQRT_2 * erfc_inv(2.0 * p)
}

/// Type-7 quantile of already sorted, NaN-free, non-empty draws.
pub fn quantile_sorted(sorted: &[f64], p: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let x_lo = sorted[lo];
    let frac = h - lo as f64;
    if frac > 0.0 && lo + 1 < sorted.len() && sorted[lo + 1] != x_lo {
        (1.0 - frac) * x_lo + frac * sorted[lo + 1]
    } else {
        x_lo
    }
}

/// `posterior`'s constancy test: `max − min < f64::EPSILON`.
fn is_constant(xs: &[f64]) -> bool {
    let (min, max) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    (max - min).abs() < f64::EPSILON
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Sample variance (divisor `n − 1`); NaN for fewer than two values.
fn sample_var(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return f64::NAN;
    }
    let m = mean(xs);
    xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64
}

fn sample_sd(xs: &[f64]) -> f64 {
    sample_var(xs).sqrt()
}

/// R's `max` of two numbers: NaN if either is.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// R's `min` of two numbers: NaN if either is.
fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// R-hat of (already split or transformed) equal-length chains:
/// `sqrt((n·var(x̄ⱼ)/W + n − 1)/n)`.
fn rhat_core<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let m = chains.len();
    let n = chains.first().map_or(0, |c| c.as_ref().len());
    if m < 2 || n < 2 {
        return f64::NAN;
    }
    let all = pooled(chains);
    if !all.iter().all(|x| x.is_finite()) || is_constant(&all) {
        return f64::NAN;
    }
    let means: Vec<f64> = chains.iter().map(|c| mean(c.as_ref())).collect();
    let within = chains.iter().map(|c| sample_var(c.as_ref())).sum::<f64>() / m as f64;
    let nf = n as f64;
    let between_over_n = sample_var(&means);
    ((nf * between_over_n / within + nf - 1.0) / nf).sqrt()
}

/// ESS of (already split or transformed) equal-length chains with Geyer's
/// initial monotone sequence, Stan's antithetic term and the
/// `S·log₁₀(S)` cap; see [`ess_mean`] for the formulas. Index and loop
/// bounds transcribe `posterior`'s `.ess` with zero-based indices.
fn ess_core(chains: &[Vec<f64>]) -> f64 {
    let m = chains.len();
    let n = chains.first().map_or(0, Vec::len);
    if m == 0 || n < 3 {
        return f64::NAN;
    }
    let all = pooled(chains);
    if !all.iter().all(|x| x.is_finite()) || is_constant(&all) {
        return f64::NAN;
    }
    let means: Vec<f64> = chains.iter().map(|c| mean(c)).collect();
    let mut acov = MeanAutocovariance::new(chains, &means);
    let nf = n as f64;
    let mean_var = acov.lag(0) * nf / (nf - 1.0);
    let mut var_plus = mean_var * (nf - 1.0) / nf;
    if m > 1 {
        var_plus += sample_var(&means);
    }
    let mut rho_at = |t: usize| 1.0 - (mean_var - acov.lag(t)) / var_plus;

    // Geyer's initial positive sequence.
    let mut rho = vec![0.0; n];
    let mut even = 1.0;
    let mut odd = rho_at(1);
    rho[0] = even;
    rho[1] = odd;
    let mut t = 0;
    // `> 0.0` is false for NaN, as `posterior`'s explicit NaN check.
    while t + 5 < n && even + odd > 0.0 {
        t += 2;
        even = rho_at(t);
        odd = rho_at(t + 1);
        if even + odd >= 0.0 {
            rho[t] = even;
            rho[t + 1] = odd;
        }
    }
    let max_t = t;
    // Kept once in τ below: reduces the variance for antithetic chains.
    if even > 0.0 {
        rho[max_t] = even;
    }

    // Geyer's initial monotone sequence.
    let mut t = 0;
    while t + 4 <= max_t {
        t += 2;
        if rho[t] + rho[t + 1] > rho[t - 2] + rho[t - 1] {
            rho[t] = (rho[t - 2] + rho[t - 1]) / 2.0;
            rho[t + 1] = rho[t];
        }
    }

    // `posterior` sums `rho_hat_t[1:max_t]`, which in R is the first element
    // alone when `max_t` is 0 (as is Stan's `head(max_s)` sum then).
    let head = if max_t == 0 {
        rho[0]
    } else {
        rho[..max_t].iter().sum()
    };
    let mut tau = -1.0 + 2.0 * head + rho[max_t];
    let total = (m * n) as f64;
    let tau_bound = 1.0 / total.log10();
    if tau < tau_bound {
        tau = tau_bound;
    }
    total / tau
}

/// Lags computed directly before [`MeanAutocovariance`] switches to an FFT of
/// every lag.
const DIRECT_LAGS: usize = 32;

/// Mean over chains of the biased autocovariances
/// `γ(t) = (1/n) Σₖ (xₖ − x̄)(xₖ₊ₜ − x̄)`, computed lazily: the first
/// [`DIRECT_LAGS`] lags directly (`O(m·n)` each, enough for well-mixing
/// chains), then every lag at once by FFT (`O(m·n log n)`).
struct MeanAutocovariance {
    centered: Vec<Vec<f64>>,
    cache: Vec<f64>,
    all_lags: bool,
}

impl MeanAutocovariance {
    fn new(chains: &[Vec<f64>], means: &[f64]) -> Self {
        let centered = chains
            .iter()
            .zip(means)
            .map(|(c, m)| c.iter().map(|x| x - m).collect())
            .collect();
        MeanAutocovariance {
            centered,
            cache: Vec::new(),
            all_lags: false,
        }
    }

    /// `γ(t)` for `t < n`.
    fn lag(&mut self, t: usize) -> f64 {
        while self.cache.len() <= t {
            if self.cache.len() >= DIRECT_LAGS && !self.all_lags {
                self.cache = self.fft_all_lags();
                self.all_lags = true;
            } else {
                let lag = self.cache.len();
                let value = self.direct(lag);
                self.cache.push(value);
            }
        }
        self.cache[t]
    }

    fn direct(&self, t: usize) -> f64 {
        let m = self.centered.len() as f64;
        self.centered
            .iter()
            .map(|y| {
                let n = y.len();
                y[..n - t]
                    .iter()
                    .zip(&y[t..])
                    .map(|(a, b)| a * b)
                    .sum::<f64>()
                    / n as f64
            })
            .sum::<f64>()
            / m
    }

    fn fft_all_lags(&self) -> Vec<f64> {
        let m = self.centered.len() as f64;
        let n = self.centered[0].len();
        let size = (2 * n).next_power_of_two();
        let mut total = vec![0.0; n];
        for y in &self.centered {
            for (acc, value) in total.iter_mut().zip(autocovariance_fft(y, size)) {
                *acc += value;
            }
        }
        total.iter_mut().for_each(|v| *v /= m);
        total
    }
}

/// Biased autocovariances `(1/n) Σₖ yₖ yₖ₊ₜ` of centered `y` at every lag
/// `t < n`, by zero-padding to `size ≥ 2n` (no circular wrap-around), the
/// power spectrum of a real FFT, and its inverse.
fn autocovariance_fft(y: &[f64], size: usize) -> Vec<f64> {
    let n = y.len();
    let mut planner = realfft::RealFftPlanner::<f64>::new();
    let forward = planner.plan_fft_forward(size);
    let inverse = planner.plan_fft_inverse(size);
    let mut signal = vec![0.0; size];
    signal[..n].copy_from_slice(y);
    let mut spectrum = forward.make_output_vec();
    // The lengths come from the plans themselves, so neither call can fail.
    if forward.process(&mut signal, &mut spectrum).is_err() {
        return vec![f64::NAN; n];
    }
    for c in spectrum.iter_mut() {
        *c = realfft::num_complex::Complex::new(c.norm_sqr(), 0.0);
    }
    if inverse.process(&mut spectrum, &mut signal).is_err() {
        return vec![f64::NAN; n];
    }
    let scale = 1.0 / (size as f64 * n as f64);
    signal[..n].iter().map(|v| v * scale).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    use rand_distr::StandardNormal;

    fn normal_chains(seed: u64, m: usize, n: usize) -> Vec<Vec<f64>> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..m)
            .map(|_| {
                (0..n)
                    .map(|_| rng.sample::<f64, _>(StandardNormal))
                    .collect()
            })
            .collect()
    }

    /// Stationary Gaussian AR(1) chains `xₖ = φ xₖ₋₁ + εₖ`.
    fn ar1_chains(seed: u64, m: usize, n: usize, phi: f64) -> Vec<Vec<f64>> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..m)
            .map(|_| {
                let mut x = rng.sample::<f64, _>(StandardNormal) / (1.0 - phi * phi).sqrt();
                (0..n)
                    .map(|_| {
                        x = phi * x + rng.sample::<f64, _>(StandardNormal);
                        x
                    })
                    .collect()
            })
            .collect()
    }

    fn rel_close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    #[test]
    fn iid_normal_draws_look_converged() {
        let chains = normal_chains(7, 4, 2000);
        let s = 8000.0;
        let rhat = rank_normalized_rhat(&chains);
        let basic = split_rhat(&chains);
        assert!((rhat - 1.0).abs() < 0.01, "rhat {rhat}");
        assert!((basic - 1.0).abs() < 0.01, "split rhat {basic}");
        let bulk = ess_bulk(&chains);
        assert!(rel_close(bulk, s, 0.10), "bulk ESS {bulk}");
        let mean = ess_mean(&chains);
        assert!(rel_close(mean, s, 0.10), "mean ESS {mean}");
        let tail = ess_tail(&chains);
        assert!(rel_close(tail, s, 0.20), "tail ESS {tail}");
        // MCSE of the mean of S iid N(0, 1) draws is about 1/sqrt(S).
        let mcse = mcse_mean(&chains);
        assert!(rel_close(mcse, 1.0 / s.sqrt(), 0.10), "mcse {mcse}");
        // MCSE of the median: sqrt(p(1 − p)/S) / φ(0) = sqrt(π/(2S)).
        let mcse_median = mcse_quantile(&chains, 0.5);
        let want = (std::f64::consts::PI / (2.0 * s)).sqrt();
        assert!(
            rel_close(mcse_median, want, 0.25),
            "mcse median {mcse_median}"
        );
    }

    #[test]
    fn single_chain_is_split() {
        let chains = normal_chains(11, 1, 4000);
        let rhat = rank_normalized_rhat(&chains);
        assert!((rhat - 1.0).abs() < 0.01, "rhat {rhat}");
        let bulk = ess_bulk(&chains);
        assert!(rel_close(bulk, 4000.0, 0.10), "bulk ESS {bulk}");
        // A trend within one chain shows up between its two halves.
        let trend: Vec<Vec<f64>> = vec![
            chains[0]
                .iter()
                .enumerate()
                .map(|(i, x)| x + i as f64 / 1000.0)
                .collect(),
        ];
        assert!(rank_normalized_rhat(&trend) > 1.1);
        assert!(split_rhat(&trend) > 1.1);
    }

    #[test]
    fn ar1_ess_matches_theory() {
        // The integrated autocorrelation time of AR(1) is (1 + φ)/(1 − φ).
        // Across seeds the estimates scatter by about ±10 % around it; the
        // seed is fixed, so the test is deterministic.
        let phi: f64 = 0.9;
        let chains = ar1_chains(2024, 4, 10_000, phi);
        let want = 40_000.0 * (1.0 - phi) / (1.0 + phi);
        let mean = ess_mean(&chains);
        let bulk = ess_bulk(&chains);
        assert!(rel_close(mean, want, 0.15), "mean ESS {mean} vs {want}");
        assert!(rel_close(bulk, want, 0.15), "bulk ESS {bulk} vs {want}");
        let rhat = rank_normalized_rhat(&chains);
        assert!((rhat - 1.0).abs() < 0.01, "rhat {rhat}");
    }

    #[test]
    fn chains_with_different_means_do_not_converge() {
        let mut chains = normal_chains(3, 4, 1000);
        for (j, chain) in chains.iter_mut().enumerate() {
            chain.iter_mut().for_each(|x| *x += j as f64);
        }
        let rhat = rank_normalized_rhat(&chains);
        let basic = split_rhat(&chains);
        assert!(rhat > 1.1, "rhat {rhat}");
        assert!(basic > 1.1, "split rhat {basic}");
        // Same location, different scale: the folded R-hat catches it.
        let mut scaled = normal_chains(4, 4, 1000);
        scaled[0].iter_mut().for_each(|x| *x *= 4.0);
        let tail_rhat = rank_normalized_rhat(&scaled);
        assert!(tail_rhat > 1.1, "rhat {tail_rhat}");
    }

    /// Three chains of 21 draws with ties (one decimal) and an odd length
    /// (the middle draw is dropped when splitting).
    fn fixed_chains() -> Vec<Vec<f64>> {
        vec![
            vec![
                -1.9, -1.2, -0.1, -0.5, -2.2, -1.7, -0.4, -1.2, -2.6, -1.4, -0.6, -0.9, 0.1, -0.4,
                -0.6, 0.5, 0.5, 0.4, 1.1, 0.0, 0.4,
            ],
            vec![
                1.0, 0.6, -0.4, 1.7, 0.4, 0.4, 2.0, 2.6, 1.3, 0.3, 1.0, 1.4, -0.1, 1.5, 0.5, 1.1,
                -0.6, -0.8, 0.3, 1.8, 0.9,
            ],
            vec![
                0.8, -0.6, 0.8, -0.2, 2.0, 2.5, 2.7, 1.8, 1.1, 0.2, -0.8, -0.5, -1.6, -1.4, -3.1,
                -0.8, -0.6, -2.4, -1.8, -0.7, 0.8,
            ],
        ]
    }

    /// Reference values for [`fixed_chains`], computed independently by a
    /// scratch pure-Python transcription of the `posterior` R package's
    /// `convergence.R` (split chains, `rank(ties = "average")`,
    /// `statistics.NormalDist().inv_cdf` for `qnorm`, `.rhat`, `.ess` with a
    /// direct O(n²) autocovariance and R's one-based indexing emulated,
    /// `quantile` type 7). NumPy/SciPy were not available.
    #[test]
    fn fixed_example_matches_reference() {
        const SPLIT_RHAT: f64 = 1.5008763589294096;
        const RHAT: f64 = 1.4678573003094189;
        const ESS_BULK: f64 = 9.435111865225615;
        const ESS_Q05: f64 = 86.97986577181207;
        const ESS_Q95: f64 = 42.68543584190579;
        const ESS_MEAN: f64 = 9.098968909865137;
        const MCSE_MEAN: f64 = 0.43336678016510743;
        const MEAN: f64 = 0.03809523809523809;
        const SD: f64 = 1.3072291024404565;
        const Q5: f64 = -2.17;
        const Q50: f64 = 0.1;
        const Q95: f64 = 2.0;

        let chains = fixed_chains();
        let tol = 1e-10;
        assert!(rel_close(split_rhat(&chains), SPLIT_RHAT, tol));
        assert!(rel_close(rank_normalized_rhat(&chains), RHAT, tol));
        assert!(rel_close(ess_bulk(&chains), ESS_BULK, tol));
        assert!(rel_close(ess_quantile(&chains, 0.05), ESS_Q05, tol));
        assert!(rel_close(ess_quantile(&chains, 0.95), ESS_Q95, tol));
        assert!(rel_close(ess_tail(&chains), ESS_Q95, tol));
        assert!(rel_close(ess_mean(&chains), ESS_MEAN, tol));
        assert!(rel_close(mcse_mean(&chains), MCSE_MEAN, tol));

        let s = summarize(&chains);
        assert!(rel_close(s.mean, MEAN, tol));
        assert!(rel_close(s.sd, SD, tol));
        assert!(rel_close(s.mcse, MCSE_MEAN, tol));
        assert!(rel_close(s.q5, Q5, tol));
        assert!(rel_close(s.q50, Q50, tol));
        assert!(rel_close(s.q95, Q95, tol));
        assert!(rel_close(s.rhat, RHAT, tol));
        assert!(rel_close(s.ess_bulk, ESS_BULK, tol));
        assert!(rel_close(s.ess_tail, ESS_Q95, tol));
    }

    /// Two chains of 301 draws of `xₖ = 0.95 xₖ₋₁ + (uₖ − 1/2)` with `uₖ`
    /// from a 64-bit LCG (reproducible bit for bit in Python). The Geyer
    /// sequence runs to the end of the split chains (lags > [`DIRECT_LAGS`],
    /// so through the FFT path).
    fn lcg_ar_chains() -> Vec<Vec<f64>> {
        let mut state: u64 = 12345;
        (0..2)
            .map(|_| {
                let mut x = 0.0;
                (0..301)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let u = (state >> 11) as f64 / 9007199254740992.0;
                        x = 0.95 * x + (u - 0.5);
                        x
                    })
                    .collect()
            })
            .collect()
    }

    /// Reference values for [`lcg_ar_chains`] from the same scratch Python
    /// transcription as [`fixed_example_matches_reference`].
    #[test]
    fn long_lag_example_matches_reference() {
        const SPLIT_RHAT: f64 = 1.219525073657936;
        const RHAT: f64 = 1.2317909710658603;
        const ESS_BULK: f64 = 7.943712745379828;
        const ESS_TAIL: f64 = 21.348047506936595;
        const ESS_MEAN: f64 = 8.560377063495318;
        const MCSE_MEAN: f64 = 0.2731859880854152;

        let chains = lcg_ar_chains();
        assert_eq!(chains[0][0], -0.3904213940145054);
        assert_eq!(chains[1][300], -0.7747165715949599);
        let tol = 1e-9;
        assert!(rel_close(split_rhat(&chains), SPLIT_RHAT, tol));
        assert!(rel_close(rank_normalized_rhat(&chains), RHAT, tol));
        assert!(rel_close(ess_bulk(&chains), ESS_BULK, tol));
        assert!(rel_close(ess_tail(&chains), ESS_TAIL, tol));
        assert!(rel_close(ess_mean(&chains), ESS_MEAN, tol));
        assert!(rel_close(mcse_mean(&chains), MCSE_MEAN, tol));
    }

    #[test]
    fn fft_autocovariance_matches_direct() {
        let chains = ar1_chains(5, 3, 517, 0.7);
        let means: Vec<f64> = chains.iter().map(|c| mean(c)).collect();
        let acov = MeanAutocovariance::new(&chains, &means);
        let fft = acov.fft_all_lags();
        assert_eq!(fft.len(), 517);
        for t in [0, 1, 2, 31, 32, 100, 400, 515, 516] {
            let direct = acov.direct(t);
            assert!(
                (fft[t] - direct).abs() < 1e-12 * acov.direct(0),
                "lag {t}: {} vs {direct}",
                fft[t]
            );
        }
    }

    #[test]
    fn quantile_type_7() {
        let xs = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        // Sorted: 1 1 2 3 4 5 6 9; h = 7p.
        assert_eq!(quantile(&xs, 0.0), 1.0);
        assert_eq!(quantile(&xs, 1.0), 9.0);
        assert!((quantile(&xs, 0.5) - 3.5).abs() < 1e-15);
        assert!((quantile(&xs, 0.05) - 1.0).abs() < 1e-15);
        assert!((quantile(&xs, 0.95) - 7.95).abs() < 1e-12);
        assert!((quantile(&xs, 0.3) - 2.1).abs() < 1e-12);
        assert_eq!(quantile(&[2.5], 0.3), 2.5);
        assert!(quantile(&[], 0.5).is_nan());
        assert!(quantile(&xs, 1.5).is_nan());
        assert!(quantile(&[1.0, f64::NAN], 0.5).is_nan());
        assert_eq!(quantile(&[1.0, f64::INFINITY], 0.0), 1.0);
    }

    #[test]
    fn ranks_and_normal_scores() {
        assert_eq!(
            average_ranks(&[2.0, 1.0, 2.0, 3.0, 2.0]),
            vec![3.0, 1.0, 3.0, 5.0, 3.0]
        );
        assert!(normal_quantile(0.5).abs() < 1e-15);
        assert!((normal_quantile(0.975) - 1.959963984540054).abs() < 1e-12);
        assert!((normal_quantile(0.025) + 1.959963984540054).abs() < 1e-12);
    }

    #[test]
    fn ebfmi_of_known_sequences() {
        // Differences 1, 1, 1; deviations from 2.5: Σ = 5.
        assert!((ebfmi(&[1.0, 2.0, 3.0, 4.0]) - 0.6).abs() < 1e-15);
        // Differences ±2 (Σ = 12); deviations ±1 (Σ = 4).
        assert!((ebfmi(&[1.0, -1.0, 1.0, -1.0]) - 3.0).abs() < 1e-15);
        let e = [1.0, 3.0, -1.0, 2.0, 5.0];
        // Differences 2, −4, 3, 3 → 4 + 16 + 9 + 9 = 38; mean 2 →
        // deviations −1, 1, −3, 0, 3 → 1 + 1 + 9 + 0 + 9 = 20.
        assert!((ebfmi(&e) - 1.9).abs() < 1e-15);
        assert!(ebfmi(&[]).is_nan());
        assert!(ebfmi(&[1.0]).is_nan());
        assert!(ebfmi(&[2.0, 2.0, 2.0]).is_nan());
        assert!(ebfmi(&[1.0, f64::NAN, 2.0]).is_nan());
        // A slow random walk has a small E-BFMI.
        let walk: Vec<f64> = ar1_chains(1, 1, 1000, 0.99).remove(0);
        assert!(ebfmi(&walk) < 0.3);
    }

    #[test]
    fn antithetic_chains_exceed_draw_count_but_respect_cap() {
        let mut rng = StdRng::seed_from_u64(9);
        let chains: Vec<Vec<f64>> = (0..4)
            .map(|_| {
                let mut x = 0.0;
                (0..1000)
                    .map(|_| {
                        x = -0.5 * x + rng.sample::<f64, _>(StandardNormal);
                        x
                    })
                    .collect()
            })
            .collect();
        let s: f64 = 4000.0;
        let ess = ess_mean(&chains);
        assert!(ess > s, "ESS {ess}");
        assert!(ess <= s * s.log10());
        // Theory: S(1 − φ)/(1 + φ) = 3S for φ = −0.5.
        assert!(rel_close(ess, 3.0 * s, 0.2), "ESS {ess}");
    }

    #[test]
    fn independent_draws_have_their_number_as_ess() {
        // 50 independent N(3, 2²) draws: the autocorrelation ESS scatters
        // around 50, the independent summary's is 50 and its MCSE sd/√50.
        let x: Vec<f64> = normal_chains(5, 1, 50)
            .remove(0)
            .iter()
            .map(|z| 3.0 + 2.0 * z)
            .collect();
        let s = summarize_independent(&x);
        let chain = summarize(std::slice::from_ref(&x));
        assert_eq!(
            (s.mean, s.sd, s.q5, s.q50),
            (chain.mean, chain.sd, chain.q5, chain.q50)
        );
        assert_eq!(s.mcse, s.sd / 50f64.sqrt());
        assert_eq!((s.ess_bulk, s.ess_tail), (50.0, 50.0));
        assert!(s.rhat.is_nan());
        let one = summarize_independent(&[1.5]);
        assert_eq!((one.mean, one.ess_bulk), (1.5, 1.0));
        assert!(one.sd.is_nan() && one.mcse.is_nan());
        assert!(summarize_independent(&[]).mean.is_nan());
    }

    #[test]
    fn edge_cases_do_not_panic() {
        let nan = |x: f64| x.is_nan();
        // No chains, empty chains.
        for chains in [vec![], vec![vec![]], vec![vec![], vec![1.0, 2.0]]] {
            let s = summarize(&chains);
            assert!(nan(s.mean) && nan(s.sd) && nan(s.rhat) && nan(s.ess_bulk));
            assert!(nan(split_rhat(&chains)) && nan(ess_mean(&chains)));
            assert!(nan(mcse_quantile(&chains, 0.5)));
        }
        // Constant draws.
        let constant = vec![vec![1.5; 100]; 4];
        let s = summarize(&constant);
        assert_eq!((s.mean, s.sd, s.q5, s.q95), (1.5, 0.0, 1.5, 1.5));
        assert!(nan(s.rhat) && nan(s.ess_bulk) && nan(s.ess_tail) && nan(s.mcse));
        assert!(nan(split_rhat(&constant)) && nan(ess_mean(&constant)));
        assert!(nan(mcse_quantile(&constant, 0.05)));
        // Constant within chains but different between them: never mixes.
        let stuck = vec![vec![0.0; 50], vec![1.0; 50], vec![3.0; 50]];
        assert_eq!(split_rhat(&stuck), f64::INFINITY);
        assert_eq!(rank_normalized_rhat(&stuck), f64::INFINITY);
        // With two such chains the folded draws are all equal: NaN (as R's
        // `max(Inf, NA)` in `posterior`).
        let two = vec![vec![0.0; 50], vec![1.0; 50]];
        assert_eq!(split_rhat(&two), f64::INFINITY);
        assert!(nan(rank_normalized_rhat(&two)));
        // Short chains: lengths 1 to 5 give NaN R-hat below 4 and NaN ESS
        // below 6, without panicking.
        for n in 1..8 {
            let chains = normal_chains(n as u64, 2, n);
            let s = summarize(&chains);
            assert_eq!(nan(s.rhat), n < 4, "n = {n}");
            assert_eq!(nan(split_rhat(&chains)), n < 4, "n = {n}");
            assert_eq!(nan(ess_mean(&chains)), n < 6, "n = {n}");
            let _ = ess_tail(&chains);
            let _ = mcse_quantile(&chains, 0.95);
            if n >= 6 {
                assert!(ess_bulk(&chains) > 0.0);
            }
        }
        // NaN draws.
        let mut with_nan = normal_chains(5, 4, 100);
        with_nan[2][17] = f64::NAN;
        let s = summarize(&with_nan);
        assert!(nan(s.mean) && nan(s.sd) && nan(s.mcse) && nan(s.q50));
        assert!(nan(s.rhat) && nan(s.ess_bulk) && nan(s.ess_tail));
        assert!(nan(split_rhat(&with_nan)) && nan(ess_mean(&with_nan)));
        // Infinite draws: moment-based diagnostics are NaN, rank-based ones
        // are finite (as in `posterior`).
        let mut with_inf = normal_chains(6, 4, 100);
        with_inf[1][3] = f64::INFINITY;
        assert!(nan(split_rhat(&with_inf)) && nan(ess_mean(&with_inf)));
        assert!(rank_normalized_rhat(&with_inf).is_finite());
        assert!(ess_bulk(&with_inf).is_finite());
        // Unequal lengths are truncated to the shortest chain.
        let mut ragged = normal_chains(8, 3, 200);
        let truncated: Vec<Vec<f64>> = ragged.iter().map(|c| c[..150].to_vec()).collect();
        ragged[1].truncate(150);
        assert_eq!(summarize(&ragged), summarize(&truncated));
        // Out-of-range probabilities.
        let chains = normal_chains(9, 2, 100);
        assert!(nan(ess_quantile(&chains, -0.1)) && nan(ess_quantile(&chains, 1.1)));
        assert!(ess_quantile(&chains, 1.0).is_finite());
        assert!(ess_quantile(&chains, 0.0).is_finite());
        // A random walk reaches the FFT path and the ESS stays positive.
        let walk: Vec<Vec<f64>> = normal_chains(10, 4, 10_000)
            .into_iter()
            .map(|steps| {
                steps
                    .iter()
                    .scan(0.0, |x, step| {
                        *x += step;
                        Some(*x)
                    })
                    .collect()
            })
            .collect();
        let ess = ess_bulk(&walk);
        assert!(ess > 0.0 && ess < 400.0, "ESS {ess}");
    }
}
