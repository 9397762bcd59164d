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
    for open in ["(", "[", "-(", "f(", "if x then "] {
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

/// Each expression at a limit, and one step beyond it.
fn at_and_beyond_limits() -> Vec<(String, String)> {
    let sum = |n: usize| vec!["x"; n].join(" + ");
    let neg = |n: usize| format!("{}x", "-".repeat(n));
    let pow = |n: usize| format!("x{}", " ^ x".repeat(n));
    let nest = |n: usize| format!("{}x{}", "(".repeat(n), ")".repeat(n));
    let ifs = |n: usize| format!("{}x{}", "if x > 0 then ".repeat(n), " else x".repeat(n));
    let calls = |n: usize| format!("{}x{}", "exp(".repeat(n), ")".repeat(n));
    vec![
        (sum(1000), sum(1002)),
        (neg(100), neg(101)),
        (pow(100), pow(101)),
        (nest(99), nest(101)),
        (ifs(99), ifs(101)),
        (calls(99), calls(101)),
    ]
}

#[test]
fn the_largest_allowed_expressions_run() {
    for (ok, _) in at_and_beyond_limits() {
        let text = format!("data {{ x : real = 1.0 }}\nmodel {{ let a = {ok} }}\n");
        let g = tempest::parse(&text)
            .and_then(|p| tempest::check(&p, &Registry::default()))
            .and_then(tempest::lower)
            .unwrap_or_else(|e| panic!("{}: {}", &ok[..40.min(ok.len())], e.first().message));
        tempest::bind(g, &Data::values(), &Overrides::default()).expect("bind");
    }
}

#[test]
fn expressions_beyond_the_limits_are_syntax_errors() {
    for (_, bad) in at_and_beyond_limits() {
        let text = format!("data {{ x : real = 1.0 }}\nmodel {{ let a = {bad} }}\n");
        let e = tempest::parse(&text).expect_err("an error");
        assert_eq!(
            e.first().kind,
            tempest::ErrorKind::Syntax,
            "{}",
            e.first().message
        );
    }
}

#[test]
fn long_let_chains_evaluate_without_recursion() {
    // Each let uses the one before: evaluation must not recurse per let.
    let lets: Vec<String> = (0..20_000)
        .map(|i| format!("let a{} = a{i} + x", i + 1))
        .collect();
    let text = format!(
        "data {{ x : real = 1.0 }}\nmodel {{ let a0 = x\n{}\n }}\n",
        lets.join("\n")
    );
    let g = tempest::parse(&text)
        .and_then(|p| tempest::check(&p, &Registry::default()))
        .and_then(tempest::lower)
        .expect("model");
    // Binding evaluates every let once (the dry run), on this test
    // thread's small stack.
    tempest::bind(g, &Data::values(), &Overrides::default()).expect("bind");
}

#[test]
fn parsing_time_is_linear_in_nested_calls() {
    // Nested calls were once parsed twice per level (2^99 steps here). The
    // parser now stops with an error past a fixed number of steps per
    // byte, so parsing at all proves the work is linear.
    for depth in [22, 99] {
        let text = format!(
            "hyper {{ a : real = {}0.0{} }}",
            "exp(".repeat(depth),
            ")".repeat(depth)
        );
        tempest::parse(&text).unwrap_or_else(|e| panic!("{}", e.first().message));
    }
}

#[test]
fn the_byte_order_mark_is_never_an_expected_token() {
    for text in ["  (1 + 2)", "(", "  ", "data { x : real } )"] {
        if let Err(e) = tempest::parse(text) {
            let m = &e.first().message;
            assert!(!m.contains('\u{FEFF}'), "{text:?}: {m}");
        }
    }
}
