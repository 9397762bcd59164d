//! Lowering a bound model's lets, priors and observations to a
//! [`DensityProgram`].

use super::{DensityProgram, Node, OdeCall, Op, Sh, Src, Stmt, TermNode, Way, shape_of};
use crate::bound::Bound;
use crate::eval::Env;
use crate::expr::{Builtin, Ref, TExpr, TKind};
use crate::graph::DistCall;
use crate::pointwise::term::Term;
use crate::types::Ty;
use crate::value::Value;
use tempest_core::error::{Error, ErrorKind};
use tempest_model::program::Inst;
use tempest_syntax::ast::{BinOp, Span, UnOp};

/// The error for a construct the samplers cannot differentiate.
fn unsupported(span: Span, what: &str) -> Error {
    Error::at(
        ErrorKind::Unsupported,
        span,
        format!("gradients through {what} are not available for sampling in this version"),
    )
    .with_label("here")
}

/// The error for operands whose shapes do not fit together.
fn shapes(span: Span, what: &str, a: Sh, b: Sh) -> Error {
    let word = |s: Sh| match s {
        Sh::One => "a number".to_string(),
        Sh::Each(n) => format!("a vector[{n}]"),
        Sh::Mat(r, c) => format!("a matrix[{r}, {c}]"),
        Sh::Other => "a value that is not a number".to_string(),
    };
    Error::at(
        ErrorKind::Shape,
        span,
        format!("{what}: {} and {} do not fit together", word(a), word(b)),
    )
    .with_label("here")
}

struct Compiler<'a> {
    bound: &'a Bound,
    env: Env<'a, f64>,
    offsets: &'a [usize],
    shapes: &'a [(usize, usize)],
    let_varies: Vec<bool>,
    lets: Vec<Option<Src>>,
    params: Vec<Option<usize>>,
    /// The latent GP: its points N, copies C and mean, and its node once
    /// made.
    site: Option<(usize, usize, &'a TExpr)>,
    site_node: Option<Src>,
    nodes: Vec<Node>,
    consts: Vec<Value<f64>>,
    values: usize,
    /// How many branches of an `if` whose condition varies enclose the
    /// expression being compiled.
    guard: usize,
    /// The largest node made so far and the expression that made it (the
    /// place to name if the program's memory is refused).
    largest: Option<(usize, Span)>,
}

impl DensityProgram {
    /// Compile the log density of `bound` at the hypers' values `hypers`,
    /// with param p's values at entries `offsets[p]..` of the params'
    /// values and of shape `shapes[p]` ((0, 0) a number, (n, 0) a vector,
    /// (r, c) a matrix held row by row); `powers[j]` is observation j's
    /// power as written in the model (an observation of power 0 is left
    /// out: a GP integrated out is given so). `site` is the latent GP
    /// sampled in whitened form, if the model has one: its points N, its
    /// copies C (classes) and its mean (a number). An error, at its place
    /// in the file, for a construct the program does not cover.
    pub fn compile<'a>(
        bound: &'a Bound,
        hypers: &'a [Value<f64>],
        offsets: &'a [usize],
        shapes: &'a [(usize, usize)],
        powers: &[f64],
        site: Option<(usize, usize, &'a TExpr)>,
    ) -> Result<DensityProgram, Error> {
        let g = bound.graph.clone();
        if g.sites.len() > 1
            || offsets.len() != g.params.len()
            || shapes.len() != offsets.len()
            || powers.len() != g.observations.len()
        {
            return Err(Error::internal(
                "the compiled density's layout does not match its model",
            ));
        }
        let mut c = Compiler::new(bound, hypers, offsets, shapes, site);
        let mut terms = Vec::new();
        let mut scratch = 0;
        for (i, p) in g.priors.iter().enumerate() {
            let node = c.param(p.param)?;
            let sh = c.nodes[node].sh;
            let t = c.statement(
                Stmt::Prior(i),
                &p.dist,
                Src::Node(node),
                sh,
                1.0,
                &mut scratch,
            )?;
            terms.push(t);
        }
        for (j, o) in g.observations.iter().enumerate() {
            let power = powers[j];
            if power == 0.0 {
                continue;
            }
            let y = match &bound.data[o.data] {
                Value::Vector(_) | Value::Matrix(_) => Src::Data(o.data),
                Value::IntArray(k) => {
                    let v = k.iter().map(|&k| k as f64).collect::<Vec<_>>();
                    c.constant(Value::Vector(v.into()))
                }
                Value::Real(x) => c.constant(Value::Real(*x)),
                Value::Int(k) => c.constant(Value::Real(*k as f64)),
                _ => return Err(unsupported(o.span, "an outcome that is not numbers")),
            };
            let sh = c.shape(y);
            let t = c.statement(Stmt::Observation(j), &o.dist, y, sh, power, &mut scratch)?;
            terms.push(t);
        }
        Ok(c.finish(terms, scratch, Vec::new()))
    }

    /// Compile expressions of the params and the latent GP's values (an
    /// `estimate` block's integrands) to a program of no statements whose
    /// outputs are their values ([`DensityProgram::values`]); the layout
    /// as in [`DensityProgram::compile`].
    pub fn compile_values<'a>(
        bound: &'a Bound,
        hypers: &'a [Value<f64>],
        (offsets, shapes): (&'a [usize], &'a [(usize, usize)]),
        site: Option<(usize, usize, &'a TExpr)>,
        exprs: &[&TExpr],
    ) -> Result<DensityProgram, Error> {
        if offsets.len() != bound.graph.params.len() || shapes.len() != offsets.len() {
            return Err(Error::internal(
                "the compiled values' layout does not match their model",
            ));
        }
        let mut c = Compiler::new(bound, hypers, offsets, shapes, site);
        let outputs = exprs
            .iter()
            .map(|e| c.expr(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(c.finish(Vec::new(), 0, outputs))
    }
}

impl<'a> Compiler<'a> {
    fn new(
        bound: &'a Bound,
        hypers: &'a [Value<f64>],
        offsets: &'a [usize],
        shapes: &'a [(usize, usize)],
        site: Option<(usize, usize, &'a TExpr)>,
    ) -> Compiler<'a> {
        let g = &bound.graph;
        let mut c = Compiler {
            bound,
            env: Env::new(bound, hypers, &[], &[]),
            offsets,
            shapes,
            let_varies: Vec::with_capacity(g.lets.len()),
            lets: vec![None; g.lets.len()],
            params: vec![None; g.params.len()],
            site,
            site_node: None,
            nodes: Vec::new(),
            consts: Vec::new(),
            values: 0,
            guard: 0,
            largest: None,
        };
        for l in &g.lets {
            let v = c.varies(&l.value);
            c.let_varies.push(v);
        }
        c
    }

    fn finish(self, terms: Vec<TermNode>, scratch: usize, outputs: Vec<Src>) -> DensityProgram {
        let params = (0..self.params.len())
            .filter_map(|p| self.params[p].map(|node| (node, self.offsets[p])))
            .collect();
        let site = match self.site_node {
            Some(Src::Node(k)) => Some(k),
            _ => None,
        };
        DensityProgram {
            site,
            nodes: self.nodes,
            consts: self.consts,
            terms,
            params,
            outputs,
            values: self.values,
            scratch,
        }
    }
}

impl Compiler<'_> {
    /// Whether `e` depends on a param (through lets too).
    fn varies(&self, e: &TExpr) -> bool {
        let mut found = false;
        e.walk(&mut |x| {
            found |= match &x.kind {
                TKind::GpApply { .. } | TKind::Ref(Ref::Param(_)) => true,
                TKind::Ref(Ref::Let(i)) => self.let_varies.get(*i).copied().unwrap_or(true),
                _ => false,
            }
        });
        found
    }

    fn shape(&self, s: Src) -> Sh {
        match s {
            Src::Node(k) => self.nodes[k].sh,
            Src::Const(k) => shape_of(&self.consts[k]),
            Src::Data(i) => shape_of(&self.bound.data[i]),
        }
    }

    fn push(&mut self, op: Op, sh: Sh) -> Src {
        let len = sh.len();
        self.nodes.push(Node {
            op,
            off: self.values,
            sh,
            len,
            guarded: self.guard > 0,
        });
        self.values += len;
        Src::Node(self.nodes.len() - 1)
    }

    fn constant(&mut self, v: Value<f64>) -> Src {
        self.consts.push(v);
        Src::Const(self.consts.len() - 1)
    }

    /// The node of param p.
    fn param(&mut self, p: usize) -> Result<usize, Error> {
        if let Some(k) = self.params[p] {
            return Ok(k);
        }
        let x = self.offsets[p];
        let (op, sh) = match self.shapes[p] {
            (0, 0) => (Op::Param(x), Sh::One),
            (n, 0) => (Op::Param(x), Sh::Each(n)),
            (r, c) => (Op::ParamMat(x), Sh::Mat(r, c)),
        };
        let Src::Node(k) = self.push(op, sh) else {
            unreachable!()
        };
        self.params[p] = Some(k);
        Ok(k)
    }

    /// One sampling statement over the outcomes `y` of shape `y_sh`.
    fn statement(
        &mut self,
        stmt: Stmt,
        dist: &DistCall,
        y: Src,
        y_sh: Sh,
        power: f64,
        scratch: &mut usize,
    ) -> Result<TermNode, Error> {
        let outcome = matches!(stmt, Stmt::Prior(_));
        let mut args = Vec::with_capacity(dist.args.len());
        let mut arg_sh = Vec::with_capacity(dist.args.len());
        for e in &dist.args {
            let s = self.expr(e)?;
            arg_sh.push(self.shape(s));
            args.push(s);
        }
        let n = y_sh.len();
        // Each argument broadcast (a number) or one value per outcome; a
        // single matrix argument [N, C] of a vector of outcomes is class
        // scores. Anything else takes the general statement.
        let mut each = Vec::with_capacity(args.len());
        let mut cols = 0;
        let mut prepared = true;
        for &sh in &arg_sh {
            match sh {
                Sh::One => each.push(false),
                s if s == y_sh || (matches!(s, Sh::Each(m) if m == n) && y_sh == Sh::One) => {
                    each.push(true)
                }
                Sh::Mat(r, c)
                    if r == n
                        && args.len() == 1
                        && !matches!(y_sh, Sh::Mat(..))
                        && matches!(
                            dist.dist,
                            crate::graph::DistRef::Builtin(
                                tempest_model::dist::Dist::CategoricalLogit
                            )
                        ) =>
                {
                    cols = c;
                    each.push(true)
                }
                _ => {
                    prepared = false;
                    each.push(true)
                }
            }
        }
        let varies: Vec<bool> = args.iter().map(|s| matches!(s, Src::Node(_))).collect();
        let graph = self.bound.graph.clone();
        let term = if prepared {
            Term::new(&graph, dist, varies, &each, outcome, (n, cols))
        } else {
            None
        };
        let (way, len) = match term {
            Some(t) => {
                let len = t.scratch_len();
                (Way::Term(t), len)
            }
            None => (Way::General(stmt), 0),
        };
        let node = TermNode {
            way,
            y,
            args,
            power,
            observation: !outcome,
            outcome,
            scratch: *scratch,
        };
        *scratch += len;
        Ok(node)
    }

    /// A constant operand: a data item in place, or the value computed now
    /// (integers as numbers).
    fn fold(&mut self, e: &TExpr) -> Result<Src, Error> {
        if let TKind::Ref(Ref::Data(i)) = &e.kind
            && self.bound.present[*i]
            && !matches!(self.bound.data[*i], Value::IntArray(_))
        {
            return Ok(Src::Data(*i));
        }
        let v = match self.env.eval(e)? {
            Value::IntArray(k) => {
                Value::Vector(k.iter().map(|&k| k as f64).collect::<Vec<_>>().into())
            }
            v => v,
        };
        Ok(self.constant(v))
    }

    fn expr(&mut self, e: &TExpr) -> Result<Src, Error> {
        let before = self.nodes.len();
        let s = tempest_core::limits::deep(|| self.expr_inner(e))?;
        if let Src::Node(k) = s
            && k >= before
        {
            let len = self.nodes[k].len;
            if self.largest.is_none_or(|(n, _)| len > n) {
                self.largest = Some((len, e.span));
            }
            self.room(e.span)?;
        }
        Ok(s)
    }

    /// The program's values and adjoints so far (two numbers per entry),
    /// checked against the memory there is before the workspace is made;
    /// a refusal names the expression with the largest value.
    fn room(&self, span: Span) -> Result<(), Error> {
        self.room_for(0, 1, span)
    }

    /// [`Compiler::room`] with a value of `rows × cols` more.
    fn room_for(&self, rows: usize, cols: usize, span: Span) -> Result<(), Error> {
        let more = (rows as u128).saturating_mul(cols as u128);
        let request = tempest_core::limits::Request::new(
            "the compiled log density's values and their adjoints",
        )
        .times("numbers", (self.values as u128).saturating_add(more))
        .times("(value, adjoint)", 2u64);
        tempest_core::limits::check_memory(&[request]).map_err(|e| {
            let at = match self.largest {
                Some((n, s)) if (n as u128) >= more => s,
                _ => span,
            };
            e.with_span(at).with_label("the largest value")
        })
    }

    fn expr_inner(&mut self, e: &TExpr) -> Result<Src, Error> {
        if !self.varies(e) {
            return self.fold(e);
        }
        match &e.kind {
            TKind::Ref(Ref::Param(p)) => self.param(*p).map(Src::Node),
            TKind::GpApply { site: 0, .. } => self.site(e),
            TKind::Ref(Ref::Let(i)) => {
                if let Some(s) = self.lets[*i] {
                    return Ok(s);
                }
                let g = self.bound.graph.clone();
                let s = self.expr(&g.lets[*i].value)?;
                self.lets[*i] = Some(s);
                Ok(s)
            }
            TKind::Unary(UnOp::Neg, a) => {
                let a = self.expr(a)?;
                let sh = self.numeric(a, e.span)?;
                Ok(self.push(Op::Elem(Inst::Neg(0), [a; 3]), sh))
            }
            TKind::Unary(UnOp::Not, a) => {
                let a = self.expr(a)?;
                self.scalar(a, e.span, "`!`")?;
                Ok(self.push(Op::Elem(Inst::Not(0), [a; 3]), Sh::One))
            }
            TKind::Binary(op, a, b) => self.binary(*op, a, b, e.span),
            TKind::Builtin(f, args) => self.builtin(*f, args, e),
            TKind::Index(base, idx) => self.index(base, idx, e.span),
            TKind::If(c, a, b) => self.branch(c, a, b, e.span),
            TKind::Array(xs) => {
                let mut srcs = Vec::with_capacity(xs.len());
                for x in xs {
                    srcs.push(self.expr(x)?);
                }
                let first = srcs.first().map(|s| self.shape(*s));
                match first {
                    Some(Sh::One) if srcs.iter().all(|s| self.shape(*s) == Sh::One) => {
                        let n = srcs.len();
                        Ok(self.push(Op::Array(srcs), Sh::Each(n)))
                    }
                    Some(Sh::Each(c)) if srcs.iter().all(|s| self.shape(*s) == Sh::Each(c)) => {
                        let n = srcs.len();
                        Ok(self.push(Op::Stack(srcs), Sh::Mat(n, c)))
                    }
                    _ => Err(unsupported(e.span, "this array")),
                }
            }
            TKind::Ode {
                system,
                args,
                settings,
            } => {
                let mut srcs = Vec::with_capacity(args.len());
                for a in args {
                    srcs.push(self.expr(a)?);
                }
                let (Some(&x0), Some(&ts)) = (srcs.first(), srcs.get(2)) else {
                    return Err(unsupported(e.span, "this ODE"));
                };
                let rows = match self.shape(ts) {
                    Sh::Each(t) => t,
                    Sh::One => 1,
                    _ => return Err(unsupported(args[2].span, "these output times")),
                };
                let Sh::Each(states) = self.shape(x0) else {
                    return Err(unsupported(args[0].span, "this initial state"));
                };
                let call = OdeCall {
                    system: *system,
                    exprs: args.clone(),
                    varying: srcs.iter().map(|x| matches!(x, Src::Node(_))).collect(),
                    args: srcs,
                    settings: *settings,
                    span: e.span,
                    record_fits: Default::default(),
                };
                Ok(self.push(Op::Ode(Box::new(call)), Sh::Mat(rows, states)))
            }
            _ => Err(unsupported(e.span, "this expression")),
        }
    }

    /// The latent GP's values at its training inputs.
    fn site(&mut self, e: &TExpr) -> Result<Src, Error> {
        if let Some(s) = self.site_node {
            return Ok(s);
        }
        let Some((n, classes, mean)) = self.site else {
            return Err(Error::at(
                ErrorKind::Unsupported,
                e.span,
                "this GP is integrated out of its Gaussian likelihood when sampling, so its values are not drawn and nothing else can read them",
            )
            .with_label("the GP's values"));
        };
        let mu = self.expr(mean)?;
        self.scalar(mu, mean.span, "the GP's mean")?;
        let sh = match classes {
            0 => return Err(unsupported(e.span, "a GP with no copies")),
            1 => Sh::Each(n),
            c => Sh::Mat(n, c),
        };
        let s = self.push(Op::Site(mu), sh);
        self.site_node = Some(s);
        Ok(s)
    }

    /// The shape of an operand of element-wise arithmetic.
    fn numeric(&self, s: Src, span: Span) -> Result<Sh, Error> {
        match self.shape(s) {
            Sh::Other => Err(unsupported(span, "a value that is not numbers")),
            sh => Ok(sh),
        }
    }

    fn scalar(&self, s: Src, span: Span, what: &str) -> Result<(), Error> {
        match self.shape(s) {
            Sh::One => Ok(()),
            sh => Err(shapes(span, what, Sh::One, sh)),
        }
    }

    fn binary(&mut self, op: BinOp, a: &TExpr, b: &TExpr, span: Span) -> Result<Src, Error> {
        let (sa, sb) = (self.expr(a)?, self.expr(b)?);
        let (ha, hb) = (self.numeric(sa, a.span)?, self.numeric(sb, b.span)?);
        let eop = match op {
            BinOp::Add | BinOp::Sub | BinOp::Pow => op,
            BinOp::Mul | BinOp::EwMul => BinOp::Mul,
            BinOp::Div | BinOp::EwDiv => BinOp::Div,
            _ => {
                if ha != Sh::One || hb != Sh::One {
                    return Err(shapes(span, "a comparison", ha, hb));
                }
                return Ok(self.push(Op::Elem(Inst::Bin(op, 0, 1), [sa, sb, sa]), Sh::One));
            }
        };
        if op == BinOp::Mul && matches!(a.ty, Ty::Matrix(..)) {
            match (ha, hb) {
                (Sh::Mat(r, k), Sh::Each(m)) if k == m => {
                    return Ok(self.push(Op::MatVec(sa, sb), Sh::Each(r)));
                }
                (Sh::Mat(r, k), Sh::Mat(m, c)) if k == m => {
                    return Ok(self.push(Op::MatMul(sa, sb), Sh::Mat(r, c)));
                }
                (Sh::Mat(..), Sh::One) => {}
                _ => return Err(shapes(span, "a matrix product", ha, hb)),
            }
        }
        self.elementwise(eop, sa, sb, span)
    }

    /// a ∘ b element-wise: a number broadcast, or two operands of one shape.
    fn elementwise(&mut self, op: BinOp, sa: Src, sb: Src, span: Span) -> Result<Src, Error> {
        let (ha, hb) = (self.numeric(sa, span)?, self.numeric(sb, span)?);
        let sh = match (ha, hb) {
            (Sh::One, h) | (h, Sh::One) => h,
            (x, y) if x == y => x,
            _ => return Err(shapes(span, "element-wise arithmetic", ha, hb)),
        };
        Ok(self.push(Op::Elem(Inst::Bin(op, 0, 1), [sa, sb, sa]), sh))
    }

    fn builtin(&mut self, f: Builtin, args: &[TExpr], e: &TExpr) -> Result<Src, Error> {
        use Builtin::*;
        let span = e.span;
        match (f, args) {
            (f, [a]) if f.is_elementwise() => {
                let a = self.expr(a)?;
                let sh = self.numeric(a, span)?;
                Ok(self.push(Op::Elem(Inst::Call(f, 0), [a; 3]), sh))
            }
            (Sum | Mean | Logsumexp, [a]) => {
                let s = self.expr(a)?;
                let n = match self.shape(s) {
                    Sh::Each(n) => n,
                    Sh::Mat(r, c) => r * c,
                    _ => return Err(unsupported(span, "this reduction of a number")),
                };
                let op = match f {
                    Sum => Op::Sum(s),
                    Mean if n > 0 => Op::Mean(s),
                    Logsumexp if n > 0 => Op::Logsumexp(s),
                    _ => return Err(unsupported(span, "a mean or logsumexp of nothing")),
                };
                Ok(self.push(op, Sh::One))
            }
            (Dot | Sqdist, [a, b]) => {
                let (sa, sb) = (self.expr(a)?, self.expr(b)?);
                let (ha, hb) = (self.shape(sa), self.shape(sb));
                match (ha, hb) {
                    (Sh::Each(n), Sh::Each(m)) if n == m => {
                        let op = if f == Dot {
                            Op::Dot(sa, sb)
                        } else {
                            Op::Sqdist(sa, sb)
                        };
                        Ok(self.push(op, Sh::One))
                    }
                    _ => Err(shapes(span, "a dot product", ha, hb)),
                }
            }
            (Pow, [a, b]) => {
                let (sa, sb) = (self.expr(a)?, self.expr(b)?);
                self.elementwise(BinOp::Pow, sa, sb, span)
            }
            // Sizes depend on shapes alone.
            (Rows | Cols, [m]) => {
                let s = self.expr(m)?;
                let (r, c) = match self.shape(s) {
                    Sh::Mat(r, c) => (r, c),
                    Sh::Each(n) => (n, 1),
                    _ => return Err(unsupported(span, &format!("`{}` of this value", f.name()))),
                };
                let n = if f == Rows { r } else { c };
                Ok(self.constant(Value::Real(n as f64)))
            }
            (Col, [m, j]) => {
                let s = self.expr(m)?;
                let Sh::Mat(r, c) = self.shape(s) else {
                    return Err(unsupported(m.span, "a column of this value"));
                };
                let j = self.int(j)?;
                let j = self.position(j, c, "column", args[1].span)?;
                let ks: Vec<i64> = (j * r..(j + 1) * r).map(|k| k as i64).collect();
                Ok(self.gather(s, ks, Sh::Each(r)))
            }
            _ => Err(unsupported(span, &format!("`{}`", f.name()))),
        }
    }

    /// The value of a constant integer expression.
    fn int(&self, e: &TExpr) -> Result<i64, Error> {
        match self.env.eval(e)? {
            Value::Int(i) => Ok(i),
            _ => Err(unsupported(e.span, "an index that is not an integer")),
        }
    }

    /// Index i checked against a size n.
    fn position(&self, i: i64, n: usize, what: &str, span: Span) -> Result<usize, Error> {
        if i < 0 || i as usize >= n {
            return Err(Error::at(
                ErrorKind::Shape,
                span,
                format!("{what} {i} is out of range (valid: 0..{})", n as i64 - 1),
            )
            .with_label("here"));
        }
        Ok(i as usize)
    }

    fn gather(&mut self, s: Src, ks: Vec<i64>, sh: Sh) -> Src {
        // `ks` has as many entries as the node it makes (checked with it,
        // by `expr`).
        let k = self.consts.len();
        self.consts.push(Value::IntArray(ks));
        self.push(Op::Gather(s, Src::Const(k)), sh)
    }

    /// `base[idx]` with constant indices: an entry, a row, a gather of
    /// entries or rows.
    fn index(&mut self, base: &TExpr, idx: &[TExpr], span: Span) -> Result<Src, Error> {
        if idx.iter().any(|i| self.varies(i)) {
            return Err(unsupported(span, "an index that depends on a param"));
        }
        let b = self.expr(base)?;
        let sh = self.shape(b);
        let vals = idx
            .iter()
            .map(|i| self.env.eval(i))
            .collect::<Result<Vec<_>, _>>()?;
        match (sh, vals.as_slice()) {
            (Sh::Each(n), [Value::Int(i)]) => {
                let i = self.position(*i, n, "index", idx[0].span)?;
                Ok(self.push(Op::Index(b, i), Sh::One))
            }
            (Sh::Each(n), [Value::IntArray(ks)]) => {
                for &k in ks {
                    self.position(k, n, "index", idx[0].span)?;
                }
                let len = ks.len();
                Ok(self.gather(b, ks.clone(), Sh::Each(len)))
            }
            (Sh::Mat(r, c), [Value::Int(i)]) => {
                let i = self.position(*i, r, "row", idx[0].span)?;
                let ks = (0..c).map(|j| (j * r + i) as i64).collect();
                Ok(self.gather(b, ks, Sh::Each(c)))
            }
            (Sh::Mat(r, c), [Value::Int(i), Value::Int(j)]) => {
                let i = self.position(*i, r, "row", idx[0].span)?;
                let j = self.position(*j, c, "column", idx[1].span)?;
                Ok(self.push(Op::Index(b, j * r + i), Sh::One))
            }
            (Sh::Mat(r, c), [Value::IntArray(ks)]) => {
                for &k in ks {
                    self.position(k, r, "row", idx[0].span)?;
                }
                let m = ks.len();
                self.room_for(m, c, span)?;
                let pos = (0..c)
                    .flat_map(|j| ks.iter().map(move |&k| (j * r) as i64 + k))
                    .collect();
                Ok(self.gather(b, pos, Sh::Mat(m, c)))
            }
            _ => Err(unsupported(span, "this index")),
        }
    }

    /// `if c then a else b`: the branch taken when c is constant, else a
    /// selection at each run between both branches.
    fn branch(&mut self, c: &TExpr, a: &TExpr, b: &TExpr, span: Span) -> Result<Src, Error> {
        if !self.varies(c) {
            return match self.env.eval(c)? {
                Value::Bool(taken) => self.expr(if taken { a } else { b }),
                _ => Err(unsupported(c.span, "a condition that is not true or false")),
            };
        }
        let sc = self.expr(c)?;
        self.scalar(sc, c.span, "a condition")?;
        self.guard += 1;
        let branches = (|| Ok::<_, Error>((self.expr(a)?, self.expr(b)?)))();
        self.guard -= 1;
        let (sa, sb) = branches?;
        let (ha, hb) = (self.numeric(sa, a.span)?, self.numeric(sb, b.span)?);
        if ha != hb {
            return Err(shapes(span, "the branches of `if`", ha, hb));
        }
        Ok(self.push(Op::Elem(Inst::Select(0, 1, 2), [sc, sa, sb]), ha))
    }
}
