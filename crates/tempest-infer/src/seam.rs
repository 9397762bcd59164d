//! The engine seam: what an engine's definition is ([`EngineDef`]) and
//! what it gets ([`BuildCx`]). Every engine's `def.rs` implements it;
//! the registry (`infer/registry.rs`) lists the definitions, and no engine
//! imports the registry: what an engine needs of the others (their
//! names, the families their guides take) comes in [`BuildCx::engines`].

use super::engine::Engine;
use super::fit::Fit;
use super::saved_json::Field;
use super::settings::{EngineConfig, EngineSchema};
use super::sink::DrawSinks;
use crate::error::{Error, ErrorKind};
use crate::ir::Graph;
use crate::ir::bind::Bound;
use crate::ir::graph::Family;
use serde_json::Value as Json;
use std::any::Any;
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
    /// Whether its fit can be saved (`--save`) for `tempest predict`
    /// ([`EngineDef::restore`] reads it back).
    pub saves_fits: bool,
    /// Whether its figure draws the model's params, so that
    /// `--plot-params` chooses which (the samplers' trace and pair plots).
    pub plot_params: bool,
}

impl Accepts {
    /// Neither test data nor draw sinks nor a guide.
    pub const NOTHING: Accepts = Accepts {
        test: TestData::Refused("the `{engine}` engine makes no predictions", None),
        draw_sinks: false,
        families: &[],
        saves_fits: false,
        plot_params: false,
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
    /// Every engine, as the registry lists them (empty for a build outside
    /// `api::run`): for an engine that runs another inside it or names the
    /// others in its messages.
    pub engines: &'static [&'static dyn EngineDef],
}

impl BuildCx {
    /// The engine called `name` among [`BuildCx::engines`].
    pub fn engine(&self, name: &str) -> Option<&'static dyn EngineDef> {
        self.engines
            .iter()
            .copied()
            .find(|e| e.schema().name == name)
    }
}

/// The names of `engines` (`available` only: those this version runs).
pub fn names(engines: &[&dyn EngineDef], available: bool) -> Vec<&'static str> {
    engines
        .iter()
        .map(|e| e.schema())
        .filter(|s| !available || s.implemented)
        .map(|s| s.name)
        .collect()
}

/// The error for running an engine this version does not have
/// (`schema.implemented` is false): at the `infer` block, naming the
/// engines of `engines` that are available. It comes before anything the
/// engine would refuse, so a user learns first that the engine cannot run
/// at all.
pub fn unavailable(schema: &EngineSchema, cfg: &EngineConfig, engines: &[&dyn EngineDef]) -> Error {
    let message = format!(
        "the `{}` engine ({}) is not available in this version of tempest",
        schema.name, schema.doc
    );
    let note = format!("available engines: {}", names(engines, true).join(", "));
    // An engine named by `--engine` has no place in the model file.
    if cfg.span.end == 0 {
        return Error::new(
            ErrorKind::Unsupported,
            format!("--engine {}: {message}", schema.name),
        )
        .with_note(note);
    }
    Error::new(ErrorKind::Unsupported, message)
        .with_span(cfg.span)
        .with_label("engine not available")
        .with_note(note)
}

/// One engine: its settings, what it accepts, and how to build it.
pub trait EngineDef: Sync {
    /// The engine's settings (and its name, `schema().name`).
    fn schema(&self) -> &EngineSchema;
    /// What it accepts besides the bound model.
    fn accepts(&self) -> Accepts {
        Accepts::NOTHING
    }
    /// The engine's name in words, for figure titles and summaries
    /// (`mirror-descent VI`); its name by default.
    fn words(&self) -> &'static str {
        self.schema().name
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
    fn preflight(
        &self,
        bound: Arc<Bound>,
        cfg: &EngineConfig,
        cx: &BuildCx,
    ) -> Result<Vec<String>, Error> {
        let _ = (bound, cfg, cx);
        Ok(Vec::new())
    }
    /// A fit this engine saved (`run --save`; the file's `engine` is this
    /// engine's name, its header already checked against `graph`, the
    /// model given to `tempest predict`), read back: the fit, ready to
    /// predict, and the bound training data (to bind test data against).
    /// By default the engine saves no fits: an error at the file's
    /// `engine`.
    fn restore(&self, graph: Graph, j: &Json, file: &str) -> Restored {
        let _ = graph;
        Err(no_restore(self.schema().name, j, file))
    }
    /// A sampler usable inside other engines (e.g. at each rung of the
    /// `evidence` engine), when this engine is one: its own definition,
    /// which the engine that runs it downcasts to the samplers' type.
    fn as_sampler(&self) -> Option<&dyn Any> {
        None
    }
}

/// The error for a saved fit whose engine saves no fits.
pub fn no_restore(engine: &str, j: &Json, file: &str) -> Error {
    Field::root(file, j).get("engine").error(format!(
        "saved by the engine `{engine}`, which saves no fits"
    ))
}

/// A saved fit read back: the fit, ready to predict, and the bound
/// training data (to bind test data against).
pub type Restored = Result<(Box<dyn Fit>, Bound), Error>;

/// How a [`Def`] reads back a fit it saved ([`EngineDef::restore`]).
pub type RestoreFn = fn(Graph, &Json, &str) -> Restored;

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
    /// How a fit it saved is read back (`None`: it saves none).
    pub restore: Option<RestoreFn>,
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
    fn restore(&self, graph: Graph, j: &Json, file: &str) -> Restored {
        match self.restore {
            Some(restore) => restore(graph, j, file),
            None => Err(no_restore(self.schema.name, j, file)),
        }
    }
}
