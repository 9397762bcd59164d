//! The graph as text (`tempest emit ir`): one node per line with its type,
//! expressions in prefix form with resolved references (`hyper:ell`).

use super::expr::{Ref, TExpr, TKind};
use super::graph::{DataSource, DistCall, DistRef, Family, Function, Graph, GuideTarget};
use std::fmt::Write;

/// Print the whole graph.
pub fn graph(g: &Graph) -> String {
    let mut o = String::from("graph\n");
    let ex = |e: &TExpr| expr_in(e, g);
    for (i, f) in g.functions.iter().enumerate() {
        let params: Vec<String> = f.params.iter().map(|(n, t)| format!("{n} : {t}")).collect();
        let _ = writeln!(
            o,
            "  fn       %f{i} {:?} {}({}) = {}",
            f.kind,
            f.name,
            params.join(", "),
            expr_with(&f.body, &g.functions, &local_names(f))
        );
    }
    for (i, d) in g.data.iter().enumerate() {
        let src = match &d.source {
            DataSource::ByName => format!("<- `{}`", d.name),
            DataSource::Columns(cs) => format!("<- columns({})", cs.join(", ")),
            DataSource::Except(cs) => format!("<- columns(except {})", cs.join(", ")),
            DataSource::Value => format!("= {}", d.value.as_ref().map(ex).unwrap_or_default()),
        };
        let _ = writeln!(
            o,
            "  data     %d{i} {} : {}{} {src}",
            d.name,
            d.ty,
            bounds(&d.bounds, g)
        );
    }
    for (i, h) in g.hypers.iter().enumerate() {
        let init = h
            .init
            .as_ref()
            .map(|e| format!(" = {}", ex(e)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  hyper    %h{i} {} : {}{}{init}{}{}",
            h.name,
            h.ty,
            bounds(&h.bounds, g),
            if h.fixed { " (fixed)" } else { "" },
            h.prior
                .as_ref()
                .map(|p| format!(" ~ {}", dist(p, g)))
                .unwrap_or_default()
        );
    }
    for (i, p) in g.params.iter().enumerate() {
        let _ = writeln!(
            o,
            "  param    %p{i} {} : {}{}",
            p.name,
            p.ty,
            bounds(&p.bounds, g)
        );
    }
    for (i, gp) in g.gps.iter().enumerate() {
        let reps = gp
            .replicas
            .as_ref()
            .map(|r| format!(" x {}", ex(r)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  gp       %g{i} {} ~ gp(mean = {}, kernel = {}){reps}",
            gp.name,
            ex(&gp.mean),
            ex(&gp.kernel)
        );
    }
    for (i, s) in g.sites.iter().enumerate() {
        let _ = writeln!(
            o,
            "  site     %s{i} = {}({})",
            g.gps[s.gp].name,
            ex(&s.input)
        );
    }
    for (i, l) in g.lets.iter().enumerate() {
        let _ = writeln!(
            o,
            "  let      %l{i} {} : {} = {}",
            l.name,
            l.value.ty,
            ex(&l.value)
        );
    }
    for ob in &g.observations {
        let t = ob
            .temperature
            .as_ref()
            .map(|t| format!(" ^ {}", ex(t)))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  observe  {} ~ {}{t}",
            g.data[ob.data].name,
            dist(&ob.dist, g)
        );
    }
    for p in &g.priors {
        let _ = writeln!(
            o,
            "  prior    {} ~ {}",
            g.params[p.param].name,
            dist(&p.dist, g)
        );
    }
    for gd in &g.guides {
        let target = match gd.target {
            GuideTarget::Gp(i) => g.gps[i].name.clone(),
            GuideTarget::Param(i) => g.params[i].name.clone(),
        };
        let fam = match &gd.family {
            f @ (Family::Sites | Family::MeanField | Family::FullRank) => f.name().to_string(),
            Family::Inducing { m } => format!("inducing(m = {m})"),
            Family::Grid { m } => format!("grid(m = {m})"),
            Family::Gaussian { diag } => {
                format!("gaussian({})", if *diag { "diag" } else { "full" })
            }
        };
        let _ = writeln!(o, "  guide    {target} : {fam}");
    }
    for e in &g.estimates {
        let _ = writeln!(
            o,
            "  estimate {} : {} = E[{}]",
            e.name,
            e.expr.ty,
            ex(&e.expr)
        );
    }
    if let Some(m) = &g.estimate_method {
        let _ = writeln!(
            o,
            "  using    {}",
            tempest_syntax::print::expr(&tempest_syntax::ast::Expr {
                kind: tempest_syntax::ast::ExprKind::Call(m.name.clone(), m.args.clone()),
                span: m.span,
            })
        );
    }
    o
}

fn local_names(f: &Function) -> Vec<String> {
    let mut names: Vec<String> = f.params.iter().map(|(n, _)| n.clone()).collect();
    names.resize(f.n_locals, String::new());
    for (slot, _) in &f.lets {
        names[*slot] = format!("let{slot}");
    }
    names
}

fn bounds(b: &super::graph::BoundExprs, g: &Graph) -> String {
    let mut parts = Vec::new();
    if let Some(l) = &b.lower {
        parts.push(format!("lower={}", expr_in(l, g)));
    }
    if let Some(u) = &b.upper {
        parts.push(format!("upper={}", expr_in(u, g)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("<{}>", parts.join(", "))
    }
}

fn dist(d: &DistCall, g: &Graph) -> String {
    let args: Vec<String> = d.args.iter().map(|a| expr_in(a, g)).collect();
    let opts: Vec<String> = d
        .options
        .iter()
        .map(|(n, v)| format!("{n} = {v}"))
        .collect();
    let kind = match d.dist {
        DistRef::Builtin(_) => "",
        DistRef::User(_) => "user ",
        DistRef::Rust(_) => "rust ",
    };
    let all: Vec<String> = args.into_iter().chain(opts).collect();
    format!("{kind}{}({})", d.name, all.join(", "))
}

/// An expression, with references named through the graph.
pub fn expr_in(e: &TExpr, g: &Graph) -> String {
    let mut s = String::new();
    write_expr(
        &mut s,
        e,
        &|r| match r {
            Ref::Data(i) => format!("data:{}", g.data[i].name),
            Ref::Hyper(i) => format!("hyper:{}", g.hypers[i].name),
            Ref::Param(i) => format!("param:{}", g.params[i].name),
            Ref::Let(i) => format!("let:{}", g.lets[i].name),
            Ref::Local(i) => format!("local{i}"),
            Ref::Temperature => "temperature".to_string(),
        },
        &g.functions,
        Some(g),
    );
    s
}

/// An expression with locals named by `locals` (for function bodies and keys).
pub fn expr_with(e: &TExpr, functions: &[Function], locals: &[String]) -> String {
    let mut s = String::new();
    write_expr(
        &mut s,
        e,
        &|r| match r {
            Ref::Data(i) => format!("%d{i}"),
            Ref::Hyper(i) => format!("%h{i}"),
            Ref::Param(i) => format!("%p{i}"),
            Ref::Let(i) => format!("%l{i}"),
            Ref::Local(i) => locals
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("local{i}")),
            Ref::Temperature => "temperature".to_string(),
        },
        functions,
        None,
    );
    s
}

fn write_expr(
    s: &mut String,
    e: &TExpr,
    name: &dyn Fn(Ref) -> String,
    functions: &[Function],
    g: Option<&Graph>,
) {
    tempest_core::limits::deep(|| write_expr_inner(s, e, name, functions, g))
}

fn write_expr_inner(
    s: &mut String,
    e: &TExpr,
    name: &dyn Fn(Ref) -> String,
    functions: &[Function],
    g: Option<&Graph>,
) {
    let list = |s: &mut String, head: &str, xs: &[&TExpr]| {
        let _ = write!(s, "({head}");
        for x in xs {
            s.push(' ');
            write_expr(s, x, name, functions, g);
        }
        s.push(')');
    };
    match &e.kind {
        TKind::Int(i) => {
            let _ = write!(s, "{i}");
        }
        TKind::Real(r) => {
            let _ = write!(s, "{r:?}");
        }
        TKind::Bool(b) => {
            let _ = write!(s, "{b}");
        }
        TKind::Str(t) => {
            let _ = write!(s, "{t:?}");
        }
        TKind::Ref(r) => s.push_str(&name(*r)),
        TKind::Array(xs) => list(s, "array", &xs.iter().collect::<Vec<_>>()),
        TKind::Range(a, b) => list(s, "..", &[a, b]),
        TKind::Unary(op, a) => list(
            s,
            if *op == tempest_syntax::ast::UnOp::Neg {
                "neg"
            } else {
                "!"
            },
            &[a],
        ),
        TKind::Binary(op, a, b) => list(s, op.symbol(), &[a, b]),
        TKind::Builtin(b, xs) => list(s, b.name(), &xs.iter().collect::<Vec<_>>()),
        TKind::Kernel { kind, args, dims } => {
            let mut xs: Vec<&TExpr> = args.iter().flatten().collect();
            if let Some(d) = dims {
                xs.push(d);
            }
            let head = if dims.is_some() {
                format!("{} dims=last", kind.name())
            } else {
                kind.name().to_string()
            };
            list(s, &head, &xs)
        }
        TKind::UserKernel { func, args, dims } => {
            let mut xs: Vec<&TExpr> = args.iter().collect();
            if let Some(d) = dims {
                xs.push(d);
            }
            list(s, &functions[*func].name, &xs)
        }
        TKind::RustKernel { kernel, args, dims } => {
            let mut xs: Vec<&TExpr> = args.iter().collect();
            if let Some(d) = dims {
                xs.push(d);
            }
            list(s, kernel.name(), &xs)
        }
        TKind::Deep {
            kernel,
            net,
            groups,
        } => {
            list(s, "deep", &[kernel, net]);
            if let Some(g) = groups {
                let _ = write!(s, "[groups {g}]");
            }
        }
        TKind::Mlp { widths, activation } => {
            let _ = write!(s, "(mlp {widths:?} {})", activation.name());
        }
        TKind::GpApply { gp, input, site } => {
            let gname = g
                .map(|g| g.gps[*gp].name.clone())
                .unwrap_or_else(|| format!("%g{gp}"));
            if *site == usize::MAX {
                list(s, &gname, &[input]);
            } else {
                let _ = write!(s, "site:%s{site}[{gname}]");
            }
        }
        TKind::Index(b, idx) => {
            let mut xs: Vec<&TExpr> = vec![b];
            xs.extend(idx.iter());
            list(s, "index", &xs)
        }
        TKind::If(c, a, b) => list(s, "if", &[c, a, b]),
        TKind::Ode {
            system,
            args,
            settings,
        } => {
            let xs: Vec<&TExpr> = args.iter().collect();
            list(s, &format!("ode {}", functions[*system].name), &xs);
            let _ = write!(
                s,
                "[rtol {} atol {} max_steps {}",
                settings.rtol, settings.atol, settings.max_steps
            );
            // The default is not shown, so older listings read the same.
            if settings.sensitivity != tempest_math::ode::Sensitivity::Auto {
                let _ = write!(s, " sensitivity {}", settings.sensitivity.name());
            }
            s.push(']');
        }
    }
}
