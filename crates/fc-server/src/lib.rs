//! # fc-server — the fast-cache Redis-compatible server
//!
//! **Owns:** the runtime (one single-threaded runtime per worker thread: tokio's, or with the
//! `monoio` feature and `FAST_CACHE_USE_MONOIO=1` monoio's io_uring one, see `rt`), the listener,
//! connections, the command table (`command/table.rs`: every command's name, arity, Redis 7
//! flags, ACL categories, key positions, docs and route; `command/sub_table.rs`: the same for
//! each container's subcommands; `COMMAND` is generated from both),
//! the store handlers (`command/`: one module per family, generic over a reply sink, so a
//! protocol is a sink plus an edge), and `INFO`/`CONFIG`. Workers own shards exclusively (a
//! `LocalEmbeddedStore` each: no lock on the hot path); a command for a key of another
//! worker's shard travels to it by message and its typed reply comes back the same way;
//! multi-key commands split by key and merge typed replies in order; pipelined commands are all
//! executed before one write of all replies. Modules by job, lowest first: `stats` (per-worker
//! command statistics, the clock), `reply`, `command`, `observe` (slow log, latency monitor,
//! `MONITOR` lines), `pause` (`CLIENT PAUSE`), `tracking` (client-side caching's table and
//! invalidations), `shared`, `worker`, `save`, `cross` (fan-out, merges, transactions' held
//! workers), `info`, `client_modes` (a connection's tracking, reply and pause commands),
//! `session` (a client's state and the connection-level commands), `conn` (the socket loop);
//! `cargo xtask check-deps` fails on an import circle among them.
//!
//! **Must not depend on:** anything above it; it is the top of the workspace but for the
//! facade.
//!
//! Built: connection commands (PING, ECHO, HELLO 2/3 with AUTH/SETNAME, AUTH, SELECT, QUIT,
//! RESET, CLIENT LIST/INFO/KILL/SETNAME/GETNAME/ID/SETINFO/UNBLOCK/PAUSE/UNPAUSE/REPLY/
//! NO-EVICT/NO-TOUCH, client-side caching (CLIENT TRACKING/CACHING/GETREDIR/TRACKINGINFO:
//! `tracking`), COMMAND (subcommands nested, listed and described as Redis 7's), INFO, TIME, CONFIG GET/SET/RESETSTAT/REWRITE, SHUTDOWN, SLOWLOG,
//! LATENCY, MONITOR, DEBUG SLEEP/DIGEST/OBJECT/SET-ACTIVE-EXPIRE/ERROR/LOG, INFO commandstats,
//! errorstats and latencystats; every INFO section and field Redis 7 prints, MODULE,
//! PFDEBUG/PFSELFTEST), strings, keys and TTLs, hashes, lists, sets, sorted sets, streams,
//! HyperLogLog, GEO, bitmaps, SORT, DUMP/RESTORE, blocking commands, pub/sub, keyspace
//! notifications, databases (SELECT 0..`databases`, keys rewritten by `command::into_db`), the
//! SCAN family, MULTI/EXEC/DISCARD/WATCH/UNWATCH (atomic across workers: `EXEC` holds every worker
//! its commands and watched keys touch), MSETNX across workers, `requirepass`, `maxclients`,
//! `maxmemory` with an eviction policy, the idle timeout, output limits, persistence (`--data-dir`),
//! the TOML configuration ([`config::FastCacheConfig`]), active expiry (`hz`), logs through
//! `tracing` and graceful shutdown, scripting (`script`), ACL users (`acl`), the TLS port
//! (`tls`), the admin HTTP port (`admin`), native replication and the WAL TCP export
//! (`repl`, `repl_links`, `export`), FCNP and direct shard ports (`fcnp`), the memcached port
//! (`memcache`).
//!
//! ## Example
//! ```no_run
//! use fc_server::{Server, ServerConfig};
//!
//! let server = Server::start(ServerConfig {
//!     bind: "127.0.0.1:0".parse()?,
//!     ..ServerConfig::default()
//! })?;
//! println!("listening on {}", server.addr());
//! server.shutdown();
//! # Ok::<(), anyhow::Error>(())
//! ```

mod acl;
#[cfg(feature = "telemetry")]
mod admin;
mod blocked;
mod blocking;
mod busy;
pub mod cli;
mod client_modes;
mod clients;
mod command;
mod conn;
mod cross;
mod edge;
mod export;
mod fcnp;
mod info;
mod knobs;
mod mc_meta;
mod memcache;
mod multi;
mod notify;
mod observe;
mod parked;
mod pause;
mod persist;
mod process;
mod pubsub;
mod repl;
mod repl_links;
mod reply;
mod rt;
mod save;
mod script;
mod scripts;
mod session;
mod shared;
mod socket;
mod stats;
#[cfg(feature = "tls")]
mod tls;
mod tracking;
mod txn;
#[cfg(feature = "monoio")]
mod uring;
mod watched;
mod worker;

/// A worker thread's stack.
const WORKER_STACK: usize = 16 << 20;
pub use fc_config::{
    MIN_PROTOCOL_LIMIT, OutputLimit, PersistenceConfig, ReplicationConfig, ServerConfig,
    TcpExportConfig, TlsAuthClients, TlsConfig, TlsProtocol, parse_save_rules, parse_size,
};

/// The TOML configuration (fc-config's, re-exported: `fc_server::config::FastCacheConfig`).
pub mod config {
    pub use fc_config::{
        AdminSection, ConfigError, Endpoint, FastCacheConfig, MonoioWriter, PersistenceSection,
        Problem, ReplicationSection, Runtime, ServerSection, Size, StorageSection,
        TcpExportSection, TlsSection, parse_recovery,
    };
}

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fc_shard::EmbeddedStore;
use fc_wal::{RecoveryMode, WalConfig};
use tokio::sync::{mpsc, watch};

use crate::shared::{Job, Shared};

/// The Redis version the server reports (clients such as redis-py and go-redis gate features on
/// it; every command this server has behaves as Redis 7.2's).
pub const REDIS_VERSION: &str = "7.2.0";

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    admin_addr: Option<SocketAddr>,
    fcnp_addr: Option<SocketAddr>,
    memcached_addr: Option<SocketAddr>,
    repl_addr: Option<SocketAddr>,
    direct_addrs: Vec<SocketAddr>,
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    inboxes: Vec<mpsc::UnboundedSender<Job>>,
    shared: Arc<Shared>,
    background: Option<(Arc<AtomicBool>, Vec<JoinHandle<()>>)>,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("workers", &self.inboxes.len())
            .field("persistent", &self.shared.persist.is_some())
            .finish_non_exhaustive()
    }
}

/// The global allocator `INFO` names (`mem_allocator`), set by the program that chose it.
static ALLOCATOR: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Names the process's global allocator for `INFO`'s `mem_allocator` (the fc-server binary
/// says `mimalloc`; unset, it is `libc`). The first name set stays.
pub fn set_allocator_name(name: &'static str) {
    let _ = ALLOCATOR.set(name);
}

/// The global allocator's name for `INFO`.
pub(crate) fn allocator_name() -> &'static str {
    ALLOCATOR.get().copied().unwrap_or("libc")
}

/// The server.
#[derive(Debug)]
pub struct Server;

impl Server {
    /// Binds the listener and starts the workers and the acceptor.
    ///
    /// # Errors
    /// An unusable shard or thread count, or the address cannot be bound.
    pub fn start(config: ServerConfig) -> anyhow::Result<ServerHandle> {
        let threads = config.threads.clamp(1, config.shards.max(1));
        rt::check(config.runtime)?;
        if config.disable_thp {
            // Process-wide, and checked at each page fault: memory mapped before (the
            // allocator's arenas, which it marks `MADV_HUGEPAGE`) is faulted in 4 KiB pages
            // from here on.
            if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
                tracing::warn!("could not turn transparent huge pages off: {e}");
            }
        }
        let (stop, mut stopped) = watch::channel(false);
        // The admin port answers `/health` (and `/ready`: 503) while the data loads.
        #[cfg(feature = "telemetry")]
        let admin = config
            .admin_bind
            .map(|bind| admin::start(bind, stopped.clone()))
            .transpose()?;
        #[cfg(not(feature = "telemetry"))]
        if config.admin_bind.is_some() {
            anyhow::bail!("the admin port (admin_bind) needs fc-server's telemetry feature");
        }
        // Certificates are read first: a bad file stops the start before any data loads.
        #[cfg(feature = "tls")]
        let tls_acceptor = config.tls.as_ref().map(tls::acceptor).transpose()?;
        #[cfg(not(feature = "tls"))]
        if config.tls.is_some() {
            anyhow::bail!("a TLS port needs fc-server's tls feature");
        }
        if !config.plaintext && config.tls.is_none() {
            anyhow::bail!("no port to serve: plaintext is off and there is no TLS port");
        }
        // Users: the default one (requirepass its password), then the ACL file's.
        let acl = acl::Acl::new(config.requirepass.as_deref(), config.acl_file.clone())?;
        let board = Arc::new(watched::WatchBoard::new(config.shards));
        let mut builder = EmbeddedStore::builder(config.shards)
            .eviction_policy(config.maxmemory_policy)
            // Databases: a name is on the same shard in every database.
            .route_mode(fc_shard::EmbeddedRouteMode::Namespaced);
        if let Some(bytes) = config.maxmemory {
            builder = builder.max_memory(bytes);
        }
        let blocked = Arc::new(blocked::Blocked::new(threads));
        let pubsub = Arc::new(pubsub::PubSub::new(config.pubsub_output_limit));
        let notifier = Arc::new(notify::Notifier::new(Arc::clone(&pubsub)));
        let tracking = Arc::new(tracking::Tracking::new(Arc::clone(&pubsub), threads));
        let source = Arc::new(repl::Source::new(
            config.shards,
            threads,
            &config.replication,
        ));
        let sink = txn::ServerSink::new(
            Arc::clone(&board),
            Arc::clone(&blocked),
            Arc::clone(&notifier),
            Arc::clone(&tracking),
            Arc::clone(&source),
            config.shards,
            threads,
        );
        let (store, persist, sink) = open_store(builder, sink, &config, threads)?;
        source.note_sequences(store.stats_snapshot().shards.iter().map(|s| s.mutation_seq));
        if config.replication.enabled {
            source.enable();
        }
        let router = *store.router();
        let stores = store.try_into_local_stores(threads)?;
        // Function libraries (`FUNCTION LOAD`) are kept beside the log and snapshots.
        let scripts = Arc::new(scripts::Registry::new(
            config.busy_reply_threshold_ms,
            config
                .persistence
                .data_dir
                .as_ref()
                .map(|d| d.join("functions.rdb")),
        ));
        let codes = scripts.saved_codes().map_err(anyhow::Error::msg)?;
        let loaded = script::restore_libraries(&scripts, &codes).map_err(anyhow::Error::msg)?;
        if loaded > 0 {
            tracing::info!("{loaded} function libraries loaded");
        }
        let bind = |at: SocketAddr| -> anyhow::Result<std::net::TcpListener> {
            let listener = std::net::TcpListener::bind(at)
                .map_err(|e| anyhow::anyhow!("cannot listen on {at}: {e}"))?;
            listener.set_nonblocking(true)?;
            Ok(listener)
        };
        let listener = config.plaintext.then(|| bind(config.bind)).transpose()?;
        let tls_listener = config.tls.as_ref().map(|t| bind(t.bind)).transpose()?;
        let tls_addr = tls_listener.as_ref().map(|l| l.local_addr()).transpose()?;
        let addr = match &listener {
            Some(l) => l.local_addr()?,
            None => tls_addr.unwrap_or(config.bind),
        };
        let fcnp_listener = config.fcnp_bind.map(bind).transpose()?;
        let repl_listener = config.replication.bind.map(bind).transpose()?;
        let repl_addr = repl_listener
            .as_ref()
            .map(std::net::TcpListener::local_addr)
            .transpose()?;
        let memcached_listener = config.memcached_bind.map(bind).transpose()?;
        let memcached_addr = memcached_listener
            .as_ref()
            .map(std::net::TcpListener::local_addr)
            .transpose()?;
        let fcnp_addr = fcnp_listener
            .as_ref()
            .map(std::net::TcpListener::local_addr)
            .transpose()?;
        // Direct shard ports: shard `s` on base + s, its connections for the worker that owns
        // it (`s % threads`). An ephemeral `bind` (port 0) gives ephemeral direct ports too.
        let mut direct = Vec::new();
        if let Some(base) = config.direct_shard_ports {
            let base = match base {
                Some(base) => u32::from(base),
                None if config.bind.port() == 0 => 0,
                None => u32::from(addr.port()) + 1,
            };
            for shard in 0..config.shards {
                let port = if base == 0 { 0 } else { base + shard as u32 };
                let port = u16::try_from(port).map_err(|_| {
                    anyhow::anyhow!("direct shard port {port} (shard {shard}) is above 65535")
                })?;
                let listener = bind(SocketAddr::new(config.bind.ip(), port))?;
                direct.push((listener, shard % threads));
            }
        }
        let direct_addrs = direct
            .iter()
            .map(|(l, _)| l.local_addr())
            .collect::<std::io::Result<Vec<_>>>()?;
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..threads).map(|_| mpsc::unbounded_channel()).unzip();
        let (shutdown_request, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            router,
            workers: threads,
            inboxes: senders.clone(),
            live: shared::Live::new(&config),
            registry: clients::Clients::new(),
            board,
            pubsub,
            notifier,
            blocked,
            sink,
            expiry: (0..threads)
                .map(|_| shared::ExpiryStats::default())
                .collect(),
            max_output_buffer: AtomicU64::new(0),
            shutdown_request,
            observe: observe::Observe::new(
                observe::Settings {
                    slower_than: config.slowlog_log_slower_than,
                    max_len: config.slowlog_max_len,
                    latency_ms: config.latency_monitor_threshold,
                },
                stats::Ticks::new(),
            ),
            run_id: shared::random_hex_id(),
            rejected_connections: AtomicU64::new(0),
            memcached: mc_meta::McStats::default(),
            replid: shared::random_hex_id(),
            repl: repl::Repl::new(
                source,
                config.replication.clone(),
                config.requirepass.as_deref(),
            ),
            metrics: shared::Metrics::default(),
            tracking,
            pause: pause::Pause::new(),
            scripts,
            acl,
            #[cfg(feature = "tls")]
            tls: tls_acceptor,
            config,
            started: Instant::now(),
            started_unix: fc_snapshot::unix_ms() / 1000,
            clients: AtomicUsize::new(0),
            connections: AtomicU64::new(0),
            next_client_id: AtomicU64::new(0),
            port: if listener.is_some() { addr.port() } else { 0 },
            persist,
        });
        let mut handles = Vec::new();
        for (index, (store, inbox)) in stores.into_iter().zip(receivers).enumerate() {
            let shared = Arc::clone(&shared);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("fc-worker-{index}"))
                    // Room for a script's nested values, converted one level per frame
                    // (reserved, not committed: untouched pages cost nothing).
                    .stack_size(WORKER_STACK)
                    .spawn(move || {
                        let run = std::panic::AssertUnwindSafe(|| {
                            worker::run(index, store, shared, inbox, conn::serve);
                        });
                        if std::panic::catch_unwind(run).is_err() {
                            // A dead shard must never go unnoticed.
                            tracing::error!("worker {index} panicked; exiting");
                            std::process::exit(70);
                        }
                    })?,
            );
        }
        // A replica that restarts resumes from the watermarks its log ended on.
        shared.repl.recover_marks(shared.persist.as_deref());
        // A server configured as a replica is one from its first client on (`ROLE`, `INFO
        // replication`, `READONLY`): the replication thread, started next, takes the request
        // to follow from its queue.
        if let Some((host, port)) = shared
            .repl
            .config
            .replica_of
            .as_deref()
            .and_then(repl::split_addr)
        {
            shared.repl.start_following(Some((host, port)));
        }
        handles.push(repl_links::start(
            Arc::clone(&shared),
            repl_listener,
            stopped.clone(),
        )?);
        #[cfg(feature = "telemetry")]
        let admin_addr = admin.map(|(admin, addr, thread)| {
            admin.ready(Arc::clone(&shared));
            handles.push(thread);
            tracing::info!("admin port (/metrics, /health, /ready) on http://{addr}");
            addr
        });
        #[cfg(not(feature = "telemetry"))]
        let admin_addr = None;
        let accept_shared = Arc::clone(&shared);
        handles.push(
            std::thread::Builder::new()
                .name("fc-acceptor".into())
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("the acceptor's runtime");
                    runtime.block_on(async move {
                        let open = |l: Option<std::net::TcpListener>| {
                            l.and_then(|l| tokio::net::TcpListener::from_std(l).ok())
                        };
                        let (listener, tls_listener) = (open(listener), open(tls_listener));
                        // The FCNP port and the direct shard ports: a task each.
                        let extra = fcnp_listener
                            .map(|l| (l, None, Accepted { fcnp: true, ..Accepted::PLAIN }))
                            .into_iter()
                            .chain(memcached_listener.map(|l| {
                                (l, None, Accepted { memcached: true, ..Accepted::PLAIN })
                            }))
                            .chain(direct.into_iter().map(|(l, w)| (l, Some(w), Accepted::PLAIN)));
                        for (listener, pinned, how) in extra {
                            let Some(listener) = open(Some(listener)) else {
                                continue;
                            };
                            let (shared, mut stopped) =
                                (Arc::clone(&accept_shared), stopped.clone());
                            tokio::spawn(async move {
                                let mut next = 0;
                                loop {
                                    tokio::select! {
                                        accepted = listener.accept() => {
                                            let Ok((stream, _)) = accepted else { continue };
                                            let how = Accepted { pinned, ..how };
                                            accept(&shared, stream, &mut next, how).await;
                                        }
                                        _ = stopped.changed() => break,
                                    }
                                }
                            });
                        }
                        let mut next = 0;
                        let mut tick = tokio::time::interval(Duration::from_millis(100));
                        let mut ticks = 0u64;
                        loop {
                            tokio::select! {
                                accepted = accept_on(listener.as_ref()) => {
                                    let Ok((stream, _)) = accepted else { continue };
                                    accept(&accept_shared, stream, &mut next, Accepted::PLAIN).await;
                                }
                                accepted = accept_on(tls_listener.as_ref()) => {
                                    let Ok((stream, _)) = accepted else { continue };
                                    let how = Accepted { tls: true, ..Accepted::PLAIN };
                                    accept(&accept_shared, stream, &mut next, how).await;
                                }
                                _ = tick.tick() => {
                                    let shared = &accept_shared;
                                    let now = shared.started.elapsed().as_millis() as u64;
                                    shared.registry.tick(now);
                                    shared.metrics.sample(&shared.expiry);
                                    ticks += 1;
                                    if ticks.is_multiple_of(5) {
                                        shared.registry.sweep(
                                            shared.live.timeout.load(Ordering::Relaxed),
                                            shared.live.output_limit(),
                                        );
                                    }
                                }
                                _ = stopped.changed() => break,
                            }
                        }
                    });
                })?,
        );
        let background = if shared.persist.is_some() {
            let flag = Arc::new(AtomicBool::new(false));
            let (bg_shared, bg_flag) = (Arc::clone(&shared), Arc::clone(&flag));
            let mut threads = vec![
                std::thread::Builder::new()
                    .name("fc-persist".into())
                    .spawn(move || save::background(bg_shared, bg_flag))?,
            ];
            if let Some(persist) = &shared.persist
                && persist.fsync == fc_wal::FsyncPolicy::EverySec
            {
                let (sync_persist, sync_flag) = (Arc::clone(persist), Arc::clone(&flag));
                threads.push(
                    std::thread::Builder::new()
                        .name("fc-fsync".into())
                        .spawn(move || persist::syncer(sync_persist, sync_flag))?,
                );
            }
            Some((flag, threads))
        } else {
            None
        };
        Ok(ServerHandle {
            addr,
            tls_addr,
            admin_addr,
            fcnp_addr,
            memcached_addr,
            direct_addrs,
            repl_addr,
            stop,
            threads: handles,
            inboxes: senders,
            shared,
            background,
        })
    }
}

/// Builds the store with `sink` as its mutation sink; with a data directory, logs it and
/// loads what was persisted (newest snapshot images, then the log after them), reporting what
/// it loaded on stderr.
fn open_store(
    builder: fc_shard::EmbeddedStoreBuilder,
    sink: txn::ServerSink,
    config: &ServerConfig,
    threads: usize,
) -> anyhow::Result<(
    EmbeddedStore,
    Option<Arc<persist::Persist>>,
    Arc<txn::ServerSink>,
)> {
    let settings = &config.persistence;
    let Some(dir) = &settings.data_dir else {
        let sink = Arc::new(sink);
        let store = builder
            .mutation_sink(Arc::clone(&sink) as Arc<dyn fc_shard::MutationSink>)
            .try_build()?;
        return Ok((store, None, sink));
    };
    let wal_config = WalConfig {
        fsync: settings.appendfsync,
        segment_bytes: settings.segment_bytes,
        // Frames gather per shard and are written before the batch's replies leave.
        write_buffer_bytes: 64 << 10,
        group_commit: true,
        // One log per worker (worker `w` owns shards `s % threads == w`): a group commit
        // fsyncs each worker's log once, however many of its shards a batch touched.
        logs: threads,
        // The fc-fsync thread syncs every 250 ms (`persist::syncer`): a worker never
        // waits for the disk under everysec.
        background_sync: true,
        faults: settings.faults.clone(),
        ..WalConfig::new(dir)
    }
    .with_layout_on_disk()?;
    let wal = Arc::new(fc_wal::WalSink::open(&wal_config, config.shards)?);
    let sink = Arc::new(sink.with_wal(Arc::clone(&wal), settings.appendfsync));
    let mut store = builder
        .mutation_sink(Arc::clone(&sink) as Arc<dyn fc_shard::MutationSink>)
        .try_build()?;
    let loaded = fc_snapshot::load_into(&wal_config, &mut store, &wal, settings.recovery)
        .map_err(|e| anyhow::anyhow!("cannot load {}: {e}", dir.display()))?;
    for (path, reason) in &loaded.skipped_images {
        tracing::warn!(
            "skipped damaged snapshot {} ({reason}); used the one before it",
            path.display()
        );
    }
    for log in &loaded.wal.logs {
        if let Some(damage) = &log.damage {
            tracing::warn!(
                "WAL damage in {} at byte {} ({} bytes, {}): {}",
                damage.path.display(),
                damage.offset,
                damage.bytes,
                damage.reason,
                if settings.recovery == RecoveryMode::PointInTime {
                    "replay stopped there"
                } else {
                    "truncated"
                }
            );
        }
    }
    tracing::info!(
        "loaded {} keys from {} ({} snapshot images, {} bytes; {} WAL mutations in {} frames, {} bytes) in {:.3} s",
        store.len(),
        dir.display(),
        loaded.images,
        loaded.image_bytes,
        loaded.wal.mutations(),
        loaded.wal.frames(),
        loaded.wal.bytes,
        loaded.elapsed.as_secs_f64()
    );
    if loaded.wal.torn_transactions > 0 {
        tracing::warn!(
            "left out {} transactions a crash tore (none of their changes applied)",
            loaded.wal.torn_transactions
        );
    }
    sink.ids_above(loaded.wal.last_txn_id);
    let export = settings
        .tcp_export
        .as_ref()
        .map(|c| export::start(&wal, c))
        .transpose()?;
    if let Some(export) = &export {
        tracing::info!(
            "WAL export: {} {}",
            if export.listen {
                "listening on"
            } else {
                "connecting to"
            },
            export.addr
        );
    }
    let persist = persist::Persist::new(wal, settings, dir.clone(), loaded, export);
    Ok((store, Some(Arc::new(persist)), sink))
}

/// The next connection of `listener`; never, without one.
async fn accept_on(
    listener: Option<&tokio::net::TcpListener>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Which port a connection came to.
#[derive(Debug, Clone, Copy)]
struct Accepted {
    /// The TLS port.
    tls: bool,
    /// The FCNP port.
    fcnp: bool,
    /// A direct shard port: the worker that owns the shard.
    pinned: Option<usize>,
    /// The memcached port.
    memcached: bool,
}

impl Accepted {
    /// The plaintext port.
    const PLAIN: Self = Self {
        tls: false,
        fcnp: false,
        pinned: None,
        memcached: false,
    };
}

/// Hands a new connection to the next worker (a direct shard port's to the shard's owner), or
/// refuses it past `maxclients`. A TLS one is refused in plaintext past `maxclients`, as Redis
/// does before its handshake.
async fn accept(
    shared: &Arc<Shared>,
    stream: tokio::net::TcpStream,
    next: &mut usize,
    how: Accepted,
) {
    let Accepted {
        tls,
        fcnp,
        pinned,
        memcached,
    } = how;
    use tokio::io::AsyncWriteExt;
    shared.connections.fetch_add(1, Ordering::Relaxed);
    if shared.clients.load(Ordering::Relaxed) >= shared.live.maxclients.load(Ordering::Relaxed) {
        shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let mut stream = stream;
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    shared.clients.fetch_add(1, Ordering::Relaxed);
    let Ok(std_stream) = stream.into_std() else {
        shared.clients.fetch_sub(1, Ordering::Relaxed);
        return;
    };
    let mut worker = pinned.unwrap_or(*next % shared.workers);
    *next = next.wrapping_add(1);
    // A script past `busy-reply-threshold` holds its worker: a new client goes to another
    // worker (which answers `BUSY` and takes `SCRIPT KILL`), or, with one worker, is answered
    // here until the script ends (`busy`).
    if shared.scripts.busy_worker() == Some(worker) {
        // A TLS client waits for the script's end instead: its handshake runs on a worker.
        if shared.workers == 1 && !tls && !fcnp && !memcached {
            tokio::spawn(busy::serve(Arc::clone(shared), std_stream, worker));
            return;
        }
        worker = (worker + 1) % shared.workers;
    }
    if shared.inboxes[worker]
        .send(Job::Conn(
            std_stream,
            shared::Handover {
                tls,
                fcnp,
                memcached,
                ..shared::Handover::default()
            },
        ))
        .is_err()
    {
        shared.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ServerHandle {
    /// The address the server listens on (plaintext; the TLS port's when plaintext is off).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS port's address, when [`ServerConfig::tls`] asked for one.
    #[must_use]
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The FCNP port's address, when [`ServerConfig::fcnp_bind`] asked for one (FCNP is
    /// served on [`ServerHandle::addr`] too).
    #[must_use]
    pub fn fcnp_addr(&self) -> Option<SocketAddr> {
        self.fcnp_addr
    }

    /// The memcached port's address, when [`ServerConfig::memcached_bind`] asked for one.
    #[must_use]
    pub fn memcached_addr(&self) -> Option<SocketAddr> {
        self.memcached_addr
    }

    /// The WAL TCP export's address (`listen`: the bound subscription port; `connect`: the
    /// collector's), when the export is on.
    #[must_use]
    pub fn wal_export_addr(&self) -> Option<SocketAddr> {
        self.shared
            .persist
            .as_ref()
            .and_then(|p| p.export.as_ref())
            .map(|e| e.addr)
    }

    /// The replication port's address (`[replication] bind_addr`), if one was asked for.
    #[must_use]
    pub fn repl_addr(&self) -> Option<SocketAddr> {
        self.repl_addr
    }

    /// The direct shard ports' addresses, shard by shard (empty unless
    /// [`ServerConfig::direct_shard_ports`] asked for them).
    #[must_use]
    pub fn direct_addrs(&self) -> &[SocketAddr] {
        &self.direct_addrs
    }

    /// The admin HTTP port's address (`/metrics`, `/health`, `/ready`), when
    /// [`ServerConfig::admin_bind`] asked for one.
    #[must_use]
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// Resolves when a client asked the server to stop (`SHUTDOWN`); the owner then calls
    /// [`ServerHandle::shutdown`].
    pub async fn shutdown_requested(&self) {
        let mut requested = self.shared.shutdown_request.subscribe();
        let _ = requested.wait_for(|&asked| asked).await;
    }

    /// Stops gracefully: stops accepting, stops reading requests (each client's commands
    /// already read run and their replies are written), waits up to five seconds for the
    /// clients to finish, stops the workers and waits for them; with persistence, syncs the
    /// log last.
    pub fn shutdown(self) {
        let _ = self.stop.send(true);
        for client in self.shared.registry.all() {
            client.stop_reading();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.shared.clients.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        for inbox in &self.inboxes {
            let _ = inbox.send(Job::Stop);
        }
        for thread in self.threads {
            let _ = thread.join();
        }
        if let Some((flag, threads)) = self.background {
            flag.store(true, Ordering::Release);
            for thread in threads {
                let _ = thread.join();
            }
        }
        if let Some(persist) = &self.shared.persist
            && let Err(err) = persist.wal.commit()
        {
            tracing::error!("final WAL sync failed: {err}");
        }
    }
}
