-- idemgen-runtime: the idempotency record store (protocol.md, "Records").
-- Plain SQL usable by any migration tool; also embedded and applied by `idemgen_runtime::migrate`.

CREATE TABLE idempotency_records (
    -- Scope: keys are never global. resource_scope is '' unless the operation is scoped to a resource.
    owner               text        NOT NULL,
    operation           text        NOT NULL,
    resource_scope      text        NOT NULL DEFAULT '',
    idempotency_key     text        NOT NULL CHECK (octet_length(idempotency_key) BETWEEN 1 AND 255),
    state               text        NOT NULL CHECK (state IN ('claimed', 'completed', 'tombstone')),
    -- hs1 fingerprint and its version; NULL only for tombstones, which keep no request hash.
    fingerprint         text        NULL,
    fingerprint_version smallint    NULL,
    -- The token of the attempt that holds (or completed) the record; completion is guarded by it.
    claim_token         uuid        NULL,
    claimed_at          timestamptz NULL,
    -- The stored 2xx result: status, allowlisted headers (JSON array of [name, value]), body bytes.
    response_status     smallint    NULL CHECK (response_status BETWEEN 200 AND 299),
    response_headers    jsonb       NULL,
    response_body       bytea       NULL,
    -- The resource the completed operation created, so deleting it can tombstone this record.
    resource_ref        text        NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    completed_at        timestamptz NULL,
    -- NULL: kept forever (the default). Otherwise the cleanup removes the row after this instant.
    expires_at          timestamptz NULL,
    PRIMARY KEY (owner, operation, resource_scope, idempotency_key),
    CHECK (state <> 'completed' OR (fingerprint IS NOT NULL AND response_status IS NOT NULL)),
    CHECK (state <> 'claimed' OR (claim_token IS NOT NULL AND claimed_at IS NOT NULL)),
    CHECK (state <> 'tombstone' OR (fingerprint IS NULL AND response_body IS NULL))
);

-- Expiry cleanup walks this index in batches.
CREATE INDEX idempotency_records_expiry ON idempotency_records (expires_at)
    WHERE expires_at IS NOT NULL;

-- Tombstoning by the resource a record created.
CREATE INDEX idempotency_records_resource ON idempotency_records (owner, operation, resource_ref)
    WHERE resource_ref IS NOT NULL;
