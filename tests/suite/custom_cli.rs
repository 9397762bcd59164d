//! A program's own kernels on the whole command line
//! (`tempest::cli::run_args` with a registry), and fits read by name from
//! Rust (`Fit::hyper`, `McmcFit::draws_of`, `McmcFit::summary_of`).

use crate::common;
use tempest::AsExact;

use common::{bind, csv, model, out_dir};
use tempest::infer::mcmc::fit::McmcFit;
use tempest::{Real, Registry, UserKernel};

/// exp(−r²/(2ℓ²)) written in Rust: the built-in `rbf`.
struct RustRbf;

impl UserKernel for RustRbf {
    fn name(&self) -> &str {
        "rust_rbf"
    }
    fn params(&self) -> Vec<String> {
        vec!["ell".into()]
    }
    fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
        (-T::constant(r2) / (p[0] * p[0] * T::constant(2.0))).exp()
    }
}

const MODEL: &str = r#"
data { n : int  t : vector[n] = column("times")  accel : vector[n] }
hyper { ell : positive = 3  sf : positive = 30  sigma : positive = 20 }
model { f ~ gp(0, sf^2 * KERNEL(ell))  accel ~ normal(f(t), sigma) }
infer exact { learn_hypers = true }
"#;

#[test]
fn a_registered_kernel_runs_from_the_command_line() {
    let dir = out_dir("custom_cli");
    let m = dir.join("m.tempest");
    std::fs::write(&m, MODEL.replace("KERNEL", "rust_rbf")).unwrap();
    let json = dir.join("fit.json");
    let args = [
        "tempest",
        "run",
        m.to_str().unwrap(),
        "--data",
        "examples/data/mcycle.csv",
        "-q",
        "--json",
        json.to_str().unwrap(),
    ];
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    // Without the kernel registered: a located error, exit status 1.
    let status = tempest::cli::run_args(&Registry::default(), args);
    assert_eq!(status, std::process::ExitCode::from(1));
    let mut registry = Registry::default();
    registry.add_kernel(RustRbf);
    let status = tempest::cli::run_args(&registry, args);
    assert_eq!(status, std::process::ExitCode::SUCCESS);
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The same fit as the built-in kernel's, through the library.
    let b = bind(
        &model(&MODEL.replace("KERNEL", "rbf")),
        &tempest::Data::read(std::path::Path::new("examples/data/mcycle.csv")).unwrap(),
    );
    let fit = common::fit_with(&b, None, &[]);
    let lml = fit.as_exact().unwrap().log_marginal_likelihood;
    let got = j["log_marginal_likelihood"].as_f64().unwrap();
    assert!((got - lml).abs() < 1e-6 * lml.abs(), "{got} vs {lml}");
    // Hypers by name.
    let ell = fit.hyper("ell").unwrap();
    assert_eq!(ell.len(), 1);
    assert!((j["hypers"]["ell"].as_f64().unwrap() - ell[0]).abs() < 1e-4 * ell[0]);
    assert!(fit.hyper("nothing").is_none());
    assert!(fit.hyper("ell[3]").is_none());
}

#[test]
fn fits_are_read_by_name() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 3] = columns("x0", "x1", "x2")  y : int<lower=0, upper=1>[n] }
hyper { scale : vector<lower=0>[2] = [1.5, 2.5] }
param { alpha : real ~ normal(0, scale[0])  beta : vector[3] ~ normal(0, scale[1]) }
model { y ~ bernoulli_logit(alpha + X * beta) }
infer nuts { chains = 2  warmup = 200  draws = 150 }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 99))));
    let fit = common::fit_with(&b, None, &[]);
    assert_eq!(fit.hyper("scale"), Some(vec![1.5, 2.5]));
    assert_eq!(fit.hyper("scale[1]"), Some(vec![2.5]));
    let f = fit.downcast_ref::<McmcFit>().unwrap();
    let draws = f.draws_of("beta[2]").expect("beta[2]'s draws");
    assert_eq!((draws.len(), draws[0].len()), (2, 150));
    let mean = draws.iter().flatten().sum::<f64>() / 300.0;
    let s = f.summary_of("beta[2]").unwrap();
    assert!((s.mean - mean).abs() < 1e-12);
    assert!(f.draws_of("beta[3]").is_none() && f.summary_of("gamma").is_none());
}
