//! The layers, checked on the manifests and the source. The crates of the
//! workspace (`crates/*`) follow the pipeline, so an import against the
//! direction does not compile; this test checks the rest:
//!
//! - each crate's manifest names only the crates its row of
//!   [`CRATE_LAYERS`] allows (the table is docs/architecture.md's): the
//!   seam (`tempest-infer`) and `tempest-output` no engine, an engine the
//!   seam, output, the lower crates and the shared libraries, and no
//!   engine another engine;
//! - the registry (`src/infer/registry.rs`, in the facade, which no crate
//!   can import) names every engine crate, and every crate that implements
//!   the seam's engine definition is in it;
//! - an engine's name appears as a string literal only inside its own
//!   crate (its definition, or the library that defines it), the registry
//!   and tests;
//! - no crate's files import each other in a circle of more than five.
//!
//! Files are read with their comments, string literals and `#[cfg(test)]`
//! items left out; their imports are the module paths they name
//! (`use crate::...`, `use super::...`, `crate::a::b::f(..)` in code).

use crate::common;

use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tempest::RunOptions;
use tempest::infer::registry::ENGINES;

/// One source file, read.
struct Source {
    /// Its path under `src/`, with `/` separators (`infer/vi/def.rs`).
    rel: String,
    /// Its module path (`["infer", "vi", "def"]`; `[]` for `lib.rs`).
    module: Vec<String>,
    /// Its code without comments, string literals and `#[cfg(test)]` items.
    code: String,
    /// Its string literals (outside comments and test items), as written.
    literals: Vec<String>,
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src/`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.split('/').map(String::from).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && !(parts.is_empty() && stem == "lib") {
        parts.push(stem.to_string());
    }
    parts
}

/// `text` with comments blanked, string literals replaced by `""` (their
/// contents returned with their byte positions in the code), character
/// literals blanked.
fn strip(text: &str) -> (String, Vec<(usize, String)>) {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut literals = Vec::new();
    let mut i = 0;
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    while i < c.len() {
        let prev_ident = i > 0 && ident(c[i - 1]);
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if !prev_ident && (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r'))) && {
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            while c.get(j) == Some(&'#') {
                j += 1;
            }
            c.get(j) == Some(&'"')
        } {
            // A raw string: r#"..."#.
            let mut j = i + if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while c[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            let start = j;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    break;
                }
                j += 1;
            }
            let body: String = c[start..j.min(c.len())].iter().collect();
            out.extend(std::iter::repeat_n('\n', body.matches('\n').count()));
            literals.push((out.len(), body));
            out.push_str("\"\"");
            i = j + 1 + hashes;
        } else if c[i] == '"' {
            let mut j = i + 1;
            let mut body = String::new();
            while j < c.len() && c[j] != '"' {
                if c[j] == '\\' {
                    body.push(c[j]);
                    j += 1;
                }
                if j < c.len() {
                    body.push(c[j]);
                }
                j += 1;
            }
            out.extend(std::iter::repeat_n('\n', body.matches('\n').count()));
            literals.push((out.len(), body));
            out.push_str("\"\"");
            i = j + 1;
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if c.get(i + 1) == Some(&'\\') {
                let mut j = i + 2;
                while j < c.len() && c[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push(' ');
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push(' ');
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    (out, literals)
}

/// The byte ranges of `#[cfg(test)]` items in stripped code: the attribute
/// and the item after it, up to its `;` or the end of its first braces.
fn test_items(code: &str) -> Vec<(usize, usize)> {
    let b = code.as_bytes();
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("#[cfg(test)]") {
        let start = from + k;
        let mut j = start + "#[cfg(test)]".len();
        while j < b.len() && b[j] != b';' && b[j] != b'{' {
            j += 1;
        }
        if j < b.len() && b[j] == b'{' {
            let mut depth = 0;
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        let end = (j + 1).min(b.len());
        ranges.push((start, end));
        from = end;
    }
    ranges
}

/// Every source file of the facade, under `src/`, but the binary's, read.
fn sources() -> Vec<Source> {
    sources_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// The lower crates (`crates/*`), sorted by name: each crate's name and
/// its manifest's text.
fn crate_dirs() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut dirs: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), p))
        .collect();
    dirs.sort();
    dirs
}

/// Every source file under `root` (a crate's `src/`) but the binary's,
/// read, with paths relative to `root`.
fn sources_under(root: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            if rel.starts_with("bin/") {
                return None;
            }
            let text = std::fs::read_to_string(&p).expect("read source");
            let (code, all) = strip(&text);
            let tests = test_items(&code);
            let in_test = |at: usize| tests.iter().any(|&(s, e)| (s..e).contains(&at));
            let mut kept = String::with_capacity(code.len());
            let mut at = 0;
            for &(s, e) in &tests {
                kept.push_str(&code[at..s]);
                at = e;
            }
            kept.push_str(&code[at..]);
            Some(Source {
                module: module_of(&rel),
                rel,
                code: kept,
                literals: all
                    .into_iter()
                    .filter(|(at, _)| !in_test(*at))
                    .map(|(_, l)| l)
                    .collect(),
            })
        })
        .collect()
}

/// A token of stripped code: a word, `::`, or one other character.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let c: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphanumeric() || c[i] == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[s..i].iter().collect());
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            out.push(c[i].to_string());
            i += 1;
        }
    }
    out
}

/// The paths of a `use` tree starting at `toks[*i]`, each prefixed by
/// `prefix`; `*i` ends after the tree.
fn use_tree(toks: &[String], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    while *i < toks.len() {
        let t = &toks[*i];
        if t == "{" {
            *i += 1;
            loop {
                use_tree(toks, i, path.clone(), out);
                if *i < toks.len() && toks[*i] == "," {
                    *i += 1;
                    if toks.get(*i).is_some_and(|t| t == "}") {
                        *i += 1;
                        return;
                    }
                    continue;
                }
                if *i < toks.len() && toks[*i] == "}" {
                    *i += 1;
                }
                return;
            }
        } else if t == "::" {
            *i += 1;
        } else if t == "*" {
            *i += 1;
            out.push(path);
            return;
        } else if t == "as" {
            *i += 2;
            out.push(path);
            return;
        } else if t == "," || t == "}" || t == ";" {
            out.push(path);
            return;
        } else {
            path.push(t.clone());
            *i += 1;
        }
    }
    out.push(path);
}

/// The module paths a file names: its `use` trees and the `crate::`,
/// `super::` and `self::` paths in its code, as written.
fn named_paths(code: &str) -> Vec<(bool, Vec<String>)> {
    let toks = tokens(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == "use" {
            i += 1;
            let mut paths = Vec::new();
            use_tree(&toks, &mut i, Vec::new(), &mut paths);
            out.extend(paths.into_iter().map(|p| (true, p)));
        } else if (toks[i] == "crate" || toks[i] == "super" || toks[i] == "self")
            && toks.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || toks[i - 1] != "::")
        {
            let mut p = vec![toks[i].clone()];
            i += 1;
            while i + 1 < toks.len()
                && toks[i] == "::"
                && toks[i + 1]
                    .chars()
                    .all(|ch| ch.is_alphanumeric() || ch == '_')
            {
                p.push(toks[i + 1].clone());
                i += 2;
            }
            out.push((false, p));
        } else {
            i += 1;
        }
    }
    out
}

/// The import graph: for each file (by its path under `src/`), the files it
/// imports.
fn imports(srcs: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let files: BTreeMap<Vec<String>, String> = srcs
        .iter()
        .map(|s| (s.module.clone(), s.rel.clone()))
        .collect();
    let mut graph = BTreeMap::new();
    for s in srcs {
        let mut to = BTreeSet::new();
        for (in_use, path) in named_paths(&s.code) {
            let mut abs = s.module.clone();
            let mut rest = path.as_slice();
            match rest.first().map(String::as_str) {
                Some("crate") => {
                    abs.clear();
                    rest = &rest[1..];
                }
                Some("super") => {
                    while rest.first().is_some_and(|t| t == "super") {
                        abs.pop();
                        rest = &rest[1..];
                    }
                }
                Some("self") => rest = &rest[1..],
                Some(first) if in_use => {
                    // `use child::Item` names a child module of this one.
                    let mut child = s.module.clone();
                    child.push(first.to_string());
                    if !files.contains_key(&child) {
                        continue;
                    }
                }
                _ => continue,
            }
            abs.extend(rest.iter().cloned());
            // The longest prefix that is a module file.
            if let Some(f) = (1..=abs.len())
                .rev()
                .find_map(|n| files.get(&abs[..n]))
                .filter(|f| **f != s.rel)
            {
                to.insert(f.clone());
            }
        }
        graph.insert(s.rel.clone(), to);
    }
    graph
}

const REGISTRY: &str = "infer/registry.rs";

/// The engine crates: those whose definitions the registry's `ENGINES`
/// list names (`&tempest_vi::def::MIRROR_DESCENT` is `tempest-vi`).
fn engine_crates(srcs: &[Source]) -> BTreeSet<String> {
    let reg = srcs
        .iter()
        .find(|s| s.rel == REGISTRY)
        .expect("the registry");
    let at = reg.code.find("static ENGINES").expect("the ENGINES list");
    let rest = &reg.code[at..];
    let body = &rest[rest.find("= &[").expect("= &[") + 4..];
    let body = &body[..body.find("];").expect("];")];
    let mut crates = BTreeSet::new();
    for entry in body.split(',').filter(|e| !e.trim().is_empty()) {
        let toks = tokens(entry);
        let first = toks
            .iter()
            .find(|t| t.starts_with("tempest_"))
            .unwrap_or_else(|| panic!("an entry of ENGINES names no engine crate: {entry}"));
        crates.insert(first.replace('_', "-"));
    }
    assert!(crates.len() >= 5, "engines found: {crates:?}");
    crates
}

/// The crate among `crates` a file (`crates/tempest-vi/src/fit.rs`)
/// belongs to.
fn crate_of<'a>(rel: &str, crates: &'a BTreeSet<String>) -> Option<&'a String> {
    let name = rel.strip_prefix("crates/")?.split('/').next()?;
    crates.get(name)
}

/// The strongly connected components of `graph` with more than one file
/// (Tarjan's algorithm, iteratively).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let names: Vec<&String> = graph.keys().collect();
    let index_of: BTreeMap<&String, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            graph[*n]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut out) = (Vec::new(), 0, Vec::new());
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if *k < adj[v].len() {
                let w = adj[v][*k];
                *k += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out
}

#[test]
fn the_import_reader_sees_use_trees_and_paths_in_code() {
    let code = "use crate::infer::{fit::Fit, sink::{self, DrawSink}};\n\
                use super::engine::Engine as E;\n\
                fn f() { let x = crate::output::plot::draw(1); super::super::a::b(); }\n";
    let paths: Vec<String> = named_paths(code)
        .into_iter()
        .map(|(_, p)| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "crate::infer::fit::Fit",
            "crate::infer::sink::self",
            "crate::infer::sink::DrawSink",
            "super::engine::Engine",
            "crate::output::plot::draw",
            "super::super::a::b",
        ]
    );
    let (code, lits) =
        strip("let a = \"x // y\"; // crate::gone\nlet b = r#\"q\"#; let c = '\"'; fn g<'a>() {}");
    let lits: Vec<&str> = lits.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(lits, ["x // y", "q"]);
    assert!(
        !code.contains("gone") && code.contains("fn g<'a>"),
        "{code}"
    );
    let (code, _) = strip("fn a() { 1 }\n#[cfg(test)]\nmod tests { fn b() { 2 } }\nfn c() {}");
    let [(s, e)] = test_items(&code)[..] else {
        panic!("one test item in {code}");
    };
    assert_eq!(&code[s..e], "#[cfg(test)]\nmod tests { fn b() { 2 } }");
}

#[test]
fn the_registry_names_every_engine_crate() {
    let srcs = sources();
    let engines = engine_crates(&srcs);
    for (name, dir) in crate_dirs() {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("read manifest");
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("tempest ")
                || l.trim_start().starts_with("tempest=")
                || l.trim_start().starts_with("tempest.")),
            "{name} depends on the facade"
        );
        // Every crate above the seam but output and the engines' shared
        // libraries is an engine.
        let above_seam = tempest_deps(&text).contains("tempest-infer")
            && !ABOVE_SEAM_NOT_ENGINES.contains(&name.as_str());
        assert_eq!(
            above_seam,
            engines.contains(&name),
            "{name}: above the seam {above_seam}, named in ENGINES {}",
            engines.contains(&name)
        );
    }
}

#[test]
fn engine_names_are_written_only_in_their_own_definitions() {
    let mut srcs = sources();
    let engines = engine_crates(&srcs);
    for (name, dir) in crate_dirs() {
        for mut s in sources_under(&dir.join("src")) {
            s.rel = format!("crates/{name}/src/{}", s.rel);
            srcs.push(s);
        }
    }
    // A library that defines the schemas of engines registered from
    // another crate (the samplers') is where their names are written.
    let owners_may_be: BTreeSet<String> = engines
        .iter()
        .cloned()
        .chain(ENGINE_LIBRARIES.map(String::from))
        .collect();
    for name in tempest::infer::registry::names(false) {
        let mut places: BTreeMap<String, usize> = BTreeMap::new();
        for s in &srcs {
            let n = s.literals.iter().filter(|l| *l == name).count();
            if n > 0 {
                *places.entry(s.rel.clone()).or_default() += n;
            }
        }
        let owners: BTreeSet<&String> = places
            .keys()
            .filter(|f| f.as_str() != REGISTRY)
            .map(|f| {
                crate_of(f, &owners_may_be)
                    .unwrap_or_else(|| panic!("`\"{name}\"` is written in {f}: {places:?}"))
            })
            .collect();
        assert_eq!(
            owners.len(),
            1,
            "`\"{name}\"` is written in more than one engine (or none): {places:?}"
        );
    }
}

/// A guide family the engine refuses is named with the families of every
/// engine: the registry's list reaches the engine through the seam
/// (`BuildCx::engines`), not through an import of the registry.
#[test]
fn a_refused_guide_family_names_the_families_of_every_engine() {
    let m = model(
        r#"
data { n : int  X : matrix[n, 30] = columns("x0".."x29")  y : int<lower=0, upper=1>[n] }
hyper { ell : positive = 5.0 }
model { f ~ gp(0, rbf(ell))  y ~ bernoulli_logit(f(X)) }
guide { f : mean_field }
infer mirror_descent { steps = 5 }
"#,
    );
    let b = bind(&m, &csv("breast_cancer_prepared.csv", Some((0, 19))));
    let e = tempest::run(&b, RunOptions::default())
        .err()
        .expect("the family is refused");
    let text = m.render(&e);
    let takes: Vec<String> = ENGINES
        .iter()
        .filter(|d| !d.accepts().families.is_empty())
        .map(|d| format!("{} takes `", d.schema().name))
        .collect();
    assert!(takes.len() >= 3, "{takes:?}");
    for t in &takes {
        assert!(text.contains(t.as_str()), "`{t}` in\n{text}");
    }
}

/// The crates each crate may depend on: those below it in the
/// pipeline (docs/architecture.md, "The crate graph"). A new dependency
/// between them is a change of this table and of that page.
const CRATE_LAYERS: [(&str, &[&str]); 19] = [
    ("tempest-core", &[]),
    ("tempest-math", &["tempest-core"]),
    ("tempest-syntax", &["tempest-core"]),
    ("tempest-data", &["tempest-core"]),
    ("tempest-mc", &[CORE, MATH, SYNTAX]),
    ("tempest-model", &[CORE, MATH, SYNTAX]),
    ("tempest-ir", &[CORE, DATA, MATH, MODEL, SYNTAX]),
    ("tempest-semantic", &[CORE, IR, MATH, MODEL, SYNTAX]),
    // The engine seam and output: no engine.
    ("tempest-infer", &[CORE, DATA, IR, MATH, MC, MODEL, SYNTAX]),
    ("tempest-output", &[CORE, IR, MODEL, INFER]),
    // The engines' shared libraries: above the seam, no engine.
    ("tempest-gp", &[CORE, IR, MATH, MODEL, INFER]),
    (
        SAMPLERS,
        &[CORE, IR, MATH, MODEL, SYNTAX, INFER, OUTPUT, GP],
    ),
    (VARIATIONAL, &[CORE, IR, MATH, MODEL, SYNTAX, INFER, OUTPUT]),
    // The engines: the seam, output, the shared libraries and the lower
    // crates; none on another engine.
    ("tempest-exact", &[CORE, IR, MATH, MODEL, INFER, OUTPUT, GP]),
    (
        "tempest-vi",
        &[CORE, IR, MATH, MODEL, INFER, OUTPUT, VARIATIONAL],
    ),
    (
        "tempest-svi",
        &[CORE, IR, MATH, MODEL, SYNTAX, INFER, OUTPUT, VARIATIONAL],
    ),
    (
        "tempest-mcmc",
        &[CORE, IR, MATH, MC, MODEL, SYNTAX, INFER, OUTPUT, SAMPLERS],
    ),
    ("tempest-evidence", &[CORE, MC, INFER, OUTPUT, SAMPLERS]),
    ("tempest-meta", &[CORE, IR, INFER]),
];

const CORE: &str = "tempest-core";
const MATH: &str = "tempest-math";
const SYNTAX: &str = "tempest-syntax";
const DATA: &str = "tempest-data";
const MC: &str = "tempest-mc";
const MODEL: &str = "tempest-model";
const IR: &str = "tempest-ir";
const INFER: &str = "tempest-infer";
const OUTPUT: &str = "tempest-output";
const GP: &str = "tempest-gp";
const SAMPLERS: &str = "tempest-samplers";
const VARIATIONAL: &str = "tempest-variational";

/// The crates above the seam that are not engines: output, and the
/// libraries engines share (so that they need not import each other).
const ABOVE_SEAM_NOT_ENGINES: [&str; 4] = ["tempest-output", GP, SAMPLERS, VARIATIONAL];

/// The shared libraries that define engines registered from another
/// crate: the samplers' schemas (`mala`, `hmc`, `nuts`), which the
/// samplers' engines register and the evidence engine nests.
const ENGINE_LIBRARIES: [&str; 1] = [SAMPLERS];

/// The workspace crates a manifest names in its `[dependencies]` and
/// `[dev-dependencies]` sections.
fn tempest_deps(manifest: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]" || line == "[dev-dependencies]";
        } else if in_deps && line.starts_with("tempest-") {
            let name = line.split(['=', ' ', '.']).next().unwrap_or_default();
            out.insert(name.to_string());
        }
    }
    out
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let dirs = crate_dirs();
    let named: BTreeSet<&str> = CRATE_LAYERS.iter().map(|(c, _)| *c).collect();
    let found: BTreeSet<&str> = dirs.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        named, found,
        "every crate under crates/ has a row in CRATE_LAYERS"
    );
    for (name, dir) in &dirs {
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("read manifest");
        let deps = tempest_deps(&text);
        let allowed = CRATE_LAYERS.iter().find(|(c, _)| c == name).unwrap().1;
        let bad: Vec<&String> = deps
            .iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(
            bad.is_empty(),
            "{name} depends on {bad:?}, above it or beside it"
        );
    }
    // The facade stands on every lower crate.
    let facade = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .expect("read the root manifest");
    let deps = tempest_deps(&facade);
    for c in &named {
        assert!(deps.contains(*c), "the facade does not depend on {c}");
    }
}

/// Engines depend on the seam and the shared libraries, never on each
/// other: what two engines share is a library crate (gp, samplers,
/// variational), and a nested engine is found through the registry's list
/// by its role. Read from the manifests, with the engines the registry
/// names.
#[test]
fn no_engine_depends_on_another() {
    let engines = engine_crates(&sources());
    for (name, dir) in crate_dirs() {
        if !engines.contains(&name) {
            continue;
        }
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).expect("read manifest");
        let on: Vec<String> = tempest_deps(&text)
            .into_iter()
            .filter(|d| engines.contains(d))
            .collect();
        assert!(
            on.is_empty(),
            "the engine {name} depends on the engines {on:?}"
        );
    }
}

#[test]
fn the_manifest_reader_sees_the_sections() {
    let text = "[package]\nname = \"tempest-ir\"\n[dependencies]\ntempest-core = { workspace = true }\n\
                tempest-model.workspace = true\nnalgebra = \"1\"\n[features]\ntempest-x = []\n\
                [dev-dependencies]\ntempest-math = { workspace = true }\n";
    let want: BTreeSet<String> = ["tempest-core", "tempest-model", "tempest-math"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(tempest_deps(text), want);
}

/// No crate's files import each other in a circle of more than a dozen
/// files (the largest is within tempest-vi, the lower crates' within
/// tempest-ir's binding and evaluation).
#[test]
fn no_crate_has_a_circle_of_more_than_five_files() {
    let mut roots = vec![(
        "tempest".to_string(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
    )];
    roots.extend(crate_dirs().into_iter().map(|(c, d)| (c, d.join("src"))));
    for (name, root) in roots {
        let srcs = sources_under(&root);
        assert!(!srcs.is_empty(), "{name}: no source files");
        for c in circles(&imports(&srcs)) {
            eprintln!("{name}: circle of {} files: {}", c.len(), c.join(" "));
            assert!(c.len() <= 5, "{name}: a circle of {} files: {c:?}", c.len());
        }
    }
}

/// A crate that skips its doc tests (`doctest = false`, to spare CI a
/// rustdoc run per crate) has no code block that would be one: every
/// block it opens in a comment is `text`. One that skips its unit-test
/// binary (`test = false`) has no `#[test]`.
#[test]
fn crates_that_skip_test_binaries_have_no_tests_in_them() {
    for (name, dir) in crate_dirs() {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("read manifest");
        let no_doctest = manifest.lines().any(|l| l.trim() == "doctest = false");
        let no_test = manifest.lines().any(|l| l.trim() == "test = false");
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).expect("read source");
            let mut open = false;
            for (i, line) in text.lines().enumerate() {
                let t = line.trim_start();
                let doc = t.strip_prefix("///").or_else(|| t.strip_prefix("//!"));
                if let Some(fence) = doc.map(str::trim).filter(|d| d.starts_with("```")) {
                    if !open && no_doctest {
                        assert_eq!(
                            fence,
                            "```text",
                            "{name}: {}:{} opens a code block that would be a doc test, but the crate has doctest = false",
                            f.display(),
                            i + 1
                        );
                    }
                    open = !open;
                }
                assert!(
                    !(no_test && t.starts_with("#[test]")),
                    "{name}: {}:{} has a test, but the crate has test = false",
                    f.display(),
                    i + 1
                );
            }
        }
    }
}
