//! Thermodynamic integration on the conjugate linear regression of
//! `../shared/data/evidence_linreg.csv` (exact log evidence −78.6107): one
//! whole TI run (31 rungs, NUTS 4 chains × (300 + 500) per rung) without
//! control variates and with second-order polynomial ones, with the
//! estimate printed per run. See benches/README.md.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use tempest::AsEvidence;
use tempest::{Data, Model, Overrides, Registry, RunOptions};

fn bench(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let data = Data::read(&root.join("examples/data/evidence_linreg.csv")).expect("data");
    let mut g = c.benchmark_group("evidence_linreg");
    g.sample_size(10);
    for (name, file) in [
        ("ti_none", "examples/evidence.tempest"),
        ("ti_poly2", "examples/evidence_cv.tempest"),
    ] {
        let src = std::fs::read_to_string(root.join(file)).expect("model");
        let m = Model::from_str(file, &src, &Registry::default()).expect("model");
        let b = m.bind(&data, &Overrides::default()).expect("bind");
        let mut seed = 0;
        g.bench_function(name, |bench| {
            bench.iter(|| {
                seed += 1;
                let options = RunOptions {
                    seed: Some(seed),
                    ..Default::default()
                };
                let fit = tempest::run(&b, options).expect("run");
                let f = fit.as_evidence().expect("evidence");
                eprintln!(
                    "    seed {seed}: log evidence {:.4} (mcse {:.4})",
                    f.log_evidence, f.mcse
                );
                black_box(f.log_evidence)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
