//! Typed settings: each engine reads its validated [`EngineConfig`] once,
//! when it is built, into one struct of its own ([`Settings`]), and uses
//! only that struct from then on. A key its schema lacks, or a value of
//! another type than the schema's, is an internal error at the build (in
//! debug builds and tests, an assertion names the key), never a silent zero
//! in the middle of a run.

use super::{EngineConfig, SettingVal};
use crate::error::Error;
use crate::syntax::ast::{Expr, Span};
use std::collections::BTreeMap;

/// An engine's settings as one typed value.
pub trait Settings: Sized {
    /// Read every setting the engine uses from `cfg`, which has been
    /// validated against the engine's schema (defaults filled in).
    ///
    /// Errors: a value the schema admits but the engine cannot use
    /// (located at the setting when it was written in the model file), or
    /// an internal error for a key the schema lacks.
    fn from_config(cfg: &EngineConfig) -> Result<Self, Error>;
}

/// Where an engine's settings were written in the model file, so that a
/// problem found later (a memory budget, a control-variate method's size)
/// can point at the setting that caused it.
#[derive(Clone, Debug, Default)]
pub struct Written(BTreeMap<String, Span>);

impl Written {
    /// `e` pointing at where setting `key` was written, when it was
    /// written in the model file (settings from `--set` or defaults have no
    /// place there).
    pub fn at(&self, e: Error, key: &str) -> Error {
        match self.0.get(key) {
            Some(span) => e.with_span(*span).with_label("this setting"),
            None => e,
        }
    }

    /// Whether setting `key` was written in the model file.
    pub fn in_file(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }
}

impl EngineConfig {
    /// Where this engine's settings were written.
    pub fn written(&self) -> Written {
        Written(self.spans.clone())
    }

    fn missing(&self, key: &str, what: &str) -> Error {
        Error::internal(format!(
            "the `{}` engine's setting `{key}` is missing or not {what}",
            self.name
        ))
    }

    /// A `true`/`false` setting.
    pub fn flag(&self, key: &str) -> Result<bool, Error> {
        match self.get(key) {
            Some(SettingVal::Bool(b)) => Ok(*b),
            _ => Err(self.missing(key, "a truth value")),
        }
    }

    /// An integer setting whose schema range starts at 0 or above, as a
    /// count.
    pub fn count(&self, key: &str) -> Result<usize, Error> {
        match self.get(key) {
            Some(SettingVal::Int(i)) => {
                usize::try_from(*i).map_err(|_| self.missing(key, "a count ≥ 0"))
            }
            _ => Err(self.missing(key, "an integer")),
        }
    }

    /// A real setting that has a value (given or defaulted).
    pub fn number(&self, key: &str) -> Result<f64, Error> {
        self.number_opt(key)?
            .ok_or_else(|| self.missing(key, "a number"))
    }

    /// A real setting without a default: `None` when not given.
    pub fn number_opt(&self, key: &str) -> Result<Option<f64>, Error> {
        match self.get(key) {
            Some(SettingVal::Real(r)) => Ok(Some(*r)),
            Some(SettingVal::Int(i)) => Ok(Some(*i as f64)),
            None => Ok(None),
            Some(_) => Err(self.missing(key, "a number")),
        }
    }

    /// A setting that names one of a fixed choice.
    pub fn choice(&self, key: &str) -> Result<&str, Error> {
        match self.get(key) {
            Some(SettingVal::Name(n)) => Ok(n),
            _ => Err(self.missing(key, "a name")),
        }
    }

    /// A nested engine's configuration.
    pub fn engine(&self, key: &str) -> Result<&EngineConfig, Error> {
        match self.get(key) {
            Some(SettingVal::Engine(e)) => Ok(e),
            _ => Err(self.missing(key, "an engine")),
        }
    }

    /// A method setting, as written.
    pub fn method(&self, key: &str) -> Result<&Expr, Error> {
        match self.get(key) {
            Some(SettingVal::Method(e)) => Ok(e),
            _ => Err(self.missing(key, "a method")),
        }
    }

    /// The `seed` setting.
    pub fn seed(&self) -> Result<u64, Error> {
        self.count("seed").map(|s| s as u64)
    }
}
