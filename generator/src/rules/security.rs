//! `security`: what the generated server enforces must be readable. A requirement names a
//! declared scheme, a scheme is one a server can check, scopes are strings; and an idempotent
//! operation never admits anonymous callers, because its keys are scoped to the caller.

use super::{RuleId, Sink, at};
use crate::loader::{LoadedSpec, NodeRef};
use crate::spec::{Operation, security};

/// Reports what of `op`'s effective security cannot be read, and an idempotent operation that
/// admits anonymous callers.
pub(super) fn check_operation(spec: &LoadedSpec, op: &Operation<'_>, sink: &mut Sink<'_>) {
    let Some(sec) = security::of(spec, op) else {
        return;
    };
    let written = |node: NodeRef<'_>| (node.file, node.node.span);
    if sec.site.node.as_seq().is_none() {
        sink.report(
            RuleId::SecurityInvalid,
            written(sec.site),
            Some(op),
            format!(
                "`security` must be a list of security requirements, found {}",
                sec.site.node.kind_name()
            ),
        );
        return;
    }
    for alternative in &sec.alternatives {
        if alternative.node.node.as_map().is_none() {
            sink.report(
                RuleId::SecurityInvalid,
                written(alternative.node),
                Some(op),
                format!(
                    "a security requirement must be an object of scheme names, found {}",
                    alternative.node.node.kind_name()
                ),
            );
            continue;
        }
        for requirement in &alternative.requirements {
            let name = &requirement.name.text;
            match requirement.scheme {
                None => sink.report_with_help(
                    RuleId::SecuritySchemeUnknown,
                    (alternative.node.file, requirement.name.span),
                    Some(op),
                    format!(
                        "`{name}` is not a scheme of `components.securitySchemes`: the server cannot enforce it"
                    ),
                    unknown_scheme_help(spec, name),
                ),
                Some(scheme) => {
                    if let Err(why) = security::kind(scheme.node) {
                        sink.report(
                            RuleId::SecurityInvalid,
                            at(scheme),
                            Some(op),
                            format!("security scheme `{name}`: {why}"),
                        );
                    }
                }
            }
            if security::scopes(requirement.scopes).is_none() {
                sink.report(
                    RuleId::SecurityInvalid,
                    (alternative.node.file, requirement.scopes.span),
                    Some(op),
                    format!(
                        "the scopes of `{name}` must be a list of strings, found {}",
                        requirement.scopes.kind_name()
                    ),
                );
            }
        }
    }
    if op.is_idempotent() && sec.admits_anonymous() {
        let how = if sec.alternatives.is_empty() {
            "`security: []`"
        } else {
            "an empty security requirement (`- {}`)"
        };
        let position = if sec.inherited {
            op.key_at()
        } else {
            (sec.site.file, sec.key.span)
        };
        sink.report_with_help(
            RuleId::IdempotentAnonymous,
            position,
            Some(op),
            format!(
                "idempotent operation {} admits anonymous callers ({how}{}): its keys are scoped to the authenticated caller, so a key needs an owner",
                op.display_name(),
                if sec.inherited { ", from the document's `security`" } else { "" }
            ),
            anonymous_help(spec),
        );
    }
}

/// The names of `components.securitySchemes`, in document order.
fn declared_schemes(spec: &LoadedSpec) -> Vec<&str> {
    spec.root()
        .node
        .get("components")
        .and_then(|c| c.get("securitySchemes"))
        .and_then(|s| s.as_map())
        .map(|m| m.entries().iter().map(|(k, _)| k.text.as_str()).collect())
        .unwrap_or_default()
}

/// `a`, `a or b`, `a, b or c`, each in backticks.
fn listed(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Help for an idempotent operation that admits anonymous callers: require one of the spec's
/// own schemes, or declare one when it has none.
fn anonymous_help(spec: &LoadedSpec) -> String {
    let declared = declared_schemes(spec);
    match declared.first() {
        Some(first) => format!(
            "require credentials on the operation (a key needs an owner) with one of the spec's schemes ({}), or drop x-idempotent:\n\nsecurity:\n  - {first}: []",
            listed(&declared)
        ),
        None => RuleId::IdempotentAnonymous.help("", 0),
    }
}

/// Help for a requirement naming an undeclared scheme: the spec's own schemes when it has some,
/// and a declaration of `name` whose type its name suggests (`basicAuth` a Basic scheme,
/// `api_key` an API key header, `oauth` OAuth 2), a bearer token otherwise.
fn unknown_scheme_help(spec: &LoadedSpec, name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let declaration = if lower.contains("basic") {
        "type: http\n      scheme: basic".to_string()
    } else if lower.contains("oauth") {
        "type: oauth2\n      flows:\n        clientCredentials:\n          tokenUrl: https://example.com/oauth/token\n          scopes: {}".to_string()
    } else if lower.contains("openid") || lower.contains("oidc") {
        "type: openIdConnect\n      openIdConnectUrl: https://example.com/.well-known/openid-configuration".to_string()
    } else if lower.contains("apikey") || lower.contains("api_key") || lower.contains("api-key") {
        "type: apiKey\n      in: header\n      name: X-API-Key".to_string()
    } else {
        "type: http\n      scheme: bearer".to_string()
    };
    let declared = declared_schemes(spec);
    let others = if declared.is_empty() {
        String::new()
    } else {
        format!(
            "name one of the declared schemes ({}), or ",
            listed(&declared)
        )
    };
    format!(
        "{others}declare `{name}`, with the type its credentials have (apiKey, http, oauth2, openIdConnect or mutualTLS):\n\ncomponents:\n  securitySchemes:\n    {name}:\n      {declaration}"
    )
}
