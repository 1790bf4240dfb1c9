//! `idemgen check`: the rules' findings in the chosen format.

use std::io::Write;

use idemgen::report::{self, Format};
use idemgen::{Config, check};

use super::CliError;
use super::args::CheckArgs;

/// Checks the spec and prints the report on standard output.
pub fn run(args: &CheckArgs) -> Result<(), CliError> {
    let mut stdout = anstream::stdout();
    let color = true; // anstream strips styles when the stream is not a terminal or NO_COLOR is set.
    let config = Config::discover(&args.spec, args.config.as_deref())?;
    let format = Format::from(args.format);
    let report = match check(&args.spec, &config) {
        Ok(r) => r,
        Err(e) => {
            if format == Format::Github {
                // Annotations on standard output too, so the workflow shows where the spec broke.
                let _ = write!(stdout, "{}", report::github::render_load_error(&e));
            }
            return Err(CliError::Load(e));
        }
    };
    let _ = write!(stdout, "{}", report::render(&report, format, color));
    let fails = report.fails(args.deny_warnings);
    // The process exits next: freeing the spec's tree node by node would only delay it (a
    // tenth of the run on a large spec), and the operating system takes the memory back at once.
    std::mem::forget(report);
    if fails {
        Err(CliError::Failed(None))
    } else {
        Ok(())
    }
}
