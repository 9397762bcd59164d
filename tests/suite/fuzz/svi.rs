//! Generated sparse variational models: inducing points and grids of any
//! size, minibatches, one or many classes, deep kernels with hostile
//! widths, and hostile `svi` settings; each fit with test data, saved and
//! predicted from again.

use super::pieces::*;
use super::{out_dir, runner};
use proptest::prelude::*;

/// A network declaration: `mlp([...])` with random (sometimes hostile)
/// widths and activation.
fn network() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(size(&["2", "3", "4"]), 1..4),
        prop_oneof![
            6 => prop::sample::select(vec!["", ", activation = \"tanh\"", ", activation = \"relu\""]),
            1 => Just(", activation = \"sigmoid\""),
        ],
    )
        .prop_map(|(w, a)| format!("mlp([{}]{a})", w.join(", ")))
}

/// The kernel of the latent GP: plain, or deep (sometimes with groups).
fn kernel() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec!["sf2 * rbf(ell)", "sf2 * matern32(ell)", "rbf(ell) + sf2 * linear()"]).prop_map(String::from),
        1 => Just("deep(sf2 * rbf(ell), net)".to_string()),
        1 => size(&["2", "1"]).prop_map(|g| format!("deep(sf2 * rbf(ell), net, groups = {g})")),
    ]
}

/// The likelihood, its outcome's declaration and the number of GP copies.
fn likelihood() -> impl Strategy<Value = (String, String, String)> {
    prop_oneof![
        Just(("y ~ normal(f(X), sigma)", "y : vector[n]", "1")),
        Just(("y ~ student_t(4, f(X), sigma)", "y : vector[n]", "1")),
        Just((
            "b ~ bernoulli_logit(f(X))",
            "b : int<lower=0, upper=1>[n]",
            "1"
        )),
        Just(("k ~ poisson_log(f(X))", "k : int<lower=0>[n]", "1")),
        Just((
            "cls ~ categorical_logit(f(X))",
            "cls : int<lower=0>[n]",
            "3"
        )),
        Just((
            "cls ~ categorical_logit(f(X))",
            "cls : int<lower=0>[n]",
            "2"
        )),
        Just((
            "cls ~ categorical_logit(f(X) * A)",
            "cls : int<lower=0>[n]",
            "2"
        )),
    ]
    .prop_map(|(l, d, c)| (l.to_string(), d.to_string(), c.to_string()))
}

/// `svi` settings, each present or not, some hostile.
fn svi_settings() -> impl Strategy<Value = String> {
    settings(vec![
        setting(
            "steps",
            prop_oneof![3 => one_of(&["3", "10"]), 1 => one_of(&["0", "-1", "1000000000000"])],
        ),
        setting("batch", size(&["4", "16", "1"])),
        setting(
            "q_step",
            prop_oneof![5 => one_of(&["natural", "adam"]), 1 => Just("newton".to_string())],
        ),
        setting("rho", real(&["0.1", "1", "0.5"])),
        setting(
            "polish",
            prop_oneof![3 => one_of(&["0", "1", "2"]), 1 => one_of(&["1000", "-1"])],
        ),
        setting("lr", real(&["0.01", "0.1"])),
        setting("anneal", one_of(&["cosine", "none"])),
        setting("learn_hypers", one_of(&["true", "false"])),
        setting("learn_inducing", one_of(&["true", "false"])),
        setting("weight_prior", real(&["0.3", "1"])),
        setting(
            "quadrature",
            prop_oneof![3 => one_of(&["3", "5"]), 1 => one_of(&INTS)],
        ),
        setting(
            "mc_samples",
            prop_oneof![3 => one_of(&["2", "8"]), 1 => one_of(&INTS)],
        ),
        setting("jitter", real(&["1e-6", "0"])),
        setting("bins", size(&["3", "10"])),
    ])
}

/// A whole sparse model over the columns of [`table`].
fn svi_model() -> impl Strategy<Value = String> {
    (
        likelihood(),
        kernel(),
        network(),
        prop_oneof![4 => size(&["3", "5", "1", "30"]).prop_map(|m| format!("inducing(m = {m})")),
                    1 => size(&["4", "8"]).prop_map(|m| format!("grid(m = {m})"))],
        svi_settings(),
        prop::sample::select(vec!["columns(\"x1\", \"x2\")", "columns(\"x1\")", "columns(\"t\", \"x1\", \"x2\")"]),
        real(&["1.0", "0.5", "2.0"]),
    )
        .prop_map(|((lik, outcome, copies), kernel, net, guide, settings, cols, ell)| {
            let d = cols.matches(',').count() + 1;
            let copies = if copies == "1" { String::new() } else { format!("[{copies}]") };
            let mixing = if lik.contains("* A") { "\n  A : matrix[2, 3] = 0.5" } else { "" };
            let net = if kernel.contains("net") { format!("let net = {net}\n  ") } else { String::new() };
            format!(
                "data {{ n : int\n  X : matrix[n, {d}] = {cols}\n  {outcome} }}\n\
                 hyper {{ ell : positive = {ell}\n  sf2 : positive = 1.0\n  sigma : positive = 0.5{mixing} }}\n\
                 model {{\n  {net}f ~ gp(0, {kernel}){copies}\n  {lik}\n}}\n\
                 guide {{ f : {guide} }}\ninfer svi {{ {settings} }}\n"
            )
        })
}

/// Extra command-line pieces of a run: a split, a seed, a setting.
fn run_extras() -> impl Strategy<Value = Vec<String>> {
    let pieces = prop_oneof![
        (real(&["0.7", "0.5"]), any::<bool>()).prop_map(|(f, shuffle)| {
            let mut v = vec!["--split".to_string(), f];
            if shuffle {
                v.extend(["--shuffle".to_string(), "7".to_string()]);
            }
            v
        }),
        size(&["1", "2"]).prop_map(|s| vec!["--seed".to_string(), s]),
        one_of(&[
            "batch=1",
            "steps=2",
            "rho=1",
            "lr=1e300",
            "mc_samples=1",
            "m=3",
            "polish=0"
        ])
        .prop_map(|s| vec!["--set".to_string(), s]),
        Just(vec![]),
    ];
    prop::collection::vec(pieces, 0..3).prop_map(|v| v.concat())
}

#[test]
fn generated_sparse_models_end_cleanly() {
    let dir = out_dir("fuzz_svi");
    let strategy = (svi_model(), 2usize..30, run_extras(), any::<bool>());
    runner(16, 37)
        .run(&strategy, |(model, rows, extras, test_has_outcome)| {
            let steps = Steps {
                context: format!("model:\n{model}\nrows {rows}, extras {extras:?}"),
                dir: &dir,
            };
            let m = steps.file("model.tempest", &model);
            let d = steps.file("data.csv", &table(rows, 3, &[], 1));
            let mut test_text = table(5, 3, &[], 1);
            if !test_has_outcome {
                // Inputs only: predictions without metrics.
                test_text = test_text
                    .lines()
                    .map(|l| l.split(',').take(3).collect::<Vec<_>>().join(","))
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            let test = steps.file("test.csv", &test_text);
            let fit = dir.join("fit.json").to_string_lossy().into_owned();
            let _ = std::fs::remove_file(&fit);
            steps.run(&args(&["check", &m, "--data", &d]))?;
            let mut run = args(&["run", &m, "--data", &d, "-q", "--save", &fit]);
            if !extras.contains(&"--split".to_string()) {
                run.extend(args(&["--test", &test]));
            }
            run.extend(extras);
            if steps.run(&run)?.code == 0 {
                steps.run(&args(&["predict", &m, "--fit", &fit, "--test", &test]))?;
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
