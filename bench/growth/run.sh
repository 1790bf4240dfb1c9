#!/usr/bin/env bash
# `idemgen check` beside Spectral (the same idempotency rules, bench/growth/spectral.yaml) on the
# growth benchmark's synthetic specs (after printing its own table) and on the public specs in
# ../shared/realspecs, in one run:
# CPU seconds (user + system) and peak RSS of each, from /usr/bin/time.
#
#   bash bench/growth/run.sh                 # sizes 250,500,1000,2000
#   SPECTRAL=/path/to/spectral bash bench/growth/run.sh
#
# Spectral comes from npm (`npm install @stoplight/spectral-cli`); the script says so and stops
# when it is missing. It needs GNU time (`apt-get install -y time`).
set -euo pipefail
cd "$(dirname "$0")/../.."
spectral=${SPECTRAL:-$(command -v spectral || true)}
if [ -z "$spectral" ]; then
  echo "bench/growth: spectral not found; install it with 'npm install -g @stoplight/spectral-cli' or set SPECTRAL" >&2
  exit 2
fi
if [ ! -x /usr/bin/time ]; then
  echo "bench/growth: /usr/bin/time missing; apt-get install -y time" >&2
  exit 2
fi
keep=$(mktemp -d)
trap 'rm -rf "$keep"' EXIT
cargo build -q --release -p idemgen
# The growth table itself (time and peak RSS per size, exponents), then the comparison.
IDEMGEN_GROWTH_KEEP="$keep" cargo bench -q -p idemgen --bench growth
echo
ruleset=$PWD/bench/growth/spectral.yaml
measure() { # label, spec
  local a b
  # idemgen ten times in a row (its runs are shorter than the timer's 10 ms resolution), Spectral once.
  /usr/bin/time -o "$keep/t1" -f "%U %S %M" sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do "$0" check "$1" >/dev/null 2>&1; done' target/release/idemgen "$2" || true
  /usr/bin/time -o "$keep/t2" -f "%U %S %M" "$spectral" lint --quiet --ruleset "$ruleset" "$2" >/dev/null 2>&1 || true
  a=$(tail -1 "$keep/t1")
  b=$(tail -1 "$keep/t2")
  awk -v label="$1" -v a="$a" -v b="$b" 'BEGIN {
    split(a, x, " "); split(b, y, " ");
    ic = (x[1] + x[2]) / 10; sc = y[1] + y[2];
    printf "| %s | %.3f | %.0f | %.2f | %.0f | %.0fx |\n", label, ic, x[3] / 1024, sc, y[3] / 1024, (ic > 0 ? sc / ic : 0)
  }'
}
echo "| spec | idemgen check CPU s | MB | Spectral CPU s | MB | Spectral / idemgen |"
echo "|---|---:|---:|---:|---:|---:|"
for family in schemas operations allof files; do
  for dir in $(ls -d "$keep/$family"-* | sort -t- -k2 -n); do
    measure "$(basename "$dir")" "$dir/openapi.yaml"
  done
done
for spec in ../shared/realspecs/*/*.yaml ../shared/realspecs/*/*.json; do
  [ -f "$spec" ] && measure "$(basename "$spec")" "$spec"
done
