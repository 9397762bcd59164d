//! A repetition study of control variates: over many seeded runs of a
//! model, the error of one estimate (or of the log evidence) against a
//! known value, for several control-variate methods and numbers of draws.
//!
//! The borehole study of benches/README.md:
//!
//!   cargo run --release --example cv_study -- examples/borehole.tempest \
//!     --estimate f_high --truth 72.88193 --draws 10,20,50,100,150 --reps 100 \
//!     --method none --method "stein(rbf)" --method "vector_valued(rbf, B = learned)"
//!
//! For a model with an `estimate` block (no `using` clause), each method is
//! put there in turn and `draws` is set to each number. For an `evidence`
//! model, `--estimate evidence` reads the log evidence, each method is the
//! `control_variates` setting, and `--sampler "nuts { chains = 1 draws =
//! {draws} }"` gives the sampler of every rung with `{draws}` replaced by
//! each number (the van der Pol study of benches/README.md):
//!
//!   cargo run --release --example cv_study -- examples/vanderpol_evidence.tempest \
//!     --data examples/data/vanderpol.csv --estimate evidence --truth 7.928158713017198 \
//!     --sampler "nuts { chains = 1  warmup = 200  draws = {draws} }" --draws 80 --reps 20 \
//!     --within 0.05 --method "stein(rbf)" --method "vector_valued(rbf, B = learned)"
//!
//! With several comma-separated values after `--truth`, the estimate's
//! components `NAME[0]`, `NAME[1]`, ... are compared with them and each
//! run's error is the sum of the components' absolute errors (the
//! Lotka–Volterra study of benches/README.md).
//!
//! Run r uses seed r (1..=reps) for every method and number of draws, so
//! methods see the same draws. "none" is plain Monte Carlo. Each cell shows
//! the mean absolute error (its standard error), the share of runs whose
//! estimate ± 1.96 reported standard errors covers the truth (95 % if the
//! reported errors are honest), and with `--within e` the number of runs
//! within e of the truth; a last table gives each cell's bias and spread
//! (standard deviation over runs). `--plot FILE.png` draws every cell's
//! estimates as a box plot beside the true value.

use rayon::prelude::*;
use tempest::{AsEvidence, AsMcmc};
use tempest::{Data, Model, Overrides, Registry, RunOptions};

struct Args {
    model: String,
    data: Option<String>,
    estimate: String,
    truth: Vec<f64>,
    draws: Vec<usize>,
    reps: u64,
    methods: Vec<String>,
    sampler: Option<String>,
    within: Option<f64>,
    plot: Option<String>,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let model = it.next().ok_or("usage: cv_study MODEL --estimate NAME --truth V [--data FILE] [--draws 10,50] [--reps 100] [--method M]... [--sampler S] [--within E] [--plot FILE.png]")?;
    let mut a = Args {
        model,
        data: None,
        estimate: String::new(),
        truth: vec![],
        draws: vec![50],
        reps: 100,
        methods: vec![],
        sampler: None,
        within: None,
        plot: None,
    };
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--estimate" => a.estimate = v,
            "--data" => a.data = Some(v),
            "--truth" => {
                a.truth = v
                    .split(',')
                    .map(|t| num(t.trim()))
                    .collect::<Result<_, _>>()?
            }
            "--within" => a.within = Some(num(&v)?),
            "--reps" => a.reps = v.parse().map_err(|e| format!("--reps: {e}"))?,
            "--sampler" => a.sampler = Some(v),
            "--plot" => a.plot = Some(v),
            "--draws" => {
                a.draws = v
                    .split(',')
                    .map(|s| s.trim().parse().map_err(|e| format!("--draws: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--method" => a.methods.push(v),
            f => return Err(format!("unknown option {f}")),
        }
    }
    if a.methods.is_empty() {
        a.methods.push("none".into());
    }
    if a.estimate.is_empty() || a.truth.is_empty() || a.truth.iter().any(|t| !t.is_finite()) {
        return Err("--estimate and --truth are required".into());
    }
    Ok(a)
}

/// The model text with `using control_variates(method)` after its
/// `estimate` block.
fn with_method(text: &str, method: &str) -> Result<String, String> {
    let start = text
        .find("estimate {")
        .ok_or("the model has no `estimate {` block")?;
    let mut depth = 0;
    for (i, c) in text[start..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let at = start + i + 1;
                    return Ok(format!(
                        "{} using control_variates({method}){}",
                        &text[..at],
                        &text[at..]
                    ));
                }
            }
            _ => {}
        }
    }
    Err("the `estimate` block is not closed".into())
}

/// One run's value and reported standard error.
fn one_run(
    a: &Args,
    model: &Model,
    bound: &tempest::Bound,
    method: &str,
    m: usize,
    seed: u64,
) -> Result<Vec<(f64, f64)>, String> {
    let evidence = a.estimate == "evidence";
    let settings = if evidence {
        let mut s = vec![("control_variates".to_string(), method.to_string())];
        if let Some(sampler) = &a.sampler {
            s.push(("sampler".into(), sampler.replace("{draws}", &m.to_string())));
        }
        s
    } else {
        vec![("draws".into(), m.to_string())]
    };
    let fit = tempest::run(
        bound,
        RunOptions {
            seed: Some(seed),
            settings,
            ..Default::default()
        },
    )
    .map_err(|e| model.render(&e).to_string())?;
    if evidence {
        let e = fit.as_evidence().ok_or("not an evidence fit")?;
        return Ok(vec![(e.log_evidence, e.mcse)]);
    }
    let mc = fit.as_mcmc().ok_or("not a sampling fit")?;
    // One value per truth: the estimate itself, or its components
    // `name[0]`, `name[1]`, ... when several truths are given.
    let names: Vec<String> = if a.truth.len() == 1 {
        vec![a.estimate.clone()]
    } else {
        (0..a.truth.len())
            .map(|k| format!("{}[{k}]", a.estimate))
            .collect()
    };
    names
        .iter()
        .map(|n| {
            let e = mc
                .estimates
                .iter()
                .find(|e| &e.name == n)
                .ok_or(format!("no estimate `{n}`"))?;
            Ok(e.cv
                .as_ref()
                .map_or((e.summary.mean, e.summary.mcse), |c| (c.cv, c.cv_se)))
        })
        .collect()
}

fn main() -> Result<(), String> {
    let a = args()?;
    let text = std::fs::read_to_string(&a.model).map_err(|e| format!("{}: {e}", a.model))?;
    let data = match &a.data {
        Some(p) => Data::read(std::path::Path::new(p)).map_err(|e| format!("{p}: {e:?}"))?,
        None => Data::values(),
    };
    println!(
        "{}: `{}` against {} over {} runs: mean absolute error (its standard error), coverage of the reported 95 % intervals{}",
        a.model,
        a.estimate,
        a.truth
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        a.reps,
        a.within
            .map_or(String::new(), |e| format!(", runs within {e}"))
    );
    let mut spread = Vec::new();
    let mut boxes = Vec::new();
    print!("{:>6}", "draws");
    for m in &a.methods {
        print!("  {m:>34}");
    }
    println!();
    for &m in &a.draws {
        print!("{m:>6}");
        for method in &a.methods {
            let src = if a.estimate == "evidence" {
                text.clone()
            } else {
                with_method(&text, method)?
            };
            let model =
                Model::from_str(&a.model, &src, &Registry::default()).map_err(|e| e.to_string())?;
            let bound = model
                .bind(&data, &Overrides::default())
                .map_err(|e| model.render(&e).to_string())?;
            let runs: Vec<Result<Vec<(f64, f64)>, String>> = (1..=a.reps)
                .into_par_iter()
                .map(|seed| one_run(&a, &model, &bound, method, m, seed))
                .collect();
            let runs: Vec<Vec<(f64, f64)>> = runs.into_iter().collect::<Result<_, _>>()?;
            let n = runs.len() as f64;
            // Each run's error: the sum over components of |estimate − truth|.
            let errs: Vec<f64> = runs
                .iter()
                .map(|r| {
                    r.iter()
                        .zip(&a.truth)
                        .map(|((v, _), t)| (v - t).abs())
                        .sum()
                })
                .collect();
            let pairs = runs.iter().flatten().count() as f64;
            let covered = runs
                .iter()
                .flat_map(|r| r.iter().zip(&a.truth))
                .filter(|((v, se), t)| (v - *t).abs() <= 1.96 * se)
                .count() as f64
                / pairs;
            let mae = errs.iter().sum::<f64>() / n;
            let sd = (errs.iter().map(|e| (e - mae).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            let within = a.within.map_or(String::new(), |w| {
                format!(
                    " {}/{}",
                    errs.iter().filter(|e| **e <= w).count(),
                    runs.len()
                )
            });
            print!(
                "  {:>34}",
                format!(
                    "{mae:.3} ({:.3}) {:.0}%{within}",
                    sd / n.sqrt(),
                    100.0 * covered
                )
            );
            // One component: the estimates; several: each run's summed error.
            let shown: Vec<f64> = if a.truth.len() == 1 {
                runs.iter().map(|r| r[0].0).collect()
            } else {
                errs.clone()
            };
            let target = if a.truth.len() == 1 { a.truth[0] } else { 0.0 };
            let mean = shown.iter().sum::<f64>() / n;
            let sdv = (shown.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            spread.push((m, method.clone(), mean - target, sdv));
            boxes.push(tempest::output::plot_box::BoxGroup {
                label: format!("{method}, {m}"),
                values: shown,
            });
        }
        println!();
    }
    if let Some(p) = &a.plot {
        tempest::output::plot_box::box_plots(
            std::path::Path::new(p),
            &format!("{} over {} runs", a.estimate, a.reps),
            if a.truth.len() == 1 {
                a.estimate.as_str()
            } else {
                "summed absolute error"
            },
            &boxes,
            Some(if a.truth.len() == 1 { a.truth[0] } else { 0.0 }),
        )
        .map_err(|e| e.to_string())?;
        println!("plot written to {p}");
    }
    println!("bias and spread (standard deviation over runs):");
    for (m, method, bias, sd) in spread {
        println!("{m:>6}  {method:>34}  bias {bias:+.4}  spread {sd:.4}");
    }
    Ok(())
}
