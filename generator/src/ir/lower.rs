//! Lowering: `Api::from_spec` walks a checked spec once into the IR's structs (operation names, parameters, bodies, responses, keys, semantic inputs).

use super::*;

impl Api {
    /// The API as the generated docs name it: `info.title` and "API", once (`GitHub v3 REST
    /// API` stays as it is).
    pub fn described(&self) -> String {
        let title = self.title.trim_end();
        let last = title
            .rsplit(|c: char| !c.is_alphanumeric())
            .next()
            .unwrap_or("");
        if last.eq_ignore_ascii_case("api") {
            title.to_string()
        } else {
            format!("{title} API")
        }
    }

    /// Builds the IR of a spec that passed `check`. `key_header` is the configured idempotency
    /// key header name.
    pub fn from_spec(spec: &LoadedSpec, key_header: &str) -> Api {
        let root = spec.root();
        let title = root
            .node
            .get("info")
            .and_then(|i| i.get("title"))
            .and_then(Node::as_str)
            .unwrap_or("Api")
            .to_string();
        let mut trait_name = type_name(&title);
        if !trait_name.ends_with("Api") {
            trait_name.push_str("Api");
        }
        let base = trait_name.strip_suffix("Api").filter(|b| !b.is_empty());
        let client_name = format!("{}Client", base.unwrap_or(&trait_name));
        let service_name = format!("{}Service", base.unwrap_or(&trait_name));
        let mut space = TypeSpace::new(spec);
        let mut op_names = Namespace::with_reserved(&[
            &trait_name,
            &client_name,
            &service_name,
            "Api",
            "Server",
            "Reply",
            "CallOptions",
            "Error",
            "ProblemDetails",
            "RetryPolicy",
        ]);
        let mut methods = Namespace::with_reserved(&["router"]);
        let mut operations = Vec::new();
        let unroutable: Vec<&str> = spec::paths::unroutable(spec)
            .iter()
            .map(|u| u.key.text.as_str())
            .collect();
        for op in spec::operations(spec) {
            let mut ir = operation_ir(
                spec,
                &op,
                key_header,
                &mut space,
                &mut op_names,
                &mut methods,
            );
            ir.routed = !unroutable.contains(&op.path);
            operations.push(ir);
        }
        // `x-idempotency-tombstones` names an operation by id; link it by its generated name.
        let names: Vec<(String, String, bool)> = operations
            .iter()
            .map(|o| (o.id.clone(), o.name.clone(), o.is_idempotent()))
            .collect();
        for (op, node) in operations.iter_mut().zip(spec::operations(spec)) {
            for (target, _) in node.tombstones_targets() {
                let link = names
                    .iter()
                    .find(|(id, _, idempotent)| id == target && *idempotent)
                    .map(|(id, name, _)| TombstoneLink {
                        operation_id: id.clone(),
                        name: name.clone(),
                    });
                if let Some(link) = link
                    && !op.tombstones.contains(&link)
                {
                    op.tombstones.push(link);
                }
            }
        }
        let mut types = space.finish();
        apply_param_defaults(&mut operations, &types);
        types::imply_tags(&mut types, &operation_uses(&operations));
        mark_usage(&operations, &mut types);
        Api {
            title,
            trait_name,
            client_name,
            service_name,
            operations,
            types,
            key_header: key_header.to_ascii_lowercase(),
        }
    }
}

/// Every named type an operation uses directly: parameters, bodies, response bodies and headers.
pub(super) fn operation_uses(operations: &[OperationIr]) -> std::collections::BTreeSet<String> {
    let mut out = Vec::new();
    for op in operations {
        for p in &op.params {
            types::named_in(&p.ty, &mut out);
        }
        if let Some(ty) = op.body.as_ref().and_then(|b| b.kind.typed()) {
            types::named_in(ty, &mut out);
        }
        for r in &op.responses {
            if let Some(BodyKind::Json(ty) | BodyKind::Form(ty)) = r.body.as_ref().map(|b| &b.kind)
            {
                types::named_in(ty, &mut out);
            }
            for h in &r.headers {
                types::named_in(&h.ty, &mut out);
            }
        }
    }
    out.into_iter().collect()
}

/// Sets [`ParamIr::default`] on every optional scalar parameter whose `default` is a value of
/// its type, in the request and in the semantic input alike.
pub(super) fn apply_param_defaults(operations: &mut [OperationIr], types: &[TypeDef]) {
    let defs: std::collections::HashMap<&str, &TypeDef> =
        types.iter().map(|d| (d.name.as_str(), d)).collect();
    let lookup = |name: &str| defs.get(name).copied();
    let resolve = |p: &mut ParamIr| {
        if p.required || matches!(p.ty, TypeRef::Vec(_)) {
            return;
        }
        if let Some(value) = &p.default_json {
            p.default = types::resolve_default(value, &p.ty, &lookup);
        }
    };
    for op in operations {
        op.params.iter_mut().for_each(resolve);
        if let Some(idempotency) = &mut op.idempotency {
            idempotency.input.path.iter_mut().for_each(resolve);
            idempotency.input.query.iter_mut().for_each(resolve);
        }
    }
}

/// Sets every type's [`types::Usage`] from where the operations use it: parameters and request
/// bodies are deserialised, responses and semantic inputs serialised; the types they hold inherit
/// the direction. Types no operation reaches get both.
pub(super) fn mark_usage(operations: &[OperationIr], types: &mut [TypeDef]) {
    let index: std::collections::HashMap<String, usize> = types
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.clone(), i))
        .collect();
    let mut requests = Vec::new();
    let mut responses = Vec::new();
    for op in operations {
        for p in &op.params {
            types::named_in(&p.ty, &mut requests);
        }
        if let Some(ty) = op.body.as_ref().and_then(|b| b.kind.typed()) {
            types::named_in(ty, &mut requests);
            if op.is_idempotent() {
                types::named_in(ty, &mut responses);
            }
        }
        if op.is_idempotent() {
            for p in op
                .params
                .iter()
                .filter(|p| p.location != ParamLocation::Header)
            {
                types::named_in(&p.ty, &mut responses);
            }
        }
        for r in &op.responses {
            if let Some(BodyKind::Json(ty)) = r.body.as_ref().map(|b| &b.kind) {
                types::named_in(ty, &mut responses);
            }
        }
    }
    let reach = |roots: Vec<String>, types: &[TypeDef]| {
        let mut seen = vec![false; types.len()];
        let mut stack = roots;
        while let Some(name) = stack.pop() {
            let Some(&i) = index.get(&name) else { continue };
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            stack.extend(types[i].holds());
        }
        seen
    };
    let de = reach(requests, types);
    let ser = reach(responses, types);
    // A type no operation uses is for the user, both ways, and so is everything it holds.
    let unused: Vec<String> = types
        .iter()
        .enumerate()
        .filter(|(i, _)| !de[*i] && !ser[*i])
        .map(|(_, d)| d.name.clone())
        .collect();
    let both = reach(unused, types);
    for (i, def) in types.iter_mut().enumerate() {
        def.usage = types::Usage {
            serialize: ser[i] || both[i],
            deserialize: de[i] || both[i],
        };
    }
}

pub(super) fn operation_ir<'s>(
    spec: &'s LoadedSpec,
    op: &Operation<'s>,
    key_header: &str,
    space: &mut TypeSpace<'s>,
    op_names: &mut Namespace,
    methods: &mut Namespace,
) -> OperationIr {
    let id = op
        .operation_id()
        .and_then(Node::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| op.label());
    let base = op
        .operation_id()
        .and_then(Node::as_str)
        .map(type_name)
        .unwrap_or_else(|| type_name(&format!("{} {}", op.method, op.path)));
    let (name, items) = claim_operation_name(op_names, &base);
    let method = methods.claim(&snake_name(&name));
    let authorize_method = methods.claim(&format!("authorize_{method}"));
    let doc = op
        .node
        .node
        .get("summary")
        .or_else(|| op.node.node.get("description"))
        .and_then(Node::as_str)
        .map(|s| s.trim().to_string());

    let mut fields = Namespace::with_reserved(&["body"]);
    let mut params = Vec::new();
    let mut fingerprinted = Vec::new();
    let mut key = None;
    for p in op.parameters(spec) {
        let (wire, location) = match param_read(&p, key_header) {
            ParamRead::Key(wire) => {
                key = Some(key_ir(spec, &p, wire));
                continue;
            }
            ParamRead::Value(wire, location) => (wire, location),
            ParamRead::Unread => continue,
        };
        if location == ParamLocation::Header && p.is_fingerprinted_header() {
            fingerprinted.push(params.len());
        }
        let required = location == ParamLocation::Path
            || p.node.node.get("required").and_then(Node::as_bool) == Some(true);
        let (ty, checks, default_json) = match raw_param_schema(spec, &p) {
            Some(schema) => {
                let ty = space.type_of(schema, &format!("{name}{}", type_name(wire)));
                let default_json = (!required).then(|| space.default_of(schema)).flatten();
                (
                    param_type(space, ty, location),
                    Checks::of(schema.node),
                    default_json,
                )
            }
            None => (TypeRef::String, Checks::default(), None),
        };
        params.push(ParamIr {
            field: fields.claim(&snake_name(wire)),
            wire: wire.to_string(),
            location,
            required,
            ty,
            checks,
            doc: types::description(p.node.node),
            default_json,
            default: None,
        });
    }

    let body = op.node.node.get("requestBody").and_then(|rb| {
        let rb = spec.deref(NodeRef {
            file: op.node.file,
            node: rb,
        });
        let required = rb.node.get("required").and_then(Node::as_bool) == Some(true);
        let (media_type, kind, schema) = body_of(
            rb,
            space,
            &format!("{name}RequestBody"),
            "application/json",
            true,
        )?;
        let checks = match (&kind, schema) {
            (BodyKind::Json(_) | BodyKind::Form(_), Some(schema)) => Checks::of(schema),
            // The struct's fields carry the parts' checks.
            _ => Checks::default(),
        };
        Some(BodyIr {
            required,
            media_type,
            kind,
            checks,
        })
    });

    let mut variants = Namespace::default();
    let mut responses = Vec::new();
    for r in op.responses(spec) {
        let Some(status) = StatusKey::parse(&r.status.text) else {
            continue;
        };
        let variant = variants.claim(&match status {
            StatusKey::Code(c) => format!("Status{c}"),
            StatusKey::Range(c) => format!("Status{c}xx"),
            StatusKey::Default => "Default".to_string(),
        });
        let hint = match status {
            StatusKey::Code(c) => format!("{name}{c}Response"),
            StatusKey::Range(c) => format!("{name}{c}xxResponse"),
            StatusKey::Default => format!("{name}DefaultResponse"),
        };
        let body = body_of(r.node, space, &hint, "application/json", false)
            .map(|(media_type, kind, _)| ResponseBody { media_type, kind });
        let mut header_fields = Namespace::with_reserved(&["body", "status"]);
        let mut headers = Vec::new();
        if let Some(map) = r.node.node.get("headers").and_then(Node::as_map) {
            for (key, header) in map.entries() {
                if key.text.eq_ignore_ascii_case("content-type") {
                    continue;
                }
                let header = spec.deref(NodeRef {
                    file: r.node.file,
                    node: header,
                });
                let ty = header
                    .node
                    .get("schema")
                    .map(|s| {
                        let schema = NodeRef {
                            file: header.file,
                            node: s,
                        };
                        let ty = space.type_of(schema, &format!("{hint}{}", type_name(&key.text)));
                        param_type(space, ty, ParamLocation::Header)
                    })
                    .unwrap_or(TypeRef::String);
                headers.push(HeaderIr {
                    field: header_fields.claim(&snake_name(&key.text)),
                    wire: key.text.clone(),
                    required: header.node.get("required").and_then(Node::as_bool) == Some(true),
                    ty,
                    doc: types::description(header.node),
                });
            }
        }
        responses.push(ResponseIr {
            status,
            variant,
            doc: types::description(r.node.node),
            body,
            headers,
        });
    }

    let idempotency = op.is_idempotent().then(|| {
        let key = key.unwrap_or_else(|| KeyIr {
            header: key_header.to_string(),
            max_length: idemgen_protocol::MAX_KEY_LEN as u64,
            min_length: 1,
            declared_required: false,
        });
        let header = fingerprinted
            .iter()
            .map(|&i| ParamIr {
                wire: params[i].wire.to_ascii_lowercase(),
                ..params[i].clone()
            })
            .collect();
        idempotency_ir(op, key, &params, header, body.as_ref(), &responses)
    });
    OperationIr {
        id,
        name,
        items,
        method,
        authorize_method,
        http_method: op.method.to_string(),
        path: op.path.to_string(),
        routed: true,
        doc,
        safe: op.is_safe(),
        idempotency,
        tombstones: Vec::new(),
        params,
        body,
        responses,
        security: SecurityIr::of(spec, op),
    }
}

/// `base` (or `base2`, …) such that no item derived from it collides with another operation's
/// or a reserved name, and the names of its items.
pub(super) fn claim_operation_name(names: &mut Namespace, base: &str) -> (String, ItemNames) {
    let free = |names: &Namespace, candidate: &str| {
        OPERATION_ITEMS
            .iter()
            .all(|suffix| !names.contains(&format!("{candidate}{suffix}")))
    };
    let name = std::iter::once(base.to_string())
        .chain((2..).map(|n| format!("{base}{n}")))
        .find(|candidate| free(names, candidate))
        .unwrap_or_else(|| base.to_string());
    for suffix in OPERATION_ITEMS {
        names.claim(&format!("{name}{suffix}"));
    }
    let items = ItemNames::from_base(&name);
    (name, items)
}

/// The key header as an operation declares it.
pub(super) fn key_ir(spec: &LoadedSpec, p: &crate::spec::Parameter<'_>, wire: &str) -> KeyIr {
    let max = idemgen_protocol::MAX_KEY_LEN as u64;
    let max_length = p
        .schema(spec)
        .and_then(|s| s.node.get("maxLength"))
        .and_then(Node::as_int)
        .and_then(|v| u64::try_from(v).ok())
        .filter(|v| *v >= 1)
        .map_or(max, |v| v.min(max));
    let min_length = p
        .schema(spec)
        .and_then(|s| s.node.get("minLength"))
        .and_then(Node::as_int)
        .and_then(|v| u64::try_from(v).ok())
        .map_or(1, |v| v.clamp(1, max_length));
    KeyIr {
        header: wire.to_string(),
        max_length,
        min_length,
        declared_required: p.node.node.get("required").and_then(Node::as_bool) == Some(true),
    }
}

/// The one computation of what makes `op` idempotent.
pub(super) fn idempotency_ir(
    op: &Operation<'_>,
    key: KeyIr,
    params: &[ParamIr],
    header: Vec<ParamIr>,
    body: Option<&BodyIr>,
    responses: &[ResponseIr],
) -> Idempotency {
    let fingerprint_version = op.fingerprint_version().or_default();
    let located = |location| {
        params
            .iter()
            .filter(|p| p.location == location)
            .cloned()
            .collect::<Vec<_>>()
    };
    let path = located(ParamLocation::Path);
    let scope = path.iter().map(|p| p.field.clone()).collect();
    let mut stored_headers: Vec<String> = responses
        .iter()
        .filter(|r| r.status.can_be_success())
        .flat_map(|r| r.headers.iter().map(|h| h.wire.to_ascii_lowercase()))
        .collect();
    stored_headers.sort();
    stored_headers.dedup();
    Idempotency {
        fingerprint_version,
        key,
        input: SemanticInputIr {
            path,
            query: located(ParamLocation::Query),
            header,
            body: body.cloned(),
        },
        scope,
        stored_headers,
        retention: match op.retention() {
            spec::extensions::Retention::Valid(secs) => Some(secs),
            _ => None,
        },
    }
}

/// The media type, carrier and schema of a Request Body or Response Object's `content`; JSON
/// media types are preferred. A `request` body sent as a form with a schema is typed as one.
pub(super) fn body_of<'s>(
    owner: NodeRef<'s>,
    space: &mut TypeSpace<'s>,
    hint: &str,
    fallback_media: &str,
    request: bool,
) -> Option<(String, BodyKind, Option<&'s Node>)> {
    // The schemas under `content` are in its file (another one when a `$ref` stands for it).
    let owner = spec::content(space.spec(), owner)?;
    let entries = owner.node.as_map()?.entries();
    let chosen = entries
        .iter()
        .find(|(k, _)| is_json(&k.text))
        .or_else(|| entries.first())?;
    let media_type = if chosen.0.text.contains('*') {
        fallback_media.to_string()
    } else {
        chosen.0.text.clone()
    };
    let kind = if is_json(&chosen.0.text) || chosen.0.text.contains('*') {
        match chosen.1.get("schema") {
            Some(schema) => {
                let schema = NodeRef {
                    file: owner.file,
                    node: schema,
                };
                BodyKind::Json(space.type_of(schema, hint))
            }
            None => BodyKind::Json(TypeRef::Json),
        }
    } else if let (true, true, Some(schema)) = (
        request,
        spec::is_form(&chosen.0.text),
        chosen.1.get("schema"),
    ) && spec::is_flat_form(
        space.spec(),
        NodeRef {
            file: owner.file,
            node: schema,
        },
    ) {
        let schema = NodeRef {
            file: owner.file,
            node: schema,
        };
        BodyKind::Form(space.type_of(schema, hint))
    } else if let (true, Some(Ok(parts))) = (
        request,
        spec::multipart::is_multipart(&chosen.0.text)
            .then(|| {
                spec::multipart::parts(
                    space.spec(),
                    NodeRef {
                        file: owner.file,
                        node: &chosen.1,
                    },
                )
            })
            .flatten(),
    ) {
        let schema = NodeRef {
            file: owner.file,
            node: chosen.1.get("schema")?,
        };
        let (ty, fields) = space.multipart(schema, &parts, hint);
        BodyKind::Multipart {
            ty,
            parts: parts
                .iter()
                .zip(fields)
                .map(|(p, field)| PartIr {
                    wire: p.name.to_string(),
                    field,
                    kind: p.kind,
                })
                .collect(),
        }
    } else if chosen.0.text.to_ascii_lowercase().starts_with("text/") {
        BodyKind::Text
    } else {
        BodyKind::Bytes
    };
    Some((media_type, kind, chosen.1.get("schema")))
}

/// Parameters and headers are single strings on the wire: keep scalar types (and arrays of them
/// in the query), fall back to `String` for anything structured.
pub(super) fn param_type(space: &TypeSpace<'_>, ty: TypeRef, location: ParamLocation) -> TypeRef {
    let ty = match ty {
        TypeRef::Option(inner) => *inner,
        other => other,
    };
    match ty {
        TypeRef::Vec(item) if location == ParamLocation::Query && space.is_scalar(&item) => {
            TypeRef::Vec(item)
        }
        t if space.is_scalar(&t) => t,
        _ => TypeRef::String,
    }
}

/// How the generated code reads a parameter.
pub(crate) enum ParamRead<'a> {
    /// The idempotency key header (its wire name): the runtime's.
    Key(&'a str),
    /// A path, query or header value (its wire name).
    Value(&'a str, ParamLocation),
    /// Not read: a header OpenAPI ignores, a cookie, a parameter without `name` or `in`.
    Unread,
}

/// How the generated code reads `p`, `key_header` being the idempotency key header.
pub(crate) fn param_read<'a>(p: &crate::spec::Parameter<'a>, key_header: &str) -> ParamRead<'a> {
    let (Some(wire), Some(location)) = (p.name, p.location) else {
        return ParamRead::Unread;
    };
    match location {
        "path" => ParamRead::Value(wire, ParamLocation::Path),
        "query" => ParamRead::Value(wire, ParamLocation::Query),
        "header" if wire.eq_ignore_ascii_case(key_header) => ParamRead::Key(wire),
        "header" if IGNORED_HEADERS.contains(&wire.to_ascii_lowercase().as_str()) => {
            ParamRead::Unread
        }
        "header" => ParamRead::Value(wire, ParamLocation::Header),
        // Cookies are not supported.
        _ => ParamRead::Unread,
    }
}

/// A parameter's schema as written (a `$ref` kept, so that the type keeps its component name).
pub(super) fn raw_param_schema<'s>(
    spec: &'s LoadedSpec,
    p: &crate::spec::Parameter<'s>,
) -> Option<NodeRef<'s>> {
    if let Some(node) = p.node.node.get("schema") {
        return Some(NodeRef {
            file: p.node.file,
            node,
        });
    }
    let content = spec::content(spec, p.node)?;
    let (_, media) = content.node.as_map()?.entries().first()?;
    Some(NodeRef {
        file: content.file,
        node: media.get("schema")?,
    })
}
