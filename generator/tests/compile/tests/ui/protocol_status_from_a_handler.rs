//! A handler cannot answer with the protocol's own statuses: `createWidget` declares 410, but the
//! 410 is the pipeline's (the created resource was deleted), so the handler's error type has no
//! such variant. (409 and 422 are shared: a business conflict is a variant.)

use idemgen_compile_tests::widgets::*;

fn main() {
    let _ = CreateWidgetError::Status410(types::Problem {
        r#type: "t".into(),
        title: "t".into(),
        status: 410,
        code: None,
        detail: None,
    });
}
