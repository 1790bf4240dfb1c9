//! `path-unroutable`: `paths` keys the generated axum router cannot register (the verdict is
//! `spec::paths`', which the router's emission shares).

use super::{RuleId, Sink};
use crate::loader::LoadedSpec;
use crate::spec::{self, Operation};

/// Reports each unroutable path at its key, listing the operations under it.
pub(super) fn check(spec: &LoadedSpec, ops: &[Operation<'_>], sink: &mut Sink<'_>) {
    let file = spec.root().file;
    for bad in spec::paths::unroutable(spec) {
        let under: Vec<&Operation<'_>> = ops.iter().filter(|o| o.path == bad.key.text).collect();
        let message = format!(
            "path `{}` cannot be routed: {}; the generated router leaves out its operations",
            bad.key.text, bad.reason
        );
        match under.split_first() {
            Some((first, rest)) => {
                sink.report(
                    RuleId::PathUnroutable,
                    (file, bad.key.span),
                    Some(first),
                    message.clone(),
                );
                for op in rest {
                    sink.report(
                        RuleId::PathUnroutable,
                        (file, bad.key.span),
                        Some(op),
                        message.clone(),
                    );
                }
            }
            None => sink.report(RuleId::PathUnroutable, (file, bad.key.span), None, message),
        }
    }
}
