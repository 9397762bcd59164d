//! Hostile sizes through the real binary: sizes written in a model (network
//! widths, vector lengths, inducing points, grids, copies of a latent GP)
//! are refused before anything that large is allocated, with an error at
//! the size; names of any length are reported; data files are bound in a
//! compact form whose memory is checked before the file is read.

use crate::common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// The longest a refusal may take (debug build, 2 shared cores): a size is
/// refused before the work it would cause, not after.
const FAST: Duration = Duration::from_secs(5);

/// The longest any run here may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(120);

const MCYCLE: &str = "examples/data/mcycle.csv";
const IRIS: &str = "examples/data/iris.csv";

/// `tempest check MODEL --data DATA` and `tempest run MODEL --data DATA -q`
/// with `env`: each must fail cleanly within [`FAST`], saying `says`, with
/// a caret under `at` on line `line` of the model. The errors, check's
/// first.
fn refused_fast(
    model: &str,
    data: &str,
    env: &[(&str, &str)],
    says: &str,
    (line, at): (usize, &str),
) -> Vec<String> {
    let text = std::fs::read_to_string(model).expect("model");
    let source_line = text.lines().nth(line - 1).expect("line");
    let column = source_line.find(at).expect("`at` on the line") + 1;
    let place = format!("{model}:{line}:{column}");
    let mut errors = Vec::new();
    for cmd in [
        vec!["check", model, "--data", data],
        vec!["run", model, "--data", data, "-q"],
    ] {
        let (o, took) = tempest_within(&cmd, env, LIMIT);
        let err = assert_clean_failure(&o);
        assert!(took < FAST, "`{}` took {took:?}: {err}", cmd.join(" "));
        assert!(err.contains(says), "{err}");
        assert!(err.contains(&place), "not at {place}: {err}");
        // The caret line underlines exactly the size.
        let caret = err
            .lines()
            .skip_while(|l| !l.contains(source_line.trim()))
            .nth(1)
            .unwrap_or_default();
        let under: String = caret.chars().filter(|c| *c == '─' || *c == '┬').collect();
        assert_eq!(under.chars().count(), at.chars().count(), "{err}");
        errors.push(err);
    }
    errors
}

#[test]
fn names_of_65536_characters_are_reported_and_written() {
    let dir = out_dir("hostile_memory_names");
    let long = "a".repeat(65_536);
    let column = "c".repeat(65_536);
    // mcycle with its time column renamed.
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(MCYCLE))
        .expect("mcycle");
    let data = write_file(&dir, "long.csv", &text.replacen("times", &column, 1));
    let exact = write_file(
        &dir,
        "exact.tempest",
        &format!(
            "data {{ n : int\n {long}t : vector[n] = column(\"{column}\")\n accel : vector[n] }}\n\
             hyper {{ {long} : positive = 5.0\n sigma : positive = 20.0 }}\n\
             model {{ f ~ gp(0, 900 * matern52({long}))\n accel ~ normal(f({long}t), sigma) }}\n\
             infer exact {{ learn_hypers = true }}\n"
        ),
    );
    let nuts = write_file(
        &dir,
        "nuts.tempest",
        &format!(
            "data {{ n : int\n t : vector[n] = column(\"{column}\")\n accel : vector[n] }}\n\
             param {{ {long} : real ~ normal(0, 1)\n s : positive ~ lognormal(3, 1) }}\n\
             model {{ accel ~ normal({long} * t, s) }}\n\
             estimate {{ {long}e = E[{long} * 2] }}\n\
             infer nuts {{ chains = 2, warmup = 100, draws = 100 }}\n"
        ),
    );
    for (model, tag) in [(&exact, "exact"), (&nuts, "nuts")] {
        let json = dir.join(format!("{tag}.json"));
        let prefix = dir.join(format!("{tag}_draws"));
        let mut args = vec![
            "run",
            model,
            "--data",
            &data,
            "-q",
            "--json",
            json.to_str().unwrap(),
        ];
        if tag == "nuts" {
            args.extend(["--csv", prefix.to_str().unwrap()]);
        }
        let (o, _) = tempest_within(&args, &[], LIMIT);
        let out = assert_ok(&o);
        // The summary lists the long name, aligned like any other.
        assert!(out.contains(&long), "{tag}: the name is not in the summary");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written"))
                .expect("valid JSON");
        assert!(
            j.to_string().contains(&long),
            "{tag}: the name is not in the JSON"
        );
    }
    // The Stan CSV files' columns carry the long name into `summary`.
    let files: Vec<String> = (1..=2)
        .map(|c| format!("{}_{c}.csv", dir.join("nuts_draws").display()))
        .collect();
    let json = dir.join("summary.json");
    let (o, _) = tempest_within(
        &[
            "summary",
            &files[0],
            &files[1],
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
        LIMIT,
    );
    assert!(assert_ok(&o).contains(&long));
    assert!(json.exists());
}

#[test]
fn a_zero_padded_column_range_of_any_width_expands() {
    let dir = out_dir("hostile_memory_range");
    let zeros = "0".repeat(65_536);
    let (a, b) = (format!("x{zeros}1"), format!("x{zeros}2"));
    let data = write_file(
        &dir,
        "wide.csv",
        &format!("{a},{b},y\n1,2,0.5\n2,1,0.1\n3,3,0.2\n"),
    );
    let model = write_file(
        &dir,
        "range.tempest",
        &format!(
            "data {{ n : int\n X : matrix[n, 2] = columns(\"{a}\"..\"{b}\")\n y : vector[n] }}\n\
             model {{ f ~ gp(0, rbf(1.0))\n y ~ normal(f(X), 1.0) }}\ninfer exact {{}}\n"
        ),
    );
    let (o, _) = tempest_within(&["check", &model, "--data", &data], &[], LIMIT);
    assert_ok(&o);
}

#[test]
fn network_widths_beyond_the_limit_are_refused_at_the_width() {
    let dir = out_dir("hostile_memory_widths");
    for (k, widths, at) in [
        (0, "[4294967296]", "4294967296"),
        (1, "[2, 4294967296]", "4294967296"),
        (2, "[9223372036854775807]", "9223372036854775807"),
        (3, "[1000000000, 2]", "1000000000"),
        (4, "[64, 1000000]", "1000000"),
    ] {
        let model = write_file(
            &dir,
            &format!("net{k}.tempest"),
            &format!(
                "data {{ n : int\n t : vector[n] = column(\"times\")\n accel : vector[n] }}\n\
                 hyper {{ sigma : positive = 20.0 }}\n\
                 model {{ f ~ gp(0, deep(rbf(1.0), mlp({widths})))\n accel ~ normal(f(t), sigma) }}\n\
                 guide {{ f : inducing(m = 10) }}\ninfer svi {{}}\n"
            ),
        );
        refused_fast(
            &model,
            MCYCLE,
            &[],
            "a feature network has at most 50000000 weights",
            (5, at),
        );
        // Without data, `check` refuses it too.
        let (o, took) = tempest_within(&["check", &model], &[], LIMIT);
        assert!(assert_clean_failure(&o).contains("this width"));
        assert!(took < FAST, "{took:?}");
    }
}

#[test]
fn hyper_and_param_vectors_are_refused_before_allocation() {
    let dir = out_dir("hostile_memory_vectors");
    let data = "data { n : int\n t : vector[n] = column(\"times\")\n accel : vector[n] }\n";
    for n in ["10000000", "1000000000"] {
        let hyper = write_file(
            &dir,
            &format!("hyper{n}.tempest"),
            &format!(
                "{data}hyper {{ w : vector[{n}] = 0.0\n sigma : positive = 20.0 }}\n\
                 model {{ f ~ gp(0, rbf(1.0))\n accel ~ normal(f(t), sigma) }}\n\
                 infer exact {{}}\n"
            ),
        );
        let param = write_file(
            &dir,
            &format!("param{n}.tempest"),
            &format!(
                "{data}param {{ w : vector[{n}] ~ normal(0, 1)\n s : positive ~ lognormal(3, 1) }}\n\
                 model {{ accel ~ normal(w[0] * t, s) }}\ninfer nuts {{}}\n"
            ),
        );
        // Under a budget the values alone (and the copies binding makes)
        // do not fit: refused at the size before any is allocated.
        for (model, kind) in [(&hyper, "hyper"), (&param, "param")] {
            let errs = refused_fast(
                model,
                MCYCLE,
                &[("TEMPEST_MEMORY", "100MB")],
                &format!("the {kind} `w` would need"),
                (4, n),
            );
            assert!(errs[0].contains("the budget set with TEMPEST_MEMORY is 100.0 MB"));
        }
    }
    // With the machine's memory, ten million params are refused by the
    // draws they would fill, pointing at the param.
    let param = dir.join("param10000000.tempest");
    let (o, _) = tempest_within(
        &["check", param.to_str().unwrap(), "--data", MCYCLE],
        &[],
        LIMIT,
    );
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("keeping the draws would need 960.0 GB")
            && err.contains("10000000 values of `w`"),
        "{err}"
    );
}

#[test]
fn a_budget_that_is_not_a_byte_count_is_refused() {
    let (o, _) = tempest_within(
        &["check", "examples/mcycle.tempest", "--data", MCYCLE],
        &[("TEMPEST_MEMORY", "plenty")],
        LIMIT,
    );
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("TEMPEST_MEMORY=plenty: expected a number of bytes"),
        "{err}"
    );
}

#[test]
fn inducing_grids_and_class_counts_are_refused_at_their_size() {
    let dir = out_dir("hostile_memory_guides");
    let mcycle = "data { n : int\n t : vector[n] = column(\"times\")\n accel : vector[n] }\n\
                  hyper { sigma : positive = 20.0 }\n\
                  model { f ~ gp(0, rbf(1.0))\n accel ~ normal(f(t), sigma) }\n";
    for m in ["4294967296", "9223372036854775807"] {
        let model = write_file(
            &dir,
            &format!("grid{m}.tempest"),
            &format!("{mcycle}guide {{ f : grid(m = {m}) }}\ninfer svi {{}}\n"),
        );
        refused_fast(
            &model,
            MCYCLE,
            &[],
            "inducing points",
            (7, &format!("f : grid(m = {m})")),
        );
        // Inducing points beyond the data are the data's points (a note,
        // not an allocation of m).
        let model = write_file(
            &dir,
            &format!("inducing{m}.tempest"),
            &format!("{mcycle}guide {{ f : inducing(m = {m}) }}\ninfer svi {{ steps = 2 }}\n"),
        );
        let (o, took) = tempest_within(&["run", &model, "--data", MCYCLE, "-q"], &[], LIMIT);
        assert!(assert_ok(&o).contains("Z is the training inputs"));
        assert!(took < FAST, "{took:?}");
    }
    for k in ["1000000000", "4294967296", "9223372036854775807"] {
        for engine in ["svi", "mirror_descent", "nuts"] {
            let model = write_file(
                &dir,
                &format!("classes{k}{engine}.tempest"),
                &format!(
                    "data {{ n : int\n X : matrix[n, 4] = columns(except = [\"target\"])\n \
                     y : int<lower=0>[n] = column(\"target\") }}\n\
                     model {{ f ~ gp(0, rbf(1.0))[{k}]\n y ~ categorical_logit(f(X)) }}\n\
                     infer {engine} {{}}\n"
                ),
            );
            refused_fast(
                &model,
                IRIS,
                &[],
                "the latent values of `f` would need",
                (4, k),
            );
        }
    }
}

/// A CSV file of `rows` rows: `t`, `accel` and 40 columns the model does
/// not use; row `bad` (0-based) has a field too many.
fn wide_csv(dir: &Path, rows: usize, bad: usize) -> String {
    let mut text = String::from("t,accel");
    for j in 0..40 {
        text.push_str(&format!(",unused{j}"));
    }
    text.push('\n');
    for i in 0..rows {
        text.push_str(&format!("{}.5,{}", i % 97, i % 13));
        for j in 0..40 {
            text.push_str(&format!(",{}", (i + j) % 10));
        }
        if i == bad {
            text.push_str(",9");
        }
        text.push('\n');
    }
    write_file(dir, &format!("wide{rows}.csv"), &text)
}

#[test]
fn a_data_file_too_large_for_memory_is_refused_before_it_is_read_whole() {
    let dir = out_dir("hostile_memory_data");
    let data = wide_csv(&dir, 20_000, 15_000);
    let model = write_file(
        &dir,
        "m.tempest",
        "data { n : int\n t : vector[n]\n accel : vector[n] }\n\
         param { a : real ~ normal(0, 1)\n s : positive ~ lognormal(0, 1) }\n\
         model { accel ~ normal(a * t, s) }\ninfer nuts {}\n",
    );
    // 20,000 rows × 2 used columns × 4 copies × 8 bytes = 1.3 MB: refused
    // under a 1 MB budget after the first rows, before row 15,000 (whose
    // extra field would be the error of a whole read).
    for cmd in [
        vec!["check", &model, "--data", &data],
        vec!["run", &model, "--data", &data, "-q"],
    ] {
        let (o, took) = tempest_within(&cmd, &[("TEMPEST_MEMORY", "1MB")], LIMIT);
        let err = assert_clean_failure(&o);
        assert!(
            err.contains(&format!("the data of `{data}` would need"))
                && err.contains("rows (estimated from the file's size) × 2 columns used"),
            "{err}"
        );
        assert!(took < FAST, "{took:?}");
    }
    // The 40 unused columns are not read: the two used ones fit a budget
    // that all 42 would not (20,000 × 42 × 4 × 8 bytes = 27 MB).
    let (o, _) = tempest_within(
        &["check", &model, "--data", &data],
        &[("TEMPEST_MEMORY", "4MB")],
        LIMIT,
    );
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("row 15000") && err.contains("this row has 43 fields"),
        "{err}"
    );
    // JSON is checked from its size before it is parsed.
    let values: Vec<String> = (0..20_000).map(|i| format!("{}.25", i % 97)).collect();
    let json = write_file(
        &dir,
        "big.json",
        &format!("{{\"t\": [{0}], \"accel\": [{0}]}}", values.join(",")),
    );
    let (o, _) = tempest_within(
        &["check", &model, "--data", &json],
        &[("TEMPEST_MEMORY", "1MB")],
        LIMIT,
    );
    let err = assert_clean_failure(&o);
    assert!(err.contains(&format!("reading `{json}`")), "{err}");
}

#[test]
fn a_saved_fit_is_checked_against_the_memory_before_it_is_parsed() {
    let dir = out_dir("hostile_memory_fit");
    let fit = dir.join("fit.json");
    let fit = fit.to_str().unwrap();
    let (o, _) = tempest_within(
        &[
            "run",
            "examples/mcycle.tempest",
            "--data",
            MCYCLE,
            "-q",
            "--save",
            fit,
        ],
        &[],
        LIMIT,
    );
    assert_ok(&o);
    let size = std::fs::metadata(fit).expect("fit").len();
    // A budget of twice its size: the parsed values would not fit.
    let budget = (2 * size).to_string();
    let (o, _) = tempest_within(
        &[
            "predict",
            "examples/mcycle.tempest",
            "--fit",
            fit,
            "--test",
            MCYCLE,
        ],
        &[("TEMPEST_MEMORY", &budget)],
        LIMIT,
    );
    let err = assert_clean_failure(&o);
    assert!(err.contains(&format!("reading `{fit}`")), "{err}");
}

/// Rows of a matrix param gathered by group ([150, 100000], far larger
/// than the param) are refused under a budget at the expression that makes
/// them, by `check` (the shapes' evaluation when binding) and by `run`,
/// before anything of that size is allocated; the samplers' compiled
/// density checks its own values and adjoints the same way.
#[test]
fn a_compiled_density_too_large_is_refused_at_its_expression() {
    let dir = out_dir("hostile_memory_program");
    let model = write_file(
        &dir,
        "rows.tempest",
        "data { n : int  g : int<lower=0, upper=2>[n] = column(\"target\")\n\
         y : vector[n] = column(\"sepal length (cm)\") }\n\
         param { B : matrix[3, 100000]  s : positive ~ lognormal(0, 1) }\n\
         model {\n  let R = B[g]\n  y ~ normal(col(R, 0), s)\n}\n\
         infer nuts { chains = 1  warmup = 10  draws = 10 }\n",
    );
    refused_fast(
        &model,
        IRIS,
        &[("TEMPEST_MEMORY", "100MB")],
        "these rows of a matrix would need 120.0 MB",
        (5, "B[g]"),
    );
}

/// The GP regression's matrices are checked against the budget before they
/// are made, and the refusal names who needed them: the exact engine, or
/// the samplers integrating the GP out.
#[test]
fn a_gp_regression_over_the_budget_names_its_engine() {
    for (model, says) in [
        (
            "examples/mcycle.tempest",
            "exact GP regression (the kernel matrix",
        ),
        (
            "examples/mcycle_nuts.tempest",
            "a GP integrated out when sampling (the kernel matrix",
        ),
    ] {
        let (o, _) = tempest_within(
            &["run", model, "--data", MCYCLE, "-q"],
            &[("TEMPEST_MEMORY", "200kB")],
            LIMIT,
        );
        let err = assert_clean_failure(&o);
        assert!(err.contains(says) && err.contains("424.5 kB"), "{err}");
    }
}
