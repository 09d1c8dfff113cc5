//! `WATCH`: which keys connections watch, and a version per watched key that every change bumps.
//!
//! The board is one of the store's mutation sinks, so it sees every change to a key — commands,
//! lazy and active expiry, eviction, `FLUSHALL`, `RENAME` — on the thread that makes it. With
//! nothing watched a mutation costs one relaxed load. `WATCH` records each key's version;
//! `EXEC` holds the workers owning the watched keys, touches each key (so a key that expired
//! since is reclaimed, which is a change), and runs the transaction only if no version moved.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use fc_shard::{Mutation, MutationSink};

struct Watched {
    version: u64,
    watchers: usize,
}

/// Watched keys per shard.
pub(crate) struct WatchBoard {
    shards: Vec<Mutex<HashMap<Bytes, Watched>>>,
    /// Keys watched across every shard (the fast "nothing to do" test).
    watched: AtomicUsize,
}

/// One key a connection watches.
#[derive(Debug, Clone)]
pub(crate) struct WatchedKey {
    pub(crate) shard: usize,
    pub(crate) key: Bytes,
    pub(crate) version: u64,
}

impl WatchBoard {
    pub(crate) fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards).map(|_| Mutex::new(HashMap::new())).collect(),
            watched: AtomicUsize::new(0),
        }
    }

    fn shard(&self, shard: usize) -> std::sync::MutexGuard<'_, HashMap<Bytes, Watched>> {
        self.shards[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts watching `key` of `shard`; returns what `changed` compares against.
    pub(crate) fn watch(&self, shard: usize, key: Bytes) -> WatchedKey {
        let mut map = self.shard(shard);
        let entry = map.entry(key.clone()).or_insert_with(|| {
            self.watched.fetch_add(1, Ordering::Relaxed);
            Watched {
                version: 0,
                watchers: 0,
            }
        });
        entry.watchers += 1;
        WatchedKey {
            shard,
            key,
            version: entry.version,
        }
    }

    /// Whether `key` changed since it was watched.
    pub(crate) fn changed(&self, key: &WatchedKey) -> bool {
        self.shard(key.shard)
            .get(&key.key)
            .is_none_or(|w| w.version != key.version)
    }

    /// Stops watching `key` (one watcher less).
    pub(crate) fn unwatch(&self, key: &WatchedKey) {
        let mut map = self.shard(key.shard);
        if let Some(w) = map.get_mut(&key.key) {
            w.watchers -= 1;
            if w.watchers == 0 {
                map.remove(&key.key);
                self.watched.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    fn bump(map: &mut HashMap<Bytes, Watched>, key: &[u8]) {
        if let Some(w) = map.get_mut(key) {
            w.version += 1;
        }
    }
}

impl MutationSink for WatchBoard {
    fn on_mutation(&self, shard: usize, _seq: u64, mutation: &Mutation<'_>) {
        if self.watched.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut map = self.shard(shard);
        if map.is_empty() {
            return;
        }
        match mutation {
            Mutation::Flush => map.values_mut().for_each(|w| w.version += 1),
            Mutation::Rename { from, to } => {
                Self::bump(&mut map, from);
                Self::bump(&mut map, to);
            }
            other => {
                if let Some(key) = other.key() {
                    Self::bump(&mut map, key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_move_on_changes_to_watched_keys_only() {
        let board = WatchBoard::new(2);
        let a = board.watch(0, Bytes::from_static(b"a"));
        let b = board.watch(1, Bytes::from_static(b"b"));
        board.on_mutation(0, 1, &Mutation::Delete { key: b"other" });
        board.on_mutation(1, 1, &Mutation::Delete { key: b"a" });
        assert!(!board.changed(&a) && !board.changed(&b));
        board.on_mutation(0, 2, &Mutation::Expired { key: b"a" });
        assert!(board.changed(&a));
        board.on_mutation(
            1,
            2,
            &Mutation::Rename {
                from: b"x",
                to: b"b",
            },
        );
        assert!(board.changed(&b));
        // A second watcher of the same key shares the version; the entry goes with the last.
        let a2 = board.watch(0, Bytes::from_static(b"a"));
        board.unwatch(&a);
        assert!(!board.changed(&a2));
        board.on_mutation(0, 3, &Mutation::Flush);
        assert!(board.changed(&a2));
        board.unwatch(&a2);
        board.unwatch(&b);
        assert_eq!(board.watched.load(Ordering::Relaxed), 0);
    }
}
