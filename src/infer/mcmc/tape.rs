//! Reverse-mode gradients of model expressions at the level of whole
//! vectors and matrices: each node of an expression propagates the adjoint
//! of its value to its operands with a hand-derived rule (Xᵀ·adj for a
//! matrix–vector product, a sum for a broadcast scalar, ...), while scalar
//! element functions (built-ins, likelihood terms) are differentiated by
//! forward-mode autodiff one element at a time. So a gradient costs a small
//! multiple of one evaluation, as in Stan, and data matrices are never copied
//! into dual numbers.
//!
//! Values are `f64`; lets are evaluated once and their adjoints are
//! accumulated and pushed back in reverse order of definition.

use crate::error::{Error, ErrorKind};
use crate::ir::bind::Bound;
use crate::ir::eval::Env;
use crate::ir::expr::{Builtin, Ref, TExpr, TKind};
use crate::ir::ops;
use crate::ir::types::Ty;
use crate::ir::value::{Value, zero_like};
use crate::math::adjoint;
use crate::math::scalar::Dual1;
use crate::syntax::ast::{BinOp, UnOp};
use nalgebra::DMatrix;
use std::borrow::Cow;

/// Adjoints of the quantities a model depends on.
pub struct Adjoints {
    /// One per param (same shape as the param's value).
    pub params: Vec<Value<f64>>,
    /// One per latent site (shape of the site's value), or `None`.
    pub sites: Vec<Option<Value<f64>>>,
    lets: Vec<Option<Value<f64>>>,
}

/// The reverse pass over a model's expressions at fixed values.
pub struct Tape<'a> {
    env: Env<'a, f64>,
    /// The adjoints accumulated so far.
    pub adj: Adjoints,
    /// Whether each let depends on params or latent sites.
    let_varies: Vec<bool>,
}

/// Whether `e` applies a latent function or refers to a param or to a let
/// marked in `let_varies` (lets beyond its end count as varying).
fn varies_with(e: &TExpr, let_varies: &[bool]) -> bool {
    let mut found = false;
    e.walk(&mut |x| {
        found |= match &x.kind {
            TKind::GpApply { .. } | TKind::Ref(Ref::Param(_)) => true,
            TKind::Ref(Ref::Let(i)) => let_varies.get(*i).copied().unwrap_or(true),
            _ => false,
        }
    });
    found
}

fn unsupported(e: &TExpr, what: &str) -> Error {
    Error::at(
        ErrorKind::Unsupported,
        e.span,
        format!("gradients through {what} are not available for sampling in this version"),
    )
    .with_label("here")
}

/// `a + b` for adjoints of the same shape (a scalar adds to every entry).
fn add(a: &Value<f64>, b: &Value<f64>) -> Value<f64> {
    match (a, b) {
        (Value::Vector(x), Value::Vector(y)) if x.len() == y.len() => Value::Vector(x + y),
        (Value::Matrix(x), Value::Matrix(y)) if x.shape() == y.shape() => Value::Matrix(x + y),
        (Value::Real(x), Value::Real(y)) => Value::Real(x + y),
        _ => {
            ops::zip_num(a, b, &|x, y| x + y, "+", Default::default()).unwrap_or_else(|_| a.clone())
        }
    }
}

/// The adjoint of an operand that was broadcast to the shape of `adj`.
fn reduce_to(adj: &Value<f64>, operand: &Value<f64>) -> Value<f64> {
    match (operand, adj) {
        (Value::Int(_) | Value::Real(_), Value::Vector(v)) => Value::Real(v.sum()),
        (Value::Int(_) | Value::Real(_), Value::Matrix(m)) => Value::Real(m.sum()),
        _ => adj.clone(),
    }
}

/// The adjoint of an operand of a sum: summed when the operand is a
/// number broadcast over `adj`.
fn reduce_ty(adj: &Value<f64>, operand_scalar: bool) -> Value<f64> {
    match (operand_scalar, adj) {
        (true, Value::Vector(v)) => Value::Real(v.sum()),
        (true, Value::Matrix(m)) => Value::Real(m.sum()),
        _ => adj.clone(),
    }
}

fn num(v: &Value<f64>) -> Option<f64> {
    v.scalar()
}

fn map2(a: &Value<f64>, b: &Value<f64>, f: &dyn Fn(f64, f64) -> f64) -> Result<Value<f64>, Error> {
    ops::zip_num(a, b, f, "adjoint", Default::default())
}

impl<'a> Tape<'a> {
    /// A tape at these param values and latent site values.
    pub fn new(
        bound: &'a Bound,
        hypers: &'a [Value<f64>],
        params: &'a [Value<f64>],
        sites: &'a [Option<Value<f64>>],
    ) -> Self {
        let adj = Adjoints {
            params: params.iter().map(zero_like).collect(),
            sites: vec![None; sites.len()],
            lets: vec![None; bound.graph.lets.len()],
        };
        // Whether each let depends on params or latent sites, in order of
        // definition (a let only uses earlier lets).
        let mut let_varies = Vec::with_capacity(bound.graph.lets.len());
        for l in &bound.graph.lets {
            let v = varies_with(&l.value, &let_varies);
            let_varies.push(v);
        }
        Tape {
            env: Env::new(bound, hypers, params, sites),
            adj,
            let_varies,
        }
    }

    /// The environment (for forward values).
    pub fn env(&self) -> &Env<'a, f64> {
        &self.env
    }

    /// Whether `e` depends on params or latent sites (through lets too).
    pub fn varies(&self, e: &TExpr) -> bool {
        varies_with(e, &self.let_varies)
    }

    /// Push the adjoint `adj` of expression `e` back to its inputs.
    pub fn backward(&mut self, e: &TExpr, adj: &Value<f64>) -> Result<(), Error> {
        crate::limits::deep(|| self.backward_inner(e, adj))
    }

    fn backward_inner(&mut self, e: &TExpr, adj: &Value<f64>) -> Result<(), Error> {
        if !self.varies(e) {
            return Ok(());
        }
        match &e.kind {
            TKind::Ref(Ref::Param(i)) => {
                self.adj.params[*i] = add(&self.adj.params[*i], adj);
            }
            TKind::Ref(Ref::Let(i)) => {
                let acc = match &self.adj.lets[*i] {
                    Some(a) => add(a, adj),
                    None => adj.clone(),
                };
                self.adj.lets[*i] = Some(acc);
            }
            TKind::Ref(_) | TKind::Int(_) | TKind::Real(_) | TKind::Bool(_) | TKind::Str(_) => {}
            TKind::GpApply { site, .. } => {
                let acc = match &self.adj.sites[*site] {
                    Some(a) => add(a, adj),
                    None => adj.clone(),
                };
                self.adj.sites[*site] = Some(acc);
            }
            TKind::Unary(UnOp::Neg, a) => {
                let neg = ops::map_num(adj, &|x| -x, e.span)?;
                self.backward(a, &neg)?;
            }
            TKind::Binary(op, a, b) => self.binary(*op, a, b, adj)?,
            TKind::Builtin(f, args) => self.builtin(*f, args, adj, e)?,
            TKind::Index(base, idx)
                if idx.len() == 1 && matches!(idx[0].ty, crate::ir::types::Ty::IntArray(_)) =>
            {
                // A gather's adjoint scatters back, adding at repeated indices.
                let bv = self.env.eval(base)?;
                let Value::IntArray(ks) = self.env.eval(&idx[0])? else {
                    return Err(unsupported(e, "this index"));
                };
                let mut z = zero_like(&bv);
                match (&mut z, adj) {
                    (Value::Vector(v), Value::Vector(a)) => {
                        for (k, g) in ks.iter().zip(a.iter()) {
                            v[*k as usize] += g;
                        }
                    }
                    (Value::Matrix(m), Value::Matrix(a)) => {
                        for (r, k) in ks.iter().enumerate() {
                            for j in 0..m.ncols() {
                                m[(*k as usize, j)] += a[(r, j)];
                            }
                        }
                    }
                    _ => return Err(unsupported(e, "this index")),
                }
                self.backward(base, &z)?;
            }
            TKind::Index(base, idx) => {
                let bv = self.env.eval(base)?;
                let is: Vec<i64> = idx
                    .iter()
                    .map(|i| {
                        self.env
                            .eval(i)
                            .ok()
                            .and_then(|v| if let Value::Int(k) = v { Some(k) } else { None })
                            .unwrap_or(0)
                    })
                    .collect();
                let mut z = zero_like(&bv);
                let g = num(adj).unwrap_or(0.0);
                match (&mut z, is.as_slice()) {
                    (Value::Vector(v), [i]) => v[*i as usize] += g,
                    (Value::Matrix(m), [i, j]) => m[(*i as usize, *j as usize)] += g,
                    (Value::Matrix(m), [i]) => {
                        if let Value::Vector(row) = adj {
                            for j in 0..m.ncols() {
                                m[(*i as usize, j)] += row[j];
                            }
                        }
                    }
                    _ => return Err(unsupported(e, "this index")),
                }
                self.backward(base, &z)?;
            }
            TKind::If(c, a, b) => {
                let taken = matches!(self.env.eval(c)?, Value::Bool(true));
                self.backward(if taken { a } else { b }, adj)?;
            }
            TKind::Array(xs) => {
                for (k, x) in xs.iter().enumerate() {
                    let part = match adj {
                        Value::Vector(v) => Value::Real(v[k]),
                        Value::Matrix(m) => Value::Vector(m.row(k).transpose()),
                        _ => return Err(unsupported(e, "this array")),
                    };
                    self.backward(x, &part)?;
                }
            }
            TKind::Ode {
                system,
                args,
                settings,
            } => {
                let Value::Matrix(a) = adj else {
                    return Err(unsupported(e, "this use of an ODE solution"));
                };
                let vals: Vec<Value<f64>> = args
                    .iter()
                    .map(|x| self.env.eval(x))
                    .collect::<Result<_, _>>()?;
                let varying: Vec<bool> = args.iter().map(|x| self.varies(x)).collect();
                let adjs = crate::ir::ode::vjp(
                    self.env.bound,
                    *system,
                    args,
                    &vals,
                    &varying,
                    a,
                    settings,
                    e.span,
                )?;
                for (k, g) in adjs.into_iter().enumerate() {
                    if let Some(g) = g {
                        self.backward(&args[k], &g)?;
                    }
                }
            }
            _ => return Err(unsupported(e, "this expression")),
        }
        Ok(())
    }

    /// The value of `e`, borrowed when it is a data item (no copy of a
    /// data matrix).
    fn value(&self, e: &TExpr) -> Result<Cow<'_, Value<f64>>, Error> {
        if let TKind::Ref(Ref::Data(i)) = &e.kind {
            let bound = self.env.bound;
            if bound.present[*i] {
                return Ok(Cow::Borrowed(&bound.data[*i]));
            }
        }
        Ok(Cow::Owned(self.env.eval(e)?))
    }

    fn binary(&mut self, op: BinOp, a: &TExpr, b: &TExpr, adj: &Value<f64>) -> Result<(), Error> {
        let (da, db) = (self.varies(a), self.varies(b));
        use BinOp::*;
        let scalar = |t: &Ty| matches!(t, Ty::Int | Ty::Real);
        match op {
            // Sums need only the operands' shapes, from their types.
            Add | Sub => {
                if da {
                    self.backward(a, &reduce_ty(adj, scalar(&a.ty)))?;
                }
                if db {
                    let r = reduce_ty(adj, scalar(&b.ty));
                    let r = if op == Sub {
                        ops::map_num(&r, &|x| -x, b.span)?
                    } else {
                        r
                    };
                    self.backward(b, &r)?;
                }
                return Ok(());
            }
            // Matrix products (rules in `math::adjoint`): Xᵀ g for the
            // vector, g vᵀ for the matrix, each computed only when that side
            // varies.
            Mul if matches!(a.ty, Ty::Matrix(..))
                && matches!(b.ty, Ty::Vector(_) | Ty::IntArray(_)) =>
            {
                let Value::Vector(g) = adj else {
                    return Err(unsupported(a, "this product"));
                };
                if db {
                    let gb = match &*self.value(a)? {
                        Value::Matrix(m) => adjoint::matvec_vjp_v(m, g),
                        _ => return Err(unsupported(a, "this product")),
                    };
                    self.backward(b, &Value::Vector(gb))?;
                }
                if da {
                    let Some(v) = self.env.eval(b)?.vector() else {
                        return Err(unsupported(b, "this product"));
                    };
                    self.backward(a, &Value::Matrix(adjoint::matvec_vjp_a(g, &v)))?;
                }
                return Ok(());
            }
            Mul if matches!(a.ty, Ty::Matrix(..)) && matches!(b.ty, Ty::Matrix(..)) => {
                let Value::Matrix(g) = adj else {
                    return Err(unsupported(a, "this product"));
                };
                if da {
                    let ga = match &*self.value(b)? {
                        Value::Matrix(y) => adjoint::matmul_vjp_a(g, y),
                        _ => return Err(unsupported(b, "this product")),
                    };
                    self.backward(a, &Value::Matrix(ga))?;
                }
                if db {
                    let gb = match &*self.value(a)? {
                        Value::Matrix(x) => adjoint::matmul_vjp_b(x, g),
                        _ => return Err(unsupported(a, "this product")),
                    };
                    self.backward(b, &Value::Matrix(gb))?;
                }
                return Ok(());
            }
            _ => {}
        }
        let (va, vb) = (self.value(a)?.into_owned(), self.value(b)?.into_owned());
        match op {
            Mul | EwMul => {
                if da {
                    let r = map2(adj, &vb, &|g, y| g * y)?;
                    self.backward(a, &reduce_to(&r, &va))?;
                }
                if db {
                    let r = map2(adj, &va, &|g, x| g * x)?;
                    self.backward(b, &reduce_to(&r, &vb))?;
                }
            }
            Div | EwDiv => {
                if da {
                    let r = map2(adj, &vb, &|g, y| g / y)?;
                    self.backward(a, &reduce_to(&r, &va))?;
                }
                if db {
                    let q = map2(&va, &vb, &|x, y| -x / (y * y))?;
                    let r = map2(adj, &q, &|g, d| g * d)?;
                    self.backward(b, &reduce_to(&r, &vb))?;
                }
            }
            Pow => {
                if da {
                    let d = map2(&va, &vb, &|x, y| y * x.powf(y - 1.0))?;
                    let r = map2(adj, &d, &|g, d| g * d)?;
                    self.backward(a, &reduce_to(&r, &va))?;
                }
                if db {
                    let d = map2(&va, &vb, &|x, y| x.powf(y) * x.ln())?;
                    let r = map2(adj, &d, &|g, d| g * d)?;
                    self.backward(b, &reduce_to(&r, &vb))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn builtin(
        &mut self,
        f: Builtin,
        args: &[TExpr],
        adj: &Value<f64>,
        e: &TExpr,
    ) -> Result<(), Error> {
        use Builtin::*;
        let vals: Vec<Value<f64>> = args
            .iter()
            .map(|a| self.env.eval(a))
            .collect::<Result<_, _>>()?;
        match f {
            Pi | E | Rows | Cols => {}
            Col => {
                let (Value::Matrix(m), Value::Int(j), Value::Vector(a)) = (&vals[0], &vals[1], adj)
                else {
                    return Err(unsupported(e, "this column"));
                };
                let mut z = DMatrix::zeros(m.nrows(), m.ncols());
                z.set_column(*j as usize, a);
                self.backward(&args[0], &Value::Matrix(z))?;
            }
            Sum | Mean => {
                let g = num(adj).unwrap_or(0.0);
                let n = vals[0].flatten().len().max(1) as f64;
                let s = if f == Mean { g / n } else { g };
                let r = ops::map_num(&vals[0], &|_| s, e.span)?;
                self.backward(&args[0], &r)?;
            }
            Logsumexp => {
                let xs = vals[0].flatten();
                let m = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = xs.iter().map(|x| (x - m).exp()).sum();
                let g = num(adj).unwrap_or(0.0);
                let r = ops::map_num(&vals[0], &|x| g * (x - m).exp() / z, e.span)?;
                self.backward(&args[0], &r)?;
            }
            Dot | Sqdist => {
                let g = num(adj).unwrap_or(0.0);
                let (a, b) = (&vals[0], &vals[1]);
                let (ra, rb) = if f == Dot {
                    (
                        map2(b, &Value::Real(g), &|y, g| y * g)?,
                        map2(a, &Value::Real(g), &|x, g| x * g)?,
                    )
                } else {
                    let d = map2(a, b, &|x, y| 2.0 * g * (x - y))?;
                    (d.clone(), ops::map_num(&d, &|x| -x, e.span)?)
                };
                self.backward(&args[0], &ra)?;
                self.backward(&args[1], &rb)?;
            }
            Pow => {
                let (va, vb) = (&vals[0], &vals[1]);
                let da = map2(va, vb, &|x, y| y * x.powf(y - 1.0))?;
                let ra = map2(adj, &da, &|g, d| g * d)?;
                self.backward(&args[0], &reduce_to(&ra, va))?;
                let db = map2(va, vb, &|x, y| x.powf(y) * x.ln())?;
                let rb = map2(adj, &db, &|g, d| g * d)?;
                self.backward(&args[1], &reduce_to(&rb, vb))?;
            }
            _ => {
                // Element-wise: the derivative of each element by a dual number.
                let d = ops::map_num(&vals[0], &|x| elementwise_derivative(f, x), e.span)?;
                let r = map2(adj, &d, &|g, d| g * d)?;
                self.backward(&args[0], &r)?;
            }
        }
        Ok(())
    }

    /// Push the accumulated adjoints of lets back, last let first.
    pub fn flush_lets(&mut self) -> Result<(), Error> {
        let g = self.env.bound.graph.clone();
        for i in (0..g.lets.len()).rev() {
            if let Some(a) = self.adj.lets[i].take() {
                self.backward(&g.lets[i].value, &a)?;
            }
        }
        Ok(())
    }
}

/// f′(x) for an element-wise built-in, by forward-mode autodiff.
pub fn elementwise_derivative(f: Builtin, x: f64) -> f64 {
    crate::model::builtin::call1(f, Dual1::new(x, [1.0])).tangent()[0]
}
