//! Generated hierarchical models under the samplers: constants as sizes
//! (`J : int = 4`), ids counted from 1 (`column("g", levels = 1..J)`),
//! integer arithmetic in indices (`a[g - 1]`), test data with unknown ids
//! (predictions from draws), chain offsets, Stan CSV files and their
//! `tempest summary`, and saved draws predicted from again.

use super::pieces::*;
use super::{out_dir, runner};
use proptest::prelude::*;

/// The constant J: ordinary, computed, or hostile.
fn groups_constant() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just("4".to_string()),
        1 => one_of(&["3", "5", "2 * 2", "n - 1", "n / 2", "0", "-1", "1000000000000", "9223372036854775807", "4.0"]),
    ]
}

/// An integer index expression over the ids `g` (1..=4 in the file):
/// integer arithmetic on the int array, a few operators deep.
fn int_index() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        4 => Just("g".to_string()),
        2 => one_of(&["1", "2", "0", "J", "n", "3"]),
        1 => Just("h[g - 1]".to_string()),
        1 => one_of(&["9223372036854775807", "-1"]),
    ];
    leaf.prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            inner.prop_map(|a| format!("h[{a}]")),
        ]
    })
    .prop_map(|e| format!("{e} - 1"))
}

/// The declaration of the group column `g` (ids 1..=4 in the file).
fn group_column() -> impl Strategy<Value = (String, String)> {
    // The declaration and the index expression that suits it.
    prop_oneof![
        4 => Just(("column(\"g\", levels = 1..J)".to_string(), "g".to_string())),
        1 => Just(("column(\"g\", levels = 1..J)".to_string(), "g - 0".to_string())),
        2 => Just(("column(\"g\")".to_string(), "g - 1".to_string())),
        1 => Just(("column(\"g\")".to_string(), "g".to_string())),
        1 => Just(("column(\"g\", levels = [1, 2, 3, 4])".to_string(), "g".to_string())),
        1 => one_of(&["0..J", "J..1", "1..1000000000000000", "-5..J", "1..n", "[4, 4, 1]", "[]", "1..9223372036854775807", "[\"a\", \"b\"]", "1.5..J"])
            .prop_map(|l| (format!("column(\"g\", levels = {l})"), "g".to_string())),
        1 => Just(("column(\"g\")".to_string(), "g * 2 - g - 1".to_string())),
        1 => Just(("column(\"g\")".to_string(), "(g - 1) / 1".to_string())),
        1 => Just(("column(\"g\")".to_string(), "g - 5".to_string())),
        1 => Just(("column(\"g\")".to_string(), "h[g - 1] - 1".to_string())),
        2 => int_index().prop_map(|e| ("column(\"g\")".to_string(), e)),
    ]
}

/// A sampler block, small, sometimes with hostile settings.
fn sampler() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec!["nuts", "hmc", "mala", "sample_prior"]),
        prop_oneof![5 => one_of(&["2", "1"]), 1 => one_of(&["0", "3"])],
        prop_oneof![5 => one_of(&["8", "15"]), 1 => one_of(&["1", "2"])],
        prop_oneof![5 => one_of(&["20", "0"]), 1 => one_of(&["1", "3"])],
        settings(vec![
            setting("chain_offset", size(&["0", "3", "999999999"])),
            setting("predictive_draws", size(&["1", "5", "7"])),
            setting("adaptation", one_of(&["stan", "gradient", "dense", "low_rank"])),
            setting("step_size", real(&["0.1", "1e-12", "1e7"])),
            setting("target_accept", real(&["0.9", "1"])),
        ]),
    )
        .prop_map(|(e, chains, draws, warmup, extra)| {
            let extra = if extra.is_empty() { extra } else { format!(", {extra}") };
            if e == "sample_prior" {
                let extra = if extra.contains("predictive_draws") { ", predictive_draws = 3" } else { "" };
                format!("sample_prior {{ draws = {draws}{extra} }}")
            } else {
                format!(
                    "{e} {{ chains = {chains}, warmup = {warmup}, draws = {draws}, max_depth = 4, leapfrog_steps = 4{extra} }}"
                )
            }
        })
}

/// The whole model: varying intercepts over J groups.
fn group_model() -> impl Strategy<Value = String> {
    (
        groups_constant(),
        group_column(),
        sampler(),
        prop::sample::select(vec!["vector[J]", "vector[J]", "vector[4]", "vector[n]"]),
        prop::sample::select(vec![
            "y ~ normal(a[IDX] + b * x1, sigma)",
            "k ~ poisson_log(a[IDX] + b * x1)",
            "b2 ~ bernoulli_logit(a[IDX])",
            "y ~ normal(a[IDX] + f(x1), sigma)",
        ]),
    )
        .prop_map(|(j, (decl, idx), engine, a_type, lik)| {
            let lik = lik.replace("IDX", &idx);
            let gp = if lik.contains("f(x1)") { "\n  f ~ gp(0, rbf(1.0))" } else { "" };
            format!(
                "data {{ n : int\n  J : int = {j}\n  g : int<lower=0>[n] = {decl}\n  h : int[4] = [1, 2, 3, 4]\n  x1 : vector[n]\n  y : vector[n]\n  k : int<lower=0>[n]\n  b2 : int[n] = column(\"b\") }}\n\
                 param {{ mu : real ~ normal(0, 2)\n  tau : positive ~ normal(0, 1)\n  a : {a_type} ~ normal(mu, tau)\n  b : real ~ normal(0, 2)\n  sigma : positive ~ normal(0, 1) }}\n\
                 model {{{gp}\n  {lik}\n}}\n\
                 estimate {{ a0 = E[a[0]]\n  spread = E[exp(tau * 800)] }}\n\
                 infer {engine}\n"
            )
        })
}

/// Command-line pieces of a sampler run.
fn sampler_flags() -> impl Strategy<Value = Vec<String>> {
    let piece = prop_oneof![
        one_of(&[
            "0",
            "5",
            "1000000000",
            "1000000001",
            "-1",
            "18446744073709551615",
            "x"
        ])
        .prop_map(|k| vec!["--chain-offset".to_string(), k]),
        one_of(&["0", "3", "18446744073709551615"]).prop_map(|s| vec!["--seed".to_string(), s]),
        one_of(&[
            "chain_offset=2",
            "predictive_draws=1",
            "draws=1",
            "chains=3",
            "warmup=0",
            "J=3",
            "n=3"
        ])
        .prop_map(|s| vec!["--set".to_string(), s]),
        one_of(&[
            "0..5",
            "2..9",
            "9..2",
            "0..0",
            "g=2",
            "g=9",
            "0..99999999999999999999"
        ])
        .prop_map(|r| vec!["--rows".to_string(), r]),
    ];
    prop::collection::vec(piece, 0..3).prop_map(|v| v.concat())
}

#[test]
fn generated_group_models_end_cleanly() {
    let dir = out_dir("fuzz_groups");
    let strategy = (
        group_model(),
        prop_oneof![4 => Just(12usize), 1 => 1usize..4],
        sampler_flags(),
        prop_oneof![4 => Just(4usize), 1 => Just(6usize)],
        prop::option::weighted(0.15, (0usize..12, 0usize..9, one_of(&CELLS))),
        prop::bool::weighted(0.25),
    );
    runner(16, 41)
        .run(&strategy, |(model, rows, flags, test_ids, cell, json)| {
            let steps = Steps {
                context: format!("model:\n{model}\nrows {rows}, flags {flags:?}, test ids 1..={test_ids}, damaged cell {cell:?}, JSON {json}"),
                dir: &dir,
            };
            clear(&dir, "draws");
            let m = steps.file("model.tempest", &model);
            let text = table(rows, 2, &[], 4);
            let text = damage(&text, cell.as_ref().map(|(r, c, v)| (*r, *c, v.as_str())));
            let d = if json {
                steps.file("data.json", &table_json(&text))
            } else {
                steps.file("data.csv", &text)
            };
            // Ids 5 and 6 are unknown to the model when test_ids is 6.
            let test = steps.file("test.csv", &table(6, 2, &[], test_ids));
            let fit = steps.file("fit.json", "");
            let prefix = dir.join("draws").to_string_lossy().into_owned();
            steps.run(&args(&["check", &m, "--data", &d]))?;
            let mut run = args(&["run", &m, "--data", &d, "--test", &test, "-q"]);
            run.extend(args(&["--csv", &prefix, "--save", &fit]));
            run.extend(flags);
            if steps.run(&run)?.code == 0 {
                steps.run(&args(&["predict", &m, "--fit", &fit, "--test", &test]))?;
                let draws = files_with_prefix(&dir, "draws");
                if !draws.is_empty() {
                    let mut summary = args(&["summary"]);
                    summary.extend(draws);
                    steps.run(&summary)?;
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
