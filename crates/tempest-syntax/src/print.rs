//! The AST as an indented S-expression (`tempest emit ast`). Each
//! declaration and statement shows its `line:col`.

use super::ast::*;
use super::diagnostics::SourceFile;
use std::fmt::Write;

/// Print a program, one item per top-level form.
pub fn program(p: &Program, src: &SourceFile) -> String {
    let mut out = String::from("(program\n");
    for item in &p.items {
        match item {
            Item::Function(f) => function(&mut out, f, src),
            Item::Block(b) => block(&mut out, b, src),
        }
    }
    out.push_str(")\n");
    out
}

fn at(src: &SourceFile, span: Span) -> String {
    let (l, c) = src.line_col(span.start);
    format!("@{l}:{c}")
}

fn function(out: &mut String, f: &FunctionDef, src: &SourceFile) {
    let kind = match f.kind {
        FunctionKind::Likelihood => "likelihood",
        FunctionKind::Kernel => "kernel",
        FunctionKind::System => "system",
    };
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("({} {})", p.name.name, ty(&p.ty)))
        .collect();
    let _ = write!(
        out,
        "  ({kind} {} {} ({})",
        f.name.name,
        at(src, f.span),
        params.join(" ")
    );
    if let Some((a, b)) = &f.inputs {
        let _ = write!(out, " (inputs {} {})", a.name, b.name);
    }
    out.push('\n');
    for (n, e) in &f.body.lets {
        let _ = writeln!(out, "    (let {} {})", n.name, expr(e));
    }
    let _ = writeln!(out, "    {})", expr(&f.body.value));
}

fn block(out: &mut String, b: &Block, src: &SourceFile) {
    let _ = writeln!(out, "  ({} {}", b.name(), at(src, b.span));
    match &b.kind {
        BlockKind::Data(ds) | BlockKind::Hyper(ds) | BlockKind::Param(ds) => {
            for d in ds {
                let _ = write!(out, "    (decl {} {}", at(src, d.span), d.name.name);
                if d.fixed {
                    out.push_str(" fixed");
                }
                let _ = write!(out, " {}", ty(&d.ty));
                if let Some(i) = &d.init {
                    let _ = write!(out, " (= {})", expr(i));
                }
                if let Some(p) = &d.prior {
                    let _ = write!(out, " (~ {})", call(p));
                }
                out.push_str(")\n");
            }
        }
        BlockKind::Model(stmts) => {
            for s in stmts {
                match s {
                    Stmt::Let { name, value, span } => {
                        let _ = writeln!(
                            out,
                            "    (let {} {} {})",
                            at(src, *span),
                            name.name,
                            expr(value)
                        );
                    }
                    Stmt::Gp {
                        name,
                        mean,
                        kernel,
                        replicas,
                        span,
                    } => {
                        let _ = write!(
                            out,
                            "    (gp {} {} (mean {}) (kernel {})",
                            at(src, *span),
                            name.name,
                            expr(mean),
                            expr(kernel)
                        );
                        if let Some(r) = replicas {
                            let _ = write!(out, " (replicas {})", expr(r));
                        }
                        out.push_str(")\n");
                    }
                    Stmt::Sample {
                        lhs,
                        dist,
                        temperature,
                        span,
                    } => {
                        let _ =
                            write!(out, "    (~ {} {} {}", at(src, *span), lhs.name, call(dist));
                        if let Some(t) = temperature {
                            let _ = write!(out, " (power {})", expr(t));
                        }
                        out.push_str(")\n");
                    }
                }
            }
        }
        BlockKind::Guide(es) => {
            for e in es {
                let _ = writeln!(
                    out,
                    "    (family {} {} {})",
                    at(src, e.span),
                    e.target.name,
                    call(&e.family)
                );
            }
        }
        BlockKind::Estimate { items, using } => {
            for i in items {
                let _ = writeln!(
                    out,
                    "    (estimate {} {} (E {}))",
                    at(src, i.span),
                    i.name.name,
                    expr(&i.expr)
                );
            }
            if let Some(u) = using {
                let _ = writeln!(out, "    (using {})", call(u));
            }
        }
        BlockKind::Infer(spec) => {
            let _ = writeln!(out, "    {}", engine(spec));
        }
    }
    out.push_str("  )\n");
}

fn engine(spec: &EngineSpec) -> String {
    let mut s = format!("(engine {}", spec.name.name);
    for st in &spec.settings {
        let v = match &st.value {
            SettingValue::Engine(e) => engine(e),
            SettingValue::Expr(e) => expr(e),
        };
        let _ = write!(s, " ({} {v})", st.key.name);
    }
    s.push(')');
    s
}

/// A type as an S-expression: `(vector<lower=0> d)`.
pub fn ty(t: &TypeExpr) -> String {
    let base = match t.base {
        BaseType::Int => "int",
        BaseType::Real => "real",
        BaseType::Vector => "vector",
        BaseType::Matrix => "matrix",
        BaseType::Positive => "positive",
        BaseType::Unit => "unit",
    };
    let mut s = base.to_string();
    if !t.bounds.is_empty() {
        let b: Vec<String> = t
            .bounds
            .iter()
            .map(|b| {
                let k = if b.kind == BoundKind::Lower {
                    "lower"
                } else {
                    "upper"
                };
                format!("{k}={}", expr(&b.value))
            })
            .collect();
        let _ = write!(s, "<{}>", b.join(","));
    }
    if t.dims.is_empty() {
        s
    } else {
        let d: Vec<String> = t.dims.iter().map(expr).collect();
        format!("({s} {})", d.join(" "))
    }
}

fn call(c: &Call) -> String {
    let mut s = format!("({}", c.name.name);
    for a in &c.args {
        s.push(' ');
        s.push_str(&arg(a));
    }
    s.push(')');
    s
}

fn arg(a: &Arg) -> String {
    match &a.name {
        Some(n) => format!("(:{} {})", n.name, expr(&a.value)),
        None => expr(&a.value),
    }
}

/// An expression as an S-expression.
pub fn expr(e: &Expr) -> String {
    tempest_core::limits::deep(|| expr_inner(e))
}

fn expr_inner(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Real(r) => format!("{r:?}"),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Var(v) => v.clone(),
        ExprKind::Array(xs) => {
            let v: Vec<String> = xs.iter().map(expr).collect();
            format!("[{}]", v.join(" "))
        }
        ExprKind::Range(a, b) => format!("(.. {} {})", expr(a), expr(b)),
        ExprKind::Unary(op, x) => {
            let o = if *op == UnOp::Neg { "neg" } else { "!" };
            format!("({o} {})", expr(x))
        }
        ExprKind::Binary(op, a, b) => format!("({} {} {})", op.symbol(), expr(a), expr(b)),
        ExprKind::Call(f, args) => {
            let mut s = format!("({}", f.name);
            for a in args {
                s.push(' ');
                s.push_str(&arg(a));
            }
            s.push(')');
            s
        }
        ExprKind::Index(b, idx) => {
            let v: Vec<String> = idx.iter().map(expr).collect();
            format!("(index {} {})", expr(b), v.join(" "))
        }
        ExprKind::If(c, a, b) => format!("(if {} {} {})", expr(c), expr(a), expr(b)),
    }
}

/// An expression as model text (operations in parentheses where they
/// nest), for messages that echo what a user wrote: `-3`, `rbf(1.5)`.
pub fn source(e: &Expr) -> String {
    tempest_core::limits::deep(|| source_inner(e))
}

fn source_inner(e: &Expr) -> String {
    let list = |xs: &[Expr]| xs.iter().map(source).collect::<Vec<_>>().join(", ");
    let nested = |x: &Expr| match x.kind {
        ExprKind::Binary(..) | ExprKind::If(..) | ExprKind::Range(..) => format!("({})", source(x)),
        _ => source(x),
    };
    match &e.kind {
        ExprKind::Int(i) => i.to_string(),
        ExprKind::Real(r) => tempest_core::error::num(*r),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Var(v) => v.clone(),
        ExprKind::Array(xs) => format!("[{}]", list(xs)),
        ExprKind::Range(a, b) => format!("{}..{}", nested(a), nested(b)),
        ExprKind::Unary(op, x) => {
            let o = if *op == UnOp::Neg { "-" } else { "!" };
            format!("{o}{}", nested(x))
        }
        ExprKind::Binary(op, a, b) => format!("{} {} {}", nested(a), op.symbol(), nested(b)),
        ExprKind::Call(f, args) => {
            let a: Vec<String> = args
                .iter()
                .map(|a| match &a.name {
                    Some(n) => format!("{} = {}", n.name, source(&a.value)),
                    None => source(&a.value),
                })
                .collect();
            format!("{}({})", f.name, a.join(", "))
        }
        ExprKind::Index(b, idx) => format!("{}[{}]", nested(b), list(idx)),
        ExprKind::If(c, a, b) => format!("if {} then {} else {}", source(c), source(a), source(b)),
    }
}
