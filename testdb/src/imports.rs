//! The import graph of a crate's sources, read as text, for idemgen's layers tests: which
//! module each `crate::…` and `super::…` path names. Comments are skipped; macros and globs
//! (`use super::*`) name no module and are not followed.

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `store/postgres/mod.rs` → `store/postgres`,
/// `store/rules.rs` → `store/rules`.
pub fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.strip_suffix(".rs").unwrap_or(&last).to_owned();
    if stem != "mod" {
        parts.push(stem);
    }
    parts
}

/// Every `crate::…` and `super::…` path in `source` outside `//` comments, resolved against
/// `module` to its first segment below the crate root (`super::{a, b::c}` gives both `a` and
/// `b`), with its line.
pub fn resolved_paths(source: &str, module: &[String]) -> Vec<(usize, Vec<String>)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut at = 0;
        while at < code.len() {
            let rest = &code[at..];
            let boundary = at == 0
                || !code[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            let (mut base, mut tail) = if boundary && rest.starts_with("crate::") {
                (Vec::new(), &rest["crate::".len()..])
            } else if boundary && rest.starts_with("super::") {
                let mut tail = rest;
                let mut up = 0;
                while let Some(next) = tail.strip_prefix("super::") {
                    tail = next;
                    up += 1;
                }
                (module[..module.len().saturating_sub(up)].to_vec(), tail)
            } else {
                at += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
            // Named segments down to a brace group or an item.
            loop {
                if let Some(group) = tail.strip_prefix('{') {
                    let inner = group.split('}').next().unwrap_or("");
                    for item in inner.split(',') {
                        let item = ident(item.trim());
                        if !item.is_empty() && item != "self" {
                            let mut path = base.clone();
                            path.push(item);
                            found.push((n + 1, path));
                        }
                    }
                    break;
                }
                let name = ident(tail);
                if name.is_empty() || !tail[name.len()..].starts_with("::") {
                    if !name.is_empty() {
                        base.push(name);
                        found.push((n + 1, base.clone()));
                    }
                    break;
                }
                base.push(name.clone());
                tail = &tail[name.len() + 2..];
            }
            at += rest.len() - tail.len() + 1;
        }
    }
    found
}
