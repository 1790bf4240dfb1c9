-- idemgen-runtime, SQLite dialect 0001: the idempotency records and the holder leases
-- (protocol.md, "Records"), the same columns as PostgreSQL's migrations 0001 to 0003 reach.
-- Plain SQL usable by any migration tool; also embedded and applied by
-- `idemgen_runtime::migrate_sqlite`, inside one `BEGIN IMMEDIATE` (so processes sharing the file
-- migrate one at a time).
--
-- Instants are integer milliseconds since the Unix epoch, by the host's clock
-- (`unixepoch('subsec')`): every process sharing a SQLite file runs on its host (WAL needs shared
-- memory), so no two clocks are ever compared. Tokens and holders are 16-byte UUID blobs, headers
-- a JSON array of [name, value] as text.
CREATE TABLE idempotency_records (
    -- The record key (protocol.md, "Record key"), computed by the runtime (`Scope::hash`).
    scope_hash          BLOB    NOT NULL PRIMARY KEY,
    -- The scope in clear, for people and for tombstones.
    owner               TEXT    NOT NULL,
    operation           TEXT    NOT NULL,
    resource_scope      TEXT    NOT NULL DEFAULT '',
    idempotency_key     TEXT    NOT NULL,
    -- 'claimed', 'completed' or 'tombstone'.
    state               TEXT    NOT NULL,
    fingerprint         TEXT    NULL,
    fingerprint_version INTEGER NULL,
    claim_token         BLOB    NULL,
    claimed_at          INTEGER NULL,
    -- The executor (lease) a claim was taken for; NULL: the stale-claim timeout only.
    holder_id           BLOB    NULL,
    response_status     INTEGER NULL,
    response_headers    TEXT    NULL,
    response_body       BLOB    NULL,
    resource_ref        TEXT    NULL,
    created_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000 AS INTEGER)),
    completed_at        INTEGER NULL,
    -- NULL: kept forever (the default). Otherwise the cleanup removes the row after this instant.
    expires_at          INTEGER NULL
) STRICT;

-- Expiry cleanup walks this index in batches.
CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_at)
    WHERE expires_at IS NOT NULL;

-- Tombstoning by the resource a record created.
CREATE INDEX idempotency_records_resource ON idempotency_records (owner, operation, resource_ref)
    WHERE resource_ref IS NOT NULL;

-- Holder leases (protocol.md, "Durability of claims"): a claim whose holder's lease expired or
-- ended (its row deleted) is stale at once.
CREATE TABLE idempotency_holders (
    holder_id    BLOB    NOT NULL PRIMARY KEY,
    heartbeat_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
) STRICT;
