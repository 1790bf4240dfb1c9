//! Operations written as a `$ref`: what is written beside the reference is not read.

use super::{RuleId, Sink};
use crate::spec::Operation;

/// Keys a Reference Object may carry beside `$ref` (OpenAPI 3.1 allows them to describe the
/// reference); the generator reads the target's own, so they change nothing generated.
const ALLOWED_SIBLINGS: [&str; 3] = ["$ref", "summary", "description"];

/// Reports every key written beside an operation's `$ref` (an `x-idempotent: true` there would
/// otherwise be silently ignored, and the operation served without its key).
pub(super) fn check_operation(op: &Operation<'_>, sink: &mut Sink<'_>) {
    let Some(reference) = op.written.node.ref_target() else {
        return;
    };
    let Some(map) = op.written.node.as_map() else {
        return;
    };
    for (key, _) in map.entries() {
        if ALLOWED_SIBLINGS.contains(&key.text.as_str()) {
            continue;
        }
        sink.report(
            RuleId::RefSiblingsIgnored,
            (op.written.file, key.span),
            Some(op),
            format!(
                "`{}` beside `$ref: {reference}` is ignored: {} is read from the referenced operation; write `{}` there",
                key.text,
                op.label(),
                key.text
            ),
        );
    }
}
