//! The formulas of the built-in kernels, one family per file.

pub mod dot_product;
pub mod stationary;
