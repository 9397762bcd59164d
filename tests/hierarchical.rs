//! Hierarchical models: eight schools against its posterior by quadrature
//! (non-centred; the centred form's divergences reported), a
//! varying-intercept regression indexed by an integer array, and a group
//! index out of range as a located data error.

mod common;
use common::*;

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
