//! The softmax's expectations: mirror descent on wine (3 classes) at the
//! default settings against the literal 10³-node Gauss–Hermite product rule
//! and against plain Monte Carlo with many draws at the same q.

use crate::common;
use tempest::AsVariational;

use common::{bind, fit_with, model};
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use std::path::Path;
use tempest::Data;
use tempest::infer::vi::fit::VariationalFit;
use tempest::math::quadrature::GaussHermite;

fn wine() -> tempest::Bound {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("examples/wine.tempest")).expect("model");
    let data = Data::read(&root.join("examples/data/wine.csv")).expect("data");
    bind(&model(&text), &data)
}

/// Σₙ E[log softmax_yₙ(f)] at marginals (m, v) [N, 3] by the literal
/// product rule with `n` points per class (n³ nodes per point).
fn literal_product(y: &[f64], m: &DMatrix<f64>, v: &DMatrix<f64>, n: usize) -> f64 {
    let gh = GaussHermite::new(n);
    let mut total = 0.0;
    for i in 0..m.nrows() {
        let yi = y[i] as usize;
        for a in 0..n {
            for b in 0..n {
                for c in 0..n {
                    let w = gh.weights[a] * gh.weights[b] * gh.weights[c];
                    let f = [
                        m[(i, 0)] + v[(i, 0)].sqrt() * gh.points[a],
                        m[(i, 1)] + v[(i, 1)].sqrt() * gh.points[b],
                        m[(i, 2)] + v[(i, 2)].sqrt() * gh.points[c],
                    ];
                    let top = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let lse = top + f.iter().map(|x| (x - top).exp()).sum::<f64>().ln();
                    total += w * (f[yi] - lse);
                }
            }
        }
    }
    total
}

fn kl(fit: &VariationalFit) -> f64 {
    fit.qs.iter().map(|q| q.kl()).sum()
}

#[test]
fn the_wine_optimum_at_the_defaults_matches_the_thousand_point_rule() {
    let b = wine();
    let default = fit_with(&b, None, &[]);
    let default = default.as_variational().expect("mirror descent");
    let coarse = fit_with(&b, None, &[("quadrature", "10")]);
    let coarse = coarse.as_variational().expect("mirror descent");
    // The engine with 10 points per class is the 10³-node rule: evaluate
    // its q with the literal rule.
    let (m, v) = coarse.core.marginals(&coarse.qs);
    let literal = literal_product(&coarse.core.model.y, &m, &v, 10) - kl(coarse);
    assert!(
        (literal - coarse.elbo).abs() < 1e-9,
        "literal 10³ rule {literal} vs the engine's {}",
        coarse.elbo
    );
    // The default optimum within 1e-4 (relative) of the 10³-node optimum.
    let rel = (default.elbo - literal).abs() / literal.abs();
    assert!(
        rel < 1e-4,
        "default {} vs 10³ rule {literal}: {rel:e}",
        default.elbo
    );
    // The reported error estimate is small and honest: the default's value
    // moves by less than it when the points double.
    let e = default.rule_error.estimate.expect("an error estimate");
    assert!(e < 1e-6, "error estimate {e}");
    let finer = fit_with(&b, None, &[("quadrature", "40")]);
    let finer = finer.as_variational().expect("mirror descent");
    assert!(
        (finer.elbo - default.elbo).abs() < 1e-6,
        "{} vs {}",
        finer.elbo,
        default.elbo
    );
}

#[test]
fn the_rule_agrees_with_monte_carlo_at_many_draws() {
    let b = wine();
    let fit = fit_with(&b, None, &[("steps", "10")]);
    let fit = fit.as_variational().expect("mirror descent");
    let (m, v) = fit.core.marginals(&fit.qs);
    let y = &fit.core.model.y;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let draws = 20_000;
    let (mut total, mut var_total) = (0.0, 0.0);
    for i in 0..m.nrows() {
        let yi = y[i] as usize;
        let (mut s1, mut s2) = (0.0, 0.0);
        for _ in 0..draws {
            let f: Vec<f64> = (0..3)
                .map(|j| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    m[(i, j)] + v[(i, j)].sqrt() * z
                })
                .collect();
            let top = f.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let l = f[yi] - top - f.iter().map(|x| (x - top).exp()).sum::<f64>().ln();
            s1 += l;
            s2 += l * l;
        }
        let mean = s1 / draws as f64;
        total += mean;
        var_total += (s2 / draws as f64 - mean * mean) / draws as f64;
    }
    let rule = fit.elbo + kl(fit);
    let se = var_total.sqrt();
    assert!(
        (total - rule).abs() < 4.0 * se,
        "Monte Carlo {total} ± {se} vs the product rule {rule}"
    );
}
