//! What the variational engines' fits report alike: the test metrics'
//! line and the first test points' table, the check that predictions are
//! finite, and notes on the parts of the model they do not use.

use super::model::ViModel;
use super::predict::{Predictions, TestMetrics};
use crate::error::fixed;
use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use tempest_infer::fit::UNUSED_HYPER_PRIORS;
use tempest_infer::hyper_prior;
use tempest_output::report::Report;

/// The test metrics' line (or the number of predictions) and their JSON
/// fields, for the variational engines' reports.
pub fn test_report(r: &mut Report, test: Option<&TestMetrics>, predictions: Option<&Predictions>) {
    if let Some(t) = test {
        let n = predictions.map(|p| p.mean_f.len()).unwrap_or(0);
        let mut line = format!(
            "test ({n} points): mean log predictive density {}",
            fixed(t.mean_log_predictive_density, 4)
        );
        if let (Some(a), Some(e), Some(m)) = (t.accuracy, t.ece, t.mce) {
            line.push_str(&format!(", accuracy {a:.4}, ECE {e:.4}, MCE {m:.4}"));
        }
        if let (Some(e), Some(c)) = (t.rmse, t.coverage_95) {
            line.push_str(&format!(
                ", RMSE {}, 95 % interval coverage {c:.3}",
                fixed(e, 4)
            ));
        }
        r.line(line);
        r.field_ser("test", t);
    } else if let Some(p) = predictions {
        let n = p.mean_f.len();
        r.line(format!(
            "predictions: {n} test point{}",
            if n == 1 { "" } else { "s" }
        ));
    }
    if let Some(p) = predictions {
        prediction_table(r, p);
        r.field_ser("predictions", p);
    }
}

/// The table of the first test points: each point's data row and inputs,
/// then P(y = 1) with its interval (binary outcomes), the most probable
/// class (categorical), the predictive mean and interval of y (numeric
/// outcomes), or else the latent mean and sd.
fn prediction_table(r: &mut Report, p: &Predictions) {
    use tempest_output::predictions::{
        PointIndex, band_cells, band_heads, class_cells, prediction_table,
    };
    let index = PointIndex::new(&p.rows, p.inputs.as_ref(), &p.input_names);
    let n = p.mean_f.len();
    if let Some(b) = &p.probability {
        let heads = band_heads(&format!("P({}=1)", p.outcome));
        prediction_table(r, &index, &heads, n, |i| band_cells(b, i));
    } else if let Some(probs) = &p.probabilities {
        let heads = ["class".to_string(), "P(class)".to_string()];
        prediction_table(r, &index, &heads, n, |i| class_cells(&probs[i]));
    } else if let Some(b) = &p.predictive {
        prediction_table(r, &index, &band_heads("mean"), n, |i| band_cells(b, i));
    } else {
        let c = p.mean_f.first().map_or(1, Vec::len);
        let heads: Vec<String> = (0..c)
            .flat_map(|k| {
                let k = if c == 1 { String::new() } else { k.to_string() };
                [format!("mean(f{k})"), format!("sd(f{k})")]
            })
            .collect();
        prediction_table(r, &index, &heads, n, |i| {
            (0..c)
                .flat_map(|k| [p.mean_f[i][k], p.var_f[i][k].max(0.0).sqrt()])
                .map(|x| format!("{x:.4}"))
                .collect()
        });
    }
}

/// An error naming the first test row whose prediction is not finite.
pub fn finite_predictions(p: &Predictions, test: &Bound) -> Result<(), Error> {
    let finite = |rows: &Vec<Vec<f64>>| rows.iter().position(|r| r.iter().any(|v| !v.is_finite()));
    let bad = finite(&p.mean_f)
        .or_else(|| finite(&p.var_f))
        .or_else(|| p.probabilities.as_ref().and_then(finite));
    if let Some(i) = bad {
        let row = test.row_ids.get(i).copied().unwrap_or(i);
        return Err(Error::new(
            ErrorKind::Numerical,
            format!(
                "the prediction at test row {row} is not finite (latent mean {:?}, variance {:?})",
                p.mean_f[i], p.var_f[i]
            ),
        )
        .with_note("check the test inputs' scale: inputs of magnitude 1e150 or more overflow the kernel's distances"));
    }
    Ok(())
}

/// Notes on the parts of the model a variational engine does not use: the
/// `estimate` block, and priors on hypers it does not learn.
pub fn unused_parts(model: &ViModel, engine: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !model.bound.graph.estimates.is_empty() {
        out.push(format!("the `estimate` block is not used by the {engine} engine (expectations come from sampling engines)"));
    }
    if hyper_prior::unused_priors(&model.bound, &model.layout) {
        out.push(UNUSED_HYPER_PRIORS.to_string());
    }
    out
}
