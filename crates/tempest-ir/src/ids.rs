//! Integer ids read as 0-based indices: an int column declared with
//! `column("county", levels = 1..J)` (or a list, `levels = [10, 20, 30]`)
//! holds the ids as the data file writes them, and the model sees each
//! id's position among the levels, 0, 1, …, so that `a[county]` picks
//! county 1's element 0. Declared bounds describe the ids as written.

use super::bound::Bound;
use super::eval::Env;
use super::value::Value;
use std::collections::HashMap;
use tempest_core::error::{DataLocation, Error, ErrorKind};
use tempest_model::constraint::Bounds;
use tempest_syntax::ast::Span;

/// The value of a `levels = ...` expression of integer ids.
pub enum IdLevels {
    /// `a..b`, inclusive: id x is numbered x − a.
    Range(i64, i64),
    /// A list of distinct ids: each is numbered by its position.
    List(HashMap<i64, usize>, Vec<i64>),
}

impl IdLevels {
    /// The levels from the value of their expression (`span`): a
    /// non-empty range, or an array without repeats.
    pub fn new(v: &Value<f64>, span: Span) -> Result<IdLevels, Error> {
        let bad = |msg: String| Error::at(ErrorKind::Data, span, msg).with_label("levels");
        match v {
            Value::IntRange(a, b) if a <= b && b.checked_sub(*a).is_some() => {
                Ok(IdLevels::Range(*a, *b))
            }
            Value::IntRange(a, b) if a <= b => Err(bad(format!(
                "the levels {a}..{b} hold more ids than can be numbered"
            ))),
            Value::IntRange(a, b) => Err(bad(format!(
                "the levels {a}..{b} are empty: the range ends before it starts"
            ))),
            Value::IntArray(xs) if xs.is_empty() => {
                Err(bad("`levels` needs at least one id".into()))
            }
            Value::IntArray(xs) => {
                let mut index = HashMap::with_capacity(xs.len());
                for (k, &x) in xs.iter().enumerate() {
                    if index.insert(x, k).is_some() {
                        return Err(bad(format!("the id {x} appears twice in `levels`")));
                    }
                }
                Ok(IdLevels::List(index, xs.clone()))
            }
            other => Err(bad(format!(
                "`levels` needs integer ids (`1..J`, `[10, 20, 30]`), found {}",
                other.shape()
            ))),
        }
    }

    /// The number of id `x`, or `None` when `x` is not among the levels.
    fn number(&self, x: i64) -> Option<i64> {
        match self {
            IdLevels::Range(a, b) if (*a..=*b).contains(&x) => x.checked_sub(*a),
            IdLevels::Range(..) => None,
            IdLevels::List(index, _) => index.get(&x).map(|&k| k as i64),
        }
    }

    /// The id numbered `k`, or `None` when there is no such level.
    fn id(&self, k: i64) -> Option<i64> {
        match self {
            IdLevels::Range(a, b) => a.checked_add(k).filter(|x| k >= 0 && x <= b),
            IdLevels::List(_, xs) => usize::try_from(k).ok().and_then(|k| xs.get(k).copied()),
        }
    }

    /// The levels as written: `1..85`, or the first 20 ids of a list.
    fn describe(&self) -> String {
        match self {
            IdLevels::Range(a, b) => format!("{a}..{b}"),
            IdLevels::List(_, xs) => {
                let shown: Vec<String> = xs.iter().take(20).map(|x| x.to_string()).collect();
                let more = if xs.len() > 20 { ", …" } else { "" };
                format!("[{}{more}]", shown.join(", "))
            }
        }
    }
}

/// The ids as the data file wrote them, from the numbers `ns` of the data
/// declaration `i` of `bound` (declared with integer `levels`): what a
/// saved fit stores, so that binding it again numbers them the same way.
/// `None` when the declaration has no integer levels.
pub fn written_ids(bound: &Bound, i: usize, ns: &[i64]) -> Option<Vec<i64>> {
    let e = bound.graph.data.get(i)?.ids.as_ref()?;
    let env = Env::new(bound, &[], &[], &[]);
    let levels = IdLevels::new(&env.eval(e).ok()?, e.span).ok()?;
    ns.iter().map(|&k| levels.id(k)).collect()
}

/// Number the ids `xs` of the int array `name` by their position among
/// `levels`, after checking each against the declared `bounds` (on the ids
/// as written); `at(k)` is the data location of element k, `span` the
/// declaration.
pub fn number_ids(
    name: &str,
    levels: &IdLevels,
    bounds: Bounds,
    xs: &[i64],
    at: impl Fn(usize) -> DataLocation,
    span: Span,
) -> Result<Vec<i64>, Error> {
    let fail = |k: usize, msg: String| {
        Err(Error::new(ErrorKind::Data, msg)
            .in_data(at(k))
            .with_span(span)
            .with_label("declared here"))
    };
    let mut out = Vec::with_capacity(xs.len());
    for (k, &x) in xs.iter().enumerate() {
        if !bounds.contains(x as f64) {
            return fail(
                k,
                format!("`{name}` must be {}, found {x}", bounds.describe()),
            );
        }
        match levels.number(x) {
            Some(n) => out.push(n),
            None => {
                return fail(
                    k,
                    format!(
                        "{x} is not among the declared levels of `{name}` ({})",
                        levels.describe()
                    ),
                );
            }
        }
    }
    Ok(out)
}
