//! Engine settings: the schema of every engine's settings (names, types,
//! defaults), validation of `infer` blocks and `--set` overrides.

use crate::error::{Error, ErrorKind};
use crate::syntax::ast::{self, ExprKind, Span};
use std::collections::BTreeMap;
use std::fmt;

/// What a setting accepts.
#[derive(Clone, Copy, Debug)]
pub enum SettingKind {
    /// `true` / `false`.
    Bool,
    /// An integer in a closed interval `[min, max]`.
    Int(i64, i64),
    /// A real number in a closed interval.
    Real(f64, f64),
    /// A real number x with lo < x ≤ hi.
    Above(f64, f64),
    /// One of these names.
    Choice(&'static [&'static str]),
    /// A nested engine, one of these: `nuts { draws = 500 }`.
    Engine(&'static [&'static str]),
    /// A method call or name, one of these (its arguments are validated by
    /// the engine that uses it): `stein(rbf, ell = 1.0)`, `poly2`.
    Method(&'static [&'static str]),
}

/// A setting's value.
#[derive(Clone, Debug)]
pub enum SettingVal {
    /// A truth value.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A real number.
    Real(f64),
    /// A name from a fixed choice.
    Name(String),
    /// A nested engine.
    Engine(Box<EngineConfig>),
    /// A method, as written.
    Method(ast::Expr),
}

impl fmt::Display for SettingVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingVal::Bool(b) => write!(f, "{b}"),
            SettingVal::Int(i) => write!(f, "{i}"),
            SettingVal::Real(r) => write!(f, "{r}"),
            SettingVal::Name(n) => write!(f, "{n}"),
            SettingVal::Engine(e) => write!(f, "{e}"),
            SettingVal::Method(e) => write!(f, "{}", crate::syntax::print::source(e)),
        }
    }
}

/// One setting of an engine.
#[derive(Clone, Copy, Debug)]
pub struct SettingSpec {
    /// Its name.
    pub name: &'static str,
    /// What it accepts.
    pub kind: SettingKind,
    /// The default, as model text (parsed like a value in an `infer` block);
    /// `None` when the engine decides.
    pub default: Option<&'static str>,
    /// What it does.
    pub doc: &'static str,
}

/// An engine: its name, whether this version implements it, its settings.
#[derive(Clone, Copy, Debug)]
pub struct EngineSchema {
    /// The name used after `infer`.
    pub name: &'static str,
    /// Whether this version of tempest can run it.
    pub implemented: bool,
    /// What it does.
    pub doc: &'static str,
    /// Its settings.
    pub settings: &'static [SettingSpec],
}

/// A setting, for the engines' schema tables.
pub const fn s(
    name: &'static str,
    kind: SettingKind,
    default: Option<&'static str>,
    doc: &'static str,
) -> SettingSpec {
    SettingSpec {
        name,
        kind,
        default,
        doc,
    }
}

/// The `seed` setting, shared by every engine that draws random numbers.
pub const SEED: SettingSpec = s(
    "seed",
    SettingKind::Int(0, i64::MAX),
    Some("1"),
    "random seed (the CLI's --seed overrides it)",
);

/// An engine with validated settings, defaults filled in.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The engine's name.
    pub name: String,
    /// Every setting of its schema that has a value.
    pub values: BTreeMap<String, SettingVal>,
    /// Where each setting given explicitly was written.
    pub spans: BTreeMap<String, Span>,
    /// Where the engine was written (default span when from the CLI).
    pub span: Span,
}

impl fmt::Display for EngineConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {{", self.name)?;
        for (i, (k, v)) in self.values.iter().enumerate() {
            write!(f, "{}{k} = {v}", if i == 0 { " " } else { ", " })?;
        }
        write!(f, " }}")
    }
}

impl EngineConfig {
    /// `e` pointing at where setting `key` was written in the model, when
    /// it was written there.
    pub fn at_setting(&self, e: Error, key: &str) -> Error {
        match self.spans.get(key) {
            Some(span) => e.with_span(*span).with_label("this setting"),
            None => e,
        }
    }

    /// The value of setting `key`. Engines read only settings of their own
    /// schema: a key the schema lacks (a misspelling in the engine's code,
    /// which would read as absent) fails in debug builds and tests.
    fn get(&self, key: &str) -> Option<&SettingVal> {
        debug_assert!(
            super::registry::schema(&self.name).is_none() || self.has(key),
            "the `{}` engine reads `{key}`, which is not one of its settings",
            self.name
        );
        self.values.get(key)
    }

    /// Whether this engine has a setting `key` (given or defaulted).
    fn has(&self, key: &str) -> bool {
        super::registry::schema(&self.name)
            .is_some_and(|s| s.settings.iter().any(|x| x.name == key))
    }

    /// A boolean setting.
    pub fn bool(&self, key: &str) -> bool {
        matches!(self.get(key), Some(SettingVal::Bool(true)))
    }
    /// An integer setting (0 when absent).
    pub fn int(&self, key: &str) -> i64 {
        match self.get(key) {
            Some(SettingVal::Int(i)) => *i,
            Some(SettingVal::Real(r)) => *r as i64,
            _ => 0,
        }
    }
    /// A real setting, if set.
    pub fn real_opt(&self, key: &str) -> Option<f64> {
        match self.get(key) {
            Some(SettingVal::Int(i)) => Some(*i as f64),
            Some(SettingVal::Real(r)) => Some(*r),
            _ => None,
        }
    }
    /// A real setting (0 when absent).
    pub fn real(&self, key: &str) -> f64 {
        self.real_opt(key).unwrap_or(0.0)
    }
    /// A name setting.
    pub fn name_of(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(SettingVal::Name(n)) => Some(n),
            _ => None,
        }
    }

    /// Validate an `infer` block (or nested engine) against its schema.
    pub fn from_ast(spec: &ast::EngineSpec) -> Result<EngineConfig, Vec<Error>> {
        let mut errors = Vec::new();
        let Some(schema) = super::registry::schema(&spec.name.name) else {
            let names = super::registry::names(false);
            let mut e = Error::at(
                ErrorKind::Name,
                spec.name.span,
                format!("unknown engine `{}`", spec.name.name),
            )
            .with_label("not an engine")
            .with_note(format!("engines: {}", names.join(", ")));
            if let Some(h) = crate::semantic::scope::suggest(&spec.name.name, names.iter().copied())
            {
                e = e.with_note(format!("did you mean `{h}`?"));
            }
            return Err(vec![e]);
        };
        let mut cfg = EngineConfig::defaults(schema, spec.span);
        for st in &spec.settings {
            let key = &st.key.name;
            if cfg.spans.contains_key(key) {
                errors.push(
                    Error::at(
                        ErrorKind::Settings,
                        st.key.span,
                        format!("setting `{key}` is given twice"),
                    )
                    .with_label("second value"),
                );
                continue;
            }
            match parse_setting(schema, key, &st.value, st.key.span) {
                Ok(v) => {
                    cfg.values.insert(key.clone(), v);
                    cfg.spans.insert(key.clone(), st.span);
                }
                Err(e) => errors.extend(e),
            }
        }
        if errors.is_empty() {
            Ok(cfg)
        } else {
            Err(errors)
        }
    }

    /// An engine with every default.
    pub fn defaults(schema: &EngineSchema, span: Span) -> EngineConfig {
        let mut values = BTreeMap::new();
        for spec in schema.settings {
            if let Some(d) = spec.default
                && let Some(v) = default_value(spec, d)
            {
                values.insert(spec.name.to_string(), v);
            }
        }
        EngineConfig {
            name: schema.name.to_string(),
            values,
            spans: BTreeMap::new(),
            span,
        }
    }

    /// Apply `--set key=value` (the value is model syntax). Errors name the flag.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let schema = super::registry::schema(&self.name)
            .ok_or_else(|| Error::internal("engine without schema"))?;
        let flag = format!("--set {key}={value}");
        let parsed = parse_value_text(value).map_err(|_| {
            Error::new(
                ErrorKind::Settings,
                format!("{flag}: cannot read `{value}` as a value"),
            )
        })?;
        let v = parse_setting(schema, key, &parsed, Span::default()).map_err(|errs| {
            let mut e = errs
                .into_iter()
                .next()
                .unwrap_or_else(|| Error::internal("empty error"));
            e.span = None;
            e.message = format!("{flag}: {}", e.message);
            e
        })?;
        self.values.insert(key.to_string(), v);
        // The value no longer comes from the model file.
        self.spans.remove(key);
        Ok(())
    }
}

/// Parse the text of a setting value: an engine spec or an expression.
fn parse_value_text(text: &str) -> Result<ast::SettingValue, ()> {
    if let Ok(p) = crate::syntax::parse(&format!("infer __v {{ v = {text} }}"))
        && let Some(ast::Item::Block(b)) = p.items.into_iter().next()
        && let ast::BlockKind::Infer(mut spec) = b.kind
        && let Some(st) = spec.settings.pop()
    {
        return Ok(st.value);
    }
    Err(())
}

fn default_value(spec: &SettingSpec, text: &str) -> Option<SettingVal> {
    let parsed = parse_value_text(text).ok()?;
    match (&spec.kind, parsed) {
        (SettingKind::Engine(_), ast::SettingValue::Engine(e)) => EngineConfig::from_ast(&e)
            .ok()
            .map(|c| SettingVal::Engine(Box::new(c))),
        (SettingKind::Method(_), ast::SettingValue::Expr(e)) => Some(SettingVal::Method(e)),
        (_, ast::SettingValue::Expr(e)) => literal(&spec.kind, &e).ok(),
        _ => None,
    }
}

fn setting_error(span: Span, msg: String) -> Vec<Error> {
    vec![Error::at(ErrorKind::Settings, span, msg).with_label("this setting")]
}

fn parse_setting(
    schema: &EngineSchema,
    key: &str,
    value: &ast::SettingValue,
    span: Span,
) -> Result<SettingVal, Vec<Error>> {
    let Some(spec) = schema.settings.iter().find(|s| s.name == key) else {
        let names: Vec<&str> = schema.settings.iter().map(|s| s.name).collect();
        let mut e = Error::at(
            ErrorKind::Settings,
            span,
            format!("engine `{}` has no setting `{key}`", schema.name),
        )
        .with_label("unknown setting")
        .with_note(format!(
            "settings of `{}`: {}",
            schema.name,
            names.join(", ")
        ));
        if let Some(h) = crate::semantic::scope::suggest(key, names.iter().copied()) {
            e = e.with_note(format!("did you mean `{h}`?"));
        }
        return Err(vec![e]);
    };
    let engine_of =
        |names: &[&str], cfg: EngineConfig, span: Span| -> Result<SettingVal, Vec<Error>> {
            if names.contains(&cfg.name.as_str()) {
                Ok(SettingVal::Engine(Box::new(cfg)))
            } else {
                Err(setting_error(
                    span,
                    format!(
                        "`{key}` expects an engine: {}, found `{}`",
                        names.join(", "),
                        cfg.name
                    ),
                ))
            }
        };
    match (&spec.kind, value) {
        (SettingKind::Engine(names), ast::SettingValue::Engine(e)) => {
            EngineConfig::from_ast(e).and_then(|c| engine_of(names, c, e.name.span))
        }
        (SettingKind::Engine(names), ast::SettingValue::Expr(e)) => match &e.kind {
            ExprKind::Var(name) => {
                let spec = ast::EngineSpec {
                    name: ast::Ident {
                        name: name.clone(),
                        span: e.span,
                    },
                    settings: vec![],
                    span: e.span,
                };
                EngineConfig::from_ast(&spec).and_then(|c| engine_of(names, c, e.span))
            }
            _ => Err(setting_error(
                e.span,
                format!(
                    "`{key}` expects an engine ({}), written like `{} {{ ... }}`",
                    names.join(", "),
                    names[names.len() - 1]
                ),
            )),
        },
        (_, ast::SettingValue::Engine(e)) => Err(setting_error(
            e.span,
            format!("`{key}` expects {}, not an engine", expects(&spec.kind)),
        )),
        (SettingKind::Method(names), ast::SettingValue::Expr(e)) => {
            let method = match &e.kind {
                ExprKind::Var(m) => Some(m.as_str()),
                ExprKind::Call(m, _) => Some(m.name.as_str()),
                _ => None,
            };
            match method {
                Some(m) if names.contains(&m) => Ok(SettingVal::Method(e.clone())),
                _ => Err(setting_error(
                    e.span,
                    format!("`{key}` expects {}", expects(&spec.kind)),
                )),
            }
        }
        (kind, ast::SettingValue::Expr(e)) => {
            literal(kind, e).map_err(|m| setting_error(e.span, format!("`{key}` {m}")))
        }
    }
}

fn expects(kind: &SettingKind) -> String {
    match kind {
        SettingKind::Bool => "`true` or `false`".into(),
        SettingKind::Int(min, i64::MAX) => format!("an integer ≥ {min}"),
        SettingKind::Int(min, max) => format!("an integer from {min} to {max}"),
        SettingKind::Real(lo, hi) if hi.is_infinite() => format!("a number ≥ {lo}"),
        SettingKind::Real(lo, hi) => format!("a number in [{lo}, {hi}]"),
        SettingKind::Choice(cs) => format!("one of {}", cs.join(", ")),
        SettingKind::Above(lo, hi) if hi.is_infinite() => format!("a number > {lo}"),
        SettingKind::Above(lo, hi) => format!("a number in ({lo}, {hi}]"),
        SettingKind::Engine(names) => format!("an engine: {}", names.join(", ")),
        SettingKind::Method(names) => format!("a method: {}", names.join(", ")),
    }
}

fn number(e: &ast::Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(i) => Some(*i as f64),
        ExprKind::Real(r) => Some(*r),
        ExprKind::Unary(ast::UnOp::Neg, x) => number(x).map(|v| -v),
        _ => None,
    }
}

fn literal(kind: &SettingKind, e: &ast::Expr) -> Result<SettingVal, String> {
    let bad = || {
        Err(format!(
            "expects {}, found `{}`",
            expects(kind),
            crate::syntax::print::source(e)
        ))
    };
    match kind {
        SettingKind::Bool => match e.kind {
            ExprKind::Bool(b) => Ok(SettingVal::Bool(b)),
            _ => bad(),
        },
        SettingKind::Int(min, max) => match (&e.kind, number(e)) {
            (ExprKind::Int(i), _) if i >= min && i <= max => Ok(SettingVal::Int(*i)),
            (ExprKind::Int(_), _) => bad(),
            (_, Some(v))
                if v.fract() == 0.0 && v >= *min as f64 && v <= *max as f64 && v.abs() < 9e15 =>
            {
                Ok(SettingVal::Int(v as i64))
            }
            _ => bad(),
        },
        SettingKind::Real(lo, hi) => match number(e) {
            Some(v) if v >= *lo && v <= *hi => Ok(SettingVal::Real(v)),
            _ => bad(),
        },
        SettingKind::Choice(cs) => match &e.kind {
            ExprKind::Var(n) if cs.contains(&n.as_str()) => Ok(SettingVal::Name(n.clone())),
            _ => bad(),
        },
        SettingKind::Above(lo, hi) => match number(e) {
            Some(v) if v > *lo && v <= *hi => Ok(SettingVal::Real(v)),
            _ => bad(),
        },
        SettingKind::Engine(_) | SettingKind::Method(_) => bad(),
    }
}
