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

const fn s(
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

const SEED: SettingSpec = s(
    "seed",
    SettingKind::Int(0, i64::MAX),
    Some("1"),
    "random seed (the CLI's --seed overrides it)",
);
const VI_JITTER: SettingSpec = s(
    "jitter",
    SettingKind::Real(0.0, f64::INFINITY),
    Some("1e-6"),
    "added to the diagonal of the prior covariance K (as GPflow does)",
);
const BINS: SettingSpec = s(
    "bins",
    SettingKind::Int(1, 1000),
    Some("10"),
    "confidence bins for the calibration errors ECE and MCE",
);
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
        SettingKind::Above(0.0, f64::INFINITY),
        None,
        "initial step size",
    ),
    s(
        "leapfrog_steps",
        SettingKind::Int(1, 100_000),
        Some("16"),
        "mean leapfrog steps per iteration (hmc): each iteration draws its number uniformly from 1..=2L-1",
    ),
];

/// Every engine the language knows.
pub const ENGINES: &[EngineSchema] = &[
    EngineSchema {
        name: "exact",
        implemented: true,
        doc: "exact GP regression with a Gaussian likelihood",
        settings: &[
            s(
                "learn_hypers",
                SettingKind::Bool,
                Some("false"),
                "maximise the log marginal likelihood over the non-fixed hypers",
            ),
            s(
                "max_iters",
                SettingKind::Int(1, 1_000_000),
                Some("500"),
                "maximum L-BFGS iterations",
            ),
            s(
                "grad_tol",
                SettingKind::Real(0.0, f64::INFINITY),
                Some("1e-6"),
                "stop when the gradient norm (unconstrained scale) falls below this",
            ),
            s(
                "f_tol",
                SettingKind::Real(0.0, f64::INFINITY),
                Some("1e-11"),
                "stop when an iteration lowers −log p(y) by at most this times max(|log p(y)|, 1)",
            ),
            s(
                "restarts",
                SettingKind::Int(0, 1000),
                Some("0"),
                "further L-BFGS runs from perturbed starts (initial values · e^(±1) on the unconstrained scale); the best is kept",
            ),
            SEED,
            s(
                "jitter",
                SettingKind::Real(0.0, f64::INFINITY),
                Some("0"),
                "added to the diagonal of K before the first Cholesky attempt",
            ),
            s(
                "max_jitter",
                SettingKind::Real(0.0, f64::INFINITY),
                Some("1e-2"),
                "largest jitter tried (relative to mean diag K) before giving up",
            ),
            s(
                "gradient",
                SettingKind::Choice(&["analytic", "autodiff"]),
                Some("analytic"),
                "analytic: matrix identities with one reverse pass over the kernel entries; autodiff: forward mode through every step (slower; a check)",
            ),
        ],
    },
    EngineSchema {
        name: "mirror_descent",
        implemented: true,
        doc: "mirror-descent (conjugate-computation) variational inference",
        settings: &[
            s(
                "steps",
                SettingKind::Int(1, 1_000_000),
                Some("50"),
                "mirror-descent steps",
            ),
            s(
                "rho",
                SettingKind::Above(0.0, 1.0),
                Some("1.0"),
                "step size in natural parameters",
            ),
            s(
                "learn_hypers",
                SettingKind::Bool,
                Some("false"),
                "learn the hypers by maximising the ELBO",
            ),
            s(
                "hyper_lr",
                SettingKind::Above(0.0, f64::INFINITY),
                Some("0.01"),
                "Adam learning rate for the hypers",
            ),
            s(
                "quadrature",
                SettingKind::Int(1, 1000),
                Some("20"),
                "Gauss–Hermite points",
            ),
            s(
                "mc_samples",
                SettingKind::Int(2, 1_000_000),
                Some("64"),
                "Monte Carlo samples for multi-class expectations",
            ),
            s(
                "tol",
                SettingKind::Real(0.0, f64::INFINITY),
                Some("1e-10"),
                "stop when the relative ELBO change falls below this",
            ),
            s(
                "backtrack",
                SettingKind::Bool,
                Some("true"),
                "halve rho for a step whose ELBO would fall (then grow it back)",
            ),
            SEED,
            VI_JITTER,
            BINS,
        ],
    },
    EngineSchema {
        name: "gradient_descent",
        implemented: true,
        doc: "gradient-descent variational inference in the (mean, Cholesky) parameterisation",
        settings: &[
            s(
                "steps",
                SettingKind::Int(1, 1_000_000),
                Some("500"),
                "optimiser steps",
            ),
            s(
                "lr",
                SettingKind::Above(0.0, f64::INFINITY),
                Some("0.01"),
                "learning rate",
            ),
            s(
                "optimizer",
                SettingKind::Choice(&["adam", "sgd"]),
                Some("adam"),
                "the optimiser",
            ),
            s(
                "learn_hypers",
                SettingKind::Bool,
                Some("false"),
                "learn the hypers too",
            ),
            s(
                "quadrature",
                SettingKind::Int(1, 1000),
                Some("20"),
                "Gauss–Hermite points",
            ),
            s(
                "hyper_lr",
                SettingKind::Above(0.0, f64::INFINITY),
                Some("0.01"),
                "Adam learning rate for the hypers",
            ),
            s(
                "mc_samples",
                SettingKind::Int(2, 1_000_000),
                Some("64"),
                "Monte Carlo samples for multi-class expectations",
            ),
            s(
                "tol",
                SettingKind::Real(0.0, f64::INFINITY),
                Some("0"),
                "stop when the relative ELBO change falls below this (0: run every step)",
            ),
            SEED,
            VI_JITTER,
            BINS,
        ],
    },
    EngineSchema {
        name: "svi",
        implemented: false,
        doc: "stochastic variational inference with inducing points and minibatches",
        settings: &[
            s(
                "steps",
                SettingKind::Int(1, 1_000_000),
                Some("2000"),
                "optimiser steps",
            ),
            s(
                "lr",
                SettingKind::Above(0.0, f64::INFINITY),
                Some("0.01"),
                "learning rate",
            ),
            s(
                "batch",
                SettingKind::Int(1, 1_000_000),
                Some("256"),
                "minibatch size",
            ),
            s(
                "samples",
                SettingKind::Int(1, 10_000),
                Some("1"),
                "Monte Carlo samples per step",
            ),
            s(
                "learn_hypers",
                SettingKind::Bool,
                Some("true"),
                "learn the hypers too",
            ),
            SEED,
        ],
    },
    EngineSchema {
        name: "mala",
        implemented: true,
        doc: "Metropolis-adjusted Langevin algorithm",
        settings: MCMC,
    },
    EngineSchema {
        name: "hmc",
        implemented: true,
        doc: "Hamiltonian Monte Carlo",
        settings: MCMC,
    },
    EngineSchema {
        name: "nuts",
        implemented: true,
        doc: "the No-U-Turn sampler",
        settings: MCMC,
    },
    EngineSchema {
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
    },
    EngineSchema {
        name: "meta",
        implemented: false,
        doc: "meta-learning over many small tasks",
        settings: &[
            s(
                "episodes",
                SettingKind::Int(1, 10_000_000),
                Some("1000"),
                "training episodes",
            ),
            s(
                "ways",
                SettingKind::Int(1, 1000),
                Some("5"),
                "classes per task",
            ),
            s(
                "shots",
                SettingKind::Int(1, 10_000),
                Some("1"),
                "examples per class",
            ),
            s(
                "queries",
                SettingKind::Int(1, 10_000),
                Some("15"),
                "query examples per class",
            ),
            s(
                "inner",
                SettingKind::Engine(&["mirror_descent", "gradient_descent", "svi"]),
                Some("mirror_descent { steps = 3, rho = 1 }"),
                "the per-task inference",
            ),
            s(
                "lr",
                SettingKind::Above(0.0, f64::INFINITY),
                Some("0.001"),
                "outer learning rate",
            ),
            SEED,
        ],
    },
];

/// The schema of an engine by name.
pub fn schema(name: &str) -> Option<&'static EngineSchema> {
    ENGINES.iter().find(|e| e.name == name)
}

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
            schema(&self.name).is_none() || self.has(key),
            "the `{}` engine reads `{key}`, which is not one of its settings",
            self.name
        );
        self.values.get(key)
    }

    /// Whether this engine has a setting `key` (given or defaulted).
    pub fn has(&self, key: &str) -> bool {
        schema(&self.name).is_some_and(|s| s.settings.iter().any(|x| x.name == key))
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
        let Some(schema) = schema(&spec.name.name) else {
            let names: Vec<&str> = ENGINES.iter().map(|e| e.name).collect();
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
        let schema = schema(&self.name).ok_or_else(|| Error::internal("engine without schema"))?;
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
