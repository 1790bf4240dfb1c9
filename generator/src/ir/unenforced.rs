//! What the generated server does not check of a request's schemas, said out loud
//! (`keyword-not-enforced`): the walk over every schema a request is validated against, the
//! same ones [`super::Api::from_spec`] reads (parameters but the key header and the ones OpenAPI
//! ignores, and the request body's chosen media type when it is typed), read as the IR reads
//! them (a parameter it reads as one string, a multipart file part, an `allOf` it merges or
//! cannot), with each schema judged by [`super::types::unenforced_keywords`], beside the
//! conversion whose checks it judges. The rules layer reports what this finds; it lives here
//! because only the IR knows what the generated code checks.

use std::collections::{HashMap, HashSet};

use crate::loader::{FileId, LoadedSpec, Node, NodeRef, OpenApiVersion, Span};
use crate::spec::multipart::{self, PartKind};
use crate::spec::{self, Operation, is_json};

use super::types::{
    Reading, TypeRef, TypeSpace, all_of_objects, is_union, requirement_alternatives,
    unenforced_keywords,
};
use super::{ParamLocation, ParamRead, param_read, param_type, raw_param_schema};

/// A finding of the walk: where the keyword is written, and why it is not enforced.
type Unenforced = ((FileId, Span), String);

/// What one schema read one way is: the class it is seen as, its own findings, and the schemas
/// (with their readings) the walk goes on to.
type Expansion<'s> = (
    Option<(FileId, Span, u8)>,
    Vec<Unenforced>,
    Vec<(NodeRef<'s>, Reading)>,
);

/// One schema as the walk meets it (a node and how it is read), expanded once per run.
struct State<'s> {
    /// Where the schema is, and the class of its reading: a schema met twice in one
    /// operation's walk under the same class is walked once.
    seen_as: Option<(FileId, Span, u8)>,
    /// Its own unenforced keywords, in the order the walk reports them.
    findings: Vec<Unenforced>,
    /// The states the walk goes on to, in the order it pushes them.
    children: Vec<usize>,
    /// Whether a finding is reachable from here (this state's own, or a child's).
    live: bool,
    /// Its node and reading, until it is expanded.
    pending: Option<(NodeRef<'s>, Reading)>,
}

/// The walk of `keyword-not-enforced` over one spec. Each schema met under one reading is
/// judged once per run (its findings and the schemas it leads to are kept), whichever
/// operations reach it; an operation's walk then visits only the schemas from which a finding
/// is reachable, so the work is the spec's size plus, per operation, the paths to the findings
/// it reports. The parameter types come from one [`TypeSpace`] for the run.
pub struct KeywordWalk<'s> {
    spec: &'s LoadedSpec,
    key_header: String,
    openapi_31: bool,
    /// Made at the first parameter to type: a spec without any costs nothing.
    space: Option<TypeSpace<'s>>,
    ids: HashMap<(FileId, usize, Reading), usize>,
    states: Vec<State<'s>>,
}

impl<'s> KeywordWalk<'s> {
    /// A walk over `spec`'s operations; `key_header` is the configured idempotency key header
    /// (its schema is the idempotency rules' and the runtime's).
    pub fn new(spec: &'s LoadedSpec, key_header: &str) -> KeywordWalk<'s> {
        KeywordWalk {
            spec,
            key_header: key_header.to_string(),
            openapi_31: spec.version() == OpenApiVersion::V3_1,
            space: None,
            ids: HashMap::new(),
            states: Vec::new(),
        }
    }

    /// Calls `report` for every validation keyword of `op`'s request schemas that the
    /// generated server does not check: where it is written, and why.
    pub fn check_operation(
        &mut self,
        op: &Operation<'s>,
        report: &mut dyn FnMut((FileId, Span), String),
    ) {
        let roots: Vec<usize> = self
            .roots(op)
            .into_iter()
            .map(|(at, reading)| self.state(at, reading))
            .collect();
        self.expand_from(&roots);
        let mut stack: Vec<usize> = roots.into_iter().filter(|&r| self.states[r].live).collect();
        let mut seen: HashSet<(FileId, Span, u8)> = HashSet::new();
        while let Some(id) = stack.pop() {
            let state = &self.states[id];
            let Some(seen_as) = state.seen_as else {
                continue;
            };
            if !seen.insert(seen_as) {
                continue;
            }
            for (at, why) in &state.findings {
                report(*at, why.clone());
            }
            stack.extend(state.children.iter().filter(|&&c| self.states[c].live));
        }
    }

    /// The schemas `op`'s request is validated against, each with how the IR reads it, in the
    /// order the walk starts from: the parameters but the key header and the unread ones, then
    /// the request body's typed schemas.
    fn roots(&mut self, op: &Operation<'s>) -> Vec<(NodeRef<'s>, Reading)> {
        let spec = self.spec;
        let mut out = Vec::new();
        for p in op.parameters(spec) {
            // Not the key header (the runtime's), nor the ones not read (cookies are
            // `parameter-unsupported`'s).
            let ParamRead::Value(wire, location) = param_read(&p, &self.key_header) else {
                continue;
            };
            let Some(schema) = raw_param_schema(spec, &p) else {
                continue;
            };
            let space = self.space.get_or_insert_with(|| TypeSpace::new(spec));
            let ty = space.type_of(schema, "Parameter");
            let read = param_type(space, ty.clone(), location);
            let ty = match ty {
                TypeRef::Option(inner) => *inner,
                other => other,
            };
            let reading = if read == ty {
                Reading::Schema
            } else {
                Reading::Forced {
                    ty: Some(read),
                    why: format!(
                        "the {} parameter `{wire}` is read as one string (its schema is not a scalar{})",
                        match location {
                            ParamLocation::Path => "path",
                            ParamLocation::Query => "query",
                            ParamLocation::Header => "header",
                        },
                        if location == ParamLocation::Query {
                            " nor an array of scalars"
                        } else {
                            ""
                        }
                    ),
                }
            };
            out.push((schema, reading));
        }
        if let Some(body) = op.node.node.get("requestBody") {
            let body = spec.deref(NodeRef {
                file: op.node.file,
                node: body,
            });
            out.extend(typed_body(spec, body));
        }
        out
    }

    /// The id of the state of `at` read as `reading`, made (unexpanded) when new.
    fn state(&mut self, at: NodeRef<'s>, reading: Reading) -> usize {
        let key = (at.file, std::ptr::from_ref(at.node) as usize, reading);
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.states.len();
        let reading = key.2.clone();
        self.ids.insert(key, id);
        self.states.push(State {
            seen_as: None,
            findings: Vec::new(),
            children: Vec::new(),
            live: false,
            pending: Some((at, reading)),
        });
        id
    }

    /// Expands every state reachable from `roots` that is not yet, then settles whether a
    /// finding is reachable from each of them. A state expanded earlier had everything it
    /// reaches expanded then, so its `live` is final and the new states alone are settled.
    fn expand_from(&mut self, roots: &[usize]) {
        let mut fresh = Vec::new();
        let mut todo: Vec<usize> = roots.to_vec();
        while let Some(id) = todo.pop() {
            let Some((at, reading)) = self.states[id].pending.take() else {
                continue;
            };
            fresh.push(id);
            let (seen_as, findings, next) = self.expand(at, reading);
            let children: Vec<usize> = next
                .into_iter()
                .map(|(at, reading)| self.state(at, reading))
                .collect();
            todo.extend(children.iter().copied());
            let state = &mut self.states[id];
            state.seen_as = seen_as;
            state.live = seen_as.is_some() && !findings.is_empty();
            state.findings = findings;
            state.children = children;
        }
        // `live` flows from children to parents, among the new states.
        let mut parents: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut live: Vec<usize> = Vec::new();
        for &id in &fresh {
            let state = &self.states[id];
            if state.seen_as.is_none() {
                continue;
            }
            if state.live {
                live.push(id);
            }
            for &c in &state.children {
                if self.states[c].live {
                    live.push(id);
                }
                parents.entry(c).or_default().push(id);
            }
        }
        while let Some(id) = live.pop() {
            self.states[id].live = true;
            for &p in parents.get(&id).map(Vec::as_slice).unwrap_or_default() {
                if !self.states[p].live {
                    self.states[p].live = true;
                    live.push(p);
                }
            }
        }
    }

    /// One schema read as `reading`: the class it is seen as (none when it is not a mapping:
    /// nothing to judge), its own findings and the schemas the walk goes on to, in order.
    fn expand(&self, at: NodeRef<'s>, reading: Reading) -> Expansion<'s> {
        let spec = self.spec;
        if at.node.as_map().is_none() {
            return (None, Vec::new(), Vec::new());
        }
        let kind = match reading {
            Reading::Schema => 0,
            Reading::MergedMember => 1,
            Reading::Forced { .. } => 2,
            Reading::PartsOnly => 3,
        };
        let seen_as = Some((at.file, at.node.span, kind));
        let mut findings: Vec<Unenforced> = unenforced_keywords(at.node, self.openapi_31, &reading)
            .into_iter()
            .map(|(key, why)| ((at.file, key.span), why))
            .collect();
        if reading == Reading::PartsOnly {
            // Its parts were pushed as the IR reads them.
            return (seen_as, findings, Vec::new());
        }
        if let Reading::Forced { why, .. } = &reading {
            // Nothing inside a value read as something else is checked.
            let inside = Reading::Forced {
                ty: None,
                why: why.clone(),
            };
            let next = children(spec, at)
                .into_iter()
                .map(|c| (c, inside.clone()))
                .collect();
            return (seen_as, findings, next);
        }
        if let Some(members) = merged_all_of(at) {
            let Some(objects) = all_of_objects(spec, at, members) else {
                if let Some((key, _)) = at.node.entry("allOf") {
                    findings.push((
                        (at.file, key.span),
                        "`allOf` is not enforced: a member is not an object (a union, an enum, a primitive, an array or a map), so the value is read as any JSON value, and neither the schema's properties nor its members' keywords are checked".to_string(),
                    ));
                }
                return (seen_as, findings, Vec::new());
            };
            merged_additional_properties(&objects, &mut findings);
            let mut next: Vec<(NodeRef<'s>, Reading)> = objects
                .into_iter()
                .filter(|o| !std::ptr::eq(o.node, at.node))
                .map(|o| (o, Reading::MergedMember))
                .collect();
            next.extend(properties(at).into_iter().map(|c| (c, Reading::Schema)));
            return (seen_as, findings, next);
        }
        let next = children(spec, at)
            .into_iter()
            .map(|c| (c, Reading::Schema))
            .collect();
        (seen_as, findings, next)
    }
}

/// The schemas of the request body the generated server decodes into a type (the media type
/// [`super::Api::from_spec`] chooses: the first JSON one, else the first), when it is JSON, a
/// flat form or a multipart body whose parts it types; others arrive as bytes and are
/// `media-type-untyped`'s. A multipart file part is read as bytes (lengths only); an array of
/// them, each item so.
fn typed_body<'s>(spec: &'s LoadedSpec, body: NodeRef<'s>) -> Vec<(NodeRef<'s>, Reading)> {
    // The schemas under `content` are in its file (another one when a `$ref` stands for it).
    let Some(body) = spec::content(spec, body) else {
        return Vec::new();
    };
    let Some(entries) = body.node.as_map() else {
        return Vec::new();
    };
    let entries = entries.entries();
    let Some((media, entry)) = entries
        .iter()
        .find(|(k, _)| is_json(&k.text))
        .or_else(|| entries.first())
    else {
        return Vec::new();
    };
    let Some(schema) = entry.get("schema").map(|node| NodeRef {
        file: body.file,
        node,
    }) else {
        return Vec::new();
    };
    let media = media.text.as_str();
    if is_json(media)
        || media.contains('*')
        || (spec::is_form(media) && spec::is_flat_form(spec, schema))
    {
        return vec![(schema, Reading::Schema)];
    }
    if !multipart::is_multipart(media) {
        return Vec::new();
    }
    let Some(Ok(parts)) = multipart::parts(
        spec,
        NodeRef {
            file: body.file,
            node: entry,
        },
    ) else {
        return Vec::new();
    };
    // The body object's own keywords (as a struct's), then each part as the IR reads it.
    let mut out = vec![(spec.deref(schema), Reading::PartsOnly)];
    for part in parts {
        let property = spec.deref(part.schema);
        let file = |what: &str| Reading::Forced {
            ty: Some(TypeRef::File),
            why: format!(
                "the part `{}` is {what}, whose bytes are checked for their length only",
                part.name
            ),
        };
        match part.kind {
            PartKind::File { many: false } => out.push((property, file("a file"))),
            PartKind::File { many: true } => {
                out.push((property, Reading::Schema));
                if let Some(items) = property.node.get("items") {
                    let items = spec.deref(NodeRef {
                        file: property.file,
                        node: items,
                    });
                    out.push((items, file("an array of files")));
                }
            }
            _ => out.push((part.schema, Reading::Schema)),
        }
    }
    out
}

/// The members of an `allOf` the IR merges into one struct (not one member alone with nothing
/// beside it, which is that member; not beside a union, which reads its alternatives only).
fn merged_all_of<'s>(at: NodeRef<'s>) -> Option<&'s [Node]> {
    let members = at.node.get("allOf").and_then(Node::as_seq)?;
    let single = members.len() == 1 && at.node.get("properties").is_none();
    (!single && !is_union(at.node)).then_some(members)
}

/// The values of `properties`.
fn properties<'s>(at: NodeRef<'s>) -> Vec<NodeRef<'s>> {
    at.node
        .get("properties")
        .and_then(Node::as_map)
        .map(|m| {
            m.entries()
                .iter()
                .map(|(_, node)| NodeRef {
                    file: at.file,
                    node,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The schemas a value of `at` is also checked against: a `$ref`'s target; properties, items
/// and `additionalProperties`; the members of a one-member `allOf` (that member); a union's
/// alternatives only (it reads nothing else). Not the insides of keywords reported whole (`not`,
/// `if`, `prefixItems`, …).
fn children<'s>(spec: &'s LoadedSpec, at: NodeRef<'s>) -> Vec<NodeRef<'s>> {
    let here = |node: &'s Node| NodeRef {
        file: at.file,
        node,
    };
    if let Some(reference) = at.node.ref_target() {
        // Unresolved references are `unresolved-ref`'s.
        return spec.resolve_ref(at.file, reference).into_iter().collect();
    }
    let members = |key: &str| {
        at.node
            .get(key)
            .and_then(Node::as_seq)
            .unwrap_or_default()
            .iter()
            .map(here)
            .collect::<Vec<_>>()
    };
    if is_union(at.node) {
        return [members("oneOf"), members("anyOf")].concat();
    }
    let mut out = properties(at);
    for key in ["items", "additionalProperties"] {
        if let Some(schema) = at.node.get(key).filter(|n| n.as_map().is_some()) {
            out.push(here(schema));
        }
    }
    out.extend(members("allOf"));
    // Alternatives of required properties are the struct's check, not schemas of their own.
    if requirement_alternatives(at.node).is_none() {
        out.extend(members("oneOf"));
        out.extend(members("anyOf"));
    }
    out
}

/// `additionalProperties` of the objects an `allOf` merges into one struct: the merged struct
/// neither refuses unknown properties nor types extra ones (`TypeSpace::merge_all_of` denies
/// unknown properties only for an object of its own), so unknown properties are accepted
/// unchecked.
fn merged_additional_properties(objects: &[NodeRef<'_>], findings: &mut Vec<Unenforced>) {
    for object in objects {
        let Some((key, value)) = object.node.entry("additionalProperties") else {
            continue;
        };
        let open = value.as_bool() == Some(true) || value.as_map().is_some_and(|m| m.is_empty());
        if open {
            continue;
        }
        findings.push((
            (object.file, key.span),
            "`additionalProperties` is not enforced where an `allOf` merges this schema with others: the merged object accepts properties none of them declares".to_string(),
        ));
    }
}
