//! Names in words for summaries, prediction tables and figures: a latent
//! GP's input as written in the model. (An engine's name in words is its
//! definition's, `EngineDef::words`.)

/// A latent GP's input at `site` as written (`year`, `year - 1900`), or
/// without such a site an `ode` solution's output times, else `input`.
pub fn input_label(g: &crate::ir::Graph, site: Option<usize>) -> String {
    match site.and_then(|s| g.sites.get(s)) {
        Some(s) => infix(&s.input, g),
        None => crate::ir::ode::first_times(g)
            .map(|t| infix(&t, g))
            .unwrap_or_else(|| "input".into()),
    }
    .replace("data:", "")
}

/// A short expression of data and numbers as written (`year - 1900`), for
/// an axis label; other expressions in the graph's prefix form.
fn infix(e: &crate::ir::expr::TExpr, g: &crate::ir::Graph) -> String {
    use crate::ir::expr::{Ref, TKind};
    match &e.kind {
        TKind::Ref(Ref::Data(i)) => g.data[*i].name.clone(),
        TKind::Int(v) => v.to_string(),
        TKind::Real(v) => v.to_string(),
        TKind::Binary(op, a, b) => {
            let side = |x: &crate::ir::expr::TExpr| match x.kind {
                TKind::Binary(..) => format!("({})", infix(x, g)),
                _ => infix(x, g),
            };
            format!("{} {} {}", side(a), op.symbol(), side(b))
        }
        _ => crate::ir::print::expr_in(e, g),
    }
}
