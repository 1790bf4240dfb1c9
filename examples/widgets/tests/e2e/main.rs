//! End-to-end tests of the widgets service: the real binary, real PostgreSQL, real HTTP on
//! loopback.

/// Starting and stopping server processes on a fresh database; an HTTP client.
mod support;

/// The README walkthrough, step by step.
mod walkthrough;

/// Concurrency: storms of identical creates on one and two server processes; publish retries.
mod storms;

/// A server killed with SIGKILL in the middle of a write, restarted, and retried.
mod crash;

/// Owners, authorization and limits.
mod isolation;

/// The handlers alone, on a fresh database from the runtime's `testing` feature.
mod handlers;

/// The defects outside testing found: NUL characters, explicit nulls, media types, 404/405,
/// duplicate credentials, the database down.
mod hostile;

/// The generated client: retries through a faulty proxy and PostgreSQL restarts, 409 waited out,
/// 422 and 410 at once.
mod client;

/// Serving as an operator runs it: slow clients under a low descriptor limit, SIGTERM within the
/// grace and every interrupted key once, a log without secrets.
mod serving;

/// Cancellation safety: clients resetting mid-request under load, then every key retried.
mod cancel;

/// Observing and composing: request spans under tower-http's `TraceLayer` in the caller's W3C
/// trace, CORS and gzip around the generated router, the phase histograms.
mod observe;

/// Beyond one server: four processes through two automatic failovers by pg_auto_failover (one
/// multi-host URL), and the claim pool through PgBouncer in transaction mode.
mod failover;
