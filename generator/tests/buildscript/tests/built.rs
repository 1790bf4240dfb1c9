//! The module `build.rs` generated with `idemgen::Builder` is the same API as the one `idemgen
//! build` writes: same operations, same idempotency facts, same types.

use idemgen_buildscript_tests::widgets_built;
use idemgen_compile_tests::widgets;
use idemgen_runtime::codegen::{Idempotent, Operation};

#[test]
fn the_build_script_module_matches_the_cli_module() {
    assert_eq!(
        <widgets_built::PublishWidget as Idempotent>::FINGERPRINT_VERSION,
        <widgets::PublishWidget as Idempotent>::FINGERPRINT_VERSION
    );
    assert_eq!(
        <widgets_built::PublishWidget as Idempotent>::STORED_HEADERS,
        <widgets::PublishWidget as Idempotent>::STORED_HEADERS
    );
    assert_eq!(
        <widgets_built::CreateWidget as Operation>::ID,
        "createWidget"
    );
    let built = serde_json::to_value(widgets_built::types::NewWidget {
        name: "w".into(),
        color: Some(widgets_built::types::Color::Red),
    })
    .unwrap();
    let cli = serde_json::to_value(widgets::types::NewWidget {
        name: "w".into(),
        color: Some(widgets::types::Color::Red),
    })
    .unwrap();
    assert_eq!(built, cli);
}
