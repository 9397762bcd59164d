//! Checking expressions: names, operators, indexing, conditionals.

use super::Checker;
use super::scope::{Context, Symbol};
use tempest_core::error::{Error, ErrorKind};
use tempest_ir::expr::{Ref, TExpr, TKind};
use tempest_ir::types::{self, Size, Ty};
use tempest_syntax::ast::{BinOp, Expr, ExprKind, Span, UnOp};

impl Checker<'_> {
    /// A typed expression with the unknown type, after an error.
    pub(super) fn unknown(span: Span) -> TExpr {
        TExpr::new(TKind::Real(f64::NAN), Ty::Unknown, span)
    }

    /// Check an expression in a context.
    pub(super) fn expr(&mut self, e: &Expr, ctx: Context) -> TExpr {
        tempest_core::limits::deep(|| self.expr_inner(e, ctx))
    }

    fn expr_inner(&mut self, e: &Expr, ctx: Context) -> TExpr {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(i) => TExpr::new(TKind::Int(*i), Ty::Int, span),
            ExprKind::Real(r) => TExpr::new(TKind::Real(*r), Ty::Real, span),
            ExprKind::Bool(b) => TExpr::new(TKind::Bool(*b), Ty::Bool, span),
            ExprKind::Str(s) => TExpr::new(TKind::Str(s.clone()), Ty::Str, span),
            ExprKind::Var(name) => self.var(name, span, ctx),
            ExprKind::Array(xs) => self.array(xs, span, ctx),
            ExprKind::Range(a, b) => {
                let (a, b) = (self.expr(a, ctx), self.expr(b, ctx));
                let ty = match (&a.ty, &b.ty) {
                    (Ty::Int, Ty::Int) => Ty::IntRange,
                    (Ty::Str, Ty::Str) => Ty::StrRange,
                    (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
                    (x, y) => {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                span,
                                format!(
                                    "a range needs two integers or two strings, found {x} and {y}"
                                ),
                            )
                            .with_label("bad range"),
                        );
                        Ty::Unknown
                    }
                };
                TExpr::new(TKind::Range(Box::new(a), Box::new(b)), ty, span)
            }
            ExprKind::Unary(op, x) => {
                let x = self.expr(x, ctx);
                let ty = match (op, &x.ty) {
                    (_, Ty::Unknown) => Ty::Unknown,
                    (UnOp::Not, Ty::Bool) => Ty::Bool,
                    (UnOp::Neg, t) if t.is_numeric() => t.clone(),
                    (UnOp::Not, t) => {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                span,
                                format!("`!` needs a condition, found {t}"),
                            )
                            .with_label("here"),
                        );
                        Ty::Unknown
                    }
                    (UnOp::Neg, t) => {
                        self.error(
                            Error::at(ErrorKind::Type, span, format!("cannot negate {t}"))
                                .with_label("here"),
                        );
                        Ty::Unknown
                    }
                };
                TExpr::new(TKind::Unary(*op, Box::new(x)), ty, span)
            }
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (self.expr(a, ctx), self.expr(b, ctx));
                let ty = match types::binary(*op, &a.ty, &b.ty) {
                    Ok(t) => t,
                    Err(msg) => {
                        self.error(Error::at(ErrorKind::Type, span, msg).with_label(format!(
                            "{} {} {}",
                            a.ty,
                            op.symbol(),
                            b.ty
                        )));
                        Ty::Unknown
                    }
                };
                TExpr::new(TKind::Binary(*op, Box::new(a), Box::new(b)), ty, span)
            }
            ExprKind::Call(callee, args) => self.call(callee, args, span, ctx),
            ExprKind::Index(base, idx) => {
                let base = self.expr(base, ctx);
                let idx: Vec<TExpr> = idx.iter().map(|i| self.expr(i, ctx)).collect();
                // One integer-array index gathers: `a[group]`.
                if let [i] = idx.as_slice()
                    && let Ty::IntArray(n) = &i.ty
                {
                    let ty = match types::gather(&base.ty, n) {
                        Ok(t) => t,
                        Err(msg) => {
                            self.error(Error::at(ErrorKind::Type, span, msg).with_label("here"));
                            Ty::Unknown
                        }
                    };
                    return TExpr::new(TKind::Index(Box::new(base), idx), ty, span);
                }
                for i in &idx {
                    if !matches!(i.ty, Ty::Int | Ty::Unknown) {
                        let mut err = Error::at(
                            ErrorKind::Type,
                            i.span,
                            format!("an index must be an integer, found {}", i.ty),
                        )
                        .with_label("not an integer");
                        if let TKind::Binary(op @ (BinOp::Div | BinOp::EwDiv | BinOp::Pow), ..) =
                            &i.kind
                        {
                            err = err.with_note(format!(
                                "`{}` gives a real even between integers (`7 / 2` is 3.5); `+`, `-`, `*` and `.*` of integers give integers",
                                op.symbol()
                            ));
                        }
                        self.error(err);
                    }
                }
                let ty = match types::index(&base.ty, idx.len()) {
                    Ok(t) => t,
                    Err(msg) => {
                        self.error(Error::at(ErrorKind::Type, span, msg).with_label("here"));
                        Ty::Unknown
                    }
                };
                TExpr::new(TKind::Index(Box::new(base), idx), ty, span)
            }
            ExprKind::If(c, a, b) => {
                let c = self.expr(c, ctx);
                if !matches!(c.ty, Ty::Bool | Ty::Unknown) {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            c.span,
                            format!("the condition must be a comparison, found {}", c.ty),
                        )
                        .with_label("not a condition"),
                    );
                }
                let (a, b) = (self.expr(a, ctx), self.expr(b, ctx));
                let ty = match (&a.ty, &b.ty) {
                    (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
                    (Ty::Int, Ty::Int) => Ty::Int,
                    (Ty::IntArray(n), Ty::IntArray(m)) if n.compatible(m) != Some(false) => {
                        Ty::IntArray(n.clone())
                    }
                    (x, y) if x.is_scalar() && y.is_scalar() => Ty::Real,
                    (x, y) if x.as_real().compatible_shape(&y.as_real()) => x.as_real(),
                    (x, y) => {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                span,
                                format!("the branches differ: {x} and {y}"),
                            )
                            .with_label("branches must have the same type"),
                        );
                        Ty::Unknown
                    }
                };
                TExpr::new(TKind::If(Box::new(c), Box::new(a), Box::new(b)), ty, span)
            }
        }
    }

    /// A name used as a value.
    fn var(&mut self, name: &str, span: Span, ctx: Context) -> TExpr {
        if ctx == Context::Function
            && let Some((slot, ty)) = self.scope.local(name)
        {
            return TExpr::new(TKind::Ref(Ref::Local(slot)), ty, span);
        }
        if name == "temperature" && !self.scope.globals.contains_key(name) {
            if self.allow_temperature {
                return TExpr::new(TKind::Ref(Ref::Temperature), Ty::Real, span);
            }
            self.error(
                Error::at(ErrorKind::Name, span, "`temperature` can only be used as the power of a likelihood: `y ~ ... ^ temperature`")
                    .with_label("here"),
            );
            return Self::unknown(span);
        }
        match self.scope.globals.get(name).cloned() {
            Some(Symbol::Value { r, ty, span: decl }) => {
                if !ctx.allows(&r) {
                    let what = Symbol::Value {
                        r,
                        ty: ty.clone(),
                        span: decl,
                    }
                    .describe();
                    self.error(
                        Error::at(
                            ErrorKind::Name,
                            span,
                            format!("`{name}` is {what} and cannot be used here"),
                        )
                        .with_label("not allowed here")
                        .with_secondary(decl, "declared here")
                        .with_note(format!("here you can use {}", ctx.allowed_words())),
                    );
                    return Self::unknown(span);
                }
                TExpr::new(TKind::Ref(r), ty, span)
            }
            Some(Symbol::Gp { span: decl, .. }) => {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        span,
                        format!(
                            "`{name}` is a latent function: apply it to inputs, e.g. `{name}(X)`"
                        ),
                    )
                    .with_label("latent function used as a value")
                    .with_secondary(decl, "declared here"),
                );
                Self::unknown(span)
            }
            Some(Symbol::Function { span: decl, .. }) => {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        span,
                        format!("`{name}` is a function and needs arguments: `{name}(...)`"),
                    )
                    .with_label("function used as a value")
                    .with_secondary(decl, "defined here"),
                );
                Self::unknown(span)
            }
            None => {
                if let Some((what, decl)) = self.scope.later.get(name).cloned() {
                    self.error(
                        Error::at(
                            ErrorKind::Name,
                            span,
                            format!(
                                "`{name}` is {what} declared further down, and cannot be used here"
                            ),
                        )
                        .with_label("used before its declaration")
                        .with_secondary(decl, "declared here")
                        .with_note(format!("here you can use {}", ctx.allowed_words())),
                    );
                    return Self::unknown(span);
                }
                let mut err = Error::at(ErrorKind::Name, span, format!("unknown name `{name}`"))
                    .with_label("not declared");
                if ctx == Context::Function {
                    err = err.with_note(
                        "a function body can use only its parameters, its inputs and its own lets",
                    );
                }
                let hint = if ctx == Context::Function {
                    super::scope::suggest(
                        name,
                        self.scope.locals.iter().map(|(n, _, _)| n.as_str()),
                    )
                } else {
                    self.scope.suggest(name, &[])
                };
                if let Some(h) = hint {
                    err = err.with_note(format!("did you mean `{h}`?"));
                }
                self.error(err);
                Self::unknown(span)
            }
        }
    }

    /// An array literal: numbers → vector or int array, vectors → matrix,
    /// strings → list of strings.
    fn array(&mut self, xs: &[Expr], span: Span, ctx: Context) -> TExpr {
        let items: Vec<TExpr> = xs.iter().map(|x| self.expr(x, ctx)).collect();
        let n = Size::Lit(items.len());
        let ty = if items.iter().any(|i| i.ty.is_unknown()) {
            Ty::Unknown
        } else if items.iter().all(|i| i.ty == Ty::Int) {
            Ty::IntArray(n)
        } else if items.iter().all(|i| i.ty.is_scalar()) {
            Ty::Vector(n)
        } else if items.iter().all(|i| i.ty == Ty::Str) {
            Ty::StrArray(n)
        } else if let Some(first) = items.first().map(|i| i.ty.as_real()) {
            match first {
                Ty::Vector(m)
                    if items
                        .iter()
                        .all(|i| i.ty.as_real().compatible_shape(&Ty::Vector(m.clone()))) =>
                {
                    Ty::Matrix(n, m)
                }
                _ => {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            span,
                            "an array literal holds numbers, rows of equal length, or strings",
                        )
                        .with_label("mixed elements"),
                    );
                    Ty::Unknown
                }
            }
        } else {
            Ty::Vector(n)
        };
        TExpr::new(TKind::Array(items), ty, span)
    }
}
