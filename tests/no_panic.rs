//! No input makes tempest panic: random edits of valid models (deleting,
//! duplicating and inserting text) go through parse, check, lower and
//! binding, and must come back as values or errors.

use proptest::prelude::*;
use std::path::PathBuf;
use tempest::{Data, Overrides, Registry};

fn good_models() -> Vec<(String, Option<Data>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/models/good");
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.extension().is_some_and(|e| e == "tempest") {
            let text = std::fs::read_to_string(&p).unwrap();
            let data = ["csv", "json"]
                .iter()
                .map(|e| p.with_extension(e))
                .find(|d| d.exists())
                .and_then(|d| Data::read(&d).ok());
            out.push((text, data));
        }
    }
    out
}

const SNIPPETS: [&str; 24] = [
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ";",
    "~",
    "^",
    "=",
    "..",
    "\"",
    "/*",
    "//",
    "-",
    "*",
    "0",
    "1e309",
    "-9223372036854775808",
    " f(X) ",
    " gp(0, rbf(1)) ",
    " int[",
    " vector<lower=",
];

fn pipeline(text: &str, data: Option<&Data>) {
    let registry = Registry::default();
    let Ok(p) = tempest::parse(text) else { return };
    let Ok(c) = tempest::check(&p, &registry) else {
        return;
    };
    let Ok(g) = tempest::lower(c) else { return };
    if let Some(d) = data {
        let _ = tempest::bind(g, d, &Overrides::default());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn edited_models_never_panic(which in 0usize..64, at in 0usize..4096, len in 0usize..40, snippet in 0usize..SNIPPETS.len(), op in 0u8..3) {
        let models = good_models();
        let (text, data) = &models[which % models.len()];
        let mut t = text.clone();
        let mut cut = at % (t.len() + 1);
        while !t.is_char_boundary(cut) { cut -= 1; }
        let mut end = (cut + len).min(t.len());
        while !t.is_char_boundary(end) { end -= 1; }
        match op {
            0 => { t.replace_range(cut..end, ""); }
            1 => { let piece = t[cut..end].to_string(); t.insert_str(end, &piece); }
            _ => { t.insert_str(cut, SNIPPETS[snippet]); }
        }
        let r = std::panic::catch_unwind(|| pipeline(&t, data.as_ref()));
        prop_assert!(r.is_ok(), "panic on input:\n{t}");
    }

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let r = std::panic::catch_unwind(|| pipeline(&s, None));
        prop_assert!(r.is_ok(), "panic on input: {s:?}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for open in ["(", "[", "-(", "f("] {
        let text = format!("model {{ let a = {}1 }}", open.repeat(100_000));
        let e = tempest::parse(&text).expect_err("an error");
        assert!(
            e.first().message.contains("nested"),
            "{}",
            e.first().message
        );
    }
    let long = format!("model {{ let a = {} }}", vec!["1"; 50_000].join(" + "));
    let r = std::panic::catch_unwind(|| pipeline(&long, None));
    assert!(r.is_ok());
}

#[test]
fn the_largest_allowed_expressions_run() {
    let sum = vec!["x"; 1000].join(" + ");
    let neg = format!("{}x", "-".repeat(999));
    let nest = format!("{}x{}", "(".repeat(99), ")".repeat(99));
    for e in [sum, neg, nest] {
        let text = format!("data {{ x : real = 1.0 }}\nmodel {{ let a = {e} }}\n");
        let g = tempest::parse(&text)
            .and_then(|p| tempest::check(&p, &Registry::default()))
            .and_then(tempest::lower)
            .expect("model");
        tempest::bind(g, &Data::values(), &Overrides::default()).expect("bind");
    }
}
