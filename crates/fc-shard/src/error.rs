//! The engine's error type.

use fc_route::RouteError;

/// Everything a store operation can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The shard count is not usable (see [`fc_route::ShardRouter::try_new`]).
    #[error(transparent)]
    Route(#[from] RouteError),
    /// A [`crate::LocalEmbeddedStore`] was asked about a key on a shard another worker owns.
    #[error("key routes to shard {shard}, owned by worker {owner}, not by this worker {worker}")]
    NotOwner {
        /// Shard the key routes to.
        shard: usize,
        /// Worker that owns that shard.
        owner: usize,
        /// Worker that was asked.
        worker: usize,
    },
    /// The key is longer than the engine supports.
    #[error("key of {len} bytes exceeds the limit of {max} bytes")]
    KeyTooLarge {
        /// Key length.
        len: usize,
        /// Largest supported key length.
        max: usize,
    },
    /// The value is longer than the engine supports.
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Value length.
        len: usize,
        /// Largest supported value length.
        max: usize,
    },
    /// A size class of one shard ran out of entry slots (2^25 entries of one size per shard).
    #[error("shard {shard} has no room left for entries of this size; use more shards")]
    ShardFull {
        /// The full shard.
        shard: usize,
    },
    /// A write would take the shard past its memory budget and the policy is
    /// [`crate::EvictionPolicy::NoEviction`] (or nothing was left to evict). Nothing was changed.
    #[error(
        "out of memory: shard {shard} uses {used} of its {budget} bytes and the write needs {needed} more"
    )]
    OutOfMemory {
        /// The shard that is full.
        shard: usize,
        /// Bytes it charges now.
        used: u64,
        /// Its budget.
        budget: u64,
        /// Bytes the write would add.
        needed: u64,
    },
    /// Splitting a store into owner-local stores with an unusable worker count.
    #[error("invalid worker count {workers}: must be between 1 and the shard count {shards}")]
    InvalidWorkerCount {
        /// Requested workers.
        workers: usize,
        /// Shards of the store.
        shards: usize,
    },
}
