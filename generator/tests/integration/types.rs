//! The types the IR builds from schemas: one type per structure (inline schemas equal up to
//! annotations share one, named from a `title` or the first place it appears), nothing looser
//! than the schema (a single alternative is that alternative), and names that do not move when
//! operations are added.

use std::collections::BTreeMap;
use std::path::Path;

use idemgen::ir::Api;
use idemgen::ir::types::{TypeDef, TypeKind, TypeRef};
use idemgen::loader::{MemoryFs, load_with};

fn api(text: &str) -> Api {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", text);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).expect("the case loads");
    Api::from_spec(&spec, "Idempotency-Key")
}

/// A spec with one `POST /things` whose JSON body is `body` (YAML flow text), and `components`.
fn spec(body: &str, components: &str) -> String {
    format!(
        r#"
openapi: 3.1.0
info: {{ title: Things, version: 1.0.0 }}
paths:
  /things:
    post:
      operationId: createThing
      requestBody:
        required: true
        content:
          application/json:
            schema: {body}
      responses:
        '204': {{ description: Done. }}
components:
  schemas: {components}
"#
    )
}

fn types(api: &Api) -> BTreeMap<&str, &TypeDef> {
    api.types.iter().map(|t| (t.name.as_str(), t)).collect()
}

/// The fields of the struct `name`: wire name → (type, required).
fn fields(api: &Api, name: &str) -> BTreeMap<String, (TypeRef, bool)> {
    match &types(api)[name].kind {
        TypeKind::Struct { fields, .. } => fields
            .iter()
            .map(|f| (f.wire.clone(), (f.ty.clone(), f.required)))
            .collect(),
        other => panic!("{name} is not a struct: {other:?}"),
    }
}

fn named(name: &str) -> TypeRef {
    TypeRef::Named(name.to_string())
}

#[test]
fn a_single_alternative_is_that_alternative() {
    let api = api(&spec(
        r#"
              type: object
              required: [any, one, all, items]
              properties:
                any: { anyOf: [{ $ref: '#/components/schemas/Cat' }] }
                one: { oneOf: [{ type: string }] }
                all: { allOf: [{ $ref: '#/components/schemas/Cat' }] }
                items: { type: array, items: { anyOf: [{ $ref: '#/components/schemas/Cat' }] } }
                maybe: { anyOf: [{ $ref: '#/components/schemas/Cat' }, { type: 'null' }] }
                none: { oneOf: [{ type: 'null' }, { type: integer }] }"#,
        "{ Cat: { type: object, properties: { name: { type: string } } } }",
    ));
    let f = fields(&api, "CreateThingRequestBody");
    assert_eq!(f["any"], (named("Cat"), true));
    assert_eq!(f["one"], (TypeRef::String, true));
    assert_eq!(f["all"], (named("Cat"), true));
    // Items of the declared type only: no `null` items.
    assert_eq!(f["items"], (TypeRef::Vec(Box::new(named("Cat"))), true));
    // `null` beside one alternative: that alternative or null.
    assert_eq!(f["maybe"], (named("Cat").nullable(), false));
    assert_eq!(f["none"], (TypeRef::I64.nullable(), false));
}

#[test]
fn inline_schemas_equal_but_for_annotations_are_one_type() {
    let api = api(&spec(
        r#"
              type: object
              properties:
                home:
                  type: object
                  description: Where the thing lives.
                  example: { street: Main }
                  properties:
                    street: { type: string, description: The street. }
                    zip: { type: string }
                work:
                  type: object
                  description: Where the thing works.
                  x-internal: true
                  properties:
                    street: { type: string }
                    zip: { type: string, deprecated: true }
                # One keyword more (a check) is another type.
                short:
                  type: object
                  properties:
                    street: { type: string, maxLength: 10 }
                    zip: { type: string }
                # The same properties in another order: another struct (fields keep their order).
                turned:
                  type: object
                  properties:
                    zip: { type: string }
                    street: { type: string }
                # Nullable: the same type, or null.
                spare:
                  type: [object, 'null']
                  properties:
                    street: { type: string }
                    zip: { type: string }
                mode: { type: string, enum: [fast, slow] }
                speed: { type: string, enum: [fast, slow], description: The same values. }
                other: { type: string, enum: [slow, fast] }"#,
        "{}",
    ));
    let f = fields(&api, "CreateThingRequestBody");
    let home = f["home"].0.clone();
    assert_eq!(home, named("CreateThingRequestBodyHome"));
    assert_eq!(f["work"].0, home);
    assert_ne!(f["short"].0, home);
    assert_ne!(f["turned"].0, home);
    assert_ne!(f["spare"].0, home.clone().nullable());
    assert_eq!(f["mode"].0, f["speed"].0);
    assert_ne!(f["mode"].0, f["other"].0);
    // The first place a shared type appears names it, and its description is the first one.
    assert_eq!(
        types(&api)["CreateThingRequestBodyHome"].doc.as_deref(),
        Some("Where the thing lives.")
    );
    // The names the copies would have had are aliases of the one type, nothing more.
    for (copy, of) in [
        ("CreateThingRequestBodyWork", "CreateThingRequestBodyHome"),
        ("CreateThingRequestBodySpeed", "CreateThingRequestBodyMode"),
    ] {
        assert_eq!(types(&api)[copy].kind, TypeKind::Alias(named(of)), "{copy}");
    }
}

#[test]
fn an_inline_copy_of_a_component_is_the_component() {
    let api = api(&spec(
        r#"
              type: object
              properties:
                owner:
                  type: object
                  description: Written out again, word for word but this description.
                  required: [name]
                  properties:
                    name: { type: string }
                    pet: { $ref: '#/components/schemas/Pet' }
                pet: { type: string, enum: [cat, dog] }"#,
        r#"
    Person:
      type: object
      description: A person.
      required: [name]
      properties:
        name: { type: string }
        pet: { $ref: '#/components/schemas/Pet' }
    Pet: { type: string, enum: [cat, dog] }"#,
    ));
    let f = fields(&api, "CreateThingRequestBody");
    assert_eq!(f["owner"].0, named("Person"));
    assert_eq!(f["pet"].0, named("Pet"));
    assert_eq!(types(&api)["Person"].doc.as_deref(), Some("A person."));
    assert_eq!(
        types(&api)["CreateThingRequestBodyOwner"].kind,
        TypeKind::Alias(named("Person"))
    );
}

#[test]
fn a_title_names_an_inline_type() {
    let api = api(&spec(
        r#"
              type: object
              properties:
                card: { title: contact card, type: object, properties: { email: { type: string } } }
                backup: { title: contact card, type: object, properties: { phone: { type: string } } }"#,
        "{}",
    ));
    let f = fields(&api, "CreateThingRequestBody");
    assert_eq!(f["card"].0, named("ContactCard"));
    // Two different schemas with one title: two types, the second numbered.
    assert_eq!(f["backup"].0, named("ContactCard2"));
}

/// Names do not move when operations are added: types named from components stay put whatever
/// comes before them, and an operation added anywhere renames nothing it does not share.
#[test]
fn adding_an_operation_renames_no_existing_type() {
    let base = r#"
openapi: 3.1.0
info: { title: Things, version: 1.0.0 }
paths:
  /things:
    post:
      operationId: createThing
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                size: { type: object, properties: { w: { type: integer }, h: { type: integer } } }
                owner: { $ref: '#/components/schemas/Owner' }
      responses:
        '200':
          description: Done.
          content:
            application/json:
              schema:
                type: object
                properties:
                  state: { type: string, enum: [new, old] }
#INSERT_END
components:
  schemas:
    Owner:
      type: object
      properties:
        address: { type: object, properties: { street: { type: string } } }
        state: { type: string, enum: [new, old] }
"#;
    let added = r#"
  /gadgets:
    post:
      operationId: createGadget
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                address: { type: object, properties: { street: { type: string } } }
                size: { type: object, properties: { w: { type: integer }, h: { type: integer } } }
                colour: { type: string, enum: [red, blue] }
      responses:
        '204': { description: Done. }
"#;
    let before = api(base);
    let at_end = api(&base.replace("#INSERT_END", added));
    let at_start = api(&base.replace("paths:\n", &format!("paths:{added}")));
    let summary = |api: &Api| -> BTreeMap<String, String> {
        api.types
            .iter()
            .map(|t| (t.name.clone(), format!("{:?}", t.kind)))
            .collect()
    };
    let old = summary(&before);
    // The operation's own types, and the component's inline ones.
    for name in [
        "CreateThingRequestBody",
        "CreateThingRequestBodySize",
        "OwnerAddress",
        "OwnerState",
    ] {
        assert!(old.contains_key(name), "{name}: {:?}", old.keys());
    }
    // Added at the end: nothing of the old types changes.
    let new = summary(&at_end);
    for (name, kind) in &old {
        assert_eq!(new.get(name), Some(kind), "at the end: {name} changed");
    }
    // Added first: the one type it shares (an unnamed inline schema) is defined where it first
    // appears, now in the added operation, and its old name stays, an alias of the new one.
    let new = summary(&at_start);
    let (size, gadget_size) = ("CreateThingRequestBodySize", "CreateGadgetRequestBodySize");
    for (name, kind) in &old {
        let now = new
            .get(name)
            .unwrap_or_else(|| panic!("first: {name} is gone"));
        match name.as_str() {
            n if n == size => {
                assert_eq!(now, &format!("{:?}", TypeKind::Alias(named(gadget_size))));
                assert_eq!(&new[gadget_size], kind);
            }
            "CreateThingRequestBody" => assert_eq!(&now.replace(gadget_size, size), kind),
            _ => assert_eq!(now, kind, "first: {name} changed"),
        }
    }
    // Inline schemas equal to a component's inline schema take the component's name, wherever
    // the operation is.
    let gadget = fields(&at_start, "CreateGadgetRequestBody");
    assert_eq!(gadget["address"].0, named("OwnerAddress"));
    let response = fields(&before, "CreateThing200Response");
    assert_eq!(response["state"].0, named("OwnerState"));
}

/// A required array part sent one part per item reads absent as `[]` (RFC 7578 cannot spell an
/// empty array that way); one sent as a single JSON part can spell `[]`, so absent stays absent
/// (the decoder's "the part is required", a 400), and its field gets no `#[serde(default)]`.
#[test]
fn only_a_required_array_sent_part_by_part_reads_absent_as_empty() {
    let api = api(r#"
openapi: 3.1.0
info: { title: Things, version: 1.0.0 }
paths:
  /things:
    post:
      operationId: createThing
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              required: [tags, lines]
              properties:
                tags: { type: array, items: { type: string } }
                lines: { type: array, items: { type: object, properties: { sku: { type: string } } } }
            encoding:
              lines: { contentType: application/json }
      responses:
        '204': { description: Done. }
"#);
    let body = api
        .types
        .iter()
        .find_map(|t| match &t.kind {
            TypeKind::Struct { fields, .. } if fields.iter().any(|f| f.wire == "lines") => {
                Some(fields)
            }
            _ => None,
        })
        .expect("the body's struct");
    let absent_is_empty: BTreeMap<&str, bool> = body
        .iter()
        .map(|f| (f.wire.as_str(), f.absent_is_empty))
        .collect();
    assert_eq!(
        absent_is_empty,
        BTreeMap::from([("lines", false), ("tags", true)])
    );
    let module = idemgen::emit::emit(&api, "openapi.yaml").expect("emits");
    let field = |name: &str| {
        let end = module.find(&format!("pub {name}:")).expect("the field");
        let start = module[..end].rfind(',').expect("a field before it");
        module[start..end].to_string()
    };
    assert!(field("tags").contains("#[serde(default)]"), "{module}");
    assert!(!field("lines").contains("#[serde(default)]"), "{module}");
}
