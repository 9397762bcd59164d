//! A model bound to its data ([`Bound`]): the graph with every size known
//! and every value checked, and what reads it without evaluating the model
//! (declared shapes, data locations). Binding itself is `bind.rs`'s; the
//! evaluations of a bound model are `eval.rs`'s.

use super::graph::{DataSource, Graph};
use super::types::{Size, Ty};
use super::value::Value;
use nalgebra::{DMatrix, DVector};
use std::collections::BTreeMap;
use std::sync::Arc;
use tempest_core::error::{DataFormat, DataLocation, Error, ErrorKind};
use tempest_model::constraint::Bounds;

/// A model with its data: every size known, every value checked.
#[derive(Clone)]
pub struct Bound {
    /// The graph.
    pub graph: Arc<Graph>,
    /// The value of each data declaration (see `present`).
    pub data: Vec<Value<f64>>,
    /// Whether each data declaration has a value (test data may lack outcomes).
    pub present: Vec<bool>,
    /// The value of each size name.
    pub sizes: BTreeMap<String, usize>,
    /// Initial (or fixed) value of each hyper.
    pub hyper_init: Vec<Value<f64>>,
    /// Bounds of each hyper.
    pub hyper_bounds: Vec<Bounds>,
    /// Bounds of each param.
    pub param_bounds: Vec<Bounds>,
    /// The data file name.
    pub data_file: String,
    /// The kind of data source.
    pub data_format: DataFormat,
    /// For CSV data: the original row number of each bound row.
    pub row_ids: Vec<usize>,
    /// The value of `temperature` in tempered likelihoods (1 unless set).
    pub temperature: f64,
    /// Class labels read from text: for each such int array (by data
    /// index), its labels in the order they are numbered 0, 1, … (the
    /// declared `levels`, the training data's for test data, else sorted).
    pub labels: BTreeMap<usize, Vec<String>>,
    /// The run's stop flag (Ctrl-C, SIGTERM, `RunOptions::cancel`), read by
    /// every long loop over this model (see [`tempest_core::interrupt`]); set by
    /// `api::run`, never set by default.
    pub stop: tempest_core::interrupt::StopFlag,
}

/// The shape of a declared type once sizes are known: (rows, cols); (0, 0)
/// for scalars, (n, 0) for vectors.
pub fn concrete_shape(ty: &Ty, sizes: &BTreeMap<String, usize>) -> Option<(usize, usize)> {
    let s = |x: &Size| match x {
        Size::Lit(k) => Some(*k),
        Size::Sym(n) => sizes.get(n).copied(),
        Size::Any => None,
    };
    match ty {
        Ty::Int | Ty::Real => Some((0, 0)),
        Ty::Vector(n) | Ty::IntArray(n) => Some((s(n)?, 0)),
        Ty::Matrix(n, m) => Some((s(n)?, s(m)?)),
        _ => None,
    }
}

/// The shape of a hyper's or param's declared type, or an error at the
/// declaration naming the size that has no value and how to give it one.
pub fn declared_shape(
    name: &str,
    ty: &Ty,
    sizes: &BTreeMap<String, usize>,
    span: tempest_syntax::ast::Span,
) -> Result<(usize, usize), Error> {
    concrete_shape(ty, sizes).ok_or_else(|| {
        let dims = match ty {
            Ty::Vector(n) | Ty::IntArray(n) => vec![n],
            Ty::Matrix(n, m) => vec![n, m],
            _ => vec![],
        };
        let missing = dims.into_iter().find_map(|d| match d {
            Size::Sym(s) if !sizes.contains_key(s) => Some(s.clone()),
            _ => None,
        });
        let err = Error::at(
            ErrorKind::Shape,
            span,
            format!("the size of `{name}` ({ty}) is unknown"),
        )
        .with_label("declared here");
        match missing {
            Some(s) => err.with_note(format!(
                "give `{s}` a value in the model (`{s} : int = 10`), in a JSON data file or with `--set {s}=10`, or use it as the length of a data declaration"
            )),
            None => err,
        }
    })
}

/// The copies of each hyper and param that binding and the evaluation of
/// the model at its initial values hold at once: the values kept, the dry
/// run's copy and the temporaries of an element-wise expression over them.
pub(crate) const DECLARED_COPIES: u64 = 4;

/// The memory a declared shape's values need, held [`DECLARED_COPIES`]
/// times; `None` for a scalar.
pub(crate) fn shape_request(
    kind: &str,
    name: &str,
    shape: (usize, usize),
) -> Option<tempest_core::limits::Request> {
    let r = tempest_core::limits::Request::new(format!("the {kind} `{name}`"));
    let r = match shape {
        (0, 0) => return None,
        (n, 0) => r.times("entries", n),
        (n, m) => r.times("rows", n).times("columns", m),
    };
    Some(r.times(
        "copies (its values, the dry run's and an expression's temporaries)",
        DECLARED_COPIES,
    ))
}

/// Refuse a declared shape whose values would not fit in memory, naming
/// the declaration; the error points at `span`, where its sizes are written.
pub fn check_shape_memory(
    kind: &str,
    name: &str,
    shape: (usize, usize),
    span: tempest_syntax::ast::Span,
) -> Result<(), Error> {
    let Some(r) = shape_request(kind, name, shape) else {
        return Ok(());
    };
    tempest_core::limits::check_memory(&[r]).map_err(|e| e.with_span(span).with_label("this size"))
}

/// A value of the given shape filled with `x`.
pub fn filled(shape: (usize, usize), ty: &Ty, x: f64) -> Value<f64> {
    match (ty, shape) {
        (Ty::Matrix(..), (n, m)) => Value::Matrix(DMatrix::from_element(n, m, x)),
        (Ty::Vector(_), (n, _)) => Value::Vector(DVector::from_element(n, x)),
        _ => Value::Real(x),
    }
}

/// Where element `k` (column-major for a matrix) of a data declaration's
/// value `v` came from, for an error naming it: its row in the data, when
/// it has one, and the column (or the declaration's name and index) in
/// words.
pub fn element_location(
    v: &Value<f64>,
    k: usize,
    name: &str,
    source: &DataSource,
) -> (Option<usize>, String) {
    let col = match source {
        DataSource::Columns(cs) if cs.len() == 1 => cs[0].clone(),
        _ => name.to_string(),
    };
    match v {
        Value::Matrix(m) => (
            Some(k / m.ncols().max(1)),
            format!("{name}[.., {}]", k % m.ncols().max(1)),
        ),
        Value::Vector(_) | Value::IntArray(_) => (Some(k), col),
        _ => (None, col),
    }
}

impl Bound {
    /// The data row numbers of `m` points of this data, numbered as data
    /// errors number them: for a CSV file the row in the file as read (0
    /// for the first row after the header, on line 2), whatever `--rows`,
    /// `--test-rows`, `--split` or `--shuffle` kept; for JSON or Rust
    /// values, and whenever the points are not one per row, 0..m.
    pub fn row_numbers(&self, m: usize) -> Vec<usize> {
        if self.row_ids.len() == m {
            self.row_ids.clone()
        } else {
            (0..m).collect()
        }
    }

    /// A location in the bound data: `row` is the index among the bound rows.
    pub fn location(&self, row: Option<usize>, column: String) -> DataLocation {
        DataLocation {
            file: self.data_file.clone(),
            row: row.map(|r| self.row_ids.get(r).copied().unwrap_or(r)),
            column: Some(column),
            format: self.data_format,
        }
    }

    /// Initial param values: the constrained image of 0 on the unconstrained scale.
    pub fn param_init(&self) -> Result<Vec<Value<f64>>, Error> {
        self.graph
            .params
            .iter()
            .zip(&self.param_bounds)
            .map(|(p, b)| {
                let shape = declared_shape(&p.name, &p.ty, &self.sizes, p.span)?;
                check_shape_memory("param", &p.name, shape, p.size_span)?;
                Ok(filled(shape, &p.ty, b.constrain(0.0)))
            })
            .collect()
    }
}
