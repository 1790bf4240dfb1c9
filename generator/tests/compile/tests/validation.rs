//! The generated `Validate` impls of the shapes fixture: every enforced keyword, through nested
//! objects, arrays, maps, `$ref`'d components, aliases and a recursive type. One case per line:
//! a request body, and the detail of the 400 it earns (`None`: valid).

use idemgen_compile_tests::shapes::types::RecordReadingsRequestBody;
use idemgen_runtime::codegen::{FieldPath, Validate};
use serde_json::json;

fn check(body: serde_json::Value, expected: Option<&str>) {
    let parsed: RecordReadingsRequestBody =
        serde_json::from_value(body.clone()).expect("the case is well-typed");
    let result = parsed.validate(&FieldPath::Root("body"));
    assert_eq!(result.err().as_deref(), expected, "{body}");
}

#[test]
fn bodies_are_checked_recursively() {
    let at = "2024-01-01T00:00:00Z";
    let reading = |value: f64| json!({ "at": at, "value": value });
    check(json!({ "readings": [reading(1.0)] }), None);
    check(
        json!({ "readings": [] }),
        Some("body.readings: must have at least 1 item"),
    );
    // `uniqueItems`.
    check(
        json!({ "readings": [reading(1.0), reading(2.0), reading(1.0)] }),
        Some("body.readings: items must be unique ([0] and [2] are equal)"),
    );
    // Through a `$ref`'d item and an aliased component (`Percent`: -100..=100).
    check(
        json!({ "readings": [reading(1.0), reading(-100.5)] }),
        Some("body.readings[1].value: must be at least -100"),
    );
    check(
        json!({ "readings": [{ "at": at, "value": 0.0, "note": "" }] }),
        Some("body.readings[0].note: must have at least 1 character"),
    );
    // Maps: `maxProperties`, and the values' `maxLength`.
    check(
        json!({ "readings": [reading(1.0)], "labels": { "a": "x", "b": "y", "c": "z" } }),
        Some("body.labels: must have at most 2 properties"),
    );
    check(
        json!({ "readings": [reading(1.0)], "labels": { "site": "123456789" } }),
        Some("body.labels.site: must have at most 8 characters"),
    );
    // 3.1 numeric `exclusiveMinimum`, `multipleOf`, on a nullable number.
    check(json!({ "readings": [reading(1.0)], "scale": null }), None);
    check(json!({ "readings": [reading(1.0)], "scale": 2.5 }), None);
    check(
        json!({ "readings": [reading(1.0)], "scale": 0 }),
        Some("body.scale: must be greater than 0"),
    );
    check(
        json!({ "readings": [reading(1.0)], "scale": 0.7 }),
        Some("body.scale: must be a multiple of 0.5"),
    );
    // A recursive type, through a boxed parent and an array of children.
    let tree = json!({ "value": 1, "children": [{ "value": 2, "parent": { "value": -1 } }] });
    check(
        json!({ "readings": [reading(1.0)], "tree": tree }),
        Some("body.tree.children[0].parent.value: must be at least 0"),
    );
}
