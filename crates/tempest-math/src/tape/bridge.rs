//! The tape joined to a reverse sweep: reverse-mode scalars in, a node's
//! entries out, and one backward pass over both.

use super::op::Op;
use super::{Tape, Var};
use crate::reverse::{self, Rev};
use ad_trait::AD;
use nalgebra::DMatrix;
use tempest_core::error::Error;

impl Tape {
    /// The scalars `xs` as a node [k, 1]. Scalars recorded in the open
    /// reverse sweep carry their adjoints back to it in the backward pass;
    /// constants carry nothing. An internal error when a recorded scalar
    /// is given outside a sweep, or when another tape has joined the sweep.
    pub fn gather(&mut self, xs: &[Rev]) -> Result<Var, Error> {
        let nodes: Vec<Option<usize>> = xs.iter().map(Rev::node).collect();
        let varies = nodes.iter().any(Option::is_some);
        if varies {
            self.join()?;
        }
        let value = DMatrix::from_iterator(xs.len(), 1, xs.iter().map(|x| x.to_constant()));
        Ok(self.push(value, Op::Gather(nodes), varies))
    }

    /// The entries of node `v` (by columns) as reverse-mode scalars in the
    /// open sweep, which carry their adjoints back into `v` in the
    /// backward pass; constants when `v` depends on no input. An internal
    /// error when `v` varies and no sweep is open, or when another tape
    /// has joined the sweep.
    pub fn entries(&mut self, v: Var) -> Result<Vec<Rev>, Error> {
        self.check(&[v])?;
        if !self.varies(v) {
            return Ok(self.value(v).iter().map(|&x| Rev::constant(x)).collect());
        }
        self.join()?;
        Ok(self
            .value(v)
            .iter()
            .enumerate()
            .map(|(k, &x)| reverse::tape::bridge(x, v.0, k))
            .collect())
    }

    /// Joins this tape to the open sweep (once; the same sweep after).
    fn join(&mut self) -> Result<(), Error> {
        let sweep = reverse::join(self.id)?;
        match self.joined {
            Some(s) if s != sweep => Err(Error::internal(
                "a matrix tape was joined to two reverse sweeps",
            )),
            _ => {
                self.joined = Some(sweep);
                Ok(())
            }
        }
    }

    /// The scalar adjoints for a backward pass of a joined tape (one per
    /// operation of the open sweep, zeros), `None` for a tape never joined;
    /// an internal error when the sweep it joined is no longer open or a
    /// node was recorded in another sweep.
    pub(super) fn scalar_adjoints(&self) -> Result<Option<Vec<f64>>, Error> {
        let Some(sweep) = self.joined else {
            return Ok(None);
        };
        if reverse::open_sweep() != Some(sweep) {
            return Err(Error::internal(
                "a matrix tape's backward pass ran after its reverse sweep closed",
            ));
        }
        if self.nodes.iter().any(|n| n.sweep != 0 && n.sweep != sweep) {
            return Err(Error::internal(
                "a matrix tape holds nodes of two reverse sweeps",
            ));
        }
        Ok(Some(vec![0.0; reverse::recorded()]))
    }

    /// The scalar operations recorded between node `k` and the previous
    /// segment's start `hi`, visited last first: adjoints of bridged
    /// entries go into their matrix nodes' adjoints in `adj`.
    pub(super) fn scalar_segment(
        &self,
        k: usize,
        hi: usize,
        scalars: &mut [f64],
        adj: &mut [Option<DMatrix<f64>>],
    ) -> usize {
        let lo = self.nodes[k].mark.min(hi);
        reverse::tape::segment(scalars, lo, hi, |var, entry, g| {
            let (r, c) = self.nodes[var].value.shape();
            let acc = adj[var].get_or_insert_with(|| DMatrix::zeros(r, c));
            acc.as_mut_slice()[entry] += g;
        });
        lo
    }
}
