//! The typed graph IR: expressions, nodes, lowering, binding and evaluation.

#![warn(missing_docs)]

pub mod expr;
pub mod graph;
pub mod print;
pub mod types;

pub use graph::Graph;
pub mod bind;
pub mod bound;
pub mod check_test;
pub mod classes;
pub mod deep;
pub mod eval;
pub mod ids;
pub mod logdensity;
pub mod ode;
pub mod ops;
pub mod pointwise;
pub mod program;
pub mod rows;
pub mod value;
