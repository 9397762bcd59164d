//! The samplers' settings (`mala`, `hmc`, `nuts` share one schema) and
//! each sampler's transition and CmdStan name ([`Sampler`]); a run is built
//! from them with [`crate::run::SamplerRun::new`], by the samplers' engines
//! or inside another engine.

use super::chain::{Adaptation, ChainConfig, Method, STEP_SIZE_RANGE};
use crate::error::Error;
use tempest_infer::settings::{
    EngineConfig, EngineSchema, Role, SEED, SettingKind, SettingSpec, Written, s,
};
use tempest_infer::sink::CmdStanName;

/// The samplers' settings.
const MCMC: &[SettingSpec] = &[
    s(
        "chains",
        SettingKind::Int(1, 1024),
        Some("4"),
        "number of chains",
    ),
    s(
        "warmup",
        SettingKind::Int(0, 10_000_000),
        Some("1000"),
        "warm-up iterations per chain",
    ),
    s(
        "draws",
        SettingKind::Int(1, 10_000_000),
        Some("1000"),
        "kept draws per chain",
    ),
    SEED,
    s(
        "target_accept",
        SettingKind::Above(0.0, 1.0),
        Some("0.8"),
        "target acceptance rate",
    ),
    s(
        "max_depth",
        SettingKind::Int(1, 20),
        Some("10"),
        "maximum tree depth (nuts)",
    ),
    s(
        "step_size",
        SettingKind::Above(STEP_SIZE_RANGE.0, STEP_SIZE_RANGE.1),
        None,
        "initial step size",
    ),
    s(
        "leapfrog_steps",
        SettingKind::Int(1, 100_000),
        Some("16"),
        "mean leapfrog steps per iteration (hmc): each iteration draws its number uniformly from 1..=2L-1",
    ),
    s(
        "adaptation",
        SettingKind::Choice(&["stan", "gradient", "dense", "low_rank"]),
        Some("stan"),
        "how warm-up adapts the metric: a diagonal one from Stan's windowed variance of the draws, or from the draws and their gradients at every iteration (as nutpie), or a dense one from the draws' covariance in Stan's windows, or the gradient-based diagonal with a low-rank correction fitted from the draws and their gradients (as nutpie's)",
    ),
    s(
        "early_stop",
        SettingKind::Bool,
        Some("false"),
        "with `adaptation = gradient`: end warm-up once the metric has settled (two windows of 50 iterations agreeing within sampling noise, then 50 iterations tuning the step size); `warmup` is then the longest warm-up",
    ),
    s(
        "chain_offset",
        SettingKind::Int(0, 1_000_000_000),
        Some("0"),
        "the first chain's id minus one: chains are numbered offset+1, offset+2, ... (seeds and Stan CSV file names), so processes of an array job run distinct chains",
    ),
    s(
        "predictive_draws",
        SettingKind::Int(1, 1_000_000),
        Some("1000"),
        "draws the posterior predictive at `--test` averages over (evenly spaced over the chains)",
    ),
];

/// A sampler's settings, read once when it is built.
#[derive(Clone, Debug)]
pub struct SamplerSettings {
    /// Each chain's transition, warm-up, draws, target acceptance and
    /// initial step size.
    pub chain: ChainConfig,
    /// Number of chains.
    pub chains: usize,
    /// The run's seed (chain k draws from a stream of its own).
    pub seed: u64,
    /// The `max_depth` setting (NUTS's largest tree depth).
    pub max_depth: usize,
    /// Draws the posterior predictive at test data averages over.
    pub predictive_draws: usize,
    /// Chains are numbered from `chain_offset + 1` (their seeds and the
    /// ids in output files).
    pub chain_offset: usize,
    /// The sampler as CmdStan names it, for the draw sinks' headers.
    pub cmdstan: CmdStanName,
    /// Where the settings were written.
    pub written: Written,
}

impl SamplerSettings {
    /// The settings of `def`'s sampler from its validated configuration.
    pub fn read(def: &Sampler, cfg: &EngineConfig) -> Result<SamplerSettings, Error> {
        Ok(SamplerSettings {
            chain: ChainConfig {
                method: def.method(cfg)?,
                warmup: cfg.count("warmup")?,
                draws: cfg.count("draws")?,
                target_accept: cfg.number("target_accept")?,
                step_size: cfg.number_opt("step_size")?,
                adaptation: match cfg.choice("adaptation")? {
                    "gradient" => Adaptation::Gradient,
                    "dense" => Adaptation::Dense,
                    "low_rank" => Adaptation::LowRank,
                    "stan" => Adaptation::Stan,
                    other => {
                        return Err(Error::internal(format!(
                            "adaptation `{other}` is a choice of the schema that the sampler does not read"
                        )));
                    }
                },
                early_stop: cfg.flag("early_stop")?,
            },
            chains: cfg.count("chains")?,
            seed: cfg.seed()?,
            max_depth: cfg.count("max_depth")?,
            predictive_draws: cfg.count("predictive_draws")?,
            chain_offset: cfg.count("chain_offset")?,
            cmdstan: def.cmdstan(),
            written: cfg.written(),
        })
    }
}

/// One of the three samplers: its settings, its transition and its
/// name in CmdStan's terms. The engines that run one find it among the
/// run's engines (`EngineDef::as_sampler`, which gives this type).
pub struct Sampler {
    /// Its settings (and its name).
    pub schema: &'static EngineSchema,
    method: fn(&EngineConfig) -> Result<Method, Error>,
    cmdstan: CmdStanName,
}

/// The `mala` engine's settings.
pub const MALA_SCHEMA: EngineSchema = EngineSchema {
    name: "mala",
    implemented: true,
    doc: "Metropolis-adjusted Langevin algorithm",
    roles: &[Role::Sampler],
    settings: MCMC,
};

/// The `hmc` engine's settings.
pub const HMC_SCHEMA: EngineSchema = EngineSchema {
    name: "hmc",
    implemented: true,
    doc: "Hamiltonian Monte Carlo",
    roles: &[Role::Sampler],
    settings: MCMC,
};

/// The `nuts` engine's settings.
pub const NUTS_SCHEMA: EngineSchema = EngineSchema {
    name: "nuts",
    implemented: true,
    doc: "the No-U-Turn sampler",
    roles: &[Role::Sampler],
    settings: MCMC,
};

/// The Metropolis-adjusted Langevin algorithm (the `mala` engine).
pub const MALA: Sampler = Sampler {
    schema: &MALA_SCHEMA,
    method: |_| Ok(Method::Mala),
    cmdstan: CmdStanName {
        algorithm: "mala",
        engine: None,
    },
};

/// Hamiltonian Monte Carlo with a jittered number of leapfrog steps (the
/// `hmc` engine; CmdStan's static HMC).
pub const HMC: Sampler = Sampler {
    schema: &HMC_SCHEMA,
    method: |cfg| {
        Ok(Method::Hmc {
            steps: cfg.count("leapfrog_steps")?,
        })
    },
    cmdstan: CmdStanName {
        algorithm: "hmc",
        engine: Some("static"),
    },
};

/// The No-U-Turn sampler (the `nuts` engine; CmdStan's HMC with the NUTS
/// engine).
pub const NUTS: Sampler = Sampler {
    schema: &NUTS_SCHEMA,
    method: |cfg| {
        Ok(Method::Nuts {
            max_depth: cfg.count("max_depth")?,
        })
    },
    cmdstan: CmdStanName {
        algorithm: "hmc",
        engine: Some("nuts"),
    },
};

/// The samplers, in the order they are listed to users.
pub const SAMPLERS: [&Sampler; 3] = [&MALA, &HMC, &NUTS];

/// The sampler a Stan CSV file names by CmdStan's `algorithm` and `engine`
/// (see [`CmdStanName`]): the one with both, else the first with the
/// algorithm (CmdStan's `hmc` with another engine, or none, reads as
/// `hmc`).
pub fn sampler_of(algorithm: &str, engine: Option<&str>) -> Option<&'static Sampler> {
    let named = |s: &&&Sampler| s.cmdstan.algorithm == algorithm;
    SAMPLERS
        .iter()
        .filter(named)
        .find(|s| s.cmdstan.engine == engine)
        .or_else(|| SAMPLERS.iter().find(named))
        .copied()
}

impl Sampler {
    /// The sampler's transition, from its settings.
    pub fn method(&self, cfg: &EngineConfig) -> Result<Method, Error> {
        (self.method)(cfg)
    }

    /// The sampler as CmdStan names it (`algorithm = hmc`, `engine =
    /// nuts`): what its Stan CSV files say.
    pub fn cmdstan(&self) -> CmdStanName {
        self.cmdstan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tempest summary` knows each sampler again by the CmdStan name its
    /// files carry; CmdStan's HMC with another engine, or none, reads as
    /// static HMC, and an algorithm no sampler has as none.
    #[test]
    fn each_sampler_is_known_again_by_its_cmdstan_name() {
        for s in SAMPLERS {
            let back = sampler_of(s.cmdstan.algorithm, s.cmdstan.engine).expect("a sampler");
            assert_eq!(back.schema.name, s.schema.name);
        }
        let name = |a: &str, e: Option<&str>| sampler_of(a, e).map(|s| s.schema.name);
        assert_eq!(name("hmc", None), Some(HMC_SCHEMA.name));
        assert_eq!(name("hmc", Some("xhmc")), Some(HMC_SCHEMA.name));
        assert_eq!(name("mala", Some("nuts")), Some(MALA_SCHEMA.name));
        assert_eq!(name("fixed_param", None), None);
    }
}
