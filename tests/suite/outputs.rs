//! What a run writes for a person and for another tool: the rows of a
//! split (`--split-out`, the JSON's `split`), each prediction's data row
//! and inputs, P(y = 1) with its interval for binary outcomes, the plots'
//! choices and marks (`--plot-params`, divergences, pairs, the probability
//! map of a two-input classifier, the end of the training data), and the
//! estimate of a long dense variational run before it starts.

use crate::common;
use common::*;
use std::path::Path;

/// The rows of a `--split-out` file: (row number, part) in file order.
fn split_rows(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).expect("split rows written");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("row,part"));
    lines
        .map(|l| {
            let (r, p) = l.split_once(',').expect("row,part");
            (r.parse().expect("a row number"), p.to_string())
        })
        .collect()
}

/// A column of a CSV file with a header, by name.
fn csv_column(path: &str, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let k = lines
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == name)
        .unwrap();
    lines
        .map(|l| l.split(',').nth(k).unwrap().parse().unwrap())
        .collect()
}

fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn the_split_rows_are_written_and_are_the_rows_the_run_used() {
    let dir = out_dir("outputs_split");
    let (rows, json) = (dir.join("rows.csv"), dir.join("run.json"));
    let (out, j) = run_json(
        Path::new("examples/mcycle.tempest"),
        Path::new("examples/data/mcycle.csv"),
        &[
            "--rows",
            "3..132",
            "--split",
            "0.8",
            "--shuffle",
            "3",
            "--split-out",
            rows.to_str().unwrap(),
            "-q",
        ],
        &json,
    );
    assert!(out.contains(&format!("rows of the split written to {}", rows.display())));
    let written = split_rows(&rows);
    let train: Vec<usize> = written
        .iter()
        .filter(|(_, p)| p == "train")
        .map(|r| r.0)
        .collect();
    let test: Vec<usize> = written
        .iter()
        .filter(|(_, p)| p == "test")
        .map(|r| r.0)
        .collect();
    assert_eq!(train.len() + test.len(), written.len());
    // The same rows the library's split gives, in the same order: rows
    // keep the file's numbers through --rows and the shuffle.
    let data = tempest::Data::read(Path::new("examples/data/mcycle.csv"))
        .unwrap()
        .select_rows(3, 132)
        .unwrap();
    let (lib_train, held) = tempest::command::split_data(data, Some(0.8), Some(3)).unwrap();
    let (lib_test, split) = held.unwrap();
    assert_eq!(train, lib_train.row_numbers().unwrap());
    assert_eq!(test, lib_test.row_numbers().unwrap());
    assert_eq!(split.test_row_numbers, test);
    // Every selected row once, none of those --rows left out.
    let mut all: Vec<usize> = train.iter().chain(&test).copied().collect();
    all.sort();
    assert_eq!(all, (3..=132).collect::<Vec<_>>());
    // The JSON: the split's test rows, and the predictions' rows.
    let s = &j["split"];
    assert_eq!(s["train_rows"].as_u64(), Some(train.len() as u64));
    let json_test: Vec<usize> = numbers(&s["test_row_numbers"])
        .iter()
        .map(|&v| v as usize)
        .collect();
    assert_eq!(json_test, test);
    let pred_rows: Vec<usize> = numbers(&j["predictions"]["rows"])
        .iter()
        .map(|&v| v as usize)
        .collect();
    assert_eq!(pred_rows, test);
    // The numbers are the data file's rows (0 after the header): each
    // prediction's outcome is the file's at that row.
    let accel = csv_column("examples/data/mcycle.csv", "accel");
    let y = numbers(&j["predictions"]["y"]);
    for (i, &r) in test.iter().enumerate() {
        assert_eq!(y[i], accel[r], "test point {i}, row {r}");
    }
    // The printed table leads with the row and the input.
    let times = csv_column("examples/data/mcycle.csv", "times");
    let header = out.lines().find(|l| l.contains("sd(y)")).expect("table");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["row", "t", "mean", "sd(f)", "sd(y)"]
    );
    let first = out
        .lines()
        .skip_while(|l| !l.contains("sd(y)"))
        .nth(1)
        .unwrap();
    let cells: Vec<&str> = first.split_whitespace().collect();
    assert_eq!(cells[0], test[0].to_string());
    assert_eq!(cells[1].parse::<f64>().unwrap(), times[test[0]]);
}

#[test]
fn split_out_without_a_split_is_refused_before_the_run() {
    let dir = out_dir("outputs_split_none");
    let rows = dir.join("rows.csv");
    let o = tempest(&[
        "run",
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--split-out",
        rows.to_str().unwrap(),
    ]);
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("--split-out") && err.contains("--split FRACTION"),
        "{err}"
    );
    assert!(!rows.exists());
}

#[test]
fn a_forecast_table_shows_the_rows_and_inputs_of_the_test_file() {
    let dir = out_dir("outputs_forecast");
    let (json, png) = (dir.join("f.json"), dir.join("f.png"));
    let mut args = mcycle_split(
        "examples/mcycle.tempest",
        &["--json", json.to_str().unwrap()],
    );
    args.extend(["--plot", png.to_str().unwrap()]);
    let out = assert_ok(&tempest(&args));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // --test-rows 100..132: the file's own numbers.
    let rows = numbers(&j["predictions"]["rows"]);
    assert_eq!(rows, (100..=132).map(|r| r as f64).collect::<Vec<_>>());
    let line = out
        .lines()
        .skip_while(|l| !l.contains("sd(y)"))
        .nth(1)
        .unwrap();
    let times = csv_column("examples/data/mcycle.csv", "times");
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[0], "100");
    assert_eq!(cells[1].parse::<f64>().unwrap(), times[100]);
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
}

/// Logistic regression on three features, sampled briefly.
const LOGISTIC3: &str = r#"
data { n : int  X : matrix[n, 3] = columns("x0", "x1", "x2")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[3] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
infer nuts { chains = 2  warmup = 150  draws = 150  seed = 2 }
"#;

#[test]
fn a_samplers_binary_predictions_give_p_of_one_with_its_interval() {
    let dir = out_dir("outputs_binary_nuts");
    let model = dir.join("logistic3.tempest");
    std::fs::write(&model, LOGISTIC3).unwrap();
    let data = shared().join("data").join("breast_cancer_prepared.csv");
    let (out, j) = run_json(
        &model,
        &data,
        &[
            "--rows",
            "0..99",
            "--test",
            data.to_str().unwrap(),
            "--test-rows",
            "200..229",
            "-q",
        ],
        &dir.join("run.json"),
    );
    let head = out
        .lines()
        .find(|l| l.contains("P(y=1)"))
        .unwrap_or_else(|| panic!("no P(y=1) column: {out}"));
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        ["row", "P(y=1)", "sd", "2.5%", "50%", "97.5%"]
    );
    let o = &j["predictions"]["outcomes"][0];
    let p = &o["probability"];
    let (mean, lo, hi) = (
        numbers(&p["mean"]),
        numbers(&p["q2.5"]),
        numbers(&p["q97.5"]),
    );
    let probs = o["probabilities"].as_array().unwrap();
    assert_eq!(mean.len(), 30);
    for i in 0..30 {
        // The mean of the probability's draws is P(y = 1); its interval
        // holds it, inside [0, 1].
        let p1 = probs[i][1].as_f64().unwrap();
        assert!((mean[i] - p1).abs() < 1e-12, "point {i}");
        assert!(0.0 <= lo[i] && lo[i] <= mean[i] && mean[i] <= hi[i] && hi[i] <= 1.0);
    }
    assert_eq!(numbers(&o["rows"])[0], 200.0);
}

/// A GP classifier on two inputs, by mirror descent.
const CLASSIFIER2: &str = r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
hyper { ell : positive = 2.0  sf2 : positive = 2.0 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ bernoulli_logit(f(X))
}
guide { f : sites }
infer mirror_descent { steps = 10 }
"#;

#[test]
fn a_two_input_classifier_gets_its_probability_map_and_p_of_one() {
    let dir = out_dir("outputs_map");
    let model = dir.join("classifier2.tempest");
    std::fs::write(&model, CLASSIFIER2).unwrap();
    let data = shared().join("data").join("breast_cancer_prepared.csv");
    let png = dir.join("c.png");
    let (out, j) = run_json(
        &model,
        &data,
        &[
            "--rows",
            "0..149",
            "--test",
            data.to_str().unwrap(),
            "--test-rows",
            "300..319",
            "--plot",
            png.to_str().unwrap(),
            "-q",
        ],
        &dir.join("run.json"),
    );
    let map = dir.join("c_map.png");
    assert!(
        out.contains(&format!("plot written to {}", map.display())),
        "{out}"
    );
    let bytes = std::fs::read(&map).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(png.exists());
    let head = out.lines().find(|l| l.contains("P(y=1)")).expect("table");
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        [
            "row", "X[0]", "X[1]", "P(y=1)", "sd", "2.5%", "50%", "97.5%"
        ]
    );
    let p = &j["predictions"];
    let band = &p["probability"];
    let (mean, lo, mid, hi) = (
        numbers(&band["mean"]),
        numbers(&band["q2.5"]),
        numbers(&band["q50"]),
        numbers(&band["q97.5"]),
    );
    for i in 0..20 {
        let p1 = p["probabilities"][i][1].as_f64().unwrap();
        assert!(
            (mean[i] - p1).abs() < 1e-9,
            "point {i}: {} vs {p1}",
            mean[i]
        );
        assert!(0.0 <= lo[i] && lo[i] <= mid[i] && mid[i] <= hi[i] && hi[i] <= 1.0);
    }
    assert_eq!(numbers(&p["rows"])[0], 300.0);
}

/// A GP classifier on two inputs whose hypers are sampled with the
/// latent function; `OFFSET` is replaced by the likelihood's other term.
const SAMPLED_CLASSIFIER2: &str = r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  off : vector[n] = column("x2")  y : int<lower=0, upper=1>[n] }
param { ell : positive ~ lognormal(log(2), 0.5)  sf : positive ~ lognormal(0, 0.5) }
model {
  f ~ gp(0, sf^2 * rbf(ell))
  y ~ bernoulli_logit(f(X) OFFSET)
}
infer nuts { chains = 1  warmup = 40  draws = 40  seed = 1 }
"#;

#[test]
fn a_sampled_two_input_classifier_gets_its_map_unless_its_likelihood_reads_point_data() {
    let dir = out_dir("outputs_sampler_map");
    let data = shared().join("data").join("breast_cancer_prepared.csv");
    for (tag, offset, drawn) in [("plain", "+ 0.5 * sf", true), ("offset", "+ off", false)] {
        let model = dir.join(format!("{tag}.tempest"));
        std::fs::write(&model, SAMPLED_CLASSIFIER2.replace("OFFSET", offset)).unwrap();
        let png = dir.join(format!("{tag}.png"));
        let out = assert_ok(&tempest(&[
            "run",
            model.to_str().unwrap(),
            "--data",
            data.to_str().unwrap(),
            "--rows",
            "0..19",
            "-q",
            "--plot",
            png.to_str().unwrap(),
        ]));
        let map = dir.join(format!("{tag}_map.png"));
        assert_eq!(map.exists(), drawn, "{tag}: {out}");
        if drawn {
            assert_eq!(&std::fs::read(&map).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
        }
    }
}

#[test]
fn plot_params_choose_the_sampler_plots_and_unknown_names_are_refused() {
    let dir = out_dir("outputs_plot_params");
    let png = dir.join("es.png");
    let base = [
        "run",
        "examples/eight_schools_centred.tempest",
        "--data",
        "examples/eight_schools.json",
        "-q",
        "--set",
        "warmup=150",
        "--set",
        "draws=150",
        "--plot",
        png.to_str().unwrap(),
        "--plot-params",
    ];
    let with = |names: &str| {
        let mut a = base.to_vec();
        a.push(names);
        tempest(&a)
    };
    let out = assert_ok(&with("tau,theta[0]"));
    let pairs = dir.join("es_pairs.png");
    assert!(
        out.contains(&format!("plot written to {}", pairs.display())),
        "{out}"
    );
    for p in [&png, &pairs] {
        assert_eq!(&std::fs::read(p).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
    // Unknown names are refused before the run, with what there is.
    let err = assert_clean_failure(&with("tau,sigmaa"));
    assert!(
        err.contains("--plot-params sigmaa: the model has no param `sigmaa`"),
        "{err}"
    );
    assert!(err.contains("the params: mu, tau, theta"), "{err}");
    let err = assert_clean_failure(&with("theta[8]"));
    assert!(err.contains("`theta` has no element [8]"), "{err}");
    assert!(err.contains("eight_schools_centred.tempest:17:3"), "{err}");
    // An engine whose figure draws no params.
    let o = tempest(&[
        "run",
        "examples/mcycle.tempest",
        "--data",
        "examples/data/mcycle.csv",
        "--plot",
        png.to_str().unwrap(),
        "--plot-params",
        "ell",
    ]);
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("the `exact` engine's figure draws no params"),
        "{err}"
    );
}

#[test]
fn a_dense_variational_run_estimated_past_max_minutes_is_refused_before_it_starts() {
    let dir = out_dir("outputs_cost");
    let model = dir.join("classifier2.tempest");
    std::fs::write(&model, CLASSIFIER2).unwrap();
    let data = shared().join("data").join("breast_cancer_prepared.csv");
    // 500 points, hypers learned, a million steps: hours on any machine.
    let start = std::time::Instant::now();
    let o = tempest(&[
        "run",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "--rows",
        "0..499",
        "--set",
        "learn_hypers=true",
        "--set",
        "steps=1000000",
        "--set",
        "max_minutes=30",
    ]);
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("mirror_descent with learn_hypers = true on N = 500 points"),
        "{err}"
    );
    assert!(err.contains("more than max_minutes = 30"), "{err}");
    assert!(
        err.contains("--engine svi") && err.contains("max_minutes=0"),
        "{err}"
    );
    assert!(
        start.elapsed().as_secs() < 20,
        "refused only after {:?}",
        start.elapsed()
    );
    // The library says the same before a run: a warning with the estimate
    // when the bound is lifted.
    let m = tempest::Model::from_str("c.tempest", CLASSIFIER2, &Default::default()).unwrap();
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 499))));
    let options = |max: &str| tempest::RunOptions {
        settings: vec![
            ("learn_hypers".into(), "true".into()),
            ("steps".into(), "1000000".into()),
            ("max_minutes".into(), max.into()),
        ],
        ..Default::default()
    };
    let warnings = tempest::api::preflight(&b, &options("0")).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("a step on this machine"),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("`--engine svi`"), "{}", warnings[0]);
    assert!(tempest::api::preflight(&b, &options("30")).is_err());
    // A short run says nothing.
    let short = tempest::RunOptions {
        settings: vec![("steps".into(), "2".into())],
        ..Default::default()
    };
    assert!(tempest::api::preflight(&b, &short).unwrap().is_empty());
}
