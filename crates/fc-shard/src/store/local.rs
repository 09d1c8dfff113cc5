//! [`LocalEmbeddedStore`]: a worker's exclusive share of a store's shards. No lock, no atomic.

use fc_route::{EmbeddedKeyRoute, EmbeddedRouteMode, PreparedPointKey, ShardRouter};

use super::{
    DEFAULT_MAINTENANCE_BUDGET, EmbeddedStore, PREFETCH_WINDOW, expiry_for, order_by_shard,
};
use crate::clock::Clock;
use crate::error::StoreError;
use crate::packed::{PackedBatch, PackedSessionWrite};
use crate::shard::{Shard, tag_of};
use crate::stats::{KeyTtl, MaintenanceReport, TierStatsSnapshot};

/// The shards one worker owns, used through `&mut self`: the fastest path, with no lock and no
/// atomic operation. Shard `s` of the original store belongs to worker `s % workers`.
///
/// Every key operation checks that the key's shard is owned here. The `try_*` methods return
/// [`StoreError::NotOwner`] otherwise; the plain methods panic with that message, because asking a
/// worker for a key it does not own is a routing bug in the caller (route with
/// [`LocalEmbeddedStore::owner_of`] first). A key is never stored in a shard that does not own it.
///
/// ```
/// use fc_shard::{EmbeddedRouteMode, EmbeddedStore, LocalEmbeddedStoreBootstrap};
///
/// let shared = EmbeddedStore::with_route_mode(4, EmbeddedRouteMode::FullKey);
/// let mut stores = LocalEmbeddedStoreBootstrap::from_embedded(shared, 1).into_stores();
/// let mut local = stores.pop().expect("one worker store");
///
/// local.set(b"local-key".to_vec(), b"value".to_vec(), None);
/// assert_eq!(local.get(b"local-key"), Some(b"value".to_vec()));
/// ```
#[derive(Debug)]
pub struct LocalEmbeddedStore {
    worker: usize,
    workers: usize,
    /// Owned shards in shard order: shard `worker + i * workers` is `shards[i]`.
    shards: Vec<Shard>,
    /// Per shard of the whole store: its index in `shards`, or [`FOREIGN`] (a table, so the hot
    /// path does no division).
    local_of: Box<[u32]>,
    router: ShardRouter,
    clock: Clock,
}

/// Marks a shard of another worker in `LocalEmbeddedStore::local_of`.
const FOREIGN: u32 = u32::MAX;

/// Splits an [`EmbeddedStore`] into one [`LocalEmbeddedStore`] per worker.
#[derive(Debug)]
pub struct LocalEmbeddedStoreBootstrap {
    router: ShardRouter,
    workers: usize,
    stores: Vec<LocalEmbeddedStore>,
}

impl LocalEmbeddedStoreBootstrap {
    /// Splits `store` among `workers` workers.
    ///
    /// # Panics
    /// When `workers` is zero or larger than the shard count.
    #[must_use]
    pub fn from_embedded(store: EmbeddedStore, workers: usize) -> Self {
        Self::try_from_embedded(store, workers).unwrap_or_else(|err| panic!("{err}"))
    }

    /// Splits `store` among `workers` workers.
    ///
    /// # Errors
    /// [`StoreError::InvalidWorkerCount`] when `workers` is zero or larger than the shard count.
    pub fn try_from_embedded(store: EmbeddedStore, workers: usize) -> Result<Self, StoreError> {
        let router = *store.router();
        let stores = LocalEmbeddedStore::split(store, workers)?;
        Ok(Self {
            router,
            workers,
            stores,
        })
    }

    /// The worker that owns `route`'s shard.
    #[must_use]
    pub fn owner_of(&self, route: &EmbeddedKeyRoute) -> usize {
        self.router.shard_of(route) % self.workers
    }

    /// The worker that owns `key`.
    #[must_use]
    pub fn owner_of_key(&self, key: &[u8]) -> usize {
        self.owner_of(&self.router.route_key(key))
    }

    /// The router shared by every worker store.
    #[must_use]
    #[inline]
    pub fn router(&self) -> &ShardRouter {
        &self.router
    }

    /// The worker stores, worker 0 first.
    #[must_use]
    pub fn into_stores(self) -> Vec<LocalEmbeddedStore> {
        self.stores
    }
}

impl LocalEmbeddedStore {
    pub(crate) fn split(store: EmbeddedStore, workers: usize) -> Result<Vec<Self>, StoreError> {
        let shard_count = store.shard_count();
        if workers == 0 || workers > shard_count {
            return Err(StoreError::InvalidWorkerCount {
                workers,
                shards: shard_count,
            });
        }
        let (router, clock, shards) = store.into_parts();
        let mut stores: Vec<Self> = (0..workers)
            .map(|worker| Self {
                worker,
                workers,
                shards: Vec::with_capacity(shard_count.div_ceil(workers)),
                local_of: (0..shard_count)
                    .map(|s| {
                        if s % workers == worker {
                            (s / workers) as u32
                        } else {
                            FOREIGN
                        }
                    })
                    .collect(),
                router,
                clock: clock.clone(),
            })
            .collect();
        for mut shard in shards {
            // No lock to release first: the listener hears of each removal as it happens.
            shard.set_deliver_inline(true);
            stores[shard.id() % workers].shards.push(shard);
        }
        Ok(stores)
    }

    pub(crate) fn join(stores: Vec<Self>) -> Result<EmbeddedStore, StoreError> {
        let Some(first) = stores.first() else {
            return Err(StoreError::InvalidWorkerCount {
                workers: 0,
                shards: 0,
            });
        };
        let (router, clock, workers) = (first.router, first.clock.clone(), first.workers);
        let complete = stores.len() == workers
            && stores
                .iter()
                .enumerate()
                .all(|(i, s)| s.worker == i && s.workers == workers && s.router == router);
        if !complete {
            return Err(StoreError::InvalidWorkerCount {
                workers: stores.len(),
                shards: router.shard_count(),
            });
        }
        let mut shards: Vec<Shard> = stores.into_iter().flat_map(|s| s.shards).collect();
        shards.sort_by_key(Shard::id);
        Ok(EmbeddedStore::from_parts(router, clock, shards))
    }

    /// The store's clock.
    #[must_use]
    #[inline]
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// This worker's index.
    #[must_use]
    pub fn worker_index(&self) -> usize {
        self.worker
    }

    /// Number of workers the store was split into.
    #[must_use]
    pub fn worker_count(&self) -> usize {
        self.workers
    }

    /// Shards this worker owns, in order.
    pub fn owned_shards(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.shards.iter().map(Shard::id)
    }

    /// The router shared by every worker.
    #[must_use]
    #[inline]
    pub fn router(&self) -> &ShardRouter {
        &self.router
    }

    /// The route mode.
    #[must_use]
    pub fn route_mode(&self) -> EmbeddedRouteMode {
        self.router.mode()
    }

    /// Replaces the store's clock (as [`EmbeddedStore::set_clock`]).
    pub fn set_clock(&mut self, clock: impl Into<Clock>) {
        self.clock = clock.into();
    }

    /// The number of shards of the whole store (every worker's).
    #[must_use]
    pub fn shard_count(&self) -> usize {
        self.router.shard_count()
    }

    /// The route of `key`.
    #[must_use]
    #[inline]
    pub fn route_key(&self, key: &[u8]) -> EmbeddedKeyRoute {
        self.router.route_key(key)
    }

    /// The route of a session (the shard its keys share in session-prefix mode).
    #[must_use]
    pub fn route_session(&self, prefix: &[u8]) -> fc_route::EmbeddedSessionRoute {
        self.router.route_session(prefix)
    }

    /// The shard `key` lives in (of the whole store's).
    #[must_use]
    pub fn shard_for_key(&self, key: &[u8]) -> usize {
        self.router.shard_of(&self.router.route_key(key))
    }

    /// The worker that owns `route`'s shard.
    #[must_use]
    pub fn owner_of(&self, route: &EmbeddedKeyRoute) -> usize {
        self.router.shard_of(route) % self.workers
    }

    /// The worker that owns `key`.
    #[must_use]
    pub fn owner_of_key(&self, key: &[u8]) -> usize {
        self.owner_of(&self.router.route_key(key))
    }

    /// Whether this worker owns `key`.
    #[must_use]
    pub fn owns(&self, key: &[u8]) -> bool {
        self.owner_of_key(key) == self.worker
    }

    /// Hashes `key` once for later `*_prepared` calls.
    #[must_use]
    pub fn prepare_point_key(&self, key: impl Into<Vec<u8>>) -> PreparedPointKey {
        self.router.prepare_point_key(key)
    }

    /// Index into `self.shards` of `route`'s shard, or who owns it.
    #[inline]
    fn local_index(&self, route: &EmbeddedKeyRoute) -> Result<usize, StoreError> {
        let shard = self.router.shard_of(route);
        match self.local_of[shard] {
            FOREIGN => Err(StoreError::NotOwner {
                shard,
                owner: shard % self.workers,
                worker: self.worker,
            }),
            local => Ok(local as usize),
        }
    }

    /// Starts loading what lookups of `routes` will read: every key's index bucket first,
    /// then the entry each bucket points to. Called just before a batch of reads or writes
    /// (a pipelined request, a batch API), it lets the batch's cache misses overlap instead
    /// of running one after another. A hint only: no result changes, nothing is counted, and
    /// routes of keys another worker owns are skipped. Windows of a few dozen keys keep the
    /// prefetched lines in cache until they are used.
    pub fn prefetch_routes(&self, routes: &[EmbeddedKeyRoute]) {
        for route in routes {
            self.prefetch_bucket(route);
        }
        self.prefetch_entries(routes);
    }

    /// The first half of [`LocalEmbeddedStore::prefetch_routes`] for one key: starts loading
    /// its index bucket. Issued as each request of a batch is parsed, the buckets arrive while
    /// the rest is parsed, and [`LocalEmbeddedStore::prefetch_entries`] then reads them
    /// without waiting. A hint only; a key of another worker is skipped.
    #[inline]
    pub fn prefetch_bucket(&self, route: &EmbeddedKeyRoute) {
        if let Ok(i) = self.local_index(route) {
            self.shards[i].prefetch_index(tag_of(route.key_hash()));
        }
    }

    /// The second half of [`LocalEmbeddedStore::prefetch_routes`]: starts loading the entry
    /// each key's bucket points to (reading the bucket, so prefetch the buckets first). A
    /// hint only; keys of another worker are skipped.
    pub fn prefetch_entries(&self, routes: &[EmbeddedKeyRoute]) {
        for route in routes {
            if let Ok(i) = self.local_index(route) {
                self.shards[i].prefetch_entry(tag_of(route.key_hash()));
            }
        }
    }

    /// The owned shard of `route` and the clock, borrowed together (no clone of the clock on the
    /// hot path).
    #[inline]
    fn owned_shard(&mut self, route: &EmbeddedKeyRoute) -> (&mut Shard, &Clock) {
        match self.local_index(route) {
            Ok(i) => (&mut self.shards[i], &self.clock),
            Err(err) => not_owner(&err),
        }
    }

    /// Runs `f` on `key`'s shard (with the key's tag and the clock), or reports the owner.
    #[inline]
    pub(crate) fn with_owned_shard<R>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&mut Shard, u32, &Clock) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let route = self.router.route_key(key);
        let i = self.local_index(&route)?;
        f(&mut self.shards[i], tag_of(route.key_hash()), &self.clock)
    }

    /// The store's object operations for a key whose route the caller already computed (a
    /// server routes each key once, for its owner and its prefetch): the same methods as on the
    /// store, without hashing the key again. `route` must be the key's
    /// ([`LocalEmbeddedStore::route_key`]); a debug build checks it.
    ///
    /// ```
    /// use fc_shard::{EmbeddedRouteMode, EmbeddedStore, LocalEmbeddedStoreBootstrap};
    ///
    /// let shared = EmbeddedStore::with_route_mode(4, EmbeddedRouteMode::FullKey);
    /// let mut local = LocalEmbeddedStoreBootstrap::from_embedded(shared, 1).into_stores().remove(0);
    /// let route = local.route_key(b"hits");
    /// assert_eq!(local.routed(route).incr_by(b"hits", 2)?, 2);
    /// assert_eq!(local.incr_by(b"hits", 1)?, 3);
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    #[must_use]
    pub fn routed(&mut self, route: EmbeddedKeyRoute) -> Routed<'_> {
        Routed { store: self, route }
    }

    /// The local index of the store's shard `shard`, or who owns it.
    pub(crate) fn local_shard_index(&self, shard: usize) -> Result<usize, StoreError> {
        match self.local_of[shard] {
            FOREIGN => Err(StoreError::NotOwner {
                shard,
                owner: shard % self.workers,
                worker: self.worker,
            }),
            local => Ok(local as usize),
        }
    }

    /// The local index of `key`'s shard and its tag, or who owns it.
    pub(crate) fn locate_key(&self, key: &[u8]) -> Result<(usize, u32), StoreError> {
        let route = self.router.route_key(key);
        Ok((self.local_index(&route)?, tag_of(route.key_hash())))
    }

    /// The owned shards (local index order) and the clock.
    pub(crate) fn shards_and_clock(&mut self) -> (&mut [Shard], &Clock) {
        (&mut self.shards, &self.clock)
    }

    /// The store's shard number of local shard `i`.
    pub(crate) fn global_shard(&self, i: usize) -> usize {
        self.shards[i].id()
    }

    // ----- writes -------------------------------------------------------------------------------

    /// [`LocalEmbeddedStore::try_set`] with a precomputed route of `key`.
    ///
    /// # Errors
    /// As [`LocalEmbeddedStore::try_set`].
    pub fn try_set_routed(
        &mut self,
        route: &EmbeddedKeyRoute,
        key: &[u8],
        value: &[u8],
        ttl_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        debug_assert_eq!(*route, self.router.route_key(key), "route of another key");
        let i = self.local_index(route)?;
        let expire_at = expiry_for(&self.clock, ttl_ms);
        self.shards[i].set(tag_of(route.key_hash()), key, value, expire_at, &self.clock)
    }

    /// [`LocalEmbeddedStore::delete`] that reports a key owned elsewhere.
    ///
    /// # Errors
    /// [`StoreError::NotOwner`].
    pub fn try_delete(&mut self, key: &[u8]) -> Result<bool, StoreError> {
        let route = self.router.route_key(key);
        let i = self.local_index(&route)?;
        Ok(self.shards[i].delete(tag_of(route.key_hash()), key, &self.clock))
    }

    /// [`LocalEmbeddedStore::delete`] with a precomputed route.
    ///
    /// # Panics
    /// When the key is not owned by this worker.
    pub fn delete_routed(&mut self, route: &EmbeddedKeyRoute, key: &[u8]) -> bool {
        let (shard, clock) = self.owned_shard(route);
        shard.delete(tag_of(route.key_hash()), key, clock)
    }

    /// Makes `key` expire at the absolute Unix time `at_ms`; false when it does not exist.
    ///
    /// # Panics
    /// When the key is not owned by this worker.
    pub fn expire_at_ms(&mut self, key: &[u8], at_ms: u64) -> bool {
        let route = self.router.route_key(key);
        let (shard, clock) = self.owned_shard(&route);
        shard.set_expiry(tag_of(route.key_hash()), key, Some(at_ms), clock)
    }

    /// Removes the expiry of `key`; true when it had one.
    ///
    /// # Panics
    /// When the key is not owned by this worker.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        let route = self.router.route_key(key);
        let (shard, clock) = self.owned_shard(&route);
        shard.set_expiry(tag_of(route.key_hash()), key, None, clock)
    }

    /// Changes the memory budget of a store built with [`crate::EmbeddedStoreBuilder::max_memory`]
    /// (`total` over all workers, split evenly across shards as at build time; `None` lifts the
    /// limit and keeps the bookkeeping). Evicting policies evict down to it at once.
    ///
    /// # Errors
    /// [`StoreError::NoBudget`] when the store was built without a budget (nothing changes).
    pub fn set_max_memory(&mut self, total: Option<u64>) -> Result<(), StoreError> {
        let per_shard = total.map(|t| t / self.router.shard_count() as u64);
        for shard in &mut self.shards {
            if !shard.resize_budget(per_shard, &self.clock) {
                return Err(StoreError::NoBudget);
            }
        }
        Ok(())
    }

    /// Removes every key of shard `shard` (one [`crate::Mutation::Flush`] of it), when this
    /// worker owns it; other shards are ignored (as out-of-range ones are by
    /// [`EmbeddedStore::clear_shard`]).
    pub fn clear_shard(&mut self, shard: usize) {
        if shard < self.local_of.len()
            && let Ok(i) = self.local_shard_index(shard)
        {
            self.shards[i].clear();
        }
    }

    /// Whether `key` exists (and has not expired), with a precomputed route.
    ///
    /// # Panics
    /// When the key is owned by another worker.
    #[must_use]
    pub fn exists_routed(&mut self, route: &EmbeddedKeyRoute, key: &[u8]) -> bool {
        let (shard, clock) = self.owned_shard(route);
        shard.exists(tag_of(route.key_hash()), key, clock)
    }

    /// Keys and expiring keys of each database with keys on this worker's shards, database 0
    /// included (keys stored with [`fc_route::namespaced`]; `DBSIZE`, `INFO keyspace`).
    #[must_use]
    pub fn db_counts(&self) -> std::collections::BTreeMap<u32, (u64, u64)> {
        let mut counts = std::collections::BTreeMap::new();
        let (mut keys, mut expires) = (0, 0);
        for shard in &self.shards {
            let stats = shard.stats();
            keys += stats.keys;
            expires += stats.expires;
            for (db, n, e) in shard.namespace_counts() {
                let c: &mut (u64, u64) = counts.entry(db).or_default();
                c.0 += n;
                c.1 += e;
                keys -= n;
                expires -= e;
            }
        }
        if keys > 0 {
            counts.insert(0, (keys, expires));
        }
        counts
    }

    /// How many keys database `db` has on this worker's shards (expired ones not yet reaped
    /// included, as `DBSIZE` counts them).
    #[must_use]
    pub fn db_len(&self, db: u32) -> usize {
        self.db_counts().get(&db).map_or(0, |c| c.0 as usize)
    }

    /// `FLUSHDB`: removes every key of database `db` from this worker's shards (the whole
    /// shard at once, one [`crate::Mutation::Flush`], when it holds no other database).
    pub fn clear_db(&mut self, db: u32) {
        let (shards, clock) = self.shards_and_clock();
        for shard in shards {
            shard.clear_db(db, clock);
        }
    }

    /// `SWAPDB a b` on this worker's shards (a key lives on the same shard in every database).
    ///
    /// # Panics
    /// Unless the store routes in [`crate::EmbeddedRouteMode::Namespaced`] mode (in another
    /// mode a name may live on different shards in two databases).
    pub fn swap_dbs(&mut self, a: u32, b: u32) {
        assert_eq!(
            self.route_mode(),
            crate::EmbeddedRouteMode::Namespaced,
            "swap_dbs needs the Namespaced route mode"
        );
        let (shards, clock) = self.shards_and_clock();
        for shard in shards {
            shard.swap_dbs(a, b, clock);
        }
    }

    /// Removes every key of this worker's shards.
    pub fn clear(&mut self) {
        for shard in &mut self.shards {
            shard.clear();
        }
    }

    // ----- reads --------------------------------------------------------------------------------

    /// [`LocalEmbeddedStore::get_view`] with a precomputed route.
    ///
    /// # Panics
    /// When the key is not owned by this worker.
    #[must_use]
    #[inline]
    pub fn get_view_routed(&mut self, route: &EmbeddedKeyRoute, key: &[u8]) -> Option<&[u8]> {
        let i = match self.local_index(route) {
            Ok(i) => i,
            Err(err) => not_owner(&err),
        };
        let shard = &mut self.shards[i];
        let (_, span) = shard.lookup_span_mut(tag_of(route.key_hash()), key, &self.clock)?;
        Some(shard.value_at(span))
    }

    /// `GET` as a borrow of the stored string (no copy), with a precomputed route of `key`:
    /// what a server encodes straight into its reply buffer. `Ok(None)` when the key is
    /// missing or expired.
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] for a key of another worker, [`StoreError::WrongType`] when
    /// the key holds another type.
    pub fn get_string_view_routed(
        &mut self,
        route: &EmbeddedKeyRoute,
        key: &[u8],
    ) -> Result<Option<&[u8]>, StoreError> {
        debug_assert_eq!(*route, self.router.route_key(key), "route of another key");
        let i = self.local_index(route)?;
        self.shards[i].read_string(tag_of(route.key_hash()), key, &self.clock)
    }

    /// [`LocalEmbeddedStore::set_with`] with a precomputed route of `key`.
    ///
    /// # Errors
    /// As [`LocalEmbeddedStore::set_with`].
    pub fn set_with_routed(
        &mut self,
        route: &EmbeddedKeyRoute,
        key: &[u8],
        value: &[u8],
        options: crate::object::string::SetOptions,
    ) -> Result<crate::object::string::SetOutcome, StoreError> {
        debug_assert_eq!(*route, self.router.route_key(key), "route of another key");
        let i = self.local_index(route)?;
        self.shards[i].set_with(tag_of(route.key_hash()), key, value, options, &self.clock)
    }

    /// [`LocalEmbeddedStore::get`] with a precomputed route.
    ///
    /// # Panics
    /// When the key is not owned by this worker.
    #[must_use]
    pub fn get_routed(&mut self, route: &EmbeddedKeyRoute, key: &[u8]) -> Option<Vec<u8>> {
        self.get_view_routed(route, key).map(<[u8]>::to_vec)
    }

    /// Remaining time to live in milliseconds (Redis's `PTTL`).
    ///
    /// # Panics
    /// When the key is not owned by this worker.
    #[must_use]
    pub fn pttl_millis(&mut self, key: &[u8]) -> KeyTtl {
        let route = self.router.route_key(key);
        let (shard, clock) = self.owned_shard(&route);
        shard.ttl_ms(tag_of(route.key_hash()), key, clock)
    }

    // ----- batches ------------------------------------------------------------------------------

    /// Routes `keys` and checks that every one is owned here.
    fn owned_routes<K: AsRef<[u8]>>(
        &self,
        keys: impl Iterator<Item = K>,
        route: impl Fn(&[u8]) -> EmbeddedKeyRoute,
    ) -> Result<Vec<EmbeddedKeyRoute>, StoreError> {
        keys.map(|k| {
            let r = route(k.as_ref());
            self.local_index(&r).map(|_| r)
        })
        .collect()
    }

    fn write_routed<'a>(
        &mut self,
        routes: &[EmbeddedKeyRoute],
        item: impl Fn(usize) -> (&'a [u8], &'a [u8]),
        ttl_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        let expire_at = expiry_for(&self.clock, ttl_ms);
        let order = order_by_shard(&self.router, routes);
        for window in order.chunks(PREFETCH_WINDOW) {
            self.prefetch_window(window, routes);
            for &(shard, i) in window {
                let (key, value) = item(i);
                self.shards[shard / self.workers].set(
                    tag_of(routes[i].key_hash()),
                    key,
                    value,
                    expire_at,
                    &self.clock,
                )?;
            }
        }
        Ok(())
    }

    /// Stores every pair with the same TTL. Every key must be owned here; nothing is stored when
    /// one is not.
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] before anything is stored, or as [`EmbeddedStore::try_set`].
    pub fn try_batch_set<K, V>(
        &mut self,
        items: impl IntoIterator<Item = (K, V)>,
        ttl_ms: Option<u64>,
    ) -> Result<(), StoreError>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let items: Vec<(K, V)> = items.into_iter().collect();
        let router = self.router;
        let routes = self.owned_routes(items.iter().map(|(k, _)| k), |k| router.route_key(k))?;
        self.write_routed(
            &routes,
            |i| (items[i].0.as_ref(), items[i].1.as_ref()),
            ttl_ms,
        )
    }

    /// Prefetches the buckets, then the entries, of one window of a batch in shard order
    /// (`(shard, index into routes)` pairs of owned keys).
    fn prefetch_window(&self, window: &[(usize, usize)], routes: &[EmbeddedKeyRoute]) {
        for &(shard, i) in window {
            self.shards[shard / self.workers].prefetch_index(tag_of(routes[i].key_hash()));
        }
        for &(shard, i) in window {
            self.shards[shard / self.workers].prefetch_entry(tag_of(routes[i].key_hash()));
        }
    }

    /// Locations of every key's live entry, in key order (expired entries reaped on the way).
    fn locate(&mut self, routes: &[EmbeddedKeyRoute], keys: &[&[u8]]) -> Vec<Option<(usize, u32)>> {
        let mut found = vec![None; keys.len()];
        let order = order_by_shard(&self.router, routes);
        for window in order.chunks(PREFETCH_WINDOW) {
            self.prefetch_window(window, routes);
            for &(shard, i) in window {
                let local = shard / self.workers;
                found[i] = self.shards[local]
                    .lookup_mut(tag_of(routes[i].key_hash()), keys[i], &self.clock)
                    .map(|loc| (local, loc));
            }
        }
        found
    }

    fn read_routed<K: AsRef<[u8]>>(
        &mut self,
        routes: &[EmbeddedKeyRoute],
        keys: &[K],
    ) -> Vec<Option<&[u8]>> {
        let key_refs: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        let found = self.locate(routes, &key_refs);
        found
            .into_iter()
            .map(|f| f.map(|(local, loc)| self.shards[local].value(loc)))
            .collect()
    }

    /// Borrowed values of `keys`, in key order.
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] when a key is owned by another worker.
    pub fn try_batch_get_view<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
    ) -> Result<Vec<Option<&[u8]>>, StoreError> {
        let router = self.router;
        let routes = self.owned_routes(keys.iter(), |k| router.route_key(k))?;
        Ok(self.read_routed(&routes, keys))
    }

    /// Borrowed values of `keys`, in key order.
    ///
    /// # Panics
    /// When a key is owned by another worker.
    #[must_use]
    pub fn batch_get_view<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Vec<Option<&[u8]>> {
        match self.try_batch_get_view(keys) {
            Ok(values) => values,
            Err(err) => not_owner(&err),
        }
    }

    /// Copies of the values of `keys`, in key order.
    ///
    /// # Panics
    /// When a key is owned by another worker.
    #[must_use]
    pub fn batch_get<K: AsRef<[u8]>>(
        &mut self,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Option<Vec<u8>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        self.batch_get_view(&keys)
            .into_iter()
            .map(|v| v.map(<[u8]>::to_vec))
            .collect()
    }

    /// The values of `keys` packed into one buffer, in key order.
    ///
    /// # Panics
    /// When a key is owned by another worker.
    #[must_use]
    pub fn batch_get_packed<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> PackedBatch {
        pack(self.batch_get_view(keys))
    }

    /// Deletes every key; returns how many existed.
    ///
    /// # Panics
    /// When a key is owned by another worker (before anything is deleted).
    pub fn batch_delete<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> usize {
        let router = self.router;
        let routes = match self.owned_routes(keys.iter(), |k| router.route_key(k)) {
            Ok(routes) => routes,
            Err(err) => not_owner(&err),
        };
        let mut deleted = 0;
        for (route, key) in routes.iter().zip(keys) {
            let shard = &mut self.shards[self.router.shard_of(route) / self.workers];
            deleted +=
                usize::from(shard.delete(tag_of(route.key_hash()), key.as_ref(), &self.clock));
        }
        deleted
    }

    // ----- sessions -----------------------------------------------------------------------------

    fn session_routes<K: AsRef<[u8]>>(
        &self,
        prefix: &[u8],
        keys: impl Iterator<Item = K>,
    ) -> Result<Vec<EmbeddedKeyRoute>, StoreError> {
        let session = self.router.route_session(prefix);
        let router = self.router;
        self.owned_routes(keys, |k| router.route_session_key(&session, prefix, k))
    }

    /// Stores a session's records (no expiry).
    ///
    /// # Panics
    /// When a record's key is owned by another worker (before anything is stored).
    pub fn batch_set_session_owned_no_ttl(
        &mut self,
        prefix: impl AsRef<[u8]>,
        records: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        let routes = self
            .session_routes(prefix.as_ref(), records.iter().map(|r| &r.0))
            .unwrap_or_else(|err| not_owner(&err));
        if let Err(err) = self.write_routed(
            &routes,
            |i| (records[i].0.as_slice(), records[i].1.as_slice()),
            None,
        ) {
            panic!("fast-cache session write failed: {err}");
        }
    }

    /// Stores a packed session write (no expiry).
    ///
    /// # Panics
    /// When a record's key is owned by another worker (before anything is stored).
    pub fn batch_set_session_packed_no_ttl(&mut self, write: PackedSessionWrite) {
        let records: Vec<(&[u8], &[u8])> = write.records().collect();
        let routes = self
            .session_routes(write.prefix(), records.iter().map(|r| r.0))
            .unwrap_or_else(|err| not_owner(&err));
        if let Err(err) = self.write_routed(&routes, |i| records[i], None) {
            panic!("fast-cache session write failed: {err}");
        }
    }

    /// Borrowed values of a session's `keys`, in key order.
    ///
    /// # Panics
    /// When a key is owned by another worker.
    #[must_use]
    pub fn batch_get_session_view<K: AsRef<[u8]>>(
        &mut self,
        prefix: &[u8],
        keys: &[K],
    ) -> Vec<Option<&[u8]>> {
        let routes = self
            .session_routes(prefix, keys.iter())
            .unwrap_or_else(|err| not_owner(&err));
        self.read_routed(&routes, keys)
    }

    /// Copies of a session's values, in key order.
    ///
    /// # Panics
    /// When a key is owned by another worker.
    #[must_use]
    pub fn batch_get_session<K: AsRef<[u8]>>(
        &mut self,
        prefix: &[u8],
        keys: &[K],
    ) -> Vec<Option<Vec<u8>>> {
        self.batch_get_session_view(prefix, keys)
            .into_iter()
            .map(|v| v.map(<[u8]>::to_vec))
            .collect()
    }

    /// A session's values packed into one contiguous buffer, in key order.
    ///
    /// # Panics
    /// When a key is owned by another worker.
    #[must_use]
    pub fn batch_get_session_packed<K: AsRef<[u8]>>(
        &mut self,
        prefix: &[u8],
        keys: &[K],
    ) -> PackedBatch {
        pack(self.batch_get_session_view(prefix, keys))
    }

    // ----- whole store --------------------------------------------------------------------------

    /// Entries in this worker's shards (may include expired entries not yet reclaimed).
    #[must_use]
    pub fn len(&self) -> usize {
        self.shards.iter().map(Shard::len).sum()
    }

    /// Whether this worker's shards hold no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Key plus value bytes in this worker's shards.
    #[must_use]
    pub fn stored_bytes(&self) -> u64 {
        self.shards.iter().map(Shard::stored_bytes).sum()
    }

    /// Every live key of this worker's shards.
    #[must_use]
    pub fn key_snapshot(&self) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for shard in &self.shards {
            shard.collect_keys(&self.clock, &mut keys);
        }
        keys
    }

    /// Counters and sizes of this worker's shards.
    #[must_use]
    pub fn stats_snapshot(&self) -> TierStatsSnapshot {
        TierStatsSnapshot {
            shards: self.shards.iter().map(Shard::stats).collect(),
        }
    }

    /// How many times the removal listener panicked, over the whole store (0 without one).
    #[must_use]
    pub fn removal_listener_panics(&self) -> u64 {
        self.shards.first().map_or(0, Shard::listener_panics)
    }

    /// Reclaims expired entries in this worker's shards (bounded work, see
    /// [`EmbeddedStore::process_maintenance`]).
    pub fn process_maintenance(&mut self) -> MaintenanceReport {
        self.process_maintenance_with_budget(DEFAULT_MAINTENANCE_BUDGET)
    }

    /// [`LocalEmbeddedStore::process_maintenance`] with an explicit per-shard budget.
    pub fn process_maintenance_with_budget(
        &mut self,
        budget_per_shard: usize,
    ) -> MaintenanceReport {
        let mut report = MaintenanceReport {
            completed_pass: true,
            ..MaintenanceReport::default()
        };
        for shard in &mut self.shards {
            report.merge(shard.process_maintenance(budget_per_shard, &self.clock));
        }
        report
    }
}

fn pack(values: Vec<Option<&[u8]>>) -> PackedBatch {
    let mut batch = PackedBatch::with_capacity(values.len());
    for value in values {
        batch.push(value);
    }
    batch
}

#[cold]
#[track_caller]
fn not_owner(err: &StoreError) -> ! {
    panic!("{err}")
}

/// A [`LocalEmbeddedStore`] with one key's route known: see [`LocalEmbeddedStore::routed`].
#[derive(Debug)]
pub struct Routed<'a> {
    store: &'a mut LocalEmbeddedStore,
    route: EmbeddedKeyRoute,
}

impl Routed<'_> {
    /// Runs `f` on the route's shard (with the key's tag and the clock), or reports the owner.
    #[inline]
    pub(crate) fn with_shard<R>(
        self,
        key: &[u8],
        f: impl FnOnce(&mut Shard, u32, &Clock) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        debug_assert_eq!(
            self.route,
            self.store.router.route_key(key),
            "route of another key"
        );
        let i = self.store.local_index(&self.route)?;
        f(
            &mut self.store.shards[i],
            tag_of(self.route.key_hash()),
            &self.store.clock,
        )
    }
}
