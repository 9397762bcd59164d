//! Binding: data + graph → [`Bound`]. Resolves every size, checks every
//! shape, bound and support, sets initial values, then evaluates the whole
//! model once at its initial values so that shape errors surface now, with
//! the span of the expression at fault.

use super::bound::shape_request;
pub use super::bound::{
    Bound, check_shape_memory, concrete_shape, declared_shape, element_location, filled,
};
use super::eval::Env;
use super::expr::TExpr;
use super::graph::{DataSource, DistRef, Graph};
use super::types::{Size, Ty};
use super::value::Value;
use nalgebra::{DMatrix, DVector};
use std::collections::BTreeMap;
use std::sync::Arc;
use tempest_core::error::{DataLocation, Error, ErrorKind, Errors, Result};
use tempest_data::{Data, DataValue};
use tempest_model::constraint::Bounds;
use tempest_model::dist::{Dist, Support};
use tempest_model::kernel::KernelValue;

/// Values given on the command line (`--set name=value`) for data scalars,
/// hyper initial values and `temperature`; other names are engine settings.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `(name, value text)` pairs.
    pub values: Vec<(String, String)>,
}

impl Overrides {
    fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Read a literal value given on the command line: a number or a list.
pub fn literal_value(name: &str, text: &str) -> Result<Value<f64>, Error> {
    let bad = || {
        Error::new(
            ErrorKind::Settings,
            format!("--set {name}={text}: expected a number or a list of numbers like [1, 2.5]"),
        )
    };
    let e = tempest_syntax::parse_expr(text).map_err(|_| bad())?;
    fn lit(e: &tempest_syntax::ast::Expr) -> Option<Value<f64>> {
        use tempest_syntax::ast::{ExprKind, UnOp};
        match &e.kind {
            ExprKind::Int(i) => Some(Value::Int(*i)),
            ExprKind::Real(r) => Some(Value::Real(*r)),
            ExprKind::Bool(b) => Some(Value::Bool(*b)),
            ExprKind::Unary(UnOp::Neg, x) => match lit(x)? {
                Value::Int(i) => Some(Value::Int(-i)),
                Value::Real(r) => Some(Value::Real(-r)),
                _ => None,
            },
            ExprKind::Array(xs) => {
                let vals: Vec<f64> = xs
                    .iter()
                    .map(|x| lit(x).and_then(|v| v.scalar()))
                    .collect::<Option<_>>()?;
                Some(Value::Vector(DVector::from_vec(vals)))
            }
            _ => None,
        }
    }
    lit(&e).ok_or_else(bad)
}

/// A matrix read from data, with the column names it came from (CSV).
type Table = (DMatrix<f64>, Vec<String>);

struct Binder<'a> {
    graph: &'a Graph,
    data: &'a Data,
    base: Option<&'a Bound>,
    sizes: BTreeMap<String, (usize, String)>,
    values: Vec<Value<f64>>,
    present: Vec<bool>,
    claimed: Vec<String>,
    /// Test binding: declarations the test data lacks, settled after the rest.
    deferred: Vec<usize>,
    /// Class labels read from text, by data index.
    labels: BTreeMap<usize, Vec<String>>,
}

fn data_err(msg: String, loc: DataLocation, span: tempest_syntax::ast::Span) -> Error {
    Error::new(ErrorKind::Data, msg)
        .in_data(loc)
        .with_span(span)
        .with_label("declared here")
}

impl Binder<'_> {
    /// Record that size `s` is `actual`, or report a mismatch.
    fn unify(&mut self, s: &Size, actual: usize, decl: usize, what: &str) -> Result<(), Error> {
        let d = &self.graph.data[decl];
        match s {
            Size::Lit(k) if *k != actual => Err(data_err(
                format!(
                    "`{}` is declared with {}, but the data has {actual}",
                    d.name,
                    plural(*k, what)
                ),
                self.data.whole(),
                d.span,
            )),
            Size::Sym(n) => match self.sizes.get(n) {
                Some((v, origin)) if *v != actual => Err(data_err(
                    format!(
                        "`{}` has {}, but `{n}` = {v} ({origin})",
                        d.name,
                        plural(actual, what)
                    ),
                    self.data.whole(),
                    d.span,
                )),
                Some(_) => Ok(()),
                None => {
                    self.sizes.insert(
                        n.clone(),
                        (
                            actual,
                            format!("the number of {} of `{}`", plural_word(what), d.name),
                        ),
                    );
                    // The size's own declaration has this value from now
                    // on, for the constants declared after it (`m : int = n - 1`).
                    if let Some(k) = self.graph.data.iter().position(|s| s.name == *n)
                        && !self.present[k]
                    {
                        self.values[k] = Value::Int(actual as i64);
                        self.present[k] = true;
                    }
                    Ok(())
                }
            },
            _ => Ok(()),
        }
    }

    fn missing(&self, i: usize) -> Error {
        let d = &self.graph.data[i];
        let how = match (&self.data, &d.ty) {
            (Data::Csv(_), Ty::Int | Ty::Real) => format!(
                "a CSV file holds columns only: give `{}` with `--set {}=...`, a value in the model (`{} : {} = ...`), or a JSON file",
                d.name, d.name, d.name, d.ty
            ),
            (Data::Csv(t), _) => format!("the CSV columns are: {}", t.header.join(", ")),
            (Data::Json(j), _) => format!(
                "the JSON keys are: {}",
                j.map.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            (Data::Values(m), _) => format!(
                "the values given are: {}",
                m.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        let what = match &d.source {
            DataSource::Columns(cs) if cs.len() == 1 => format!("column `{}`", cs[0]),
            DataSource::Columns(cs) => format!("columns {}", cs.join(", ")),
            _ => format!("`{}`", d.name),
        };
        let key = match &d.source {
            DataSource::Columns(cs) if cs.len() == 1 => cs[0].clone(),
            _ => d.name.clone(),
        };
        data_err(
            format!("the data has no {what} for `{}` : {}", d.name, d.ty),
            self.data.at(None, &key),
            d.span,
        )
        .with_note(how)
    }

    fn bind_decl(&mut self, i: usize, overrides: &Overrides) -> Result<(), Error> {
        let d = &self.graph.data[i];
        let ty = d.ty.clone();
        match (&ty, &d.source) {
            (_, DataSource::Value) => {
                if overrides.get(&d.name).is_some() {
                    return Err(Error::new(
                        ErrorKind::Settings,
                        format!(
                            "--set {}: `{}` has its value in the model, which --set cannot change",
                            d.name, d.name
                        ),
                    )
                    .with_span(d.span)
                    .with_label("value given here"));
                }
                let e = d
                    .value
                    .as_ref()
                    .ok_or_else(|| Error::internal("data value without expression"))?;
                let v = self.constant(e)?;
                let v = match (&ty, v) {
                    (Ty::Real, Value::Int(k)) => Value::Real(k as f64),
                    (Ty::Vector(_), Value::IntArray(xs)) => Value::Vector(DVector::from_iterator(
                        xs.len(),
                        xs.iter().map(|&x| x as f64),
                    )),
                    (_, v) => v,
                };
                self.shape_check(i, &v)?;
                if let Value::Int(k) = v {
                    self.constant_size(i, k, e.span)?;
                }
                self.values[i] = v;
                self.present[i] = true;
            }
            (Ty::Int | Ty::Real, _) => {
                let from_set = overrides
                    .get(&d.name)
                    .map(|t| format!("--set {}={t}", d.name));
                let origin = from_set
                    .clone()
                    .unwrap_or_else(|| format!("from {}", self.data.file()));
                let here = |me: &Self| match &from_set {
                    Some(f) => DataLocation {
                        file: f.clone(),
                        ..Default::default()
                    },
                    None => me.data.at(None, &d.name),
                };
                let given: Option<Result<f64, Error>> = if let Some(text) = overrides.get(&d.name) {
                    Some(literal_value(&d.name, text).and_then(|v| {
                        v.scalar().ok_or_else(|| {
                            Error::new(
                                ErrorKind::Settings,
                                format!("--set {}: expected a number", d.name),
                            )
                        })
                    }))
                } else {
                    match self.data {
                        Data::Json(j) => j.scalar(&d.name),
                        Data::Values(m) => m.get(&d.name).map(|v| match v {
                            DataValue::Int(k) => Ok(*k as f64),
                            DataValue::Real(r) => Ok(*r),
                            _ => Err(data_err(
                                format!(
                                    "`{}` is declared {}, but the value given is not a number",
                                    d.name, d.ty
                                ),
                                self.data.at(None, &d.name),
                                d.span,
                            )),
                        }),
                        Data::Csv(_) => None,
                    }
                };
                match given {
                    Some(v) => {
                        let v = v.map_err(|e| {
                            if e.span.is_none() {
                                e.with_span(d.span).with_label("declared here")
                            } else {
                                e
                            }
                        })?;
                        let val = if ty == Ty::Int {
                            if v.fract() != 0.0 {
                                return Err(data_err(
                                    format!("`{}` is an int, found {v}", d.name),
                                    here(self),
                                    d.span,
                                ));
                            }
                            Value::Int(v as i64)
                        } else {
                            Value::Real(v)
                        };
                        if ty == Ty::Int {
                            if v < 0.0 && self.is_size(&d.name) {
                                return Err(data_err(
                                    format!(
                                        "the size `{}` must be non-negative, found {}",
                                        d.name,
                                        tempest_core::error::num(v)
                                    ),
                                    here(self),
                                    d.span,
                                ));
                            }
                            if v >= 0.0 {
                                self.sizes
                                    .insert(d.name.clone(), (v as usize, origin.clone()));
                            }
                        }
                        self.values[i] = val;
                        self.present[i] = true;
                    }
                    None => {
                        // A size with no value: inferred from the shapes that use it.
                    }
                }
            }
            (Ty::Vector(_) | Ty::IntArray(_) | Ty::Matrix(..), _)
                if overrides.get(&d.name).is_some() =>
            {
                return Err(Error::new(
                    ErrorKind::Settings,
                    format!(
                        "--set {}: --set gives numbers to scalar declarations, but `{}` is {}",
                        d.name, d.name, d.ty
                    ),
                )
                .with_span(d.span)
                .with_label("declared here"));
            }
            (Ty::Vector(n) | Ty::IntArray(n), _) => {
                let int = matches!(ty, Ty::IntArray(_));
                let col = match &d.source {
                    DataSource::Columns(cs) if cs.len() == 1 => cs[0].clone(),
                    _ => d.name.clone(),
                };
                let v: Option<Result<Value<f64>, Error>> = match self.data {
                    Data::Csv(t) => t.column_index(&col).map(|c| {
                        self.claimed.push(col.clone());
                        if int {
                            self.int_or_labels(i, t, c).map(Value::IntArray)
                        } else {
                            t.real_column(c)
                                .map(|v| Value::Vector(DVector::from_vec(v)))
                        }
                    }),
                    Data::Json(j) => j.array(&col).map(|r| {
                        r.and_then(|xs| {
                            if int {
                                xs.iter()
                                    .enumerate()
                                    .map(|(k, &x)| {
                                        if x.fract() == 0.0 {
                                            Ok(x as i64)
                                        } else {
                                            Err(Error::new(
                                                ErrorKind::Data,
                                                format!(
                                                    "expected an integer, found {}",
                                                    tempest_core::error::num(x)
                                                ),
                                            )
                                            .in_data(self.data.at(Some(k), &col)))
                                        }
                                    })
                                    .collect::<Result<Vec<_>, _>>()
                                    .map(Value::IntArray)
                            } else {
                                Ok(Value::Vector(DVector::from_vec(xs)))
                            }
                        })
                    }),
                    Data::Values(m) => m.get(&col).map(|v| match (v, int) {
                        (DataValue::Vector(x), false) => {
                            Ok(Value::Vector(DVector::from_vec(x.clone())))
                        }
                        (DataValue::IntArray(x), true) => Ok(Value::IntArray(x.clone())),
                        (DataValue::IntArray(x), false) => Ok(Value::Vector(
                            DVector::from_iterator(x.len(), x.iter().map(|&k| k as f64)),
                        )),
                        _ => Err(data_err(
                            format!(
                                "`{}` is declared {}, but the value given has another type",
                                d.name, d.ty
                            ),
                            self.data.at(None, &col),
                            d.span,
                        )),
                    }),
                };
                match v {
                    Some(v) => {
                        let v = v.map_err(|e| e.with_span(d.span).with_label("declared here"))?;
                        let v = match (&d.ids, v) {
                            (Some(e), Value::IntArray(xs)) => {
                                Value::IntArray(self.number_ids(i, e, &xs, &col)?)
                            }
                            (_, v) => v,
                        };
                        if let Value::Vector(x) = &v
                            && let Some(k) = x.iter().position(|a| !a.is_finite())
                        {
                            return Err(data_err(
                                format!("expected a finite number, found {}", x[k]),
                                self.data.at(Some(k), &col),
                                d.span,
                            ));
                        }
                        let len = v.len().unwrap_or(0);
                        self.unify(n, len, i, "entry")?;
                        self.values[i] = v;
                        self.present[i] = true;
                    }
                    None => return self.fallback(i),
                }
            }
            (Ty::Matrix(n, m), _) => {
                let rows: Option<Result<Table, Error>> = match self.data {
                    Data::Csv(t) => {
                        let cols: Option<Vec<String>> = match &d.source {
                            DataSource::Columns(cs) => Some(cs.clone()),
                            DataSource::Except(ex) => Some(
                                t.header
                                    .iter()
                                    .filter(|h| !ex.contains(h))
                                    .cloned()
                                    .collect(),
                            ),
                            _ => {
                                let claimed: Vec<String> = self
                                    .graph
                                    .data
                                    .iter()
                                    .enumerate()
                                    .filter(|(k, _)| *k != i)
                                    .map(|(_, o)| o.name.clone())
                                    .chain(self.claimed.iter().cloned())
                                    .collect();
                                let rest: Vec<String> = t
                                    .header
                                    .iter()
                                    .filter(|h| !claimed.contains(h))
                                    .cloned()
                                    .collect();
                                (!rest.is_empty()).then_some(rest)
                            }
                        };
                        cols.map(|cols| {
                            let mut m = DMatrix::zeros(t.nrows(), cols.len());
                            for (j, c) in cols.iter().enumerate() {
                                let Some(ci) = t.column_index(c) else {
                                    return Err(data_err(
                                        format!("the data has no column `{c}` for `{}`", d.name),
                                        self.data.at(None, c),
                                        d.span,
                                    )
                                    .with_note(format!(
                                        "the CSV columns are: {}",
                                        t.header.join(", ")
                                    )));
                                };
                                let v = t
                                    .real_column(ci)
                                    .map_err(|e| e.with_span(d.span).with_label("declared here"))?;
                                m.set_column(j, &DVector::from_vec(v));
                            }
                            Ok((m, cols))
                        })
                    }
                    Data::Json(j) if matches!(&d.source, DataSource::Columns(cs) if cs.iter().all(|c| j.map.contains_key(c))) =>
                    {
                        let DataSource::Columns(cs) = &d.source else {
                            unreachable!()
                        };
                        let mut cols = Vec::with_capacity(cs.len());
                        for c in cs {
                            match j.array(c) {
                                Some(Ok(v)) => cols.push(v),
                                Some(Err(e)) => {
                                    return Err(e.with_span(d.span).with_label("declared here"));
                                }
                                None => return Err(self.missing(i)),
                            }
                        }
                        let nrow = cols.first().map(|c| c.len()).unwrap_or(0);
                        if let Some(k) = cols.iter().position(|c| c.len() != nrow) {
                            return Err(data_err(
                                format!(
                                    "`{}` has {} but `{}` has {}",
                                    cs[k],
                                    plural(cols[k].len(), "entry"),
                                    cs[0],
                                    plural(nrow, "entry")
                                ),
                                self.data.at(None, &cs[k]),
                                d.span,
                            ));
                        }
                        Some(Ok((
                            DMatrix::from_fn(nrow, cols.len(), |a, b| cols[b][a]),
                            cs.clone(),
                        )))
                    }
                    Data::Json(j) => j.rows(&d.name).map(|r| {
                        r.and_then(|rows| {
                            let ncol = rows.first().map(|r| r.len()).unwrap_or(0);
                            if let Some(k) = rows.iter().position(|r| r.len() != ncol) {
                                return Err(data_err(
                                    format!(
                                        "row {k} of `{}` has {}, but row 0 has {ncol}",
                                        d.name,
                                        plural(rows[k].len(), "entry"),
                                    ),
                                    self.data.at(Some(k), &d.name),
                                    d.span,
                                ));
                            }
                            let m = DMatrix::from_fn(rows.len(), ncol, |a, b| rows[a][b]);
                            Ok((m, vec![]))
                        })
                    }),
                    Data::Values(vals) => vals.get(&d.name).map(|v| match v {
                        DataValue::Matrix(m) => Ok((m.clone(), vec![])),
                        DataValue::Vector(x) => {
                            Ok((DMatrix::from_column_slice(x.len(), 1, x), vec![]))
                        }
                        _ => Err(data_err(
                            format!(
                                "`{}` is declared {}, but the value given is not a matrix",
                                d.name, d.ty
                            ),
                            self.data.at(None, &d.name),
                            d.span,
                        )),
                    }),
                };
                match rows {
                    Some(r) => {
                        let (mat, cols) = r?;
                        if let Some(k) = mat.iter().position(|a| !a.is_finite()) {
                            let (r, c) = (k % mat.nrows().max(1), k / mat.nrows().max(1));
                            let col = cols
                                .get(c)
                                .cloned()
                                .unwrap_or_else(|| format!("{}[{r}][{c}]", d.name));
                            return Err(data_err(
                                format!("expected a finite number, found {}", mat[(r, c)]),
                                self.data.at(Some(r), &col),
                                d.span,
                            ));
                        }
                        self.claimed.extend(cols);
                        self.unify(n, mat.nrows(), i, "row")?;
                        self.unify(m, mat.ncols(), i, "column")?;
                        self.values[i] = Value::Matrix(mat);
                        self.present[i] = true;
                    }
                    None => return self.fallback(i),
                }
            }
            _ => return Err(Error::internal(format!("cannot bind data of type {ty}"))),
        }
        Ok(())
    }

    /// An `int` constant given in the model (`J : int = 85`) is the value
    /// of the size it names, for every declaration that uses it.
    fn constant_size(
        &mut self,
        i: usize,
        k: i64,
        span: tempest_syntax::ast::Span,
    ) -> Result<(), Error> {
        let name = &self.graph.data[i].name;
        if k < 0 {
            if self.is_size(name) {
                return Err(Error::at(
                    ErrorKind::Constraint,
                    span,
                    format!("the size `{name}` must be non-negative, found {k}"),
                )
                .with_label("value given here"));
            }
            return Ok(());
        }
        self.sizes
            .insert(name.clone(), (k as usize, "its value in the model".into()));
        Ok(())
    }

    fn is_size(&self, name: &str) -> bool {
        !self.size_users(name).is_empty()
    }

    /// The declarations whose types use the size `name`, in words
    /// (`` the param `a` ``).
    fn size_users(&self, name: &str) -> Vec<String> {
        let uses = |t: &Ty| match t {
            Ty::Vector(s) | Ty::IntArray(s) => *s == Size::Sym(name.to_string()),
            Ty::Matrix(a, b) => {
                *a == Size::Sym(name.to_string()) || *b == Size::Sym(name.to_string())
            }
            _ => false,
        };
        let g = self.graph;
        let each = |kind: &str, decls: Vec<(&String, &Ty)>| -> Vec<String> {
            decls
                .into_iter()
                .filter(|(_, t)| uses(t))
                .map(|(n, _)| format!("the {kind} `{n}`"))
                .collect()
        };
        let mut out = each("data", g.data.iter().map(|d| (&d.name, &d.ty)).collect());
        out.extend(each(
            "hyper",
            g.hypers.iter().map(|h| (&h.name, &h.ty)).collect(),
        ));
        out.extend(each(
            "param",
            g.params.iter().map(|p| (&p.name, &p.ty)).collect(),
        ));
        out
    }

    /// A declaration missing from the data: an error for training data; for
    /// test data, settled once everything the test data has is bound.
    fn fallback(&mut self, i: usize) -> Result<(), Error> {
        if self.base.is_none() {
            return Err(self.missing(i));
        }
        self.deferred.push(i);
        Ok(())
    }

    /// Test data lacks declaration `i`: reuse the training value when every
    /// size in its shape is known and matches, else leave it absent.
    fn settle_deferred(&mut self, i: usize) {
        let Some(base) = self.base else { return };
        if !base.present[i] {
            return;
        }
        // Outcomes are never carried over: test data without them is
        // predicted at, not scored against the training outcomes.
        if self.graph.observations.iter().any(|o| o.data == i) {
            return;
        }
        let v = &base.data[i];
        let known = |s: &Size, actual: usize| match s {
            Size::Lit(k) => *k == actual,
            Size::Sym(n) => self.sizes.get(n).is_some_and(|(k, _)| *k == actual),
            Size::Any => true,
        };
        let fits = match (&self.graph.data[i].ty, v) {
            (Ty::Vector(n) | Ty::IntArray(n), _) => known(n, v.len().unwrap_or(1)),
            (Ty::Matrix(n, m), Value::Matrix(x)) => known(n, x.nrows()) && known(m, x.ncols()),
            _ => true,
        };
        if fits {
            self.values[i] = v.clone();
            self.present[i] = true;
        }
    }

    fn shape_check(&mut self, i: usize, v: &Value<f64>) -> Result<(), Error> {
        let ty = self.graph.data[i].ty.clone();
        match (&ty, v) {
            (Ty::Vector(n) | Ty::IntArray(n), _) => self.unify(n, v.len().unwrap_or(1), i, "entry"),
            (Ty::Matrix(n, m), Value::Matrix(x)) => {
                self.unify(n, x.nrows(), i, "row")?;
                self.unify(m, x.ncols(), i, "column")
            }
            _ => Ok(()),
        }
    }

    /// The ids of int array `i` (column `col`) numbered by their position
    /// among its declared `levels = e`, each checked against its bounds.
    fn number_ids(
        &mut self,
        i: usize,
        e: &TExpr,
        xs: &[i64],
        col: &str,
    ) -> Result<Vec<i64>, Error> {
        // The values bound so far are lent to the evaluation, not copied.
        let values = std::mem::take(&mut self.values);
        let mut tmp = self.snapshot();
        tmp.data = values;
        let (levels, bounds) = {
            let env = Env::new(&tmp, &[], &[], &[]);
            let levels = env
                .eval(e)
                .and_then(|v| super::ids::IdLevels::new(&v, e.span));
            (levels, eval_bounds(&env, &self.graph.data[i].bounds))
        };
        self.values = std::mem::take(&mut tmp.data);
        let (levels, bounds) = (levels?, bounds?);
        let d = &self.graph.data[i];
        let row = |k: usize| match self.data {
            Data::Csv(t) => t.row_ids.get(k).copied().unwrap_or(k),
            _ => k,
        };
        super::ids::number_ids(
            &d.name,
            &levels,
            bounds,
            xs,
            |k| self.data.at(Some(row(k)), col),
            d.span,
        )
    }

    fn constant(&self, e: &TExpr) -> Result<Value<f64>, Error> {
        let tmp = self.snapshot();
        let env = Env::new(&tmp, &[], &[], &[]);
        env.eval(e)
    }

    /// An int column of a CSV file: integers, or class labels numbered
    /// 0, 1, … in the order of the declared `levels`, of the training
    /// data's labels (test data), or else sorted (when any cell is text).
    fn int_or_labels(
        &mut self,
        i: usize,
        t: &tempest_data::CsvTable,
        c: usize,
    ) -> Result<Vec<i64>, Error> {
        let d = &self.graph.data[i];
        let known = d
            .levels
            .clone()
            .or_else(|| self.base.and_then(|b| b.labels.get(&i).cloned()));
        let levels = match known {
            Some(l) => l,
            None => {
                if !t.has_text(c)? {
                    return t.int_column(c);
                }
                t.distinct_text(c)?
            }
        };
        // One lookup per distinct cell (a column of distinct IDs is N labels).
        let out = match t.label_codes(c, &levels)? {
            Ok(out) => out,
            Err((r, cell)) => {
                let shown: Vec<String> = levels.iter().take(20).map(|l| format!("`{l}`")).collect();
                let whence = if d.levels.is_some() {
                    "the declared levels"
                } else {
                    "the labels of the training data"
                };
                return Err(Error::new(
                    ErrorKind::Data,
                    if cell.is_empty() {
                        format!(
                            "missing value: expected a label of `{}`, found an empty cell",
                            d.name
                        )
                    } else {
                        format!(
                            "`{cell}` is not among {whence} of `{}` ({}{})",
                            d.name,
                            shown.join(", "),
                            if levels.len() > 20 { ", …" } else { "" }
                        )
                    },
                )
                .in_data(self.data.at(Some(t.row_ids[r]), &t.header[c]))
                .with_span(d.span)
                .with_label("declared here"));
            }
        };
        self.labels.insert(i, levels);
        Ok(out)
    }

    /// The bound model, the values moved into it (not copied).
    fn into_bound(mut self) -> Bound {
        let values = std::mem::take(&mut self.values);
        let mut bound = self.snapshot();
        bound.data = values;
        bound
    }

    fn snapshot(&self) -> Bound {
        Bound {
            graph: Arc::new(self.graph.clone()),
            data: self.values.clone(),
            present: self.present.clone(),
            sizes: self
                .sizes
                .iter()
                .map(|(k, (v, _))| (k.clone(), *v))
                .collect(),
            hyper_init: vec![],
            hyper_bounds: vec![],
            param_bounds: vec![],
            data_file: self.data.file().to_string(),
            data_format: self.data.format(),
            row_ids: match self.data {
                Data::Csv(t) => t.row_ids.clone(),
                _ => vec![],
            },
            temperature: 1.0,
            labels: self.labels.clone(),
            stop: Default::default(),
        }
    }
}

fn eval_bounds(env: &Env<f64>, b: &super::graph::BoundExprs) -> Result<Bounds, Error> {
    let get = |e: &Option<TExpr>| -> Result<Option<f64>, Error> {
        e.as_ref().map(|x| env.scalar(x)).transpose()
    };
    let bounds = Bounds {
        lower: get(&b.lower)?,
        upper: get(&b.upper)?,
    };
    if let (Some(lo), Some(hi), Some(e)) = (bounds.lower, bounds.upper, b.upper.as_ref())
        && lo >= hi
    {
        return Err(Error::at(
            ErrorKind::Constraint,
            e.span,
            format!("the upper bound {hi} is not above the lower bound {lo}"),
        )
        .with_label("empty range"));
    }
    Ok(bounds)
}

/// Refuse, before any is allocated, hypers and params whose values would
/// not fit in memory together: the error names the largest and points at
/// its sizes.
fn check_declared_memory(g: &Graph, sizes: &BTreeMap<String, usize>) -> Result<(), Error> {
    let hypers = g
        .hypers
        .iter()
        .map(|h| ("hyper", &h.name, &h.ty, h.size_span));
    let params = g
        .params
        .iter()
        .map(|p| ("param", &p.name, &p.ty, p.size_span));
    let (requests, spans): (Vec<_>, Vec<_>) = hypers
        .chain(params)
        .filter_map(|(kind, name, ty, span)| {
            let shape = concrete_shape(ty, sizes)?;
            Some((shape_request(kind, name, shape)?, span))
        })
        .unzip();
    tempest_core::limits::check_memory(&requests).map_err(|e| {
        let biggest = (0..requests.len()).max_by_key(|&k| requests[k].bytes());
        match biggest {
            Some(k) => e.with_span(spans[k]).with_label("this size"),
            None => e,
        }
    })
}

/// Bind training data to a graph. `overrides` may give data scalars and
/// hyper initial values (`--set`).
pub fn bind(graph: Graph, data: &Data, overrides: &Overrides) -> Result<Bound> {
    bind_inner(graph, data, overrides, None)
}

/// Check that test data give every param of the model the shape it has
/// with the training data `base` (a sampler's draws are reused at the test
/// data): an error at the param's declaration otherwise. Checked before a
/// run starts.
pub fn check_param_shapes(base: &Bound, test: &Bound) -> Result<(), Error> {
    let show = |sh: (usize, usize)| match sh {
        (0, 0) => "a scalar".to_string(),
        (n, 0) => format!("{n} values"),
        (n, m) => format!("{n} × {m} values"),
    };
    for p in &base.graph.params {
        let (Some(train), test_shape) = (
            concrete_shape(&p.ty, &base.sizes),
            concrete_shape(&p.ty, &test.sizes),
        ) else {
            continue;
        };
        if test_shape != Some(train) {
            return Err(Error::at(
                ErrorKind::Data,
                p.span,
                format!(
                    "`{}` has {} with the training data, but the test data's sizes give it {}",
                    p.name,
                    show(train),
                    test_shape.map_or("no size".to_string(), show)
                ),
            )
            .with_label("declared here")
            .with_note("predictions reuse the values of every param: give the test data the training data's sizes (or leave them out to keep the training values)"));
        }
    }
    Ok(())
}

/// Bind test data (for prediction) like the training data in `base`:
/// declarations missing from the test data keep their training values where
/// their shapes still fit, and are absent otherwise. The labels of a
/// `categorical_logit` outcome must be among the model's classes
/// ([`super::classes::check_test_labels`]).
pub fn bind_test(base: &Bound, data: &Data) -> Result<Bound> {
    let test = bind_inner(
        (*base.graph).clone(),
        data,
        &Overrides::default(),
        Some(base),
    )?;
    super::classes::check_test_labels(&test)?;
    Ok(test)
}

fn bind_inner(
    graph: Graph,
    data: &Data,
    overrides: &Overrides,
    base: Option<&Bound>,
) -> Result<Bound> {
    let n = graph.data.len();
    let mut b = Binder {
        graph: &graph,
        data,
        base,
        sizes: BTreeMap::new(),
        values: vec![Value::Int(0); n],
        present: vec![false; n],
        claimed: graph
            .data
            .iter()
            .flat_map(|d| match &d.source {
                DataSource::Columns(cs) => cs.clone(),
                _ => vec![d.name.clone()],
            })
            .collect(),
        deferred: vec![],
        labels: BTreeMap::new(),
    };
    for i in 0..n {
        b.bind_decl(i, overrides)?;
    }
    for i in std::mem::take(&mut b.deferred) {
        b.settle_deferred(i);
    }
    // Sizes with no value: inferred, or from the training data.
    for (i, d) in graph.data.iter().enumerate() {
        if d.ty == Ty::Int && !b.present[i] {
            if let Some((v, _)) = b.sizes.get(&d.name) {
                b.values[i] = Value::Int(*v as i64);
                b.present[i] = true;
            } else if let Some(base) = base {
                b.values[i] = base.data[i].clone();
                b.present[i] = true;
                if let Value::Int(v) = base.data[i] {
                    b.sizes
                        .insert(d.name.clone(), (v as usize, "the training data".into()));
                }
            } else if b.is_size(&d.name) {
                let users = b.size_users(&d.name);
                return Err(data_err(
                    format!("cannot infer the size `{}`: no data declaration that uses it was found in the data (it sizes {})", d.name, users.join(", ")),
                    data.whole(),
                    d.span,
                )
                .with_note(format!("give it a value in the model (`{} : int = 3`), in a JSON data file, or with `--set {}=3`", d.name, d.name))
                .into());
            } else {
                return Err(b.missing(i).into());
            }
        } else if d.ty == Ty::Real && !b.present[i] {
            match base {
                Some(base) => {
                    b.values[i] = base.data[i].clone();
                    b.present[i] = base.present[i];
                }
                None => return Err(b.missing(i).into()),
            }
        }
    }
    let mut bound = b.into_bound();
    let errors = check_data_bounds(&bound)?;
    if !errors.is_empty() {
        return Err(Errors(errors));
    }
    if let Some(text) = overrides.get("temperature") {
        let t = literal_value("temperature", text)?
            .scalar()
            .unwrap_or(f64::NAN);
        if !(t >= 0.0 && t.is_finite()) {
            return Err(Error::new(
                ErrorKind::Settings,
                format!("--set temperature={text}: expected a number ≥ 0"),
            )
            .into());
        }
        bound.temperature = t;
    }
    if let Some(base) = base {
        bound.temperature = base.temperature;
    }
    if base.is_none() {
        check_declared_memory(&graph, &bound.sizes)?;
    }
    init_hypers(&mut bound, overrides, base)?;
    if base.is_none() {
        dry_run(&bound)?;
    }
    Ok(bound)
}

/// Check declared bounds of data and the support of observed outcomes.
fn check_data_bounds(bound: &Bound) -> Result<Vec<Error>> {
    let g = bound.graph.clone();
    let env = Env::new(bound, &[], &[], &[]);
    let mut errors = Vec::new();
    for (i, d) in g.data.iter().enumerate() {
        // Ids read with `levels` had their bounds checked as written.
        if !bound.present[i] || d.ids.is_some() {
            continue;
        }
        let bounds = eval_bounds(&env, &d.bounds)?;
        if let Some(k) = bound.data[i]
            .flatten()
            .iter()
            .position(|x| !bounds.contains(*x))
        {
            let x = bound.data[i].flatten()[k];
            let msg = format!(
                "`{}` must be {}, found {}",
                d.name,
                bounds.describe(),
                tempest_core::error::num(x)
            );
            if let (DataSource::Value, Some(v)) = (&d.source, &d.value) {
                errors.push(
                    Error::at(ErrorKind::Constraint, v.span, msg).with_label("value given here"),
                );
                continue;
            }
            let (row, col) = element_location(&bound.data[i], k, &d.name, &d.source);
            errors.push(data_err(msg, bound.location(row, col), d.span));
        }
    }
    for o in &g.observations {
        if !bound.present[o.data] {
            continue;
        }
        let support = match &o.dist.dist {
            DistRef::Builtin(Dist::CategoricalLogit) => Support::Category,
            DistRef::Builtin(d) => d.support(),
            _ => Support::Real,
        };
        if support == Support::Interval {
            continue;
        }
        let d = &g.data[o.data];
        let vals = bound.data[o.data].flatten();
        if let Some(k) = vals.iter().position(|&y| !support.contains(y, None)) {
            let (row, col) = element_location(&bound.data[o.data], k, &d.name, &d.source);
            errors.push(
                Error::new(
                    ErrorKind::Data,
                    format!(
                        "`{}` is observed with `{}`, which needs {}; found {}",
                        d.name,
                        o.dist.name,
                        support.describe(),
                        vals[k]
                    ),
                )
                .in_data(bound.location(row, col))
                .with_span(o.span)
                .with_label("observed here"),
            );
        }
    }
    Ok(errors)
}

fn init_hypers(bound: &mut Bound, overrides: &Overrides, base: Option<&Bound>) -> Result<()> {
    if let Some(base) = base {
        bound.hyper_init = base.hyper_init.clone();
        bound.hyper_bounds = base.hyper_bounds.clone();
        bound.param_bounds = base.param_bounds.clone();
        return Ok(());
    }
    let g = bound.graph.clone();
    // Evaluated against the bound data itself (no copy of it); the results
    // go into the bound at the end.
    let (mut hyper_bounds, mut hyper_init, mut param_bounds) = (vec![], vec![], vec![]);
    let env = Env::new(bound, &[], &[], &[]);
    let mut errors = Vec::new();
    for h in &g.hypers {
        let bounds = match eval_bounds(&env, &h.bounds) {
            Ok(b) => b,
            Err(e) => {
                errors.push(e);
                Bounds::NONE
            }
        };
        hyper_bounds.push(bounds);
        let shape = match declared_shape(&h.name, &h.ty, &bound.sizes, h.span) {
            Ok(shape) => shape,
            Err(e) => {
                errors.push(e);
                hyper_init.push(Value::Real(0.0));
                continue;
            }
        };
        if let Err(e) = check_shape_memory("hyper", &h.name, shape, h.size_span) {
            errors.push(e);
            hyper_init.push(Value::Real(0.0));
            continue;
        }
        let default = match (bounds.lower, bounds.upper) {
            (Some(a), Some(b)) => 0.5 * (a + b),
            (Some(a), None) => a + 1.0,
            (None, Some(b)) => b - 1.0,
            (None, None) => 0.0,
        };
        let given: Result<Value<f64>, Error> = match (overrides.get(&h.name), &h.init) {
            (Some(text), _) => literal_value(&h.name, text),
            (None, Some(e)) => env.eval(e),
            (None, None) => Ok(Value::Real(default)),
        };
        let v = match given.and_then(|v| broadcast(&v, &h.ty, shape, &h.name, h.span)) {
            Ok(v) => v,
            Err(e) => {
                errors.push(e);
                hyper_init.push(Value::Real(0.0));
                continue;
            }
        };
        let ok = |x: f64| {
            if h.fixed {
                bounds.contains(x)
            } else {
                bounds.contains_strictly(x)
            }
        };
        if v.flatten().iter().any(|x| x.is_nan()) {
            let span = h.init.as_ref().map(|e| e.span).unwrap_or(h.span);
            errors.push(
                Error::at(
                    ErrorKind::Constraint,
                    span,
                    format!("the initial value of `{}` is not a number (NaN)", h.name),
                )
                .with_label("initial value"),
            );
            hyper_init.push(v);
            continue;
        }
        if let Some(x) = v.flatten().into_iter().find(|&x| !ok(x)) {
            let from_set = overrides
                .get(&h.name)
                .map(|t| format!(" (given by --set {}={t})", h.name));
            let span = match (&from_set, &h.init) {
                (None, Some(e)) => e.span,
                _ => h.span,
            };
            let mut e = Error::at(
                ErrorKind::Constraint,
                span,
                format!(
                    "the initial value {} of `{}`{} is outside its bounds {}",
                    tempest_core::error::num(x),
                    h.name,
                    from_set.unwrap_or_default(),
                    bounds.describe()
                ),
            )
            .with_label(if span == h.span {
                "declared here"
            } else {
                "initial value"
            });
            if !h.fixed && bounds.contains(x) {
                e = e.with_note("a learned hyper must start strictly inside its bounds");
            }
            errors.push(e);
        }
        hyper_init.push(v);
    }
    for p in &g.params {
        match eval_bounds(&env, &p.bounds) {
            Ok(b) => param_bounds.push(b),
            Err(e) => {
                errors.push(e);
                param_bounds.push(Bounds::NONE);
            }
        }
    }
    drop(env);
    bound.hyper_bounds = hyper_bounds;
    bound.hyper_init = hyper_init;
    bound.param_bounds = param_bounds;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Errors(errors))
    }
}

/// A scalar broadcast to the declared shape, or a value of exactly that shape.
fn broadcast(
    v: &Value<f64>,
    ty: &Ty,
    shape: (usize, usize),
    name: &str,
    span: tempest_syntax::ast::Span,
) -> Result<Value<f64>, Error> {
    if let Some(x) = v.scalar() {
        return Ok(filled(shape, ty, x));
    }
    let ok = match (ty, v) {
        (Ty::Vector(_), Value::Vector(x)) => x.len() == shape.0,
        (Ty::Vector(_), Value::IntArray(x)) => x.len() == shape.0,
        (Ty::Matrix(..), Value::Matrix(m)) => m.shape() == shape,
        _ => false,
    };
    if !ok {
        return Err(Error::at(
            ErrorKind::Shape,
            span,
            format!(
                "`{name}` is {} but its value is {}",
                describe_shape(ty, shape),
                v.shape()
            ),
        )
        .with_label("declared here"));
    }
    Ok(match v {
        Value::IntArray(x) => {
            Value::Vector(DVector::from_iterator(x.len(), x.iter().map(|&k| k as f64)))
        }
        v => v.clone(),
    })
}

fn describe_shape(ty: &Ty, shape: (usize, usize)) -> String {
    match ty {
        Ty::Vector(_) => format!("vector[{}]", shape.0),
        Ty::Matrix(..) => format!("matrix[{}, {}]", shape.0, shape.1),
        t => t.to_string(),
    }
}

/// Tell each model-file kernel in `k` the input width it sees there (`d`
/// columns, or its `dims`), so that a body using its inputs element by
/// element compiles for that width ([`crate::program::ShapedPrograms`]).
fn note_widths(graph: &Graph, k: &KernelValue<f64>, d: usize) {
    match k {
        KernelValue::Sum(a, b) | KernelValue::Product(a, b) => {
            note_widths(graph, a, d);
            note_widths(graph, b, d);
        }
        KernelValue::Scale(_, a) => note_widths(graph, a, d),
        KernelValue::Lang {
            name, dims, span, ..
        }
        | KernelValue::Compiled {
            name, dims, span, ..
        } => {
            if let Some(f) = graph.functions.iter().find(|f| &f.name == name) {
                f.shaped
                    .note_width(*span, dims.as_ref().map_or(d, |ds| ds.len()));
            }
        }
        KernelValue::Base { .. } | KernelValue::Rust { .. } => {}
    }
}

/// Evaluate everything once at the initial values; latent sites are zero.
fn dry_run(bound: &Bound) -> Result<()> {
    let g = &bound.graph;
    let hypers = bound.hyper_init.clone();
    let params = bound.param_init()?;
    let mut sites: Vec<Option<Value<f64>>> = Vec::with_capacity(g.sites.len());
    let env0 = Env::new(bound, &hypers, &params, &[]);
    for (si, s) in g.sites.iter().enumerate() {
        let gp = &g.gps[s.gp];
        let inputs = bound.site_inputs(si, &hypers, &params)?;
        // A deep kernel's base kernel sees the network's features.
        let deep = g.deep_kernel(s.gp);
        let (k, dim) = match &deep {
            Some(d) => {
                // The whole network, inputs counted, is within its limit
                // before anything of its width is allocated.
                tempest_model::network::NetSpec::new(inputs.dim(), d.widths.to_vec(), d.activation)
                    .map_err(|e| e.with_span(d.span).with_label("deep kernel"))?;
                let features = d.widths.last().copied().unwrap_or(0);
                let dim = match d.groups {
                    Some(g) => {
                        let copies = bound.replicas(s.gp)?;
                        if features % g != 0 || copies != g {
                            return Err(Error::at(
                                ErrorKind::Shape,
                                d.span,
                                format!(
                                    "`groups = {g}` splits the network's {features} features into {g} equal groups, one per copy of `{}`; it has {copies} cop{} and {features} is {}a multiple of {g}",
                                    gp.name,
                                    if copies == 1 { "y" } else { "ies" },
                                    if features % g == 0 { "" } else { "not " }
                                ),
                            )
                            .with_label("deep kernel")
                            .with_note(format!("e.g. `mlp([64, {g}])` with `groups = {g}` and `{} ~ gp(...)[{g}]`", gp.name))
                            .into());
                        }
                        features / g
                    }
                    None => features,
                };
                (env0.kernel(d.kernel)?, dim)
            }
            None => (env0.kernel(&gp.kernel)?, inputs.dim()),
        };
        k.validate(dim).map_err(|e| {
            e.with_secondary(
                s.span,
                match &deep {
                    Some(_) => format!("applied to {dim} of the network's features here"),
                    None => format!("applied to inputs with {dim} columns here"),
                },
            )
        })?;
        note_widths(&bound.graph, &k, dim);
        if deep.is_some() {
            k.entry(&vec![0.0; dim], &vec![0.0; dim], true)?;
        } else if !inputs.is_empty() {
            k.entry(inputs.row(0), inputs.row(0), true)?;
        }
        env0.scalar(&gp.mean)?;
        let c = bound.replicas(s.gp)?;
        tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(format!(
            "the latent values of `{}`",
            gp.name
        ))
        .times("points", inputs.len())
        .times("copies", c)
        .times(
            "working copies (the values and a likelihood's temporaries)",
            2u64,
        )])
        .map_err(|e| match &gp.replicas {
            Some(r) => e.with_span(r.span).with_label("the number of copies"),
            None => e.with_span(s.span),
        })?;
        sites.push(Some(if gp.replicas.is_some() {
            Value::Matrix(DMatrix::zeros(inputs.len(), c))
        } else {
            Value::Vector(DVector::zeros(inputs.len()))
        }));
    }
    for (i, gp) in g.gps.iter().enumerate() {
        match g.deep_kernel(i) {
            Some(d) => env0.kernel(d.kernel)?,
            None => env0.kernel(&gp.kernel)?,
        };
    }
    let env = Env::new(bound, &hypers, &params, &sites);
    for l in &g.lets {
        // Networks and deep kernels have no value of their own: they are
        // checked with the GP that uses them.
        let deep_part = matches!(l.value.ty, crate::types::Ty::Network)
            || matches!(g.resolve(&l.value).kind, crate::expr::TKind::Deep { .. });
        if !deep_part {
            env.eval(&l.value)?;
        }
    }
    for (oi, o) in g.observations.iter().enumerate() {
        env.observation_terms(oi)?;
        env.temperature_of(oi)?;
        if matches!(o.dist.dist, DistRef::Builtin(Dist::CategoricalLogit)) {
            super::classes::check_labels(bound, &env, oi, false)?;
        }
    }
    for p in &g.priors {
        let y = &params[p.param];
        super::eval::dist_terms(&env, &p.dist, y, p.span)?;
    }
    for (h, value) in g.hypers.iter().zip(&hypers) {
        if let Some(p) = &h.prior {
            super::eval::dist_terms(&env, p, value, p.span)?;
        }
    }
    for e in &g.estimates {
        env.eval(&e.expr)?;
    }
    Ok(())
}

/// "1 row", "3 rows", "1 entry", "2 entries".
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {}", plural_word(word))
    }
}

/// The plural of a unit word.
fn plural_word(word: &str) -> String {
    match word.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{word}s"),
    }
}
