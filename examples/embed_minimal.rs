//! The smallest program that embeds tempest: a model file and a CSV file
//! read from disk, the model's own engine run through the library API, and
//! one number printed. It uses nothing of the command line, the figures or
//! the progress bars, so it builds with `default-features = false`:
//!
//! ```toml
//! [dependencies]
//! tempest = { path = "../tempest", default-features = false }
//! ```
//!
//! Run: cargo run --example embed_minimal --no-default-features [-- MODEL DATA]
//! (by default the motorcycle model and data of `examples/`: an exact GP
//! with learned hypers).

use std::path::Path;
use tempest::AsExact;
use tempest::{Data, Model, Overrides, Registry, RunOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut args = std::env::args().skip(1);
    let model_path = args
        .next()
        .map_or_else(|| here.join("mcycle.tempest"), Into::into);
    let data_path = args
        .next()
        .map_or_else(|| here.join("data/mcycle.csv"), Into::into);

    let text = std::fs::read_to_string(&model_path)?;
    let model = Model::from_str(&model_path.to_string_lossy(), &text, &Registry::default())?;
    let data = Data::read(&data_path).map_err(|e| model.render(&e))?;
    let bound = model
        .bind(&data, &Overrides::default())
        .map_err(|e| model.render(&e))?;
    let fit = tempest::run(&bound, RunOptions::default()).map_err(|e| model.render(&e))?;
    match fit.as_exact() {
        Some(exact) => println!(
            "log marginal likelihood: {:.6}",
            exact.log_marginal_likelihood
        ),
        None => print!("{}", fit.summary()),
    }
    Ok(())
}
