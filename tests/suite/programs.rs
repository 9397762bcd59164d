//! Compiled kernel programs (`tempest::ir::program`, run by
//! `tempest::model::program`): values and derivatives against finite
//! differences, in parameters and in inputs, and the bodies the compiler
//! leaves to the general evaluator.

use tempest::ir::program::{KernelProgram, compile_kernel};
use tempest::{Model, Registry};

fn program(body: &str, params: &str) -> KernelProgram {
    let text = format!("kernel k({params})(x, x2) {{ {body} }}\nmodel {{ }}\n");
    let m =
        Model::from_str("k.tempest", &text, &Registry::default()).unwrap_or_else(|e| panic!("{e}"));
    compile_kernel(&m.graph.functions[0]).expect("compiles")
}

#[test]
fn values_and_derivatives_match_finite_differences() {
    let cases = [
        (
            "(1 + sqdist(x, x2) / (2 * alpha * ell^2)) ^ (-alpha)",
            "ell : positive, alpha : positive",
        ),
        (
            "let r = sqrt(sqdist(x, x2)) / ell; if r == 0 then 1 else sin(r) / r * alpha",
            "ell : positive, alpha : positive",
        ),
        (
            "exp(-sqdist(x, x2) / (2 * ell^2)) + alpha * dot(x, x2) + x[0] * x2[1]",
            "ell : positive, alpha : real",
        ),
        (
            "log1p(alpha * exp(-abs(x[0] - x2[0]) / ell)) * tanh(ell)",
            "ell : positive, alpha : positive",
        ),
    ];
    let (x, y) = ([0.3, -1.2], [1.1, 0.4]);
    let p = [0.7, 1.3];
    for (body, params) in cases {
        let prog = program(body, params);
        let mut g = [0.0; 2];
        let v = prog.eval_grad(&p, &x, &y, &mut g);
        assert!((v - prog.eval::<f64>(&p, &x, &y)).abs() < 1e-15, "{body}");
        central_differences(&prog, p, &x, &y, &g, body);
    }
}

/// The parameters' derivatives `g` at `p` against central differences.
fn central_differences(
    prog: &KernelProgram,
    p: [f64; 2],
    x: &[f64],
    y: &[f64],
    g: &[f64],
    what: &str,
) {
    for j in 0..2 {
        let h = 1e-6;
        let (mut up, mut dn) = (p, p);
        up[j] += h;
        dn[j] -= h;
        let fd = (prog.eval::<f64>(&up, x, y) - prog.eval::<f64>(&dn, x, y)) / (2.0 * h);
        assert!(
            (g[j] - fd).abs() <= 1e-7 * fd.abs().max(1.0),
            "{what} ∂p{j}: {} vs {fd}",
            g[j]
        );
    }
}

#[test]
fn the_branch_not_taken_does_not_poison_the_derivative() {
    // At r = 0 the other branch is 0/0.
    let prog = program(
        "let r = sqrt(sqdist(x, x2)) / ell; if r == 0 then alpha else sin(r) / r",
        "ell : positive, alpha : positive",
    );
    let mut g = [0.0; 2];
    let v = prog.eval_grad(&[0.7, 1.3], &[0.5], &[0.5], &mut g);
    assert_eq!(v, 1.3);
    assert_eq!(g, [0.0, 1.0]);
}

#[test]
fn bodies_outside_programs_are_not_compiled() {
    let text =
        "kernel k(ell : positive)(x, x2) { exp(-sum((x - x2) .* (x - x2)) / ell) }\nmodel { }\n";
    let m =
        Model::from_str("k.tempest", text, &Registry::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(compile_kernel(&m.graph.functions[0]).is_none());
}

#[test]
fn input_derivatives_match_finite_differences() {
    let bodies = [
        "exp(-sqdist(x, x2) / (2 * ell^2))",
        "let r = sqrt(sqdist(x, x2) + 0.1) / ell; (1 + r) * exp(-r) * alpha",
        "alpha * dot(x, x2) + dot(x, x) * dot(x2, x2) / ell",
        "x[0] * x2[1] + tanh(x[1] - x2[0]) * ell + (if x[0] > 0 then x2[0]^2 else 0)",
    ];
    let p = [0.8, 1.3];
    let (x, y) = ([0.3, -1.2], [1.1, 0.4]);
    for body in bodies {
        let prog = program(body, "ell : positive, alpha : real");
        let (mut g, mut gx, mut gy) = ([0.0; 2], [0.0; 2], [0.0; 2]);
        let v = prog.eval_grad_inputs(&p, &x, &y, &mut g, &mut gx, &mut gy);
        let mut g0 = [0.0; 2];
        assert_eq!(v, prog.eval_grad(&p, &x, &y, &mut g0), "{body}");
        assert_eq!(g, g0, "{body}");
        let h = 1e-6;
        for k in 0..2 {
            let (mut xu, mut xd, mut yu, mut yd) = (x, x, y, y);
            xu[k] += h;
            xd[k] -= h;
            yu[k] += h;
            yd[k] -= h;
            let e = |a: &[f64], b: &[f64]| prog.eval::<f64>(&p, a, b);
            let fx = (e(&xu, &y) - e(&xd, &y)) / (2.0 * h);
            let fy = (e(&x, &yu) - e(&x, &yd)) / (2.0 * h);
            assert!(
                (gx[k] - fx).abs() <= 1e-7 * fx.abs().max(1.0),
                "{body} ∂x{k}: {} vs {fx}",
                gx[k]
            );
            assert!(
                (gy[k] - fy).abs() <= 1e-7 * fy.abs().max(1.0),
                "{body} ∂y{k}: {} vs {fy}",
                gy[k]
            );
        }
    }
}

#[test]
fn logsumexp_compiles_as_the_interpreter_computes_it() {
    let prog = program(
        "logsumexp([-sqdist(x, x2) / ell, log(alpha) - sqrt(sqdist(x, x2) + 1), x[0] * alpha])",
        "ell : positive, alpha : positive",
    );
    let (x, y) = ([0.3, -1.2], [1.1, 0.4]);
    let p = [0.7, 1.3];
    let r: f64 = (x[0] - y[0]) * (x[0] - y[0]) + (x[1] - y[1]) * (x[1] - y[1]);
    let want =
        tempest::math::scalar::logsumexp(&[-r / p[0], p[1].ln() - (r + 1.0).sqrt(), x[0] * p[1]]);
    let mut g = [0.0; 2];
    let v = prog.eval_grad(&p, &x, &y, &mut g);
    assert_eq!(v.to_bits(), want.to_bits());
    central_differences(&prog, p, &x, &y, &g, "logsumexp");
    // Every term −∞: −∞ with a zero derivative, as the interpreter (whose
    // maximum is a constant); one term +∞: +∞.
    let prog = program(
        "logsumexp([log(0 * ell), log(0 * alpha)])",
        "ell : positive, alpha : positive",
    );
    let v = prog.eval_grad(&p, &x, &y, &mut g);
    assert_eq!(v, f64::NEG_INFINITY);
    assert_eq!(g, [0.0, 0.0]);
    let prog = program(
        "logsumexp([1 / (0 * ell), alpha])",
        "ell : positive, alpha : positive",
    );
    assert_eq!(prog.eval::<f64>(&p, &x, &y), f64::INFINITY);
}
