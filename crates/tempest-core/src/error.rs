//! The one error type of tempest.
//!
//! Every stage reports [`Error`]s; a stage that can find several problems
//! returns all of them as [`Errors`]. Rendering (file, line, column, source
//! line and caret) happens in one place: `tempest_syntax::diagnostics`.

use crate::span::Span;
use std::fmt;

/// What kind of problem an error reports. Each kind has a stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The model text does not follow the grammar.
    Syntax,
    /// A name is unknown, duplicated or used in the wrong place.
    Name,
    /// A value has the wrong type.
    Type,
    /// Sizes do not agree.
    Shape,
    /// A constraint or bound is malformed or violated.
    Constraint,
    /// The data does not fit the declarations.
    Data,
    /// An engine setting or command-line option is wrong.
    Settings,
    /// The model asks for an engine or feature that does not exist yet.
    Unsupported,
    /// A numerical failure (e.g. a matrix not positive definite).
    Numerical,
    /// Reading or writing a file failed.
    Io,
    /// The run was stopped by the user (Ctrl-C).
    Interrupted,
    /// A bug in tempest itself.
    Internal,
}

impl ErrorKind {
    /// A short stable code, shown in brackets: `error[E-syntax]`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "E-syntax",
            ErrorKind::Name => "E-name",
            ErrorKind::Type => "E-type",
            ErrorKind::Shape => "E-shape",
            ErrorKind::Constraint => "E-constraint",
            ErrorKind::Data => "E-data",
            ErrorKind::Settings => "E-settings",
            ErrorKind::Unsupported => "E-unsupported",
            ErrorKind::Numerical => "E-numerical",
            ErrorKind::Io => "E-io",
            ErrorKind::Interrupted => "E-interrupted",
            ErrorKind::Internal => "E-internal",
        }
    }
}

/// The kind of data source, which decides how a location is described.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DataFormat {
    /// A CSV file: rows (0-based, header excluded) and named columns.
    Csv,
    /// A JSON file: keys and array indices.
    Json,
    /// Values given from Rust or on the command line.
    #[default]
    Values,
}

/// Where in a data file a problem is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DataLocation {
    /// The data file (or `<rust values>` for data given from Rust).
    pub file: String,
    /// The data row (CSV: 0-based, header excluded) or array index (JSON).
    pub row: Option<usize>,
    /// The column name (CSV) or key (JSON).
    pub column: Option<String>,
    /// What kind of source this is.
    pub format: DataFormat,
}

impl fmt::Display for DataLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        match self.format {
            DataFormat::Csv => {
                if let Some(r) = self.row {
                    write!(f, ", row {r} (line {})", r + 2)?;
                }
                if let Some(c) = &self.column {
                    write!(f, ", column `{c}`")?;
                }
            }
            DataFormat::Json | DataFormat::Values => {
                if let Some(c) = &self.column {
                    let what = if self.format == DataFormat::Json {
                        "key "
                    } else {
                        ""
                    };
                    write!(f, ", {what}`{c}`")?;
                }
                if let Some(r) = self.row {
                    write!(f, ", index {r}")?;
                }
            }
        }
        Ok(())
    }
}

/// A secondary pointer into the model source.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// The text pointed at.
    pub span: Span,
    /// What to say about it.
    pub message: String,
}

/// One problem, with everything needed to render it.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// What kind of problem.
    pub kind: ErrorKind,
    /// One line saying what is wrong and what was expected.
    pub message: String,
    /// The primary location in the model source.
    pub span: Option<Span>,
    /// The label at the primary location.
    pub label: Option<String>,
    /// Further locations in the model source.
    pub labels: Vec<Label>,
    /// The location in a data file.
    pub data: Option<DataLocation>,
    /// Extra lines: how to fix it, or context.
    pub notes: Vec<String>,
}

impl Error {
    /// A new error with a message and nothing else.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            span: None,
            label: None,
            labels: Vec::new(),
            data: None,
            notes: Vec::new(),
        }
    }
    /// An error at a place in the model.
    pub fn at(kind: ErrorKind, span: Span, message: impl Into<String>) -> Self {
        Error::new(kind, message).with_span(span)
    }
    /// Set the primary location.
    pub fn with_span(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }
    /// Set the label of the primary location.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
    /// Add a secondary location.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }
    /// Add a note (a hint or context line).
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
    /// Set the data location.
    pub fn in_data(mut self, loc: DataLocation) -> Self {
        self.data = Some(loc);
        self
    }
    /// A bug in tempest; says so.
    pub fn internal(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Internal, message).with_note(
            "this is a bug in tempest, not in your model; please report it with the model file",
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: ", self.kind.code())?;
        if let Some(d) = &self.data {
            write!(f, "{d}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for Error {}

/// All the errors a stage found (never empty).
#[derive(Clone, Debug, PartialEq)]
pub struct Errors(pub Vec<Error>);

impl Errors {
    /// The errors, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &Error> {
        self.0.iter()
    }
    /// The first error.
    pub fn first(&self) -> &Error {
        &self.0[0]
    }
}

impl From<Error> for Errors {
    fn from(e: Error) -> Self {
        Errors(vec![e])
    }
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}

/// The result type of every stage.
pub type Result<T, E = Errors> = std::result::Result<T, E>;

/// A number as messages show it: plain when of moderate size, in
/// scientific notation when huge or tiny (`1e300`, not 301 digits).
pub fn num(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-4..1e6).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `text` followed by spaces up to `width` characters (as `{:<width$}`
/// does, for any width: the formatter's own padding refuses widths above
/// 65,535, and names in reports come from user text).
pub fn pad_right(text: &str, width: usize) -> String {
    let mut s = text.to_string();
    s.extend(std::iter::repeat_n(
        ' ',
        width.saturating_sub(text.chars().count()),
    ));
    s
}

/// Spaces up to `width` characters, then `text` (as `{:>width$}` does, for
/// any width; see [`pad_right`]).
pub fn pad_left(text: &str, width: usize) -> String {
    let mut s: String =
        std::iter::repeat_n(' ', width.saturating_sub(text.chars().count())).collect();
    s.push_str(text);
    s
}

/// A number with `decimals` digits after the point, switching to
/// scientific notation when it is too large for that to read well
/// (|v| ≥ 1e15): `-622.6130954361`, `-1.1177405156e46`.
pub fn fixed(v: f64, decimals: usize) -> String {
    if v.is_finite() && v.abs() >= 1e15 {
        format!("{v:.decimals$e}")
    } else {
        format!("{v:.decimals$}")
    }
}

/// The closest of `candidates` to `name`, if close enough (Jaro–Winkler
/// similarity above 0.8): the "did you mean" of every message.
pub fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let score = strsim::jaro_winkler(name, c);
        if score > 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c.to_string())
}
