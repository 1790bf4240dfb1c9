#!/usr/bin/env bash
# Generated-code size and compile cost, per spec: generated lines, structs and enums, aliases,
# non-incremental `cargo check` time of the generated module alone in a fresh crate (its
# dependencies built first, not timed) and rustc's peak memory. Specs: the public ones in
# ../shared/realspecs, unmarked, as published (read from ../shared, never copied into the
# repository; PayPal's with `header = "PayPal-Request-Id"`), and the widgets example.
#
# usage: bench/types/run.sh [BASE-REV]
#   With BASE-REV (e.g. a commit before a change), that revision's idemgen and runtime are
#   measured too, in the same run, spec by spec beside the working tree's: ratios between the
#   two rows are what to quote on this shared, noisy machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
shared=${SHARED:-$root/../shared/realspecs}
work=$(mktemp -d)
cleanup() {
  [[ -d $work/base ]] && git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
export CARGO_INCREMENTAL=0
specs=("adyen=$shared/adyen/TransferService-v4.yaml"
       "adyen-checkout=$shared/adyen/CheckoutService-v71.yaml"
       "moderntreasury=$shared/moderntreasury/mt_openapi_spec_v1.yaml"
       "paypal=$shared/paypal/checkout_orders_v2.json"
       "widgets=$root/examples/widgets/openapi.yaml")
# The key header of specs that name their own.
header_of() { [[ $1 == paypal ]] && echo "PayPal-Request-Id" || true; }

# A crate that compiles one generated module against the runtime of `$2` (a source tree).
prepare() {
  local label=$1 tree=$2 crate=$work/crate-$1
  mkdir -p "$crate/src"
  cat > "$crate/Cargo.toml" <<TOML
[package]
name = "typesbench-$label"
version = "0.0.0"
edition = "2024"
[dependencies]
axum = "0.8"
chrono = { version = "0.4", default-features = false, features = ["clock", "serde", "std"] }
http = "1"
idemgen-runtime = { path = "$tree/runtime" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
uuid = { version = "1", features = ["serde"] }
[workspace]
TOML
  cp "$tree/Cargo.lock" "$crate/Cargo.lock"
  echo '//! empty' > "$crate/src/lib.rs"
  (cd "$crate" && CARGO_TARGET_DIR=$work/target-$label cargo check -q)   # not timed
}

# One row: generate `$3` with `$2`'s idemgen, then check it in `$1`'s crate.
measure() {
  local label=$1 idemgen=$2 name=$3 spec=$4 crate=$work/crate-$1
  rm -rf "$crate/src/api" "$work/spec"
  # A temporary copy: build writes idemgen.lock beside the spec.
  mkdir -p "$work/spec" && cp "$spec" "$work/spec/"
  local header
  header=$(header_of "$name")
  [[ -n $header ]] && printf 'header = "%s"\n' "$header" > "$work/spec/idemgen.toml"
  "$idemgen" build "$work/spec/$(basename "$spec")" --out "$crate/src/api" >/dev/null 2>"$work/build.err" \
    || { cat "$work/build.err"; exit 1; }
  local module=$crate/src/api/mod.rs
  local lines types aliases secs kb load
  /usr/bin/time -f '%e' -o "$work/load" "$idemgen" check "$work/spec/$(basename "$spec")" >/dev/null 2>&1 || true
  load=$(tail -1 "$work/load")
  lines=$(wc -l < "$module")
  types=$(grep -cE '^    pub (struct|enum) ' "$module" || true)
  aliases=$(grep -cE '^    pub type ' "$module" || true)
  printf '//! bench\n#[rustfmt::skip]\npub mod api;\n' > "$crate/src/lib.rs"
  /usr/bin/time -f '%e %M' -o "$work/time" \
    bash -c "cd '$crate' && CARGO_TARGET_DIR='$work/target-$label' cargo check -q" 2>"$work/check.err" \
    || { cat "$work/check.err"; exit 1; }
  read -r secs kb < "$work/time"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$name" "$label" "$load" "$lines" "$types" "$aliases" "$secs" "$((kb / 1024))"
}

cargo build -q --release -p idemgen
prepare current "$root"
labels=("current=$root/target/release/idemgen")
if [[ $# -ge 1 ]]; then
  git worktree add -q --detach "$work/base" "$1"
  CARGO_TARGET_DIR=$work/target-build-base cargo build -q --release -p idemgen \
    --manifest-path "$work/base/Cargo.toml"
  prepare base "$work/base"
  labels=("base=$work/target-build-base/release/idemgen" "${labels[@]}")
fi

printf '| spec | idemgen | check s | generated lines | structs+enums | aliases | cargo check s | peak rustc MB |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|\n'
for entry in "${specs[@]}"; do
  for tool in "${labels[@]}"; do
    measure "${tool%%=*}" "${tool#*=}" "${entry%%=*}" "${entry#*=}"
  done
done
