//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds `migrations/` at
//! compile time, and Cargo does not see a new file there otherwise (sqlx's documented
//! build script).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
