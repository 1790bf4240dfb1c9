//! `idemgen fingerprint`: the fingerprint of a semantic input, `hs2` (new records) or `hs1`.

use std::io::Read;

use super::CliError;
use super::args::{FingerprintArgs, FingerprintFormat};

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
    let compute = match args.format {
        FingerprintFormat::Hs2 => idemgen::fingerprint,
        FingerprintFormat::Hs1 => idemgen::fingerprint_hs1,
    };
    let fingerprint = compute(&args.operation, args.version, &text).map_err(CliError::Unusable)?;
    println!("{fingerprint}");
    Ok(())
}
