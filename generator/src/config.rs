//! `idemgen.toml`: the settings a team may change, with the issue's defaults.
//!
//! ```toml
//! header = "Idempotency-Key"          # header name, matched case-insensitively
//! max-key-length = 255                # the largest maxLength accepted for the header schema
//! required-statuses = [400, 401, 403, 422, 500, 503, 504]
//! recommended-statuses = [409, 410]
//!
//! [rules]                             # severity per rule id: "error", "warning" or "off"
//! idempotency-key-min-length = "off"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::finding::{Level, RuleId};

/// The file name looked up beside the spec when no `--config` is given.
pub const CONFIG_FILE_NAME: &str = "idemgen.toml";

/// Settings for the checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The idempotency header's name, compared case-insensitively.
    pub header: String,
    /// The largest `maxLength` accepted for the header's schema.
    pub max_key_length: u64,
    /// Statuses every idempotent operation must declare.
    pub required_statuses: Vec<u16>,
    /// Statuses every idempotent operation should declare.
    pub recommended_statuses: Vec<u16>,
    /// Severity overrides by rule.
    pub levels: BTreeMap<RuleId, Level>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            header: idemgen_protocol::key::DEFAULT_KEY_HEADER.to_string(),
            max_key_length: idemgen_protocol::MAX_KEY_LEN as u64,
            required_statuses: idemgen_protocol::status::REQUIRED_STATUSES.to_vec(),
            recommended_statuses: idemgen_protocol::status::RECOMMENDED_STATUSES.to_vec(),
            levels: BTreeMap::new(),
        }
    }
}

/// The file format; every field is optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ConfigFile {
    header: Option<String>,
    max_key_length: Option<u64>,
    required_statuses: Option<Vec<u16>>,
    recommended_statuses: Option<Vec<u16>>,
    #[serde(default)]
    rules: BTreeMap<String, Level>,
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not match the format.
    #[error("invalid config `{path}`: {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value is out of range or names an unknown rule.
    #[error("invalid config `{path}`: {message}")]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Config {
    /// The level of `rule`: the override if any, else the rule's default.
    pub fn level(&self, rule: RuleId) -> Level {
        self.levels
            .get(&rule)
            .copied()
            .unwrap_or_else(|| rule.default_level())
    }

    /// Parses a config from TOML text; `path` is only used in messages.
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut config = Config::default();
        if let Some(header) = file.header {
            let valid = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid {
                return Err(invalid(format!(
                    "`header` = {header:?} is not a valid HTTP header name"
                )));
            }
            config.header = header;
        }
        if let Some(max) = file.max_key_length {
            if max == 0 {
                return Err(invalid("`max-key-length` must be at least 1".into()));
            }
            // One key-length truth: what check accepts, the generated server, the runtime and the
            // probe enforce, and the protocol's limit is theirs (protocol.md, "Key syntax").
            let limit = idemgen_protocol::MAX_KEY_LEN as u64;
            if max > limit {
                return Err(invalid(format!(
                    "`max-key-length` = {max} exceeds the protocol's limit of {limit} characters \
                     (protocol.md, \"Key syntax\"): the generated server and the runtime refuse \
                     longer keys, so check may not accept them"
                )));
            }
            config.max_key_length = max;
        }
        for (field, statuses) in [
            ("required-statuses", &file.required_statuses),
            ("recommended-statuses", &file.recommended_statuses),
        ] {
            if let Some(bad) = statuses
                .iter()
                .flatten()
                .find(|s| !(100..=599).contains(*s))
            {
                return Err(invalid(format!(
                    "`{field}` contains {bad}, not an HTTP status"
                )));
            }
        }
        if let Some(s) = file.required_statuses {
            config.required_statuses = s;
        }
        if let Some(s) = file.recommended_statuses {
            config.recommended_statuses = s;
        }
        for (name, level) in file.rules {
            let rule = RuleId::from_name(&name).ok_or_else(|| {
                invalid(format!(
                    "unknown rule `{name}` in [rules]; known rules: {}",
                    RuleId::ALL
                        .iter()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            config.levels.insert(rule, level);
        }
        Ok(config)
    }

    /// Reads a config file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::from_toml(&text, path)
    }

    /// The config for `spec`: `explicit` if given, else `idemgen.toml` beside the spec if it
    /// exists, else the defaults.
    pub fn discover(spec: &Path, explicit: Option<&Path>) -> Result<Config, ConfigError> {
        match Config::locate(spec, explicit) {
            Some(path) => Config::from_file(&path),
            None => Ok(Config::default()),
        }
    }

    /// The file [`Config::discover`] reads for `spec`: `explicit` if given, else `idemgen.toml`
    /// beside the spec if it exists; `None` means the defaults.
    pub fn locate(spec: &Path, explicit: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = explicit {
            return Some(path.to_path_buf());
        }
        let beside = spec
            .parent()
            .map(|dir| dir.join(CONFIG_FILE_NAME))
            .unwrap_or_else(|| PathBuf::from(CONFIG_FILE_NAME));
        beside.is_file().then_some(beside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, Path::new("idemgen.toml"))
    }

    #[test]
    fn empty_file_gives_defaults() {
        assert_eq!(parse("").expect("valid"), Config::default());
    }

    #[test]
    fn fields_override_defaults() {
        let c = parse(
            "header = \"X-Request-Id\"\nmax-key-length = 64\nrequired-statuses = [400]\n[rules]\nidempotency-key-min-length = \"off\"\n",
        )
        .expect("valid");
        assert_eq!(c.header, "X-Request-Id");
        assert_eq!(c.max_key_length, 64);
        assert_eq!(c.required_statuses, vec![400]);
        assert_eq!(c.level(RuleId::KeyMinLength), Level::Off);
        assert_eq!(c.level(RuleId::KeyMissing), Level::Error);
    }

    #[test]
    fn unknown_fields_rules_and_bad_values_are_refused() {
        for (text, needle) in [
            ("hedaer = \"x\"", "unknown field"),
            (
                "[rules]\nno-such-rule = \"off\"",
                "unknown rule `no-such-rule`",
            ),
            (
                "[rules]\nidempotency-key-missing = \"fatal\"",
                "unknown variant",
            ),
            ("required-statuses = [99]", "not an HTTP status"),
            ("header = \"bad header\"", "not a valid HTTP header name"),
            ("max-key-length = 0", "at least 1"),
            (
                "max-key-length = 256",
                "exceeds the protocol's limit of 255",
            ),
            ("header = ", "invalid config"),
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }
}
