//! Checking user-defined `likelihood`, `kernel` and `system` definitions.

use super::Checker;
use super::scope::{Context, Symbol};
use tempest_core::error::{Error, ErrorKind};
use tempest_ir::graph::Function;
use tempest_ir::types::{Size, Ty};
use tempest_syntax::ast::{FunctionDef, FunctionKind};

impl Checker<'_> {
    /// Check one definition and declare its name.
    pub(super) fn function(&mut self, f: &FunctionDef) {
        let name = &f.name.name;
        if self.is_builtin_name(name)
            || self.registry.kernel(name).is_some()
            || self.registry.likelihood(name).is_some()
        {
            self.error(
                Error::at(
                    ErrorKind::Name,
                    f.name.span,
                    format!("`{name}` is already a built-in name"),
                )
                .with_label("choose another name"),
            );
        }
        self.scope.locals.clear();
        let mut params = Vec::new();
        for (i, p) in f.params.iter().enumerate() {
            let (ty, bounds) = self.type_expr(&p.ty, Context::Function);
            if bounds.lower.is_some() || bounds.upper.is_some() {
                // Bounds on function parameters document intent; values are
                // checked where the model declares them.
            }
            let allowed = match f.kind {
                FunctionKind::Likelihood => ty.is_scalar(),
                FunctionKind::Kernel => ty.is_scalar() || matches!(ty, Ty::Vector(_)),
                FunctionKind::System => match i {
                    0 => ty == Ty::Real,
                    1 => matches!(ty, Ty::Vector(_)),
                    _ => ty.is_scalar() || matches!(ty, Ty::Vector(_)),
                },
            };
            if !allowed {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        p.ty.span,
                        match (f.kind, i) {
                            (FunctionKind::System, 0) => format!(
                                "the first parameter of a system is the time, `t : real`; found {ty}"
                            ),
                            (FunctionKind::System, 1) => format!(
                                "the second parameter of a system is the state, `x : vector[S]`; found {ty}"
                            ),
                            _ => format!(
                                "a {} parameter must be a number{}, found {ty}",
                                kind_word(f.kind),
                                if f.kind == FunctionKind::Likelihood {
                                    ""
                                } else {
                                    " or a vector"
                                }
                            ),
                        },
                    )
                    .with_label("unsupported parameter type"),
                );
            }
            if self.scope.local(&p.name.name).is_some() {
                self.error(
                    Error::at(
                        ErrorKind::Name,
                        p.name.span,
                        format!("parameter `{}` is declared twice", p.name.name),
                    )
                    .with_label("repeated"),
                );
            }
            self.scope.locals.push((p.name.name.clone(), i, ty.clone()));
            params.push((p.name.name.clone(), ty));
        }
        match (f.kind, &f.inputs) {
            (FunctionKind::Likelihood, _) => {
                if params.len() < 2 {
                    self.error(
                        Error::at(ErrorKind::Type, f.name.span, "a likelihood takes the observation and the latent value first: `(y : real, f : real, ...)`")
                            .with_label("too few parameters"),
                    );
                } else if params[1].1 == Ty::Int {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            f.params[1].ty.span,
                            "the latent value (second parameter) must be `real`",
                        )
                        .with_label("latent value is real"),
                    );
                }
            }
            (FunctionKind::Kernel, Some((a, b))) => {
                for x in [a, b] {
                    let slot = params.len();
                    self.scope
                        .locals
                        .push((x.name.clone(), slot, Ty::Vector(Size::Any)));
                    params.push((x.name.clone(), Ty::Vector(Size::Any)));
                }
            }
            (FunctionKind::Kernel, None) => {
                self.error(Error::internal("kernel definition without inputs"));
            }
            (FunctionKind::System, _) => {
                if params.len() < 2 {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            f.name.span,
                            "a system takes the time and the state first: `(t : real, x : vector[S], ...)`",
                        )
                        .with_label("too few parameters"),
                    );
                }
            }
        }
        let mut lets = Vec::new();
        for (n, e) in &f.body.lets {
            let v = self.expr(e, Context::Function);
            let slot = self.scope.locals.len();
            self.scope.locals.push((n.name.clone(), slot, v.ty.clone()));
            lets.push((slot, v));
        }
        let body = self.expr(&f.body.value, Context::Function);
        if f.kind == FunctionKind::System {
            self.system_body(&body, params.get(1).map(|p| &p.1));
        } else if !body.ty.is_scalar() {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    f.body.value.span,
                    format!(
                        "the body of a {} must be a number, found {}",
                        kind_word(f.kind),
                        body.ty
                    ),
                )
                .with_label("not a number"),
            );
        }
        let n_locals = self.scope.locals.len();
        self.scope.locals.clear();
        let index = self.graph.functions.len();
        self.graph.functions.push(Function {
            kind: f.kind,
            name: name.clone(),
            params,
            lets,
            body,
            n_locals,
            program: None,
            shaped: Default::default(),
            system_program: None,
            span: f.span,
        });
        self.declare(
            &f.name,
            Symbol::Function {
                index,
                span: f.span,
            },
        );
    }
}

impl Checker<'_> {
    /// A system's body is dx/dt: a vector as long as the state.
    fn system_body(&mut self, body: &tempest_ir::expr::TExpr, state: Option<&Ty>) {
        match (&body.ty, state) {
            (Ty::Unknown, _) => {}
            (Ty::Vector(n), Some(Ty::Vector(s))) if n.compatible(s) == Some(false) => {
                self.error(
                    Error::at(
                        ErrorKind::Shape,
                        body.span,
                        format!(
                            "the body of a system is dx/dt, a vector as long as the state (vector[{s}]); found vector[{n}]"
                        ),
                    )
                    .with_label("wrong length"),
                );
            }
            (Ty::Vector(_), _) => {}
            (t, _) => {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        body.span,
                        format!(
                            "the body of a system is dx/dt, a vector such as `[x[1], -x[0]]`; found {t}"
                        ),
                    )
                    .with_label("not a vector"),
                );
            }
        }
    }
}

fn kind_word(k: FunctionKind) -> &'static str {
    match k {
        FunctionKind::Likelihood => "likelihood",
        FunctionKind::Kernel => "kernel",
        FunctionKind::System => "system",
    }
}
