//! Engine settings: the schema of every engine's settings (names, types,
//! defaults), validation of `infer` blocks and `--set` overrides
//! ([`EngineConfig`]; the values' parser is in `parse.rs`), and the typed
//! settings each engine reads from its validated configuration once, when
//! it is built ([`Settings`], in `typed.rs`).

mod parse;
mod typed;

use parse::{default_value, parse_setting, parse_value_text};
pub use typed::{Settings, Written};

use crate::error::{Error, ErrorKind, num};
use crate::syntax::ast::{self, Span};
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
    /// A nested engine, one that plays the role: `nuts { draws = 500 }`.
    Engine(Nested),
    /// A method call or name, one of these (its arguments are validated by
    /// the engine that uses it): `stein(rbf, ell = 1.0)`, `poly2`.
    Method(&'static [&'static str]),
}

/// A part an engine can play inside another engine: what a nested-engine
/// setting accepts. An engine's schema lists the roles it plays
/// ([`EngineSchema::roles`]), so a setting names no engine and a new
/// engine that plays the role is accepted with no change elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Draws from a density (each rung of the evidence engine).
    Sampler,
    /// Fits the latent GP of one small task (meta-learning's inner loop).
    PerTask,
}

impl Role {
    /// The role in words, for errors (`a sampler`).
    pub fn words(self) -> &'static str {
        match self {
            Role::Sampler => "a sampler",
            Role::PerTask => "a per-task inference engine",
        }
    }
}

/// The engines a nested-engine setting accepts: those of the run's engines
/// (the registry's list, handed to the parser) that play its role.
#[derive(Clone, Copy, Debug)]
pub struct Nested(pub Role);

impl Nested {
    /// The schemas among `engines` that play this role, in order.
    pub fn among(self, engines: &[&'static EngineSchema]) -> Vec<&'static EngineSchema> {
        engines
            .iter()
            .copied()
            .filter(|s| s.roles.contains(&self.0))
            .collect()
    }

    /// Their names, in order.
    pub fn names(self, engines: &[&'static EngineSchema]) -> Vec<&'static str> {
        self.among(engines).iter().map(|s| s.name).collect()
    }
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
    /// The roles it plays inside other engines (empty: it runs only on
    /// its own).
    pub roles: &'static [Role],
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
    /// The engine's schema, which the settings were validated against.
    pub schema: &'static EngineSchema,
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
    /// The value of setting `key`. Engines read only settings of their own
    /// schema: a key the schema lacks (a misspelling in the engine's code,
    /// which would read as absent) fails in debug builds and tests.
    pub(super) fn get(&self, key: &str) -> Option<&SettingVal> {
        debug_assert!(
            self.has(key),
            "the `{}` engine reads `{key}`, which is not one of its settings",
            self.name
        );
        self.values.get(key)
    }

    /// Whether this engine has a setting `key` (given or defaulted).
    fn has(&self, key: &str) -> bool {
        self.schema.settings.iter().any(|x| x.name == key)
    }

    /// Validate an `infer` block (or nested engine) against its schema,
    /// found among `engines` (the registry's list: every engine a model
    /// may name).
    pub fn from_ast(
        spec: &ast::EngineSpec,
        engines: &[&'static EngineSchema],
    ) -> Result<EngineConfig, Vec<Error>> {
        let mut errors = Vec::new();
        let Some(schema) = engines.iter().copied().find(|s| s.name == spec.name.name) else {
            let names: Vec<&str> = engines.iter().map(|s| s.name).collect();
            let mut e = Error::at(
                ErrorKind::Name,
                spec.name.span,
                format!("unknown engine `{}`", spec.name.name),
            )
            .with_label("not an engine")
            .with_note(format!("engines: {}", names.join(", ")));
            if let Some(h) = crate::error::suggest(&spec.name.name, names.iter().copied()) {
                e = e.with_note(format!("did you mean `{h}`?"));
            }
            return Err(vec![e]);
        };
        let mut cfg = EngineConfig::defaults_among(schema, spec.span, engines);
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
            match parse_setting(schema, key, &st.value, st.key.span, engines) {
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

    /// An engine with every default. A nested engine's default is found
    /// among the registry's engines: use [`EngineConfig::defaults_among`]
    /// for an engine that has one.
    pub fn defaults(schema: &'static EngineSchema, span: Span) -> EngineConfig {
        Self::defaults_among(schema, span, &[])
    }

    /// An engine with every default, a nested engine's found among
    /// `engines` (the registry's list: every engine a model may name).
    pub fn defaults_among(
        schema: &'static EngineSchema,
        span: Span,
        engines: &[&'static EngineSchema],
    ) -> EngineConfig {
        let mut values = BTreeMap::new();
        for spec in schema.settings {
            if let Some(d) = spec.default
                && let Some(v) = default_value(spec, d, engines)
            {
                values.insert(spec.name.to_string(), v);
            }
        }
        EngineConfig {
            name: schema.name.to_string(),
            values,
            spans: BTreeMap::new(),
            span,
            schema,
        }
    }

    /// Apply `--set key=value` (the value is model syntax). Errors name the
    /// flag. A nested engine needs the registry's list: see
    /// [`EngineConfig::set_with`].
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        self.set_with(key, value, &[])
    }

    /// [`EngineConfig::set`], a nested engine looked up among `engines`
    /// (the registry's list).
    pub fn set_with(
        &mut self,
        key: &str,
        value: &str,
        engines: &[&'static EngineSchema],
    ) -> Result<(), Error> {
        let schema = self.schema;
        let flag = format!("--set {key}={value}");
        let parsed = parse_value_text(value).map_err(|_| {
            Error::new(
                ErrorKind::Settings,
                format!("{flag}: cannot read `{value}` as a value"),
            )
        })?;
        let v = parse_setting(schema, key, &parsed, Span::default(), engines).map_err(|errs| {
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

impl SettingSpec {
    /// The setting as a row of the settings tables in `docs/language.md`:
    /// `` | `name` | type | `default` | meaning | ``; a nested engine's
    /// type lists those of `engines` (the registry's) that play its role.
    pub fn markdown_row(&self, engines: &[&'static EngineSchema]) -> String {
        let quoted = |names: &[&str]| -> String {
            let v: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            v.join(", ")
        };
        let kind = match self.kind {
            SettingKind::Bool => "bool".to_string(),
            SettingKind::Int(lo, i64::MAX) => format!("int ≥ {lo}"),
            SettingKind::Int(lo, hi) => format!("int {lo} to {hi}"),
            SettingKind::Real(lo, hi) if hi.is_infinite() => format!("real ≥ {lo}"),
            SettingKind::Real(lo, hi) => format!("real in [{lo}, {hi}]"),
            SettingKind::Above(lo, hi) if hi.is_infinite() => format!("real > {}", num(lo)),
            SettingKind::Above(lo, hi) => format!("real in ({}, {}]", num(lo), num(hi)),
            SettingKind::Choice(names) => format!("one of {}", quoted(names)),
            SettingKind::Engine(nested) => format!("engine: {}", quoted(&nested.names(engines))),
            SettingKind::Method(names) => format!("method: {}", quoted(names)),
        };
        let default = match self.default {
            Some(d) => format!("`{d}`"),
            None => "(engine decides)".to_string(),
        };
        format!(
            "| `{}` | {kind} | {default} | {} |",
            self.name,
            self.doc.replace('|', "\\|")
        )
    }
}
