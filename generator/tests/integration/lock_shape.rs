//! The lock and the emitter read one IR value (`OperationIr::idempotency`): for every kind of
//! field (path, query, body property, nested, `$ref`'d), the lock's input shape changes exactly
//! when the emitted semantic input changes.
//!
//! "The emitted semantic input" is what serialises into the fingerprint: the generated semantic
//! input structs and every type they reach, as emitted, reduced to what serde's `Serialize` reads
//! (items and fields with their `serde` attributes, minus the deserialise-only `default` and
//! `deny_unknown_fields`; the values of the `default_*` functions kept, since an absent value is
//! serialised as its default; docs, derives, other impls and `Box` dropped; aliases inlined; fields and
//! variants in name order, since JCS sorts members; type names replaced by the order in which the
//! input reaches them, since a renamed component serialises the same).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use idemgen::emit;
use idemgen::ir::types::{TypeDef, TypeKind, TypeRef};
use idemgen::ir::{Api, BodyKind};
use idemgen::loader::{MemoryFs, load_with};
use idemgen::lock::Lock;
use quote::ToTokens;

const BASE: &str = r#"
openapi: 3.0.3
info: { title: Things, version: 1.0.0 }
paths:
  /things/{id}:
    post:
      operationId: createThing
      description: Creates a thing.
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
        - { name: id, in: path, required: true, schema: { type: string } }
        - { name: mode, in: query, schema: { $ref: '#/components/schemas/Mode' } }
        - { name: X-Trace, in: header, schema: { type: string } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Thing' }
      responses:
        '201': { description: Created. }
components:
  schemas:
    Mode: { type: string, enum: [fast, slow] }
    Name: { type: string, maxLength: 10 }
    Thing:
      type: object
      description: A thing.
      required: [name, code]
      properties:
        code: { type: string }
        name: { $ref: '#/components/schemas/Name' }
        tags: { type: array, items: { type: string } }
        spec: { $ref: '#/components/schemas/Spec' }
    Spec:
      type: object
      properties:
        size: { type: integer }
        unit: { type: string, enum: [cm, in] }
"#;

/// Text replacements applied to the base spec.
type Edits = &'static [(&'static str, &'static str)];

/// (what, replacements applied to BASE, whether what is fingerprinted changes)
const CASES: &[(&str, Edits, bool)] = &[
    (
        "path parameter type",
        &[(
            "name: id, in: path, required: true, schema: { type: string }",
            "name: id, in: path, required: true, schema: { type: integer }",
        )],
        true,
    ),
    (
        "path parameter renamed",
        &[
            ("/things/{id}", "/things/{thingId}"),
            ("name: id, in: path", "name: thingId, in: path"),
        ],
        true,
    ),
    (
        "query parameter added",
        &[(
            "        - { name: X-Trace",
            "        - { name: limit, in: query, schema: { type: integer } }\n        - { name: X-Trace",
        )],
        true,
    ),
    (
        "query parameter made required",
        &[(
            "name: mode, in: query,",
            "name: mode, in: query, required: true,",
        )],
        true,
    ),
    (
        "$ref'd query parameter gains a value",
        &[("enum: [fast, slow]", "enum: [fast, slow, idle]")],
        true,
    ),
    (
        "body property added",
        &[(
            "        tags: { type: array",
            "        colour: { type: string }\n        tags: { type: array",
        )],
        true,
    ),
    (
        "body property renamed",
        &[(
            "        tags: { type: array",
            "        labels: { type: array",
        )],
        true,
    ),
    (
        "body property made required",
        &[("required: [name, code]", "required: [name, code, tags]")],
        true,
    ),
    (
        "required body property made nullable",
        &[(
            "code: { type: string }",
            "code: { type: string, nullable: true }",
        )],
        true,
    ),
    // Null and absent are distinct for an optional nullable property: `null` is now sent.
    (
        "optional body property made nullable",
        &[(
            "tags: { type: array, items: { type: string } }",
            "tags: { type: array, nullable: true, items: { type: string } }",
        )],
        true,
    ),
    (
        "nested $ref'd property changes type",
        &[("size: { type: integer }", "size: { type: number }")],
        true,
    ),
    (
        "nested enum gains a value",
        &[("enum: [cm, in]", "enum: [cm, in, mm]")],
        true,
    ),
    (
        "aliased property changes type",
        &[(
            "Name: { type: string, maxLength: 10 }",
            "Name: { type: integer }",
        )],
        true,
    ),
    ("component renamed", &[("Spec", "Dimensions")], false),
    (
        "alias inlined",
        &[(
            "name: { $ref: '#/components/schemas/Name' }",
            "name: { type: string, maxLength: 10 }",
        )],
        false,
    ),
    (
        "description changed",
        &[("description: A thing.", "description: A thing with a name.")],
        false,
    ),
    (
        "validation bound changed",
        &[("maxLength: 10", "maxLength: 20")],
        false,
    ),
    (
        "properties reordered",
        &[(
            "        name: { $ref: '#/components/schemas/Name' }\n        tags: { type: array, items: { type: string } }",
            "        tags: { type: array, items: { type: string } }\n        name: { $ref: '#/components/schemas/Name' }",
        )],
        false,
    ),
    (
        "additionalProperties: false added",
        &[(
            "      type: object\n      description: A thing.",
            "      type: object\n      additionalProperties: false\n      description: A thing.",
        )],
        false,
    ),
    (
        "header parameter changes type",
        &[(
            "name: X-Trace, in: header, schema: { type: string }",
            "name: X-Trace, in: header, schema: { type: integer }",
        )],
        false,
    ),
    // An absent value now serialises as its default: a new request for the same bytes.
    (
        "optional body property gains a default",
        &[(
            "size: { type: integer }",
            "size: { type: integer, default: 1 }",
        )],
        true,
    ),
    (
        "$ref'd query parameter gains a default",
        &[(
            "Mode: { type: string, enum: [fast, slow] }",
            "Mode: { type: string, enum: [fast, slow], default: fast }",
        )],
        true,
    ),
    // Not applied: not a value of its type, on a required property, on a header.
    (
        "default that is not a value of its type",
        &[(
            "size: { type: integer }",
            "size: { type: integer, default: big }",
        )],
        false,
    ),
    (
        "default on a required property",
        &[(
            "code: { type: string }",
            "code: { type: string, default: x }",
        )],
        false,
    ),
    (
        "header parameter gains a default",
        &[(
            "name: X-Trace, in: header, schema: { type: string }",
            "name: X-Trace, in: header, schema: { type: string, default: x }",
        )],
        false,
    ),
    (
        "const added",
        &[(
            "size: { type: integer }",
            "size: { type: integer, const: 3 }",
        )],
        false,
    ),
    (
        "header parameter marked x-idempotency-fingerprint",
        &[(
            "name: X-Trace, in: header, schema",
            "name: X-Trace, in: header, x-idempotency-fingerprint: true, schema",
        )],
        true,
    ),
    (
        "header parameter marked x-idempotency-fingerprint: false",
        &[(
            "name: X-Trace, in: header, schema",
            "name: X-Trace, in: header, x-idempotency-fingerprint: false, schema",
        )],
        false,
    ),
    (
        "response changes",
        &[(
            "'201': { description: Created. }",
            "'200': { description: Done. }",
        )],
        false,
    ),
];

fn api(text: &str) -> Api {
    let mut fs = MemoryFs::new();
    fs.insert("/spec/openapi.yaml", text);
    let spec = load_with(&fs, Path::new("/spec/openapi.yaml")).expect("the case loads");
    Api::from_spec(&spec, "Idempotency-Key")
}

fn lock_shape(api: &Api) -> String {
    Lock::from_api(api).operations["createThing"]
        .input_shape
        .clone()
}

/// The emitted semantic input of `createThing`, reduced to what serialises (module docs).
fn emitted_input(api: &Api) -> String {
    let op = api
        .operations
        .iter()
        .find(|o| o.id == "createThing")
        .expect("createThing");
    let idempotency = op.idempotency.as_ref().expect("idempotent");
    let defs: HashMap<&str, &TypeDef> = api.types.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut tokens = emit::operations::semantic_input(op, idempotency);
    let mut roots: Vec<&TypeRef> = idempotency
        .input
        .path
        .iter()
        .chain(&idempotency.input.query)
        .map(|p| &p.ty)
        .collect();
    if let Some(BodyKind::Json(ty)) = idempotency.input.body.as_ref().map(|b| &b.kind) {
        roots.push(ty);
    }
    let mut seen = Vec::new();
    let mut queue: VecDeque<&TypeRef> = roots.into();
    while let Some(ty) = queue.pop_front() {
        match ty {
            TypeRef::Vec(t) | TypeRef::Map(t) | TypeRef::Option(t) | TypeRef::Boxed(t) => {
                queue.push_back(t)
            }
            TypeRef::Named(name) if !seen.contains(name) => {
                seen.push(name.clone());
                let def = defs[name.as_str()];
                tokens.extend(emit::types::type_def(def));
                match &def.kind {
                    TypeKind::Struct { fields, extra, .. } => {
                        queue.extend(fields.iter().map(|f| &f.ty));
                        queue.extend(extra);
                    }
                    TypeKind::Union { variants, .. } => {
                        queue.extend(variants.iter().map(|v| &v.ty))
                    }
                    TypeKind::Alias(t) => queue.push_back(t),
                    TypeKind::StringEnum { .. } => {}
                }
            }
            _ => {}
        }
    }
    normalise(tokens.to_string(), &op.name, &seen)
}

fn normalise(source: String, op: &str, types: &[String]) -> String {
    let file: syn::File = syn::parse_str(&source).expect("emitted tokens parse");
    let serde_only = |attrs: &mut Vec<syn::Attribute>| {
        let kept: Vec<syn::Attribute> = attrs
            .iter()
            .filter(|a| a.path().is_ident("serde"))
            .map(|a| {
                a.to_token_stream()
                    .to_string()
                    .replace("deny_unknown_fields", "")
                    .replace(
                        "deserialize_with = \"::idemgen_runtime::codegen::deserialize_some\" ,",
                        "",
                    )
                    .replace(
                        "deserialize_with = \"::idemgen_runtime::codegen::double_option\" ,",
                        "",
                    )
                    .replace("default ,", "")
                    .replace("default", "")
            })
            .filter(|text| text.replace(' ', "") != "#[serde()]")
            .map(|text| syn::parse_quote!(#[doc = #text]))
            .collect();
        *attrs = kept;
    };
    let mut items: BTreeMap<String, String> = BTreeMap::new();
    let mut aliases: Vec<(String, String)> = Vec::new();
    let mut defaults: BTreeMap<String, String> = BTreeMap::new();
    for item in file.items {
        match item {
            syn::Item::Impl(i) if i.trait_.is_none() => {
                // `impl T { fn default_x() -> X { value } }`: the values absent fields take.
                let syn::Type::Path(owner) = &*i.self_ty else {
                    continue;
                };
                let owner = owner.path.to_token_stream().to_string();
                for item in &i.items {
                    if let syn::ImplItem::Fn(f) = item
                        && f.sig.ident.to_string().starts_with("default_")
                    {
                        let entry = defaults.entry(owner.clone()).or_default();
                        entry.push_str(&format!(
                            " {} = {} ;",
                            f.sig.ident,
                            f.block.to_token_stream()
                        ));
                    }
                }
            }
            syn::Item::Struct(mut s) => {
                serde_only(&mut s.attrs);
                s.generics = syn::Generics::default();
                let mut fields: Vec<String> = s
                    .fields
                    .iter_mut()
                    .map(|f| {
                        serde_only(&mut f.attrs);
                        f.vis = syn::Visibility::Inherited;
                        f.to_token_stream().to_string()
                    })
                    .collect();
                fields.sort();
                let attrs: Vec<String> = s
                    .attrs
                    .iter()
                    .map(|a| a.to_token_stream().to_string())
                    .collect();
                items.insert(
                    s.ident.to_string(),
                    format!("{} struct {{ {} }}", attrs.join(" "), fields.join(" , ")),
                );
            }
            syn::Item::Enum(mut e) => {
                serde_only(&mut e.attrs);
                let untagged = e
                    .attrs
                    .iter()
                    .any(|a| a.to_token_stream().to_string().contains("untagged"));
                let mut variants: Vec<String> = e
                    .variants
                    .iter_mut()
                    .map(|v| {
                        serde_only(&mut v.attrs);
                        if untagged {
                            // The variant's name is not sent; only its content is.
                            v.ident = syn::Ident::new("V", v.ident.span());
                        }
                        v.to_token_stream().to_string()
                    })
                    .collect();
                variants.sort();
                let attrs: Vec<String> = e
                    .attrs
                    .iter()
                    .map(|a| a.to_token_stream().to_string())
                    .collect();
                items.insert(
                    e.ident.to_string(),
                    format!("{} enum {{ {} }}", attrs.join(" "), variants.join(" , ")),
                );
            }
            syn::Item::Type(t) => {
                aliases.push((t.ident.to_string(), t.ty.to_token_stream().to_string()))
            }
            _ => {}
        }
    }
    for (owner, values) in defaults {
        if let Some(item) = items.get_mut(&owner) {
            item.push_str(&format!(" defaults {{{values} }}"));
        }
    }
    // Token text with `types ::` and `Box` wrappers gone, aliases inlined.
    let clean = |text: &str, aliases: &[(String, String)]| {
        let mut words: Vec<String> = text
            .replace("types :: ", "")
            .replace(":: std :: boxed :: Box <", "<")
            .split(' ')
            .map(str::to_owned)
            .collect();
        for _ in 0..8 {
            words = words
                .into_iter()
                .flat_map(|w| match aliases.iter().find(|(n, _)| *n == w) {
                    Some((_, target)) => target
                        .replace("types :: ", "")
                        .split(' ')
                        .map(str::to_owned)
                        .collect(),
                    None => vec![w],
                })
                .collect();
        }
        words
    };
    // Walk from the input's own structs, numbering the reachable types in order of appearance.
    let roots: Vec<String> = ["SemanticInput", "PathInput", "QueryInput", "HeaderInput"]
        .iter()
        .map(|s| format!("{op}{s}"))
        .filter(|n| items.contains_key(n))
        .collect();
    let mut numbers: HashMap<String, String> = roots
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), format!("Input{i}")))
        .collect();
    let mut order: VecDeque<String> = roots.into();
    let mut out = Vec::new();
    while let Some(name) = order.pop_front() {
        let words = clean(&items[&name], &aliases);
        for w in &words {
            if types.contains(w) && items.contains_key(w) && !numbers.contains_key(w) {
                numbers.insert(w.clone(), format!("T{}", numbers.len()));
                order.push_back(w.clone());
            }
        }
        let renamed: Vec<String> = words
            .into_iter()
            .map(|w| numbers.get(&w).cloned().unwrap_or(w))
            .collect();
        out.push(format!("{} = {}", numbers[&name], renamed.join(" ")));
    }
    out.join("\n")
}

#[test]
fn the_lock_changes_exactly_when_the_emitted_semantic_input_changes() {
    let base = api(BASE);
    let (base_lock, base_input) = (lock_shape(&base), emitted_input(&base));
    assert!(base_input.contains("struct"), "{base_input}");
    for (what, edits, changes) in CASES {
        let mut text = BASE.to_string();
        for (from, to) in edits.iter() {
            if from.is_empty() {
                continue;
            }
            assert!(text.contains(from), "{what}: `{from}` not in the base spec");
            text = text.replace(from, to);
        }
        let case = api(&text);
        let (lock, input) = (lock_shape(&case), emitted_input(&case));
        assert_eq!(
            input != base_input,
            *changes,
            "{what}: the emitted semantic input {} \n--- base\n{base_input}\n--- case\n{input}",
            if *changes {
                "did not change"
            } else {
                "changed"
            },
        );
        assert_eq!(
            lock != base_lock,
            *changes,
            "{what}: the lock {}",
            if *changes {
                "did not change"
            } else {
                "changed"
            },
        );
    }
}

/// A discriminated union is internally tagged when its alternatives are used only through it,
/// and written as its alternatives (each carrying its tag) otherwise: the JSON is the same, and
/// so is the lock's shape.
#[test]
fn a_union_s_representation_does_not_change_the_shape() {
    let union = r#"
openapi: 3.1.0
info: { title: Pets, version: 1.0.0 }
paths:
  /pets:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Pet' }
      responses:
        '201': { description: Created. }
components:
  schemas:
    Pet:
      oneOf: [{ $ref: '#/components/schemas/Cat' }, { $ref: '#/components/schemas/Dog' }]
      discriminator: { propertyName: kind, mapping: { cat: '#/components/schemas/Cat', dog: '#/components/schemas/Dog' } }
    Cat:
      type: object
      required: [kind]
      properties: { kind: { type: string }, lives: { type: integer } }
    Dog:
      type: object
      properties: { kind: { type: string, default: dog }, good: { type: boolean } }
"#;
    let tagged = api(union);
    // `Cat` also answered on its own: it keeps its tag field, and the union its untagged form.
    let shared = api(&union.replace(
        "'201': { description: Created. }",
        "'201': { description: Created., content: { application/json: { schema: { $ref: '#/components/schemas/Cat' } } } }",
    ));
    let is_tagged = |api: &Api| {
        api.types
            .iter()
            .any(|d| matches!(&d.kind, TypeKind::Union { tagged: true, .. }))
    };
    assert!(is_tagged(&tagged));
    assert!(!is_tagged(&shared));
    let implied =
        |api: &Api, name: &str| match &api.types.iter().find(|d| d.name == name).unwrap().kind {
            TypeKind::Struct { fields, .. } => {
                fields.iter().any(|f| f.wire == "kind" && f.implied_tag)
            }
            _ => panic!("{name} is a struct"),
        };
    assert!(implied(&tagged, "Cat") && implied(&tagged, "Dog"));
    assert!(!implied(&shared, "Cat") && !implied(&shared, "Dog"));
    assert_eq!(lock_shape(&tagged), lock_shape(&shared));
    // The tag's default is not applied either way: a union always reads the tag.
    let dog_kind = |api: &Api| match &api.types.iter().find(|d| d.name == "Dog").unwrap().kind {
        TypeKind::Struct { fields, .. } => fields
            .iter()
            .find(|f| f.wire == "kind")
            .unwrap()
            .default
            .clone(),
        _ => panic!("Dog is a struct"),
    };
    assert_eq!((dog_kind(&tagged), dog_kind(&shared)), (None, None));
}

/// An optional property added to an object with `additionalProperties: false` is a compatible
/// change: no stored request can hold it (it was refused), and one without it fingerprints as
/// before. Everything else still needs a version bump, and so does any change under a lock that
/// did not record where such members may be added.
#[test]
fn an_optional_property_added_to_a_closed_object_needs_no_version_bump() {
    let spec = |closed_extra: &str, open_extra: &str, item_extra: &str| {
        format!(
            r#"
openapi: 3.1.0
info: {{ title: Things, version: 1.0.0 }}
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - {{ name: Idempotency-Key, in: header, required: true, schema: {{ type: string, maxLength: 255 }} }}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              required: [name]
              properties:
                name: {{ type: string }}
                note: {{ type: string }}
                {closed_extra}
                meta:
                  type: object
                  properties:
                    a: {{ type: string }}
                    {open_extra}
                items:
                  type: array
                  items:
                    type: object
                    additionalProperties: false
                    properties:
                      sku: {{ type: string }}
                      {item_extra}
      responses:
        '201': {{ description: Created. }}
"#
        )
    };
    let locked = |text: &str| {
        let lock = idemgen::lock::Lock::from_api(&api(text));
        lock.operations["createThing"].clone()
    };
    let base = locked(&spec("", "", ""));
    // The lock file keeps where members may be added.
    let rendered = idemgen::lock::Lock::from_api(&api(&spec("", "", ""))).render();
    assert!(rendered.contains("closed-optional = ["), "{rendered}");
    let parsed = idemgen::lock::Lock::parse(&rendered).unwrap();
    let recorded = &parsed.operations["createThing"];
    assert_eq!(recorded.closed_optional, base.closed_optional);
    let compatible = |text: &str| {
        let now = locked(text);
        assert_ne!(now.input_shape, recorded.input_shape, "the shape changed");
        idemgen::lock::compatible_addition(&now, recorded)
    };
    // Compatible: optional, no default, in closed objects (the body, an array's items).
    assert!(compatible(&spec("color: { type: string }", "", "")));
    assert!(compatible(&spec("", "", "qty: { type: integer }")));
    assert!(compatible(&spec(
        "color: { type: string }",
        "",
        "qty: { type: integer }"
    )));
    // Not compatible: in an object that ignored unknown properties (an old request may have
    // carried the property, unfingerprinted), required, with a default, or a rename.
    assert!(!compatible(&spec("", "b: { type: string }", "")));
    assert!(!compatible(
        &spec("color: { type: string }", "", "")
            .replace("required: [name]", "required: [name, color]")
    ));
    assert!(!compatible(&spec(
        "color: { type: string, default: red }",
        "",
        ""
    )));
    assert!(!compatible(
        &spec("", "", "").replace("note: { type: string }", "nick: { type: string }")
    ));
    assert!(!compatible(&spec(
        "color: { type: string }",
        "b: { type: string }",
        ""
    )));
    // An object closed in the same change as the member is added: it was open when the lock
    // was written, so a stored request may have carried the member unfingerprinted.
    assert!(!compatible(&spec("", "b: { type: string }", "").replace(
        "                  type: object\n                  properties:\n                    a:",
        "                  type: object\n                  additionalProperties: false\n                  properties:\n                    a:"
    )));
    // `check` with the lock beside the spec: the compatible change passes, the other does not.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("openapi.yaml");
    std::fs::write(dir.path().join("idemgen.lock"), &rendered).unwrap();
    let shape_findings = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let report = idemgen::check(&path, &idemgen::Config::default()).unwrap();
        report
            .findings
            .iter()
            .filter(|f| f.rule == idemgen::RuleId::FingerprintShapeChanged)
            .count()
    };
    assert_eq!(shape_findings(&spec("color: { type: string }", "", "")), 0);
    assert_eq!(shape_findings(&spec("", "b: { type: string }", "")), 1);
    // A lock written before the members were recorded: every change needs a bump.
    let mut old = recorded.clone();
    old.closed_optional = None;
    let now = locked(&spec("color: { type: string }", "", ""));
    assert!(!idemgen::lock::compatible_addition(&now, &old));
}

/// A closed type that also appears in a union (here as an alternative beside a string) never
/// gains members compatibly: a stored value that failed it and matched another alternative may
/// decode as it once it has the member.
#[test]
fn a_type_inside_a_union_gains_no_member_compatibly() {
    let spec = |extra: &str| {
        format!(
            r#"
openapi: 3.1.0
info: {{ title: Things, version: 1.0.0 }}
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - {{ name: Idempotency-Key, in: header, required: true, schema: {{ type: string, maxLength: 255 }} }}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              additionalProperties: false
              properties:
                item: {{ $ref: '#/components/schemas/Item' }}
                either:
                  oneOf:
                    - $ref: '#/components/schemas/Item'
                    - {{ type: object, properties: {{ label: {{ type: string }} }} }}
      responses:
        '201': {{ description: Created. }}
components:
  schemas:
    Item:
      type: object
      additionalProperties: false
      properties:
        sku: {{ type: string }}
        {extra}
"#
        )
    };
    let locked = |text: &str| Lock::from_api(&api(text)).operations["createThing"].clone();
    let then = locked(&spec(""));
    let now = locked(&spec("color: { type: string }"));
    assert_ne!(now.input_shape, then.input_shape);
    assert!(!idemgen::lock::compatible_addition(&now, &then));
    // The body itself is not in a union: a member added there still is compatible.
    let body = locked(&spec("").replace(
        "                item: { $ref",
        "                note: { type: string }\n                item: { $ref",
    ));
    assert_ne!(body.input_shape, then.input_shape);
    assert!(idemgen::lock::compatible_addition(&body, &then));
}

/// A multipart body's shape is its parts with their types, a file part a kind of its own: the
/// lock changes when a part changes type, is added or becomes required, or the body stops being
/// multipart, and not for a bound or a description.
#[test]
fn a_multipart_body_s_lock_records_its_parts_and_files() {
    const MULTIPART: &str = r#"
openapi: 3.1.0
info: { title: Things, version: 1.0.0 }
paths:
  /things:
    post:
      operationId: createThing
      x-idempotent: true
      parameters:
        - { name: Idempotency-Key, in: header, required: true, schema: { type: string, maxLength: 255 } }
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              required: [file]
              properties:
                file: { type: string, format: binary }
                title: { type: string, description: The title. }
      responses:
        '201': { description: Created. }
"#;
    let base = lock_shape(&api(MULTIPART));
    let shape = |edits: &[(&str, &str)]| {
        let mut text = MULTIPART.to_string();
        for (from, to) in edits {
            assert!(text.contains(from), "`{from}` not in the spec");
            text = text.replace(from, to);
        }
        let api = api(&text);
        let body = &api.operations[0].body.as_ref().expect("a body").kind;
        (lock_shape(&api), matches!(body, BodyKind::Multipart { .. }))
    };
    for (what, edits, changes) in [
        (
            "a file part becomes text",
            &[(
                "file: { type: string, format: binary }",
                "file: { type: string }",
            )][..],
            true,
        ),
        (
            "a file part becomes a list of files",
            &[(
                "file: { type: string, format: binary }",
                "file: { type: array, items: { type: string, format: binary } }",
            )],
            true,
        ),
        (
            "a part becomes required",
            &[("required: [file]", "required: [file, title]")],
            true,
        ),
        (
            "a part is added",
            &[(
                "title: { type: string,",
                "note: { type: string }\n                title: { type: string,",
            )],
            true,
        ),
        (
            "the same schema as JSON",
            &[("multipart/form-data:", "application/json:")],
            true,
        ),
        (
            "a bound and a description",
            &[(
                "title: { type: string, description: The title. }",
                "title: { type: string, maxLength: 9, description: Another. }",
            )],
            false,
        ),
        (
            "3.1's contentMediaType for 3.0's format: binary",
            &[(
                "file: { type: string, format: binary }",
                "file: { type: string, contentMediaType: application/pdf }",
            )],
            false,
        ),
    ] {
        let (lock, _) = shape(edits);
        assert_eq!(lock != base, changes, "{what}");
    }
    assert!(shape(&[]).1, "the base is typed as multipart");
}
