//! A handler cannot answer with the protocol's own statuses: `createWidget` declares 409, but the
//! 409 is the pipeline's (key in flight), so the handler's error type has no such variant.

use idemgen_compile_tests::widgets::*;

fn main() {
    let _ = CreateWidgetError::Status409(types::Problem {
        r#type: "t".into(),
        title: "t".into(),
        status: 409,
        code: None,
        detail: None,
    });
}
