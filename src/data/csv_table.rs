//! CSV tables: a header row, then one row per observation. Columns are
//! read by name; every bad cell is reported with its row and column.

use crate::error::{DataFormat, DataLocation, Error, ErrorKind, Result};

/// A CSV file held as text cells.
#[derive(Clone, Debug)]
pub struct CsvTable {
    /// The file name, for messages.
    pub file: String,
    /// Column names.
    pub header: Vec<String>,
    /// Cells, row by row.
    pub rows: Vec<Vec<String>>,
    /// The original (0-based, header excluded) index of each kept row.
    pub row_ids: Vec<usize>,
}

impl CsvTable {
    /// Parse CSV text with a header row.
    pub fn parse(file: &str, text: &str) -> Result<CsvTable> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let header: Vec<String> = reader
            .headers()
            .map_err(|e| {
                Error::new(
                    ErrorKind::Data,
                    format!("{file}: cannot read the CSV header: {e}"),
                )
            })?
            .iter()
            .map(|s| s.to_string())
            .collect();
        if header.is_empty() || header.iter().all(|h| h.is_empty()) {
            return Err(Error::new(
                ErrorKind::Data,
                format!("{file}: the CSV file has no header row"),
            )
            .into());
        }
        if let [only] = header.as_slice()
            && let Some((sep, name)) = [(';', "semicolon"), ('\t', "tab"), ('|', "pipe")]
                .into_iter()
                .find(|(c, _)| only.contains(*c))
        {
            let shown = only.replace('\t', "\\t");
            return Err(Error::new(
                ErrorKind::Data,
                format!(
                    "{file}: the header is one column, `{shown}`, holding `{}` characters: this file looks {name}-separated, and tempest reads comma-separated files",
                    if sep == '\t' { "\\t".to_string() } else { sep.to_string() }
                ),
            )
            .with_note("save the file with commas between fields (and `.` as the decimal point)")
            .into());
        }
        let mut seen = std::collections::HashSet::new();
        for h in &header {
            if !seen.insert(h) {
                return Err(Error::new(
                    ErrorKind::Data,
                    format!("{file}: the column `{h}` appears twice in the header"),
                )
                .into());
            }
        }
        let mut rows = Vec::new();
        for (i, rec) in reader.records().enumerate() {
            let rec = rec.map_err(|e| {
                let loc = DataLocation {
                    file: file.to_string(),
                    row: Some(i),
                    column: None,
                    format: DataFormat::Csv,
                };
                let msg = match e.kind() {
                    csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => {
                        format!(
                            "this row has {len} fields, but the header has {expected_len} columns"
                        )
                    }
                    _ => format!("cannot read this row: {e}"),
                };
                Error::new(ErrorKind::Data, msg).in_data(loc)
            })?;
            rows.push(rec.iter().map(|s| s.to_string()).collect());
        }
        if rows.is_empty() {
            return Err(Error::new(
                ErrorKind::Data,
                format!("{file}: the CSV file has a header but no data rows"),
            )
            .into());
        }
        let row_ids = (0..rows.len()).collect();
        Ok(CsvTable {
            file: file.to_string(),
            header,
            rows,
            row_ids,
        })
    }

    /// Keep rows `first..=last` (0-based, inclusive).
    pub fn select_rows(self, first: usize, last: usize) -> Result<CsvTable> {
        if first > last || last >= self.rows.len() {
            return Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "rows {first}..{last} are outside {}, which has rows 0..{}",
                    self.file,
                    self.rows.len() as i64 - 1
                ),
            )
            .into());
        }
        Ok(CsvTable {
            rows: self.rows[first..=last].to_vec(),
            row_ids: self.row_ids[first..=last].to_vec(),
            ..self
        })
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
        let want = value.trim().parse::<f64>().ok();
        let keep: Vec<usize> = (0..self.rows.len())
            .filter(|&i| {
                let cell = self.rows[i][k].as_str();
                match (want, cell.parse::<f64>().ok()) {
                    (Some(w), Some(c)) => w == c,
                    _ => cell == value.trim(),
                }
            })
            .collect();
        if keep.is_empty() {
            return Err(Error::new(
                ErrorKind::Settings,
                format!("no row of {} has `{col}` = {value}", self.file),
            )
            .into());
        }
        Ok(CsvTable {
            rows: keep.iter().map(|&i| self.rows[i].clone()).collect(),
            row_ids: keep.iter().map(|&i| self.row_ids[i]).collect(),
            ..self
        })
    }

    /// The rows at positions `order`, in that order (each below
    /// [`CsvTable::nrows`]).
    pub fn take(self, order: &[usize]) -> CsvTable {
        CsvTable {
            rows: order.iter().map(|&i| self.rows[i].clone()).collect(),
            row_ids: order.iter().map(|&i| self.row_ids[i]).collect(),
            ..self
        }
    }

    /// The number of rows.
    pub fn nrows(&self) -> usize {
        self.rows.len()
    }

    /// The position of a column.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    fn loc(&self, row: usize, col: usize) -> DataLocation {
        DataLocation {
            file: self.file.clone(),
            row: Some(self.row_ids[row]),
            column: Some(self.header[col].clone()),
            format: DataFormat::Csv,
        }
    }

    /// A column of finite real numbers.
    pub fn real_column(&self, col: usize) -> Result<Vec<f64>, Error> {
        let mut out = Vec::with_capacity(self.rows.len());
        for (r, row) in self.rows.iter().enumerate() {
            let cell = row[col].as_str();
            let v = parse_real(cell)
                .map_err(|m| Error::new(ErrorKind::Data, m).in_data(self.loc(r, col)))?;
            out.push(v);
        }
        Ok(out)
    }

    /// A column of integers (`3` or `3.0`).
    pub fn int_column(&self, col: usize) -> Result<Vec<i64>, Error> {
        let mut out = Vec::with_capacity(self.rows.len());
        for (r, row) in self.rows.iter().enumerate() {
            let cell = row[col].as_str();
            let v = parse_real(cell)
                .and_then(|v| {
                    if v.fract() == 0.0 && v.abs() < 9.0e15 {
                        Ok(v as i64)
                    } else {
                        Err(format!("expected an integer, found `{cell}`"))
                    }
                })
                .map_err(|m| Error::new(ErrorKind::Data, m).in_data(self.loc(r, col)))?;
            out.push(v);
        }
        Ok(out)
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
