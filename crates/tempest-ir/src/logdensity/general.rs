//! The statements a prepared [`crate::pointwise::term::Term`] does not
//! hold (more than six arguments or eight varying coordinates, class
//! scores that are not a matrix of one row per outcome, shapes that
//! broadcast otherwise): evaluated by the general statement VJP over
//! values, [`crate::pointwise::Pointwise::sum_vjp`], which allocates.

use super::run::add_to;
use super::{DensityProgram, Src, Stmt, TermNode};
use crate::bound::Bound;
use crate::pointwise::Pointwise;
use crate::value::Value;
use tempest_core::error::Error;

impl DensityProgram {
    /// Statement `t` (of the model's statement `stmt`) tempered by `tt`,
    /// with its adjoints added to `g` when `want`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn general(
        &self,
        bound: &Bound,
        t: &TermNode,
        stmt: Stmt,
        tt: f64,
        want: bool,
        v: &[f64],
        g: &mut [f64],
    ) -> Result<f64, Error> {
        let graph = &bound.graph;
        let dist = match stmt {
            Stmt::Prior(i) => &graph.priors[i].dist,
            Stmt::Observation(j) => &graph.observations[j].dist,
        };
        let pw = Pointwise::new(graph, dist);
        let y = self.value(bound, v, t.y);
        let args: Vec<Value<f64>> = t.args.iter().map(|s| self.value(bound, v, *s)).collect();
        if !want {
            return Ok(tt * pw.sum(&y, &args)?);
        }
        let varies: Vec<bool> = t.args.iter().map(|s| matches!(s, Src::Node(_))).collect();
        let r = pw.sum_vjp(&y, &args, &varies, t.outcome, tt)?;
        let mut put = |s: Src, a: &Value<f64>| {
            if let Src::Node(m) = s {
                let d: &[f64] = match a {
                    Value::Real(x) => std::slice::from_ref(x),
                    Value::Vector(x) => x.as_slice(),
                    // Column-major, as the program holds matrices.
                    Value::Matrix(x) => x.as_slice(),
                    _ => &[],
                };
                add_to(g, &self.nodes[m], d);
            }
        };
        for (s, a) in t.args.iter().zip(&r.args) {
            put(*s, a);
        }
        if t.outcome {
            put(t.y, &r.outcome);
        }
        Ok(r.value)
    }
}
