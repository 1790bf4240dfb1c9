//! idemgen-runtime integration tests: one binary, against real PostgreSQL (see idemgen-testdb)
//! and real SQLite files (`sqlite.rs`, the contract suite's sqlite rows; no server).

/// Shared fixtures: stores, executors, a business writer and a test response codec.
mod support;

/// The store contract, run on both stores under both strategies.
mod contract;

/// The SQLite store (no server): the model's assumptions on SQLite's locking, storms, cancellation,
/// problem answers, kill -9 of a writer process mid-transaction, processes sharing one file.
mod sqlite;

/// Real concurrency on PostgreSQL: one key, many simultaneous attempts.
mod concurrency;

/// Expiry cleanup in batches while claims proceed.
mod retention;

/// protocol.md's fingerprint vectors and status table, checked against the runtime.
mod protocol;

/// Store failures map to 503 problems with no driver text.
mod unavailable;

/// Lost commit acknowledgements (fault proxy), a server restart under load, an exhausted pool.
mod faults;

/// Hostile input: key parser, canonical JSON, deep nesting, header allowlist, problem bodies.
mod hostile;

/// Asynchronously committed claims across a server crash.
mod durability;

/// The statements an attempt sends, counted by `pg_stat_statements`.
mod statements;

/// Nested transactions in handlers: savepoints they end are part of the attempt; a leaked one
/// refuses the attempt with nothing written, on PostgreSQL and SQLite.
mod savepoints;

/// A deploy that changes strategy: an in-transaction completion that meets a separate claim's
/// record rolls back, replays it and leaves its connection clean.
mod strategies;

/// A primary and a streaming standby behind a switchable endpoint: failover under load,
/// synchronous and asynchronous; a store pointed at the standby.
mod failover;

/// The records' schema: record keys, migration 0002's guard, adopting the previous migrator, a
/// replay that writes nothing, the primary key as the final arbiter.
mod schema;

/// Holder leases: claims of a killed or shut-down executor, releases retried after an outage, a
/// live holder whose lease expires under it.
mod leases;

/// Random schedules of attempts, takeovers, failures, panics, zombies and orphaned claims.
mod interleavings;

/// The protocol as a stateright model, checked exhaustively for both strategies and tombstones
/// (and its broken variants caught).
mod model;

/// The module layering of the runtime's sources: every import points down, no circle.
mod layers;

/// `serve` on loopback sockets: header, body and idle timeouts, the connection limit, shutdown's
/// grace (HTTP/1.1 and HTTP/2).
mod listen;

/// Cancellation safety: a `BEGIN`, gated `BEGIN`, `COMMIT` or `ROLLBACK` cut in flight never
/// leaves the pool a connection inside a transaction nobody owns.
mod cancel;

/// PostgreSQL restarted (`-m fast`, `-m immediate`) under load with the default `stale_claim`:
/// stranded keys execute seconds after the server is back; one write per key, replays.
mod restarts;

/// PgBouncer (transaction and session pooling): the store's pooler check, PgBouncer restarted
/// under load. The contract suite and the storms also run through it.
mod pgbouncer;

/// Multi-host writer discovery: a libpq-style URL with a standby and a primary; the pool follows
/// the writer across a promotion.
mod writers;

/// Downstream calls: derived keys across attempts and strategies; a separate-claim attempt holds
/// no connection before its first write (a small pool, a downstream that needs every attempt).
mod downstream;

/// Two services as a stateright model: an upstream attempt's downstream call with a derived key,
/// crashes and lost answers at every step; never two charges (and a fresh key per attempt caught).
mod chain;

/// The connections the PostgreSQL store keeps between its own statements: back in the pool within
/// the window, never kept from a waiter, after a cut statement or past `Pool::close`.
mod warm;

/// The tokio-postgres store's round trips, counted by the delay proxy: the completion travels
/// with `COMMIT`.
mod pipelining;
