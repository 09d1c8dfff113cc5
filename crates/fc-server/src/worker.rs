//! Workers: one thread each, a single-threaded tokio runtime, and exclusive ownership of a share
//! of the shards (a `LocalEmbeddedStore`: no lock on the hot path). Connections are handed to
//! workers round-robin; a command for a key another worker owns travels to that worker's inbox
//! as a [`Job::Exec`] and its typed reply ([`Replies`]) comes back on a oneshot channel.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fc_shard::{EmbeddedKeyRoute, LocalEmbeddedStore};
use fc_snapshot::SnapshotReport;
use fc_wal::WalError;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::command::pops::{self, Op};
use crate::command::{Ctx, Handler, Route, Session, Spec};
use crate::reply::{Replies, Reply, Resp};
use crate::shared::{Job, Shared};

/// A parsed command of a connection's batch: its table entry (`None`: unknown), its
/// arguments, and the route of its key (keyed commands only, see
/// [`Worker::route_and_prefetch_bucket`]).
pub(crate) struct Parsed {
    pub(crate) spec: Option<&'static Spec>,
    pub(crate) args: Vec<Bytes>,
    /// The route of a keyed command's key, or of a script's first declared key
    /// ([`Worker::route_and_prefetch_bucket`]).
    pub(crate) route: Option<EmbeddedKeyRoute>,
    /// The protocol edge's data for the reply (see `edge::Tag`).
    pub(crate) tag: crate::edge::Tag,
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
    /// Its command and error counters (`INFO commandstats`...), its thread's alone.
    pub(crate) stats: Rc<crate::stats::WorkerStats>,
    /// The clock commands are timed with.
    pub(crate) ticks: crate::stats::Ticks,
}

impl Worker {
    /// Takes the transaction lock (waiting while another transaction holds it).
    pub(crate) async fn lock(&self) {
        while self.locked.get() {
            self.unlocked.notified().await;
        }
        self.locked.set(true);
    }

    /// Releases the transaction lock, then serves the clients blocked on keys the
    /// transaction filled.
    pub(crate) fn unlock(&self) {
        self.locked.set(false);
        self.unlocked.notify_waiters();
        self.serve_ready();
    }

    /// Serves clients blocked on keys of this worker that got elements (one atomic load when
    /// none did); called after every command that ran here. For each ready key, its waiters
    /// in arrival order while the key has elements; not while a transaction holds the worker
    /// (its release serves them). A served `BLMOVE`'s push makes its destination ready in
    /// turn.
    #[inline]
    pub(crate) fn serve_ready(&self) {
        let blocked = &self.shared.blocked;
        while blocked.has_ready(self.index) && !self.is_locked() {
            for key in blocked.take_ready(self.index) {
                self.serve_key(&key);
            }
        }
    }

    fn serve_key(&self, key: &[u8]) {
        let blocked = &self.shared.blocked;
        loop {
            // What the key holds now: a list serves list pops, a sorted set sorted-set pops;
            // empty or of another type, the waiters go on waiting (Redis keeps a client
            // blocked on a key of another type).
            let (list, zset, stream) = {
                use fc_shard::KeyType;
                let mut store = self.store.borrow_mut();
                match store.type_of(key) {
                    Ok(Some(KeyType::List)) => (store.llen(key).is_ok_and(|n| n > 0), false, false),
                    Ok(Some(KeyType::ZSet)) => {
                        (false, store.zcard(key).is_ok_and(|n| n > 0), false)
                    }
                    Ok(Some(KeyType::Stream)) => (false, false, true),
                    _ => return,
                }
            };
            if !list && !zset && !stream {
                return;
            }
            // A stream serves a reader whose id (or group) it has entries after. Asked once per
            // id or group while looking for the next waiter (the key does not change meanwhile:
            // fifty consumers of one group blocked on a stream cost one lookup, not fifty).
            let asked: RefCell<Vec<(bool, Bytes, bool)>> = RefCell::new(Vec::new());
            let stream_serves = |group: bool, what: Bytes| {
                if let Some(&(_, _, answer)) = asked
                    .borrow()
                    .iter()
                    .find(|(g, w, _)| *g == group && *w == what)
                {
                    return answer;
                }
                let mut store = self.store.borrow_mut();
                let answer = if group {
                    crate::command::streams::group_has_new(&mut store, key, &what)
                } else {
                    crate::command::streams::has_after(&mut store, key, &what)
                };
                asked.borrow_mut().push((group, what, answer));
                answer
            };
            let serves = |op: &Op| match op {
                Op::Pop { .. } | Op::Move { .. } => list,
                Op::ZPop { .. } => zset,
                Op::XRead { .. } if stream => {
                    stream_serves(false, op.args(&Bytes::copy_from_slice(key))[2].clone())
                }
                Op::XReadGroup { group, .. } if stream => stream_serves(true, group.clone()),
                Op::XRead { .. } | Op::XReadGroup { .. } => false,
            };
            // The first waiter the key can serve, in arrival order (one blocked on the same
            // key for the other type does not hold it up).
            let Some(waiter) = blocked.next_waiter(self.index, key, serves) else {
                return;
            };
            blocked.remove(self.index, key, &waiter);
            // Claimed only once the key is known to serve it: nothing runs on this thread
            // between here and the pop, so a claimed waiter always gets its element.
            if waiter.claim() {
                let src = Bytes::copy_from_slice(key);
                match waiter.op() {
                    Op::Move { dst, from, to }
                        if self
                            .shared
                            .router
                            .shard_of(&self.shared.router.route_key(dst))
                            != self
                                .shared
                                .router
                                .shard_of(&self.shared.router.route_key(key)) =>
                    {
                        self.move_across(&waiter, src, dst.clone(), *from, *to);
                    }
                    op => waiter.answer(self.execute_typed(pops::TRY, &op.args(&src))),
                }
            }
        }
    }

    /// Serves a blocked `BLMOVE`/`BRPOPLPUSH` whose destination is on another shard: pops
    /// here, then pushes on the destination's owner and answers once the push is done. If the
    /// push fails (the destination is no longer a list), the element goes back where it came
    /// from and the client gets the error. Unlike a move within one shard, another client
    /// may see the element in neither list for that instant (documented).
    fn move_across(
        &self,
        waiter: &std::sync::Arc<crate::blocked::Waiter>,
        src: Bytes,
        dst: Bytes,
        from: fc_shard::ListEnd,
        to: fc_shard::ListEnd,
    ) {
        let word = |end: fc_shard::ListEnd, left: &'static str, right: &'static str| match end {
            fc_shard::ListEnd::Left => left,
            fc_shard::ListEnd::Right => right,
        };
        let (pop, push, back) = (
            word(from, "lpop", "rpop"),
            word(to, "lpush", "rpush"),
            word(from, "lpush", "rpush"),
        );
        let popped = self.execute_typed(
            keyed(pop),
            &[Bytes::from_static(pop.as_bytes()), src.clone()],
        );
        let value = match popped.tokens().first() {
            Some(crate::reply::Token::Bulk(range)) => Bytes::copy_from_slice(popped.bytes(range)),
            _ => return waiter.answer(popped),
        };
        let push_args = vec![
            Bytes::from_static(push.as_bytes()),
            dst.clone(),
            value.clone(),
        ];
        let back_args = vec![Bytes::from_static(back.as_bytes()), src, value.clone()];
        let done = move |pushed: Replies| {
            if pushed.error_text().is_some() {
                return (pushed, true);
            }
            let mut out = Replies::new();
            out.bulk(&value);
            (out, false)
        };
        let owner = self.shared.owner_of(&dst);
        if owner == self.index {
            let (answer, undo) = done(self.execute_typed(keyed(push), &push_args));
            if undo {
                self.execute_typed(keyed(back), &back_args);
            }
            return waiter.answer(answer);
        }
        let (reply, pushed) = oneshot::channel();
        let job = Job::Exec {
            handler: keyed(push),
            args: push_args,
            reply,
            origin: 0,
        };
        crate::stats::hop();
        let _ = self.shared.inboxes[owner].send(job);
        let (shared, waiter, home) = (Arc::clone(&self.shared), Arc::clone(waiter), self.index);
        crate::rt::spawn_local(async move {
            let (answer, undo) = done(pushed.await.unwrap_or_else(|_| shutting_down()));
            if undo {
                let (reply, _) = oneshot::channel();
                let _ = shared.inboxes[home].send(Job::Exec {
                    handler: keyed(back),
                    args: back_args,
                    reply,
                    origin: 0,
                });
            }
            waiter.answer(answer);
        });
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
    /// [`Parsed::route`] for the command's owner check and its handler; a script's is its
    /// first declared key's, for `session::script_in_place`) and starts loading
    /// the index bucket of every key of the command this worker owns; the buckets of a
    /// pipelined batch arrive while the rest of it is parsed, and [`Worker::prefetch_entries`]
    /// then starts loading the entries they point to, so that the batch's cache misses overlap
    /// instead of costing one full memory latency per command in turn. The loads are hints
    /// only (see [`LocalEmbeddedStore::prefetch_routes`]).
    pub(crate) fn route_and_prefetch_bucket(
        &self,
        spec: Option<&'static Spec>,
        args: &[Bytes],
    ) -> Option<EmbeddedKeyRoute> {
        /// Keys per batch at most (an `MSET` of thousands would only evict its own lines).
        const MAX_KEYS: usize = 64;
        let store = self.store.borrow();
        let mut routes = self.routes.borrow_mut();
        match spec.map(|s| &s.route) {
            Some(Route::Key(_) | Route::Atomic { .. }) => {
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
            // A script's declared keys (`numkeys` at argument 2): a pipeline of `EVALSHA`s
            // overlaps its misses as a pipeline of `GET`s does. A bad count prefetches nothing
            // (the command answers its error when it runs).
            Some(Route::Session(Session::Script(_))) if spec.is_some_and(Spec::script) => {
                let n = crate::command::numkeys(args).ok()?;
                let mut first = None;
                for key in &args[3..3 + n] {
                    if routes.len() == MAX_KEYS {
                        break;
                    }
                    let route = store.route_key(key);
                    store.prefetch_bucket(&route);
                    routes.push(route);
                    first = first.or(Some(route));
                }
                first
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

    /// Runs `handler` on this worker's store, writing its reply into the connection's sink;
    /// `route` is the route of `args[1]` when the caller has it.
    #[inline]
    pub(crate) fn execute_resp(
        &self,
        handler: Handler,
        args: &[Bytes],
        route: Option<EmbeddedKeyRoute>,
        out: &mut Resp,
    ) {
        let mut store = self.store.borrow_mut();
        (handler.resp)(&mut Ctx {
            store: &mut store,
            args,
            route,
            out,
        });
    }

    /// Runs `handler` on this worker's store, returning its typed reply.
    pub(crate) fn execute_typed(&self, handler: Handler, args: &[Bytes]) -> Replies {
        let mut out = Replies::new();
        self.execute_into(handler, args, None, &mut out);
        out
    }

    /// Runs `handler` on this worker's store, its typed reply into `out` (emptied first).
    pub(crate) fn execute_into(
        &self,
        handler: Handler,
        args: &[Bytes],
        route: Option<EmbeddedKeyRoute>,
        out: &mut Replies,
    ) {
        out.reset(self.shared.live.output_hard());
        self.shared.notifier.record_command(&args[0]);
        let mut store = self.store.borrow_mut();
        (handler.typed)(&mut Ctx {
            store: &mut store,
            args,
            route,
            out,
        });
    }

    /// Runs `handler` on worker `owner` (this one directly, another by message, waiting out a
    /// transaction holding it) and returns its typed reply.
    pub(crate) async fn execute_on(
        &self,
        owner: usize,
        handler: Handler,
        args: Vec<Bytes>,
    ) -> Replies {
        let origin = crate::tracking::origin();
        if owner == self.index {
            self.wait_unlocked().await;
            return crate::tracking::with_writer(origin, || self.execute_typed(handler, &args));
        }
        let (reply, answer) = oneshot::channel();
        let job = Job::Exec {
            handler,
            args,
            reply,
            origin,
        };
        crate::stats::hop();
        if self.shared.inboxes[owner].send(job).is_ok()
            && let Ok(replies) = answer.await
        {
            return replies;
        }
        shutting_down()
    }

    /// One worker's part of a snapshot: each shard it owns, exported between other work.
    async fn snapshot(&self) -> Result<SnapshotReport, WalError> {
        let persist = self
            .shared
            .persist
            .as_ref()
            .expect("snapshot jobs only with persistence");
        let count = self.shared.router.shard_count();
        let shards: Vec<usize> = self.store.borrow().owned_shards().collect();
        let mut report = SnapshotReport::default();
        for shard in shards {
            // A transaction in flight is not split by an image.
            self.wait_unlocked().await;
            let started = Instant::now();
            let mut keys = 0;
            let (header, bytes) = {
                let mut store = self.store.borrow_mut();
                let wal = &persist.wal;
                fc_snapshot::build_image(shard, count, |push| {
                    let (covered, n) = store
                        .export_shard(shard, || wal.with_log(shard, |log| log.next_seq()), push)
                        .expect("a worker exports only its own shards");
                    keys = n;
                    (covered, n)
                })
            };
            // A replica's watermark of the shard goes after the image's coverage, so that
            // the log trimmed up to the image still ends on one.
            self.shared.repl.remark(persist, shard);
            let pause = started.elapsed().as_micros() as u64;
            let (dir, wal) = (persist.dir.clone(), Arc::clone(&persist.wal));
            let written = tokio::task::spawn_blocking(move || {
                fc_snapshot::commit_image(&dir, &wal, &header, &bytes)
            })
            .await
            .map_err(|e| WalError::Io {
                path: persist.dir.clone(),
                message: format!("snapshot writer: {e}"),
            })??;
            report.keys += keys;
            report.bytes += written;
            report.max_pause_micros = report.max_pause_micros.max(pause);
            tokio::task::yield_now().await;
        }
        Ok(report)
    }
}

/// A keyed table command's handler (`LPUSH`, `RPOP`...).
fn keyed(name: &str) -> Handler {
    crate::command::lookup(name.as_bytes())
        .and_then(Spec::direct)
        .unwrap_or_else(|| panic!("{name} is a keyed command"))
}

/// The reply of work that could not reach its worker.
pub(crate) fn shutting_down() -> Replies {
    let mut out = Replies::new();
    out.error(b"ERR server is shutting down");
    out
}

thread_local! {
    /// This thread's worker (set when the worker starts).
    static CURRENT: RefCell<Option<Rc<Worker>>> = const { RefCell::new(None) };
}

/// The worker of this thread, if it is a worker's.
pub(crate) fn try_current() -> Option<Rc<Worker>> {
    CURRENT.with_borrow(Option::clone)
}

/// The worker of this thread (scripts reach it from the interpreter's callbacks).
///
/// # Panics
/// Off a worker thread.
pub(crate) fn current() -> Rc<Worker> {
    CURRENT.with_borrow(|w| Rc::clone(w.as_ref().expect("called on a worker thread")))
}

/// The worker thread's body: serve jobs until [`Job::Stop`].
pub(crate) fn run<F, Fut>(
    index: usize,
    store: LocalEmbeddedStore,
    shared: Arc<Shared>,
    mut inbox: mpsc::UnboundedReceiver<Job>,
    serve: F,
) where
    F: Fn(std::net::TcpStream, Rc<Worker>, crate::shared::Handover) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    // This thread writes its shards' replication export without a lock.
    let runtime = shared.config.runtime;
    shared
        .repl
        .source
        .attach(index, matches!(runtime, fc_config::Runtime::Tokio));
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
    let committers: Vec<_> = match &shared.persist {
        Some(persist) => own_logs
            .into_iter()
            .map(|log| crate::persist::committer(Arc::clone(persist), log))
            .collect(),
        None => Vec::new(),
    };
    let ticks = shared.observe.ticks().clone();
    let stats = Rc::new(crate::stats::WorkerStats::new(&ticks));
    crate::stats::set_current(Rc::clone(&stats));
    let worker = Rc::new(Worker {
        index,
        store: RefCell::new(store),
        shared,
        locked: Cell::new(false),
        unlocked: Notify::new(),
        routes: RefCell::new(Vec::new()),
        stats,
        ticks,
    });
    CURRENT.with_borrow_mut(|w| *w = Some(Rc::clone(&worker)));
    // Out of work: what this worker wrote for replication leaves now, not at the pump's next
    // tick (see `Repl::worker_idle`).
    let idle = Arc::clone(&worker.shared);
    crate::rt::block_on(runtime, move || idle.repl.worker_idle(index), async move {
        for committer in committers {
            crate::rt::spawn_local(committer);
        }
        crate::rt::spawn_local(active_expiry(Rc::clone(&worker)));
        while let Some(job) = inbox.recv().await {
            match job {
                Job::Exec {
                    handler,
                    args,
                    reply,
                    origin,
                } => {
                    worker.wait_unlocked().await;
                    let replies = crate::tracking::with_writer(origin, || {
                        worker.execute_typed(handler, &args)
                    });
                    let _ = reply.send(replies);
                    worker.serve_ready();
                }
                Job::Run { work, reply } => {
                    worker.wait_unlocked().await;
                    let _ = reply.send(work());
                    worker.serve_ready();
                }
                Job::Serve => worker.serve_ready(),
                Job::Spawn(start) => start(),
                Job::Local(work) => {
                    worker.wait_unlocked().await;
                    work(&mut worker.store.borrow_mut());
                    worker.serve_ready();
                }
                Job::Hold { ack, mut commands } => {
                    worker.lock().await;
                    let _ = ack.send(());
                    while let Some(cmd) = commands.recv().await {
                        let replies = crate::tracking::with_writer(cmd.origin, || {
                            worker.execute_typed(cmd.handler, &cmd.args)
                        });
                        let _ = cmd.reply.send(replies);
                    }
                    // The holder's end markers for these shards, before anything else here.
                    worker.shared.repl.source.settle(worker.index);
                    worker.unlock();
                }
                Job::Conn(stream, handover) => {
                    crate::rt::spawn_local(serve(stream, Rc::clone(&worker), handover));
                }
                Job::Snapshot { reply } => {
                    let worker = Rc::clone(&worker);
                    crate::rt::spawn_local(async move {
                        let _ = reply.send(worker.snapshot().await);
                    });
                }
                Job::Stop => break,
            }
        }
    });
}

/// Active expiry, Redis's slow cycle: `hz` times a second, sweeps this worker's shards in
/// steps of [`EXPIRY_STEP`] entry slots per shard, and repeats while more than a quarter of the
/// entries with a TTL it saw had expired, for at most a quarter of the period (25 ms at
/// `hz 10`). Removed keys are counted in `expired_keys` and emit `Expired` mutations (the log
/// and replicas see them). A worker held by a transaction skips the cycle. With no key on a
/// TTL a cycle is one test per shard.
async fn active_expiry(worker: Rc<Worker>) {
    loop {
        let hz = worker.shared.live.hz.load(Ordering::Relaxed).clamp(1, 500);
        let period = Duration::from_micros(1_000_000 / hz);
        tokio::time::sleep(period).await;
        // Redis stops active expiry while clients are paused (`CLIENT PAUSE`) or by
        // `DEBUG SET-ACTIVE-EXPIRE 0`.
        let shared = &worker.shared;
        if !worker.is_locked() && shared.live.active_expire() && !shared.pause.active() {
            worker.expiry_cycle(period / 4);
            // The expired keys' deletions leave for replicas within a millisecond, also
            // while the worker never runs out of work (see `Repl::worker_busy`).
            shared.repl.worker_busy(worker.index);
        }
    }
}

/// Entry slots per shard examined by one step of an active expiry cycle.
const EXPIRY_STEP: usize = 64;

impl Worker {
    /// One active expiry cycle of at most `limit`.
    fn expiry_cycle(&self, limit: Duration) {
        let started = Instant::now();
        let (mut seen, mut expired) = (0u64, 0u64);
        let mut capped = false;
        let mut store = self.store.borrow_mut();
        loop {
            let report = store.process_maintenance_with_budget(EXPIRY_STEP);
            seen += report.with_ttl;
            expired += report.expired;
            // Repeat while more than a quarter of the step's keys with a TTL had expired.
            if report.with_ttl == 0 || report.expired * 4 <= report.with_ttl {
                break;
            }
            if started.elapsed() >= limit {
                capped = true;
                break;
            }
        }
        let stats = &self.shared.expiry[self.index];
        stats.used_memory.store(
            store.stats_snapshot().total().used_memory,
            Ordering::Relaxed,
        );
        stats
            .cycle_us
            .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        if capped {
            stats.time_cap_reached.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(current) = (expired * 1_000_000).checked_div(seen) {
            // Redis: stale = current * 0.05 + stale * 0.95.
            let old = stats.stale_ppm.load(Ordering::Relaxed);
            stats
                .stale_ppm
                .store((current * 5 + old * 95) / 100, Ordering::Relaxed);
        }
    }
}
