//! Workers: one thread each, a single-threaded tokio runtime, and exclusive ownership of a share
//! of the shards (a `LocalEmbeddedStore`: no lock on the hot path). Connections are handed to
//! workers round-robin; a command for a key another worker owns travels to that worker's inbox
//! as a [`Job::Exec`] and its encoded reply comes back on a oneshot channel.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use fc_resp::{Encoder, RespVersion};
use fc_shard::{EmbeddedKeyRoute, LocalEmbeddedStore, ShardRouter};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::ServerConfig;
use crate::command::{Ctx, Handler, Route};

/// Work for a worker.
pub(crate) enum Job {
    /// Run `handler` on this worker's shards and send back the encoded reply.
    Exec {
        handler: Handler,
        args: Vec<Bytes>,
        version: RespVersion,
        reply: oneshot::Sender<BytesMut>,
    },
    /// Serve a new connection.
    Conn(std::net::TcpStream),
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
    /// Stop (connections are dropped).
    Stop,
}

/// A parsed command of a connection's batch: its table entry (`None`: unknown), its
/// arguments, and the route of its key (keyed commands only, see
/// [`Worker::route_and_prefetch_bucket`]).
pub(crate) struct Parsed {
    pub(crate) spec: Option<&'static crate::command::Spec>,
    pub(crate) args: Vec<Bytes>,
    pub(crate) route: Option<EmbeddedKeyRoute>,
}

/// One command of a transaction, for a held worker.
pub(crate) struct TxnCommand {
    pub(crate) handler: Handler,
    pub(crate) args: Vec<Bytes>,
    pub(crate) version: RespVersion,
    pub(crate) reply: oneshot::Sender<BytesMut>,
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
    pub(crate) commands: AtomicU64,
    pub(crate) connections: AtomicU64,
    pub(crate) next_client_id: AtomicU64,
    pub(crate) port: u16,
    /// The log and snapshots (`None`: in memory only).
    pub(crate) persist: Option<Arc<crate::persist::Persist>>,
    /// Settings `CONFIG SET` changes.
    pub(crate) live: crate::Live,
    /// Every connected client.
    pub(crate) registry: crate::clients::Clients,
    /// Watched keys (`WATCH`).
    pub(crate) board: Arc<crate::watched::WatchBoard>,
    /// Set by `SHUTDOWN`; the server's owner stops it.
    pub(crate) shutdown_request: tokio::sync::watch::Sender<bool>,
}

impl Shared {
    /// The worker that owns `key`.
    pub(crate) fn owner_of(&self, key: &[u8]) -> usize {
        self.router.shard_of(&self.router.route_key(key)) % self.workers
    }
}

/// One worker's state, shared by its connection tasks (all on its thread).
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) store: RefCell<LocalEmbeddedStore>,
    pub(crate) shared: Arc<Shared>,
    /// Held by a transaction (`MULTI`/`EXEC`): nothing else runs on this worker's shards.
    locked: Cell<bool>,
    unlocked: Notify,
    /// Routes of the keys of the batch being parsed (see [`Worker::route_and_prefetch_bucket`]).
    routes: RefCell<Vec<EmbeddedKeyRoute>>,
}

impl Worker {
    /// Takes the transaction lock (waiting while another transaction holds it).
    pub(crate) async fn lock(&self) {
        while self.locked.get() {
            self.unlocked.notified().await;
        }
        self.locked.set(true);
    }

    /// Releases the transaction lock.
    pub(crate) fn unlock(&self) {
        self.locked.set(false);
        self.unlocked.notify_waiters();
    }

    /// Waits until no transaction holds this worker.
    pub(crate) async fn wait_unlocked(&self) {
        while self.locked.get() {
            self.unlocked.notified().await;
        }
    }

    /// Whether a transaction holds this worker.
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.get()
    }

    /// Routes the key of a keyed command as soon as it is parsed (the route is kept in
    /// [`Parsed::route`] for the command's owner check and its handler) and starts loading
    /// the index bucket of every key of the command this worker owns; the buckets of a
    /// pipelined batch arrive while the rest of it is parsed, and [`Worker::prefetch_entries`]
    /// then starts loading the entries they point to, so that the batch's cache misses overlap
    /// instead of costing one full memory latency per command in turn. The loads are hints
    /// only (see [`LocalEmbeddedStore::prefetch_routes`]).
    pub(crate) fn route_and_prefetch_bucket(
        &self,
        spec: Option<&'static crate::command::Spec>,
        args: &[Bytes],
    ) -> Option<EmbeddedKeyRoute> {
        /// Keys per batch at most (an `MSET` of thousands would only evict its own lines).
        const MAX_KEYS: usize = 64;
        let store = self.store.borrow();
        let mut routes = self.routes.borrow_mut();
        match spec.map(|s| &s.route) {
            Some(Route::Key) => {
                let route = store.route_key(args.get(1)?);
                if routes.len() < MAX_KEYS {
                    store.prefetch_bucket(&route);
                    routes.push(route);
                }
                Some(route)
            }
            Some(Route::PerKey { step, .. }) => {
                let keys = args.get(1..).unwrap_or_default();
                for key in keys.iter().step_by((*step).max(1)) {
                    if routes.len() == MAX_KEYS {
                        break;
                    }
                    let route = store.route_key(key);
                    store.prefetch_bucket(&route);
                    routes.push(route);
                }
                None
            }
            _ => None,
        }
    }

    /// Starts loading the entries of the keys [`Worker::route_and_prefetch_bucket`] saw since
    /// the last call.
    pub(crate) fn prefetch_entries(&self) {
        let mut routes = self.routes.borrow_mut();
        if !routes.is_empty() {
            self.store.borrow().prefetch_entries(&routes);
            routes.clear();
        }
    }

    /// Runs `handler` on this worker's store, appending its reply to `out`.
    pub(crate) fn execute_into(
        &self,
        handler: Handler,
        args: &[Bytes],
        version: RespVersion,
        out: &mut BytesMut,
    ) {
        self.execute_routed(handler, args, None, version, out);
    }

    /// [`Worker::execute_into`] with the route of `args[1]` when the caller has it.
    pub(crate) fn execute_routed(
        &self,
        handler: Handler,
        args: &[Bytes],
        route: Option<EmbeddedKeyRoute>,
        version: RespVersion,
        out: &mut BytesMut,
    ) {
        let mut store = self.store.borrow_mut();
        let mut ctx = Ctx {
            store: &mut store,
            args,
            route,
            out: Encoder::new(out, version),
        };
        handler(&mut ctx);
    }

    /// Runs `handler` on worker `owner` (this one directly, another by message) and appends
    /// the reply to `out`.
    pub(crate) async fn execute_on(
        &self,
        owner: usize,
        handler: Handler,
        args: Vec<Bytes>,
        version: RespVersion,
        out: &mut BytesMut,
    ) {
        if owner == self.index {
            self.wait_unlocked().await;
            self.execute_into(handler, &args, version, out);
            return;
        }
        let (reply, answer) = oneshot::channel();
        let job = Job::Exec {
            handler,
            args,
            version,
            reply,
        };
        if self.shared.inboxes[owner].send(job).is_err() {
            Encoder::new(out, version).error(b"ERR server is shutting down");
            return;
        }
        match answer.await {
            Ok(bytes) => out.extend_from_slice(&bytes),
            Err(_) => Encoder::new(out, version).error(b"ERR server is shutting down"),
        }
    }
}

/// The worker thread's body: serve jobs until [`Job::Stop`].
pub(crate) fn run(
    index: usize,
    store: LocalEmbeddedStore,
    shared: Arc<Shared>,
    mut inbox: mpsc::UnboundedReceiver<Job>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a worker's runtime");
    let local = tokio::task::LocalSet::new();
    let own_logs = match &shared.persist {
        Some(persist) if persist.fsync == fc_wal::FsyncPolicy::Always => {
            let mut logs: Vec<usize> = store
                .owned_shards()
                .map(|s| persist.wal.log_of(s))
                .collect();
            logs.sort_unstable();
            logs.dedup();
            logs
        }
        _ => Vec::new(),
    };
    if let Some(persist) = &shared.persist {
        for log in own_logs {
            local.spawn_local(crate::persist::committer(Arc::clone(persist), log));
        }
    }
    let worker = Rc::new(Worker {
        index,
        store: RefCell::new(store),
        shared,
        locked: Cell::new(false),
        unlocked: Notify::new(),
        routes: RefCell::new(Vec::new()),
    });
    local.block_on(&runtime, async move {
        while let Some(job) = inbox.recv().await {
            match job {
                Job::Exec {
                    handler,
                    args,
                    version,
                    reply,
                } => {
                    worker.wait_unlocked().await;
                    let mut out = BytesMut::new();
                    worker.execute_into(handler, &args, version, &mut out);
                    let _ = reply.send(out);
                }
                Job::Hold { ack, mut commands } => {
                    worker.lock().await;
                    let _ = ack.send(());
                    while let Some(cmd) = commands.recv().await {
                        let mut out = BytesMut::new();
                        worker.execute_into(cmd.handler, &cmd.args, cmd.version, &mut out);
                        let _ = cmd.reply.send(out);
                    }
                    worker.unlock();
                }
                Job::Conn(stream) => {
                    tokio::task::spawn_local(crate::conn::serve(stream, Rc::clone(&worker)));
                }
                Job::Snapshot { reply } => {
                    let worker = Rc::clone(&worker);
                    tokio::task::spawn_local(async move {
                        let _ = reply.send(crate::persist::snapshot_worker(&worker).await);
                    });
                }
                Job::Stop => break,
            }
        }
    });
}
