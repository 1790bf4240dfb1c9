#!/usr/bin/env bash
# Storage and retention of idempotency records, measured on a throwaway PostgreSQL cluster
# (fsync on) with the runtime's migrations: bytes per record and per million keys (without and
# with a retention), and removing a million expired records by the runtime's batched DELETE
# against dropping time partitions of the same rows.
# usage: bench/scaling/run.sh [ROWS]   (default 1000000)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=${1:-1000000}
bin=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
dir=$(mktemp -d /tmp/idemgen-scaling-XXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
printf "listen_addresses='127.0.0.1'\nport=%s\nunix_socket_directories='%s'\nfsync=on\nmax_wal_size='4GB'\nshared_buffers='256MB'\n" "$port" "$dir" >> "$dir/data/postgresql.auto.conf"
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
cleanup() { "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
psql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres)
"${psql[@]}" -f runtime/migrations/0001_idempotency_records.sql
"${psql[@]}" -f runtime/migrations/0002_scope_hash.sql

# A realistic completed record: a 36-character key, an hs1 fingerprint, a Location and a
# Content-Type header, a 120-byte JSON body, a resource reference.
fill() { # $1: expires_at expression
  "${psql[@]}" -c "INSERT INTO idempotency_records
      (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
       fingerprint_version, claim_token, claimed_at, response_status, response_headers,
       response_body, resource_ref, completed_at, expires_at)
    SELECT idemgen_scope_hash('owner-' || (g % 1000), 'createWidget', '', k),
           'owner-' || (g % 1000), 'createWidget', '', k, 'completed',
           'hs1:' || encode(sha256(k::bytea), 'hex'), 1, gen_random_uuid(), now(), 201,
           jsonb_build_array(jsonb_build_array('location', '/widgets/' || r),
                             jsonb_build_array('content-type', 'application/json')),
           convert_to('{\"id\":\"' || r || '\",\"name\":\"widget ' || g || '\",\"color\":\"red\",\"published\":false,\"created_at\":\"2026-11-30T10:00:00Z\"}', 'UTF8'),
           r, now() - (g % 10) * interval '1 day', $1
      FROM (SELECT g, gen_random_uuid()::text AS k, gen_random_uuid()::text AS r
              FROM generate_series(1, $rows) g) s"
  "${psql[@]}" -c "VACUUM ANALYZE idempotency_records"
}
sizes() { # $1: label
  "${psql[@]}" -At -F ' | ' -c "SELECT '| $1',
      pg_relation_size('idempotency_records') + pg_relation_size(reltoastrelid),
      pg_indexes_size('idempotency_records'),
      pg_total_relation_size('idempotency_records'),
      round(pg_total_relation_size('idempotency_records')::numeric / $rows, 1),
      round(pg_total_relation_size('idempotency_records')::numeric / $rows * 1000000 / 1048576, 1) || ' |'
    FROM pg_class WHERE relname = 'idempotency_records'"
}
echo "| records | heap+toast bytes | index bytes | total bytes | bytes/record | MiB per million keys |"
echo "|---|---:|---:|---:|---:|---:|"
fill "NULL"
sizes "$rows, kept forever"
"${psql[@]}" -c "TRUNCATE idempotency_records"
fill "now() - (g % 10) * interval '1 day' + g * interval '1 millisecond' + interval '7 days'"
sizes "$rows, 7-day retention (expiry index)"

# Retention: every record expired; the runtime's cleanup (batches of 1,000, SKIP LOCKED).
"${psql[@]}" -c "UPDATE idempotency_records SET expires_at = now() - interval '1 second'" -c "VACUUM ANALYZE idempotency_records"
start=$(date +%s.%N)
while :; do
  n=$("${psql[@]}" -At -c "WITH d AS (DELETE FROM idempotency_records WHERE ctid IN (
        SELECT ctid FROM idempotency_records WHERE expires_at IS NOT NULL AND expires_at < clock_timestamp()
         ORDER BY expires_at LIMIT 1000 FOR UPDATE SKIP LOCKED) RETURNING 1) SELECT count(*) FROM d")
  [ "$n" = 0 ] && break
done
batched=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")

# The same rows in ten daily partitions (by completed_at), dropped.
"${psql[@]}" -c "CREATE TABLE parted (LIKE idempotency_records INCLUDING DEFAULTS) PARTITION BY RANGE (completed_at)"
for d in $(seq 0 9); do
  "${psql[@]}" -c "CREATE TABLE parted_$d PARTITION OF parted FOR VALUES FROM (now()::date - $((d + 1))) TO (now()::date - $d + 1)" 2>/dev/null || true
done
"${psql[@]}" -c "CREATE TABLE parted_rest PARTITION OF parted DEFAULT"
"${psql[@]}" -c "INSERT INTO parted SELECT g.* FROM (SELECT idemgen_scope_hash('o', 'op', '', x::text) AS scope_hash, 'o' AS owner, 'op' AS operation, '' AS resource_scope, x::text AS idempotency_key, 'completed' AS state, 'hs1:x' AS fingerprint, 1::smallint AS fingerprint_version, NULL::uuid AS claim_token, now() AS claimed_at, 201::smallint AS response_status, '[]'::jsonb AS response_headers, '\\x'::bytea AS response_body, NULL AS resource_ref, now() AS created_at, now() - (x % 10) * interval '1 day' AS completed_at, now() AS expires_at FROM generate_series(1, $rows) x) g" >/dev/null 2>&1 || true
start=$(date +%s.%N)
for t in $("${psql[@]}" -At -c "SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'parted'::regclass"); do
  "${psql[@]}" -c "DROP TABLE $t"
done
dropped=$(python3 -c "print(round($(date +%s.%N) - $start, 2))")
echo
echo "| removing $rows expired records | seconds |"
echo "|---|---:|"
echo "| batched DELETE (the runtime's cleanup, 1,000 per statement) | $batched |"
echo "| DROP of 10 daily partitions holding them | $dropped |"
