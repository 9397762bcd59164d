//! Name resolution and type checking: spanned AST → [`Checked`] model.
//!
//! The checker reports every error it finds, not just the first: a failed
//! sub-expression gets the unknown type, which silences follow-on errors.

#![warn(missing_docs)]

mod calls;
mod decls;
mod expr;
mod functions;
pub mod lower;
mod ode;
pub mod scope;
mod stmts;

use scope::Scope;
use tempest_core::error::{Error, ErrorKind, Errors, Result};
use tempest_ir::graph::Graph;
use tempest_model::custom::Registry;
use tempest_syntax::ast::{Block, BlockKind, Item, Program, Span};

/// A model whose names are resolved and whose types check. Its graph has
/// no latent sites yet; [`lower::lower`] adds them.
#[derive(Clone)]
pub struct Checked {
    /// The typed graph.
    pub graph: Graph,
}

/// The checker's working state.
pub(crate) struct Checker<'a> {
    pub registry: &'a Registry,
    pub errors: Vec<Error>,
    pub graph: Graph,
    pub scope: Scope,
    /// Whether `temperature` may be used (inside `^ ...`).
    pub allow_temperature: bool,
}

impl<'a> Checker<'a> {
    pub fn error(&mut self, e: Error) {
        self.errors.push(e);
    }
}

const BLOCK_ORDER: [&str; 7] = [
    "data", "hyper", "param", "model", "guide", "estimate", "infer",
];

fn rank(b: &Block) -> usize {
    BLOCK_ORDER.iter().position(|n| *n == b.name()).unwrap_or(0)
}

/// Check a parsed program, resolving names against the built-ins and the
/// kernels and likelihoods registered in `registry`.
pub fn check(program: &Program, registry: &Registry) -> Result<Checked> {
    let mut c = Checker {
        registry,
        errors: Vec::new(),
        graph: Graph::default(),
        scope: Scope::default(),
        allow_temperature: false,
    };
    let mut blocks: Vec<&Block> = Vec::new();
    let mut functions = Vec::new();
    for item in &program.items {
        match item {
            Item::Function(f) => functions.push(f),
            Item::Block(b) => {
                if let Some(prev) = blocks.iter().find(|p| p.name() == b.name()) {
                    c.error(
                        Error::at(
                            ErrorKind::Syntax,
                            b.keyword,
                            format!("a second `{}` block", b.name()),
                        )
                        .with_label("second block")
                        .with_secondary(prev.keyword, "first block here")
                        .with_note("each block may appear once; merge the two"),
                    );
                    continue;
                }
                if let Some(later) = blocks.iter().find(|p| rank(p) > rank(b)) {
                    c.error(
                        Error::at(
                            ErrorKind::Syntax,
                            b.keyword,
                            format!("the `{}` block must come before the `{}` block", b.name(), later.name()),
                        )
                        .with_label("out of order")
                        .with_secondary(later.keyword, "this block comes later in the order")
                        .with_note("blocks go in the order: data, hyper, param, model, guide, estimate, infer"),
                    );
                }
                blocks.push(b);
            }
        }
    }
    blocks.sort_by_key(|b| rank(b));
    c.scope.later = declared_names(&blocks);
    let find = |name: &str| blocks.iter().find(|b| b.name() == name).map(|b| &b.kind);
    if let Some(BlockKind::Data(ds)) = find("data") {
        c.data_block(ds);
    }
    // Functions may use data sizes in their parameter types.
    for f in functions {
        c.function(f);
    }
    if let Some(BlockKind::Hyper(ds)) = find("hyper") {
        c.hyper_block(ds);
    }
    if let Some(BlockKind::Param(ds)) = find("param") {
        c.param_block(ds);
    }
    if let Some(BlockKind::Model(stmts)) = find("model") {
        c.model_block(stmts);
    }
    if let Some(BlockKind::Guide(entries)) = find("guide") {
        c.guide_block(entries);
    }
    if let Some(BlockKind::Estimate { items, using }) = find("estimate") {
        c.estimate_block(items, using.as_ref());
    }
    if let Some(BlockKind::Infer(spec)) = find("infer") {
        // Kept as written: the engine's settings are checked against its
        // schema by the facade (`tempest::check`), not here.
        c.graph.infer = Some(spec.clone());
    }
    if c.errors.is_empty() {
        Ok(Checked { graph: c.graph })
    } else {
        c.errors
            .sort_by_key(|e| e.span.unwrap_or(Span::default()).start);
        Err(Errors(c.errors))
    }
}

/// Every name declared in the blocks, with what it is.
fn declared_names(blocks: &[&Block]) -> std::collections::HashMap<String, (&'static str, Span)> {
    use tempest_syntax::ast::Stmt;
    let mut out = std::collections::HashMap::new();
    for b in blocks {
        match &b.kind {
            BlockKind::Data(ds) => ds.iter().for_each(|d| {
                out.entry(d.name.name.clone())
                    .or_insert(("a data declaration", d.span));
            }),
            BlockKind::Hyper(ds) => ds.iter().for_each(|d| {
                out.entry(d.name.name.clone())
                    .or_insert(("a hyper", d.span));
            }),
            BlockKind::Param(ds) => ds.iter().for_each(|d| {
                out.entry(d.name.name.clone())
                    .or_insert(("a param", d.span));
            }),
            BlockKind::Model(stmts) => stmts.iter().for_each(|s| match s {
                Stmt::Let { name, span, .. } => {
                    out.entry(name.name.clone()).or_insert(("a let", *span));
                }
                Stmt::Gp { name, span, .. } => {
                    out.entry(name.name.clone())
                        .or_insert(("a latent GP", *span));
                }
                Stmt::Sample { .. } => {}
            }),
            _ => {}
        }
    }
    out
}
