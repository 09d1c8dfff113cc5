//! memcached's per-item metadata (client flags and CAS values) for the keys of this worker's
//! shards, beside the engine's entries: a key has an entry once a memcached client stored it
//! with flags other than 0 or asked for its CAS (an item without one has flags 0 and draws its
//! CAS when first asked). Any change to a key's value by any path (a RESP `SET`, expiry,
//! eviction, `DEL`, a flush) reaches [`forget`] through the store's mutation sink on the owning
//! worker and drops its entry, so a CAS value names one version of an item exactly: once the
//! item changes, a new CAS is drawn the next time one is asked for. A new expiry alone (`touch`,
//! RESP `EXPIRE`) keeps both, as memcached's `touch` does.
//!
//! Kept in memory only: a restart brings memcached items back with flags 0 (memcached itself
//! keeps nothing across restarts).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

use fc_shard::Mutation;

/// One item's memcached metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The client's opaque flags.
    pub(crate) flags: u32,
    /// The item's CAS value.
    pub(crate) cas: u64,
}

/// One shard's entries, by key.
type ShardMeta = HashMap<Box<[u8]>, Meta, foldhash::fast::RandomState>;

thread_local! {
    /// Per shard (the worker's own), per key.
    static META: RefCell<HashMap<usize, ShardMeta, foldhash::fast::RandomState>> =
        RefCell::new(HashMap::default());
    /// Whether any entry exists on this thread (the mutation sink's one check when memcached
    /// is not used).
    static USED: Cell<bool> = const { Cell::new(false) };
    /// The last CAS value drawn on this thread.
    static NEXT_CAS: Cell<u64> = const { Cell::new(0) };
}

/// Draws a new CAS value: worker `worker` draws `worker + 1`, then steps of `stride` (at
/// least the worker count), so values are unique across workers (a client compares them only
/// for equality, key by key).
pub(crate) fn next_cas(worker: usize, stride: usize) -> u64 {
    NEXT_CAS.with(|n| {
        let next = if n.get() == 0 {
            worker as u64 + 1
        } else {
            n.get() + stride.max(1) as u64
        };
        n.set(next);
        next
    })
}

/// The key's metadata on shard `shard`.
pub(crate) fn get(shard: usize, key: &[u8]) -> Option<Meta> {
    if !USED.with(Cell::get) {
        return None;
    }
    META.with(|m| {
        m.borrow()
            .get(&shard)
            .and_then(|keys| keys.get(key))
            .copied()
    })
}

/// Sets the key's metadata (after the write it describes: the write's own mutation dropped
/// the old entry).
pub(crate) fn set(shard: usize, key: &[u8], meta: Meta) {
    USED.with(|u| u.set(true));
    META.with(|m| {
        m.borrow_mut()
            .entry(shard)
            .or_default()
            .insert(key.into(), meta);
    });
}

/// Drops what `mutation` makes stale (called by the store's mutation sink on the owning
/// worker's thread for every change).
#[inline]
pub(crate) fn forget(shard: usize, mutation: &Mutation<'_>) {
    if !USED.with(Cell::get) {
        return;
    }
    META.with(|m| {
        let mut m = m.borrow_mut();
        let Some(keys) = m.get_mut(&shard) else {
            return;
        };
        match mutation {
            Mutation::Flush => keys.clear(),
            // A new expiry leaves the item as it was: memcached's `touch` keeps its flags and
            // its CAS value.
            Mutation::Expire { .. } | Mutation::Persist { .. } => {}
            Mutation::Rename { from, to } => {
                keys.remove(*from);
                keys.remove(*to);
            }
            other => {
                if let Some(key) = other.key() {
                    keys.remove(key);
                }
            }
        }
    });
}

/// The counters memcached's `stats` reports, shared by every memcached connection of a
/// server.
#[derive(Debug, Default)]
pub(crate) struct McStats {
    pub(crate) curr_connections: AtomicU64,
    pub(crate) total_connections: AtomicU64,
    pub(crate) cmd_get: AtomicU64,
    pub(crate) cmd_set: AtomicU64,
    pub(crate) cmd_flush: AtomicU64,
    pub(crate) cmd_touch: AtomicU64,
    pub(crate) get_hits: AtomicU64,
    pub(crate) get_misses: AtomicU64,
    pub(crate) delete_hits: AtomicU64,
    pub(crate) delete_misses: AtomicU64,
    pub(crate) incr_hits: AtomicU64,
    pub(crate) incr_misses: AtomicU64,
    pub(crate) decr_hits: AtomicU64,
    pub(crate) decr_misses: AtomicU64,
    pub(crate) cas_hits: AtomicU64,
    pub(crate) cas_misses: AtomicU64,
    pub(crate) cas_badval: AtomicU64,
    pub(crate) touch_hits: AtomicU64,
    pub(crate) touch_misses: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
}
