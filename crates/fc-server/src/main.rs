//! `fc-server`: the fast-cache Redis-compatible server.

use std::net::SocketAddr;

use clap::Parser;
use fc_server::{Server, ServerConfig};
use fc_shard::EvictionPolicy;

/// The fast-cache server: Redis-compatible RESP2/RESP3 on a thread-per-core engine.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:6380", env = "FAST_CACHE_BIND")]
    bind: SocketAddr,
    /// Shards (a power of two; default: the next power of two >= cores, at least 16).
    #[arg(long, env = "FAST_CACHE_SHARDS")]
    shards: Option<usize>,
    /// Worker threads (default: one per core).
    #[arg(long, env = "FAST_CACHE_THREADS")]
    threads: Option<usize>,
    /// Password clients must AUTH with.
    #[arg(long, env = "FAST_CACHE_REQUIREPASS")]
    requirepass: Option<String>,
    /// Most simultaneous clients.
    #[arg(long, default_value_t = 10_000, env = "FAST_CACHE_MAXCLIENTS")]
    maxclients: usize,
    /// Memory budget in bytes (0 or absent: unlimited).
    #[arg(long, env = "FAST_CACHE_MAXMEMORY")]
    maxmemory: Option<u64>,
    /// What a write past maxmemory does: noeviction, allkeys-lru, allkeys-s3fifo.
    #[arg(
        long,
        default_value = "noeviction",
        env = "FAST_CACHE_MAXMEMORY_POLICY"
    )]
    maxmemory_policy: String,
    /// Data directory: enables the write-ahead log and snapshots, and loads what is there.
    #[arg(long, env = "FAST_CACHE_DATA_DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// When log frames reach the disk: always (group commit: no reply before its write is on
    /// disk), everysec, no.
    #[arg(long, default_value = "everysec", env = "FAST_CACHE_APPENDFSYNC")]
    appendfsync: String,
    /// Snapshot rules as Redis's `save`: pairs of <seconds> <changes>; "" for none.
    #[arg(
        long,
        default_value = "3600 1 300 100 60 10000",
        env = "FAST_CACHE_SAVE"
    )]
    save: String,
    /// Log segment size in bytes.
    #[arg(long, default_value_t = 64 << 20, env = "FAST_CACHE_WAL_SEGMENT_BYTES")]
    wal_segment_bytes: u64,
    /// What recovery does about damage: tolerate-tail, strict, point-in-time.
    #[arg(long, default_value = "tolerate-tail", env = "FAST_CACHE_RECOVERY")]
    recovery: String,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let defaults = ServerConfig::default();
    let Some(policy) = EvictionPolicy::from_redis_name(&cli.maxmemory_policy) else {
        anyhow::bail!(
            "--maxmemory-policy {}: expected noeviction, allkeys-lru or allkeys-s3fifo",
            cli.maxmemory_policy
        );
    };
    let Some(appendfsync) = fc_wal::FsyncPolicy::from_name(&cli.appendfsync) else {
        anyhow::bail!(
            "--appendfsync {}: expected always, everysec or no",
            cli.appendfsync
        );
    };
    let recovery = match cli.recovery.as_str() {
        "tolerate-tail" => fc_wal::RecoveryMode::TolerateTail,
        "strict" => fc_wal::RecoveryMode::Strict,
        "point-in-time" => fc_wal::RecoveryMode::PointInTime,
        other => {
            anyhow::bail!("--recovery {other}: expected tolerate-tail, strict or point-in-time")
        }
    };
    let save = fc_server::parse_save_rules(&cli.save).map_err(anyhow::Error::msg)?;
    let persistence = fc_server::PersistenceConfig {
        data_dir: cli.data_dir,
        appendfsync,
        segment_bytes: cli.wal_segment_bytes,
        save,
        recovery,
    };
    let config = ServerConfig {
        bind: cli.bind,
        shards: cli.shards.unwrap_or(defaults.shards),
        threads: cli.threads.unwrap_or(defaults.threads),
        requirepass: cli.requirepass,
        maxclients: cli.maxclients,
        maxmemory: cli.maxmemory.filter(|&b| b > 0),
        maxmemory_policy: policy,
        persistence,
    };
    let summary = match &config.persistence.data_dir {
        Some(dir) => format!(
            "{} shards on {} worker threads, persisted in {} (appendfsync {})",
            config.shards,
            config.threads,
            dir.display(),
            cli.appendfsync
        ),
        None => format!(
            "{} shards on {} worker threads, in memory only (no --data-dir)",
            config.shards, config.threads
        ),
    };
    let server = Server::start(config)?;
    eprintln!("fc-server listening on {}: {summary}", server.addr());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        anyhow::Ok(())
    })?;
    eprintln!("fc-server: shutting down");
    server.shutdown();
    Ok(())
}
