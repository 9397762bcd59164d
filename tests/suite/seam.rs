//! Unit checks of the engine seam (`tempest-infer`) that need a whole
//! model: the hypers' log prior and its gradient, and the typed reads of
//! an engine's settings. They live here because the seam's crate cannot
//! build a model (the checker and the engines' list are above it).

use tempest::infer::hyper_prior::{log_prior, unused_priors};
use tempest::infer::hypers::HyperLayout;
use tempest::infer::registry;
use tempest::infer::settings::{EngineConfig, SettingVal};
use tempest::syntax::ast::Span;
use tempest::{Bound, Data, Model, Overrides, Registry};

fn bound(src: &str) -> Bound {
    let m = Model::from_str("test.tempest", src, &Registry::default()).expect("compiles");
    m.bind(&Data::values(), &Overrides::default())
        .expect("binds")
}

/// log p(θ) is the sum of the closed-form log densities at the
/// constrained values, and its gradient matches central differences.
#[test]
fn the_log_prior_matches_closed_forms_and_differences() {
    let b = bound(
        "hyper {\n  ell : positive = 0.7 ~ lognormal(0.5, 2)\n  c : real<lower=-1, upper=3> = 1.2 ~ normal(1, 0.5)\n  s : positive = 2 ~ gamma(2, 3)\n  v : vector[2] = 0.3 ~ normal(c, 2)\n  w : positive = 1\n}\nmodel {\n}\n",
    );
    let layout = HyperLayout::new(&b, true);
    let theta = layout.initial(&b).unwrap();
    let (lp, g) = log_prior(&b, &layout, &theta).unwrap();
    let ln2pi = (2.0 * std::f64::consts::PI).ln();
    let lognormal =
        |x: f64, m: f64, s: f64| -x.ln() - s.ln() - 0.5 * ln2pi - 0.5 * ((x.ln() - m) / s).powi(2);
    let normal = |x: f64, m: f64, s: f64| -s.ln() - 0.5 * ln2pi - 0.5 * ((x - m) / s).powi(2);
    // gamma(shape 2, rate 3): log(3²) + log x − 3x − log Γ(2)
    let gamma = |x: f64| 2.0 * 3f64.ln() + x.ln() - 3.0 * x;
    let want =
        lognormal(0.7, 0.5, 2.0) + normal(1.2, 1.0, 0.5) + gamma(2.0) + 2.0 * normal(0.3, 1.2, 2.0);
    assert!((lp - want).abs() < 1e-12, "{lp} against {want}");
    assert_eq!(g.len(), theta.len());
    let h = 1e-6;
    for k in 0..theta.len() {
        let mut up = theta.clone();
        let mut dn = theta.clone();
        up[k] += h;
        dn[k] -= h;
        let fd = (log_prior(&b, &layout, &up).unwrap().0 - log_prior(&b, &layout, &dn).unwrap().0)
            / (2.0 * h);
        assert!((g[k] - fd).abs() < 1e-7, "θ[{k}]: {} against {fd}", g[k]);
    }
    // The unlearned hyper `w` has no prior and no gradient.
    assert_eq!(g[theta.len() - 1], 0.0);
    // Without learning, nothing counts, and the priors are flagged.
    let off = HyperLayout::new(&b, false);
    assert_eq!(log_prior(&b, &off, &[]).unwrap().0, 0.0);
    assert!(unused_priors(&b, &off));
    assert!(!unused_priors(&b, &layout));
}

/// Every engine's settings struct reads its defaults, and a key of the
/// wrong type is an error rather than a zero.
#[test]
fn typed_reads_fail_loudly() {
    let schema = registry::schema("exact").unwrap();
    let mut cfg = EngineConfig::defaults(schema, Span::default());
    assert_eq!(cfg.count("max_iters").unwrap(), 500);
    assert!(!cfg.flag("learn_hypers").unwrap());
    assert_eq!(cfg.choice("gradient").unwrap(), "analytic");
    cfg.values
        .insert("max_iters".into(), SettingVal::Name("many".into()));
    let e = cfg.count("max_iters").unwrap_err();
    assert!(e.message.contains("`max_iters`"), "{}", e.message);
    cfg.values.remove("grad_tol");
    assert!(cfg.number("grad_tol").is_err());
}
