//! The runtime's modules are layered: each imports only modules below it, so there is no circle
//! and a reader can take them bottom-up (lib.rs names the order). Read from the sources: every
//! `crate::<module>` path outside comments must point strictly down, and code never reaches a
//! sibling through a root re-export (`crate::PgStore`), which would hide the dependency.

use std::collections::BTreeMap;
use std::path::Path;

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

/// The top-level module a source file belongs to (`store/postgres.rs` → `store`).
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_owned())
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
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
