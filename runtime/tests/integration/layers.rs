//! The runtime's modules are layered: each imports only modules below it, so there is no circle
//! and a reader can take them bottom-up (lib.rs names the order). Read from the sources: every
//! `crate::<module>` path outside comments must point strictly down, and code never reaches a
//! sibling through a root re-export (`crate::PgStore`), which would hide the dependency.

use std::collections::BTreeMap;
use std::path::Path;

use idemgen_testdb::imports::{module_path, resolved_paths, sources};

/// Module → layer, lowest first. A module missing here fails the test: place it.
const LAYERS: &[(&str, u8)] = &[
    ("problem", 0),
    ("migrate", 0),
    ("multipart", 0),
    ("listen", 1),
    ("response", 1),
    ("request", 2),
    ("auth", 3),
    ("operation", 4),
    ("store", 5),
    ("executor", 6),
    ("retention", 6),
    ("server", 7),
    ("serve", 8),
    ("testing", 9),
    ("codegen", 10),
    ("engine", 10),
];

/// The top-level module a source file belongs to (`store/postgres/mod.rs` → `store`).
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_owned())
}

/// Every `crate::<name>` in `source` outside `//` comments, with its line.
fn crate_paths(source: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push((n + 1, name));
            rest = after;
        }
    }
    found
}

#[test]
fn modules_import_only_modules_below_them() {
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let Some(module) = module_of(relative) else {
            continue;
        };
        let Some(&own) = layers.get(module.as_str()) else {
            violations.push(format!(
                "{}: module `{module}` has no layer",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, name) in crate_paths(&text) {
            checked += 1;
            if name == module {
                continue;
            }
            match layers.get(name.as_str()) {
                Some(&target) if target < own => {}
                Some(&target) => violations.push(format!(
                    "{}:{line}: `{module}` (layer {own}) imports `{name}` (layer {target})",
                    relative.display()
                )),
                None => violations.push(format!(
                    "{}:{line}: `crate::{name}` is not a module path (name the module it is in)",
                    relative.display()
                )),
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    // The scan saw the imports (a parser that finds nothing would pass vacuously).
    assert!(checked > 30, "only {checked} crate paths found");
}

#[test]
fn the_scan_sees_through_comments_only() {
    let found = crate_paths(
        "use crate::store::Store; // crate::serve in a comment\n/// [`crate::PgStore`]\nlet x = crate::response::render(r);",
    );
    let names: Vec<&str> = found.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["store", "response"]);
}

/// Within a directory module, its submodules' ranks, lowest first: a submodule imports only
/// siblings ranked below it. The directory's own file (`mod.rs`) composes them and is not
/// ranked; items it defines (the `Store` trait, `StoreError`) are every child's to use.
const SUBMODULES: &[(&str, &[(&str, u8)])] = &[
    (
        "store",
        &[
            ("record", 0),
            ("rules", 1),
            ("memory", 2),
            ("postgres", 2),
            ("sqlite", 2),
            ("tokio_pg", 3),
        ],
    ),
    (
        "store/postgres",
        &[("error", 0), ("pooler", 1), ("warm", 1), ("writer", 2)],
    ),
    ("store/sqlite", &[("error", 0)]),
];

/// The violations of [`SUBMODULES`] by one file's imports.
fn submodule_violations(relative: &Path, source: &str) -> (usize, Vec<String>) {
    let own = module_path(relative);
    let mut checked = 0;
    let mut violations = Vec::new();
    for (dir, ranks) in SUBMODULES {
        let dir: Vec<String> = dir.split('/').map(str::to_owned).collect();
        if own.len() <= dir.len() || own[..dir.len()] != dir[..] {
            continue;
        }
        let child = &own[dir.len()];
        let rank_of = |name: &str| ranks.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
        let Some(own_rank) = rank_of(child) else {
            violations.push(format!(
                "{}: `{}` has no rank among `{}`'s submodules",
                relative.display(),
                child,
                dir.join("::")
            ));
            continue;
        };
        for (line, path) in resolved_paths(source, &own) {
            if path.len() <= dir.len() || path[..dir.len()] != dir[..] {
                continue;
            }
            let target = &path[dir.len()];
            let Some(target_rank) = rank_of(target) else {
                continue; // an item of the directory's own file
            };
            checked += 1;
            if target != child && target_rank >= own_rank {
                violations.push(format!(
                    "{}:{line}: `{child}` (rank {own_rank}) imports `{target}` (rank \
                     {target_rank}) of `{}`",
                    relative.display(),
                    dir.join("::")
                ));
            }
        }
    }
    (checked, violations)
}

#[test]
fn the_stores_submodules_import_only_siblings_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src.join("store"), &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let text = std::fs::read_to_string(file).unwrap();
        let (n, found) = submodule_violations(relative, &text);
        checked += n;
        violations.extend(found);
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    // rules → record, memory/postgres/sqlite → rules, tokio_pg → postgres, pooler/writer → error, …
    assert!(checked >= 8, "only {checked} sibling imports found");
}

#[test]
fn a_circle_between_store_submodules_is_seen() {
    let (_, pooler) = submodule_violations(
        Path::new("store/postgres/pooler.rs"),
        "use super::writer::WriterHosts;\nuse crate::store::StoreError;",
    );
    assert_eq!(pooler.len(), 1, "{pooler:?}");
    assert!(pooler[0].contains("imports `writer`"), "{pooler:?}");
    let (checked, rules) = submodule_violations(
        Path::new("store/rules.rs"),
        "use super::{ClaimOutcome, record::Record};\nuse super::memory::MemoryStore; // no",
    );
    assert_eq!(checked, 2);
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert!(rules[0].contains("imports `memory`"), "{rules:?}");
    let (_, unranked) = submodule_violations(Path::new("store/new.rs"), "");
    assert!(unranked[0].contains("no rank"), "{unranked:?}");
}
