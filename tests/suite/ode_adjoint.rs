//! Gradients through `ode(...)` by the discrete adjoint sweep against the
//! forward sensitivities: the same log density to the bit and the same
//! gradient to rounding, for a system with a time-dependent right-hand
//! side, a vector parameter read in part, a sampled and a fixed initial
//! state; `sensitivity` chosen per call, shown by `tempest emit ir`,
//! refused with a located error when misspelt, and bounded in memory
//! before the solve.

use crate::common;
use common::*;
use std::sync::Arc;
use tempest::infer::mcmc::density::Density;

/// Lotka–Volterra on the hare and lynx pelts ([`crate::ode::LOTKA_VOLTERRA`])
/// with `opts` appended to the `ode` call: eight unknowns, six of them
/// (four rates, the initial state) varying in the solve.
fn lv_text(opts: &str) -> String {
    let call_end = "atol = 1e-10)";
    assert!(
        crate::ode::LOTKA_VOLTERRA.contains(call_end),
        "the ode call's options moved"
    );
    crate::ode::LOTKA_VOLTERRA.replace(call_end, &format!("atol = 1e-10{opts})"))
}

fn lotka_volterra(opts: &str) -> Density {
    let m = model(&lv_text(opts));
    let b = bind(&m, &csv("hare_lynx_1900_1920.csv", None));
    Density::new(Arc::new(b)).unwrap()
}

/// The log density and gradient of `a` and `b` at `x`: equal values, and
/// gradients within `tol` relative.
fn agree(a: &Density, b: &Density, x: &[f64], tol: f64) {
    let (mut ga, mut gb) = (vec![0.0; a.dim], vec![0.0; b.dim]);
    let la = a.log_density_grad(x, &mut ga).unwrap();
    let lb = b.log_density_grad(x, &mut gb).unwrap();
    assert_eq!(la, lb, "log densities");
    assert_eq!(la, a.log_density(x).unwrap());
    for k in 0..ga.len() {
        assert!(
            (ga[k] - gb[k]).abs() <= tol * gb[k].abs().max(1.0),
            "coordinate {k}: {ga:?} vs {gb:?}"
        );
    }
}

#[test]
fn the_adjoint_sweep_gives_the_forward_sensitivities_gradient() {
    let forward = lotka_volterra(", sensitivity = forward");
    let adjoint = lotka_volterra(", sensitivity = adjoint");
    // Six varying numbers: the default takes the adjoint.
    let auto = lotka_volterra("");
    let points = [
        [0.55f64, 0.028, 0.8, 0.024, 34.0, 5.9, 0.25, 0.3],
        [0.9, 0.05, 1.1, 0.03, 20.0, 8.0, 0.4, 0.6],
    ];
    for p in points {
        let x: Vec<f64> = p.iter().map(|v| v.ln()).collect();
        agree(&adjoint, &forward, &x, 1e-9);
        agree(&auto, &adjoint, &x, 0.0);
    }
}

/// A forced van der Pol oscillator: the right-hand side reads the time
/// (the stage times matter), two of the three elements of a vector
/// parameter, and a scalar; its initial state is fixed or sampled.
fn forced(x0: &str, opts: &str, body: &str) -> Density {
    let text = format!(
        r#"
system forced(t : real, x : vector[2], p : vector[3], th : real) {{ {body} }}
data {{ n : int  ts : vector[n]  y : vector[n] }}
param {{
  th : positive ~ lognormal(0, 1)
  p : vector[3] ~ normal(0, 1)
  a : real ~ normal(0, 1)
}}
model {{
  let x = ode(forced, {x0}, 0, ts, p, th{opts})
  y ~ normal(col(x, 0), 0.3)
}}
"#
    );
    let data = json_data(
        "ode_adjoint_forced",
        r#"{"n": 6, "ts": [0.0, 0.5, 0.5, 2.0, 7.5, 10.0], "y": [0.5, 1.1, 1.1, -0.3, 1.2, -1.8]}"#,
    );
    Density::new(Arc::new(bind(&model(&text), &data))).unwrap()
}

const FORCED: &str = "[x[1], th * (1 - x[0]^2) * x[1] - x[0] + p[0] * sin(p[1] * t)]";

#[test]
fn a_forced_system_with_vector_parameters_agrees_in_every_coordinate() {
    let x = [0.8f64.ln(), 0.4, 1.3, -0.7, 0.2];
    for x0 in ["[0.5, 1.5]", "[a, 1.5]"] {
        let adjoint = forced(x0, ", sensitivity = adjoint", FORCED);
        let forward = forced(x0, ", sensitivity = forward", FORCED);
        agree(&adjoint, &forward, &x, 1e-9);
        // The interpreted form of the same body has no reverse pass: it
        // keeps forward sensitivities whatever it is asked, and gives the
        // same numbers.
        let general = forced(
            x0,
            ", sensitivity = adjoint",
            "[[0.0, 1.0], [-1.0, 0.0]] * x + [0.0, th * (1 - x[0]^2) * x[1] + p[0] * sin(p[1] * t)]",
        );
        let (mut ga, mut gg) = (vec![0.0; 5], vec![0.0; 5]);
        adjoint.log_density_grad(&x, &mut ga).unwrap();
        general.log_density_grad(&x, &mut gg).unwrap();
        for k in 0..5 {
            assert!(
                (ga[k] - gg[k]).abs() <= 1e-8 * gg[k].abs().max(1.0),
                "{ga:?} vs {gg:?}"
            );
        }
        // p[2] is not read by the body: its gradient is its prior's, -p[2].
        assert_eq!(ga[3], 0.7);
    }
}

#[test]
fn a_misspelt_sensitivity_is_a_located_error() {
    let text = lv_text(", sensitivity = fast");
    let e = tempest::Model::from_str("lv.tempest", &text, &tempest::Registry::default())
        .err()
        .expect("an error");
    let shown = format!("{e}");
    assert!(
        shown.contains("`sensitivity` of `ode` must be `auto`, `forward` or `adjoint`")
            && shown.contains("lv.tempest:15"),
        "{shown}"
    );
}

#[test]
fn the_adjoint_record_is_bounded_before_the_solve() {
    // At the step limit the record could need 14 MB: under a 2 MB budget
    // the default falls back to forward sensitivities and runs; asked for
    // by name, the adjoint is a memory error at the call.
    let dir = out_dir("ode_adjoint_memory");
    let run = |opts: &str| {
        let text = lv_text(opts) + "infer nuts { chains = 1  warmup = 20  draws = 20  seed = 1 }\n";
        let file = write_file(&dir, "lv.tempest", &text);
        let data = shared().join("data").join("hare_lynx_1900_1920.csv");
        tempest_within(
            &["run", &file, "--data", data.to_str().unwrap(), "-q"],
            &[("TEMPEST_MEMORY", "2MB")],
            std::time::Duration::from_secs(120),
        )
        .0
    };
    assert_ok(&run(""));
    let err = assert_clean_failure(&run(", sensitivity = adjoint"));
    assert!(
        err.contains("the ODE adjoint's record") && err.contains("lv.tempest:15"),
        "{err}"
    );
}

#[test]
fn the_ir_shows_a_sensitivity_that_is_not_the_default() {
    let dir = out_dir("ode_adjoint_emit");
    let emit = |opts: &str| {
        let file = write_file(&dir, "lv.tempest", &lv_text(opts));
        assert_ok(&tempest(&["emit", "ir", &file]))
    };
    let plain = emit("");
    assert!(
        plain.contains("max_steps 100000]") && !plain.contains("sensitivity"),
        "{plain}"
    );
    assert!(emit(", sensitivity = adjoint").contains("max_steps 100000 sensitivity adjoint]"));
    assert!(emit(", sensitivity = forward").contains("max_steps 100000 sensitivity forward]"));
}
