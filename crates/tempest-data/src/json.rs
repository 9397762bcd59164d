//! JSON data in Stan's convention: an object with one key per declaration;
//! scalars are numbers, vectors arrays, matrices arrays of rows.

use serde_json::{Map, Value};
use tempest_core::error::{DataFormat, DataLocation, Error, ErrorKind, Result};

/// A parsed JSON data object.
#[derive(Clone, Debug)]
pub struct JsonData {
    /// The file name, for messages.
    pub file: String,
    /// The top-level object.
    pub map: Map<String, Value>,
}

/// Bytes of memory reading a JSON file takes per byte of the file: its
/// text, the parsed values (32 bytes for a number of a few digits) and the
/// values bound from them (measured: a 41.5 MB file of two arrays of two
/// million numbers peaked at 392 MB, 9.4 times its size).
const BYTES_PER_BYTE: u64 = 10;

impl JsonData {
    /// Refuse a JSON file of `size` bytes whose values would not fit in
    /// memory, before it is read.
    pub fn check_size(file: &str, size: u64) -> Result<(), Error> {
        tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(format!(
            "reading `{file}` (its text, the parsed values and the values bound from them)"
        ))
        .times("bytes of the file", size)
        .times("bytes in memory per byte of the file", BYTES_PER_BYTE)
        .bytes_each(1)])
        .map_err(|e| {
            e.in_data(DataLocation {
                file: file.to_string(),
                row: None,
                column: None,
                format: DataFormat::Json,
            })
        })
    }

    /// Parse JSON text whose top level is an object.
    pub fn parse(file: &str, text: &str) -> Result<JsonData> {
        let v: Value = serde_json::from_str(text).map_err(|e| {
            Error::new(
                ErrorKind::Data,
                format!(
                    "{file}, line {}: invalid JSON: {}",
                    e.line(),
                    json_reason(&e)
                ),
            )
        })?;
        match v {
            Value::Object(map) => Ok(JsonData {
                file: file.to_string(),
                map,
            }),
            _ => Err(Error::new(
                ErrorKind::Data,
                format!("{file}: the top level must be an object {{\"name\": value, ...}}"),
            )
            .into()),
        }
    }

    fn loc(&self, key: &str, row: Option<usize>) -> DataLocation {
        DataLocation {
            file: self.file.clone(),
            row,
            column: Some(key.to_string()),
            format: DataFormat::Json,
        }
    }

    fn number(&self, v: &Value, key: &str, row: Option<usize>, what: &str) -> Result<f64, Error> {
        match v.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(
                Error::new(ErrorKind::Data, format!("expected {what}, found `{v}`"))
                    .in_data(self.loc(key, row)),
            ),
        }
    }

    /// A scalar number.
    pub fn scalar(&self, key: &str) -> Option<Result<f64, Error>> {
        self.map
            .get(key)
            .map(|v| self.number(v, key, None, "a number"))
    }

    /// An array of numbers.
    pub fn array(&self, key: &str) -> Option<Result<Vec<f64>, Error>> {
        let v = self.map.get(key)?;
        Some(match v {
            Value::Array(xs) => xs
                .iter()
                .enumerate()
                .map(|(i, x)| self.number(x, key, Some(i), "a number"))
                .collect(),
            other => Err(Error::new(
                ErrorKind::Data,
                format!("expected an array of numbers, found `{}`", short(other)),
            )
            .in_data(self.loc(key, None))),
        })
    }

    /// An array of rows (a matrix): returns the rows.
    pub fn rows(&self, key: &str) -> Option<Result<Vec<Vec<f64>>, Error>> {
        let v = self.map.get(key)?;
        let Value::Array(rows) = v else {
            return Some(Err(Error::new(
                ErrorKind::Data,
                format!("expected an array of rows, found `{}`", short(v)),
            )
            .in_data(self.loc(key, None))));
        };
        let mut out = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            let row = match r {
                Value::Array(xs) => xs
                    .iter()
                    .map(|x| self.number(x, key, Some(i), "a number"))
                    .collect::<Result<Vec<f64>, Error>>(),
                other => Err(Error::new(
                    ErrorKind::Data,
                    format!(
                        "expected a row (an array of numbers), found `{}`",
                        short(other)
                    ),
                )
                .in_data(self.loc(key, Some(i)))),
            };
            match row {
                Ok(r) => out.push(r),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(out))
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}...", &s[..40])
    } else {
        s
    }
}

/// serde_json's message without its own "at line L column C" suffix.
fn json_reason(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}
