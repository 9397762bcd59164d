//! Which params a sampler's plots draw (`--plot-params`): by default the
//! first [`DEFAULT_SHOWN`] columns; given names, those — a whole param
//! (`a`, every element) or one element (`a[3]`, `A[1, 0]`) — checked
//! against the model's params before the run, each unknown name or index
//! out of range a located error.

use crate::error::{Error, ErrorKind};
use crate::ir::bind::{Bound, concrete_shape};
use crate::stan_csv::language_names;

/// The params a sampler's plot shows when none are chosen.
pub const DEFAULT_SHOWN: usize = 8;

/// The most params one plot shows (each is a row of the trace plot and a
/// row and column of the pair plot).
pub const MAX_SHOWN: usize = 24;

/// Split `--plot-params` text at the commas between names (not at those
/// inside brackets, as in `A[1, 0]`), trimming each name.
pub fn split_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(std::mem::take(&mut cur).trim().to_string());
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

/// A name with the spaces inside its brackets removed, for matching
/// (`A[1,0]` is `A[1, 0]`).
fn canonical(name: &str) -> String {
    name.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The output columns chosen by `requested` among `names` (a sampler fit's
/// column names): each request names one column, or a whole param (every
/// column `name[...]`), in the order asked, each column once.
///
/// Errors: a request that matches no column, naming the flag, the
/// request and the params there are (with a suggestion when one is
/// close); more than [`MAX_SHOWN`] columns.
pub fn select(names: &[String], requested: &[String]) -> Result<Vec<usize>, Error> {
    let canon: Vec<String> = names.iter().map(|n| canonical(n)).collect();
    let mut out: Vec<usize> = Vec::new();
    for r in requested {
        let want = canonical(r);
        let hits: Vec<usize> = (0..names.len())
            .filter(|&k| {
                canon[k] == want
                    || (!want.contains('[')
                        && canon[k]
                            .strip_prefix(want.as_str())
                            .is_some_and(|t| t.starts_with('[')))
            })
            .collect();
        if hits.is_empty() {
            return Err(unknown(r, names));
        }
        for k in hits {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    if out.len() > MAX_SHOWN {
        return Err(Error::new(
            ErrorKind::Settings,
            format!(
                "--plot-params: {} columns chosen; a plot shows at most {MAX_SHOWN}",
                out.len()
            ),
        )
        .with_note("name single elements, e.g. `a[0],a[1]`, instead of whole vectors"));
    }
    Ok(out)
}

/// The error for a request `r` that names none of `names`.
fn unknown(r: &str, names: &[String]) -> Error {
    let bases: Vec<&str> =
        names
            .iter()
            .map(|n| n.split('[').next().unwrap_or(n))
            .fold(Vec::new(), |mut v, b| {
                if !v.contains(&b) {
                    v.push(b);
                }
                v
            });
    let base = r.split('[').next().unwrap_or(r).trim();
    let mut e = if r.is_empty() {
        Error::new(
            ErrorKind::Settings,
            "--plot-params: an empty name (two commas in a row, or one at an end)",
        )
    } else if bases.contains(&base) {
        let first = names.iter().find(|n| n.split('[').next() == Some(base));
        let last = names
            .iter()
            .rev()
            .find(|n| n.split('[').next() == Some(base));
        Error::new(
            ErrorKind::Settings,
            format!(
                "--plot-params {r}: `{base}` has no element {}; its elements run from {} to {}",
                r.trim_start_matches(base),
                first.map_or("", String::as_str),
                last.map_or("", String::as_str)
            ),
        )
    } else {
        let mut e = Error::new(
            ErrorKind::Settings,
            format!("--plot-params {r}: the model has no param `{base}`"),
        );
        if let Some(s) = crate::error::suggest(base, bases.iter().copied()) {
            e = e.with_note(format!("did you mean `{s}`?"));
        }
        e
    };
    e = e.with_note(format!(
        "the params: {}",
        if bases.is_empty() {
            "none".to_string()
        } else {
            bases.join(", ")
        }
    ));
    e
}

/// Check `--plot-params` names against the params of a bound model
/// before the run: the columns they choose, in the samplers' names.
/// A name out of range points at the param's declaration.
pub fn check_bound(bound: &Bound, requested: &[String]) -> Result<Vec<String>, Error> {
    let g = &bound.graph;
    let mut names = Vec::new();
    for p in &g.params {
        let shape = match concrete_shape(&p.ty, &bound.sizes) {
            Some((0, 0)) => vec![],
            Some((n, 0)) => vec![n],
            Some((n, m)) => vec![n, m],
            None => continue,
        };
        names.extend(language_names(&p.name, &shape));
    }
    let picked = select(&names, requested).map_err(|e| {
        // An element out of range is shown at the param's declaration.
        let base = e
            .message
            .strip_prefix("--plot-params ")
            .and_then(|m| m.split('`').nth(1))
            .and_then(|b| g.params.iter().find(|p| p.name == b));
        match base {
            Some(p) if e.message.contains("has no element") => {
                e.with_span(p.span).with_label("declared here")
            }
            _ => e,
        }
    })?;
    Ok(picked.into_iter().map(|k| names[k].clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["alpha", "beta[0]", "beta[1]", "A[0, 0]", "A[1, 0]", "sigma"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn names_split_outside_brackets() {
        assert_eq!(
            split_names("sigma, A[1, 0],beta"),
            vec!["sigma", "A[1, 0]", "beta"]
        );
    }

    #[test]
    fn whole_params_and_elements_are_chosen_in_order() {
        let n = names();
        let want =
            |r: &[&str]| select(&n, &r.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        assert_eq!(want(&["sigma", "beta"]), vec![5, 1, 2]);
        assert_eq!(want(&["A[1,0]", "alpha", "sigma"]), vec![4, 0, 5]);
        // `beta` twice is drawn once.
        assert_eq!(want(&["beta[1]", "beta"]), vec![2, 1]);
    }

    #[test]
    fn unknown_names_are_errors_that_say_what_there_is() {
        let n = names();
        let e = select(&n, &["sigm".to_string()]).unwrap_err();
        assert!(e.message.contains("no param `sigm`"), "{}", e.message);
        assert!(e.notes.iter().any(|x| x.contains("did you mean `sigma`")));
        assert!(e.notes.iter().any(|x| x.contains("alpha, beta, A, sigma")));
        let e = select(&n, &["beta[7]".to_string()]).unwrap_err();
        assert!(
            e.message
                .contains("`beta` has no element [7]; its elements run from beta[0] to beta[1]"),
            "{}",
            e.message
        );
        assert!(select(&n, &[String::new()]).is_err());
    }
}
