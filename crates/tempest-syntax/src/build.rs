//! Build the spanned AST from pest's parse tree.

use super::ast::*;
use super::parser::Rule;
use pest::iterators::Pair;
use pest::pratt_parser::{Assoc, Op, PrattParser};
use std::sync::OnceLock;
use tempest_core::error::{Error, ErrorKind, Result};
use tempest_core::limits;

type P<'i> = Pair<'i, Rule>;

/// Keyword tokens carry no information for the AST.
fn not_kw(p: &P) -> bool {
    !matches!(
        p.as_rule(),
        Rule::kw_likelihood
            | Rule::kw_kernel
            | Rule::kw_system
            | Rule::kw_data
            | Rule::kw_hyper
            | Rule::kw_param
            | Rule::kw_model
            | Rule::kw_guide
            | Rule::kw_estimate
            | Rule::kw_infer
            | Rule::kw_let
            | Rule::kw_if
            | Rule::kw_then
            | Rule::kw_else
            | Rule::kw_using
            | Rule::gp_kw
    )
}

/// The span of a pair without trailing whitespace and comments (optional
/// endings of a rule consume the whitespace that follows them).
fn span_of(p: &P) -> Span {
    let s = p.as_span();
    Span::new(s.start(), s.start() + trim_trailing(s.as_str()).len())
}

/// `text` without trailing whitespace and comments.
fn trim_trailing(text: &str) -> &str {
    let mut t = text.trim_end();
    loop {
        if t.ends_with("*/")
            && let Some(open) = t.rfind("/*")
        {
            t = t[..open].trim_end();
            continue;
        }
        // A trailing line comment: the last line holds `//` outside a string.
        let line_start = t.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line = &t[line_start..];
        match line_comment_start(line) {
            Some(c) if line_start + c > 0 => t = t[..line_start + c].trim_end(),
            _ => return t,
        }
    }
}

/// Where a `//` comment starts in one line, ignoring `//` inside strings.
fn line_comment_start(line: &str) -> Option<usize> {
    let mut in_str = false;
    let b = line.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        match b[i] {
            b'"' => in_str = !in_str,
            b'\\' if in_str => i += 1,
            b'/' if !in_str && b[i + 1] == b'/' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn ident(p: P) -> Ident {
    Ident {
        name: p.as_str().to_string(),
        span: span_of(&p),
    }
}

fn unexpected(p: &P) -> Error {
    Error::internal(format!(
        "unexpected parse node {:?} `{}`",
        p.as_rule(),
        p.as_str()
    ))
}

/// Build the program from the `program` pair.
pub(super) fn program(p: P) -> Result<Program> {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    for item in p.into_inner().filter(not_kw) {
        let built = match item.as_rule() {
            Rule::EOI => continue,
            Rule::likelihood_def => function(item, FunctionKind::Likelihood).map(Item::Function),
            Rule::kernel_def => function(item, FunctionKind::Kernel).map(Item::Function),
            Rule::system_def => function(item, FunctionKind::System).map(Item::Function),
            _ => block(item).map(Item::Block),
        };
        match built {
            Ok(i) => items.push(i),
            Err(e) => errors.extend(e.0),
        }
    }
    if errors.is_empty() {
        Ok(Program { items })
    } else {
        Err(tempest_core::error::Errors(errors))
    }
}

fn function(p: P, kind: FunctionKind) -> Result<FunctionDef> {
    let span = span_of(&p);
    let mut inner = p.into_inner().filter(not_kw);
    let name = ident(
        inner
            .next()
            .ok_or_else(|| Error::internal("function without a name"))?,
    );
    let mut params = Vec::new();
    let mut inputs = None;
    let mut body_node = None;
    for q in inner {
        match q.as_rule() {
            Rule::typed_params => {
                for tp in q.into_inner().filter(not_kw) {
                    let mut it = tp.into_inner().filter(not_kw);
                    let n = ident(it.next().ok_or_else(|| Error::internal("typed param"))?);
                    let ty = type_expr(
                        it.next()
                            .ok_or_else(|| Error::internal("typed param type"))?,
                    )?;
                    params.push(TypedParam { name: n, ty });
                }
            }
            Rule::kernel_inputs => {
                let mut it = q.into_inner().filter(not_kw);
                let a = ident(it.next().ok_or_else(|| Error::internal("kernel input"))?);
                let b = ident(it.next().ok_or_else(|| Error::internal("kernel input"))?);
                inputs = Some((a, b));
            }
            Rule::body => body_node = Some(body(q)?),
            _ => return Err(unexpected(&q).into()),
        }
    }
    let body = body_node.ok_or_else(|| Error::internal("function without body"))?;
    Ok(FunctionDef {
        kind,
        name,
        params,
        inputs,
        body,
        span,
    })
}

fn body(p: P) -> Result<Body> {
    let mut lets = Vec::new();
    let mut value = None;
    for q in p.into_inner().filter(not_kw) {
        match q.as_rule() {
            Rule::let_stmt => {
                let mut it = q.into_inner().filter(not_kw);
                let n = ident(it.next().ok_or_else(|| Error::internal("let name"))?);
                let e = expr(it.next().ok_or_else(|| Error::internal("let value"))?)?;
                lets.push((n, e));
            }
            Rule::expr => value = Some(expr(q)?),
            _ => return Err(unexpected(&q).into()),
        }
    }
    Ok(Body {
        lets,
        value: value.ok_or_else(|| Error::internal("body without value"))?,
    })
}

fn type_expr(p: P) -> Result<TypeExpr> {
    let span = span_of(&p);
    let mut base = BaseType::Real;
    let mut bounds = Vec::new();
    let mut dims = Vec::new();
    for q in p.into_inner().filter(not_kw) {
        match q.as_rule() {
            Rule::base_type => {
                base = match q.as_str() {
                    "int" => BaseType::Int,
                    "real" => BaseType::Real,
                    "vector" => BaseType::Vector,
                    "matrix" => BaseType::Matrix,
                    "positive" => BaseType::Positive,
                    "unit" => BaseType::Unit,
                    _ => return Err(unexpected(&q).into()),
                }
            }
            Rule::constraint => {
                for b in q.into_inner().filter(not_kw) {
                    let bspan = span_of(&b);
                    let mut it = b.into_inner().filter(not_kw);
                    let k = it.next().ok_or_else(|| Error::internal("bound kind"))?;
                    let kind = if k.as_str() == "lower" {
                        BoundKind::Lower
                    } else {
                        BoundKind::Upper
                    };
                    let value = expr(it.next().ok_or_else(|| Error::internal("bound value"))?)?;
                    bounds.push(Bound {
                        kind,
                        value,
                        span: bspan,
                    });
                }
            }
            Rule::dims => {
                for d in q.into_inner().filter(not_kw) {
                    dims.push(expr(d)?);
                }
            }
            _ => return Err(unexpected(&q).into()),
        }
    }
    Ok(TypeExpr {
        base,
        bounds,
        dims,
        span,
    })
}

fn block(p: P) -> Result<Block> {
    let span = span_of(&p);
    let rule = p.as_rule();
    let text = p.as_str();
    let kw_len = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let keyword = Span::new(span.start, span.start + kw_len);
    let inner = p.into_inner().filter(not_kw);
    let kind = match rule {
        Rule::data_block => BlockKind::Data(decls(inner)?),
        Rule::hyper_block => BlockKind::Hyper(decls(inner)?),
        Rule::param_block => BlockKind::Param(decls(inner)?),
        Rule::model_block => BlockKind::Model(inner.map(stmt).collect::<Result<_>>()?),
        Rule::guide_block => BlockKind::Guide(inner.map(guide_entry).collect::<Result<_>>()?),
        Rule::estimate_block => {
            let mut items = Vec::new();
            let mut using = None;
            for q in inner {
                match q.as_rule() {
                    Rule::estimate_item => {
                        let s = span_of(&q);
                        let mut it = q.into_inner().filter(not_kw);
                        let name =
                            ident(it.next().ok_or_else(|| Error::internal("estimate name"))?);
                        let e = expr(it.next().ok_or_else(|| Error::internal("estimate expr"))?)?;
                        items.push(EstimateItem {
                            name,
                            expr: e,
                            span: s,
                        });
                    }
                    Rule::using_clause => {
                        let c = q
                            .into_inner()
                            .find(not_kw)
                            .ok_or_else(|| Error::internal("using call"))?;
                        using = Some(call(c)?);
                    }
                    _ => return Err(unexpected(&q).into()),
                }
            }
            BlockKind::Estimate { items, using }
        }
        Rule::infer_block => {
            let mut inner = inner;
            let spec = inner
                .next()
                .ok_or_else(|| Error::internal("infer engine"))?;
            BlockKind::Infer(engine_spec(spec)?)
        }
        _ => return Err(Error::internal(format!("unexpected block rule {rule:?}")).into()),
    };
    Ok(Block {
        kind,
        keyword,
        span,
    })
}

fn decls<'i>(inner: impl Iterator<Item = P<'i>>) -> Result<Vec<Decl>> {
    inner.map(decl).collect()
}

fn decl(p: P) -> Result<Decl> {
    let span = span_of(&p);
    let mut fixed = false;
    let mut name = None;
    let mut ty = None;
    let mut init = None;
    let mut prior = None;
    for q in p.into_inner().filter(not_kw) {
        match q.as_rule() {
            Rule::fixed_kw => fixed = true,
            Rule::ident => name = Some(ident(q)),
            Rule::type_expr => ty = Some(type_expr(q)?),
            Rule::expr => init = Some(expr(q)?),
            Rule::call => prior = Some(call(q)?),
            _ => return Err(unexpected(&q).into()),
        }
    }
    Ok(Decl {
        name: name.ok_or_else(|| Error::internal("declaration without name"))?,
        ty: ty.ok_or_else(|| Error::internal("declaration without type"))?,
        fixed,
        init,
        prior,
        span,
    })
}

fn stmt(p: P) -> Result<Stmt> {
    let span = span_of(&p);
    let rule = p.as_rule();
    let mut it = p.into_inner().filter(not_kw);
    let name = ident(it.next().ok_or_else(|| Error::internal("statement name"))?);
    match rule {
        Rule::let_stmt => Ok(Stmt::Let {
            name,
            value: expr(it.next().ok_or_else(|| Error::internal("let value"))?)?,
            span,
        }),
        Rule::gp_stmt => {
            let mean = expr(it.next().ok_or_else(|| Error::internal("gp mean"))?)?;
            let kernel = expr(it.next().ok_or_else(|| Error::internal("gp kernel"))?)?;
            let replicas = match it.next() {
                Some(r) => Some(expr(
                    r.into_inner()
                        .find(not_kw)
                        .ok_or_else(|| Error::internal("replicas"))?,
                )?),
                None => None,
            };
            Ok(Stmt::Gp {
                name,
                mean,
                kernel,
                replicas,
                span,
            })
        }
        Rule::sample_stmt => {
            let dist = call(it.next().ok_or_else(|| Error::internal("sample dist"))?)?;
            let temperature = match it.next() {
                Some(t) => Some(expr(
                    t.into_inner()
                        .find(not_kw)
                        .ok_or_else(|| Error::internal("temper"))?,
                )?),
                None => None,
            };
            Ok(Stmt::Sample {
                lhs: name,
                dist,
                temperature,
                span,
            })
        }
        _ => Err(Error::internal(format!("unexpected statement {rule:?}")).into()),
    }
}

fn guide_entry(p: P) -> Result<GuideEntry> {
    let span = span_of(&p);
    let mut it = p.into_inner().filter(not_kw);
    let target = ident(it.next().ok_or_else(|| Error::internal("guide target"))?);
    let fam = it.next().ok_or_else(|| Error::internal("guide family"))?;
    let fspan = span_of(&fam);
    let mut fi = fam.into_inner().filter(not_kw);
    let fname = ident(fi.next().ok_or_else(|| Error::internal("family name"))?);
    let args = match fi.next() {
        Some(a) => args(a)?,
        None => Vec::new(),
    };
    Ok(GuideEntry {
        target,
        family: Call {
            name: fname,
            args,
            span: fspan,
        },
        span,
    })
}

fn engine_spec(p: P) -> Result<EngineSpec> {
    let span = span_of(&p);
    let mut it = p.into_inner().filter(not_kw);
    let name = ident(it.next().ok_or_else(|| Error::internal("engine name"))?);
    let mut settings = Vec::new();
    for s in it {
        let sspan = span_of(&s);
        let mut si = s.into_inner().filter(not_kw);
        let key = ident(si.next().ok_or_else(|| Error::internal("setting key"))?);
        let v = si.next().ok_or_else(|| Error::internal("setting value"))?;
        let value = match v.as_rule() {
            Rule::engine_spec => SettingValue::Engine(engine_spec(v)?),
            _ => SettingValue::Expr(expr(v)?),
        };
        settings.push(Setting {
            key,
            value,
            span: sspan,
        });
    }
    Ok(EngineSpec {
        name,
        settings,
        span,
    })
}

fn call(p: P) -> Result<Call> {
    let span = span_of(&p);
    let mut it = p.into_inner().filter(not_kw);
    let callee = it.next().ok_or_else(|| Error::internal("call name"))?;
    let name = ident(
        callee
            .into_inner()
            .next()
            .ok_or_else(|| Error::internal("callee name"))?,
    );
    let args = match it.next() {
        Some(a) => args(a)?,
        None => Vec::new(),
    };
    Ok(Call { name, args, span })
}

fn args(p: P) -> Result<Vec<Arg>> {
    p.into_inner().filter(not_kw).map(arg).collect()
}

fn arg(p: P) -> Result<Arg> {
    let span = span_of(&p);
    let mut name = None;
    let mut value: Option<Expr> = None;
    for q in p.into_inner().filter(not_kw) {
        match q.as_rule() {
            Rule::ident => name = Some(ident(q)),
            Rule::expr => value = Some(expr(q)?),
            Rule::range_end => {
                let start = value.take().ok_or_else(|| Error::internal("range start"))?;
                if let ExprKind::Binary(op, ..) = &start.kind
                    && op.is_comparison_or_logic()
                {
                    return Err(Error::at(
                        ErrorKind::Syntax,
                        start.span,
                        "the start of a range cannot be a comparison",
                    )
                    .with_label("a comparison")
                    .into());
                }
                let end_pair = q
                    .into_inner()
                    .next()
                    .ok_or_else(|| Error::internal("range end"))?;
                let end = expr(end_pair)?;
                let rspan = start.span.join(end.span);
                value = Some(Expr {
                    kind: ExprKind::Range(Box::new(start), Box::new(end)),
                    span: rspan,
                });
            }
            _ => return Err(unexpected(&q).into()),
        }
    }
    Ok(Arg {
        name,
        value: value.ok_or_else(|| Error::internal("argument without value"))?,
        span,
    })
}

fn pratt() -> &'static PrattParser<Rule> {
    static PRATT: OnceLock<PrattParser<Rule>> = OnceLock::new();
    PRATT.get_or_init(|| {
        PrattParser::new()
            .op(Op::infix(Rule::or, Assoc::Left))
            .op(Op::infix(Rule::and, Assoc::Left))
            .op(Op::infix(Rule::eq, Assoc::Left)
                | Op::infix(Rule::ne, Assoc::Left)
                | Op::infix(Rule::lt, Assoc::Left)
                | Op::infix(Rule::le, Assoc::Left)
                | Op::infix(Rule::gt, Assoc::Left)
                | Op::infix(Rule::ge, Assoc::Left))
            .op(Op::infix(Rule::add, Assoc::Left) | Op::infix(Rule::sub, Assoc::Left))
            .op(Op::infix(Rule::mul, Assoc::Left)
                | Op::infix(Rule::div, Assoc::Left)
                | Op::infix(Rule::ew_mul, Assoc::Left)
                | Op::infix(Rule::ew_div, Assoc::Left))
            .op(Op::prefix(Rule::neg) | Op::prefix(Rule::not))
            .op(Op::infix(Rule::pow, Assoc::Right))
            .op(Op::postfix(Rule::index))
    })
}

/// Build an expression from an `expr` or `arith` pair.
pub(super) fn expr(p: P) -> Result<Expr> {
    tempest_core::limits::deep(|| expr_inner(p))
}

/// Refuse an expression with more operators than the stages after parsing
/// can take, or with a run of prefix operators (`- - x`) or a chain of
/// powers (`a ^ b ^ c`) longer than the nesting limit: the parser builds
/// those by recursion.
fn check_operators(p: &P) -> Result<()> {
    let (mut ops, mut prefix_run, mut pow_chain) = (0usize, 0usize, 0usize);
    for q in p.clone().into_inner() {
        let too_many = |what: String, limit: usize| -> tempest_core::error::Errors {
            Error::at(
                ErrorKind::Syntax,
                span_of(p),
                format!("{what} (at most {limit})"),
            )
            .with_label("too long")
            .with_note("split it into several `let` definitions")
            .into()
        };
        match q.as_rule() {
            Rule::number
            | Rule::ident
            | Rule::string
            | Rule::boolean
            | Rule::paren
            | Rule::array
            | Rule::if_expr
            | Rule::call => prefix_run = 0,
            Rule::neg | Rule::not => {
                ops += 1;
                prefix_run += 1;
                if prefix_run > limits::MAX_NESTING {
                    return Err(too_many(
                        "this expression has too many prefix operators in a row".into(),
                        limits::MAX_NESTING,
                    ));
                }
            }
            Rule::pow => {
                ops += 1;
                pow_chain += 1;
                if pow_chain > limits::MAX_NESTING {
                    return Err(too_many(
                        "this expression chains too many powers `^`".into(),
                        limits::MAX_NESTING,
                    ));
                }
            }
            Rule::index => ops += 1,
            _ => {
                ops += 1;
                pow_chain = 0;
            }
        }
        if ops > limits::MAX_OPERATORS {
            return Err(too_many(
                format!(
                    "this expression has more than {} operators",
                    limits::MAX_OPERATORS
                ),
                limits::MAX_OPERATORS,
            ));
        }
    }
    Ok(())
}

fn expr_inner(p: P) -> Result<Expr> {
    if matches!(p.as_rule(), Rule::expr | Rule::arith) {
        check_operators(&p)?;
    }
    let built = match p.as_rule() {
        Rule::expr | Rule::arith => pratt()
            .map_primary(primary)
            .map_prefix(|op, rhs| {
                let rhs = rhs?;
                let span = span_of(&op).join(rhs.span);
                let u = if op.as_rule() == Rule::neg {
                    UnOp::Neg
                } else {
                    UnOp::Not
                };
                Ok(Expr {
                    kind: ExprKind::Unary(u, Box::new(rhs)),
                    span,
                })
            })
            .map_postfix(|lhs, op| {
                let lhs = lhs?;
                let span = lhs.span.join(span_of(&op));
                let idx = op
                    .into_inner()
                    .filter(not_kw)
                    .map(expr)
                    .collect::<Result<Vec<_>>>()?;
                Ok(Expr {
                    kind: ExprKind::Index(Box::new(lhs), idx),
                    span,
                })
            })
            .map_infix(|lhs, op, rhs| {
                let (lhs, rhs) = (lhs?, rhs?);
                let span = lhs.span.join(rhs.span);
                let b = match op.as_rule() {
                    Rule::or => BinOp::Or,
                    Rule::and => BinOp::And,
                    Rule::eq => BinOp::Eq,
                    Rule::ne => BinOp::Ne,
                    Rule::lt => BinOp::Lt,
                    Rule::le => BinOp::Le,
                    Rule::gt => BinOp::Gt,
                    Rule::ge => BinOp::Ge,
                    Rule::add => BinOp::Add,
                    Rule::sub => BinOp::Sub,
                    Rule::mul => BinOp::Mul,
                    Rule::div => BinOp::Div,
                    Rule::ew_mul => BinOp::EwMul,
                    Rule::ew_div => BinOp::EwDiv,
                    Rule::pow => BinOp::Pow,
                    _ => return Err(unexpected(&op).into()),
                };
                Ok(Expr {
                    kind: ExprKind::Binary(b, Box::new(lhs), Box::new(rhs)),
                    span,
                })
            })
            .parse(p.into_inner().filter(not_kw)),
        _ => primary(p),
    }?;
    if depth(&built) > limits::MAX_EXPR_DEPTH {
        return Err(Error::at(
            ErrorKind::Syntax,
            built.span,
            format!(
                "this expression is nested more than {} deep (operators, calls, indexing and `if`s together)",
                limits::MAX_EXPR_DEPTH
            ),
        )
        .with_label("too deep")
        .with_note("split it into several `let` definitions")
        .into());
    }
    Ok(built)
}

/// The depth of an expression tree (a leaf has depth 1), found without
/// recursion.
pub(super) fn depth(e: &Expr) -> usize {
    let mut max = 0;
    let mut todo: Vec<(&Expr, usize)> = vec![(e, 1)];
    while let Some((x, d)) = todo.pop() {
        max = max.max(d);
        match &x.kind {
            ExprKind::Int(_)
            | ExprKind::Real(_)
            | ExprKind::Bool(_)
            | ExprKind::Str(_)
            | ExprKind::Var(_) => {}
            ExprKind::Array(xs) => todo.extend(xs.iter().map(|y| (y, d + 1))),
            ExprKind::Range(a, b) | ExprKind::Binary(_, a, b) => {
                todo.push((a, d + 1));
                todo.push((b, d + 1));
            }
            ExprKind::Unary(_, a) => todo.push((a, d + 1)),
            ExprKind::Call(_, args) => todo.extend(args.iter().map(|a| (&a.value, d + 1))),
            ExprKind::Index(b, idx) => {
                todo.push((b, d + 1));
                todo.extend(idx.iter().map(|y| (y, d + 1)));
            }
            ExprKind::If(c, a, b) => {
                todo.push((c, d + 1));
                todo.push((a, d + 1));
                todo.push((b, d + 1));
            }
        }
    }
    max
}

fn primary(p: P) -> Result<Expr> {
    let span = span_of(&p);
    let kind = match p.as_rule() {
        Rule::number => {
            let s = p.as_str();
            if s.contains(['.', 'e', 'E']) {
                ExprKind::Real(
                    s.parse()
                        .map_err(|_| Error::at(ErrorKind::Syntax, span, "malformed number"))?,
                )
            } else {
                match s.parse::<i64>() {
                    Ok(i) => ExprKind::Int(i),
                    Err(_) => {
                        return Err(Error::at(
                            ErrorKind::Syntax,
                            span,
                            format!("integer `{s}` is too large (at most {})", i64::MAX),
                        )
                        .into());
                    }
                }
            }
        }
        Rule::string => {
            let raw = p
                .into_inner()
                .find(not_kw)
                .map(|q| q.as_str())
                .unwrap_or("");
            ExprKind::Str(unescape(raw))
        }
        Rule::boolean => ExprKind::Bool(p.as_str() == "true"),
        Rule::ident => ExprKind::Var(p.as_str().to_string()),
        Rule::call => {
            let c = call(p)?;
            ExprKind::Call(c.name, c.args)
        }
        Rule::paren => {
            return expr(
                p.into_inner()
                    .find(not_kw)
                    .ok_or_else(|| Error::internal("paren"))?,
            );
        }
        Rule::array => ExprKind::Array(
            p.into_inner()
                .filter(not_kw)
                .map(expr)
                .collect::<Result<_>>()?,
        ),
        Rule::if_expr => {
            let mut it = p.into_inner().filter(not_kw);
            let mut next = || -> Result<Box<Expr>> {
                Ok(Box::new(expr(
                    it.next().ok_or_else(|| Error::internal("if part"))?,
                )?))
            };
            let c = next()?;
            let a = next()?;
            let b = next()?;
            ExprKind::If(c, a, b)
        }
        Rule::expr | Rule::arith => return expr(p),
        _ => return Err(unexpected(&p).into()),
    };
    Ok(Expr { kind, span })
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}
