//! Reading a CSV file into a compact [`CsvTable`]: streamed record by
//! record (the file's text is never held whole), each used cell parsed
//! straight into its column, columns nothing uses skipped, and the memory
//! the table will take checked against [`tempest_core::limits::check_memory`]
//! after the first rows, from the file's size, before the rest is read.

use super::csv_table::{Column, CsvTable, parse_real};
use std::collections::HashMap;
use std::io::Read;
use tempest_core::error::{DataFormat, DataLocation, Error, ErrorKind, Result};

/// Rows read before the memory the whole table needs is estimated.
const SAMPLE_ROWS: usize = 1000;

/// Copies of the used columns a run holds at its peak: the table, the
/// values bound from it, and the copies an engine and the evaluation at
/// the initial values make of a matrix of inputs (measured: a 180 MB file
/// of 11 used columns peaked at 4 times their size, benches/README.md).
const TABLE_COPIES: u64 = 4;

/// Opens the file (again, for a second pass).
pub type Open<'a> = dyn Fn() -> std::io::Result<Box<dyn Read + 'a>> + 'a;

/// A column while it is read.
enum Building {
    Skipped,
    Numbers(Vec<f64>),
    Text(TextColumn),
    /// Numbers until a cell that is not one: read again as text.
    Again,
}

/// A column of text cells, each distinct text kept once.
#[derive(Default)]
struct TextColumn {
    codes: Vec<u32>,
    texts: Vec<Box<str>>,
    index: HashMap<Box<str>, u32>,
}

impl TextColumn {
    fn push(&mut self, cell: &str) -> std::result::Result<(), String> {
        let code = match self.index.get(cell) {
            Some(&k) => k,
            None => {
                let k = u32::try_from(self.texts.len())
                    .map_err(|_| "more than 4294967295 distinct texts in one column".to_string())?;
                self.texts.push(cell.into());
                self.index.insert(cell.into(), k);
                k
            }
        };
        self.codes.push(code);
        Ok(())
    }

    fn done(self) -> Column {
        Column::Text {
            codes: self.codes,
            texts: self.texts,
        }
    }
}

/// A reader of CSV records with a header row, trimming cells.
fn reader<'a>(open: &Open<'a>, file: &str) -> Result<csv::Reader<Box<dyn Read + 'a>>> {
    let r = open().map_err(|e| {
        Error::new(
            ErrorKind::Io,
            format!("cannot read data file `{file}`: {e}"),
        )
    })?;
    Ok(csv::ReaderBuilder::new()
        .has_headers(true)
        .trim(csv::Trim::All)
        .from_reader(r))
}

/// The error of record `i` that could not be read.
fn record_error(file: &str, i: usize, e: csv::Error) -> Error {
    let loc = DataLocation {
        file: file.to_string(),
        row: Some(i),
        column: None,
        format: DataFormat::Csv,
    };
    let msg = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("this row has {len} fields, but the header has {expected_len} columns"),
        _ => format!("cannot read this row: {e}"),
    };
    Error::new(ErrorKind::Data, msg).in_data(loc)
}

/// The header row, refused when empty, when it looks separated by another
/// character than commas, or when a name appears twice.
fn header(file: &str, r: &mut csv::Reader<Box<dyn Read + '_>>) -> Result<Vec<String>> {
    let header: Vec<String> = r
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
    Ok(header)
}

/// Refuse a table whose used columns would not fit in memory: the rows
/// estimated from the file's `size` and the bytes the first `rows` took
/// (`bytes` from the start of the file).
fn check_size(file: &str, size: u64, rows: usize, bytes: u64, used: usize) -> Result<(), Error> {
    if rows == 0 || used == 0 {
        return Ok(());
    }
    let per_row = (bytes as f64 / rows as f64).max(1.0);
    let estimate = rows.max((size as f64 / per_row).ceil() as usize);
    tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(format!(
        "the data of `{file}`"
    ))
    .times("rows (estimated from the file's size)", estimate)
    .times("columns used", used)
    .times(
        "copies (the table, the values bound from it and an engine's inputs)",
        TABLE_COPIES,
    )])
    .map_err(|e| {
        e.in_data(DataLocation {
            file: file.to_string(),
            row: None,
            column: None,
            format: DataFormat::Csv,
        })
        .with_note("only the columns the model uses are read: select rows with `--rows A..B` in a smaller file, or use fewer columns")
    })
}

/// Read a CSV file (`open` opens it, `size` is its length in bytes when
/// known), keeping the columns whose name `keep` accepts.
pub fn read(
    file: &str,
    open: &Open<'_>,
    size: Option<u64>,
    keep: &dyn Fn(&str) -> bool,
) -> Result<CsvTable> {
    let mut r = reader(open, file)?;
    let header = header(file, &mut r)?;
    let mut cols: Vec<Building> = header
        .iter()
        .map(|h| {
            if keep(h) {
                Building::Numbers(Vec::new())
            } else {
                Building::Skipped
            }
        })
        .collect();
    let used = cols
        .iter()
        .filter(|c| !matches!(c, Building::Skipped))
        .count();
    let start = r.position().byte();
    let mut rec = csv::StringRecord::new();
    let mut rows = 0usize;
    loop {
        if rows == SAMPLE_ROWS
            && let Some(size) = size
        {
            check_size(file, size, rows, r.position().byte() - start, used)?;
        }
        match r.read_record(&mut rec) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return Err(record_error(file, rows, e).into()),
        }
        for (col, cell) in cols.iter_mut().zip(rec.iter()) {
            match col {
                Building::Numbers(v) if cell.is_empty() => v.push(f64::NAN),
                Building::Numbers(v) => match parse_real(cell) {
                    Ok(x) => v.push(x),
                    Err(_) if rows == 0 => {
                        let mut t = TextColumn::default();
                        t.push(cell).map_err(|m| text_error(file, m))?;
                        *col = Building::Text(t);
                    }
                    Err(_) => *col = Building::Again,
                },
                Building::Text(t) => t.push(cell).map_err(|m| text_error(file, m))?,
                Building::Skipped | Building::Again => {}
            }
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(Error::new(
            ErrorKind::Data,
            format!("{file}: the CSV file has a header but no data rows"),
        )
        .into());
    }
    if cols.iter().any(|c| matches!(c, Building::Again)) {
        read_again(file, open, &mut cols, rows)?;
    }
    let columns = cols
        .into_iter()
        .map(|c| match c {
            Building::Skipped | Building::Again => Column::Skipped,
            Building::Numbers(v) => Column::Numbers(v),
            Building::Text(t) => t.done(),
        })
        .collect();
    Ok(CsvTable {
        file: file.to_string(),
        header,
        columns,
        row_ids: (0..rows).collect(),
    })
}

fn text_error(file: &str, m: String) -> Error {
    Error::new(ErrorKind::Data, format!("{file}: {m}"))
}

/// The second pass: the columns that turned out to hold text, read as text.
fn read_again(file: &str, open: &Open<'_>, cols: &mut [Building], rows: usize) -> Result<()> {
    let mut r = reader(open, file)?;
    header(file, &mut r)?;
    for c in cols.iter_mut() {
        if matches!(c, Building::Again) {
            *c = Building::Text(TextColumn::default());
        }
    }
    let again: Vec<usize> = (0..cols.len())
        .filter(|&k| matches!(cols[k], Building::Text(ref t) if t.codes.is_empty()))
        .collect();
    let mut rec = csv::StringRecord::new();
    let mut n = 0usize;
    while r
        .read_record(&mut rec)
        .map_err(|e| record_error(file, n, e))?
    {
        for &k in &again {
            if let (Building::Text(t), Some(cell)) = (&mut cols[k], rec.get(k)) {
                t.push(cell).map_err(|m| text_error(file, m))?;
            }
        }
        n += 1;
    }
    if n != rows {
        return Err(Error::new(
            ErrorKind::Io,
            format!("{file}: the file changed while it was read ({rows} rows, then {n})"),
        )
        .into());
    }
    Ok(())
}

impl CsvTable {
    /// Parse CSV text with a header row (every column read).
    pub fn parse(file: &str, text: &str) -> Result<CsvTable> {
        let bytes = text.as_bytes();
        read(
            file,
            &|| Ok(Box::new(bytes) as Box<dyn std::io::Read + '_>),
            None,
            &|_| true,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str, keep: &dyn Fn(&str) -> bool) -> CsvTable {
        let bytes = text.as_bytes();
        read(
            "t.csv",
            &|| Ok(Box::new(bytes) as Box<dyn Read>),
            None,
            keep,
        )
        .unwrap()
    }

    #[test]
    fn columns_are_numbers_text_or_skipped() {
        // `id` is numbers until its third row: read again as text, the
        // first cells as written (`01`, not `1`).
        let t = table(
            "x, id ,label,unused\n1.5,01,a,u\n,2,b,v\n2.5,x7,a,w\n",
            &|h| h != "unused",
        );
        assert!(matches!(t.columns[0], Column::Numbers(_)));
        assert!(matches!(t.columns[3], Column::Skipped));
        assert!(t.has_text(1).unwrap() && t.has_text(2).unwrap());
        assert_eq!(t.distinct_text(1).unwrap(), ["01", "2", "x7"]);
        assert_eq!(t.distinct_text(2).unwrap(), ["a", "b"]);
        let e = t.real_column(0).unwrap_err();
        assert!(e.message.contains("missing value") && e.data.unwrap().row == Some(1));
        let e = t.real_column(1).unwrap_err();
        assert!(e.message.contains("found `x7`"), "{}", e.message);
        assert!(t.column(3).is_err());
        let levels = ["b".to_string(), "a".to_string()];
        assert_eq!(t.label_codes(2, &levels).unwrap().unwrap(), [1, 0, 1]);
        let t = t.filter_rows("label", "a").unwrap();
        assert_eq!(t.row_ids, [0, 2]);
        assert_eq!(t.distinct_text(1).unwrap(), ["01", "x7"]);
    }

    #[test]
    fn numbers_match_levels_by_value() {
        let t = table("y,x\n1,0.5\n2.0,1e3\n,3\n", &|_| true);
        let levels: Vec<String> = ["2", "1"].iter().map(|s| s.to_string()).collect();
        // The empty cell is the first that matches no level.
        assert_eq!(t.label_codes(0, &levels).unwrap(), Err((2, String::new())));
        let t = t.select_rows(0, 1).unwrap();
        assert_eq!(t.label_codes(0, &levels).unwrap(), Ok(vec![1, 0]));
        assert_eq!(t.int_column(0).unwrap(), [1, 2]);
        assert_eq!(t.real_column(1).unwrap(), [0.5, 1000.0]);
        let e = t.int_column(1).unwrap_err();
        assert!(e.message.contains("expected an integer, found `0.5`"));
        assert_eq!(t.filter_rows("x", "1000").unwrap().row_ids, [1]);
    }

    #[test]
    fn the_table_is_checked_against_the_memory_before_it_is_read() {
        // 1000 sampled rows of 4 bytes: a file of 4 PB would be 10^15
        // rows of it.
        assert!(check_size("small.csv", 4 << 20, 1000, 4000, 3).is_ok());
        let e = check_size("big.csv", 4_000_000_000_000_000, 1000, 4000, 3).unwrap_err();
        assert!(
            e.message.contains(
                "1000000000000000 rows (estimated from the file's size) × 3 columns used"
            ),
            "{}",
            e.message
        );
    }
}
