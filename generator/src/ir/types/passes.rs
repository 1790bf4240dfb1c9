//! Passes over the converted definitions: implied tags of discriminated unions, boxes that break recursion, alias cycles, and which types are validated.

use super::*;

/// Decides which discriminated unions are internally tagged, and drops the tag field of their
/// alternatives. A struct's discriminator property is implied (no Rust field: the variant is the
/// tag) when the struct is used only as an alternative of discriminated unions on that property
/// (`other_uses` holds every type used anywhere else: operations, fields, aliases, lists, maps,
/// untagged unions), has that property as a string (or string enum) field, and every union it is
/// an alternative of is tagged; a union is tagged when every alternative is such a struct,
/// selected by exactly one tag. A
/// struct also used on its own (a response, a field) keeps its tag field, and its unions stay
/// read-by-tag, written-as-the-alternative: the JSON is the same either way.
pub fn imply_tags(defs: &mut [TypeDef], other_uses: &BTreeSet<String>) {
    let index: HashMap<String, usize> = defs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.name.clone(), i))
        .collect();
    let variant_struct = |ty: &TypeRef| match ty {
        TypeRef::Named(n) => Some(n.clone()),
        TypeRef::Boxed(inner) => match &**inner {
            TypeRef::Named(n) => Some(n.clone()),
            _ => None,
        },
        _ => None,
    };
    // Every type used other than as a discriminated alternative, and per struct the unions (and
    // their properties) it is an alternative of.
    let mut other: BTreeSet<String> = other_uses.clone();
    let mut unions_of: BTreeMap<String, Vec<(usize, String)>> = BTreeMap::new();
    for (u, def) in defs.iter().enumerate() {
        let mut held = Vec::new();
        match &def.kind {
            TypeKind::Union {
                discriminator: Some(property),
                variants,
                ..
            } => {
                for v in variants {
                    match variant_struct(&v.ty) {
                        Some(n) => unions_of.entry(n).or_default().push((u, property.clone())),
                        None => named_in(&v.ty, &mut held),
                    }
                }
            }
            _ => held = def.holds(),
        }
        other.extend(held);
    }
    let is_tag_type = |ty: &TypeRef| match ty {
        TypeRef::String => true,
        TypeRef::Named(n) => index
            .get(n)
            .is_some_and(|&i| matches!(defs[i].kind, TypeKind::StringEnum { .. })),
        _ => false,
    };
    let mut candidates: BTreeSet<String> = unions_of
        .iter()
        .filter(|(name, uses)| {
            let Some(&i) = index.get(*name) else {
                return false;
            };
            let property = &uses[0].1;
            !other.contains(*name)
                && uses.iter().all(|(_, p)| p == property)
                && matches!(&defs[i].kind, TypeKind::Struct { fields, .. }
                    if fields.iter().any(|f| f.wire == *property && is_tag_type(&f.ty)))
        })
        .map(|(name, _)| name.clone())
        .collect();
    // Fixed point: a union is tagged when all its alternatives are candidates; a candidate stays
    // one when all its unions are tagged.
    let mut tagged: BTreeSet<usize>;
    loop {
        tagged = defs
            .iter()
            .enumerate()
            .filter(|(_, d)| match &d.kind {
                TypeKind::Union {
                    discriminator: Some(_),
                    variants,
                    ..
                } => {
                    // One tag per alternative: one selected by two mapping values keeps its tag
                    // field, so the value sent is the value fingerprinted.
                    !variants.is_empty()
                        && variants.iter().all(|v| {
                            v.tags.len() == 1
                                && variant_struct(&v.ty).is_some_and(|n| candidates.contains(&n))
                        })
                }
                _ => false,
            })
            .map(|(u, _)| u)
            .collect();
        let before = candidates.len();
        candidates.retain(|n| unions_of[n].iter().all(|(u, _)| tagged.contains(u)));
        if candidates.len() == before {
            break;
        }
    }
    for u in &tagged {
        if let TypeKind::Union { tagged, .. } = &mut defs[*u].kind {
            *tagged = true;
        }
    }
    for name in &candidates {
        let property = unions_of[name][0].1.clone();
        if let TypeKind::Struct { fields, .. } = &mut defs[index[name]].kind {
            for f in fields.iter_mut().filter(|f| f.wire == property) {
                f.implied_tag = true;
            }
        }
    }
    // A tag is never absent where a union reads it, so its `default` (Adyen writes one beside
    // each one-value tag enum) is not applied: the alternative's shape, and so the lock, is the
    // same whether its union is tagged or not.
    for (name, uses) in &unions_of {
        let Some(&i) = index.get(name) else { continue };
        if let TypeKind::Struct { fields, .. } = &mut defs[i].kind {
            for f in fields
                .iter_mut()
                .filter(|f| uses.iter().any(|(_, p)| *p == f.wire))
            {
                f.default = None;
            }
        }
    }
    mark_validated(defs);
}

/// Boxes every by-value use of a named type that leads back to the type using it (directly or
/// through other types), so that recursive schemas have a finite size.
pub(super) fn box_recursion(defs: &mut BTreeMap<String, TypeDef>) {
    break_alias_cycles(defs);
    let edges: BTreeMap<String, BTreeSet<String>> = defs
        .iter()
        .map(|(name, def)| (name.clone(), by_value_uses(def)))
        .collect();
    let reaches = |from: &str, to: &str| -> bool {
        let mut stack = vec![from.to_string()];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if !seen.insert(n.clone()) {
                continue;
            }
            if let Some(next) = edges.get(&n) {
                stack.extend(next.iter().cloned());
            }
        }
        false
    };
    let mut to_box: Vec<(String, String)> = Vec::new();
    for (name, uses) in &edges {
        for used in uses {
            if reaches(used, name) {
                to_box.push((name.clone(), used.clone()));
            }
        }
    }
    for (name, used) in to_box {
        let Some(def) = defs.get_mut(&name) else {
            continue;
        };
        match &mut def.kind {
            TypeKind::Struct { fields, .. } => {
                for field in fields {
                    field.ty = boxed(&field.ty, &used);
                }
            }
            TypeKind::Union { variants, .. } => {
                for variant in variants {
                    variant.ty = boxed(&variant.ty, &used);
                }
            }
            TypeKind::Alias(target) => *target = boxed(target, &used),
            TypeKind::StringEnum { .. } => {}
        }
    }
}

pub(super) fn boxed(ty: &TypeRef, name: &str) -> TypeRef {
    match ty {
        TypeRef::Named(n) if n == name => TypeRef::Boxed(Box::new(ty.clone())),
        TypeRef::Option(inner) => TypeRef::Option(Box::new(boxed(inner, name))),
        other => other.clone(),
    }
}

/// Named types a definition holds by value (not behind `Vec`, a map or a `Box`).
pub(super) fn by_value_uses(def: &TypeDef) -> BTreeSet<String> {
    fn direct(ty: &TypeRef, out: &mut BTreeSet<String>) {
        match ty {
            TypeRef::Named(n) => {
                out.insert(n.clone());
            }
            TypeRef::Option(inner) => direct(inner, out),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    match &def.kind {
        TypeKind::Struct { fields, .. } => fields.iter().for_each(|f| direct(&f.ty, &mut out)),
        TypeKind::Union { variants, .. } => variants.iter().for_each(|v| direct(&v.ty, &mut out)),
        TypeKind::Alias(t) => direct(t, &mut out),
        TypeKind::StringEnum { .. } => {}
    }
    out
}

/// A type alias that expands to itself (`type A = Vec<A>`) is not Rust; such aliases become
/// `serde_json::Value`.
pub(super) fn break_alias_cycles(defs: &mut BTreeMap<String, TypeDef>) {
    fn all_named(ty: &TypeRef, out: &mut BTreeSet<String>) {
        match ty {
            TypeRef::Named(n) => {
                out.insert(n.clone());
            }
            TypeRef::Vec(t) | TypeRef::Map(t) | TypeRef::Option(t) | TypeRef::Boxed(t) => {
                all_named(t, out)
            }
            _ => {}
        }
    }
    let aliases: BTreeMap<String, BTreeSet<String>> = defs
        .iter()
        .filter_map(|(name, def)| match &def.kind {
            TypeKind::Alias(t) => {
                let mut out = BTreeSet::new();
                all_named(t, &mut out);
                Some((name.clone(), out))
            }
            _ => None,
        })
        .collect();
    let cyclic: Vec<String> = aliases
        .keys()
        .filter(|start| {
            let mut stack: Vec<&String> = aliases[*start].iter().collect();
            let mut seen = BTreeSet::new();
            while let Some(n) = stack.pop() {
                if n == *start {
                    return true;
                }
                if seen.insert(n.clone())
                    && let Some(next) = aliases.get(n)
                {
                    stack.extend(next.iter());
                }
            }
            false
        })
        .cloned()
        .collect();
    for name in cyclic {
        if let Some(def) = defs.get_mut(&name) {
            def.kind = TypeKind::Alias(TypeRef::Json);
        }
    }
}

/// Sets [`TypeDef::validated`] on every struct and union with something to check, directly or
/// through the types it holds (a fixed point, so recursive types terminate).
pub(super) fn mark_validated(defs: &mut [TypeDef]) {
    fn uses(ty: &TypeRef, checks: &Checks, out: &mut Vec<String>) -> bool {
        let none = Checks::default();
        match ty {
            TypeRef::Named(n) => {
                out.push(n.clone());
                false
            }
            TypeRef::Option(t) | TypeRef::Boxed(t) => uses(t, checks, out),
            TypeRef::Vec(t) => {
                let inner = uses(t, checks.items.as_deref().unwrap_or(&none), out);
                inner || !checks.own.for_type(ty).is_empty()
            }
            TypeRef::Map(t) => {
                let inner = uses(t, checks.values.as_deref().unwrap_or(&none), out);
                inner || !checks.own.for_type(ty).is_empty()
            }
            _ => !checks.own.for_type(ty).is_empty(),
        }
    }
    // Per type: whether it checks something itself, and the named types it holds.
    let graph: BTreeMap<String, (bool, Vec<String>)> = defs
        .iter()
        .map(|def| {
            let name = &def.name;
            let mut named = Vec::new();
            let direct = match &def.kind {
                TypeKind::Struct {
                    fields,
                    extra,
                    extra_checks,
                    requirements,
                    ..
                } => {
                    let mut direct = requirements.is_some();
                    for f in fields.iter().filter(|f| !f.implied_tag) {
                        direct |= uses(&f.ty, &f.checks, &mut named);
                    }
                    if let Some(extra) = extra {
                        direct |= uses(extra, extra_checks, &mut named);
                    }
                    direct
                }
                TypeKind::Union { variants, .. } => {
                    let mut direct = false;
                    for v in variants {
                        direct |= uses(&v.ty, &v.checks, &mut named);
                    }
                    direct
                }
                TypeKind::Alias(target) => uses(target, &def.checks, &mut named),
                TypeKind::StringEnum { .. } => false,
            };
            (name.clone(), (direct, named))
        })
        .collect();
    let mut validated: BTreeSet<String> = graph
        .iter()
        .filter(|(_, (direct, _))| *direct)
        .map(|(n, _)| n.clone())
        .collect();
    loop {
        let before = validated.len();
        for (name, (_, named)) in &graph {
            if named.iter().any(|n| validated.contains(n)) {
                validated.insert(name.clone());
            }
        }
        if validated.len() == before {
            break;
        }
    }
    // Untagged unions with checks, and which of them reach one again (themselves included).
    let checked: BTreeSet<&String> = defs
        .iter()
        .filter(|d| {
            validated.contains(&d.name)
                && matches!(
                    d.kind,
                    TypeKind::Union {
                        discriminator: None,
                        ..
                    }
                )
        })
        .map(|d| &d.name)
        .collect();
    let reaches_checked = |from: &String| {
        let mut seen: BTreeSet<&String> = BTreeSet::new();
        let mut stack: Vec<&String> = graph
            .get(from)
            .map(|(_, n)| n.iter().collect())
            .unwrap_or_default();
        while let Some(name) = stack.pop() {
            if checked.contains(name) {
                return true;
            }
            if seen.insert(name)
                && let Some((_, named)) = graph.get(name)
            {
                stack.extend(named.iter());
            }
        }
        false
    };
    let decode_checked: BTreeSet<String> = checked
        .iter()
        .filter(|name| !reaches_checked(name))
        .map(|name| (*name).clone())
        .collect();
    for def in defs.iter_mut() {
        def.validated = validated.contains(&def.name);
        if let TypeKind::Union {
            decode_checked: flag,
            ..
        } = &mut def.kind
        {
            *flag = decode_checked.contains(&def.name);
        }
    }
}
