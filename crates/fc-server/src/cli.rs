//! The server program's command line: flags, `FAST_CACHE_*` environment variables and the
//! `--config` file into a [`crate::ServerConfig`], logging, then the server until a signal or
//! `SHUTDOWN`. Both binaries run it: `fc-server` and the facade's `fast-cache-server`.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::Server;
use crate::config::{FastCacheConfig, Size};

/// The fast-cache server: Redis-compatible RESP2/RESP3 on a thread-per-core engine.
///
/// Settings come from flags, then `FAST_CACHE_*` environment variables, then the `--config`
/// file, then defaults (see fast-cache.toml.example).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// TOML configuration file (see fast-cache.toml.example).
    #[arg(long, env = "FAST_CACHE_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:6380].
    #[arg(long, env = "FAST_CACHE_BIND")]
    bind: Option<String>,
    /// Shards (a power of two; default: the next power of two >= cores, at least 16).
    #[arg(long, env = "FAST_CACHE_SHARDS")]
    shards: Option<usize>,
    /// Worker threads (default: one per core).
    #[arg(long, env = "FAST_CACHE_THREADS")]
    threads: Option<usize>,
    /// Password clients must AUTH with.
    #[arg(long, env = "FAST_CACHE_REQUIREPASS")]
    requirepass: Option<String>,
    /// Most simultaneous clients [default: 10000].
    #[arg(long, env = "FAST_CACHE_MAXCLIENTS")]
    maxclients: Option<usize>,
    /// Databases SELECT can name [default: 16].
    #[arg(long, env = "FAST_CACHE_DATABASES")]
    databases: Option<u32>,
    /// Milliseconds a script runs before other clients get BUSY (0: never) [default: 5000].
    #[arg(long, env = "FAST_CACHE_BUSY_REPLY_THRESHOLD")]
    busy_reply_threshold: Option<u64>,
    /// Run scripts whose keys live on several workers holding them all (true), or refuse them
    /// with CROSSSLOT as Redis Cluster does (false) [default: true].
    #[arg(long, env = "FAST_CACHE_SCRIPTS_ACROSS_WORKERS")]
    scripts_across_workers: Option<bool>,
    /// Turn transparent huge pages off for this process, as Redis's `disable-thp` (their
    /// 2 MiB first-touch faults stall a thread ~1.5 ms) [default: true].
    #[arg(long, env = "FAST_CACHE_DISABLE_THP")]
    disable_thp: Option<bool>,
    /// Seconds a client may stay idle before it is closed (0: never) [default: 0].
    #[arg(long, env = "FAST_CACHE_TIMEOUT")]
    timeout: Option<u64>,
    /// Active expiry cycles per second, as Redis's `hz` (1 to 500) [default: 10].
    #[arg(long, env = "FAST_CACHE_HZ")]
    hz: Option<u64>,
    /// Largest bulk string a request may carry: bytes or "512mb" (at least 1mb)
    /// [default: 512mb].
    #[arg(long, env = "FAST_CACHE_PROTO_MAX_BULK_LEN")]
    proto_max_bulk_len: Option<String>,
    /// Most unparsed request bytes a client may hold: bytes or "1gb" (at least 1mb)
    /// [default: 1gb].
    #[arg(long, env = "FAST_CACHE_CLIENT_QUERY_BUFFER_LIMIT")]
    client_query_buffer_limit: Option<String>,
    /// `normal <hard> <soft> <seconds>` [default: "normal 0 0 0", as Redis].
    #[arg(long, env = "FAST_CACHE_CLIENT_OUTPUT_BUFFER_LIMIT")]
    client_output_buffer_limit: Option<String>,
    /// Memory budget: bytes or "256mb", "1gb" (0: unlimited).
    #[arg(long, env = "FAST_CACHE_MAXMEMORY")]
    maxmemory: Option<String>,
    /// What a write past maxmemory does: noeviction, allkeys-lru, allkeys-s3fifo.
    #[arg(long, env = "FAST_CACHE_MAXMEMORY_POLICY")]
    maxmemory_policy: Option<String>,
    /// Data directory: enables the write-ahead log and snapshots, and loads what is there.
    #[arg(long, env = "FAST_CACHE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// When log frames reach the disk: always (group commit: no reply before its write is on
    /// disk), everysec, no [default: everysec].
    #[arg(long, env = "FAST_CACHE_APPENDFSYNC")]
    appendfsync: Option<String>,
    /// Snapshot rules as Redis's `save`: pairs of <seconds> <changes>; "" for none
    /// [default: "3600 1 300 100 60 10000"].
    #[arg(long, env = "FAST_CACHE_SAVE")]
    save: Option<String>,
    /// Log segment size: bytes or "64mb" [default: 64mb].
    #[arg(long, env = "FAST_CACHE_WAL_SEGMENT_BYTES")]
    wal_segment_bytes: Option<String>,
    /// What recovery does about damage: tolerate-tail, strict, point-in-time
    /// [default: tolerate-tail].
    #[arg(long, env = "FAST_CACHE_RECOVERY")]
    recovery: Option<String>,
    /// TLS port: a port number (on --bind's address) or an address [default: none].
    #[arg(long, env = "FAST_CACHE_TLS_PORT")]
    tls_port: Option<String>,
    /// The TLS port's certificate chain (PEM).
    #[arg(long, env = "FAST_CACHE_TLS_CERT_FILE")]
    tls_cert_file: Option<PathBuf>,
    /// The TLS port's private key (PEM).
    #[arg(long, env = "FAST_CACHE_TLS_KEY_FILE")]
    tls_key_file: Option<PathBuf>,
    /// CA certificates client certificates are checked against (PEM).
    #[arg(long, env = "FAST_CACHE_TLS_CA_CERT_FILE")]
    tls_ca_cert_file: Option<PathBuf>,
    /// Client certificates: yes (required), no, optional [default: yes].
    #[arg(long, env = "FAST_CACHE_TLS_AUTH_CLIENTS")]
    tls_auth_clients: Option<String>,
    /// TLS versions accepted [default: "TLSv1.2 TLSv1.3"].
    #[arg(long, env = "FAST_CACHE_TLS_PROTOCOLS")]
    tls_protocols: Option<String>,
    /// Serve plaintext RESP on --bind (false: the TLS port alone) [default: true].
    #[arg(long, env = "FAST_CACHE_PLAINTEXT")]
    plaintext: Option<bool>,
    /// A port for FCNP, the native binary protocol, alone, e.g. 127.0.0.1:6390 [default:
    /// none; FCNP is also served on --bind, told from RESP by its first byte].
    #[arg(long, env = "FAST_CACHE_FCNP_BIND")]
    fcnp_bind: Option<String>,
    /// One more listener per shard (RESP and FCNP), each reaching the shard's owning worker
    /// directly, for clients that route keys themselves (1/true/yes) [default: off].
    #[arg(long, env = "FAST_CACHE_DIRECT_SHARD_PORTS", value_parser = clap::builder::BoolishValueParser::new())]
    direct_shard_ports: Option<bool>,
    /// The first direct shard port; shard s listens on base + s [default: --bind's port + 1].
    #[arg(long, env = "FAST_CACHE_DIRECT_SHARD_BASE_PORT")]
    direct_shard_base_port: Option<u16>,
    /// A port for memcached's text and meta protocols on the same keyspace, e.g.
    /// 127.0.0.1:11211 [default: none]. It has no authentication, as memcached's text
    /// protocol has none.
    #[arg(long, env = "FAST_CACHE_MEMCACHED_BIND")]
    memcached_bind: Option<String>,
    /// Run the workers' connections on monoio's io_uring runtime (1/true/yes; Linux, needs
    /// the `monoio` feature) [default: tokio].
    #[arg(long, env = "FAST_CACHE_USE_MONOIO", value_parser = clap::builder::BoolishValueParser::new())]
    use_monoio: Option<bool>,
    /// How monoio workers write replies: inline, split or writev [default: inline].
    #[arg(long, env = "FAST_CACHE_MONOIO_SAFE_WRITER")]
    monoio_writer: Option<String>,
    /// The largest value the memcached port stores, as memcached's -I [default: 1mb].
    #[arg(long, env = "FAST_CACHE_MEMCACHED_ITEM_SIZE_MAX")]
    memcached_item_size_max: Option<String>,
    /// Start as a replica of this primary, host:port (its RESP port or its replication
    /// port); REPLICAOF changes it at run time [default: none].
    #[arg(long, env = "FAST_CACHE_REPLICAOF")]
    replicaof: Option<String>,
    /// A port for replicas alone, e.g. 127.0.0.1:7631 [default: none; replicas may also
    /// connect to --bind].
    #[arg(long, env = "FAST_CACHE_REPLICATION_BIND_ADDR")]
    replication_bind: Option<String>,
    /// The token replicas present and this server presents to its primary [default: the
    /// primary's requirepass].
    #[arg(long, env = "FAST_CACHE_REPLICATION_AUTH_TOKEN")]
    replication_auth_token: Option<String>,
    /// When replication batches leave: batch or immediate [default: batch].
    #[arg(long, env = "FAST_CACHE_REPLICATION_SEND_POLICY")]
    replication_send_policy: Option<String>,
    /// Replication frame compression: none or zstd [default: none].
    #[arg(long, env = "FAST_CACHE_REPLICATION_COMPRESSION")]
    replication_compression: Option<String>,
    /// ACL file: users as ACL LIST prints them, read at start, written by ACL SAVE.
    #[arg(long, env = "FAST_CACHE_ACLFILE")]
    aclfile: Option<PathBuf>,
    /// Admin HTTP port: /metrics (Prometheus), /health, /ready, e.g. 127.0.0.1:9121
    /// [default: none].
    #[arg(long, env = "FAST_CACHE_ADMIN_BIND")]
    admin_bind: Option<String>,
    /// Log verbosity, as Redis's `loglevel`: debug, verbose, notice, warning, nothing
    /// [default: notice]. `RUST_LOG` (tracing's filter syntax), when set, takes precedence.
    #[arg(long, env = "FAST_CACHE_LOGLEVEL", default_value = "notice")]
    loglevel: String,
}

/// Logs to stderr through `tracing`: `RUST_LOG` when set, else `--loglevel`.
fn init_logging(loglevel: &str) -> anyhow::Result<()> {
    use tracing_subscriber::EnvFilter;
    let level = match loglevel.to_ascii_lowercase().as_str() {
        "debug" => "trace",
        "verbose" => "debug",
        "notice" => "info",
        "warning" => "warn",
        "nothing" => "off",
        other => {
            anyhow::bail!("--loglevel {other}: expected debug, verbose, notice, warning or nothing")
        }
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::try_new(spec)?,
        _ => EnvFilter::new(level),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
    Ok(())
}

impl Cli {
    /// The file's configuration with every flag given laid over it.
    fn into_config(self) -> anyhow::Result<FastCacheConfig> {
        let mut c = match &self.config {
            Some(path) => FastCacheConfig::load_from_path(path)?,
            None => FastCacheConfig::default(),
        };
        let (server, storage, persistence) = (&mut c.server, &mut c.storage, &mut c.persistence);
        if let Some(v) = self.bind {
            server.bind = v;
        }
        if let Some(v) = self.admin_bind {
            c.admin.bind = Some(v);
        }
        if self.fcnp_bind.is_some() {
            server.fcnp_bind = self.fcnp_bind;
        }
        if self.memcached_bind.is_some() {
            server.memcached_bind = self.memcached_bind;
        }
        if let Some(v) = self.memcached_item_size_max {
            server.memcached_item_size_max = crate::config::Size::Text(v);
        }
        if let Some(v) = self.direct_shard_ports {
            server.direct_shard_ports = v;
        }
        if let Some(v) = self.use_monoio {
            server.runtime = if v { "monoio" } else { "tokio" }.into();
        }
        if let Some(v) = self.monoio_writer {
            server.monoio_writer = v;
        }
        if self.direct_shard_base_port.is_some() {
            server.direct_shard_base_port = self.direct_shard_base_port;
        }
        if self.aclfile.is_some() {
            c.acl.file = self.aclfile;
        }
        let r = &mut c.replication;
        if let Some(v) = self.replicaof {
            r.role = "replica".into();
            r.primary_addr = Some(v);
        }
        if self.replication_bind.is_some() {
            r.bind_addr = self.replication_bind;
        }
        if self.replication_auth_token.is_some() {
            r.auth_token = self.replication_auth_token;
        }
        if let Some(v) = self.replication_send_policy {
            r.send_policy = v;
        }
        if let Some(v) = self.replication_compression {
            r.compression = v;
        }
        if let Some(v) = self.plaintext {
            server.plaintext = v;
        }
        let tls = &mut c.tls;
        if let Some(v) = self.tls_port {
            tls.port = Some(crate::config::Endpoint::from_text(&v));
        }
        if self.tls_cert_file.is_some() {
            tls.cert_file = self.tls_cert_file;
        }
        if self.tls_key_file.is_some() {
            tls.key_file = self.tls_key_file;
        }
        if self.tls_ca_cert_file.is_some() {
            tls.ca_cert_file = self.tls_ca_cert_file;
        }
        if let Some(v) = self.tls_auth_clients {
            tls.auth_clients = v;
        }
        if let Some(v) = self.tls_protocols {
            tls.protocols = v;
        }
        server.threads = self.threads.or(server.threads);
        if self.requirepass.is_some() {
            server.requirepass = self.requirepass;
        }
        if let Some(v) = self.maxclients {
            server.maxclients = v;
        }
        if let Some(v) = self.databases {
            server.databases = v;
        }
        if let Some(v) = self.busy_reply_threshold {
            server.busy_reply_threshold = v;
        }
        if let Some(v) = self.scripts_across_workers {
            server.scripts_across_workers = v;
        }
        if let Some(v) = self.disable_thp {
            server.disable_thp = v;
        }
        if let Some(v) = self.timeout {
            server.timeout = v;
        }
        if let Some(v) = self.hz {
            server.hz = v;
        }
        if let Some(v) = self.proto_max_bulk_len {
            server.proto_max_bulk_len = Size::Text(v);
        }
        if let Some(v) = self.client_query_buffer_limit {
            server.client_query_buffer_limit = Size::Text(v);
        }
        if let Some(v) = self.client_output_buffer_limit {
            server.client_output_buffer_limit = v;
        }
        storage.shards = self.shards.or(storage.shards);
        if let Some(v) = self.maxmemory {
            storage.max_memory = Size::Text(v);
        }
        if let Some(v) = self.maxmemory_policy {
            storage.eviction_policy = v;
        }
        if self.data_dir.is_some() {
            persistence.data_dir = self.data_dir;
        }
        if let Some(v) = self.appendfsync {
            persistence.appendfsync = v;
        }
        if let Some(v) = self.save {
            persistence.save = v;
        }
        if let Some(v) = self.wal_segment_bytes {
            persistence.segment_bytes = Size::Text(v);
        }
        if let Some(v) = self.recovery {
            persistence.recovery = v;
        }
        Ok(c)
    }
}

/// Runs the server program as `name` (its name in `--help` and the logs): parses the command
/// line, starts the server, and stops it on `SIGINT`, `SIGTERM` or `SHUTDOWN`.
///
/// # Errors
/// A bad flag or configuration, a port that cannot be bound, or a failed start.
pub fn run(name: &'static str) -> anyhow::Result<()> {
    let matches = Cli::command().name(name).bin_name(name).get_matches();
    let cli = Cli::from_arg_matches(&matches)?;
    init_logging(&cli.loglevel)?;
    let file = cli.config.clone();
    let mut config = cli.into_config()?.server_config()?;
    config.config_file = file;
    let summary = match &config.persistence.data_dir {
        Some(dir) => format!(
            "{} shards on {} worker threads, persisted in {} (appendfsync {})",
            config.shards,
            config.threads,
            dir.display(),
            config.persistence.appendfsync.name()
        ),
        None => format!(
            "{} shards on {} worker threads, in memory only (no --data-dir)",
            config.shards, config.threads
        ),
    };
    let server = Server::start(config)?;
    tracing::info!("{name} listening on {}: {summary}", server.addr());
    if let Some(tls) = server.tls_addr() {
        tracing::info!("TLS port on {tls}");
    }
    if let Some(fcnp) = server.fcnp_addr() {
        tracing::info!("FCNP port on {fcnp}");
    }
    if let Some(repl) = server.repl_addr() {
        tracing::info!("replication port on {repl}");
    }
    if let Some(memcached) = server.memcached_addr() {
        tracing::info!("memcached port on {memcached}");
    }
    if let (Some(first), Some(last)) = (server.direct_addrs().first(), server.direct_addrs().last())
    {
        tracing::info!(
            "direct shard ports {first} to {last} (shard s on the first port + s, served by its owner)"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::warn!("received SIGINT"),
            _ = term.recv() => tracing::warn!("received SIGTERM"),
            () = server.shutdown_requested() => {}
        }
        anyhow::Ok(())
    })?;
    tracing::warn!("shutting down");
    server.shutdown();
    tracing::warn!("stopped");
    Ok(())
}
