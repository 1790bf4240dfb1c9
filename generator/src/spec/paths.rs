//! Path templates as the generated server routes them: which `paths` keys the axum router of a
//! generated module can register, and why the others cannot be.
//!
//! axum 0.8 panics in `Router::route` on a path it cannot insert, so a server would die at
//! start-up on a spec the generator had accepted. The verdict is axum's own: its two checks
//! before routing (a leading `/`; no segment starting with `:` or `*`, the syntax of axum 0.7),
//! then an insertion into a `matchit` router of the version axum pins, in document order, which
//! refuses a parameter that is not a whole segment or a segment's end (`{sid}.json`,
//! `{a}-{b}`), an empty or unclosed `{…}`, and a template that differs from an earlier one only
//! in its parameters' names (`/files/{id}` after `/files/{file_id}`). A `?` or `#` in a key is
//! refused before that: a query or fragment is not part of a URL path, and a router would match
//! it literally (a dead route) or not at all. So is a path of more than 25 parameters, on which
//! that matchit panics (axum would too, at start-up), rather than return an error. The rule `path-unroutable` reports each, and the
//! generated router leaves such paths out, so that even with the rule turned off no generated
//! router panics.

use crate::loader::{Key, LoadedSpec, Node};

use super::METHODS;

/// A `paths` key the generated router cannot register.
#[derive(Debug, Clone)]
pub struct Unroutable<'a> {
    /// The key as written.
    pub key: &'a Key,
    /// Why, as a sentence fragment (`its segment `{Sid}.json` …`).
    pub reason: String,
}

/// Every `paths` key with at least one operation that the generated router cannot register, in
/// document order (the file is the root document's: `paths` keys are written there).
pub fn unroutable(spec: &LoadedSpec) -> Vec<Unroutable<'_>> {
    let root = spec.root();
    let Some(paths) = root.node.get("paths").and_then(Node::as_map) else {
        return Vec::new();
    };
    let mut router = matchit::Router::new();
    let mut routed: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for (key, item) in paths.entries() {
        if key.text.starts_with("x-") {
            continue;
        }
        let item = spec.deref(crate::loader::NodeRef {
            file: root.file,
            node: item,
        });
        let has_operation = item.node.as_map().is_some_and(|m| {
            m.entries()
                .iter()
                .any(|(k, _)| METHODS.contains(&k.text.as_str()))
        });
        if !has_operation {
            continue;
        }
        let verdict = match route_problem(&key.text) {
            Some(reason) => Err(reason),
            None => insert(&mut router, &routed, &key.text),
        };
        match verdict {
            Ok(()) => routed.push(key.text.as_str()),
            Err(reason) => out.push(Unroutable { key, reason }),
        }
    }
    out
}

/// Inserts `path` into `router` (which holds `routed`), as axum would.
///
/// `route_problem` keeps every path matchit 0.8.4 is known to panic on away from it; should
/// another version panic where this one returns an error, the panic is caught here as a last
/// line of defence (free unless it happens; the panic hook still prints its message) and the
/// path reported, and the router is rebuilt from `routed`, since a panic may have left it half
/// changed.
fn insert(router: &mut matchit::Router<()>, routed: &[&str], path: &str) -> Result<(), String> {
    let attempt =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| router.insert(path, ())));
    match attempt {
        Ok(inserted) => inserted.map_err(|e| insert_reason(path, &e)),
        Err(_) => {
            *router = matchit::Router::new();
            for earlier in routed {
                // Each was inserted once already, into a router holding the same paths before it.
                let _ = router.insert(*earlier, ());
            }
            Err("the router panicked on it (axum would panic at start-up)".to_string())
        }
    }
}

/// The most parameters axum's router (matchit 0.8.4, which names them `a` to `z` internally)
/// accepts in one path; it panics on more.
const MAX_PARAMS: usize = 25;

/// How many `{name}` parameters `path` holds as matchit counts them: `{{` and `}}` are escaped
/// braces, and a catch-all (`{*rest}`) is not renamed, so not counted.
fn param_count(path: &str) -> usize {
    let bytes = path.as_bytes();
    let mut count = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'{' {
            if bytes.get(i + 1) == Some(&b'{') {
                i += 2;
                continue;
            }
            if bytes.get(i + 1) != Some(&b'*') {
                count += 1;
            }
        }
        i += 1;
    }
    count
}

/// What is wrong with `path` before any routing: what axum checks itself, and a query or
/// fragment written into the key.
fn route_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some("it does not start with `/`".to_string());
    }
    if let Some(i) = path.find(['?', '#']) {
        let what = if path.as_bytes()[i] == b'?' {
            "a query"
        } else {
            "a fragment"
        };
        return Some(format!(
            "it carries {what} (`{}`), which is not part of a URL path: the router would never match a request to it",
            &path[i..]
        ));
    }
    if let Some(segment) = path
        .split('/')
        .find(|s| s.starts_with(':') || s.starts_with('*'))
    {
        return Some(format!(
            "its segment `{segment}` starts with `{}`, which axum refuses (write a parameter as `{{name}}`)",
            &segment[..1]
        ));
    }
    let params = param_count(path);
    if params > MAX_PARAMS {
        return Some(format!(
            "it has {params} parameters: axum's router accepts at most {MAX_PARAMS} parameters in a path"
        ));
    }
    None
}

/// `matchit`'s refusal of `path`, said in terms of the spec.
fn insert_reason(path: &str, error: &matchit::InsertError) -> String {
    match error {
        matchit::InsertError::Conflict { with } => format!(
            "it conflicts with `{with}`, declared before it: a parameter in the same place under another name, so the router cannot tell which of the two a request is for"
        ),
        matchit::InsertError::InvalidParamSegment => {
            let segment = path
                .split('/')
                .find(|s| {
                    s.matches('{').count() > 1 || s.rfind('}').is_some_and(|i| i + 1 < s.len())
                })
                .unwrap_or(path);
            format!(
                "its segment `{segment}` holds a parameter beside other text after it: the router matches a parameter only as a whole segment (`/{{sid}}`) or a segment's end (`/v{{version}}`)"
            )
        }
        matchit::InsertError::InvalidParam => {
            "a `{` or `}` in it does not enclose a parameter name (write `{name}`)".to_string()
        }
        other => format!("the router refuses it: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_before_routing() {
        assert!(route_problem("/widgets/{id}").is_none());
        assert!(route_problem("widgets").unwrap().contains("`/`"));
        assert!(
            route_problem("/files/{id}#shared")
                .unwrap()
                .contains("a fragment (`#shared`)")
        );
        assert!(
            route_problem("/r/{id}?beta=true")
                .unwrap()
                .contains("a query (`?beta=true`)")
        );
        assert!(route_problem("/a/:id").unwrap().contains("`:id`"));
        assert!(route_problem("/a/x:cancel").is_none());
        let params = |n: usize| (0..n).map(|i| format!("/{{p{i}}}")).collect::<String>();
        assert!(route_problem(&params(25)).is_none());
        assert!(
            route_problem(&params(26))
                .unwrap()
                .contains("26 parameters: axum's router accepts at most 25")
        );
        // Escaped braces and a catch-all are not parameters matchit renames.
        assert_eq!(param_count("/{{x}}/{a}/{*rest}"), 1);
    }
}
