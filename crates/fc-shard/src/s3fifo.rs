//! S3-FIFO queues of one shard ("FIFO queues are all you need for cache eviction", SOSP 2023).
//!
//! New entries enter the small queue `S` (5% of the budget); entries evicted from `S`
//! without having been read leave their key's tag in the ghost queue `G`; a key found in `G`
//! when written again goes straight to the main queue `M`. Eviction takes from `S` while it
//! holds more than its share: an entry read since it entered moves to `M`, any other is evicted.
//! From `M`, an entry with a non-zero 2-bit access count is reinserted with the count lowered,
//! any other is evicted. Most one-hit entries so leave quickly, while `M` keeps what is reused.
//!
//! Queues hold chunk locations with the generation they had when queued (see the arena's
//! `meta` byte); a position whose chunk was freed or reused since is stale and skipped. Queues
//! are compacted when stale positions outnumber live ones.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

/// `G` holds `M`'s live entries divided by this many tags...
pub(crate) const GHOST_DIVISOR: usize = 4;
/// ...but at least this many.
pub(crate) const GHOST_MIN: usize = 16;

/// Queue bits of the arena's `meta` byte.
pub(crate) const SMALL: u8 = 1;
pub(crate) const MAIN: u8 = 2;

/// A queued entry: its location and the `meta` byte it had when queued.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Queued {
    pub(crate) loc: u32,
    pub(crate) meta: u8,
}

/// The queues and their live counts.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    pub(crate) small: VecDeque<Queued>,
    pub(crate) main: VecDeque<Queued>,
    pub(crate) small_live: usize,
    pub(crate) main_live: usize,
    /// Charged bytes of the entries in `small`.
    pub(crate) small_bytes: u64,
    ghost: VecDeque<u32>,
    ghost_counts: HashMap<u32, u32>,
}

impl Queues {
    /// Whether a key with this tag left `S` unread recently.
    pub(crate) fn in_ghost(&self, tag: u32) -> bool {
        self.ghost_counts.contains_key(&tag)
    }

    /// Remembers the tag of a key evicted from `S`; `G` holds a quarter as many tags as `M`
    /// holds entries (at least [`GHOST_MIN`]). The paper sizes `G` like `M`; a shorter ghost
    /// admits to `M` only keys that return soon, which on the Zipf rows of `cargo xtask
    /// hitratio` gains 0.3–0.7 points (see `S3_SMALL_PERCENT` in `shard.rs`).
    pub(crate) fn remember(&mut self, tag: u32) {
        self.ghost.push_back(tag);
        *self.ghost_counts.entry(tag).or_insert(0) += 1;
        let cap = (self.main_live / GHOST_DIVISOR).max(GHOST_MIN);
        while self.ghost.len() > cap {
            if let Some(old) = self.ghost.pop_front()
                && let Entry::Occupied(mut entry) = self.ghost_counts.entry(old)
            {
                *entry.get_mut() -= 1;
                if *entry.get() == 0 {
                    entry.remove();
                }
            }
        }
    }

    /// Drops stale positions once they outnumber live ones.
    pub(crate) fn compact(&mut self, live: impl Fn(Queued) -> bool) {
        if self.small.len() > 2 * self.small_live + 64 {
            self.small.retain(|&q| live(q));
        }
        if self.main.len() > 2 * self.main_live + 64 {
            self.main.retain(|&q| live(q));
        }
    }
}
