#!/usr/bin/env bash
# The generated code (server modules and clients) of the two public specs in ../shared/realspecs
# (marked and fixed in temporary copies by prep.py) and of the example, compiled in one fresh crate
# as private modules with
# `cargo clippy -- -D warnings`. Prints each spec's check summary, generated lines and the clippy
# result. Needs python3 with PyYAML. Third-party specs stay in ../shared.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
shared=${SHARED:-$root/../shared/realspecs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q --release -p idemgen
idemgen=$root/target/release/idemgen
python3 bench/realspecs/prep.py "$shared/adyen/TransferService-v4.yaml" "$work/adyen.json"
python3 bench/realspecs/prep.py "$shared/moderntreasury/mt_openapi_spec_v1.yaml" "$work/mt.json"
mkdir -p "$work/crate/src"
for name in adyen mt; do
  "$idemgen" check "$work/$name.json" | tail -1
  "$idemgen" build "$work/$name.json" --out "$work/crate/src/$name" >/dev/null
  "$idemgen" client "$work/$name.json" --out "$work/crate/src/${name}_client" >/dev/null
  echo "$name: $(wc -l < "$work/crate/src/$name/mod.rs") generated lines, client $(wc -l < "$work/crate/src/${name}_client/mod.rs")"
done
cp -r examples/widgets/src/api "$work/crate/src/widgets"
cp -r examples/widgets/src/client "$work/crate/src/widgets_client"
cat > "$work/crate/Cargo.toml" <<TOML
[package]
name = "realspecs"
version = "0.0.0"
edition = "2024"
[dependencies]
axum = "0.8"
chrono = { version = "0.4", default-features = false, features = ["clock", "serde", "std"] }
http = "1"
idemgen-client = { path = "$root/client" }
idemgen-runtime = { path = "$root/runtime", features = ["client"] }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
uuid = { version = "1", features = ["serde"] }
[workspace]
TOML
cat > "$work/crate/src/main.rs" <<'RS'
//! The generated modules, private, as a binary crate includes them.
#[rustfmt::skip] mod adyen;
#[rustfmt::skip] mod adyen_client;
#[rustfmt::skip] mod mt;
#[rustfmt::skip] mod mt_client;
#[rustfmt::skip] mod widgets;
#[rustfmt::skip] mod widgets_client;
fn main() {}
RS
cp Cargo.lock "$work/crate/Cargo.lock"
(cd "$work/crate" && CARGO_TARGET_DIR=$root/target cargo clippy -q -- -D warnings) \
  && echo "clippy -D warnings: clean"
