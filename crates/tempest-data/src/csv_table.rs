//! CSV tables: a header row, then one row per observation. Columns are
//! read by name; every bad cell is reported with its row and column.
//!
//! A table is held column by column in a compact form ([`Column`]): a
//! column of numbers as one `f64` per cell, a column with text as one code
//! per cell into its distinct texts, and a column the model does not use
//! not at all. Reading (`csv_read.rs`, also `CsvTable::parse`) builds it from the file in one
//! pass (two when a column of numbers turns out to hold text further
//! down).

use tempest_core::error::{DataFormat, DataLocation, Error, ErrorKind, Result};

/// One column of a [`CsvTable`].
#[derive(Clone, Debug)]
pub enum Column {
    /// Not read: nothing the table was read for uses it.
    Skipped,
    /// Every non-empty cell is a finite number; an empty cell is NaN.
    Numbers(Vec<f64>),
    /// Some cell is not a finite number: each cell as a code into the
    /// column's distinct texts.
    Text {
        /// The code of each row's cell.
        codes: Vec<u32>,
        /// The distinct texts, in the order they first appeared.
        texts: Vec<Box<str>>,
    },
}

/// A CSV file held column by column.
#[derive(Clone, Debug)]
pub struct CsvTable {
    /// The file name, for messages.
    pub file: String,
    /// Column names (every column of the file, read or not).
    pub header: Vec<String>,
    /// The columns, one per name of the header.
    pub(super) columns: Vec<Column>,
    /// The original (0-based, header excluded) index of each kept row.
    pub row_ids: Vec<usize>,
}

impl CsvTable {
    /// Keep rows `first..=last` (0-based, inclusive).
    pub fn select_rows(self, first: usize, last: usize) -> Result<CsvTable> {
        if first > last || last >= self.nrows() {
            return Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "rows {first}..{last} are outside {}, which has rows 0..{}",
                    self.file,
                    self.nrows() as i64 - 1
                ),
            )
            .into());
        }
        let keep: Vec<usize> = (first..=last).collect();
        Ok(self.take(&keep))
    }

    /// Keep the rows whose cell in column `col` equals `value` (as numbers
    /// when both parse as numbers: `1` matches `1.0`; else as text).
    pub fn filter_rows(self, col: &str, value: &str) -> Result<CsvTable> {
        let Some(k) = self.column_index(col) else {
            return Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "{} has no column `{col}` (columns: {})",
                    self.file,
                    self.header.join(", ")
                ),
            )
            .into());
        };
        let value = value.trim();
        let want = value.parse::<f64>().ok();
        let matches = |cell: &str| match (want, cell.parse::<f64>().ok()) {
            (Some(w), Some(c)) => w == c,
            _ => cell == value,
        };
        let keep: Vec<usize> = match self.column(k)? {
            Column::Numbers(values) => (0..values.len())
                .filter(|&i| {
                    let v = values[i];
                    if v.is_nan() {
                        value.is_empty()
                    } else {
                        want == Some(v)
                    }
                })
                .collect(),
            Column::Text { codes, texts } => {
                let hit: Vec<bool> = texts.iter().map(|t| matches(t)).collect();
                (0..codes.len())
                    .filter(|&i| hit[codes[i] as usize])
                    .collect()
            }
            Column::Skipped => unreachable!("column() refuses skipped columns"),
        };
        if keep.is_empty() {
            return Err(Error::new(
                ErrorKind::Settings,
                format!("no row of {} has `{col}` = {value}", self.file),
            )
            .into());
        }
        Ok(self.take(&keep))
    }

    /// The rows at positions `order`, in that order (each below
    /// [`CsvTable::nrows`]).
    pub fn take(self, order: &[usize]) -> CsvTable {
        let columns = self
            .columns
            .into_iter()
            .map(|c| match c {
                Column::Skipped => Column::Skipped,
                Column::Numbers(v) => Column::Numbers(order.iter().map(|&i| v[i]).collect()),
                Column::Text { codes, texts } => Column::Text {
                    codes: order.iter().map(|&i| codes[i]).collect(),
                    texts,
                },
            })
            .collect();
        CsvTable {
            row_ids: order.iter().map(|&i| self.row_ids[i]).collect(),
            columns,
            ..self
        }
    }

    /// The number of rows.
    pub fn nrows(&self) -> usize {
        self.row_ids.len()
    }

    /// The position of a column.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// Column `col`, which must have been read.
    pub fn column(&self, col: usize) -> Result<&Column, Error> {
        match self.columns.get(col) {
            Some(Column::Skipped) | None => Err(Error::internal(format!(
                "the column `{}` of {} was not read",
                self.header.get(col).map_or("?", |h| h.as_str()),
                self.file
            ))),
            Some(c) => Ok(c),
        }
    }

    fn loc(&self, row: usize, col: usize) -> DataLocation {
        DataLocation {
            file: self.file.clone(),
            row: Some(self.row_ids[row]),
            column: Some(self.header[col].clone()),
            format: DataFormat::Csv,
        }
    }

    /// Each cell of column `col` through `f` (the number, or the message
    /// of the first cell that is not one, at its row).
    fn cells<T>(
        &self,
        col: usize,
        f: impl Fn(Result<f64, String>, &str) -> Result<T, String>,
    ) -> Result<Vec<T>, Error> {
        let at = |r: usize, m: String| Error::new(ErrorKind::Data, m).in_data(self.loc(r, col));
        match self.column(col)? {
            Column::Numbers(values) => values
                .iter()
                .enumerate()
                .map(|(r, &v)| {
                    let cell = number_text(v);
                    let x = if v.is_nan() { parse_real("") } else { Ok(v) };
                    f(x, &cell).map_err(|m| at(r, m))
                })
                .collect(),
            Column::Text { codes, texts } => codes
                .iter()
                .enumerate()
                .map(|(r, &k)| {
                    let cell = &texts[k as usize];
                    f(parse_real(cell), cell).map_err(|m| at(r, m))
                })
                .collect(),
            Column::Skipped => unreachable!("column() refuses skipped columns"),
        }
    }

    /// A column of finite real numbers.
    pub fn real_column(&self, col: usize) -> Result<Vec<f64>, Error> {
        if let Column::Numbers(values) = self.column(col)?
            && !values.iter().any(|v| v.is_nan())
        {
            return Ok(values.clone());
        }
        self.cells(col, |x, _| x)
    }

    /// A column of integers (`3` or `3.0`).
    pub fn int_column(&self, col: usize) -> Result<Vec<i64>, Error> {
        self.cells(col, |x, cell| {
            x.and_then(|v| {
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    Ok(v as i64)
                } else {
                    Err(format!("expected an integer, found `{cell}`"))
                }
            })
        })
    }

    /// Whether some non-empty cell of column `col` is not a finite number
    /// (so the column holds class labels written as text).
    pub fn has_text(&self, col: usize) -> Result<bool, Error> {
        Ok(matches!(self.column(col)?, Column::Text { .. }))
    }

    /// The distinct cells of column `col`, sorted as text (an empty cell
    /// is the text "").
    pub fn distinct_text(&self, col: usize) -> Result<Vec<String>, Error> {
        let set: std::collections::BTreeSet<String> = match self.column(col)? {
            Column::Numbers(values) => values.iter().map(|&v| number_text(v)).collect(),
            Column::Text { codes, texts } => {
                let mut used = vec![false; texts.len()];
                for &k in codes {
                    used[k as usize] = true;
                }
                texts
                    .iter()
                    .zip(used)
                    .filter(|(_, u)| *u)
                    .map(|(t, _)| t.to_string())
                    .collect()
            }
            Column::Skipped => unreachable!("column() refuses skipped columns"),
        };
        Ok(set.into_iter().collect())
    }

    /// Column `col` as positions in `levels` (class labels numbered 0, 1,
    /// … in that order): a text cell matches the level written the same
    /// way, a number the level that reads as the same number. `Err` gives
    /// the first cell that matches no level: its row (among this table's)
    /// and its text ("" when empty).
    pub fn label_codes(
        &self,
        col: usize,
        levels: &[String],
    ) -> Result<std::result::Result<Vec<i64>, (usize, String)>, Error> {
        let mut out = Vec::with_capacity(self.nrows());
        match self.column(col)? {
            Column::Numbers(values) => {
                let mut index = std::collections::HashMap::new();
                for (k, l) in levels.iter().enumerate() {
                    if let Ok(v) = parse_real(l) {
                        index.entry((v + 0.0).to_bits()).or_insert(k as i64);
                    }
                }
                for (r, &v) in values.iter().enumerate() {
                    match index.get(&(v + 0.0).to_bits()) {
                        Some(&k) if !v.is_nan() => out.push(k),
                        _ => return Ok(Err((r, number_text(v)))),
                    }
                }
            }
            Column::Text { codes, texts } => {
                let index: std::collections::HashMap<&str, i64> = levels
                    .iter()
                    .enumerate()
                    .map(|(k, l)| (l.as_str(), k as i64))
                    .collect();
                let of: Vec<Option<i64>> = texts.iter().map(|t| index.get(&**t).copied()).collect();
                for (r, &c) in codes.iter().enumerate() {
                    match of[c as usize] {
                        Some(k) => out.push(k),
                        None => return Ok(Err((r, texts[c as usize].to_string()))),
                    }
                }
            }
            Column::Skipped => unreachable!("column() refuses skipped columns"),
        }
        Ok(Ok(out))
    }
}

/// A number of a column of numbers as a cell shows it ("" for an empty
/// cell, held as NaN).
fn number_text(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        v.to_string()
    }
}

/// A finite number from a cell, or a message saying what is wrong.
pub fn parse_real(cell: &str) -> Result<f64, String> {
    if cell.is_empty() {
        return Err("missing value: expected a number, found an empty cell".to_string());
    }
    match cell.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(format!("expected a finite number, found `{cell}`")),
        Err(_) => Err(format!("expected a number, found `{cell}`")),
    }
}
