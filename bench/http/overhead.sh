#!/usr/bin/env bash
# What metrics and tracing cost on the HTTP path, under wrk: bench/http/run.sh alternately with
# "off" (RUST_LOG=off, WIDGETS_METRICS=off: no recorder, no span or line built) and "on"
# (RUST_LOG=info, the Prometheus recorder: every span, an INFO line per request written to the
# server's log file, every counter and histogram), A/B/A/B, each run on a fresh cluster.
# Prints each run's requests/s per scenario, then the on/off ratio per scenario (median, min,
# max over the pairs). On a shared machine the spread is the honest part of the figure.
# Usage: bench/http/overhead.sh [pairs] [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs=${1:-3}
secs=${2:-5}
conns=${3:-16}
out=$(mktemp -d /tmp/idemgen-overhead-XXXX)
trap 'rm -rf "$out"' EXIT
for i in $(seq "$pairs"); do
  for setting in off on; do
    if [ "$setting" = off ]; then log=off; metrics=off; else log=info; metrics=on; fi
    STRATEGIES=separate-claim RUST_LOG=$log WIDGETS_METRICS=$metrics JSON="$out/$i-$setting.json" \
      bench/http/run.sh "$secs" "$conns" > "$out/$i-$setting.txt"
    echo "== pair $i, $setting: $(grep -E '^==|Requests/sec' "$out/$i-$setting.txt" | grep -v rows | paste -sd' ' | sed 's/== separate-claim //g; s/Requests\/sec://g')"
  done
done
python3 - "$out" "$pairs" <<'PY'
import re, sys, statistics
out, pairs = sys.argv[1], int(sys.argv[2])
def rates(path):
    scenario, found = None, {}
    for line in open(path):
        m = re.match(r"== \S+ (\w+) \(", line)
        if m: scenario = m.group(1)
        m = re.match(r"Requests/sec:\s+([\d.]+)", line)
        if m and scenario: found[scenario] = float(m.group(1))
    return found
runs = [(rates(f"{out}/{i}-off.txt"), rates(f"{out}/{i}-on.txt")) for i in range(1, pairs + 1)]
for scenario in runs[0][0]:
    ratios = sorted(on[scenario] / off[scenario] for off, on in runs)
    print(f"{scenario}: on/off {statistics.median(ratios):.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f}, {pairs} pairs)")
PY
