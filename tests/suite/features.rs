//! The cargo features: a program that embeds tempest with
//! `default-features = false` builds none of the command line's, the
//! figures' or the progress bars' crates, and the figure methods stay and
//! say which feature is missing.

use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

/// The crates behind each feature that an embedding program leaves out.
const GATED: [(&str, &str); 5] = [
    ("clap", "cli"),
    ("anyhow", "cli"),
    ("ctrlc", "cli"),
    ("plotters", "plot"),
    ("indicatif", "progress"),
];

/// The names of the crates in tempest's normal dependency tree with `args`
/// (feature flags) added.
fn crates(args: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-e", "normal", "--prefix", "none"])
        .args(["--manifest-path", manifest])
        .args(args)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[test]
fn without_default_features_no_cli_plot_or_progress_crate_is_built() {
    let all = crates(&[]);
    let bare = crates(&["--no-default-features"]);
    for (name, feature) in GATED {
        assert!(all.contains(name), "the default build has no `{name}`");
        assert!(
            !bare.contains(name),
            "`{name}` is built without default features; it belongs behind `{feature}`"
        );
        let one = crates(&["--no-default-features", "--features", feature]);
        assert!(
            one.contains(name),
            "`--features {feature}` leaves out `{name}`"
        );
    }
    assert!(
        bare.len() + 30 < all.len(),
        "without default features {} crates, with them {}",
        bare.len(),
        all.len()
    );
}

/// An exact fit of the motorcycle data's first 20 rows.
fn mcycle_fit() -> Box<dyn tempest::infer::fit::Fit> {
    let m = common::model(
        "data { n : int  t : vector[n] = column(\"times\")  accel : vector[n] }\n\
         hyper { ell : positive = 5.0  sf : positive = 30.0  sigma : positive = 20.0 }\n\
         model { f ~ gp(0, sf^2 * matern52(ell))  accel ~ normal(f(t), sigma) }\n\
         infer exact { learn_hypers = false }\n",
    );
    let data = tempest::Data::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/data/mcycle.csv"
    )))
    .expect("data")
    .select_rows(0, 19)
    .expect("rows");
    common::fit_with(&common::bind(&m, &data), None, &[])
}

#[test]
fn the_figure_methods_draw_or_name_the_missing_feature() {
    let fit = mcycle_fit();
    let path = common::out_dir("features").join("fit.png");
    let _ = std::fs::remove_file(&path);
    let drawn = fit.plot(&path);
    let chosen = fit.plot_with(&path, &Default::default());
    if cfg!(feature = "plot") {
        assert_eq!(drawn.expect("plot"), vec![path.clone()]);
        assert!(path.exists());
        chosen.expect("plot_with");
    } else {
        for r in [drawn, chosen] {
            let e = r.expect_err("a figure without the plot feature");
            assert_eq!(e.kind, tempest::ErrorKind::Unsupported);
            assert!(
                e.message
                    .contains("built without the `plot` feature; rebuild with `--features plot`"),
                "{}",
                e.message
            );
        }
        assert!(!path.exists());
    }
}

/// The command line without figures refuses `--plot` and `plot-trace`
/// before any work, naming the feature.
#[cfg(all(feature = "cli", not(feature = "plot")))]
#[test]
fn the_command_line_without_figures_refuses_them_first() {
    let dir = common::out_dir("features_cli");
    let png = dir.join("fit.png");
    let json = dir.join("fit.json");
    let (png_s, json_s) = (png.to_str().unwrap(), json.to_str().unwrap());
    let args = common::mcycle_split(
        "examples/mcycle.tempest",
        &["--plot", png_s, "--json", json_s],
    );
    let o = common::tempest(&args);
    let err = common::assert_clean_failure(&o);
    assert!(err.contains("--plot: tempest was built without the `plot` feature"));
    assert!(o.stdout.is_empty() && !json.exists() && !png.exists());
    let o = common::tempest(&["plot-trace", "--out", png_s, "x.json"]);
    let err = common::assert_clean_failure(&o);
    assert!(err.contains("--out: tempest was built without the `plot` feature"));
}
