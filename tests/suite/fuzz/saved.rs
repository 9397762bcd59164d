//! Hand-damaged saved fits: fits of every engine that saves one are
//! written once, then edited at random (a number made hostile, a value of
//! the wrong kind, a key removed, an array shortened or lengthened, the
//! file cut short) and read back by `tempest predict`.

use super::pieces::*;
use super::{out_dir, runner};
use serde_json::{Value as Json, json};
use std::path::Path;

/// A model of each engine that saves fits, the data it trains on.
const FITS: [(&str, &str); 5] = [
    (
        "exact",
        "data { n : int\n  t : vector[n]\n  y : vector[n] }\nhyper { ell : positive = 1.0\n  sigma : positive = 0.5 }\n\
         model { f ~ gp(0, rbf(ell))\n  y ~ normal(f(t), sigma) }\ninfer exact { learn_hypers = true, max_iters = 5 }\n",
    ),
    (
        "md",
        "data { n : int\n  X : matrix[n, 2] = columns(\"x1\", \"x2\")\n  y : int<lower=0, upper=2>[n] = column(\"lab\") }\n\
         hyper { ell : positive = 1.0 }\nmodel { f ~ gp(0, rbf(ell))[3]\n  y ~ categorical_logit(f(X)) }\n\
         infer mirror_descent { steps = 3 }\n",
    ),
    (
        "gd",
        "data { n : int\n  t : vector[n]\n  k : int<lower=0>[n] }\nhyper { ell : positive = 1.0 }\n\
         model { f ~ gp(0, rbf(ell))\n  k ~ poisson_log(f(t)) }\nguide { f : mean_field }\ninfer gradient_descent { steps = 5 }\n",
    ),
    (
        "svi",
        "data { n : int\n  X : matrix[n, 2] = columns(\"x1\", \"x2\")\n  b : int<lower=0, upper=1>[n] }\n\
         hyper { ell : positive = 1.0 }\nmodel { let net = mlp([3, 2])\n  f ~ gp(0, deep(rbf(ell), net))\n  b ~ bernoulli_logit(f(X)) }\n\
         guide { f : inducing(m = 3) }\ninfer svi { steps = 4, batch = 4, polish = 1 }\n",
    ),
    (
        "nuts",
        "data { n : int\n  J : int = 4\n  g : int<lower=1, upper=J>[n] = column(\"g\", levels = 1..J)\n  y : vector[n] }\n\
         param { a : vector[J] ~ normal(0, 1)\n  sigma : positive ~ normal(0, 1) }\nmodel { y ~ normal(a[g], sigma) }\n\
         infer nuts { chains = 2, warmup = 10, draws = 4 }\n",
    ),
];

/// Paths to every node of `j` (of an array, its first and last element
/// only), as lists of object keys and array indices.
fn paths(j: &Json, at: &mut Vec<Json>, out: &mut Vec<Vec<Json>>) {
    out.push(at.clone());
    match j {
        Json::Object(m) => {
            for (k, v) in m {
                at.push(json!(k));
                paths(v, at, out);
                at.pop();
            }
        }
        Json::Array(a) => {
            let mut ends = vec![0, a.len().saturating_sub(1)];
            ends.dedup();
            for i in ends.into_iter().filter(|&i| i < a.len()) {
                at.push(json!(i));
                paths(&a[i], at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

/// The node at `path`.
fn node<'a>(j: &'a mut Json, path: &[Json]) -> Option<&'a mut Json> {
    path.iter().try_fold(j, |n, p| match p {
        Json::String(k) => n.get_mut(k.as_str()),
        Json::Number(i) => n.get_mut(i.as_u64()? as usize),
        _ => None,
    })
}

/// Values a damaged node may take.
fn hostile_value(k: usize) -> Json {
    let big: Json = serde_json::from_str("1e308").unwrap();
    match k % 16 {
        0 => big,
        1 => json!(-1e308),
        2 => json!(0),
        3 => json!(-1),
        4 => json!(1e20),
        5 => json!(5e-324),
        6 => json!(i64::MAX),
        7 => json!(u64::MAX),
        8 => json!("x"),
        9 => Json::Null,
        10 => json!(true),
        11 => json!([]),
        12 => json!({}),
        13 => json!([1.0, 2.0]),
        14 => json!(0.5),
        _ => json!(-0.0),
    }
}

/// Damage the fit `text`: `what` picks the edit, `at` the node, `k` the
/// value. The damaged text, and the path of the node.
fn damage_fit(text: &str, what: u8, at: usize, k: usize) -> (String, String) {
    let mut j: Json = serde_json::from_str(text).expect("a saved fit is JSON");
    let mut all = Vec::new();
    paths(&j, &mut Vec::new(), &mut all);
    let path = all[at % all.len()].clone();
    let shown = serde_json::to_string(&path).expect("JSON");
    match what {
        // Cut the file short.
        0 => {
            let mut end = (at * 7919) % text.len();
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            return (text[..end].to_string(), format!("cut at byte {end}"));
        }
        // Remove a key.
        1 => {
            if let Some((Json::String(last), parent)) = path.split_last()
                && let Some(Json::Object(m)) = node(&mut j, parent)
            {
                m.remove(last.as_str());
            }
        }
        // Shorten or lengthen an array.
        2 => {
            if let Some(Json::Array(a)) = node(&mut j, &path) {
                if k.is_multiple_of(2) {
                    a.pop();
                } else if let Some(first) = a.first().cloned() {
                    a.push(first);
                }
            }
        }
        // A hostile value in place of the node.
        _ => {
            if let Some(n) = node(&mut j, &path) {
                *n = hostile_value(k);
            }
        }
    }
    (serde_json::to_string(&j).expect("JSON"), shown)
}

/// Write the models and their fits; the (model, fit, test) paths.
fn fits(dir: &Path) -> Vec<(String, String, String)> {
    let labels: Vec<String> = ["red", "green", "blue"].map(String::from).to_vec();
    let data = write(dir, "data.csv", &table(12, 3, &labels, 4));
    let test = write(dir, "test.csv", &table(6, 3, &labels, 4));
    FITS.iter()
        .map(|(name, model)| {
            let m = write(dir, &format!("{name}.tempest"), model);
            let fit = dir
                .join(format!("{name}.json"))
                .to_string_lossy()
                .into_owned();
            let ran = check_run(&["run", &m, "--data", &data, "-q", "--save", &fit])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(ran.code, 0, "{name} fails to fit");
            let ran = check_run(&["predict", &m, "--fit", &fit, "--test", &test])
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(ran.code, 0, "{name}'s saved fit does not predict");
            (m, fit, test.clone())
        })
        .collect()
}

use super::{check_run, write};

#[test]
fn damaged_saved_fits_end_cleanly() {
    let dir = out_dir("fuzz_saved");
    let fits = fits(&dir);
    let strategy = (0..fits.len(), 0u8..8, 0usize..10_000, 0usize..64, 0u8..4);
    runner(40, 47)
        .run(&strategy, |(which, what, at, k, output)| {
            let (model, fit, test) = &fits[which];
            let text = std::fs::read_to_string(fit).expect("fit");
            let (damaged, path) = damage_fit(&text, what, at, k);
            let steps = Steps {
                context: format!("fit {fit} damaged by edit {what} at {path} with value {k}"),
                dir: &dir,
            };
            let bad = steps.file("damaged.json", &damaged);
            let mut predict = args(&["predict", model, "--fit", &bad, "--test", test]);
            match output {
                0 => predict.extend(args(&["--plot", &dir.join("p.png").to_string_lossy()])),
                1 => predict.extend(args(&["--json", &dir.join("p.json").to_string_lossy()])),
                _ => {}
            }
            steps.run(&predict)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
