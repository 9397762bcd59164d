//! The `svi` engine from the command line: a multi-class fit with test
//! metrics and a plot, row selection by a column's value, and clean
//! failures for bad selections and settings.

use crate::common;
use common::*;

const SATELLITE: &str = "../shared/data/satellite_prepared.csv";

#[test]
fn satellite_subset_fits_predicts_and_plots() {
    let dir = out_dir("svi_satellite");
    let json = dir.join("fit.json");
    let png = dir.join("fit.png");
    let (out, j) = run_json(
        std::path::Path::new("examples/satellite.tempest"),
        std::path::Path::new(SATELLITE),
        &[
            "--rows",
            "0..1199",
            "--test",
            SATELLITE,
            "--test-rows",
            "1200..1599",
            "--set",
            "steps=150",
            "--plot",
            png.to_str().unwrap(),
            "-q",
        ],
        &json,
    );
    assert!(
        out.contains("sparse variational GP (1200 points, 100 inducing points, 6 latent GPs"),
        "{out}"
    );
    let acc = j["test"]["accuracy"].as_f64().unwrap();
    assert!(acc > 0.8, "accuracy {acc}");
    assert!(j["test"]["mean_log_predictive_density"].as_f64().unwrap() > -0.6);
    assert_eq!(j["z"].as_array().unwrap().len(), 100);
    assert_eq!(j["z"][0].as_array().unwrap().len(), 36);
    let trace = j["elbo_trace"].as_array().unwrap();
    // 150 steps of 256 points over 1,200 points: 4 steps an epoch.
    assert!(trace.len() >= 30, "{} epochs", trace.len());
    assert!(trace[0]["elbo"].as_f64().unwrap() < trace.last().unwrap()["elbo"].as_f64().unwrap());
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
    assert_eq!(
        j["predictions"]["probabilities"].as_array().unwrap().len(),
        400
    );
}

#[test]
fn rows_select_by_a_columns_value() {
    let o = tempest(&[
        "run",
        "examples/satellite.tempest",
        "--data",
        SATELLITE,
        "--rows",
        "is_test=1",
        "--set",
        "steps=1",
        "-q",
    ]);
    let out = assert_ok(&o);
    assert!(out.contains("(1287 points"), "{out}");

    for (flag, rows, want) in [
        ("--rows", "nosuch=1", "has no column `nosuch`"),
        ("--rows", "is_test=7", "no row of"),
        ("--rows", "0..x", "expected two row numbers"),
        ("--test-rows", "nosuch=1", "--test-rows nosuch=1"),
    ] {
        let err = assert_clean_failure(&satellite(&[flag, rows]));
        assert!(err.contains(want), "{flag} {rows}: {err}");
    }
}

/// `tempest run examples/satellite.tempest` on the satellite data (also
/// as test data) with more arguments.
fn satellite(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        "examples/satellite.tempest",
        "--data",
        SATELLITE,
        "--test",
        SATELLITE,
    ];
    args.extend_from_slice(extra);
    tempest(&args)
}

#[test]
fn bad_svi_settings_fail_cleanly() {
    for set in ["batch=0", "rho=1.5", "q_step=sgd", "steps=-3", "lr=0"] {
        let err = assert_clean_failure(&satellite(&["--rows", "0..99", "--set", set]));
        assert!(err.contains(set.split('=').next().unwrap()), "{set}: {err}");
    }
}

#[test]
fn a_non_finite_expectation_names_the_row_and_the_likelihood() {
    let dir = out_dir("svi_overflow");
    let mut rows = vec!["x,y".to_string()];
    rows.extend((0..40).map(|i| format!("{},{}", i as f64 / 10.0, (i as f64 / 10.0).sin())));
    rows[13] = "1.2,1e200".into();
    let data = dir.join("d.csv");
    std::fs::write(&data, rows.join("\n") + "\n").unwrap();
    let model = dir.join("m.tempest");
    std::fs::write(
        &model,
        "data { n : int  x : vector[n]  y : vector[n] }\n\
         hyper { ell : positive = 1.0  sigma : positive = 0.3 }\n\
         model {\n  f ~ gp(0, rbf(ell))\n  y ~ normal(f(x), sigma)\n}\n\
         guide { f : inducing(m = 10) }\n\
         infer svi { steps = 20, batch = 8 }\n",
    )
    .unwrap();
    let err = assert_clean_failure(&tempest(&[
        "run",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
        "-q",
    ]));
    assert!(err.contains("row 12 (line 14), column `y`"), "{err}");
    assert!(
        err.contains("expected log-likelihood of this outcome (1e200)"),
        "{err}"
    );
    assert!(err.contains("rescale the outcomes"), "{err}");
}

#[test]
fn natural_and_adam_runs_overlay_against_time() {
    // Two runs without test data: each plots its ELBO against seconds, and
    // plot-trace overlays them (svi traces carry their times).
    let dir = out_dir("svi_plot_trace");
    let mut runs = Vec::new();
    for q in ["natural", "adam"] {
        let json = dir.join(format!("{q}.json"));
        let png = dir.join(format!("{q}.png"));
        let (out, j) = run_json(
            std::path::Path::new("examples/satellite.tempest"),
            std::path::Path::new(SATELLITE),
            &[
                "--rows",
                "0..599",
                "--set",
                "steps=60",
                "--set",
                &format!("q_step={q}"),
                "--set",
                "polish=0",
                "--plot",
                png.to_str().unwrap(),
                "-q",
            ],
            &json,
        );
        assert!(out.contains("plot written to"), "{out}");
        assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
        let trace = j["elbo_trace"].as_array().unwrap();
        let secs: Vec<f64> = trace
            .iter()
            .map(|t| t["seconds"].as_f64().unwrap())
            .collect();
        assert!(secs.windows(2).all(|w| w[0] <= w[1]), "{secs:?}");
        runs.push(json);
    }
    let out_png = dir.join("both.png");
    let o = tempest(&[
        "plot-trace",
        "--out",
        out_png.to_str().unwrap(),
        runs[0].to_str().unwrap(),
        runs[1].to_str().unwrap(),
    ]);
    assert_ok(&o);
    assert!(std::fs::metadata(&out_png).unwrap().len() > 10_000);
}

/// A run with `--test` rows and `--save`, then `tempest predict` at the
/// same test rows from the saved fit.
struct SavedRun {
    /// The run's summary text.
    out: String,
    /// The run's JSON.
    run: serde_json::Value,
    /// The saved fit.
    saved: serde_json::Value,
    /// The saved fit's path.
    fit: std::path::PathBuf,
    /// `predict`'s summary text and JSON.
    pred_out: String,
    pred: serde_json::Value,
}

fn run_save_predict(
    dir: &std::path::Path,
    model: &str,
    train: &str,
    test: &str,
    steps: &str,
) -> SavedRun {
    let (fit, run_path, pred_path) = (
        dir.join("fit.json"),
        dir.join("run.json"),
        dir.join("pred.json"),
    );
    let (out, run) = run_json(
        std::path::Path::new(model),
        std::path::Path::new(SATELLITE),
        &[
            "--rows",
            train,
            "--test",
            SATELLITE,
            "--test-rows",
            test,
            "--set",
            &format!("steps={steps}"),
            "--save",
            fit.to_str().unwrap(),
            "-q",
        ],
        &run_path,
    );
    let pred_out = assert_ok(&tempest(&[
        "predict",
        model,
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        SATELLITE,
        "--test-rows",
        test,
        "--json",
        pred_path.to_str().unwrap(),
    ]));
    let read = |p: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    SavedRun {
        out,
        run,
        saved: read(&fit),
        fit,
        pred_out,
        pred: read(&pred_path),
    }
}

/// The class probabilities of a run's or a prediction's JSON, row by row.
fn probs(j: &serde_json::Value) -> Vec<f64> {
    j["predictions"]["probabilities"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
        .collect()
}

#[test]
fn a_saved_fit_predicts_later_without_training() {
    let dir = out_dir("svi_saved");
    let SavedRun {
        out,
        run,
        saved,
        fit,
        pred_out: text,
        pred,
    } = run_save_predict(
        &dir,
        "examples/satellite.tempest",
        "0..799",
        "800..999",
        "60",
    );
    assert!(out.contains("fit saved to"), "{out}");
    assert_eq!(saved["format"], "tempest fit");
    assert_eq!(saved["version"], 1);
    assert_eq!(saved["svi"]["q"].as_array().unwrap().len(), 6);
    // The same test rows from the saved fit: the same predictions.
    assert!(text.contains("read from the saved fit"), "{text}");
    let (a, b) = (probs(&run), probs(&pred));
    assert_eq!(a.len(), 200 * 6);
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12));
    let acc = |j: &serde_json::Value| j["test"]["accuracy"].as_f64().unwrap();
    assert_eq!(acc(&run), acc(&pred));

    // Test data without the outcome column: predictions, no metrics.
    let table = std::fs::read_to_string(SATELLITE).unwrap();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let y = header.iter().position(|h| *h == "y").unwrap();
    let drop = |l: &str| {
        l.split(',')
            .enumerate()
            .filter(|(i, _)| *i != y)
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut csv = drop(&header.join(","));
    for l in lines.take(15) {
        csv.push('\n');
        csv.push_str(&drop(l));
    }
    let unlabelled = dir.join("unlabelled.csv");
    std::fs::write(&unlabelled, csv + "\n").unwrap();
    let o = tempest(&[
        "predict",
        "examples/satellite.tempest",
        "--fit",
        fit.to_str().unwrap(),
        "--test",
        unlabelled.to_str().unwrap(),
        "--plot",
        dir.join("saved_trace.png").to_str().unwrap(),
    ]);
    let text = assert_ok(&o);
    assert!(text.contains("predictions: 15 test points"), "{text}");
    // Without test outcomes the plot is the saved ELBO trace.
    assert!(
        std::fs::metadata(dir.join("saved_trace.png"))
            .unwrap()
            .len()
            > 10_000
    );

    // Another model, a damaged file, an engine that cannot save: clean
    // failures that say what is wrong.
    let other = dir.join("other.tempest");
    let model = std::fs::read_to_string("examples/satellite.tempest").unwrap();
    std::fs::write(&other, model.replace("rbf(ell)", "matern52(ell)")).unwrap();
    let predict_fails = |model: &str, fit: &std::path::Path| {
        assert_clean_failure(&tempest(&[
            "predict",
            model,
            "--fit",
            fit.to_str().unwrap(),
            "--test",
            SATELLITE,
        ]))
    };
    let err = predict_fails(other.to_str().unwrap(), &fit);
    assert!(err.contains("was saved from another model"), "{err}");
    let damaged = dir.join("damaged.json");
    std::fs::write(&damaged, r#"{"format": "tempest fit", "version": 7}"#).unwrap();
    let err = predict_fails("examples/satellite.tempest", &damaged);
    assert!(err.contains("version 7"), "{err}");
    let mut bad_setting = saved.clone();
    bad_setting["svi"]["settings"]["quadrature"] = serde_json::json!(0);
    std::fs::write(&damaged, bad_setting.to_string()).unwrap();
    let err = predict_fails("examples/satellite.tempest", &damaged);
    assert!(err.contains("the setting `quadrature`"), "{err}");
    let mut cut = std::fs::read_to_string(&fit).unwrap();
    cut.truncate(cut.len() / 2);
    std::fs::write(&damaged, cut).unwrap();
    let err = predict_fails("examples/satellite.tempest", &damaged);
    assert!(err.contains("invalid JSON"), "{err}");
    // A fit of another engine is not an svi fit.
    let wine = dir.join("wine_fit.json");
    assert_ok(&tempest(&[
        "run",
        "examples/wine.tempest",
        "--data",
        "examples/data/wine.csv",
        "-q",
        "--save",
        wine.to_str().unwrap(),
    ]));
    let err = predict_fails("examples/satellite.tempest", &wine);
    assert!(err.contains("saved from another model"), "{err}");
}

/// The deep-kernel example on a subset: it learns (the training ELBO
/// rises far above the prior's), reports the network, predicts held-out
/// rows well, and a saved fit with the network's weights predicts the same.
#[test]
fn a_deep_kernel_learns_saves_and_predicts() {
    let dir = out_dir("svi_deep");
    let model = "examples/satellite_dkl.tempest";
    let SavedRun {
        out,
        run,
        saved,
        pred,
        ..
    } = run_save_predict(&dir, model, "0..1499", "1500..1999", "300");
    assert!(out.contains("36 → 64 → 64 → 16 (relu)"), "{out}");
    assert_eq!(
        run["network"]["weights"],
        36 * 64 + 64 + 64 * 64 + 64 + 64 * 16 + 16
    );
    // Z lives in the 16-dimensional feature space.
    assert_eq!(run["z"][0].as_array().unwrap().len(), 16);
    // These held-out rows are harder than the usual split (the plain GP of
    // examples/satellite.tempest gets 0.768 with the same steps).
    let acc = run["test"]["accuracy"].as_f64().unwrap();
    assert!(acc > 0.74, "held-out accuracy {acc}");
    // The ELBO per point: the network makes the classes separable, far
    // beyond the plain GP's −0.278 on these rows (log(1/6) ≈ −1.79 is a
    // flat guess).
    let per_point = run["elbo"].as_f64().unwrap() / 1500.0;
    assert!(per_point > -0.2, "ELBO per point {per_point}");
    assert_eq!(
        saved["svi"]["network"]["weights"].as_array().unwrap().len(),
        run["network"]["weights"].as_u64().unwrap() as usize
    );
    let (a, b) = (probs(&run), probs(&pred));
    assert_eq!(a.len(), 500 * 6);
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-9));
    // A damaged network in the file is refused cleanly.
    let mut bad = saved.clone();
    bad["svi"]["network"]["weights"] = serde_json::json!([1.0, 2.0]);
    let damaged = dir.join("damaged.json");
    std::fs::write(&damaged, bad.to_string()).unwrap();
    let err = assert_clean_failure(&tempest(&[
        "predict",
        model,
        "--fit",
        damaged.to_str().unwrap(),
        "--test",
        SATELLITE,
        "--test-rows",
        "1500..1509",
    ]));
    assert!(
        err.contains("svi.network.weights") && err.contains("7568"),
        "{err}"
    );
}

/// SV-DKL's whole model (network, additive GPs on feature groups with
/// their own inducing sets, mixing matrix) on a subset: it learns, reports
/// its structure, and a saved fit predicts the same.
#[test]
fn additive_mixed_deep_gps_learn_save_and_predict() {
    let dir = out_dir("svi_svdkl");
    let SavedRun { out, run, pred, .. } = run_save_predict(
        &dir,
        "examples/satellite_svdkl.tempest",
        "0..1499",
        "1500..1999",
        "300",
    );
    assert!(
        out.contains("20 inducing points per latent GP, each on its own group of 1 feature, 6 latent GPs mixed into 6 class scores"),
        "{out}"
    );
    assert!(out.contains("Monte Carlo, 1024 draws"), "{out}");
    // Six sets of 20 one-feature inducing inputs.
    let z = run["z"].as_array().unwrap();
    assert_eq!((z.len(), z[0].as_array().unwrap().len()), (120, 1));
    // A moved from the identity.
    let a: Vec<f64> = run["hypers"]["A"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()))
        .collect();
    assert_eq!(a.len(), 36);
    assert!((a[0] - 1.0).abs() > 1e-3 && a[1].abs() > 1e-3, "{a:?}");
    let acc = run["test"]["accuracy"].as_f64().unwrap();
    assert!(acc > 0.74, "held-out accuracy {acc}");
    let (p, q) = (probs(&run), probs(&pred));
    assert_eq!(p.len(), 500 * 6);
    assert!(p.iter().zip(&q).all(|(x, y)| (x - y).abs() < 1e-9));
}

/// Deep kernels and mixing where they cannot run: another engine, inside
/// kernel algebra, an unknown activation, a base kernel whose `dims`
/// exceed the features, groups that do not match the network or the
/// copies, a mixing matrix of the wrong shape or with another engine.
/// Each is a located error.
#[test]
fn deep_kernels_where_they_cannot_run_fail_cleanly() {
    let dir = out_dir("svi_deep_errors");
    let base = std::fs::read_to_string("examples/satellite_dkl.tempest").unwrap();
    let svdkl = std::fs::read_to_string("examples/satellite_svdkl.tempest").unwrap();
    let cases = [
        (
            base.replace("infer svi { }", "infer mirror_descent { }")
                .replace("f : inducing(m = 100)", ""),
            "does not learn a deep kernel's network",
        ),
        (
            base.replace(
                "deep(sf2 * rbf(ell), net)",
                "deep(sf2 * rbf(ell), net) + rbf(ell)",
            ),
            "as the whole kernel of a GP",
        ),
        (
            base.replace(
                "mlp([64, 64, 16])",
                "mlp([64, 64, 16], activation = \"swish\")",
            ),
            "the activation of `mlp` is one of",
        ),
        (
            base.replace("sf2 * rbf(ell)", "sf2 * rbf(ell, dims = [20])"),
            "features",
        ),
        (
            base.replace(
                "deep(sf2 * rbf(ell), net)",
                "deep(sf2 * rbf(ell), net, groups = 5)",
            ),
            "into 5 equal groups",
        ),
        (
            svdkl
                .replace("A : matrix[6, 6]", "A : matrix[5, 6]")
                .replace("[0, 0, 0, 0, 0, 1]]", "]"),
            "matrix product needs the left columns to equal the right rows",
        ),
        (
            svdkl
                .replace("infer svi { }", "infer mirror_descent { }")
                .replace("f : inducing(m = 20)", "")
                .replace(", groups = 6", "")
                .replace("deep(sf2 * rbf(ell), net)", "sf2 * rbf(ell)"),
            "does not mix latent GPs",
        ),
        (
            // A grid keeps every point it is given: refused before allocating.
            svdkl.replace("inducing(m = 20)", "grid(m = 100000000)"),
            "100000000 inducing points × 100000000 inducing points",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = dir.join(format!("case{i}.tempest"));
        std::fs::write(&path, text).unwrap();
        let err = assert_clean_failure(&tempest(&[
            "run",
            path.to_str().unwrap(),
            "--data",
            SATELLITE,
            "--rows",
            "0..299",
            "-q",
        ]));
        assert!(err.contains(want), "case {i}: {err}");
        assert!(
            err.contains(&format!("case{i}.tempest:")),
            "case {i} unlocated: {err}"
        );
    }
}
