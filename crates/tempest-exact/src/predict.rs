//! Predictions of exact GP regression at new inputs X* [M, D]:
//!
//!   mean* = m + offset* + K*ᵀ α,   var_f* = k** − ‖L⁻¹ K*‖²_col,   var_y* = var_f* + σ*²,
//!
//! where K* = K(X, X*) [N, M] and k** = diag K(X*, X*). With t = 0 the
//! posterior is the prior: mean* = m + offset*, var_f* = k**.

use super::model::ExactModel;
use super::objective::LmlState;
use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use serde::Serialize;
use tempest_infer::band::Band;
use tempest_model::kernel::Inputs;

/// Predictions at M test points.
#[derive(Clone, Debug, Serialize)]
pub struct Predictions {
    /// The data row of each test point \[M\]
    /// ([`Bound::row_numbers`]; empty for points that are not data rows,
    /// such as a plot's grid).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<usize>,
    /// Predictive mean of y (and of f + offset), \[M\].
    pub mean: Vec<f64>,
    /// Latent predictive variance, \[M\].
    pub var_f: Vec<f64>,
    /// Observation predictive variance var_f + σ², \[M\].
    pub var_y: Vec<f64>,
    /// Test outcomes, when the test data has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub y: Option<Vec<f64>>,
    /// Root mean squared error, when the test data has outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rmse: Option<f64>,
    /// Mean log predictive density of the outcomes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_log_predictive_density: Option<f64>,
    /// The predictive distribution of y per point, N(mean, var_y): its
    /// mean, sd and quantiles (as every engine reports them).
    pub predictive: Band,
    /// Fraction of the test outcomes inside the central 50 % interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_50: Option<f64>,
    /// Fraction of the test outcomes inside the central 95 % interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage_95: Option<f64>,
}

/// Entries of the cross-covariance K* [N, batch] computed at once.
const PREDICT_ENTRIES: usize = 1 << 22;

impl ExactModel {
    /// Predict at inputs `x` with offset and noise evaluated on `data`.
    pub fn predict_at(
        &self,
        theta: &[f64],
        state: &LmlState,
        x: &Inputs,
        data: &Bound,
    ) -> Result<Predictions, Error> {
        let m = x.len();
        let p = self.pieces::<f64>(theta, data, m)?;
        let kdiag = p.kernel.diag(x)?;
        let mut mean: Vec<f64> = p.loc.iter().copied().collect();
        let mut var_f: Vec<f64> = kdiag.iter().copied().collect();
        if let Some(chol) = &state.chol {
            // In batches of test points, so K* [N, batch] stays small
            // whatever the number of test points.
            let n = self.inputs.len().max(1);
            let batch = (PREDICT_ENTRIES / n).max(1);
            for start in (0..m).step_by(batch) {
                data.stop.check("predicting")?;
                let end = (start + batch).min(m);
                let xb = x.slice(start..end);
                let ks = p.kernel.cross_programs_by_blocks(&self.inputs, &xb)?;
                let km = ks.tr_mul(&state.alpha);
                let v = chol.solve_lower(&ks);
                for j in 0..end - start {
                    mean[start + j] += km[j];
                    var_f[start + j] -= v.column(j).norm_squared();
                    var_f[start + j] = var_f[start + j].max(0.0);
                }
            }
        }
        let var_y: Vec<f64> = var_f.iter().zip(&p.sigma).map(|(v, s)| v + s * s).collect();
        let mut predictive = Band::default();
        for (m, v) in mean.iter().zip(&var_y) {
            predictive.push_normal(*m, v.sqrt());
        }
        Ok(Predictions {
            rows: Vec::new(),
            mean,
            var_f,
            var_y,
            y: None,
            rmse: None,
            mean_log_predictive_density: None,
            predictive,
            coverage_50: None,
            coverage_95: None,
        })
    }

    /// Predict at the inputs of `test` (bound like the training data), with
    /// test metrics when it has outcomes.
    pub fn predict(
        &self,
        theta: &[f64],
        state: &LmlState,
        test: &Bound,
    ) -> Result<Predictions, Error> {
        let hypers = self.layout.values::<f64>(&self.bound, theta);
        let x = test.site_inputs(self.site, &hypers, &[])?;
        if x.dim() != self.inputs.dim() {
            return Err(Error::new(
                ErrorKind::Data,
                format!(
                    "the test inputs have {} columns, the training inputs {}",
                    x.dim(),
                    self.inputs.dim()
                ),
            ));
        }
        let mut p = self.predict_at(theta, state, &x, test)?;
        p.rows = test.row_numbers(p.mean.len());
        let bad = (0..p.mean.len()).find(|&i| {
            !(p.mean[i].is_finite() && p.var_f[i].is_finite() && p.var_y[i].is_finite())
        });
        if let Some(i) = bad {
            let row = test.row_ids.get(i).copied().unwrap_or(i);
            let inputs: Vec<String> = x.row(i).iter().map(|&v| crate::error::num(v)).collect();
            return Err(Error::new(
                ErrorKind::Numerical,
                format!(
                    "the prediction at test row {row} is not finite (mean {}, variance {})",
                    crate::error::num(p.mean[i]),
                    crate::error::num(p.var_y[i])
                ),
            )
            .with_note(format!(
                "its inputs are ({}); inputs of magnitude 1e150 or more overflow the kernel's distances",
                inputs.join(", ")
            )));
        }
        let obs = &self.bound.graph.observations[self.obs];
        if test.present[obs.data]
            && let Some(y) = test.data[obs.data].vector()
            && y.len() == p.mean.len()
        {
            let m = y.len() as f64;
            let se: f64 = y.iter().zip(&p.mean).map(|(a, b)| (a - b).powi(2)).sum();
            let lpd: Vec<f64> = y
                .iter()
                .zip(p.mean.iter().zip(&p.var_y))
                .map(|(yi, (mu, v))| {
                    -0.5 * (yi - mu).powi(2) / v - 0.5 * (2.0 * std::f64::consts::PI * v).ln()
                })
                .collect();
            tempest_infer::finite::test_log_densities(&lpd, test, obs.data, |i| {
                format!(
                    "predictive mean {}, sd {}",
                    tempest_infer::finite::show(p.mean[i]),
                    tempest_infer::finite::show(p.var_y[i].sqrt())
                )
            })?;
            let lpd: f64 = lpd.iter().sum();
            p.rmse = Some(tempest_infer::finite::number(
                "the test RMSE",
                (se / m).sqrt(),
                || tempest_infer::band::OVERFLOW.to_string(),
            )?);
            let y: Vec<f64> = y.iter().copied().collect();
            let (c50, c95) = p.predictive.coverage(&y);
            p.coverage_50 = Some(c50);
            p.coverage_95 = Some(c95);
            p.mean_log_predictive_density = Some(lpd / m);
            p.y = Some(y);
        }
        Ok(p)
    }
}
