//! Generated class labels written as text: sorted labels and declared
//! `levels = [...]` lists (with hostile labels: empty, spaced, quoted,
//! numeric, non-ASCII, long), test data with labels the training data does
//! not have, under the engines that classify, saved and predicted again.

use super::pieces::*;
use super::{out_dir, runner};
use proptest::prelude::*;

/// Label texts, ordinary and hostile (a CSV cell each).
const LABELS: [&str; 14] = [
    "red",
    "green",
    "blue",
    "grey soil",
    " padded ",
    "\"quoted, comma\"",
    "3",
    "-1",
    "NaN",
    "é",
    "日本",
    "Red",
    "x\"y",
    "",
];

/// A distinct-ish set of labels, most of them ordinary.
fn label_set() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop_oneof![5 => one_of(&LABELS[..3]), 2 => one_of(&LABELS), 1 => Just("l".repeat(300))],
        1..5,
    )
}

/// The declaration's `levels` (from the labels, reordered, missing one,
/// or hostile), or none (sorted labels).
fn levels(labels: &[String]) -> impl Strategy<Value = String> + use<> {
    let quoted: Vec<String> = labels
        .iter()
        .map(|l| format!("\"{}\"", l.trim().trim_matches('"').replace('"', "")))
        .collect();
    let mut reversed = quoted.clone();
    reversed.reverse();
    let fewer = quoted[..quoted.len().saturating_sub(1)].to_vec();
    prop_oneof![
        3 => Just(String::new()),
        2 => Just(format!(", levels = [{}]", quoted.join(", "))),
        1 => Just(format!(", levels = [{}]", reversed.join(", "))),
        1 => Just(format!(", levels = [{}]", fewer.join(", "))),
        1 => one_of(&[", levels = []", ", levels = [\"a\", \"a\"]", ", levels = [1, 2]", ", levels = \"red\"", ", levels = 0..2"]),
    ]
}

/// The model for `classes` labels: the likelihood and engine vary.
fn label_model(decl_levels: &str, classes: usize) -> impl Strategy<Value = String> + use<> {
    let decl_levels = decl_levels.to_string();
    (
        prop::sample::select(vec!["categorical", "bernoulli", "categorical_sampled"]),
        prop::sample::select(vec![
            "mirror_descent { steps = 3 }",
            "gradient_descent { steps = 5 }",
            "svi { steps = 5, batch = 4, polish = 1 }",
        ]),
        prop_oneof![4 => Just(classes), 1 => 1usize..5],
    )
        .prop_map(move |(lik, engine, c)| {
            let upper = c.saturating_sub(1);
            match lik {
                "bernoulli" => format!(
                    "data {{ n : int\n  X : matrix[n, 2] = columns(\"x1\", \"x2\")\n  y : int<lower=0, upper=1>[n] = column(\"lab\"{decl_levels}) }}\n\
                     hyper {{ ell : positive = 1.0 }}\nmodel {{ f ~ gp(0, rbf(ell))\n  y ~ bernoulli_logit(f(X)) }}\ninfer {engine}\n"
                ),
                "categorical" => format!(
                    "data {{ n : int\n  X : matrix[n, 2] = columns(\"x1\", \"x2\")\n  y : int<lower=0, upper={upper}>[n] = column(\"lab\"{decl_levels}) }}\n\
                     hyper {{ ell : positive = 1.0 }}\nmodel {{ f ~ gp(0, rbf(ell))[{c}]\n  y ~ categorical_logit(f(X)) }}\ninfer {engine}\n"
                ),
                _ => format!(
                    "data {{ n : int\n  C : int = {c}\n  X : matrix[n, 2] = columns(\"x1\", \"x2\")\n  y : int<lower=0>[n] = column(\"lab\"{decl_levels}) }}\n\
                     param {{ W : matrix[2, C] }}\nmodel {{ y ~ categorical_logit(X * W) }}\n\
                     infer nuts {{ chains = 1, warmup = 10, draws = 5 }}\n"
                ),
            }
        })
}

#[test]
fn generated_text_labels_end_cleanly() {
    let dir = out_dir("fuzz_labels");
    let strategy = label_set().prop_flat_map(|labels| {
        let distinct = {
            let mut d = labels.clone();
            d.sort();
            d.dedup();
            d.len()
        };
        let l = levels(&labels);
        (Just(labels), l, 2usize..20, 0usize..3).prop_flat_map(move |(labels, lv, rows, test)| {
            (
                Just(labels),
                Just(lv.clone()),
                Just(rows),
                Just(test),
                label_model(&lv, distinct),
            )
        })
    });
    runner(16, 43)
        .run(&strategy, |(labels, _levels, rows, test, model)| {
            let steps = Steps {
                context: format!(
                    "model:\n{model}\nlabels {labels:?}, rows {rows}, test kind {test}"
                ),
                dir: &dir,
            };
            let m = steps.file("model.tempest", &model);
            let d = steps.file("data.csv", &table(rows, 2, &labels, 1));
            // The same labels; one label the training data lacks; no labels.
            let test_labels = match test {
                0 => labels.clone(),
                1 => vec![labels[0].clone(), "never seen".to_string()],
                _ => vec!["zzz".to_string()],
            };
            let test = steps.file("test.csv", &table(5, 2, &test_labels, 1));
            let fit = steps.file("fit.json", "");
            steps.run(&args(&["check", &m, "--data", &d]))?;
            let run = args(&[
                "run", &m, "--data", &d, "--test", &test, "-q", "--save", &fit,
            ]);
            if steps.run(&run)?.code == 0 {
                steps.run(&args(&["predict", &m, "--fit", &fit, "--test", &test]))?;
                steps.run(&args(&["predict", &m, "--fit", &fit, "--test", &d]))?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
