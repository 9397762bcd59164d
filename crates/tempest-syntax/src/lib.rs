//! Text → spanned AST. pest is used only inside this module.

#![warn(missing_docs)]

pub mod ast;
mod build;
pub mod diagnostics;
mod parser;
pub mod print;

pub use parser::{parse, parse_expr};
