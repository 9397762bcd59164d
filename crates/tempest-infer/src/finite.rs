//! A non-finite result is never reported as success: the checks an engine
//! runs on its headline numbers (test metrics, estimates, evidence) before
//! it returns them, each error naming the cause — the test point, the draw
//! or the rung where the number stopped being finite.

use crate::error::{Error, ErrorKind};
use crate::ir::bind::{Bound, element_location};

/// A number as these errors show it, to about six significant digits:
/// `-2.7`, `0.012346`, `7.4583e-155`, `-inf`, `NaN`.
pub fn show(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    if (1e-4..1e6).contains(&v.abs()) {
        let digits = (5 - v.abs().log10().floor() as i32).clamp(0, 9) as usize;
        let s = format!("{v:.digits$}");
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        return s;
    }
    format!("{v:.4e}")
}

/// Up to ten numbers as [`show`] writes them, comma-separated.
pub fn list(xs: &[f64]) -> String {
    let mut s: Vec<String> = xs.iter().take(10).map(|&x| show(x)).collect();
    if xs.len() > 10 {
        s.push("…".into());
    }
    s.join(", ")
}

/// Up to six `name = value` pairs (`names` and `values` in step), saying
/// where a draw is.
pub fn named(names: &[String], values: &[f64]) -> String {
    let mut s: Vec<String> = names
        .iter()
        .zip(values)
        .take(6)
        .map(|(n, x)| format!("{n} = {}", show(*x)))
        .collect();
    if names.len().min(values.len()) > 6 {
        s.push("…".into());
    }
    s.join(", ")
}

/// Check each test point's log predictive density (`log_density`, one per
/// outcome of the data declaration `outcome` in `test`): the first that is
/// not finite is an error located at that outcome in the test data, saying
/// what the fit predicted there (`prediction(i)`, e.g. "predictive mean 0,
/// sd 0").
pub fn test_log_densities(
    log_density: &[f64],
    test: &Bound,
    outcome: usize,
    prediction: impl Fn(usize) -> String,
) -> Result<(), Error> {
    let Some(i) = log_density.iter().position(|v| !v.is_finite()) else {
        return Ok(());
    };
    let v = log_density[i];
    let d = &test.graph.data[outcome];
    let y = test.data[outcome].flatten().get(i).copied();
    let (row, col) = element_location(&test.data[outcome], i, &d.name, &d.source);
    let what = if v.is_nan() {
        "a log predictive density that is not a number"
    } else if v < 0.0 {
        "a predictive density of 0"
    } else {
        "an infinite predictive density"
    };
    let y = y.map_or(String::new(), |y| format!(" {}", show(y)));
    let mean = log_density.iter().sum::<f64>() / log_density.len().max(1) as f64;
    Err(Error::new(
        ErrorKind::Numerical,
        format!(
            "the mean log predictive density is {}: the fit gives the outcome{y} here {what} ({})",
            show(mean),
            prediction(i)
        ),
    )
    .in_data(test.location(row, col))
    .with_note(
        "a density of 0 means the outcome lies where the fit puts no mass: check that the test outcomes are on the training data's scale, and the hypers (a variance that collapsed to 0 predicts no spread)",
    ))
}

/// A headline number `what` (e.g. "the RMSE") that must be finite; `cause`
/// says why it may not be, for the error.
pub fn number(what: &str, v: f64, cause: impl FnOnce() -> String) -> Result<f64, Error> {
    if v.is_finite() {
        return Ok(v);
    }
    Err(Error::new(
        ErrorKind::Numerical,
        format!("{what} is {}: {}", show(v), cause()),
    ))
}
