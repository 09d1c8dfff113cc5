//! Memory budgets and what happens when a write would exceed one.
//!
//! A store built with [`crate::EmbeddedStoreBuilder::max_memory`] splits the budget evenly over
//! its shards. Each shard charges every entry its arena footprint (the whole size-class chunk:
//! 8- or 16-byte header, key, value and slack; or the exact allocation of a large entry) plus
//! [`INDEX_BYTES_PER_ENTRY`] for its index slot, and keeps the sum (`used_memory` in the stats)
//! within its share.

/// Index bytes charged per entry: a 64-byte bucket holds 7 entries (9.1 bytes each when full),
/// and the index grows by half when its buckets average 6 of 7 entries, so it runs 57% to 86%
/// full: 10.7 to 16 bytes per entry. 10 is the charge at the fullest load; just after a growth
/// `used_memory` undercounts the index by up to 6 bytes per entry.
pub const INDEX_BYTES_PER_ENTRY: u64 = 10;

/// What a store with a memory budget does when a write would exceed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum EvictionPolicy {
    /// Refuse the write with [`crate::StoreError::OutOfMemory`]; nothing stored is touched
    /// (Redis's `noeviction`, the default).
    #[default]
    NoEviction,
    /// Evict approximately least-recently-used entries (CLOCK: a hand sweeps the shard's
    /// entries; an entry read since the hand last passed gets a second chance). Expired entries
    /// the hand meets are reclaimed first, and a bounded expiry sweep runs before any live entry
    /// is evicted (Redis's `allkeys-lru`).
    Lru,
    /// S3-FIFO (SOSP 2023): new entries wait in a small FIFO queue and leave it unless read
    /// again; reused entries live in a main FIFO queue with reinsertion; a ghost queue of
    /// recently evicted keys sends a returning key straight to the main queue. Resists scans
    /// and one-hit wonders better than LRU. Not a Redis policy (`allkeys-s3fifo` here).
    S3Fifo,
}

impl EvictionPolicy {
    /// Redis's name for the policy (`maxmemory-policy`).
    #[must_use]
    pub fn redis_name(self) -> &'static str {
        match self {
            Self::NoEviction => "noeviction",
            Self::Lru => "allkeys-lru",
            Self::S3Fifo => "allkeys-s3fifo",
        }
    }

    /// The policy of a Redis `maxmemory-policy` name this engine implements.
    #[must_use]
    pub fn from_redis_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "noeviction" => Some(Self::NoEviction),
            "allkeys-lru" => Some(Self::Lru),
            "allkeys-s3fifo" => Some(Self::S3Fifo),
            _ => None,
        }
    }
}

/// Bytes a shard charges for an entry with these key and value lengths, as its S3-FIFO queue
/// accounting counts them: the footprint without an expiry (an entry's expiry can come and go
/// while it is queued, and a queue must take away what it added). What a write would really
/// add is [`footprint_charge`].
#[inline]
pub(crate) fn charge(key_len: usize, value_len: usize) -> u64 {
    footprint_charge(key_len, value_len, false)
}

/// Bytes an entry really occupies: its arena footprint (with its expiry's 8 bytes when it has
/// one) plus its share of the index.
#[inline]
pub(crate) fn footprint_charge(key_len: usize, value_len: usize, has_expiry: bool) -> u64 {
    crate::arena::footprint(key_len, value_len, has_expiry) as u64 + INDEX_BYTES_PER_ENTRY
}
