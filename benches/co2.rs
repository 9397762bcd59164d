//! The Mauna Loa CO2 model of examples/co2.tempest (n = 741, 12 hypers, a
//! rational-quadratic term written in the model file): the whole fit with
//! the hypers learned; one log marginal likelihood with its gradient
//! against one Cholesky factorisation of the same matrix (the floor:
//! tempest's, on the pool's threads, and faer's on one thread), and the
//! factorisation with L⁻¹ formed in the same pass (as the gradient does),
//! and the value with that weight against the value then L⁻¹; and
//! the Gram matrix (whole, and its lower triangle in place) with its
//! reverse pass for a model-file copy of `rbf` against the built-in; the
//! pieces of one gradient (the value, the weight's L⁻¹, the Gram matrix,
//! its lower triangle as the value writes it, the reverse pass with a
//! stored W, and with W = ααᵀ − A⁻¹ formed as the pass reads it);
//! and the vectorised
//! exponential against the library's on 10⁵ arguments. See benches/README.md for the figures and the
//! comparison with scikit-learn (benches/co2_sklearn.py).

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use tempest::infer::exact::model::ExactModel;
use tempest::infer::gradients::leaf_adjoints;
use tempest::math::linalg::cholesky_jitter;
use tempest::{Bound, Data, Model, Overrides, Registry, RunOptions};

fn root(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn bound(text: &str) -> Bound {
    let data = Data::read(&root("examples/data/co2.csv")).expect("co2 data");
    let m = Model::from_str("co2.tempest", text, &Registry::default()).expect("model");
    m.bind(&data, &Overrides::default()).expect("bind")
}

fn exact(b: &Bound) -> (ExactModel, Vec<f64>) {
    let cfg = tempest::engine_config(&b.graph, &RunOptions::default()).expect("config");
    let em = ExactModel::new(
        Arc::new(b.clone()),
        &tempest::infer::settings::Settings::from_config(&cfg).expect("settings"),
    )
    .expect("exact model");
    let theta = em.layout.initial(b).expect("theta");
    (em, theta)
}

const RBF_MODEL: &str = r#"
kernel my_rbf(ell : positive)(x, x2) { exp(-sqdist(x, x2) / (2 * ell^2)) }
data { n : int  year : vector[n]  co2 : vector[n] }
hyper { ell : positive = 10.0  sf : positive = 30.0  sigma : positive = 1.0 }
model {
  f ~ gp(350, sf^2 * KERNEL(ell))
  co2 ~ normal(f(year), sigma)
}
infer exact { learn_hypers = true }
"#;

fn bench(c: &mut Criterion) {
    let text = std::fs::read_to_string(root("examples/co2.tempest")).expect("co2 model");
    let b = bound(&text);
    let (em, theta) = exact(&b);
    let mut g = c.benchmark_group("co2");
    g.sample_size(10);
    g.bench_function("lml_grad", |bch| {
        bch.iter(|| black_box(em.lml_grad(black_box(&theta)).expect("grad").1))
    });
    let p = em
        .pieces::<f64>(&theta, &em.bound, em.inputs.len())
        .expect("pieces");
    let mut a = p.kernel.gram_fast(&em.inputs).expect("gram");
    for (i, s) in p.tempered_noise().into_iter().enumerate() {
        a[(i, i)] += s;
    }
    g.bench_function("cholesky", |bch| {
        bch.iter(|| black_box(cholesky_jitter(black_box(&a), 0.0, 1e-2, "K").expect("chol")))
    });
    let mut fbuf = a.as_slice().to_vec();
    let mut mbuf = vec![0.0; a.len()];
    g.bench_function("cholesky_and_inverse", |bch| {
        bch.iter(|| {
            fbuf.copy_from_slice(a.as_slice());
            let n = a.nrows();
            tempest::math::factor_inverse::factor_and_invert(
                faer::MatMut::from_column_major_slice_mut(black_box(&mut fbuf), n, n),
                &mut mbuf,
            )
            .expect("factor")
        })
    });
    let fa = faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)]);
    g.bench_function("cholesky_faer_one_thread", |bch| {
        bch.iter(|| {
            black_box(faer::linalg::solvers::Llt::new(
                black_box(fa.as_ref()),
                faer::Side::Lower,
            ))
            .expect("chol")
        })
    });
    let state = em.lml(&theta).expect("lml");
    g.bench_function("lml", |bch| {
        bch.iter(|| black_box(em.lml(black_box(&theta)).expect("lml").lml))
    });
    // The value with the gradient's weight, as the gradient forms them
    // (L⁻¹ inside the factorisation), against the value and then L⁻¹.
    g.bench_function("value_and_weight", |bch| {
        bch.iter(|| black_box(em.lml_and_weight(black_box(&p)).expect("value")))
    });
    g.bench_function("value_then_weight", |bch| {
        bch.iter(|| {
            let s = em.lml_of(black_box(&p)).expect("value");
            black_box(ExactModel::weight(&s).expect("weight"))
        })
    });
    g.bench_function("weight", |bch| {
        bch.iter(|| black_box(ExactModel::weight(black_box(&state)).expect("weight")))
    });
    let xs: Vec<f64> = (0..100_000).map(|i| -30.0 + i as f64 * 3e-4).collect();
    g.bench_function("exp_100k", |bch| {
        bch.iter(|| {
            let mut v = xs.clone();
            tempest::math::vector::exp_in_place(&mut v);
            black_box(v)
        })
    });
    g.bench_function("exp_100k_libm", |bch| {
        bch.iter(|| {
            let mut v = xs.clone();
            for c in v.iter_mut() {
                *c = c.exp();
            }
            black_box(v)
        })
    });
    g.bench_function("gram", |bch| {
        bch.iter(|| black_box(p.kernel.gram_fast(&em.inputs).expect("gram")))
    });
    let nn = em.inputs.len();
    let mut buf = vec![0.0; nn * nn];
    g.bench_function("gram_lower", |bch| {
        bch.iter(|| {
            p.kernel
                .gram_lower_into(&em.inputs, black_box(&mut buf))
                .expect("gram")
        })
    });
    let w = a.clone();
    g.bench_function("kernel_reverse_pass", |bch| {
        bch.iter(|| black_box(leaf_adjoints(&p.kernel, &em.inputs, &w).expect("adjoints")))
    });
    let weight = ExactModel::weight(&state).expect("weight");
    g.bench_function("kernel_reverse_pass_with_inverse", |bch| {
        bch.iter(|| black_box(leaf_adjoints(&p.kernel, &em.inputs, &weight).expect("adjoints")))
    });
    for kernel in ["rbf", "my_rbf"] {
        let b = bound(&RBF_MODEL.replace("KERNEL", kernel));
        let (em, theta) = exact(&b);
        let p = em
            .pieces::<f64>(&theta, &em.bound, em.inputs.len())
            .expect("pieces");
        g.bench_function(format!("gram/{kernel}"), |bch| {
            bch.iter(|| black_box(p.kernel.gram_fast(&em.inputs).expect("gram")))
        });
        g.bench_function(format!("gram_lower/{kernel}"), |bch| {
            bch.iter(|| {
                p.kernel
                    .gram_lower_into(&em.inputs, black_box(&mut buf))
                    .expect("gram")
            })
        });
        let w = p.kernel.gram_fast(&em.inputs).expect("gram");
        g.bench_function(format!("kernel_reverse_pass/{kernel}"), |bch| {
            bch.iter(|| black_box(leaf_adjoints(&p.kernel, &em.inputs, &w).expect("adjoints")))
        });
        g.bench_function(format!("lml_grad/{kernel}"), |bch| {
            bch.iter(|| black_box(em.lml_grad(black_box(&theta)).expect("grad").1))
        });
    }
    g.bench_function("fit", |bch| {
        bch.iter(|| black_box(tempest::run(&b, RunOptions::default()).expect("fit")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
