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
//! section of their own:
//!
//! - `exact`: `theta` (the learned hypers, unconstrained, exactly),
//!   `log_marginal_likelihood` (checked when the fit is read back),
//!   `iterations`, `evaluations`, `gradient`, `reason`, `converged`, `trace`;
//! - `mirror_descent`, `gradient_descent` — `vi`: `theta`, `elbo`, `steps`,
//!   `reason`, `trace`, and `q`, per latent GP the whitened mean `mean` \[N\]
//!   and lower-triangular factor `factor` \[N, N\] as rows;
//! - `nuts`, `hmc`, `mala` — `draws`: `chains`, `kept` (draws per chain),
//!   `seed`, `predictive_draws`, and `positions`: at most
//!   `predictive_draws` draws (evenly spaced over the chains) on the
//!   sampler's unconstrained scale, one row each.
//!
//! `svi` keeps only the training data's first row (`base`) and its own
//! section (see [`crate::infer::svi::saved`]).

use crate::data::{Data, JsonData};
use crate::error::{Error, ErrorKind};
use crate::infer::fit::Fit;
use crate::infer::settings::EngineConfig;
use crate::ir::bind::{Bound, Overrides, bind};
use crate::ir::graph::Graph;
use crate::ir::value::Value;
use nalgebra::{DMatrix, DVector};
use serde_json::{Map, Value as Json, json};

/// The format's name in the file.
pub const FORMAT: &str = "tempest fit";
/// The format's version.
pub const VERSION: u64 = 1;

/// The model's printed IR without the `engine` line: what must match
/// between the model a fit was saved from and the one predicting.
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

/// A JSON array of finite numbers.
pub fn numbers(j: Option<&Json>) -> Option<Vec<f64>> {
    j?.as_array()?
        .iter()
        .map(|x| x.as_f64().filter(|v| v.is_finite()))
        .collect()
}

/// A JSON array of equally long rows of finite numbers.
pub fn matrix(j: Option<&Json>) -> Option<DMatrix<f64>> {
    let rows: Vec<Vec<f64>> = j?
        .as_array()?
        .iter()
        .map(|r| numbers(Some(r)))
        .collect::<Option<_>>()?;
    let c = rows.first().map_or(0, Vec::len);
    if rows.iter().any(|r| r.len() != c) {
        return None;
    }
    Some(DMatrix::from_fn(rows.len(), c, |i, k| rows[i][k]))
}

/// `j` as a value of the same kind and shape as `shape`.
pub fn like(shape: &Value<f64>, j: &Json) -> Option<Value<f64>> {
    match shape {
        Value::Real(_) => j.as_f64().filter(|v| v.is_finite()).map(Value::Real),
        Value::Int(_) => j.as_i64().map(Value::Int),
        Value::Vector(v) => numbers(Some(j))
            .filter(|x| x.len() == v.len())
            .map(|x| Value::Vector(DVector::from_vec(x))),
        Value::Matrix(m) => matrix(Some(j))
            .filter(|x| x.shape() == m.shape())
            .map(Value::Matrix),
        other => Some(other.clone()),
    }
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
pub fn check_header<'a>(graph: &Graph, j: &'a Json, file: &str) -> Result<&'a str, Error> {
    if j.get("format").and_then(Json::as_str) != Some(FORMAT) {
        return Err(bad(file, "no `\"format\": \"tempest fit\"`"));
    }
    match j.get("version").and_then(Json::as_u64) {
        Some(VERSION) => {}
        Some(v) => {
            return Err(bad(
                file,
                &format!("version {v}; this tempest reads version {VERSION}"),
            ));
        }
        None => return Err(bad(file, "no version")),
    }
    let saved_graph = j
        .get("graph")
        .and_then(Json::as_str)
        .ok_or_else(|| bad(file, "no `graph`"))?;
    if saved_graph != graph_text(graph) {
        let model = j.get("model").and_then(Json::as_str).unwrap_or("?");
        return Err(Error::new(
            ErrorKind::Data,
            format!("{file} was saved from another model ({model}): its declarations, model or guide differ from this one's"),
        )
        .with_note("predict with the model file the fit was trained with (comments, layout and the `infer` block may differ)"));
    }
    j.get("engine")
        .and_then(Json::as_str)
        .ok_or_else(|| bad(file, "no `engine`"))
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
    let map = j
        .get(key)
        .and_then(Json::as_object)
        .ok_or_else(|| bad(file, &format!("no `{key}`")))?;
    let data = Data::Json(JsonData {
        file: format!("{file} ({what})"),
        map: map.clone(),
    });
    let mut overrides = Overrides::default();
    if let Some(t) = j.get("temperature").and_then(Json::as_f64) {
        overrides.values.push(("temperature".into(), t.to_string()));
    }
    let mut bound = bind(graph, &data, &overrides).map_err(|e| {
        let first = e.0.into_iter().next().unwrap_or_else(|| bad(file, key));
        first.with_note(format!("while binding the training data saved in {file}"))
    })?;
    let hypers = j
        .get("hypers")
        .and_then(Json::as_object)
        .ok_or_else(|| bad(file, "no `hypers`"))?;
    for (i, h) in bound.graph.hypers.clone().iter().enumerate() {
        let v = hypers
            .get(&h.name)
            .ok_or_else(|| bad(file, &format!("no value of the hyper `{}`", h.name)))?;
        bound.hyper_init[i] = like(&bound.hyper_init[i], v)
            .ok_or_else(|| bad(file, &format!("the hyper `{}` has another shape", h.name)))?;
    }
    if let Some(labels) = j.get("labels").and_then(Json::as_object) {
        for (name, ls) in labels {
            let i = bound.graph.data_index(name).ok_or_else(|| {
                bad(
                    file,
                    &format!("labels of `{name}`, which the model does not declare"),
                )
            })?;
            let ls: Vec<String> = ls
                .as_array()
                .and_then(|a| a.iter().map(|l| l.as_str().map(String::from)).collect())
                .ok_or_else(|| bad(file, &format!("the labels of `{name}`")))?;
            bound.labels.insert(i, ls);
        }
    }
    Ok(bound)
}

/// The engine's settings saved in the file, checked by its schema.
pub fn restore_config(engine: &str, j: &Json, file: &str) -> Result<EngineConfig, Error> {
    let schema = crate::infer::registry::schema(engine)
        .ok_or_else(|| bad(file, &format!("the engine `{engine}` is not known")))?;
    let mut cfg = EngineConfig::defaults(schema, Default::default());
    let set = j
        .get("settings")
        .and_then(Json::as_object)
        .ok_or_else(|| bad(file, "no `settings`"))?;
    for (k, v) in set {
        let text = v
            .as_str()
            .ok_or_else(|| bad(file, &format!("the setting `{k}`")))?;
        cfg.set(k, text)
            .map_err(|e| bad(file, &format!("the setting `{k}`: {}", e.message)))?;
    }
    Ok(cfg)
}

/// What every full-data engine's restore starts with: the training data
/// bound (with hypers and labels), the engine's settings, and its name as
/// the registry spells it.
pub fn restore_full_data(
    graph: Graph,
    j: &Json,
    file: &str,
    engine: &str,
) -> Result<(Bound, EngineConfig, &'static str), Error> {
    let bound = restore_bound(graph, j, file, "data", "the training data")?;
    let cfg = restore_config(engine, j, file)?;
    let name = crate::infer::registry::schema(engine)
        .map(|s| s.name)
        .ok_or_else(|| bad(file, "engine"))?;
    Ok((bound, cfg, name))
}

/// Read a saved fit of any engine for `graph` (the model given to
/// `predict`): the fit, ready to predict, and the bound training data (to
/// bind test data against).
pub fn restore(graph: Graph, j: &Json, file: &str) -> Result<(Box<dyn Fit>, Bound), Error> {
    let engine = check_header(&graph, j, file)?.to_string();
    match engine.as_str() {
        "svi" => {
            let (fit, base) = crate::infer::svi::fit::SviFit::restore(graph, j, file)?;
            Ok((Box::new(fit), base))
        }
        "exact" => crate::infer::exact::saved::restore(graph, j, file),
        "mirror_descent" | "gradient_descent" => {
            crate::infer::vi::saved::restore(graph, j, file, &engine)
        }
        "nuts" | "hmc" | "mala" => crate::infer::mcmc::saved::restore(graph, j, file, &engine),
        other => Err(bad(
            file,
            &format!("saved by the engine `{other}`, which saves no fits"),
        )),
    }
}
