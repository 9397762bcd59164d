//! Generated ODE models: `system` definitions with random right-hand
//! sides, `ode(...)` calls with hostile initial states, times and solver
//! options, under every kind of engine, with test data.

use super::pieces::*;
use super::{out_dir, runner};
use proptest::prelude::*;

/// A scalar expression over the state `x` (of `states` entries), the
/// parameter `p` and the time `t`, a few operators deep.
fn rhs(states: usize) -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        3 => (0..states + 1).prop_map(|i| format!("x[{i}]")),
        2 => Just("p".to_string()),
        1 => Just("t".to_string()),
        1 => one_of(&REALS),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/", "^"]),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("({a} {op} {b})")),
            (
                prop::sample::select(vec!["exp", "log", "sqrt", "sin", "tanh"]),
                inner.clone()
            )
                .prop_map(|(f, a)| format!("{f}({a})")),
            inner.prop_map(|a| format!("-{a}")),
        ]
    })
}

/// A `system` and the `ode(...)` call that solves it: the model text.
fn ode_model() -> impl Strategy<Value = String> {
    let body = (1usize..4).prop_flat_map(|s| {
        (
            Just(s),
            prop::collection::vec(prop_oneof![3 => Just(String::new()), 1 => rhs(s)], s),
            prop_oneof![8 => Just(0usize), 1 => Just(1usize)],
        )
    });
    let x0 = prop_oneof![
        6 => Just("ones".to_string()),
        1 => one_of(&REALS),
        1 => Just("z0".to_string()),
    ];
    let times = prop_oneof![
        6 => Just("t".to_string()),
        1 => one_of(&["t * 1e300", "t - 100", "-t", "t * 0", "t + 1e308", "t * 1e-300", "t * 1000"]),
    ];
    let opts = settings(vec![
        setting(
            "rtol",
            prop_oneof![9 => one_of(&["1e-6", "1e-8", "0.01"]), 1 => one_of(&REALS)],
        ),
        setting(
            "atol",
            prop_oneof![9 => one_of(&["1e-6", "1e-9"]), 1 => one_of(&REALS)],
        ),
        setting(
            "max_steps",
            prop_oneof![9 => one_of(&["100", "5", "100000"]), 1 => one_of(&INTS)],
        ),
    ]);
    let engine = prop_oneof![
        (
            prop::sample::select(vec!["nuts", "hmc", "mala"]),
            size(&["5", "10"])
        )
            .prop_map(|(e, d)| format!(
                "{e} {{ chains = 2, warmup = 10, draws = {d}, max_depth = 5, leapfrog_steps = 5 }}"
            )),
        size(&["20", "50"]).prop_map(|d| format!("sample_prior {{ draws = {d} }}")),
        Just(
            "evidence { rungs = 2, sampler = nuts { chains = 1, warmup = 10, draws = 6 } }".into()
        ),
        Just("exact { learn_hypers = true, max_iters = 5 }".into()),
        Just("mirror_descent { steps = 3, learn_hypers = true }".into()),
        Just("svi { steps = 5, batch = 4, polish = 1 }".into()),
    ];
    (
        body,
        x0,
        prop_oneof![6 => Just("0".to_string()), 1 => one_of(&["-1", "5", "1e300", "-1e308"])],
        times,
        opts,
        engine,
        0usize..3,
    )
        .prop_map(|((s, elems, extra), x0, t0, ts, opts, engine, out)| {
            let mut parts: Vec<String> = elems
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    if e.is_empty() {
                        format!("-p * x[{i}] + {}", 0.1 * i as f64)
                    } else {
                        e.clone()
                    }
                })
                .collect();
            for _ in 0..extra {
                parts.push("1.0".into());
            }
            let x0 = match x0.as_str() {
                "ones" => format!("[{}]", vec!["1.0"; s].join(", ")),
                "z0" => "z0".to_string(),
                v => format!("[{}]", vec![v; s].join(", ")),
            };
            let opts = if opts.is_empty() { opts } else { format!(", {opts}") };
            let call = format!("ode(decay, {x0}, {t0}, {ts}, p{opts})");
            let sampler = !engine.starts_with("exact")
                && !engine.starts_with("mirror")
                && !engine.starts_with("svi");
            let (unknowns, fit) = if sampler {
                (
                    format!(
                        "param {{ p : positive ~ lognormal(0, 0.5)\n  sigma : positive ~ normal(0, 1)\n  z0 : vector<lower=0>[{s}] ~ lognormal(0, 1) }}"
                    ),
                    format!("y ~ normal(col(z, {out}), sigma)"),
                )
            } else {
                (
                    format!(
                        "hyper {{ p : positive = 0.7\n  sigma : positive = 0.5\n  z0 : vector<lower=0>[{s}] = 1.0 }}"
                    ),
                    format!("f ~ gp(0, rbf(1.0))\n  y ~ normal(f(t) + col(z, {out}), sigma)"),
                )
            };
            format!(
                "system decay(t : real, x : vector[{s}], p : real) {{\n  [{}]\n}}\n\
                 data {{ n : int\n  t : vector[n]\n  y : vector[n] }}\n{unknowns}\n\
                 model {{\n  let z = {call}\n  {fit}\n}}\n\
                 estimate {{ last = E[z[n - 1, 0]] }}\ninfer {engine}\n",
                parts.join(", ")
            )
        })
}

#[test]
fn generated_ode_models_end_cleanly() {
    let dir = out_dir("fuzz_ode");
    let data_rows = prop_oneof![4 => 3usize..9, 1 => Just(1usize)];
    let strategy = (
        ode_model(),
        data_rows,
        prop::option::weighted(0.2, (0usize..9, 0usize..4, one_of(&CELLS))),
    );
    runner(14, 31)
        .run(&strategy, |(model, rows, cell)| {
            let steps = Steps {
                context: format!("model:\n{model}\nrows {rows}, damaged cell {cell:?}"),
                dir: &dir,
            };
            let m = steps.file("model.tempest", &model);
            let text = table(rows, 2, &[], 1);
            let d = steps.file(
                "data.csv",
                &damage(&text, cell.as_ref().map(|(r, c, v)| (*r, *c, v.as_str()))),
            );
            let test = steps.file("test.csv", &table(3, 2, &[], 1));
            steps.run(&args(&["check", &m, "--data", &d]))?;
            steps.run(&args(&["run", &m, "--data", &d, "--test", &test, "-q"]))?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
