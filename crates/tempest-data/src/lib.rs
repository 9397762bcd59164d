//! Data sources: CSV files (columns by name), JSON files (Stan's
//! convention: one key per declaration) and values given from Rust.
//!
//! A source only hands out raw columns, arrays and numbers; binding
//! (`tempest::ir::bind`) matches them to declarations and checks them.

#![warn(missing_docs)]

mod csv_read;
mod csv_table;
mod json;

pub use csv_table::{Column, CsvTable, parse_real};
pub use json::JsonData;

use nalgebra::DMatrix;
use std::collections::BTreeMap;
use std::path::Path;
use tempest_core::error::{DataFormat, DataLocation, Error, ErrorKind, Result};

/// A value given from Rust for a data declaration.
#[derive(Clone, Debug, PartialEq)]
pub enum DataValue {
    /// An `int`.
    Int(i64),
    /// A `real`.
    Real(f64),
    /// A `vector[n]`.
    Vector(Vec<f64>),
    /// An `int[n]`.
    IntArray(Vec<i64>),
    /// A `matrix[n, d]`.
    Matrix(DMatrix<f64>),
}

/// Data for a model: a CSV table, a JSON object, or values from Rust.
#[derive(Clone, Debug)]
pub enum Data {
    /// A CSV file with a header row.
    Csv(CsvTable),
    /// A JSON object in Stan's convention.
    Json(JsonData),
    /// Values given from Rust, by declaration name.
    Values(BTreeMap<String, DataValue>),
}

impl Data {
    /// Read a data file; `.json` is JSON, anything else CSV (every column).
    pub fn read(path: &Path) -> Result<Data> {
        Data::read_columns(path, &|_| true)
    }

    /// Read a data file, keeping of a CSV file only the columns whose name
    /// `keep` accepts (the others are listed in messages but not read; see
    /// `tempest::command::columns_used`). The memory the data will take is
    /// checked before the file is read whole.
    pub fn read_columns(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<Data> {
        let name = path.display().to_string();
        let io = |e: std::io::Error| {
            Error::new(
                ErrorKind::Io,
                format!("cannot read data file `{name}`: {e}"),
            )
        };
        let size = std::fs::metadata(path).map_err(io)?.len();
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            JsonData::check_size(&name, size)?;
            let text = std::fs::read_to_string(path).map_err(io)?;
            Ok(Data::Json(JsonData::parse(&name, &text)?))
        } else {
            let open = || {
                std::fs::File::open(path).map(|f| {
                    Box::new(std::io::BufReader::with_capacity(1 << 16, f))
                        as Box<dyn std::io::Read>
                })
            };
            Ok(Data::Csv(csv_read::read(&name, &open, Some(size), keep)?))
        }
    }

    /// Values from Rust, starting empty; add with [`Data::with`].
    pub fn values() -> Data {
        Data::Values(BTreeMap::new())
    }

    /// Add a value (for [`Data::Values`]).
    pub fn with(mut self, name: &str, value: DataValue) -> Data {
        if let Data::Values(m) = &mut self {
            m.insert(name.to_string(), value);
        }
        self
    }

    /// Keep only rows `first..=last` (CSV only).
    pub fn select_rows(self, first: usize, last: usize) -> Result<Data> {
        self.csv_rows(|t| t.select_rows(first, last))
    }

    /// Keep only the rows whose column `col` equals `value` (CSV only; see
    /// [`CsvTable::filter_rows`]).
    pub fn filter_rows(self, col: &str, value: &str) -> Result<Data> {
        self.csv_rows(|t| t.filter_rows(col, value))
    }

    /// Keep the rows at positions `order` (0-based, in that order; CSV
    /// only). Each position must be below the number of rows.
    pub fn take_rows(self, order: &[usize]) -> Result<Data> {
        self.csv_rows(|t| Ok(t.take(order)))
    }

    /// The number of rows of a CSV table (`None` for other sources).
    pub fn nrows(&self) -> Option<usize> {
        match self {
            Data::Csv(t) => Some(t.nrows()),
            _ => None,
        }
    }

    /// The row numbers of a CSV table's rows, in their order (0 for the
    /// first row after the header, as data errors number them; rows keep
    /// their numbers through every selection); `None` for other sources.
    pub fn row_numbers(&self) -> Option<&[usize]> {
        match self {
            Data::Csv(t) => Some(&t.row_ids),
            _ => None,
        }
    }

    /// A row selection of a CSV table; an error for other sources.
    fn csv_rows(self, select: impl FnOnce(CsvTable) -> Result<CsvTable>) -> Result<Data> {
        match self {
            Data::Csv(t) => Ok(Data::Csv(select(t)?)),
            other => Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "row selection applies to CSV files, not to {}",
                    other.file()
                ),
            )
            .into()),
        }
    }

    /// The file name (or `<rust values>`), for messages.
    pub fn file(&self) -> &str {
        match self {
            Data::Csv(t) => &t.file,
            Data::Json(j) => &j.file,
            Data::Values(_) => "<rust values>",
        }
    }

    /// A location in this source.
    pub fn at(&self, row: Option<usize>, column: &str) -> DataLocation {
        DataLocation {
            file: self.file().to_string(),
            row,
            column: Some(column.to_string()),
            format: self.format(),
        }
    }

    /// The whole source, with no row or column.
    pub fn whole(&self) -> DataLocation {
        DataLocation {
            file: self.file().to_string(),
            row: None,
            column: None,
            format: self.format(),
        }
    }

    /// The kind of source.
    pub fn format(&self) -> DataFormat {
        match self {
            Data::Csv(_) => DataFormat::Csv,
            Data::Json(_) => DataFormat::Json,
            Data::Values(_) => DataFormat::Values,
        }
    }
}
