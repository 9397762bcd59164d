//! Results that cannot be reported, and saved fits edited by hand, through
//! the real binary: a headline number that is not finite (a test point the
//! fit gives no density, an estimate that overflows, an evidence integral
//! that diverges, a likelihood with no maximum) is an error naming its
//! cause, never a success; test labels the model has no class for are a
//! located data error before any engine runs; plotting extreme traces
//! finishes; and every field of a saved fit that `tempest predict` reads is
//! checked, with an error naming the file and the field.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

/// [`tempest_within`] a minute (debug build, 2 shared cores).
fn run(args: &[&str]) -> Output {
    tempest_within(args, &[], Duration::from_secs(60)).0
}

/// Write `text` to `name` in `dir`; its path.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

/// Every fragment must appear in `text`.
fn assert_has(text: &str, fragments: &[&str]) {
    for f in fragments {
        assert!(text.contains(f), "`{f}` missing from:\n{text}");
    }
}

const IRIS: &str = "examples/data/iris.csv";

/// Iris with labels as plain integers (no declared upper bound), so the
/// number of classes comes from the model: `g ~ gp(...)[3]`.
fn iris_model(guide: &str, infer: &str) -> String {
    format!(
        r#"data {{
  n : int
  X : matrix[n, 4] = columns("sepal length (cm)", "sepal width (cm)", "petal length (cm)", "petal width (cm)")
  y : int[n] = column("target")
}}
hyper {{ ell : positive = 1.0  sf2 : positive = 4.0 }}
model {{
  g ~ gp(0, sf2 * rbf(ell))[3]
  y ~ categorical_logit(g(X))
}}
{guide}
{infer}
"#
    )
}

#[test]
fn test_labels_without_a_class_are_data_errors_before_any_engine_runs() {
    let dir = out_dir("hostile_results_labels");
    // Row 1 holds a label the three-class model has no class for.
    let test = file(
        &dir,
        "test.csv",
        "sepal length (cm),sepal width (cm),petal length (cm),petal width (cm),target\n\
         5.1,3.5,1.4,0.2,0\n4.9,3.0,1.4,0.2,5\n6.3,3.3,6.0,2.5,2\n",
    );
    let sites = file(
        &dir,
        "sites.tempest",
        &iris_model("", "infer mirror_descent { steps = 100 }"),
    );
    // A million svi steps would run for hours: the error comes first.
    let sparse = file(
        &dir,
        "sparse.tempest",
        &iris_model(
            "guide { g : inducing(m = 5) }",
            "infer svi { steps = 1000000 }",
        ),
    );
    let expect = [
        "test.csv, row 1 (line 3), column `target`",
        "label 5 is outside the classes 0..2 of `categorical_logit`",
        "trained on 3 classes",
    ];
    for (model, engine) in [
        (&sites, "mirror_descent"),
        (&sites, "gradient_descent"),
        (&sparse, "svi"),
    ] {
        let err = assert_clean_failure(
            &tempest_within(
                &[
                    "run", model, "--data", IRIS, "--test", &test, "--engine", engine, "-q",
                ],
                &[],
                Duration::from_secs(20),
            )
            .0,
        );
        assert_has(&err, &expect);
    }
    // The same from a saved fit.
    let fit = dir.join("svi.fit.json");
    assert_ok(&run(&[
        "run",
        &sparse,
        "--data",
        IRIS,
        "--set",
        "steps=3",
        "-q",
        "--save",
        fit.to_str().unwrap(),
    ]));
    let err = assert_clean_failure(&run(&[
        "predict",
        &sparse,
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        &test,
    ]));
    assert_has(&err, &expect);
}

/// mcycle's GP regression with an inducing-point guide for svi.
const MCYCLE_SVI: &str = r#"data { n : int  t : vector[n] = column("times")  accel : vector[n] }
hyper { ell : positive = 5.0  sf : positive = 30.0  sigma : positive = 20.0 }
model { f ~ gp(0, sf^2 * matern52(ell))  accel ~ normal(f(t), sigma) }
guide { f : inducing(m = 5) }
infer svi { steps = 5 }
"#;

/// A line through the data with two params, for the samplers.
const LINE: &str = r#"data { n : int  x : vector[n]  y : vector[n] }
param { a : real ~ normal(0, 1)  b : real ~ normal(0, 1) }
model { y ~ normal(a + b * x, 1) }
infer nuts { chains = 2  warmup = 100  draws = 100 }
"#;

#[test]
fn a_test_outcome_given_no_density_is_an_error_at_its_row() {
    let dir = out_dir("hostile_results_density");
    // 1e200 lies so far from any prediction that its density underflows.
    let far = file(&dir, "far.csv", "times,accel\n10,-2.7\n20,1e200\n");
    let svi = file(&dir, "svi.tempest", MCYCLE_SVI);
    let mut runs: Vec<Vec<&str>> = vec![
        vec!["examples/mcycle.tempest", "--set", "learn_hypers=false"],
        vec!["examples/mcycle.tempest", "--engine", "mirror_descent"],
        vec![
            "examples/mcycle.tempest",
            "--engine",
            "gradient_descent",
            "--set",
            "steps=20",
        ],
        vec![&svi],
    ];
    for r in &mut runs {
        r.extend(["--data", "examples/data/mcycle.csv", "--test", &far]);
    }
    let line = file(&dir, "line.tempest", LINE);
    let train = file(&dir, "line.csv", "x,y\n0,1\n1,2\n2,3.5\n");
    let line_far = file(&dir, "line_far.csv", "x,y\n1,2\n2,1e200\n");
    for engine in ["nuts", "sample_prior"] {
        runs.push(vec![
            &line, "--data", &train, "--test", &line_far, "--engine", engine,
        ]);
    }
    for r in runs {
        let mut args = vec!["run"];
        args.extend(&r);
        args.push("-q");
        let err = assert_clean_failure(&run(&args));
        let (file, column) = if r[0] == line {
            ("line_far.csv", "`y`")
        } else {
            ("far.csv", "`accel`")
        };
        assert_has(
            &err,
            &[
                &format!("{file}, row 1 (line 3), column {column}"),
                "the mean log predictive density is -inf",
                "the outcome 1.0000e200 here a predictive density of 0",
                "E-numerical",
            ],
        );
    }
}

#[test]
fn the_exact_engine_with_one_training_row() {
    let mcycle = [
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
    ];
    // Row 40 (accel −61.7): the likelihood's maximum over the variances is
    // at sf² + σ² = y², log p(y) = −½ − ln|y| − ½ ln 2π.
    let dir = out_dir("hostile_results_one_row");
    let json = dir.join("one.json");
    let mut args = vec!["run"];
    args.extend(mcycle);
    args.extend(["--rows", "40..40", "-q", "--json", json.to_str().unwrap()]);
    assert_ok(&run(&args));
    let j: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lml = j["log_marginal_likelihood"].as_f64().unwrap();
    let want = -0.5 - 61.7f64.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln();
    assert_rel(lml, want, 1e-8, "log marginal likelihood of one row");
    // Row 0 (accel 0) is the GP's mean: the variances shrink without end.
    let mut args = vec!["run"];
    args.extend(mcycle);
    args.extend(["--rows", "0..0", "-q"]);
    let err = assert_clean_failure(&run(&args));
    assert_has(
        &err,
        &[
            "mcycle.csv, row 0 (line 2), column `accel`",
            "the log marginal likelihood has no maximum",
            "the one training outcome (0) equals the GP's mean there",
        ],
    );
}

#[test]
fn estimates_that_overflow_are_errors_at_the_estimate() {
    let dir = out_dir("hostile_results_estimates");
    let at_a_draw = file(
        &dir,
        "draw.tempest",
        "param { a : real ~ normal(0, 1) }\n\
         estimate {\n  ok = E[a]\n  big = E[exp(1000 * a)]\n}\n\
         infer nuts { chains = 2  warmup = 100  draws = 100 }\n",
    );
    for engine in ["nuts", "sample_prior"] {
        let err = assert_clean_failure(&run(&["run", &at_a_draw, "--engine", engine, "-q"]));
        assert_has(
            &err,
            &[
                "the estimate `big` is not finite: its integrand is inf at draw",
                "where a = ",
                "draw.tempest:4:3",
            ],
        );
    }
    // Every draw finite, their average not.
    let average = file(
        &dir,
        "average.tempest",
        "param { a : real ~ normal(0, 1) }\n\
         estimate { big = E[1.7e308 * (1 + 0.01 * a)] }\ninfer sample_prior { }\n",
    );
    let err = assert_clean_failure(&run(&["run", &average, "-q"]));
    assert_has(
        &err,
        &["the estimate `big` is not finite: the average of its draws"],
    );
}

#[test]
fn an_evidence_integral_that_diverges_names_the_rung() {
    let dir = out_dir("hostile_results_evidence");
    // Under so wide a prior the scale reaches 1e-169 and the likelihood 0.
    let model = file(
        &dir,
        "ev.tempest",
        "data { n : int  y : vector[n] }\n\
         param { s : positive ~ lognormal(0, 200) }\n\
         model { y ~ normal(0, s) }\n\
         infer evidence { rungs = 4, sampler = nuts { chains = 2  warmup = 100  draws = 100 } }\n",
    );
    let data = file(&dir, "ev.json", r#"{"n": 3, "y": [1.0, 2.0, 3.0]}"#);
    let err = assert_clean_failure(&run(&["run", &model, "--data", &data, "-q"]));
    assert_has(
        &err,
        &[
            "the log evidence is not finite: on rung 1 (t = 0) the log-likelihood is -inf",
            "where s = ",
            "ev.tempest:3:9",
        ],
    );
}

#[test]
fn plot_trace_draws_traces_with_extreme_values() {
    let dir = out_dir("hostile_results_plot_trace");
    let md = file(
        &dir,
        "md.json",
        r#"{"engine": "mirror_descent", "elbo_trace": [-1e308, 1e308, 0.5, -1.7976931348623157e308, 3.0]}"#,
    );
    let svi = file(
        &dir,
        "svi.json",
        r#"{"engine": "svi", "elbo_trace": [
            {"step": -1e308, "seconds": -1e308, "elbo": 1e308},
            {"step": 1, "seconds": 1e308, "elbo": -1e308},
            {"step": 2, "seconds": 2.0, "elbo": -3.0},
            {"step": 3, "seconds": 3.0, "elbo": -2.0}]}"#,
    );
    let wide = file(
        &dir,
        "wide.json",
        r#"{"elbo_trace": [-1e300, 1e300, 1e-300]}"#,
    );
    for (k, runs) in [vec![&md], vec![&svi], vec![&md, &svi, &wide]]
        .into_iter()
        .enumerate()
    {
        for gap in [false, true] {
            let out = dir.join(format!("plot_{k}_{gap}.png"));
            let mut args = vec!["plot-trace", "--out", out.to_str().unwrap()];
            args.extend(runs.iter().map(|s| s.as_str()));
            if gap {
                args.push("--gap");
            }
            assert_ok(&tempest_within(&args, &[], Duration::from_secs(20)).0);
            assert!(std::fs::metadata(&out).unwrap().len() > 1000);
        }
    }
}

/// `tempest predict MODEL --fit FIT --test TEST`.
fn predict(model: &str, fit: &Path, test: &str) -> Output {
    run(&[
        "predict",
        model,
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        test,
    ])
}

#[test]
fn a_fit_saved_at_a_huge_temperature_reads_back() {
    let dir = out_dir("hostile_results_temperature");
    let fit = dir.join("hot.fit.json");
    let run_json = dir.join("run.json");
    let pred_json = dir.join("pred.json");
    assert_ok(&run(&[
        "run",
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--set",
        "learn_hypers=false",
        "--set",
        "temperature=1e20",
        "--test",
        "examples/data/mcycle.csv",
        "-q",
        "--json",
        run_json.to_str().unwrap(),
        "--save",
        fit.to_str().unwrap(),
    ]));
    assert_ok(&run(&[
        "predict",
        "examples/mcycle.tempest",
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        "examples/data/mcycle.csv",
        "--json",
        pred_json.to_str().unwrap(),
    ]));
    let read = |p: &PathBuf| -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    assert_eq!(
        read(&run_json)["predictions"],
        read(&pred_json)["predictions"]
    );
}

/// A saved fit with one edit: the value at a JSON pointer replaced, or
/// (`None`) the member removed.
fn edited(fit: &Path, dir: &Path, name: &str, pointer: &str, value: Option<Value>) -> PathBuf {
    let mut j: Value = serde_json::from_str(&std::fs::read_to_string(fit).unwrap()).unwrap();
    match value {
        Some(v) => {
            *j.pointer_mut(pointer)
                .unwrap_or_else(|| panic!("{pointer}")) = v
        }
        None => {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            j.pointer_mut(parent)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove(key)
                .unwrap();
        }
    }
    let p = dir.join(format!("{name}.json"));
    std::fs::write(&p, j.to_string()).unwrap();
    p
}

/// A saved fit's edit and its error: the model, the fit, the test data,
/// the JSON pointer, the new value (`None`: removed), the field as the
/// error names it, and what the error says.
type Case<'a> = (
    &'a str,
    &'a Path,
    &'a str,
    &'a str,
    Option<Value>,
    &'a str,
    &'a str,
);

#[test]
fn hand_edited_saved_fits_are_refused_at_the_field() {
    let dir = out_dir("hostile_results_saved");
    let mcycle = "examples/data/mcycle.csv";
    let save = |model: &str, data: &str, name: &str, extra: &[&str]| -> PathBuf {
        let fit = dir.join(format!("{name}.fit.json"));
        let mut args = vec![
            "run",
            model,
            "--data",
            data,
            "-q",
            "--save",
            fit.to_str().unwrap(),
        ];
        args.extend(extra);
        assert_ok(&run(&args));
        fit
    };
    let exact_model = "examples/mcycle.tempest";
    let fixed = save(
        exact_model,
        mcycle,
        "fixed",
        &["--set", "learn_hypers=false"],
    );
    let learned = save(exact_model, mcycle, "learned", &[]);
    let md = save(exact_model, mcycle, "md", &["--engine", "mirror_descent"]);
    let labels_model = file(
        &dir,
        "labels.tempest",
        "data { n : int  x : vector[n]  y : int<lower=0, upper=1>[n] }\n\
         param { a : real ~ normal(0, 2)  b : real ~ normal(0, 2) }\n\
         model { y ~ bernoulli_logit(a + b * x) }\n\
         infer nuts { chains = 2  warmup = 100  draws = 100 }\n",
    );
    let labels_data = file(
        &dir,
        "labels.csv",
        "x,y\n-2,no\n-1,no\n-0.5,yes\n0.3,no\n1,yes\n2,yes\n",
    );
    let nuts = save(&labels_model, &labels_data, "nuts", &[]);
    let svi_model = file(&dir, "svi.tempest", MCYCLE_SVI);
    let svi = save(&svi_model, mcycle, "svi", &[]);
    // Each fit reads back as written.
    for (model, fit, test) in [
        (exact_model, &fixed, mcycle),
        (exact_model, &learned, mcycle),
        (exact_model, &md, mcycle),
        (&labels_model, &nuts, &labels_data),
        (&svi_model, &svi, mcycle),
    ] {
        assert_ok(&predict(model, fit, test));
    }
    let cases: Vec<Case> = vec![
        (
            exact_model,
            &fixed,
            mcycle,
            "/temperature",
            Some(json!("hot")),
            "temperature",
            "a finite number ≥ 0",
        ),
        (
            exact_model,
            &fixed,
            mcycle,
            "/temperature",
            Some(json!(-1.0)),
            "temperature",
            "found -1",
        ),
        // σ enters squared: −20 reproduced the saved likelihood and was taken.
        (
            exact_model,
            &fixed,
            mcycle,
            "/hypers/sigma",
            Some(json!(-20.0)),
            "hypers.sigma",
            "<lower=0>",
        ),
        (
            exact_model,
            &fixed,
            mcycle,
            "/hypers/sf",
            Some(Value::Null),
            "hypers.sf",
            "found null",
        ),
        (
            exact_model,
            &fixed,
            mcycle,
            "/settings",
            None,
            "settings",
            "the field is missing",
        ),
        (
            exact_model,
            &fixed,
            mcycle,
            "/labels",
            Some(json!([])),
            "labels",
            "expected an object",
        ),
        (
            exact_model,
            &learned,
            mcycle,
            "/exact/theta",
            Some(json!([1.0, 2.0])),
            "exact.theta",
            "an array of 3 finite numbers",
        ),
        (
            exact_model,
            &learned,
            mcycle,
            "/exact/gradient",
            None,
            "exact.gradient",
            "the field is missing",
        ),
        (
            exact_model,
            &learned,
            mcycle,
            "/exact/iterations",
            Some(json!(-5)),
            "exact.iterations",
            "a whole number ≥ 0",
        ),
        (
            exact_model,
            &learned,
            mcycle,
            "/exact/theta/0",
            Some(json!(1e300)),
            "hypers.ell",
            "but `exact.theta` gives it inf",
        ),
        // A learned hyper is θ's: an edit beside it was ignored.
        (
            exact_model,
            &learned,
            mcycle,
            "/hypers/ell",
            Some(json!(1.0)),
            "hypers.ell",
            "but `exact.theta` gives it",
        ),
        (
            exact_model,
            &md,
            mcycle,
            "/vi/q/0/factor/3/2",
            Some(Value::Null),
            "vi.q[0].factor[3][2]",
            "a finite number",
        ),
        (
            exact_model,
            &md,
            mcycle,
            "/vi/steps",
            Some(json!("many")),
            "vi.steps",
            "a whole number",
        ),
        // The seed of the predictive draws: 0 was taken in its place.
        (
            &labels_model,
            &nuts,
            &labels_data,
            "/draws/seed",
            Some(json!("x")),
            "draws.seed",
            "a whole number",
        ),
        (
            &labels_model,
            &nuts,
            &labels_data,
            "/draws/positions/0",
            Some(json!([1.0])),
            "draws.positions[0]",
            "an array of 2 finite numbers",
        ),
        (
            &labels_model,
            &nuts,
            &labels_data,
            "/draws/chains",
            Some(json!(0)),
            "draws.chains",
            "a whole number ≥ 1",
        ),
        (
            &labels_model,
            &nuts,
            &labels_data,
            "/labels/y",
            Some(json!(["no", "no"])),
            "labels.y",
            "distinct labels",
        ),
        (
            &labels_model,
            &nuts,
            &labels_data,
            "/labels/y",
            Some(json!(["no"])),
            "labels.y",
            "a label for each class",
        ),
        (
            &svi_model,
            &svi,
            mcycle,
            "/svi/n",
            Some(json!(0)),
            "svi.n",
            "a whole number ≥ 1",
        ),
        (
            &svi_model,
            &svi,
            mcycle,
            "/svi/z/0",
            Some(json!([1.0, 2.0])),
            "svi.z[0]",
            "an array of 1 finite numbers",
        ),
        (
            &svi_model,
            &svi,
            mcycle,
            "/svi/q/0/mean",
            Some(json!([0.0])),
            "svi.q[0].mean",
            "5 finite numbers",
        ),
        (
            &svi_model,
            &svi,
            mcycle,
            "/theta/0",
            Some(json!(1e300)),
            "hypers.ell",
            "but `theta` gives it inf",
        ),
    ];
    for (k, (model, fit, test, pointer, value, field, says)) in cases.into_iter().enumerate() {
        let bad = edited(fit, &dir, &format!("edit_{k}"), pointer, value);
        let out = predict(model, &bad, test);
        assert!(!out.status.success(), "{pointer} edited was accepted");
        let err = assert_clean_failure(&out);
        assert_has(&err, &[&format!("edit_{k}.json, key `{field}`: "), says]);
    }
}
