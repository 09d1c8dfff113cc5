//! Transactions in the mutation stream: the store's one mutation sink ([`ServerSink`]), which
//! feeds `WATCH`'s board and the write-ahead log, and brackets what a transaction changes on
//! each worker with [`Mutation::TxBegin`] / [`Mutation::TxEnd`] markers.
//!
//! A transaction (`EXEC`, `MSETNX` or a multi-key write across workers) holds every worker it
//! involves ([`crate::cross::Held`]). [`ServerSink::begin`] gives it an id; the first change it
//! makes on a worker emits that worker's `TxBegin` (a worker it only reads from logs nothing);
//! [`ServerSink::finish`] ends each worker's group before the workers are released:
//!
//! 1. with groups on two or more workers, every changed worker's log is written to the OS
//!    (under `appendfsync always`, synced): each group's mutations are there before any end;
//! 2. each group's `TxEnd` is emitted, and (two or more groups) those logs are written again;
//! 3. the workers are released, so nothing else reaches those logs before step 2 is done.
//!
//! Recovery ([`fc_wal::recover_from`]) then applies a transaction whole or not at all: a
//! group that never ended can only be the last of its log, and its transaction is dropped on
//! every log (see `docs/DURABILITY.md`, Transactions).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use fc_shard::{Mutation, MutationSink};
use fc_wal::{FsyncPolicy, WalSink};

use crate::blocked::Blocked;
use crate::notify::Notifier;
use crate::tracking::Tracking;
use crate::watched::WatchBoard;

/// A worker's open transaction: its id (0: none) and whether its group has begun.
#[derive(Default)]
struct Slot {
    id: AtomicU64,
    begun: AtomicBool,
}

/// The store's mutation sink: transaction markers, then `WATCH`'s board, then the log.
pub(crate) struct ServerSink {
    board: Arc<WatchBoard>,
    /// Told of every push that may serve a blocked client.
    blocked: Arc<Blocked>,
    /// Keyspace notifications.
    notifier: Arc<Notifier>,
    /// Client-side caching's invalidations.
    tracking: Arc<Tracking>,
    wal: Option<Arc<WalSink>>,
    fsync: FsyncPolicy,
    /// Native replication's export.
    repl: Arc<crate::repl::Source>,
    /// Per worker (worker `w` owns the shards `s % workers == w`).
    slots: Vec<Slot>,
    /// Per shard, its worker's slot: a table, not a division per mutation (a restart replays
    /// millions of them through this sink).
    slot_of: Box<[u16]>,
    next_id: AtomicU64,
}

impl ServerSink {
    /// A sink for a store of `shards` shards split over `workers` workers. Transaction ids
    /// start above the clock in microseconds (and, after [`ServerSink::ids_above`], above the
    /// largest id recovery read), so they never repeat across restarts.
    pub(crate) fn new(
        board: Arc<WatchBoard>,
        blocked: Arc<Blocked>,
        notifier: Arc<Notifier>,
        tracking: Arc<Tracking>,
        repl: Arc<crate::repl::Source>,
        shards: usize,
        workers: usize,
    ) -> Self {
        Self {
            board,
            blocked,
            notifier,
            tracking,
            repl,
            wal: None,
            fsync: FsyncPolicy::EverySec,
            slots: (0..workers).map(|_| Slot::default()).collect(),
            slot_of: (0..shards).map(|s| (s % workers) as u16).collect(),
            next_id: AtomicU64::new(fc_snapshot::unix_ms().saturating_mul(1000)),
        }
    }

    /// Logs every mutation (and marker) to `wal` from now on.
    pub(crate) fn with_wal(mut self, wal: Arc<WalSink>, fsync: FsyncPolicy) -> Self {
        self.wal = Some(wal);
        self.fsync = fsync;
        self
    }

    /// Ids handed out from now on are above `id` (the largest one recovery read).
    pub(crate) fn ids_above(&self, id: u64) {
        self.next_id
            .fetch_max(id.saturating_add(1), Ordering::Relaxed);
    }

    /// The downstream sinks.
    fn forward(&self, shard: usize, seq: u64, mutation: &Mutation<'_>) {
        self.board.on_mutation(shard, seq, mutation);
        if let Some(wal) = &self.wal {
            wal.on_mutation(shard, seq, mutation);
        }
        self.repl.on_mutation(shard, seq, mutation);
    }

    /// Opens a transaction on `workers`, which the caller holds (nothing else runs on them
    /// until [`ServerSink::finish`]); returns its id.
    pub(crate) fn begin(&self, workers: &BTreeSet<usize>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        for &w in workers {
            let slot = &self.slots[w];
            slot.begun.store(false, Ordering::Relaxed);
            slot.id.store(id, Ordering::Release);
        }
        id
    }

    /// Closes transaction `id` on `workers` (the set [`ServerSink::begin`] opened it on), still
    /// held: ends each group that began, with the log writes described in the module's
    /// documentation. Returns how many workers' groups it ended.
    pub(crate) fn finish(&self, id: u64, workers: &BTreeSet<usize>) -> usize {
        let changed: Vec<usize> = workers
            .iter()
            .copied()
            .filter(|&w| self.slots[w].begun.load(Ordering::Acquire))
            .collect();
        // A log error poisons the log: the replies are then refused at acknowledgement.
        let write = |changed: &[usize], sync: bool| {
            if let Some(wal) = self.wal.as_ref().filter(|_| changed.len() > 1) {
                for &w in changed {
                    let log = wal.log_of(w);
                    let _ = if sync {
                        wal.commit_log(log)
                    } else {
                        wal.with_log(w, fc_wal::ShardLog::flush)
                    };
                }
            }
        };
        write(&changed, self.fsync == FsyncPolicy::Always);
        for &w in &changed {
            // Shard `w` is one of worker `w`'s: its log is the worker's.
            self.forward(w, 0, &Mutation::TxEnd { id });
        }
        write(&changed, false);
        for &w in workers {
            self.slots[w].id.store(0, Ordering::Release);
        }
        changed.len()
    }
}

impl ServerSink {
    /// [`ServerSink::begin`] on worker `w` alone (no set to build).
    pub(crate) fn begin_one(&self, w: usize) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = &self.slots[w];
        slot.begun.store(false, Ordering::Relaxed);
        slot.id.store(id, Ordering::Release);
        id
    }

    /// [`ServerSink::finish`] on worker `w` alone: one log, so no write to order.
    pub(crate) fn finish_one(&self, id: u64, w: usize) {
        let slot = &self.slots[w];
        if slot.begun.load(Ordering::Acquire) {
            self.forward(w, 0, &Mutation::TxEnd { id });
        }
        slot.id.store(0, Ordering::Release);
    }
}

impl MutationSink for ServerSink {
    fn on_mutation(&self, shard: usize, seq: u64, mutation: &Mutation<'_>) {
        let worker = usize::from(self.slot_of[shard]);
        let slot = &self.slots[worker];
        let id = slot.id.load(Ordering::Acquire);
        if id != 0 && !slot.begun.load(Ordering::Relaxed) {
            slot.begun.store(true, Ordering::Release);
            self.forward(shard, 0, &Mutation::TxBegin { id });
        }
        self.forward(shard, seq, mutation);
        crate::mc_meta::forget(shard, mutation);
        self.notifier.mutation(mutation);
        if self.tracking.active() {
            self.tracking.mutation(worker, mutation);
        }
        // A key that may now serve a blocked pop (Redis signals a key ready on the same
        // changes: a push, an add, a new key by rename).
        match mutation {
            Mutation::ListPush { key, .. }
            | Mutation::ZAdd { key, .. }
            | Mutation::Stream {
                key,
                op: fc_shard::StreamOp::Add { .. },
            } => {
                self.blocked.signal(worker, key);
            }
            Mutation::Rename { to, .. } => self.blocked.signal(worker, to),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_open_on_the_first_change_and_close_on_finish() {
        let pubsub = Arc::new(crate::pubsub::PubSub::new(
            crate::OutputLimit::PUBSUB_DEFAULT,
        ));
        let sink = ServerSink::new(
            Arc::new(WatchBoard::new(4)),
            Arc::new(Blocked::new(2)),
            Arc::new(Notifier::new(Arc::clone(&pubsub))),
            Arc::new(Tracking::new(pubsub, 2)),
            Arc::new(crate::repl::Source::new(
                4,
                2,
                &crate::ReplicationConfig::default(),
            )),
            4,
            2,
        );
        let id = sink.begin(&BTreeSet::from([0, 1]));
        assert!(id > 0);
        sink.on_mutation(2, 1, &Mutation::Delete { key: b"a" });
        assert!(sink.slots[0].begun.load(Ordering::Relaxed));
        assert!(!sink.slots[1].begun.load(Ordering::Relaxed));
        assert_eq!(sink.finish(id, &BTreeSet::from([0, 1])), 1);
        assert_eq!(sink.slots[0].id.load(Ordering::Relaxed), 0);
        // Outside a transaction nothing begins.
        sink.on_mutation(1, 2, &Mutation::Delete { key: b"b" });
        assert!(!sink.slots[1].begun.load(Ordering::Relaxed));
        let next = sink.begin(&BTreeSet::from([1]));
        assert!(next > id);
        assert_eq!(sink.finish(next, &BTreeSet::from([1])), 0);
    }
}
