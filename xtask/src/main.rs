//! Developer tasks: `cargo xtask <command>`. See `cargo xtask --help`.

fn main() -> anyhow::Result<()> {
    Ok(())
}
