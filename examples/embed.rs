//! Embedding tempest in a Rust program: a model from a string, data from
//! Rust vectors, a kernel and a likelihood written in Rust and used by name,
//! and the fit read back as values.
//!
//! Run: cargo run --release --example embed

use nalgebra::DMatrix;
use tempest::AsExact;
use tempest::{
    Data, DataValue, Model, Overrides, Real, RealExt, Registry, RunOptions, UserKernel,
    UserLikelihood,
};

/// Rational quadratic kernel k(x, x′) = (1 + r²/(2αℓ²))^(−α), r = ‖x − x′‖.
struct RationalQuadratic;

impl UserKernel for RationalQuadratic {
    fn name(&self) -> &str {
        "rational_quadratic"
    }
    fn params(&self) -> Vec<String> {
        vec!["ell".into(), "alpha".into()]
    }
    fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let (ell, alpha) = (p[0], p[1]);
        let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
        (T::one() + T::constant(r2) / (alpha * ell * ell * T::constant(2.0))).powf(-alpha)
    }
}

/// Logistic observation noise: log p(y | f, s) = −z − 2 log(1 + e^(−z)) − log s, z = (y − f)/s.
struct Logistic;

impl UserLikelihood for Logistic {
    fn name(&self) -> &str {
        "logistic_noise"
    }
    fn params(&self) -> Vec<String> {
        vec!["s".into()]
    }
    fn log_density<T: Real>(&self, y: f64, f: T, p: &[T]) -> T {
        let z = (T::constant(y) - f) / p[0];
        -z - (-z).softplus() * T::constant(2.0) - p[0].ln()
    }
}

const MODEL: &str = r#"
data {
  n : int
  x : vector[n]
  y : vector[n]
}
hyper {
  ell : positive = 1.0
  alpha : positive = 2.0
  sf : positive = 1.0
  sigma : positive = 0.3
}
model {
  f ~ gp(0, sf^2 * rational_quadratic(ell, alpha))
  y ~ normal(f(x), sigma)
}
infer exact { learn_hypers = true }
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut registry = Registry::default();
    registry
        .add_kernel(RationalQuadratic)
        .add_likelihood(Logistic);

    // Data from Rust: a noisy sine on [0, 6].
    let x: Vec<f64> = (0..40).map(|i| 6.0 * i as f64 / 39.0).collect();
    let y: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| v.sin() + 0.1 * ((i * 7919 % 13) as f64 / 6.0 - 1.0))
        .collect();
    let data = Data::values()
        .with("x", DataValue::Vector(x.clone()))
        .with("y", DataValue::Vector(y));

    let model = Model::from_str("embedded.tempest", MODEL, &registry)?;
    let bound = model
        .bind(&data, &Overrides::default())
        .map_err(|e| model.render(&e))?;
    let fit = tempest::run(&bound, RunOptions::default()).map_err(|e| model.render(&e))?;
    let Some(exact) = fit.as_exact() else {
        return Err("expected an exact fit".into());
    };
    println!(
        "log marginal likelihood: {:.4} ({} L-BFGS iterations: {})",
        exact.log_marginal_likelihood, exact.iterations, exact.reason
    );
    for (h, v) in bound.graph.hypers.iter().zip(&exact.hypers) {
        println!("  {} = {}", h.name, v);
    }

    // Predict at new inputs.
    let grid = DMatrix::from_fn(5, 1, |i, _| 1.5 * i as f64);
    let p = exact.predict_inputs(&tempest::model::kernel::Inputs::from_matrix(&grid))?;
    for i in 0..5 {
        println!(
            "  f({:.1}) = {:+.3} ± {:.3}   (sin = {:+.3})",
            grid[(i, 0)],
            p.mean[i],
            p.var_f[i].sqrt(),
            grid[(i, 0)].sin()
        );
    }

    // The Rust likelihood is used by name like a built-in; models using it
    // check and bind now and run with the engines that accept any likelihood.
    let robust = MODEL.replace("y ~ normal(f(x), sigma)", "y ~ logistic_noise(f(x), sigma)");
    let robust = Model::from_str("robust.tempest", &robust, &registry)?;
    let robust_bound = robust
        .bind(&data, &Overrides::default())
        .map_err(|e| robust.render(&e))?;
    match tempest::run(&robust_bound, RunOptions::default()) {
        Ok(_) => println!("robust model ran"),
        Err(e) => println!("robust model: {}", e.first().message),
    }
    Ok(())
}
