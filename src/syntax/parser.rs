//! The pest parser: model text → [`Program`], with syntax errors translated
//! into tempest [`Error`]s that say what was expected in words.

use super::ast::{Program, Span};
use super::build;
use crate::error::{Error, ErrorKind, Result};
use pest::Parser;
use pest_derive::Parser;

/// The generated pest parser for `grammar.pest`.
#[derive(Parser)]
#[grammar = "syntax/grammar.pest"]
pub(crate) struct TempestParser;

/// Parse a whole model file.
pub fn parse(source: &str) -> Result<Program> {
    let mut pairs =
        TempestParser::parse(Rule::program, source).map_err(|e| syntax_error(e, source))?;
    let program = pairs
        .next()
        .ok_or_else(|| Error::internal("the parser returned no program"))?;
    build::program(program)
}

/// Parse a single expression (used by `--set` values and tests).
pub fn parse_expr(source: &str) -> Result<super::ast::Expr> {
    let mut pairs =
        TempestParser::parse(Rule::expr, source).map_err(|e| syntax_error(e, source))?;
    let pair = pairs
        .next()
        .ok_or_else(|| Error::internal("the parser returned no expression"))?;
    let end = pair.as_span().end();
    if end != source.trim_end().len() {
        return Err(Error::at(
            ErrorKind::Syntax,
            Span::new(end, source.len()),
            "unexpected text after the expression",
        )
        .into());
    }
    build::expr(pair)
}

/// A pest error as a tempest syntax error.
fn syntax_error(e: pest::error::Error<Rule>, source: &str) -> Error {
    let (start, end) = match e.location {
        pest::error::InputLocation::Pos(p) => (p, p),
        pest::error::InputLocation::Span((a, b)) => (a, b),
    };
    let end = if end == start {
        next_char_end(source, start)
    } else {
        end
    };
    let found = describe_found(source, start);
    let message = match &e.variant {
        pest::error::ErrorVariant::ParsingError {
            positives,
            negatives,
        } => {
            let mut expected: Vec<&'static str> =
                positives.iter().filter_map(|r| rule_words(*r)).collect();
            expected.sort_unstable();
            expected.dedup();
            if !expected.is_empty() {
                format!("expected {}, found {found}", join_or(&expected))
            } else if !negatives.is_empty() {
                let unexpected: Vec<&'static str> =
                    negatives.iter().filter_map(|r| rule_words(*r)).collect();
                if unexpected.contains(&"a keyword") {
                    format!("{found} is a reserved word and cannot be used as a name")
                } else {
                    format!("unexpected {found}")
                }
            } else {
                format!("unexpected {found}")
            }
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    Error::at(ErrorKind::Syntax, Span::new(start, end), message).with_label("here")
}

/// The end of the character starting at `pos` (or `pos` at the end of input).
fn next_char_end(source: &str, pos: usize) -> usize {
    source[pos.min(source.len())..]
        .chars()
        .next()
        .map(|c| pos + c.len_utf8())
        .unwrap_or(pos)
}

/// What the parser found at `pos`, in words.
fn describe_found(source: &str, pos: usize) -> String {
    let rest = &source[pos.min(source.len())..];
    let Some(c) = rest.chars().next() else {
        return "the end of the file".to_string();
    };
    if c.is_alphanumeric() || c == '_' {
        let word: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        format!("`{word}`")
    } else if c == '\n' || c == '\r' {
        "the end of the line".to_string()
    } else {
        format!("`{c}`")
    }
}

/// Join words as "a, b or c".
fn join_or(items: &[&str]) -> String {
    match items.len() {
        0 => String::new(),
        1 => items[0].to_string(),
        n => format!("{} or {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

/// What a grammar rule means to a user, or `None` for rules not worth naming.
fn rule_words(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::EOI => "the end of the file",
        Rule::item | Rule::program => {
            "a block (`data`, `hyper`, `param`, `model`, `guide`, `estimate`, `infer`) or a definition"
        }
        Rule::likelihood_def => "a `likelihood` definition",
        Rule::kernel_def => "a `kernel` definition",
        Rule::data_block => "a `data` block",
        Rule::hyper_block => "a `hyper` block",
        Rule::param_block => "a `param` block",
        Rule::model_block => "a `model` block",
        Rule::guide_block => "a `guide` block",
        Rule::estimate_block => "an `estimate` block",
        Rule::infer_block => "an `infer` block",
        Rule::keyword => "a keyword",
        Rule::ident => "a name",
        Rule::typed_params | Rule::typed_param => "a typed parameter `name : type`",
        Rule::kernel_inputs => "the kernel's inputs `(x, x2)`",
        Rule::body => "a body `{ ... }`",
        Rule::type_expr | Rule::base_type => {
            "a type (`int`, `real`, `vector`, `matrix`, `positive`, `unit`)"
        }
        Rule::constraint => "a constraint `<lower=..., upper=...>`",
        Rule::bound | Rule::bound_kind => "`lower` or `upper`",
        Rule::dims => "dimensions `[...]`",
        Rule::data_decl | Rule::hyper_decl | Rule::param_decl => "a declaration `name : type`",
        Rule::fixed_kw => "`fixed`",
        Rule::model_stmt | Rule::sample_stmt | Rule::gp_stmt => "a statement (`let`, `name ~ ...`)",
        Rule::let_stmt => "`let`",
        Rule::gp_kw => "`gp`",
        Rule::replicate => "a replication count `[C]`",
        Rule::temper => "a power `^ t`",
        Rule::guide_entry => "a guide entry `name : family`",
        Rule::family => "a family",
        Rule::estimate_item => "an estimate `name = E[...]`",
        Rule::using_clause => "`using`",
        Rule::engine_spec => "an engine `name { ... }`",
        Rule::setting => "a setting `name = value`",
        Rule::call => "a call `name(...)`",
        Rule::args | Rule::arg => "an argument",
        Rule::range => "a range `a .. b`",
        Rule::expr | Rule::arith => "an expression",
        Rule::or
        | Rule::and
        | Rule::eq
        | Rule::ne
        | Rule::le
        | Rule::ge
        | Rule::lt
        | Rule::gt
        | Rule::add
        | Rule::sub
        | Rule::ew_mul
        | Rule::ew_div
        | Rule::mul
        | Rule::div
        | Rule::pow => "an operator",
        Rule::neg | Rule::not => "an expression",
        Rule::call_args => "`(`",
        Rule::index => "`[`",
        Rule::if_expr => "`if`",
        Rule::paren => "`(`",
        Rule::array => "`[`",
        Rule::boolean => "`true` or `false`",
        Rule::number => "a number",
        Rule::string | Rule::string_inner => "a string",
        _ => return None,
    })
}
