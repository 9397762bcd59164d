//! Test data checked before an engine starts: what predictions at the test
//! data will evaluate is evaluated once, at the training data's initial
//! values, so that a fault of the test data (an ODE's output times out of
//! order or more than its step limit allows, test inputs with the wrong
//! number of columns, an expression whose shapes do not fit) is an error
//! now, not after the run.

use super::bound::Bound;
use super::eval::Env;
use super::types::Ty;
use super::value::Value;
use nalgebra::{DMatrix, DVector};
use tempest_core::error::{Error, ErrorKind};

/// Evaluate at `test` (bound with [`super::bind::bind_test`] against
/// `base`) what predictions evaluate: each latent GP's inputs (with the
/// training inputs' columns), the `let`s and the arguments of every
/// sampling statement, at the hypers' and params' initial values.
///
/// Errors of the data, shapes and types are returned (with the test
/// file's row and column where they name one); a numerical failure at the
/// initial values is not, since predictions use the fitted values.
pub fn check_test(base: &Bound, test: &Bound) -> Result<(), Error> {
    let g = &base.graph;
    let hypers = base.hyper_init.clone();
    let params = base.param_init()?;
    let mut sites = Vec::with_capacity(g.sites.len());
    for (si, s) in g.sites.iter().enumerate() {
        let gp = &g.gps[s.gp];
        let train = base.site_inputs(si, &hypers, &params)?;
        let x = test.site_inputs(si, &hypers, &params)?;
        if x.dim() != train.dim() && !x.is_empty() {
            return Err(Error::at(
                ErrorKind::Data,
                s.span,
                format!(
                    "the test data give `{}` inputs with {} columns; the training inputs have {}",
                    gp.name,
                    x.dim(),
                    train.dim()
                ),
            )
            .with_label("applied here")
            .with_note(format!("test file: {}", test.data_file)));
        }
        let c = base.replicas(s.gp)?;
        sites.push(Some(if gp.replicas.is_some() {
            Value::Matrix(DMatrix::zeros(x.len(), c))
        } else {
            Value::Vector(DVector::zeros(x.len()))
        }));
    }
    let env = Env::new(test, &hypers, &params, &sites);
    let keep = |r: Result<Value<f64>, Error>| match r {
        Err(e) if blocks(&e) => Err(e),
        _ => Ok(()),
    };
    for l in &g.lets {
        // Networks and deep kernels have no value of their own.
        let deep_part = matches!(l.value.ty, Ty::Network)
            || matches!(g.resolve(&l.value).kind, super::expr::TKind::Deep { .. });
        if !deep_part {
            keep(env.eval(&l.value))?;
        }
    }
    for o in &g.observations {
        for a in &o.dist.args {
            keep(env.eval(a))?;
        }
    }
    Ok(())
}

/// Whether an evaluation error is the test data's (or a stop), not a
/// numerical failure at the initial values.
fn blocks(e: &Error) -> bool {
    matches!(
        e.kind,
        ErrorKind::Data | ErrorKind::Shape | ErrorKind::Type | ErrorKind::Interrupted
    )
}
