//! The generated `Validate` impls of the shapes fixture: every enforced keyword, through nested
//! objects, arrays, maps, `$ref`'d components, aliases, a recursive type, optional nullable
//! values (`Option<Option<T>>`, also behind an alias of an `Option`) and unions. One case per
//! line: a request body, and the detail of the 400 it earns (`None`: valid).

use idemgen_compile_tests::shapes::types::{
    RecordReadingsRequestBody, RecordReadingsRequestBodyCode,
};
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

/// The minimal valid body with `property` set to `value` (`None`: left out).
fn with(property: &str, value: Option<serde_json::Value>) -> serde_json::Value {
    let mut body = json!({ "readings": [{ "at": "2024-01-01T00:00:00Z", "value": 1.0 }] });
    if let Some(value) = value {
        body[property] = value;
    }
    body
}

/// Checks of an optional nullable property (`Option<Option<T>>`): absent and `null` pass, a
/// value is checked.
fn nullable(property: &str, cases: &[(serde_json::Value, Option<&str>)]) {
    check(with(property, None), None);
    check(with(property, Some(json!(null))), None);
    for (value, expected) in cases {
        check(with(property, Some(value.clone())), *expected);
    }
}

#[test]
fn optional_nullable_values_are_checked_when_present() {
    // A map: `minProperties`, `maxProperties`.
    nullable(
        "meta",
        &[
            (json!({ "a": "x" }), None),
            (json!({ "a": "x", "b": "y" }), None),
            (json!({}), Some("body.meta: must have at least 1 property")),
            (
                json!({ "a": "x", "b": "y", "c": "z" }),
                Some("body.meta: must have at most 2 properties"),
            ),
        ],
    );
    // An integer: `minimum`, `maximum`.
    nullable(
        "retries",
        &[
            (json!(0), None),
            (json!(5), None),
            (json!(-1), Some("body.retries: must be at least 0")),
            (json!(6), Some("body.retries: must be at most 5")),
        ],
    );
    // A string: `maxLength`.
    nullable(
        "comment",
        &[
            (json!("ten chars!"), None),
            (
                json!("eleven chars"),
                Some("body.comment: must have at most 10 characters"),
            ),
        ],
    );
    // An array: `maxItems`, and its items' bounds.
    nullable(
        "window",
        &[
            (json!([]), None),
            (json!([1, 10]), None),
            (
                json!([1, 2, 3]),
                Some("body.window: must have at most 2 items"),
            ),
            (json!([1, 0]), Some("body.window[1]: must be at least 1")),
            (json!([11]), Some("body.window[0]: must be at most 10")),
        ],
    );
    // A `$ref` to a nullable component (`type Metadata = Option<BTreeMap<…>>`, OpenAI's
    // `metadata`): its property count and its values' length.
    nullable(
        "metadata",
        &[
            (json!({ "k": "five!" }), None),
            (json!({ "a": "", "b": "", "c": "" }), None),
            (
                json!({ "a": "", "b": "", "c": "", "d": "" }),
                Some("body.metadata: must have at most 3 properties"),
            ),
            (
                json!({ "k": "sixsix" }),
                Some("body.metadata.k: must have at most 5 characters"),
            ),
        ],
    );
    // Nested: an optional nullable object holding an optional nullable number.
    nullable(
        "calibration",
        &[
            (json!({}), None),
            (json!({ "offset": null }), None),
            (json!({ "offset": -1 }), None),
            (
                json!({ "offset": 1.5 }),
                Some("body.calibration.offset: must be at most 1"),
            ),
            (
                json!({ "offset": -1.5 }),
                Some("body.calibration.offset: must be at least -1"),
            ),
        ],
    );
}

#[test]
fn nullable_items_are_checked_when_present() {
    check(with("aliases", Some(json!([]))), None);
    check(with("aliases", Some(json!(["abc", null, "a"]))), None);
    check(
        with("aliases", Some(json!([null, "abcd"]))),
        Some("body.aliases[1]: must have at most 3 characters"),
    );
}

#[test]
fn nullable_values_inside_union_alternatives_are_checked() {
    let limit = |value: serde_json::Value| with("limit", Some(value));
    check(with("limit", None), None);
    // An object alternative: a required nullable integer, an optional nullable string.
    check(limit(json!({ "count": 9, "unit": "kg" })), None);
    check(limit(json!({ "count": null, "unit": null })), None);
    check(
        limit(json!({ "count": 10 })),
        Some("body.limit.count: must be at most 9"),
    );
    check(
        limit(json!({ "count": 0 })),
        Some("body.limit.count: must be at least 1"),
    );
    check(
        limit(json!({ "count": 1, "unit": "gram" })),
        Some("body.limit.unit: must have at most 3 characters"),
    );
    // A `$ref` to a nullable integer component (`type Level = Option<i64>`): null is one of its
    // values.
    check(limit(json!(null)), None);
    check(limit(json!(3)), None);
    check(limit(json!(4)), Some("body.limit: must be at most 3"));
    check(limit(json!(-1)), Some("body.limit: must be at least 0"));
    // An inline string alternative.
    check(limit(json!("four")), None);
    check(
        limit(json!("fives")),
        Some("body.limit: must have at most 4 characters"),
    );
}

/// `enum`s that are not Rust enums are checked too: integers, a nullable number, a boolean of
/// one value (a `const`), and a string enum behind a nullable wrapper (a `String`, not a Rust
/// enum).
#[test]
fn enums_of_numbers_booleans_and_wrapped_strings_are_checked() {
    let cases: [(&str, serde_json::Value, Option<&str>); 11] = [
        ("size", json!(20), None),
        (
            "size",
            json!(21),
            Some("body.size: must be one of 10, 20, 50"),
        ),
        ("rate", json!(0.5), None),
        ("rate", json!(1), None),
        ("rate", json!(null), None),
        ("rate", json!(2), Some("body.rate: must be one of 0.5, 1")),
        ("strict", json!(false), Some("body.strict: must be true")),
        ("shade", json!("dark"), None),
        ("shade", json!(null), None),
        (
            "shade",
            json!("grey"),
            Some(r#"body.shade: must be one of "light", "dark""#),
        ),
        ("strict", json!(true), None),
    ];
    for (property, value, expected) in cases {
        check(with(property, Some(value)), expected);
    }
    check(with("size", None), None);
}

/// Alternatives of required properties beside an object's properties: the object is a struct,
/// and `anyOf` wants one alternative met, `oneOf` exactly one (a `null` counts as present).
#[test]
fn alternatives_of_required_properties_are_checked() {
    let payment = |value: serde_json::Value| with("payment", Some(value));
    check(payment(json!({ "currency": "EUR", "amount": 5 })), None);
    check(
        payment(json!({ "currency": "EUR", "amount_string": "5" })),
        None,
    );
    check(
        payment(json!({ "currency": "EUR", "amount": 5, "amount_string": "5" })),
        None,
    );
    check(
        payment(json!({ "currency": "EUR" })),
        Some("body.payment: must have `amount` or `amount_string`"),
    );
    let choice = |value: serde_json::Value| with("choice", Some(value));
    check(choice(json!({ "a": null })), None);
    check(choice(json!({ "b": "x" })), None);
    check(
        choice(json!({ "a": "x", "b": "y" })),
        Some("body.choice: must have exactly one of `a` or `b`"),
    );
    check(
        choice(json!({})),
        Some("body.choice: must have exactly one of `a` or `b`"),
    );
}

/// A union's alternatives that decode the same value are tried in order until one passes its
/// checks (`anyOf` as JSON Schema reads it): `"xxxx"` is too long for the first alternative and
/// matches the second; a value neither accepts is refused by the first that decodes it.
#[test]
fn a_value_a_later_alternative_accepts_is_not_refused_by_an_earlier_one() {
    let code = |value: &str| with("code", Some(json!(value)));
    check(code("abc"), None);
    check(code("xxxx"), None);
    check(
        code("abcd"),
        Some("body.code: must have at most 3 characters"),
    );
    let parsed: RecordReadingsRequestBody =
        serde_json::from_value(code("xxxx")).expect("the case is well-typed");
    assert!(
        matches!(&parsed.code, Some(RecordReadingsRequestBodyCode::String2(s)) if s == "xxxx"),
        "{:?}",
        parsed.code
    );
}

/// An alternative naming a required property beside another holds when the other is present.
#[test]
fn an_alternative_counts_its_required_properties_as_present() {
    let fee = |value: serde_json::Value| with("fee", Some(value));
    check(fee(json!({ "currency": "EUR", "amount": 1 })), None);
    check(fee(json!({ "currency": "EUR", "note": "waived" })), None);
    let both = "body.fee: must have exactly one of `currency` and `amount` or `note`";
    check(
        fee(json!({ "currency": "EUR", "amount": 1, "note": "x" })),
        Some(both),
    );
    check(fee(json!({ "currency": "EUR" })), Some(both));
}
