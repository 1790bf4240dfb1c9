//! The subcommands of the `idemgen` binary: each `run` does its work, prints its output and
//! returns a [`CliError`]; `main` prints the error and picks the exit code.

pub mod args;
pub mod build;
pub mod check;
pub mod fingerprint;
pub mod probe;
pub mod rules;
pub mod scaffold;

use std::fmt::Display;

use std::io::Write;

use idemgen::build::BuildError;
use idemgen::config::ConfigError;
use idemgen::{CheckReport, LoadError};

/// Why a subcommand did not succeed.
#[derive(Debug)]
pub enum CliError {
    /// A rule or a check failed, or generated files are out of date (exit 1). The findings are
    /// already printed; the message, if any, is printed as `error: …`.
    Failed(Option<String>),
    /// Usage, I/O, config or connection errors (exit 2), printed as `error: …`.
    Unusable(String),
    /// The spec did not load (exit 2), printed as diagnostics with positions.
    Load(LoadError),
}

impl CliError {
    /// An unusable-input error whose message is `e`.
    pub fn unusable(e: impl Display) -> CliError {
        CliError::Unusable(e.to_string())
    }
}

impl From<BuildError> for CliError {
    fn from(e: BuildError) -> CliError {
        match e {
            BuildError::Load(e) => CliError::Load(e),
            e => CliError::unusable(e),
        }
    }
}

/// Prints a generating command's findings on standard error; a spec with errors fails the
/// command (exit 1) before anything is written.
pub fn report_findings(report: &CheckReport) -> Result<(), CliError> {
    if !report.findings.is_empty() {
        let _ = write!(
            anstream::stderr(),
            "{}",
            idemgen::report::render(report, idemgen::report::Format::Human, true)
        );
    }
    if report.errors() > 0 {
        return Err(CliError::Failed(Some(format!(
            "not generating code: the spec has {} error(s)",
            report.errors()
        ))));
    }
    Ok(())
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> CliError {
        CliError::unusable(e)
    }
}

impl From<LoadError> for CliError {
    fn from(e: LoadError) -> CliError {
        CliError::Load(e)
    }
}
