//! The one list of engines: every engine the language knows is one
//! [`EngineDef`] in [`ENGINES`] (the seam's traits are in
//! [`super::seam`], the `tempest-infer` crate). `api::run`, the checker,
//! the command line and `tempest predict` know engines only through this
//! table; no engine can import it (each engine is a crate below this
//! one). Adding an engine is one crate (its state machine, its fit, its
//! `def.rs` with its schema, restore and words), a dependency in the root
//! manifest and one line here.

pub use super::seam::{Accepts, BuildCx, BuildFn, Def, EngineDef, TestData};
use super::settings::{EngineConfig, EngineSchema};
use crate::error::Error;
use crate::ir::Graph;
use serde_json::Value as Json;

/// Every engine the language knows, in the order they are listed to users.
pub static ENGINES: &[&dyn EngineDef] = &[
    &tempest_exact::def::EXACT,
    &tempest_vi::def::MIRROR_DESCENT,
    &tempest_vi::def::GRADIENT_DESCENT,
    &tempest_svi::def::SVI,
    &tempest_mcmc::def::MALA,
    &tempest_mcmc::def::HMC,
    &tempest_mcmc::def::NUTS,
    &tempest_mcmc::prior::SAMPLE_PRIOR,
    &tempest_evidence::def::EVIDENCE,
    &tempest_meta::META,
];

/// The engine called `name`.
pub fn find(name: &str) -> Option<&'static dyn EngineDef> {
    ENGINES.iter().copied().find(|e| e.schema().name == name)
}

/// The schema of the engine called `name`.
pub fn schema(name: &str) -> Option<&'static EngineSchema> {
    find(name).map(|e| e.schema())
}

/// Every engine's schema, in the order of [`ENGINES`]: the engines a
/// model's `infer` block may name.
pub fn schemas() -> Vec<&'static EngineSchema> {
    ENGINES.iter().map(|e| e.schema()).collect()
}

/// The names of every engine (`available` only: those this version runs).
pub fn names(available: bool) -> Vec<&'static str> {
    super::seam::names(ENGINES, available)
}

/// What a build gets from a run: `sinks`, the model's name and every
/// engine.
pub fn build_cx(
    sinks: Vec<std::sync::Arc<dyn super::sink::DrawSinks>>,
    model_name: String,
) -> BuildCx {
    BuildCx {
        sinks,
        model_name,
        engines: ENGINES,
    }
}

/// Read a saved fit of any engine for `graph` (the model given to
/// `predict`): the file's header checked, then the engine it names reads
/// the rest ([`EngineDef::restore`]). The fit, ready to predict, and the
/// bound training data (to bind test data against).
pub fn restore(graph: Graph, j: &Json, file: &str) -> crate::infer::seam::Restored {
    let engine = super::saved::check_header(&graph, j, file)?;
    match find(engine) {
        Some(def) => def.restore(graph, j, file),
        None => Err(super::seam::no_restore(engine, j, file)),
    }
}

/// The error for running an engine this version does not have
/// (`schema.implemented` is false): [`super::seam::unavailable`] naming
/// the engines of [`ENGINES`] that are.
pub fn unavailable(schema: &EngineSchema, cfg: &EngineConfig) -> Error {
    super::seam::unavailable(schema, cfg, ENGINES)
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
            let cfg = EngineConfig::defaults_among(schema, Default::default(), &schemas());
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
                // A nested engine setting's role is played by some engine.
                if let SettingKind::Engine(nested) = spec.kind {
                    assert!(
                        !nested.names(&schemas()).is_empty(),
                        "{}.{}: no engine is {}",
                        schema.name,
                        spec.name,
                        nested.0.words()
                    );
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

    /// `tempest predict` reaches every engine's restore through the list:
    /// an engine that saves no fits refuses one at the file's `engine`,
    /// and one that saves fits reads the file itself.
    #[test]
    fn engines_that_save_no_fits_refuse_to_restore_one() {
        let m = crate::api::Model::from_str(
            "m.tempest",
            "data { n : int  y : vector[n] }\nmodel { y ~ normal(0, 1) }\n",
            &Default::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let j = serde_json::json!({ "engine": "x" });
        for def in ENGINES {
            let e = def
                .restore(m.graph.clone(), &j, "f.json")
                .err()
                .expect("an empty file is refused");
            assert_eq!(
                e.message.contains("which saves no fits"),
                !def.accepts().saves_fits,
                "{}: {}",
                def.schema().name,
                e.message
            );
        }
    }
}
