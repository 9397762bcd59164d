//! The `evidence` engine's definition: its settings and how it is built,
//! with its sampler found in the registry.

use super::engine::EvidenceEngine;
use crate::infer::mcmc::density::Density;
use crate::infer::registry::{Accepts, Def, TestData};
use crate::infer::settings::{EngineSchema, SEED, SettingKind, s};

/// The `evidence` engine's settings.
pub const SCHEMA: EngineSchema = EngineSchema {
    name: "evidence",
    implemented: true,
    doc: "model evidence by thermodynamic integration over power posteriors",
    settings: &[
        s(
            "rungs",
            SettingKind::Int(2, 1000),
            Some("31"),
            "number of temperatures",
        ),
        s(
            "power",
            SettingKind::Above(0.0, f64::INFINITY),
            Some("5"),
            "ladder t_i = ((i-1)/(rungs-1))^power",
        ),
        s(
            "sampler",
            SettingKind::Engine(&["mala", "hmc", "nuts"]),
            Some("nuts {}"),
            "the sampler run at each rung",
        ),
        s(
            "control_variates",
            SettingKind::Method(&["none", "poly1", "poly2", "stein", "secf", "vector_valued"]),
            Some("none"),
            "control variates for the rung means",
        ),
        SEED,
    ],
};

/// Model evidence by thermodynamic integration.
pub const EVIDENCE: Def = Def {
    schema: &SCHEMA,
    accepts: Accepts {
        test: TestData::Refused(
            "the `{engine}` engine estimates the model evidence and makes no predictions",
            None,
        ),
        ..Accepts::NOTHING
    },
    build: |bound, cfg, _| Ok(Box::new(EvidenceEngine::new(Density::new(bound)?, cfg)?)),
};
