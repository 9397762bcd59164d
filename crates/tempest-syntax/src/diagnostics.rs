//! The one place where errors become text: file, line and column, the
//! source line with a caret, secondary labels and notes.

use ariadne::{Color, Config, IndexType, Label, Report, ReportKind};
use tempest_core::error::{Error, Errors};

/// A model source: its name (usually the path) and its text.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Shown in diagnostics, e.g. `examples/diabetes.tempest`.
    pub name: String,
    /// The whole text.
    pub text: String,
}

impl SourceFile {
    /// A source with a name and text. A byte-order mark at the start of the
    /// text is dropped, so columns on the first line count from the first
    /// character a user sees.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let mut text: String = text.into();
        if text.starts_with('\u{FEFF}') {
            text.drain(..'\u{FEFF}'.len_utf8());
        }
        SourceFile {
            name: name.into(),
            text,
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
    if long_line_at(src, span) || e.labels.iter().any(|l| long_line_at(src, l.span)) {
        return render_windowed(e, src, &message);
    }
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

/// Source lines longer than this are shown as a window around the error.
const MAX_LINE_CHARS: usize = 200;

/// Characters shown on each side of the error in a long line.
const WINDOW_CHARS: usize = 60;

/// The line of `text` holding byte `offset`: its start and end.
fn line_bounds(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[offset..]
        .find('\n')
        .map(|i| offset + i)
        .unwrap_or(text.len());
    (start, end)
}

/// Whether the line at the start of `span` is too long to show whole.
fn long_line_at(src: &SourceFile, span: crate::ast::Span) -> bool {
    let (a, b) = line_bounds(&src.text, span.start);
    src.text[a..b].chars().count() > MAX_LINE_CHARS
}

/// One error on a long line: the location, a window of the line around
/// the error with a caret under it, then the other labels by location.
fn render_windowed(e: &Error, src: &SourceFile, message: &str) -> String {
    let Some(span) = e.span else {
        return format!("error[{}]: {message}\n", e.kind.code());
    };
    let text = &src.text;
    let (line, col) = src.line_col(span.start);
    let (ls, le) = line_bounds(text, span.start);
    let at = span.start.clamp(ls, le);
    let before: Vec<char> = text[ls..at].chars().collect();
    let after: Vec<char> = text[at..le].chars().collect();
    let cut_left = before.len() > WINDOW_CHARS;
    let cut_right = after.len() > WINDOW_CHARS;
    let left: String = before[before.len().saturating_sub(WINDOW_CHARS)..]
        .iter()
        .collect();
    let right: String = after[..after.len().min(WINDOW_CHARS)].iter().collect();
    let prefix = if cut_left { "…" } else { "" };
    let suffix = if cut_right { "…" } else { "" };
    let width = text[at..span.end.clamp(at, le)]
        .chars()
        .count()
        .clamp(1, right.chars().count().max(1));
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let mut out = format!(
        "error[{}]: {message}\n{pad}--> {}:{line}:{col}\n{pad} |\n{line} | {prefix}{left}{right}{suffix}\n{pad} | {}{}{}\n",
        e.kind.code(),
        src.name,
        " ".repeat(prefix.chars().count() + left.chars().count()),
        "^".repeat(width),
        e.label
            .as_ref()
            .map(|l| format!(" {l}"))
            .unwrap_or_default(),
    );
    for l in &e.labels {
        let (ll, lc) = src.line_col(l.span.start);
        out.push_str(&format!("{pad} = {}:{ll}:{lc}: {}\n", src.name, l.message));
    }
    for n in &e.notes {
        out.push_str(&format!("{pad} = note: {n}\n"));
    }
    out
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
