//! Hostile sizes through the real binary: sizes written in a model (network
//! widths, vector lengths, inducing points, grids, copies of a latent GP)
//! are refused before anything that large is allocated, with an error at
//! the size; names of any length are reported; data files are bound in a
//! compact form whose memory is checked before the file is read.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// The longest a refusal may take (debug build, 2 shared cores): a size is
/// refused before the work it would cause, not after.
#[allow(dead_code)]
const FAST: Duration = Duration::from_secs(5);

/// The longest any run here may take before it counts as a hang.
const LIMIT: Duration = Duration::from_secs(120);

const MCYCLE: &str = "examples/data/mcycle.csv";

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
        let (o, _) = tempest_within(&args, LIMIT);
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
    let (o, _) = tempest_within(&["check", &model, "--data", &data], LIMIT);
    assert_ok(&o);
}
