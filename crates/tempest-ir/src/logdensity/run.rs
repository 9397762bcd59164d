//! The forward pass of a [`DensityProgram`] and its statements.

use super::{DensityProgram, Op, Sh, Src, Way};
use crate::bound::Bound;
use crate::pointwise::vec::Arg;
use crate::value::Value;
use nalgebra::{DMatrix, DVector};
use tempest_core::error::Error;
use tempest_math::scalar::logsumexp;
use tempest_model::program::{Inst, bin_value};
use tempest_syntax::ast::BinOp;

/// The buffers a program runs in: node values, their adjoints and the
/// statements' scratch. Sized by the first run of a program and reused, so
/// later runs allocate nothing.
#[derive(Default, Debug)]
pub struct Workspace {
    pub(super) v: Vec<f64>,
    pub(super) g: Vec<f64>,
    pub(super) s: Vec<f64>,
    /// The ODE nodes' sensitivities (node index, ∂x/∂a or the adjoint's
    /// record), made by the forward pass of a run with gradients for its
    /// reverse pass.
    pub(super) ode: Vec<(usize, crate::ode::Sensitivities)>,
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
    /// The params' values, constrained (matrices row by row).
    pub theta: &'a [f64],
    /// A latent GP's L v \[N·C\], class by class (empty when the model has
    /// none).
    pub site: &'a [f64],
}

/// The most arguments a statement has here ([`crate::pointwise::term`]).
const ARGS: usize = 6;

impl DensityProgram {
    /// The value of an operand, reading nodes from `v` (a matrix's entries
    /// column-major).
    #[inline]
    pub(super) fn view<'a>(&'a self, bound: &'a Bound, v: &'a [f64], s: Src) -> Arg<'a> {
        let value = match s {
            Src::Node(k) => {
                let n = &self.nodes[k];
                return if n.scalar() {
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
            Value::Bool(b) => Arg::One(if *b { 1.0 } else { 0.0 }),
            Value::Vector(x) => Arg::Each(x.as_slice()),
            Value::Matrix(m) => Arg::Each(m.as_slice()),
            _ => Arg::One(f64::NAN),
        }
    }

    /// The shape of an operand.
    pub(super) fn sh(&self, bound: &Bound, s: Src) -> Sh {
        match s {
            Src::Node(k) => self.nodes[k].sh,
            Src::Const(k) => super::shape_of(&self.consts[k]),
            Src::Data(i) => super::shape_of(&bound.data[i]),
        }
    }

    /// An operand as a value (allocates: for the ODE solver and the
    /// general statement).
    pub(super) fn value(&self, bound: &Bound, v: &[f64], s: Src) -> Value<f64> {
        match s {
            Src::Const(k) => self.consts[k].clone(),
            Src::Data(i) => bound.data[i].clone(),
            Src::Node(k) => shaped(self.view(bound, v, s), self.nodes[k].sh),
        }
    }

    /// A constant integer array (gather positions).
    pub(super) fn ints(&self, s: Src) -> &[i64] {
        match s {
            Src::Const(k) => match &self.consts[k] {
                Value::IntArray(ks) => ks,
                _ => &[],
            },
            _ => &[],
        }
    }

    /// init + Σ of the statements' terms at `at` (observations tempered by
    /// `power` times their own power; none when `power` is 0), with the
    /// gradient in the params' values added to `grad` when given (matrices
    /// row by row). `bound` is the model the program was compiled from.
    /// Allocates nothing once `ws` has run this program, unless the model
    /// solves an ODE, has a model-file likelihood with no compiled form or
    /// a statement outside the prepared ones. An error (an ODE that fails,
    /// a statement's bad argument) is a divergence to a sampler.
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
        let want = grad.is_some();
        self.forward(bound, theta, site, &mut ws.v, want.then_some(&mut ws.ode))?;
        if want {
            ws.g[..self.values].fill(0.0);
        }
        let mut lp = init;
        for t in &self.terms {
            let tt = if t.observation { power * t.power } else { 1.0 };
            if tt != 0.0 {
                lp += self.statement(bound, t, tt, want, ws)?;
            }
        }
        if let Some(grad) = grad {
            self.reverse(bound, &ws.v, &mut ws.g, &ws.ode)?;
            for &(node, x) in &self.params {
                let n = &self.nodes[node];
                let gn = &ws.g[n.off..n.off + n.len];
                match (&n.op, n.sh) {
                    // Column-major in the program, row by row in x.
                    (Op::ParamMat(_), Sh::Mat(r, c)) => {
                        for i in 0..r {
                            for j in 0..c {
                                grad[x + i * c + j] += gn[j * r + i];
                            }
                        }
                    }
                    _ => {
                        for (gx, gn) in grad[x..x + n.len].iter_mut().zip(gn) {
                            *gx += gn;
                        }
                    }
                }
            }
        }
        Ok(lp)
    }

    /// log p(y | θ): the observations' terms at `at`, each at the power
    /// written in the model (the density's power 1), without gradients.
    pub fn log_likelihood(&self, bound: &Bound, at: At, ws: &mut Workspace) -> Result<f64, Error> {
        ws.fit(self);
        self.forward(bound, at.theta, at.site, &mut ws.v, None)?;
        let mut ll = 0.0;
        for t in self.terms.iter().filter(|t| t.observation) {
            ll += self.statement(bound, t, t.power, false, ws)?;
        }
        Ok(ll)
    }

    /// The outputs' values at `at` ([`DensityProgram::compile_values`]),
    /// each flattened as [`Value::flatten`] flattens a value (a matrix row
    /// by row), into `out` (one vector per output, reused).
    pub fn values(
        &self,
        bound: &Bound,
        at: At,
        ws: &mut Workspace,
        out: &mut Vec<Vec<f64>>,
    ) -> Result<(), Error> {
        ws.fit(self);
        self.forward(bound, at.theta, at.site, &mut ws.v, None)?;
        out.resize(self.outputs.len(), Vec::new());
        for (o, &s) in out.iter_mut().zip(&self.outputs) {
            o.clear();
            let v = self.view(bound, &ws.v, s);
            match self.sh(bound, s) {
                Sh::Mat(r, c) => {
                    for i in 0..r {
                        o.extend((0..c).map(|j| v.at(j * r + i)));
                    }
                }
                Sh::Each(n) => o.extend((0..n).map(|i| v.at(i))),
                Sh::One | Sh::Other => o.push(v.at(0)),
            }
        }
        Ok(())
    }

    /// Statement `t` tempered by `tt` at the values in `ws`, with its
    /// adjoints added to the nodes' when `want`.
    fn statement(
        &self,
        bound: &Bound,
        t: &super::TermNode,
        tt: f64,
        want: bool,
        ws: &mut Workspace,
    ) -> Result<f64, Error> {
        let term = match &t.way {
            Way::Term(term) => term,
            Way::General(stmt) => return self.general(bound, t, *stmt, tt, want, &ws.v, &mut ws.g),
        };
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
        let scratch = &mut ws.s[t.scratch..t.scratch + term.scratch_len()];
        let value = term.eval(&bound.graph, y, &a[..k], tt, want, scratch)?;
        if want {
            for (j, s) in t.args.iter().enumerate() {
                if let Src::Node(m) = s {
                    add_to(&mut ws.g, &self.nodes[*m], term.arg_adjoint(scratch, j));
                }
            }
            if let (true, Src::Node(m)) = (t.outcome, t.y) {
                add_to(&mut ws.g, &self.nodes[m], term.outcome_adjoint(scratch));
            }
        }
        Ok(value)
    }

    /// The latent GP's adjoint f̄ \[N·C\] after a [`DensityProgram::run`]
    /// with gradients in `ws` (empty when the model has no latent GP or f̄
    /// is 0).
    pub fn site_adjoint<'w>(&self, ws: &'w Workspace) -> &'w [f64] {
        match self.site {
            Some(k) => {
                let n = &self.nodes[k];
                &ws.g[n.off..n.off + n.len]
            }
            None => &[],
        }
    }

    /// The nodes' values into `v`. With `sens`, an ODE node is solved with
    /// its forward sensitivities or its record for the adjoint sweep, kept
    /// there for the reverse pass (the same solution, so the gradient needs
    /// no second forward solve).
    fn forward(
        &self,
        bound: &Bound,
        theta: &[f64],
        site: &[f64],
        v: &mut [f64],
        mut sens: Option<&mut Vec<(usize, crate::ode::Sensitivities)>>,
    ) -> Result<(), Error> {
        if let Some(s) = sens.as_deref_mut() {
            s.clear();
        }
        for (k, node) in self.nodes.iter().enumerate() {
            let (before, rest) = v.split_at_mut(node.off);
            let before = &*before;
            let out = &mut rest[..node.len];
            let view = |s: Src| self.view(bound, before, s);
            match &node.op {
                Op::Param(x) => out.copy_from_slice(&theta[*x..*x + node.len]),
                Op::ParamMat(x) => {
                    let Sh::Mat(r, c) = node.sh else {
                        return Err(Error::internal("a matrix param without its shape"));
                    };
                    for i in 0..r {
                        for j in 0..c {
                            out[j * r + i] = theta[x + i * c + j];
                        }
                    }
                }
                Op::Elem(inst, ops) => elem_forward(inst, ops.map(view), out),
                Op::MatVec(m, x) => {
                    let (Arg::Each(m), Arg::Each(x)) = (view(*m), view(*x)) else {
                        return Err(Error::internal("a matrix product without its operands"));
                    };
                    if m.len() != out.len() * x.len() {
                        return Err(Error::internal("a matrix product of another shape"));
                    }
                    // The evaluator's order of terms, so the same bits,
                    // in the processor's widest vectors.
                    tempest_math::vector::mat_vec(m, x, out);
                }
                Op::MatMul(a, b) => {
                    let (Sh::Mat(r, k), Sh::Mat(_, c)) = (self.sh(bound, *a), self.sh(bound, *b))
                    else {
                        return Err(Error::internal("a matrix product without its shapes"));
                    };
                    let (Arg::Each(a), Arg::Each(b)) = (view(*a), view(*b)) else {
                        return Err(Error::internal("a matrix product without its operands"));
                    };
                    // Column j of A B is A b_j, its terms in the order of
                    // l as before.
                    if a.len() != r * k || b.len() != k * c || out.len() != r * c {
                        return Err(Error::internal("a matrix product of another shape"));
                    }
                    for j in 0..c {
                        tempest_math::vector::mat_vec(
                            a,
                            &b[j * k..(j + 1) * k],
                            &mut out[j * r..(j + 1) * r],
                        );
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
                Op::Sqdist(a, b) => {
                    let (a, b) = (view(*a), view(*b));
                    out[0] = (0..slice(a).len()).fold(0.0, |s, i| {
                        let d = a.at(i) - b.at(i);
                        s + d * d
                    });
                }
                Op::Index(a, i) => out[0] = view(*a).at(*i),
                Op::Gather(a, k) => {
                    let a = view(*a);
                    for (o, &k) in out.iter_mut().zip(self.ints(*k)) {
                        *o = a.at(k as usize);
                    }
                }
                Op::Array(xs) => {
                    for (o, x) in out.iter_mut().zip(xs) {
                        *o = view(*x).at(0);
                    }
                }
                Op::Stack(xs) => {
                    let n = xs.len();
                    for (k, x) in xs.iter().enumerate() {
                        let x = view(*x);
                        for j in 0..node.len / n.max(1) {
                            out[j * n + k] = x.at(j);
                        }
                    }
                }
                Op::Site(mu) => {
                    let mu = view(*mu).at(0);
                    for (o, lv) in out.iter_mut().zip(site) {
                        *o = lv + mu;
                    }
                }
                Op::Ode(call) => {
                    let vals: Vec<Value<f64>> = call
                        .args
                        .iter()
                        .map(|s| self.value(bound, before, *s))
                        .collect();
                    if let Some(s) = sens.as_deref_mut() {
                        let (sol, d) = crate::ode::solve_with_sensitivities(
                            bound,
                            call.system,
                            &call.exprs,
                            &vals,
                            &call.varying,
                            &call.settings,
                            call.span,
                            &call.record_fits,
                        )?;
                        if sol.len() != out.len() {
                            return Err(Error::internal("an ODE solution of another shape"));
                        }
                        out.copy_from_slice(sol.as_slice());
                        s.push((k, d));
                        continue;
                    }
                    let sol = crate::ode::solve_call(
                        Some(bound),
                        &bound.graph,
                        call.system,
                        &call.exprs,
                        &vals,
                        &call.settings,
                        call.span,
                        &bound.stop,
                    )?;
                    match sol {
                        Value::Matrix(m) if m.len() == out.len() => {
                            out.copy_from_slice(m.as_slice())
                        }
                        _ => return Err(Error::internal("an ODE solution of another shape")),
                    }
                }
            }
        }
        Ok(())
    }
}

/// An element-wise instruction's values into `out`, entry by entry, from
/// its operands' views (a number broadcast). Arithmetic runs one loop per
/// operation and pair of shapes, so each runs without a branch per entry;
/// every value is [`Inst::elem_value`]'s.
fn elem_forward(inst: &Inst, a: [Arg<'_>; 3], out: &mut [f64]) {
    if let Inst::Bin(op, 0, 1) = *inst {
        let (x, y) = (a[0], a[1]);
        macro_rules! each {
            ($op:expr) => {{
                let f = |u: f64, w: f64| bin_value::<f64>($op, u, w);
                match (x, y) {
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
        return match op {
            BinOp::Add => each!(BinOp::Add),
            BinOp::Sub => each!(BinOp::Sub),
            BinOp::Mul => each!(BinOp::Mul),
            BinOp::Div => each!(BinOp::Div),
            BinOp::Pow => each!(BinOp::Pow),
            op => each!(op),
        };
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = inst.elem_value(|j| a[j].at(i)).unwrap_or(f64::NAN);
    }
}

/// A view as a value of shape `sh`.
pub(super) fn shaped(a: Arg<'_>, sh: Sh) -> Value<f64> {
    match (a, sh) {
        (Arg::One(x), _) => Value::Real(x),
        (Arg::Each(x), Sh::Mat(r, c)) => Value::Matrix(DMatrix::from_column_slice(r, c, x)),
        (Arg::Each(x), _) => Value::Vector(DVector::from_column_slice(x)),
    }
}

/// The entries of a vector or matrix operand (the compiler gives sums,
/// means, dot products and logsumexp nothing else).
pub(super) fn slice(a: Arg<'_>) -> &'_ [f64] {
    match a {
        Arg::Each(x) => x,
        Arg::One(_) => &[],
    }
}

/// Add a statement's adjoint d \[N\] to a node: entry by entry, or summed
/// into a number.
pub(super) fn add_to(g: &mut [f64], n: &super::Node, d: &[f64]) {
    if n.scalar() {
        g[n.off] += d.iter().sum::<f64>();
    } else {
        for (gi, di) in g[n.off..n.off + n.len].iter_mut().zip(d) {
            *gi += di;
        }
    }
}
