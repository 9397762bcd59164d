//! The table of predictions every engine prints: the first test points,
//! each led by its data row (numbered as data errors number rows) and its
//! input values, then the engine's own columns.

use crate::model::kernel::Inputs;
use crate::report::{Report, Table};

/// Test points a prediction table lists one by one; the rest are in the
/// JSON output.
pub const SHOWN: usize = 10;

/// The most input columns a prediction table shows.
pub const MAX_INPUT_COLUMNS: usize = 3;

/// What leads each row of a prediction table: the data row numbers \[M\]
/// and, when known, the inputs \[M, D\] with a name per column.
pub struct PointIndex<'a> {
    /// The data row of each point ([`crate::ir::bind::Bound::row_numbers`]).
    pub rows: &'a [usize],
    /// The points' inputs and the name of each input column.
    pub inputs: Option<(&'a Inputs, Vec<String>)>,
}

impl<'a> PointIndex<'a> {
    /// Rows with `inputs` named `names` (see [`input_names`]), the inputs
    /// left out unless they are one row per point with at most
    /// [`MAX_INPUT_COLUMNS`] columns.
    pub fn new(rows: &'a [usize], inputs: Option<&'a Inputs>, names: &[String]) -> PointIndex<'a> {
        let inputs = inputs
            .filter(|x| {
                x.len() == rows.len()
                    && names.len() == x.dim()
                    && (1..=MAX_INPUT_COLUMNS).contains(&x.dim())
            })
            .map(|x| (x, names.to_vec()));
        PointIndex { rows, inputs }
    }

    /// The leading column names: `row`, then the inputs'.
    fn heads(&self) -> Vec<String> {
        let mut h = vec!["row".to_string()];
        if let Some((_, names)) = &self.inputs {
            h.extend(names.iter().cloned());
        }
        h
    }

    /// The leading cells of point `i`.
    fn cells(&self, i: usize) -> Vec<String> {
        let mut c = vec![self.rows.get(i).map_or(i, |r| *r).to_string()];
        if let Some((x, _)) = &self.inputs {
            c.extend(x.row(i).iter().map(|&v| crate::error::num(v)));
        }
        c
    }
}

/// The names of the input columns of a latent GP at `site` (the input as
/// written for one column, `NAME[k]` for several); `input`, `input[k]`
/// without a site.
pub fn input_names(g: &crate::ir::Graph, site: Option<usize>, dim: usize) -> Vec<String> {
    let label = crate::labels::input_label(g, site);
    if dim == 1 {
        vec![label]
    } else {
        (0..dim).map(|k| format!("{label}[{k}]")).collect()
    }
}

/// The value columns of a [`Band`](tempest_infer::band::Band) in a
/// prediction table (after the lead, e.g. `mean` or `P(y=1)`).
pub const BAND_TAIL: [&str; 4] = ["sd", "2.5%", "50%", "97.5%"];

/// A band's cells at point `i`: mean, sd, 2.5 %, 50 %, 97.5 %.
pub fn band_cells(b: &tempest_infer::band::Band, i: usize) -> Vec<String> {
    [b.mean[i], b.sd[i], b.q2_5[i], b.q50[i], b.q97_5[i]]
        .iter()
        .map(|v| format!("{v:.4}"))
        .collect()
}

/// The heads of a band's columns led by `lead` (`mean`, `P(y=1)`).
pub fn band_heads(lead: &str) -> Vec<String> {
    std::iter::once(lead.to_string())
        .chain(BAND_TAIL.iter().map(|s| s.to_string()))
        .collect()
}

/// The most probable class of a row of class probabilities and its
/// probability, as cells (the first class on ties).
pub fn class_cells(p: &[f64]) -> Vec<String> {
    let (k, pk) = p
        .iter()
        .enumerate()
        .fold((0, f64::NEG_INFINITY), |best, (k, &v)| {
            if v > best.1 { (k, v) } else { best }
        });
    vec![k.to_string(), format!("{pk:.4}")]
}

/// Add a table of the first [`SHOWN`] of `total` points to `r`: each row
/// the point's [`PointIndex`] cells, then `cells(i)` under `heads`; a line
/// counting the points left out after it.
pub fn prediction_table(
    r: &mut Report,
    index: &PointIndex,
    heads: &[String],
    total: usize,
    cells: impl Fn(usize) -> Vec<String>,
) {
    let show = total.min(SHOWN);
    let mut head: Vec<String> = index.heads();
    head.extend(heads.iter().cloned());
    let body: Vec<Vec<String>> = (0..show)
        .map(|i| {
            let mut c = index.cells(i);
            c.extend(cells(i));
            c
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|k| {
            body.iter()
                .map(|row| row.get(k).map_or(0, |c| c.chars().count()))
                .chain([head[k].chars().count(), 6])
                .max()
                .unwrap_or(6)
        })
        .collect();
    let mut t = Table::new(2, None, 2, &widths);
    t.row("", head);
    for row in body {
        t.row("", row);
    }
    r.table(t);
    if total > show {
        r.line(format!("  ... {} more in the JSON output", total - show));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_inputs_lead_each_row() {
        let x = Inputs::from_rows(&[vec![1820.0], vec![1821.5]]);
        let index = PointIndex {
            rows: &[7, 3],
            inputs: Some((&x, vec!["year".into()])),
        };
        let mut r = Report::new("exact");
        prediction_table(&mut r, &index, &["mean".into()], 2, |i| {
            vec![format!("{:.1}", i as f64)]
        });
        assert_eq!(
            r.text(),
            "     row    year    mean\n       7    1820     0.0\n       3  1821.5     1.0\n"
        );
    }
}
