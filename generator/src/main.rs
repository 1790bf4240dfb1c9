//! The `idemgen` command line.
fn main() -> anyhow::Result<()> {
    Ok(())
}
