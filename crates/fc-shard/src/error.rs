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
    /// Changing the memory limit of a store built without one (eviction bookkeeping must exist
    /// from the first entry on). Nothing was changed.
    #[error("the memory limit can change only on a store built with one (max_memory)")]
    NoBudget,
    /// Splitting a store into owner-local stores with an unusable worker count.
    #[error("invalid worker count {workers}: must be between 1 and the shard count {shards}")]
    InvalidWorkerCount {
        /// Requested workers.
        workers: usize,
        /// Shards of the store.
        shards: usize,
    },
    /// The key holds a value of another type than the operation works on.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    /// The stored value (or an argument) is not a 64-bit integer in Redis's strict form.
    #[error("ERR value is not an integer or out of range")]
    NotAnInteger,
    /// A hash field's value is not an integer.
    #[error("ERR hash value is not an integer")]
    HashValueNotAnInteger,
    /// The stored value (or an argument) is not a valid floating-point number.
    #[error("ERR value is not a valid float")]
    NotAFloat,
    /// A hash field's value is not a valid floating-point number.
    #[error("ERR hash value is not a float")]
    HashValueNotAFloat,
    /// An integer increment would leave the 64-bit range.
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    /// A floating-point increment would produce NaN or an infinity.
    #[error("ERR increment would produce NaN or Infinity")]
    NanOrInfinity,
    /// A `HINCRBYFLOAT` increment that is itself infinite (`inf`).
    #[error("ERR value is NaN or Infinity")]
    IncrementNanOrInfinity,
    /// A string would grow past Redis's 512 MiB bulk limit.
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    StringTooLong,
    /// A negative or too-large offset (`SETRANGE`).
    #[error("ERR offset is out of range")]
    OffsetOutOfRange,
    /// The key does not exist (`RENAME`, `LSET`).
    #[error("ERR no such key")]
    NoSuchKey,
    /// A list index past either end (`LSET`).
    #[error("ERR index out of range")]
    IndexOutOfRange,
    /// `LPOS` with a rank of 0 (or `i64::MIN`).
    #[error(
        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the last match"
    )]
    RankZero,
    /// `ZADD ... INCR` / `ZINCRBY` whose result is NaN (`inf` + `-inf`).
    #[error("ERR resulting score is not a number (NaN)")]
    ScoreNan,
    /// A stream command's error (Redis's texts; see [`crate::StreamError`]).
    #[error(transparent)]
    Stream(#[from] crate::StreamError),
    /// An operation on several keys that must share a shard got keys of different shards.
    #[error("keys of one operation route to different shards ({first} and {second})")]
    CrossShard {
        /// Shard of the first key.
        first: usize,
        /// Shard of a key that differs.
        second: usize,
    },
}

impl StoreError {
    /// Whether this is one of the errors Redis replies with for the same condition: its
    /// `Display` text is then exactly Redis's reply line (without the leading `-`).
    #[must_use]
    pub fn is_redis_reply(&self) -> bool {
        matches!(
            self,
            Self::WrongType
                | Self::NotAnInteger
                | Self::HashValueNotAnInteger
                | Self::NotAFloat
                | Self::HashValueNotAFloat
                | Self::Overflow
                | Self::NanOrInfinity
                | Self::IncrementNanOrInfinity
                | Self::StringTooLong
                | Self::OffsetOutOfRange
                | Self::NoSuchKey
                | Self::IndexOutOfRange
                | Self::RankZero
                | Self::ScoreNan
                | Self::Stream(_)
        )
    }
}

/// The result of a Redis object operation: [`StoreError::WrongType`] when the key holds another
/// type, Redis's other errors by their exact texts, and the engine's own errors.
pub type RedisObjectResult<T> = Result<T, StoreError>;
