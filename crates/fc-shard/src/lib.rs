//! # fc-shard — the fast-cache storage engine
//!
//! **Owns:** the shard (an exclusively owned hash index over a slab arena of entries), expiry
//! (lazy on access plus bounded [`EmbeddedStore::process_maintenance`] sweeps), memory budgets
//! and eviction ([`EvictionPolicy`]: refuse, CLOCK or S3-FIFO), removal listeners, Redis's data
//! types (strings with counters and ranges, hashes, lists, sets, sorted sets, streams, `SCAN`, `RENAME`,
//! digests) with Redis's semantics and error texts ([`RedisObjectResult`]), statistics,
//! [`Mutation`] events, packed batches, and the three embedded store kinds:
//!
//! | store | handle | synchronisation |
//! | --- | --- | --- |
//! | [`EmbeddedStore`] | `&self`, `Send + Sync` | one cache-padded reader-writer lock per shard |
//! | [`SharedEmbeddedStore`] | cheap `Clone` | the same store behind an `Arc` |
//! | [`LocalEmbeddedStore`] | `&mut self`, one per worker | none: the worker owns its shards |
//!
//! The three share one key-value surface (`store/surface.rs`): every point, `try_*`, batch and
//! session method has the same name and meaning on each — `set`, `try_set`, `set_routed`,
//! `set_prepared`, `get`, `try_get`, `get_view`, `get_string_view_routed`, `exists_routed`,
//! `delete`, `try_delete`, `expire`, `persist`, `pttl_millis`, `batch_set`, `batch_get`,
//! `batch_get_packed`, `batch_delete`, the `batch_*_session_*` methods, `set_max_memory`,
//! `clear_shard`, `key_snapshot`, `stats_snapshot`, ... The `try_*` forms return what the plain
//! forms panic on (on a [`LocalEmbeddedStore`], [`StoreError::NotOwner`] for a key of another
//! worker). A borrowed read holds the shard's read lock on the shared kinds, so there it returns
//! a [`ValueRef`] guard (`get_view`) or calls a visitor (`batch_get_view`), where a local store
//! returns plain borrows. `tests/surface.rs` runs one script of every shared method on all three.
//!
//! **Must not depend on:** tokio or any runtime, the network, files, or any workspace crate but
//! `fc-route`. Persistence and replication consume [`Mutation`]s through a [`MutationSink`]; they
//! never reach into a shard.
//!
//! ## Limits
//! Keys up to 64 MiB − 1, values up to 4 GiB − 1 (minus the key and the header), at most
//! 2^25 entries of one size class per shard (use more shards for more), 1 to 65536 shards (a
//! power of two). Expiry instants are absolute Unix milliseconds; a key is expired once the clock
//! is past its instant (as Redis).
//!
//! ## Memory layout (see `arena.rs` and `shard.rs`)
//! Each entry is one chunk of a size-class page: an 8-byte header (16 bytes when the entry has an
//! expiry), the key, the value. The index stores 8 bytes per entry (32 hash bits and the chunk
//! location) in 64-byte buckets of 7, grown by half (not doubled) when they average 6 entries,
//! so it runs 57% to 86% full. An overwrite that needs the
//! same size class writes in place; nothing is allocated per entry below 16 KiB.
//!
//! ## Redis data types
//! Methods named after Redis's commands on [`EmbeddedStore`] (and [`SharedEmbeddedStore`]) and
//! [`LocalEmbeddedStore`]: `hset`, `lpush`, `sadd`, `zadd`, `incr_by`, `set_with`, `scan`, ...
//! A key of another type gives [`StoreError::WrongType`]; every Redis-visible error's `Display`
//! is Redis's reply text. `INCRBYFLOAT`/`HINCRBYFLOAT` compute in x87 `long double` as Redis does
//! on x86-64 and store the same text. Differences from Redis: `-0` scores are stored as `0`;
//! operations over several keys need them on one shard (a hash tag).
//!
//! ## Example
//! ```
//! use fc_shard::{EmbeddedStore, KeyTtl, ManualClock};
//!
//! let clock = ManualClock::new(10_000);
//! let store = EmbeddedStore::builder(4).clock(clock.clone()).build();
//! store.set(b"greeting", b"hello", Some(1_500));
//! assert_eq!(store.get_view(b"greeting").as_deref(), Some(&b"hello"[..]));
//! assert_eq!(store.ttl_seconds(b"greeting"), KeyTtl::ExpiresIn(2)); // rounded as Redis
//! clock.advance_ms(1_501);
//! assert!(!store.exists(b"greeting"));
//! ```

mod arena;
mod built;
mod clock;
mod copy;
mod error;
mod eviction;
mod glob;
mod index;
mod listener;
mod mutation;
mod object;
mod packed;
mod prefetch;
mod s3fifo;
mod shard;
mod stats;
mod store;

pub use built::{BuiltEntry, EntryPool};
pub use clock::{Clock, ManualClock};
pub use copy::copy_large;
pub use error::{RedisObjectResult, StoreError};
pub use eviction::{EvictionPolicy, INDEX_BYTES_PER_ENTRY};
pub use fc_route::{
    EmbeddedKeyRoute, EmbeddedRouteMode, EmbeddedSessionRoute, NAMESPACE_MARK, PreparedPointKey,
    SessionPrefixRule, ShardRouter, namespaced, split_namespace,
};
pub use glob::{GlobPattern, glob_match};
pub use listener::{RemovalCause, RemovalListener};
pub use mutation::{Mutation, MutationSink};
pub use object::geo;
pub use object::hash::{FieldValue, RandomField};
pub use object::hll;
pub use object::list::{InsertPosition, ListEnd, LposOptions};
pub use object::set::{Members, SetAlgebra};
pub use object::stream::{
    Fields as StreamFields, GroupReadFrom, GroupStart, PendingEntry, PendingSet, Stream,
    StreamConsumer, StreamEntry, StreamError, StreamGroup, StreamId, StreamNode, StreamOp,
    StreamTrim, TrimStrategy, XAddId, XAddOptions, XAutoClaim, XClaimOptions,
};
pub use object::string::{
    GetExExpiry, MAX_STRING_LEN, SetCondition, SetExpiry, SetOptions, SetOutcome,
};
pub use object::zset::{LexBound, ScoreBound, ScoredMember, ZAddOptions, ZAddOutcome, ZRange};
pub use object::{HashPart, KeyType, ScoredVisitor, Visitor};
pub use packed::{PackedBatch, PackedSessionWrite};
pub use stats::{KeyTtl, MaintenanceReport, ShardStatsSnapshot, TierStatsSnapshot};
pub use store::{
    DEFAULT_MAINTENANCE_BUDGET, EmbeddedStore, EmbeddedStoreBuilder, LocalEmbeddedStore,
    LocalEmbeddedStoreBootstrap, Routed, ScanOptions, SharedEmbeddedStore, ValueRef,
};

/// Largest key length in bytes.
pub const MAX_KEY_LEN: usize = arena::MAX_KEY_LEN;
