use std::path::Path;

use super::types::{DefaultExpr, TypeKind};
use super::*;
use crate::loader::{MemoryFs, load_with};

fn api(text: &str) -> Api {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", text);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).expect("the case loads");
    Api::from_spec(&spec, "Idempotency-Key")
}

fn def<'a>(api: &'a Api, name: &str) -> &'a TypeDef {
    api.types
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no type {name}"))
}

fn field<'a>(api: &'a Api, ty: &str, wire: &str) -> &'a types::Field {
    match &def(api, ty).kind {
        TypeKind::Struct { fields, .. } => fields
            .iter()
            .find(|f| f.wire == wire)
            .unwrap_or_else(|| panic!("no {ty}.{wire}")),
        other => panic!("{ty} is not a struct: {other:?}"),
    }
}

const DEFAULTS: &str = r#"
openapi: 3.1.0
info: { title: T, version: '1' }
paths:
  /things/{id}:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
        - { name: id, in: path, required: true, schema: { type: string, default: x } }
        - { name: limit, in: query, schema: { type: integer, format: int32, default: 20 } }
        - { name: big, in: query, schema: { type: integer, format: int32, default: 3000000000 } }
        - { name: mode, in: query, schema: { $ref: '#/components/schemas/Mode' } }
        - { name: tags, in: query, schema: { type: array, items: { type: string }, default: [a] } }
        - { name: X-Trace, in: header, schema: { type: string, default: off } }
        - { name: X-Needed, in: header, required: true, schema: { type: string, default: no } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Thing' }
      responses:
        '201': { description: Created. }
components:
  schemas:
    Mode: { type: string, enum: [fast, slow], default: slow }
    Thing:
      type: object
      required: [code]
      properties:
        code: { type: string, default: c }
        size: { type: number, default: 1.5 }
        count: { type: integer, default: 20.0 }
        mode: { $ref: '#/components/schemas/Mode' }
        wrong: { type: integer, default: ten }
        note: { type: [string, 'null'], default: null }
        label: { type: [string, 'null'], default: hi }
        tags: { type: array, items: { $ref: '#/components/schemas/Mode' }, default: [fast] }
        meta: { type: object, additionalProperties: { type: string }, default: {} }
        when: { type: string, format: date-time, default: '2020-01-01T00:00:00Z' }
"#;

#[test]
fn defaults_lower_to_values_of_their_type_or_are_not_applied() {
    let api = api(DEFAULTS);
    let applied = |wire: &str| field(&api, "Thing", wire).default.clone();
    assert_eq!(applied("size"), Some(DefaultExpr::F64(1.5)));
    assert_eq!(applied("count"), Some(DefaultExpr::I64(20)));
    // Through a `$ref`: the referenced schema's default, as its enum's variant.
    assert_eq!(
        applied("mode"),
        Some(DefaultExpr::Variant {
            ty: "Mode".into(),
            variant: "Slow".into()
        })
    );
    assert_eq!(applied("note"), Some(DefaultExpr::Null));
    assert_eq!(
        applied("label"),
        Some(DefaultExpr::Some(Box::new(DefaultExpr::Str("hi".into()))))
    );
    assert_eq!(
        applied("tags"),
        Some(DefaultExpr::Vec(vec![DefaultExpr::Variant {
            ty: "Mode".into(),
            variant: "Fast".into()
        }]))
    );
    assert_eq!(applied("meta"), Some(DefaultExpr::EmptyMap));
    // Not a value of the type, or a type without a literal here: kept as written, not
    // applied, so the field stays optional.
    for wire in ["wrong", "when"] {
        let f = field(&api, "Thing", wire);
        assert!(f.default.is_none() && f.default_json.is_some(), "{wire}");
        assert!(f.field_type().is_option(), "{wire}");
    }
    assert!(!field(&api, "Thing", "size").field_type().is_option());
    // Required: the default means nothing.
    let code = field(&api, "Thing", "code");
    assert!(code.default_json.is_none() && code.default.is_none());

    let op = &api.operations[0];
    let param = |wire: &str| op.params.iter().find(|p| p.wire == wire).unwrap();
    assert_eq!(param("limit").default, Some(DefaultExpr::I32(20)));
    assert!(param("limit").always_present());
    assert_eq!(param("big").default, None, "out of int32");
    assert_eq!(
        param("mode").default,
        Some(DefaultExpr::Variant {
            ty: "Mode".into(),
            variant: "Slow".into()
        })
    );
    assert_eq!(
        param("X-Trace").default,
        Some(DefaultExpr::Str("off".into()))
    );
    // Arrays are served empty when absent; path and required parameters are always sent.
    for wire in ["tags", "id", "X-Needed"] {
        assert_eq!(param(wire).default, None, "{wire}");
    }
    // The semantic input's copies of the parameters have them too.
    let input = &op.idempotency.as_ref().unwrap().input;
    let limit = input.query.iter().find(|p| p.wire == "limit").unwrap();
    assert_eq!(limit.default, Some(DefaultExpr::I32(20)));
}

#[test]
fn const_and_one_value_enums_become_checks_of_the_matching_type() {
    let own = |schema: &str| {
        let node = crate::loader::yaml::parse(schema).unwrap();
        types::Checks::of(&node).own
    };
    let constant =
        |schema: &str, ty: &TypeRef| own(schema).for_type(ty).constant.map(|c| c.to_string());
    assert_eq!(
        constant("{type: string, const: card}", &TypeRef::String).as_deref(),
        Some("\"card\"")
    );
    assert_eq!(
        constant("{type: boolean, enum: [true]}", &TypeRef::Bool).as_deref(),
        Some("true")
    );
    assert_eq!(
        constant("{type: integer, const: 2.0}", &TypeRef::I64).as_deref(),
        Some("2.0")
    );
    assert_eq!(constant("{const: 2}", &TypeRef::Json).as_deref(), Some("2"));
    // A const of another type does not apply (nothing could pass), nor does a non-scalar or
    // an enum of several values.
    assert_eq!(constant("{type: string, const: 5}", &TypeRef::String), None);
    assert_eq!(constant("{type: integer, const: 2.5}", &TypeRef::I64), None);
    assert_eq!(constant("{const: [1]}", &TypeRef::Json), None);
    assert_eq!(
        constant("{type: boolean, enum: [true, false]}", &TypeRef::Bool),
        None
    );
}

const UNIONS: &str = r#"
openapi: 3.1.0
info: { title: T, version: '1' }
paths:
  /a:
    post:
      operationId: a
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                pet: { $ref: '#/components/schemas/Pet' }
                other: { $ref: '#/components/schemas/OtherPet' }
                shared: { $ref: '#/components/schemas/Shared' }
                twice: { $ref: '#/components/schemas/Twice' }
                missing: { $ref: '#/components/schemas/Missing' }
      responses:
        '200':
          description: Fish, on its own.
          content:
            application/json:
              schema: { $ref: '#/components/schemas/Fish' }
components:
  schemas:
    Pet:
      oneOf: [{ $ref: '#/components/schemas/Cat' }, { $ref: '#/components/schemas/Dog' }]
      discriminator: { propertyName: kind, mapping: { cat: '#/components/schemas/Cat', dog: '#/components/schemas/Dog' } }
    # Cat in a second union on the same property, under another tag: both tagged.
    OtherPet:
      oneOf: [{ $ref: '#/components/schemas/Cat' }, { $ref: '#/components/schemas/Hamster' }]
      discriminator: { propertyName: kind, mapping: { kitty: '#/components/schemas/Cat', hamster: '#/components/schemas/Hamster' } }
    # Fish is also a response: it keeps its tag, and its union is read by tag.
    Shared:
      oneOf: [{ $ref: '#/components/schemas/Fish' }, { $ref: '#/components/schemas/Bird' }]
      discriminator: { propertyName: kind }
    # Two tags for one alternative: the tag sent is kept.
    Twice:
      oneOf: [{ $ref: '#/components/schemas/Ant' }, { $ref: '#/components/schemas/Bee' }]
      discriminator: { propertyName: kind, mapping: { ant: '#/components/schemas/Ant', emmet: '#/components/schemas/Ant', bee: '#/components/schemas/Bee' } }
    # An alternative without the property.
    Missing:
      oneOf: [{ $ref: '#/components/schemas/Rock' }, { $ref: '#/components/schemas/Wasp' }]
      discriminator: { propertyName: kind }
    Cat: { type: object, required: [kind], properties: { kind: { type: string }, lives: { type: integer } } }
    Dog: { type: object, required: [kind], properties: { kind: { type: string, enum: [dog] } } }
    Fish: { type: object, required: [kind], properties: { kind: { type: string } } }
    Bird: { type: object, required: [kind], properties: { kind: { type: string } } }
    Ant: { type: object, required: [kind], properties: { kind: { type: string } } }
    Bee: { type: object, required: [kind], properties: { kind: { type: string }, sting: { type: boolean } } }
    Wasp: { type: object, required: [kind], properties: { kind: { type: string }, nest: { type: boolean } } }
    Hamster: { type: object, required: [kind], properties: { kind: { type: string }, wheel: { type: boolean } } }
    Rock: { type: object, properties: { weight: { type: number } } }
"#;

#[test]
fn tags_are_implied_for_alternatives_used_only_through_tagged_unions() {
    let api = api(UNIONS);
    let tagged = |name: &str| match &def(&api, name).kind {
        TypeKind::Union {
            tagged,
            discriminator,
            ..
        } => (*tagged, discriminator.is_some()),
        other => panic!("{name} is not a union: {other:?}"),
    };
    assert_eq!(tagged("Pet"), (true, true));
    assert_eq!(tagged("OtherPet"), (true, true));
    assert_eq!(tagged("Shared"), (false, true));
    assert_eq!(tagged("Twice"), (false, true));
    // Without the property the discriminator is still read (the alternative is named).
    assert!(!tagged("Missing").0);
    let implied = |ty: &str| field(&api, ty, "kind").implied_tag;
    assert!(implied("Cat") && implied("Dog"));
    assert!(implied("Hamster"));
    // An alternative of an untagged union keeps its tag field, even when its sibling is the
    // one used elsewhere.
    for ty in ["Fish", "Bird", "Ant", "Bee", "Wasp"] {
        assert!(!implied(ty), "{ty}");
    }
    // The Pet union's tags come from the mapping; Shared's from the schema names.
    let tags = |name: &str| match &def(&api, name).kind {
        TypeKind::Union { variants, .. } => variants
            .iter()
            .map(|v| v.tags.join("|"))
            .collect::<Vec<_>>(),
        _ => unreachable!(),
    };
    assert_eq!(tags("Pet"), ["cat", "dog"]);
    assert_eq!(tags("OtherPet"), ["kitty", "hamster"]);
    assert_eq!(tags("Shared"), ["Fish", "Bird"]);
    assert_eq!(tags("Twice"), ["ant|emmet", "bee"]);
}

/// An untagged union with checks decodes as `anyOf` reads only when it reaches no such union
/// again (itself included): a recursive or nested one would decode its subtree once per
/// alternative at every level.
#[test]
fn only_unions_reaching_no_checked_union_decode_by_their_checks() {
    let api = api(r#"
openapi: 3.1.0
info: { title: T, version: '1' }
paths:
  /things:
    post:
      operationId: createThing
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                flat: { $ref: '#/components/schemas/Flat' }
                outer: { $ref: '#/components/schemas/Outer' }
                tree: { $ref: '#/components/schemas/Tree' }
      responses:
        '201': { description: Created }
components:
  schemas:
    Flat:
      anyOf: [{ type: string, maxLength: 3 }, { type: string, pattern: '^x+$' }]
    Outer:
      anyOf: [{ $ref: '#/components/schemas/Flat' }, { type: integer, minimum: 1 }]
    Tree:
      anyOf:
        - { type: object, properties: { next: { $ref: '#/components/schemas/Tree' }, v: { type: string, maxLength: 1 } } }
        - { type: object, properties: { next: { $ref: '#/components/schemas/Tree' }, v: { type: string, pattern: '^x+$' } } }
"#);
    let decode_checked = |name: &str| match &def(&api, name).kind {
        TypeKind::Union { decode_checked, .. } => *decode_checked,
        other => panic!("{name} is not a union: {other:?}"),
    };
    assert!(decode_checked("Flat"));
    assert!(!decode_checked("Outer"), "it holds Flat");
    assert!(!decode_checked("Tree"), "it holds itself");
}
