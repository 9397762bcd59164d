//! The result of thermodynamic integration: per-rung means μᵢ and variances
//! vᵢ of log p(y|x) under the power posteriors (with control variates when
//! asked), and the log evidence by the trapezoid rule with the second-order
//! correction
//!
//!   log p(y) ≈ Σᵢ (Δtᵢ/2)(μᵢ + μᵢ₊₁) − (Δtᵢ²/12)(vᵢ₊₁ − vᵢ),  Δtᵢ = tᵢ₊₁ − tᵢ.
//!
//! Its Monte Carlo standard error combines the rungs' standard errors of μᵢ
//! and vᵢ with their weights in the rule (the rungs are independent runs).

use crate::error::{Error, fixed};
use crate::mc::control_variates::{Method, Samples, estimate, mean_var, se_of, thin};
use crate::mc::spec::CvSpec;
use crate::mc::vector_valued::{Task, vector_valued_poly};
use nalgebra::DMatrix;
use serde_json::json;
use tempest_output::report::{Report, Table};

/// One rung's draws: log p(y|x) per chain, and the draws x and scores
/// ∇log πₜ(x) in chain order.
pub struct RungDraws {
    /// The power t.
    pub t: f64,
    /// log p(y|x) per chain, per draw.
    pub loglik: Vec<Vec<f64>>,
    /// The draws (unconstrained), chains concatenated, \[n\]\[d\].
    pub x: Vec<Vec<f64>>,
    /// Their scores under the power posterior, \[n\]\[d\].
    pub u: Vec<Vec<f64>>,
    /// Gradient evaluations after warm-up.
    pub gradients: usize,
    /// Divergent transitions after warm-up.
    pub divergences: usize,
}

/// One rung's estimates.
#[derive(Clone, Debug)]
pub struct RungStat {
    /// The power t.
    pub t: f64,
    /// μ = E_t[log p(y|x)] (with control variates when asked).
    pub mean: f64,
    /// v = Var_t[log p(y|x)].
    pub var: f64,
    /// The standard error of μ.
    pub mean_se: f64,
    /// The standard error of v (approximate).
    pub var_se: f64,
    /// The plain Monte Carlo μ.
    pub mean_mc: f64,
    /// Its standard error.
    pub mean_mc_se: f64,
    /// The plain Monte Carlo v.
    pub var_mc: f64,
    /// Draws at this rung.
    pub draws: usize,
    /// The held-out (split) μ of the kernel control variates and its
    /// standard error (μ and its error for the other methods).
    pub mean_split: (f64, f64),
}

/// What the evidence engine produced.
pub struct EvidenceFit {
    /// The log evidence (second-order corrected trapezoid rule).
    pub log_evidence: f64,
    /// Its Monte Carlo standard error.
    pub mcse: f64,
    /// The plain trapezoid rule, without the variance correction.
    pub trapezoid: f64,
    /// The rungs.
    pub rungs: Vec<RungStat>,
    /// The control-variate method.
    pub method: String,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Gradient evaluations after warm-up, all rungs.
    pub gradients: usize,
    /// Divergent transitions after warm-up, all rungs.
    pub divergences: usize,
    /// Warnings about the run.
    pub warnings: Vec<String>,
    /// Parts of the model the engine does not use, in words.
    pub notes: Vec<String>,
}

/// Rungs per group for vector-valued control variates.
pub const GROUP: usize = 4;
/// The most draws per rung a vector-valued fit uses.
pub const VV_POINTS: usize = 100;

fn matrix(rows: &[Vec<f64>], idx: &[usize]) -> DMatrix<f64> {
    let d = rows.first().map_or(0, Vec::len);
    DMatrix::from_fn(idx.len(), d, |i, j| rows[idx[i]][j])
}

/// The log evidence from (t, μ, v) by the corrected and plain trapezoid
/// rules.
pub fn integrate(t: &[f64], mean: &[f64], var: &[f64]) -> (f64, f64) {
    let (mut corrected, mut plain) = (0.0, 0.0);
    for i in 0..t.len().saturating_sub(1) {
        let dt = t[i + 1] - t[i];
        let trap = 0.5 * dt * (mean[i] + mean[i + 1]);
        plain += trap;
        corrected += trap - dt * dt / 12.0 * (var[i + 1] - var[i]);
    }
    (corrected, plain)
}

impl EvidenceFit {
    /// Estimate every rung and integrate.
    pub fn new(done: Vec<RungDraws>, spec: &CvSpec, seconds: f64) -> Result<EvidenceFit, Error> {
        let mut rungs: Vec<RungStat> = done
            .iter()
            .map(|r| {
                let all: Vec<f64> = r.loglik.concat();
                let (m, v) = mean_var(&all);
                let lens: Vec<usize> = r.loglik.iter().map(Vec::len).collect();
                let se = se_of(&all, &lens);
                // Var of the sample variance ≈ 2v²/n_eff for near-normal
                // values, with n_eff from the mean's standard error.
                let n_eff = if se > 0.0 {
                    v / (se * se)
                } else {
                    all.len() as f64
                };
                RungStat {
                    t: r.t,
                    mean: m,
                    var: v,
                    mean_se: se,
                    var_se: v * (2.0 / n_eff.max(1.0)).sqrt(),
                    mean_mc: m,
                    mean_mc_se: se,
                    var_mc: v,
                    draws: all.len(),
                    mean_split: (m, se),
                }
            })
            .collect();
        let mut held_out = 0;
        let method = match spec {
            CvSpec::Scalar(Method::None) => "none".to_string(),
            CvSpec::Scalar(m) => {
                for (r, st) in done.iter().zip(rungs.iter_mut()) {
                    let f: Vec<f64> = r.loglik.concat();
                    let f2: Vec<f64> = f.iter().map(|v| v * v).collect();
                    let idx: Vec<usize> = (0..f.len()).collect();
                    let s = Samples::chains(
                        matrix(&r.x, &idx),
                        matrix(&r.u, &idx),
                        r.loglik.iter().map(Vec::len).collect(),
                    );
                    let e1 = estimate(m, &s, &f)?;
                    let e2 = estimate(m, &s, &f2)?;
                    held_out += usize::from(e1.held_out);
                    st.mean = e1.cv;
                    st.mean_se = e1.cv_se;
                    st.mean_split = e1.split;
                    st.var = (e2.cv - e1.cv * e1.cv).max(0.0);
                    st.var_se = e2.cv_se.hypot(2.0 * e1.cv * e1.cv_se);
                }
                m.name()
            }
            CvSpec::VectorValued {
                kernel,
                ell,
                lambda,
                b,
                order,
            } => {
                let mut name = String::new();
                for start in (0..done.len()).step_by(GROUP) {
                    let group = &done[start..(start + GROUP).min(done.len())];
                    let mut t1 = Vec::new();
                    let mut t2 = Vec::new();
                    for r in group {
                        let f: Vec<f64> = r.loglik.concat();
                        let n = f.len();
                        let idx = thin(n, VV_POINTS);
                        let x = matrix(&r.x, &idx);
                        let u = matrix(&r.u, &idx);
                        let fi: Vec<f64> = idx.iter().map(|&i| f[i]).collect();
                        t2.push(Task {
                            x: x.clone(),
                            u: u.clone(),
                            f: fi.iter().map(|v| v * v).collect(),
                        });
                        t1.push(Task { x, u, f: fi });
                    }
                    let b_group = match b {
                        crate::mc::vector_valued::TaskMatrix::Fixed(m)
                            if m.nrows() != group.len() =>
                        {
                            // A fixed B is given for full groups; a shorter
                            // last group uses its leading block.
                            crate::mc::vector_valued::TaskMatrix::Fixed(
                                m.view((0, 0), (group.len(), group.len())).into_owned(),
                            )
                        }
                        other => other.clone(),
                    };
                    let e1 = vector_valued_poly(&t1, *kernel, *ell, *lambda, &b_group, *order)?;
                    let e2 = vector_valued_poly(&t2, *kernel, *ell, *lambda, &b_group, *order)?;
                    for (k, st) in rungs[start..start + group.len()].iter_mut().enumerate() {
                        let (m1, m2) = (&e1.estimates[k], &e2.estimates[k]);
                        held_out += usize::from(m1.held_out);
                        st.mean = m1.cv;
                        st.mean_se = m1.cv_se;
                        st.mean_split = m1.split;
                        st.var = (m2.cv - m1.cv * m1.cv).max(0.0);
                        st.var_se = m2.cv_se.hypot(2.0 * m1.cv * m1.cv_se);
                        name = m1.method.clone();
                    }
                }
                name
            }
        };
        let t: Vec<f64> = rungs.iter().map(|r| r.t).collect();
        let mean: Vec<f64> = rungs.iter().map(|r| r.mean).collect();
        let var: Vec<f64> = rungs.iter().map(|r| r.var).collect();
        let (full, trapezoid_full) = integrate(&t, &mean, &var);
        let w = t.len();
        // μᵢ enters with weight (Δtᵢ₋₁ + Δtᵢ)/2, vᵢ with (Δtᵢ² − Δtᵢ₋₁²)/12.
        let error = |mean_se: &dyn Fn(&RungStat) -> f64| {
            let mut v = 0.0;
            for (i, r) in rungs.iter().enumerate() {
                let left = if i > 0 { t[i] - t[i - 1] } else { 0.0 };
                let right = if i + 1 < w { t[i + 1] - t[i] } else { 0.0 };
                v += (0.5 * (left + right) * mean_se(r)).powi(2);
                v += ((right * right - left * left) / 12.0 * r.var_se).powi(2);
            }
            v.sqrt()
        };
        // The same integral of the held-out rung means: an error of one
        // sign at every rung adds up over the ladder while the rungs'
        // standard errors add in quadrature, so the whole estimate is
        // checked against its held-out twin as each rung is.
        let split: Vec<f64> = rungs.iter().map(|r| r.mean_split.0).collect();
        let (held, trapezoid_held) = integrate(&t, &split, &var);
        let held_se = error(&|r: &RungStat| r.mean_split.1);
        let (log_evidence, mcse, ladder_held_out) =
            crate::mc::control_variates::checked_against_split(
                full,
                held,
                held_se.max(error(&|r: &RungStat| r.mean_se)),
            );
        let trapezoid = if ladder_held_out {
            trapezoid_held
        } else {
            trapezoid_full
        };
        let divergences: usize = done.iter().map(|r| r.divergences).sum();
        let mut warnings = Vec::new();
        if ladder_held_out {
            warnings.push(format!(
                "the control-variate rung means give {full:.4}, their held-out (split) estimates {held:.4} ± {held_se:.4}: they disagree by more than twice that error, so the held-out estimate is reported"
            ));
        }
        if held_out > 0 {
            warnings.push(format!(
                "at {held_out} of {w} rungs the control-variate fit moved the rung's mean by more than twice its held-out error; the held-out (split) estimate is used there"
            ));
        }
        if divergences > 0 {
            warnings.push(format!(
                "{divergences} divergent transitions over the rungs: the power posteriors may be poorly sampled"
            ));
        }
        // The second-order correction is small on a fine enough ladder.
        let correction = (log_evidence - trapezoid).abs();
        if correction > (10.0 * mcse).max(1.0) {
            warnings.push(format!(
                "the second-order correction moves the estimate by {correction:.3} (the plain trapezoid rule gives {trapezoid:.4}): the ladder is too coarse for the rule; use more rungs"
            ));
        }
        Ok(EvidenceFit {
            log_evidence,
            mcse,
            trapezoid,
            rungs,
            method,
            seconds,
            gradients: done.iter().map(|r| r.gradients).sum(),
            divergences,
            warnings,
            notes: Vec::new(),
        })
    }
}

impl tempest_infer::fit::Fit for EvidenceFit {
    fn engine(&self) -> &'static str {
        "evidence"
    }

    #[cfg(feature = "plot")]
    fn plot(&self, path: &std::path::Path) -> Result<Vec<std::path::PathBuf>, crate::error::Error> {
        super::figure::draw(self, path)?;
        Ok(vec![path.to_path_buf()])
    }

    /// The log evidence, the per-rung table, warnings and notes.
    fn report(&self) -> Report {
        let mut r = Report::new("evidence");
        r.line(format!(
            "engine: evidence ({} rungs, control variates: {}; {:.2} s, {} gradient evaluations)",
            self.rungs.len(),
            self.method,
            self.seconds,
            self.gradients
        ));
        r.line(format!(
            "log evidence: {} (Monte Carlo standard error {}); plain trapezoid rule {}",
            fixed(self.log_evidence, 4),
            fixed(self.mcse, 4),
            fixed(self.trapezoid, 4)
        ));
        let mut t = Table::new(0, None, 1, &[4, 12, 14, 10, 14, 12]);
        t.header(&["rung", "t", "mean", "se", "mean (mc)", "var"]);
        for (i, g) in self.rungs.iter().enumerate() {
            t.row(
                "",
                vec![
                    (i + 1).to_string(),
                    format!("{:.4e}", g.t),
                    fixed(g.mean, 4),
                    format!("{:.2e}", g.mean_se),
                    fixed(g.mean_mc, 4),
                    fixed(g.var, 4),
                ],
            );
        }
        r.table(t);
        for w in &self.warnings {
            r.warning(w.clone());
        }
        for n in &self.notes {
            r.note(n.clone());
        }
        r.field("log_evidence", self.log_evidence)
            .field("mcse", self.mcse)
            .field("trapezoid", self.trapezoid)
            .field("control_variates", self.method.clone())
            .field("seconds", self.seconds)
            .field("gradient_evaluations", self.gradients)
            .field("divergences", self.divergences)
            .field(
                "rungs",
                self.rungs
                    .iter()
                    .map(|g| json!({
                        "t": g.t, "mean": g.mean, "var": g.var, "mean_se": g.mean_se, "var_se": g.var_se,
                        "mean_mc": g.mean_mc, "mean_mc_se": g.mean_mc_se, "var_mc": g.var_mc, "draws": g.draws, "mean_split": [g.mean_split.0, g.mean_split.1],
                    }))
                    .collect::<Vec<_>>(),
            );
        r
    }
}

/// The evidence fit behind a [`tempest_infer::fit::Fit`] trait object (an
/// engine's fit is its own type; `fit.as_evidence()` with this trait in scope,
/// or `fit.downcast_ref::<EvidenceFit>()`).
pub trait AsEvidence {
    /// The evidence fit, if this is one.
    fn as_evidence(&self) -> Option<&EvidenceFit>;
}

impl AsEvidence for dyn tempest_infer::fit::Fit {
    fn as_evidence(&self) -> Option<&EvidenceFit> {
        self.downcast_ref()
    }
}
