#!/usr/bin/env bash
# The widgets service's HTTP path under wrk (Debian package `wrk`), for both stores (`PgStore` on
# sqlx, `TokioPgStore` on tokio-postgres: WIDGETS_STORE) and both executor strategies:
# a read (the HTTP floor), the create without idempotency (`POST /plain/widgets`, a bench-only
# route: the same handler through the same pipeline in one transaction), idempotent creates
# (fresh keys) and replays (retries of completed keys), against a throwaway PostgreSQL cluster
# with fsync on (one database per store and strategy). Each scenario is named with its store
# after it (`idempotent_create_sqlx`, `replay_tokio_postgres`, …).
#
# Usage: [STORES="sqlx tokio-postgres"] [STRATEGIES="separate-claim in-transaction"]
#        [DELAYS="0 0.5 1"] [RUST_LOG=info]
#        [WIDGETS_METRICS=off] [WIDGETS_BIN=path] [JSON=path] [PERF_DIR=dir] [PG_SOCKET=tcp|unix]
#        [PG_STATEMENTS=1] [ROUNDS=n] bench/http/run.sh [seconds] [connections]
#
# DELAYS: the database across a network. For each one-way delay (milliseconds) the service
# reaches PostgreSQL through idemgen-delay-proxy, which holds every byte that long in each
# direction and counts round trips (server answers following the client's words); each
# scenario then reports its round trips per request, and a last table its p50/p99 per delay.
# Unset: the service talks to PostgreSQL directly, and round trips are not counted.
#
# Prints each wrk run, then a table per store and strategy: req/s, p50, p99, the create's ratio
# to the plain create (on the same store) and the replay's ratio to the read. Writes the results as JSON in idemgen-bench's
# shape (`{"scenarios":[{"name","clients","throughput_rps","p50_ms","p99_ms",...}]}`, default
# target/bench/http.json) and an SVG chart of req/s and p99 per scenario beside it (same name,
# `.svg`; bench/http/chart.py). WIDGETS_BIN runs a prebuilt binary instead of building one (for
# A/B runs of two builds); PERF_DIR records `perf record -a` (cpu-clock) of each wrk run there
# (with PERF_SERVICE=1, the service's process alone with DWARF call graphs). PG_STATEMENTS=1 loads
# pg_stat_statements and prints, after each wrk run, the statements PostgreSQL ran during it: calls,
# execution and planning µs per call, WAL bytes per call (where PostgreSQL's CPU goes).
# ROUNDS=n (default 1) runs the four scenarios n times in turn on each service and database,
# and reports each figure as the median of the rounds, each ratio (taken within a round) as its
# median with its range: on a shared machine one run's ratio moves by 0.05-0.1, a median of five
# much less. The JSON entries then carry `rounds` and each round's req/s and ratios.
# WIDGETS_STRATEGY (one strategy) is still honoured when STRATEGIES is unset. The server's log
# goes to a file beside the cluster, deleted with it; RUST_LOG defaults to warn.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-10}
conns=${2:-16}
strategies=${STRATEGIES:-${WIDGETS_STRATEGY:-separate-claim in-transaction}}
stores=${STORES:-sqlx tokio-postgres}
json=${JSON:-target/bench/http.json}
rounds=${ROUNDS:-1}
command -v wrk >/dev/null || { echo "wrk missing: apt-get install -y wrk" >&2; exit 2; }
bin=$(dirname "$(readlink -f "$(command -v initdb || ls /usr/lib/postgresql/*/bin/initdb | tail -1)")")
dir=$(mktemp -d /tmp/idemgen-http-XXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; as_pg=(runuser -u postgres --); fi
# CPU ticks (user + system, 1/100 s) so far of the service and of every PostgreSQL process of the
# cluster, one "pid ticks" line each: the CPU a request costs, apart from wrk's and the
# neighbours' load, which throughput on a shared machine is not.
cpu_ticks() {
  local pm pid
  pm=$(head -1 "$dir/data/postmaster.pid")
  for pid in "$1" "$pm" $(ps -o pid= --ppid "$pm"); do
    [ -r "/proc/$pid/stat" ] && awk -v p="$pid" '{sub(/^.*\) /, ""); print p, $12 + $13}' "/proc/$pid/stat" 2>/dev/null
  done
  return 0
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
printf "listen_addresses='127.0.0.1'\nport=%s\nunix_socket_directories='%s'\nfsync=on\nmax_connections=200\n" "$port" "$dir" >> "$dir/data/postgresql.auto.conf"
[ -n "${PG_STATEMENTS:-}" ] && printf "shared_preload_libraries='pg_stat_statements'\npg_stat_statements.track_planning=on\n" >> "$dir/data/postgresql.auto.conf"
# The statements of the last wrk run, per call (PG_STATEMENTS=1).
statements() {
  psql -X -q -h 127.0.0.1 -p "$port" -U postgres -d "$1" -c "
    SELECT calls, round((total_exec_time * 1000 / calls)::numeric, 1) AS exec_us,
           round((total_plan_time * 1000 / calls)::numeric, 1) AS plan_us,
           wal_bytes / calls AS wal_bytes, left(regexp_replace(query, '\s+', ' ', 'g'), 80) AS statement
      FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls >= 100
     ORDER BY total_exec_time DESC LIMIT 8"
}
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
server=
cleanup() {
  local status=$?
  if [ "$status" != 0 ]; then
    # What failed, before the evidence goes with the cluster's directory.
    echo "run.sh: failed (exit $status); the ends of the service's and PostgreSQL's logs:" >&2
    tail -n 20 "$dir"/server-*.log "$dir/log" >&2 2>/dev/null || true
  fi
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null || true
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo "run.sh: line $LINENO: exit $?" >&2' ERR
if [ -n "${WIDGETS_BIN:-}" ]; then
  widgets=$WIDGETS_BIN
else
  cargo build -q --release -p widgets --features bench-plain-route
  widgets=target/release/widgets
fi
delays=${DELAYS:-direct}
proxy=target/release/idemgen-delay-proxy
[ "$delays" = direct ] || cargo build -q --release -p idemgen-bench --bin idemgen-delay-proxy
proxy_pid=
# The proxy's counters: "<round trips> <connections>".
proxy_stats() { python3 -c 'import socket, sys; print(socket.create_connection(("127.0.0.1", int(sys.argv[1]))).makefile().readline().strip())' "$1"; }
[ -n "${PERF_DIR:-}" ] && mkdir -p "$PERF_DIR"
for store in $stores; do
for strategy in $strategies; do
  config="$store-$strategy"
  db="widgets_${store//-/_}_${strategy//-/_}"
  psql -q -h 127.0.0.1 -p "$port" -U postgres -c "CREATE DATABASE $db" >/dev/null
  # PG_SOCKET=unix: the service reaches PostgreSQL over its Unix socket instead of TCP loopback.
  if [ "${PG_SOCKET:-tcp}" = unix ]; then direct_url="postgres://postgres@localhost:$port/$db?host=$dir"; else direct_url="postgres://postgres@127.0.0.1:$port/$db"; fi
  listen_port=$(free_port)
  url="http://127.0.0.1:$listen_port"
  # Starts the service on PostgreSQL at $1 and waits until it answers.
  start_service() {
    DATABASE_URL="$1" WIDGETS_LISTEN="127.0.0.1:$listen_port" \
      WIDGETS_STORE="$store" WIDGETS_STRATEGY="$strategy" WIDGETS_POOL_SIZE=$((conns + 4)) \
      RUST_LOG="${RUST_LOG:-warn}" "$widgets" >>"$dir/server-$config.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do curl -s -o /dev/null -H 'Authorization: Bearer tok1' "$url/widgets" && break; sleep 0.1; done
  }
  start_service "$direct_url"
  # Tables of a service in production, not empty ones: 100,000 completed records (another owner)
  # and widgets, vacuumed and analyzed (so autovacuum does not visit them during the runs). On a table of a few pages the planner prefers a sequential scan, and a
  # generic plan sqlx's statements cache then keeps it while the run grows the table (a
  # separate-claim create went from 306–335 to 511–662 µs of PostgreSQL CPU when the 101 set-up
  # records were analyzed before the run; migration 0004 now keeps autovacuum from doing that).
  psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" >/dev/null <<'SQL'
INSERT INTO widgets (id, owner, name, color, created_at)
SELECT gen_random_uuid(), 'user-' || (i % 1000), 'existing ' || i, NULL, now() - i * interval '1 s'
  FROM generate_series(1, 100000) i;
INSERT INTO idempotency_records
    (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
     fingerprint_version, claim_token, claimed_at, response_status, response_headers,
     response_body, resource_ref, completed_at, expires_at)
SELECT sha256(convert_to('existing-' || i, 'UTF8')), 'user-' || (i % 1000), 'createWidget', '',
       'existing-' || i, 'completed', 'hs2:' || encode(sha256(convert_to('f' || i, 'UTF8')), 'hex'), 1,
       gen_random_uuid(), now(), 201, '[["location", "/widgets/x"]]'::jsonb,
       convert_to(repeat('x', 120), 'UTF8'), '/widgets/' || i, now(), NULL
  FROM generate_series(1, 100000) i;
VACUUM (ANALYZE);
SQL
  # Complete the 100 keys the replay run retries, and one widget for the read floor.
  for k in $(seq 0 99); do
    curl -s -o /dev/null -X POST "$url/widgets" -H 'Authorization: Bearer tok1' -H "Idempotency-Key: replay-$k" \
      -H 'Content-Type: application/json' -d '{"name":"bench"}'
  done
  WIDGET_ID=$(curl -s -X POST "$url/widgets" -H 'Authorization: Bearer tok1' -H 'Idempotency-Key: floor' \
    -H 'Content-Type: application/json' -d '{"name":"floor"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  export WIDGET_ID
  for delay in $delays; do
  if [ "$delay" != direct ]; then
    kill "$server"; wait "$server" 2>/dev/null || true
    proxy_port=$(free_port); stats_port=$(free_port)
    "$proxy" --listen "127.0.0.1:$proxy_port" --upstream "127.0.0.1:$port" --one-way-ms "$delay" \
      --stats "127.0.0.1:$stats_port" &
    proxy_pid=$!
    for _ in $(seq 100); do proxy_stats "$stats_port" >/dev/null 2>&1 && break; sleep 0.05; done
    start_service "postgres://postgres@127.0.0.1:$proxy_port/$db"
  fi
  for round in $(seq "$rounds"); do
  for scenario in plain plain_create create replay; do
    run="$config-$delay-$scenario-r$round"
    echo "== $store $strategy $scenario, database delay $delay ($conns connections, ${secs}s, round $round of $rounds)"
    # The previous scenario's dirty buffers written first, so its checkpoint work does not run
    # (and count as PostgreSQL CPU) in this one.
    psql -q -h 127.0.0.1 -p "$port" -U postgres -d "$db" -c "CHECKPOINT" >/dev/null
    sleep 1
    perf_pid=
    if [ -n "${PERF_DIR:-}" ]; then
      # PERF_SERVICE=1: the service alone, with DWARF call graphs (for the frames' callers).
      if [ -n "${PERF_SERVICE:-}" ]; then target=(-p "$server" --call-graph dwarf,16384 -F 299); else target=(-a -F 999); fi
      perf record -q "${target[@]}" -e cpu-clock -o "$PERF_DIR/$run.data" -- sleep "$secs" 2>/dev/null &
      perf_pid=$!
    fi
    [ "$delay" = direct ] || proxy_stats "$stats_port" > "$dir/$run.rt0"
    cpu_ticks "$server" > "$dir/$run.cpu0"
    echo "$server" > "$dir/$run.pid"
    [ -n "${PG_STATEMENTS:-}" ] && psql -q -h 127.0.0.1 -p "$port" -U postgres -d "$db" \
      -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset()" >/dev/null
    wrk -t2 -c"$conns" -d"${secs}s" --latency -s "bench/http/$scenario.lua" "$url" > "$dir/$run.wrk"
    [ -n "${PG_STATEMENTS:-}" ] && statements "$db"
    cpu_ticks "$server" > "$dir/$run.cpu1"
    [ "$delay" = direct ] || proxy_stats "$stats_port" > "$dir/$run.rt1"
    [ -n "$perf_pid" ] && wait "$perf_pid"
    grep -E "Requests/sec|  50%|  99%|Non-2xx|Socket errors" "$dir/$run.wrk"
  done
  done
  if [ "$delay" != direct ]; then
    kill "$server"; wait "$server" 2>/dev/null || true; server=
    kill "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true; proxy_pid=
    start_service "$direct_url"
  fi
  done
  echo "== $store $strategy widgets rows written by the runs: $(psql -tA -h 127.0.0.1 -p "$port" -U postgres -d "$db" -c "SELECT count(*) FROM widgets WHERE owner NOT LIKE 'user-%'")"
  kill "$server"; wait "$server" 2>/dev/null || true; server=
done
done
mkdir -p "$(dirname "$json")"
python3 - "$dir" "$json" "$secs" "$conns" "$delays" "$stores" "$rounds" $strategies <<'PY'
import json, re, statistics, sys
d, out, secs, conns, delays, stores, rounds, strategies = (
    sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(),
    sys.argv[6].split(), int(sys.argv[7]), sys.argv[8:])
unit = {"us": 1e-3, "ms": 1.0, "s": 1e3}
def ticks(path):
    return {p: int(t) for p, t in (line.split() for line in open(path) if line.strip())}
def cpu_us(base, service_pid, requests):
    before, after = ticks(base + ".cpu0"), ticks(base + ".cpu1")
    spent = {p: t - before.get(p, 0) for p, t in after.items()}
    service = spent.pop(service_pid, 0)
    us = lambda t: t * 1e4 / max(requests, 1)
    return us(service), us(sum(spent.values()))
def round_trips(base, requests):
    try:
        before, after = (int(open(base + ext).read().split()[0]) for ext in (".rt0", ".rt1"))
    except FileNotFoundError:
        return None
    return (after - before) / max(requests, 1)
def wrk(base):
    text = open(base + ".wrk").read()
    def lat(p):
        m = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        return float(m.group(1)) * unit[m.group(2)] if m else None
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    service_pid = open(base + ".pid").read().strip()
    service_us, pg_us = cpu_us(base, service_pid, requests)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return {"throughput_rps": rps, "p50_ms": lat(50), "p99_ms": lat(99), "requests": requests,
            "service_cpu_us_per_request": service_us, "postgres_cpu_us_per_request": pg_us,
            "round_trips_per_request": round_trips(base, requests),
            "non_2xx": int(non2xx.group(1)) if non2xx else 0}
names = {"plain": "get_widget", "plain_create": "plain_create", "create": "idempotent_create",
         "replay": "replay"}
scenarios = []
for store in stores:
    tag = store.replace("-", "_")
    for strategy in strategies:
        for delay in delays:
            # One dict per round per scenario; ratios are taken within a round, against that
            # round's floors, then the median of the rounds is reported with their range.
            per_round = [{s: wrk(f"{d}/{store}-{strategy}-{delay}-{s}-r{n}") for s in names}
                         for n in range(1, rounds + 1)]
            for runs in per_round:
                get = runs["plain"]["throughput_rps"]
                plain = runs["plain_create"]["throughput_rps"]
                for r in runs.values():
                    r["ratio_to_plain"] = r["throughput_rps"] / plain
                    r["ratio_to_get"] = r["throughput_rps"] / get
            where = "directly" if delay == "direct" else f"through {delay} ms each way"
            times = "" if rounds == 1 else f", median of {rounds} rounds"
            print(f"\n{store}, {strategy}, PostgreSQL {where} ({conns} connections, {secs:g} s each{times})\n")
            print("| scenario | req/s | p50 ms | p99 ms | × plain create | × GET | round trips/req "
                  "| CPU µs/req service | CPU µs/req PostgreSQL |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            def ratio(values):
                m = statistics.median(values)
                return f"{m:.2f}" if rounds == 1 else f"{m:.2f} ({min(values):.2f}–{max(values):.2f})"
            for s, name in names.items():
                each = [runs[s] for runs in per_round]
                def med(key):
                    values = [x[key] for x in each if x[key] is not None]
                    return statistics.median(values) if values else None
                r = {key: med(key) for key in each[0] if key != "non_2xx"}
                r["non_2xx"] = sum(x["non_2xx"] for x in each)
                r.update(name=f"{name}_{tag}", store=store, strategy=strategy, clients=conns,
                         one_way_delay_ms=None if delay == "direct" else float(delay), rounds=rounds)
                if rounds > 1:
                    r["per_round"] = [{k: x[k] for k in ("throughput_rps", "p50_ms", "p99_ms",
                                                         "ratio_to_plain", "ratio_to_get")}
                                      for x in each]
                scenarios.append(r)
                rt = r["round_trips_per_request"]
                print(f"| {r['name']} | {r['throughput_rps']:.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
                      f"| {ratio([x['ratio_to_plain'] for x in each])} "
                      f"| {ratio([x['ratio_to_get'] for x in each])} "
                      f"| {'-' if rt is None else f'{rt:.2f}'} "
                      f"| {r['service_cpu_us_per_request']:.0f} | {r['postgres_cpu_us_per_request']:.0f} |"
                      + (f" ({r['non_2xx']} non-2xx)" if r["non_2xx"] else ""))
if len(delays) > 1 or delays != ["direct"]:
    print(f"\nLatency by database delay (one way), p50 / p99 ms\n")
    print("| strategy | scenario | " + " | ".join(f"{x} ms" for x in delays) + " |")
    print("|---|---|" + "---:|" * len(delays))
    for store in stores:
        tag = store.replace("-", "_")
        for strategy in strategies:
            for name in names.values():
                cells = []
                for delay in delays:
                    r = next(x for x in scenarios if x["strategy"] == strategy
                             and x["name"] == f"{name}_{tag}"
                             and x["one_way_delay_ms"] == (None if delay == "direct" else float(delay)))
                    cells.append(f"{r['p50_ms']:.2f} / {r['p99_ms']:.2f}")
                print(f"| {strategy} | {name}_{tag} | " + " | ".join(cells) + " |")
json.dump({"bench": "http", "seconds_per_run": secs, "scenarios": scenarios}, open(out, "w"), indent=2)
PY
python3 bench/http/chart.py "$json" "${json%.json}.svg"
echo "wrote $json and ${json%.json}.svg"
