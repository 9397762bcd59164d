//! Fixed cases for the faults the generators found, one test each, so that
//! each stays fixed whatever the generators produce later.

use super::pieces::*;
use super::{check_run, out_dir, write};

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
