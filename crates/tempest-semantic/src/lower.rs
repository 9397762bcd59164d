//! Lowering: the checked model → the graph with latent sites numbered.
//!
//! Each distinct pair (latent GP, input expression) becomes one latent site:
//! `f(X)` written twice is one site; `f(X)` and `f(X_new)` are two.

use super::Checked;
use std::collections::HashMap;
use tempest_core::error::Result;
use tempest_ir::expr::{TExpr, TKind};
use tempest_ir::graph::{Graph, SiteNode};
use tempest_ir::print;

/// Lower a checked model to its graph.
pub fn lower(checked: Checked) -> Result<Graph> {
    let mut g = checked.graph;
    let mut keys: HashMap<(usize, String), usize> = HashMap::new();
    let mut sites: Vec<SiteNode> = Vec::new();
    {
        let functions = g.functions.clone();
        let mut number = |e: &mut TExpr| {
            e.walk_mut(&mut |x: &mut TExpr| {
                let span = x.span;
                if let TKind::GpApply { gp, input, site } = &mut x.kind {
                    let key = (*gp, print::expr_with(input, &functions, &[]));
                    let next = sites.len();
                    let id = *keys.entry(key).or_insert(next);
                    if id == next {
                        sites.push(SiteNode {
                            gp: *gp,
                            input: (**input).clone(),
                            span,
                        });
                    }
                    *site = id;
                }
            })
        };
        for l in &mut g.lets {
            number(&mut l.value);
        }
        for o in &mut g.observations {
            o.dist.args.iter_mut().for_each(&mut number);
        }
        for p in &mut g.priors {
            p.dist.args.iter_mut().for_each(&mut number);
        }
        for e in &mut g.estimates {
            number(&mut e.expr);
        }
    }
    g.sites = sites;
    for f in &mut g.functions {
        if f.kind == tempest_syntax::ast::FunctionKind::Likelihood {
            f.program = tempest_ir::program::compile_likelihood(f).map(std::sync::Arc::new);
        } else if f.kind == tempest_syntax::ast::FunctionKind::Kernel {
            f.program = tempest_ir::program::compile_kernel(f).map(std::sync::Arc::new);
        } else {
            f.system_program =
                tempest_ir::program::SystemProgram::compile(f).map(std::sync::Arc::new);
        }
    }
    Ok(g)
}
