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
//! The shape is computed from the IR's [`Idempotency`] of each operation, the same value the
//! emitter writes the semantic input from, so the lock and the generated code cannot disagree on
//! what is fingerprinted. It is the canonical JSON of what the semantic input serialises: the
//! path and query groups (present when the operation has such parameters) with each parameter's
//! wire name, whether it is required and its type, and the body (required, and its type), every
//! named type expanded to the JSON it serialises as (object properties with their wire names and
//! whether they are required, enum values, union alternatives, nullability) and hashed with
//! SHA-256. An applied `default` counts (`{"required": false, "default": 20, …}`): an absent value
//! is then fingerprinted as the default instead of being omitted, so gaining one is a new shape.
//! Member order, Rust and component names, descriptions, examples, validation bounds (`const`
//! too) and anything that only changes what is accepted (`additionalProperties: false`,
//! discriminator mappings) do not count, nor does whether a discriminated union is internally
//! tagged (its alternatives' implied tag fields are shaped as written); recursion is cut with a
//! marker.
//!
//! One change of shape is compatible and needs no bump: optional members (without a default)
//! added to objects that already refused unknown properties. The lock records the JSON pointers
//! of such members (`closed-optional`) and of the closed objects (`closed-objects`); a new shape
//! that is the recorded one plus members at new pointers under recorded closed objects, and
//! nothing else, passes ([`compatible_addition`]). Objects of a type that appears in a union are
//! never recorded. A lock without the lists (written before they existed) treats every change as
//! incompatible.
//!
//! Format 1 hashed the spec's schema nodes instead; a format 1 lock is still read for its
//! fingerprint versions (which may never go down), and `build` rewrites it in format 2.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::finding::Level;
use crate::finding::{Finding, RuleId};
use crate::ir::types::{TypeDef, TypeKind, TypeRef};
use crate::ir::{Api, BodyKind, Idempotency, ParamIr};
use crate::loader::{LoadedSpec, Node};
use crate::spec;
use crate::spec::extensions::X_FINGERPRINT_VERSION;

/// The lock's file name, beside the spec.
pub const LOCK_FILE: &str = "idemgen.lock";

/// The lock format version written in the file.
const FORMAT: u32 = 2;

/// The earlier format, whose shapes hashed schema nodes: still read for its versions.
const FORMAT_1: u32 = 1;

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
    /// Where the shape has optional members without a default in objects that refuse unknown
    /// properties (`additionalProperties: false`), as JSON pointers into the shape: a member
    /// added there later is a compatible change (see [`compatible_addition`]). `None` in locks
    /// written before it was recorded: every shape change then needs a version bump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_optional: Option<Vec<String>>,
    /// The objects of the shape that refuse unknown properties, as JSON pointers: a member may
    /// be added compatibly only to an object that was already closed (an open one may have let
    /// stored requests carry it, ignored and unfingerprinted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_objects: Option<Vec<String>>,
    /// The canonical shape itself, for the comparison (never written).
    #[serde(skip)]
    pub shape: Option<Json>,
}

impl Lock {
    /// The lock describing the idempotent operations of `api`.
    pub fn from_api(api: &Api) -> Lock {
        let types: HashMap<&str, &TypeDef> =
            api.types.iter().map(|d| (d.name.as_str(), d)).collect();
        let operations = api
            .operations
            .iter()
            .filter_map(|op| Some((op, op.idempotency.as_ref()?)))
            .map(|(op, idempotency)| {
                let (shape, closed_optional, closed_objects) =
                    shape_and_closed_optional(idempotency, &types);
                (
                    op.id.clone(),
                    LockedOperation {
                        fingerprint_version: idempotency.fingerprint_version,
                        input_shape: digest(&shape),
                        closed_optional: Some(closed_optional),
                        closed_objects: Some(closed_objects),
                        shape: Some(shape),
                    },
                )
            })
            .collect();
        Lock {
            version: FORMAT,
            operations,
        }
    }

    /// The lock describing `spec` now (its IR built with the configured key header).
    pub fn from_spec(spec: &LoadedSpec, config: &Config) -> Lock {
        Lock::from_api(&Api::from_spec(spec, &config.header))
    }

    /// Parses a lock file.
    pub fn parse(text: &str) -> Result<Lock, String> {
        let lock: Lock = toml::from_str(text).map_err(|e| e.to_string())?;
        if lock.version != FORMAT && lock.version != FORMAT_1 {
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
            if let Some(members) = &op.closed_optional {
                let quoted: Vec<String> = members
                    .iter()
                    .map(|m| serde_json::to_string(m).unwrap_or_default())
                    .collect();
                out.push_str(&format!("closed-optional = [{}]\n", quoted.join(", ")));
            }
            if let Some(objects) = &op.closed_objects {
                let quoted: Vec<String> = objects
                    .iter()
                    .map(|m| serde_json::to_string(m).unwrap_or_default())
                    .collect();
                out.push_str(&format!("closed-objects = [{}]\n", quoted.join(", ")));
            }
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
        let (file, at) = op
            .node
            .node
            .entry(X_FINGERPRINT_VERSION)
            .map(|(_, v)| v.span)
            .or_else(|| op.operation_id().map(|n| n.span))
            .map_or_else(|| op.key_at(), |span| (op.node.file, span));
        let message = if now.fingerprint_version < then.fingerprint_version {
            format!(
                "{}: `{X_FINGERPRINT_VERSION}` went down from {} ({lock_display}) to {}",
                op.display_name(),
                then.fingerprint_version,
                now.fingerprint_version
            )
        } else if recorded.version == FORMAT
            && now.fingerprint_version == then.fingerprint_version
            && now.input_shape != then.input_shape
            && !compatible_addition(now, then)
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
            file,
            span: at,
            operations: vec![op.label()],
            help: RuleId::FingerprintShapeChanged
                .help(&config.header, config.max_key_length)
                .replace(
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

/// `sha256:` and the hex SHA-256 of a shape's canonical JSON.
fn digest(shape: &Json) -> String {
    let digest = Sha256::digest(canonical(shape).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Whether the shape `now` is the recorded one plus optional members (without a default) of
/// objects that refuse unknown properties, and nothing else. No stored request can hold such a
/// member (it was refused with 400 before the member existed), and a new request without it
/// serialises as before, so every stored fingerprint keeps meaning the same request: no version
/// bump is needed. Any other change (a required member, a default, a member of an object that
/// ignored unknown properties, whose old requests may have carried it unfingerprinted) is not.
pub fn compatible_addition(now: &LockedOperation, then: &LockedOperation) -> bool {
    let (Some(shape), Some(now_members), Some(then_members), Some(then_closed)) = (
        &now.shape,
        &now.closed_optional,
        &then.closed_optional,
        &then.closed_objects,
    ) else {
        return false;
    };
    let mut reduced = shape.clone();
    let mut added = 0;
    for pointer in now_members.iter().filter(|m| !then_members.contains(m)) {
        let Some((parent, key)) = pointer.rsplit_once('/') else {
            return false;
        };
        if !then_closed.iter().any(|c| c == parent) {
            return false;
        }
        let removed = reduced
            .pointer_mut(parent)
            .and_then(Json::as_object_mut)
            .and_then(|members| members.remove(&unescape(key)));
        if removed.is_none() {
            return false;
        }
        added += 1;
    }
    added > 0 && digest(&reduced) == then.input_shape
}

/// A JSON pointer segment's text (`~1` is `/`, `~0` is `~`).
fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// A JSON pointer segment for `text`.
fn escape(text: &str) -> String {
    text.replace('~', "~0").replace('/', "~1")
}

/// The canonical shape of an operation's semantic input: what its JSON form can be.
pub fn input_shape(idempotency: &Idempotency, types: &HashMap<&str, &TypeDef>) -> Json {
    shape_and_closed_optional(idempotency, types).0
}

/// A closed object met while shaping: its pointer, its type, its optional members' pointers.
struct Closed {
    object: String,
    type_name: String,
    optional: Vec<String>,
}

/// The shape, the pointers of its optional members (without a default) in objects that refuse
/// unknown properties, and the pointers of those objects, both sorted. Objects inside unions
/// (whose alternatives have no stable position) are left out, and so is every object of a type
/// that appears in a union anywhere, even as a recursion marker: adding a member to it may move
/// a stored value from one alternative to another.
fn shape_and_closed_optional(
    idempotency: &Idempotency,
    types: &HashMap<&str, &TypeDef>,
) -> (Json, Vec<String>, Vec<String>) {
    let mut shaper = Shaper {
        types,
        stack: Vec::new(),
        at: Vec::new(),
        in_union: 0,
        closed: Vec::new(),
        union_types: std::collections::HashSet::new(),
    };
    let mut out = Map::new();
    for (group, params) in [
        ("path", &idempotency.input.path),
        ("query", &idempotency.input.query),
        ("header", &idempotency.input.header),
    ] {
        if params.is_empty() {
            continue;
        }
        let members = params
            .iter()
            .map(|p: &ParamIr| {
                let required = p.required || matches!(p.ty, TypeRef::Vec(_));
                shaper.at = vec![group.to_owned(), p.wire.clone(), "type".to_owned()];
                let mut member = shaper.member(required, &p.ty);
                if p.default.is_some() {
                    // Absent and the default now fingerprint alike: a new shape.
                    record_default(&mut member, p.default_json.as_ref());
                }
                (p.wire.clone(), member)
            })
            .collect();
        out.insert(group.into(), Json::Object(members));
    }
    if let Some(body) = &idempotency.input.body {
        shaper.at = vec!["body".into(), "type".into()];
        let ty = match &body.kind {
            BodyKind::Json(ty) => shaper.shape(ty),
            BodyKind::Form(ty) => {
                shaper.at.push("form".into());
                serde_json::json!({ "form": shaper.shape(ty) })
            }
            BodyKind::Multipart { ty, .. } => {
                shaper.at.push("multipart".into());
                serde_json::json!({ "multipart": shaper.shape(ty) })
            }
            BodyKind::Text => Json::from("text"),
            BodyKind::Bytes => Json::from("bytes (hex)"),
        };
        let mut entry = Map::new();
        entry.insert("required".into(), Json::Bool(body.required));
        entry.insert("type".into(), ty);
        out.insert("body".into(), Json::Object(entry));
    }
    let kept = shaper
        .closed
        .into_iter()
        .filter(|c| !shaper.union_types.contains(&c.type_name));
    let (mut optional, mut objects) = (Vec::new(), Vec::new());
    for closed in kept {
        optional.extend(closed.optional);
        objects.push(closed.object);
    }
    optional.sort();
    optional.dedup();
    objects.sort();
    objects.dedup();
    (Json::Object(out), optional, objects)
}

/// Adds the applied `default` to a member's shape (`{"required": false, "default": 20, …}`): an
/// operation whose semantic input gains one fingerprints an absent value as the default, where
/// it used to omit it, so its shape changes and its fingerprint version must be bumped.
fn record_default(member: &mut Json, value: Option<&Json>) {
    if let Json::Object(m) = member {
        m.insert("default".into(), value.cloned().unwrap_or(Json::Null));
    }
}

/// Expands types into the JSON they serialise as.
struct Shaper<'t> {
    types: &'t HashMap<&'t str, &'t TypeDef>,
    stack: Vec<&'t str>,
    /// Where in the shape the value being expanded goes (JSON pointer segments).
    at: Vec<String>,
    /// How many unions the expansion is inside.
    in_union: usize,
    /// Objects that refuse unknown properties, outside unions.
    closed: Vec<Closed>,
    /// Types met inside a union, expanded or as a recursion marker.
    union_types: std::collections::HashSet<String>,
}

impl<'t> Shaper<'t> {
    fn member(&mut self, required: bool, ty: &TypeRef) -> Json {
        let mut entry = Map::new();
        entry.insert("required".into(), Json::Bool(required));
        entry.insert("type".into(), self.shape(ty));
        Json::Object(entry)
    }

    /// The shape of `ty`, placed under `segments` of the current position.
    fn shape_at(&mut self, segments: &[&str], ty: &TypeRef) -> Json {
        let depth = self.at.len();
        self.at.extend(segments.iter().map(|s| (*s).to_owned()));
        let shape = self.shape(ty);
        self.at.truncate(depth);
        shape
    }

    fn shape(&mut self, ty: &TypeRef) -> Json {
        let scalar = |name: &str| Json::from(name);
        let wrap = |kind: &str, inner: Json| {
            let mut m = Map::new();
            m.insert(kind.into(), inner);
            Json::Object(m)
        };
        match ty {
            TypeRef::String => scalar("string"),
            TypeRef::Bool => scalar("boolean"),
            TypeRef::I32 => scalar("int32"),
            TypeRef::I64 => scalar("int64"),
            TypeRef::F64 => scalar("number"),
            TypeRef::Uuid => scalar("uuid"),
            TypeRef::DateTime => scalar("date-time"),
            TypeRef::Date => scalar("date"),
            TypeRef::Json => scalar("any"),
            TypeRef::Vec(item) => wrap("array", self.shape_at(&["array"], item)),
            TypeRef::Map(item) => wrap("map", self.shape_at(&["map"], item)),
            TypeRef::Option(inner) => wrap("nullable", self.shape_at(&["nullable"], inner)),
            TypeRef::Boxed(inner) => self.shape(inner),
            TypeRef::Named(name) => self.named(name),
            TypeRef::File => scalar("file (sha256, filename, content type)"),
        }
    }

    fn named(&mut self, name: &str) -> Json {
        let Some((&key, def)) = self.types.get_key_value(name) else {
            return Json::from("any");
        };
        if self.in_union > 0 {
            self.union_types.insert(name.to_owned());
        }
        if let Some(depth) = self.stack.iter().rposition(|n| *n == name) {
            let mut m = Map::new();
            m.insert("recursive".into(), Json::from(self.stack.len() - depth));
            return Json::Object(m);
        }
        if self.stack.len() > 128 {
            return Json::from("deep");
        }
        self.stack.push(key);
        let shape = match &def.kind {
            TypeKind::Struct {
                fields,
                extra,
                deny_unknown,
                ..
            } => {
                let mut m = Map::new();
                let object: String = self
                    .at
                    .iter()
                    .map(|s| format!("/{}", escape(s)))
                    .chain(["/object".to_owned()])
                    .collect();
                let mut optional = Vec::new();
                let members = fields
                    .iter()
                    .map(|f| {
                        let wire = escape(&f.wire);
                        if *deny_unknown && !f.required && f.default.is_none() && self.in_union == 0
                        {
                            optional.push(format!("{object}/{wire}"));
                        }
                        let depth = self.at.len();
                        self.at
                            .extend(["object".to_owned(), f.wire.clone(), "type".to_owned()]);
                        let mut member = self.member(f.required, &f.field_type());
                        self.at.truncate(depth);
                        if f.default.is_some() {
                            record_default(&mut member, f.default_json.as_ref());
                        }
                        (f.wire.clone(), member)
                    })
                    .collect();
                m.insert("object".into(), Json::Object(members));
                if *deny_unknown && self.in_union == 0 {
                    self.closed.push(Closed {
                        object,
                        type_name: name.to_owned(),
                        optional,
                    });
                }
                if let Some(extra) = extra {
                    m.insert("additional".into(), self.shape_at(&["additional"], extra));
                }
                Json::Object(m)
            }
            TypeKind::StringEnum { variants } => {
                let mut values: Vec<&str> = variants.iter().map(|v| v.wire.as_str()).collect();
                values.sort_unstable();
                let mut m = Map::new();
                m.insert("enum".into(), Json::from(values));
                Json::Object(m)
            }
            TypeKind::Union { variants, .. } => {
                // Serialised untagged: each alternative as itself, in no particular order.
                self.in_union += 1;
                let mut alternatives: Vec<String> = variants
                    .iter()
                    .map(|v| canonical(&self.shape(&v.ty)))
                    .collect();
                self.in_union -= 1;
                alternatives.sort();
                alternatives.dedup();
                let mut m = Map::new();
                m.insert(
                    "union".into(),
                    Json::from(
                        alternatives
                            .into_iter()
                            .map(|a| serde_json::from_str(&a).unwrap_or(Json::Null))
                            .collect::<Vec<Json>>(),
                    ),
                );
                Json::Object(m)
            }
            TypeKind::Alias(target) => self.shape(target),
        };
        self.stack.pop();
        shape
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
    let current = Lock::from_spec(spec, config);
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
