//! idemgen's OpenAPI extensions, named and read in one place: the rules check what this module
//! reads, and the IR and the lock use what it returns, so a spelling or a range never differs
//! between them.

use crate::loader::Node;

use super::{Operation, Parameter};

/// The extension that marks an operation idempotent.
pub const X_IDEMPOTENT: &str = "x-idempotent";
/// The extension that selects the request fingerprint version.
pub const X_FINGERPRINT_VERSION: &str = "x-idempotency-fingerprint-version";
/// The extension, on an operation that deletes a resource, naming the idempotent operation that
/// created it: its records become tombstones (410 to late retries).
pub const X_TOMBSTONES: &str = "x-idempotency-tombstones";
/// The extension, on a header parameter, that puts the header's value into the semantic input
/// (its `"header"` group); never on the key header.
pub const X_FINGERPRINT: &str = "x-idempotency-fingerprint";
/// The extension, on an idempotent operation, that sets how long its records are kept
/// (`30d`, `12h`, `90m`, `3600s`); the deployment's default otherwise.
pub const X_RETENTION: &str = "x-idempotency-retention";
/// The prefix reserved for idemgen's extensions (besides [`X_IDEMPOTENT`]).
pub const PREFIX: &str = "x-idempotency-";
/// Every extension idemgen knows.
pub const KNOWN: [&str; 5] = [
    X_IDEMPOTENT,
    X_FINGERPRINT_VERSION,
    X_TOMBSTONES,
    X_FINGERPRINT,
    X_RETENTION,
];

/// The longest retention an operation may set: 100 years, in seconds (PostgreSQL `interval`s and
/// `SystemTime` hold far more; anything longer is a typo, and "forever" is the default).
pub const MAX_RETENTION_SECS: u64 = 100 * 365 * 86_400;

/// `x-idempotency-retention` as an operation writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Retention<'a> {
    /// Not written: the executor's retention (forever by default).
    Absent,
    /// A duration, in seconds.
    Valid(u64),
    /// Anything else (a finding of rule `retention-invalid`): its node and why.
    Invalid(&'a Node, String),
}

/// Reads a retention written as a whole number and a unit: `30d`, `12h`, `90m`, `3600s`.
pub fn parse_retention(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit (s, m, h or d), e.g. `30d`"))?;
    let (number, unit) = text.split_at(split);
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("`{unit}` is not a unit (s, m, h or d), e.g. `30d`")),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a whole number, e.g. `30d`"))?;
    let secs = number
        .checked_mul(unit_secs)
        .filter(|s| (1..=MAX_RETENTION_SECS).contains(s))
        .ok_or_else(|| format!("`{text}` is not between 1s and 36500d"))?;
    Ok(secs)
}

/// The fingerprint version an operation uses when it names none.
pub const DEFAULT_FINGERPRINT_VERSION: i16 = 1;

/// Whether `key` is one of idemgen's extensions or in its reserved prefix.
pub fn is_ours(key: &str) -> bool {
    key == X_IDEMPOTENT || key.starts_with(PREFIX)
}

/// `x-idempotency-fingerprint-version` as an operation writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FingerprintVersion<'a> {
    /// Not written: [`DEFAULT_FINGERPRINT_VERSION`].
    Absent,
    /// An integer from 1 to 32767 (the runtime stores it as a PostgreSQL `smallint`).
    Valid(i16),
    /// Anything else (a finding of rule `fingerprint-version-invalid`), with its node.
    Invalid(&'a Node),
}

impl FingerprintVersion<'_> {
    /// The version generated code and the lock use: the written one when valid, else the
    /// default (an invalid one fails `check` before anything is generated).
    pub fn or_default(self) -> i16 {
        match self {
            FingerprintVersion::Valid(v) => v,
            _ => DEFAULT_FINGERPRINT_VERSION,
        }
    }
}

impl<'a> Operation<'a> {
    /// The operation's `x-idempotency-fingerprint-version`.
    pub fn fingerprint_version(&self) -> FingerprintVersion<'a> {
        match self.node.node.get(X_FINGERPRINT_VERSION) {
            None => FingerprintVersion::Absent,
            Some(node) => match node
                .as_int()
                .and_then(|v| i16::try_from(v).ok())
                .filter(|v| *v >= 1)
            {
                Some(v) => FingerprintVersion::Valid(v),
                None => FingerprintVersion::Invalid(node),
            },
        }
    }

    /// The operation's `x-idempotency-retention`.
    pub fn retention(&self) -> Retention<'a> {
        match self.node.node.get(X_RETENTION) {
            None => Retention::Absent,
            Some(node) => match node.as_str() {
                Some(text) => match parse_retention(text) {
                    Ok(secs) => Retention::Valid(secs),
                    Err(why) => Retention::Invalid(node, why),
                },
                None => Retention::Invalid(
                    node,
                    format!(
                        "a duration is written as a string such as `30d`, found {}",
                        node.kind_name()
                    ),
                ),
            },
        }
    }

    /// The node of `x-idempotency-tombstones`, when written.
    pub fn tombstones_node(&self) -> Option<&'a Node> {
        self.node.node.get(X_TOMBSTONES)
    }

    /// The operationIds `x-idempotency-tombstones` names, each with its node: one string, or a
    /// list of them (`[createPayment, capturePayment]`). Entries that are not strings are left
    /// out (the rule reports them).
    pub fn tombstones_targets(&self) -> Vec<(&'a str, &'a Node)> {
        match self.tombstones_node() {
            None => Vec::new(),
            Some(node) => match node.as_seq() {
                Some(items) => items
                    .iter()
                    .filter_map(|n| n.as_str().map(|s| (s, n)))
                    .collect(),
                None => node.as_str().map(|s| vec![(s, node)]).unwrap_or_default(),
            },
        }
    }
}

impl<'a> Parameter<'a> {
    /// `x-idempotency-fingerprint` as the Parameter Object writes it: its key and value.
    pub fn fingerprint_marker(&self) -> Option<(&'a crate::loader::Key, &'a Node)> {
        self.node.node.entry(X_FINGERPRINT)
    }

    /// Whether the parameter is a header marked `x-idempotency-fingerprint: true`: its value
    /// enters the semantic input (the key header never does; `check` refuses the marker there).
    pub fn is_fingerprinted_header(&self) -> bool {
        self.location == Some("header")
            && self
                .fingerprint_marker()
                .and_then(|(_, value)| value.as_bool())
                == Some(true)
    }
}
