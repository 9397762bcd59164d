//! Saved fits: the versioned JSON that `tempest run --save FIT.json` writes
//! and `tempest predict` reads, to predict at new data without training
//! again — for every engine that predicts.
//!
//! Every file (`"format": "tempest fit"`, `"version": 1`) holds `engine`,
//! `model` (the file name), `graph` (the model's printed IR without its
//! `engine` line, checked against the model given to `predict`), `hypers`
//! (every hyper's value by name), `temperature`, and `labels` (class labels
//! read from text, by data name). The full-data engines add `data` (the
//! training data in Stan's JSON convention: prediction conditions on it),
//! `settings` (the engine's settings, as written in an `infer` block) and a
//! section of their own, which each engine's `saved.rs` describes, writes
//! ([`crate::fit::Fit::saved`]) and reads back (its definition's
//! `restore`): the exact engine's `exact`, the variational engines' `vi`,
//! the samplers' `draws`; the sparse engine keeps only the training data's
//! first row (`base`) and its own section. This module holds what they
//! share; the registry finds the engine a file names
//! (`registry::restore`).

use crate::data::{Data, JsonData};
use crate::error::{Error, ErrorKind};
use crate::ir::bind::{Bound, Overrides, bind};
use crate::ir::graph::Graph;
use crate::ir::value::Value;
use crate::model::constraint::Bounds;
use crate::saved_json::Field;
use crate::settings::{EngineConfig, EngineSchema};
use nalgebra::{DMatrix, DVector};
use serde_json::{Map, Value as Json, json};

/// The format's name in the file.
pub const FORMAT: &str = "tempest fit";
/// The format's version.
pub const VERSION: u64 = 1;

/// The model's printed IR (which holds no engine: a fit predicts under
/// any `infer` block), as lines joined without a final newline: what must
/// match between the model a fit was saved from and the one predicting.
pub fn graph_text(g: &Graph) -> String {
    crate::ir::print::graph(g)
        .lines()
        .filter(|l| !l.trim_start().starts_with("engine "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A value as JSON in Stan's convention.
pub fn value_json(v: &Value<f64>) -> Json {
    match v {
        Value::Int(i) => json!(i),
        Value::Real(x) => json!(x),
        Value::Bool(b) => json!(b),
        Value::Vector(x) => json!(x.iter().collect::<Vec<_>>()),
        Value::IntArray(x) => json!(x),
        Value::Matrix(x) => rows_json(x),
        Value::Str(s) => json!(s),
        Value::StrArray(s) => json!(s),
        Value::IntRange(a, b) => json!([a, b]),
        Value::Kernel(_) => Json::Null,
    }
}

/// A matrix as JSON rows.
pub fn rows_json(x: &DMatrix<f64>) -> Json {
    json!(
        (0..x.nrows())
            .map(|i| x.row(i).iter().copied().collect::<Vec<f64>>())
            .collect::<Vec<_>>()
    )
}

/// A hyper's value read from `f`, of the kind and shape of `shape` (its
/// value bound from the model) and within `bounds`.
fn hyper_value(
    f: &Field,
    shape: &Value<f64>,
    bounds: &Bounds,
    name: &str,
) -> Result<Value<f64>, Error> {
    let what = format!("the {} `{name}`", shape.shape());
    let v = match shape {
        Value::Real(_) => Value::Real(
            f.number()
                .map_err(|_| f.expected(&format!("a finite number ({what})")))?,
        ),
        Value::Int(_) => Value::Int(
            f.raw()
                .and_then(Json::as_i64)
                .ok_or_else(|| f.expected(&format!("a whole number ({what})")))?,
        ),
        Value::Vector(v) => Value::Vector(DVector::from_vec(f.numbers(Some(v.len()), &what)?)),
        Value::Matrix(m) => Value::Matrix(f.matrix(m.shape(), &what)?),
        other => return Ok(other.clone()),
    };
    if let Some(x) = v.flatten().into_iter().find(|&x| !bounds.contains(x)) {
        return Err(f.error(format!(
            "expected values {} (the bounds of `{name}`), found {}",
            bounds.describe(),
            crate::error::num(x)
        )));
    }
    Ok(v)
}

/// The learned hypers θ on the unconstrained scale, read from `at` (one
/// number per entry of `layout`), and checked against the saved `hypers`:
/// every hyper must have the value θ gives it (the fixed ones, their own),
/// so that a hyper edited by hand in one place and not the other is
/// refused rather than ignored.
pub fn read_theta(
    root: &Field,
    at: &Field,
    bound: &Bound,
    layout: &crate::hypers::HyperLayout,
) -> Result<Vec<f64>, Error> {
    let theta = at.numbers(
        Some(layout.len),
        "the learned hypers on the unconstrained scale",
    )?;
    let values = layout.values::<f64>(bound, &theta);
    let hypers = root.get("hypers");
    for ((h, saved), v) in bound
        .graph
        .hypers
        .iter()
        .zip(&bound.hyper_init)
        .zip(&values)
    {
        let same = saved.flatten().iter().zip(v.flatten()).all(|(&a, b)| {
            a == b
                || (a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-12 * a.abs().max(b.abs()))
        });
        if !same {
            return Err(hypers.get(&h.name).error(format!(
                "`{}` is {saved} here, but `{}` gives it {v}: one of them was changed",
                h.name,
                at.path()
            )));
        }
    }
    Ok(theta)
}

/// The error for a file that is not a saved fit tempest can read.
pub fn bad(file: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::Data,
        format!("{file}: not a saved fit tempest can read ({what})"),
    )
    .with_note("write one with `tempest run ... --save FIT.json`")
}

/// The fields every saved fit starts with: format, version, engine, model,
/// graph, hypers, temperature, labels and (given) the engine's settings.
pub fn header(
    engine: &str,
    model: &str,
    bound: &Bound,
    hypers: &[Value<f64>],
    cfg: Option<&EngineConfig>,
) -> Map<String, Json> {
    let mut h = Map::new();
    for (d, v) in bound.graph.hypers.iter().zip(hypers) {
        h.insert(d.name.clone(), value_json(v));
    }
    let labels: Map<String, Json> = bound
        .labels
        .iter()
        .map(|(&i, ls)| (bound.graph.data[i].name.clone(), json!(ls)))
        .collect();
    let mut m = Map::new();
    m.insert("format".into(), json!(FORMAT));
    m.insert("version".into(), json!(VERSION));
    m.insert("engine".into(), json!(engine));
    m.insert("model".into(), json!(model));
    m.insert("graph".into(), json!(graph_text(&bound.graph)));
    m.insert("hypers".into(), Json::Object(h));
    m.insert("temperature".into(), json!(bound.temperature));
    m.insert("labels".into(), Json::Object(labels));
    if let Some(cfg) = cfg {
        let settings: Map<String, Json> = cfg
            .values
            .iter()
            .map(|(k, v)| (k.clone(), json!(v.to_string())))
            .collect();
        m.insert("settings".into(), Json::Object(settings));
    }
    m
}

/// The JSON key a data declaration is read from: the column of
/// `column("c")` (a vector or int array), else its name (a matrix with
/// `columns(...)` reads its own name's key when the columns' keys are
/// absent).
pub fn data_key(d: &crate::ir::graph::DataNode) -> String {
    match (&d.source, &d.ty) {
        (
            crate::ir::graph::DataSource::Columns(cs),
            crate::ir::types::Ty::Vector(_) | crate::ir::types::Ty::IntArray(_),
        ) if cs.len() == 1 => cs[0].clone(),
        _ => d.name.clone(),
    }
}

/// The data of `bound` in Stan's JSON convention, every declaration with a
/// value under the key it is read from ([`data_key`]); declarations given
/// in the model (`= expr`) are left out, and ids read with integer
/// `levels` are written as the data file has them.
pub fn data_json(bound: &Bound) -> Json {
    let mut m = Map::new();
    for (i, d) in bound.graph.data.iter().enumerate() {
        if bound.present[i] && !matches!(d.source, crate::ir::graph::DataSource::Value) {
            // Ids read with integer `levels` are stored as written, since
            // binding the file again numbers them.
            let v = match &bound.data[i] {
                Value::IntArray(ns) => crate::ir::ids::written_ids(bound, i, ns)
                    .map_or_else(|| value_json(&bound.data[i]), |ids| json!(ids)),
                v => value_json(v),
            };
            m.insert(data_key(d), v);
        }
    }
    Json::Object(m)
}

/// Check a saved fit's format, version and model against `graph`; its
/// engine.
pub fn check_header<'a>(graph: &Graph, j: &'a Json, file: &'a str) -> Result<&'a str, Error> {
    let root = Field::root(file, j);
    let format = root.get("format");
    if format.raw().and_then(Json::as_str) != Some(FORMAT) {
        return Err(format.expected(&format!("{FORMAT:?} (a saved fit)")));
    }
    let version = root.get("version");
    let v = version.u64()?;
    if v != VERSION {
        return Err(version.error(format!(
            "a fit of version {v}; this tempest reads version {VERSION}"
        )));
    }
    let saved_graph = root.get("graph").str()?;
    let model = root.get("model").str()?;
    if saved_graph != graph_text(graph) {
        return Err(Error::new(
            ErrorKind::Data,
            format!("{file} was saved from another model ({model}): its declarations, model or guide differ from this one's"),
        )
        .with_note("predict with the model file the fit was trained with (comments, layout and the `infer` block may differ)"));
    }
    root.get("engine").str()
}

/// Bind the data saved under `key` (`data`, or svi's `base`) to `graph`,
/// with the saved temperature, hypers and class labels; `what` names the
/// data in messages.
pub fn restore_bound(
    graph: Graph,
    j: &Json,
    file: &str,
    key: &str,
    what: &str,
) -> Result<Bound, Error> {
    let root = Field::root(file, j);
    let map = root.get(key).object()?;
    let temperature = root.get("temperature");
    let t = temperature
        .number()
        .ok()
        .filter(|&t| t >= 0.0)
        .ok_or_else(|| {
            temperature.expected("a finite number ≥ 0 (the likelihood's temperature)")
        })?;
    let data = Data::Json(JsonData {
        file: format!("{file} ({what})"),
        map: map.clone(),
    });
    let mut bound = bind(graph, &data, &Overrides::default()).map_err(|e| {
        let first = e.0.into_iter().next().unwrap_or_else(|| bad(file, key));
        first.with_note(format!("while binding the training data saved in {file}"))
    })?;
    // Set as read: a temperature written as 1e20 is not text to parse.
    bound.temperature = t;
    let hypers = root.get("hypers");
    hypers.object()?;
    for (i, h) in bound.graph.hypers.clone().iter().enumerate() {
        let f = hypers.get(&h.name);
        bound.hyper_init[i] =
            hyper_value(&f, &bound.hyper_init[i], &bound.hyper_bounds[i], &h.name)?;
    }
    let labels = root.get("labels");
    for name in labels.object()?.keys() {
        let f = labels.get(name);
        let i = bound.graph.data_index(name).ok_or_else(|| {
            f.error(format!(
                "class labels of `{name}`, which the model does not declare"
            ))
        })?;
        let ls: Vec<String> = f
            .items(None, "strings")?
            .iter()
            .map(|l| l.str().map(String::from))
            .collect::<Result<_, _>>()?;
        let distinct: std::collections::BTreeSet<&String> = ls.iter().collect();
        if ls.is_empty() || distinct.len() != ls.len() {
            return Err(f.expected("distinct labels, at least one"));
        }
        let top = bound.data[i].flatten().into_iter().fold(0.0, f64::max);
        if bound.present[i] && top >= ls.len() as f64 {
            return Err(f.expected(&format!(
                "a label for each class of the saved `{name}` (up to class {top})"
            )));
        }
        bound.labels.insert(i, ls);
    }
    Ok(bound)
}

/// The engine's settings saved in the file, checked by its schema.
pub fn restore_config(
    schema: &'static EngineSchema,
    j: &Json,
    file: &str,
) -> Result<EngineConfig, Error> {
    let root = Field::root(file, j);
    let mut cfg = EngineConfig::defaults(schema, Default::default());
    let settings = root.get("settings");
    for k in settings.object()?.keys() {
        let f = settings.get(k);
        let text = f.str()?;
        cfg.set(k, text)
            .map_err(|e| f.error(format!("the setting `{k}`: {}", e.message)))?;
    }
    Ok(cfg)
}

/// What every full-data engine's restore starts with: the training data
/// bound (with hypers and labels), the engine's settings (of `schema`,
/// the engine's), and its name.
pub fn restore_full_data(
    graph: Graph,
    j: &Json,
    file: &str,
    schema: &'static EngineSchema,
) -> Result<(Bound, EngineConfig, &'static str), Error> {
    let bound = restore_bound(graph, j, file, "data", "the training data")?;
    let cfg = restore_config(schema, j, file)?;
    Ok((bound, cfg, schema.name))
}
