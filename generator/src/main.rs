//! The `idemgen` command line: parses flags, runs one subcommand, prints its error and sets the
//! exit code.
//!
//! Exit codes: 0 on success; 1 when a rule fails (`check`, `build`), a check fails (`probe`) or
//! generated files are out of date (`build --check`); 2 for usage, I/O, config, parse or
//! connection errors.

mod cli;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use cli::CliError;
use cli::args::{Cli, Command};
use cli::build::Target;

const EXIT_FAILED: u8 = 1;
const EXIT_UNUSABLE: u8 = 2;

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Check(args) => cli::check::run(&args),
        Command::Rules => cli::rules::run(),
        Command::Build(args) => cli::build::run(&args, Target::Server),
        Command::Client(args) => cli::build::run(&args, Target::Client),
        Command::Scaffold(args) => cli::scaffold::run(&args),
        Command::Fingerprint(args) => cli::fingerprint::run(&args),
        Command::Probe(args) => cli::probe::run(&args),
    };
    exit(result)
}

/// The one place an error is printed (on standard error) and mapped to an exit code.
fn exit(result: Result<(), CliError>) -> ExitCode {
    let Err(error) = result else {
        return ExitCode::SUCCESS;
    };
    let mut stderr = anstream::stderr();
    let _ = match &error {
        CliError::Failed(None) => Ok(()),
        CliError::Failed(Some(message)) | CliError::Unusable(message) => {
            writeln!(stderr, "error: {message}")
        }
        CliError::Load(e) => write!(
            stderr,
            "{}",
            idemgen::report::human::render_load_error(e, true)
        ),
    };
    ExitCode::from(match error {
        CliError::Failed(_) => EXIT_FAILED,
        CliError::Unusable(_) | CliError::Load(_) => EXIT_UNUSABLE,
    })
}
