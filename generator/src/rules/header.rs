//! The idempotency key header: present, required, a bounded string.

use super::{RuleId, Sink, at};
use crate::loader::{LoadedSpec, Node, NodeRef, Value};
use crate::spec::extensions::{X_FINGERPRINT, X_IDEMPOTENT};
use crate::spec::{Operation, Parameter, SAFE_METHODS};

/// Checks the header of an operation marked `x-idempotent: true`.
pub(super) fn check_key(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    let configured = sink.config().header.clone();
    let params = op.parameters(spec);
    let Some(param) = params.iter().find(|p| p.is_header(&configured)) else {
        let elsewhere = params
            .iter()
            .find(|p| p.name.is_some_and(|n| n.eq_ignore_ascii_case(&configured)))
            .and_then(|p| p.location)
            .map(|loc| format!(" (a `{configured}` parameter exists, but `in: {loc}`)"))
            .unwrap_or_default();
        let message = format!(
            "idempotent operation {} has no `{configured}` header parameter{elsewhere}",
            op.display_name()
        );
        let at = op.key_at();
        // A team with its own key header first needs to say so in idemgen.toml.
        match key_like_header(&params) {
            Some(other) => {
                let help = format!(
                    "if `{other}` is this API's idempotency key, name it in idemgen.toml beside the spec:\n\nheader = \"{other}\"\n\nelse {}",
                    RuleId::KeyMissing.help(&configured, sink.config().max_key_length)
                );
                sink.report_with_help(RuleId::KeyMissing, at, Some(op), message, help);
            }
            None => sink.report(RuleId::KeyMissing, at, Some(op), message),
        }
        return;
    };
    // Messages name the header as the spec spells it (`idempotency-key`), not as configured.
    let header = param.name.unwrap_or(&configured).to_owned();
    check_required(param, op, &header, sink);
    check_schema(spec, param, op, &header, sink);
    check_not_fingerprinted(param, op, &header, sink);
}

/// The key names the request; it never enters the semantic input.
fn check_not_fingerprinted(
    param: &Parameter<'_>,
    op: &Operation<'_>,
    header: &str,
    sink: &mut Sink<'_>,
) {
    if !param.is_fingerprinted_header() {
        return;
    }
    if let Some((key, _)) = param.fingerprint_marker() {
        sink.report(
            RuleId::KeyFingerprinted,
            (param.node.file, key.span),
            Some(op),
            format!(
                "the `{header}` header is marked `{X_FINGERPRINT}: true`, but the idempotency key never enters the fingerprint"
            ),
        );
    }
}

/// A header parameter whose name says it could be a key (`*-Id`, `*-Key`, `*-Token`), when the
/// configured one is missing.
fn key_like_header<'p>(params: &'p [Parameter<'_>]) -> Option<&'p str> {
    let names: Vec<&str> = params
        .iter()
        .filter(|p| p.location == Some("header"))
        .filter_map(|p| p.name)
        .collect();
    let lower = |name: &str| name.to_ascii_lowercase();
    // A header naming idempotency first; then `*-Id`/`*-Key`/`*-Token`, never a credential.
    names
        .iter()
        .find(|name| lower(name).contains("idempot"))
        .or_else(|| {
            names.iter().find(|name| {
                let lower = lower(name);
                let credential = ["api-key", "apikey", "auth", "access-token", "session"]
                    .iter()
                    .any(|c| lower.contains(c));
                !credential && ["-id", "-key", "-token"].iter().any(|s| lower.ends_with(s))
            })
        })
        .copied()
}

fn check_required(param: &Parameter<'_>, op: &Operation<'_>, header: &str, sink: &mut Sink<'_>) {
    // The snippet spells the header as the spec does (`idempotency-key`), so that pasted it
    // names the same parameter.
    let help =
        RuleId::KeyNotRequired.help(param.name.unwrap_or(header), sink.config().max_key_length);
    match param.node.node.get("required") {
        Some(required) if required.as_bool() == Some(true) => {}
        Some(required) => sink.report_with_help(
            RuleId::KeyNotRequired,
            (param.node.file, required.span),
            Some(op),
            format!("the `{header}` header must be `required: true`"),
            help,
        ),
        None => sink.report_with_help(
            RuleId::KeyNotRequired,
            at(param.node),
            Some(op),
            format!("the `{header}` header is optional: it has no `required: true`"),
            help,
        ),
    }
}

fn check_schema(
    spec: &LoadedSpec,
    param: &Parameter<'_>,
    op: &Operation<'_>,
    header: &str,
    sink: &mut Sink<'_>,
) {
    let Some(schema) = param.schema(spec) else {
        sink.report(
            RuleId::KeyNotString,
            at(param.node),
            Some(op),
            format!("the `{header}` header has no schema"),
        );
        return;
    };
    match schema.node.entry("type") {
        Some((_, ty)) if is_string_type(ty) => {}
        Some((_, ty)) => sink.report(
            RuleId::KeyNotString,
            (schema.file, ty.span),
            Some(op),
            format!("the `{header}` header's schema must be `type: string`"),
        ),
        None => sink.report(
            RuleId::KeyNotString,
            at(schema),
            Some(op),
            format!("the `{header}` header's schema has no `type: string`"),
        ),
    }
    check_max_length(schema, op, header, sink);
    check_min_length(schema, op, header, sink);
    check_pattern(schema, op, header, sink);
}

/// The keys a server accepts are visible ASCII: a schema without a `pattern` lets schema-driven
/// tools (fuzzers, client generators) produce keys the server rejects (spaces, non-ASCII).
fn check_pattern(schema: NodeRef<'_>, op: &Operation<'_>, header: &str, sink: &mut Sink<'_>) {
    if schema.node.get("pattern").is_none() {
        sink.report(
            RuleId::KeyPattern,
            at(schema),
            Some(op),
            format!(
                "the `{header}` header's schema has no `pattern`: tools generating keys from it will produce keys the server refuses"
            ),
        );
    }
}

/// `type: string`, or (3.1) a type list whose only non-null member is `string`.
fn is_string_type(ty: &Node) -> bool {
    match &ty.value {
        Value::Str(s) => s == "string",
        Value::Seq(items) => {
            let mut non_null = items.iter().filter(|t| t.as_str() != Some("null"));
            matches!(non_null.next().and_then(Node::as_str), Some("string"))
                && non_null.next().is_none()
        }
        _ => false,
    }
}

fn check_max_length(schema: NodeRef<'_>, op: &Operation<'_>, header: &str, sink: &mut Sink<'_>) {
    let limit = sink.config().max_key_length;
    match schema.node.get("maxLength") {
        None => sink.report(
            RuleId::KeyMaxLength,
            at(schema),
            Some(op),
            format!("the `{header}` header's schema has no `maxLength` (at most {limit})"),
        ),
        Some(max) => match max.as_int() {
            Some(v) if v >= 1 && v.unsigned_abs() <= limit => {}
            Some(v) if v < 1 => sink.report(
                RuleId::KeyMaxLength,
                (schema.file, max.span),
                Some(op),
                format!(
                    "the `{header}` header's `maxLength` is {v}: a key has at least 1 character"
                ),
            ),
            Some(v) => sink.report(
                RuleId::KeyMaxLength,
                (schema.file, max.span),
                Some(op),
                format!("the `{header}` header's `maxLength` is {v}, above the limit of {limit}"),
            ),
            None => sink.report(
                RuleId::KeyMaxLength,
                (schema.file, max.span),
                Some(op),
                format!(
                    "the `{header}` header's `maxLength` must be a non-negative integer, found {}",
                    max.kind_name()
                ),
            ),
        },
    }
}

fn check_min_length(schema: NodeRef<'_>, op: &Operation<'_>, header: &str, sink: &mut Sink<'_>) {
    match schema.node.get("minLength") {
        None => sink.report(
            RuleId::KeyMinLength,
            at(schema),
            Some(op),
            format!("the `{header}` header's schema has no `minLength`: empty keys are accepted"),
        ),
        Some(min) if min.as_int().is_some_and(|v| v >= 1) => {}
        Some(min) => sink.report(
            RuleId::KeyMinLength,
            (schema.file, min.span),
            Some(op),
            format!("the `{header}` header's `minLength` should be at least 1"),
        ),
    }
}

/// Warns about an operation that declares the header but has no `x-idempotent` at all; an
/// explicit `x-idempotent: false` is a deliberate opt-out and is left alone, and so are safe
/// methods, which the runtime never guards.
pub(super) fn check_unmarked(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    if op.node.node.get(X_IDEMPOTENT).is_some() || SAFE_METHODS.contains(&op.method) {
        return;
    }
    let configured = sink.config().header.clone();
    let params = op.parameters(spec);
    if let Some(param) = params.iter().find(|p| p.is_header(&configured)) {
        let header = param.name.unwrap_or(&configured);
        sink.report(
            RuleId::KeyWithoutXIdempotent,
            op.key_at(),
            Some(op),
            format!(
                "{} declares the `{header}` header but is not marked `x-idempotent: true`: the runtime ignores the key",
                op.display_name()
            ),
        );
    }
}
