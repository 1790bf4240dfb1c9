//! `callbacks-not-generated`: an operation's `callbacks` and the document's `webhooks` (3.1)
//! describe requests the API *sends*; the generator writes neither a sender nor a receiver for
//! them, so each is reported at its key rather than dropped without a word.

use super::{RuleId, Sink};
use crate::loader::LoadedSpec;
use crate::spec::Operation;

/// Reports the document's `webhooks`, once.
pub(super) fn check_webhooks(spec: &LoadedSpec, sink: &mut Sink<'_>) {
    let root = spec.root();
    let Some((key, hooks)) = root.node.entry("webhooks") else {
        return;
    };
    let count = hooks.as_map().map_or(0, |m| m.entries().len());
    if count == 0 {
        return;
    }
    sink.report(
        RuleId::CallbacksNotGenerated,
        (root.file, key.span),
        None,
        format!(
            "the spec's {count} {} requests the API sends: nothing is generated for them (no sender in the server, no receiver in the client)",
            if count == 1 { "webhook describes" } else { "webhooks describe" }
        ),
    );
}

/// Reports `op`'s `callbacks`.
pub(super) fn check_operation(op: &Operation<'_>, sink: &mut Sink<'_>) {
    let Some((key, callbacks)) = op.node.node.entry("callbacks") else {
        return;
    };
    let Some(map) = callbacks.as_map().filter(|m| !m.entries().is_empty()) else {
        return;
    };
    let names: Vec<String> = map
        .entries()
        .iter()
        .filter(|(k, _)| !k.text.starts_with("x-"))
        .map(|(k, _)| format!("`{}`", k.text))
        .collect();
    if names.is_empty() {
        return;
    }
    sink.report(
        RuleId::CallbacksNotGenerated,
        (op.node.file, key.span),
        Some(op),
        format!(
            "{} declares callbacks ({}), requests the API sends: nothing is generated for them (no sender in the server, no receiver in the client)",
            op.display_name(),
            names.join(", ")
        ),
    );
}
