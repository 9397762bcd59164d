//! Checking declared types and the `data`, `hyper` and `param` blocks.

use super::Checker;
use super::scope::{Context, Symbol};
use tempest_core::error::{Error, ErrorKind};
use tempest_ir::expr::{Ref, TExpr, TKind};
use tempest_ir::graph::{
    BoundExprs, DataNode, DataSource, DistRef, HyperNode, ParamNode, PriorNode,
};
use tempest_ir::types::{Size, Ty};
use tempest_syntax::ast::{BaseType, BoundKind, Decl, Expr, ExprKind, Ident, TypeExpr};

impl Checker<'_> {
    /// Declare a global name, reporting a duplicate.
    pub(super) fn declare(&mut self, name: &Ident, sym: Symbol) -> bool {
        if let Some(prev) = self.scope.globals.get(&name.name) {
            let what = prev.describe();
            let prev_span = prev.span();
            self.error(
                Error::at(
                    ErrorKind::Name,
                    name.span,
                    format!("`{}` is declared twice", name.name),
                )
                .with_label("second declaration")
                .with_secondary(prev_span, format!("first declared here as {what}")),
            );
            return false;
        }
        self.scope.globals.insert(name.name.clone(), sym);
        true
    }

    /// A size in a type: an integer literal or an `int` data declaration;
    /// in a function's signature also a name of its own (`kernel
    /// ard(ells : vector[d])`), a length fixed afresh at each use.
    fn size(&mut self, e: &Expr, ctx: Context) -> Size {
        match &e.kind {
            ExprKind::Int(i) if *i >= 0 => Size::Lit(*i as usize),
            ExprKind::Var(name)
                if ctx == Context::Function && !self.scope.globals.contains_key(name) =>
            {
                Size::Any
            }
            ExprKind::Var(name) => match self.scope.globals.get(name) {
                Some(Symbol::Value {
                    r: Ref::Data(_),
                    ty: Ty::Int,
                    ..
                }) => Size::Sym(name.clone()),
                Some(s) => {
                    let what = s.describe();
                    let span = s.span();
                    self.error(
                        Error::at(ErrorKind::Type, e.span, format!("`{name}` cannot be a size: it is {what}"))
                            .with_label("not an int data declaration")
                            .with_secondary(span, "declared here")
                            .with_note("a size must be an integer literal or the name of an `int` declared in `data`"),
                    );
                    Size::Any
                }
                None => {
                    let hint = self.scope.suggest(name, &[]);
                    let mut err = Error::at(ErrorKind::Name, e.span, format!("unknown size `{name}`"))
                        .with_label("not declared")
                        .with_note("a size must be an integer literal or the name of an `int` declared earlier in `data`");
                    if let Some(h) = hint {
                        err = err.with_note(format!("did you mean `{h}`?"));
                    }
                    self.error(err);
                    Size::Any
                }
            },
            _ => {
                self.error(
                    Error::at(ErrorKind::Type, e.span, "a size must be an integer literal or the name of an `int` declared in `data`")
                        .with_label("not a size"),
                );
                Size::Any
            }
        }
    }

    /// Check a declared type; `ctx` decides what bounds may use.
    pub(super) fn type_expr(&mut self, t: &TypeExpr, ctx: Context) -> (Ty, BoundExprs) {
        let mut bounds = BoundExprs::default();
        let sugar = match t.base {
            BaseType::Positive => Some((Some(0.0), None, "positive")),
            BaseType::Unit => Some((Some(0.0), Some(1.0), "unit")),
            _ => None,
        };
        // `positive<upper=b>` adds an upper bound; any other bound on a
        // sugared type repeats one it already has.
        let extra_ok = |b: &tempest_syntax::ast::Bound| {
            t.base == BaseType::Positive && b.kind == BoundKind::Upper
        };
        if let Some((lo, hi, name)) = sugar {
            if let Some(bad) = t.bounds.iter().find(|b| !extra_ok(b)) {
                self.error(
                    Error::at(
                        ErrorKind::Constraint,
                        bad.span,
                        format!("`{name}` already has bounds"),
                    )
                    .with_label("extra bound")
                    .with_note(format!(
                        "`{name}` means `real<lower=0{}>`",
                        if hi.is_some() { ", upper=1" } else { "" }
                    )),
                );
            }
            let lit = |v: f64| TExpr::new(TKind::Real(v), Ty::Real, t.span);
            bounds.lower = lo.map(lit);
            bounds.upper = hi.map(lit);
        }
        let explicit: Vec<&tempest_syntax::ast::Bound> = if sugar.is_some() {
            t.bounds.iter().filter(|b| extra_ok(b)).collect()
        } else {
            t.bounds.iter().collect()
        };
        for b in explicit {
            let e = self.expr(&b.value, ctx);
            if !e.ty.is_scalar() {
                self.error(
                    Error::at(
                        ErrorKind::Constraint,
                        b.value.span,
                        format!("a bound must be a number, found {}", e.ty),
                    )
                    .with_label("not a number"),
                );
            }
            let slot = match b.kind {
                BoundKind::Lower => &mut bounds.lower,
                BoundKind::Upper => &mut bounds.upper,
            };
            if slot.is_some() {
                self.error(
                    Error::at(ErrorKind::Constraint, b.span, "this bound is given twice")
                        .with_label("repeated bound"),
                );
            }
            *slot = Some(e);
        }
        let dims: Vec<Size> = t.dims.iter().map(|d| self.size(d, ctx)).collect();
        let wrong_dims = |c: &mut Self, want: &str| {
            c.error(
                Error::at(
                    ErrorKind::Type,
                    t.span,
                    format!("wrong number of dimensions: expected {want}"),
                )
                .with_label("here"),
            );
            Ty::Unknown
        };
        let ty = match (t.base, dims.len()) {
            (BaseType::Int, 0) => Ty::Int,
            (BaseType::Int, 1) => Ty::IntArray(dims[0].clone()),
            (BaseType::Int, _) => wrong_dims(self, "`int` or `int[n]`"),
            (BaseType::Real | BaseType::Positive | BaseType::Unit, 0) => Ty::Real,
            (BaseType::Real | BaseType::Positive | BaseType::Unit | BaseType::Vector, 1) => {
                Ty::Vector(dims[0].clone())
            }
            (BaseType::Real | BaseType::Positive | BaseType::Unit, _) => {
                wrong_dims(self, "a scalar or one length, e.g. `positive[d]`")
            }
            (BaseType::Vector, _) => wrong_dims(self, "one length, e.g. `vector[n]`"),
            (BaseType::Matrix, 2) => Ty::Matrix(dims[0].clone(), dims[1].clone()),
            (BaseType::Matrix, _) => wrong_dims(self, "rows and columns, e.g. `matrix[n, d]`"),
        };
        (ty, bounds)
    }

    /// The `data` block.
    pub(super) fn data_block(&mut self, decls: &[Decl]) {
        for d in decls {
            let (ty, bounds) = self.type_expr(&d.ty, Context::Data);
            if d.fixed || d.prior.is_some() {
                self.error(
                    Error::at(
                        ErrorKind::Syntax,
                        d.span,
                        "data declarations take no `fixed` or prior",
                    )
                    .with_label("here"),
                );
            }
            let init = match &d.init {
                None => DataInit::by_name(DataSource::ByName),
                Some(init) => self.data_init(init, &ty),
            };
            let index = self.graph.data.len();
            self.graph.data.push(DataNode {
                name: d.name.name.clone(),
                ty: ty.clone(),
                bounds,
                source: init.source,
                value: init.value,
                levels: init.levels,
                ids: init.ids,
                span: d.span,
            });
            self.declare(
                &d.name,
                Symbol::Value {
                    r: Ref::Data(index),
                    ty,
                    span: d.span,
                },
            );
        }
    }

    /// `= columns(...)`, `= column("name")` (with `levels = [...]` for an
    /// int array of class labels) or a constant.
    fn data_init(&mut self, init: &Expr, ty: &Ty) -> DataInit {
        if let ExprKind::Call(callee, args) = &init.kind
            && (callee.name == "columns" || callee.name == "column")
        {
            let mut names = Vec::new();
            let mut except = Vec::new();
            let mut levels: Option<Vec<String>> = None;
            let mut ids: Option<TExpr> = None;
            for a in args {
                let target = match &a.name {
                    None => &mut names,
                    Some(n) if n.name == "except" && callee.name == "columns" => &mut except,
                    Some(n) if n.name == "levels" && callee.name == "column" => {
                        if !matches!(ty, Ty::IntArray(_)) {
                            self.error(
                                Error::at(
                                    ErrorKind::Type,
                                    n.span,
                                    format!("`levels` numbers class labels, so the declaration must be an int array, found {ty}"),
                                )
                                .with_label("levels for a non-int column")
                                .with_note("declare the labels `int[n]`: `y : int[n] = column(\"class\", levels = [\"a\", \"b\"])`"),
                            );
                        }
                        if !is_text(&a.value) {
                            ids = self.id_levels(&a.value);
                            continue;
                        }
                        levels.get_or_insert_with(Vec::new)
                    }
                    Some(n) => {
                        self.error(
                                Error::at(ErrorKind::Name, n.span, format!("`{}` takes no argument `{}`", callee.name, n.name))
                                    .with_label("unknown argument")
                                    .with_note("use `columns(\"a\", \"b\"..\"d\")` or `columns(except = [\"row\"])`"),
                            );
                        continue;
                    }
                };
                match column_names(&a.value) {
                    Ok(ns) => target.extend(ns),
                    Err(msg) => {
                        let label = if matches!(a.value.kind, ExprKind::Range(..)) {
                            "this range"
                        } else {
                            "not a column name"
                        };
                        self.error(Error::at(ErrorKind::Type, a.value.span, msg).with_label(label))
                    }
                }
            }
            let single = matches!(ty, Ty::Vector(_) | Ty::IntArray(_));
            if callee.name == "column" && matches!(ty, Ty::Matrix(..)) {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        init.span,
                        format!("`column` gives one column, but the declaration is {ty}"),
                    )
                    .with_label("one column for a matrix")
                    .with_note("use `columns(\"a\", \"b\")` for several columns"),
                );
            }
            let is_table = matches!(ty, Ty::Matrix(..));
            if !single && !is_table && !ty.is_unknown() {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        init.span,
                        format!(
                            "`{}` gives columns, but the declaration is {ty}",
                            callee.name
                        ),
                    )
                    .with_label("columns need a vector, int array or matrix"),
                );
            }
            if single && (names.len() != 1 || !except.is_empty()) {
                self.error(
                    Error::at(
                        ErrorKind::Shape,
                        init.span,
                        format!("a {ty} takes exactly one column, found {}", names.len()),
                    )
                    .with_label("here"),
                );
            }
            if !except.is_empty() {
                if !names.is_empty() {
                    self.error(
                        Error::at(
                            ErrorKind::Syntax,
                            init.span,
                            "give either column names or `except`, not both",
                        )
                        .with_label("here"),
                    );
                }
                return DataInit::by_name(DataSource::Except(except));
            }
            if let Some(ls) = &levels {
                let mut seen = std::collections::HashSet::new();
                let dup = ls.iter().find(|l| !seen.insert(*l));
                if ls.is_empty() || dup.is_some() {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            init.span,
                            match dup {
                                Some(d) => format!("the label `{d}` appears twice in `levels`"),
                                None => "`levels` needs at least one label".to_string(),
                            },
                        )
                        .with_label("here"),
                    );
                }
            }
            return DataInit {
                levels,
                ids,
                ..DataInit::by_name(DataSource::Columns(names))
            };
        }
        let v = self.expr(init, Context::Data);
        let ok = match (ty, &v.ty) {
            (_, Ty::Unknown) | (Ty::Unknown, _) => true,
            (Ty::Int, t) => *t == Ty::Int,
            (Ty::Real, t) => t.is_scalar(),
            (Ty::Vector(_), Ty::Vector(_) | Ty::IntArray(_)) => true,
            (Ty::IntArray(_), Ty::IntArray(_)) => true,
            (Ty::Matrix(..), Ty::Matrix(..)) => true,
            _ => false,
        };
        if !ok {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    init.span,
                    format!("the value is {}, but the declaration is {ty}", v.ty),
                )
                .with_label("wrong type"),
            );
        }
        DataInit {
            value: Some(v),
            ..DataInit::by_name(DataSource::Value)
        }
    }

    /// `levels = 1..J` or `levels = [10, 20, 30]`: the integer ids an int
    /// column holds, numbered 0, 1, … in this order at binding. An
    /// integer range or array of literals and `data` names; a list of
    /// literals is checked for repeats here, the rest at binding.
    fn id_levels(&mut self, e: &Expr) -> Option<TExpr> {
        let t = self.expr(e, Context::Data);
        match &t.ty {
            Ty::IntRange | Ty::IntArray(_) => {}
            Ty::Unknown => return None,
            other => {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        e.span,
                        format!("`levels` lists the values the column holds: text labels (`[\"a\", \"b\"]`) or integer ids (`1..J`, `[10, 20, 30]`), found {other}"),
                    )
                    .with_label("not levels"),
                );
                return None;
            }
        }
        if let TKind::Array(xs) = &t.kind {
            let mut seen = std::collections::HashSet::new();
            if let Some(dup) = xs.iter().find_map(|x| match x.kind {
                TKind::Int(k) if !seen.insert(k) => Some(k),
                _ => None,
            }) {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        e.span,
                        format!("the id {dup} appears twice in `levels`"),
                    )
                    .with_label("here"),
                );
            }
        }
        Some(t)
    }

    /// The `hyper` block.
    pub(super) fn hyper_block(&mut self, decls: &[Decl]) {
        for d in decls {
            let (ty, bounds) = self.type_expr(&d.ty, Context::HyperInit);
            if matches!(ty, Ty::Int | Ty::IntArray(_)) {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        d.ty.span,
                        "a hyper must be real-valued (a real, vector or matrix)",
                    )
                    .with_label("integer hyper")
                    .with_note("put fixed integers in `data`"),
                );
            }
            if let (Some(p), true) = (&d.prior, d.fixed) {
                self.error(
                    Error::at(
                        ErrorKind::Syntax,
                        p.span,
                        "a `fixed` hyper is never learned, so a prior on it has no effect",
                    )
                    .with_label("prior on a fixed hyper")
                    .with_note(format!(
                        "remove `fixed` to learn `{}` with this prior (MAP-II), or remove the prior",
                        d.name.name
                    )),
                );
            }
            let init = d.init.as_ref().map(|e| {
                let v = self.expr(e, Context::HyperInit);
                let fits = v.ty.is_unknown()
                    || v.ty.is_scalar()
                    || v.ty.as_real().compatible_shape(&ty.as_real());
                if !fits {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            e.span,
                            format!(
                                "the initial value is {}, but `{}` is {ty}",
                                v.ty, d.name.name
                            ),
                        )
                        .with_label("wrong shape"),
                    );
                }
                v
            });
            let index = self.graph.hypers.len();
            self.graph.hypers.push(HyperNode {
                name: d.name.name.clone(),
                ty: ty.clone(),
                bounds,
                init,
                fixed: d.fixed,
                prior: None,
                span: d.span,
                size_span: size_span(&d.ty),
            });
            self.declare(
                &d.name,
                Symbol::Value {
                    r: Ref::Hyper(index),
                    ty,
                    span: d.span,
                },
            );
        }
        self.hyper_priors(decls);
    }

    /// Priors on hypers (MAP-II), after every hyper is declared: their
    /// arguments may use data, literals and hypers only.
    fn hyper_priors(&mut self, decls: &[Decl]) {
        let first = self.graph.hypers.len() - decls.len();
        for (k, d) in decls.iter().enumerate() {
            let Some(prior) = &d.prior else { continue };
            if d.fixed {
                continue;
            }
            let index = first + k;
            let ty = self.graph.hypers[index].ty.clone();
            let Some(dist) = self.dist_call(prior, &ty) else {
                continue;
            };
            if matches!(dist.dist, DistRef::Rust(_)) {
                self.error(
                    Error::at(
                        ErrorKind::Unsupported,
                        prior.name.span,
                        "a likelihood registered from Rust takes its outcome as a number without derivatives, so it cannot be the prior of a hyper",
                    )
                    .with_label("registered from Rust")
                    .with_note("write the density in the model file (`likelihood name(...) { ... }`)"),
                );
                continue;
            }
            let bad = dist.args.iter().find_map(|a| {
                self.graph
                    .dependencies(a)
                    .into_iter()
                    .any(|r| !matches!(r, Ref::Data(_) | Ref::Hyper(_)))
                    .then_some(a.span)
            });
            if let Some(span) = bad {
                self.error(
                    Error::at(
                        ErrorKind::Name,
                        span,
                        "the prior of a hyper may use data, literals and other hypers only",
                    )
                    .with_label("not allowed here"),
                );
                continue;
            }
            self.graph.hypers[index].prior = Some(dist);
        }
    }

    /// The `param` block: declarations first, then their priors (which may
    /// refer to any param).
    pub(super) fn param_block(&mut self, decls: &[Decl]) {
        for d in decls {
            let (ty, bounds) = self.type_expr(&d.ty, Context::ParamBound);
            if matches!(ty, Ty::Int | Ty::IntArray(_)) {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        d.ty.span,
                        "a param must be continuous (a real, vector or matrix)",
                    )
                    .with_label("integer param"),
                );
            }
            if d.fixed {
                self.error(
                    Error::at(ErrorKind::Syntax, d.span, "`fixed` applies to hypers only")
                        .with_label("here"),
                );
            }
            if let Some(init) = &d.init {
                self.error(
                    Error::at(
                        ErrorKind::Syntax,
                        init.span,
                        "a param takes a prior `~ dist(...)`, not a value",
                    )
                    .with_label("value on a param")
                    .with_note(
                        "declare it in `hyper` for a point estimate, or in `data` for a constant",
                    ),
                );
            }
            let index = self.graph.params.len();
            self.graph.params.push(ParamNode {
                name: d.name.name.clone(),
                ty: ty.clone(),
                bounds,
                span: d.span,
                size_span: size_span(&d.ty),
            });
            self.declare(
                &d.name,
                Symbol::Value {
                    r: Ref::Param(index),
                    ty,
                    span: d.span,
                },
            );
        }
        for (index, d) in decls.iter().enumerate() {
            if let Some(prior) = &d.prior {
                let ty = self.graph.params[index].ty.clone();
                if let Some(dist) = self.dist_call(prior, &ty) {
                    self.graph.priors.push(PriorNode {
                        param: index,
                        dist,
                        span: prior.span,
                    });
                }
            }
        }
    }
}

/// The column names an argument of `columns(...)` denotes.
/// Where a `data` declaration's values come from, as checked.
struct DataInit {
    source: DataSource,
    /// The constant's value (`DataSource::Value`).
    value: Option<TExpr>,
    /// Text labels (`levels = ["a", "b"]`).
    levels: Option<Vec<String>>,
    /// Integer ids (`levels = 1..J`).
    ids: Option<TExpr>,
}

impl DataInit {
    fn by_name(source: DataSource) -> DataInit {
        DataInit {
            source,
            value: None,
            levels: None,
            ids: None,
        }
    }
}

/// Whether `levels = e` gives text labels (strings, lists or ranges of
/// them) rather than integer ids.
fn is_text(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Str(_) => true,
        ExprKind::Array(xs) => xs.first().is_none_or(is_text),
        ExprKind::Range(a, _) => matches!(a.kind, ExprKind::Str(_)),
        _ => false,
    }
}

fn column_names(e: &Expr) -> Result<Vec<String>, String> {
    match &e.kind {
        ExprKind::Str(s) => Ok(vec![s.clone()]),
        ExprKind::Array(xs) => {
            let mut out = Vec::new();
            for x in xs {
                out.extend(column_names(x)?);
            }
            Ok(out)
        }
        ExprKind::Range(a, b) => match (&a.kind, &b.kind) {
            (ExprKind::Str(a), ExprKind::Str(b)) => string_range(a, b),
            _ => Err(
                "a column range needs two strings with a numeric suffix, e.g. \"x1\"..\"x8\""
                    .to_string(),
            ),
        },
        _ => Err(
            "expected a column name in double quotes, a list of them, or a range \"x1\"..\"x8\""
                .to_string(),
        ),
    }
}

/// Where a declared type's sizes are written: from its first dimension to
/// its last (`[1000, d]` without the brackets), or the whole type when it
/// has none.
fn size_span(ty: &TypeExpr) -> tempest_syntax::ast::Span {
    match (ty.dims.first(), ty.dims.last()) {
        (Some(a), Some(b)) => a.span.join(b.span),
        _ => ty.span,
    }
}

/// Expand `"x1".."x8"` to x1, x2, ..., x8 (inclusive).
pub(crate) fn string_range(a: &str, b: &str) -> Result<Vec<String>, String> {
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (p, n) = s.split_at(s.len() - digits);
        (p.to_string(), n.parse::<usize>().ok())
    };
    let (pa, na) = split(a);
    let (pb, nb) = split(b);
    match (na, nb) {
        (Some(x), Some(y)) if pa == pb && y - x >= tempest_core::limits::MAX_RANGE_LEN => {
            Err(format!(
                "the range \"{a}\"..\"{b}\" names {} columns; a range may name at most {}",
                y - x + 1,
                tempest_core::limits::MAX_RANGE_LEN
            ))
        }
        (Some(x), Some(y)) if pa == pb && x <= y => {
            // Keep zero padding: "x01".."x10" gives x01, x02, ..., x10.
            let width = if a[pa.len()..].starts_with('0') && a.len() > pa.len() + 1 {
                a.len() - pa.len()
            } else {
                0
            };
            Ok((x..=y)
                .map(|i| {
                    let digits = i.to_string();
                    let zeros = "0".repeat(width.saturating_sub(digits.len()));
                    format!("{pa}{zeros}{digits}")
                })
                .collect())
        }
        (Some(_), Some(_)) if pa == pb => Err(format!(
            "the range \"{a}\"..\"{b}\" is empty: its end comes before its start"
        )),
        _ => Err(format!(
            "\"{a}\"..\"{b}\" is not a column range: both ends need the same prefix and a numeric suffix"
        )),
    }
}
