-- The completion and the business commit in one round trip. The store sends
-- `SELECT idemgen_complete(...); COMMIT; BEGIN` (or `idemgen_insert_completed`) as one simple
-- query: a completion that finds the key's record is not this attempt's must stop the batch
-- before its COMMIT, so these functions raise IG003 where the statements they wrap report zero
-- rows. Additive: nothing earlier calls them, and no row changes.

-- Separate claim: completes the claimed record, guarded by the attempt's token.
CREATE FUNCTION idemgen_complete(key_hash bytea, attempt_token uuid, status smallint,
                                 headers jsonb, body bytea, created_ref text) RETURNS void
    LANGUAGE plpgsql
AS $$
BEGIN
    UPDATE idempotency_records
       SET state = 'completed', response_status = status, response_headers = headers,
           response_body = body, resource_ref = created_ref, completed_at = clock_timestamp()
     WHERE scope_hash = key_hash AND state = 'claimed' AND claim_token = attempt_token;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'idemgen: the key''s claim is not this attempt''s' USING ERRCODE = 'IG003';
    END IF;
END
$$;

-- In-transaction: inserts the completed record behind the gate; a record that did not go
-- through the gate (a separate claim) makes it raise, and the attempt rolls back.
CREATE FUNCTION idemgen_insert_completed(key_hash bytea, scope_owner text, scope_operation text,
                                         scope_resource text, scope_key text,
                                         request_fingerprint text, format_version smallint,
                                         attempt_token uuid, status smallint, headers jsonb,
                                         body bytea, created_ref text, retention_secs float8)
    RETURNS void
    LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO idempotency_records
        (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
         fingerprint_version, claim_token, claimed_at, response_status, response_headers,
         response_body, resource_ref, completed_at, expires_at)
    VALUES (key_hash, scope_owner, scope_operation, scope_resource, scope_key, 'completed',
            request_fingerprint, format_version, attempt_token, clock_timestamp(), status,
            headers, body, created_ref, clock_timestamp(),
            clock_timestamp() + make_interval(secs => retention_secs))
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'idemgen: the key has a record' USING ERRCODE = 'IG003';
    END IF;
END
$$;
