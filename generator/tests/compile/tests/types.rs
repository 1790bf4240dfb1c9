//! The generated types accept what the schema accepts and nothing looser: a single `anyOf`/
//! `oneOf` alternative is that alternative (no `null` items, no `null` value), and inline schemas
//! written twice are one type, so a value of one is a value of the other.

use idemgen_compile_tests::shapes::OpenShelterResponse;
use idemgen_compile_tests::shapes::types::{
    Cat, ContactCard, Dog, OpenShelterRequestBody, OpenShelterRequestBodyAddress, Problem,
};
use serde_json::{Value, json};

fn body(residents: Value, keeper: Value) -> Value {
    json!({
        "residents": residents,
        "keeper": keeper,
        "address": { "street": "1 Main St" },
    })
}

fn parse(value: Value) -> Result<OpenShelterRequestBody, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

fn dog() -> Value {
    json!({ "kind": "dog", "name": "Rex", "good": true })
}

#[test]
fn a_single_alternative_accepts_its_values_and_no_null() {
    let cat = json!({ "kind": "cat", "name": "Tom" });
    let parsed = parse(body(json!([cat.clone()]), dog())).expect("a cat and a dog");
    let residents: Vec<Cat> = parsed.residents;
    assert_eq!(residents.len(), 1);
    let keeper: Dog = parsed.keeper;
    assert!(keeper.good);

    // `items: { anyOf: [Cat] }` has no null items; `oneOf: [Dog]` is no null value.
    assert!(parse(body(json!([cat.clone(), null]), dog())).is_err());
    assert!(parse(body(json!([cat.clone()]), Value::Null)).is_err());
    // And an item is a Cat, nothing else.
    assert!(parse(body(json!([42]), dog())).is_err());
    assert!(parse(body(json!([{ "name": "no kind" }]), dog())).is_err());
}

#[test]
fn inline_schemas_written_twice_are_one_type() {
    let mut value = body(json!([]), dog());
    value["mailing"] = json!({ "street": "PO Box 9", "zip": "12345" });
    value["contact"] = json!({ "email": "a@example.com" });
    value["problem"] = json!({ "type": "about:blank", "status": 400 });
    let parsed = parse(value).expect("well-formed");
    // `mailing` repeats `address` with another description: the same type, so either one is
    // the 200 response (a third copy of the schema).
    let mailing: OpenShelterRequestBodyAddress = parsed.mailing.expect("mailing given");
    assert_eq!(mailing.zip.as_deref(), Some("12345"));
    let _: OpenShelterResponse = OpenShelterResponse::Status200(mailing);
    let _: OpenShelterResponse = OpenShelterResponse::Status200(parsed.address);
    // An inline copy of the `Problem` component is `Problem`; a titled schema takes its title.
    let problem: Problem = parsed.problem.expect("problem given");
    assert_eq!(problem.status, Some(400));
    let contact: ContactCard = parsed.contact.expect("contact given");
    assert_eq!(contact.email.as_deref(), Some("a@example.com"));
    // Still strict where the schema is: the shared type requires `street`.
    let mut missing = body(json!([]), dog());
    missing["mailing"] = json!({ "zip": "12345" });
    assert!(parse(missing).is_err());
}
