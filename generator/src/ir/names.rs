//! Rust names for OpenAPI names: type names in UpperCamelCase, fields and methods in snake_case,
//! keywords escaped, and collisions resolved deterministically by numbering.

use std::collections::{BTreeSet, HashMap};

use heck::{ToSnakeCase, ToUpperCamelCase};

/// Keywords that `r#` cannot escape; such names get a trailing underscore instead.
const NOT_RAW: [&str; 5] = ["self", "Self", "super", "crate", "_"];

/// Every strict and reserved keyword of Rust 2024.
const KEYWORDS: [&str; 52] = [
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// Replaces every character that cannot appear in an identifier with a word break.
fn words(raw: &str) -> String {
    raw.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' })
        .collect::<String>()
}

/// A type or variant name: `create-widget` → `CreateWidget`, `200` → `T200`. Never empty.
pub fn type_name(raw: &str) -> String {
    let mut name = words(raw).to_upper_camel_case();
    if name.is_empty() {
        name = "Unnamed".to_string();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, 'T');
    }
    if name == "Self" {
        name.push('_');
    }
    name
}

/// A field, parameter or method name: `createdAt` → `created_at`, `type` → `r#type` (written
/// by [`ident`]). Never empty.
pub fn snake_name(raw: &str) -> String {
    // Keep an explicit sign: `+1` and `-1` are different JSON properties.
    let raw = raw.replace('+', " plus ").replace('-', " ");
    let mut name = words(&raw).to_snake_case();
    if name.is_empty() {
        name = "field".to_string();
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    if NOT_RAW.contains(&name.as_str()) {
        name.push('_');
    }
    name
}

/// Whether `name` is a keyword that must be written `r#name`.
pub fn is_keyword(name: &str) -> bool {
    KEYWORDS.contains(&name) && !NOT_RAW.contains(&name)
}

/// Whether `name` is a plain ASCII identifier (`[A-Za-z_][A-Za-z0-9_]*`, not `_` alone).
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name != "_"
}

/// The identifier for a name from [`snake_name`] or [`type_name`], raw when it is a keyword.
///
/// Total: a name that is not an identifier (a bug upstream, such as a name that is only digits)
/// becomes one (`2` → `_2`) instead of panicking, so no spec can crash emission.
pub fn ident(name: &str) -> proc_macro2::Ident {
    if !is_identifier(name) {
        let mut fixed: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if !fixed.starts_with(|c: char| c.is_ascii_alphabetic()) {
            fixed.insert(0, '_');
        }
        if fixed.chars().all(|c| c == '_') {
            fixed.push('x');
        }
        return ident(&fixed);
    }
    if is_keyword(name) {
        proc_macro2::Ident::new_raw(name, proc_macro2::Span::call_site())
    } else {
        proc_macro2::Ident::new(name, proc_macro2::Span::call_site())
    }
}

/// Hands out names unique within one namespace: the second `Widget` becomes `Widget2`.
///
/// Names are never given back, so the first free number of a name only grows: each name keeps
/// the number its search stopped at, and `k` claims of one name cost `k` look-ups, not `k²`.
#[derive(Debug, Default, Clone)]
pub struct Namespace {
    taken: BTreeSet<String>,
    next: HashMap<String, u64>,
}

impl Namespace {
    /// A namespace in which `reserved` are already taken.
    pub fn with_reserved(reserved: &[&str]) -> Namespace {
        Namespace {
            taken: reserved.iter().map(|s| (*s).to_string()).collect(),
            next: HashMap::new(),
        }
    }

    /// `name` if free, else `name2`, `name3`, … (the first free one); the result is taken.
    pub fn claim(&mut self, name: &str) -> String {
        if self.taken.insert(name.to_string()) {
            return name.to_string();
        }
        let sep = if name.ends_with(|c: char| c.is_ascii_digit()) {
            "_"
        } else {
            ""
        };
        let start = self.next.get(name).copied().unwrap_or(2);
        for n in start.. {
            let candidate = format!("{name}{sep}{n}");
            if self.taken.insert(candidate.clone()) {
                self.next.insert(name.to_string(), n + 1);
                return candidate;
            }
        }
        name.to_string()
    }

    /// Whether `name` is taken.
    pub fn contains(&self, name: &str) -> bool {
        self.taken.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let cases = [
            ("createWidget", "CreateWidget", "create_widget"),
            ("create-widget", "CreateWidget", "create_widget"),
            ("created_at", "CreatedAt", "created_at"),
            ("type", "Type", "type"),
            ("self", "Self_", "self_"),
            ("200", "T200", "_200"),
            ("", "Unnamed", "field"),
            ("$ref", "Ref", "ref"),
            ("+1", "T1", "plus_1"),
            ("-1", "T1", "_1"),
            ("HTTPStatus", "HttpStatus", "http_status"),
        ];
        for (raw, ty, field) in cases {
            assert_eq!(type_name(raw), ty, "type_name({raw:?})");
            assert_eq!(snake_name(raw), field, "snake_name({raw:?})");
        }
        assert_eq!(ident("type").to_string(), "r#type");
        assert_eq!(ident("name").to_string(), "name");
        // Never a panic, whatever reaches it.
        for (odd, fixed) in [
            ("2", "_2"),
            ("", "_x"),
            ("_", "__x"),
            ("a-b", "a_b"),
            ("é", "__x"),
        ] {
            assert_eq!(ident(odd).to_string(), fixed, "ident({odd:?})");
        }
    }

    #[test]
    fn collisions_are_numbered() {
        let mut ns = Namespace::with_reserved(&["Request"]);
        assert_eq!(ns.claim("Widget"), "Widget");
        assert_eq!(ns.claim("Widget"), "Widget2");
        assert_eq!(ns.claim("Widget"), "Widget3");
        assert_eq!(ns.claim("Request"), "Request2");
        assert_eq!(ns.claim("V2"), "V2");
        assert_eq!(ns.claim("V2"), "V2_2");
    }
}
