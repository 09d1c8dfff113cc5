//! # fc-server — the fast-cache Redis-compatible server
//!
//! **Owns:** the runtime (tokio, one single-threaded runtime per worker thread), the listener,
//! connections, the command table (`command/`: one module per command family, each command's
//! argument parsing, storage call and reply) and `INFO`/`CONFIG`. Workers own shards
//! exclusively (a `LocalEmbeddedStore` each: no lock on the hot path); a command for a key of
//! another worker's shard travels to it by message and its reply comes back the same way;
//! multi-key commands split by key and merge in order; pipelined commands are all executed
//! before one write of all replies.
//!
//! **Must not depend on:** anything above it; it is the top of the workspace but for the
//! facade.
//!
//! Built so far (issue W1-6 lists the rest): connection commands (PING, ECHO, HELLO 2/3 with
//! AUTH/SETNAME, AUTH, SELECT, QUIT, RESET, CLIENT, COMMAND, INFO, TIME, CONFIG GET), strings,
//! keys and TTLs, hashes, lists, sets, sorted sets (the common commands), `requirepass`,
//! `maxclients`, `maxmemory` with an eviction policy. Not yet: MULTI/EXEC, SCAN family,
//! blocking commands, idle timeout, output-buffer limits, TOML config, persistence wiring.
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

mod command;
mod conn;
mod info;
mod persist;
mod worker;

pub use persist::{PersistenceConfig, parse_save_rules};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use fc_shard::{EmbeddedStore, EvictionPolicy};
use fc_wal::{RecoveryMode, WalConfig};
use tokio::sync::{mpsc, watch};

use crate::worker::{Job, Shared};

/// The Redis version the server reports (clients such as redis-py and go-redis gate features on
/// it; every command this server has behaves as Redis 7.2's).
pub const REDIS_VERSION: &str = "7.2.0";

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (loopback by default).
    pub bind: SocketAddr,
    /// Shards (a power of two).
    pub shards: usize,
    /// Worker threads (each owns `shards / threads` shards).
    pub threads: usize,
    /// Password every client must `AUTH` with (`None`: no password).
    pub requirepass: Option<String>,
    /// Most simultaneous clients; more are refused with Redis's error.
    pub maxclients: usize,
    /// Memory budget in bytes (`None`: unlimited).
    pub maxmemory: Option<u64>,
    /// What a write past the budget does.
    pub maxmemory_policy: EvictionPolicy,
    /// Write-ahead log and snapshots (off without a data directory).
    pub persistence: PersistenceConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 6380)),
            shards: cores.next_power_of_two().max(16),
            threads: cores,
            requirepass: None,
            maxclients: 10_000,
            maxmemory: None,
            maxmemory_policy: EvictionPolicy::NoEviction,
            persistence: PersistenceConfig::default(),
        }
    }
}

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
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

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
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
        let mut builder =
            EmbeddedStore::builder(config.shards).eviction_policy(config.maxmemory_policy);
        if let Some(bytes) = config.maxmemory {
            builder = builder.max_memory(bytes);
        }
        let (store, persist) = open_store(builder, &config)?;
        let router = *store.router();
        let stores = store.try_into_local_stores(threads)?;
        let listener = std::net::TcpListener::bind(config.bind)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..threads).map(|_| mpsc::unbounded_channel()).unzip();
        let shared = Arc::new(Shared {
            router,
            workers: threads,
            inboxes: senders.clone(),
            config,
            started: Instant::now(),
            started_unix: fc_snapshot::unix_ms() / 1000,
            clients: AtomicUsize::new(0),
            commands: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            next_client_id: AtomicU64::new(0),
            port: addr.port(),
            persist,
        });
        let mut handles = Vec::new();
        for (index, (store, inbox)) in stores.into_iter().zip(receivers).enumerate() {
            let shared = Arc::clone(&shared);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("fc-worker-{index}"))
                    .spawn(move || {
                        let run = std::panic::AssertUnwindSafe(|| {
                            worker::run(index, store, shared, inbox);
                        });
                        if std::panic::catch_unwind(run).is_err() {
                            // A dead shard must never go unnoticed.
                            eprintln!("fc-server: worker {index} panicked; exiting");
                            std::process::exit(70);
                        }
                    })?,
            );
        }
        let (stop, mut stopped) = watch::channel(false);
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
                        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                            return;
                        };
                        let mut next = 0;
                        loop {
                            tokio::select! {
                                accepted = listener.accept() => {
                                    let Ok((stream, _)) = accepted else { continue };
                                    accept(&accept_shared, stream, &mut next).await;
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
                    .spawn(move || persist::background(bg_shared, bg_flag))?,
            ];
            if let Some(p) = &shared.persist
                && p.fsync == fc_wal::FsyncPolicy::Always
            {
                let (p, flag) = (Arc::clone(p), Arc::clone(&flag));
                threads.push(
                    std::thread::Builder::new()
                        .name("fc-commit".into())
                        .spawn(move || persist::committer(p, flag))?,
                );
            }
            Some((flag, threads))
        } else {
            None
        };
        Ok(ServerHandle {
            addr,
            stop,
            threads: handles,
            inboxes: senders,
            shared,
            background,
        })
    }
}

/// Builds the store; with a data directory, logs it and loads what was persisted (newest
/// snapshot images, then the log after them), reporting what it loaded on stderr.
fn open_store(
    builder: fc_shard::EmbeddedStoreBuilder,
    config: &ServerConfig,
) -> anyhow::Result<(EmbeddedStore, Option<Arc<persist::Persist>>)> {
    let settings = &config.persistence;
    let Some(dir) = &settings.data_dir else {
        return Ok((builder.try_build()?, None));
    };
    let wal_config = WalConfig {
        fsync: settings.appendfsync,
        segment_bytes: settings.segment_bytes,
        // Frames gather per shard and are written before the batch's replies leave.
        write_buffer_bytes: 64 << 10,
        group_commit: true,
        ..WalConfig::new(dir)
    };
    let (mut store, wal) = fc_wal::build_logged(&wal_config, config.shards, |_| builder)?;
    let loaded = fc_snapshot::load_into(&wal_config, &mut store, &wal, settings.recovery)
        .map_err(|e| anyhow::anyhow!("cannot load {}: {e}", dir.display()))?;
    for (path, reason) in &loaded.skipped_images {
        eprintln!(
            "fc-server: skipped damaged snapshot {} ({reason}); used the one before it",
            path.display()
        );
    }
    for shard in &loaded.wal.shards {
        if let Some(damage) = &shard.damage {
            eprintln!(
                "fc-server: WAL damage in {} at byte {} ({} bytes, {}): {}",
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
    eprintln!(
        "fc-server: loaded {} keys from {} ({} snapshot images, {} bytes; {} WAL frames, {} bytes) in {:.3} s",
        store.len(),
        dir.display(),
        loaded.images,
        loaded.image_bytes,
        loaded.wal.frames(),
        loaded.wal.bytes,
        loaded.elapsed.as_secs_f64()
    );
    let persist = persist::Persist::new(wal, settings, dir.clone(), loaded);
    Ok((store, Some(Arc::new(persist))))
}

/// Hands a new connection to the next worker, or refuses it past `maxclients`.
async fn accept(shared: &Shared, stream: tokio::net::TcpStream, next: &mut usize) {
    use tokio::io::AsyncWriteExt;
    shared.connections.fetch_add(1, Ordering::Relaxed);
    if shared.clients.load(Ordering::Relaxed) >= shared.config.maxclients {
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
    let worker = *next % shared.workers;
    *next = next.wrapping_add(1);
    if shared.inboxes[worker].send(Job::Conn(std_stream)).is_err() {
        shared.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ServerHandle {
    /// The address the server listens on.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, stops the workers (closing their connections) and waits for them;
    /// with persistence, syncs the log last.
    pub fn shutdown(self) {
        let _ = self.stop.send(true);
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
            eprintln!("fc-server: final WAL sync failed: {err}");
        }
    }
}
