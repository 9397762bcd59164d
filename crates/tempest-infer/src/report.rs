//! One report type for every engine: what a fit found, built once by the
//! engine's [`crate::fit::Fit::report`] and rendered in one place, as
//! text for people ([`Report::text`]) and as JSON for programs
//! ([`Report::json`]).
//!
//! A report is an ordered list of blocks — lines, tables, warnings and
//! notes — plus the machine-readable fields. Warnings and notes appear in
//! both renderings (the JSON collects them in `warnings` and `notes`
//! arrays), so a caution printed for a person is never missing from the
//! JSON a program reads, and the other way round.

use serde_json::{Map, Value};

/// What an engine found, ready to render.
#[derive(Clone, Debug)]
pub struct Report {
    engine: &'static str,
    blocks: Vec<Block>,
    fields: Map<String, Value>,
}

/// One block of the text rendering.
#[derive(Clone, Debug)]
enum Block {
    /// A line (without its newline).
    Line(String),
    /// Lines already laid out (e.g. the hypers table).
    Lines(String),
    /// A table.
    Table(Table),
    /// `warning: …`, and an entry of the JSON `warnings`.
    Warning(String),
    /// `note: …`, and an entry of the JSON `notes`.
    Note(String),
}

/// A table of right-aligned cells, each row optionally led by a
/// left-aligned label: `indent`, the label padded to `label_width` and two
/// spaces, then the cells padded to `widths` and separated by `sep` spaces.
#[derive(Clone, Debug)]
pub struct Table {
    indent: usize,
    label_width: Option<usize>,
    sep: usize,
    widths: Vec<usize>,
    rows: Vec<(String, Vec<String>)>,
}

impl Table {
    /// A table with cells `widths` wide, separated by `sep` spaces, each
    /// row led by a label `label_width` wide when given.
    pub fn new(indent: usize, label_width: Option<usize>, sep: usize, widths: &[usize]) -> Table {
        Table {
            indent,
            label_width,
            sep,
            widths: widths.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Add a row: its label (ignored without a label column) and cells
    /// (one per width).
    pub fn row(&mut self, label: impl Into<String>, cells: Vec<String>) -> &mut Table {
        self.rows.push((label.into(), cells));
        self
    }

    /// Add a header row of column names, with an empty label.
    pub fn header(&mut self, names: &[&str]) -> &mut Table {
        self.row("", names.iter().map(|n| n.to_string()).collect())
    }

    fn render(&self, out: &mut String) {
        for (label, cells) in &self.rows {
            out.push_str(&" ".repeat(self.indent));
            if let Some(w) = self.label_width {
                out.push_str(&crate::error::pad_right(label, w));
                out.push_str("  ");
            }
            for (k, (cell, w)) in cells.iter().zip(&self.widths).enumerate() {
                if k > 0 {
                    out.push_str(&" ".repeat(self.sep));
                }
                out.push_str(&crate::error::pad_left(cell, *w));
            }
            out.push('\n');
        }
    }
}

impl Report {
    /// An empty report of `engine`.
    pub fn new(engine: &'static str) -> Report {
        let mut fields = Map::new();
        fields.insert("engine".into(), Value::from(engine));
        Report {
            engine,
            blocks: Vec::new(),
            fields,
        }
    }

    /// The engine that produced it.
    pub fn engine(&self) -> &'static str {
        self.engine
    }

    /// Add a line of text.
    pub fn line(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Line(text.into()));
        self
    }

    /// Add lines already laid out (each ending in a newline).
    pub fn lines(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Lines(text.into()));
        self
    }

    /// Add a table.
    pub fn table(&mut self, t: Table) -> &mut Report {
        self.blocks.push(Block::Table(t));
        self
    }

    /// Add a warning (text and JSON).
    pub fn warning(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Warning(text.into()));
        self
    }

    /// Add a note (text and JSON).
    pub fn note(&mut self, text: impl Into<String>) -> &mut Report {
        self.blocks.push(Block::Note(text.into()));
        self
    }

    /// Set a JSON field (in the order first set).
    pub fn field(&mut self, key: &str, value: impl Into<Value>) -> &mut Report {
        self.fields.insert(key.to_string(), value.into());
        self
    }

    /// Set a JSON field from anything serialisable (`null` if it cannot
    /// be serialised).
    pub fn field_ser<T: serde::Serialize>(&mut self, key: &str, value: &T) -> &mut Report {
        let v = serde_json::to_value(value).unwrap_or(Value::Null);
        self.field(key, v)
    }

    /// The warnings, in order.
    pub fn warnings(&self) -> Vec<&str> {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Warning(w) => Some(w.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The notes, in order.
    pub fn notes(&self) -> Vec<&str> {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Note(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The text rendering: every block in order, one per line (tables and
    /// laid-out lines as they are).
    pub fn text(&self) -> String {
        let mut s = String::new();
        for b in &self.blocks {
            match b {
                Block::Line(l) => {
                    s.push_str(l);
                    s.push('\n');
                }
                Block::Lines(l) => s.push_str(l),
                Block::Table(t) => t.render(&mut s),
                Block::Warning(w) => {
                    s.push_str("warning: ");
                    s.push_str(w);
                    s.push('\n');
                }
                Block::Note(n) => {
                    s.push_str("note: ");
                    s.push_str(n);
                    s.push('\n');
                }
            }
        }
        s
    }

    /// The JSON rendering: `engine`, the fields in the order set, then
    /// `warnings` and `notes` (always present, possibly empty).
    pub fn json(&self) -> Value {
        let mut out = self.fields.clone();
        out.insert("warnings".into(), Value::from(self.warnings()));
        out.insert("notes".into(), Value::from(self.notes()));
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_renderings_carry_the_warnings_and_notes() {
        let mut r = Report::new("exact");
        r.line("engine: exact").field("n", 3);
        let mut t = Table::new(2, Some(3), 1, &[6, 6]);
        t.header(&["a", "b"]);
        t.row("x", vec!["1.5".into(), "-2".into()]);
        r.table(t).warning("ran away").note("jitter added");
        assert_eq!(
            r.text(),
            "engine: exact\n            a      b\n  x       1.5     -2\nwarning: ran away\nnote: jitter added\n"
        );
        let j = r.json();
        assert_eq!(j["engine"], "exact");
        assert_eq!(j["n"], 3);
        assert_eq!(j["warnings"][0], "ran away");
        assert_eq!(j["notes"][0], "jitter added");
    }
}
