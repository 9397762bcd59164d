//! Fixed cases for the faults the generators found, one test each, so that
//! each stays fixed whatever the generators produce later.

use super::pieces::*;
use super::{check_run, common, out_dir, write};

/// Run a command that must end cleanly; its exit status and output.
fn ran(a: &[&str]) -> super::Ran {
    check_run(a).unwrap_or_else(|e| panic!("`tempest {}`: {e}", a.join(" ")))
}

#[test]
fn a_saved_sampler_fit_with_one_based_ids_predicts() {
    // The training data was saved with the ids already numbered from 0,
    // so reading it back through `levels = 1..J` refused id 0.
    let dir = out_dir("found_ids");
    let model = write(
        &dir,
        "m.tempest",
        "data { n : int\n  J : int = 4\n  g : int<lower=1, upper=J>[n] = column(\"g\", levels = 1..J)\n  y : vector[n] }\n\
         param { a : vector[J] ~ normal(0, 1)\n  sigma : positive ~ normal(0, 1) }\n\
         model { y ~ normal(a[g], sigma) }\ninfer nuts { chains = 1, warmup = 10, draws = 4 }\n",
    );
    let data = write(&dir, "d.csv", &table(8, 2, &[], 4));
    let fit = dir.join("fit.json").to_string_lossy().into_owned();
    let out = ran(&[
        "run", &model, "--data", &data, "--test", &data, "--save", &fit, "-q",
    ])
    .out;
    assert!(
        out.contains("posterior predictive of `y`: 8 test points"),
        "{out}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fit).unwrap()).unwrap();
    assert_eq!(
        saved["data"]["g"],
        serde_json::json!([1, 2, 3, 4, 1, 2, 3, 4])
    );
    let p = ran(&["predict", &model, "--fit", &fit, "--test", &data]);
    assert_eq!(p.code, 0);
    // The same draws give the same predictions as the run.
    let table = |s: &str| {
        s.lines()
            .skip_while(|l| !l.contains("point"))
            .take_while(|l| !l.starts_with("fit saved"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(table(&p.out), table(&out));
}

#[test]
fn a_saved_variational_fit_without_its_trace_is_refused() {
    // With the trace damaged, `predict` reported "ELBO: NaN" and exit 0.
    let dir = out_dir("found_trace");
    let model = write(
        &dir,
        "m.tempest",
        "data { n : int\n  t : vector[n]\n  k : int<lower=0>[n] }\nhyper { ell : positive = 1.0 }\n\
         model { f ~ gp(0, rbf(ell))\n  k ~ poisson_log(f(t)) }\ninfer mirror_descent { steps = 3 }\n",
    );
    let data = write(&dir, "d.csv", &table(8, 2, &[], 1));
    let fit = dir.join("fit.json").to_string_lossy().into_owned();
    ran(&["run", &model, "--data", &data, "--save", &fit, "-q"]);
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fit).unwrap()).unwrap();
    for damaged in [
        serde_json::json!(true),
        serde_json::json!([]),
        serde_json::json!([1.5]),
    ] {
        j["vi"]["trace"] = damaged;
        let bad = write(&dir, "bad.json", &j.to_string());
        let p = ran(&["predict", &model, "--fit", &bad, "--test", &data]);
        assert_eq!(p.code, 1, "{}", p.out);
    }
}

/// The lines of a command's standard error and output together.
fn said(a: &[&str]) -> String {
    let o = common::tempest(a);
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    )
}

#[test]
fn huge_and_tiny_numbers_are_written_in_scientific_notation() {
    // Each was written out in full, up to 330 digits.
    let dir = out_dir("found_numbers");
    let data = write(&dir, "d.csv", &table(8, 3, &[], 1));
    // An ODE's output times and its solver's failures.
    let ode = |t0: &str, ts: &str| {
        format!(
            "system decay(t : real, x : vector[1], p : real) {{ [-p * x[0]] }}\n\
             data {{ n : int\n  t : vector[n]\n  y : vector[n] }}\nparam {{ p : positive ~ lognormal(0, 0.5) }}\n\
             model {{ let z = ode(decay, [1.0], {t0}, {ts}, p, max_steps = 20)\n  y ~ normal(col(z, 0), 1) }}\n\
             infer nuts {{ chains = 1, warmup = 5, draws = 5 }}\n"
        )
    };
    for (t0, ts, says) in [
        (
            "1e300",
            "t",
            "no earlier than t0 = 1e300 and non-decreasing; element 0 is 0.5",
        ),
        ("0", "t * 1e300", "on the way to t = 5e299"),
    ] {
        let m = write(&dir, "ode.tempest", &ode(t0, ts));
        let err = said(&["check", &m, "--data", &data]);
        assert!(err.contains(says), "{err}");
    }
    // A split fraction.
    let m = write(&dir, "ode.tempest", &ode("0", "t"));
    let err = said(&["run", &m, "--data", &data, "--split", "1e-300"]);
    assert!(
        err.contains("--split 1e-300: 8 rows give 0 training"),
        "{err}"
    );
    // A sparse GP's natural-gradient step size.
    let svi = write(
        &dir,
        "svi.tempest",
        "data { n : int\n  t : vector[n]\n  y : vector[n] }\nhyper { ell : positive = 1.0 }\n\
         model { f ~ gp(0, rbf(ell))\n  y ~ normal(f(t), 0.5) }\nguide { f : inducing(m = 2) }\n\
         infer svi { steps = 2, rho = 4.9e-324 }\n",
    );
    let out = said(&["run", &svi, "--data", &data, "-q"]);
    assert!(out.contains("rho = 5e-324)"), "{out}");
    // A posterior summary's cells.
    let prior = write(
        &dir,
        "prior.tempest",
        "param { b : positive ~ lognormal(300, 1) }\ninfer sample_prior { draws = 20 }\n",
    );
    let out = said(&["run", &prior, "-q"]);
    let row = out
        .lines()
        .find(|l| l.starts_with("b "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("e130") && row.len() < 100, "{out}");
    // Test metrics far from the data, and a saved fit's edited number.
    let exact = write(
        &dir,
        "exact.tempest",
        "data { n : int\n  t : vector[n]\n  y : vector[n] }\nhyper { ell : positive = 1.0 }\n\
         model { f ~ gp(0, rbf(ell))\n  y ~ normal(f(t), 0.5) }\ninfer exact { }\n",
    );
    let far = write(&dir, "far.csv", "t,y\n1,1e19\n2,-1e19\n");
    let fit = dir.join("exact.json").to_string_lossy().into_owned();
    let out = said(&[
        "run", &exact, "--data", &data, "--test", &far, "--save", &fit, "-q",
    ]);
    let line = out
        .lines()
        .find(|l| l.starts_with("predictions:"))
        .unwrap_or("");
    assert!(
        line.contains("RMSE 1.0000e19, mean log predictive density -"),
        "{out}"
    );
    assert!(line.contains("e38") && line.len() < 120, "{out}");
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fit).unwrap()).unwrap();
    j["exact"]["log_marginal_likelihood"] = serde_json::json!(1e-300);
    let bad = write(&dir, "bad.json", &j.to_string());
    let err = said(&["predict", &exact, "--fit", &bad, "--test", &data]);
    assert!(err.contains("against the saved 1e-300)"), "{err}");
}
