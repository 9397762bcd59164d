//! The one place where errors become text: file, line and column, the
//! source line with a caret, secondary labels and notes.

use crate::error::{Error, Errors};
use ariadne::{Config, IndexType, Label, Report, ReportKind, Source};

/// A model source: its name (usually the path) and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Shown in diagnostics, e.g. `examples/diabetes.tempest`.
    pub name: String,
    /// The whole text.
    pub text: String,
}

impl SourceFile {
    /// A source with a name and text.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile {
            name: name.into(),
            text: text.into(),
        }
    }

    /// The 1-based line and column of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rsplit('\n')
            .next()
            .map(|l| l.chars().count())
            .unwrap_or(0)
            + 1;
        (line, col)
    }
}

/// Render all errors, one report each, separated by blank lines.
/// `color` turns on terminal colours.
pub fn render(errors: &Errors, source: Option<&SourceFile>, color: bool) -> String {
    let mut out = String::new();
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render_one(e, source, color));
    }
    let n = errors.0.len();
    if n > 1 {
        out.push_str(&format!("\n{n} errors found\n"));
    }
    out
}

/// Render one error.
pub fn render_one(e: &Error, source: Option<&SourceFile>, color: bool) -> String {
    let message = match &e.data {
        Some(d) => format!("{d}: {}", e.message),
        None => e.message.clone(),
    };
    let (Some(src), Some(span)) = (source, e.span) else {
        let mut s = format!("error[{}]: {message}\n", e.kind.code());
        for n in &e.notes {
            s.push_str(&format!("  = note: {n}\n"));
        }
        return s;
    };
    let name = src.name.as_str();
    let clamp = |a: usize, b: usize| {
        let a = a.min(src.text.len());
        let b = b.clamp(a, src.text.len());
        a..b
    };
    let mut report = Report::build(ReportKind::Error, (name, clamp(span.start, span.end)))
        .with_config(
            Config::default()
                .with_color(color)
                .with_index_type(IndexType::Byte),
        )
        .with_code(e.kind.code())
        .with_message(&message);
    let mut primary = Label::new((name, clamp(span.start, span.end)));
    if let Some(l) = &e.label {
        primary = primary.with_message(l);
    }
    report = report.with_label(primary.with_order(0));
    for (i, l) in e.labels.iter().enumerate() {
        report = report.with_label(
            Label::new((name, clamp(l.span.start, l.span.end)))
                .with_message(&l.message)
                .with_order(i as i32 + 1),
        );
    }
    for n in &e.notes {
        report = report.with_note(n);
    }
    let mut buf = Vec::new();
    let written = report
        .finish()
        .write((name, Source::from(src.text.as_str())), &mut buf);
    if written.is_err() {
        let (line, col) = src.line_col(span.start);
        return format!("error[{}]: {name}:{line}:{col}: {message}\n", e.kind.code());
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    // The report header names the location; make it `file:line:col` even when
    // the terminal strips the box characters.
    text
}
