//! Mirror-descent VI on breast cancer (n = 300, d = 30): the time from the
//! prior to the ELBO optimum within 1e-6 relative (4 steps for the logit
//! likelihood, 6 for GPflow's squashed probit, at ρ = 1), the setup (Gram
//! matrix and Cholesky) included. See benches/README.md.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use tempest::{Data, Model, Overrides, Registry, RunOptions};

const MODEL: &str = r#"
data { n : int  X : matrix[n, 30] = columns("x0".."x29")  y : int<lower=0, upper=1>[n] }
hyper { ell : positive = 5.0  sf2 : positive = 1.0 }
model {
  f ~ gp(0, sf2 * rbf(ell))
  y ~ LIKELIHOOD
}
infer mirror_descent { rho = 1.0, tol = 0 }
"#;

fn bench(c: &mut Criterion) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/breast_cancer_prepared.csv");
    let data = Data::read(&path)
        .expect("data")
        .select_rows(0, 299)
        .expect("rows");
    let mut g = c.benchmark_group("mirror_descent");
    g.sample_size(20);
    for (label, lik, steps) in [
        ("logit_to_1e-6", "bernoulli_logit(f(X))", "4"),
        (
            "probit_to_1e-6",
            "bernoulli_probit(f(X), squash = 1e-3)",
            "6",
        ),
    ] {
        let m = Model::from_str(
            "bench.tempest",
            &MODEL.replace("LIKELIHOOD", lik),
            &Registry::default(),
        )
        .expect("model");
        let b = m.bind(&data, &Overrides::default()).expect("bind");
        g.bench_function(label, |bench| {
            bench.iter(|| {
                let options = RunOptions {
                    settings: vec![("steps".into(), steps.into())],
                    ..Default::default()
                };
                black_box(tempest::run(black_box(&b), options).expect("run").to_json())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
