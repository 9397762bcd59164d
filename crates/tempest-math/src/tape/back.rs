//! The backward pass: adjoints from the last node back, each node's rule
//! adding into its varying operands' adjoints.

use super::op::Op;
use super::record::at;
use super::{Tape, Var};
use crate::adjoint::{cholesky_vjp, solve_lower_t_vjp, solve_lower_vjp};
use crate::linalg::matmul;
use nalgebra::DMatrix;
use tempest_core::error::Error;

/// The adjoints of a backward pass: one per input that lies on a path to
/// the output (intermediate nodes' adjoints are freed during the pass), and
/// the joined sweep's scalars'.
pub struct Grads {
    adj: Vec<Option<DMatrix<f64>>>,
    shapes: Vec<(usize, usize)>,
    /// The adjoints of the joined sweep's scalar operations (empty for a
    /// tape never joined to one).
    scalars: Vec<f64>,
}

impl Grads {
    /// The adjoint of a reverse-mode scalar of the sweep this tape joined
    /// (0 for a constant, or for a scalar nothing flowed into).
    pub fn rev(&self, x: crate::reverse::Rev) -> f64 {
        x.node()
            .and_then(|k| self.scalars.get(k).copied())
            .unwrap_or(0.0)
    }

    /// The adjoint of the input `v` (of its shape), `None` when nothing
    /// flowed into it (or `v` is not an input: only inputs keep theirs).
    pub fn get(&self, v: Var) -> Option<&DMatrix<f64>> {
        self.adj.get(v.0).and_then(|a| a.as_ref())
    }

    /// The adjoint of the input `v`, zeros of its shape when nothing flowed
    /// into it.
    pub fn wrt(&self, v: Var) -> DMatrix<f64> {
        match self.get(v) {
            Some(a) => a.clone(),
            None => {
                let (r, c) = self.shapes.get(v.0).copied().unwrap_or((0, 0));
                DMatrix::zeros(r, c)
            }
        }
    }
}

/// `g` summed down to `shape` over the dimensions that were broadcast.
fn reduce(g: DMatrix<f64>, shape: (usize, usize)) -> DMatrix<f64> {
    if g.shape() == shape {
        return g;
    }
    let mut out = DMatrix::zeros(shape.0, shape.1);
    for j in 0..g.ncols() {
        for i in 0..g.nrows() {
            let (oi, oj) = (
                if shape.0 == 1 { 0 } else { i },
                if shape.1 == 1 { 0 } else { j },
            );
            out[(oi, oj)] += g[(i, j)];
        }
    }
    out
}

impl Tape {
    /// Keeps node `k`'s adjoint `g` once its rule has run when the node is
    /// an input; an intermediate node's adjoint is freed there (no caller
    /// reads it, and a pass over large matrices then holds fewer of them).
    fn keep_adjoint(&self, adj: &mut [Option<DMatrix<f64>>], k: usize, g: DMatrix<f64>) {
        if matches!(self.nodes[k].op, Op::Leaf) {
            adj[k] = Some(g);
        }
    }

    /// The adjoints ∂s/∂(node) of a number s [1, 1] at `out`, by one
    /// backward pass.
    pub fn gradient(&self, out: Var) -> Result<Grads, Error> {
        self.check(&[out])?;
        if self.shape(out) != (1, 1) {
            return Err(Error::internal(format!(
                "tape: the gradient of a node of shape {:?}, not a number",
                self.shape(out)
            )));
        }
        self.vjp(out, DMatrix::from_element(1, 1, 1.0))
    }

    /// The adjoints of every node for the scalar ⟨seed, out⟩, where `seed`
    /// has `out`'s shape (a vector–Jacobian product).
    pub fn vjp(&self, out: Var, seed: DMatrix<f64>) -> Result<Grads, Error> {
        self.check(&[out])?;
        if seed.shape() != self.shape(out) {
            return Err(Error::internal(format!(
                "tape: an adjoint of shape {:?} for a node of shape {:?}",
                seed.shape(),
                self.shape(out)
            )));
        }
        let mut adj: Vec<Option<DMatrix<f64>>> = vec![None; out.0 + 1];
        if self.nodes[out.0].varies {
            adj[out.0] = Some(seed);
        }
        // A tape joined to a reverse sweep visits the scalar operations
        // recorded after each node before the node itself.
        let mut scalars = self.scalar_adjoints()?;
        let mut hi = self.nodes[out.0].mark;
        for k in (0..=out.0).rev() {
            if let Some(s) = &mut scalars {
                hi = self.scalar_segment(k, hi, s, &mut adj);
            }
            let Some(g) = adj[k].take() else { continue };
            // Gathered scalars take their entries' adjoints.
            if let (Op::Gather(nodes), Some(s)) = (&self.nodes[k].op, &mut scalars) {
                for (n, gi) in nodes.iter().zip(g.iter()) {
                    if let Some(a) = n.and_then(|n| s.get_mut(n)) {
                        *a += gi;
                    }
                }
                self.keep_adjoint(&mut adj, k, g);
                continue;
            }
            // A part of a vector adds into its slice of the vector's
            // adjoint in place (a network's layers are parts of one weight
            // vector: no vector-sized matrix per layer).
            if let Op::Part(a, off) = self.nodes[k].op {
                if self.nodes[a.0].varies {
                    let (r, c) = self.nodes[a.0].value.shape();
                    let acc = adj[a.0].get_or_insert_with(|| DMatrix::zeros(r, c));
                    for (x, y) in acc.as_mut_slice()[off..off + g.len()]
                        .iter_mut()
                        .zip(g.iter())
                    {
                        *x += y;
                    }
                }
                self.keep_adjoint(&mut adj, k, g);
                continue;
            }
            for (v, a) in self.rule(k, &g)? {
                if !self.nodes[v.0].varies {
                    continue;
                }
                match &mut adj[v.0] {
                    Some(acc) => *acc += a,
                    slot => *slot = Some(a),
                }
            }
            self.keep_adjoint(&mut adj, k, g);
        }
        let mut scalars = scalars.unwrap_or_default();
        if !scalars.is_empty() {
            crate::reverse::tape::segment(&mut scalars, 0, hi, |_, _, _| {});
        }
        adj.resize(self.nodes.len(), None);
        let shapes = self.nodes.iter().map(|n| n.value.shape()).collect();
        Ok(Grads {
            adj,
            shapes,
            scalars,
        })
    }

    /// The operands' adjoints of node `k` given its adjoint `g`.
    fn rule(&self, k: usize, g: &DMatrix<f64>) -> Result<Vec<(Var, DMatrix<f64>)>, Error> {
        let node = &self.nodes[k];
        let val = |v: Var| &self.nodes[v.0].value;
        let want = |v: Var| self.nodes[v.0].varies;
        let y = &node.value;
        Ok(match &node.op {
            // A gather's adjoint goes to the sweep's scalars in `vjp`.
            Op::Leaf | Op::Gather(_) => vec![],
            Op::Add(a, b) => vec![
                (*a, reduce(g.clone(), val(*a).shape())),
                (*b, reduce(g.clone(), val(*b).shape())),
            ],
            Op::Sub(a, b) => vec![
                (*a, reduce(g.clone(), val(*a).shape())),
                (*b, reduce(-g, val(*b).shape())),
            ],
            Op::Mul(a, b) => {
                let (x, z) = (val(*a), val(*b));
                let mut out = Vec::with_capacity(2);
                if want(*a) {
                    let ga = DMatrix::from_fn(g.nrows(), g.ncols(), |i, j| g[(i, j)] * at(z, i, j));
                    out.push((*a, reduce(ga, x.shape())));
                }
                if want(*b) {
                    let gb = DMatrix::from_fn(g.nrows(), g.ncols(), |i, j| g[(i, j)] * at(x, i, j));
                    out.push((*b, reduce(gb, z.shape())));
                }
                out
            }
            Op::Div(a, b) => {
                let (x, z) = (val(*a), val(*b));
                let mut out = Vec::with_capacity(2);
                if want(*a) {
                    let ga = DMatrix::from_fn(g.nrows(), g.ncols(), |i, j| g[(i, j)] / at(z, i, j));
                    out.push((*a, reduce(ga, x.shape())));
                }
                if want(*b) {
                    let gb = DMatrix::from_fn(g.nrows(), g.ncols(), |i, j| {
                        -g[(i, j)] * y[(i, j)] / at(z, i, j)
                    });
                    out.push((*b, reduce(gb, z.shape())));
                }
                out
            }
            Op::Scale(a, c) => vec![(*a, g * *c)],
            Op::Shift(a) => vec![(*a, g.clone())],
            Op::Map(a, f) => {
                let x = val(*a);
                vec![(*a, g.zip_zip_map(x, y, |g, x, y| g * f.slope(x, y)))]
            }
            Op::MatMul(a, ta, b, tb) => {
                let (x, z) = (val(*a), val(*b));
                let mut out = Vec::with_capacity(2);
                if want(*a) {
                    // d op(A) = G op(B)ᵀ, transposed back when A was.
                    let ga = if *ta {
                        matmul(z, *tb, g, true)
                    } else {
                        matmul(g, false, z, !*tb)
                    };
                    out.push((*a, ga));
                }
                if want(*b) {
                    let gb = if *tb {
                        matmul(g, true, x, *ta)
                    } else {
                        matmul(x, !*ta, g, false)
                    };
                    out.push((*b, gb));
                }
                out
            }
            Op::Transpose(a) => vec![(*a, g.transpose())],
            Op::Sum(a) => {
                let (r, c) = val(*a).shape();
                vec![(*a, DMatrix::from_element(r, c, g[(0, 0)]))]
            }
            Op::SumRows(a) => {
                let (r, c) = val(*a).shape();
                vec![(*a, DMatrix::from_fn(r, c, |_, j| g[(0, j)]))]
            }
            Op::SumCols(a) => {
                let (r, c) = val(*a).shape();
                vec![(*a, DMatrix::from_fn(r, c, |i, _| g[(i, 0)]))]
            }
            // Added into the vector's adjoint in place by `vjp`.
            Op::Part(..) => vec![],
            Op::Pick(a, entries) => {
                let (r, c) = val(*a).shape();
                let mut ga = DMatrix::zeros(r, c);
                for (k, &e) in entries.iter().enumerate() {
                    ga[e] += g[(k, 0)];
                }
                vec![(*a, ga)]
            }
            Op::Diag(a) => {
                let n = val(*a).nrows();
                let mut ga = DMatrix::zeros(n, n);
                for i in 0..n {
                    ga[(i, i)] = g[(i, 0)];
                }
                vec![(*a, ga)]
            }
            // The rule reads L̄'s lower triangle only.
            Op::Cholesky(a) => vec![(*a, cholesky_vjp(y, g))],
            Op::Solve(l, b, transposed) => {
                let (b_bar, l_bar) = if *transposed {
                    solve_lower_t_vjp(val(*l), y, g)
                } else {
                    solve_lower_vjp(val(*l), y, g)
                };
                vec![(*l, l_bar), (*b, b_bar)]
            }
            Op::LogDetChol(l) => {
                let x = val(*l);
                let n = x.nrows();
                let mut gl = DMatrix::zeros(n, n);
                for i in 0..n {
                    gl[(i, i)] = 2.0 * g[(0, 0)] / x[(i, i)];
                }
                vec![(*l, gl)]
            }
            Op::LogSoftmaxRows(a) => {
                let mut ga = g.clone();
                for i in 0..g.nrows() {
                    let s: f64 = g.row(i).sum();
                    for j in 0..g.ncols() {
                        ga[(i, j)] -= y[(i, j)].exp() * s;
                    }
                }
                vec![(*a, ga)]
            }
            Op::Custom(inputs, vjp) => {
                let adj = vjp(g)?;
                if adj.len() != inputs.len() {
                    return Err(Error::internal(format!(
                        "tape: a custom node of {} inputs gave {} adjoints",
                        inputs.len(),
                        adj.len()
                    )));
                }
                for (v, a) in inputs.iter().zip(&adj) {
                    if a.shape() != val(*v).shape() {
                        return Err(Error::internal(format!(
                            "tape: a custom node gave an adjoint of shape {:?} for an input of shape {:?}",
                            a.shape(),
                            val(*v).shape()
                        )));
                    }
                }
                inputs.iter().copied().zip(adj).collect()
            }
        })
    }
}
