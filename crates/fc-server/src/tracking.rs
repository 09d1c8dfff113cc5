//! Server-assisted client-side caching (`CLIENT TRACKING`): which clients may hold which keys,
//! and the invalidation messages they get when those keys change.
//!
//! **Default mode.** Each key a tracking client reads (a `readonly` command's keys, subject to
//! `OPTIN`/`OPTOUT` and `CLIENT CACHING`) is remembered in the table of the worker that owns
//! it: key → the ids of the clients that read it. When the key changes — any command on any
//! worker, inside `EXEC` or not, active or lazy expiry, eviction — the store's mutation stream
//! reaches [`Tracking::mutation`] on the owner's thread, which takes the key out of the table
//! and sends each of those clients one invalidation; the client must read the key again to be
//! told of the next change. `FLUSHALL`/`FLUSHDB` send every tracking client a null
//! invalidation (all keys) and empty the tables ([`Tracking::flush`]).
//!
//! **Broadcast mode** (`BCAST [PREFIX p ...]`): nothing is remembered; every change of a key
//! under one of the client's prefixes (every key without one) is sent to it.
//!
//! **Delivery.** An invalidation goes into the receiving connection's message queue (the one
//! pub/sub messages use), so it is written in that connection's protocol: a RESP3 push
//! `invalidate [keys]` (null after a flush), or — for a RESP2 client that redirects
//! (`REDIRECT id`) to a connection subscribed to something — a message on
//! `__redis__:invalidate` to that connection. A RESP2 client without a redirection gets
//! nothing, as in Redis. A client's own write sends it its invalidation after that command's
//! reply (the queue is written between commands), unless it asked for `NOLOOP`.
//!
//! **Cost.** With no tracking client, a mutation pays one relaxed load ([`Tracking::active`]);
//! a tracking client's commands take the connection's general path (where their keys are
//! remembered), everyone else's keep the in-place path.
//!
//! **Bounds.** `tracking-table-max-keys` (Redis's default 1,000,000; 0: unlimited): past it,
//! remembering a key forgets other keys of the same worker's table, sending their clients
//! invalidations as Redis does. The tables are emptied when the last tracking client leaves.
//!
//! Keys are remembered in their stored form, so a key is tracked in the database it was read
//! in (Redis keys its table by name alone, so a write of the same name in another database
//! invalidates it too: an invalidation fast-cache does not send, as nothing cached changed);
//! invalidations name keys without their database, as Redis's do.
//!
//! Differences from Redis: broadcast invalidations are sent one key per message (Redis
//! gathers each event-loop turn's keys into one); a RESP3 redirection target receives
//! invalidations only once it has a message queue (it subscribed, monitors or tracks); a key
//! is remembered both before and after a read that runs on another worker, so a change made
//! between the two can cost the reader one extra invalidation but never a missed one.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use bytes::Bytes;
use fc_shard::Mutation;

use crate::clients::{Client, flag};
use crate::pubsub::{Message, PubSub, Subscriber};

/// Redis's default `tracking-table-max-keys`.
pub(crate) const DEFAULT_MAX_KEYS: u64 = 1_000_000;

thread_local! {
    /// The client whose command is changing keys on this worker thread right now (0: none
    /// known), for `NOLOOP`.
    static WRITER: Cell<u64> = const { Cell::new(0) };
}

tokio::task_local! {
    /// The `NOLOOP` client a connection task runs commands for.
    static ORIGIN: u64;
}

/// The `NOLOOP` client the current task runs a command for (0: none).
pub(crate) fn origin() -> u64 {
    ORIGIN.try_with(|o| *o).unwrap_or(0)
}

/// Runs `work` as client `id`'s (its changes are its own for `NOLOOP`, on whatever worker
/// they run).
pub(crate) async fn as_client<F: Future>(id: u64, work: F) -> F::Output {
    ORIGIN.scope(id, work).await
}

/// Runs `f` (a store command on this worker's thread) as client `origin`'s (0: nobody's).
#[inline]
pub(crate) fn with_writer<T>(origin: u64, f: impl FnOnce() -> T) -> T {
    if origin == 0 {
        return f();
    }
    let before = WRITER.replace(origin);
    let out = f();
    WRITER.set(before);
    out
}

/// One tracking client's settings (`CLIENT TRACKING on ...`).
pub(crate) struct Tracker {
    pub(crate) client: Arc<Client>,
    /// Its own message queue.
    pub(crate) queue: Arc<Subscriber>,
    /// Where its invalidations go instead (`REDIRECT id`).
    pub(crate) redirect: Option<Arc<Client>>,
    pub(crate) bcast: bool,
    pub(crate) optin: bool,
    pub(crate) optout: bool,
    pub(crate) noloop: bool,
    /// Broadcast prefixes (an empty one when none was given).
    pub(crate) prefixes: Vec<Bytes>,
}

impl Tracker {
    /// Whether a read with `CLIENT CACHING` given (`caching`) is remembered.
    pub(crate) fn remembers(&self, caching: bool) -> bool {
        // OPTIN: only with CACHING yes; OPTOUT: unless CACHING no.
        let wanted = if self.optin {
            caching
        } else {
            !(self.optout && caching)
        };
        !self.bcast && wanted
    }
}

/// One worker's remembered keys and the ids of the clients that read each.
type Table = HashMap<Bytes, Vec<u64>>;

/// The server's tracking state.
pub(crate) struct Tracking {
    pubsub: Arc<PubSub>,
    /// Tracking clients: the one load the mutation path pays.
    count: AtomicUsize,
    trackers: RwLock<HashMap<u64, Arc<Tracker>>>,
    /// Per worker: each remembered key of its shards and the clients that read it.
    tables: Box<[Mutex<Table>]>,
    /// Broadcast prefixes and their clients.
    prefixes: RwLock<HashMap<Bytes, HashSet<u64>>>,
    prefix_count: AtomicUsize,
    keys: AtomicU64,
    items: AtomicU64,
    max_keys: AtomicU64,
    /// The clock of queue limits (milliseconds since this was made, as the registry's).
    started: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Tracking {
    pub(crate) fn new(pubsub: Arc<PubSub>, workers: usize) -> Self {
        Self {
            pubsub,
            count: AtomicUsize::new(0),
            trackers: RwLock::default(),
            tables: (0..workers).map(|_| Mutex::default()).collect(),
            prefixes: RwLock::default(),
            prefix_count: AtomicUsize::new(0),
            keys: AtomicU64::new(0),
            items: AtomicU64::new(0),
            max_keys: AtomicU64::new(DEFAULT_MAX_KEYS),
            started: Instant::now(),
        }
    }

    /// Whether any client tracks.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) > 0
    }

    /// `tracking_clients`, `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub(crate) fn counts(&self) -> [u64; 4] {
        [
            self.count.load(Ordering::Relaxed) as u64,
            self.keys.load(Ordering::Relaxed),
            self.items.load(Ordering::Relaxed),
            self.prefix_count.load(Ordering::Relaxed) as u64,
        ]
    }

    pub(crate) fn max_keys(&self) -> u64 {
        self.max_keys.load(Ordering::Relaxed)
    }

    pub(crate) fn set_max_keys(&self, n: u64) {
        self.max_keys.store(n, Ordering::Relaxed);
    }

    /// Starts (or changes) client `tracker.client.id`'s tracking; broadcast prefixes add to
    /// those it had.
    pub(crate) fn enable(&self, tracker: Arc<Tracker>) {
        let id = tracker.client.id;
        if tracker.bcast {
            let mut prefixes = write(&self.prefixes);
            for prefix in &tracker.prefixes {
                prefixes.entry(prefix.clone()).or_default().insert(id);
            }
            self.prefix_count.store(prefixes.len(), Ordering::Relaxed);
        }
        let client = &tracker.client;
        client.set_flag(flag::TRACKING, true);
        client.set_flag(flag::BROKEN_REDIR, false);
        client.set_flag(flag::BCAST, tracker.bcast);
        client.redir.store(
            tracker.redirect.as_ref().map_or(0, |r| r.id as i64),
            Ordering::Relaxed,
        );
        let mut trackers = write(&self.trackers);
        if trackers.insert(id, tracker).is_none() {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Stops client `id`'s tracking (`CLIENT TRACKING off`, `RESET`, the connection ends).
    /// Keys it read stay remembered until they change (as in Redis) unless it was the last
    /// tracking client: then the tables are emptied.
    pub(crate) fn disable(&self, id: u64) {
        let Some(tracker) = write(&self.trackers).remove(&id) else {
            return;
        };
        if tracker.bcast {
            let mut prefixes = write(&self.prefixes);
            for prefix in &tracker.prefixes {
                if let Some(ids) = prefixes.get_mut(prefix) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        prefixes.remove(prefix);
                    }
                }
            }
            self.prefix_count.store(prefixes.len(), Ordering::Relaxed);
        }
        let client = &tracker.client;
        client.set_flag(flag::TRACKING | flag::BROKEN_REDIR | flag::BCAST, false);
        client.redir.store(-1, Ordering::Relaxed);
        if self.count.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.clear_tables();
        }
    }

    fn clear_tables(&self) {
        for table in &self.tables {
            let mut table = lock(table);
            let items: usize = table.values().map(Vec::len).sum();
            self.keys.fetch_sub(table.len() as u64, Ordering::Relaxed);
            self.items.fetch_sub(items as u64, Ordering::Relaxed);
            *table = HashMap::new();
        }
    }

    /// Remembers that client `id` read `key` (owned by worker `owner`); past
    /// `tracking-table-max-keys`, forgets other keys of that table, invalidating them.
    pub(crate) fn remember(&self, owner: usize, key: &Bytes, id: u64) {
        let mut forgotten = Vec::new();
        {
            let mut table = lock(&self.tables[owner]);
            let ids = table.entry(key.clone()).or_insert_with(|| {
                self.keys.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            });
            if !ids.contains(&id) {
                ids.push(id);
                self.items.fetch_add(1, Ordering::Relaxed);
            }
            let max = self.max_keys.load(Ordering::Relaxed);
            while max > 0 && self.keys.load(Ordering::Relaxed) > max {
                let Some(other) = table.keys().find(|k| *k != key).cloned() else {
                    break;
                };
                if let Some(ids) = table.remove(&other) {
                    self.keys.fetch_sub(1, Ordering::Relaxed);
                    self.items.fetch_sub(ids.len() as u64, Ordering::Relaxed);
                    forgotten.push((other, ids));
                }
            }
        }
        for (key, ids) in forgotten {
            self.invalidate(&key, ids, 0);
        }
    }

    /// The keys one mutation changed (made on worker `worker`'s thread), invalidated.
    pub(crate) fn mutation(&self, worker: usize, mutation: &Mutation<'_>) {
        if let Some(key) = mutation.key() {
            self.modified(worker, key);
        }
        if let Mutation::Rename { to, .. } = mutation {
            self.modified(worker, to);
        }
    }

    /// `key` (of worker `worker`'s shards) changed.
    pub(crate) fn modified(&self, worker: usize, key: &[u8]) {
        let writer = WRITER.get();
        if self.prefix_count.load(Ordering::Relaxed) > 0 {
            self.broadcast(key, writer);
        }
        let Some(ids) = lock(&self.tables[worker]).remove(key) else {
            return;
        };
        self.keys.fetch_sub(1, Ordering::Relaxed);
        self.items.fetch_sub(ids.len() as u64, Ordering::Relaxed);
        // Remembered in its stored form (its database's); named as the client knows it.
        let name = fc_shard::split_namespace(key).1;
        self.invalidate(&Bytes::copy_from_slice(name), ids, writer);
    }

    /// Sends `key`'s invalidation to the tracking clients among `ids` (not in broadcast mode;
    /// not `writer` when it asked for `NOLOOP`).
    fn invalidate(&self, key: &Bytes, ids: Vec<u64>, writer: u64) {
        let trackers = read(&self.trackers);
        for id in ids {
            let Some(tracker) = trackers.get(&id) else {
                continue;
            };
            if tracker.bcast || (tracker.noloop && id == writer) {
                continue;
            }
            self.send(tracker, Some(vec![key.clone()]));
        }
    }

    fn broadcast(&self, key: &[u8], writer: u64) {
        // Prefixes match the name the client knows, in every database (as Redis's).
        let key = fc_shard::split_namespace(key).1;
        let prefixes = read(&self.prefixes);
        let trackers = read(&self.trackers);
        for (prefix, ids) in prefixes.iter() {
            if !key.starts_with(prefix) {
                continue;
            }
            for id in ids {
                if let Some(tracker) = trackers.get(id)
                    && !(tracker.noloop && *id == writer)
                {
                    self.send(tracker, Some(vec![Bytes::copy_from_slice(key)]));
                }
            }
        }
    }

    /// After `FLUSHALL`/`FLUSHDB`: a null invalidation to every tracking client, and the
    /// tables emptied.
    pub(crate) fn flush(&self) {
        if !self.active() {
            return;
        }
        for tracker in read(&self.trackers).values() {
            self.send(tracker, None);
        }
        self.clear_tables();
    }

    /// Sends one invalidation for `tracker` (to it, or to its redirection target).
    fn send(&self, tracker: &Tracker, keys: Option<Vec<Bytes>>) {
        let now = self.started.elapsed().as_millis() as u64;
        let limit = self.pubsub.limit();
        let queue = match &tracker.redirect {
            Some(target) => {
                if target.closed.load(Ordering::Acquire) {
                    let client = &tracker.client;
                    client.set_flag(flag::BROKEN_REDIR, true);
                    if client.resp.load(Ordering::Relaxed) == 3 {
                        let message = Arc::new(Message::redirect_broken(target.id));
                        tracker.queue.deliver(&message, limit, now);
                    }
                    return;
                }
                let Some(queue) = self.pubsub.queue_of(target.id) else {
                    return;
                };
                // A RESP2 target takes it as a pub/sub message, so only while subscribed.
                if target.resp.load(Ordering::Relaxed) == 2 && !target.subscribed() {
                    return;
                }
                queue
            }
            None => {
                if tracker.client.resp.load(Ordering::Relaxed) == 2 {
                    return;
                }
                Arc::clone(&tracker.queue)
            }
        };
        queue.deliver(&Arc::new(Message::invalidate(keys)), limit, now);
    }
}
