//! Entries built away from the store's locks.
//!
//! A large value (an LLM's KV-cache chunk: 16 KiB to megabytes) costs its write mostly in
//! the copy into the store, and that copy runs under the shard's write lock, on one thread.
//! A [`BuiltEntry`] is that copy made beforehand, on any thread, into an allocation of the
//! entry's final layout; [`crate::EmbeddedStore::try_batch_set_session_built_no_ttl`] then
//! moves each allocation into its shard under the lock (entries over 16 KiB; smaller ones are
//! copied into the shard's pages, as any write is). Several threads can prepare a session's
//! chunks at once, and a GPU's device-to-host copies can be built piece by piece as they
//! land.
//!
//! Building into fresh memory costs page faults (the kernel zeroes every new page), which
//! can cost more than the copy. An [`EntryPool`] keeps the allocations of the large entries
//! a built write replaced and builds the next entries of the same size into them.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::arena;
use crate::error::StoreError;
use crate::shard::check_sizes;

/// A string entry (a key and its value, no expiry) copied once into an allocation of its
/// own, ready to be moved into a store.
///
/// ```
/// use fc_shard::{EmbeddedRouteMode, EmbeddedStore, BuiltEntry};
///
/// let store = EmbeddedStore::with_route_mode(8, EmbeddedRouteMode::session_prefix());
/// let chunk = vec![7u8; 64 << 10];
/// // On any thread, no lock held:
/// let entry = BuiltEntry::new(b"s:1:chunk:0", &chunk)?;
/// assert_eq!(entry.value().len(), 64 << 10);
/// store.try_batch_set_session_built_no_ttl(b"s:1", vec![entry])?;
/// assert_eq!(store.batch_get_session(b"s:1", &[b"s:1:chunk:0"])[0].as_deref(), Some(&chunk[..]));
/// # Ok::<(), fc_shard::StoreError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct BuiltEntry {
    data: Box<[u8]>,
}

impl BuiltEntry {
    /// Copies `key` and `value` into a new entry.
    ///
    /// # Errors
    /// [`StoreError::KeyTooLarge`] and [`StoreError::ValueTooLarge`], as a write would.
    pub fn new(key: &[u8], value: &[u8]) -> Result<Self, StoreError> {
        check_sizes(key, value)?;
        Ok(Self {
            data: arena::built_entry(key, value),
        })
    }

    /// Its key.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        arena::key_of(&self.data)
    }

    /// Its value.
    #[must_use]
    pub fn value(&self) -> &[u8] {
        arena::value_of(&self.data)
    }

    pub(crate) fn into_data(self) -> Box<[u8]> {
        self.data
    }

    /// An entry from the arena's allocation of one (a replaced large entry).
    pub(crate) fn from_data(data: Box<[u8]>) -> Self {
        Self { data }
    }
}

impl std::fmt::Debug for BuiltEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltEntry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value_len", &self.value().len())
            .finish()
    }
}

/// Allocations of large entries that built writes replaced, kept (up to a limit in bytes) to
/// build the next entries of the same size into, so a session overwritten again and again
/// (or a new session with keys of the same lengths) is copied into memory already mapped.
/// Thread-safe: builders on several threads share one pool.
///
/// ```
/// use fc_shard::{EmbeddedRouteMode, EmbeddedStore, EntryPool};
///
/// let store = EmbeddedStore::with_route_mode(8, EmbeddedRouteMode::session_prefix());
/// let pool = EntryPool::new(64 << 20);
/// for round in 0..3u8 {
///     let entry = pool.build(b"s:1:chunk:0", &vec![round; 1 << 20])?;
///     let replaced = store.try_batch_set_session_built_no_ttl(b"s:1", vec![entry])?;
///     pool.give_back(replaced);
/// }
/// assert_eq!(pool.held_bytes(), (1 << 20) + 8 + 11);
/// # Ok::<(), fc_shard::StoreError>(())
/// ```
#[derive(Debug)]
pub struct EntryPool {
    spares: Mutex<Spares>,
    limit: usize,
}

#[derive(Debug, Default)]
struct Spares {
    by_len: HashMap<usize, Vec<Box<[u8]>>>,
    bytes: usize,
}

impl EntryPool {
    /// An empty pool that keeps at most `limit_bytes` of allocations.
    #[must_use]
    pub fn new(limit_bytes: usize) -> Self {
        Self {
            spares: Mutex::new(Spares::default()),
            limit: limit_bytes,
        }
    }

    /// [`BuiltEntry::new`], into a kept allocation of the entry's size when there is one.
    ///
    /// # Errors
    /// As [`BuiltEntry::new`].
    pub fn build(&self, key: &[u8], value: &[u8]) -> Result<BuiltEntry, StoreError> {
        check_sizes(key, value)?;
        let len = arena::HEADER + key.len() + value.len();
        let spare = {
            let mut spares = self.spares.lock();
            let spare = spares.by_len.get_mut(&len).and_then(Vec::pop);
            if spare.is_some() {
                spares.bytes -= len;
            }
            spare
        };
        let data = match spare {
            Some(mut data) => {
                arena::rebuild_entry(&mut data, key, value);
                data
            }
            None => arena::built_entry(key, value),
        };
        Ok(BuiltEntry { data })
    }

    /// Keeps the allocations of `entries` (what a built write returned) for later builds,
    /// while the pool holds less than its limit; the rest are freed.
    pub fn give_back(&self, entries: impl IntoIterator<Item = BuiltEntry>) {
        let mut freed = Vec::new();
        {
            let mut spares = self.spares.lock();
            for entry in entries {
                let len = entry.data.len();
                if spares.bytes + len > self.limit {
                    freed.push(entry);
                    continue;
                }
                spares.bytes += len;
                spares.by_len.entry(len).or_default().push(entry.data);
            }
        }
        drop(freed);
    }

    /// Bytes of allocations kept.
    #[must_use]
    pub fn held_bytes(&self) -> usize {
        self.spares.lock().bytes
    }

    /// Frees every kept allocation.
    pub fn clear(&self) {
        let spares = std::mem::take(&mut *self.spares.lock());
        drop(spares);
    }
}
