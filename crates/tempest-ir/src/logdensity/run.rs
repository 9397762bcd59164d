//! The forward and reverse passes of a [`DensityProgram`].

use super::{DensityProgram, EOp, Op, Src};
use crate::bind::Bound;
use crate::pointwise::vec::Arg;
use crate::value::Value;
use nalgebra::{DVectorView, DVectorViewMut};
use tempest_core::error::Error;
use tempest_math::scalar::{Dual1, logsumexp};
use tempest_model::builtin::{call1, pow};

/// The buffers a program runs in: node values, their adjoints and the
/// statements' scratch. Sized by the first run of a program and reused, so
/// later runs allocate nothing.
#[derive(Default, Debug)]
pub struct Workspace {
    v: Vec<f64>,
    g: Vec<f64>,
    s: Vec<f64>,
}

impl Workspace {
    fn fit(&mut self, p: &DensityProgram) {
        if self.v.len() < p.values {
            self.v.resize(p.values, 0.0);
            self.g.resize(p.values, 0.0);
        }
        if self.s.len() < p.scratch {
            self.s.resize(p.scratch, 0.0);
        }
    }
}

/// Where a program is run.
#[derive(Clone, Copy, Debug)]
pub struct At<'a> {
    /// The params' values, constrained.
    pub theta: &'a [f64],
    /// A latent GP's L v \[N\] (empty when the model has none).
    pub site: &'a [f64],
}

/// The most arguments a statement has here ([`crate::pointwise::term`]).
const ARGS: usize = 6;

impl DensityProgram {
    /// The value of an operand, reading nodes from `v`.
    #[inline]
    fn view<'a>(&'a self, bound: &'a Bound, v: &'a [f64], s: Src) -> Arg<'a> {
        let value = match s {
            Src::Node(k) => {
                let n = &self.nodes[k];
                return if n.scalar {
                    Arg::One(v[n.off])
                } else {
                    Arg::Each(&v[n.off..n.off + n.len])
                };
            }
            Src::Const(k) => &self.consts[k],
            Src::Data(i) => &bound.data[i],
        };
        match value {
            Value::Real(x) => Arg::One(*x),
            Value::Int(k) => Arg::One(*k as f64),
            Value::Vector(x) => Arg::Each(x.as_slice()),
            // Class scores [N, C], column-major.
            Value::Matrix(m) => Arg::Each(m.as_slice()),
            _ => Arg::One(f64::NAN),
        }
    }

    fn value_of<'a>(&'a self, bound: &'a Bound, s: Src) -> Option<&'a Value<f64>> {
        match s {
            Src::Node(_) => None,
            Src::Const(k) => Some(&self.consts[k]),
            Src::Data(i) => Some(&bound.data[i]),
        }
    }

    /// init + Σ of the statements' terms at `at` (observations tempered by
    /// `power` times their own power; none when `power` is 0), with the
    /// gradient in the params' values added to `grad` when given. `bound`
    /// is the model the program was compiled from. Allocates nothing once
    /// `ws` has run this program (unless a model-file likelihood has no
    /// compiled form).
    pub fn run(
        &self,
        bound: &Bound,
        at: At,
        power: f64,
        init: f64,
        grad: Option<&mut [f64]>,
        ws: &mut Workspace,
    ) -> Result<f64, Error> {
        let At { theta, site } = at;
        ws.fit(self);
        self.forward(bound, theta, site, &mut ws.v);
        let want = grad.is_some();
        if want {
            ws.g[..self.values].fill(0.0);
        }
        let graph = &*bound.graph;
        let mut lp = init;
        for t in &self.terms {
            let tt = if t.observation { power * t.power } else { 1.0 };
            if tt == 0.0 {
                continue;
            }
            let one;
            let y: &[f64] = match self.view(bound, &ws.v, t.y) {
                Arg::Each(y) => y,
                Arg::One(x) => {
                    one = [x];
                    &one
                }
            };
            let mut a = [Arg::One(0.0); ARGS];
            for (slot, s) in a.iter_mut().zip(&t.args) {
                *slot = self.view(bound, &ws.v, *s);
            }
            let k = t.args.len();
            let scratch = &mut ws.s[t.scratch..t.scratch + t.term.scratch_len()];
            lp += t.term.eval(graph, y, &a[..k], tt, want, scratch)?;
            if !want {
                continue;
            }
            for (j, s) in t.args.iter().enumerate() {
                if let Src::Node(m) = s {
                    add_to(&mut ws.g, &self.nodes[*m], t.term.arg_adjoint(scratch, j));
                }
            }
            if let (true, Src::Node(m)) = (t.term.outcome, t.y) {
                add_to(&mut ws.g, &self.nodes[m], t.term.outcome_adjoint(scratch));
            }
        }
        if let Some(grad) = grad {
            self.reverse(bound, &ws.v, &mut ws.g);
            for &(node, x) in &self.params {
                let n = &self.nodes[node];
                for (gx, gn) in grad[x..x + n.len]
                    .iter_mut()
                    .zip(&ws.g[n.off..n.off + n.len])
                {
                    *gx += gn;
                }
            }
        }
        Ok(lp)
    }

    /// The latent GP's adjoint f̄ \[N\] after a [`DensityProgram::run`] with
    /// gradients in `ws` (empty when the model has no latent GP or f̄ is 0).
    pub fn site_adjoint<'w>(&self, ws: &'w Workspace) -> &'w [f64] {
        match self.site {
            Some(k) => {
                let n = &self.nodes[k];
                &ws.g[n.off..n.off + n.len]
            }
            None => &[],
        }
    }

    fn forward(&self, bound: &Bound, theta: &[f64], site: &[f64], v: &mut [f64]) {
        for node in &self.nodes {
            let (before, rest) = v.split_at_mut(node.off);
            let before = &*before;
            let out = &mut rest[..node.len];
            let view = |s: Src| self.view(bound, before, s);
            match &node.op {
                Op::Param(x) => out.copy_from_slice(&theta[*x..*x + node.len]),
                Op::Neg(a) => {
                    let a = view(*a);
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = -a.at(i);
                    }
                }
                Op::Bin(op, a, b) => {
                    let (a, b) = (view(*a), view(*b));
                    // One loop per pair of shapes, so each runs without a
                    // branch per element.
                    macro_rules! each {
                        ($f:expr) => {{
                            let f = $f;
                            match (a, b) {
                                (Arg::Each(x), Arg::Each(y)) => {
                                    for ((o, x), y) in out.iter_mut().zip(x).zip(y) {
                                        *o = f(*x, *y);
                                    }
                                }
                                (Arg::Each(x), Arg::One(y)) => {
                                    for (o, x) in out.iter_mut().zip(x) {
                                        *o = f(*x, y);
                                    }
                                }
                                (Arg::One(x), Arg::Each(y)) => {
                                    for (o, y) in out.iter_mut().zip(y) {
                                        *o = f(x, *y);
                                    }
                                }
                                (Arg::One(x), Arg::One(y)) => out[0] = f(x, y),
                            }
                        }};
                    }
                    match op {
                        EOp::Add => each!(|x, y| x + y),
                        EOp::Sub => each!(|x, y| x - y),
                        EOp::Mul => each!(|x, y| x * y),
                        EOp::Div => each!(|x, y| x / y),
                        EOp::Pow => each!(pow::<f64>),
                    }
                }
                Op::MatVec(m, x) => {
                    let Some(Value::Matrix(m)) = self.value_of(bound, *m) else {
                        out.fill(f64::NAN);
                        continue;
                    };
                    let Arg::Each(x) = view(*x) else {
                        out.fill(f64::NAN);
                        continue;
                    };
                    // The same loop as the evaluator's matrix–vector
                    // product, so the same bits.
                    out.fill(0.0);
                    let r = m.nrows();
                    for (j, &xj) in x.iter().enumerate() {
                        let col = &m.as_slice()[j * r..(j + 1) * r];
                        for (o, mij) in out.iter_mut().zip(col) {
                            *o += mij * xj;
                        }
                    }
                }
                Op::Unary(f, a) => {
                    let a = view(*a);
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = call1(*f, a.at(i));
                    }
                }
                Op::Sum(a) | Op::Mean(a) => {
                    let xs = slice(view(*a));
                    let s = xs.iter().fold(0.0, |s, &x| s + x);
                    out[0] = if matches!(node.op, Op::Mean(_)) {
                        s / xs.len() as f64
                    } else {
                        s
                    };
                }
                Op::Logsumexp(a) => out[0] = logsumexp(slice(view(*a))),
                Op::Dot(a, b) => {
                    let (a, b) = (view(*a), view(*b));
                    out[0] = (0..slice(a).len()).fold(0.0, |s, i| s + a.at(i) * b.at(i));
                }
                Op::Index(a, i) => out[0] = view(*a).at(*i),
                Op::Gather(a, k) => {
                    let a = view(*a);
                    if let Some(Value::IntArray(ks)) = self.value_of(bound, *k) {
                        for (o, &k) in out.iter_mut().zip(ks) {
                            *o = a.at(k as usize);
                        }
                    }
                }
                Op::Array(xs) => {
                    for (o, x) in out.iter_mut().zip(xs) {
                        *o = view(*x).at(0);
                    }
                }
                Op::Site(mu) => {
                    let mu = view(*mu).at(0);
                    for (o, lv) in out.iter_mut().zip(site) {
                        *o = lv + mu;
                    }
                }
            }
        }
    }

    /// Push each node's adjoint in `g` back to its operands, last node
    /// first.
    fn reverse(&self, bound: &Bound, v: &[f64], g: &mut [f64]) {
        let view = |s: Src| self.view(bound, v, s);
        for node in self.nodes.iter().rev() {
            let (before, rest) = g.split_at_mut(node.off);
            let gk = &rest[..node.len];
            macro_rules! back {
                ($s:expr, $d:expr) => {
                    push_back(&self.nodes, before, node.len, $s, $d)
                };
            }
            match &node.op {
                Op::Param(_) => {}
                Op::Neg(a) => back!(*a, |i| -gk[i]),
                Op::Bin(op, a, b) => {
                    let (va, vb) = (view(*a), view(*b));
                    match op {
                        EOp::Add => {
                            back!(*a, |i| gk[i]);
                            back!(*b, |i| gk[i]);
                        }
                        EOp::Sub => {
                            back!(*a, |i| gk[i]);
                            back!(*b, |i| -gk[i]);
                        }
                        EOp::Mul => {
                            back!(*a, |i| gk[i] * vb.at(i));
                            back!(*b, |i| gk[i] * va.at(i));
                        }
                        EOp::Div => {
                            back!(*a, |i| gk[i] / vb.at(i));
                            back!(*b, |i| {
                                let (x, y) = (va.at(i), vb.at(i));
                                gk[i] * (-x / (y * y))
                            });
                        }
                        EOp::Pow => {
                            back!(*a, |i| {
                                let (x, y) = (va.at(i), vb.at(i));
                                gk[i] * (y * x.powf(y - 1.0))
                            });
                            back!(*b, |i| {
                                let (x, y) = (va.at(i), vb.at(i));
                                gk[i] * (x.powf(y) * x.ln())
                            });
                        }
                    }
                }
                Op::MatVec(m, x) => {
                    let (Some(Value::Matrix(m)), Src::Node(xn)) = (self.value_of(bound, *m), x)
                    else {
                        continue;
                    };
                    let n = &self.nodes[*xn];
                    // x̄ += Aᵀ ḡ.
                    let mut xb =
                        DVectorViewMut::from_slice(&mut before[n.off..n.off + n.len], n.len);
                    xb.gemv_tr(1.0, m, &DVectorView::from_slice(gk, gk.len()), 1.0);
                }
                Op::Unary(f, a) => {
                    let va = view(*a);
                    back!(*a, |i| {
                        gk[i] * call1(*f, Dual1::new(va.at(i), [1.0])).tangent()[0]
                    });
                }
                Op::Sum(a) => back!(*a, |_| gk[0]),
                Op::Mean(a) => {
                    let n = slice(view(*a)).len() as f64;
                    back!(*a, |_| gk[0] / n);
                }
                Op::Logsumexp(a) => {
                    let xs = slice(view(*a));
                    let m = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = xs.iter().map(|x| (x - m).exp()).sum();
                    back!(*a, |i| gk[0] * (xs[i] - m).exp() / z);
                }
                Op::Dot(a, b) => {
                    let (va, vb) = (view(*a), view(*b));
                    back!(*a, |i| gk[0] * vb.at(i));
                    back!(*b, |i| gk[0] * va.at(i));
                }
                Op::Index(a, i) => {
                    if let Src::Node(m) = a {
                        before[self.nodes[*m].off + i] += gk[0];
                    }
                }
                Op::Gather(a, k) => {
                    if let (Src::Node(m), Some(Value::IntArray(ks))) = (a, self.value_of(bound, *k))
                    {
                        let off = self.nodes[*m].off;
                        for (r, &k) in ks.iter().enumerate() {
                            before[off + k as usize] += gk[r];
                        }
                    }
                }
                Op::Array(xs) => {
                    for (i, x) in xs.iter().enumerate() {
                        if let Src::Node(m) = x {
                            before[self.nodes[*m].off] += gk[i];
                        }
                    }
                }
                Op::Site(mu) => back!(*mu, |i| gk[i]),
            }
        }
    }
}

/// The entries of a vector operand (the compiler gives sums, means,
/// dot products and logsumexp vectors only).
fn slice(a: Arg<'_>) -> &'_ [f64] {
    match a {
        Arg::Each(x) => x,
        Arg::One(_) => &[],
    }
}

/// Add d(i) for each entry i of a node of `len` entries to the adjoint of
/// its operand `s` (summed when the operand is a number); constants have
/// none.
#[inline(always)]
fn push_back(
    nodes: &[super::Node],
    before: &mut [f64],
    len: usize,
    s: Src,
    d: impl Fn(usize) -> f64,
) {
    if let Src::Node(m) = s {
        let n = &nodes[m];
        if n.scalar {
            before[n.off] += (0..len).fold(0.0, |acc, i| acc + d(i));
        } else {
            for (i, gi) in before[n.off..n.off + n.len].iter_mut().enumerate() {
                *gi += d(i);
            }
        }
    }
}

/// Add a statement's adjoint d \[N\] to a node: entry by entry, or summed
/// into a number.
fn add_to(g: &mut [f64], n: &super::Node, d: &[f64]) {
    if n.scalar {
        g[n.off] += d.iter().sum::<f64>();
    } else {
        for (gi, di) in g[n.off..n.off + n.len].iter_mut().zip(d) {
            *gi += di;
        }
    }
}
