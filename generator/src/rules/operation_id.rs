//! `operationId`: present on idempotent operations (the runtime scopes keys by it) and unique.

use std::collections::HashMap;

use super::{RuleId, Sink};
use crate::loader::Node;
use crate::spec::Operation;

/// Reports an idempotent operation without a string `operationId`.
pub(super) fn check_present(op: &Operation<'_>, sink: &mut Sink<'_>) {
    match op.operation_id() {
        Some(id) if id.as_str().is_some_and(|s| !s.trim().is_empty()) => {}
        Some(id) => sink.report(
            RuleId::OperationIdMissing,
            (op.node.file, id.span),
            Some(op),
            format!(
                "idempotent operation `{}` has an `operationId` that is not a non-empty string",
                op.label()
            ),
        ),
        None => sink.report(
            RuleId::OperationIdMissing,
            op.key_at(),
            Some(op),
            format!("idempotent operation `{}` has no `operationId`", op.label()),
        ),
    }
}

/// Reports every operation whose `operationId` an earlier operation already uses.
pub(super) fn check_unique(ops: &[Operation<'_>], sink: &mut Sink<'_>) {
    let mut first: HashMap<&str, &Operation<'_>> = HashMap::new();
    for op in ops {
        let Some(id_node) = op.operation_id() else {
            continue;
        };
        let Some(id) = id_node.as_str() else {
            continue;
        };
        match first.get(id) {
            None => {
                first.insert(id, op);
            }
            Some(earlier) => sink.report(
                RuleId::OperationIdDuplicate,
                (op.node.file, id_node.span),
                Some(op),
                format!(
                    "`operationId` `{id}` of `{}` is already used by `{}` (line {})",
                    op.label(),
                    earlier.label(),
                    earlier
                        .operation_id()
                        .map(|n: &Node| n.span.start.line)
                        .unwrap_or(0)
                ),
            ),
        }
    }
}
