//! Hostile input to the samplers and to `tempest summary`: draws too few
//! for the diagnostics, absurd step sizes, control-variate methods the
//! draws cannot support, independent draws' Monte Carlo error, the
//! warm-up's time, and Stan CSV files that are not chains of one run.
//! Each test is one fault, through the real binary unless it needs the
//! library's types.

use crate::common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// Two params, no data: a quick posterior for every sampler.
const TWO: &str = "param { mu : real ~ normal(0, 1)  s : positive ~ half_normal(1) }\n";

/// Write `text` to `name` in `dir`; its path.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write");
    p.to_string_lossy().into_owned()
}

/// [`TWO`] with the `infer` block `infer`, written to `name` in `dir`.
fn two(dir: &Path, name: &str, infer: &str) -> String {
    file(dir, name, &format!("{TWO}{infer}\n"))
}

/// Run the binary; the output and how long it took.
fn timed(args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let o = tempest(args);
    (o, start.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).expect("json")).expect("valid json")
}

/// `tempest run MODEL -q --csv DIR/PREFIX` plus `extra`; the chains' files.
fn chains(
    dir: &Path,
    model: &str,
    prefix: &str,
    extra: &[&str],
    n: usize,
    offset: usize,
) -> Vec<String> {
    let p = dir.join(prefix);
    let mut args = vec!["run", model, "-q", "--csv", p.to_str().unwrap()];
    args.extend_from_slice(extra);
    assert_ok(&tempest(&args));
    (offset + 1..=offset + n)
        .map(|k| format!("{}_{k}.csv", p.display()))
        .collect()
}

#[test]
fn one_chain_with_one_draw_is_summarised_with_a_warning_not_called_infinite() {
    let dir = out_dir("hm_one_draw");
    let m = two(
        &dir,
        "m.tempest",
        "infer nuts { chains = 1  warmup = 30  draws = 1 }",
    );
    let j = dir.join("one.json");
    let o = tempest(&["run", &m, "-q", "--json", j.to_str().unwrap()]);
    let out = assert_ok(&o);
    assert!(!stderr(&o).contains("infinity"), "{}", stderr(&o));
    assert!(out.contains("1 chain × 1 draw after"), "{out}");
    assert!(out.contains("one draw in all"), "{out}");
    let j = json(&j);
    assert!(j["summary"]["mu"]["mean"].as_f64().unwrap().is_finite());
    assert!(
        j["warnings"][0]
            .as_str()
            .unwrap()
            .contains("cannot be computed")
    );
}

#[test]
fn two_chains_with_one_draw_warn_that_r_hat_and_ess_are_undefined() {
    let dir = out_dir("hm_two_chains");
    let m = two(
        &dir,
        "m.tempest",
        "infer nuts { chains = 2  warmup = 30  draws = 1 }",
    );
    let out = assert_ok(&tempest(&["run", &m, "-q"]));
    assert!(
        out.contains(
            "1 draw per chain: R-hat, the ESS and the Monte Carlo standard error cannot be computed"
        ),
        "{out}"
    );
    // Four draws per chain: R-hat is defined (each chain split in two),
    // the ESS is not.
    let out = assert_ok(&tempest(&[
        "run", &m, "-q", "--set", "draws=4", "--set", "chains=1",
    ]));
    assert!(
        out.contains(
            "4 draws per chain: the ESS and the Monte Carlo standard error cannot be computed"
        ),
        "{out}"
    );
    let out = assert_ok(&tempest(&["run", &m, "-q", "--set", "draws=6"]));
    assert!(!out.contains("cannot be computed"), "{out}");
}

#[test]
fn an_absurd_step_size_is_a_located_settings_error() {
    let dir = out_dir("hm_step_setting");
    let m = two(
        &dir,
        "m.tempest",
        "infer nuts { chains = 1  warmup = 50  draws = 20  step_size = 1e300 }",
    );
    let err = assert_clean_failure(&tempest(&["run", &m, "-q"]));
    assert!(
        err.contains("`step_size` expects a number in (1e-12, 1e7]"),
        "{err}"
    );
    assert!(
        err.contains("m.tempest:2:") && err.contains("this setting"),
        "{err}"
    );
    let m = two(
        &dir,
        "n.tempest",
        "infer nuts { chains = 1  warmup = 50  draws = 20 }",
    );
    let err = assert_clean_failure(&tempest(&["run", &m, "-q", "--set", "step_size=1e-300"]));
    assert!(err.contains("--set step_size=1e-300"), "{err}");
}

#[test]
fn the_step_size_search_recovers_from_any_start() {
    use tempest::infer::mcmc::chain::{Adaptation, Chain, ChainConfig, Method};
    use tempest::infer::mcmc::hamiltonian::Target;
    /// A standard normal in two dimensions.
    struct Normal;
    impl Target for Normal {
        fn dim(&self) -> usize {
            2
        }
        fn logp_grad(&self, q: &[f64], g: &mut [f64]) -> Result<f64, tempest::Error> {
            g[0] = -q[0];
            g[1] = -q[1];
            Ok(-0.5 * (q[0] * q[0] + q[1] * q[1]))
        }
    }
    for start in [1e300, 1e8, 1e-300, f64::INFINITY] {
        let cfg = ChainConfig {
            method: Method::Nuts { max_depth: 10 },
            warmup: 100,
            draws: 50,
            target_accept: 0.8,
            step_size: Some(start),
            adaptation: Adaptation::Stan,
            early_stop: false,
        };
        let mut c = Chain::new(&Normal, 0, 1, cfg).unwrap();
        // One leapfrog step of a unit normal is accepted at 0.8 near ε ≈ 1.
        assert!((0.1..10.0).contains(&c.eps), "from {start}: ε = {}", c.eps);
        let mut draws = Vec::new();
        while !c.done() {
            draws.extend(c.step(&Normal));
        }
        assert!(
            (0.1..10.0).contains(&c.eps),
            "from {start}: adapted ε = {}",
            c.eps
        );
        let moved = draws.windows(2).filter(|w| w[0].q != w[1].q).count();
        assert!(moved > 25, "from {start}: {moved} of 49 transitions moved");
    }
}

#[test]
fn a_chain_that_never_moves_is_named() {
    let dir = out_dir("hm_stuck");
    let m = two(
        &dir,
        "m.tempest",
        "infer mala { chains = 2  warmup = 0  draws = 30  step_size = 1e6 }",
    );
    let out = assert_ok(&tempest(&["run", &m, "-q"]));
    assert!(
        out.contains("chains 1 (step size 1e6), 2 (step size 1e6) did not move"),
        "{out}"
    );
}

/// A model with an estimate and a control-variate method, its sampler
/// configured to warm up for long: a check after sampling would take
/// minutes, a check before it a moment.
fn cv_model(dir: &Path, method: &str, engine: &str) -> String {
    file(
        dir,
        "cv.tempest",
        &format!(
            "{TWO}estimate {{ m = E[mu]  v = E[[s, mu]] }} using control_variates({method})\n{engine}\n"
        ),
    )
}

#[test]
fn control_variate_methods_are_checked_before_sampling() {
    let dir = out_dir("hm_cv_before");
    let slow = "infer nuts { chains = 1  warmup = 1000000  draws = 3 }";
    for (method, says) in [
        ("stein(rbf)", "need 4, but the run has 3 draws"),
        ("secf(rbf)", "need 4, but the run has 3 draws"),
        ("vector_valued(rbf)", "at least 4 draws, but the run has 3"),
        (
            "poly1",
            "take more draws or give a ridge penalty (`poly1(ridge = 1e-3)`)",
        ),
    ] {
        let m = cv_model(&dir, method, slow);
        let csv = dir.join("draws");
        let _ = std::fs::remove_file(dir.join("draws_1.csv"));
        let (o, took) = timed(&["run", &m, "-q", "--csv", csv.to_str().unwrap()]);
        let err = assert_clean_failure(&o);
        assert!(err.contains(says), "{method}: {err}");
        assert!(
            err.contains("cv.tempest:2:") && err.contains("this method"),
            "{err}"
        );
        assert!(took < Duration::from_secs(20), "{method}: {took:?}");
        assert!(
            !dir.join("draws_1.csv").exists(),
            "{method}: a CSV file was opened"
        );
    }
    // A fixed task matrix for the wrong number of integrals (three
    // components: m, v[0], v[1]).
    let m = cv_model(
        &dir,
        "vector_valued(rbf, B = fixed([[1, 0.5], [0.5, 1]]))",
        "infer nuts { chains = 1  warmup = 1000000  draws = 30 }",
    );
    let (o, took) = timed(&["run", &m, "-q"]);
    let err = assert_clean_failure(&o);
    assert!(
        err.contains("the task matrix B is 2×2, but there are 3 integrals"),
        "{err}"
    );
    assert!(took < Duration::from_secs(20), "{took:?}");
    // sample_prior: at the method, before the draws.
    let m = cv_model(&dir, "poly2", "infer sample_prior { draws = 3 }");
    let err = assert_clean_failure(&tempest(&["run", &m, "-q"]));
    assert!(
        err.contains("poly2 control variates fit 5 coefficients"),
        "{err}"
    );
    assert!(err.contains("this method"), "{err}");
}

#[test]
fn evidence_refuses_rungs_too_short_for_their_error() {
    let dir = out_dir("hm_evidence");
    let data = file(&dir, "y.csv", "y\n0.1\n0.5\n-0.3\n");
    let m = file(
        &dir,
        "e.tempest",
        "data { n : int  y : vector[n] }\nparam { mu : real ~ normal(0, 1) }\n\
         model { y ~ normal(mu, 1) ^ temperature }\n\
         infer evidence { rungs = 3, sampler = nuts { warmup = 5  chains = 1  draws = 1 } }\n",
    );
    let err = assert_clean_failure(&tempest(&["run", &m, "--data", &data, "-q"]));
    assert!(err.contains("1 draw per chain at each rung"), "{err}");
    assert!(
        err.contains("e.tempest:4:") && err.contains("this setting"),
        "{err}"
    );
}

#[test]
fn independent_draws_have_mcse_sd_over_root_n() {
    // x ~ normal(3, 2): E[x] = 3; for independent draws mcse = sd/√n
    // exactly and the ESS is n, for the params and the estimates.
    let dir = out_dir("hm_prior_mcse");
    let m = file(
        &dir,
        "p.tempest",
        "param { x : real ~ normal(3, 2) }\nestimate { ex = E[x] }\ninfer sample_prior { draws = 50  seed = 4 }\n",
    );
    let path = dir.join("p.json");
    let out = assert_ok(&tempest(&[
        "run",
        &m,
        "-q",
        "--json",
        path.to_str().unwrap(),
    ]));
    assert!(
        out.contains("MCSE = sd/√n") && !out.contains("rhat"),
        "{out}"
    );
    let j = json(&path);
    let s = &j["summary"]["x"];
    let (mean, sd, mcse) = (
        s["mean"].as_f64().unwrap(),
        s["sd"].as_f64().unwrap(),
        s["mcse"].as_f64().unwrap(),
    );
    assert_rel(mcse, sd / 50f64.sqrt(), 1e-12, "mcse");
    assert_eq!(s["ess_bulk"].as_f64(), Some(50.0));
    assert!((mean - 3.0).abs() < 4.0 * mcse, "{mean} ± {mcse}");
    let e = &j["estimates"]["ex"];
    assert_rel(
        e["mc_se"].as_f64().unwrap(),
        sd / 50f64.sqrt(),
        1e-12,
        "estimate mc_se",
    );
    // With control variates the plain Monte Carlo error is the same.
    let m = file(
        &dir,
        "q.tempest",
        "param { x : real ~ normal(3, 2) }\nestimate { ex = E[x] } using control_variates(poly1)\n\
         infer sample_prior { draws = 50  seed = 4 }\n",
    );
    assert_ok(&tempest(&[
        "run",
        &m,
        "-q",
        "--json",
        path.to_str().unwrap(),
    ]));
    let e = &json(&path)["estimates"]["ex"];
    assert_rel(
        e["mc_se"].as_f64().unwrap(),
        sd / 50f64.sqrt(),
        1e-12,
        "cv mc_se",
    );
    // E[x] is linear: poly1 control variates give it exactly.
    assert_rel(e["cv"].as_f64().unwrap(), 3.0, 1e-9, "cv");
}

#[test]
fn the_header_shows_warm_up_and_sampling_time() {
    let dir = out_dir("hm_times");
    let m = two(
        &dir,
        "m.tempest",
        "infer nuts { chains = 2  warmup = 200  draws = 100 }",
    );
    let j = dir.join("t.json");
    let out = assert_ok(&tempest(&["run", &m, "-q", "--json", j.to_str().unwrap()]));
    let head = out.lines().next().unwrap();
    assert!(
        head.contains("s warm-up, ") && head.contains(" s sampling, "),
        "{head}"
    );
    let j = json(&j);
    let (w, s) = (
        j["warmup_seconds"].as_f64().unwrap(),
        j["sampling_seconds"].as_f64().unwrap(),
    );
    assert!(w > 0.0 && s > 0.0, "{w} {s}");
    assert!(
        head.contains(&format!("{w:.2} s warm-up, {s:.2} s sampling")),
        "{head}"
    );
}

/// A tempest run's chains written by `model` with `extra`.
fn run_files(
    dir: &Path,
    model: &str,
    prefix: &str,
    extra: &[&str],
    n: usize,
    offset: usize,
) -> Vec<String> {
    let mut e = vec!["--set", "warmup=40", "--set", "draws=30"];
    e.extend_from_slice(extra);
    let offset_arg = offset.to_string();
    if offset > 0 {
        e.extend(["--chain-offset", offset_arg.as_str()]);
    }
    let n_arg = format!("chains={n}");
    e.extend(["--set", n_arg.as_str()]);
    chains(dir, model, prefix, &e, n, offset)
}

fn summary(files: &[String], extra: &[&str]) -> Output {
    let mut args = vec!["summary"];
    args.extend(files.iter().map(String::as_str));
    args.extend_from_slice(extra);
    tempest(&args)
}

#[test]
fn summary_refuses_a_draw_that_is_not_finite_at_its_line_and_column() {
    let dir = out_dir("hm_summary_nan");
    let m = two(&dir, "m.tempest", "infer nuts {}");
    let files = run_files(&dir, &m, "a", &[], 2, 0);
    let text = std::fs::read_to_string(&files[1]).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    // The fifth draw's `s` (column 9) becomes NaN.
    let header = lines.iter().position(|l| l.starts_with("lp__")).unwrap();
    let at = (header + 1..lines.len())
        .filter(|&i| !lines[i].starts_with('#'))
        .nth(4)
        .unwrap();
    let mut fields: Vec<String> = lines[at].split(',').map(String::from).collect();
    fields[8] = "nan".into();
    lines[at] = fields.join(",");
    let bad = file(&dir, "bad.csv", &(lines.join("\n") + "\n"));
    let err = assert_clean_failure(&summary(&[files[0].clone(), bad], &[]));
    assert!(
        err.contains(&format!(
            "bad.csv: line {}, column `s` (draw 5 after warm-up)",
            at + 1
        )),
        "{err}"
    );
}

#[test]
fn summary_cuts_unequal_chains_and_says_so() {
    let dir = out_dir("hm_summary_unequal");
    let m = two(&dir, "m.tempest", "infer nuts {}");
    let mut files = run_files(&dir, &m, "a", &[], 2, 0);
    files.extend(run_files(&dir, &m, "b", &["--set", "draws=20"], 1, 2));
    let j = dir.join("s.json");
    let out = assert_ok(&summary(&files, &["--json", j.to_str().unwrap()]));
    assert!(
        out.contains("60 draws after warm-up (every chain cut to 20)"),
        "{out}"
    );
    assert!(
        out.contains("unequal numbers of draws after warm-up (30 in"),
        "{out}"
    );
    let j = json(&j);
    assert_eq!(j["draws"], serde_json::json!([30, 30, 20]));
    assert_eq!(j["draws_per_chain"], 20);
    // The summary is that of the cut chains.
    let cut: Vec<String> = files
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let text = std::fs::read_to_string(f).unwrap();
            let mut kept = 0;
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| {
                    if l.starts_with('#') || l.starts_with("lp__") {
                        return true;
                    }
                    kept += 1;
                    kept <= 20
                })
                .collect();
            file(&dir, &format!("cut_{k}.csv"), &(lines.join("\n") + "\n"))
        })
        .collect();
    let jc = dir.join("c.json");
    let out = assert_ok(&summary(&cut, &["--json", jc.to_str().unwrap()]));
    assert!(!out.contains("unequal"), "{out}");
    assert_eq!(j["summary"], json(&jc)["summary"]);
}

#[test]
fn summary_refuses_chains_of_another_posterior_or_sampler() {
    let dir = out_dir("hm_summary_other");
    let m = two(&dir, "m.tempest", "infer nuts {}");
    // The same columns, another prior: another posterior.
    let other = file(
        &dir,
        "other.tempest",
        "param { mu : real ~ normal(0, 5)  s : positive ~ half_normal(1) }\ninfer nuts {}\n",
    );
    let a = run_files(&dir, &m, "a", &[], 1, 0);
    let b = run_files(&dir, &other, "b", &[], 1, 1);
    let err = assert_clean_failure(&summary(&[a[0].clone(), b[0].clone()], &[]));
    assert!(
        err.contains("b_2.csv: its chain drew from another posterior than"),
        "{err}"
    );
    // Another temperature (a `--set`): another posterior.
    let t = file(
        &dir,
        "t.tempest",
        "data { n : int  y : vector[n] }\nparam { mu : real ~ normal(0, 1) }\n\
         model { y ~ normal(mu, 1) ^ temperature }\ninfer nuts {}\n",
    );
    let data = file(&dir, "y.csv", "y\n0.1\n0.5\n-0.3\n");
    let c = run_files(&dir, &t, "c", &["--data", &data], 1, 0);
    let d = run_files(
        &dir,
        &t,
        "d",
        &["--data", &data, "--set", "temperature=0.5"],
        1,
        1,
    );
    let err = assert_clean_failure(&summary(&[c[0].clone(), d[0].clone()], &[]));
    assert!(err.contains("another posterior"), "{err}");
    // Other data rows: another posterior.
    let e = run_files(&dir, &t, "e", &["--data", &data, "--rows", "0..1"], 1, 1);
    let err = assert_clean_failure(&summary(&[c[0].clone(), e[0].clone()], &[]));
    assert!(err.contains("another posterior"), "{err}");
    // Another sampler.
    let f = run_files(&dir, &m, "f", &["--engine", "mala"], 1, 1);
    let err = assert_clean_failure(&summary(&[a[0].clone(), f[0].clone()], &[]));
    assert!(err.contains("its chain was run by mala, but"), "{err}");
    // Files without tempest's fingerprint (CmdStan's): another model name.
    let strip = |p: &str, model: &str| -> String {
        let text: String = std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("# tempest") && !l.starts_with("#   posterior"))
            .map(|l| {
                if l.starts_with("# model = ") {
                    format!("# model = {model}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let out = PathBuf::from(p).with_extension(format!("{model}.csv"));
        std::fs::write(&out, text).unwrap();
        out.to_string_lossy().into_owned()
    };
    let err = assert_clean_failure(&summary(
        &[strip(&a[0], "bernoulli"), strip(&f[0], "radon")],
        &[],
    ));
    assert!(err.contains("its model is `radon`, but"), "{err}");
}

#[test]
fn summary_warns_when_chains_were_tuned_differently() {
    let dir = out_dir("hm_summary_tuning");
    let m = two(&dir, "m.tempest", "infer nuts {}");
    let mut files = run_files(&dir, &m, "a", &[], 2, 0);
    files.extend(run_files(
        &dir,
        &m,
        "b",
        &[
            "--set",
            "target_accept=0.95",
            "--set",
            "adaptation=gradient",
        ],
        1,
        2,
    ));
    let j = dir.join("s.json");
    let out = assert_ok(&summary(&files, &["--json", j.to_str().unwrap()]));
    assert!(
        out.contains("different adapt delta (target_accept): `0.8` in"),
        "{out}"
    );
    assert!(out.contains("different adaptation: `stan` in"), "{out}");
    let w = json(&j)["warnings"].to_string();
    assert!(w.contains("`0.95` in") && w.contains("b_3.csv"), "{w}");
}

#[test]
fn many_latent_values_are_summarised_under_the_gp_name() {
    let out = assert_ok(&tempest(&[
        "run",
        "examples/breast_cancer_nuts.tempest",
        "--data",
        "examples/data/breast_cancer_prepared.csv",
        "--rows",
        "0..24",
        "-q",
        "--set",
        "chains=1",
        "--set",
        "warmup=10",
        "--set",
        "draws=10",
    ]));
    assert!(out.contains("\nf: 25 latent values"), "{out}");
}
