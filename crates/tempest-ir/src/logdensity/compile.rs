//! Lowering a bound model's lets, priors and observations to a
//! [`DensityProgram`].

use super::{DensityProgram, EOp, Node, Op, Src, TermNode};
use crate::bind::Bound;
use crate::eval::Env;
use crate::expr::{Builtin, Ref, TExpr, TKind};
use crate::pointwise::term::Term;
use crate::types::Ty;
use crate::value::Value;
use tempest_syntax::ast::{BinOp, UnOp};

/// The shape of an operand.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sh {
    /// A number.
    One,
    /// A vector of N.
    Each(usize),
    /// A matrix [R, C].
    Mat(usize, usize),
    /// An integer array of N.
    Ints(usize),
    /// Anything else.
    Other,
}

fn shape_of(v: &Value<f64>) -> Sh {
    match v {
        Value::Real(_) | Value::Int(_) => Sh::One,
        Value::Vector(x) => Sh::Each(x.len()),
        Value::Matrix(m) => Sh::Mat(m.nrows(), m.ncols()),
        Value::IntArray(k) => Sh::Ints(k.len()),
        _ => Sh::Other,
    }
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
}

impl DensityProgram {
    /// Compile the log density of `bound` at the hypers' values `hypers`,
    /// with param p's values at entries `offsets[p]..` of the params'
    /// values and of shape `shapes[p]` ((0, 0) a number, (n, 0) a vector);
    /// `powers[j]` is observation j's power as written in the model (an
    /// observation of power 0 is left out). `site` is the latent GP sampled
    /// in whitened form, if the model has one: its points N, its copies C
    /// (classes) and its mean (a number). `None` when the model has a construct the program does
    /// not cover (see the module's text).
    pub fn compile<'a>(
        bound: &'a Bound,
        hypers: &'a [Value<f64>],
        offsets: &'a [usize],
        shapes: &'a [(usize, usize)],
        powers: &[f64],
        site: Option<(usize, usize, &'a TExpr)>,
    ) -> Option<DensityProgram> {
        let g = bound.graph.clone();
        if g.sites.len() > 1
            || g.sites.len() != usize::from(site.is_some())
            || offsets.len() != g.params.len()
            || shapes.len() != offsets.len()
        {
            return None;
        }
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
        };
        for l in &g.lets {
            let v = c.varies(&l.value);
            c.let_varies.push(v);
        }
        let mut terms = Vec::new();
        let mut scratch = 0;
        for p in &g.priors {
            let node = c.param(p.param)?;
            let n = c.nodes[node].len;
            let (args, each, varies) = c.args(&p.dist.args, n)?;
            let cols = c.cols(&args);
            let term = Term::new(&g, &p.dist, varies, &each, true, (n, cols))?;
            let len = term.scratch_len();
            terms.push(TermNode {
                term,
                y: Src::Node(node),
                args,
                power: 1.0,
                observation: false,
                scratch,
            });
            scratch += len;
        }
        for (j, o) in g.observations.iter().enumerate() {
            let power = *powers.get(j)?;
            if power == 0.0 {
                continue;
            }
            let (y, n) = match bound.data.get(o.data)? {
                Value::Vector(v) if bound.present[o.data] => (Src::Data(o.data), v.len()),
                Value::IntArray(k) => {
                    let v = k.iter().map(|&k| k as f64).collect::<Vec<_>>();
                    (c.constant(Value::Vector(v.into())), k.len())
                }
                Value::Real(x) => (c.constant(Value::Real(*x)), 1),
                Value::Int(k) => (c.constant(Value::Real(*k as f64)), 1),
                _ => return None,
            };
            let (args, each, varies) = c.args(&o.dist.args, n)?;
            let cols = c.cols(&args);
            let term = Term::new(&g, &o.dist, varies, &each, false, (n, cols))?;
            let len = term.scratch_len();
            terms.push(TermNode {
                term,
                y,
                args,
                power,
                observation: true,
                scratch,
            });
            scratch += len;
        }
        let params = (0..g.params.len())
            .filter_map(|p| c.params[p].map(|node| (node, offsets[p])))
            .collect();
        let site = match c.site_node {
            Some(Src::Node(k)) => Some(k),
            _ => None,
        };
        Some(DensityProgram {
            site,
            nodes: c.nodes,
            consts: c.consts,
            terms,
            params,
            values: c.values,
            scratch,
        })
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
            Src::Node(k) => {
                let n = &self.nodes[k];
                if n.scalar {
                    Sh::One
                } else if let Some(rows) = n.len.checked_div(n.cols) {
                    Sh::Mat(rows, n.cols)
                } else {
                    Sh::Each(n.len)
                }
            }
            Src::Const(k) => shape_of(&self.consts[k]),
            Src::Data(i) => shape_of(&self.bound.data[i]),
        }
    }

    /// The length and number-ness of an element-wise operand.
    fn elem(&self, s: Src) -> Option<(usize, bool)> {
        match self.shape(s) {
            Sh::One => Some((1, true)),
            Sh::Each(n) => Some((n, false)),
            _ => None,
        }
    }

    fn push(&mut self, op: Op, len: usize, scalar: bool) -> Src {
        self.push_shaped(op, len, scalar, 0)
    }

    fn push_shaped(&mut self, op: Op, len: usize, scalar: bool, cols: usize) -> Src {
        self.nodes.push(Node {
            op,
            off: self.values,
            len,
            scalar,
            cols,
        });
        self.values += len;
        Src::Node(self.nodes.len() - 1)
    }

    fn constant(&mut self, v: Value<f64>) -> Src {
        self.consts.push(v);
        Src::Const(self.consts.len() - 1)
    }

    /// The node of param p.
    fn param(&mut self, p: usize) -> Option<usize> {
        if let Some(k) = self.params[p] {
            return Some(k);
        }
        let (len, scalar) = match self.shapes[p] {
            (0, 0) => (1, true),
            (n, 0) => (n, false),
            _ => return None,
        };
        let Src::Node(k) = self.push(Op::Param(self.offsets[p]), len, scalar) else {
            unreachable!()
        };
        self.params[p] = Some(k);
        Some(k)
    }

    /// A statement's arguments over `n` outcomes: their sources, whether
    /// each holds one value per outcome, and whether each varies.
    #[allow(clippy::type_complexity)]
    fn args(&mut self, es: &[TExpr], n: usize) -> Option<(Vec<Src>, Vec<bool>, Vec<bool>)> {
        let mut srcs = Vec::with_capacity(es.len());
        let mut each = Vec::with_capacity(es.len());
        for e in es {
            let s = self.expr(e)?;
            match self.shape(s) {
                Sh::One => each.push(false),
                Sh::Each(m) if m == n => each.push(true),
                // Class scores, one row per outcome (`categorical_logit`).
                Sh::Mat(r, _) if r == n && es.len() == 1 => each.push(true),
                _ => return None,
            }
            srcs.push(s);
        }
        let varies = srcs.iter().map(|s| matches!(s, Src::Node(_))).collect();
        Some((srcs, each, varies))
    }

    /// The columns of a statement's one matrix argument (class scores), or
    /// 0 when its arguments are numbers and vectors.
    fn cols(&self, args: &[Src]) -> usize {
        match args {
            [a] => match self.shape(*a) {
                Sh::Mat(_, c) => c,
                _ => 0,
            },
            _ => 0,
        }
    }

    /// A constant operand: a data item in place, or the value computed now.
    fn fold(&mut self, e: &TExpr) -> Option<Src> {
        if let TKind::Ref(Ref::Data(i)) = &e.kind
            && self.bound.present[*i]
        {
            return Some(Src::Data(*i));
        }
        let v = self.env.eval(e).ok()?;
        Some(self.constant(v))
    }

    fn expr(&mut self, e: &TExpr) -> Option<Src> {
        tempest_core::limits::deep(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &TExpr) -> Option<Src> {
        if !self.varies(e) {
            return self.fold(e);
        }
        match &e.kind {
            TKind::Ref(Ref::Param(p)) => self.param(*p).map(Src::Node),
            TKind::GpApply { site: 0, .. } => {
                if let Some(s) = self.site_node {
                    return Some(s);
                }
                let (n, classes, mean) = self.site?;
                let mu = self.expr(mean)?;
                if self.shape(mu) != Sh::One || classes == 0 {
                    return None;
                }
                let cols = if classes > 1 { classes } else { 0 };
                let s = self.push_shaped(Op::Site(mu), n * classes, false, cols);
                self.site_node = Some(s);
                Some(s)
            }
            TKind::Ref(Ref::Let(i)) => {
                if let Some(s) = self.lets[*i] {
                    return Some(s);
                }
                let g = self.bound.graph.clone();
                let s = self.expr(&g.lets[*i].value)?;
                self.lets[*i] = Some(s);
                Some(s)
            }
            TKind::Unary(UnOp::Neg, a) => {
                let a = self.expr(a)?;
                let (len, scalar) = self.elem(a)?;
                Some(self.push(Op::Neg(a), len, scalar))
            }
            TKind::Binary(op, a, b) => self.binary(*op, a, b),
            TKind::Builtin(f, args) => self.builtin(*f, args),
            TKind::Index(base, idx) if idx.len() == 1 && !self.varies(&idx[0]) => {
                let b = self.expr(base)?;
                let Sh::Each(n) = self.shape(b) else {
                    return None;
                };
                match self.env.eval(&idx[0]).ok()? {
                    Value::Int(i) if i >= 0 && (i as usize) < n => {
                        Some(self.push(Op::Index(b, i as usize), 1, true))
                    }
                    Value::IntArray(ks) if ks.iter().all(|&k| k >= 0 && (k as usize) < n) => {
                        let len = ks.len();
                        let k = self.constant(Value::IntArray(ks));
                        Some(self.push(Op::Gather(b, k), len, false))
                    }
                    _ => None,
                }
            }
            TKind::If(c, a, b) if !self.varies(c) => match self.env.eval(c).ok()? {
                Value::Bool(taken) => self.expr(if taken { a } else { b }),
                _ => None,
            },
            TKind::Array(xs) => {
                let mut srcs = Vec::with_capacity(xs.len());
                for x in xs {
                    let s = self.expr(x)?;
                    if self.shape(s) != Sh::One {
                        return None;
                    }
                    srcs.push(s);
                }
                let len = srcs.len();
                Some(self.push(Op::Array(srcs), len, false))
            }
            _ => None,
        }
    }

    fn binary(&mut self, op: BinOp, a: &TExpr, b: &TExpr) -> Option<Src> {
        let eop = match op {
            BinOp::Add => EOp::Add,
            BinOp::Sub => EOp::Sub,
            BinOp::Mul | BinOp::EwMul => EOp::Mul,
            BinOp::Div | BinOp::EwDiv => EOp::Div,
            BinOp::Pow => EOp::Pow,
            _ => return None,
        };
        if op == BinOp::Mul && matches!(a.ty, Ty::Matrix(..)) {
            if !matches!(b.ty, Ty::Vector(_)) {
                return None;
            }
            let (sa, sb) = (self.expr(a)?, self.expr(b)?);
            if matches!(sa, Src::Node(_)) {
                return None;
            }
            let (Sh::Mat(r, k), Sh::Each(m)) = (self.shape(sa), self.shape(sb)) else {
                return None;
            };
            if k != m {
                return None;
            }
            return Some(self.push(Op::MatVec(sa, sb), r, false));
        }
        self.elementwise(eop, a, b)
    }

    /// a ∘ b element-wise: two numbers, a number and a vector, or two
    /// vectors of one length.
    fn elementwise(&mut self, eop: EOp, a: &TExpr, b: &TExpr) -> Option<Src> {
        let (sa, sb) = (self.expr(a)?, self.expr(b)?);
        let ((na, one_a), (nb, one_b)) = (self.elem(sa)?, self.elem(sb)?);
        let (len, scalar) = match (one_a, one_b) {
            (true, true) => (1, true),
            (true, false) => (nb, false),
            (false, true) => (na, false),
            (false, false) if na == nb => (na, false),
            _ => return None,
        };
        Some(self.push(Op::Bin(eop, sa, sb), len, scalar))
    }

    fn builtin(&mut self, f: Builtin, args: &[TExpr]) -> Option<Src> {
        use Builtin::*;
        match (f, args) {
            (f, [a]) if f.is_elementwise() => {
                let a = self.expr(a)?;
                let (len, scalar) = self.elem(a)?;
                Some(self.push(Op::Unary(f, a), len, scalar))
            }
            (Sum | Mean | Logsumexp, [a]) => {
                let a = self.expr(a)?;
                let Sh::Each(n) = self.shape(a) else {
                    return None;
                };
                let op = match f {
                    Sum => Op::Sum(a),
                    Mean if n > 0 => Op::Mean(a),
                    Logsumexp if n > 0 => Op::Logsumexp(a),
                    _ => return None,
                };
                Some(self.push(op, 1, true))
            }
            (Dot, [a, b]) => {
                let (sa, sb) = (self.expr(a)?, self.expr(b)?);
                match (self.shape(sa), self.shape(sb)) {
                    (Sh::Each(n), Sh::Each(m)) if n == m => {
                        Some(self.push(Op::Dot(sa, sb), 1, true))
                    }
                    _ => None,
                }
            }
            (Pow, [a, b]) => self.elementwise(EOp::Pow, a, b),
            _ => None,
        }
    }
}
