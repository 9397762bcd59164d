//! Row selection and splits on the command line: `--rows` and
//! `--test-rows` (ranges and `COLUMN=VALUE`, hostile numbers included),
//! `--split` fractions and `--shuffle` seeds, with JSON output, under an
//! exact GP, a sparse classifier and a sampler.

use super::pieces::*;
use super::{out_dir, runner};
use proptest::prelude::*;

/// Models that predict, one per engine family.
const MODELS: [&str; 3] = [
    "data { n : int\n  t : vector[n]\n  y : vector[n] }\nhyper { ell : positive = 1.0\n  sigma : positive = 0.5 }\n\
     model { f ~ gp(0, rbf(ell))\n  y ~ normal(f(t), sigma) }\ninfer exact { }\n",
    "data { n : int\n  X : matrix[n, 2] = columns(\"x1\", \"x2\")\n  y : int<lower=0, upper=2>[n] = column(\"lab\") }\n\
     hyper { ell : positive = 1.0 }\nmodel { f ~ gp(0, rbf(ell))[3]\n  y ~ categorical_logit(f(X)) }\n\
     guide { f : inducing(m = 4) }\ninfer svi { steps = 4, batch = 5, polish = 1 }\n",
    "data { n : int\n  x1 : vector[n]\n  y : vector[n] }\nparam { b : real ~ normal(0, 2)\n  sigma : positive ~ normal(0, 1) }\n\
     model { y ~ normal(b * x1, sigma) }\ninfer nuts { chains = 1, warmup = 10, draws = 5 }\n",
];

/// A row selection, ordinary or hostile.
fn rows() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0usize..25, 0usize..25).prop_map(|(a, b)| format!("{a}..{b}")),
        1 => one_of(&[
            "0..=5", "g=2", "g=2.0", "lab=red", "lab=", "=1", "nope=1", "0..", "..5", "-1..3",
            "0..18446744073709551616", "5", "a..b", "0..9223372036854775807", "1e3..2e3",
            "0.5..3", " 0 .. 4 ",
        ]),
    ]
}

/// The command-line pieces of a run (each option at most once).
fn selection() -> impl Strategy<Value = Vec<String>> {
    let split = prop_oneof![
        3 => one_of(&["0.5", "0.8", "0.1", "0.95"]),
        1 => one_of(&["0", "1", "1e-300", "0.99999999", "NaN", "inf", "-0.5", "1e308", "2", "0x1", ""]),
    ];
    let shuffle = one_of(&[
        "0",
        "1",
        "42",
        "18446744073709551615",
        "9223372036854775807",
        "-1",
        "1.5",
    ]);
    (
        prop::option::weighted(0.4, rows()),
        prop::option::weighted(0.4, rows()),
        prop::option::weighted(0.5, split),
        prop::option::weighted(0.4, shuffle),
        any::<bool>(),
    )
        .prop_map(|(rows, mut test_rows, split, mut shuffle, mut test)| {
            // A split makes the test data itself; --test-rows needs --test,
            // --shuffle a split.
            if split.is_some() {
                (test_rows, test) = (None, false);
            } else {
                shuffle = None;
            }
            test = test || test_rows.is_some();
            let mut v = Vec::new();
            for (flag, value) in [
                ("--rows", rows),
                ("--test-rows", test_rows),
                ("--split", split),
                ("--shuffle", shuffle),
            ] {
                if let Some(value) = value {
                    v.push(format!("{flag}={value}"));
                }
            }
            if test {
                v.extend(["--test".to_string(), "TEST".to_string()]);
            }
            v
        })
}

#[test]
fn row_selections_and_splits_end_cleanly() {
    let dir = out_dir("fuzz_splits");
    let labels: Vec<String> = ["red", "green", "blue"].map(String::from).to_vec();
    let strategy = (0..MODELS.len(), selection(), 1usize..20);
    runner(30, 59)
        .run(&strategy, |(which, picked, n)| {
            let steps = Steps {
                context: format!("model {which}, rows {n}, {picked:?}"),
                dir: &dir,
            };
            let m = steps.file("model.tempest", MODELS[which]);
            let d = steps.file("data.csv", &table(n, 3, &labels, 4));
            let test = steps.file("test.csv", &table(7, 3, &labels, 4));
            let json = dir.join("out.json").to_string_lossy().into_owned();
            let mut cmd = args(&["run", &m, "--data", &d, "-q", "--json", &json]);
            cmd.extend(
                picked
                    .into_iter()
                    .map(|p| if p == "TEST" { test.clone() } else { p }),
            );
            if steps.run(&cmd)?.code == 0 {
                let text = std::fs::read_to_string(&json).map_err(|e| {
                    proptest::test_runner::TestCaseError::fail(format!(
                        "no JSON: {e}\n{}",
                        steps.context
                    ))
                })?;
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
                    proptest::test_runner::TestCaseError::fail(format!(
                        "bad JSON: {e}\n{}",
                        steps.context
                    ))
                })?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
