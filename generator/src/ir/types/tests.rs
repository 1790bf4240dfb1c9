use super::*;

/// One schema (YAML flow style) and the checks it yields.
fn check(schema: &str, expected: Checks) {
    let node = crate::loader::yaml::parse(schema).unwrap();
    assert_eq!(Checks::of(&node), expected, "{schema}");
}

fn own(own: Constraints) -> Checks {
    Checks {
        own,
        ..Checks::default()
    }
}

#[test]
fn validation_keywords_become_checks() {
    check(
        "{type: string, minLength: 1, maxLength: 100, pattern: '^a'}",
        own(Constraints {
            min_length: Some(1),
            max_length: Some(100),
            pattern: Some("^a".to_string()),
            ..Constraints::default()
        }),
    );
    // A pattern the engine cannot compile is not enforced (`check` reports it), nor is one
    // that is not a string; on a non-string type it does not apply.
    check(
        "{type: string, pattern: '(', minLength: 1}",
        own(Constraints {
            min_length: Some(1),
            ..Constraints::default()
        }),
    );
    check("{type: string, pattern: 12}", Checks::default());
    assert_eq!(
        Constraints {
            pattern: Some("^a".to_string()),
            ..Constraints::default()
        }
        .for_type(&TypeRef::I64),
        Constraints::default()
    );
    // 3.0 boolean exclusive bounds, and 3.1 numeric ones (the stricter bound wins).
    check(
        "{type: integer, minimum: 0, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false}",
        own(Constraints {
            minimum: Some(Bound::Exclusive(0.0)),
            maximum: Some(Bound::Inclusive(9.0)),
            ..Constraints::default()
        }),
    );
    check(
        "{type: number, exclusiveMinimum: 0.5, minimum: 1, exclusiveMaximum: 10, multipleOf: 0.25}",
        own(Constraints {
            minimum: Some(Bound::Inclusive(1.0)),
            maximum: Some(Bound::Exclusive(10.0)),
            multiple_of: Some(0.25),
            ..Constraints::default()
        }),
    );
    // Nonsense values are ignored rather than enforced.
    check(
        "{type: string, minLength: -1, maxLength: 1.5, multipleOf: 0}",
        Checks::default(),
    );
    check(
        "{type: array, minItems: 1, uniqueItems: true, items: {type: string, maxLength: 3, pattern: '^[a-z]+$'}}",
        Checks {
            own: Constraints {
                min_items: Some(1),
                unique_items: true,
                ..Constraints::default()
            },
            items: Some(Box::new(own(Constraints {
                max_length: Some(3),
                pattern: Some("^[a-z]+$".to_string()),
                ..Constraints::default()
            }))),
            values: None,
        },
    );
    check(
        "{type: object, maxProperties: 2, additionalProperties: {type: integer, maximum: 5}}",
        Checks {
            own: Constraints {
                max_properties: Some(2),
                ..Constraints::default()
            },
            items: None,
            values: Some(Box::new(own(Constraints {
                maximum: Some(Bound::Inclusive(5.0)),
                ..Constraints::default()
            }))),
        },
    );
    // A nullable alternative carries its own keywords; a `$ref` carries none here (the
    // referenced type validates itself).
    check(
        "{oneOf: [{type: 'null'}, {type: string, minLength: 2}]}",
        own(Constraints {
            min_length: Some(2),
            ..Constraints::default()
        }),
    );
    check("{$ref: '#/components/schemas/Name'}", Checks::default());
}

/// The keywords of one schema (YAML flow style) reported as not enforced, in order.
fn unenforced(schema: &str, openapi_31: bool) -> Vec<String> {
    let node = crate::loader::yaml::parse(schema).unwrap();
    unenforced_keywords(&node, openapi_31, &Reading::Schema)
        .into_iter()
        .map(|(key, why)| {
            assert!(
                why.starts_with(&format!("`{}` is not enforced: ", key.text)),
                "{why}"
            );
            key.text.clone()
        })
        .collect()
}

#[test]
fn keywords_the_checks_read_are_not_reported() {
    for schema in [
        "{type: string, minLength: 1, maxLength: 9, pattern: '^a', const: abc}",
        "{type: integer, minimum: 1, exclusiveMaximum: 9, multipleOf: 2, enum: [4]}",
        "{type: number, minimum: 0, exclusiveMinimum: true}",
        "{type: array, items: {type: string}, minItems: 1, maxItems: 3, uniqueItems: true}",
        "{type: object, additionalProperties: {type: string}, minProperties: 1, maxProperties: 2}",
        "{type: [string, 'null'], maxLength: 3}",
        "{anyOf: [{type: string}, {type: 'null'}], maxLength: 3}",
        "{type: boolean, enum: [true, false]}",
        // Enums of scalars that are not Rust enums are checked as values, and a string enum
        // behind a nullable or one-member wrapper (a `String`).
        "{type: integer, enum: [1, 2, 3]}",
        "{type: [number, 'null'], enum: [0.5, null]}",
        "{anyOf: [{type: string}, {type: 'null'}], enum: [x, y]}",
        "{allOf: [{type: string}], enum: [p, q]}",
        // A struct requires its declared properties by their fields.
        "{type: object, properties: {a: {}}, required: [a]}",
        // A merged `allOf` requires what any of its objects does.
        "{allOf: [{$ref: '#/A'}, {$ref: '#/B'}], required: [a]}",
        // A string enum is a Rust enum: its lengths and pattern add nothing it does not check.
        "{type: string, enum: [asc, desc], maxLength: 4, pattern: '^[a-z]+$'}",
        // Keywords that do not constrain the type, and annotations, are not judged.
        "{type: integer, minLength: 3, format: email, description: x, uniqueItems: false}",
        "{type: object, properties: {a: {type: string}}, maxLength: 3}",
        // Untyped, a scalar `const` is still compared.
        "{const: 5}",
        // A pattern that does not compile is `pattern-invalid`'s.
        "{type: string, format: uuid, pattern: '('}",
    ] {
        assert_eq!(unenforced(schema, true), Vec::<String>::new(), "{schema}");
    }
}

#[test]
fn keywords_the_checks_leave_out_are_reported() {
    let cases: [(&str, &[&str]); 23] = [
        (
            "{not: {type: string}, if: {}, then: {}, else: {}}",
            &["not", "if"],
        ),
        (
            "{type: object, propertyNames: {}, patternProperties: {}, dependentRequired: {}}",
            &["propertyNames", "patternProperties", "dependentRequired"],
        ),
        (
            "{type: array, prefixItems: [], contains: {}, minContains: 1}",
            &["prefixItems", "contains", "minContains"],
        ),
        ("{type: array, enum: [[1], [2]]}", &["enum"]),
        ("{enum: [a, {b: 1}]}", &["enum"]),
        // Values of another type than the schema's, and of several types, are not checked.
        ("{type: integer, enum: ['1', '2']}", &["enum"]),
        ("{enum: [a, 1, true, null]}", &["enum"]),
        // A string enum's lengths and pattern are left to its values, which must meet them.
        (
            "{type: string, enum: [asc, descending], maxLength: 4, pattern: '^[a-z]{3,4}$'}",
            &["maxLength", "pattern"],
        ),
        // Beside a union only its alternatives are read.
        (
            "{oneOf: [{required: [a]}, {required: [b]}], properties: {c: {}}, required: [c]}",
            &["properties", "required"],
        ),
        // `required` of names the struct does not declare, of a map, of an untyped schema.
        (
            "{type: object, properties: {a: {}}, required: [a, b]}",
            &["required"],
        ),
        (
            "{type: object, additionalProperties: {type: string}, required: [a]}",
            &["required"],
        ),
        ("{required: [a]}", &["required"]),
        ("{allOf: [{$ref: '#/A'}], required: [a]}", &["required"]),
        // Beside a one-alternative `anyOf` only that alternative is read.
        (
            "{properties: {a: {}}, anyOf: [{required: [a]}]}",
            &["properties"],
        ),
        ("{type: array, const: [1]}", &["const"]),
        (
            "{type: string, format: uuid, maxLength: 36, pattern: '^[a-f0-9-]+$', const: x}",
            &["maxLength", "pattern", "const"],
        ),
        (
            "{type: string, format: date, minLength: 10}",
            &["minLength"],
        ),
        ("{minLength: 1, minimum: 0}", &["minLength", "minimum"]),
        ("{type: [string, integer], maxLength: 3}", &["maxLength"]),
        (
            "{type: object, properties: {a: {}}, minProperties: 1, maxProperties: 1}",
            &["minProperties", "maxProperties"],
        ),
        (
            "{oneOf: [{type: string}, {type: integer}], minLength: 2, enum: [ab, 3]}",
            &["minLength", "enum"],
        ),
        ("{allOf: [{$ref: '#/X'}], maxLength: 3}", &["maxLength"]),
        (
            "{type: string, minLength: -1, maxLength: 2.5}",
            &["minLength", "maxLength"],
        ),
    ];
    for (schema, expected) in cases {
        assert_eq!(unenforced(schema, true), expected, "{schema}");
    }
    // Read as something else: what that type does not check.
    let node =
        crate::loader::yaml::parse("{type: array, maxItems: 2, minLength: 1, items: {}}").unwrap();
    let forced = Reading::Forced {
        ty: Some(TypeRef::String),
        why: "read as one string".to_string(),
    };
    let reported: Vec<_> = unenforced_keywords(&node, true, &forced)
        .into_iter()
        .map(|(k, why)| (k.text.clone(), why))
        .collect();
    assert_eq!(
        reported,
        [(
            "maxItems".to_string(),
            "`maxItems` is not enforced: read as one string".to_string()
        )]
    );
    // Inner keywords win over the wrapper's.
    assert_eq!(
        unenforced(
            "{anyOf: [{type: string, minLength: 1}, {type: 'null'}], maxLength: 3}",
            true
        ),
        ["maxLength"]
    );
    // Beside a `$ref`: said as each version reads it.
    let node = crate::loader::yaml::parse("{$ref: '#/X', maxLength: 3, description: d}").unwrap();
    let [(key, why)] = unenforced_keywords(&node, false, &Reading::Schema)
        .try_into()
        .unwrap();
    assert_eq!(key.text, "maxLength");
    assert!(
        why.ends_with("OpenAPI 3.0 ignores every key beside a `$ref`"),
        "{why}"
    );
    let [(_, why)] = unenforced_keywords(&node, true, &Reading::Schema)
        .try_into()
        .unwrap();
    assert!(
        why.ends_with("beside a `$ref` the referenced schema is checked as it is"),
        "{why}"
    );
}

#[test]
fn alternatives_of_required_properties_beside_properties_make_a_struct() {
    let of = |schema: &str| {
        let node = crate::loader::yaml::parse(schema).unwrap();
        requirement_alternatives(&node)
    };
    assert_eq!(
        of(
            "{properties: {a: {}, b: {}}, anyOf: [{required: [a]}, {required: [b], description: d}]}"
        ),
        Some(Requirements {
            exactly_one: false,
            alternatives: vec![vec!["a".to_string()], vec!["b".to_string()]],
        })
    );
    assert!(
        of("{properties: {a: {}, b: {}}, oneOf: [{required: [a, b]}, {required: [b]}]}")
            .unwrap()
            .exactly_one
    );
    for union in [
        // Not only `required` in a member, a name the object does not declare, a property
        // whose presence a default (or a `$ref`, which may hold one) would hide, no
        // properties, both compositions.
        "{properties: {a: {}}, anyOf: [{required: [a], type: object}]}",
        "{properties: {a: {}}, anyOf: [{required: [a]}, {required: [z]}]}",
        "{properties: {a: {default: 1}}, anyOf: [{required: [a]}]}",
        "{properties: {a: {$ref: '#/X'}}, anyOf: [{required: [a]}]}",
        "{anyOf: [{required: [a]}, {required: [b]}]}",
        "{properties: {a: {}}, anyOf: [{required: [a]}], oneOf: [{required: [a]}]}",
        "{properties: {a: {}}, anyOf: [{required: []}, {required: [a]}]}",
        // One alternative (that alternative), an `allOf` beside.
        "{properties: {a: {}}, anyOf: [{required: [a]}]}",
        "{properties: {a: {}, b: {}}, allOf: [{$ref: '#/X'}], anyOf: [{required: [a]}, {required: [b]}]}",
    ] {
        assert_eq!(of(union), None, "{union}");
    }
    // The rule reads such an object as a struct: nothing beside the union is reported.
    assert_eq!(
        unenforced(
            "{type: object, properties: {a: {}, b: {}}, required: [a], anyOf: [{required: [a]}, {required: [b]}]}",
            true
        ),
        Vec::<String>::new()
    );
}
