-- idemgen-runtime 0002: records keyed by a 32-byte hash of their scope, and the in-transaction
-- gate (protocol.md, "Records" and "Statements"). Plain SQL usable by any migration tool.
--
-- Guarded: refuses while claimed records exist. A claim taken by the previous version has no
-- expiry yet (this version sets it when the key is claimed, so that completing a record touches
-- no indexed column), and the attempt holding it may still be running the previous version's
-- statements. Let in-flight attempts finish (or delete claims older than the stale-claim
-- timeout), then apply it again.
DO $$
DECLARE
    claims bigint;
BEGIN
    SELECT count(*) INTO claims FROM idempotency_records WHERE state = 'claimed';
    IF claims > 0 THEN
        RAISE EXCEPTION 'idemgen migration 0002: % claimed record(s) in flight', claims
            USING HINT = 'Let in-flight attempts finish, or delete claims older than the '
                         'stale-claim timeout, then migrate again.';
    END IF;
END $$;

-- The record key: SHA-256 of a version tag and the four scope parts, each as a 4-byte big-endian
-- length and its UTF-8 bytes. The runtime computes the same bytes (record.rs, `Scope::hash`);
-- protocol.md has test vectors. A changed format is a new tag and a new function, never an edit.
-- (`convert_to` is only STABLE because conversions can be redefined; to UTF-8 they are fixed.)
CREATE FUNCTION idemgen_scope_hash(owner text, operation text, resource_scope text,
                                   idempotency_key text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT sha256('\x6964656d67656e2d73636f70652d310a'::bytea   -- "idemgen-scope-1\n"
        || int4send(octet_length(convert_to(owner, 'UTF8')))          || convert_to(owner, 'UTF8')
        || int4send(octet_length(convert_to(operation, 'UTF8')))      || convert_to(operation, 'UTF8')
        || int4send(octet_length(convert_to(resource_scope, 'UTF8'))) || convert_to(resource_scope, 'UTF8')
        || int4send(octet_length(convert_to(idempotency_key, 'UTF8')))
        || convert_to(idempotency_key, 'UTF8'))
$$;

-- Computed by the server from the readable columns (which stay, for people and for tombstones),
-- and the primary key in place of the four text columns: one 32-byte key per lookup.
ALTER TABLE idempotency_records
    ADD COLUMN scope_hash bytea NOT NULL
        GENERATED ALWAYS AS (idemgen_scope_hash(owner, operation, resource_scope, idempotency_key))
        STORED;
ALTER TABLE idempotency_records DROP CONSTRAINT idempotency_records_pkey;
ALTER TABLE idempotency_records ADD CONSTRAINT idempotency_records_pkey PRIMARY KEY (scope_hash);

-- The in-transaction gate, run in the same round trip as BEGIN with arguments the runtime
-- computed (an integer and a hash, never client text). It takes the key's transaction-scoped
-- advisory lock without waiting, then looks for a record with a snapshot taken after the lock
-- (each statement of a PL/pgSQL function takes its own), and fails the transaction when the key
-- is busy or already has a record; the runtime then rolls back and reads the record.
CREATE FUNCTION idemgen_gate(lock_key bigint, key_hash bytea) RETURNS void
    LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(lock_key) THEN
        RAISE EXCEPTION 'idemgen: key in flight' USING ERRCODE = 'IG001';
    END IF;
    PERFORM 1 FROM idempotency_records WHERE scope_hash = key_hash;
    IF FOUND THEN
        RAISE EXCEPTION 'idemgen: key has a record' USING ERRCODE = 'IG002';
    END IF;
END
$$;
