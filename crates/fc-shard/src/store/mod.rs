//! The three store kinds — thin routers over [`Shard`]s — and what they share.

mod embedded;
mod local;
mod objects;
mod surface;

use std::sync::Arc;

use fc_route::{EmbeddedKeyRoute, EmbeddedRouteMode, ShardRouter};

pub use embedded::{EmbeddedStore, SharedEmbeddedStore, ValueRef};
pub use local::{LocalEmbeddedStore, LocalEmbeddedStoreBootstrap, Routed};
pub use objects::ScanOptions;

use crate::clock::Clock;
use crate::error::StoreError;
use crate::eviction::EvictionPolicy;
use crate::listener::{Listener, RemovalListener};
use crate::mutation::MutationSink;
use crate::shard::{Shard, Sink};

/// Entry slots examined per shard by one `process_maintenance` call when the caller passes no
/// budget of its own.
pub const DEFAULT_MAINTENANCE_BUDGET: usize = 1024;

/// Configures and builds any of the three store kinds.
///
/// ```
/// use fc_shard::{EmbeddedRouteMode, EmbeddedStore, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// let store = EmbeddedStore::builder(8)
///     .route_mode(EmbeddedRouteMode::session_prefix())
///     .clock(clock.clone())
///     .build();
/// store.set(b"k", b"v", Some(500));
/// clock.advance_ms(501);
/// assert_eq!(store.get(b"k"), None);
/// ```
#[derive(Clone)]
#[must_use]
pub struct EmbeddedStoreBuilder {
    shards: usize,
    route_mode: EmbeddedRouteMode,
    clock: Clock,
    sink: Sink,
    max_memory: Option<u64>,
    policy: EvictionPolicy,
    listener: Option<Arc<Listener>>,
}

impl std::fmt::Debug for EmbeddedStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStoreBuilder")
            .field("shards", &self.shards)
            .field("route_mode", &self.route_mode)
            .field("clock", &self.clock)
            .field("mutation_sink", &self.sink.is_some())
            .field("max_memory", &self.max_memory)
            .field("eviction_policy", &self.policy)
            .field("eviction_listener", &self.listener.is_some())
            .finish()
    }
}

impl EmbeddedStoreBuilder {
    pub(crate) fn new(shards: usize) -> Self {
        Self {
            shards,
            route_mode: EmbeddedRouteMode::FullKey,
            clock: Clock::System,
            sink: None,
            max_memory: None,
            policy: EvictionPolicy::NoEviction,
            listener: None,
        }
    }

    /// Bounds the memory the store's entries may take to `bytes`, split evenly over the shards
    /// (each shard keeps its share; see [`crate::INDEX_BYTES_PER_ENTRY`] for what an entry is
    /// charged). Unlimited by default.
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, EvictionPolicy, StoreError};
    ///
    /// let store = EmbeddedStore::builder(1).max_memory(4096).build();
    /// let err = (0..100)
    ///     .map(|i| store.try_set(format!("key:{i}").as_bytes(), &[0u8; 64], None))
    ///     .find_map(Result::err);
    /// assert!(matches!(err, Some(StoreError::OutOfMemory { .. })));
    ///
    /// let lru = EmbeddedStore::builder(1)
    ///     .max_memory(4096)
    ///     .eviction_policy(EvictionPolicy::Lru)
    ///     .build();
    /// for i in 0..100 {
    ///     lru.set(format!("key:{i}").as_bytes(), &[0u8; 64], None);
    /// }
    /// let stats = lru.stats_snapshot().total();
    /// assert!(stats.used_memory <= 4096 && stats.evicted > 0);
    /// ```
    pub fn max_memory(mut self, bytes: u64) -> Self {
        self.max_memory = Some(bytes);
        self
    }

    /// What a write that would exceed [`EmbeddedStoreBuilder::max_memory`] does (default
    /// [`EvictionPolicy::NoEviction`]).
    pub fn eviction_policy(mut self, policy: EvictionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Tells `listener` about every entry that leaves the store — expired, evicted, replaced
    /// by a write, or deleted — with its key, its value and the [`crate::RemovalCause`]. The
    /// listener runs outside every shard lock (so it may use the store), on the thread whose
    /// operation removed the entry, in removal order per shard. A panic in it is caught and
    /// counted (`removal_listener_panics`); the store is unaffected. [`EmbeddedStore::clear`]
    /// tells it nothing (as Redis's `FLUSHALL` sends no per-key events).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use fc_shard::{EmbeddedStore, RemovalCause};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&seen);
    /// let store = EmbeddedStore::builder(1)
    ///     .eviction_listener(move |key: &[u8], value: &[u8], cause: RemovalCause| {
    ///         log.lock().unwrap().push((key.to_vec(), value.to_vec(), cause));
    ///     })
    ///     .build();
    /// store.set(b"k", b"one", None);
    /// store.set(b"k", b"two", None);
    /// store.delete(b"k");
    /// assert_eq!(*seen.lock().unwrap(), vec![
    ///     (b"k".to_vec(), b"one".to_vec(), RemovalCause::Replaced),
    ///     (b"k".to_vec(), b"two".to_vec(), RemovalCause::Deleted),
    /// ]);
    /// ```
    pub fn eviction_listener(mut self, listener: impl RemovalListener + 'static) -> Self {
        self.listener = Some(Arc::new(Listener::new(Arc::new(listener))));
        self
    }

    /// How keys choose their shard (default [`EmbeddedRouteMode::FullKey`]).
    pub fn route_mode(mut self, mode: EmbeddedRouteMode) -> Self {
        self.route_mode = mode;
        self
    }

    /// Where "now" comes from (default the system clock).
    pub fn clock(mut self, clock: impl Into<Clock>) -> Self {
        self.clock = clock.into();
        self
    }

    /// Adds a receiver of every mutation (see [`crate::Mutation`]). Sinks added more than once
    /// all receive every mutation, in the order they were added (a server logs to its WAL and
    /// also tracks `WATCH`ed keys).
    pub fn mutation_sink(mut self, sink: Arc<dyn MutationSink>) -> Self {
        self.sink = Some(match self.sink.take() {
            None => sink,
            Some(first) => Arc::new(Chain(first, sink)),
        });
        self
    }

    /// Builds an [`EmbeddedStore`].
    ///
    /// # Errors
    /// [`StoreError::Route`] when the shard count is not a power of two in `1..=65536`.
    pub fn try_build(self) -> Result<EmbeddedStore, StoreError> {
        let router = ShardRouter::try_new(self.shards, self.route_mode)?;
        let per_shard = self
            .max_memory
            .map(|bytes| bytes / router.shard_count() as u64);
        let shards = (0..router.shard_count())
            .map(|id| {
                let mut shard = Shard::new(id, self.sink.clone());
                shard.set_budget(per_shard, self.policy);
                shard.set_listener(self.listener.clone());
                shard
            })
            .collect();
        Ok(EmbeddedStore::from_parts(router, self.clock, shards))
    }

    /// Builds an [`EmbeddedStore`].
    ///
    /// # Panics
    /// When [`EmbeddedStoreBuilder::try_build`] would fail, with its message.
    #[must_use]
    pub fn build(self) -> EmbeddedStore {
        self.try_build().unwrap_or_else(|err| panic!("{err}"))
    }

    /// Builds a [`SharedEmbeddedStore`].
    ///
    /// # Panics
    /// When [`EmbeddedStoreBuilder::try_build`] would fail, with its message.
    #[must_use]
    pub fn build_shared(self) -> SharedEmbeddedStore {
        SharedEmbeddedStore::from(self.build())
    }
}

/// `(shard, index)` pairs for `routes`, ordered by shard and, within a shard, by index: one lock
/// (or one shard borrow) per run of equal shards.
pub(crate) fn order_by_shard(
    router: &ShardRouter,
    routes: &[EmbeddedKeyRoute],
) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = routes
        .iter()
        .enumerate()
        .map(|(i, r)| (router.shard_of(r), i))
        .collect();
    if !order.is_sorted() {
        order.sort_unstable();
    }
    order
}

/// Keys a batch API prefetches at a time (see `crate::prefetch`): enough to overlap their
/// misses, few enough that the lines are still in L1 when used.
pub(crate) const PREFETCH_WINDOW: usize = 32;

/// Splits `order` into runs of one shard.
pub(crate) fn shard_runs(order: &[(usize, usize)]) -> impl Iterator<Item = &[(usize, usize)]> {
    order.chunk_by(|a, b| a.0 == b.0)
}

/// Absolute expiry for a relative TTL.
#[inline]
pub(crate) fn expiry_for(clock: &Clock, ttl_ms: Option<u64>) -> Option<u64> {
    ttl_ms.map(|ttl| clock.now_ms().saturating_add(ttl))
}

/// TTL in milliseconds → TTL in seconds, rounded as Redis's `TTL` does.
pub(crate) fn ttl_ms_to_seconds(ttl: crate::KeyTtl) -> crate::KeyTtl {
    match ttl {
        crate::KeyTtl::ExpiresIn(ms) => crate::KeyTtl::ExpiresIn(ms.saturating_add(500) / 1000),
        other => other,
    }
}

/// Two sinks called in order.
struct Chain(Arc<dyn MutationSink>, Arc<dyn MutationSink>);

impl MutationSink for Chain {
    fn on_mutation(&self, shard: usize, seq: u64, mutation: &crate::Mutation<'_>) {
        self.0.on_mutation(shard, seq, mutation);
        self.1.on_mutation(shard, seq, mutation);
    }
}
