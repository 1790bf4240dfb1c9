//! idemgen: the OpenAPI checker and code generator for idempotent operations.
//!
//! [`check`] loads a spec ([`loader`]), finds its operations ([`spec`]), runs the rules
//! ([`rules`]) with a [`Config`], and returns a [`CheckReport`] that the [`report`] module
//! renders as human, JSON, SARIF or GitHub output. The report keeps the [`LoadedSpec`], so a
//! later stage (code generation) can walk the same document without loading it again.

pub mod build;
pub mod builder;
pub mod config;
pub mod emit;
pub mod finding;
pub mod ir;
pub mod loader;
pub mod lock;
#[cfg(feature = "probe")]
pub mod probe;
pub mod report;
pub mod rules;
#[cfg(feature = "scaffold")]
pub mod scaffold;
pub mod spec;

use std::path::Path;

pub use builder::Builder;
pub use config::Config;
pub use finding::{Finding, Level, RuleId};
pub use loader::{LoadError, LoadedSpec};

/// The outcome of checking a spec.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The loaded spec the findings point into.
    pub spec: LoadedSpec,
    /// The findings, sorted by file, line, column and rule id.
    pub findings: Vec<Finding>,
    /// How many operations the spec has.
    pub operations: usize,
    /// How many of them are marked `x-idempotent: true`.
    pub idempotent_operations: usize,
    /// The config the rules ran with.
    pub config: Config,
}

impl CheckReport {
    /// The number of findings at level error.
    pub fn errors(&self) -> usize {
        self.count(Level::Error)
    }

    /// The number of findings at level warning.
    pub fn warnings(&self) -> usize {
        self.count(Level::Warning)
    }

    fn count(&self, level: Level) -> usize {
        self.findings.iter().filter(|f| f.level == level).count()
    }

    /// Whether the check fails: any error, or any warning when `deny_warnings` is set.
    pub fn fails(&self, deny_warnings: bool) -> bool {
        self.errors() > 0 || (deny_warnings && self.warnings() > 0)
    }
}

/// Loads the spec at `spec_path` and runs every rule on it, including the comparison with
/// `idemgen.lock` when one lies beside the spec.
pub fn check(spec_path: &Path, config: &Config) -> Result<CheckReport, LoadError> {
    let mut report = check_loaded(loader::load(spec_path)?, config);
    let mut lock_findings = lock::check_beside(spec_path, &report.spec, config);
    if !lock_findings.is_empty() {
        rules::snippet::adapt(&report.spec, &mut lock_findings);
        report.findings.extend(lock_findings);
        sort_findings(&report.spec, &mut report.findings);
    }
    Ok(report)
}

/// Runs every rule on a spec that is already loaded.
pub fn check_loaded(spec: LoadedSpec, config: &Config) -> CheckReport {
    let outcome = {
        let mut walk = ir::unenforced::KeywordWalk::new(&spec, &config.header);
        rules::run(&spec, config, &mut |op, report| {
            walk.check_operation(op, report)
        })
    };
    let mut findings = outcome.findings;
    rules::snippet::adapt(&spec, &mut findings);
    sort_findings(&spec, &mut findings);
    CheckReport {
        spec,
        findings,
        operations: outcome.operations,
        idempotent_operations: outcome.idempotent_operations,
        config: config.clone(),
    }
}

fn sort_findings(spec: &LoadedSpec, findings: &mut [Finding]) {
    findings.sort_by_cached_key(|f| {
        (
            spec.sources().file(f.file).display_path(),
            f.span.start,
            f.rule.as_str(),
            f.message.clone(),
        )
    });
}

/// The fingerprint of a semantic input given as JSON text, in the format the runtime stores with
/// new records (`hs2`), computed by the runtime's own [`idemgen_protocol::Fingerprint::hs2`] (one
/// home for the rule).
pub fn fingerprint(operation: &str, version: i16, input_json: &str) -> Result<String, String> {
    let input = fingerprint_input(input_json)?;
    idemgen_protocol::Fingerprint::hs2(operation, version, &input)
        .map(|f| f.as_str().to_string())
        .map_err(|e| e.to_string())
}

/// The `hs1` fingerprint of a semantic input given as JSON text: what records written by earlier
/// releases carry, and keep verifying as ([`idemgen_protocol::Fingerprint::hs1`]).
pub fn fingerprint_hs1(operation: &str, version: i16, input_json: &str) -> Result<String, String> {
    let input = fingerprint_input(input_json)?;
    idemgen_protocol::Fingerprint::hs1(operation, version, &input)
        .map(|f| f.as_str().to_string())
        .map_err(|e| e.to_string())
}

fn fingerprint_input(input_json: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(input_json).map_err(|e| format!("the input is not JSON: {e}"))
}
