//! Developer tasks: `cargo xtask <command>`. See `cargo xtask --help`.
//!
//! - `check-deps`: fails when a workspace crate depends on a crate above or beside it (the layer
//!   rules of `docs/ARCHITECTURE.md`), or when a storage/codec crate links a runtime.

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "fast-cache developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Check the dependency rules between workspace crates (reads `cargo metadata`).
    CheckDeps,
}

/// Every library crate below the server.
const BELOW_SERVER: &[&str] = &[
    "fc-route",
    "fc-shard",
    "fc-resp",
    "fc-fcnp",
    "fc-wal",
    "fc-snapshot",
    "fc-repl",
    "fc-gpu",
];
/// Everything below the facade: the libraries and the server.
const BELOW_FACADE: &[&str] = &[
    "fc-route",
    "fc-shard",
    "fc-resp",
    "fc-fcnp",
    "fc-wal",
    "fc-snapshot",
    "fc-repl",
    "fc-gpu",
    "fc-server",
];

/// Which workspace crates each crate may depend on (normal and build dependencies). A crate
/// missing from this table fails the check: adding a crate means deciding its place.
const ALLOWED: &[(&str, &[&str])] = &[
    ("fc-route", &[]),
    ("fc-shard", &["fc-route"]),
    ("fc-resp", &[]),
    ("fc-fcnp", &["fc-route"]),
    ("fc-wal", &["fc-route", "fc-shard"]),
    ("fc-snapshot", &["fc-route", "fc-shard", "fc-wal"]),
    (
        "fc-repl",
        &["fc-route", "fc-shard", "fc-wal", "fc-snapshot"],
    ),
    ("fc-gpu", &["fc-route", "fc-shard"]),
    ("fc-server", BELOW_SERVER),
    ("fast-cache", BELOW_FACADE),
];

/// External crates that the storage and codec layers must never link (they own no runtime).
const RUNTIME_FREE: &[&str] = &["fc-route", "fc-shard", "fc-resp", "fc-fcnp", "fc-snapshot"];
const RUNTIMES: &[&str] = &["tokio", "monoio", "async-std", "smol"];

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Task::CheckDeps => check_deps(),
    }
}

fn check_deps() -> anyhow::Result<()> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let packages = meta["packages"].as_array().context("no packages")?;
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut problems = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        if name == "xtask" {
            continue;
        }
        let Some(may_use) = allowed.get(name) else {
            problems.push(format!(
                "{name}: not in xtask's layer table; add it to ALLOWED with the crates it may use"
            ));
            continue;
        };
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let dep_name = dep["name"].as_str().unwrap_or_default();
            let kind = dep["kind"].as_str().unwrap_or("normal");
            if kind == "dev" {
                continue;
            }
            if members.contains(&dep_name) && !may_use.contains(&dep_name) {
                problems.push(format!(
                    "{name} depends on {dep_name}: not allowed (may use: {may_use:?})"
                ));
            }
            if RUNTIME_FREE.contains(&name) && RUNTIMES.contains(&dep_name) {
                problems.push(format!("{name} depends on the runtime {dep_name}"));
            }
        }
    }
    if problems.is_empty() {
        println!(
            "check-deps: {} crates follow the layer rules",
            members.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("check-deps: {p}");
        }
        bail!("{} dependency rule violation(s)", problems.len())
    }
}
