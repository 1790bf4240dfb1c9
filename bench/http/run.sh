#!/usr/bin/env bash
# The widgets service's HTTP path under wrk (Debian package `wrk`): a read (the HTTP floor), the
# create without idempotency (`POST /plain/widgets`, a bench-only route: the same handler through
# the same pipeline in one transaction), idempotent creates (fresh keys) and replays (retries of
# completed keys), against a throwaway PostgreSQL cluster with fsync on.
# Usage: [WIDGETS_STRATEGY=in-transaction] [RUST_LOG=info] [WIDGETS_METRICS=off] bench/http/run.sh [seconds] [connections]
# (the server's log goes to a file beside the cluster, deleted with it; RUST_LOG defaults to warn)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
conns=${2:-16}
command -v wrk >/dev/null || { echo "wrk missing: apt-get install -y wrk" >&2; exit 2; }
bin=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
dir=$(mktemp -d /tmp/idemgen-http-XXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
printf "listen_addresses='127.0.0.1'\nport=%s\nunix_socket_directories='%s'\nfsync=on\nmax_connections=200\n" "$port" "$dir" >> "$dir/data/postgresql.auto.conf"
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
cleanup() { kill "${server:-0}" 2>/dev/null || true; "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
psql -q -h 127.0.0.1 -p "$port" -U postgres -c "CREATE DATABASE widgets" >/dev/null
cargo build -q --release -p widgets --features bench-plain-route
listen_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DATABASE_URL="postgres://postgres@127.0.0.1:$port/widgets" WIDGETS_LISTEN="127.0.0.1:$listen_port" \
  WIDGETS_POOL_SIZE=$((conns + 4)) RUST_LOG="${RUST_LOG:-warn}" target/release/widgets >"$dir/server.log" &
server=$!
url="http://127.0.0.1:$listen_port"
for _ in $(seq 100); do curl -s -o /dev/null -H 'Authorization: Bearer tok1' "$url/widgets" && break; sleep 0.1; done
# Complete the 100 keys the replay run retries, and one widget for the read floor.
for k in $(seq 0 99); do
  curl -s -o /dev/null -X POST "$url/widgets" -H 'Authorization: Bearer tok1' -H "Idempotency-Key: replay-$k" \
    -H 'Content-Type: application/json' -d '{"name":"bench"}'
done
WIDGET_ID=$(curl -s -X POST "$url/widgets" -H 'Authorization: Bearer tok1' -H 'Idempotency-Key: floor' \
  -H 'Content-Type: application/json' -d '{"name":"floor"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
export WIDGET_ID
for scenario in plain plain_create create replay; do
  echo "== $scenario ($conns connections, ${secs}s)"
  wrk -t2 -c"$conns" -d"${secs}s" --latency -s "bench/http/$scenario.lua" "$url" | grep -E "Requests/sec|  50%|  99%|Non-2xx|Socket errors"
done
echo "== widgets rows: $(psql -tA -h 127.0.0.1 -p "$port" -U postgres -d widgets -c 'SELECT count(*) FROM widgets')"
