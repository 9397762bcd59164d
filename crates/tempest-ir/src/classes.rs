//! Class labels against the classes of `categorical_logit`: C, the columns
//! of its first argument. The training data's labels are checked by the
//! dry run when data is bound ([`crate::bind::bind`]); test data's
//! when it is bound for prediction ([`crate::bind::bind_test`]),
//! before any engine runs, so that a test label the model has no class for
//! is a located data error rather than a predictive density of zero.

use super::bound::{Bound, element_location};
use super::eval::Env;
use super::graph::DistRef;
use super::value::Value;
use nalgebra::{DMatrix, DVector};
use tempest_core::error::{Error, ErrorKind, Result};
use tempest_model::dist::Dist;

/// Whether observation `oi` is a `categorical_logit` whose outcomes `b`
/// holds.
fn categorical(b: &Bound, oi: usize) -> bool {
    let o = &b.graph.observations[oi];
    b.present[o.data] && matches!(o.dist.dist, DistRef::Builtin(Dist::CategoricalLogit))
}

/// The first label of observation `oi` (a `categorical_logit`) outside its
/// classes 0..C−1, C the columns of its first argument evaluated in `env`,
/// as an error located in `b`'s data. `test` words it for test data.
pub(crate) fn check_labels(b: &Bound, env: &Env<'_, f64>, oi: usize, test: bool) -> Result<()> {
    let g = &b.graph;
    let o = &g.observations[oi];
    let Value::Matrix(m) = env.eval(&o.dist.args[0])? else {
        return Ok(());
    };
    let classes = m.ncols();
    let labels = b.data[o.data].flatten();
    let Some(k) = labels.iter().position(|&y| y as usize >= classes) else {
        return Ok(());
    };
    let d = &g.data[o.data];
    let (row, col) = element_location(&b.data[o.data], k, &d.name, &d.source);
    let last = classes.saturating_sub(1);
    let mut e = Error::new(
        ErrorKind::Data,
        format!(
            "label {} is outside the classes 0..{last} of `categorical_logit`",
            labels[k]
        ),
    )
    .in_data(b.location(row, col))
    .with_span(o.span)
    .with_label("observed here");
    if test {
        e = e.with_note(format!(
            "the model was trained on {classes} classes, labelled 0 to {last}: a test label must be one of them"
        ));
    }
    Err(e.into())
}

/// Check the labels of every `categorical_logit` outcome in test data
/// (bound like the training data) against the model's classes, evaluating
/// each likelihood's first argument once at the initial values with the
/// latent values zero.
pub fn check_test_labels(test: &Bound) -> Result<()> {
    let g = &test.graph;
    let observed: Vec<usize> = (0..g.observations.len())
        .filter(|&oi| categorical(test, oi))
        .collect();
    if observed.is_empty() {
        return Ok(());
    }
    let hypers = test.hyper_init.clone();
    let params = test.param_init()?;
    let mut sites = Vec::with_capacity(g.sites.len());
    for (si, s) in g.sites.iter().enumerate() {
        let points = test.site_inputs(si, &hypers, &params)?.len();
        let copies = test.replicas(s.gp)?;
        tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(format!(
            "the latent values of `{}` at the test points",
            g.gps[s.gp].name
        ))
        .times("points", points)
        .times("copies", copies)])?;
        sites.push(Some(if g.gps[s.gp].replicas.is_some() {
            Value::Matrix(DMatrix::zeros(points, copies))
        } else {
            Value::Vector(DVector::zeros(points))
        }));
    }
    let env = Env::new(test, &hypers, &params, &sites);
    for oi in observed {
        check_labels(test, &env, oi, true)?;
    }
    Ok(())
}
