//! A bound model's data restricted to some rows (a minibatch), so that an
//! expression over the data costs O(B) rather than O(N) per step.

use super::bound::Bound;
use super::types::{Size, Ty};
use super::value::Value;
use nalgebra::{DMatrix, DVector};
use tempest_core::error::Error;

impl Bound {
    /// The leading size of data declaration `d` (a vector's or array's
    /// length, a matrix's rows), as declared.
    pub fn leading_size(&self, d: usize) -> Option<&Size> {
        match &self.graph.data[d].ty {
            Ty::Vector(s) | Ty::IntArray(s) | Ty::StrArray(s) | Ty::Matrix(s, _) => Some(s),
            _ => None,
        }
    }

    /// The data at `rows` only: every data value declared with the leading
    /// size `size` (the outcomes' rows) keeps those rows, in that order, and
    /// a size name `size` (and its `int` declaration) takes the value
    /// `rows.len()`; other values stay
    /// whole. Each row must be below the values' length. Memory and time
    /// are O(B) for the row-indexed values plus a copy of the others.
    pub fn gather_rows(&self, size: &Size, rows: &[usize]) -> Result<Bound, Error> {
        let mut out = Bound {
            graph: self.graph.clone(),
            data: Vec::with_capacity(self.data.len()),
            present: self.present.clone(),
            sizes: self.sizes.clone(),
            hyper_init: self.hyper_init.clone(),
            hyper_bounds: self.hyper_bounds.clone(),
            param_bounds: self.param_bounds.clone(),
            data_file: self.data_file.clone(),
            data_format: self.data_format,
            row_ids: Vec::new(),
            temperature: self.temperature,
            labels: self.labels.clone(),
            stop: self.stop.clone(),
        };
        let too_far = || Error::internal("a minibatch row beyond the data");
        for (d, v) in self.data.iter().enumerate() {
            // The size's own declaration (`n : int`) counts the batch.
            if matches!(size, Size::Sym(name) if *name == self.graph.data[d].name)
                && matches!(v, Value::Int(_))
            {
                out.data.push(Value::Int(rows.len() as i64));
                continue;
            }
            let indexed = self.present[d] && self.leading_size(d) == Some(size);
            if !indexed {
                out.data.push(v.clone());
                continue;
            }
            let pick = |len: usize| rows.iter().all(|&r| r < len);
            out.data.push(match v {
                Value::Vector(x) if pick(x.len()) => Value::Vector(DVector::from_iterator(
                    rows.len(),
                    rows.iter().map(|&r| x[r]),
                )),
                Value::IntArray(x) if pick(x.len()) => {
                    Value::IntArray(rows.iter().map(|&r| x[r]).collect())
                }
                Value::StrArray(x) if pick(x.len()) => {
                    Value::StrArray(rows.iter().map(|&r| x[r].clone()).collect())
                }
                Value::Matrix(x) if pick(x.nrows()) => {
                    Value::Matrix(DMatrix::from_fn(rows.len(), x.ncols(), |i, j| {
                        x[(rows[i], j)]
                    }))
                }
                Value::Vector(_) | Value::IntArray(_) | Value::StrArray(_) | Value::Matrix(_) => {
                    return Err(too_far());
                }
                other => other.clone(),
            });
        }
        if let Size::Sym(name) = size
            && let Some(n) = out.sizes.get_mut(name)
        {
            *n = rows.len();
        }
        out.row_ids = rows
            .iter()
            .map(|&r| self.row_ids.get(r).copied().unwrap_or(r))
            .collect();
        Ok(out)
    }
}

/// The data item whose rows an integer-array index follows element by
/// element: the item itself (`a[county]`), or an integer array it enters
/// by element-wise integer arithmetic (`a[county - 1]`), through lets.
/// Element k of such an index comes from row k of the item, so an index
/// out of range can name its data row. With the item, whether the index
/// is the item's values unchanged (no arithmetic on the way). `None` when
/// no such item is found.
pub(crate) fn index_rows(
    e: &super::expr::TExpr,
    graph: &super::graph::Graph,
) -> Option<(usize, bool)> {
    use super::expr::{Ref, TKind};
    use tempest_syntax::ast::{BinOp, UnOp};
    let mut todo = vec![(e, true)];
    let mut seen_lets = std::collections::HashSet::new();
    while let Some((x, plain)) = todo.pop() {
        if !matches!(x.ty, Ty::IntArray(_)) {
            continue;
        }
        match &x.kind {
            TKind::Ref(Ref::Data(d)) => return Some((*d, plain)),
            TKind::Ref(Ref::Let(i)) if seen_lets.insert(*i) => {
                todo.extend(graph.lets.get(*i).map(|l| (&l.value, plain)));
            }
            TKind::Unary(UnOp::Neg, a) => todo.push((a, false)),
            TKind::Binary(BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::EwMul, a, b) => {
                todo.push((b, false));
                todo.push((a, false));
            }
            _ => {}
        }
    }
    None
}
