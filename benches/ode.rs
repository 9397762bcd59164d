//! Gradients through `ode(...)`: one log density with its gradient by
//! forward sensitivities and by the adjoint sweep, on Lotka–Volterra
//! (hare and lynx: six varying numbers in the solve; four with the initial
//! state fixed; three, two and one with rates fixed too) and on a
//! three-species competitive Lotka–Volterra system (fifteen: three growth
//! rates, nine interactions, the initial state). See benches/README.md,
//! "ODE gradients: forward or adjoint".

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use tempest::infer::mcmc::density::Density;
use tempest::{Data, Model, Overrides, Registry};

const COMPETITION: &str = r#"
system comp(t : real, x : vector[3], r : vector[3], a : vector[9]) {
  [x[0] * (r[0] - a[0] * x[0] - a[1] * x[1] - a[2] * x[2]),
   x[1] * (r[1] - a[3] * x[0] - a[4] * x[1] - a[5] * x[2]),
   x[2] * (r[2] - a[6] * x[0] - a[7] * x[1] - a[8] * x[2])]
}
data { n : int  ts : vector[n]  y : vector[n] }
param {
  r : positive[3] ~ lognormal(0, 0.5)
  a : positive[9] ~ lognormal(-1, 0.5)
  x0 : positive[3] ~ lognormal(0, 0.5)
  sigma : positive ~ lognormal(-1, 1)
}
model {
  let x = ode(comp, x0, 0, ts, r, a, sensitivity = MODE)
  y ~ lognormal(log(col(x, 0)), sigma)
}
"#;

fn density(text: &str, mode: &str, data: &Data) -> Density {
    let m = Model::from_str(
        "bench.tempest",
        &text.replace("MODE", mode),
        &Registry::default(),
    )
    .expect("model");
    let b = m.bind(data, &Overrides::default()).expect("bind");
    Density::new(Arc::new(b)).expect("density")
}

fn bench(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // The example's model, its `ode` call given the mode.
    let lv = std::fs::read_to_string(root.join("examples/lotka_volterra.tempest"))
        .expect("example")
        .replace(
            "year - 1900, alpha, beta, gamma, delta)",
            "year - 1900, alpha, beta, gamma, delta, sensitivity = MODE)",
        );
    assert!(lv.contains("MODE"), "the example's ode call moved");
    let hl = Data::read(&root.join("../shared/data/hare_lynx_1900_1920.csv")).expect("data");
    let x_lv: Vec<f64> = [0.55f64, 0.028, 0.8, 0.024, 34.0, 5.9, 0.25, 0.3]
        .iter()
        .map(|v| v.ln())
        .collect();
    let dir = std::env::temp_dir().join("tempest_bench_ode");
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("comp.json");
    let ts: Vec<String> = (1..=20).map(|i| format!("{}", i as f64 * 0.5)).collect();
    let ys: Vec<String> = (1..=20)
        .map(|i| format!("{}", 0.8 + 0.1 * (i as f64).sin()))
        .collect();
    std::fs::write(
        &path,
        format!(
            r#"{{"n": 20, "ts": [{}], "y": [{}]}}"#,
            ts.join(", "),
            ys.join(", ")
        ),
    )
    .expect("write");
    let comp_data = Data::read(&path).expect("data");
    let x_comp: Vec<f64> = (0..16).map(|i| -0.3 + 0.04 * i as f64).collect();
    let mut group = c.benchmark_group("ode_gradient");
    for mode in ["forward", "adjoint"] {
        // The example's model (six varying numbers), then the initial state
        // fixed (four) and the rates fixed one by one (three, two, one).
        let variants = [
            (6, None),
            (4, Some("alpha, beta, gamma, delta,")),
            (3, Some("alpha, beta, gamma, 0.024,")),
            (2, Some("alpha, beta, 0.8, 0.024,")),
            (1, Some("alpha, 0.028, 0.8, 0.024,")),
        ];
        for (k, rates) in variants {
            let text = match rates {
                None => lv.clone(),
                Some(rates) => {
                    let t = lv
                        .replace(
                            "ode(lotka_volterra, z_init,",
                            "ode(lotka_volterra, [34.0, 5.9],",
                        )
                        .replace(
                            "year - 1900, alpha, beta, gamma, delta,",
                            &format!("year - 1900, {rates}"),
                        );
                    assert!(!t.contains("z_init, 0"), "the example's ode call moved");
                    t
                }
            };
            let d = density(&text, mode, &hl);
            let mut g = vec![0.0; d.dim];
            group.bench_function(format!("lotka_volterra_{k}_{mode}"), |b| {
                b.iter(|| black_box(d.log_density_grad(black_box(&x_lv), &mut g).unwrap()))
            });
        }
        let d = density(COMPETITION, mode, &comp_data);
        let mut g = vec![0.0; d.dim];
        group.bench_function(format!("competition_15_{mode}"), |b| {
            b.iter(|| black_box(d.log_density_grad(black_box(&x_comp), &mut g).unwrap()))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
