//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use tempest::{Bound, Data, Model, Overrides, Registry};

/// The shared folder beside the repository (data and reference numbers).
pub fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
}

/// Parse a JSON file from the shared reference folder.
pub fn reference(name: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(shared().join("reference").join(name)).expect("reference file");
    serde_json::from_str(&text).expect("reference JSON")
}

/// Compile a model from text, panicking with the rendered errors.
pub fn model(text: &str) -> Model {
    Model::from_str("test.tempest", text, &Registry::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Bind data, panicking with the rendered errors.
pub fn bind(m: &Model, data: &Data) -> Bound {
    m.bind(data, &Overrides::default())
        .unwrap_or_else(|e| panic!("{}", m.render(&e)))
}

/// A shared CSV file, optionally restricted to rows a..=b.
pub fn csv(name: &str, rows: Option<(usize, usize)>) -> Data {
    let d = Data::read(&shared().join("data").join(name)).expect("data file");
    match rows {
        Some((a, b)) => d.select_rows(a, b).expect("rows"),
        None => d,
    }
}

/// |a − b| ≤ tol · max(|b|, tiny).
pub fn assert_rel(a: f64, b: f64, tol: f64, what: &str) {
    let scale = b.abs().max(1e-300);
    assert!(
        (a - b).abs() <= tol * scale,
        "{what}: {a} vs {b} (relative error {:.3e})",
        (a - b).abs() / scale
    );
}
