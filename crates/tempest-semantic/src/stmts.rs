//! Checking the `model`, `guide` and `estimate` blocks.

use super::Checker;
use super::scope::{Context, Symbol};
use tempest_core::error::{Error, ErrorKind};
use tempest_ir::expr::Ref;
use tempest_ir::graph::{
    EstimateNode, Family, GpNode, GuideNode, GuideTarget, LetNode, ObsNode, PriorNode,
};
use tempest_ir::types::{Size, Ty};
use tempest_syntax::ast::{Call, EstimateItem, ExprKind, GuideEntry, Span, Stmt};

const CV_METHODS: [&str; 6] = ["none", "poly1", "poly2", "stein", "secf", "vector_valued"];

impl Checker<'_> {
    /// The `model` block, statement by statement.
    pub(super) fn model_block(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Let { name, value, span } => {
                    let v = self.expr(value, Context::Model);
                    if matches!(v.ty, Ty::Gp(_)) {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                value.span,
                                format!("a let cannot hold {}", v.ty),
                            )
                            .with_label("here"),
                        );
                    }
                    let index = self.graph.lets.len();
                    let ty = v.ty.clone();
                    self.graph.lets.push(LetNode {
                        name: name.name.clone(),
                        value: v,
                        span: *span,
                    });
                    self.declare(
                        name,
                        Symbol::Value {
                            r: Ref::Let(index),
                            ty,
                            span: *span,
                        },
                    );
                }
                Stmt::Gp {
                    name,
                    mean,
                    kernel,
                    replicas,
                    span,
                } => self.gp_stmt(name, mean, kernel, replicas.as_ref(), *span),
                Stmt::Sample {
                    lhs,
                    dist,
                    temperature,
                    span,
                } => self.sample_stmt(lhs, dist, temperature.as_ref(), *span),
            }
        }
    }

    fn gp_stmt(
        &mut self,
        name: &tempest_syntax::ast::Ident,
        mean: &tempest_syntax::ast::Expr,
        kernel: &tempest_syntax::ast::Expr,
        replicas: Option<&tempest_syntax::ast::Expr>,
        span: Span,
    ) {
        if self.is_builtin_name(&name.name) {
            self.error(
                Error::at(
                    ErrorKind::Name,
                    name.span,
                    format!(
                        "`{}` is a built-in name and cannot name a latent GP",
                        name.name
                    ),
                )
                .with_label("choose another name"),
            );
        }
        let m = self.expr(mean, Context::Model);
        if !m.ty.is_scalar() {
            self.error(
                Error::at(ErrorKind::Type, mean.span, format!("the mean of a GP is a number, found {}", m.ty))
                    .with_label("not a number")
                    .with_note("add input-dependent terms in the observation instead: `y ~ normal(f(X) + X * w, sigma)`"),
            );
        }
        if m.uses_latent() {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    mean.span,
                    "the mean of a GP cannot depend on a latent function",
                )
                .with_label("here"),
            );
        }
        let k = self.expr(kernel, Context::Model);
        if !matches!(k.ty, Ty::Kernel | Ty::Unknown) {
            self.error(
                Error::at(ErrorKind::Type, kernel.span, format!("the second argument of `gp` must be a kernel, found {}", k.ty))
                    .with_label("not a kernel")
                    .with_note("kernels: rbf, matern12, matern32, matern52, linear, polynomial, cosine, periodic, white, constant"),
            );
        }
        let mut rep_size = None;
        let reps = replicas.map(|r| {
            let t = self.expr(r, Context::Data);
            match (&t.ty, &r.kind) {
                (Ty::Int, ExprKind::Int(i)) if *i > 0 => rep_size = Some(Size::Lit(*i as usize)),
                (Ty::Int, ExprKind::Var(v)) => rep_size = Some(Size::Sym(v.clone())),
                (Ty::Unknown, _) => rep_size = Some(Size::Any),
                _ => self.error(
                    Error::at(ErrorKind::Type, r.span, "the number of copies must be a positive integer literal or an `int` from `data`")
                        .with_label("not a count"),
                ),
            }
            t
        });
        let index = self.graph.gps.len();
        self.graph.gps.push(GpNode {
            name: name.name.clone(),
            mean: m,
            kernel: k,
            replicas: reps,
            span,
        });
        self.declare(
            name,
            Symbol::Gp {
                index,
                ty: Ty::Gp(rep_size),
                span,
            },
        );
    }

    fn sample_stmt(
        &mut self,
        lhs: &tempest_syntax::ast::Ident,
        dist: &Call,
        temperature: Option<&tempest_syntax::ast::Expr>,
        span: Span,
    ) {
        let sym = self.scope.globals.get(&lhs.name).cloned();
        let temp = temperature.map(|t| {
            self.allow_temperature = true;
            let v = self.expr(t, Context::Model);
            self.allow_temperature = false;
            if !v.ty.is_scalar() {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        t.span,
                        format!("the power of a likelihood must be a number, found {}", v.ty),
                    )
                    .with_label("not a number"),
                );
            }
            if let Some(x) = literal_number(t)
                && x < 0.0
            {
                self.error(
                    Error::at(
                        ErrorKind::Constraint,
                        t.span,
                        format!(
                            "the power of a likelihood must be ≥ 0, found {}",
                            tempest_core::error::num(x)
                        ),
                    )
                    .with_label("negative power")
                    .with_note("t = 0 gives the prior, t = 1 the posterior"),
                );
            }
            if v.uses_latent() {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        t.span,
                        "the power of a likelihood cannot depend on a latent function",
                    )
                    .with_label("here"),
                );
            }
            v
        });
        match sym {
            Some(Symbol::Value {
                r: Ref::Data(i),
                ty,
                ..
            }) => {
                if let Some(prev) = self.graph.observations.iter().find(|o| o.data == i) {
                    let prev_span = prev.span;
                    self.error(
                        Error::at(
                            ErrorKind::Name,
                            lhs.span,
                            format!("`{}` is observed twice", lhs.name),
                        )
                        .with_label("second observation")
                        .with_secondary(prev_span, "first observed here"),
                    );
                }
                if let Some(d) = self.dist_call(dist, &ty) {
                    self.graph.observations.push(ObsNode {
                        data: i,
                        dist: d,
                        temperature: temp,
                        span,
                    });
                }
            }
            Some(Symbol::Value {
                r: Ref::Param(i),
                ty,
                ..
            }) => {
                if let Some(t) = temperature {
                    self.error(
                        Error::at(ErrorKind::Type, t.span, "a prior cannot be tempered: `^` applies to likelihood terms of observed data")
                            .with_label("power on a prior"),
                    );
                }
                if let Some(prev) = self.graph.priors.iter().find(|p| p.param == i) {
                    let prev_span = prev.span;
                    self.error(
                        Error::at(
                            ErrorKind::Name,
                            lhs.span,
                            format!("`{}` already has a prior", lhs.name),
                        )
                        .with_label("second prior")
                        .with_secondary(prev_span, "first prior here"),
                    );
                }
                if let Some(d) = self.dist_call(dist, &ty) {
                    self.graph.priors.push(PriorNode {
                        param: i,
                        dist: d,
                        span,
                    });
                }
            }
            Some(other) => {
                let what = other.describe();
                let note = match other {
                    Symbol::Value {
                        r: Ref::Hyper(_), ..
                    } => {
                        "a hyper is a point estimate; declare it in `param` to give it a distribution"
                    }
                    Symbol::Value { r: Ref::Let(_), .. } => {
                        "a let is computed, not random; put the distribution on what it is computed from"
                    }
                    Symbol::Gp { .. } => {
                        "a latent GP gets its prior from `f ~ gp(...)`; observe data through it: `y ~ normal(f(X), sigma)`"
                    }
                    _ => "only data (observations) and params (priors) can appear left of `~`",
                };
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        lhs.span,
                        format!("`{}` is {what} and cannot have a distribution", lhs.name),
                    )
                    .with_label("left of `~`")
                    .with_secondary(other.span(), "declared here")
                    .with_note(note),
                );
                self.dist_call(dist, &Ty::Unknown);
            }
            None => {
                let mut err = Error::at(ErrorKind::Name, lhs.span, format!("unknown name `{}`", lhs.name))
                    .with_label("not declared")
                    .with_note("the left of `~` must be declared in `data` (an observation) or `param` (a prior)");
                if let Some(h) = self.scope.suggest(&lhs.name, &[]) {
                    err = err.with_note(format!("did you mean `{h}`?"));
                }
                self.error(err);
                self.dist_call(dist, &Ty::Unknown);
            }
        }
    }

    /// The `guide` block.
    pub(super) fn guide_block(&mut self, entries: &[GuideEntry]) {
        for e in entries {
            let target = match self.scope.globals.get(&e.target.name) {
                Some(Symbol::Gp { index, .. }) => GuideTarget::Gp(*index),
                Some(Symbol::Value {
                    r: Ref::Param(i), ..
                }) => GuideTarget::Param(*i),
                Some(s) => {
                    let what = s.describe();
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            e.target.span,
                            format!(
                                "`{}` is {what}; a guide approximates latent GPs and params",
                                e.target.name
                            ),
                        )
                        .with_label("not random"),
                    );
                    continue;
                }
                None => {
                    let mut err = Error::at(
                        ErrorKind::Name,
                        e.target.span,
                        format!("unknown name `{}`", e.target.name),
                    )
                    .with_label("not declared");
                    if let Some(h) = self.scope.suggest(&e.target.name, &[]) {
                        err = err.with_note(format!("did you mean `{h}`?"));
                    }
                    self.error(err);
                    continue;
                }
            };
            if let Some(prev) = self.graph.guides.iter().find(|g| g.target == target) {
                let prev_span = prev.span;
                self.error(
                    Error::at(
                        ErrorKind::Name,
                        e.target.span,
                        format!("`{}` has two guide entries", e.target.name),
                    )
                    .with_label("second entry")
                    .with_secondary(prev_span, "first entry"),
                );
                continue;
            }
            if let Some(family) = self.family(&e.family, target) {
                self.graph.guides.push(GuideNode {
                    target,
                    family,
                    span: e.span,
                });
            }
        }
    }

    fn family(&mut self, c: &Call, target: GuideTarget) -> Option<Family> {
        let is_gp = matches!(target, GuideTarget::Gp(_));
        let name = c.name.name.as_str();
        let arg_count_error = |me: &mut Self, want: &str| {
            me.error(
                Error::at(ErrorKind::Type, c.span, format!("`{name}` takes {want}"))
                    .with_label("wrong arguments"),
            );
            None
        };
        let fam = match name {
            "sites" | "mean_field" | "full_rank" => {
                if !c.args.is_empty() {
                    return arg_count_error(self, "no arguments");
                }
                match name {
                    "sites" => Family::Sites,
                    "mean_field" => Family::MeanField,
                    _ => Family::FullRank,
                }
            }
            "inducing" | "grid" => {
                let least = if name == "grid" { 6 } else { 1 };
                let m = match c.args.as_slice() {
                    [a] if a.name.as_ref().is_none_or(|n| n.name == "m") => match a.value.kind {
                        ExprKind::Int(m) if m >= least => m as usize,
                        _ => {
                            return arg_count_error(
                                self,
                                &format!("at least {least} inducing points: `{name}(m = 64)`"),
                            );
                        }
                    },
                    _ => {
                        return arg_count_error(
                            self,
                            &format!("the number of inducing points: `{name}(m = 64)`"),
                        );
                    }
                };
                if name == "grid" {
                    Family::Grid { m }
                } else {
                    Family::Inducing { m }
                }
            }
            "gaussian" => {
                let diag = match c.args.as_slice() {
                    [] => true,
                    [a] if a.name.is_none() => match &a.value.kind {
                        ExprKind::Var(v) if v == "diag" => true,
                        ExprKind::Var(v) if v == "full" => false,
                        _ => return arg_count_error(self, "`diag` or `full`"),
                    },
                    _ => return arg_count_error(self, "`diag` or `full`"),
                };
                Family::Gaussian { diag }
            }
            _ => {
                let mut err = Error::at(ErrorKind::Name, c.name.span, format!("unknown variational family `{name}`"))
                    .with_label("not a family")
                    .with_note("families: sites, mean_field, full_rank, inducing(m = ...), grid(m = ...) for latent GPs; gaussian(diag | full) for params");
                let names = [
                    "sites",
                    "mean_field",
                    "full_rank",
                    "inducing",
                    "grid",
                    "gaussian",
                ];
                if let Some(h) = super::scope::suggest(name, names.into_iter()) {
                    err = err.with_note(format!("did you mean `{h}`?"));
                }
                self.error(err);
                return None;
            }
        };
        let fits = match fam {
            Family::Gaussian { .. } => !is_gp,
            _ => is_gp,
        };
        if !fits {
            let msg = if is_gp {
                format!(
                    "`{name}` is a family for params; for a latent GP use sites, mean_field, full_rank or inducing(m = ...)"
                )
            } else {
                format!(
                    "`{name}` is a family for latent GPs; for a param use gaussian(diag) or gaussian(full)"
                )
            };
            self.error(Error::at(ErrorKind::Type, c.span, msg).with_label("wrong family"));
            return None;
        }
        Some(fam)
    }

    /// The `estimate` block and its `using` clause.
    pub(super) fn estimate_block(&mut self, items: &[EstimateItem], using: Option<&Call>) {
        for it in items {
            if let Some(prev) = self.graph.estimates.iter().find(|e| e.name == it.name.name) {
                let prev_span = prev.span;
                self.error(
                    Error::at(
                        ErrorKind::Name,
                        it.name.span,
                        format!("estimate `{}` is defined twice", it.name.name),
                    )
                    .with_label("second definition")
                    .with_secondary(prev_span, "first definition"),
                );
                continue;
            }
            let v = self.expr(&it.expr, Context::Model);
            if !matches!(
                v.ty,
                Ty::Real | Ty::Int | Ty::Vector(_) | Ty::IntArray(_) | Ty::Unknown
            ) {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        it.expr.span,
                        format!(
                            "an expectation needs a number or a vector inside `E[...]`, found {}",
                            v.ty
                        ),
                    )
                    .with_label("not a number"),
                );
            }
            self.graph.estimates.push(EstimateNode {
                name: it.name.name.clone(),
                expr: v,
                span: it.span,
            });
        }
        if let Some(u) = using {
            if u.name.name != "control_variates" {
                self.error(
                    Error::at(
                        ErrorKind::Name,
                        u.name.span,
                        format!("unknown estimator `{}`", u.name.name),
                    )
                    .with_label("expected `control_variates(...)`"),
                );
            } else {
                match u.args.as_slice() {
                    [a] if a.name.is_none() => {
                        let method = match &a.value.kind {
                            ExprKind::Var(m) => Some(m.clone()),
                            ExprKind::Call(m, _) => Some(m.name.clone()),
                            _ => None,
                        };
                        match method {
                            Some(m) if CV_METHODS.contains(&m.as_str()) => {}
                            _ => self.error(
                                Error::at(
                                    ErrorKind::Name,
                                    a.value.span,
                                    "unknown control-variate method",
                                )
                                .with_label("not a method")
                                .with_note(format!("methods: {}", CV_METHODS.join(", "))),
                            ),
                        }
                    }
                    _ => self.error(
                        Error::at(
                            ErrorKind::Type,
                            u.span,
                            "`control_variates` takes one method, e.g. `control_variates(poly2)`",
                        )
                        .with_label("here"),
                    ),
                }
            }
            self.graph.estimate_method = Some(u.clone());
        }
    }
}

/// The value of a numeric literal, possibly negated.
pub(super) fn literal_number(e: &tempest_syntax::ast::Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(i) => Some(*i as f64),
        ExprKind::Real(r) => Some(*r),
        ExprKind::Unary(tempest_syntax::ast::UnOp::Neg, x) => literal_number(x).map(|v| -v),
        _ => None,
    }
}
