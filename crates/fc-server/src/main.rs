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
    let config = ServerConfig {
        bind: cli.bind,
        shards: cli.shards.unwrap_or(defaults.shards),
        threads: cli.threads.unwrap_or(defaults.threads),
        requirepass: cli.requirepass,
        maxclients: cli.maxclients,
        maxmemory: cli.maxmemory.filter(|&b| b > 0),
        maxmemory_policy: policy,
    };
    let summary = format!(
        "{} shards on {} worker threads, in memory only (no persistence configured)",
        config.shards, config.threads
    );
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
