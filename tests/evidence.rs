//! Thermodynamic integration against the exact evidence of a conjugate
//! linear regression (`../shared/data/evidence_linreg.csv`, prior
//! w ~ N(0, I₅), noise sd 0.5): the per-rung means and variances of
//! log p(y|w) against their closed forms, the log evidence against
//! `evidence_linreg.json`, and control variates shrinking the spread.

mod common;
use common::*;
use nalgebra::{DMatrix, DVector};
use tempest::infer::evidence::engine::ladder;
use tempest::infer::evidence::fit::{EvidenceFit, integrate};
use tempest::infer::fit::Fit;
use tempest::{Bound, RunOptions};

const MODEL: &str = r#"
data { n : int  X : matrix[n, 5] = columns("x0".."x4")  y : vector[n] }
param { w : vector[5] ~ normal(0, 1) }
model { y ~ normal(X * w, 0.5) }
"#;

fn bound() -> Bound {
    bind(&model(MODEL), &csv("evidence_linreg.csv", None))
}

/// The exact mean and variance of log p(y|w) under the power posterior at
/// t: w | t ~ N(m, S), S = (I + t XᵀX/σ²)⁻¹, m = S t Xᵀy/σ²; with r = y − Xm
/// and Σ = X S Xᵀ, log p = c − ‖r − z‖²/(2σ²), z ~ N(0, Σ).
fn exact_rung(x: &DMatrix<f64>, y: &DVector<f64>, t: f64) -> (f64, f64) {
    let s2 = 0.25;
    let n = y.len() as f64;
    let prec = DMatrix::identity(5, 5) + x.tr_mul(x) * (t / s2);
    let s = prec.try_inverse().unwrap();
    let m = &s * x.tr_mul(y) * (t / s2);
    let r = y - x * &m;
    let sig = x * &s * x.transpose();
    let c = -0.5 * n * (2.0 * std::f64::consts::PI * s2).ln();
    let mean = c - (r.dot(&r) + sig.trace()) / (2.0 * s2);
    let var = (2.0 * (&sig * &sig).trace() + 4.0 * r.dot(&(&sig * &r))) / (4.0 * s2 * s2);
    (mean, var)
}

fn data(b: &Bound) -> (DMatrix<f64>, DVector<f64>) {
    let xs = b.data[b.graph.data_index("X").unwrap()].flatten();
    let ys = b.data[b.graph.data_index("y").unwrap()].flatten();
    let n = ys.len();
    (DMatrix::from_row_slice(n, 5, &xs), DVector::from_vec(ys))
}

fn run(b: &Bound, seed: u64, cv: &str, draws: usize) -> Box<EvidenceFit> {
    let options = RunOptions {
        engine: Some("evidence".into()),
        settings: vec![
            ("rungs".into(), "31".into()),
            ("power".into(), "5".into()),
            (
                "sampler".into(),
                format!("nuts {{ chains = 4  warmup = 300  draws = {draws} }}"),
            ),
            ("control_variates".into(), cv.into()),
        ],
        seed: Some(seed),
        ..Default::default()
    };
    match tempest::run(b, options).unwrap_or_else(|e| panic!("{e:?}")) {
        Fit::Evidence(f) => f,
        _ => panic!("not an evidence fit"),
    }
}

#[test]
fn exact_rungs_reproduce_the_reference() {
    // The closed-form rungs through the corrected rule give the reference's
    // `ti_with_exact_rungs.corrected`; the rule is the one the engine uses.
    let r = reference("evidence_linreg.json");
    let b = bound();
    let (x, y) = data(&b);
    let t = ladder(31, 5.0);
    let want: Vec<f64> = r["ladder"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    for (a, w) in t.iter().zip(&want) {
        assert!((a - w).abs() < 1e-15);
    }
    let (mean, var): (Vec<f64>, Vec<f64>) = t.iter().map(|&ti| exact_rung(&x, &y, ti)).unzip();
    let (corrected, plain) = integrate(&t, &mean, &var);
    assert_rel(
        corrected,
        r["ti_with_exact_rungs"]["corrected"].as_f64().unwrap(),
        1e-9,
        "corrected",
    );
    assert_rel(
        plain,
        r["ti_with_exact_rungs"]["trapezoid"].as_f64().unwrap(),
        1e-9,
        "trapezoid",
    );
}

#[test]
fn log_evidence_and_rungs_match_the_exact_values() {
    let r = reference("evidence_linreg.json");
    let exact = r["exact_log_evidence"].as_f64().unwrap();
    let b = bound();
    let (x, y) = data(&b);
    let f = run(&b, 1, "none", 500);
    assert_eq!(f.rungs.len(), 31);
    // Every rung's mean within 4.5 standard errors of its exact value.
    let mut z2 = 0.0;
    for rung in &f.rungs {
        let (m, v) = exact_rung(&x, &y, rung.t);
        let z = (rung.mean - m) / rung.mean_se;
        z2 += z * z;
        assert!(
            z.abs() < 4.5,
            "t = {}: mean {} vs exact {m} (se {})",
            rung.t,
            rung.mean,
            rung.mean_se
        );
        assert!(
            (rung.var / v - 1.0).abs() < 0.35,
            "t = {}: var {} vs exact {v}",
            rung.t,
            rung.var
        );
    }
    let rms = (z2 / 31.0).sqrt();
    eprintln!(
        "rms z {rms}; log evidence {} (mcse {})",
        f.log_evidence, f.mcse
    );
    for rung in &f.rungs {
        let (m, v) = exact_rung(&x, &y, rung.t);
        eprintln!(
            "t {:.3e} z {:.2} var ratio {:.3}",
            rung.t,
            (rung.mean - m) / rung.mean_se,
            rung.var / v
        );
    }
    assert!(rms < 2.0, "rms z-score of the rung means {rms}");
    assert!(
        (f.log_evidence - exact).abs() < 0.05 + 3.0 * f.mcse,
        "log evidence {} vs exact {exact} (mcse {})",
        f.log_evidence,
        f.mcse
    );
    assert!(f.mcse > 0.0 && f.mcse < 0.2);
}
