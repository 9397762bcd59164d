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
use crate::model::kernel::Inputs;
use serde::Serialize;

/// Predictions at M test points.
#[derive(Clone, Debug, Serialize)]
pub struct Predictions {
    /// Predictive mean of y (and of f + offset), [M].
    pub mean: Vec<f64>,
    /// Latent predictive variance, [M].
    pub var_f: Vec<f64>,
    /// Observation predictive variance var_f + σ², [M].
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
}

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
            let ks = p.kernel.cross(&self.inputs, x)?;
            let km = ks.tr_mul(&state.alpha);
            let v = chol.solve_lower(&ks);
            for j in 0..m {
                mean[j] += km[j];
                var_f[j] -= v.column(j).norm_squared();
                var_f[j] = var_f[j].max(0.0);
            }
        }
        let var_y: Vec<f64> = var_f.iter().zip(&p.sigma).map(|(v, s)| v + s * s).collect();
        Ok(Predictions {
            mean,
            var_f,
            var_y,
            y: None,
            rmse: None,
            mean_log_predictive_density: None,
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
        let obs = &self.bound.graph.observations[self.obs];
        if test.present[obs.data]
            && let Some(y) = test.data[obs.data].vector()
            && y.len() == p.mean.len()
        {
            let m = y.len() as f64;
            let se: f64 = y.iter().zip(&p.mean).map(|(a, b)| (a - b).powi(2)).sum();
            let lpd: f64 = y
                .iter()
                .zip(p.mean.iter().zip(&p.var_y))
                .map(|(yi, (mu, v))| {
                    -0.5 * (yi - mu).powi(2) / v - 0.5 * (2.0 * std::f64::consts::PI * v).ln()
                })
                .sum();
            p.rmse = Some((se / m).sqrt());
            p.mean_log_predictive_density = Some(lpd / m);
            p.y = Some(y.iter().copied().collect());
        }
        Ok(p)
    }
}
