//! JSON Pointers (RFC 6901) over [`Node`] trees, and the reverse: the pointer of a span.

use super::node::{Node, Value};
use super::source::Span;

/// Escapes one reference token: `~` becomes `~0`, `/` becomes `~1`.
pub fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Splits a pointer such as `/paths/~1widgets/post` into unescaped tokens.
///
/// Returns `None` when the pointer is neither empty nor starts with `/`.
pub fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// Joins tokens into a pointer.
pub fn join<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for t in tokens {
        out.push('/');
        out.push_str(&escape(t));
    }
    out
}

/// Follows `pointer` from `root`, without following `$ref`s on the way.
pub fn lookup<'a>(root: &'a Node, pointer: &str) -> Option<&'a Node> {
    let mut node = root;
    for token in tokens(pointer)? {
        node = match &node.value {
            Value::Map(m) => m.get(&token)?,
            Value::Seq(items) => {
                if token.len() > 1 && token.starts_with('0') {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(node)
}

/// The pointer of the node or mapping key written at `target` within `root`.
///
/// Descends only into the child whose span contains `target`, so the cost is the depth of the
/// tree times the width of the maps on the way. Returns the closest enclosing node's pointer
/// when no node starts exactly at `target`.
pub fn pointer_at(root: &Node, target: Span) -> String {
    let mut path: Vec<String> = Vec::new();
    let mut node = root;
    loop {
        if node.span == target {
            break;
        }
        let next = match &node.value {
            Value::Map(m) => {
                let mut found = None;
                for (key, value) in m.entries() {
                    if key.span == target {
                        path.push(key.text.clone());
                        return join(path.iter().map(String::as_str));
                    }
                    if value.span.contains(target) {
                        found = Some((key.text.clone(), value));
                        break;
                    }
                }
                found
            }
            Value::Seq(items) => items
                .iter()
                .enumerate()
                .find(|(_, v)| v.span.contains(target))
                .map(|(i, v)| (i.to_string(), v)),
            _ => None,
        };
        match next {
            Some((token, child)) => {
                path.push(token);
                node = child;
            }
            None => break,
        }
    }
    join(path.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::yaml::parse;

    #[test]
    fn tokens_unescape_in_the_right_order() {
        assert_eq!(
            tokens("/a~1b/~01"),
            Some(vec!["a/b".to_string(), "~1".to_string()])
        );
        assert_eq!(tokens(""), Some(vec![]));
        assert_eq!(tokens("a"), None);
        assert_eq!(join(["/widgets", "post"]), "/~1widgets/post");
    }

    #[test]
    fn lookup_and_pointer_at_agree() {
        let root = parse(
            "paths:\n  /w:\n    post:\n      parameters:\n        - name: a\n        - name: b\n",
        )
        .expect("parses");
        let b = lookup(&root, "/paths/~1w/post/parameters/1").expect("found");
        assert_eq!(pointer_at(&root, b.span), "/paths/~1w/post/parameters/1");
        let (post_key, _) = lookup(&root, "/paths/~1w")
            .and_then(|n| n.entry("post"))
            .expect("post");
        assert_eq!(pointer_at(&root, post_key.span), "/paths/~1w/post");
        assert!(lookup(&root, "/paths/~1w/post/parameters/01").is_none());
        assert!(lookup(&root, "/nope").is_none());
    }
}
