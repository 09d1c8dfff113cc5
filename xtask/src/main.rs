//! Developer tasks: `cargo xtask <command>`. See `cargo xtask --help`.
//!
//! - `check-deps`: fails when a workspace crate depends on a crate above or beside it (the layer
//!   rules of `docs/ARCHITECTURE.md`), when a storage/codec crate links a runtime, or when
//!   fc-server's modules import each other in a circle.
//! - `bench`: the embedded benchmark matrix against DashMap, Moka, lru and quick_cache, and
//!   bytes-per-entry rows (`--memory`); writes `bench-matrix/<run-id>/`.
//! - `hitratio`: hit ratios of the eviction policies against Moka, quick_cache and lru.
//! - `bench-server`: fc-server against redis-server over TCP (`server.csv`), with durability rows.
//! - `bench-wal`: fc-wal append bandwidth against `dd` (`wal.csv`).
//! - `bench-restart`: restart time with keys on disk, fc-server against Redis (`restart.csv`).
//! - `fuzz`: the codec crates' cargo-fuzz targets for a bounded time each (nightly + cargo-fuzz).

use std::collections::BTreeMap;
use std::process::Command;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

mod bench;
mod charts;
mod diff_redis;
mod fuzz;
mod gpu_bench;
mod hitratio;
mod module_cycles;
mod persist_bench;
mod progress;
mod server_bench;

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
    /// Run the embedded benchmark matrix (or, with --memory, bytes per entry).
    Bench(Box<bench::BenchArgs>),
    /// Hit ratios of the eviction policies against Moka, quick_cache and lru on Zipf, scan and
    /// loop workloads (writes `bench-matrix/<run-id>/hitratio.csv`).
    Hitratio(hitratio::HitRatioArgs),
    /// fc-server against redis-server (when installed): same settings, pinning and load, GET/SET/
    /// 80-20 at pipelines 1/16/64 (writes `bench-matrix/<run-id>/server.csv`); `--persistence`
    /// adds appendfsync everysec/always rows.
    BenchServer(Box<server_bench::ServerBenchArgs>),
    /// fc-wal append bandwidth against `dd` writing the same bytes, in the same run
    /// (writes `bench-matrix/<run-id>/wal.csv`).
    BenchWal(persist_bench::WalBenchArgs),
    /// Restart time with 1M keys on disk: fc-server (snapshot + WAL tail) against Redis
    /// loading an RDB of the same keys (writes `bench-matrix/<run-id>/restart.csv`).
    BenchRestart(persist_bench::RestartArgs),
    /// Host↔device throughput of session batches of KV-cache chunks through fc-gpu against one
    /// contiguous pinned copy and the naive path (needs an NVIDIA GPU; writes
    /// `bench-matrix/<run-id>/gpu.csv`); `--build-only` builds the binary to carry.
    BenchGpu(gpu_bench::GpuBenchArgs),
    /// Native replication: a primary's SET throughput and CPU with 0, 1 and 2 replicas,
    /// zstd on and off, replica lag, catch-up of 1M keys from snapshots (against
    /// `redis-server --replicaof` in the same run) and from the backlog →
    /// bench-matrix/<run>/repl.csv.
    BenchRepl(server_bench::repl::ReplBenchArgs),
    /// fc-server's worker runtimes A/B: tokio (the default) against monoio (io_uring) with
    /// each reply writer, GET and SET at pipelines 1, 16, 64, same binary and pinning →
    /// bench-matrix/<run>/runtime.csv.
    BenchRuntime(server_bench::runtime::RuntimeBenchArgs),
    /// The fc-server test suite on the monoio runtime (`cargo test -p fc-server --features
    /// monoio` with `FAST_CACHE_USE_MONOIO=1`), once per reply writer asked for.
    TestMonoio(TestMonoioArgs),
    /// Run the cargo-fuzz targets (fc-resp's request parser and reply decoder) for a bounded time.
    Fuzz(fuzz::FuzzArgs),
    /// Kill -9 durability soak: the fc-server binary with a data directory, writers, SIGKILL at
    /// random moments, restart, every acknowledged write checked (CI runs 20 cycles).
    Crash(CrashArgs),
    /// Replication chaos soak: a primary with a data directory and a replica (the fc-server
    /// binary), writers of every type, and links cut, replicas and primaries killed with
    /// SIGKILL at random moments; `DEBUG DIGEST` must agree once writes stop (CI runs 6).
    ReplChaos(CrashArgs),
    /// Differential test against a real redis-server (installed when missing): the same seeded
    /// random command sequences to both, replies compared byte for byte after the
    /// normalizations docs/REDIS-COMPAT.md documents; fails on any mismatch.
    DiffRedis(diff_redis::DiffRedisArgs),
    /// Draw a run's SVG charts again from its CSVs (`embedded.csv`, `server.csv`,
    /// `hitratio.csv`): `<run>/charts/*.svg`, listed in `<run>/charts.md`.
    Charts {
        /// The run directory (`bench-matrix/<run-id>`).
        dir: std::path::PathBuf,
    },
    /// Internal: one memory measurement in a fresh process (used by `bench --memory`).
    #[command(hide = true)]
    BenchMemoryChild(bench::MemoryChildArgs),
}

/// The workspace crates each crate may use directly, plus (transitively) whatever those may use.
/// A crate missing from this table fails the check: adding a crate means deciding its place.
const ALLOWED: &[(&str, &[&str])] = &[
    ("fc-route", &[]),
    ("fc-shard", &["fc-route"]),
    ("fc-resp", &[]),
    ("fc-fcnp", &["fc-route"]),
    ("fc-wal", &["fc-shard"]),
    ("fc-snapshot", &["fc-wal"]),
    ("fc-repl", &["fc-snapshot"]),
    ("fc-config", &["fc-resp", "fc-wal"]),
    ("fc-gpu", &["fc-shard"]),
    (
        "fc-server",
        &["fc-config", "fc-resp", "fc-fcnp", "fc-repl", "fc-gpu"],
    ),
    ("fc-client", &["fc-fcnp", "fc-route"]),
    ("fast-cache", &["fc-server", "fc-client", "fc-gpu"]),
];

/// `name`'s allowed workspace dependencies, closed over the table.
fn allowed_closure(name: &str) -> Option<Vec<&'static str>> {
    let table: BTreeMap<&str, &[&'static str]> = ALLOWED.iter().copied().collect();
    let mut out: Vec<&'static str> = Vec::new();
    let mut stack: Vec<&'static str> = table.get(name)?.to_vec();
    while let Some(dep) = stack.pop() {
        if !out.contains(&dep) {
            out.push(dep);
            stack.extend(table.get(dep).copied().unwrap_or_default());
        }
    }
    out.sort_unstable();
    Some(out)
}

/// External crates that the storage and codec layers must never link (they own no runtime).
const RUNTIME_FREE: &[&str] = &[
    "fc-route",
    "fc-shard",
    "fc-resp",
    "fc-fcnp",
    "fc-wal",
    "fc-snapshot",
    "fc-repl",
    "fc-gpu",
    "fc-config",
];
const RUNTIMES: &[&str] = &["tokio", "monoio", "async-std", "smol"];

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Task::CheckDeps => check_deps(),
        Task::Charts { dir } => charts::for_run(&dir).map(|drawn| {
            eprintln!(
                "charts: {} drawn in {}",
                drawn.len(),
                dir.join("charts").display()
            );
        }),
        Task::Bench(args) => bench::bench(*args),
        Task::BenchMemoryChild(args) => bench::memory_child(args),
        Task::Fuzz(args) => fuzz::fuzz(args),
        Task::Hitratio(args) => hitratio::hitratio(args),
        Task::Crash(args) => soak("crash", "FC_CRASH_CYCLES", args.cycles),
        Task::ReplChaos(args) => soak("repl_chaos", "FC_REPL_CHAOS_CYCLES", args.cycles),
        Task::DiffRedis(args) => diff_redis::diff_redis(&args),
        Task::BenchServer(args) => server_bench::bench_server(*args),
        Task::BenchWal(args) => persist_bench::bench_wal(args),
        Task::BenchRestart(args) => persist_bench::bench_restart(args),
        Task::BenchGpu(args) => gpu_bench::bench_gpu(&args),
        Task::BenchRepl(args) => server_bench::repl::bench_repl(args),
        Task::BenchRuntime(args) => server_bench::runtime::bench_runtime(args),
        Task::TestMonoio(args) => test_monoio(&args),
    }
}

#[derive(clap::Args)]
struct TestMonoioArgs {
    /// Reply writers to run the suite with (inline, split, writev).
    #[arg(long, value_delimiter = ',', default_value = "inline,split,writev")]
    writers: Vec<String>,
    /// Test targets of fc-server to run (`--test NAME` each); all of them when absent.
    #[arg(long, value_delimiter = ',')]
    tests: Vec<String>,
}

/// `cargo xtask test-monoio`: fc-server's tests with every server they start on monoio.
fn test_monoio(args: &TestMonoioArgs) -> anyhow::Result<()> {
    let root = bench::report::workspace_root()?;
    for writer in &args.writers {
        if !matches!(writer.as_str(), "inline" | "split" | "writev") {
            anyhow::bail!("test-monoio: unknown writer {writer} (inline, split, writev)");
        }
        eprintln!("test-monoio: fc-server's tests on monoio, writer {writer}");
        let mut cmd =
            std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["test", "-p", "fc-server", "--features", "monoio"])
            .current_dir(&root)
            .env("FAST_CACHE_USE_MONOIO", "1")
            .env("FAST_CACHE_MONOIO_SAFE_WRITER", writer);
        for test in &args.tests {
            cmd.args(["--test", test]);
        }
        if !cmd.status()?.success() {
            anyhow::bail!("test-monoio: the tests failed on monoio with writer {writer}");
        }
    }
    Ok(())
}

#[derive(clap::Args)]
struct CrashArgs {
    /// Kill/restart cycles.
    #[arg(long, default_value_t = 200)]
    cycles: usize,
}

/// Runs the soak test `crates/fc-server/tests/<test>.rs` (release build) with `cycles` in the
/// environment variable `var`.
fn soak(test: &str, var: &str, cycles: usize) -> anyhow::Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--release",
            "-p",
            "fc-server",
            "--test",
            test,
            "--",
            "--nocapture",
        ])
        .env(var, cycles.to_string())
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("the {test} soak failed");
    }
    Ok(())
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
    let packages = meta["packages"].as_array().context("no packages")?;
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut problems = Vec::new();
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        if name == "xtask" {
            continue;
        }
        let Some(may_use) = allowed_closure(name) else {
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
    // Inside fc-server: no import circle between its modules (each job a layer).
    let server_src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/fc-server/src");
    let graph = module_cycles::module_graph(&server_src)?;
    for circle in module_cycles::cycles(&graph) {
        problems.push(format!(
            "fc-server modules import each other in a circle: {}",
            circle.join(" -> ")
        ));
    }
    if problems.is_empty() {
        println!(
            "check-deps: {} crates follow the layer rules; fc-server's {} modules import no circle",
            members.len(),
            graph.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("check-deps: {p}");
        }
        bail!("{} dependency rule violation(s)", problems.len())
    }
}
