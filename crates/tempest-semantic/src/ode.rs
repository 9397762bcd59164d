//! Checking `ode(system, x0, t0, ts, p...)`: the solution of a `system`
//! definition at the times ts, a `matrix[T, S]`.

use super::Checker;
use super::scope::{Context, Symbol};
use tempest_core::error::{Error, ErrorKind};
use tempest_ir::expr::{Ref, TExpr, TKind};
use tempest_ir::types::{Size, Ty};
use tempest_math::ode::OdeSettings;
use tempest_syntax::ast::{Arg, ExprKind, FunctionKind, Ident, Span};

/// The usage line shown with every error about an `ode` call.
const USAGE: &str = "write `ode(system, x0, t0, ts, p1, ...)`, optionally with `rtol = 1e-6, atol = 1e-6, max_steps = 100000`";

impl Checker<'_> {
    /// Check an `ode(...)` call.
    pub(super) fn ode(&mut self, callee: &Ident, args: &[Arg], span: Span, ctx: Context) -> TExpr {
        if ctx == Context::Function {
            self.error(
                Error::at(
                    ErrorKind::Name,
                    callee.span,
                    "`ode` cannot be called inside a function body",
                )
                .with_label("here")
                .with_note(
                    "solve a system in the model block: `let x = ode(sys, x0, t0, ts, theta)`",
                ),
            );
            return Self::unknown(span);
        }
        let (positional, named): (Vec<&Arg>, Vec<&Arg>) =
            args.iter().partition(|a| a.name.is_none());
        let Some(first) = positional.first() else {
            self.error(
                Error::at(ErrorKind::Type, span, "`ode` needs a system, x0, t0 and ts")
                    .with_label("no arguments")
                    .with_note(USAGE),
            );
            return Self::unknown(span);
        };
        let system = match &first.value.kind {
            ExprKind::Var(n) => match self.scope.globals.get(n).cloned() {
                Some(Symbol::Function { index, .. })
                    if self.graph.functions[index].kind == FunctionKind::System =>
                {
                    Some(index)
                }
                _ => None,
            },
            _ => None,
        };
        let Some(system) = system else {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    first.value.span,
                    "the first argument of `ode` names a `system` defined in this file",
                )
                .with_label("not a system")
                .with_note("define one at the top level: `system sho(t : real, x : vector[2], w : real) { [x[1], -w^2 * x[0]] }`"),
            );
            for a in &args[1..] {
                self.expr(&a.value, ctx);
            }
            return Self::unknown(span);
        };
        let settings = self.ode_settings(&named);
        let vals: Vec<TExpr> = positional[1..]
            .iter()
            .map(|a| self.expr(&a.value, ctx))
            .collect();
        let f = &self.graph.functions[system];
        let name = f.name.clone();
        let sys_params: Vec<(String, Ty)> = f.params.iter().skip(2).cloned().collect();
        let state = match f.params.get(1) {
            Some((_, Ty::Vector(n))) => n.clone(),
            _ => Size::Any,
        };
        let want = 3 + sys_params.len();
        if vals.len() != want {
            self.error(
                Error::at(
                    ErrorKind::Type,
                    callee.span,
                    format!(
                        "`ode({name}, ...)` takes x0, t0, ts and the {} parameter{} of `{name}`: {} argument{} after the system, found {}",
                        sys_params.len(),
                        if sys_params.len() == 1 { "" } else { "s" },
                        want,
                        if want == 1 { "" } else { "s" },
                        vals.len()
                    ),
                )
                .with_label("wrong number of arguments")
                .with_note(USAGE),
            );
            return Self::unknown(span);
        }
        if vals.iter().any(|v| v.ty.is_unknown()) {
            return Self::unknown(span);
        }
        let mut ok = true;
        // x0: a vector as long as the state.
        match vals[0].ty.as_real() {
            Ty::Vector(n) if n.compatible(&state) != Some(false) => {}
            t => {
                ok = false;
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        vals[0].span,
                        format!(
                            "x0 of `{name}` is its initial state, a vector[{state}]; found {t}"
                        ),
                    )
                    .with_label("initial state"),
                );
            }
        }
        // t0 and ts: numbers fixed by the data.
        let times = [(&vals[1], "t0", true), (&vals[2], "ts", false)];
        for (v, what, scalar) in times {
            let shape_ok = if scalar {
                v.ty.is_scalar() && v.ty != Ty::Bool
            } else {
                matches!(v.ty, Ty::Vector(_) | Ty::IntArray(_))
            };
            if !shape_ok {
                ok = false;
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        v.span,
                        format!(
                            "{what} of `ode` is {}; found {}",
                            if scalar {
                                "the initial time, a number"
                            } else {
                                "the output times, a vector"
                            },
                            v.ty
                        ),
                    )
                    .with_label(what),
                );
                continue;
            }
            let varies = v.refs().iter().any(|r| !matches!(r, Ref::Data(_))) || v.uses_latent();
            if varies {
                ok = false;
                self.error(
                    Error::at(
                        ErrorKind::Unsupported,
                        v.span,
                        format!("{what} of `ode` must be data or numbers, not depend on hypers, params or lets"),
                    )
                    .with_label(what),
                );
            }
        }
        for ((pname, pty), v) in sys_params.iter().zip(&vals[3..]) {
            let fits = match pty {
                Ty::Vector(n) => {
                    matches!(v.ty.as_real(), Ty::Vector(m) if m.compatible(n) != Some(false))
                }
                _ => v.ty.is_scalar() && v.ty != Ty::Bool,
            };
            if !fits {
                ok = false;
                self.error(
                    Error::at(
                        ErrorKind::Type,
                        v.span,
                        format!("`{pname}` of `{name}` is {pty}; found {}", v.ty),
                    )
                    .with_label("wrong type"),
                );
            }
        }
        if !ok {
            return Self::unknown(span);
        }
        let rows = match &vals[2].ty {
            Ty::Vector(n) | Ty::IntArray(n) => n.clone(),
            _ => Size::Any,
        };
        let cols = match (&state, vals[0].ty.as_real()) {
            (Size::Any, Ty::Vector(n)) => n,
            (s, _) => s.clone(),
        };
        TExpr::new(
            TKind::Ode {
                system,
                args: vals,
                settings,
            },
            Ty::Matrix(rows, cols),
            span,
        )
    }

    /// `rtol`, `atol` and `max_steps`: positive numeric literals;
    /// `sensitivity`: `auto`, `forward` or `adjoint`.
    fn ode_settings(&mut self, named: &[&Arg]) -> OdeSettings {
        let mut s = OdeSettings::default();
        for a in named {
            let Some(n) = &a.name else { continue };
            if n.name == "sensitivity" {
                let named = match &a.value.kind {
                    ExprKind::Var(v) => tempest_math::ode::Sensitivity::from_name(v),
                    _ => None,
                };
                s.sensitivity = match named {
                    Some(choice) => choice,
                    None => {
                        self.error(
                            Error::at(
                                ErrorKind::Settings,
                                a.value.span,
                                "`sensitivity` of `ode` must be `auto`, `forward` or `adjoint`",
                            )
                            .with_label("here"),
                        );
                        continue;
                    }
                };
                continue;
            }
            let v = super::calls::constant(&a.value);
            let ok = match (n.name.as_str(), v) {
                ("rtol", Some(x)) if x > 0.0 && x < 1.0 => {
                    s.rtol = x;
                    true
                }
                ("atol", Some(x)) if x > 0.0 && x.is_finite() => {
                    s.atol = x;
                    true
                }
                ("max_steps", Some(x)) if (1.0..=1e8).contains(&x) && x.fract() == 0.0 => {
                    s.max_steps = x as usize;
                    true
                }
                ("rtol" | "atol" | "max_steps", _) => false,
                (other, _) => {
                    self.error(
                        Error::at(
                            ErrorKind::Name,
                            n.span,
                            format!(
                                "`ode` has no option `{other}` (options: rtol, atol, max_steps, sensitivity)"
                            ),
                        )
                        .with_label("unknown option"),
                    );
                    continue;
                }
            };
            if !ok {
                let want = match n.name.as_str() {
                    "rtol" => "a number between 0 and 1 (exclusive)",
                    "atol" => "a positive number",
                    _ => "a whole number from 1 to 100000000",
                };
                self.error(
                    Error::at(
                        ErrorKind::Settings,
                        a.value.span,
                        format!("`{}` of `ode` must be {want}, written as a literal", n.name),
                    )
                    .with_label("here"),
                );
            }
        }
        s
    }
}
