//! The `idemgen` command line: parses flags, calls the library, prints, sets the exit code.
//!
//! Exit codes: 0 when the check passes, 1 when a rule fails, 2 for usage, I/O, config or parse
//! errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use idemgen::report::{self, Format};
use idemgen::{Config, check};

/// Checks OpenAPI specs for idempotent operations.
#[derive(Debug, Parser)]
#[command(name = "idemgen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Checks every operation marked `x-idempotent: true` against the idempotency contract.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The OpenAPI 3.0/3.1 document (YAML or JSON).
    spec: PathBuf,
    /// The config file [default: idemgen.toml beside the spec, if present].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// The output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Human)]
    format: FormatArg,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    deny_warnings: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatArg {
    /// rustc-style diagnostics.
    Human,
    /// A JSON document (see docs/check-json.md).
    Json,
    /// SARIF 2.1.0.
    Sarif,
    /// GitHub Actions annotations.
    Github,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Human => Format::Human,
            FormatArg::Json => Format::Json,
            FormatArg::Sarif => Format::Sarif,
            FormatArg::Github => Format::Github,
        }
    }
}

const EXIT_FAILED: u8 = 1;
const EXIT_UNUSABLE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check(args) => run_check(&args),
    }
}

fn run_check(args: &CheckArgs) -> ExitCode {
    let mut stdout = anstream::stdout();
    let mut stderr = anstream::stderr();
    let color = true; // anstream strips styles when the stream is not a terminal or NO_COLOR is set.
    let config = match Config::discover(&args.spec, args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let format = Format::from(args.format);
    let report = match check(&args.spec, &config) {
        Ok(r) => r,
        Err(e) => {
            if format == Format::Github {
                let _ = write!(stdout, "{}", report::github::render_load_error(&e));
            }
            let _ = write!(stderr, "{}", report::human::render_load_error(&e, color));
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let _ = write!(stdout, "{}", report::render(&report, format, color));
    if report.fails(args.deny_warnings) {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}
