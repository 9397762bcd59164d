//! Finding a GP's deep kernel: `deep(kernel, mlp([...]))` written as the
//! whole kernel of the GP, directly or through `let`s.

use super::expr::{Ref, TExpr, TKind};
use super::graph::Graph;
use tempest_model::network::Activation;
use tempest_syntax::ast::Span;

/// A GP's deep kernel: the base kernel on the features, and the network.
pub struct DeepKernel<'a> {
    /// The base kernel's expression (it sees the network's outputs).
    pub kernel: &'a TExpr,
    /// The network's layer widths.
    pub widths: &'a [usize],
    /// The network's hidden-layer activation.
    pub activation: Activation,
    /// `groups = G`: copy j of the GP sees feature group j.
    pub groups: Option<usize>,
    /// Where `deep(...)` was written.
    pub span: Span,
}

impl Graph {
    /// The expression `e` stands for, through `let` names (each `let` is
    /// followed at most once, so the walk ends).
    pub fn resolve<'a>(&'a self, e: &'a TExpr) -> &'a TExpr {
        let mut cur = e;
        for _ in 0..=self.lets.len() {
            match cur.kind {
                TKind::Ref(Ref::Let(i)) if i < self.lets.len() => cur = &self.lets[i].value,
                _ => break,
            }
        }
        cur
    }

    /// The deep kernel of GP `gp`, when its kernel is `deep(k, mlp(...))`.
    pub fn deep_kernel(&self, gp: usize) -> Option<DeepKernel<'_>> {
        let top = self.resolve(&self.gps.get(gp)?.kernel);
        let TKind::Deep {
            kernel,
            net,
            groups,
        } = &top.kind
        else {
            return None;
        };
        match &self.resolve(net).kind {
            TKind::Mlp { widths, activation } => Some(DeepKernel {
                kernel,
                widths,
                activation: *activation,
                groups: *groups,
                span: top.span,
            }),
            _ => None,
        }
    }
}
