//! Exact GP regression: log marginal likelihood, and log marginal likelihood
//! with its gradient, at n = 300 (diabetes, d = 10) and n = 2000 (synthetic,
//! d = 10); whole fits with the hypers learned (diabetes n = 300, mcycle).
//! See benches/README.md for the figures and the comparison.

use criterion::{Criterion, criterion_group, criterion_main};
use nalgebra::DMatrix;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use tempest::infer::exact::model::ExactModel;
use tempest::{Data, DataValue, Model, Overrides, Registry, RunOptions};

const MODEL: &str = r#"
data { n : int  X : matrix[n, 10]  y : vector[n] }
hyper { ell : positive = 3.0  sf2 : positive = 1.0  noise : positive = 0.1 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ normal(f(X), sqrt(noise))
}
infer exact { learn_hypers = true }
"#;

fn exact_model(data: &Data) -> (ExactModel, Vec<f64>) {
    let m = Model::from_str("bench.tempest", MODEL, &Registry::default()).expect("model");
    let b = m.bind(data, &Overrides::default()).expect("bind");
    let cfg = tempest::engine_config(&b.graph, &RunOptions::default()).expect("config");
    let em = ExactModel::new(
        Arc::new(b.clone()),
        &tempest::infer::settings::Settings::from_config(&cfg).expect("settings"),
    )
    .expect("exact model");
    let theta = em.layout.initial(&b).expect("theta");
    (em, theta)
}

fn diabetes() -> Data {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/diabetes_prepared.csv");
    let d = Data::read(&path).expect("diabetes data");
    let Data::Csv(t) = d.select_rows(0, 299).expect("rows") else {
        unreachable!()
    };
    let cols: Vec<Vec<f64>> = (1..11)
        .map(|c| t.real_column(c).expect("numbers"))
        .collect();
    let x = DMatrix::from_fn(t.nrows(), 10, |i, j| cols[j][i]);
    let y: Vec<f64> = t.real_column(11).expect("numbers");
    Data::values()
        .with("X", DataValue::Matrix(x))
        .with("y", DataValue::Vector(y))
}

fn synthetic(n: usize) -> Data {
    // A fixed pseudo-random design (a linear congruential sequence).
    let mut s: u64 = 12345;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    };
    let x = DMatrix::from_fn(n, 10, |_, _| next());
    let y: Vec<f64> = (0..n)
        .map(|i| x.row(i).sum().sin() + 0.1 * next())
        .collect();
    Data::values()
        .with("X", DataValue::Matrix(x))
        .with("y", DataValue::Vector(y))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("exact");
    g.sample_size(20);
    for (label, data) in [("n300_d10", diabetes()), ("n2000_d10", synthetic(2000))] {
        let (em, theta) = exact_model(&data);
        g.bench_function(format!("lml/{label}"), |b| {
            b.iter(|| black_box(em.lml(black_box(&theta)).expect("lml").lml))
        });
        g.bench_function(format!("lml_grad/{label}"), |b| {
            b.iter(|| black_box(em.lml_grad(black_box(&theta)).expect("grad").1))
        });
    }
    // Whole fits with the hypers learned by L-BFGS, from the initial values
    // to convergence: the optimiser's iterations and line searches included.
    let mcycle =
        Data::read(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/mcycle.csv"))
            .expect("mcycle");
    let mcycle_model = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/mcycle.tempest"),
    )
    .expect("mcycle model");
    for (label, text, data) in [
        ("n300_d10", MODEL.to_string(), diabetes()),
        ("mcycle_n133", mcycle_model, mcycle),
    ] {
        let m = Model::from_str("bench.tempest", &text, &Registry::default()).expect("model");
        let b = m.bind(&data, &Overrides::default()).expect("bind");
        g.bench_function(format!("fit/{label}"), |bch| {
            bch.iter(|| black_box(tempest::run(&b, RunOptions::default()).expect("fit")))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
