//! `path-unroutable` agrees with axum: every path the check accepts, `axum::Router::route`
//! registers, and every path axum refuses (a panic at a service's start-up) the check reports;
//! a generated router leaves reported paths out.

use std::cell::Cell;
use std::path::Path;
use std::sync::OnceLock;

use idemgen::loader::{MemoryFs, load_with};
use proptest::prelude::*;

/// Path segments that real specs write, routable or not.
const SEGMENTS: [&str; 18] = [
    "accounts",
    "v1",
    "{id}",
    "{sid}",
    "{Sid}.json",
    "v{version}",
    "{name}:cancel",
    "{a}{b}",
    ":id",
    "*",
    "{}",
    "}",
    "x?beta=true",
    "y#shared",
    "",
    "{*rest}",
    "Calls.json",
    "{{x}}",
];

/// A spec with one GET under each of `paths` (its map sorts them: callers pass them sorted).
fn spec_with(paths: &[String]) -> String {
    let mut doc = serde_json::json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}});
    let mut map = serde_json::Map::new();
    for (i, p) in paths.iter().enumerate() {
        map.insert(
            p.clone(),
            serde_json::json!({"get": {"operationId": format!("op{i}"), "responses": {"200": {"description": "OK"}}}}),
        );
    }
    doc["paths"] = serde_json::Value::Object(map);
    serde_json::to_string_pretty(&doc).expect("serialises")
}

/// The keys `spec::paths` reports, for `paths` in document order.
fn reported(paths: &[String]) -> Vec<String> {
    let mut fs = MemoryFs::new();
    fs.insert("spec.json", spec_with(paths));
    let spec = load_with(&fs, Path::new("spec.json")).expect("loads");
    idemgen::spec::paths::unroutable(&spec)
        .into_iter()
        .map(|u| u.key.text.clone())
        .collect()
}

thread_local! {
    /// Set on a thread only while it runs an expected panic (axum refusing a path).
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, catching its panic without printing it. The panic hook is process-wide and tests
/// run in parallel, so it is never swapped back and forth: one wrapper is installed once, and
/// it forwards every panic to the hook it replaced unless the panicking thread is in here.
fn quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.get() {
                previous(info);
            }
        }));
    });
    QUIET.set(true);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.set(false);
    result
}

/// Registers `paths` one by one on an axum router, as a generated `router` does; the paths whose
/// `route` call panicked (each tried on a copy, so later ones meet the same router).
fn axum_refuses(paths: &[String]) -> Vec<String> {
    let mut router: axum::Router = axum::Router::new();
    let mut refused = Vec::new();
    for path in paths {
        let attempt = router.clone();
        match quietly(|| attempt.route(path, axum::routing::get(|| async { "" }))) {
            Ok(next) => router = next,
            Err(_) => refused.push(path.clone()),
        }
    }
    refused
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(SEGMENTS.to_vec()), 1..4)
        .prop_map(|s| format!("/{}", s.join("/")))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn the_check_refuses_exactly_what_axum_cannot_route(paths in prop::collection::vec(path(), 1..7)) {
        let mut paths = paths;
        paths.sort();
        paths.dedup();
        let reported = reported(&paths);
        // A query or fragment is refused before routing: axum would register it as a literal
        // that no request path ever equals. Keep them away from axum, as the generated router does.
        let (literal, routable): (Vec<String>, Vec<String>) =
            paths.iter().cloned().partition(|p| p.contains(['?', '#']));
        for p in &literal {
            prop_assert!(reported.contains(p), "{p} is not reported");
        }
        let refused = axum_refuses(&routable);
        let reported_routable: Vec<String> =
            reported.into_iter().filter(|p| !literal.contains(p)).collect();
        prop_assert_eq!(reported_routable, refused, "paths {:?}", paths);
    }
}

#[test]
fn the_property_meets_both_verdicts() {
    // The property is only worth its cases if axum both accepts and refuses among them. (Paths
    // in sorted order: the order of the spec the helpers write, whose map keys are sorted.)
    let paths: Vec<String> = [
        "/accounts/{Sid}.json",
        "/accounts/{id}",
        "/accounts/{sid}",
        "/v{version}/x",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        axum_refuses(&paths),
        ["/accounts/{Sid}.json", "/accounts/{sid}"]
    );
    assert_eq!(
        reported(&paths),
        ["/accounts/{Sid}.json", "/accounts/{sid}"]
    );
}

#[test]
fn axum_routes_25_parameters_in_a_path_and_the_check_refuses_26() {
    // matchit names a path's parameters `a` to `z` and panics on a 26th; the check must report
    // the path (not panic itself) and accept one fewer.
    let path = |n: usize| (0..n).map(|i| format!("/{{p{i}}}")).collect::<String>();
    let (fits, over) = (path(25), path(26));
    let (fits, over) = (std::slice::from_ref(&fits), std::slice::from_ref(&over));
    let none: &[String] = &[];
    assert_eq!(axum_refuses(fits), none);
    assert_eq!(reported(fits), none);
    assert_eq!(axum_refuses(over), over);
    assert_eq!(reported(over), over);
}

#[test]
fn a_generated_router_leaves_out_what_the_check_reports() {
    // With the rule off the build goes ahead; the router must still not panic.
    let paths: Vec<String> = [
        "/accounts/{sid}",
        "/accounts/{sid}/calls/{call}.json",
        "/files/{id}#link",
    ]
    .map(String::from)
    .to_vec();
    let mut fs = MemoryFs::new();
    fs.insert("spec.json", spec_with(&paths));
    let spec = load_with(&fs, Path::new("spec.json")).expect("loads");
    let api = idemgen::ir::Api::from_spec(&spec, "Idempotency-Key");
    let routed: Vec<(&str, bool)> = api
        .operations
        .iter()
        .map(|o| (o.path.as_str(), o.routed))
        .collect();
    assert_eq!(
        routed,
        [
            ("/accounts/{sid}", true),
            ("/accounts/{sid}/calls/{call}.json", false),
            ("/files/{id}#link", false)
        ]
    );
    let router = idemgen::emit::server::router(&api).to_string();
    assert!(router.contains("\"/accounts/{sid}\""), "{router}");
    assert!(!router.contains("calls"), "{router}");
    assert!(!router.contains("#link"), "{router}");
}
