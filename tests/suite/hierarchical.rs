//! Hierarchical models: eight schools against its posterior by quadrature
//! (non-centred; the centred form's divergences reported), a
//! varying-intercept regression indexed by an integer array, a group
//! index out of range as a located data error, and the radon model as a
//! new user writes it: a constant number of groups sizing the params,
//! group ids counted from 1 (read with `levels = 1..J`, or shifted with
//! integer arithmetic), against a maximum-likelihood fit of the same
//! mixed model.

use crate::common;
use common::*;
use tempest::ir::value::Value;
use tempest::{Data, DataValue, Overrides};

/// E[mu], sd(mu), E[tau], sd(tau) of eight schools by quadrature: given
/// tau the schools' effects and mu integrate out in closed form
/// (y_j ~ N(mu, sigma_j² + tau²), mu ~ N(0, 5²)), leaving a
/// one-dimensional integral over tau with its half-Cauchy(0, 5) prior.
fn eight_schools_truth() -> [f64; 4] {
    let y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0];
    let s = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0];
    let (h, top) = (1e-3, 400.0);
    let mut acc = [0.0f64; 5];
    let mut t = h / 2.0;
    while t < top {
        let v: Vec<f64> = s.iter().map(|si| si * si + t * t).collect();
        let p = 1.0 / 25.0 + v.iter().map(|vi| 1.0 / vi).sum::<f64>();
        let m = y.iter().zip(&v).map(|(yi, vi)| yi / vi).sum::<f64>() / p;
        let log_w = -0.5 * v.iter().map(|vi| vi.ln()).sum::<f64>()
            - 0.5 * y.iter().zip(&v).map(|(yi, vi)| yi * yi / vi).sum::<f64>()
            + 0.5 * m * m * p
            - 0.5 * p.ln()
            - (1.0 + (t / 5.0).powi(2)).ln();
        let w = log_w.exp();
        acc[0] += w;
        acc[1] += w * m;
        acc[2] += w * (m * m + 1.0 / p);
        acc[3] += w * t;
        acc[4] += w * t * t;
        t += h;
    }
    let mean_mu = acc[1] / acc[0];
    let mean_tau = acc[3] / acc[0];
    [
        mean_mu,
        (acc[2] / acc[0] - mean_mu * mean_mu).sqrt(),
        mean_tau,
        (acc[4] / acc[0] - mean_tau * mean_tau).sqrt(),
    ]
}

fn summary(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn eight_schools_matches_its_posterior_and_the_centred_form_diverges() {
    let dir = out_dir("hier_eight_schools");
    let json = dir.join("nc.json");
    assert_ok(&tempest(&[
        "run",
        "examples/eight_schools.tempest",
        "--data",
        "examples/eight_schools.json",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]));
    let j = summary(&json);
    let [mu, sd_mu, tau, sd_tau] = eight_schools_truth();
    // The quadrature's own figures, as published for this posterior.
    assert!(
        (mu - 4.4).abs() < 0.1 && (tau - 3.6).abs() < 0.2,
        "{mu} {tau}"
    );
    let got = |k: &str| j["summary"][k]["mean"].as_f64().unwrap();
    assert!(
        (got("mu") - mu).abs() < 0.1 * sd_mu,
        "E[mu] {} against {mu} (sd {sd_mu})",
        got("mu")
    );
    assert!(
        (got("tau") - tau).abs() < 0.1 * sd_tau,
        "E[tau] {} against {tau} (sd {sd_tau})",
        got("tau")
    );
    // The centred form: NUTS reports its divergent transitions.
    let json = dir.join("c.json");
    let o = tempest(&[
        "run",
        "examples/eight_schools_centred.tempest",
        "--data",
        "examples/eight_schools.json",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]);
    let out = assert_ok(&o);
    let divergent = summary(&json)["divergences"].as_u64().unwrap();
    assert!(divergent > 10, "{divergent} divergences");
    assert!(out.contains("diverged"), "{out}");
}

#[test]
fn a_varying_intercept_regression_indexes_by_group() {
    let dir = out_dir("hier_iris");
    let json = dir.join("run.json");
    let out = assert_ok(&tempest(&[
        "run",
        "examples/iris_varying_intercept.tempest",
        "--data",
        "examples/data/iris.csv",
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]));
    assert!(out.contains("a_virginica"), "{out}");
    let j = summary(&json);
    let est = |k: &str| j["estimates"][k]["mc"].as_f64().unwrap();
    // Sepal length at sepal width 0 rises from setosa to virginica, and
    // each intercept is close to its species' own least-squares fit with
    // the common slope (50 flowers each pool little).
    let (a0, a1, a2) = (est("a_setosa"), est("a_versicolor"), est("a_virginica"));
    assert!(a0 < a1 && a1 < a2, "{a0} {a1} {a2}");
    let table = std::fs::read_to_string("examples/data/iris.csv").unwrap();
    let rows: Vec<Vec<f64>> = table
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(|v| v.trim().parse().unwrap()).collect())
        .collect();
    // Least squares with three intercepts and one slope.
    let x = nalgebra::DMatrix::from_fn(rows.len(), 4, |i, k| match k {
        3 => rows[i][1],
        g => f64::from(rows[i][4] as usize == g),
    });
    let yv = nalgebra::DVector::from_fn(rows.len(), |i, _| rows[i][0]);
    let beta = (x.transpose() * &x)
        .cholesky()
        .unwrap()
        .solve(&(x.transpose() * yv));
    let names = ["a_setosa", "a_versicolor", "a_virginica"];
    for (k, a) in [a0, a1, a2].iter().enumerate() {
        let sd = j["estimates"][names[k]]["sd"].as_f64().unwrap();
        assert!(
            (a - beta[k]).abs() < 0.5 * sd,
            "intercept {k}: {a} against {}",
            beta[k]
        );
    }
    // The posterior itself, by quadrature: given (tau, sigma) the model is
    // linear and Gaussian in (mu_a, a_raw, b), so the intercepts' posterior
    // mean and variance and p(y | tau, sigma) are closed forms; a 2-D grid
    // over tau and sigma (half-normal priors) integrates them out. NUTS's
    // means are within 0.1 posterior sd of it (Stan's standard).
    let truth = varying_intercept_truth(&rows);
    for (k, name) in names.iter().enumerate() {
        let (mean, sd) = truth[k];
        let got = est(name);
        let mc_sd = j["estimates"][name]["sd"].as_f64().unwrap();
        assert!(
            (got - mean).abs() < 0.1 * sd,
            "{name}: {got} against the quadrature posterior mean {mean} (sd {sd})"
        );
        assert!(
            (mc_sd / sd - 1.0).abs() < 0.1,
            "{name}: sd {mc_sd} against {sd}"
        );
    }
    let b = &j["summary"]["b"];
    let (bm, bsd) = truth[3];
    assert!(
        (b["mean"].as_f64().unwrap() - bm).abs() < 0.1 * bsd,
        "b: {} against {bm}",
        b["mean"]
    );
}

/// The posterior mean and sd of the three intercepts mu_a + tau a_raw[j]
/// and of the slope b of examples/iris_varying_intercept.tempest, by
/// closed forms given (tau, sigma) and a 2-D trapezoid grid over them.
fn varying_intercept_truth(rows: &[Vec<f64>]) -> [(f64, f64); 4] {
    use nalgebra::{DMatrix, DVector};
    let n = rows.len();
    let y = DVector::from_fn(n, |i, _| rows[i][0]);
    // θ = (mu_a, a_raw[0..3], b): prior N(m0, S0).
    let m0 = DVector::from_vec(vec![5.0, 0.0, 0.0, 0.0, 0.0]);
    let s0_inv = DMatrix::from_diagonal(&DVector::from_vec(vec![
        1.0 / 25.0,
        1.0,
        1.0,
        1.0,
        1.0 / 25.0,
    ]));
    let log_det_s0 = 2.0 * 25f64.ln();
    let mut sums = [[0.0f64; 3]; 4]; // per target: Σw·mean, Σw·(var + mean²), and Σw (in [0][2])
    let mut total = 0.0;
    let mut logs = Vec::new();
    let (taus, sigmas): (Vec<f64>, Vec<f64>) = (
        (1..=300).map(|k| k as f64 * 8.0 / 300.0).collect(),
        (0..=200).map(|k| 0.3 + k as f64 * 0.35 / 200.0).collect(),
    );
    let mut cells = Vec::new();
    for &tau in &taus {
        let x = DMatrix::from_fn(n, 5, |i, k| match k {
            0 => 1.0,
            4 => rows[i][1],
            g => tau * f64::from(rows[i][4] as usize == g - 1),
        });
        let xtx = x.transpose() * &x;
        let xty = x.transpose() * &y;
        for &sigma in &sigmas {
            let s2 = sigma * sigma;
            let p = &s0_inv + &xtx / s2;
            let chol = p.clone().cholesky().unwrap();
            let m = chol.solve(&(&s0_inv * &m0 + &xty / s2));
            let log_det_p: f64 = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
            let quad = y.dot(&y) / s2 + m0.dot(&(&s0_inv * &m0)) - m.dot(&(&p * &m));
            let log_lik = -0.5 * n as f64 * (2.0 * std::f64::consts::PI * s2).ln()
                - 0.5 * log_det_s0
                - 0.5 * log_det_p
                - 0.5 * quad;
            // Half-normal(0, 2) priors on tau and sigma.
            let log_w = log_lik - tau * tau / 8.0 - s2 / 8.0;
            let cov = chol.inverse();
            cells.push((tau, m, cov));
            logs.push(log_w);
        }
    }
    let top = logs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    for ((tau, m, cov), lw) in cells.iter().zip(&logs) {
        let w = (lw - top).exp();
        total += w;
        for (t, sum) in sums.iter_mut().enumerate() {
            // Target t < 3: c = (1, tau e_t, 0); t = 3: c = e_b.
            let mut c = DVector::zeros(5);
            if t < 3 {
                c[0] = 1.0;
                c[t + 1] = *tau;
            } else {
                c[4] = 1.0;
            }
            let mean = c.dot(m);
            let var = c.dot(&(cov * &c));
            sum[0] += w * mean;
            sum[1] += w * (var + mean * mean);
        }
    }
    let mut out = [(0.0, 0.0); 4];
    for (t, sum) in sums.iter().enumerate() {
        let mean = sum[0] / total;
        out[t] = (mean, (sum[1] / total - mean * mean).sqrt());
    }
    out
}

#[test]
fn a_group_index_out_of_range_names_the_data_row() {
    let dir = out_dir("hier_bad_index");
    let data = dir.join("bad.json");
    std::fs::write(
        &data,
        r#"{"J": 8, "y": [28, 8, -3, 7, -1, 1, 18, 12], "sigma": [15, 10, 16, 11, 9, 11, 10, 18], "g": [0, 1, 2, 3, 9, 5, 6, 7]}"#,
    )
    .unwrap();
    let model = dir.join("m.tempest");
    std::fs::write(
        &model,
        "data { J : int  y : vector[J]  sigma : vector[J]  g : int[J] }\nparam { a : vector[8] ~ normal(0, 10) }\nmodel { y ~ normal(a[g], sigma) }\ninfer nuts { }\n",
    )
    .unwrap();
    let err = assert_clean_failure(&tempest(&[
        "run",
        model.to_str().unwrap(),
        "--data",
        data.to_str().unwrap(),
    ]));
    assert!(
        err.contains("index 9 (element 4 of the index) is out of range for vector[8]"),
        "{err}"
    );
    assert!(err.contains("key `g`, index 4"), "{err}");
    assert!(err.contains("m.tempest:3:"), "{err}");
}

/// `tempest run MODEL --data DATA --json OUT -q` plus `extra`: the JSON
/// report.
fn run_json(model: &str, data: &str, json: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "run",
        model,
        "--data",
        data,
        "--json",
        json.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    assert_ok(&tempest(&args));
    summary(json)
}

/// The maximum-likelihood fit of the radon model (log.radon ~ basement +
/// (1 | county)) by statsmodels' MixedLM (`reml=False`), from
/// `examples/data/radon_mixedlm.py` (its docstring records the run):
/// intercept, basement slope, residual sd, sd of the county intercepts.
const RADON_ML: [(&str, f64); 4] = [
    ("mu", 1.4611582255104925),
    ("b", -0.6926364757280632),
    ("sigma", 0.7551596160000622),
    ("tau", 0.3244640630454856),
];

#[test]
fn the_radon_example_runs_as_written_and_agrees_with_the_mixed_model_fit() {
    let dir = out_dir("hier_radon");
    // A short run (2 chains of 300 draws after 300 of warm-up).
    let j = run_json(
        "examples/radon.tempest",
        "examples/data/radon.csv",
        &dir.join("run.json"),
        &[
            "--set",
            "chains=2",
            "--set",
            "warmup=300",
            "--set",
            "draws=300",
        ],
    );
    assert_eq!(j["divergences"].as_u64(), Some(0), "{}", j["divergences"]);
    // 85 county intercepts: the constant J sized the param.
    assert!(j["summary"]["a[84]"].is_object() && j["summary"]["a[85]"].is_null());
    // Tolerances in posterior sds. With weak priors (sds of 5–10 against
    // posterior sds of 0.02–0.07) the posterior means of the intercept
    // and the slope lie on the ML estimates up to Monte Carlo error; a
    // scale's posterior mean lies above its ML estimate, by about 0.1 sd
    // for sigma and 0.25 sd for tau (a skewed posterior, and ML's downward
    // bias of a group sd from 85 groups; 0.09 and 0.24 sd in a run of
    // 4 × 1000 draws). The Monte Carlo error of a mean with ESS ≥ 150 is
    // at most sd/√150 ≈ 0.08 sd, so 3 of those on top of each offset.
    for ((name, ml), tol) in RADON_ML.iter().zip([0.25, 0.25, 0.35, 0.5]) {
        let s = &j["summary"][*name];
        let (mean, sd) = (s["mean"].as_f64().unwrap(), s["sd"].as_f64().unwrap());
        assert!(
            (mean - ml).abs() < tol * sd,
            "{name}: posterior mean {mean} against the ML estimate {ml} (posterior sd {sd})"
        );
        assert!(s["ess_bulk"].as_f64().unwrap() >= 100.0, "{name}: {s}");
    }
    // The same model with the ids as written and shifted in the index:
    // the same draws, bit for bit.
    let text = std::fs::read_to_string("examples/radon.tempest").unwrap();
    let shifted = text
        .replace(r#" = column("county", levels = 1..J)"#, "")
        .replace("a[county]", "a[county - 1]");
    assert_ne!(shifted, text);
    let model = dir.join("shifted.tempest");
    std::fs::write(&model, shifted).unwrap();
    let quick = [
        "--set",
        "chains=1",
        "--set",
        "warmup=30",
        "--set",
        "draws=20",
    ];
    let a = run_json(
        "examples/radon.tempest",
        "examples/data/radon.csv",
        &dir.join("a.json"),
        &quick,
    );
    let b = run_json(
        model.to_str().unwrap(),
        "examples/data/radon.csv",
        &dir.join("b.json"),
        &quick,
    );
    for k in ["mu", "tau", "b", "sigma", "a[0]", "a[84]"] {
        assert_eq!(a["summary"][k]["mean"], b["summary"][k]["mean"], "{k}");
    }
}

#[test]
fn ids_counted_from_one_index_the_wrong_element_only_with_a_located_note() {
    let dir = out_dir("hier_radon_unshifted");
    let text = std::fs::read_to_string("examples/radon.tempest")
        .unwrap()
        .replace(r#" = column("county", levels = 1..J)"#, "");
    let model = dir.join("unshifted.tempest");
    let check = |index: &str| {
        std::fs::write(&model, text.replace("a[county]", index)).unwrap();
        assert_clean_failure(&tempest(&[
            "check",
            model.to_str().unwrap(),
            "--data",
            "examples/data/radon.csv",
        ]))
    };
    // `a[county]` with ids 1..85: the first county 85 is out of range.
    let err = check("a[county]");
    assert!(
        err.contains("radon.csv, row 917 (line 919), column `county`: index 85 (element 917 of the index) is out of range for vector[85]"),
        "{err}"
    );
    assert!(
        err.contains("levels = 1..85") && err.contains("county - 1"),
        "{err}"
    );
    // Shifted one too far: the row of the first county 1, through the
    // arithmetic.
    let err = check("a[county - 2]");
    assert!(
        err.contains("row 0 (line 2), column `county`: index -1 (element 0 of the index)"),
        "{err}"
    );
    assert!(err.contains("unshifted.tempest:31:16"), "{err}");
}

/// Bind `text` to `data` through the library, or the rendered errors.
fn try_bind(text: &str, data: &Data) -> Result<(tempest::Model, tempest::Bound), String> {
    let m = tempest::Model::from_str("m.tempest", text, &tempest::Registry::default())
        .map_err(|e| e.to_string())?;
    let b = m
        .bind(data, &Overrides::default())
        .map_err(|e| m.render(&e))?;
    Ok((m, b))
}

/// The value of the let `name` of a bound model (no params needed).
fn let_value(b: &tempest::Bound, name: &str) -> Value<f64> {
    let g = &b.graph;
    let i = g.lets.iter().position(|l| l.name == name).unwrap();
    let params = b.param_init().unwrap();
    let env = tempest::ir::eval::Env::new(b, &b.hyper_init, &params, &[]);
    env.eval(&g.lets[i].value).unwrap()
}

fn ints(v: &Value<f64>) -> Vec<i64> {
    match v {
        Value::IntArray(x) => x.clone(),
        other => panic!("expected an int array, found {}", other.shape()),
    }
}

#[test]
fn a_constant_sizes_params_hypers_and_data() {
    // Library: the constant sizes a param, a hyper and a data vector.
    let text = "data {\n  J : int = 3\n  y : vector[J]\n}\nhyper { h : vector[J] = 1.0 }\nparam { a : vector[J] ~ normal(0, 1) }\nmodel { y ~ normal(a + h, 1) }\ninfer nuts { }\n";
    let data = Data::values().with("y", DataValue::Vector(vec![0.5, 1.0, 1.5]));
    let (_, b) = try_bind(text, &data).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.sizes["J"], 3);
    assert_eq!(b.param_init().unwrap()[0].len(), Some(3));
    assert_eq!(b.hyper_init[0].len(), Some(3));
    // The data must agree with the constant (it was taken from the data).
    let long = Data::values().with("y", DataValue::Vector(vec![0.5, 1.0, 1.5, 2.0]));
    let err = try_bind(text, &long).err().unwrap();
    assert!(
        err.contains("`y` has 4 entries, but `J` = 3 (its value in the model)"),
        "{err}"
    );
    // A constant computed from an inferred size.
    let text2 = "data {\n  n : int\n  y : vector[n]\n  m : int = n - 1\n}\nparam { d : vector[m] ~ normal(0, 1) }\nmodel { y ~ normal(0, 1) }\n";
    let (_, b) = try_bind(text2, &data).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (b.sizes["m"], b.param_init().unwrap()[0].len()),
        (2, Some(2))
    );
    // A negative constant size: at its value, with a caret.
    let err = try_bind(&text.replace("J : int = 3", "J : int = 1 - 3"), &data)
        .err()
        .unwrap();
    assert!(
        err.contains("the size `J` must be non-negative, found -2"),
        "{err}"
    );
    assert!(
        err.contains("m.tempest:2:13") && err.contains("value given here"),
        "{err}"
    );
    // A size only params use, with no value: what would make it known.
    let err = try_bind(
        &text
            .replace("J : int = 3", "J : int")
            .replace("y : vector[J]", "y : vector[3]"),
        &data,
    )
    .err()
    .unwrap();
    assert!(
        err.contains("cannot infer the size `J`")
            && err.contains("it sizes the hyper `h`, the param `a`"),
        "{err}"
    );
    assert!(
        err.contains("m.tempest:2:3") && err.contains("`J : int = 3`"),
        "{err}"
    );

    // CLI: a model whose data are all constants needs no data file.
    let dir = out_dir("hier_constant_size");
    let model = dir.join("prior.tempest");
    std::fs::write(
        &model,
        "data { J : int = 3 }\nparam { a : vector[J] ~ normal(0, 1) }\ninfer sample_prior { draws = 50 }\n",
    )
    .unwrap();
    let out = assert_ok(&tempest(&["check", model.to_str().unwrap()]));
    assert!(out.contains("ok"), "{out}");
    let json = dir.join("prior.json");
    let out = assert_ok(&tempest(&[
        "run",
        model.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "-q",
    ]));
    let j = summary(&json);
    assert!(
        j["summary"]["a[2]"].is_object() && j["summary"]["a[3]"].is_null(),
        "{out}"
    );
}

#[test]
fn integer_arithmetic_on_int_arrays_stays_integer() {
    let text = r#"data {
  n : int
  J : int = 4
  g : int[n]
  y : vector[n]
}
param { a : vector[J] ~ normal(0, 1) }
model {
  let down = g - 1
  let back = J - g
  let twice = 2 * g - 2
  let neg = -g + 4
  let sq = g .* g - 1
  let pick = if J > 3 then g - 1 else g
  let mixed = g + 0.5
  y ~ normal(a[down] + a[back] + a[twice] + a[neg] + a[pick], 1)
}
"#;
    let data = Data::values()
        .with("g", DataValue::IntArray(vec![1, 2, 2, 1]))
        .with("y", DataValue::Vector(vec![0.0, 1.0, 2.0, 3.0]));
    let (_, b) = try_bind(text, &data).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ints(&let_value(&b, "down")), [0, 1, 1, 0]);
    assert_eq!(ints(&let_value(&b, "back")), [3, 2, 2, 3]);
    assert_eq!(ints(&let_value(&b, "twice")), [0, 2, 2, 0]);
    assert_eq!(ints(&let_value(&b, "neg")), [3, 2, 2, 3]);
    assert_eq!(ints(&let_value(&b, "sq")), [0, 3, 3, 0]);
    assert_eq!(ints(&let_value(&b, "pick")), [0, 1, 1, 0]);
    assert!(matches!(let_value(&b, "mixed"), Value::Vector(_)));
    // `/` and `^` give reals, so they cannot index: a located type error
    // with a note saying why.
    for op in ["g / 2", "g ^ 2"] {
        let err = try_bind(&text.replace("a[down]", &format!("a[{op}]")), &data)
            .err()
            .unwrap();
        assert!(
            err.contains("an index must be an integer, found vector[n]"),
            "{err}"
        );
        assert!(err.contains("gives a real even between integers"), "{err}");
        assert!(err.contains("m.tempest:16:"), "{err}");
    }
    // Overflow is an error at the operator, not a wrapped index.
    let err = try_bind(&text.replace("2 * g - 2", "g * 9223372036854775807"), &data)
        .err()
        .unwrap();
    assert!(
        err.contains("integer overflow") && err.contains("m.tempest:11:"),
        "{err}"
    );
}

#[test]
fn integer_levels_number_ids_counted_from_one() {
    let text = r#"data {
  n : int
  J : int = 3
  g : int<lower=1, upper=J>[n] = column("g", levels = 1..J)
  y : vector[n]
}
param { a : vector[J] ~ normal(0, 1) }
model {
  let k = g + 0
  y ~ normal(a[g], 1)
}
"#;
    // JSON in Stan's convention, ids counted from 1.
    let json = |g: &str| {
        Data::Json(
            tempest::data::JsonData::parse("d.json", &format!(r#"{{"g": {g}, "y": [0.5, 1, 2]}}"#))
                .unwrap(),
        )
    };
    let (_, b) = try_bind(text, &json("[1, 3, 2]")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ints(&let_value(&b, "k")), [0, 2, 1]);
    // A list of ids, numbered by position.
    let listed = text
        .replace("levels = 1..J", "levels = [30, 10, 20]")
        .replace("<lower=1, upper=J>", "");
    let (_, b) = try_bind(&listed, &json("[10, 20, 30]")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ints(&let_value(&b, "k")), [1, 2, 0]);
    // An id outside the levels: its key and index, the declaration.
    let err = try_bind(&text.replace("upper=J", "upper=9"), &json("[1, 4, 2]"))
        .err()
        .unwrap();
    assert!(
        err.contains("d.json, key `g`, index 1: 4 is not among the declared levels of `g` (1..3)"),
        "{err}"
    );
    assert!(err.contains("m.tempest:4:3"), "{err}");
    // Bounds are checked on the ids as written.
    let err = try_bind(text, &json("[1, 0, 2]")).err().unwrap();
    assert!(
        err.contains("index 1: `g` must be <lower=1, upper=3>, found 0"),
        "{err}"
    );
    // CSV: the row and its line.
    let dir = out_dir("hier_levels");
    let csv = dir.join("d.csv");
    std::fs::write(&csv, "g,y\n1,0.5\n2,1\n7,2\n").unwrap();
    let err = try_bind(
        &text.replace("upper=J", "upper=9"),
        &Data::read(&csv).unwrap(),
    )
    .err()
    .unwrap();
    assert!(
        err.contains("row 2 (line 4), column `g`: 7 is not among the declared levels"),
        "{err}"
    );
    // Levels that are not ids: at check.
    let err = try_bind(&text.replace("levels = 1..J", "levels = 1.5"), &json("[1]"))
        .err()
        .unwrap();
    assert!(
        err.contains("`levels` lists the values the column holds"),
        "{err}"
    );
}
