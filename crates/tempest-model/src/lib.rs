//! The statistical building blocks: constraints, kernels, distributions, and
//! the extension points for kernels and likelihoods written in Rust.

#![warn(missing_docs)]

pub mod block;
pub mod builtin;
pub mod constraint;
pub mod custom;
pub mod dist;
pub mod dist_draw;
pub mod family;
pub mod gram_vjp;
pub mod kernel;
pub mod kernels;
pub mod network;
pub mod program;
