//! The parser of setting values: literals checked against their
//! [`SettingKind`], nested engines, methods, and `--set` text.

use super::{EngineConfig, EngineSchema, SettingKind, SettingSpec, SettingVal};
use crate::error::{Error, ErrorKind, num};
use crate::syntax::ast::{self, ExprKind, Span};

/// Parse the text of a setting value: an engine spec or an expression.
pub(super) fn parse_value_text(text: &str) -> Result<ast::SettingValue, ()> {
    if let Ok(p) = crate::syntax::parse(&format!("infer __v {{ v = {text} }}"))
        && let Some(ast::Item::Block(b)) = p.items.into_iter().next()
        && let ast::BlockKind::Infer(mut spec) = b.kind
        && let Some(st) = spec.settings.pop()
    {
        return Ok(st.value);
    }
    Err(())
}

/// The value of a setting's default text; a nested engine's is found
/// among `engines` (none when `engines` has no engine of its role).
pub(super) fn default_value(
    spec: &SettingSpec,
    text: &str,
    engines: &[&'static EngineSchema],
) -> Option<SettingVal> {
    let parsed = parse_value_text(text).ok()?;
    match (&spec.kind, parsed) {
        (SettingKind::Engine(nested), ast::SettingValue::Engine(e)) => {
            EngineConfig::from_ast(&e, &nested.among(engines))
                .ok()
                .map(|c| SettingVal::Engine(Box::new(c)))
        }
        (SettingKind::Method(_), ast::SettingValue::Expr(e)) => Some(SettingVal::Method(e)),
        (_, ast::SettingValue::Expr(e)) => literal(&spec.kind, &e).ok(),
        _ => None,
    }
}

fn setting_error(span: Span, msg: String) -> Vec<Error> {
    vec![Error::at(ErrorKind::Settings, span, msg).with_label("this setting")]
}

/// The value of setting `key` of `schema`, checked against its kind; a
/// nested engine is looked up among those of `engines` (every engine a
/// model may name) that play the setting's role.
pub(super) fn parse_setting(
    schema: &EngineSchema,
    key: &str,
    value: &ast::SettingValue,
    span: Span,
    engines: &[&'static EngineSchema],
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
        if let Some(h) = crate::error::suggest(key, names.iter().copied()) {
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
        (SettingKind::Engine(nested), ast::SettingValue::Engine(e)) => {
            EngineConfig::from_ast(e, engines)
                .and_then(|c| engine_of(&nested.names(engines), c, e.name.span))
        }
        (SettingKind::Engine(nested), ast::SettingValue::Expr(e)) => match &e.kind {
            ExprKind::Var(name) => {
                let spec = ast::EngineSpec {
                    name: ast::Ident {
                        name: name.clone(),
                        span: e.span,
                    },
                    settings: vec![],
                    span: e.span,
                };
                EngineConfig::from_ast(&spec, engines)
                    .and_then(|c| engine_of(&nested.names(engines), c, e.span))
            }
            _ => {
                let names = nested.names(engines);
                let like = names
                    .last()
                    .map_or(String::new(), |n| format!(", written like `{n} {{ ... }}`"));
                Err(setting_error(
                    e.span,
                    format!("`{key}` expects an engine ({}){like}", names.join(", ")),
                ))
            }
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
        SettingKind::Above(lo, hi) if hi.is_infinite() => format!("a number > {}", num(*lo)),
        SettingKind::Above(lo, hi) => format!("a number in ({}, {}]", num(*lo), num(*hi)),
        SettingKind::Engine(nested) => format!("an engine ({})", nested.0.words()),
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
