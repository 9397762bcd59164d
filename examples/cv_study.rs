//! A repetition study of control variates: the mean absolute error of one
//! estimate over many seeded runs of a model, for several control-variate
//! methods and numbers of draws, against a known value.
//!
//! Run (the borehole study of benches/README.md):
//!
//!   cargo run --release --example cv_study -- examples/borehole.tempest \
//!     --estimate f_high --truth 72.88193 --draws 10,20,50,100,150 --reps 100 \
//!     --method none --method "stein(rbf)" --method "vector_valued(rbf, B = learned)"
//!
//! The model's `estimate` block must have no `using` clause: each method is
//! put there in turn. Run r uses seed r (1..=reps) for every method and
//! number of draws, so methods see the same draws. "none" reports the plain
//! Monte Carlo mean. Beside each error: the share of runs whose estimate
//! ± 1.96 reported standard errors covers the truth (95 % if the errors
//! are honest).

use rayon::prelude::*;
use tempest::{Data, Model, Overrides, Registry, RunOptions};

struct Args {
    model: String,
    estimate: String,
    truth: f64,
    draws: Vec<usize>,
    reps: u64,
    methods: Vec<String>,
}

fn args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let model = it.next().ok_or("usage: cv_study MODEL --estimate NAME --truth V [--draws 10,50] [--reps 100] [--method M]...")?;
    let mut a = Args {
        model,
        estimate: String::new(),
        truth: f64::NAN,
        draws: vec![50],
        reps: 100,
        methods: vec![],
    };
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--estimate" => a.estimate = v,
            "--truth" => a.truth = v.parse().map_err(|e| format!("--truth: {e}"))?,
            "--reps" => a.reps = v.parse().map_err(|e| format!("--reps: {e}"))?,
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
    if a.estimate.is_empty() || !a.truth.is_finite() {
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

fn main() -> Result<(), String> {
    let a = args()?;
    let text = std::fs::read_to_string(&a.model).map_err(|e| format!("{}: {e}", a.model))?;
    println!(
        "{}: mean absolute error of `{}` against {} over {} runs (its standard error in brackets) and the share of runs whose reported 95 % interval covers the truth",
        a.model, a.estimate, a.truth, a.reps
    );
    print!("{:>6}", "draws");
    for m in &a.methods {
        print!("  {m:>34}");
    }
    println!();
    for &m in &a.draws {
        print!("{m:>6}");
        for method in &a.methods {
            let src = with_method(&text, method)?;
            let model =
                Model::from_str(&a.model, &src, &Registry::default()).map_err(|e| e.to_string())?;
            let bound = model
                .bind(&Data::values(), &Overrides::default())
                .map_err(|e| model.render(&e).to_string())?;
            let errs: Vec<Result<(f64, f64), String>> = (1..=a.reps)
                .into_par_iter()
                .map(|seed| {
                    let fit = tempest::run(
                        &bound,
                        RunOptions {
                            seed: Some(seed),
                            settings: vec![("draws".into(), m.to_string())],
                            ..Default::default()
                        },
                    )
                    .map_err(|e| model.render(&e).to_string())?;
                    let mc = fit.as_mcmc().ok_or("not a sampling fit")?;
                    let e = mc
                        .estimates
                        .iter()
                        .find(|e| e.name == a.estimate)
                        .ok_or(format!("no estimate `{}`", a.estimate))?;
                    let (v, se) =
                        e.cv.as_ref()
                            .map_or((e.summary.mean, e.summary.mcse), |c| (c.cv, c.cv_se));
                    Ok(((v - a.truth).abs(), se))
                })
                .collect();
            let errs: Vec<(f64, f64)> = errs.into_iter().collect::<Result<_, _>>()?;
            let n = errs.len() as f64;
            let covered = errs.iter().filter(|(e, se)| *e <= 1.96 * se).count() as f64 / n;
            let errs: Vec<f64> = errs.iter().map(|(e, _)| *e).collect();
            let mean = errs.iter().sum::<f64>() / n;
            let sd = (errs.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            print!(
                "  {:>34}",
                format!("{mean:.3} ({:.3}) {:.0}%", sd / n.sqrt(), 100.0 * covered)
            );
        }
        println!();
    }
    Ok(())
}
