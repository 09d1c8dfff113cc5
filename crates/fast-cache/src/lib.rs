//! # fast-cache
//!
//! An embedded-first, thread-per-core in-memory cache. Add this one crate and use
//! [`storage::EmbeddedStore`] (shared by `&`), [`storage::SharedEmbeddedStore`] (cheap clones) or
//! [`storage::LocalEmbeddedStore`] (one per pinned worker, `&mut`, no locks).
//!
//! **Owns:** nothing of its own: it is the facade that re-exports the workspace crates by feature
//! (`storage`, `persistence`, `config` and `protocol`'s codecs by default; `server` with the
//! `server` feature, `protocol::client` with `client`, `cuda` with `cuda`).
//! **Must not depend on:** anything a feature did not ask for.
//!
//! Keys and values are bytes. TTL arguments are milliseconds relative to now; `None` means the
//! value never expires.
//!
//! ## Embedded use
//! ```
//! use fast_cache::storage::EmbeddedStore;
//!
//! let cache = EmbeddedStore::new(16);
//!
//! cache.set(b"user:42".to_vec(), b"ready".to_vec(), None);
//! assert_eq!(cache.get(b"user:42"), Some(b"ready".to_vec()));
//!
//! cache.delete(b"user:42");
//! assert!(!cache.exists(b"user:42"));
//! ```
//!
//! ## Batches return results in key order
//! ```
//! use fast_cache::storage::EmbeddedStore;
//!
//! let cache = EmbeddedStore::new(4);
//! cache.batch_set(
//!     vec![
//!         (b"alpha".to_vec(), b"one".to_vec()),
//!         (b"beta".to_vec(), b"two".to_vec()),
//!     ],
//!     None,
//! );
//!
//! let values = cache.batch_get(vec![b"alpha".to_vec(), b"missing".to_vec()]);
//! assert_eq!(values[0], Some(b"one".to_vec()));
//! assert_eq!(values[1], None);
//! ```
//!
//! ## Owner-local stores for pinned workers
//! Build and route with an [`storage::EmbeddedStore`], then split it: each worker gets exclusive
//! `&mut` access to its shards. Shard counts are powers of two so routing is a shift.
//! ```
//! use fast_cache::storage::{
//!     EmbeddedRouteMode, EmbeddedStore, LocalEmbeddedStoreBootstrap,
//! };
//!
//! let shared = EmbeddedStore::with_route_mode(4, EmbeddedRouteMode::FullKey);
//! let mut stores = LocalEmbeddedStoreBootstrap::from_embedded(shared, 1).into_stores();
//! let mut local = stores.pop().expect("one worker store");
//!
//! local.set(b"local-key".to_vec(), b"value".to_vec(), None);
//! assert_eq!(local.get(b"local-key"), Some(b"value".to_vec()));
//! ```
//!
//! With several workers, send each request to [`storage::LocalEmbeddedStore::owner_of_key`]'s
//! worker; asking the wrong worker is an explicit `NotOwner` error from the `try_*` methods:
//! ```
//! use fast_cache::storage::{EmbeddedStore, StoreError};
//!
//! let mut workers = EmbeddedStore::new(8).into_local_stores(2);
//! let owner = workers[0].owner_of_key(b"k");
//! let other = 1 - owner;
//! workers[owner].set(b"k", b"v", None);
//! assert!(matches!(workers[other].try_get(b"k"), Err(StoreError::NotOwner { .. })));
//! ```
//!
//! ## Sessions: KV-cache chunks on one route, read back as one contiguous buffer
//! ```
//! use fast_cache::storage::{EmbeddedStore, PackedSessionWrite};
//!
//! let cache = EmbeddedStore::new(4);
//! let mut write = PackedSessionWrite::with_capacity(b"session:1".to_vec(), 2, 16);
//!
//! write.push_owned_record(b"session:1:layer:0".to_vec(), b"kv0".to_vec());
//! write.push_owned_record(b"session:1:layer:1".to_vec(), b"kv1".to_vec());
//! cache.batch_set_session_packed_no_ttl(write);
//!
//! let keys = vec![
//!     b"session:1:layer:0".to_vec(),
//!     b"session:1:layer:1".to_vec(),
//! ];
//! let batch = cache.batch_get_session_packed(b"session:1", &keys);
//!
//! assert!(batch.all_hit());
//! assert_eq!(batch.total_bytes(), 6);
//! assert_eq!(batch.get(1), Some(&b"kv1"[..]));
//! ```
//! With [`storage::EmbeddedRouteMode::session_prefix`], every key of a session lands on one shard
//! and a session read takes one lock.
//!
//! ## Redis data types
//! Strings with counters and ranges, hashes, lists, sets and sorted sets, with Redis's
//! semantics: the wrong type is [`storage::StoreError::WrongType`] (its text is Redis's reply),
//! an aggregate that becomes empty is deleted, writes keep the key's TTL.
//! ```
//! use fast_cache::storage::{EmbeddedStore, StoreError, ZAddOptions, ZRange};
//!
//! let cache = EmbeddedStore::new(4);
//! cache.hset(b"user:1", &[(b"name", b"ada"), (b"visits", b"1")])?;
//! assert_eq!(cache.hincrby(b"user:1", b"visits", 1)?, 2);
//! cache.rpush(b"queue", &[b"job-1", b"job-2"])?;
//! assert_eq!(cache.lpop(b"queue", 1)?, Some(vec![b"job-1".to_vec()]));
//! cache.zadd(b"board", &[(10.0, b"ada"), (7.5, b"bob")], ZAddOptions::default())?;
//! let best = cache.zrange(b"board", ZRange::Rank(0, 0), true, None)?;
//! assert_eq!(best, vec![(b"ada".to_vec(), 10.0)]);
//! assert_eq!(cache.sadd(b"queue", &[b"x"]), Err(StoreError::WrongType));
//! # Ok::<(), StoreError>(())
//! ```
//!
//! ## Features
//! - `embedded` (default): [`storage::EmbeddedStore`] and [`storage::SharedEmbeddedStore`].
//! - `sharded` (default): [`storage::LocalEmbeddedStore`] for thread-per-core workers.
//! - `persistence` (default): [`persistence::PersistentStore`], an embedded store that logs
//!   every change (FCW2 write-ahead log, fsync `always` / `everysec` / `no`), writes snapshot
//!   images, and recovers on open — in-process, with no async runtime.
//! - `server`: the Redis-compatible server ([`server`], the `fast-cache-server` binary).
//! - `monoio` (Linux): the server's workers on monoio's io_uring runtime, chosen at start
//!   with `FAST_CACHE_USE_MONOIO=1` (`[server] runtime = "monoio"`); tokio stays the default.
//!   Implies `server`.
//! - `client`: FCNP's Rust client (`protocol::client`).
//! - `cuda`: KV-cache chunks between the cache and GPU memory (`cuda`: transfer plans, the
//!   staging pool, CUDA copies; `docs/GPU.md`).
//! - `unsafe`: reviewed `unsafe` fast paths (`SAFETY.md`), off by default.

/// The embedded storage API: stores, routing, sessions, statistics, mutation events.
pub mod storage {
    pub use fc_route::{
        EmbeddedKeyRoute, EmbeddedRouteMode, EmbeddedSessionRoute, MAX_SHARDS, PreparedPointKey,
        RouteError, SessionPrefixRule, ShardRouter, hash_bytes, hash_tag,
    };
    pub use fc_shard::{
        Clock, DEFAULT_MAINTENANCE_BUDGET, EmbeddedStore, EmbeddedStoreBuilder, EvictionPolicy,
        FieldValue, GetExExpiry, INDEX_BYTES_PER_ENTRY, InsertPosition, KeyTtl, KeyType, LexBound,
        ListEnd, LposOptions, MAX_KEY_LEN, MAX_STRING_LEN, MaintenanceReport, ManualClock, Members,
        Mutation, MutationSink, PackedBatch, PackedSessionWrite, RandomField, RedisObjectResult,
        RemovalCause, RemovalListener, ScanOptions, ScoreBound, ScoredMember, SetAlgebra,
        SetCondition, SetExpiry, SetOptions, SetOutcome, ShardStatsSnapshot, SharedEmbeddedStore,
        StoreError, TierStatsSnapshot, ValueRef, ZAddOptions, ZAddOutcome, ZRange,
    };
    #[cfg(feature = "sharded")]
    pub use fc_shard::{LocalEmbeddedStore, LocalEmbeddedStoreBootstrap};
    /// The write-ahead log's counters (`PersistentStore::wal().stats()`, the server's `INFO
    /// persistence` and `/metrics`), as the specification lists it among the statistics.
    pub use fc_wal::WalStatsSnapshot;
}

/// Persistence for embedded stores: the write-ahead log, snapshot images, recovery.
///
/// Opening a [`persistence::PersistentStore`] loads the newest complete snapshot image of each
/// shard, then replays the log after it; [`PersistentStore::recovery`](persistence::PersistentStore::recovery)
/// reports what that did ([`persistence::LoadReport`]): `images` applied and the `image_keys`
/// and `image_bytes` they held, `skipped_images` (a damaged newest image, with the file and
/// the reason, replaced by the one before it), and `wal` ([`persistence::RecoveryReport`]):
/// per log, the frames, mutations and bytes replayed, any damage found (file, offset, what
/// the [`persistence::RecoveryMode`] did about it: a torn tail truncated, or replay stopped),
/// and the transactions a crash tore (left out whole); `elapsed` is the time it all took.
/// Snapshots are taken on demand ([`PersistentStore::snapshot`](persistence::PersistentStore::snapshot))
/// or in the background by rules like the server's `save`
/// ([`PersistentStore::save_in_background`](persistence::PersistentStore::save_in_background)).
///
/// ```
/// use std::sync::Arc;
///
/// use fast_cache::persistence::{PersistentStore, RecoveryMode, SaveRule, WalConfig};
///
/// let dir = tempfile::tempdir()?;
/// let config = WalConfig::new(dir.path());
/// {
///     let cache = Arc::new(PersistentStore::open(&config, 8, RecoveryMode::default(), |b| b)?);
///     // Snapshot once 100 writes were logged, or after a minute with at least one.
///     let _saves = cache.save_in_background(vec![
///         SaveRule { seconds: 0, changes: 100 },
///         SaveRule { seconds: 60, changes: 1 },
///     ]);
///     cache.set(b"user:1", b"ada", None);
/// }
/// let cache = PersistentStore::open(&config, 8, RecoveryMode::default(), |b| b)?;
/// let report = cache.recovery();
/// println!(
///     "{} images ({} keys), then {} log frames in {:?}",
///     report.images,
///     report.image_keys,
///     report.wal.frames(),
///     report.elapsed
/// );
/// assert_eq!(cache.get(b"user:1"), Some(b"ada".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// ```
/// use fast_cache::persistence::{FsyncPolicy, PersistentStore, RecoveryMode, WalConfig};
///
/// let dir = tempfile::tempdir()?;
/// let config = WalConfig { fsync: FsyncPolicy::Always, ..WalConfig::new(dir.path()) };
/// {
///     let cache = PersistentStore::open(&config, 8, RecoveryMode::default(), |b| b)?;
///     cache.set(b"session:1", b"ada", Some(60_000));
///     cache.snapshot()?;
/// }
/// let cache = PersistentStore::open(&config, 8, RecoveryMode::default(), |b| b)?;
/// assert_eq!(cache.get(b"session:1"), Some(b"ada".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "persistence")]
pub mod persistence {
    pub use fc_snapshot::{BackgroundSaves, LoadReport, PersistentStore, SaveRule, SnapshotReport};
    pub use fc_wal::{
        FsyncPolicy, RecoveryMode, RecoveryReport, WalConfig, WalError, WalStatsSnapshot,
    };
}

/// Reading the write-ahead log's bytes: segment headers, `FCW2` frames and their mutations,
/// as segment files hold them and as the server's WAL TCP export streams them
/// (`examples/wal-tail.rs` tails an export with these). In every build.
pub mod wal {
    pub use fc_wal::{
        FLAG_BATCH, FLAG_SHARD, FRAME_HEADER_LEN, FRAME_MAGIC, FRAME_TRAILER_LEN, FrameRead,
        PayloadError, Record, SEGMENT_HEADER_LEN, SEGMENT_MAGIC, SegmentHeader, StreamRecord,
        decode_frame,
    };
}

/// Configuration from TOML (`fast-cache.toml`; every field documented in
/// `fast-cache.toml.example`): load, validate (every problem with its field name), store, and
/// build an embedded store sized by its `[storage]` section (the memory tier: shards, budget,
/// [`config::EvictionPolicy`]) or the server's settings ([`config::ServerConfig`]). In every
/// build: no runtime, no server needed.
///
/// ```
/// use fast_cache::config::{EvictionPolicy, FastCacheConfig};
///
/// fn main() -> fast_cache::Result<()> {
///     let config = FastCacheConfig::from_toml_str(
///         "[storage]\nshards = 8\nmax_memory = \"64mb\"\neviction_policy = \"allkeys-lru\"\n",
///     )?;
///     config.validate()?;
///     assert_eq!(config.server_config()?.maxmemory_policy, EvictionPolicy::Lru);
///     let cache = config.embedded_store()?;
///     cache.try_set(b"k", b"v", None)?;
///     assert_eq!(cache.stats_snapshot().shards.len(), 8);
///     Ok(())
/// }
/// ```
pub mod config {
    pub use fc_config::{
        ConfigError, CudaConfig, CudaSection, EvictionPolicy, FastCacheConfig, FsyncPolicy,
        OutputLimit, PersistenceConfig, PersistenceSection, Problem, RecoveryMode, ServerConfig,
        ServerSection, Size, StorageSection, parse_size,
    };
}

/// The wire protocols, as sans-IO codecs (bytes in, values out; no runtime): RESP2/RESP3
/// ([`protocol::resp`], fc-resp) and FCNP, fast-cache's native binary protocol
/// ([`protocol::fcnp`], fc-fcnp; `docs/FCNP.md`); with the `client` feature, FCNP's Rust
/// client (`protocol::client`, fc-client).
///
/// ```
/// use fast_cache::protocol::fcnp::{Opcode, RequestDecoder, RequestHeader, encode_request};
///
/// let mut wire = bytes::BytesMut::new();
/// encode_request(&mut wire, &RequestHeader::new(Opcode::Get, 1), &[b"user:42"]);
/// let request = RequestDecoder::default().decode(&mut wire).unwrap().unwrap();
/// assert_eq!(request.into_command().unwrap().0, ["GET", "user:42"]);
/// ```
pub mod protocol {
    /// RESP2/RESP3 (fc-resp): request parsing with Redis's limits and errors, reply encoding
    /// and decoding.
    pub mod resp {
        pub use fc_resp::*;
    }
    /// FCNP (fc-fcnp): fixed little-endian frames, request ids, packed batches, typed values.
    pub mod fcnp {
        pub use fc_fcnp::*;
    }
    /// FCNP's Rust client (fc-client): async and [`client::blocking`], pooled, pipelined,
    /// routing keys to direct shard ports.
    #[cfg(feature = "client")]
    pub mod client {
        pub use fc_client::*;
    }
}

/// KV-cache chunks between the cache and GPU memory (fc-gpu; `docs/GPU.md`): transfer plans
/// (`TransferPlan`: chunks' host spans onto device offsets, checked and coalesced), the
/// staging pool (`StagingPool`, page-locked buffers with the `unsafe` feature), one-copy
/// gathers of a session's chunks from the store, and the CUDA copies (`Gpu`: streams,
/// double-buffered loads, stores back to the cache), with the `[cuda]` settings
/// (`CudaConfig`).
#[cfg(feature = "cuda")]
pub mod cuda {
    pub use fc_config::{CudaConfig, CudaSection};
    pub use fc_gpu::cuda::{DeviceBuffer, Gpu, GpuError, GpuOptions, SessionLoad, TransferReport};
    #[cfg(feature = "unsafe")]
    pub use fc_gpu::cuda::{Pinned, PinnedBuffer};
    pub use fc_gpu::*;

    /// The `[cuda]` settings as [`Gpu::open_with`] takes them (streams, gather threads,
    /// piece size, recycled bytes); the device ordinal, staging limit and alignment are used where the GPU
    /// is opened, the pool made and the offsets planned.
    #[must_use]
    pub fn gpu_options(config: &CudaConfig) -> GpuOptions {
        GpuOptions {
            streams: config.streams,
            gather: GatherConfig {
                threads: config.gather_threads,
                piece_bytes: usize::try_from(config.piece_bytes).unwrap_or(usize::MAX),
                recycle_bytes: usize::try_from(config.recycle_bytes).unwrap_or(usize::MAX),
            },
        }
    }
}

/// The Redis-compatible server, to embed in a binary of your own (the `fc-server` binary is
/// the same thing with a command line).
#[cfg(feature = "server")]
pub mod server {
    pub use fc_server::cli::run;
    pub use fc_server::{
        OutputLimit, PersistenceConfig, Server, ServerConfig, ServerHandle, set_allocator_name,
    };
}

/// Everything that can fail through the facade: the engine, a configuration, persistence, and
/// (with the `server` feature) starting a server. Each converts with `?`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The engine refused an operation ([`storage::StoreError`]: wrong type, out of memory,
    /// not the owner, ...).
    #[error(transparent)]
    Store(#[from] fc_shard::StoreError),
    /// A configuration could not be read, parsed or used ([`config::ConfigError`]).
    #[error(transparent)]
    Config(#[from] fc_config::ConfigError),
    /// The write-ahead log or a snapshot failed (`persistence::WalError`).
    #[error(transparent)]
    Wal(#[from] fc_wal::WalError),
    /// An FCNP client call failed (`protocol::client::Error`).
    #[cfg(feature = "client")]
    #[error(transparent)]
    Client(#[from] fc_client::Error),
    /// A server could not start (`server::Server::start`).
    #[cfg(feature = "server")]
    #[error(transparent)]
    Server(#[from] anyhow::Error),
}

/// `Result` with the facade's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The README's Rust examples, compiled and run as doctests so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The specification's Rust examples (`docs/SPEC_EXAMPLES.md`, verbatim), compiled and run as
/// doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/SPEC_EXAMPLES.md")]
pub struct SpecExamples;
