//! The pest parser: model text → [`Program`], with syntax errors translated
//! into tempest [`Error`]s that say what was expected in words.

use super::ast::{Program, Span};
use super::build;
use pest::Parser;
use pest_derive::Parser;
use tempest_core::error::{Error, ErrorKind, Result};
use tempest_core::limits;

/// The generated pest parser for `grammar.pest`.
#[derive(Parser)]
#[grammar = "grammar.pest"]
pub(crate) struct TempestParser;

/// Parse a whole model file. A byte-order mark at the start is skipped.
pub fn parse(source: &str) -> Result<Program> {
    check_nesting(source)?;
    pest::set_error_detail(true);
    let mut pairs = parse_rule(Rule::program, source)?;
    let program = pairs
        .next()
        .ok_or_else(|| Error::internal("the parser returned no program"))?;
    build::program(program)
}

/// Run pest on `source` from `rule`, with a cap on parser steps that keeps
/// the time linear in the length of the text.
fn parse_rule(rule: Rule, source: &str) -> Result<pest::iterators::Pairs<'_, Rule>> {
    let steps = source
        .len()
        .saturating_mul(limits::PARSER_STEPS_PER_BYTE)
        .saturating_add(100_000);
    // pest keeps the limit in a global that each parse reads when it
    // starts: one parse at a time sets it and parses.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    pest::set_call_limit(std::num::NonZeroUsize::new(steps));
    let result = TempestParser::parse(rule, source);
    pest::set_call_limit(None);
    drop(guard);
    result.map_err(|e| {
        if matches!(&e.variant, pest::error::ErrorVariant::CustomError { message } if message.contains("call limit"))
        {
            Error::new(
                ErrorKind::Syntax,
                format!(
                    "the model text is too complex to parse ({} parser steps for {} bytes)",
                    steps,
                    source.len()
                ),
            )
            .with_note("split long or deeply nested expressions into `let` definitions")
            .into()
        } else {
            syntax_error(e, source).into()
        }
    })
}

/// Refuse absurdly deep nesting before any recursive stage sees it. Brackets
/// and `if` expressions both count: an `if` stays open until a token that
/// cannot continue its expression at its bracket level (`,` `;` `=` `~` `:`
/// `..`, a closing bracket or a statement keyword), which over-counts only
/// an `if` used as a condition.
fn check_nesting(source: &str) -> Result<()> {
    let too_deep = |at: usize, len: usize| -> tempest_core::error::Errors {
        Error::at(
            ErrorKind::Syntax,
            Span::new(at, at + len),
            format!(
                "brackets and `if` expressions are nested more than {} deep",
                limits::MAX_NESTING
            ),
        )
        .with_label("too deep")
        .with_note("split the expression into `let` definitions")
        .into()
    };
    // Open `if`s at each open bracket level; the first entry is the top level.
    let mut ifs: Vec<usize> = vec![0];
    let mut open_ifs = 0usize;
    let b = source.as_bytes();
    let mut i = 0;
    let reset = |ifs: &mut Vec<usize>, open_ifs: &mut usize| {
        if let Some(top) = ifs.last_mut() {
            *open_ifs -= *top;
            *top = 0;
        }
    };
    while i < b.len() {
        let c = b[i];
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => {
                ifs.push(0);
                if ifs.len() - 1 + open_ifs > limits::MAX_NESTING {
                    return Err(too_deep(i, 1));
                }
            }
            b')' | b']' | b'}' => {
                if ifs.len() > 1 {
                    open_ifs -= ifs.pop().unwrap_or(0);
                }
                reset(&mut ifs, &mut open_ifs);
            }
            b',' | b';' | b'~' | b':' => reset(&mut ifs, &mut open_ifs),
            b'.' if b.get(i + 1) == Some(&b'.') => reset(&mut ifs, &mut open_ifs),
            b'=' => {
                let prev = if i > 0 { b[i - 1] } else { b' ' };
                let next = b.get(i + 1).copied().unwrap_or(b' ');
                if !matches!(prev, b'=' | b'<' | b'>' | b'!') && next != b'=' {
                    reset(&mut ifs, &mut open_ifs);
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                match &source[start..i] {
                    "if" => {
                        if let Some(top) = ifs.last_mut() {
                            *top += 1;
                        }
                        open_ifs += 1;
                        if ifs.len() - 1 + open_ifs > limits::MAX_NESTING {
                            return Err(too_deep(start, 2));
                        }
                    }
                    "let" | "likelihood" | "kernel" | "data" | "hyper" | "param" | "model"
                    | "guide" | "estimate" | "infer" | "using" => reset(&mut ifs, &mut open_ifs),
                    _ => {}
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Parse a single expression (used by `--set` values and tests).
pub fn parse_expr(source: &str) -> Result<super::ast::Expr> {
    check_nesting(source)?;
    let mut pairs = parse_rule(Rule::expr, source)?;
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
    let (mut start, mut end) = match e.location {
        pest::error::InputLocation::Pos(p) => (p, p),
        pest::error::InputLocation::Span((a, b)) => (a, b),
    };
    // With error detail on, pest also knows the furthest point a literal
    // token was tried (e.g. the missing `:` after a name). Report there when
    // punctuation was expected at that point.
    let attempts = e.parse_attempts();
    let mut rules: Vec<Rule> = match &e.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => positives.clone(),
        _ => vec![],
    };
    let mut tokens: Vec<String> = Vec::new();
    if let Some(a) = &attempts {
        let punct: Vec<String> = a
            .expected_tokens()
            .into_iter()
            .map(|t| t.to_string())
            .filter(|t| is_punctuation(t))
            .collect();
        if a.max_position > start && !punct.is_empty() {
            start = a.max_position;
            end = start;
            rules.clear();
            tokens = punct;
        } else if a.max_position == start {
            tokens = punct;
        }
    }
    if end == start {
        end = next_char_end(source, start);
    }
    let span = Span::new(start, end);
    if let Some(msg) = special_case(source, start) {
        return Error::at(ErrorKind::Syntax, span, msg).with_label("here");
    }
    let found = describe_found(source, start);
    if let Some((open, block)) = unclosed_block(source, start) {
        return Error::at(
            ErrorKind::Syntax,
            span,
            format!("expected `}}` to close the `{block}` block before {found}"),
        )
        .with_label("the block should end before this")
        .with_secondary(Span::new(open, open + 1), "the block opens here");
    }
    let mut all: Vec<String> = Vec::new();
    let mut push = |w: String| {
        if !all.contains(&w) {
            all.push(w);
        }
    };
    let mut words: Vec<String> = rules
        .iter()
        .filter_map(|r| rule_words(*r))
        .map(String::from)
        .collect();
    words.sort_unstable();
    let expr_expected = words.iter().any(|w| w == "an expression");
    tokens.sort_unstable();
    for t in &tokens {
        if expr_expected && matches!(t.as_str(), "!" | "(" | "-" | "[") {
            continue;
        }
        if OPERATORS.contains(&t.as_str()) {
            push("an operator".to_string());
        } else {
            push(format!("`{t}`"));
        }
    }
    const EXPR_STARTS: [&str; 7] = [
        "a name",
        "a number",
        "a string",
        "`true` or `false`",
        "`(`",
        "`[`",
        "`if`",
    ];
    for w in words {
        if !(expr_expected && EXPR_STARTS.contains(&w.as_str())) {
            push(w);
        }
    }
    let names_expected = all.iter().any(|w| w.contains("name"));
    let message = if names_expected && is_reserved(source, start) {
        format!("{found} is a reserved word and cannot be used as a name")
    } else {
        let all: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
        if all.is_empty() {
            format!("unexpected {found}")
        } else {
            format!("expected {}, found {found}", join_or(&all))
        }
    };
    let err = Error::at(ErrorKind::Syntax, span, message).with_label("here");
    match (expr_expected, let_continuation(source, start)) {
        (true, Some((op, name))) => err
            .with_secondary(
                Span::new(op, op + 1),
                format!("this line continues the value of `{name}`"),
            )
            .with_note(format!(
                "an expression can run over several lines, so a line that starts with `-` or `+` \
                 continues the `let {name} = …` above it and the body has no value left; end the \
                 `let` with `;`, or put the line in parentheses"
            )),
        _ => err,
    }
}

/// At a `}` where a body's value was expected: the offset of the `-` or `+`
/// that starts the last such line inside the last `let` before it, and
/// that let's name — the body's value was read as the rest of the let's
/// value.
fn let_continuation(source: &str, pos: usize) -> Option<(usize, String)> {
    if !source[pos..].starts_with('}') {
        return None;
    }
    let before = &source[..pos];
    // Lines back to the last one that starts with `let`, stopping at a line
    // that opens or closes a block.
    let mut end = before.len();
    let mut candidate = None;
    loop {
        let first = before[..end].rfind('\n').map_or(0, |i| i + 1);
        let line = &before[first..end];
        let trimmed = line.trim_start();
        let at = first + (line.len() - trimmed.len());
        if let Some(rest) = trimmed.strip_prefix("let ") {
            let name: String = rest
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return candidate.map(|op| (op, name));
        }
        if trimmed.contains('{') || trimmed.contains('}') {
            return None;
        }
        if candidate.is_none() && (trimmed.starts_with('-') || trimmed.starts_with('+')) {
            candidate = Some(at);
        }
        if first == 0 {
            return None;
        }
        end = first - 1;
    }
}

/// Operator tokens, listed as "an operator".
const OPERATORS: [&str; 15] = [
    "!=", "&&", "*", "+", "-", ".*", "./", "/", "<=", "<", "==", ">=", ">", "^", "||",
];

/// Punctuation worth listing as expected (not whitespace or comment starts).
fn is_punctuation(t: &str) -> bool {
    !t.is_empty()
        && !t.trim().is_empty()
        && !t.chars().any(|c| c.is_alphanumeric())
        && !matches!(t, "\"" | "/*" | "//" | "_" | "*/" | "\u{FEFF}")
}

/// The innermost `{` still open at `pos`, when the text at `pos` starts a
/// new block (a missing `}`): its offset and the block's keyword.
fn unclosed_block(source: &str, pos: usize) -> Option<(usize, String)> {
    const BLOCKS: [&str; 9] = [
        "data",
        "hyper",
        "param",
        "model",
        "guide",
        "estimate",
        "infer",
        "likelihood",
        "kernel",
    ];
    let word = word_at(source, pos);
    if !BLOCKS.contains(&word.as_str()) {
        return None;
    }
    let mut stack = Vec::new();
    let b = source.as_bytes();
    let (mut i, mut in_str) = (0, false);
    while i < pos.min(b.len()) {
        match b[i] {
            b'"' => in_str = !in_str,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'{' if !in_str => stack.push(i),
            b'}' if !in_str => {
                stack.pop();
            }
            _ => {}
        }
        i += 1;
    }
    let open = *stack.first()?;
    let head = source[..open].trim_end();
    let kw = head
        .split(|c: char| c.is_whitespace() || c == '}')
        .rev()
        .find(|w| BLOCKS.contains(w))
        .unwrap_or("previous");
    Some((open, kw.to_string()))
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
        Rule::decl => "a declaration `name : type`",
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
        Rule::range_end => "a range `a .. b`",
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
        Rule::callee => "a call `name(...)`",
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

/// Messages for mistakes pest reports far from their cause.
fn special_case(source: &str, pos: usize) -> Option<String> {
    let before = &source[..pos.min(source.len())];
    // An unclosed block comment: `/*` with no `*/` after it.
    if let Some(open) = source.find("/*")
        && open <= pos
        && !source[open..].contains("*/")
    {
        return Some("this block comment is never closed: add `*/`".to_string());
    }
    // An unterminated string: an odd number of quotes on the line so far.
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line_end = source[pos.min(source.len())..]
        .find('\n')
        .map(|i| pos + i)
        .unwrap_or(source.len());
    let line = &source[line_start..line_end];
    let upto = &source[line_start..pos.min(source.len())];
    if line.matches('"').count() % 2 == 1
        && (upto.matches('"').count() % 2 == 1 || source[pos.min(source.len())..].starts_with('"'))
    {
        return Some(
            "this string is never closed: add the closing `\"` on the same line".to_string(),
        );
    }
    // A space between a function's name and its `(`.
    if source[pos.min(source.len())..].starts_with('(') {
        let prev = before.trim_end_matches([' ', '\t']);
        if prev.len() < before.len() && prev.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            let word: String = prev
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
                .chars()
                .rev()
                .collect();
            return Some(format!(
                "no space may come between `{word}` and `(` in a call: write `{word}(...)`"
            ));
        }
    }
    None
}

/// Whether the word at `pos` is a reserved word.
fn is_reserved(source: &str, pos: usize) -> bool {
    const RESERVED: [&str; 20] = [
        "likelihood",
        "kernel",
        "data",
        "hyper",
        "param",
        "model",
        "guide",
        "estimate",
        "infer",
        "let",
        "if",
        "then",
        "else",
        "true",
        "false",
        "using",
        "int",
        "real",
        "vector",
        "matrix",
    ];
    let word = word_at(source, pos);
    RESERVED.contains(&word.as_str()) || word == "positive" || word == "unit" || word == "gp"
}

/// The identifier-like word starting at `pos`.
fn word_at(source: &str, pos: usize) -> String {
    source[pos.min(source.len())..]
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}
