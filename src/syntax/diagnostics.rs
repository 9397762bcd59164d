//! The one place where errors become text: file, line and column, the
//! source line with a caret, secondary labels and notes.

use crate::error::{Error, Errors};
use ariadne::{Color, Config, IndexType, Label, Report, ReportKind};

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
    // Secondary labels are drawn against a second copy of the source, so
    // each section's header shows the line and column of its own label.
    let (main, other) = (SrcId(name.to_string(), 0), SrcId(name.to_string(), 1));
    let head = format!("error[{}]", e.kind.code());
    let mut report = Report::build(
        ReportKind::Custom(&head, Color::Red),
        (main.clone(), clamp(span.start, span.end)),
    )
    .with_config(
        Config::default()
            .with_color(color)
            .with_index_type(IndexType::Byte),
    )
    .with_message(&message);
    let mut primary = Label::new((main.clone(), clamp(span.start, span.end)));
    if let Some(l) = &e.label {
        primary = primary.with_message(l);
    }
    report = report.with_label(primary.with_order(0));
    for (i, l) in e.labels.iter().enumerate() {
        report = report.with_label(
            Label::new((other.clone(), clamp(l.span.start, l.span.end)))
                .with_message(&l.message)
                .with_order(i as i32 + 1),
        );
    }
    for n in &e.notes {
        report = report.with_note(n);
    }
    let mut buf = Vec::new();
    let cache = ariadne::sources([(main, src.text.clone()), (other, src.text.clone())]);
    if report.finish().write(cache, &mut buf).is_err() {
        let (line, col) = src.line_col(span.start);
        return format!("error[{}]: {name}:{line}:{col}: {message}\n", e.kind.code());
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    if color { text } else { strip_ansi(&text) }
}

/// A source id: the file name, and which copy (0 for the primary label).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SrcId(String, u8);

impl std::fmt::Display for SrcId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Remove terminal colour codes (`ESC [ ... m`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
