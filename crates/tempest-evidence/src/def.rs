//! The `evidence` engine's definition: its settings and how it is built,
//! with its sampler found among the run's engines ([`BuildCx::engines`]).

use super::engine::EvidenceEngine;
use crate::error::{Error, ErrorKind};
use crate::mc::spec::{CvSpec, parse};
use crate::mc::vector_valued::TaskMatrix;
use tempest_infer::seam::{Accepts, BuildCx, Def, TestData};
use tempest_infer::settings::{
    EngineConfig, EngineSchema, Nested, Role, SEED, SettingKind, Written, s,
};
use tempest_samplers::density::Density;
use tempest_samplers::settings::{Sampler, SamplerSettings};

/// The `evidence` engine's settings.
pub const SCHEMA: EngineSchema = EngineSchema {
    name: "evidence",
    implemented: true,
    doc: "model evidence by thermodynamic integration over power posteriors",
    roles: &[],
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
            SettingKind::Engine(Nested(Role::Sampler)),
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

/// The `evidence` engine's settings, read once when it is built.
pub struct EvidenceSettings {
    /// Number of temperatures.
    pub rungs: usize,
    /// The ladder's power: tᵢ = ((i − 1)/(rungs − 1))^power.
    pub power: f64,
    /// The run's seed; rung i's sampler is seeded from seed + i.
    pub seed: u64,
    /// The sampler run at each rung, with its settings (its own seed is
    /// replaced per rung); found among the run's engines.
    pub sampler: SamplerSettings,
    /// Control variates for the rung means.
    pub control_variates: CvSpec,
    /// Where the settings were written.
    pub written: Written,
}

impl EvidenceSettings {
    /// The settings of `cfg`, its sampler found among `cx`'s engines.
    ///
    /// Errors: a control-variate method that does not parse (at its span,
    /// or naming the setting when it came from `--set`), a fixed task
    /// matrix of the wrong size.
    pub fn read(cfg: &EngineConfig, cx: &BuildCx) -> Result<Self, Error> {
        let rungs = cfg.count("rungs")?;
        let written = cfg.written();
        let control_variates = parse(cfg.method("control_variates")?).map_err(|mut err| {
            // A method given with `--set` has no place in the model file:
            // its errors then carry the setting's name instead.
            if !written.in_file("control_variates") {
                err.span = None;
                err.label = None;
                err.message = format!("control_variates: {}", err.message);
            }
            err
        })?;
        let group = super::fit::GROUP.min(rungs);
        if let CvSpec::VectorValued {
            b: TaskMatrix::Fixed(m),
            ..
        } = &control_variates
            && m.nrows() != group
        {
            return Err(Error::new(
                ErrorKind::Settings,
                format!(
                    "control_variates: the task matrix B is {}×{}, but the rungs are grouped in {group}s: give a {group}×{group} B",
                    m.nrows(),
                    m.ncols(),
                ),
            ));
        }
        // The setting's schema admits only samplers.
        let nested = cfg.engine("sampler")?;
        let sampler: &Sampler = cx
            .engine(&nested.name)
            .and_then(|d| d.as_sampler())
            .and_then(|s| s.downcast_ref::<Sampler>())
            .ok_or_else(|| {
                Error::internal(format!("evidence: `{}` is not a sampler", nested.name))
            })?;
        Ok(EvidenceSettings {
            rungs,
            power: cfg.number("power")?,
            seed: cfg.seed()?,
            sampler: SamplerSettings::read(sampler, nested)?,
            control_variates,
            written,
        })
    }
}

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
    build: |bound, cfg, cx| {
        let s = EvidenceSettings::read(cfg, cx)?;
        Ok(Box::new(EvidenceEngine::new(Density::new(bound)?, s)?))
    },
    restore: None,
};
