//! The samplers' gradient allocates nothing once warm: a counting
//! allocator around the compiled log density of eight schools
//! (non-centred), of the 569 × 30 logistic regression, of a GP
//! classifier with a fixed kernel and of matrix params (gathered rows, a
//! mixing matrix).

#[path = "suite/common/mod.rs"]
mod common;
use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use tempest::Data;
use tempest::infer::mcmc::density::Density;

/// The system allocator, counting the allocations each thread makes (the
/// test harness's own threads allocate at any time).
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

fn allocations() -> usize {
    ALLOCATIONS.with(|c| c.get())
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

/// Allocations made by 100 gradients at different points, after one.
fn allocations_per_100_gradients(d: &Density) -> usize {
    let mut g = vec![0.0; d.dim];
    let points: Vec<Vec<f64>> = (0..100)
        .map(|k| {
            (0..d.dim)
                .map(|i| 0.01 * k as f64 * ((i as f64 * 0.7).sin()))
                .collect()
        })
        .collect();
    d.log_density_grad(&points[0], &mut g).unwrap();
    let before = allocations();
    let mut total = 0.0;
    for x in &points {
        total += d.log_density_grad(x, &mut g).unwrap();
    }
    let after = allocations();
    assert!(total.is_finite());
    after - before
}

#[test]
fn the_compiled_gradient_allocates_nothing() {
    let text = std::fs::read_to_string(example("eight_schools.tempest")).unwrap();
    let data = Data::read(&example("eight_schools.json")).unwrap();
    let d = Density::new(Arc::new(bind(&model(&text), &data))).unwrap();
    assert_eq!(allocations_per_100_gradients(&d), 0, "eight schools");
    // The evaluator's value does allocate (so the count sees allocations);
    // the program's value alone does not.
    let x = vec![0.1; d.dim];
    let before = allocations();
    for _ in 0..100 {
        d.log_density_interpreted(&x).unwrap();
    }
    assert!(allocations() - before > 100);
    d.log_density(&x).unwrap();
    let before = allocations();
    for _ in 0..100 {
        d.log_density(&x).unwrap();
        d.log_likelihood(&x).unwrap();
    }
    assert_eq!(allocations() - before, 0, "values alone");

    let text = std::fs::read_to_string(example("logistic.tempest")).unwrap();
    let data = csv("breast_cancer_prepared.csv", None);
    let d = Density::new(Arc::new(bind(&model(&text), &data))).unwrap();
    assert_eq!(allocations_per_100_gradients(&d), 0, "logistic regression");

    // A latent GP in whitened form with a fixed kernel and a learned mean.
    let text = r#"
data { n : int  X : matrix[n, 2] = columns("x0", "x1")  y : int<lower=0, upper=1>[n] }
param { m0 : real ~ normal(0, 1) }
model {
  f ~ gp(m0, 1.5 * rbf(2.0))
  y ~ bernoulli_logit(f(X))
}
"#;
    let data = csv("breast_cancer_prepared.csv", Some((0, 49)));
    let d = Density::new(Arc::new(bind(&model(text), &data))).unwrap();
    assert_eq!(allocations_per_100_gradients(&d), 0, "latent GP");

    // Matrix params: rows gathered by group and a mixing matrix times a
    // replicated GP's values.
    let text = r#"
data { n : int  g : int<lower=0, upper=2>[n] = column("target")
       X : matrix[n, 2] = columns("sepal length (cm)", "petal width (cm)")
       y : int<lower=0, upper=2>[n] = column("target") }
param { B : matrix[3, 3]  A : matrix[2, 3] }
model {
  f ~ gp(0, rbf(1.0))[2]
  y ~ categorical_logit(f(X) * A + B[g] / 10)
}
"#;
    let data = csv("iris.csv", Some((40, 79)));
    let d = Density::new(Arc::new(bind(&model(text), &data))).unwrap();
    assert_eq!(allocations_per_100_gradients(&d), 0, "matrix params");
}
