//! `idemgen fingerprint`: the `hs1` fingerprint of a semantic input.

use std::io::Read;

use super::CliError;
use super::args::FingerprintArgs;

/// Reads the input (a file or standard input) and prints its fingerprint.
pub fn run(args: &FingerprintArgs) -> Result<(), CliError> {
    let text = if args.input.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::Unusable(format!("reading standard input: {e}")))?;
        text
    } else {
        std::fs::read_to_string(&args.input)
            .map_err(|e| CliError::Unusable(format!("reading {}: {e}", args.input.display())))?
    };
    let fingerprint =
        idemgen::fingerprint(&args.operation, args.version, &text).map_err(CliError::Unusable)?;
    println!("{fingerprint}");
    Ok(())
}
