//! `tempest summary`: Stan CSV files read together as the chains of one run
//! — written by tempest on several machines (`chain_offset` gives each
//! process its own chains and seeds) or by CmdStan — and summarised as a
//! single run is: the same table (mean, MCSE, sd, quantiles, rank-normalised
//! R-hat, bulk and tail ESS over all chains), divergences, trees at the
//! maximum depth, E-BFMI per chain, the same warnings, and the same JSON
//! keys. Names are the language's (`beta[0]` for Stan's `beta.1`).
//!
//! Warm-up draws saved in a file (`save_warmup = 1` or `true`) are left
//! out (`num_warmup` of them). Every file must hold the same columns; two
//! files with the same chain id and seed are the same chain twice, an
//! error (an array job whose processes were not given distinct
//! `chain_offset`s).

use super::fit::{
    RunDiagnostics, SUMMARY_HEADER, SUMMARY_WIDTHS, extremes, summary_cells, summary_json, warnings,
};
use super::same_run::config;
use crate::error::{Error, ErrorKind};
use crate::mc::diagnostics::{Summary, ebfmi, summarize};
use serde_json::{Map, json};
use std::path::{Path, PathBuf};
use tempest_output::report::{Report, Table};
use tempest_output::stan_csv::{StanCsv, read_stan_csv};

/// The chains of several Stan CSV files, summarised.
pub struct MergedRun {
    /// The sampler named in the files (`nuts`, `hmc`, `mala`, or `mcmc`).
    pub engine: &'static str,
    /// The files, one chain each.
    pub files: Vec<PathBuf>,
    /// Each chain's id (`# id = K`), when the file states it.
    pub chain_ids: Vec<Option<u64>>,
    /// Draws after warm-up per chain, as in the files.
    pub draws: Vec<usize>,
    /// Draws per chain summarised: the fewest any file holds (longer chains
    /// are cut to it, with a warning).
    pub per_chain: usize,
    /// Column names in the language's convention.
    pub names: Vec<String>,
    /// Summaries per column over all chains.
    pub summaries: Vec<Summary>,
    /// Divergent transitions (`divergent__`).
    pub divergences: usize,
    /// Transitions at the files' `max_depth` (`treedepth__`).
    pub max_depth_hits: usize,
    /// E-BFMI per chain (from `energy__`).
    pub ebfmi: Vec<f64>,
    /// Warnings, as a single run gives them.
    pub warnings: Vec<String>,
}

/// Stan's element name `beta.1` / `A.2.3` in the language's convention
/// (`beta[0]`, `A[1, 2]`); other names as they are.
pub fn language_name(stan: &str) -> String {
    let mut parts = stan.split('.');
    let head = parts.next().unwrap_or(stan);
    let idx: Option<Vec<usize>> = parts
        .map(|p| p.parse::<usize>().ok().filter(|&k| k >= 1).map(|k| k - 1))
        .collect();
    match idx {
        Some(ix) if !ix.is_empty() => {
            let shown: Vec<String> = ix.iter().map(|k| k.to_string()).collect();
            format!("{head}[{}]", shown.join(", "))
        }
        _ => stan.to_string(),
    }
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Data, format!("{}: {msg}", path.display()))
}

/// Read and summarise `paths` as the chains of one run.
///
/// Errors (naming the file): a file that cannot be read or is not Stan CSV
/// (no `lp__` column), columns that differ from the first file's, fewer
/// than two draws after warm-up, a draw that is not finite (its line and
/// column), files of another posterior or sampler
/// ([`super::same_run::compare`]), the same chain (id and seed) twice,
/// fewer than one file.
///
/// Warnings (in [`MergedRun::warnings`], before a run's own): chains of
/// unequal length (each is cut to the shortest), tuning settings that
/// differ between the files, chains that did not move.
pub fn merge(paths: &[PathBuf]) -> Result<MergedRun, Error> {
    if paths.is_empty() {
        return Err(Error::new(
            ErrorKind::Settings,
            "tempest summary: give one Stan CSV file per chain, e.g. `tempest summary draws_*.csv`",
        ));
    }
    let mut files = Vec::with_capacity(paths.len());
    for p in paths {
        files.push(read_chain(p)?);
    }
    let first = &files[0];
    for (p, f) in paths.iter().zip(&files).skip(1) {
        if f.columns != first.columns {
            return Err(bad(
                p,
                format!(
                    "its columns differ from those of {} ({} columns against {}): the files are not chains of the same model",
                    paths[0].display(),
                    f.columns.len(),
                    first.columns.len()
                ),
            ));
        }
    }
    let mut notices = super::same_run::compare(paths, &files)?;
    let chain_ids: Vec<Option<u64>> = files
        .iter()
        .map(|f| config(f, "id").and_then(|v| v.parse().ok()))
        .collect();
    let seeds: Vec<Option<&str>> = files.iter().map(|f| config(f, "seed")).collect();
    for a in 0..files.len() {
        for b in a + 1..files.len() {
            if chain_ids[a].is_some() && chain_ids[a] == chain_ids[b] && seeds[a] == seeds[b] {
                return Err(bad(
                    &paths[b],
                    format!(
                        "the same chain as {} (id {}, seed {}): its draws would count twice",
                        paths[a].display(),
                        chain_ids[a].unwrap_or(0),
                        seeds[a].unwrap_or("?")
                    ),
                )
                .with_note("give each process of an array job its own chains: `--chain-offset K` (e.g. K = 4 × the task's index with 4 chains each)"));
            }
        }
    }
    // Chains of unequal length are cut to the shortest (as a run stopped
    // early is), and the warning says so.
    let draws: Vec<usize> = files.iter().map(|f| f.draws.len()).collect();
    let per_chain = draws.iter().copied().min().unwrap_or(0);
    if draws.iter().any(|&n| n != per_chain) {
        let each: Vec<String> = paths
            .iter()
            .zip(&draws)
            .map(|(p, n)| format!("{n} in {}", p.display()))
            .collect();
        notices.push(format!(
            "the chains have unequal numbers of draws after warm-up ({}): every chain is cut to its first {per_chain} draws, and the summary, divergences, tree depths and E-BFMI are of those",
            each.join(", ")
        ));
        for f in &mut files {
            f.draws.truncate(per_chain);
        }
    }
    let first = &files[0];
    let params: Vec<usize> = (0..first.columns.len())
        .filter(|&j| !first.columns[j].ends_with("__"))
        .collect();
    let names: Vec<String> = params
        .iter()
        .map(|&j| language_name(&first.columns[j]))
        .collect();
    let summaries: Vec<Summary> = params
        .iter()
        .map(|&j| {
            let chains: Vec<Vec<f64>> = files
                .iter()
                .map(|f| f.draws.iter().map(|r| r[j]).collect())
                .collect();
            summarize(&chains)
        })
        .collect();
    let count = |f: &StanCsv, col: &str, hit: &dyn Fn(f64) -> bool| -> usize {
        f.column(col)
            .map_or(0, |c| c.into_iter().filter(|&v| hit(v)).count())
    };
    let divergences = files
        .iter()
        .map(|f| count(f, "divergent__", &|v| v != 0.0))
        .sum();
    // Each file's trees against its own `max_depth`.
    let max_depth_hits = files
        .iter()
        .map(
            |f| match config(f, "max_depth").and_then(|v| v.parse::<f64>().ok()) {
                Some(m) => count(f, "treedepth__", &|v| v >= m),
                None => 0,
            },
        )
        .sum();
    let ebfmis: Vec<f64> = files
        .iter()
        .filter_map(|f| f.column("energy__"))
        .map(|e| ebfmi(&e))
        .collect();
    // The sampler that names itself so in CmdStan's terms.
    let engine = config(first, "algorithm")
        .and_then(|a| tempest_samplers::settings::sampler_of(a, config(first, "engine")))
        .map_or("mcmc", |s| s.schema.name);
    // A chain whose params never change did not move.
    let stuck: Vec<usize> = (0..files.len())
        .filter(|&c| {
            let d = &files[c].draws;
            d.iter().all(|r| params.iter().all(|&j| r[j] == d[0][j]))
        })
        .collect();
    let step_sizes: Vec<f64> = files
        .iter()
        .map(|f| f.step_size.unwrap_or(f64::NAN))
        .collect();
    let first_chain = chain_ids.iter().flatten().min().copied().unwrap_or(1) as usize;
    notices.extend(warnings(&RunDiagnostics {
        names: &names,
        summaries: &summaries,
        chains: files.len(),
        total: per_chain * files.len(),
        per_chain,
        divergences,
        max_depth_hits,
        ebfmi: &ebfmis,
        first_chain,
        stuck: &stuck,
        step_sizes: &step_sizes,
    }));
    Ok(MergedRun {
        engine,
        files: paths.to_vec(),
        chain_ids,
        draws,
        per_chain,
        names,
        summaries,
        divergences,
        max_depth_hits,
        ebfmi: ebfmis,
        warnings: notices,
    })
}

/// One file read as a chain: a Stan CSV file of draws with `lp__`, its
/// saved warm-up draws left out, at least two draws, every value of
/// `lp__` and of the params finite.
fn read_chain(p: &Path) -> Result<StanCsv, Error> {
    let mut csv = read_stan_csv(p)?;
    if csv.column_index("lp__").is_none() {
        return Err(bad(
            p,
            "not a Stan CSV file of draws: it has no `lp__` column (write one with `tempest run ... --csv PREFIX`, or CmdStan's output file)",
        ));
    }
    let warm = match config(&csv, "save_warmup") {
        Some("1" | "true") => config(&csv, "num_warmup")
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0),
        _ => 0,
    };
    let warm = warm.min(csv.draws.len());
    csv.draws.drain(..warm);
    csv.lines.drain(..warm.min(csv.lines.len()));
    if csv.draws.len() < 2 {
        return Err(bad(
            p,
            format!(
                "{} draws after warm-up: a chain needs at least two",
                csv.draws.len()
            ),
        ));
    }
    for (i, row) in csv.draws.iter().enumerate() {
        let bad_column = row
            .iter()
            .zip(&csv.columns)
            .position(|(v, c)| !v.is_finite() && (c == "lp__" || !c.ends_with("__")));
        if let Some(j) = bad_column {
            let line = csv
                .lines
                .get(i)
                .map_or(String::new(), |l| format!("line {l}, "));
            return Err(bad(
                p,
                format!(
                    "{line}column `{}` (draw {} after warm-up): the value {} is not a finite draw, so the chain cannot be summarised",
                    csv.columns[j],
                    i + 1,
                    crate::error::num(row[j])
                ),
            )
            .with_note("a chain whose draws ran off to infinity, or a damaged file; leave the file out, or rerun the chain"));
        }
    }
    Ok(csv)
}

impl MergedRun {
    /// The summary and JSON of the merged chains, as a single run's.
    pub fn report(&self) -> Report {
        let mut r = Report::new(self.engine);
        let total = self.per_chain * self.files.len();
        let ids: Vec<String> = self
            .chain_ids
            .iter()
            .map(|i| i.map_or("?".into(), |k| k.to_string()))
            .collect();
        let cut = if self.draws.iter().any(|&n| n != self.per_chain) {
            format!(" (every chain cut to {})", self.per_chain)
        } else {
            String::new()
        };
        r.line(format!(
            "{} chains from {} files (ids {}), {total} draws after warm-up{cut}",
            self.files.len(),
            self.files.len(),
            ids.join(", ")
        ));
        let width = self.names.iter().map(|n| n.len()).max().unwrap_or(4).max(4);
        let mut t = Table::new(0, Some(width), 1, &SUMMARY_WIDTHS);
        t.header(&SUMMARY_HEADER);
        for (n, s) in self.names.iter().zip(&self.summaries) {
            t.row(n.clone(), summary_cells(s));
        }
        r.table(t);
        r.line(format!("divergences: {} of {total}", self.divergences));
        for w in &self.warnings {
            r.warning(w.clone());
        }
        let mut summary = Map::new();
        for (n, s) in self.names.iter().zip(&self.summaries) {
            summary.insert(n.clone(), summary_json(s));
        }
        let (min_ess, max_rhat) = extremes(&self.summaries);
        let files: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        r.field("summary", summary)
            .field("divergences", self.divergences)
            .field("max_depth_hits", self.max_depth_hits)
            .field("chains", self.files.len())
            .field("chain_ids", json!(self.chain_ids))
            .field("draws", json!(self.draws))
            .field("draws_per_chain", self.per_chain)
            .field("ebfmi", json!(self.ebfmi))
            .field("ess_bulk_min", min_ess)
            .field("rhat_max", max_rhat)
            .field("files", json!(files));
        r
    }
}
