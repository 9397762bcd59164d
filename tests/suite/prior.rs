//! `sample_prior`: independent draws from the priors (ancestral, truncated
//! to bounds) against closed forms, the borehole expectation by plain Monte
//! Carlo and by control variates against its quadrature value, and the
//! priors it refuses.

use crate::common;
use common::*;
use tempest::AsMcmc;

/// Run a model text without data and read its JSON.
fn run_model(dir: &str, model: &str, extra: &[&str]) -> serde_json::Value {
    let d = out_dir(dir);
    let path = d.join("m.tempest");
    std::fs::write(&path, model).unwrap();
    let json = d.join("run.json");
    let mut args = vec![
        "run",
        path.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    assert_ok(&tempest(&args));
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

#[test]
fn hierarchical_and_truncated_priors_are_drawn_ancestrally() {
    // tau ~ half-normal(1): E = √(2/π), E[tau²] = 1, so Var(w) = 1;
    // s ~ normal(1, 0.5) truncated to s > 0: E = 1 + 0.5 φ(2)/Φ(2).
    let j = run_model(
        "prior_hier",
        r#"
param {
  w : vector[3] ~ normal(0, tau)
  tau : positive ~ normal(0, 1)
  s : positive ~ normal(1, 0.5)
}
estimate { w2 = E[w[0]^2] }
infer sample_prior { draws = 40000  seed = 3 }
"#,
        &[],
    );
    let mean = |k: &str| j["summary"][k]["mean"].as_f64().unwrap();
    let mcse = |k: &str| j["summary"][k]["mcse"].as_f64().unwrap();
    let tau = (2.0 / std::f64::consts::PI).sqrt();
    assert!(
        (mean("tau") - tau).abs() < 4.0 * mcse("tau"),
        "{}",
        mean("tau")
    );
    let phi2 = (-2.0f64).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let big_phi2 = 0.977_249_868_051_820_8;
    let s = 1.0 + 0.5 * phi2 / big_phi2;
    assert!(
        (mean("s") - s).abs() < 4.0 * mcse("s"),
        "{} vs {s}",
        mean("s")
    );
    let w2 = &j["estimates"]["w2"];
    let (m, se) = (w2["mc"].as_f64().unwrap(), w2["mc_se"].as_f64().unwrap());
    assert!((m - 1.0).abs() < 4.0 * se, "E[w²] = {m} ± {se}");
    // Independent draws: no sampler warnings, and ESS near the draws.
    assert!(j["summary"]["tau"]["ess_bulk"].as_f64().unwrap() > 30000.0);
}

#[test]
fn the_same_seed_gives_the_same_draws_on_any_thread_count() {
    let model = "param { a : real ~ normal(0, 1)  b : positive ~ gamma(2, 1) }\ninfer sample_prior { draws = 3000 }\n";
    let d = out_dir("prior_threads");
    let path = d.join("m.tempest");
    std::fs::write(&path, model).unwrap();
    let mut outs = Vec::new();
    for threads in ["1", "2"] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tempest"))
            .args(["run", path.to_str().unwrap(), "-q", "--seed", "9"])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        outs.push(
            assert_ok(&o)
                .lines()
                .filter(|l| !l.starts_with("engine"))
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    assert_eq!(outs[0], outs[1]);
}

/// Mean absolute error of `f_high` over seeds 1..=reps with `draws` draws.
fn borehole_mae(method: &str, draws: usize, reps: u64) -> f64 {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/borehole.tempest"
    ))
    .unwrap();
    let text = if method == "none" {
        text
    } else {
        text.replacen(
            "\n}\ninfer",
            &format!("\n}} using control_variates({method})\ninfer"),
            1,
        )
    };
    let m = model(&text);
    let b = bind(&m, &tempest::Data::values());
    let mut total = 0.0;
    for seed in 1..=reps {
        let fit = tempest::run(
            &b,
            tempest::RunOptions {
                seed: Some(seed),
                settings: vec![("draws".into(), draws.to_string())],
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
        let e = fit
            .as_mcmc()
            .unwrap()
            .estimates
            .iter()
            .find(|e| e.name == "f_high")
            .unwrap()
            .clone();
        let v = e.cv.as_ref().map_or(e.summary.mean, |c| c.cv);
        total += (v - 72.88193).abs();
    }
    total / reps as f64
}

#[test]
fn the_borehole_expectation_matches_quadrature_and_control_variates_beat_plain_monte_carlo() {
    // Plain Monte Carlo with many draws: within 4 standard errors of the
    // Gauss-Hermite value.
    let j = run_model(
        "prior_borehole",
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/borehole.tempest"
        ))
        .unwrap(),
        &["--set", "draws=40000"],
    );
    let e = &j["estimates"]["f_high"];
    let (m, se) = (e["mc"].as_f64().unwrap(), e["mc_se"].as_f64().unwrap());
    assert!((m - 72.88193).abs() < 4.0 * se, "{m} ± {se}");
    // 50 draws, 30 seeds: kernel control variates with per-coordinate
    // scales, jointly over both fidelities, well under 0.6× plain MC.
    let mc = borehole_mae("none", 50, 30);
    let vv = borehole_mae("vector_valued(rbf, B = learned)", 50, 30);
    let cf = borehole_mae("stein(rbf)", 50, 30);
    assert!(
        vv < 0.6 * mc && cf < 0.6 * mc,
        "MC {mc}, vv-CV {vv}, CF {cf}"
    );
}

#[test]
fn priors_it_cannot_draw_are_refused_before_drawing() {
    let d = out_dir("prior_refused");
    let cases = [
        (
            "param { a : real<lower=0, upper=1> }\ninfer sample_prior { }\n",
            "has none",
        ),
        (
            "likelihood lap(y : real, f : real, b : positive) { -abs(y - f) / b }\nparam { a : real ~ lap(0, 1) }\ninfer sample_prior { }\n",
            "built-in distributions",
        ),
        (
            "param { a : positive ~ normal(b, 1)  b : positive ~ normal(a, 1) }\ninfer sample_prior { }\n",
            "cycle",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let p = d.join(format!("m{i}.tempest"));
        std::fs::write(&p, text).unwrap();
        let o = tempest(&["run", p.to_str().unwrap(), "-q"]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(
            !o.status.success() && err.contains(want) && !err.contains("panicked"),
            "{err}"
        );
    }
}
