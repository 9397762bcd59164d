//! A saved fit's JSON read field by field (see [`crate::saved`]):
//! each accessor checks one field's kind, shape and range, and its error
//! names the file and the field's JSON path (`exact.theta`,
//! `vi.q[0].factor[3][1]`) and says what was expected and what was found,
//! so a fit edited by hand fails with a message that points at the field.

use crate::error::{DataFormat, DataLocation, Error, ErrorKind};
use nalgebra::DMatrix;
use serde_json::{Map, Value as Json};

/// One field of a saved fit: where it is (file and JSON path) and its
/// value, `None` when absent.
#[derive(Clone)]
pub struct Field<'a> {
    file: &'a str,
    path: String,
    value: Option<&'a Json>,
}

/// A JSON value described for an error: `null`, `-3`, `a string`, `an
/// array of 2 entries`, `nothing (the field is missing)`.
fn found(v: Option<&Json>) -> String {
    match v {
        None => "nothing (the field is missing)".into(),
        Some(Json::Null) => "null (how JSON writes NaN and infinities)".into(),
        Some(Json::Bool(b)) => b.to_string(),
        Some(Json::Number(n)) => n.to_string(),
        Some(Json::String(s)) if s.chars().count() <= 40 => format!("the string {s:?}"),
        Some(Json::String(_)) => "a string".into(),
        Some(Json::Array(a)) => match a.len() {
            1 => "an array of 1 entry".into(),
            n => format!("an array of {n} entries"),
        },
        Some(Json::Object(_)) => "an object".into(),
    }
}

impl<'a> Field<'a> {
    /// The whole saved fit read from `file`.
    pub fn root(file: &'a str, j: &'a Json) -> Field<'a> {
        Field {
            file,
            path: String::new(),
            value: Some(j),
        }
    }

    /// The field's JSON path: `exact.theta`, `vi.q[0].mean`, `hypers.ell`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The member `key` of this object (absent when this is not an object
    /// or has no such member).
    pub fn get(&self, key: &str) -> Field<'a> {
        Field {
            file: self.file,
            path: if self.path.is_empty() {
                key.to_string()
            } else {
                format!("{}.{key}", self.path)
            },
            value: self.value.and_then(|v| v.get(key)),
        }
    }

    /// Entry `i` of this array, `value`.
    fn at(&self, i: usize, value: &'a Json) -> Field<'a> {
        Field {
            file: self.file,
            path: format!("{}[{i}]", self.path),
            value: Some(value),
        }
    }

    /// Whether the field is present.
    pub fn present(&self) -> bool {
        self.value.is_some()
    }

    /// The raw value, when present.
    pub fn raw(&self) -> Option<&'a Json> {
        self.value
    }

    /// An error at this field with `message`.
    pub fn error(&self, message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Data, message)
            .in_data(DataLocation {
                file: self.file.to_string(),
                row: None,
                column: Some(self.path.clone()),
                format: DataFormat::Json,
            })
            .with_note("the file was changed after `tempest run --save` wrote it, or was not written by tempest: save the fit again")
    }

    /// The error: expected `what`, found this field's value.
    pub fn expected(&self, what: &str) -> Error {
        self.error(format!("expected {what}, found {}", found(self.value)))
    }

    /// An object.
    pub fn object(&self) -> Result<&'a Map<String, Json>, Error> {
        self.value
            .and_then(Json::as_object)
            .ok_or_else(|| self.expected("an object"))
    }

    /// A string.
    pub fn str(&self) -> Result<&'a str, Error> {
        self.value
            .and_then(Json::as_str)
            .ok_or_else(|| self.expected("a string"))
    }

    /// `true` or `false`.
    pub fn bool(&self) -> Result<bool, Error> {
        self.value
            .and_then(Json::as_bool)
            .ok_or_else(|| self.expected("true or false"))
    }

    /// A whole number ≥ 0.
    pub fn u64(&self) -> Result<u64, Error> {
        self.value
            .and_then(Json::as_u64)
            .ok_or_else(|| self.expected("a whole number ≥ 0"))
    }

    /// A whole number ≥ `min` that fits in memory's counts.
    pub fn count(&self, min: usize) -> Result<usize, Error> {
        self.value
            .and_then(Json::as_u64)
            .and_then(|v| usize::try_from(v).ok())
            .filter(|&v| v >= min)
            .ok_or_else(|| self.expected(&format!("a whole number ≥ {min}")))
    }

    /// A finite number.
    pub fn number(&self) -> Result<f64, Error> {
        self.value
            .and_then(Json::as_f64)
            .filter(|v| v.is_finite())
            .ok_or_else(|| self.expected("a finite number"))
    }

    /// The entries of an array (`len` of them, when given; `what` names
    /// them in the error).
    pub fn items(&self, len: Option<usize>, what: &str) -> Result<Vec<Field<'a>>, Error> {
        Ok(self
            .array(len, what)?
            .iter()
            .enumerate()
            .map(|(i, v)| self.at(i, v))
            .collect())
    }

    /// The array itself (`len` entries, when given).
    fn array(&self, len: Option<usize>, what: &str) -> Result<&'a Vec<Json>, Error> {
        self.value
            .and_then(Json::as_array)
            .filter(|a| len.is_none_or(|n| a.len() == n))
            .ok_or_else(|| {
                self.expected(&match len {
                    Some(n) => format!("an array of {n} {what}"),
                    None => format!("an array of {what}"),
                })
            })
    }

    /// An array of finite numbers (`len` of them, when given; `what` names
    /// them); the error names the first entry that is not one.
    pub fn numbers(&self, len: Option<usize>, what: &str) -> Result<Vec<f64>, Error> {
        let a = self.array(len, &format!("finite numbers ({what})"))?;
        a.iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_f64()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| self.at(i, v).expected(&format!("a finite number ({what})")))
            })
            .collect()
    }

    /// An array of numbers or `null`s (read as NaN; `len` of them, when
    /// given): a record such as an optimiser's trace, which may hold values
    /// that were not finite.
    pub fn record(&self, len: Option<usize>, what: &str) -> Result<Vec<f64>, Error> {
        let a = self.array(len, &format!("numbers ({what})"))?;
        a.iter()
            .enumerate()
            .map(|(i, v)| self.at(i, v).number_or_nan())
            .collect()
    }

    /// A finite number, or `null` (how JSON writes what was not finite)
    /// read as NaN: an entry of a record.
    pub fn number_or_nan(&self) -> Result<f64, Error> {
        match self.value {
            Some(Json::Null) => Ok(f64::NAN),
            _ => self
                .value
                .and_then(Json::as_f64)
                .filter(|v| v.is_finite())
                .ok_or_else(|| self.expected("a finite number or null")),
        }
    }

    /// A matrix of `shape` (rows, columns) written as rows of finite
    /// numbers; `what` names it.
    pub fn matrix(&self, shape: (usize, usize), what: &str) -> Result<DMatrix<f64>, Error> {
        let (r, c) = shape;
        let rows = self.array(Some(r), &format!("rows ({what}, {r} × {c})"))?;
        let mut m = DMatrix::zeros(r, c);
        for (i, row) in rows.iter().enumerate() {
            let values = self.at(i, row).numbers(Some(c), what)?;
            for (k, v) in values.into_iter().enumerate() {
                m[(i, k)] = v;
            }
        }
        Ok(m)
    }

    /// A triangular `n` × `n` matrix (lower or upper) with no zero on its
    /// diagonal: the factor R of a covariance R Rᵀ, written as rows; `what`
    /// names it.
    pub fn factor(&self, n: usize, what: &str) -> Result<DMatrix<f64>, Error> {
        let m = self.matrix((n, n), what)?;
        if let Some(i) = (0..n).find(|&i| m[(i, i)] == 0.0) {
            return Err(self.error(format!(
                "expected a triangular factor with no zero on its diagonal ({what}), found 0 at row {i}, column {i}"
            )));
        }
        let off = |lower: bool| {
            (0..n)
                .flat_map(|i| (0..n).map(move |k| (i, k)))
                .find(|&(i, k)| (if lower { k > i } else { k < i }) && m[(i, k)] != 0.0)
        };
        if let (Some(_), Some((i, k))) = (off(true), off(false)) {
            return Err(self.error(format!(
                "expected a triangular factor ({what}), found {} at row {i}, column {k} with nonzero entries on both sides of the diagonal",
                m[(i, k)]
            )));
        }
        Ok(m)
    }
}
