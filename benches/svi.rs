//! The `svi` engine on satellite (`examples/satellite.tempest`: 5,148
//! training rows, 36 features, 6 latent GPs sharing M = 100 inducing
//! points): one minibatch step (B = 256: projection, Monte Carlo
//! expectations, the reverse pass to the hypers and Z, the natural step on
//! six q(u)), the same step with a deep kernel
//! (`examples/satellite_dkl.tempest`), the step with Adam on q(u), and one whole-data
//! natural (polishing) step from a fresh state. See benches/README.md for the figures and
//! the whole-run comparison.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use tempest::infer::engine::Engine;
use tempest::infer::registry::ENGINES;
use tempest::infer::settings::{EngineConfig, Settings};
use tempest::infer::svi::def::SviSettings;
use tempest::infer::svi::engine::Svi;
use tempest::{Data, Model, Overrides, Registry};

fn engine(settings: &[(&str, &str)]) -> Svi {
    engine_of("satellite.tempest", settings)
}

fn engine_of(example: &str, settings: &[(&str, &str)]) -> Svi {
    engine_with(example, settings, |t| t.to_string())
}

fn engine_with(example: &str, settings: &[(&str, &str)], edit: impl Fn(&str) -> String) -> Svi {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let text = edit(&std::fs::read_to_string(root.join("examples").join(example)).expect("model"));
    let data = Data::read(&root.join("../shared/data/satellite_prepared.csv"))
        .expect("satellite data")
        .filter_rows("is_test", "0")
        .expect("rows");
    let m = Model::from_str("satellite.tempest", &text, &Registry::default()).expect("model");
    let b = m.bind(&data, &Overrides::default()).expect("bind");
    let def = ENGINES
        .iter()
        .find(|d| d.schema().name == "svi")
        .expect("svi");
    let mut cfg = EngineConfig::defaults(def.schema(), Default::default());
    for (k, v) in settings {
        cfg.set(k, v).expect("setting");
    }
    let s = SviSettings::from_config(&cfg).expect("settings");
    Svi::new(Arc::new(b), &s).expect("engine")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("svi");
    g.sample_size(20);
    let mut e = engine(&[("steps", "100000000")]);
    g.bench_function("satellite_step_natural", |b| {
        b.iter(|| black_box(e.step().expect("step")))
    });
    // The deep-kernel example: the same step with the network's forward
    // and reverse passes (36 → 64 → 64 → 16, 7,568 weights).
    let mut e = engine_of("satellite_dkl.tempest", &[("steps", "100000000")]);
    g.bench_function("satellite_dkl_step_natural", |b| {
        b.iter(|| black_box(e.step().expect("step")))
    });
    // The network's part of that step: forward and reverse passes at a
    // batch of 256 points.
    {
        use tempest::model::kernel::Inputs;
        use tempest::model::network::{Activation, NetSpec, Network};
        let spec = NetSpec::new(36, vec![64, 64, 16], Activation::Relu).expect("shape");
        let net = Network::new(spec.clone(), spec.init(1)).expect("network");
        let x = Inputs::from_flat((0..256 * 36).map(|i| ((i % 97) as f64).sin()).collect(), 36);
        let h_bar = nalgebra::DMatrix::from_fn(256, 16, |i, j| ((i + j) as f64).cos());
        g.bench_function("network_forward_backward_b256", |b| {
            b.iter(|| {
                let tape = net.forward(&x).expect("forward");
                black_box(net.backward(&tape, &h_bar))
            })
        });
    }
    // SV-DKL's whole model (network, six additive one-feature GPs, mixing
    // matrix) with 64 inducing points per GP: k-means points against a
    // KISS-GP grid.
    for (name, guide) in [
        ("satellite_svdkl_step_inducing64", "inducing(m = 64)"),
        ("satellite_svdkl_step_grid64", "grid(m = 64)"),
    ] {
        let mut e = engine_with("satellite_svdkl.tempest", &[("steps", "100000000")], |t| {
            t.replace("inducing(m = 20)", guide)
        });
        g.bench_function(name, |b| b.iter(|| black_box(e.step().expect("step"))));
    }
    let mut e = engine(&[("steps", "100000000"), ("q_step", "adam")]);
    g.bench_function("satellite_step_adam", |b| {
        b.iter(|| black_box(e.step().expect("step")))
    });
    g.sample_size(10);
    // The first whole-data step after one minibatch step: the ELBO at the
    // start, the summed target and the ELBO of the step tried (ρ = 1 is
    // taken here): three passes over the data with 1024 draws.
    g.bench_function("satellite_polish_step", |b| {
        b.iter_batched(
            || {
                let mut e = engine(&[("steps", "1"), ("polish", "1")]);
                e.step().expect("minibatch step");
                e
            },
            |mut e| black_box(e.step().expect("polish step")),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
