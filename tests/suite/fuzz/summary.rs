//! `tempest summary` on the Stan CSV files runs write: files of one run,
//! of different runs (other models, samplers, settings, chain offsets) mixed,
//! and files damaged by hand (cells made hostile, lines dropped or
//! repeated, headers and comments edited, files cut short).

use super::pieces::*;
use super::{check_run, out_dir, runner, write};
use proptest::prelude::*;
use std::path::Path;

/// The runs whose draws are summarised: a model, its engine and a prefix.
const RUNS: [(&str, &str, &str); 4] = [
    (
        "a",
        "nuts { chains = 2, warmup = 10, draws = 6 }",
        "--chain-offset=0",
    ),
    (
        "a",
        "hmc { chains = 1, warmup = 10, draws = 6, leapfrog_steps = 3 }",
        "--chain-offset=2",
    ),
    (
        "a",
        "nuts { chains = 1, warmup = 12, draws = 4, target_accept = 0.9 }",
        "--chain-offset=5",
    ),
    (
        "b",
        "mala { chains = 2, warmup = 10, draws = 6 }",
        "--chain-offset=0",
    ),
];

/// Write the draws of every run; the files.
fn draw_files(dir: &Path) -> Vec<String> {
    let data = write(dir, "data.csv", &table(8, 2, &[], 4));
    let mut files = Vec::new();
    for (i, (model, engine, offset)) in RUNS.iter().enumerate() {
        let text = if *model == "a" {
            format!(
                "data {{ n : int\n  x1 : vector[n]\n  y : vector[n] }}\n\
                 param {{ b : vector[2] ~ normal(0, 2)\n  sigma : positive ~ normal(0, 1) }}\n\
                 model {{ y ~ normal(b[0] + b[1] * x1, sigma) }}\ninfer {engine}\n"
            )
        } else {
            format!(
                "data {{ n : int\n  k : int<lower=0>[n] }}\nparam {{ mu : real ~ normal(0, 1) }}\n\
                 model {{ k ~ poisson_log(mu) }}\ninfer {engine}\n"
            )
        };
        let m = write(dir, &format!("run{i}.tempest"), &text);
        let prefix = dir.join(format!("run{i}")).to_string_lossy().into_owned();
        clear(dir, &format!("run{i}_"));
        let r = check_run(&["run", &m, "--data", &data, "-q", "--csv", &prefix, offset])
            .unwrap_or_else(|e| panic!("run {i}: {e}"));
        assert_eq!(r.code, 0, "run {i} fails");
        files.extend(files_with_prefix(dir, &format!("run{i}_")));
    }
    files
}

/// Damage a draw file: `what` picks the edit, `at` the line, `k` the value.
fn damage_draws(text: &str, what: u8, at: usize, k: usize) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let i = at % lines.len();
    let header = lines
        .iter()
        .position(|l| l.starts_with("lp__"))
        .unwrap_or(0);
    let data_row = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.starts_with("lp__"))
        .map(|(j, _)| j)
        .nth(at % 4)
        .unwrap_or(i);
    let value = CELLS[k % CELLS.len()];
    match what {
        0 => {
            let mut cells: Vec<String> = lines[data_row].split(',').map(String::from).collect();
            let c = k % cells.len();
            cells[c] = value.to_string();
            lines[data_row] = cells.join(",");
        }
        1 => {
            lines.remove(i);
        }
        2 => {
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        3 => {
            let mut cells: Vec<String> = lines[header].split(',').map(String::from).collect();
            let c = k % cells.len();
            cells[c] = ["b[0]", "sigma", "", "mu", "b.1", "x y", "lp__"][k % 7].to_string();
            lines[header] = cells.join(",");
        }
        4 => {
            // A comment's value.
            if let Some(j) = lines
                .iter()
                .position(|l| l.starts_with('#') && l.contains(" = "))
            {
                let j = (j + at) % lines.len();
                if let Some((key, _)) = lines[j].split_once(" = ") {
                    lines[j] = format!("{key} = {value}");
                }
            }
        }
        5 => lines.truncate(i),
        6 => lines[data_row].push_str(",1.0"),
        _ => return text[..(at * 7919) % text.len()].to_string(),
    }
    lines.join("\n") + "\n"
}

#[test]
fn summaries_of_mixed_and_damaged_draws_end_cleanly() {
    let dir = out_dir("fuzz_summary");
    let files = draw_files(&dir);
    // The files of one run summarise.
    let r = check_run(&["summary", &files[0], &files[1]]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.code, 0);
    let strategy = (
        prop::collection::vec(
            prop_oneof![8 => 0..files.len(), 1 => files.len()..files.len() + 2],
            1..4,
        ),
        prop::option::weighted(0.7, (0u8..8, 0usize..200, 0usize..64)),
        any::<bool>(),
    );
    runner(40, 53)
        .run(&strategy, |(picked, edit, json)| {
            let steps = Steps {
                context: format!("files {picked:?}, edit {edit:?}"),
                dir: &dir,
            };
            let mut cmd = args(&["summary"]);
            for (n, &p) in picked.iter().enumerate() {
                cmd.push(match p {
                    p if p < files.len() => files[p].clone(),
                    p if p == files.len() => steps.file("empty.csv", ""),
                    _ => dir.to_string_lossy().into_owned(),
                });
                // The first file picked carries the damage.
                if let (0, Some((what, at, k)), true) = (n, edit, p < files.len()) {
                    let text = std::fs::read_to_string(&files[p]).expect("draws");
                    cmd[1] = steps.file("damaged.csv", &damage_draws(&text, what, at, k));
                }
            }
            if json {
                cmd.extend(args(&["--json", &dir.join("s.json").to_string_lossy()]));
            }
            steps.run(&cmd)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
