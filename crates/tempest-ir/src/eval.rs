//! Evaluate typed expressions generically over the scalar type, so the same
//! model code gives values (`f64`) and derivatives (duals).

use super::bound::Bound;
use super::expr::{Ref, TExpr, TKind};
use super::graph::{DistCall, Graph};
use super::ops;
use super::pointwise::Pointwise;
use super::types::Ty;
use super::value::Value;
use nalgebra::DVector;
use std::cell::RefCell;
use std::sync::Arc;
use tempest_core::error::{Error, ErrorKind};
use tempest_model::custom::Scalar;
use tempest_model::kernel::{EntryFn, KernelArg, KernelValue};
use tempest_syntax::ast::Span;

type R<T> = Result<Value<T>, Error>;

/// Everything an expression may refer to: bound data, hyper and param
/// values, latent site values and the temperature. Lets are evaluated once
/// and cached.
pub struct Env<'a, T> {
    /// The bound model.
    pub bound: &'a Bound,
    /// Hyper values, one per `hyper` declaration.
    pub hypers: &'a [Value<T>],
    /// Param values (constrained), one per `param` declaration.
    pub params: &'a [Value<T>],
    /// Latent values per site, where the engine provides them.
    pub sites: &'a [Option<Value<T>>],
    /// The value of `temperature`.
    pub temperature: T,
    lets: RefCell<Vec<Option<Value<T>>>>,
}

impl<'a, T: Scalar> Env<'a, T> {
    /// An environment with no latent values and the bound temperature.
    pub fn new(
        bound: &'a Bound,
        hypers: &'a [Value<T>],
        params: &'a [Value<T>],
        sites: &'a [Option<Value<T>>],
    ) -> Self {
        Env {
            bound,
            hypers,
            params,
            sites,
            temperature: T::constant(bound.temperature),
            lets: RefCell::new(vec![None; bound.graph.lets.len()]),
        }
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.bound.graph
    }

    /// Evaluate an expression of the model.
    pub fn eval(&self, e: &TExpr) -> R<T> {
        eval(e, &Some(self), &[])
    }

    /// Evaluate a kernel expression.
    pub fn kernel(&self, e: &TExpr) -> Result<KernelValue<T>, Error> {
        match self.eval(e)? {
            Value::Kernel(k) => Ok(*k),
            v => Err(Error::at(
                ErrorKind::Type,
                e.span,
                format!("expected a kernel, found {}", v.shape()),
            )),
        }
    }

    /// Evaluate a scalar expression.
    pub fn scalar(&self, e: &TExpr) -> Result<T, Error> {
        let v = self.eval(e)?;
        v.scalar().ok_or_else(|| {
            Error::at(
                ErrorKind::Type,
                e.span,
                format!("expected a number, found {}", v.shape()),
            )
        })
    }

    fn lookup(&self, r: Ref, span: Span) -> R<T> {
        Ok(match r {
            Ref::Data(i) => {
                if !self.bound.present[i] {
                    let name = &self.bound.graph.data[i].name;
                    return Err(Error::at(
                        ErrorKind::Data,
                        span,
                        format!("`{name}` has no value in {}", self.bound.data_file),
                    )
                    .with_label("needed here"));
                }
                self.bound.data[i].lift()
            }
            Ref::Hyper(i) => self.hypers[i].clone(),
            Ref::Param(i) => self.params[i].clone(),
            Ref::Temperature => Value::Real(self.temperature),
            Ref::Let(i) => self.let_value(i)?,
            Ref::Local(_) => {
                return Err(Error::internal("a local name outside a function body").with_span(span));
            }
        })
    }

    /// The value of let `i`. The lets it depends on are evaluated first, in
    /// an order found without recursion, so a long chain of lets costs no
    /// stack: each let's expression then finds its lets already cached.
    fn let_value(&self, i: usize) -> R<T> {
        if let Some(v) = &self.lets.borrow()[i] {
            return Ok(v.clone());
        }
        let lets = &self.bound.graph.lets;
        let mut todo: Vec<(usize, bool)> = vec![(i, false)];
        while let Some((j, deps_done)) = todo.pop() {
            if self.lets.borrow()[j].is_some() {
                continue;
            }
            if deps_done {
                let v = self.eval(&lets[j].value)?;
                self.lets.borrow_mut()[j] = Some(v);
                continue;
            }
            todo.push((j, true));
            for r in lets[j].value.refs() {
                if let Ref::Let(k) = r
                    && self.lets.borrow()[k].is_none()
                {
                    todo.push((k, false));
                }
            }
        }
        self.lets.borrow()[i]
            .clone()
            .ok_or_else(|| Error::internal("a let was not evaluated"))
    }

    /// The log density of each observation of an observation term (not
    /// tempered), shape \[N\].
    pub fn observation_terms(&self, obs: usize) -> Result<Vec<T>, Error> {
        let o = &self.bound.graph.observations[obs];
        let y = &self.bound.data[o.data];
        dist_terms(self, &o.dist, &y.lift::<T>(), o.span)
    }

    /// The power of an observation term.
    pub fn temperature_of(&self, obs: usize) -> Result<T, Error> {
        match &self.bound.graph.observations[obs].temperature {
            Some(t) => self.scalar(t),
            None => Ok(T::one()),
        }
    }
}

/// The log density of each outcome of `y` under `dist`, shape \[N\] (or \[1\]),
/// by the one element-wise path ([`Pointwise::terms`]).
pub fn dist_terms<T: Scalar>(
    env: &Env<T>,
    dist: &DistCall,
    y: &Value<T>,
    span: Span,
) -> Result<Vec<T>, Error> {
    let args: Vec<Value<T>> = dist
        .args
        .iter()
        .map(|a| env.eval(a))
        .collect::<Result<_, _>>()?;
    Pointwise::new(&env.bound.graph, dist).terms(y, &args, span)
}

/// Call a model-file likelihood: `args` are the latent value and parameters.
pub fn call_likelihood<T: Scalar>(
    graph: &Graph,
    func: usize,
    y: T,
    args: &[T],
) -> Result<T, Error> {
    let f = &graph.functions[func];
    if let Some(p) = &f.program {
        return Ok(p.eval_likelihood(y, args));
    }
    call_likelihood_interpreted(graph, func, y, args)
}

/// [`call_likelihood`] by the general evaluator, even when the function has
/// a compiled form (to check one against the other).
pub fn call_likelihood_interpreted<T: Scalar>(
    graph: &Graph,
    func: usize,
    y: T,
    args: &[T],
) -> Result<T, Error> {
    let f = &graph.functions[func];
    let mut locals: Vec<Value<T>> = Vec::with_capacity(f.n_locals);
    let y_val = if f.params[0].1 == crate::types::Ty::Int {
        Value::Int(y.to_constant() as i64)
    } else {
        Value::Real(y)
    };
    locals.push(y_val);
    locals.extend(args.iter().map(|&a| Value::Real(a)));
    run_function(f, locals)
}

fn run_function<T: Scalar>(f: &super::graph::Function, locals: Vec<Value<T>>) -> Result<T, Error> {
    let v = run_body(f, locals)?;
    v.scalar().ok_or_else(|| {
        Error::at(
            ErrorKind::Type,
            f.body.span,
            format!("`{}` must return a number, found {}", f.name, v.shape()),
        )
    })
}

/// Run a user function's lets and body with its parameters in `locals`.
pub(crate) fn run_body<T: Scalar>(f: &super::graph::Function, mut locals: Vec<Value<T>>) -> R<T> {
    for (slot, e) in &f.lets {
        let v = eval::<T>(e, &None, &locals)?;
        if locals.len() <= *slot {
            locals.resize(*slot + 1, Value::Int(0));
        }
        locals[*slot] = v;
    }
    eval::<T>(&f.body, &None, &locals)
}

/// A kernel defined in a model file, with its parameters bound.
struct LangKernel<T> {
    graph: Arc<Graph>,
    func: usize,
    params: Vec<Value<T>>,
}

impl<T: Scalar> EntryFn<T> for LangKernel<T> {
    fn entry(&self, x: &[f64], y: &[f64]) -> Result<T, Error> {
        let f = &self.graph.functions[self.func];
        let mut locals = self.params.clone();
        locals.push(Value::Vector(DVector::from_iterator(
            x.len(),
            x.iter().map(|&v| T::constant(v)),
        )));
        locals.push(Value::Vector(DVector::from_iterator(
            y.len(),
            y.iter().map(|&v| T::constant(v)),
        )));
        run_function(f, locals)
    }
}

/// A model-file kernel's arguments as the lengths of its parameters
/// (`None` for a number) and their elements in order, or `None` when one
/// is neither a number nor a real vector.
fn flat_params<T: Scalar>(params: &[Value<T>]) -> Option<(Vec<Option<usize>>, Vec<T>)> {
    let mut lens = Vec::with_capacity(params.len());
    let mut flat = Vec::with_capacity(params.len());
    for v in params {
        match v {
            Value::Vector(x) => {
                lens.push(Some(x.len()));
                flat.extend(x.iter().copied());
            }
            _ => {
                lens.push(None);
                flat.push(v.scalar()?);
            }
        }
    }
    Some((lens, flat))
}

fn dims_of<T: Scalar>(
    d: &Option<Box<TExpr>>,
    env: &Option<&Env<T>>,
    locals: &[Value<T>],
) -> Result<Option<Vec<usize>>, Error> {
    let Some(d) = d else { return Ok(None) };
    let v = eval(d, env, locals)?;
    let list: Vec<i64> = match v {
        Value::Int(i) => vec![i],
        Value::IntRange(a, b) => {
            if b.saturating_sub(a) >= tempest_core::limits::MAX_RANGE_LEN as i64 {
                return Err(Error::at(
                    ErrorKind::Shape,
                    d.span,
                    format!(
                        "`dims` selects {} columns; at most {} are supported",
                        b.saturating_sub(a).saturating_add(1),
                        tempest_core::limits::MAX_RANGE_LEN
                    ),
                )
                .with_label("too many"));
            }
            (a..=b).collect()
        }
        Value::IntArray(xs) => xs,
        other => {
            return Err(Error::at(
                ErrorKind::Type,
                d.span,
                format!("`dims` needs column indices, found {}", other.shape()),
            ));
        }
    };
    if list.is_empty() {
        return Err(
            Error::at(ErrorKind::Shape, d.span, "`dims` selects no columns").with_label("empty"),
        );
    }
    list.into_iter()
        .map(|i| {
            usize::try_from(i).map_err(|_| {
                Error::at(
                    ErrorKind::Shape,
                    d.span,
                    format!("column index {i} is negative"),
                )
                .with_label("here")
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn kernel_arg<T: Scalar>(v: Value<T>, span: Span) -> Result<KernelArg<T>, Error> {
    match v {
        Value::Int(_) | Value::Real(_) => Ok(KernelArg::Scalar(v.scalar().unwrap_or_else(T::zero))),
        Value::Vector(x) => Ok(KernelArg::Vector(x.iter().copied().collect())),
        Value::IntArray(x) => Ok(KernelArg::Vector(
            x.iter().map(|&i| T::constant(i as f64)).collect(),
        )),
        other => Err(Error::at(
            ErrorKind::Type,
            span,
            format!(
                "a kernel argument must be a number or vector, found {}",
                other.shape()
            ),
        )),
    }
}

/// Evaluate `e` with an optional model environment and function locals.
pub fn eval<T: Scalar>(e: &TExpr, env: &Option<&Env<T>>, locals: &[Value<T>]) -> R<T> {
    tempest_core::limits::deep(|| eval_inner(e, env, locals))
}

fn eval_inner<T: Scalar>(e: &TExpr, env: &Option<&Env<T>>, locals: &[Value<T>]) -> R<T> {
    let span = e.span;
    let ev = |x: &TExpr| eval(x, env, locals);
    let need_env = || {
        env.ok_or_else(|| Error::internal("a model name inside a function body").with_span(span))
    };
    Ok(match &e.kind {
        TKind::Int(i) => Value::Int(*i),
        TKind::Real(r) => Value::Real(T::constant(*r)),
        TKind::Bool(b) => Value::Bool(*b),
        TKind::Str(s) => Value::Str(s.clone()),
        TKind::Ref(Ref::Local(i)) => locals
            .get(*i)
            .cloned()
            .ok_or_else(|| Error::internal("unbound local").with_span(span))?,
        TKind::Ref(r) => need_env()?.lookup(*r, span)?,
        TKind::Array(xs) => {
            let vals: Vec<Value<T>> = xs.iter().map(ev).collect::<Result<_, _>>()?;
            array(vals, span)?
        }
        TKind::Range(a, b) => match (ev(a)?, ev(b)?) {
            (Value::Int(x), Value::Int(y)) => Value::IntRange(x, y),
            _ => {
                return Err(Error::at(
                    ErrorKind::Type,
                    span,
                    "a range needs two integers",
                ));
            }
        },
        TKind::Unary(op, a) => ops::unary(*op, &ev(a)?, span)?,
        TKind::Binary(op, a, b) => match data_matvec(*op, a, b, env, locals)? {
            Some(v) => v,
            None => ops::binary(*op, ev(a)?, ev(b)?, span)?,
        },
        TKind::Builtin(b, xs) => {
            let vals: Vec<Value<T>> = xs.iter().map(ev).collect::<Result<_, _>>()?;
            ops::builtin(*b, &vals, span)?
        }
        TKind::Kernel { kind, args, dims } => {
            let mut out = Vec::with_capacity(args.len());
            for (a, spec) in args.iter().zip(kind.params()) {
                out.push(match a {
                    Some(x) => kernel_arg(ev(x)?, x.span)?,
                    None => KernelArg::Scalar(T::constant(spec.default.unwrap_or(1.0))),
                });
            }
            Value::Kernel(Box::new(KernelValue::Base {
                kind: *kind,
                args: out,
                dims: dims_of(dims, env, locals)?,
                span,
            }))
        }
        TKind::UserKernel { func, args, dims } => {
            let env = need_env()?;
            let params: Vec<Value<T>> = args.iter().map(ev).collect::<Result<_, _>>()?;
            let f = &env.bound.graph.functions[*func];
            if let Some((lens, flat)) = flat_params(&params) {
                let program = match &f.program {
                    Some(p) if lens.iter().all(Option::is_none) => Some(p.clone()),
                    _ => f.shaped.get(f, &lens, span),
                };
                if let Some(program) = program {
                    return Ok(Value::Kernel(Box::new(KernelValue::Compiled {
                        name: f.name.clone(),
                        program,
                        params: flat,
                        dims: dims_of(dims, &Some(env), locals)?,
                        span,
                    })));
                }
            }
            Value::Kernel(Box::new(KernelValue::Lang {
                name: env.bound.graph.functions[*func].name.clone(),
                entry: Arc::new(LangKernel {
                    graph: env.bound.graph.clone(),
                    func: *func,
                    params,
                }),
                dims: dims_of(dims, &Some(env), locals)?,
                span,
            }))
        }
        TKind::RustKernel { kernel, args, dims } => {
            let mut params = Vec::with_capacity(args.len());
            for a in args {
                let v = ev(a)?;
                params.push(v.scalar().ok_or_else(|| {
                    Error::at(
                        ErrorKind::Type,
                        a.span,
                        format!("`{}` takes numbers, found {}", kernel.name(), v.shape()),
                    )
                })?);
            }
            Value::Kernel(Box::new(KernelValue::Rust {
                kernel: kernel.clone(),
                params,
                dims: dims_of(dims, env, locals)?,
                span,
            }))
        }
        TKind::Deep { .. } | TKind::Mlp { .. } => {
            return Err(Error::at(
                ErrorKind::Unsupported,
                span,
                "a deep kernel is learned by the `svi` engine, as the whole kernel of a GP",
            )
            .with_label("deep kernel")
            .with_note("write e.g. `f ~ gp(0, deep(sf2 * rbf(ell), mlp([64, 8])))` with `infer svi { }` and `f : inducing(m = 100)` in a guide block"));
        }
        TKind::GpApply { gp, site, .. } => {
            let env = need_env()?;
            match env.sites.get(*site).and_then(|s| s.clone()) {
                Some(v) => v,
                None => {
                    let name = &env.bound.graph.gps[*gp].name;
                    return Err(Error::at(
                        ErrorKind::Unsupported,
                        span,
                        format!("this engine does not provide the latent values of `{name}` here"),
                    )
                    .with_label("latent values needed"));
                }
            }
        }
        TKind::Index(b, idx) if idx.len() == 1 && matches!(idx[0].ty, Ty::IntArray(_)) => {
            let base = ev(b)?;
            match ev(&idx[0])? {
                Value::IntArray(ks) => gather(&base, &ks, &idx[0], env, span)?,
                v => {
                    return Err(Error::at(
                        ErrorKind::Type,
                        idx[0].span,
                        format!("an index must be integers, found {}", v.shape()),
                    ));
                }
            }
        }
        TKind::Index(b, idx) => {
            let base = ev(b)?;
            let mut is = Vec::with_capacity(idx.len());
            for i in idx {
                match ev(i)? {
                    Value::Int(k) => is.push(k),
                    v => {
                        return Err(Error::at(
                            ErrorKind::Type,
                            i.span,
                            format!("an index must be an integer, found {}", v.shape()),
                        ));
                    }
                }
            }
            ops::index(&base, &is, span)?
        }
        TKind::Ode {
            system,
            args,
            settings,
        } => {
            let env = need_env()?;
            let vals: Vec<Value<T>> = args.iter().map(ev).collect::<Result<_, _>>()?;
            super::ode::solve_call(
                Some(env.bound),
                &env.bound.graph,
                *system,
                args,
                &vals,
                settings,
                span,
                &env.bound.stop,
            )?
        }
        TKind::If(c, a, b) => match ev(c)? {
            Value::Bool(true) => ev(a)?,
            Value::Bool(false) => ev(b)?,
            v => {
                return Err(Error::at(
                    ErrorKind::Type,
                    c.span,
                    format!("a condition must be a comparison, found {}", v.shape()),
                ));
            }
        },
    })
}

fn array<T: Scalar>(vals: Vec<Value<T>>, span: Span) -> R<T> {
    if vals.iter().all(|v| matches!(v, Value::Int(_))) {
        return Ok(Value::IntArray(
            vals.iter()
                .map(|v| if let Value::Int(i) = v { *i } else { 0 })
                .collect(),
        ));
    }
    if vals.iter().all(|v| v.scalar().is_some()) {
        return Ok(Value::Vector(DVector::from_iterator(
            vals.len(),
            vals.iter().map(|v| v.scalar().unwrap_or_else(T::zero)),
        )));
    }
    if vals.iter().all(|v| matches!(v, Value::Str(_))) {
        return Ok(Value::StrArray(
            vals.iter()
                .map(|v| {
                    if let Value::Str(s) = v {
                        s.clone()
                    } else {
                        String::new()
                    }
                })
                .collect(),
        ));
    }
    let rows: Vec<DVector<T>> = vals.iter().filter_map(|v| v.vector()).collect();
    if rows.len() == vals.len() && !rows.is_empty() {
        let d = rows[0].len();
        if rows.iter().any(|r| r.len() != d) {
            return Err(Error::at(
                ErrorKind::Shape,
                span,
                "the rows of a matrix literal have different lengths",
            )
            .with_label("here"));
        }
        let mut m = nalgebra::DMatrix::from_element(rows.len(), d, T::zero());
        for (i, r) in rows.iter().enumerate() {
            for j in 0..d {
                m[(i, j)] = r[j];
            }
        }
        return Ok(Value::Matrix(m));
    }
    Err(Error::at(
        ErrorKind::Type,
        span,
        "an array literal holds numbers, rows of equal length, or strings",
    )
    .with_label("here"))
}

/// `X * v` with X a data matrix, without copying X into the scalar type.
fn data_matvec<T: Scalar>(
    op: tempest_syntax::ast::BinOp,
    a: &TExpr,
    b: &TExpr,
    env: &Option<&Env<T>>,
    locals: &[Value<T>],
) -> Result<Option<Value<T>>, Error> {
    let (tempest_syntax::ast::BinOp::Mul, TKind::Ref(Ref::Data(i)), Some(en)) = (op, &a.kind, env)
    else {
        return Ok(None);
    };
    let (Value::Matrix(m), true) = (&en.bound.data[*i], en.bound.present[*i]) else {
        return Ok(None);
    };
    let Some(v) = eval(b, env, locals)?.vector() else {
        return Ok(None);
    };
    if m.ncols() != v.len() {
        return Ok(None);
    }
    Ok(Some(Value::Vector(T::data_matvec(m, &v))))
}

/// `base[ks]` for an integer-array index: the elements (or rows) at `ks`,
/// in its order. An index out of range is an error at the index; when the
/// index is a data item it also names the data row and column.
fn gather<T: Scalar>(
    base: &Value<T>,
    ks: &[i64],
    idx: &TExpr,
    env: &Option<&Env<T>>,
    span: Span,
) -> R<T> {
    let n = match base {
        Value::Vector(v) => v.len(),
        Value::IntArray(v) => v.len(),
        Value::Matrix(m) => m.nrows(),
        v => {
            return Err(Error::at(
                ErrorKind::Type,
                span,
                format!("{} cannot be indexed by an integer array", v.shape()),
            ));
        }
    };
    if let Some(pos) = ks.iter().position(|&k| k < 0 || k as usize >= n) {
        let mut err = Error::at(
            ErrorKind::Shape,
            idx.span,
            format!(
                "index {} (element {pos} of the index) is out of range for {} (valid: 0..{})",
                ks[pos],
                base.shape(),
                n as i64 - 1
            ),
        )
        .with_label("index out of range");
        if let Some(env) = env
            && let Some((d, plain)) = super::rows::index_rows(idx, &env.bound.graph)
        {
            let b = env.bound;
            let decl = &b.graph.data[d];
            let (row, col) =
                super::bound::element_location(&b.data[d], pos, &decl.name, &decl.source);
            if ks[pos] == n as i64 && plain {
                err = err.with_note(format!(
                    "indices count from 0: for ids numbered 1..{n}, declare `{} : {} = column(\"{col}\", levels = 1..{n})`, or index with `{} - 1`",
                    decl.name, decl.ty, decl.name
                ));
            }
            err = err.in_data(b.location(row, col));
        }
        return Err(err);
    }
    let at = |k: &i64| *k as usize;
    Ok(match base {
        Value::Vector(v) => Value::Vector(DVector::from_iterator(
            ks.len(),
            ks.iter().map(|k| v[at(k)]),
        )),
        Value::IntArray(v) => Value::IntArray(ks.iter().map(|k| v[at(k)]).collect()),
        Value::Matrix(m) => {
            // Rows by group can be far larger than the matrix they come from.
            tempest_core::limits::check_memory(&[tempest_core::limits::Request::new(
                "these rows of a matrix",
            )
            .times("rows", ks.len())
            .times("columns", m.ncols())
            .bytes_each(std::mem::size_of::<T>() as u128)])
            .map_err(|e| e.with_span(span).with_label("these rows"))?;
            Value::Matrix(nalgebra::DMatrix::from_fn(ks.len(), m.ncols(), |i, j| {
                m[(at(&ks[i]), j)]
            }))
        }
        _ => unreachable!("checked above"),
    })
}

/// The evaluations a bound model answers for its users.
impl Bound {
    /// The inputs of a latent site, evaluated with these hypers and params.
    pub fn site_inputs(
        &self,
        site: usize,
        hypers: &[Value<f64>],
        params: &[Value<f64>],
    ) -> Result<tempest_model::kernel::Inputs, Error> {
        let s = &self.graph.sites[site];
        let env = Env::new(self, hypers, params, &[]);
        match env.eval(&s.input)? {
            Value::Matrix(m) => Ok(tempest_model::kernel::Inputs::from_matrix(&m)),
            Value::Vector(v) => Ok(tempest_model::kernel::Inputs::from_vector(&v)),
            v => Err(Error::at(
                ErrorKind::Type,
                s.input.span,
                format!(
                    "the inputs of a latent function must be a matrix or vector, found {}",
                    v.shape()
                ),
            )),
        }
    }

    /// The number of copies of a latent GP (1 when not replicated).
    pub fn replicas(&self, gp: usize) -> Result<usize, Error> {
        match &self.graph.gps[gp].replicas {
            None => Ok(1),
            Some(e) => {
                let env = Env::<f64>::new(self, &[], &[], &[]);
                match env.eval(e)? {
                    Value::Int(c) if c > 0 => Ok(c as usize),
                    v => Err(Error::at(
                        ErrorKind::Data,
                        e.span,
                        format!("the number of copies must be a positive integer, found {v}"),
                    )),
                }
            }
        }
    }
}
