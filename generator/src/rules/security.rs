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
                    format!(
                        "declare `{name}`, with the type its credentials have (apiKey, http, oauth2, openIdConnect or mutualTLS):\n\ncomponents:\n  securitySchemes:\n    {name}:\n      type: http\n      scheme: bearer"
                    ),
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
        sink.report(
            RuleId::IdempotentAnonymous,
            position,
            Some(op),
            format!(
                "idempotent operation {} admits anonymous callers ({how}{}): its keys are scoped to the authenticated caller, so a key needs an owner",
                op.display_name(),
                if sec.inherited { ", from the document's `security`" } else { "" }
            ),
        );
    }
}
