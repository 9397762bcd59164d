//! Exact GP regression against the reference numbers computed by numpy,
//! GPflow, scikit-learn and GPyTorch on the diabetes data.

use crate::common;
use common::*;
use tempest::RunOptions;
use tempest::infer::exact::fit::ExactFit;

const MODEL: &str = r#"
data {
  n : int
  X : matrix[n, 10] = columns(except = ["row", "y"])
  y : vector[n]
}
hyper {
  lengthscale : positive = 3.0
  variance : positive = 1.0
  noise_variance : positive = 0.1
}
model {
  f ~ gp(0, variance * rbf(lengthscale))
  y ~ normal(f(X), sqrt(noise_variance))
}
infer exact { learn_hypers = true, max_iters = 1 }
"#;

fn check_case(case: &serde_json::Value, lengthscale: f64) {
    let m = model(MODEL);
    let train = csv("diabetes_prepared.csv", Some((0, 299)));
    let test = csv("diabetes_prepared.csv", Some((300, 304)));
    let bound = m
        .bind(
            &train,
            &tempest::Overrides {
                values: vec![("lengthscale".into(), lengthscale.to_string())],
            },
        )
        .unwrap_or_else(|e| panic!("{}", m.render(&e)));
    // The objective and gradient at the initial values, through the engine's model.
    let fit = tempest::run(
        &bound,
        RunOptions {
            settings: vec![("max_iters".into(), "1".into())],
            ..Default::default()
        },
    )
    .unwrap();
    let f = fit.downcast::<ExactFit>().expect("not an exact fit");
    let model = &f.model;
    let theta0 = model.layout.initial(&bound).unwrap();
    let (state, grad) = model.lml_grad(&theta0).unwrap();
    assert_rel(state.lml, case["lml"].as_f64().unwrap(), 1e-9, "lml");
    // θ holds log-values: ∂/∂x = (∂/∂θ) / x.
    let g = &case["grad"];
    let hyp = [lengthscale, 1.0, 0.1];
    let want = [
        g["d_lengthscale"].as_f64().unwrap(),
        g["d_variance"].as_f64().unwrap(),
        g["d_noise_variance"].as_f64().unwrap(),
    ];
    for k in 0..3 {
        assert_rel(grad[k] / hyp[k], want[k], 1e-9, &format!("gradient {k}"));
    }
    let test_bound = tempest::ir::bind::bind_test(&bound, &test).unwrap();
    let p = model.predict(&theta0, &state, &test_bound).unwrap();
    for (key, got) in [("mean", &p.mean), ("var_f", &p.var_f), ("var_y", &p.var_y)] {
        let want: Vec<f64> = case[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(&want) {
            assert_rel(*a, *b, 1e-9, key);
        }
    }
}

#[test]
fn lengthscale_3_matches_reference() {
    let r = reference("gp_regression_exact.json");
    check_case(&r["lengthscale_3"], 3.0);
}

#[test]
fn lengthscale_1_matches_reference() {
    let r = reference("gp_regression_exact.json");
    check_case(&r["lengthscale_1"]["secondary_l1"]["numpy"], 1.0);
}

#[test]
fn autodiff_gradient_equals_analytic_gradient() {
    let m = model(MODEL);
    let bound = bind(&m, &csv("diabetes_prepared.csv", Some((0, 99))));
    let cfg = tempest::engine_config(&bound.graph, &RunOptions::default()).unwrap();
    let model = tempest::infer::exact::model::ExactModel::new(
        std::sync::Arc::new(bound.clone()),
        &tempest::infer::settings::Settings::from_config(&cfg).unwrap(),
    )
    .unwrap();
    for theta in [vec![0.3, -0.2, -1.5], vec![1.1, 0.4, -0.3]] {
        let (s, g) = model.lml_grad(&theta).unwrap();
        let (v, ga) = model.lml_grad_autodiff(&theta).unwrap();
        assert_rel(v, s.lml, 1e-12, "value");
        for k in 0..3 {
            assert_rel(ga[k], g[k], 1e-9, "autodiff vs analytic");
            let h = 1e-5;
            let mut up = theta.clone();
            up[k] += h;
            let mut dn = theta.clone();
            dn[k] -= h;
            let fd = (model.lml(&up).unwrap().lml - model.lml(&dn).unwrap().lml) / (2.0 * h);
            assert_rel(fd, g[k], 1e-6, "finite differences vs analytic");
        }
    }
}

#[test]
fn learning_hypers_reaches_a_stationary_point() {
    let m = model(MODEL);
    let bound = bind(&m, &csv("diabetes_prepared.csv", Some((0, 299))));
    let fit = tempest::run(
        &bound,
        RunOptions {
            settings: vec![("max_iters".into(), "200".into())],
            ..Default::default()
        },
    )
    .unwrap();
    let f = fit.downcast::<ExactFit>().expect("not an exact fit");
    let start = f.trace[0];
    assert_rel(start, -548.0784357421873, 1e-9, "starting lml");
    assert!(
        f.log_marginal_likelihood > start + 100.0,
        "lml rose from {start} to {}",
        f.log_marginal_likelihood
    );
    for w in f.trace.windows(2) {
        assert!(
            w[1] >= w[0] - 1e-9,
            "lml decreased along the L-BFGS trace: {w:?}"
        );
    }
    assert!(
        f.gradient_norm() < 1e-5,
        "gradient norm {}",
        f.gradient_norm()
    );
    assert!(f.converged);
}

/// The log marginal likelihood and its gradient at θ, computed on a pool
/// of `threads` threads, as bits.
fn lml_grad_bits(
    model: &tempest::infer::exact::model::ExactModel,
    theta: &[f64],
    threads: usize,
) -> (u64, Vec<u64>) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let (s, g) = model.lml_grad(theta).unwrap();
        (
            s.lml.to_bits(),
            g.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        )
    })
}

#[test]
fn results_are_identical_for_any_thread_count() {
    let m = model(MODEL);
    let bound = bind(&m, &csv("diabetes_prepared.csv", Some((0, 199))));
    let cfg = tempest::engine_config(&bound.graph, &RunOptions::default()).unwrap();
    let model = tempest::infer::exact::model::ExactModel::new(
        std::sync::Arc::new(bound.clone()),
        &tempest::infer::settings::Settings::from_config(&cfg).unwrap(),
    )
    .unwrap();
    let theta = vec![0.4, -0.1, -1.2];
    let eval = |threads: usize| lml_grad_bits(&model, &theta, threads);
    let one = eval(1);
    assert_eq!(one, eval(2));
    assert_eq!(one, eval(3));
}

/// The CO2 model (n = 741; a model-file kernel evaluated by blocks on
/// several threads) gives
/// the same log marginal likelihood and gradient bit for bit on 1 to 4
/// threads.
#[test]
fn the_co2_gradient_is_identical_for_any_thread_count() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/co2.tempest")).unwrap();
    let m = model(&text);
    let data = tempest::Data::read(&root.join("examples/data/co2.csv")).unwrap();
    let bound = bind(&m, &data);
    let cfg = tempest::engine_config(&bound.graph, &RunOptions::default()).unwrap();
    let model = tempest::infer::exact::model::ExactModel::new(
        std::sync::Arc::new(bound.clone()),
        &tempest::infer::settings::Settings::from_config(&cfg).unwrap(),
    )
    .unwrap();
    let theta = model.layout.initial(&bound).unwrap();
    let eval = |threads: usize| lml_grad_bits(&model, &theta, threads);
    let one = eval(1);
    assert!(f64::from_bits(one.0).is_finite());
    for threads in 2..=4 {
        assert_eq!(one, eval(threads), "{threads} threads");
    }
}
