//! Model-file kernels with vector parameters (`kernel ard_rbf(ells :
//! vector[d])(a, b) { ... }`) are compiled for their parameters' lengths,
//! their vectors unrolled: the exact objective and its hypers' gradient
//! (now one reverse pass) equal the interpreted body's (forward chunks),
//! the built-in `rbf(ells)` and five-point differences; inputs of another
//! length are a shape error at the kernel; inputs used element-wise with
//! no vector to fix their length compile for the width binding saw; bodies
//! the compiler leaves alone still run, interpreted.

use crate::common;
use common::*;
use std::sync::Arc;
use tempest::infer::exact::model::ExactModel;
use tempest::infer::settings::Settings;
use tempest::ir::eval::Env;
use tempest::model::kernel::KernelValue;
use tempest::{Bound, RunOptions};

const DATA: &str = r#"
data {
  n : int
  d : int = 4
  X : matrix[n, d] = columns("age", "bmi", "bp", "s1")
  y : vector[n]
}
hyper { ls : vector<lower=0>[d] = [0.8, 1.5, 2.0, 1.1]  s : positive = 0.7  noise : positive = 0.3 }
"#;

/// The ARD squared exponential written in the model file.
const ARD: &str =
    "kernel ard_rbf(ells : vector[d])(a, b) { exp(-0.5 * sum(((a - b) ./ ells) ^ 2)) }\n";

/// The same kernel with a term the compiler does not cover (an index
/// that is not a constant) times 0: the same value, left to the
/// interpreter.
const ARD_INTERPRETED: &str = "kernel ard_rbf(ells : vector[d])(a, b) {\n  let j = 0\n  exp(-0.5 * sum(((a - b) ./ ells) ^ 2)) + 0 * ells[j]\n}\n";

fn bound(kernels: &str, kexpr: &str, rows: usize) -> Bound {
    let text = format!(
        "{kernels}{DATA}model {{ f ~ gp(0, {kexpr})  y ~ normal(f(X), noise) }}\ninfer exact {{ learn_hypers = true }}\n"
    );
    bind(
        &model(&text),
        &csv("diabetes_prepared.csv", Some((0, rows - 1))),
    )
}

fn exact(b: &Bound) -> ExactModel {
    let cfg = tempest::engine_config(&b.graph, &RunOptions::default()).unwrap();
    ExactModel::new(Arc::new(b.clone()), &Settings::from_config(&cfg).unwrap()).unwrap()
}

fn kernel_of(b: &Bound) -> KernelValue<f64> {
    let layout = tempest::infer::hypers::HyperLayout::new(b, true);
    let hyp = layout.values::<f64>(b, &layout.initial(b).unwrap());
    Env::new(b, &hyp, &[], &[])
        .kernel(&b.graph.gps[0].kernel)
        .unwrap()
}

fn is_compiled(k: &KernelValue<f64>) -> bool {
    match k {
        KernelValue::Compiled { .. } => true,
        KernelValue::Scale(_, k) => is_compiled(k),
        _ => false,
    }
}

#[test]
fn a_vector_parameter_kernel_is_compiled_and_agrees_with_the_interpreter_and_the_built_in() {
    let compiled = bound(ARD, "s * ard_rbf(ls)", 40);
    let interpreted = bound(ARD_INTERPRETED, "s * ard_rbf(ls)", 40);
    let builtin = bound("", "s * rbf(ls)", 40);
    assert!(is_compiled(&kernel_of(&compiled)), "the body is compiled");
    assert!(!is_compiled(&kernel_of(&interpreted)), "ells[j] is not");
    let (mc, mi, mb) = (exact(&compiled), exact(&interpreted), exact(&builtin));
    let theta = mc.layout.initial(&compiled).unwrap();
    assert_eq!(theta.len(), 6, "every hyper learned");
    let (sc, gc) = mc.lml_grad(&theta).unwrap();
    let (si, gi) = mi.lml_grad(&theta).unwrap();
    let (sb, gb) = mb.lml_grad(&theta).unwrap();
    // The compiled body unrolls the interpreter's own operations in its
    // order: the same objective to rounding of the Gram's last bits.
    assert!(
        (sc.lml - si.lml).abs() <= 1e-12 * si.lml.abs(),
        "{} vs {}",
        sc.lml,
        si.lml
    );
    assert!(
        (sc.lml - sb.lml).abs() <= 1e-10 * sb.lml.abs(),
        "{} vs {}",
        sc.lml,
        sb.lml
    );
    let five = |k: usize| {
        let h = 1e-3;
        let at = |d: f64| {
            let mut x = theta.clone();
            x[k] += d;
            mc.lml(&x).unwrap().lml
        };
        (-at(2.0 * h) + 8.0 * at(h) - 8.0 * at(-h) + at(-2.0 * h)) / (12.0 * h)
    };
    for k in 0..theta.len() {
        let fd = five(k);
        let tol = 1e-7 * fd.abs().max(1.0);
        assert!(
            (gc[k] - gi[k]).abs() <= 1e-9 * gi[k].abs().max(1.0),
            "θ{k}: {} vs interpreted {}",
            gc[k],
            gi[k]
        );
        assert!(
            (gc[k] - gb[k]).abs() <= 1e-8 * gb[k].abs().max(1.0),
            "θ{k}: {} vs built-in {}",
            gc[k],
            gb[k]
        );
        assert!(
            (gc[k] - fd).abs() <= tol,
            "θ{k}: {} vs differences {fd}",
            gc[k]
        );
    }
}

#[test]
fn inputs_of_another_length_are_a_shape_error_at_the_kernel() {
    // `ls` has 4 elements; `dims = 0..2` shows the kernel 3 columns.
    let text = format!(
        "{ARD}{DATA}model {{ f ~ gp(0, s * ard_rbf(ls, dims = 0..2))  y ~ normal(f(X), noise) }}\ninfer exact {{ }}\n"
    );
    let m = model(&text);
    let err = m
        .bind(
            &csv("diabetes_prepared.csv", Some((0, 19))),
            &tempest::Overrides::default(),
        )
        .err()
        .expect("a shape error");
    let shown = m.render(&err);
    assert!(
        shown.contains("`ard_rbf` uses its inputs element by element with vectors of length 4, but the kernel sees 3 input columns"),
        "{shown}"
    );
    assert!(
        shown.contains("test.tempest:10:"),
        "the error points at the kernel: {shown}"
    );
}

/// The exact objective and gradient of two bindings at the first one's
/// initial hypers, to `tol` relative, and the first's gradient against
/// five-point differences.
fn agree(a: &Bound, b: &Bound, tol: f64) {
    let (ma, mb) = (exact(a), exact(b));
    let theta = ma.layout.initial(a).unwrap();
    let (sa, ga) = ma.lml_grad(&theta).unwrap();
    let (sb, gb) = mb.lml_grad(&theta).unwrap();
    assert!(sa.lml.is_finite());
    assert!(
        (sa.lml - sb.lml).abs() <= tol * sb.lml.abs(),
        "{} vs {}",
        sa.lml,
        sb.lml
    );
    for k in 0..theta.len() {
        let h = 1e-4;
        let at = |d: f64| {
            let mut x = theta.clone();
            x[k] += d;
            ma.lml(&x).unwrap().lml
        };
        let fd = (-at(2.0 * h) + 8.0 * at(h) - 8.0 * at(-h) + at(-2.0 * h)) / (12.0 * h);
        assert!(
            (ga[k] - gb[k]).abs() <= 1e3 * tol * gb[k].abs().max(1.0),
            "θ{k}: {} vs {}",
            ga[k],
            gb[k]
        );
        assert!(
            (ga[k] - fd).abs() <= 1e-6 * fd.abs().max(1.0),
            "θ{k}: {} vs differences {fd}",
            ga[k]
        );
    }
}

#[test]
fn inputs_used_element_wise_compile_for_the_width_they_are_used_at() {
    // No vector fixes the inputs' length (an L1 distance), or the only
    // meeting is inside an `if` branch: binding's width of each use does.
    let cases = [
        (
            "kernel l1(ell : positive)(a, b) { exp(-sum(abs(a - b)) / ell) }\n",
            "kernel l1(ell : positive)(a, b) {\n  let j = 0\n  exp(-sum(abs(a - b)) / ell) + 0 * [ell][j]\n}\n",
            "s * l1(noise)",
        ),
        (
            "kernel l1(ell : positive)(a, b) { exp(-sum(abs(a - b)) / ell) }\n",
            "kernel l1(ell : positive)(a, b) {\n  let j = 0\n  exp(-sum(abs(a - b)) / ell) + 0 * [ell][j]\n}\n",
            "s * l1(noise, dims = 1..2) + l1(s, dims = [0])",
        ),
        (
            "kernel br(ells : vector[d])(a, b) { if sqdist(a, b) > 1e300 then 0 else exp(-0.5 * sum(((a - b) ./ ells) ^ 2)) }\n",
            ARD_INTERPRETED,
            "s * br(ls)",
        ),
    ];
    for (kernels, interpreted, kexpr) in cases {
        let b = bound(kernels, kexpr, 20);
        let k = kernel_of(&b);
        let compiled_parts = |k: &KernelValue<f64>| -> (usize, usize) {
            fn walk(k: &KernelValue<f64>, n: &mut (usize, usize)) {
                match k {
                    KernelValue::Compiled { .. } => n.0 += 1,
                    KernelValue::Lang { .. } => n.1 += 1,
                    KernelValue::Scale(_, a) => walk(a, n),
                    KernelValue::Sum(a, c) | KernelValue::Product(a, c) => {
                        walk(a, n);
                        walk(c, n)
                    }
                    _ => {}
                }
            }
            let mut n = (0, 0);
            walk(k, &mut n);
            n
        };
        let (c, l) = compiled_parts(&k);
        assert!(c > 0 && l == 0, "{kexpr}: {c} compiled, {l} interpreted");
        let reference = bound(interpreted, &kexpr.replace("br(", "ard_rbf("), 20);
        assert_eq!(compiled_parts(&kernel_of(&reference)).0, 0, "{kexpr}");
        agree(&b, &reference, 1e-12);
    }
}

#[test]
fn a_place_used_at_two_widths_keeps_the_general_evaluator() {
    let b = bound(
        "kernel l1(ell : positive)(a, b) { exp(-sum(abs(a - b)) / ell) }\n",
        "s * l1(noise)",
        20,
    );
    assert!(is_compiled(&kernel_of(&b)));
    let KernelValue::Scale(_, k) = kernel_of(&b) else {
        panic!("s * l1")
    };
    let KernelValue::Compiled { span, .. } = *k else {
        panic!("compiled")
    };
    // The same place seen with another width: no one width to unroll for.
    b.graph.functions[0].shaped.note_width(span, 3);
    assert!(!is_compiled(&kernel_of(&b)));
    let m = exact(&b);
    let (s, g) = m.lml_grad(&m.layout.initial(&b).unwrap()).unwrap();
    assert!(s.lml.is_finite() && g.iter().all(|v| v.is_finite()));
}

#[test]
fn a_body_outside_the_compiler_still_runs() {
    let b = bound(ARD_INTERPRETED, "s * ard_rbf(ls)", 20);
    assert!(!is_compiled(&kernel_of(&b)));
    agree(&bound(ARD, "s * ard_rbf(ls)", 20), &b, 1e-12);
}

#[test]
fn an_unrolled_body_is_bounded() {
    let n = tempest::ir::program::MAX_INSTS;
    let text = format!(
        "kernel wide(w : vector[m])(a, b) {{ exp(-sqdist(a, b)) * sum(w .* w) }}\ndata {{ n : int  m : int = {n}  X : matrix[n, 1] = columns(\"age\")  y : vector[n] }}\nhyper {{ w : vector[m] = 0.001  noise : positive = 0.3 }}\nmodel {{ f ~ gp(0, wide(w))  y ~ normal(f(X), noise) }}\ninfer exact {{ }}\n"
    );
    let b = bind(&model(&text), &csv("diabetes_prepared.csv", Some((0, 9))));
    assert!(
        !is_compiled(&kernel_of(&b)),
        "{n} elements make more instructions than a program may have"
    );
    let short = text.replace(&format!("m : int = {n}"), "m : int = 50");
    let b = bind(&model(&short), &csv("diabetes_prepared.csv", Some((0, 9))));
    assert!(is_compiled(&kernel_of(&b)));
}

#[test]
fn a_length_in_a_kernel_signature_needs_no_data_of_its_name() {
    // `vector[k]` with no data `k`: the length is the argument's, fixed at
    // each use; the same kernel as `vector[d]`, to the bit.
    let own = ARD.replace("vector[d]", "vector[k]");
    let (a, b) = (
        bound(ARD, "s * ard_rbf(ls)", 20),
        bound(&own, "s * ard_rbf(ls)", 20),
    );
    assert!(is_compiled(&kernel_of(&b)));
    let (ma, mb) = (exact(&a), exact(&b));
    let theta = ma.layout.initial(&a).unwrap();
    assert_eq!(
        ma.lml(&theta).unwrap().lml.to_bits(),
        mb.lml(&theta).unwrap().lml.to_bits()
    );
    // A name that is not data elsewhere is still an error there.
    let bad = format!(
        "{own}{}",
        DATA.replace("ls : vector<lower=0>[d]", "ls : vector<lower=0>[k]")
    );
    let text = format!(
        "{bad}model {{ f ~ gp(0, s * ard_rbf(ls))  y ~ normal(f(X), noise) }}\ninfer exact {{ }}\n"
    );
    let err = tempest::Model::from_str("test.tempest", &text, &tempest::Registry::default())
        .err()
        .expect("`k` in a hyper's type is not a known size");
    assert!(err.to_string().contains('k'), "{err}");
}
