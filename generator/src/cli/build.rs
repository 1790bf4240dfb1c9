//! `idemgen build` and `idemgen client`: write the generated module, or with `--check` compare
//! it with the files on disk.

use std::io::Write;

use idemgen::{Config, build};

use super::args::BuildArgs;
use super::{CliError, report_findings};

/// What `run` generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `idemgen build`: the server module and the lock.
    Server,
    /// `idemgen client`: the client module.
    Client,
}

impl Target {
    /// The subcommand that generates this target.
    fn subcommand(self) -> &'static str {
        match self {
            Target::Server => "build",
            Target::Client => "client",
        }
    }
}

/// Checks the spec (findings on standard error) and, when it has no errors, writes the files or
/// compares them with the disk.
pub fn run(args: &BuildArgs, target: Target) -> Result<(), CliError> {
    let mut stdout = anstream::stdout();
    let mut stderr = anstream::stderr();
    let config = Config::discover(&args.spec, args.config.as_deref())?;
    let planned = match target {
        Target::Server => build::plan(&args.spec, &args.out, &config),
        Target::Client => build::plan_client(&args.spec, &args.out, &config),
    };
    let plan = planned?;
    report_findings(&plan.report)?;
    if args.check {
        let drift = build::drift(&plan.files);
        for d in &drift {
            let _ = match d {
                build::Drift::Missing(p) => writeln!(stderr, "missing: {}", p.display()),
                build::Drift::Differs(p) => writeln!(stderr, "out of date: {}", p.display()),
            };
        }
        if drift.is_empty() {
            let _ = writeln!(stdout, "up to date");
            return Ok(());
        }
        return Err(CliError::Failed(Some(format!(
            "generated files differ from the spec; run `idemgen {} {} --out {}`",
            target.subcommand(),
            args.spec.display(),
            args.out.display()
        ))));
    }
    let written = build::write(&plan.files)
        .map_err(|e| CliError::Unusable(format!("writing the generated files: {e}")))?;
    for (file, written) in plan.files.iter().zip(written) {
        let what = match written {
            build::Written::Wrote => "wrote",
            build::Written::Unchanged => "unchanged",
        };
        let _ = writeln!(stdout, "{what} {}", file.path.display());
    }
    Ok(())
}
