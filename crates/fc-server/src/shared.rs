//! State every worker and the acceptor share ([`Shared`]), the settings `CONFIG SET` changes
//! ([`Live`]), and the messages workers send each other ([`Job`], [`TxnCommand`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use bytes::Bytes;
use fc_shard::ShardRouter;
use tokio::sync::{mpsc, oneshot};

use crate::OutputLimit;
use crate::ServerConfig;
use crate::command::Handler;
use crate::reply::Replies;

/// Work for a worker.
pub(crate) enum Job {
    /// Run `handler` on this worker's shards and send back its typed reply.
    Exec {
        handler: Handler,
        args: Vec<Bytes>,
        reply: oneshot::Sender<Replies>,
        /// The `NOLOOP` tracking client it runs for (0: none; see [`crate::tracking`]).
        origin: u64,
    },
    /// Run `work` on this worker's thread once no transaction holds it (a script whose keys
    /// are all here) and send back its typed reply.
    Run {
        work: Box<dyn FnOnce() -> Replies + Send>,
        reply: oneshot::Sender<Replies>,
    },
    /// Serve a new connection (`Handover`: what the acceptor already read and decided while
    /// a busy script kept this worker from it; see `busy`).
    Conn(std::net::TcpStream, Handover),
    /// Lock this worker for a transaction of another worker's connection: acquire the lock,
    /// acknowledge, then run only the transaction's commands until their channel closes.
    Hold {
        ack: oneshot::Sender<()>,
        commands: mpsc::UnboundedReceiver<TxnCommand>,
    },
    /// Export this worker's shards into snapshot images, one shard at a time between other
    /// work, and report.
    Snapshot {
        reply: oneshot::Sender<Result<fc_snapshot::SnapshotReport, fc_wal::WalError>>,
    },
    /// Run `work` on this worker's store once no transaction holds it (replication: a
    /// primary's snapshot export of a shard, a replica applying what its primary sent).
    Local(Box<dyn FnOnce(&mut fc_shard::LocalEmbeddedStore) + Send>),
    /// Run `start` on this worker's thread, at once (it spawns a task there: the link a
    /// replica follows its primary with, see `repl_links::replica`).
    Spawn(Box<dyn FnOnce() + Send>),
    /// Serve the clients blocked on keys that became ready ([`crate::blocking`]).
    Serve,
    /// Stop (connections are dropped).
    Stop,
}

/// One command of a transaction, for a held worker.
pub(crate) struct TxnCommand {
    pub(crate) handler: Handler,
    pub(crate) args: Vec<Bytes>,
    pub(crate) reply: oneshot::Sender<Replies>,
    /// As [`Job::Exec`]'s.
    pub(crate) origin: u64,
}

/// How a connection reaches its worker: new (the default), or after the acceptor answered it
/// during a busy script (`busy`).
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// Requests already read and not yet run, first.
    pub(crate) pending: bytes::BytesMut,
    /// Whether it authenticated.
    pub(crate) authed: bool,
    /// It came to the TLS port: the worker runs the handshake first.
    pub(crate) tls: bool,
    /// It came to the FCNP port: FCNP whatever its first byte (elsewhere the first byte
    /// says which protocol).
    pub(crate) fcnp: bool,
    /// It came to the memcached port.
    pub(crate) memcached: bool,
    /// The user it authenticated as (`None`: `default`).
    pub(crate) user: Option<std::sync::Arc<crate::acl::User>>,
}

/// What every worker and the acceptor share.
pub(crate) struct Shared {
    pub(crate) router: ShardRouter,
    pub(crate) workers: usize,
    pub(crate) inboxes: Vec<mpsc::UnboundedSender<Job>>,
    pub(crate) config: ServerConfig,
    pub(crate) started: Instant,
    /// Unix seconds at startup (`LASTSAVE` without persistence).
    pub(crate) started_unix: u64,
    pub(crate) clients: AtomicUsize,
    pub(crate) connections: AtomicU64,
    pub(crate) next_client_id: AtomicU64,
    pub(crate) port: u16,
    /// The log and snapshots (`None`: in memory only).
    pub(crate) persist: Option<Arc<crate::persist::Persist>>,
    /// Settings `CONFIG SET` changes.
    pub(crate) live: Live,
    /// Every connected client.
    pub(crate) registry: crate::clients::Clients,
    /// The largest output buffer a client has sent at once since the start.
    pub(crate) max_output_buffer: AtomicU64,
    /// Active expiry's statistics, one per worker.
    pub(crate) expiry: Vec<ExpiryStats>,
    /// Watched keys (`WATCH`).
    pub(crate) board: Arc<crate::watched::WatchBoard>,
    /// Subscriptions (`SUBSCRIBE`...).
    pub(crate) pubsub: Arc<crate::pubsub::PubSub>,
    /// Keyspace notifications (`notify-keyspace-events`).
    pub(crate) notifier: Arc<crate::notify::Notifier>,
    /// Clients blocked on keys (`BLPOP`...).
    pub(crate) blocked: Arc<crate::blocked::Blocked>,
    /// The store's mutation sink (transaction markers, the board, the log).
    pub(crate) sink: Arc<crate::txn::ServerSink>,
    /// Native replication ([`crate::repl`]).
    pub(crate) repl: crate::repl::Repl,
    /// Set by `SHUTDOWN`; the server's owner stops it.
    pub(crate) shutdown_request: tokio::sync::watch::Sender<bool>,
    /// The slow log, the latency monitor and their settings.
    pub(crate) observe: crate::observe::Observe,
    /// This run's id (`INFO server` `run_id`: 40 random hex digits, new at every start).
    pub(crate) run_id: String,
    /// Connections refused past `maxclients` (`rejected_connections`).
    pub(crate) rejected_connections: AtomicU64,
    /// The memcached port's counters (`stats`).
    pub(crate) memcached: crate::mc_meta::McStats,
    /// The replication id (`INFO replication` `master_replid`).
    pub(crate) replid: String,
    /// Rates and peaks sampled ten times a second ([`Metrics::sample`]).
    pub(crate) metrics: Metrics,
    /// Client-side caching (`CLIENT TRACKING`).
    pub(crate) tracking: Arc<crate::tracking::Tracking>,
    /// `CLIENT PAUSE`.
    pub(crate) pause: crate::pause::Pause,
    /// Scripts and function libraries (`EVAL`, `FUNCTION`), the busy script.
    pub(crate) scripts: Arc<crate::scripts::Registry>,
    /// Users, their permissions, the ACL log.
    pub(crate) acl: crate::acl::Acl,
    /// The TLS port's handshakes (`None`: no TLS port).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Samples of the server's counters, taken every 100 ms by the acceptor (as Redis's
/// `serverCron` samples them): `instantaneous_*` are the mean of the last 16 samples' rates;
/// `used_memory_peak` the highest used memory seen by a sample or an `INFO`.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    pub(crate) peak_memory: AtomicU64,
    samples: std::sync::Mutex<Samples>,
}

/// Ring buffers of per-second rates: commands, input bytes, output bytes.
#[derive(Debug, Default)]
struct Samples {
    last: Option<(Instant, [u64; 3])>,
    rates: [[f64; 16]; 3],
    next: usize,
}

impl Metrics {
    /// Takes one sample of the workers' counters and gauges.
    pub(crate) fn sample(&self, workers: &[ExpiryStats]) {
        let sum = |f: fn(&ExpiryStats) -> &AtomicU64| -> u64 {
            workers.iter().map(|w| f(w).load(Ordering::Relaxed)).sum()
        };
        self.peak_memory
            .fetch_max(sum(|w| &w.used_memory), Ordering::Relaxed);
        let now = (
            Instant::now(),
            [
                sum(|w| &w.commands),
                sum(|w| &w.net_in),
                sum(|w| &w.net_out),
            ],
        );
        let mut samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, before)) = samples.last {
            let secs = now.0.duration_since(at).as_secs_f64().max(1e-3);
            let next = samples.next;
            for (k, rates) in samples.rates.iter_mut().enumerate() {
                rates[next] = now.1[k].saturating_sub(before[k]) as f64 / secs;
            }
            samples.next = (next + 1) % 16;
        }
        samples.last = Some(now);
    }

    /// The mean rates over the last 16 samples: commands per second, input and output bytes
    /// per second.
    pub(crate) fn rates(&self) -> [f64; 3] {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples.rates.map(|r| r.iter().sum::<f64>() / 16.0)
    }
}

/// 40 random hexadecimal digits (Redis's run and replication ids), from the OS's random hash
/// keys and the clock.
pub(crate) fn random_hex_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::with_capacity(40);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for i in 0..3u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(nanos);
        h.write_u64(i);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

impl Shared {
    /// The worker that owns `key`.
    pub(crate) fn owner_of(&self, key: &[u8]) -> usize {
        self.router.shard_of(&self.router.route_key(key)) % self.workers
    }
}

/// Settings `CONFIG SET` can change while the server runs.
pub(crate) struct Live {
    pub(crate) requirepass: RwLock<Option<String>>,
    pub(crate) maxclients: AtomicUsize,
    pub(crate) timeout: AtomicU64,
    /// Active expiry cycles per second.
    pub(crate) hz: AtomicU64,
    /// `proto-max-bulk-len`.
    pub(crate) proto_max_bulk_len: AtomicU64,
    /// `client-query-buffer-limit`.
    pub(crate) client_query_buffer_limit: AtomicU64,
    /// Bumped by every change of the two protocol limits: a connection compares it once per
    /// read and re-reads the limits when it moved.
    pub(crate) limits_epoch: AtomicU64,
    /// 0: unlimited.
    pub(crate) maxmemory: AtomicU64,
    output_hard: AtomicU64,
    output_soft: AtomicU64,
    output_seconds: AtomicU64,
    /// Redis's settings kept for its tools (see [`crate::knobs`]).
    pub(crate) knobs: crate::knobs::Knobs,
    /// Active expiry runs (`DEBUG SET-ACTIVE-EXPIRE 0` stops it).
    pub(crate) active_expire: std::sync::atomic::AtomicBool,
}

impl Live {
    pub(crate) fn new(config: &ServerConfig) -> Self {
        let live = Self {
            requirepass: RwLock::new(config.requirepass.clone()),
            maxclients: AtomicUsize::new(config.maxclients),
            timeout: AtomicU64::new(config.timeout),
            hz: AtomicU64::new(config.hz.clamp(1, 500)),
            proto_max_bulk_len: AtomicU64::new(config.proto_max_bulk_len),
            client_query_buffer_limit: AtomicU64::new(config.client_query_buffer_limit),
            limits_epoch: AtomicU64::new(0),
            maxmemory: AtomicU64::new(config.maxmemory.unwrap_or(0)),
            output_hard: AtomicU64::new(0),
            output_soft: AtomicU64::new(0),
            output_seconds: AtomicU64::new(0),
            knobs: crate::knobs::Knobs::new(),
            active_expire: std::sync::atomic::AtomicBool::new(true),
        };
        live.set_output_limit(config.output_limit);
        live
    }

    pub(crate) fn requirepass(&self) -> Option<String> {
        self.requirepass
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The request limits authenticated clients are parsed under.
    pub(crate) fn request_limits(&self) -> fc_resp::Limits {
        fc_resp::Limits {
            max_bulk_len: self.proto_max_bulk_len.load(Ordering::Relaxed),
            max_query_buffer: usize::try_from(
                self.client_query_buffer_limit.load(Ordering::Relaxed),
            )
            .unwrap_or(usize::MAX),
            ..fc_resp::Limits::default()
        }
    }

    /// Whether active expiry runs.
    pub(crate) fn active_expire(&self) -> bool {
        self.active_expire.load(Ordering::Relaxed)
    }

    /// The hard output limit in bytes (0: none).
    pub(crate) fn output_hard(&self) -> u64 {
        self.output_hard.load(Ordering::Relaxed)
    }

    pub(crate) fn output_limit(&self) -> OutputLimit {
        OutputLimit {
            hard: self.output_hard.load(Ordering::Relaxed),
            soft: self.output_soft.load(Ordering::Relaxed),
            seconds: self.output_seconds.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn set_output_limit(&self, limit: OutputLimit) {
        self.output_hard.store(limit.hard, Ordering::Relaxed);
        self.output_soft.store(limit.soft, Ordering::Relaxed);
        self.output_seconds.store(limit.seconds, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

/// One worker's figures for `INFO`: its active expiry's statistics, what its connections read
/// and wrote, and the gauges it publishes at each active-expiry cycle (`hz`). Each worker
/// writes its own (no other thread writes them); `INFO` and the acceptor's sampler read them.
#[derive(Debug, Default)]
pub(crate) struct ExpiryStats {
    /// Bytes its connections read from sockets (`total_net_input_bytes`).
    pub(crate) net_in: AtomicU64,
    /// Bytes its connections wrote (`total_net_output_bytes`).
    pub(crate) net_out: AtomicU64,
    /// Socket reads that returned data (`total_reads_processed`).
    pub(crate) reads: AtomicU64,
    /// Socket writes (`total_writes_processed`).
    pub(crate) writes: AtomicU64,
    /// Commands its connections parsed (the rate `instantaneous_ops_per_sec` is sampled from).
    pub(crate) commands: AtomicU64,
    /// Bytes its shards charge to the memory budget, as of its last cycle.
    pub(crate) used_memory: AtomicU64,
    /// Microseconds spent in active expiry cycles (`expire_cycle_cpu_milliseconds`).
    pub(crate) cycle_us: AtomicU64,
    /// Estimated share of keys with a TTL that are expired but not yet removed, in
    /// millionths (Redis's `expired_stale_perc`: a running average over cycles).
    pub(crate) stale_ppm: AtomicU64,
    /// Cycles that stopped at their time limit with expired keys still being found.
    pub(crate) time_cap_reached: AtomicU64,
}
