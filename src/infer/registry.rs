//! The open engine seam: every engine the language knows is one
//! [`EngineDef`] in [`ENGINES`]. A definition states the engine's settings
//! (its schema), what it accepts besides the bound model (test data, draw
//! sinks, guide families) and builds the engine; `api::run` and the checker
//! know engines only through this table. Adding an engine is one folder
//! (its state machine, its fit, its `def.rs`) and one line here.

use super::engine::Engine;
use super::settings::{EngineConfig, EngineSchema};
use super::sink::DrawSinks;
use crate::error::Error;
use crate::ir::bind::Bound;
use crate::ir::graph::Family;
use std::sync::Arc;

/// What an engine does with test data (`--test`).
#[derive(Clone, Copy, Debug)]
pub enum TestData {
    /// It predicts at the test inputs and scores the test outcomes
    /// ([`super::fit::Fit::attach_test`]).
    Predicts,
    /// It makes no predictions: the error's message (`{engine}` stands
    /// for the engine's name) and an optional note.
    Refused(&'static str, Option<&'static str>),
}

/// What an engine accepts besides the bound model and its settings.
#[derive(Clone, Copy, Debug)]
pub struct Accepts {
    /// Test data.
    pub test: TestData,
    /// Whether it streams draws to [`DrawSinks`] (`--csv`).
    pub draw_sinks: bool,
    /// The variational families its guide may name (empty: no guide).
    pub families: &'static [Family],
    /// Whether its fit can be saved (`--save`) for `tempest predict`.
    pub saves_fits: bool,
}

impl Accepts {
    /// Neither test data nor draw sinks nor a guide.
    pub const NOTHING: Accepts = Accepts {
        test: TestData::Refused("the `{engine}` engine makes no predictions", None),
        draw_sinks: false,
        families: &[],
        saves_fits: false,
    };
}

/// What a build gets besides the model and the settings.
#[derive(Clone, Default)]
pub struct BuildCx {
    /// Where a sampler streams its draws, one sink per chain (only for
    /// engines whose [`Accepts::draw_sinks`] is true).
    pub sinks: Vec<Arc<dyn DrawSinks>>,
    /// The model's name, recorded in output headers.
    pub model_name: String,
}

/// One engine: its settings, what it accepts, and how to build it.
pub trait EngineDef: Sync {
    /// The engine's settings (and its name, `schema().name`).
    fn schema(&self) -> &EngineSchema;
    /// What it accepts besides the bound model.
    fn accepts(&self) -> Accepts {
        Accepts::NOTHING
    }
    /// Build the engine in its initial state. Settings are the validated
    /// `cfg` (its `name` is this engine's).
    ///
    /// Errors: whatever the model or settings make impossible, located.
    fn build(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<Box<dyn Engine>, Error>;
    /// What the engine says before it runs on `bound` with `cfg`:
    /// warnings (a long run's estimated time), or the error its build
    /// would give when it refuses to start. Nothing by default.
    fn preflight(&self, bound: Arc<Bound>, cfg: &EngineConfig) -> Result<Vec<String>, Error> {
        let _ = (bound, cfg);
        Ok(Vec::new())
    }
    /// A sampler usable inside other engines (e.g. at each rung of the
    /// `evidence` engine), when this engine is one.
    fn as_sampler(&self) -> Option<&dyn super::mcmc::def::SamplerDef> {
        None
    }
}

/// How a [`Def`] builds its engine.
pub type BuildFn = fn(Arc<Bound>, &EngineConfig, &BuildCx) -> Result<Box<dyn Engine>, Error>;

/// An engine defined by its schema, what it accepts and a build function
/// (every engine but the samplers, which also build inside other engines).
pub struct Def {
    /// Its settings.
    pub schema: &'static EngineSchema,
    /// What it accepts.
    pub accepts: Accepts,
    /// How it is built.
    pub build: BuildFn,
}

impl EngineDef for Def {
    fn schema(&self) -> &EngineSchema {
        self.schema
    }
    fn accepts(&self) -> Accepts {
        self.accepts
    }
    fn build(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<Box<dyn Engine>, Error> {
        (self.build)(bound, cfg, cx)
    }
}

/// Every engine the language knows, in the order they are listed to users.
pub static ENGINES: &[&dyn EngineDef] = &[
    &super::exact::def::EXACT,
    &super::vi::def::MIRROR_DESCENT,
    &super::vi::def::GRADIENT_DESCENT,
    &super::svi::def::SVI,
    &super::mcmc::def::MALA,
    &super::mcmc::def::HMC,
    &super::mcmc::def::NUTS,
    &super::mcmc::prior::SAMPLE_PRIOR,
    &super::evidence::def::EVIDENCE,
    &super::planned::META,
];

/// The engine called `name`.
pub fn find(name: &str) -> Option<&'static dyn EngineDef> {
    ENGINES.iter().copied().find(|e| e.schema().name == name)
}

/// The schema of the engine called `name`.
pub fn schema(name: &str) -> Option<&'static EngineSchema> {
    find(name).map(|e| e.schema())
}

/// The names of every engine (`available` only: those this version runs).
pub fn names(available: bool) -> Vec<&'static str> {
    ENGINES
        .iter()
        .map(|e| e.schema())
        .filter(|s| !available || s.implemented)
        .map(|s| s.name)
        .collect()
}

/// The error for running an engine this version does not have
/// (`schema.implemented` is false): at the `infer` block, naming the
/// engines that are available. It comes before anything the engine would
/// refuse, so a user learns first that the engine cannot run at all.
pub fn unavailable(schema: &EngineSchema, cfg: &EngineConfig) -> Error {
    let message = format!(
        "the `{}` engine ({}) is not available in this version of tempest",
        schema.name, schema.doc
    );
    let note = format!("available engines: {}", names(true).join(", "));
    // An engine named by `--engine` has no place in the model file.
    if cfg.span.end == 0 {
        return Error::new(
            crate::error::ErrorKind::Unsupported,
            format!("--engine {}: {message}", schema.name),
        )
        .with_note(note);
    }
    Error::new(crate::error::ErrorKind::Unsupported, message)
        .with_span(cfg.span)
        .with_label("engine not available")
        .with_note(note)
}

/// The engines that stream draws, as prose: "`mala`, `hmc` and `nuts`".
pub fn draw_engines() -> String {
    let names: Vec<String> = ENGINES
        .iter()
        .filter(|e| e.accepts().draw_sinks)
        .map(|e| format!("`{}`", e.schema().name))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::settings::SettingKind;

    #[test]
    fn every_engine_is_registered_once_with_settings_that_parse() {
        let mut seen = std::collections::BTreeSet::new();
        for def in ENGINES {
            let schema = def.schema();
            assert!(seen.insert(schema.name), "{} twice", schema.name);
            // The defaults are model text: they must parse and validate.
            let cfg = EngineConfig::defaults(schema, Default::default());
            assert_eq!(cfg.name, schema.name);
            for spec in schema.settings {
                if let Some(d) = spec.default {
                    assert!(
                        cfg.values.contains_key(spec.name),
                        "{}.{} = {d}",
                        schema.name,
                        spec.name
                    );
                }
                // A nested engine setting names engines that can be nested.
                if let SettingKind::Engine(names) = spec.kind {
                    for n in names {
                        assert!(
                            find(n).is_some(),
                            "{}.{} names `{n}`",
                            schema.name,
                            spec.name
                        );
                    }
                }
            }
            // Draw sinks go only to engines that make draws.
            assert_eq!(
                def.accepts().draw_sinks,
                def.as_sampler().is_some(),
                "{}",
                schema.name
            );
        }
        assert_eq!(draw_engines(), "`mala`, `hmc` and `nuts`");
        assert_eq!(
            names(true),
            [
                "exact",
                "mirror_descent",
                "gradient_descent",
                "svi",
                "mala",
                "hmc",
                "nuts",
                "sample_prior",
                "evidence"
            ]
        );
    }
}
