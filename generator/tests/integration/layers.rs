//! The library's modules import each other without a circle, at every level: among the
//! top-level modules, and among the files of each directory module (`emit/operations.rs` and
//! `emit/types.rs` once imported each other). Read from the sources with `crate::…` and
//! `super::…` paths resolved; a directory's own `mod.rs` composes its files and is not a node;
//! the binary's files (`main.rs`, `cli/`) are another crate and are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use idemgen_testdb::imports::{module_path, resolved_paths, sources};

/// Edges `child → sibling` per directory module (`[]` is the crate root).
type Graph = BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>>;

/// Whether `path` (below `src`) is a module: `path.rs` or `path/mod.rs`.
fn is_module(src: &Path, path: &[String]) -> bool {
    let joined = path.join("/");
    src.join(format!("{joined}.rs")).exists() || src.join(&joined).join("mod.rs").exists()
}

/// The sibling imports of one file, added to `graph`; returns how many it had.
fn add_edges(src: &Path, relative: &Path, source: &str, graph: &mut Graph) -> usize {
    let own = module_path(relative);
    let mut added = 0;
    for (_, target) in resolved_paths(source, &own) {
        let common = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
        if common >= own.len() || common >= target.len() {
            continue; // the file itself, a descendant, or an item of an ancestor's own file
        }
        if !is_module(src, &target[..=common]) {
            continue; // an item of the common ancestor's own file (`super::Side`)
        }
        graph
            .entry(own[..common].to_vec())
            .or_default()
            .entry(own[common].clone())
            .or_default()
            .insert(target[common].clone());
        added += 1;
    }
    added
}

/// A circle in `edges`, if any, as the nodes round it.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut round = path[at..].to_vec();
            round.push(node.to_owned());
            return Some(round);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(round) = visit(next, edges, path, done) {
                return Some(round);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_modules_import_each_other_round_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut graph = Graph::new();
    let mut edges = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative.components().next().unwrap().as_os_str();
        if top == "main.rs" || top == "cli" || top == "lib.rs" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        edges += add_edges(&src, relative, &text, &mut graph);
    }
    let circles: Vec<String> = graph
        .iter()
        .filter_map(|(dir, edges)| {
            circle(edges).map(|round| format!("in `{}`: {}", dir.join("::"), round.join(" → ")))
        })
        .collect();
    assert!(circles.is_empty(), "{}", circles.join("\n"));
    // The scan saw the library's imports (emit → ir, rules → spec, …).
    assert!(edges > 50, "only {edges} imports between modules found");
    assert!(graph.contains_key(&vec!["emit".to_owned()]), "{graph:?}");
}

#[test]
fn a_circle_is_seen() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = Graph::new();
    add_edges(
        &src,
        Path::new("emit/types.rs"),
        "use super::operations::variants;\nuse super::Side; // an item of emit/mod.rs",
        &mut graph,
    );
    add_edges(
        &src,
        Path::new("emit/operations.rs"),
        "use crate::emit::types::rust_type;",
        &mut graph,
    );
    let emit = &graph[&vec!["emit".to_owned()]];
    assert_eq!(emit.len(), 2, "{emit:?}");
    assert_eq!(
        circle(emit),
        Some(vec![
            "operations".into(),
            "types".into(),
            "operations".into()
        ])
    );
}
