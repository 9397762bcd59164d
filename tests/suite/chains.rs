//! Chains across machines: `--chain-offset` numbers a process's chains (and
//! derives their seeds) so that several processes run distinct chains of
//! one run, and `tempest summary` merges their Stan CSV files into the
//! summary a single run gives.

use crate::common;

use common::{assert_clean_failure, assert_ok, out_dir, tempest};

fn run(prefix: &std::path::Path, extra: &[&str], json: &std::path::Path) {
    let mut args = vec![
        "run",
        "examples/logistic.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--rows",
        "0..199",
        "-q",
        "--set",
        "draws=200",
        "--set",
        "warmup=200",
        "--csv",
        prefix.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    assert_ok(&tempest(&args));
}

fn read(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn chains_run_apart_merge_into_the_single_run() {
    let dir = out_dir("chains_merge");
    // One process with four chains ...
    run(
        &dir.join("one"),
        &["--set", "chains=4"],
        &dir.join("one.json"),
    );
    // ... and two processes with two chains each, the second offset by 2.
    run(
        &dir.join("part"),
        &["--set", "chains=2"],
        &dir.join("a.json"),
    );
    run(
        &dir.join("part"),
        &["--set", "chains=2", "--chain-offset", "2"],
        &dir.join("b.json"),
    );
    let files: Vec<String> = (1..=4)
        .map(|k| {
            dir.join(format!("part_{k}.csv"))
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let merged = dir.join("merged.json");
    let mut args = vec!["summary"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--json", merged.to_str().unwrap()]);
    let out = assert_ok(&tempest(&args));
    assert!(
        out.contains("4 chains from 4 files (ids 1, 2, 3, 4), 800 draws after warm-up"),
        "{out}"
    );
    assert!(out.contains("beta[29]"), "the model's names: {out}");
    let (one, m) = (read(&dir.join("one.json")), read(&merged));
    let names: Vec<&String> = one["summary"].as_object().unwrap().keys().collect();
    assert_eq!(names.len(), 31);
    for n in names {
        for k in [
            "mean", "sd", "mcse", "q5", "q95", "rhat", "ess_bulk", "ess_tail",
        ] {
            assert_eq!(
                one["summary"][n][k], m["summary"][n][k],
                "{n} {k}: the merged chains are the single run's"
            );
        }
    }
    for k in [
        "divergences",
        "max_depth_hits",
        "ebfmi",
        "ess_bulk_min",
        "rhat_max",
    ] {
        assert_eq!(one[k], m[k], "{k}");
    }
}

#[test]
fn summary_refuses_files_that_are_not_chains_of_one_run() {
    let dir = out_dir("chains_refused");
    run(&dir.join("x"), &["--set", "chains=2"], &dir.join("x.json"));
    run(&dir.join("y"), &["--set", "chains=1"], &dir.join("y.json"));
    let f = |name: &str| dir.join(name).to_str().unwrap().to_string();
    // The same chain twice (a second process without --chain-offset).
    let err = assert_clean_failure(&tempest(&["summary", &f("x_1.csv"), &f("y_1.csv")]));
    assert!(err.contains("the same chain as"), "{err}");
    assert!(err.contains("--chain-offset"), "{err}");
    // Another model's columns.
    let other = dir.join("other.csv");
    let text = std::fs::read_to_string(f("x_2.csv")).unwrap();
    let cut: String = text
        .lines()
        .map(|l| {
            if l.starts_with('#') {
                format!("{l}\n")
            } else {
                let fields: Vec<&str> = l.split(',').collect();
                format!("{}\n", fields[..fields.len() - 1].join(","))
            }
        })
        .collect();
    std::fs::write(&other, cut).unwrap();
    let err = assert_clean_failure(&tempest(&[
        "summary",
        &f("x_1.csv"),
        other.to_str().unwrap(),
    ]));
    assert!(err.contains("its columns differ"), "{err}");
    // Warm-up draws saved in the file (CmdStan's save_warmup) are left out.
    let warm = dir.join("warm.csv");
    let text = std::fs::read_to_string(f("x_2.csv"))
        .unwrap()
        .replace("save_warmup = 0", "save_warmup = 1")
        .replace("num_warmup = 200", "num_warmup = 5");
    std::fs::write(&warm, text).unwrap();
    let json = dir.join("w.json");
    assert_ok(&tempest(&[
        "summary",
        &f("x_1.csv"),
        warm.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]));
    assert_eq!(read(&json)["draws"], serde_json::json!([200, 195]));
    // A file that is not Stan CSV.
    let err = assert_clean_failure(&tempest(&["summary", "examples/data/mcycle.csv"]));
    assert!(err.contains("mcycle.csv"), "{err}");
}

/// `tempest summary` names Stan CSV columns in the language's convention
/// (tempest-mcmc/src/merge.rs).
mod stan_names {
    use tempest::infer::mcmc::merge::language_name;

    #[test]
    fn stan_names_in_the_language_convention() {
        assert_eq!(language_name("beta.1"), "beta[0]");
        assert_eq!(language_name("A.2.3"), "A[1, 2]");
        assert_eq!(language_name("sigma"), "sigma");
        assert_eq!(language_name("x.y"), "x.y");
        assert_eq!(language_name("b.0"), "b.0");
    }
}
