//! Names in scope while checking, and "did you mean" suggestions.

use std::collections::HashMap;
use tempest_ir::expr::Ref;
use tempest_ir::types::Ty;
use tempest_syntax::ast::Span;

/// What a global name is.
#[derive(Clone, Debug)]
pub enum Symbol {
    /// A value: data, hyper, param or let.
    Value {
        /// What it refers to.
        r: Ref,
        /// Its type.
        ty: Ty,
        /// Its declaration.
        span: Span,
    },
    /// A latent GP.
    Gp {
        /// Index into the graph's GPs.
        index: usize,
        /// Replication count, if any.
        ty: Ty,
        /// Its statement.
        span: Span,
    },
    /// A user-defined likelihood or kernel.
    Function {
        /// Index into the graph's functions.
        index: usize,
        /// Its definition.
        span: Span,
    },
}

impl Symbol {
    /// Where it was declared.
    pub fn span(&self) -> Span {
        match self {
            Symbol::Value { span, .. }
            | Symbol::Gp { span, .. }
            | Symbol::Function { span, .. } => *span,
        }
    }
    /// What kind of thing it is, in words.
    pub fn describe(&self) -> &'static str {
        match self {
            Symbol::Value { r, .. } => match r {
                Ref::Data(_) => "a data declaration",
                Ref::Hyper(_) => "a hyper",
                Ref::Param(_) => "a param",
                Ref::Let(_) => "a let",
                Ref::Local(_) => "a local name",
                Ref::Temperature => "the temperature",
            },
            Symbol::Gp { .. } => "a latent GP",
            Symbol::Function { .. } => "a user-defined function",
        }
    }
}

/// Where an expression appears; decides which names it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Sizes, bounds and constants of `data`: data and literals only.
    Data,
    /// Initial values and bounds of hypers: data and literals.
    HyperInit,
    /// Bounds of params: data and literals.
    ParamBound,
    /// Priors, model statements, estimates: everything.
    Model,
    /// The body of a user function: its parameters and locals only.
    Function,
}

impl Context {
    /// Whether a reference is allowed here.
    pub fn allows(self, r: &Ref) -> bool {
        match self {
            Context::Data | Context::HyperInit | Context::ParamBound => matches!(r, Ref::Data(_)),
            Context::Model => !matches!(r, Ref::Local(_)),
            Context::Function => matches!(r, Ref::Local(_)),
        }
    }
    /// What may be used here, in words.
    pub fn allowed_words(self) -> &'static str {
        match self {
            Context::Data => "data declarations and literals",
            Context::HyperInit => {
                "data declarations and literals (a hyper's initial value is a constant)"
            }
            Context::ParamBound => "data declarations and literals",
            Context::Model => "declared names",
            Context::Function => "the function's own parameters and local lets",
        }
    }
}

/// The global and local names in scope.
#[derive(Default)]
pub struct Scope {
    /// Declarations, GPs, lets and functions by name.
    pub globals: HashMap<String, Symbol>,
    /// Locals of the function being checked: (name, slot, type).
    pub locals: Vec<(String, usize, Ty)>,
    /// Every name the program declares anywhere, with what it is, so a name
    /// used before its declaration gets a precise message.
    pub later: HashMap<String, (&'static str, Span)>,
}

impl Scope {
    /// Find a local by name (innermost first).
    pub fn local(&self, name: &str) -> Option<(usize, Ty)> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _, _)| n == name)
            .map(|(_, s, t)| (*s, t.clone()))
    }

    /// Names close to `name`, for "did you mean".
    pub fn suggest(&self, name: &str, extra: &[&str]) -> Option<String> {
        let candidates = self
            .globals
            .keys()
            .map(|s| s.as_str())
            .chain(self.locals.iter().map(|(n, _, _)| n.as_str()))
            .chain(extra.iter().copied());
        suggest(name, candidates)
    }
}

pub use tempest_core::error::suggest;
