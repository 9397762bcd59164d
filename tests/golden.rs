//! Golden-file tests for diagnostics.
//!
//! * `tests/models/bad/NN_name.tempest`: each file holds one user error. The
//!   harness runs the pipeline exactly as `tempest check` does (parse, check,
//!   lower, then read and bind the data when a data file is present) and
//!   snapshots the diagnostics as the CLI renders them without colours.
//!   A data file with the same stem (`NN_name.csv` or `NN_name.json`) is
//!   bound like `--data`; an optional `NN_name.args` holds extra options, one
//!   per line: `--rows A..B` and `--set NAME=VALUE`.
//! * `tests/models/good/*.tempest`: models that must check (and bind, when a
//!   data file of the same stem is present) without error.
//! * The real binary is run on a few bad cases: it must fail cleanly, print
//!   exactly what the snapshot holds, and never panic.
//!
//! Update the snapshots with `INSTA_UPDATE=always cargo test --test golden`,
//! then read every changed `.snap` file.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use tempest::command::Failure;
use tempest::error::{ErrorKind, Errors};
use tempest::syntax::diagnostics::{SourceFile, render};

/// Where the model folders are, relative to the repository root.
const BAD: &str = "tests/models/bad";
const GOOD: &str = "tests/models/good";

/// Run everything from the repository root so that file names in messages
/// are relative (`tests/models/bad/03_x.csv`) and snapshots are stable.
fn at_root() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).expect("cd to the repository root")
    });
}

/// One test case: a model with its data file and extra options, if any.
struct Case {
    /// The model, relative to the repository root.
    model: PathBuf,
    /// The data file (`--data`).
    data: Option<PathBuf>,
    /// `--rows A..B`.
    rows: Option<String>,
    /// `--set NAME=VALUE`, in order.
    sets: Vec<String>,
}

impl Case {
    /// The case for a model file: finds `STEM.csv` / `STEM.json` and `STEM.args`.
    fn new(model: &Path) -> Case {
        let rel = relative(model);
        let data: Vec<PathBuf> = ["csv", "json"]
            .iter()
            .map(|e| rel.with_extension(e))
            .filter(|p| p.exists())
            .collect();
        assert!(
            data.len() <= 1,
            "{}: more than one data file: {data:?}",
            rel.display()
        );
        let mut case = Case {
            model: rel.clone(),
            data: data.into_iter().next(),
            rows: None,
            sets: Vec::new(),
        };
        let args = rel.with_extension("args");
        if args.exists() {
            let text = std::fs::read_to_string(&args).expect("read .args");
            for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let (flag, value) = line
                    .split_once('=')
                    .filter(|(f, _)| !f.contains(' '))
                    .or_else(|| line.split_once(char::is_whitespace))
                    .unwrap_or_else(|| panic!("{}: cannot read `{line}`", args.display()));
                let value = value.trim().to_string();
                match flag.trim() {
                    "--rows" => case.rows = Some(value),
                    "--set" => case.sets.push(value),
                    other => panic!(
                        "{}: unsupported option `{other}` (use --rows or --set)",
                        args.display()
                    ),
                }
            }
        }
        case
    }

    /// The equivalent command line.
    fn command_line(&self) -> String {
        self.cli_args().join(" ")
    }

    /// The arguments of `tempest` for this case.
    fn cli_args(&self) -> Vec<String> {
        let mut a = vec!["check".to_string(), slash(&self.model)];
        if let Some(d) = &self.data {
            a.push("--data".into());
            a.push(slash(d));
        }
        if let Some(r) = &self.rows {
            a.push("--rows".into());
            a.push(r.clone());
        }
        for s in &self.sets {
            a.push("--set".into());
            a.push(s.clone());
        }
        a
    }
}

/// A path relative to the repository root.
fn relative(p: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    p.strip_prefix(&root).map(Path::to_path_buf).unwrap_or(p)
}

/// A path with forward slashes, as shown in messages and snapshots.
fn slash(p: &Path) -> String {
    p.display().to_string().replace('\\', "/")
}

/// `tempest check`, through the library call the command line itself uses.
fn check(case: &Case, src: &SourceFile) -> Result<(), Failure> {
    tempest::command::check(src, case.data.as_deref(), case.rows.as_deref(), &case.sets).map(|_| ())
}

/// The outcome of a case: `Ok(None)` when it passed, `Ok(Some((errors,
/// rendered)))` when it failed, `Err(message)` when tempest panicked.
type Outcome = Result<Option<(Errors, String)>, String>;

fn run(case: &Case) -> (SourceFile, Outcome) {
    let text = std::fs::read_to_string(&case.model)
        .unwrap_or_else(|e| panic!("read {}: {e}", case.model.display()));
    let src = SourceFile::new(slash(&case.model), text);
    let outcome = catch_unwind(AssertUnwindSafe(|| check(case, &src)));
    let outcome = match outcome {
        Ok(Ok(())) => Ok(None),
        Ok(Err(f)) => {
            let rendered = render(&f.errors, f.in_source.then_some(&src), false);
            Ok(Some((f.errors, rendered)))
        }
        Err(payload) => Err(payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into())),
    };
    (src, outcome)
}

/// Whether the rendered text has a header for an error of this kind. The
/// renderer writes `error[E-..]: ...` for errors without a span and ariadne
/// writes `[E-..] Error: ...` for errors with one; either counts.
fn has_header(rendered: &str, kind: ErrorKind) -> bool {
    let code = kind.code();
    rendered.contains(&format!("error[{code}]")) || rendered.contains(&format!("[{code}] Error:"))
}

/// Problems with the rendering of a failed bad case.
fn rendering_problems(src: &SourceFile, errors: &Errors, rendered: &str) -> Vec<String> {
    let mut out = Vec::new();
    if errors.0.is_empty() {
        out.push("an empty error list".into());
    }
    if rendered.trim().is_empty() {
        out.push("empty rendering".into());
    }
    if !rendered.to_lowercase().contains("error[") && !rendered.contains("] Error:") {
        out.push("no `error[` header".into());
    }
    for e in errors.iter() {
        if !has_header(rendered, e.kind) {
            out.push(format!(
                "no header with code {} for: {}",
                e.kind.code(),
                e.message
            ));
        }
        if e.kind == ErrorKind::Internal {
            out.push(format!("an internal error: {}", e.message));
        }
        if let Some(span) = e.span {
            let (line, col) = src.line_col(span.start);
            let at = format!("{}:{line}:{col}", src.name);
            if !rendered.contains(&at) {
                out.push(format!("no `{at}` for: {}", e.message));
            }
        }
        if let Some(d) = &e.data
            && !rendered.contains(&d.file)
        {
            out.push(format!("the data file `{}` is not named", d.file));
        }
    }
    for bad in ["panicked", "RUST_BACKTRACE"] {
        if rendered.contains(bad) {
            out.push(format!("`{bad}` in the output"));
        }
    }
    out
}

/// The text with trailing spaces removed from every line.
fn trim_line_ends(text: &str) -> String {
    let mut out: String = text
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    if !text.ends_with('\n') {
        out.pop();
    }
    out
}

/// The model files under a folder, sorted.
fn models(dir: &str) -> Vec<PathBuf> {
    at_root();
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {dir}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "tempest"))
        .collect();
    v.sort();
    v
}

#[test]
fn bad_models() {
    at_root();
    let mut problems: Vec<String> = Vec::new();
    insta::glob!("models/bad/*.tempest", |path| {
        let case = Case::new(path);
        let (src, outcome) = run(&case);
        let rendered = match outcome {
            Err(panic) => {
                problems.push(format!("{}: tempest panicked: {panic}", src.name));
                format!("PANIC: {panic}\n")
            }
            Ok(None) => {
                problems.push(format!(
                    "{}: no error (`{}` succeeds)",
                    src.name,
                    case.command_line()
                ));
                "no error\n".to_string()
            }
            Ok(Some((errors, rendered))) => {
                for p in rendering_problems(&src, &errors, &rendered) {
                    problems.push(format!("{}: {p}", src.name));
                }
                rendered
            }
        };
        // ariadne pads label lines with spaces; the snapshot drops trailing
        // spaces so editors and git hooks cannot break it. (The binary test
        // below compares the untrimmed text byte for byte.)
        let rendered = trim_line_ends(&rendered);
        insta::with_settings!({
            description => format!("tempest {}", case.command_line()),
            omit_expression => true,
        }, {
            insta::assert_snapshot!(rendered);
        });
    });
    assert!(
        problems.is_empty(),
        "problems in bad cases:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn bad_cases_are_well_formed() {
    let files = models(BAD);
    assert!(
        files.len() >= 45,
        "expected at least 45 bad cases, found {}",
        files.len()
    );
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        let stem = f.file_stem().unwrap().to_string_lossy().to_string();
        let (num, name) = stem
            .split_once('_')
            .unwrap_or_else(|| panic!("{stem}: expected NN_short_name"));
        assert!(
            (2..=3).contains(&num.len())
                && num.chars().all(|c| c.is_ascii_digit())
                && !name.is_empty(),
            "{stem}: expected NN_short_name (two or three digits)"
        );
        assert!(
            seen.insert(num.to_string()),
            "{stem}: number {num} used twice"
        );
    }
    // Every data or args file belongs to a model.
    for entry in std::fs::read_dir(BAD).unwrap() {
        let p = entry.unwrap().path();
        let ext = p.extension().map(|e| e.to_string_lossy().to_string());
        match ext.as_deref() {
            Some("tempest") => {}
            Some("csv" | "json" | "args") => assert!(
                p.with_extension("tempest").exists(),
                "{} has no model file beside it",
                p.display()
            ),
            _ => panic!("unexpected file {}", p.display()),
        }
    }
}

#[test]
fn good_models_check_and_bind() {
    let files = models(GOOD);
    assert!(files.len() >= 7, "expected at least 7 good models");
    let mut failures = Vec::new();
    for f in &files {
        let case = Case::new(f);
        let (src, outcome) = run(&case);
        match outcome {
            Ok(None) => {}
            Ok(Some((_, rendered))) => failures.push(format!(
                "`tempest {}` fails:\n{rendered}",
                case.command_line()
            )),
            Err(panic) => failures.push(format!("{}: tempest panicked: {panic}", src.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The real binary fails cleanly and prints exactly the snapshot text.
#[test]
fn binary_reports_errors_cleanly() {
    let cases = [
        "01_missing_brace",
        "13_unknown_distribution",
        "24_vector_times_vector",
        "61_data_nan_cell",
        "65_data_json_length_disagrees",
        "76_data_rows_out_of_range",
        "80_data_set_size_disagrees",
    ];
    at_root();
    for name in cases {
        let case = Case::new(&Path::new(BAD).join(format!("{name}.tempest")));
        let out = Command::new(env!("CARGO_BIN_EXE_tempest"))
            .args(case.cli_args())
            .env_remove("RUST_BACKTRACE")
            .output()
            .expect("run tempest");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let cmd = format!("tempest {}", case.command_line());
        assert!(!out.status.success(), "{cmd}: exit status 0");
        assert_eq!(out.status.code(), Some(1), "{cmd}: exit status");
        assert!(!stderr.trim().is_empty(), "{cmd}: empty stderr");
        assert!(
            stderr.contains("error[") || stderr.contains("] Error:"),
            "{cmd}: no error header in:\n{stderr}"
        );
        for bad in ["panicked", "RUST_BACKTRACE", "E-internal"] {
            assert!(!stderr.contains(bad), "{cmd}: `{bad}` in:\n{stderr}");
        }
        let (_, outcome) = run(&case);
        let Ok(Some((_, rendered))) = outcome else {
            panic!("{cmd}: the library run did not fail");
        };
        assert_eq!(
            stderr, rendered,
            "{cmd}: the binary's stderr differs from the library rendering"
        );
    }
}

/// The binary accepts every good model.
#[test]
fn binary_accepts_good_models() {
    for f in models(GOOD) {
        let case = Case::new(&f);
        let out = Command::new(env!("CARGO_BIN_EXE_tempest"))
            .args(case.cli_args())
            .output()
            .expect("run tempest");
        assert!(
            out.status.success(),
            "tempest {} failed:\n{}",
            case.command_line(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(": ok ("));
    }
}
