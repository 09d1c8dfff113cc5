//! `cargo xtask fuzz`: the decoders' cargo-fuzz targets (RESP requests and replies, the WAL's
//! payloads and recovery, FCNP requests and responses, FCRP replication frames), each for a bounded time.
//!
//! Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). Seeds are
//! committed under `<crate>/fuzz/seeds/<target>/`; the corpus libFuzzer grows lives in
//! `target/fuzz-corpus/<target>/` (kept between runs, never committed); a failing input is
//! written to `<crate>/fuzz/artifacts/<target>/` and reproduced with
//! `cargo +nightly fuzz run <target> <file>` from the crate directory.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

/// Every fuzz target: (crate directory, target name).
const TARGETS: &[(&str, &str)] = &[
    ("crates/fc-resp", "request_parser"),
    ("crates/fc-resp", "reply_decoder"),
    ("crates/fc-wal", "wal_replay"),
    ("crates/fc-fcnp", "fcnp_request"),
    ("crates/fc-fcnp", "fcnp_response"),
    ("crates/fc-repl", "fcrp_frames"),
];

#[derive(clap::Args)]
pub(crate) struct FuzzArgs {
    /// Targets to run (comma-separated); default: all of them.
    #[arg(long, value_delimiter = ',')]
    targets: Vec<String>,
    /// Seconds per target (CI runs a short smoke; run longer by hand, e.g. 3600).
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Largest input libFuzzer generates, in bytes.
    #[arg(long, default_value_t = 8192)]
    max_len: usize,
    /// List the targets and exit.
    #[arg(long)]
    list: bool,
}

pub(crate) fn fuzz(args: FuzzArgs) -> anyhow::Result<()> {
    if args.list {
        for (dir, name) in TARGETS {
            println!("{name}\t{dir}/fuzz");
        }
        return Ok(());
    }
    for wanted in &args.targets {
        if !TARGETS.iter().any(|(_, name)| name == wanted) {
            bail!("unknown fuzz target {wanted:?}; `cargo xtask fuzz --list` shows them");
        }
    }
    let probe = nightly_cargo().args(["fuzz", "--version"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        bail!(
            "cargo-fuzz on the nightly toolchain is needed: `rustup toolchain install nightly` \
             and `cargo install cargo-fuzz --locked`"
        );
    }
    let root = crate::bench::workspace_root()?;
    for (dir, name) in TARGETS {
        if !args.targets.is_empty() && !args.targets.iter().any(|t| t == name) {
            continue;
        }
        let crate_dir = root.join(dir);
        let corpus: PathBuf = root.join("target/fuzz-corpus").join(name);
        std::fs::create_dir_all(&corpus)
            .with_context(|| format!("creating {}", corpus.display()))?;
        let seeds = crate_dir.join("fuzz/seeds").join(name);
        println!("==> fuzz {name} for {} s ({dir}/fuzz)", args.seconds);
        let status = nightly_cargo()
            .current_dir(&crate_dir)
            .args(["fuzz", "run", name])
            // One build folder for every fuzz crate, under the workspace's target/ (shared
            // dependencies are built once, and CI's build cache keeps it).
            .arg("--target-dir")
            .arg(root.join("target/fuzz"))
            .arg(&corpus)
            .arg(&seeds)
            .arg("--")
            .arg(format!("-max_total_time={}", args.seconds))
            .arg(format!("-max_len={}", args.max_len))
            .args(["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"])
            .status()
            .with_context(|| format!("running cargo fuzz run {name}"))?;
        if !status.success() {
            bail!(
                "fuzz target {name} failed ({status}); the input is under {dir}/fuzz/artifacts/{name}/"
            );
        }
    }
    Ok(())
}

/// `cargo +nightly`, through rustup's proxy, without the pinned toolchain this xtask runs under.
fn nightly_cargo() -> Command {
    let mut cmd = Command::new("cargo");
    cmd.arg("+nightly")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("RUSTDOC")
        .env_remove("CARGO");
    cmd
}
