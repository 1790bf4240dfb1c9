//! `idemgen probe`: checks a running server against the idempotency protocol.

use std::collections::BTreeMap;
use std::io::Write;

use idemgen::report::{self, Format};
use idemgen::{Config, check};

use super::CliError;
use super::args::{ProbeArgs, ProbeFormat};

/// Checks the spec, probes the server and prints the report on standard output.
pub fn run(args: &ProbeArgs) -> Result<(), CliError> {
    let mut stdout = anstream::stdout();
    let headers = header_pairs("--header", &args.headers)?;
    let other_headers = header_pairs("--other-header", &args.other_headers)?;
    let path_params = path_params(&args.path_params)?;
    let config = Config::discover(&args.spec, args.config.as_deref())?;
    let report = check(&args.spec, &config)?;
    if report.errors() > 0 {
        let mut stderr = anstream::stderr();
        let _ = write!(stderr, "{}", report::render(&report, Format::Human, true));
        return Err(CliError::Unusable(format!(
            "not probing: the spec has {} error(s); fix them first (idemgen check)",
            report.errors()
        )));
    }
    let probe_config = probe_config(args.probe_config.as_deref())?;
    let options = idemgen::probe::Options {
        base_url: args.base_url.clone(),
        headers,
        other_headers,
        only: args.only.clone(),
        path_params,
        operations: probe_config.operations,
        skip: probe_config.skip,
        dry_run: args.dry_run,
    };
    let probed =
        idemgen::probe::run(&report.spec, &config.header, &options).map_err(CliError::unusable)?;
    let text = match args.format {
        ProbeFormat::Human => idemgen::probe::report::human(&probed),
        ProbeFormat::Json => idemgen::probe::report::json(&probed),
        ProbeFormat::Junit => idemgen::probe::report::junit(&probed),
    };
    let _ = write!(stdout, "{text}");
    if probed.failed() {
        Err(CliError::Failed(None))
    } else {
        Ok(())
    }
}

/// The values of header flag `flag` (`--header`, `--other-header`), `Name: value` each.
fn header_pairs(flag: &str, raw: &[String]) -> Result<Vec<(String, String)>, CliError> {
    raw.iter()
        .map(|h| match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                Ok((name.trim().to_string(), value.trim().to_string()))
            }
            _ => Err(CliError::Unusable(format!(
                "{flag} {h:?}: expected 'Name: value'"
            ))),
        })
        .collect()
}

/// The probe config file, if one is named.
fn probe_config(path: Option<&std::path::Path>) -> Result<idemgen::probe::ProbeConfig, CliError> {
    let Some(path) = path else {
        return Ok(Default::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Unusable(format!("--probe-config {}: {e}", path.display())))?;
    toml::from_str(&text)
        .map_err(|e| CliError::Unusable(format!("--probe-config {}: {e}", path.display())))
}

/// `--path-param` values, `[OPERATION_ID.]NAME=VALUE` each.
fn path_params(raw: &[String]) -> Result<BTreeMap<String, String>, CliError> {
    raw.iter()
        .map(|p| match p.split_once('=') {
            Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
            _ => Err(CliError::Unusable(format!(
                "--path-param {p:?}: expected NAME=VALUE"
            ))),
        })
        .collect()
}
