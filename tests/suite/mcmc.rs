//! The samplers against truth: the breast-cancer logistic regression against
//! Stan's posterior, conjugate models with closed-form posteriors (all three
//! samplers), correlated and badly scaled Gaussians, a funnel whose
//! divergences are reported, GP hyperparameters against quadrature of their
//! marginal posterior, identical draws for any thread count, and Stan CSV
//! files that read back with the exact column layout.

use crate::common;
use common::*;
use std::sync::Arc;
use tempest::infer::fit::Fit;
use tempest::infer::mcmc::density::Density;
use tempest::infer::mcmc::fit::McmcFit;
use tempest::output::stan_csv::{SAMPLER_COLUMNS, read_stan_csv};
use tempest::{Bound, Data, RunOptions};

/// Run the model's sampler with these settings.
fn sample(b: &Bound, engine: &str, settings: &[(&str, &str)]) -> Box<McmcFit> {
    fit_with(b, Some(engine), settings)
        .downcast::<McmcFit>()
        .expect("not a sampler fit")
}

fn column(f: &McmcFit, name: &str) -> usize {
    f.names
        .iter()
        .position(|n| n == name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", f.names))
}

/// |estimate − truth| within `k` Monte Carlo standard errors.
fn assert_within_mcse(f: &McmcFit, name: &str, truth: f64, k: f64) {
    let s = &f.summaries[column(f, name)];
    assert!(
        (s.mean - truth).abs() <= k * s.mcse,
        "{} {name}: mean {} vs truth {truth} (mcse {})",
        f.engine,
        s.mean,
        s.mcse
    );
}

fn no_data(text: &str) -> Bound {
    bind(&model(text), &Data::values())
}

#[test]
fn logistic_regression_matches_stan_reference() {
    let f = logistic_against_stan(&[("warmup", "1000")]);
    assert_eq!(f.warmup_iterations, vec![1000; 4]);
}

/// The gradient-based metric adaptation reaches Stan's posterior after a
/// warm-up of 300.
#[test]
fn gradient_adaptation_matches_stan_reference_after_a_short_warmup() {
    let _ = logistic_against_stan(&[("warmup", "300"), ("adaptation", "gradient")]);
}

/// Early-stopping warm-up ends every chain's warm-up once its metric has
/// settled — well before the 1000 allowed on this posterior — and the draws
/// still match Stan's reference; the fit reports each chain's length.
#[test]
fn early_stopping_warmup_ends_early_and_matches_stan_reference() {
    let f = logistic_against_stan(&[
        ("warmup", "1000"),
        ("adaptation", "gradient"),
        ("early_stop", "true"),
    ]);
    assert_eq!(f.warmup_iterations.len(), 4);
    for w in &f.warmup_iterations {
        assert!((290..1000).contains(w), "warm-up of {w} iterations");
    }
    assert!(f.warmup_gradients > 0);
    let j = f.report().json();
    assert_eq!(j["warmup_iterations"].as_array().unwrap().len(), 4);
    assert_eq!(j["warmup"], 1000);
}

/// NUTS on the logistic regression with `extra` settings (4 × 1000 draws,
/// seed 1): every mean within 0.1 sd and every sd within 10 % of Stan's
/// reference posterior, R-hat < 1.01, min bulk ESS > 1000, no divergences.
fn logistic_against_stan(extra: &[(&str, &str)]) -> Box<McmcFit> {
    let m = model(LOGISTIC);
    let b = bind(&m, &csv("breast_cancer_prepared.csv", None));
    let mut settings = vec![("chains", "4"), ("draws", "1000"), ("seed", "1")];
    settings.extend_from_slice(extra);
    let f = sample(&b, "nuts", &settings);
    let text = std::fs::read_to_string(
        shared()
            .join("reference")
            .join("stan_logistic_posterior_reference.csv"),
    )
    .unwrap();
    let mut checked = 0;
    for line in text.lines().skip(1) {
        let v: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
        let name = if v[0] == 0.0 {
            "alpha".to_string()
        } else {
            // Stan's beta.k is the model's beta[k − 1].
            format!("beta[{}]", v[0] as usize - 1)
        };
        let s = &f.summaries[column(&f, &name)];
        assert!(
            (s.mean - v[1]).abs() < 0.1 * v[2],
            "{name}: mean {} vs Stan {} (sd {})",
            s.mean,
            v[1],
            v[2]
        );
        assert!(
            (s.sd / v[2] - 1.0).abs() < 0.1,
            "{name}: sd {} vs Stan {}",
            s.sd,
            v[2]
        );
        checked += 1;
    }
    assert_eq!(checked, 31);
    assert_eq!(f.names.len(), 31);
    let rhat_max = f.summaries.iter().map(|s| s.rhat).fold(0.0, f64::max);
    let ess_min = f
        .summaries
        .iter()
        .map(|s| s.ess_bulk)
        .fold(f64::INFINITY, f64::min);
    assert!(rhat_max < 1.01, "max R-hat {rhat_max}");
    assert!(ess_min > 1000.0, "min bulk ESS {ess_min}");
    assert_eq!(f.divergences, 0);
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    f
}

/// A Gaussian whose scales span eight orders of magnitude: gradient-based
/// adaptation finds the variances as its metric (each within 25 %) in a
/// warm-up of 200, and the draws have the right means and sds.
#[test]
fn gradient_adaptation_finds_the_scales_of_a_badly_scaled_gaussian() {
    let b = no_data(
        r#"
param { x : vector[5] ~ normal(0, [0.0001, 0.01, 1, 100, 10000]) }
"#,
    );
    let f = sample(
        &b,
        "nuts",
        &[
            ("chains", "2"),
            ("warmup", "200"),
            ("draws", "1000"),
            ("adaptation", "gradient"),
        ],
    );
    let scales = [1e-4, 1e-2, 1.0, 1e2, 1e4];
    for metric in &f.inv_metrics {
        for (m, s) in metric.iter().zip(&scales) {
            assert!(
                (m / (s * s) - 1.0).abs() < 0.25,
                "metric {m} vs variance {}",
                s * s
            );
        }
    }
    for (k, s) in scales.iter().enumerate() {
        let x = f.summary_of(&format!("x[{k}]")).unwrap();
        assert!(x.mean.abs() < 0.15 * s, "x[{k}] mean {}", x.mean);
        assert!((x.sd / s - 1.0).abs() < 0.1, "x[{k}] sd {}", x.sd);
    }
    assert!(f.summaries.iter().all(|s| s.rhat < 1.01));
}

/// μ ~ N(0, 1), yᵢ ~ N(μ, 1): μ | y ~ N(Σy/(n+1), 1/(n+1)); and p ~ Beta(2, 3),
/// zᵢ ~ Bernoulli(p) (a likelihood written in the model): p | z ~
/// Beta(2 + k, 3 + n − k), sampled through the logit transform and its
/// Jacobian.
#[test]
fn conjugate_posteriors_with_every_sampler() {
    let m = model(
        r#"
likelihood bern(z : real, p : real) { z * log(p) + (1 - z) * log1p(-p) }
data { n : int  y : vector[n] = column("x0")  z : int<lower=0, upper=1>[n] = column("y") }
param { mu : real ~ normal(0, 1)  p : unit ~ beta(2, 3) }
model {
  y ~ normal(mu, 1)
  z ~ bern(p)
}
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 19))));
    let ys = b.data[b.graph.data_index("y").unwrap()].flatten();
    let zs = b.data[b.graph.data_index("z").unwrap()].flatten();
    let n = ys.len() as f64;
    let mu_mean = ys.iter().sum::<f64>() / (n + 1.0);
    let mu_sd = (1.0 / (n + 1.0)).sqrt();
    let k = zs.iter().sum::<f64>();
    assert!(k > 0.0 && k < n, "both labels present");
    let (a, bb) = (2.0 + k, 3.0 + n - k);
    let p_mean = a / (a + bb);
    let p_sd = (a * bb / ((a + bb).powi(2) * (a + bb + 1.0))).sqrt();
    for engine in ["nuts", "hmc", "mala"] {
        let extra: &[(&str, &str)] = match engine {
            "mala" => &[("draws", "4000"), ("warmup", "1000")],
            _ => &[("draws", "1000"), ("warmup", "500")],
        };
        let mut settings = vec![("chains", "4"), ("seed", "7")];
        settings.extend_from_slice(extra);
        let f = sample(&b, engine, &settings);
        for (name, mean, sd) in [("mu", mu_mean, mu_sd), ("p", p_mean, p_sd)] {
            assert_within_mcse(&f, name, mean, 4.0);
            let s = f.summaries[column(&f, name)].sd;
            assert!(
                (s / sd - 1.0).abs() < 0.08,
                "{engine} {name}: sd {s} vs {sd}"
            );
        }
        assert!(f.summaries.iter().all(|s| s.rhat < 1.02), "{engine}");
    }
}

#[test]
fn correlated_and_badly_scaled_gaussians() {
    // (a, b) with correlation 0.95; c with sd 100; d with sd 0.01.
    let b = no_data(
        r#"
param {
  a : real ~ normal(0, 1)
  b : real ~ normal(0.95 * a, sqrt(1 - 0.95^2))
  c : real ~ normal(3, 100)
  d : real ~ normal(-1, 0.01)
}
"#,
    );
    for engine in ["nuts", "hmc"] {
        let f = sample(
            &b,
            engine,
            &[
                ("chains", "4"),
                ("draws", "2000"),
                ("warmup", "1000"),
                ("seed", "3"),
            ],
        );
        for (name, mean, sd) in [
            ("a", 0.0, 1.0),
            ("b", 0.0, 1.0),
            ("c", 3.0, 100.0),
            ("d", -1.0, 0.01),
        ] {
            assert_within_mcse(&f, name, mean, 4.0);
            let s = f.summaries[column(&f, name)].sd;
            assert!(
                (s / sd - 1.0).abs() < 0.07,
                "{engine} {name}: sd {s} vs {sd}"
            );
        }
        let (ia, ib) = (column(&f, "a"), column(&f, "b"));
        let pairs: Vec<(f64, f64)> = f.values.iter().flatten().map(|v| (v[ia], v[ib])).collect();
        let k = pairs.len() as f64;
        let (ma, mb) = (
            pairs.iter().map(|p| p.0).sum::<f64>() / k,
            pairs.iter().map(|p| p.1).sum::<f64>() / k,
        );
        let cov = pairs.iter().map(|p| (p.0 - ma) * (p.1 - mb)).sum::<f64>() / k;
        let va = pairs.iter().map(|p| (p.0 - ma).powi(2)).sum::<f64>() / k;
        let vb = pairs.iter().map(|p| (p.1 - mb).powi(2)).sum::<f64>() / k;
        let corr = cov / (va * vb).sqrt();
        assert!((corr - 0.95).abs() < 0.01, "{engine}: correlation {corr}");
    }
}

#[test]
fn funnel_divergences_are_reported() {
    let b = no_data(
        r#"
param {
  v : real ~ normal(0, 3)
  x : vector[9] ~ normal(0, exp(v / 2))
}
"#,
    );
    let f = sample(
        &b,
        "nuts",
        &[
            ("chains", "2"),
            ("draws", "500"),
            ("warmup", "500"),
            ("seed", "1"),
        ],
    );
    assert!(f.divergences > 0, "a funnel gives divergences");
    let counted = f
        .draws
        .iter()
        .flatten()
        .filter(|d| d.stats.divergent)
        .count();
    assert_eq!(counted, f.divergences);
    assert!(
        f.warnings.iter().any(|w| w.contains("diverged")),
        "{:?}",
        f.warnings
    );
    let fit: Box<dyn Fit> = f;
    assert!(fit.summary().contains("divergences"));
    let j = fit.to_json();
    assert!(j["divergences"].as_u64().unwrap() > 0);
}

/// E[ℓ | y] of a GP regression (σ_f and σ fixed) by quadrature of the
/// (closed-form-checked) marginal density p(ℓ | y) ∝ N(y | 0, K_ℓ + σ²I) p(ℓ).
fn ell_by_quadrature(b: &Bound) -> f64 {
    let d = Density::new(Arc::new(b.clone())).unwrap();
    assert_eq!(d.dim, 1, "the latent GP is integrated out");
    // log π(u) over u = log ℓ includes the Jacobian: E[ℓ] = ∫ e^u π(u) du.
    let (lo, hi, k) = (-2.0f64, 5.0f64, 2800);
    let h = (hi - lo) / k as f64;
    let lps: Vec<f64> = (0..=k)
        .map(|i| d.log_density(&[lo + i as f64 * h]).unwrap())
        .collect();
    let mx = lps.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let (mut z, mut m1) = (0.0, 0.0);
    for (i, lp) in lps.iter().enumerate() {
        let w = if i == 0 || i == k { 0.5 } else { 1.0 } * (lp - mx).exp();
        z += w;
        m1 += w * (lo + i as f64 * h).exp();
    }
    assert!(
        (lps[0] - mx) < -20.0 && (lps[k] - mx) < -20.0,
        "grid covers the mass: {} {}",
        lps[0] - mx,
        lps[k] - mx
    );
    m1 / z
}

fn mcycle(rows: Option<(usize, usize)>) -> Data {
    let d = Data::read(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/mcycle.csv"),
    )
    .unwrap();
    match rows {
        Some((a, b)) => d.select_rows(a, b).unwrap(),
        None => d,
    }
}

#[test]
fn gp_hyperparameter_posterior_matches_quadrature() {
    let m = model(
        r#"
data { n : int  t : vector[n] = column("times")  accel : vector[n] }
param { ell : positive ~ lognormal(log(5), 0.5) }
model {
  f ~ gp(0, 40^2 * matern52(ell))
  accel ~ normal(f(t), 22)
}
"#,
    );
    let b = bind(&m, &mcycle(None));
    let truth = ell_by_quadrature(&b);
    let f = sample(
        &b,
        "nuts",
        &[
            ("chains", "4"),
            ("draws", "500"),
            ("warmup", "300"),
            ("seed", "2"),
        ],
    );
    assert_within_mcse(&f, "ell", truth, 4.0);
    assert!(f.summaries[0].rhat < 1.02);
}

/// The same posterior of ℓ when the Gaussian likelihood is written in the
/// model file: the engine cannot integrate f out, so it samples f (whitened,
/// through L(ℓ)) jointly with ℓ — a cross-check of the two paths.
#[test]
fn sampled_latent_gp_with_kernel_params_matches_the_marginal() {
    let text = |lik: &str| {
        format!(
            r#"
likelihood gauss(y : real, f : real, s : positive) {{ -0.5 * ((y - f) / s)^2 - log(s) - 0.918938533204673 }}
data {{ n : int  t : vector[n] = column("times")  accel : vector[n] }}
param {{ ell : positive ~ lognormal(log(5), 0.5) }}
model {{
  f ~ gp(0, 40^2 * matern52(ell))
  accel ~ {lik}(f(t), 22)
}}
"#
        )
    };
    let data = mcycle(Some((0, 39)));
    let truth = ell_by_quadrature(&bind(&model(&text("normal")), &data));
    let b = bind(&model(&text("gauss")), &data);
    let f = sample(
        &b,
        "nuts",
        &[
            ("chains", "4"),
            ("draws", "1000"),
            ("warmup", "500"),
            ("seed", "4"),
        ],
    );
    assert_eq!(f.names.len(), 1 + 40, "ell and the 40 latent values");
    assert_within_mcse(&f, "ell", truth, 4.0);
    assert!(f.summaries.iter().all(|s| s.rhat < 1.02));
}

#[test]
fn identical_draws_for_any_thread_count() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 3] = columns("x0", "x1", "x2")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[3] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 99))));
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                sample(
                    &b,
                    "nuts",
                    &[
                        ("chains", "3"),
                        ("draws", "200"),
                        ("warmup", "200"),
                        ("seed", "11"),
                    ],
                )
            })
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.values.len(), 3);
    for (c1, c2) in one.draws.iter().zip(&two.draws) {
        for (d1, d2) in c1.iter().zip(c2) {
            assert_eq!(d1.q, d2.q);
            assert_eq!(d1.lp.to_bits(), d2.lp.to_bits());
        }
    }
    // A different seed gives different draws.
    let other = sample(
        &b,
        "nuts",
        &[
            ("chains", "3"),
            ("draws", "200"),
            ("warmup", "200"),
            ("seed", "12"),
        ],
    );
    assert_ne!(one.draws[0][0].q, other.draws[0][0].q);
}

#[test]
fn stan_csv_round_trips_with_the_exact_layout() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[2] ~ normal(0, 1)  s : positive ~ half_normal(1) }
model { y ~ bernoulli_logit(alpha + X * beta * s) }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 49))));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcmc_csv");
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("draws");
    let options = RunOptions {
        engine: Some("nuts".into()),
        settings: vec![
            ("chains".into(), "2".into()),
            ("draws".into(), "150".into()),
            ("warmup".into(), "100".into()),
        ],
        csv: Some(prefix.clone()),
        model_name: Some("roundtrip".into()),
        ..Default::default()
    };
    let f = tempest::run(&b, options)
        .unwrap()
        .downcast::<McmcFit>()
        .expect("not a sampler fit");
    let mut want: Vec<String> = SAMPLER_COLUMNS.iter().map(|s| s.to_string()).collect();
    want.extend(["alpha", "beta.1", "beta.2", "s"].map(String::from));
    assert_eq!(
        want,
        [
            "lp__",
            "accept_stat__",
            "stepsize__",
            "treedepth__",
            "n_leapfrog__",
            "divergent__",
            "energy__",
            "alpha",
            "beta.1",
            "beta.2",
            "s"
        ]
    );
    for c in 0..2 {
        let path = dir.join(format!("draws_{}.csv", c + 1));
        let file = read_stan_csv(&path).unwrap();
        assert_eq!(file.columns, want);
        assert_eq!(file.draws.len(), 150);
        assert!(
            file.comments
                .iter()
                .any(|l| l.contains("model = roundtrip"))
        );
        assert!(
            file.step_size
                .is_some_and(|s| (s - f.step_sizes[c]).abs() < 1e-5 * s)
        );
        for (row, (d, v)) in file.draws.iter().zip(f.draws[c].iter().zip(&f.values[c])) {
            assert!((row[0] - d.lp).abs() < 1e-5 * d.lp.abs().max(1.0));
            assert_eq!(row[3], d.stats.tree_depth as f64);
            assert_eq!(row[4], d.stats.n_leapfrog as f64);
            assert_eq!(row[5], if d.stats.divergent { 1.0 } else { 0.0 });
            for (a, b) in row[7..].iter().zip(v) {
                assert!((a - b).abs() <= 1e-5 * b.abs().max(1e-3), "{a} vs {b}");
            }
            // The constrained scale: s > 0.
            assert!(row[10] > 0.0);
        }
        // A file cut mid-line reads as the draws before the cut.
        let text = std::fs::read_to_string(&path).unwrap();
        let cut = dir.join(format!("cut_{c}.csv"));
        let last = text
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .rfind(|&i| i < text.len() && !text[i..].starts_with('#'))
            .unwrap();
        let end = last + 5;
        std::fs::write(&cut, &text[..end]).unwrap();
        assert_eq!(read_stan_csv(&cut).unwrap().draws.len(), 149);
    }
}

/// What a [`Collect`] sink was sent for one chain: calls of `adapted`, the
/// draws' values, whether it finished, the column names.
type Received = (usize, Vec<Vec<f64>>, bool, Vec<String>);

/// A sink that keeps what it is sent, per chain.
#[derive(Clone, Default)]
struct Collect {
    chains: Arc<std::sync::Mutex<Vec<Received>>>,
}

struct CollectChain {
    owner: Collect,
    chain: usize,
}

impl tempest::infer::sink::DrawSinks for Collect {
    fn open(
        &self,
        run: &tempest::infer::sink::ChainRun,
    ) -> Result<Box<dyn tempest::infer::sink::DrawSink>, tempest::Error> {
        let id = run.header.chain_id;
        let mut chains = self.chains.lock().unwrap();
        if chains.len() < id {
            chains.resize_with(id, Default::default);
        }
        chains[id - 1].3 = run.columns.clone();
        Ok(Box::new(CollectChain {
            owner: self.clone(),
            chain: id - 1,
        }))
    }
}

impl tempest::infer::sink::DrawSink for CollectChain {
    fn adapted(&mut self, _step: f64, _metric: &[f64]) -> Result<(), tempest::Error> {
        self.owner.chains.lock().unwrap()[self.chain].0 += 1;
        Ok(())
    }
    fn draw(
        &mut self,
        _stats: &tempest::output::stan_csv::SamplerStats,
        values: &[f64],
    ) -> Result<(), tempest::Error> {
        self.owner.chains.lock().unwrap()[self.chain]
            .1
            .push(values.to_vec());
        Ok(())
    }
    fn finish(self: Box<Self>, _warmup: f64, _sampling: f64) -> Result<(), tempest::Error> {
        self.owner.chains.lock().unwrap()[self.chain].2 = true;
        Ok(())
    }
}

#[test]
fn a_program_s_own_draw_sink_sees_every_kept_draw() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { alpha : real ~ normal(0, 1)  beta : vector[2] ~ normal(0, 1) }
model { y ~ bernoulli_logit(alpha + X * beta) }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 49))));
    let sink = Collect::default();
    let options = RunOptions {
        engine: Some("mala".into()),
        settings: vec![
            ("chains".into(), "2".into()),
            ("draws".into(), "40".into()),
            ("warmup".into(), "30".into()),
        ],
        sinks: vec![Arc::new(sink.clone())],
        ..Default::default()
    };
    let f = tempest::run(&b, options)
        .unwrap()
        .downcast::<McmcFit>()
        .expect("not a sampler fit");
    let chains = sink.chains.lock().unwrap();
    assert_eq!(chains.len(), 2);
    for (c, (adapted, values, finished, columns)) in chains.iter().enumerate() {
        assert_eq!(*adapted, 1, "chain {c}");
        assert!(*finished, "chain {c}");
        // The sink gets Stan's column names; the fit the model's.
        let stan: Vec<String> = f
            .names
            .iter()
            .map(|n| match n.split_once('[') {
                Some((b, i)) => format!(
                    "{b}.{}",
                    i.trim_end_matches(']')
                        .split(", ")
                        .map(|k| (k.parse::<usize>().unwrap() + 1).to_string())
                        .collect::<Vec<_>>()
                        .join(".")
                ),
                None => n.clone(),
            })
            .collect();
        assert_eq!(columns, &stan);
        assert_eq!(values, &f.values[c], "chain {c}");
    }
    // An engine without draws refuses a sink before it runs.
    let options = RunOptions {
        engine: Some("exact".into()),
        sinks: vec![Arc::new(sink.clone())],
        ..Default::default()
    };
    let err = tempest::run(&b, options)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("has no draws to write"), "{err}");
}

/// A regression whose ten coefficients share one factor (pairwise
/// correlation about 0.9 in the posterior): with a dense metric, and with
/// the low-rank correction of the gradient-based one, NUTS needs far fewer
/// gradients per effective draw than with a diagonal one, and all three
/// match the closed-form posterior N((XᵀX + I)⁻¹Xᵀy, (XᵀX + I)⁻¹).
#[test]
fn dense_adaptation_samples_a_correlated_posterior_efficiently() {
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    let (n, d) = (60, 10);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut z = || -> f64 { StandardNormal.sample(&mut rng) };
    let mut rows = Vec::new();
    for _ in 0..n {
        let f = z();
        rows.push((0..d).map(|_| f + 0.3 * z()).collect::<Vec<f64>>());
    }
    let x = nalgebra::DMatrix::from_fn(n, d, |i, j| rows[i][j]);
    let beta: Vec<f64> = (0..d).map(|j| (j as f64 - 4.5) / 3.0).collect();
    let y: Vec<f64> = (0..n)
        .map(|i| (0..d).map(|j| x[(i, j)] * beta[j]).sum::<f64>() + z())
        .collect();
    let m = model(
        r#"
data { n : int  d : int  X : matrix[n, d]  y : vector[n] }
param { beta : vector[d] ~ normal(0, 1) }
model { y ~ normal(X * beta, 1) }
"#,
    );
    let data = Data::values()
        .with("n", tempest::DataValue::Int(n as i64))
        .with("d", tempest::DataValue::Int(d as i64))
        .with("X", tempest::DataValue::Matrix(x.clone()))
        .with("y", tempest::DataValue::Vector(y.clone()));
    let b = bind(&m, &data);
    let prec = x.transpose() * &x + nalgebra::DMatrix::identity(d, d);
    let cov = prec.clone().try_inverse().unwrap();
    let mean = &cov * (x.transpose() * nalgebra::DVector::from_vec(y));
    let run = |adaptation: &str| {
        let f = sample(
            &b,
            "nuts",
            &[
                ("chains", "2"),
                ("warmup", "1000"),
                ("draws", "1000"),
                ("adaptation", adaptation),
            ],
        );
        for j in 0..d {
            let s = f.summary_of(&format!("beta[{j}]")).unwrap();
            let sd = cov[(j, j)].sqrt();
            assert!(
                (s.mean - mean[j]).abs() < 0.15 * sd,
                "{adaptation} beta[{j}]: {} vs {}",
                s.mean,
                mean[j]
            );
            assert!((s.sd / sd - 1.0).abs() < 0.15, "{adaptation} beta[{j}] sd");
        }
        let (ess, rhat) = f.extremes();
        assert!(rhat < 1.01, "{adaptation}: R-hat {rhat}");
        ess / f.gradients as f64
    };
    let (diag, dense, low_rank) = (run("stan"), run("dense"), run("low_rank"));
    assert!(
        dense > 3.0 * diag,
        "min ESS per gradient: dense {dense:.4} against diagonal {diag:.4}"
    );
    // One shared factor is one direction: the low-rank correction finds it.
    assert!(
        low_rank > 3.0 * diag,
        "min ESS per gradient: low rank {low_rank:.4} against diagonal {diag:.4}"
    );
}

/// A dense (or low-rank) metric over 200,000 params would need three (four)
/// 200,000² matrices per chain: refused before anything is allocated, with the sizes named.
#[test]
fn a_dense_metric_too_large_for_memory_is_refused() {
    let b = no_data("param { x : vector[200000] ~ normal(0, 1) }");
    for (adaptation, what) in [
        ("dense", "the dense metric"),
        ("low_rank", "the low-rank metric"),
    ] {
        let options = tempest::RunOptions {
            engine: Some("nuts".into()),
            settings: vec![("adaptation".into(), adaptation.into())],
            ..Default::default()
        };
        let err = match tempest::run(&b, options) {
            Ok(_) => panic!("a {adaptation} metric of 200,000 params ran"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(what), "{err}");
    }
}
