//! Control variates on plain arrays against exact integrals: polynomial
//! control variates are exact for polynomial integrands of their degree
//! under Gaussian targets; every Stein kernel has mean zero under its
//! target; control functionals beat plain Monte Carlo by a clear factor
//! over repetitions.

use nalgebra::{DMatrix, DVector};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use tempest::mc::control_variates::{Lengthscale, Method, Samples, estimate};
use tempest::mc::stein::{BaseKernel, stein_kernel};

/// n draws from N(μ, diag(s²)) [n, d] with their scores −(x − μ)/s².
fn gaussian(n: usize, mu: &[f64], s: &[f64], seed: u64) -> Samples {
    let mut rng = StdRng::seed_from_u64(seed);
    let d = mu.len();
    let x = DMatrix::from_fn(n, d, |_, j| {
        let z: f64 = StandardNormal.sample(&mut rng);
        mu[j] + s[j] * z
    });
    let u = DMatrix::from_fn(n, d, |i, j| -(x[(i, j)] - mu[j]) / (s[j] * s[j]));
    Samples::iid(x, u)
}

#[test]
fn polynomial_control_variates_are_exact_for_matching_degree() {
    let (mu, s) = ([0.5, -1.0, 2.0], [1.0, 0.5, 2.0]);
    let smp = gaussian(200, &mu, &s, 1);
    let x = &smp.x;
    // Degree 1: f = 3 x₀ − x₁ + 0.5 x₂ + 2; E f = 1.5 + 1 + 1 + 2 = 5.5.
    let f1: Vec<f64> = (0..200)
        .map(|i| 3.0 * x[(i, 0)] - x[(i, 1)] + 0.5 * x[(i, 2)] + 2.0)
        .collect();
    let e = estimate(
        &Method::Poly {
            order: 1,
            ridge: 0.0,
        },
        &smp,
        &f1,
    )
    .unwrap();
    assert!((e.cv - 5.5).abs() < 1e-10, "poly1: {}", e.cv);
    assert!((e.mc - 5.5).abs() > 1e-3, "plain Monte Carlo is not exact");
    // Degree 2: f = x₀² + x₀x₁ − 2x₂² + x₁; E f = (0.25 + 1) + (−0.5) − 2(4 + 4) − 1 = −16.25.
    let f2: Vec<f64> = (0..200)
        .map(|i| x[(i, 0)].powi(2) + x[(i, 0)] * x[(i, 1)] - 2.0 * x[(i, 2)].powi(2) + x[(i, 1)])
        .collect();
    let e = estimate(
        &Method::Poly {
            order: 2,
            ridge: 0.0,
        },
        &smp,
        &f2,
    )
    .unwrap();
    assert!((e.cv + 16.25).abs() < 1e-9, "poly2: {}", e.cv);
    // poly1 is not exact for a quadratic.
    let e1 = estimate(
        &Method::Poly {
            order: 1,
            ridge: 0.0,
        },
        &smp,
        &f2,
    )
    .unwrap();
    assert!((e1.cv + 16.25).abs() > 1e-3);
    // Semi-exact control functionals are exact for polynomials of their degree too.
    let secf = Method::Secf {
        kernel: BaseKernel::Rbf { ell: 1.0 },
        ell: Lengthscale::Median,
        lambda: 1e-6,
        order: 2,
    };
    let e = estimate(&secf, &smp, &f2).unwrap();
    assert!((e.cv + 16.25).abs() < 1e-6, "secf: {}", e.cv);
}

#[test]
fn too_few_samples_for_poly2_is_an_error() {
    let smp = gaussian(10, &[0.0; 4], &[1.0; 4], 2);
    let f = vec![1.0; 10];
    let e = estimate(
        &Method::Poly {
            order: 2,
            ridge: 0.0,
        },
        &smp,
        &f,
    )
    .unwrap_err();
    assert!(e.message.contains("need more than"), "{}", e.message);
    // A ridge makes it well-posed.
    assert!(
        estimate(
            &Method::Poly {
                order: 2,
                ridge: 1e-3
            },
            &smp,
            &f
        )
        .is_ok()
    );
}

#[test]
fn stein_kernels_have_mean_zero_under_their_target() {
    let (mu, s) = ([0.3, -0.4], [1.2, 0.7]);
    let smp = gaussian(200_000, &mu, &s, 3);
    let y = [0.8, -0.1];
    let uy = [
        -(y[0] - mu[0]) / (s[0] * s[0]),
        -(y[1] - mu[1]) / (s[1] * s[1]),
    ];
    for k in [
        BaseKernel::Rbf { ell: 0.9 },
        BaseKernel::Imq {
            ell: 1.0,
            beta: -0.5,
        },
        BaseKernel::Preconditioned {
            ell: 1.1,
            alpha: 0.2,
        },
    ] {
        let v: Vec<f64> = (0..smp.len())
            .map(|i| {
                let x = [smp.x[(i, 0)], smp.x[(i, 1)]];
                let u = [smp.u[(i, 0)], smp.u[(i, 1)]];
                stein_kernel(&k, &x, &y, &u, &uy)
            })
            .collect();
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let sd = (v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / n).sqrt();
        assert!(
            m.abs() < 4.0 * sd / n.sqrt(),
            "{k:?}: mean {m} (se {})",
            sd / n.sqrt()
        );
        // And the kernel is not trivially zero.
        assert!(sd > 1e-2, "{k:?}");
    }
}

/// E[sin(x) + cos(2x) + x] under N(0, 1) = e⁻² (sin and x are odd).
#[test]
fn control_functionals_beat_monte_carlo_over_repetitions() {
    let truth = (-2.0f64).exp();
    let methods = [
        Method::Stein {
            kernel: BaseKernel::Rbf { ell: 1.0 },
            ell: Lengthscale::Median,
            lambda: 1e-6,
            split: false,
        },
        Method::Stein {
            kernel: BaseKernel::Rbf { ell: 1.0 },
            ell: Lengthscale::Median,
            lambda: 1e-6,
            split: true,
        },
        Method::Stein {
            kernel: BaseKernel::Imq {
                ell: 1.0,
                beta: -0.5,
            },
            ell: Lengthscale::MarginalLikelihood,
            lambda: 1e-6,
            split: false,
        },
        Method::Secf {
            kernel: BaseKernel::Rbf { ell: 1.0 },
            ell: Lengthscale::Median,
            lambda: 1e-6,
            order: 1,
        },
    ];
    let reps = 100;
    let mut mc_sq = 0.0;
    let mut cv_sq = vec![0.0; methods.len()];
    for r in 0..reps {
        let smp = gaussian(50, &[0.0], &[1.0], 100 + r);
        let f: Vec<f64> = (0..50)
            .map(|i| {
                let x = smp.x[(i, 0)];
                x.sin() + (2.0 * x).cos() + x
            })
            .collect();
        for (k, m) in methods.iter().enumerate() {
            let e = estimate(m, &smp, &f).unwrap();
            if k == 0 {
                mc_sq += (e.mc - truth).powi(2);
            }
            cv_sq[k] += (e.cv - truth).powi(2);
        }
    }
    for (k, m) in methods.iter().enumerate() {
        let ratio = mc_sq / cv_sq[k];
        assert!(ratio > 10.0, "{}: MSE ratio {ratio}", m.name());
    }
    // The polynomial control variates help less here (the integrand is not
    // polynomial) but still help.
}

#[test]
fn standard_errors_track_the_error() {
    // Over repetitions, the reported cv_se is the right size: the z-scores
    // (cv − truth)/cv_se have a root mean square between 0.5 and 2.
    let truth = (-2.0f64).exp();
    let m = Method::Poly {
        order: 2,
        ridge: 0.0,
    };
    let mut z2 = 0.0;
    for r in 0..100 {
        let smp = gaussian(400, &[0.0], &[1.0], 500 + r);
        let f: Vec<f64> = (0..400)
            .map(|i| {
                let x = smp.x[(i, 0)];
                x.sin() + (2.0 * x).cos() + x
            })
            .collect();
        let e = estimate(&m, &smp, &f).unwrap();
        assert!(e.variance_reduction() > 1.0);
        z2 += ((e.cv - truth) / e.cv_se).powi(2);
    }
    let rms = (z2 / 100.0).sqrt();
    assert!(rms > 0.5 && rms < 2.0, "rms z {rms}");
    let _ = DVector::<f64>::zeros(1);
}

/// The pair of Sun's thesis §4.3.1 (South et al.): f₁(x) = 1 + x + x² +
/// sin(πx) e^{−x²} under N(0, 1) (truth 2) and f₂(x) = 1.5 + x + 1.5x² +
/// 1.75 sin(πx) e^{−x²} under N(0, σ²) (truth 1.5 + 1.5σ²), 50 samples each,
/// 100 repetitions. Vector-valued CVs borrow strength across the two tasks.
#[test]
fn vector_valued_control_variates_on_the_south_pair() {
    use tempest::mc::vector_valued::{Task, TaskMatrix, vector_valued};
    let pi = std::f64::consts::PI;
    let f1 = |x: f64| 1.0 + x + x * x + (pi * x).sin() * (-x * x).exp();
    let f2 = |x: f64| 1.5 + x + 1.5 * x * x + 1.75 * (pi * x).sin() * (-x * x).exp();
    let kernel = BaseKernel::Rbf { ell: 1.0 };
    let lambda = 1e-3;
    for sigma2 in [1.0f64, 1.25] {
        let truth = [2.0, 1.5 + 1.5 * sigma2];
        let (mut mc, mut cf, mut vv_fixed, mut vv_learned) = (0.0, 0.0, 0.0, 0.0);
        for r in 0..100 {
            let a = gaussian(50, &[0.0], &[1.0], 1000 + r);
            let b = gaussian(50, &[0.0], &[sigma2.sqrt()], 5000 + r);
            let tasks = [
                Task {
                    f: (0..50).map(|i| f1(a.x[(i, 0)])).collect(),
                    x: a.x.clone(),
                    u: a.u.clone(),
                },
                Task {
                    f: (0..50).map(|i| f2(b.x[(i, 0)])).collect(),
                    x: b.x.clone(),
                    u: b.u.clone(),
                },
            ];
            for (t, task) in tasks.iter().enumerate() {
                let smp = Samples::iid(task.x.clone(), task.u.clone());
                let m = Method::Stein {
                    kernel,
                    ell: Lengthscale::Median,
                    lambda,
                    split: false,
                };
                let e = estimate(&m, &smp, &task.f).unwrap();
                mc += (e.mc - truth[t]).powi(2);
                cf += (e.cv - truth[t]).powi(2);
            }
            let fixed = vector_valued(
                &tasks,
                kernel,
                Lengthscale::Median,
                lambda,
                &TaskMatrix::Fixed(DMatrix::identity(2, 2)),
            )
            .unwrap();
            let learned = vector_valued(
                &tasks,
                kernel,
                Lengthscale::Median,
                lambda,
                &TaskMatrix::Learned {
                    iters: 100,
                    lr: 0.05,
                },
            )
            .unwrap();
            for (t, tr) in truth.iter().enumerate() {
                vv_fixed += (fixed.estimates[t].cv - tr).powi(2);
                vv_learned += (learned.estimates[t].cv - tr).powi(2);
            }
        }
        eprintln!(
            "σ² = {sigma2}: MSE mc {mc:.3e} cf {cf:.3e} vv(I) {vv_fixed:.3e} vv(learned) {vv_learned:.3e}"
        );
        assert!(mc / cf > 10.0, "control functionals vs MC: {}", mc / cf);
        assert!(mc / vv_learned > 10.0);
        assert!(
            vv_learned <= cf * 1.05,
            "learned B: {vv_learned} vs CF {cf}"
        );
    }
}

/// With one task, the vector-valued closed form is the control functional.
#[test]
fn one_task_vector_valued_is_the_control_functional() {
    use tempest::mc::vector_valued::{Task, TaskMatrix, vector_valued};
    let smp = gaussian(40, &[0.2, -0.3], &[1.0, 0.6], 77);
    let f: Vec<f64> = (0..40)
        .map(|i| (smp.x[(i, 0)] * smp.x[(i, 1)]).sin() + smp.x[(i, 0)].powi(2))
        .collect();
    let kernel = BaseKernel::Imq {
        ell: 0.8,
        beta: -0.5,
    };
    let cf = estimate(
        &Method::Stein {
            kernel,
            ell: Lengthscale::Fixed,
            lambda: 1e-4,
            split: false,
        },
        &smp,
        &f,
    )
    .unwrap();
    let vv = vector_valued(
        &[Task {
            x: smp.x.clone(),
            u: smp.u.clone(),
            f: f.clone(),
        }],
        kernel,
        Lengthscale::Fixed,
        1e-4,
        &TaskMatrix::Fixed(DMatrix::identity(1, 1)),
    )
    .unwrap();
    assert!(
        (vv.estimates[0].cv - cf.cv).abs() < 1e-9 * cf.cv.abs().max(1.0),
        "{} vs {}",
        vv.estimates[0].cv,
        cf.cv
    );
    // A wrong B shape is an error.
    let e = vector_valued(
        &[Task {
            x: smp.x.clone(),
            u: smp.u.clone(),
            f,
        }],
        kernel,
        Lengthscale::Fixed,
        1e-4,
        &TaskMatrix::Fixed(DMatrix::identity(2, 2)),
    )
    .unwrap_err();
    assert!(e.message.contains("task matrix"), "{}", e.message);
}
