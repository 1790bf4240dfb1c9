//! The one integration-test binary of `idemgen` (one link, shared helpers).

/// `idemgen build`: snapshots of the generated code, determinism, the compile crate, the lock.
mod build;
/// `build --check`, `scaffold` and `fingerprint` on the command line.
mod build_cli;
/// `idemgen::Builder`, the build-script API.
mod builder;
/// Exit codes and output of the `idemgen` binary.
mod cli;
/// Shared helpers: fixture paths, running `check`.
mod common;
/// Constructs published specs write that OpenAPI forbids or that were misread: read right or reported.
mod constructs;
/// Relative links in the repository's Markdown resolve.
mod docs;
/// GitHub annotation output.
mod github;
/// docs/guide.md run as written, from an empty directory to a replay.
mod guide;
/// `--help` of the binary and of every subcommand, snapshotted.
mod help;
/// No circle among the library's modules, at any level.
mod layers;
/// Specs that must not load: clear errors with positions.
mod load_errors;
/// The lock's shape changes exactly when the emitted semantic input changes.
mod lock_shape;
/// `idemgen probe` against a correct server and broken copies of it.
mod probe;
/// `idemgen probe` against a server not built with idemgen: natural keys, RFC 9457 problems.
mod probe_foreign;
/// `idemgen probe` against a stateful payments API: links, fresh preconditions, business answers.
mod probe_stateful;
/// Property-based tests: mutated and random documents never panic the loader.
mod proptests;
/// `path-unroutable` refuses exactly the paths axum's router cannot register.
mod routes;
/// Data-driven rule cases: one line per fixture and expected findings.
mod rules;
/// SARIF output validated against the SARIF 2.1.0 JSON schema.
mod sarif;
/// Snapshots of the human and JSON output.
mod snapshots;
/// Every help snippet, pasted where its finding points, fixes it.
mod snippets;
/// Types from schemas: one per structure, no looser than the schema, stable names.
mod types;

/// What users compile: a client-only crate and a build-script user, from `cargo tree`.
mod tree;

/// No spec makes build, client or scaffold panic: every fixture, and random specs built to break names.
mod generate;
/// `.json` specs through the JSON parser: escapes, positions, strict JSON errors.
mod json;
