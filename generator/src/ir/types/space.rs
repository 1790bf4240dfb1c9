//! `TypeSpace`: schemas converted into named `TypeDef`s from a work queue, components first (the conversion and composition of `allOf`, `oneOf` and `anyOf`).

use super::*;

/// The collection of emitted types, and the converter from schemas.
#[derive(Debug)]
pub struct TypeSpace<'s> {
    spec: &'s LoadedSpec,
    defs: BTreeMap<String, TypeDef>,
    by_target: HashMap<RefTarget, String>,
    /// Inline schemas (and components) by their structure, descriptions left out: a schema equal
    /// to one already seen is that type again, not a copy of it.
    /// The value: the type, and the name of its definition when it has one of its own.
    by_shape: HashMap<String, (TypeRef, Option<String>)>,
    pending: VecDeque<(String, NodeRef<'s>)>,
    names: Namespace,
}

/// Nesting of inline schemas deeper than this becomes `serde_json::Value`.
pub(super) const MAX_INLINE_DEPTH: usize = 64;

impl<'s> TypeSpace<'s> {
    /// The spec the types come from.
    pub fn spec(&self) -> &'s LoadedSpec {
        self.spec
    }

    /// An empty type space for `spec`, with every `components/schemas` name reserved in document
    /// order so that component schemas keep their names.
    pub fn new(spec: &'s LoadedSpec) -> TypeSpace<'s> {
        let mut space = TypeSpace {
            spec,
            defs: BTreeMap::new(),
            by_target: HashMap::new(),
            by_shape: HashMap::new(),
            pending: VecDeque::new(),
            names: Namespace::default(),
        };
        let root = spec.root();
        if let Some(schemas) = root
            .node
            .get("components")
            .and_then(|c| c.get("schemas"))
            .and_then(Node::as_map)
        {
            for (key, _) in schemas.entries() {
                let reference = format!(
                    "#/components/schemas/{}",
                    crate::loader::pointer::escape(&key.text)
                );
                let Ok(target) = spec.ref_target(root.file, &reference) else {
                    continue;
                };
                let name = space.register(target.clone(), &key.text);
                let node = spec
                    .document(target.file)
                    .and_then(|doc| crate::loader::pointer::lookup(doc, &target.pointer));
                if let Some(node) = node
                    && node.ref_target().is_none()
                    && matches!(shape_of(node), Shape::Defined)
                    && !is_nullable(node)
                {
                    // An inline schema written out exactly like a component is that component.
                    let key = space.shape_key(NodeRef {
                        file: target.file,
                        node,
                    });
                    space
                        .by_shape
                        .entry(key)
                        .or_insert((TypeRef::Named(name.clone()), Some(name)));
                }
            }
        }
        // Components first, in document order: the schemas inside them are named from them,
        // whatever order operations come in.
        space.drain();
        space
    }

    /// Converts every registered component schema (used or not), then returns the types sorted
    /// by name, with recursive fields boxed.
    pub fn finish(mut self) -> Vec<TypeDef> {
        self.drain();
        apply_defaults(&mut self.defs);
        box_recursion(&mut self.defs);
        let mut defs: Vec<TypeDef> = self.defs.into_values().collect();
        mark_validated(&mut defs);
        defs
    }

    /// The type of `schema` at a use site; inline types are named `hint`.
    pub fn type_of(&mut self, schema: NodeRef<'s>, hint: &str) -> TypeRef {
        let ty = self.convert(schema, hint, 0);
        self.drain();
        ty
    }

    /// The struct of a `multipart/form-data` body (`parts` as [`crate::spec::multipart::parts`]
    /// read them), named `hint`: its text and JSON parts typed as properties are, its file parts
    /// [`TypeRef::File`]. Its own definition even when the schema is a component's `$ref`, so
    /// the component keeps its JSON meaning. Returns the type and each part's field name.
    pub fn multipart(
        &mut self,
        schema: NodeRef<'s>,
        parts: &[crate::spec::multipart::PartSpec<'s>],
        hint: &str,
    ) -> (TypeRef, Vec<String>) {
        use crate::spec::multipart::PartKind;
        let at = self.spec.deref(schema);
        let name = self.names.claim(&type_name(hint));
        let required = required_of(at.node);
        let mut ns = Namespace::default();
        let mut fields = Vec::new();
        for part in parts {
            let wire = part.name;
            let property = self.spec.deref(part.schema);
            let ty = match part.kind {
                PartKind::File { many: false } => TypeRef::File,
                PartKind::File { many: true } => TypeRef::Vec(Box::new(TypeRef::File)),
                _ => self.convert(part.schema, &format!("{name}{}", type_name(wire)), 1),
            };
            let required = required.contains(wire);
            let checks = match part.kind {
                PartKind::File { many: true } => Checks {
                    own: Checks::of(property.node).own,
                    items: property.node.get("items").map(|items| {
                        Box::new(Checks::of(
                            self.spec
                                .deref(NodeRef {
                                    file: property.file,
                                    node: items,
                                })
                                .node,
                        ))
                    }),
                    values: None,
                },
                PartKind::File { many: false } => Checks::of(property.node),
                _ => Checks::of(part.schema.node),
            };
            // One JSON part (`contentType: application/json`) spells `[]`: absent is absent.
            let absent_is_empty = required
                && matches!(ty, TypeRef::Vec(_))
                && !matches!(part.kind, PartKind::Json { declared: true });
            fields.push(Field {
                name: ns.claim(&snake_name(wire)),
                wire: wire.to_string(),
                doc: description(property.node),
                ty,
                required,
                checks,
                default_json: if required || matches!(part.kind, PartKind::File { .. }) {
                    None
                } else {
                    self.default_of(part.schema)
                },
                default: None,
                implied_tag: false,
                absent_is_empty,
            });
        }
        let deny_unknown =
            at.node.get("additionalProperties").and_then(Node::as_bool) == Some(false);
        let names = fields.iter().map(|f| f.name.clone()).collect();
        self.defs.insert(
            name.clone(),
            TypeDef {
                name: name.clone(),
                doc: description(at.node),
                kind: TypeKind::Struct {
                    fields,
                    deny_unknown,
                    extra: None,
                    extra_checks: Box::default(),
                    requirements: None,
                },
                checks: Checks::default(),
                validated: false,
                usage: Usage::default(),
            },
        );
        self.drain();
        (TypeRef::Named(name), names)
    }

    /// Whether values of `ty` are written as one string (parameters, headers): primitives,
    /// string enums, and aliases of those.
    pub fn is_scalar(&self, ty: &TypeRef) -> bool {
        let mut ty = ty;
        for _ in 0..16 {
            match ty {
                TypeRef::String
                | TypeRef::Bool
                | TypeRef::I32
                | TypeRef::I64
                | TypeRef::F64
                | TypeRef::Uuid
                | TypeRef::DateTime
                | TypeRef::Date => return true,
                TypeRef::Named(name) => match self.defs.get(name).map(|d| &d.kind) {
                    Some(TypeKind::StringEnum { .. }) => return true,
                    Some(TypeKind::Alias(target)) => ty = target,
                    _ => return false,
                },
                _ => return false,
            }
        }
        false
    }

    /// The `default` of the schema at a use site: its own, else (for a `$ref`) its target's.
    pub fn default_of(&self, at: NodeRef<'s>) -> Option<serde_json::Value> {
        if let Some(value) = at.node.get("default") {
            return Some(json_of(value));
        }
        at.node.ref_target()?;
        self.spec.deref(at).node.get("default").map(json_of)
    }

    /// Reserves a type name for something that is not a schema (kept out of `types`).
    pub fn reserve(&mut self, name: &str) -> String {
        self.names.claim(name)
    }

    fn register(&mut self, target: RefTarget, raw_name: &str) -> String {
        if let Some(name) = self.by_target.get(&target) {
            return name.clone();
        }
        let name = self.names.claim(&type_name(raw_name));
        self.by_target.insert(target.clone(), name.clone());
        if let Some(node) = self
            .spec
            .document(target.file)
            .and_then(|doc| crate::loader::pointer::lookup(doc, &target.pointer))
        {
            self.pending.push_back((
                name.clone(),
                NodeRef {
                    file: target.file,
                    node,
                },
            ));
        }
        name
    }

    fn drain(&mut self) {
        while let Some((name, node)) = self.pending.pop_front() {
            if self.defs.contains_key(&name) {
                continue;
            }
            let def = self.define(&name, node, 0);
            self.defs.insert(name, def);
        }
    }

    /// Follows a `$ref` to the name of its target, registering it when new.
    fn named(&mut self, at: NodeRef<'s>, reference: &str) -> TypeRef {
        match self.spec.ref_target(at.file, reference) {
            Ok(target) => {
                let raw = self
                    .spec
                    .target_name(&target)
                    .unwrap_or_else(|| "Schema".to_string());
                TypeRef::Named(self.register(target, &raw))
            }
            Err(_) => TypeRef::Json,
        }
    }

    /// The type of a schema at a use site.
    fn convert(&mut self, at: NodeRef<'s>, hint: &str, depth: usize) -> TypeRef {
        if depth > MAX_INLINE_DEPTH {
            return TypeRef::Json;
        }
        if let Some(reference) = at.node.ref_target() {
            return self.named(at, reference);
        }
        if at.node.as_map().is_none() {
            // `true`/`{}` schemas accept anything; `false` accepts nothing we could type.
            return TypeRef::Json;
        }
        let nullable = is_nullable(at.node);
        let ty = match shape_of(at.node) {
            Shape::Primitive(ty) => ty,
            Shape::Array(items) => {
                let item = match items {
                    Some(items) => self.convert(
                        NodeRef {
                            file: at.file,
                            node: items,
                        },
                        &format!("{hint}Item"),
                        depth + 1,
                    ),
                    None => TypeRef::Json,
                };
                TypeRef::Vec(Box::new(item))
            }
            Shape::Map(values) => {
                let value = match values {
                    Some(values) => self.convert(
                        NodeRef {
                            file: at.file,
                            node: values,
                        },
                        &format!("{hint}Value"),
                        depth + 1,
                    ),
                    None => TypeRef::Json,
                };
                TypeRef::Map(Box::new(value))
            }
            Shape::Nullable(inner) => self
                .convert(
                    NodeRef {
                        file: at.file,
                        node: inner,
                    },
                    hint,
                    depth + 1,
                )
                .nullable(),
            Shape::SingleAllOf(inner) => self.convert(
                NodeRef {
                    file: at.file,
                    node: inner,
                },
                hint,
                depth + 1,
            ),
            Shape::Json => TypeRef::Json,
            Shape::Defined => {
                let key = self.shape_key(at);
                let hint = match at.node.get("title").and_then(Node::as_str) {
                    Some(title) if !type_name(title).is_empty() => type_name(title),
                    _ => type_name(hint),
                };
                if let Some(seen) = self.by_shape.get(&key).cloned() {
                    // The same structure seen before (a component or an earlier inline schema):
                    // that type, not a copy of it. The name this copy would have had stays
                    // usable, as an alias, so sharing (or a new operation taking the first
                    // place) never takes a name away.
                    let (seen, canonical) = seen;
                    if let Some(canonical) = canonical
                        && canonical != hint
                        && !self.names.contains(&hint)
                    {
                        let alias = self.names.claim(&hint);
                        self.defs.insert(
                            alias.clone(),
                            TypeDef {
                                name: alias,
                                doc: Some(format!("The same schema as [`{canonical}`].")),
                                kind: TypeKind::Alias(TypeRef::Named(canonical.clone())),
                                checks: Checks::default(),
                                validated: false,
                                usage: Usage::default(),
                            },
                        );
                    }
                    return seen;
                }
                let name = self.names.claim(&hint);
                let def = self.define(&name, at, depth + 1);
                let (ty, named) = if let TypeKind::Alias(target) = &def.kind {
                    // An inline schema that is just another type needs no name.
                    let target = target.clone();
                    (if nullable { target.nullable() } else { target }, None)
                } else {
                    self.defs.insert(name.clone(), def);
                    let ty = TypeRef::Named(name.clone());
                    (if nullable { ty.nullable() } else { ty }, Some(name))
                };
                self.by_shape.insert(key, (ty.clone(), named));
                return ty;
            }
        };
        if nullable { ty.nullable() } else { ty }
    }

    /// The structure of a schema as one string: every keyword that shapes the generated type or
    /// its checks, in source order, with `$ref`s replaced by the schema they point to and
    /// annotations (descriptions, titles, examples, extensions, …) left out. Two schemas with
    /// the same key generate the same type.
    fn shape_key(&self, at: NodeRef<'s>) -> String {
        let mut out = String::new();
        self.write_shape(at.file, at.node, &mut out);
        out
    }

    fn write_shape(&self, file: FileId, node: &Node, out: &mut String) {
        use std::fmt::Write as _;
        match &node.value {
            Value::Seq(items) => {
                out.push('[');
                for item in items {
                    self.write_shape(file, item, out);
                    out.push(',');
                }
                out.push(']');
            }
            Value::Map(map) => {
                out.push('{');
                for (key, value) in map.entries() {
                    let k = key.text.as_str();
                    if is_annotation(k) {
                        continue;
                    }
                    if k == "$ref"
                        && let Some(reference) = value.as_str()
                    {
                        match self.spec.ref_target(file, reference) {
                            Ok(target) => {
                                let _ = write!(out, "$ref={}#{:?},", target.file.0, target.pointer);
                            }
                            Err(_) => {
                                let _ = write!(out, "$ref?{reference:?},");
                            }
                        }
                        continue;
                    }
                    if matches!(
                        k,
                        "properties" | "patternProperties" | "$defs" | "definitions"
                    ) && let Some(properties) = value.as_map()
                    {
                        // Names are data here, not keywords: none is left out.
                        let _ = write!(out, "{k}={{");
                        for (name, schema) in properties.entries() {
                            let _ = write!(out, "{:?}:", name.text);
                            self.write_shape(file, schema, out);
                            out.push(',');
                        }
                        out.push_str("},");
                        continue;
                    }
                    let _ = write!(out, "{k:?}=");
                    if matches!(k, "enum" | "const" | "default") {
                        // Values, not schemas: written whole.
                        write_value(value, out);
                    } else {
                        self.write_shape(file, value, out);
                    }
                    out.push(',');
                }
                out.push('}');
            }
            _ => write_value(node, out),
        }
    }

    /// The definition of a named schema.
    fn define(&mut self, name: &str, at: NodeRef<'s>, depth: usize) -> TypeDef {
        let doc = description(at.node);
        let kind = self.kind_of(name, at, depth);
        let checks = match kind {
            TypeKind::Alias(_) => Checks::of(at.node),
            _ => Checks::default(),
        };
        TypeDef {
            name: name.to_string(),
            doc,
            kind,
            checks,
            validated: false,
            usage: Usage::default(),
        }
    }

    fn kind_of(&mut self, name: &str, at: NodeRef<'s>, depth: usize) -> TypeKind {
        if depth > MAX_INLINE_DEPTH {
            return TypeKind::Alias(TypeRef::Json);
        }
        if let Some(reference) = at.node.ref_target() {
            return TypeKind::Alias(self.named(at, reference));
        }
        let nullable = is_nullable(at.node);
        let wrap = |t: TypeRef| if nullable { t.nullable() } else { t };
        if let Some(variants) = string_enum(at.node) {
            let mut ns = Namespace::default();
            let variants = variants
                .into_iter()
                .map(|wire| EnumVariant {
                    name: ns.claim(&type_name(&wire)),
                    wire,
                })
                .collect();
            let kind = TypeKind::StringEnum { variants };
            if nullable {
                // A nullable enum: define the enum under a derived name, alias the nullable.
                let inner = self.names.claim(&format!("{name}Value"));
                self.defs.insert(
                    inner.clone(),
                    TypeDef {
                        name: inner.clone(),
                        doc: description(at.node),
                        kind,
                        checks: Checks::default(),
                        validated: false,
                        usage: Usage::default(),
                    },
                );
                return TypeKind::Alias(TypeRef::Named(inner).nullable());
            }
            return kind;
        }
        match shape_of(at.node) {
            Shape::Defined => {}
            _ => {
                let name_hint = name.to_string();
                // Primitive, array, map: an alias to the use-site type.
                let mut stripped = self.convert(at, &format!("{name_hint}Inner"), depth + 1);
                if nullable {
                    stripped = stripped.nullable();
                }
                return TypeKind::Alias(stripped);
            }
        }
        if requirement_alternatives(at.node).is_some() {
            return self.object(name, at, depth);
        }
        if let Some(alternatives) = union_members(at.node) {
            let non_null: Vec<&Node> = alternatives.into_iter().filter(|n| !is_null(n)).collect();
            return self.union(name, at, non_null, depth);
        }
        if let Some(members) = at.node.get("allOf").and_then(Node::as_seq) {
            return match self.merge_all_of(name, at, members, depth) {
                Some(kind) => kind,
                None => TypeKind::Alias(wrap(TypeRef::Json)),
            };
        }
        self.object(name, at, depth)
    }

    fn union(
        &mut self,
        name: &str,
        at: NodeRef<'s>,
        alternatives: Vec<&'s Node>,
        depth: usize,
    ) -> TypeKind {
        let discriminator = at
            .node
            .get("discriminator")
            .and_then(|d| d.get("propertyName"))
            .and_then(Node::as_str)
            .map(str::to_string);
        let mapping: Vec<(String, String)> = at
            .node
            .get("discriminator")
            .and_then(|d| d.get("mapping"))
            .and_then(Node::as_map)
            .map(|m| {
                m.entries()
                    .iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.text.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let mut ns = Namespace::default();
        let mut variants = Vec::new();
        for (i, alternative) in alternatives.into_iter().enumerate() {
            let node = NodeRef {
                file: at.file,
                node: alternative,
            };
            let reference = alternative.ref_target();
            let label = match reference {
                Some(r) => self
                    .spec
                    .ref_target(at.file, r)
                    .ok()
                    .and_then(|t| self.spec.target_name(&t))
                    .unwrap_or_else(|| format!("Variant{i}")),
                None => format!("Variant{i}"),
            };
            let ty = self.convert(node, &format!("{name}{}", type_name(&label)), depth + 1);
            let variant_name = match (&ty, reference) {
                (_, Some(_)) => type_name(&label),
                // `PetCat` inside `Pet` is the variant `Cat`; a remainder that cannot start a
                // name (`Pet2`, a titled alternative sharing its union's title) keeps the whole.
                (TypeRef::Named(n), None) => match n.strip_prefix(name) {
                    Some(rest) if rest.starts_with(|c: char| c.is_ascii_uppercase()) => {
                        rest.to_string()
                    }
                    _ => n.clone(),
                },
                (other, None) => primitive_label(other).unwrap_or(format!("Variant{i}")),
            };
            let variant_name = if variant_name.is_empty() {
                format!("Variant{i}")
            } else {
                variant_name
            };
            let mut tags = Vec::new();
            if discriminator.is_some()
                && let Some(r) = reference
            {
                let target = self.spec.ref_target(at.file, r).ok();
                for (value, mapped) in &mapping {
                    let same = mapped == r
                        || (target.is_some()
                            && self.spec.ref_target(at.file, mapped).ok() == target)
                        || mapped == &label;
                    if same {
                        tags.push(value.clone());
                    }
                }
                if tags.is_empty() {
                    tags.push(label.clone());
                }
            }
            variants.push(UnionVariant {
                name: ns.claim(&variant_name),
                ty,
                tags,
                checks: Checks::of(alternative),
            });
        }
        // A discriminator is only usable when every alternative is a named schema with a tag.
        let discriminator = discriminator.filter(|_| variants.iter().all(|v| !v.tags.is_empty()));
        TypeKind::Union {
            discriminator,
            variants,
            tagged: false,
            decode_checked: false,
        }
    }

    /// Merges `allOf` members that are objects into one struct; `None` when a member is not.
    fn merge_all_of(
        &mut self,
        name: &str,
        at: NodeRef<'s>,
        members: &'s [Node],
        depth: usize,
    ) -> Option<TypeKind> {
        let objects = all_of_objects(self.spec, at, members)?;
        let mut fields: Vec<Field> = Vec::new();
        let mut required: BTreeSet<String> = BTreeSet::new();
        let mut deny_unknown = false;
        let mut ns = Namespace::default();
        for object in &objects {
            required.extend(required_of(object.node));
            if object
                .node
                .get("additionalProperties")
                .and_then(Node::as_bool)
                == Some(false)
                && objects.len() == 1
            {
                deny_unknown = true;
            }
            for (wire, schema) in properties_of(object.node) {
                if fields.iter().any(|f| f.wire == *wire) {
                    continue;
                }
                let node = NodeRef {
                    file: object.file,
                    node: schema,
                };
                let ty = self.convert(node, &format!("{name}{}", type_name(wire)), depth + 1);
                fields.push(Field {
                    name: ns.claim(&snake_name(wire)),
                    wire: wire.to_string(),
                    doc: description(schema),
                    ty,
                    required: false,
                    checks: Checks::of(schema),
                    default_json: self.default_of(node),
                    default: None,
                    implied_tag: false,
                    absent_is_empty: false,
                });
            }
        }
        for field in &mut fields {
            field.required = required.contains(&field.wire);
            if field.required {
                field.default_json = None;
            }
        }
        Some(TypeKind::Struct {
            fields,
            deny_unknown,
            extra: None,
            extra_checks: Box::default(),
            requirements: None,
        })
    }

    fn object(&mut self, name: &str, at: NodeRef<'s>, depth: usize) -> TypeKind {
        let required = required_of(at.node);
        let mut ns = Namespace::default();
        let mut fields = Vec::new();
        for (wire, schema) in properties_of(at.node) {
            let node = NodeRef {
                file: at.file,
                node: schema,
            };
            let ty = self.convert(node, &format!("{name}{}", type_name(wire)), depth + 1);
            let required = required.contains(wire.as_str());
            fields.push(Field {
                name: ns.claim(&snake_name(wire)),
                wire: wire.to_string(),
                doc: description(schema),
                ty,
                required,
                checks: Checks::of(schema),
                default_json: if required {
                    None
                } else {
                    self.default_of(node)
                },
                default: None,
                implied_tag: false,
                absent_is_empty: false,
            });
        }
        let additional = at.node.get("additionalProperties");
        let deny_unknown = additional.and_then(Node::as_bool) == Some(false);
        let (extra, extra_checks) = match additional {
            Some(node) if node.as_map().is_some_and(|m| !m.is_empty()) => {
                let checks = Checks::of(node);
                let node = NodeRef {
                    file: at.file,
                    node,
                };
                (
                    Some(self.convert(node, &format!("{name}Value"), depth + 1)),
                    checks,
                )
            }
            _ => (None, Checks::default()),
        };
        TypeKind::Struct {
            fields,
            deny_unknown,
            extra,
            extra_checks: Box::new(extra_checks),
            requirements: requirement_alternatives(at.node).map(Box::new),
        }
    }
}
