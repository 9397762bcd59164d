//! The whole `tempest` command line with a kernel written in Rust: a
//! program registers its kernels and likelihoods and hands over to
//! `tempest::cli::main_with`; model files then use them by name, with
//! every derivative from autodiff.
//!
//! Run (the model file names `periodic_decay`, registered below):
//!
//!   cargo run --release --example custom_cli -- run examples/co2_rust_kernel.tempest \
//!       --data examples/data/co2.csv --test examples/data/co2_forecast.csv --plot co2_rust.png

use tempest::{Real, Registry, UserKernel};

/// A locally periodic kernel: a yearly cycle whose shape drifts,
/// k(x, x′) = exp(−2 sin²(π r / p) / ℓ_p²) · exp(−r² / (2 ℓ_d²)), r = ‖x − x′‖.
struct PeriodicDecay;

impl UserKernel for PeriodicDecay {
    fn name(&self) -> &str {
        "periodic_decay"
    }
    fn params(&self) -> Vec<String> {
        vec!["period".into(), "ell_p".into(), "ell_d".into()]
    }
    fn entry<T: Real>(&self, p: &[T], x: &[f64], y: &[f64]) -> T {
        let (period, ell_p, ell_d) = (p[0], p[1], p[2]);
        let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
        let r = T::constant(r2.sqrt());
        let s = (r * T::constant(std::f64::consts::PI) / period).sin();
        (-(s * s) * T::constant(2.0) / (ell_p * ell_p)
            - T::constant(r2) / (ell_d * ell_d * T::constant(2.0)))
        .exp()
    }
}

fn main() -> std::process::ExitCode {
    let mut registry = Registry::default();
    registry.add_kernel(PeriodicDecay);
    tempest::cli::main_with(registry)
}
