//! Checking calls: latent-GP applications, kernels, built-in functions, and
//! distributions after `~`.

use super::Checker;
use super::scope::{Context, Symbol};
use tempest_core::error::{Error, ErrorKind};
use tempest_ir::expr::{Builtin, TExpr, TKind};
use tempest_ir::graph::{DistCall, DistRef};
use tempest_ir::types::{self, Size, Ty};
use tempest_model::dist::Dist;
use tempest_model::kernel::KernelKind;
use tempest_syntax::ast::{Arg, Call, ExprKind, FunctionKind, Ident, Span};

/// Names that are callable but not in the tables (for suggestions).
const OTHER_CALLABLES: [&str; 3] = ["deep", "mlp", "ode"];

impl Checker<'_> {
    fn all_callables(&self) -> Vec<String> {
        let mut v: Vec<String> = Builtin::ALL.iter().map(|b| b.name().to_string()).collect();
        v.extend(KernelKind::ALL.iter().map(|k| k.name().to_string()));
        v.extend(OTHER_CALLABLES.iter().map(|s| s.to_string()));
        v
    }

    /// Whether a name is built in (function, kernel, distribution).
    pub(super) fn is_builtin_name(&self, name: &str) -> bool {
        Builtin::from_name(name).is_some()
            || KernelKind::from_name(name).is_some()
            || Dist::from_name(name).is_some()
            || OTHER_CALLABLES.contains(&name)
            || name == "columns"
            || name == "column"
            || name == "gp"
    }

    /// A call in an expression.
    pub(super) fn call(&mut self, callee: &Ident, args: &[Arg], span: Span, ctx: Context) -> TExpr {
        let name = callee.name.as_str();
        if name == "ode" && !self.scope.globals.contains_key(name) {
            return self.ode(callee, args, span, ctx);
        }
        if ctx != Context::Function {
            match self.scope.globals.get(name).cloned() {
                Some(Symbol::Gp { index, ty, .. }) => {
                    return self.gp_apply(index, ty, callee, args, span, ctx);
                }
                Some(Symbol::Function { index, span: def }) => {
                    if self.graph.functions[index].kind == FunctionKind::Kernel {
                        return self.user_kernel(index, args, span, ctx);
                    }
                    if self.graph.functions[index].kind == FunctionKind::System {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                callee.span,
                                format!("`{name}` is an ODE system; solve it with `ode({name}, x0, t0, ts, ...)`"),
                            )
                            .with_label("system called as a function")
                            .with_secondary(def, "defined here"),
                        );
                        return Self::unknown(span);
                    }
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            callee.span,
                            format!(
                                "`{name}` is a likelihood; use it after `~`: `y ~ {name}(...)`"
                            ),
                        )
                        .with_label("likelihood called as a function")
                        .with_secondary(def, "defined here"),
                    );
                    return Self::unknown(span);
                }
                Some(Symbol::Value { .. })
                    if Builtin::from_name(name).is_some()
                        || KernelKind::from_name(name).is_some()
                        || self.registry.kernel(name).is_some() =>
                {
                    // Values and functions live apart: `exp(x)` calls the
                    // built-in even when a value is named `exp`.
                }
                Some(Symbol::Value { span: decl, ty, .. }) => {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            callee.span,
                            format!("`{name}` is a value of type {ty}, not a function"),
                        )
                        .with_label("called here")
                        .with_secondary(decl, "declared here"),
                    );
                    return Self::unknown(span);
                }
                None => {}
            }
            if let Some(k) = self.registry.kernel(name).cloned() {
                let n_params = k.param_names().len();
                let (positional, dims) = self.kernel_args(name, args, &k.param_names(), ctx);
                if positional.len() != n_params {
                    self.arity_error(callee, n_params, positional.len());
                }
                return TExpr::new(
                    TKind::RustKernel {
                        kernel: k,
                        args: positional,
                        dims,
                    },
                    Ty::Kernel,
                    span,
                );
            }
            if let Some(kind) = KernelKind::from_name(name) {
                return self.builtin_kernel(kind, callee, args, span, ctx);
            }
            if name == "deep" || name == "mlp" {
                return self.deep(callee, args, span, ctx);
            }
        }
        if let Some(b) = Builtin::from_name(name) {
            return self.builtin(b, callee, args, span, ctx);
        }
        let mut err = if Dist::from_name(name).is_some() || self.registry.likelihood(name).is_some()
        {
            Error::at(
                ErrorKind::Type,
                callee.span,
                format!("`{name}` is a distribution; use it after `~`: `y ~ {name}(...)`"),
            )
            .with_label("distribution called as a function")
        } else if name == "columns" || name == "column" {
            Error::at(
                ErrorKind::Type,
                callee.span,
                format!("`{name}(...)` can only give the value of a `data` declaration"),
            )
            .with_label("here")
        } else if ctx == Context::Function
            && (KernelKind::from_name(name).is_some() || self.scope.globals.contains_key(name))
        {
            Error::at(
                ErrorKind::Name,
                callee.span,
                format!("`{name}` cannot be called inside a function body"),
            )
            .with_label("here")
            .with_note(
                "function bodies can call only built-in functions such as exp, log and sqdist",
            )
        } else if let Some((what, decl)) = self.scope.later.get(name).cloned() {
            Error::at(
                ErrorKind::Name,
                callee.span,
                format!("`{name}` is {what} declared further down, and cannot be used here"),
            )
            .with_label("used before its declaration")
            .with_secondary(decl, "declared here")
        } else {
            Error::at(
                ErrorKind::Name,
                callee.span,
                format!("unknown function `{name}`"),
            )
            .with_label("not defined")
        };
        if err.message.starts_with("unknown") {
            let names = self.all_callables();
            let globals: Vec<&str> = self.scope.globals.keys().map(|s| s.as_str()).collect();
            if let Some(h) =
                super::scope::suggest(name, names.iter().map(|s| s.as_str()).chain(globals))
            {
                err = err.with_note(format!("did you mean `{h}`?"));
            } else {
                err = err.with_note("a kernel or likelihood written in Rust is known to the program that registers it (`tempest::cli::main_with(registry)` gives that program the whole command line; see examples/custom_cli.rs)");
            }
        }
        for a in args {
            self.expr(&a.value, ctx);
        }
        self.error(err);
        Self::unknown(span)
    }

    /// Check the `dims = ...` option of a kernel: column indices.
    fn dims_arg(&mut self, v: TExpr) -> TExpr {
        if !matches!(v.ty, Ty::IntRange | Ty::Int | Ty::IntArray(_) | Ty::Unknown) {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    v.span,
                    format!("`dims` takes column indices: an int, a range `0..2` or a list `[0, 3]`, found {}", v.ty),
                )
                .with_label("not column indices"),
            );
        }
        v
    }

    fn arity_error(&mut self, callee: &Ident, want: usize, got: usize) {
        self.error(
            Error::at(
                ErrorKind::Type,
                callee.span,
                format!(
                    "`{}` takes {want} argument{}, found {got}",
                    callee.name,
                    if want == 1 { "" } else { "s" }
                ),
            )
            .with_label("wrong number of arguments"),
        );
    }

    /// `f(X)`: a latent function at inputs X [N, D] (or a vector of N 1-D inputs).
    fn gp_apply(
        &mut self,
        gp: usize,
        gp_ty: Ty,
        callee: &Ident,
        args: &[Arg],
        span: Span,
        ctx: Context,
    ) -> TExpr {
        if args.len() != 1 || args[0].name.is_some() {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    span,
                    format!(
                        "a latent function takes one argument, its inputs: `{}(X)`",
                        callee.name
                    ),
                )
                .with_label("here"),
            );
            return Self::unknown(span);
        }
        let input = self.expr(&args[0].value, ctx);
        let n = match &input.ty {
            Ty::Matrix(n, _) | Ty::Vector(n) => n.clone(),
            Ty::Unknown => Size::Any,
            t => {
                let mut err = Error::at(ErrorKind::Type, input.span, format!("the inputs of a latent function are a matrix [N, D] or a vector [N], found {t}"))
                    .with_label("not inputs");
                if matches!(t, Ty::IntArray(_)) {
                    err = err.with_note("integers stay integers in arithmetic; `1.0 * k` makes the int array `k` a vector");
                }
                self.error(err);
                return Self::unknown(span);
            }
        };
        if input.uses_latent() {
            self.error(
                Error::at(
                    ErrorKind::Unsupported,
                    input.span,
                    "the inputs of a latent function cannot depend on another latent function",
                )
                .with_label("latent inputs"),
            );
        }
        let ty = match gp_ty {
            Ty::Gp(Some(c)) => Ty::Matrix(n, c),
            _ => Ty::Vector(n),
        };
        TExpr::new(
            TKind::GpApply {
                gp,
                input: Box::new(input),
                site: usize::MAX,
            },
            ty,
            span,
        )
    }

    /// Split arguments into positional values matched to `params` (by
    /// position or name) and the `dims` option.
    fn kernel_args(
        &mut self,
        kname: &str,
        args: &[Arg],
        params: &[String],
        ctx: Context,
    ) -> (Vec<TExpr>, Option<Box<TExpr>>) {
        let mut slots: Vec<Option<TExpr>> = vec![None; params.len()];
        let mut extra = Vec::new();
        let mut dims = None;
        let mut next = 0;
        for a in args {
            let v = self.expr(&a.value, ctx);
            match &a.name {
                Some(n) if n.name == "dims" => {
                    dims = Some(Box::new(self.dims_arg(v)));
                }
                Some(n) => match params.iter().position(|p| *p == n.name) {
                    Some(i) if slots[i].is_none() => slots[i] = Some(v),
                    Some(_) => self.error(
                        Error::at(
                            ErrorKind::Type,
                            n.span,
                            format!("`{}` is given twice", n.name),
                        )
                        .with_label("repeated"),
                    ),
                    None => self.error(
                        Error::at(
                            ErrorKind::Name,
                            n.span,
                            format!("`{kname}` has no argument `{}`", n.name),
                        )
                        .with_label("unknown argument")
                        .with_note(format!(
                            "its arguments: {}, and the option `dims`",
                            if params.is_empty() {
                                "none".to_string()
                            } else {
                                params.join(", ")
                            }
                        )),
                    ),
                },
                None => {
                    while next < slots.len() && slots[next].is_some() {
                        next += 1;
                    }
                    if next < slots.len() {
                        slots[next] = Some(v);
                        next += 1;
                    } else {
                        extra.push(v);
                    }
                }
            }
        }
        let mut out: Vec<TExpr> = slots.into_iter().flatten().collect();
        out.extend(extra);
        (out, dims)
    }

    fn builtin_kernel(
        &mut self,
        kind: KernelKind,
        callee: &Ident,
        args: &[Arg],
        span: Span,
        ctx: Context,
    ) -> TExpr {
        let specs = kind.params();
        let names: Vec<String> = specs.iter().map(|p| p.name.to_string()).collect();
        let mut slots: Vec<Option<TExpr>> = vec![None; specs.len()];
        let mut dims = None;
        let mut positional = 0;
        for a in args {
            let v = self.expr(&a.value, ctx);
            let idx = match &a.name {
                Some(n) if n.name == "dims" => {
                    dims = Some(Box::new(self.dims_arg(v)));
                    continue;
                }
                Some(n) => match names.iter().position(|p| *p == n.name) {
                    Some(i) => i,
                    None => {
                        self.error(
                            Error::at(
                                ErrorKind::Name,
                                n.span,
                                format!("`{}` has no argument `{}`", kind.name(), n.name),
                            )
                            .with_label("unknown argument")
                            .with_note(format!(
                                "its arguments: {}",
                                if names.is_empty() {
                                    "none (only the option `dims`)".to_string()
                                } else {
                                    format!("{}, and the option `dims`", names.join(", "))
                                }
                            )),
                        );
                        continue;
                    }
                },
                None => {
                    positional += 1;
                    if positional > specs.len() {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                a.span,
                                format!(
                                    "`{}` takes at most {} argument{}",
                                    kind.name(),
                                    specs.len(),
                                    if specs.len() == 1 { "" } else { "s" }
                                ),
                            )
                            .with_label("extra argument"),
                        );
                        continue;
                    }
                    positional - 1
                }
            };
            let spec = specs[idx];
            if spec.positive {
                let literals: Vec<f64> = match &v.kind {
                    TKind::Array(xs) => xs.iter().filter_map(texpr_literal).collect(),
                    _ => texpr_literal(&v).into_iter().collect(),
                };
                if let Some(x) = literals.into_iter().find(|x| *x <= 0.0) {
                    self.error(
                        Error::at(
                            ErrorKind::Constraint,
                            v.span,
                            format!(
                                "`{}` of `{}` must be positive, found {}",
                                spec.name,
                                kind.name(),
                                tempest_core::error::num(x)
                            ),
                        )
                        .with_label("not positive"),
                    );
                }
            }
            let ok = match &v.ty {
                Ty::Int | Ty::Real | Ty::Unknown => true,
                Ty::Vector(_) | Ty::IntArray(_) => spec.per_dim,
                _ => false,
            };
            if !ok {
                let want = if spec.per_dim {
                    "a number or a vector with one entry per input dimension"
                } else {
                    "a number"
                };
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        v.span,
                        format!(
                            "`{}` of `{}` must be {want}, found {}",
                            spec.name,
                            kind.name(),
                            v.ty
                        ),
                    )
                    .with_label("wrong type"),
                );
            }
            if slots[idx].is_some() {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        a.span,
                        format!("`{}` is given twice", spec.name),
                    )
                    .with_label("repeated"),
                );
            }
            slots[idx] = Some(v);
        }
        for (spec, slot) in specs.iter().zip(&slots) {
            if slot.is_none() && spec.default.is_none() {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        callee.span,
                        format!("`{}` needs its argument `{}`", kind.name(), spec.name),
                    )
                    .with_label("missing argument")
                    .with_note(format!(
                        "write `{}({})`",
                        kind.name(),
                        names.join(", ")
                    )),
                );
            }
        }
        TExpr::new(
            TKind::Kernel {
                kind,
                args: slots,
                dims,
            },
            Ty::Kernel,
            span,
        )
    }

    fn user_kernel(&mut self, index: usize, args: &[Arg], span: Span, ctx: Context) -> TExpr {
        let f = self.graph.functions[index].clone();
        let n = f.params.len() - 2;
        let names: Vec<String> = f.params[..n].iter().map(|(n, _)| n.clone()).collect();
        let (positional, dims) = self.kernel_args(&f.name, args, &names, ctx);
        if positional.len() != n {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    span,
                    format!(
                        "kernel `{}` takes {n} argument{}, found {}",
                        f.name,
                        if n == 1 { "" } else { "s" },
                        positional.len()
                    ),
                )
                .with_label("wrong number of arguments")
                .with_secondary(f.span, "defined here"),
            );
        }
        for (a, (pname, pty)) in positional.iter().zip(&f.params[..n]) {
            let fits = a.ty.is_unknown()
                || a.ty.as_real().compatible_shape(&pty.as_real())
                || (a.ty.is_scalar() && pty.is_scalar());
            if !fits {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        a.span,
                        format!("`{pname}` of `{}` is {pty}, found {}", f.name, a.ty),
                    )
                    .with_label("wrong type"),
                );
            }
        }
        TExpr::new(
            TKind::UserKernel {
                func: index,
                args: positional,
                dims,
            },
            Ty::Kernel,
            span,
        )
    }

    /// `deep(kernel, mlp([64, 8]))` and `mlp([...])`.
    fn deep(&mut self, callee: &Ident, args: &[Arg], span: Span, ctx: Context) -> TExpr {
        if callee.name == "mlp" {
            return self.mlp(args, span);
        }
        let positional = args.iter().take_while(|a| a.name.is_none()).count();
        let named = &args[positional..];
        if positional != 2 {
            self.arity_error(callee, 2, positional);
            return Self::unknown(span);
        }
        let mut groups = None;
        for a in named {
            let n = a.name.as_ref().map_or("", |n| n.name.as_str());
            let value = match a.value.kind {
                ExprKind::Int(i) if i > 0 => usize::try_from(i).ok(),
                _ => None,
            };
            match (n, value) {
                ("groups", Some(g)) if groups.is_none() => groups = Some(g),
                _ => {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            a.span,
                            "`deep` takes a kernel, a network and optionally `groups = G` (a positive integer): `deep(rbf(ell), mlp([64, 6]), groups = 6)`",
                        )
                        .with_label("here"),
                    );
                    return Self::unknown(span);
                }
            }
        }
        let k = self.expr(&args[0].value, ctx);
        let net = self.expr(&args[1].value, ctx);
        if !matches!(k.ty, Ty::Kernel | Ty::Unknown) {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    k.span,
                    format!("`deep` needs a kernel first, found {}", k.ty),
                )
                .with_label("not a kernel"),
            );
        }
        if !matches!(net.ty, Ty::Network | Ty::Unknown) {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    net.span,
                    format!(
                        "`deep` needs a network second, e.g. `mlp([64, 8])`, found {}",
                        net.ty
                    ),
                )
                .with_label("not a network"),
            );
        }
        TExpr::new(
            TKind::Deep {
                kernel: Box::new(k),
                net: Box::new(net),
                groups,
            },
            Ty::Kernel,
            span,
        )
    }

    /// `mlp([64, 8])` or `mlp([64, 8], activation = "tanh")`.
    fn mlp(&mut self, args: &[Arg], span: Span) -> TExpr {
        use tempest_model::network::Activation;
        let usage = "`mlp` takes a list of positive layer widths and optionally an activation: `mlp([64, 8])`, `mlp([64, 8], activation = \"tanh\")`";
        let (mut widths, mut activation) = (None, Some(Activation::Relu));
        let mut bad = args.is_empty() || args.len() > 2;
        for (i, a) in args.iter().enumerate() {
            match (i, a.name.as_ref().map(|n| n.name.as_str())) {
                (0, None) => {
                    widths = match &a.value.kind {
                        ExprKind::Array(xs) => xs
                            .iter()
                            .map(|x| match x.kind {
                                ExprKind::Int(i) if i > 0 => usize::try_from(i).ok(),
                                _ => None,
                            })
                            .collect::<Option<Vec<usize>>>()
                            .filter(|w| !w.is_empty()),
                        _ => None,
                    };
                    bad |= widths.is_none();
                    if let (Some(ws), ExprKind::Array(xs)) = (&widths, &a.value.kind)
                        && let Some(e) = network_too_large(ws, xs)
                    {
                        self.error(e);
                        return Self::unknown(span);
                    }
                }
                (1, Some("activation")) => {
                    activation = match &a.value.kind {
                        ExprKind::Str(name) => Activation::from_name(name),
                        _ => None,
                    };
                    if activation.is_none() {
                        let names: Vec<String> = Activation::ALL
                            .iter()
                            .map(|(_, n)| format!("\"{n}\""))
                            .collect();
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                a.value.span,
                                format!("the activation of `mlp` is one of {}", names.join(", ")),
                            )
                            .with_label("unknown activation"),
                        );
                        return Self::unknown(span);
                    }
                }
                _ => bad = true,
            }
        }
        match (widths, activation) {
            (Some(widths), Some(activation)) if !bad => {
                TExpr::new(TKind::Mlp { widths, activation }, Ty::Network, span)
            }
            _ => {
                self.error(Error::at(ErrorKind::Type, span, usage).with_label("here"));
                Self::unknown(span)
            }
        }
    }

    fn builtin(
        &mut self,
        b: Builtin,
        callee: &Ident,
        args: &[Arg],
        span: Span,
        ctx: Context,
    ) -> TExpr {
        let vals: Vec<TExpr> = args.iter().map(|a| self.expr(&a.value, ctx)).collect();
        if let Some(a) = args.iter().find(|a| a.name.is_some()) {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    a.span,
                    format!("`{}` takes no named arguments", b.name()),
                )
                .with_label("named argument"),
            );
        }
        if vals.len() != b.arity() {
            self.arity_error(callee, b.arity(), vals.len());
            return Self::unknown(span);
        }
        if vals.iter().any(|v| v.ty.is_unknown()) {
            return TExpr::new(TKind::Builtin(b, vals), Ty::Unknown, span);
        }
        let res: Result<Ty, String> = if b.is_elementwise() {
            let t = &vals[0].ty;
            if t.is_numeric() {
                Ok(t.as_real())
            } else {
                Err(format!(
                    "`{}` needs a number, vector or matrix, found {t}",
                    b.name()
                ))
            }
        } else {
            use Builtin::*;
            match b {
                Pow => types::binary(tempest_syntax::ast::BinOp::Pow, &vals[0].ty, &vals[1].ty),
                Pi | E => Ok(Ty::Real),
                Logsumexp | Sum | Mean => match &vals[0].ty {
                    Ty::Vector(_) | Ty::IntArray(_) | Ty::Matrix(..) => Ok(Ty::Real),
                    t => Err(format!(
                        "`{}` needs a vector or matrix, found {t}",
                        b.name()
                    )),
                },
                Dot | Sqdist => match (&vals[0].ty.as_real(), &vals[1].ty.as_real()) {
                    (Ty::Vector(n), Ty::Vector(m)) if n.compatible(m) != Some(false) => {
                        Ok(Ty::Real)
                    }
                    (Ty::Real, Ty::Real) if b == Sqdist => Ok(Ty::Real),
                    (x, y) => Err(format!(
                        "`{}` needs two vectors of the same length, found {x} and {y}",
                        b.name()
                    )),
                },
                Col => match (&vals[0].ty, &vals[1].ty) {
                    (Ty::Matrix(r, _), Ty::Int) => Ok(Ty::Vector(r.clone())),
                    (x, y) => Err(format!(
                        "`col` takes a matrix and a column index (an int), found {x} and {y}"
                    )),
                },
                Rows | Cols => match &vals[0].ty {
                    Ty::Matrix(..) | Ty::Vector(_) | Ty::IntArray(_) => Ok(Ty::Int),
                    t => Err(format!(
                        "`{}` needs a matrix or vector, found {t}",
                        b.name()
                    )),
                },
                _ => Err("internal: unhandled builtin".to_string()),
            }
        };
        let ty = match res {
            Ok(t) => t,
            Err(msg) => {
                self.error(Error::at(ErrorKind::Type, span, msg).with_label("here"));
                Ty::Unknown
            }
        };
        TExpr::new(TKind::Builtin(b, vals), ty, span)
    }

    /// A distribution after `~`, for an outcome of type `lhs`.
    pub(super) fn dist_call(&mut self, call: &Call, lhs: &Ty) -> Option<DistCall> {
        let name = call.name.name.as_str();
        let (dist, params, options, discrete): (DistRef, Vec<String>, Vec<(&str, f64)>, bool) =
            if let Some(Symbol::Function { index, span: def }) =
                self.scope.globals.get(name).cloned()
            {
                let f = &self.graph.functions[index];
                if f.kind != FunctionKind::Likelihood {
                    self.error(
                        Error::at(
                            ErrorKind::Type,
                            call.name.span,
                            format!(
                                "`{name}` is {}, not a likelihood",
                                if f.kind == FunctionKind::Kernel {
                                    "a kernel"
                                } else {
                                    "an ODE system"
                                }
                            ),
                        )
                        .with_label("not a distribution")
                        .with_secondary(def, "defined here"),
                    );
                    return None;
                }
                // A likelihood declared with fewer than two parameters has
                // its error at the definition already.
                if f.params.len() < 2 {
                    return None;
                }
                let discrete = f.params[0].1 == Ty::Int;
                (
                    DistRef::User(index),
                    f.params[1..].iter().map(|p| p.0.clone()).collect(),
                    vec![],
                    discrete,
                )
            } else if let Some(l) = self.registry.likelihood(name).cloned() {
                let mut ps = vec!["f".to_string()];
                ps.extend(l.param_names());
                (DistRef::Rust(l), ps, vec![], false)
            } else if let Some(d) = Dist::from_name(name) {
                (
                    DistRef::Builtin(d),
                    d.params().iter().map(|p| p.name.to_string()).collect(),
                    d.options().to_vec(),
                    d.support().is_discrete(),
                )
            } else {
                let mut err = Error::at(
                    ErrorKind::Name,
                    call.name.span,
                    format!("unknown distribution `{name}`"),
                )
                .with_label("not a distribution");
                let mut names: Vec<String> =
                    Dist::ALL.iter().map(|d| d.name().to_string()).collect();
                names.extend(
                    self.scope
                        .globals
                        .iter()
                        .filter(|(_, s)| matches!(s, Symbol::Function { .. }))
                        .map(|(n, _)| n.clone()),
                );
                if name == "gp" {
                    err = err.with_note("latent GPs are declared as `f ~ gp(mean, kernel)` with a new name on the left");
                } else if let Some(h) =
                    super::scope::suggest(name, names.iter().map(|s| s.as_str()))
                {
                    err = err.with_note(format!("did you mean `{h}`?"));
                }
                self.error(err);
                for a in &call.args {
                    self.expr(&a.value, Context::Model);
                }
                return None;
            };
        let mut slots: Vec<Option<TExpr>> = vec![None; params.len()];
        let mut opts: Vec<(String, f64)> =
            options.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let mut next = 0;
        for a in &call.args {
            if let Some(n) = &a.name
                && let Some(o) = opts.iter_mut().find(|(on, _)| *on == n.name)
            {
                match constant(&a.value) {
                    Some(v) => o.1 = v,
                    None => self.error(
                        Error::at(
                            ErrorKind::Type,
                            a.value.span,
                            format!("the option `{}` must be a number", n.name),
                        )
                        .with_label("not a constant"),
                    ),
                }
                continue;
            }
            let v = self.expr(&a.value, Context::Model);
            let idx = match &a.name {
                Some(n) => match params.iter().position(|p| *p == n.name) {
                    Some(i) => i,
                    None => {
                        let mut all: Vec<String> = params.clone();
                        all.extend(options.iter().map(|(o, _)| o.to_string()));
                        self.error(
                            Error::at(
                                ErrorKind::Name,
                                n.span,
                                format!("`{name}` has no argument `{}`", n.name),
                            )
                            .with_label("unknown argument")
                            .with_note(format!("its arguments: {}", all.join(", "))),
                        );
                        continue;
                    }
                },
                None => {
                    while next < slots.len() && slots[next].is_some() {
                        next += 1;
                    }
                    if next >= slots.len() {
                        self.error(
                            Error::at(
                                ErrorKind::Type,
                                a.span,
                                format!(
                                    "`{name}` takes {} argument{}",
                                    params.len(),
                                    if params.len() == 1 { "" } else { "s" }
                                ),
                            )
                            .with_label("extra argument")
                            .with_note(format!("its arguments: {}", params.join(", "))),
                        );
                        continue;
                    }
                    next += 1;
                    next - 1
                }
            };
            if slots[idx].is_some() {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        a.span,
                        format!("`{}` of `{name}` is given twice", params[idx]),
                    )
                    .with_label("repeated argument"),
                );
                continue;
            }
            slots[idx] = Some(v);
        }
        let missing: Vec<&String> = params
            .iter()
            .zip(&slots)
            .filter(|(_, s)| s.is_none())
            .map(|(p, _)| p)
            .collect();
        if !missing.is_empty() {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    call.span,
                    format!(
                        "`{name}` is missing {}",
                        missing
                            .iter()
                            .map(|m| format!("`{m}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .with_label("missing arguments")
                .with_note(format!("write `{name}({})`", params.join(", "))),
            );
            return None;
        }
        let args: Vec<TExpr> = slots.into_iter().flatten().collect();
        if let DistRef::Builtin(d) = &dist {
            for (p, a) in d.params().iter().zip(&args) {
                if let Some(x) = texpr_literal(a)
                    && p.positive
                    && x <= 0.0
                {
                    self.error(
                        Error::at(
                            ErrorKind::Constraint,
                            a.span,
                            format!(
                                "`{}` of `{name}` must be positive, found {}",
                                p.name,
                                tempest_core::error::num(x)
                            ),
                        )
                        .with_label("not positive"),
                    );
                }
            }
        }
        self.check_dist_shapes(name, &dist, &args, lhs, discrete, call.span);
        Some(DistCall {
            dist,
            name: name.to_string(),
            args,
            options: opts,
            span: call.span,
        })
    }

    fn check_dist_shapes(
        &mut self,
        name: &str,
        dist: &DistRef,
        args: &[TExpr],
        lhs: &Ty,
        discrete: bool,
        span: Span,
    ) {
        if lhs.is_unknown() {
            return;
        }
        if discrete && !matches!(lhs, Ty::Int | Ty::IntArray(_)) {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    span,
                    format!("`{name}` is a distribution over integers, but the outcome is {lhs}"),
                )
                .with_label("discrete distribution")
                .with_note("declare the outcome as `int` or `int[n]`"),
            );
        }
        let n = match lhs {
            Ty::Vector(n) | Ty::IntArray(n) => Some(n.clone()),
            Ty::Int | Ty::Real => None,
            Ty::Matrix(..) => {
                self.error(
                    Error::at(ErrorKind::Type, span, format!("a distribution applies to a number or a vector of outcomes, found {lhs}"))
                        .with_label("matrix outcome"),
                );
                return;
            }
            t => {
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        span,
                        format!("{t} cannot have a distribution"),
                    )
                    .with_label("here"),
                );
                return;
            }
        };
        let categorical = matches!(dist, DistRef::Builtin(Dist::CategoricalLogit));
        for (i, a) in args.iter().enumerate() {
            let t = &a.ty;
            if t.is_unknown() {
                continue;
            }
            if categorical && i == 0 {
                let ok = match (t, &n) {
                    (Ty::Matrix(r, _), Some(n)) => r.compatible(n) != Some(false),
                    (Ty::Vector(_), None) => true,
                    _ => false,
                };
                if !ok {
                    self.error(
                        Error::at(ErrorKind::Shape, a.span, format!("`categorical_logit` needs one row of class scores per outcome: a matrix [n, C] for {lhs}, found {t}"))
                            .with_label("wrong shape")
                            .with_note("replicate the latent GP per class: `g ~ gp(0, k)[C]` then `y ~ categorical_logit(g(X))`"),
                    );
                }
                continue;
            }
            let ok = match (t, &n) {
                (Ty::Int | Ty::Real, _) => true,
                (Ty::Vector(m) | Ty::IntArray(m), Some(n)) => {
                    if m.compatible(n) == Some(false) {
                        self.error(
                            Error::at(
                                ErrorKind::Shape,
                                a.span,
                                format!("this argument has length {m}, but there are {n} outcomes"),
                            )
                            .with_label("length mismatch"),
                        );
                    }
                    true
                }
                _ => false,
            };
            if !ok {
                self.error(
                    Error::at(ErrorKind::Type, a.span, format!("an argument of `{name}` must be a number or one value per outcome ({lhs}), found {t}"))
                        .with_label("wrong type"),
                );
            }
        }
    }
}

/// A numeric literal (possibly negated).
pub(super) fn constant(e: &tempest_syntax::ast::Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(i) => Some(*i as f64),
        ExprKind::Real(r) => Some(*r),
        ExprKind::Unary(tempest_syntax::ast::UnOp::Neg, x) => constant(x).map(|v| -v),
        _ => None,
    }
}

/// The value of a numeric literal expression, possibly negated.
/// `mlp([...])` with widths `ws` written as `xs`: an error at the first
/// width that takes the network past [`MAX_WEIGHTS`] weights, counted with
/// one input column (the fewest it can have), so that no size is ever
/// allocated from it.
///
/// [`MAX_WEIGHTS`]: tempest_model::network::MAX_WEIGHTS
fn network_too_large(ws: &[usize], xs: &[tempest_syntax::ast::Expr]) -> Option<Error> {
    use tempest_model::network::{MAX_WEIGHTS, NetSpec};
    let (k, count) = NetSpec::first_layer_past_limit(ws)?;
    Some(
        Error::at(
            ErrorKind::Shape,
            xs.get(k).map_or(Span::new(0, 0), |x| x.span),
            format!(
                "a feature network has at most {MAX_WEIGHTS} weights; with this layer of width {} it has at least {count} (counting one input column)",
                ws[k]
            ),
        )
        .with_label("this width"),
    )
}

fn texpr_literal(e: &TExpr) -> Option<f64> {
    match &e.kind {
        TKind::Int(i) => Some(*i as f64),
        TKind::Real(r) => Some(*r),
        TKind::Unary(tempest_syntax::ast::UnOp::Neg, x) => texpr_literal(x).map(|v| -v),
        _ => None,
    }
}
