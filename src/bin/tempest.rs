//! The `tempest` command line: run, check and inspect model files (see
//! [`tempest::cli`]).

fn main() -> std::process::ExitCode {
    tempest::cli::main_with(tempest::Registry::default())
}
