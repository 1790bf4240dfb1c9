//! `idemgen rules`: every rule, the config keys and the exit codes.

use std::io::Write;

use idemgen::{Config, RuleId};

use super::CliError;

/// Prints the rules table and the config reference on standard output.
pub fn run() -> Result<(), CliError> {
    let mut stdout = anstream::stdout();
    let width = RuleId::ALL
        .iter()
        .map(|r| r.as_str().len())
        .max()
        .unwrap_or(0);
    let _ = writeln!(stdout, "{:width$}  {:7}  requires", "rule", "default");
    for rule in RuleId::ALL {
        let _ = writeln!(
            stdout,
            "{:width$}  {:7}  {}",
            rule.as_str(),
            rule.default_level().as_str(),
            rule.summary()
        );
    }
    let defaults = Config::default();
    let list = |v: &[u16]| v.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
    let _ = writeln!(
        stdout,
        "\nidemgen.toml (beside the spec, or --config), every key optional:\n\
         header = \"{}\"\n\
         max-key-length = {}\n\
         required-statuses = [{}]\n\
         recommended-statuses = [{}]\n\
         [rules]\n\
         <rule> = \"error\" | \"warning\" | \"off\"\n\n\
         Exit codes of check and build: 0 no errors (warnings allowed unless --deny-warnings); \
         1 a rule failed, or build --check found drift; 2 usage, I/O, config or parse errors.\n\
         More: generator/docs/rules.md",
        defaults.header,
        defaults.max_key_length,
        list(&defaults.required_statuses),
        list(&defaults.recommended_statuses),
    );
    Ok(())
}
