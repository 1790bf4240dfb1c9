//! The fingerprint lock, `idemgen.lock`: per idempotent operation, its fingerprint version and a
//! hash of its semantic input's shape.
//!
//! A stored record holds the fingerprint of the request that created it. If the semantic input
//! changes shape (a parameter added, a body property renamed) while the fingerprint version stays,
//! a retry of an old request is fingerprinted differently and looks like a reused key (422), or a
//! new request can be taken for an old one and replayed a result that means something else. So
//! `build` and `check` compare the spec with the lock and refuse a shape change without a version
//! bump; `build` then records the new state.
//!
//! The shape is the canonical JSON of what enters the input: path and query parameters (name,
//! `required`, schema) and the body (media type, `required`, schema), with `$ref`s resolved and
//! only meaning-bearing schema keywords kept (`type`, `format`, `properties`, `required`,
//! `items`, `enum`, …; not `description`, `example`, or validation bounds, which change what is
//! accepted but not what an accepted request means). Renaming a component schema does not change
//! the shape; recursion is cut with a marker.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use sha2::{Digest, Sha256};

use crate::config::{Config, Level};
use crate::loader::{LoadedSpec, Node, NodeRef, RefTarget, Value};
use crate::rules::extensions::X_FINGERPRINT_VERSION;
use crate::rules::{Finding, RuleId, is_idempotent};
use crate::spec::{self, Operation};

/// The lock's file name, beside the spec.
pub const LOCK_FILE: &str = "idemgen.lock";

/// The lock format version written in the file.
const FORMAT: u32 = 1;

/// Schema keywords that carry meaning for the shape.
const KEPT: [&str; 14] = [
    "type",
    "format",
    "nullable",
    "enum",
    "const",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "oneOf",
    "anyOf",
    "allOf",
    "discriminator",
    "contentEncoding",
];

/// Where the lock of `spec_path` lives.
pub fn lock_path(spec_path: &Path) -> PathBuf {
    spec_path
        .parent()
        .map(|p| p.join(LOCK_FILE))
        .unwrap_or_else(|| PathBuf::from(LOCK_FILE))
}

/// The contents of `idemgen.lock`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// The lock format version.
    pub version: u32,
    /// The idempotent operations by `operationId`.
    #[serde(default)]
    pub operations: BTreeMap<String, LockedOperation>,
}

/// What the lock records for one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockedOperation {
    /// `x-idempotency-fingerprint-version`.
    pub fingerprint_version: i16,
    /// `sha256:` and the hex SHA-256 of the canonical shape.
    pub input_shape: String,
}

impl Lock {
    /// The lock describing `spec` now.
    pub fn from_spec(spec: &LoadedSpec) -> Lock {
        let mut operations = BTreeMap::new();
        for op in spec::operations(spec) {
            if !is_idempotent(&op) || spec::SAFE_METHODS.contains(&op.method) {
                continue;
            }
            let Some(id) = op.operation_id().and_then(Node::as_str) else {
                continue;
            };
            let shape = input_shape(spec, &op);
            let digest = Sha256::digest(canonical(&shape).as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            operations.insert(
                id.to_string(),
                LockedOperation {
                    fingerprint_version: fingerprint_version(&op),
                    input_shape: format!("sha256:{hex}"),
                },
            );
        }
        Lock {
            version: FORMAT,
            operations,
        }
    }

    /// Parses a lock file.
    pub fn parse(text: &str) -> Result<Lock, String> {
        let lock: Lock = toml::from_str(text).map_err(|e| e.to_string())?;
        if lock.version != FORMAT {
            return Err(format!(
                "lock format version {} is not supported (expected {FORMAT})",
                lock.version
            ));
        }
        Ok(lock)
    }

    /// The file contents, deterministic.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# Written by `idemgen build`: the fingerprint version and semantic input shape of every\n\
             # idempotent operation. Commit it; `idemgen check` and `build` refuse a shape change\n\
             # without a bump of `x-idempotency-fingerprint-version`. Do not edit.\n",
        );
        out.push_str(&format!("version = {}\n", self.version));
        for (id, op) in &self.operations {
            out.push_str(&format!(
                "\n[operations.{}]\nfingerprint-version = {}\ninput-shape = \"{}\"\n",
                toml_key(id),
                op.fingerprint_version,
                op.input_shape
            ));
        }
        out
    }
}

fn toml_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_string()
    } else {
        serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""))
    }
}

fn fingerprint_version(op: &Operation<'_>) -> i16 {
    op.node
        .node
        .get(X_FINGERPRINT_VERSION)
        .and_then(Node::as_int)
        .and_then(|v| i16::try_from(v).ok())
        .filter(|v| *v >= 1)
        .unwrap_or(1)
}

/// Compares the spec's lock with the recorded one: a shape change without a version change, or
/// a version lower than recorded, is a finding of `fingerprint-shape-changed`.
pub fn compare(
    spec: &LoadedSpec,
    config: &Config,
    current: &Lock,
    recorded: &Lock,
    lock_display: &str,
) -> Vec<Finding> {
    let level = config.level(RuleId::FingerprintShapeChanged);
    if level == Level::Off {
        return Vec::new();
    }
    let mut findings = Vec::new();
    for op in spec::operations(spec) {
        let Some(id) = op.operation_id().and_then(Node::as_str) else {
            continue;
        };
        let (Some(now), Some(then)) = (current.operations.get(id), recorded.operations.get(id))
        else {
            continue;
        };
        let at = op
            .node
            .node
            .entry(X_FINGERPRINT_VERSION)
            .map(|(_, v)| v.span)
            .or_else(|| op.operation_id().map(|n| n.span))
            .unwrap_or(op.key.span);
        let message = if now.fingerprint_version < then.fingerprint_version {
            format!(
                "{}: `{X_FINGERPRINT_VERSION}` went down from {} ({lock_display}) to {}",
                op.display_name(),
                then.fingerprint_version,
                now.fingerprint_version
            )
        } else if now.fingerprint_version == then.fingerprint_version
            && now.input_shape != then.input_shape
        {
            format!(
                "{}: the semantic input (path and query parameters, body) changed shape since {lock_display} was written, but `{X_FINGERPRINT_VERSION}` is still {}",
                op.display_name(),
                now.fingerprint_version
            )
        } else {
            continue;
        };
        findings.push(Finding {
            rule: RuleId::FingerprintShapeChanged,
            level,
            message,
            file: op.node.file,
            span: at,
            operations: vec![op.label()],
            help: RuleId::FingerprintShapeChanged.help(config).replace(
                "x-idempotency-fingerprint-version: 2",
                &format!(
                    "x-idempotency-fingerprint-version: {}",
                    then.fingerprint_version.saturating_add(1)
                ),
            ),
        });
    }
    findings
}

/// The canonical shape of an operation's semantic input.
pub fn input_shape(spec: &LoadedSpec, op: &Operation<'_>) -> Json {
    let mut shaper = Shaper {
        spec,
        memo: HashMap::new(),
        stack: Vec::new(),
    };
    let mut out = Map::new();
    for location in ["path", "query"] {
        let mut group = Map::new();
        for p in op.parameters(spec) {
            if p.location != Some(location) {
                continue;
            }
            let Some(name) = p.name else { continue };
            let required = location == "path"
                || p.node.node.get("required").and_then(Node::as_bool) == Some(true);
            let schema = p
                .schema(spec)
                .map(|s| shaper.shape(s).0)
                .unwrap_or(Json::Null);
            let mut entry = Map::new();
            entry.insert("required".into(), Json::Bool(required));
            entry.insert("schema".into(), schema);
            group.insert(name.to_string(), Json::Object(entry));
        }
        if !group.is_empty() {
            out.insert(location.into(), Json::Object(group));
        }
    }
    if let Some(rb) = op.node.node.get("requestBody") {
        let rb = spec.deref(NodeRef {
            file: op.node.file,
            node: rb,
        });
        let mut entry = Map::new();
        entry.insert(
            "required".into(),
            Json::Bool(rb.node.get("required").and_then(Node::as_bool) == Some(true)),
        );
        if let Some(content) = rb.node.get("content").and_then(Node::as_map) {
            let chosen = content
                .entries()
                .iter()
                .find(|(k, _)| crate::ir::is_json(&k.text))
                .or_else(|| content.entries().first());
            if let Some((media, node)) = chosen {
                entry.insert("media".into(), Json::String(media.text.clone()));
                let schema = node
                    .get("schema")
                    .map(|s| {
                        shaper
                            .shape(NodeRef {
                                file: rb.file,
                                node: s,
                            })
                            .0
                    })
                    .unwrap_or(Json::Null);
                entry.insert("schema".into(), schema);
            }
        }
        out.insert("body".into(), Json::Object(entry));
    }
    Json::Object(out)
}

struct Shaper<'s> {
    spec: &'s LoadedSpec,
    /// Shapes of reference targets that did not depend on the stack (no recursion marker).
    memo: HashMap<RefTarget, Json>,
    stack: Vec<RefTarget>,
}

impl<'s> Shaper<'s> {
    /// The shape of a schema, and whether it contains a marker for recursion into a schema
    /// that is on the stack (then it must not be memoised).
    fn shape(&mut self, at: NodeRef<'s>) -> (Json, bool) {
        if self.stack.len() > 128 {
            return (Json::String("$deep".into()), true);
        }
        if let Some(reference) = at.node.ref_target() {
            let Ok(target) = self.spec.ref_target(at.file, reference) else {
                return (Json::Null, false);
            };
            if let Some(depth) = self.stack.iter().position(|t| *t == target) {
                return (json_marker(self.stack.len() - depth), true);
            }
            if let Some(shape) = self.memo.get(&target) {
                return (shape.clone(), false);
            }
            let Ok(next) = self.spec.resolve_ref(at.file, reference) else {
                return (Json::Null, false);
            };
            self.stack.push(target.clone());
            let (shape, recursive) = self.shape(next);
            self.stack.pop();
            if !recursive {
                self.memo.insert(target, shape.clone());
            }
            return (shape, recursive);
        }
        match &at.node.value {
            Value::Map(map) => {
                let mut out = Map::new();
                let mut recursive = false;
                for (key, value) in map.entries() {
                    if !KEPT.contains(&key.text.as_str()) {
                        continue;
                    }
                    let shaped = match key.text.as_str() {
                        "properties" => {
                            let mut props = Map::new();
                            for (name, schema) in value.as_map().map(|m| m.entries()).unwrap_or(&[])
                            {
                                let (s, r) = self.shape(NodeRef {
                                    file: at.file,
                                    node: schema,
                                });
                                recursive |= r;
                                props.insert(name.text.clone(), s);
                            }
                            Json::Object(props)
                        }
                        "items" | "additionalProperties" => {
                            let (s, r) = self.shape(NodeRef {
                                file: at.file,
                                node: value,
                            });
                            recursive |= r;
                            s
                        }
                        "oneOf" | "anyOf" | "allOf" => {
                            let mut items = Vec::new();
                            for item in value.as_seq().unwrap_or(&[]) {
                                let (s, r) = self.shape(NodeRef {
                                    file: at.file,
                                    node: item,
                                });
                                recursive |= r;
                                items.push(s);
                            }
                            Json::Array(items)
                        }
                        "discriminator" => value
                            .get("propertyName")
                            .and_then(Node::as_str)
                            .map(|p| Json::String(p.to_string()))
                            .unwrap_or(Json::Null),
                        "required" => {
                            let mut names: Vec<String> = value
                                .as_seq()
                                .unwrap_or(&[])
                                .iter()
                                .filter_map(Node::as_str)
                                .map(str::to_string)
                                .collect();
                            names.sort();
                            names.dedup();
                            Json::Array(names.into_iter().map(Json::String).collect())
                        }
                        _ => literal(value),
                    };
                    out.insert(key.text.clone(), shaped);
                }
                (Json::Object(out), recursive)
            }
            _ => (literal(at.node), false),
        }
    }
}

fn json_marker(levels_up: usize) -> Json {
    let mut m = Map::new();
    m.insert("$recursive".into(), Json::from(levels_up));
    Json::Object(m)
}

/// A node as plain JSON (for `enum`, `const`, `type` values).
fn literal(node: &Node) -> Json {
    match &node.value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .unwrap_or(Json::Null),
        Value::Str(s) => Json::String(s.clone()),
        Value::Seq(items) => Json::Array(items.iter().map(literal).collect()),
        Value::Map(m) => Json::Object(
            m.entries()
                .iter()
                .map(|(k, v)| (k.text.clone(), literal(v)))
                .collect(),
        ),
    }
}

/// JSON with object members sorted by key at every level, without whitespace.
pub fn canonical(value: &Json) -> String {
    fn write(value: &Json, out: &mut String) {
        match value {
            Json::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Json::String(k.clone()).to_string());
                    out.push(':');
                    write(v, out);
                }
                out.push('}');
            }
            Json::Array(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(v, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// Reads the lock beside `spec_path`, if any, and compares it with the spec: the findings of
/// `check`. An unreadable lock is one finding too.
pub fn check_beside(spec_path: &Path, spec: &LoadedSpec, config: &Config) -> Vec<Finding> {
    let path = lock_path(spec_path);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Vec::new();
    };
    let display = crate::loader::source::display_path(&path);
    let current = Lock::from_spec(spec);
    match Lock::parse(&text) {
        Ok(recorded) => compare(spec, config, &current, &recorded, &display),
        Err(e) => {
            let level = config.level(RuleId::FingerprintShapeChanged);
            if level == Level::Off {
                return Vec::new();
            }
            let root = spec.root();
            vec![Finding {
                rule: RuleId::FingerprintShapeChanged,
                level,
                message: format!("{display} cannot be read: {e}"),
                file: root.file,
                span: root
                    .node
                    .entry("openapi")
                    .map(|(k, _)| k.span)
                    .unwrap_or(root.node.span),
                operations: Vec::new(),
                help: "restore the lock from version control, or delete it and run `idemgen build` to record the current shapes".to_string(),
            }]
        }
    }
}
