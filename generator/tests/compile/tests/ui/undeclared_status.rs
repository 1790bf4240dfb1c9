//! A response the spec does not declare cannot be built: `createWidget` declares no 200.

use idemgen_compile_tests::widgets::*;

fn main() {
    let _ = CreateWidgetResponse::Status200(types::Widget {
        id: uuid::Uuid::nil(),
        name: "w".into(),
        color: None,
        published: false,
        created_at: chrono::Utc::now(),
    });
}
