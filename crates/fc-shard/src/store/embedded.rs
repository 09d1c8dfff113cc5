//! [`EmbeddedStore`] (shared by `&`) and [`SharedEmbeddedStore`] (cheap clones of one store).

use std::ops::Deref;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use fc_route::{
    EmbeddedKeyRoute, EmbeddedRouteMode, EmbeddedSessionRoute, PreparedPointKey, ShardRouter,
};
use parking_lot::{MappedRwLockReadGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::{
    DEFAULT_MAINTENANCE_BUDGET, EmbeddedStoreBuilder, expiry_for, order_by_shard, shard_runs,
};
use crate::built::BuiltEntry;
use crate::clock::Clock;
use crate::error::StoreError;
use crate::packed::{PackedBatch, PackedSessionWrite};
use crate::shard::{Lookup, Shard, tag_of};
use crate::stats::{KeyTtl, MaintenanceReport, TierStatsSnapshot};
use crate::store::LocalEmbeddedStore;

/// Exclusive access to a shard that, once released, hands the entries the operation removed to
/// the store's removal listener: the listener runs after the lock is gone.
pub(crate) struct ShardWrite<'a> {
    guard: Option<RwLockWriteGuard<'a, Shard>>,
}

impl Deref for ShardWrite<'_> {
    type Target = Shard;

    #[inline(always)]
    fn deref(&self) -> &Shard {
        self.guard.as_deref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for ShardWrite<'_> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Shard {
        self.guard.as_deref_mut().expect("held until dropped")
    }
}

impl ShardWrite<'_> {
    /// Unlocks, then hands the queued removals to the listener.
    #[cold]
    #[inline(never)]
    fn unlock_and_deliver(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            let pending = guard.take_removals();
            drop(guard);
            if let Some((listener, removals)) = pending {
                listener.deliver_all(removals);
            }
        }
    }
}

impl Drop for ShardWrite<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        // The common case (nothing removed, or no listener) is one test before the unlock.
        if self.guard.as_ref().is_some_and(|g| g.has_removals()) {
            self.unlock_and_deliver();
        }
    }
}

/// `write_shard()`: the write lock of a shard as a [`ShardWrite`].
trait WriteShard {
    fn write_shard(&self) -> ShardWrite<'_>;
}

impl WriteShard for RwLock<Shard> {
    #[inline(always)]
    fn write_shard(&self) -> ShardWrite<'_> {
        ShardWrite {
            guard: Some(self.write()),
        }
    }
}

/// A sharded in-memory store shared between threads by reference (`Send + Sync`).
///
/// Each shard sits behind its own cache-padded reader-writer lock, so threads working on
/// different shards never touch the same cache line. Reads take the shard's read lock; writes its
/// write lock. Split it into owner-local stores with [`EmbeddedStore::into_local_stores`] when
/// workers are pinned to cores.
///
/// ```
/// use fc_shard::EmbeddedStore;
///
/// let cache = EmbeddedStore::new(16);
/// cache.set(b"user:42".to_vec(), b"ready".to_vec(), None);
/// assert_eq!(cache.get(b"user:42"), Some(b"ready".to_vec()));
/// cache.delete(b"user:42");
/// assert!(!cache.exists(b"user:42"));
/// ```
pub struct EmbeddedStore {
    shards: Box<[CachePadded<RwLock<Shard>>]>,
    router: ShardRouter,
    clock: Clock,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("router", &self.router)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// A borrowed value: holds its shard's read lock until dropped.
///
/// Do not write to the same store from the thread holding a `ValueRef` of the same shard: the
/// write would wait for this read lock forever (as with `DashMap`'s `Ref`).
pub struct ValueRef<'a>(MappedRwLockReadGuard<'a, [u8]>);

impl Deref for ValueRef<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for ValueRef<'_> {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for ValueRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ValueRef").field(&&*self.0).finish()
    }
}

impl EmbeddedStore {
    /// A store with `shards` shards (a power of two) routing on full keys.
    ///
    /// # Panics
    /// When `shards` is not a power of two in `1..=65536`, naming the count.
    #[must_use]
    pub fn new(shards: usize) -> Self {
        EmbeddedStoreBuilder::new(shards).build()
    }

    /// A store with `shards` shards.
    ///
    /// # Errors
    /// [`StoreError::Route`] naming the count when it is not a power of two in `1..=65536`.
    pub fn try_new(shards: usize) -> Result<Self, StoreError> {
        EmbeddedStoreBuilder::new(shards).try_build()
    }

    /// A store with `shards` shards and the given route mode.
    ///
    /// # Panics
    /// When `shards` is not a power of two in `1..=65536`, naming the count.
    #[must_use]
    pub fn with_route_mode(shards: usize, mode: EmbeddedRouteMode) -> Self {
        EmbeddedStoreBuilder::new(shards).route_mode(mode).build()
    }

    /// Starts configuring a store of `shards` shards.
    pub fn builder(shards: usize) -> EmbeddedStoreBuilder {
        EmbeddedStoreBuilder::new(shards)
    }

    pub(crate) fn from_parts(router: ShardRouter, clock: Clock, shards: Vec<Shard>) -> Self {
        Self {
            shards: shards
                .into_iter()
                .map(|mut shard| {
                    shard.set_deliver_inline(false);
                    CachePadded::new(RwLock::new(shard))
                })
                .collect(),
            router,
            clock,
        }
    }

    pub(crate) fn into_parts(self) -> (ShardRouter, Clock, Vec<Shard>) {
        let shards = self
            .shards
            .into_vec()
            .into_iter()
            .map(|cell| CachePadded::into_inner(cell).into_inner())
            .collect();
        (self.router, self.clock, shards)
    }

    /// Number of shards.
    #[must_use]
    pub fn shard_count(&self) -> usize {
        self.router.shard_count()
    }

    /// The route mode.
    #[must_use]
    pub fn route_mode(&self) -> EmbeddedRouteMode {
        self.router.mode()
    }

    /// The router (shard count and route mode).
    #[must_use]
    #[inline]
    pub fn router(&self) -> &ShardRouter {
        &self.router
    }

    /// The store's clock.
    #[must_use]
    #[inline]
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Replaces the store's clock. A loader replaying a log sets a clock stopped at 0 first, so
    /// no entry counts as expired while the history is rebuilt (as Redis does not expire keys
    /// while loading), then puts the real clock back.
    pub fn set_clock(&mut self, clock: impl Into<Clock>) {
        self.clock = clock.into();
    }

    /// The route of `key` (hash it once, reuse with the `*_routed` methods).
    #[must_use]
    #[inline]
    pub fn route_key(&self, key: &[u8]) -> EmbeddedKeyRoute {
        self.router.route_key(key)
    }

    /// The route of a session prefix.
    #[must_use]
    pub fn route_session(&self, prefix: &[u8]) -> EmbeddedSessionRoute {
        self.router.route_session(prefix)
    }

    /// The shard that holds `key`.
    #[must_use]
    pub fn shard_for_key(&self, key: &[u8]) -> usize {
        self.router.shard_of(&self.router.route_key(key))
    }

    /// Hashes `key` once so that later operations on it hash nothing.
    #[must_use]
    pub fn prepare_point_key(&self, key: impl Into<Vec<u8>>) -> PreparedPointKey {
        self.router.prepare_point_key(key)
    }

    #[inline]
    fn shard(&self, route: &EmbeddedKeyRoute) -> &RwLock<Shard> {
        &self.shards[self.router.shard_of(route)]
    }

    /// Runs `f` on `key`'s shard under its read lock (with the key's tag and the clock).
    #[inline]
    pub(crate) fn with_shard_read<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&Shard, u32, &Clock) -> R,
    ) -> R {
        let route = self.router.route_key(key);
        let shard = self.shard(&route).read();
        f(&shard, tag_of(route.key_hash()), &self.clock)
    }

    /// Runs `f` on `key`'s shard under its write lock (removal listeners run after it unlocks).
    #[inline]
    pub(crate) fn with_shard_write<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&mut Shard, u32, &Clock) -> R,
    ) -> R {
        let route = self.router.route_key(key);
        let mut shard = self.shard(&route).write_shard();
        f(&mut shard, tag_of(route.key_hash()), &self.clock)
    }

    /// Runs `f` with every shard in `shards` (ascending, distinct) write-locked, in that order
    /// (a fixed order: no deadlock between two such calls).
    pub(crate) fn with_shards_write<R>(
        &self,
        shards: &[usize],
        f: impl FnOnce(&mut [ShardWrite<'_>], &Clock) -> R,
    ) -> R {
        let mut guards: Vec<ShardWrite<'_>> = shards
            .iter()
            .map(|&s| self.shards[s].write_shard())
            .collect();
        f(&mut guards, &self.clock)
    }

    /// Runs `f` on shard `shard` under its read lock.
    pub(crate) fn with_shard_index_read<R>(
        &self,
        shard: usize,
        f: impl FnOnce(&Shard, &Clock) -> R,
    ) -> R {
        f(&self.shards[shard].read(), &self.clock)
    }

    /// Runs `f` on every shard in turn under its read lock.
    pub(crate) fn for_each_shard_read(&self, mut f: impl FnMut(usize, &Shard, &Clock)) {
        for (i, shard) in self.shards.iter().enumerate() {
            f(i, &shard.read(), &self.clock);
        }
    }

    /// Removes `key` from shard `shard` if it is (still) expired: the write half of lazy expiry.
    #[cold]
    fn reap(&self, shard: usize, tag: u32, key: &[u8]) {
        self.shards[shard]
            .write_shard()
            .reap_if_expired(tag, key, &self.clock);
    }

    // ----- writes -------------------------------------------------------------------------------

    /// [`EmbeddedStore::try_set`] with a precomputed route of `key`.
    ///
    /// # Errors
    /// As [`EmbeddedStore::try_set`].
    pub fn try_set_routed(
        &self,
        route: &EmbeddedKeyRoute,
        key: &[u8],
        value: &[u8],
        ttl_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        debug_assert_eq!(*route, self.router.route_key(key), "route of another key");
        let expire_at = expiry_for(&self.clock, ttl_ms);
        self.shard(route).write_shard().set(
            tag_of(route.key_hash()),
            key,
            value,
            expire_at,
            &self.clock,
        )
    }

    /// [`EmbeddedStore::delete`] with a precomputed route.
    pub fn delete_routed(&self, route: &EmbeddedKeyRoute, key: &[u8]) -> bool {
        self.shard(route)
            .write_shard()
            .delete(tag_of(route.key_hash()), key, &self.clock)
    }

    /// Makes `key` expire at the absolute Unix time `at_ms`; false when the key does not exist.
    pub fn expire_at_ms(&self, key: &[u8], at_ms: u64) -> bool {
        let route = self.router.route_key(key);
        self.shard(&route).write_shard().set_expiry(
            tag_of(route.key_hash()),
            key,
            Some(at_ms),
            &self.clock,
        )
    }

    /// Removes the expiry of `key`; true when it had one.
    pub fn persist(&self, key: &[u8]) -> bool {
        let route = self.router.route_key(key);
        self.shard(&route).write_shard().set_expiry(
            tag_of(route.key_hash()),
            key,
            None,
            &self.clock,
        )
    }

    /// `delete` with the same signature as [`LocalEmbeddedStore::try_delete`]; a shared store
    /// serves every key, so it never fails.
    ///
    /// # Errors
    /// None (`Ok` always).
    pub fn try_delete(&self, key: &[u8]) -> Result<bool, StoreError> {
        Ok(self.delete(key))
    }

    /// Changes the memory budget of a store built with [`crate::EmbeddedStoreBuilder::max_memory`]
    /// (`total`, split evenly across shards as at build time; `None` lifts the limit and keeps
    /// the bookkeeping). Evicting policies evict down to it at once.
    ///
    /// # Errors
    /// [`StoreError::NoBudget`] when the store was built without a budget (nothing changes).
    pub fn set_max_memory(&self, total: Option<u64>) -> Result<(), StoreError> {
        let per_shard = total.map(|t| t / self.shards.len() as u64);
        for shard in &*self.shards {
            if !shard.write_shard().resize_budget(per_shard, &self.clock) {
                return Err(StoreError::NoBudget);
            }
        }
        Ok(())
    }

    /// `SET` with options ([`EmbeddedStore::set_with`]) and a precomputed route of `key`.
    ///
    /// # Errors
    /// As [`EmbeddedStore::set_with`].
    pub fn set_with_routed(
        &self,
        route: &EmbeddedKeyRoute,
        key: &[u8],
        value: &[u8],
        options: crate::object::string::SetOptions,
    ) -> Result<crate::object::string::SetOutcome, StoreError> {
        debug_assert_eq!(*route, self.router.route_key(key), "route of another key");
        self.shard(route).write_shard().set_with(
            tag_of(route.key_hash()),
            key,
            value,
            options,
            &self.clock,
        )
    }

    /// `GET` as a borrow of the stored string (no copy), with a precomputed route of `key`;
    /// the shard's read lock is held until the [`ValueRef`] is dropped. `Ok(None)` when the key
    /// is missing or expired.
    ///
    /// # Errors
    /// [`StoreError::WrongType`] when the key holds another type.
    pub fn get_string_view_routed(
        &self,
        route: &EmbeddedKeyRoute,
        key: &[u8],
    ) -> Result<Option<ValueRef<'_>>, StoreError> {
        debug_assert_eq!(*route, self.router.route_key(key), "route of another key");
        let tag = tag_of(route.key_hash());
        let mut wrong = None;
        let mapped = RwLockReadGuard::try_map(self.shard(route).read(), |shard| {
            shard
                .read_string(tag, key, &self.clock)
                .unwrap_or_else(|err| {
                    wrong = Some(err);
                    None
                })
        });
        match (mapped, wrong) {
            (Ok(view), _) => Ok(Some(ValueRef(view))),
            (Err(_), Some(err)) => Err(err),
            (Err(_), None) => Ok(None),
        }
    }

    /// Removes every key.
    pub fn clear(&self) {
        for shard in &*self.shards {
            shard.write_shard().clear();
        }
    }

    // ----- reads --------------------------------------------------------------------------------

    /// [`EmbeddedStore::get`] with a precomputed route.
    #[must_use]
    pub fn get_routed(&self, route: &EmbeddedKeyRoute, key: &[u8]) -> Option<Vec<u8>> {
        let tag = tag_of(route.key_hash());
        let shard = self.shard(route).read();
        match shard.lookup(tag, key, &self.clock) {
            Lookup::Hit(_, span) => Some(shard.value_at(span).to_vec()),
            Lookup::Miss => None,
            Lookup::Expired => {
                drop(shard);
                self.reap(self.router.shard_of(route), tag, key);
                None
            }
        }
    }

    /// [`EmbeddedStore::get_view`] with a precomputed route.
    #[must_use]
    #[inline]
    pub fn get_view_routed(&self, route: &EmbeddedKeyRoute, key: &[u8]) -> Option<ValueRef<'_>> {
        let tag = tag_of(route.key_hash());
        let shard = self.shard(route).read();
        match shard.lookup(tag, key, &self.clock) {
            Lookup::Hit(_, span) => {
                Some(ValueRef(RwLockReadGuard::map(shard, |s| s.value_at(span))))
            }
            Lookup::Miss => None,
            Lookup::Expired => {
                drop(shard);
                self.reap(self.router.shard_of(route), tag, key);
                None
            }
        }
    }

    /// [`EmbeddedStore::exists`] with a precomputed route.
    #[must_use]
    pub fn exists_routed(&self, route: &EmbeddedKeyRoute, key: &[u8]) -> bool {
        let tag = tag_of(route.key_hash());
        let found = self
            .shard(route)
            .read()
            .exists_shared(tag, key, &self.clock);
        match found {
            Lookup::Hit(..) => true,
            Lookup::Miss => false,
            Lookup::Expired => {
                self.reap(self.router.shard_of(route), tag, key);
                false
            }
        }
    }

    /// Remaining time to live of `key` in milliseconds (Redis's `PTTL`).
    #[must_use]
    pub fn pttl_millis(&self, key: &[u8]) -> KeyTtl {
        let route = self.router.route_key(key);
        self.shard(&route)
            .write_shard()
            .ttl_ms(tag_of(route.key_hash()), key, &self.clock)
    }

    // ----- batches ------------------------------------------------------------------------------

    /// [`EmbeddedStore::batch_set`] that reports the first failure instead of panicking.
    ///
    /// # Errors
    /// As [`EmbeddedStore::try_set`].
    pub fn try_batch_set<K, V>(
        &self,
        items: impl IntoIterator<Item = (K, V)>,
        ttl_ms: Option<u64>,
    ) -> Result<(), StoreError>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let items: Vec<(K, V)> = items.into_iter().collect();
        let routes: Vec<EmbeddedKeyRoute> = items
            .iter()
            .map(|(k, _)| self.router.route_key(k.as_ref()))
            .collect();
        self.write_routed(
            &routes,
            |i| (items[i].0.as_ref(), items[i].1.as_ref()),
            ttl_ms,
        )
    }

    fn write_routed<'a>(
        &self,
        routes: &[EmbeddedKeyRoute],
        item: impl Fn(usize) -> (&'a [u8], &'a [u8]),
        ttl_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        let expire_at = expiry_for(&self.clock, ttl_ms);
        let order = order_by_shard(&self.router, routes);
        for run in shard_runs(&order) {
            let mut shard = self.shards[run[0].0].write_shard();
            for &(_, i) in run {
                let (key, value) = item(i);
                shard.set(
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

    /// Calls `visit(index, value)` once per key, shard by shard, with each shard's read lock held
    /// once; expired entries found on the way are reaped afterwards.
    fn read_routed<K: AsRef<[u8]>>(
        &self,
        routes: &[EmbeddedKeyRoute],
        keys: &[K],
        mut visit: impl FnMut(usize, Option<&[u8]>),
    ) {
        let order = order_by_shard(&self.router, routes);
        let mut expired = Vec::new();
        for run in shard_runs(&order) {
            let shard = self.shards[run[0].0].read();
            for &(_, i) in run {
                let key = keys[i].as_ref();
                match shard.lookup(tag_of(routes[i].key_hash()), key, &self.clock) {
                    Lookup::Hit(_, span) => visit(i, Some(shard.value_at(span))),
                    Lookup::Miss => visit(i, None),
                    Lookup::Expired => {
                        visit(i, None);
                        expired.push(i);
                    }
                }
            }
        }
        for i in expired {
            self.reap(
                self.router.shard_of(&routes[i]),
                tag_of(routes[i].key_hash()),
                keys[i].as_ref(),
            );
        }
    }

    fn routes_of<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<EmbeddedKeyRoute> {
        keys.iter()
            .map(|k| self.router.route_key(k.as_ref()))
            .collect()
    }

    /// Copies of the values of `keys`, in key order.
    #[must_use]
    pub fn batch_get<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Option<Vec<u8>>> {
        let keys: Vec<K> = keys.into_iter().collect();
        let routes = self.routes_of(&keys);
        let mut out = vec![None; keys.len()];
        self.read_routed(&routes, &keys, |i, v| out[i] = v.map(<[u8]>::to_vec));
        out
    }

    /// Borrows the value of each key in turn: `visit(index, value)` is called once per key, in
    /// shard order (not key order), while that shard's read lock is held. Nothing is copied.
    pub fn batch_get_view<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        visit: impl FnMut(usize, Option<&[u8]>),
    ) {
        let routes = self.routes_of(keys);
        self.read_routed(&routes, keys, visit);
    }

    /// The values of `keys` packed into one buffer.
    #[must_use]
    pub fn batch_get_packed<K: AsRef<[u8]>>(&self, keys: &[K]) -> PackedBatch {
        let routes = self.routes_of(keys);
        let mut batch = PackedBatch::with_misses(keys.len());
        self.read_routed(&routes, keys, |i, v| {
            if let Some(v) = v {
                batch.fill(i, v);
            }
        });
        batch
    }

    /// Deletes every key; returns how many existed.
    pub fn batch_delete<K: AsRef<[u8]>>(&self, keys: &[K]) -> usize {
        let routes = self.routes_of(keys);
        let order = order_by_shard(&self.router, &routes);
        let mut deleted = 0;
        for run in shard_runs(&order) {
            let mut shard = self.shards[run[0].0].write_shard();
            for &(_, i) in run {
                deleted += usize::from(shard.delete(
                    tag_of(routes[i].key_hash()),
                    keys[i].as_ref(),
                    &self.clock,
                ));
            }
        }
        deleted
    }

    // ----- sessions -----------------------------------------------------------------------------

    fn session_routes<K: AsRef<[u8]>>(&self, prefix: &[u8], keys: &[K]) -> Vec<EmbeddedKeyRoute> {
        let session = self.router.route_session(prefix);
        keys.iter()
            .map(|k| self.router.route_session_key(&session, prefix, k.as_ref()))
            .collect()
    }

    /// Stores the records of one session (no expiry). In session-prefix route mode they all land
    /// on the session's shard and are written under one lock.
    ///
    /// # Panics
    /// As [`EmbeddedStore::set`].
    pub fn batch_set_session_owned_no_ttl(
        &self,
        prefix: impl AsRef<[u8]>,
        records: Vec<(Vec<u8>, Vec<u8>)>,
    ) {
        let prefix = prefix.as_ref();
        let routes: Vec<EmbeddedKeyRoute> = {
            let session = self.router.route_session(prefix);
            records
                .iter()
                .map(|(k, _)| self.router.route_session_key(&session, prefix, k))
                .collect()
        };
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
    /// As [`EmbeddedStore::set`].
    pub fn batch_set_session_packed_no_ttl(&self, write: PackedSessionWrite) {
        if let Err(err) = self.try_batch_set_session_packed_no_ttl(write) {
            panic!("fast-cache session write failed: {err}");
        }
    }

    /// [`EmbeddedStore::batch_set_session_packed_no_ttl`], returning the store's refusal
    /// (out of memory under `NoEviction`) instead of panicking.
    ///
    /// # Errors
    /// [`StoreError::OutOfMemory`].
    pub fn try_batch_set_session_packed_no_ttl(
        &self,
        write: PackedSessionWrite,
    ) -> Result<(), StoreError> {
        let records: Vec<(&[u8], &[u8])> = write.records().collect();
        let keys: Vec<&[u8]> = records.iter().map(|r| r.0).collect();
        let routes = self.session_routes(write.prefix(), &keys);
        self.write_routed(&routes, |i| records[i], None)
    }

    /// Stores a session's records from borrowed values (no expiry): `values[i]` under
    /// `keys[i]`, one copy each into the store, under one lock per shard (one lock in
    /// session-prefix route mode). The write-back path of a GPU store: the values sit in a
    /// staging buffer and need no packing first.
    ///
    /// # Errors
    /// [`StoreError::OutOfMemory`] under `NoEviction`.
    ///
    /// # Panics
    /// When `keys` and `values` differ in length.
    pub fn try_batch_set_session_no_ttl<K: AsRef<[u8]>>(
        &self,
        prefix: &[u8],
        keys: &[K],
        values: &[&[u8]],
    ) -> Result<(), StoreError> {
        assert_eq!(keys.len(), values.len(), "one value per key");
        let routes = self.session_routes(prefix, keys);
        self.write_routed(&routes, |i| (keys[i].as_ref(), values[i]), None)
    }

    /// Stores a session's built entries (no expiry), under one lock per shard (one lock in
    /// session-prefix route mode): each large entry's allocation moves into the store with no
    /// copy under the lock, so the copies can be made beforehand on several threads
    /// ([`BuiltEntry::new`], [`crate::EntryPool::build`]). An entry of a key already stored
    /// replaces it. Returns the large entries replaced (over 16 KiB, by large ones), released
    /// from the store after its locks: give them to an [`crate::EntryPool`] to build into
    /// their memory again, or drop them. Entries are written in order; the first refusal
    /// stops the rest.
    ///
    /// # Errors
    /// [`StoreError::OutOfMemory`] under `NoEviction`.
    pub fn try_batch_set_session_built_no_ttl(
        &self,
        prefix: &[u8],
        entries: Vec<BuiltEntry>,
    ) -> Result<Vec<BuiltEntry>, StoreError> {
        let routes = {
            let session = self.router.route_session(prefix);
            entries
                .iter()
                .map(|e| self.router.route_session_key(&session, prefix, e.key()))
                .collect::<Vec<_>>()
        };
        let order = order_by_shard(&self.router, &routes);
        let mut entries: Vec<Option<BuiltEntry>> = entries.into_iter().map(Some).collect();
        let mut replaced = Vec::new();
        for run in shard_runs(&order) {
            let mut shard = self.shards[run[0].0].write_shard();
            let mut written = Ok(());
            for &(_, i) in run {
                let entry = entries[i].take().expect("each entry is written once");
                written = shard.set_built(tag_of(routes[i].key_hash()), entry, &self.clock);
                if written.is_err() {
                    break;
                }
            }
            let retired = shard.take_retired();
            drop(shard);
            replaced.extend(retired.into_iter().map(BuiltEntry::from_data));
            written?;
        }
        Ok(replaced)
    }

    /// Copies of the values of a session's `keys`, in key order.
    #[must_use]
    pub fn batch_get_session<K: AsRef<[u8]>>(
        &self,
        prefix: &[u8],
        keys: &[K],
    ) -> Vec<Option<Vec<u8>>> {
        let routes = self.session_routes(prefix, keys);
        let mut out = vec![None; keys.len()];
        self.read_routed(&routes, keys, |i, v| out[i] = v.map(<[u8]>::to_vec));
        out
    }

    /// Borrows the values of a session's `keys`: `visit(index, value)` once per key, under the
    /// shard's read lock (see [`EmbeddedStore::batch_get_view`]).
    pub fn batch_get_session_view<K: AsRef<[u8]>>(
        &self,
        prefix: &[u8],
        keys: &[K],
        visit: impl FnMut(usize, Option<&[u8]>),
    ) {
        let routes = self.session_routes(prefix, keys);
        self.read_routed(&routes, keys, visit);
    }

    /// Runs `f` with every value of a session's `keys` borrowed at once, in key order (`None`
    /// for a miss), each shard they live on read-locked until `f` returns. What a parallel
    /// gather needs: the values' lengths before anything is copied, and the bytes to copy
    /// from on several threads. Writers to those shards wait for `f`: keep it short (a GPU
    /// load holds it for one gather). Expired entries found are reaped afterwards.
    ///
    /// Locks are taken in shard order and no writer holds two shards at once, so this cannot
    /// deadlock with writers; `f` must not write to the store (its own shards are held).
    pub fn with_session_views<K: AsRef<[u8]>, R>(
        &self,
        prefix: &[u8],
        keys: &[K],
        f: impl FnOnce(&[Option<&[u8]>]) -> R,
    ) -> R {
        let routes = self.session_routes(prefix, keys);
        let order = order_by_shard(&self.router, &routes);
        let guards: Vec<_> = shard_runs(&order)
            .map(|run| (run, self.shards[run[0].0].read()))
            .collect();
        let mut views = vec![None; keys.len()];
        let mut expired = Vec::new();
        for (run, shard) in &guards {
            for &(_, i) in *run {
                match shard.lookup(tag_of(routes[i].key_hash()), keys[i].as_ref(), &self.clock) {
                    Lookup::Hit(_, span) => views[i] = Some(shard.value_at(span)),
                    Lookup::Miss => {}
                    Lookup::Expired => expired.push(i),
                }
            }
        }
        let out = f(&views);
        drop(views);
        drop(guards);
        for i in expired {
            self.reap(
                self.router.shard_of(&routes[i]),
                tag_of(routes[i].key_hash()),
                keys[i].as_ref(),
            );
        }
        out
    }

    /// The values of a session's `keys` packed into one contiguous buffer.
    #[must_use]
    pub fn batch_get_session_packed<K: AsRef<[u8]>>(
        &self,
        prefix: &[u8],
        keys: &[K],
    ) -> PackedBatch {
        let routes = self.session_routes(prefix, keys);
        let mut batch = PackedBatch::with_misses(keys.len());
        self.read_routed(&routes, keys, |i, v| {
            if let Some(v) = v {
                batch.fill(i, v);
            }
        });
        batch
    }

    // ----- whole store --------------------------------------------------------------------------

    /// Number of entries (may include expired entries not yet reclaimed, as Redis's `DBSIZE`).
    #[must_use]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Whether the store holds no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Key plus value bytes of every entry.
    #[must_use]
    pub fn stored_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.read().stored_bytes()).sum()
    }

    /// Every live key (a copy; shards are visited one at a time, so concurrent writes to other
    /// shards may or may not be seen).
    #[must_use]
    pub fn key_snapshot(&self) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for shard in &*self.shards {
            shard.read().collect_keys(&self.clock, &mut keys);
        }
        keys
    }

    /// Counters and sizes of every shard.
    #[must_use]
    pub fn stats_snapshot(&self) -> TierStatsSnapshot {
        TierStatsSnapshot {
            shards: self.shards.iter().map(|s| s.read().stats()).collect(),
        }
    }

    /// Removes every key of shard `shard` (one [`crate::Mutation::Flush`] of that shard; what
    /// a log replays for a shard's flush). Out-of-range shards are ignored.
    pub fn clear_shard(&self, shard: usize) {
        if let Some(lock) = self.shards.get(shard) {
            lock.write_shard().clear();
        }
    }

    /// How many times the removal listener panicked (caught each time; 0 without a listener).
    #[must_use]
    pub fn removal_listener_panics(&self) -> u64 {
        self.shards
            .first()
            .map_or(0, |s| s.read().listener_panics())
    }

    /// Reclaims expired entries, examining at most [`DEFAULT_MAINTENANCE_BUDGET`] entry slots per
    /// shard. Call it periodically (a server calls it from each worker's idle loop).
    pub fn process_maintenance(&self) -> MaintenanceReport {
        self.process_maintenance_with_budget(DEFAULT_MAINTENANCE_BUDGET)
    }

    /// [`EmbeddedStore::process_maintenance`] with an explicit per-shard budget.
    pub fn process_maintenance_with_budget(&self, budget_per_shard: usize) -> MaintenanceReport {
        let mut report = MaintenanceReport {
            completed_pass: true,
            ..MaintenanceReport::default()
        };
        for shard in &*self.shards {
            report.merge(
                shard
                    .write_shard()
                    .process_maintenance(budget_per_shard, &self.clock),
            );
        }
        report
    }

    // ----- splitting ----------------------------------------------------------------------------

    /// Splits the store into `workers` owner-local stores (shard `s` goes to worker
    /// `s % workers`).
    ///
    /// # Panics
    /// When `workers` is zero or larger than the shard count.
    #[must_use]
    pub fn into_local_stores(self, workers: usize) -> Vec<LocalEmbeddedStore> {
        self.try_into_local_stores(workers)
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// Splits the store into `workers` owner-local stores.
    ///
    /// # Errors
    /// [`StoreError::InvalidWorkerCount`] when `workers` is zero or larger than the shard count.
    pub fn try_into_local_stores(
        self,
        workers: usize,
    ) -> Result<Vec<LocalEmbeddedStore>, StoreError> {
        LocalEmbeddedStore::split(self, workers)
    }

    /// Joins owner-local stores (all of one split) back into one store.
    ///
    /// # Errors
    /// [`StoreError::InvalidWorkerCount`] when the stores are not exactly one complete split.
    pub fn from_local_stores(stores: Vec<LocalEmbeddedStore>) -> Result<Self, StoreError> {
        LocalEmbeddedStore::join(stores)
    }
}

/// A cheaply cloneable handle to one [`EmbeddedStore`]: lock-striped like `DashMap`, every clone
/// reaches every key. Every method of [`EmbeddedStore`] is available through `Deref`.
///
/// ```
/// use fc_shard::SharedEmbeddedStore;
///
/// let cache = SharedEmbeddedStore::new(8);
/// let worker = cache.clone();
/// std::thread::spawn(move || worker.set(b"k", b"v", None)).join().unwrap();
/// assert_eq!(cache.get(b"k"), Some(b"v".to_vec()));
/// ```
#[derive(Debug, Clone)]
pub struct SharedEmbeddedStore {
    inner: Arc<EmbeddedStore>,
}

impl SharedEmbeddedStore {
    /// A shared store with `shards` shards (a power of two).
    ///
    /// # Panics
    /// As [`EmbeddedStore::new`].
    #[must_use]
    pub fn new(shards: usize) -> Self {
        Self::from(EmbeddedStore::new(shards))
    }

    /// A shared store with `shards` shards and the given route mode.
    ///
    /// # Panics
    /// As [`EmbeddedStore::new`].
    #[must_use]
    pub fn with_route_mode(shards: usize, mode: EmbeddedRouteMode) -> Self {
        Self::from(EmbeddedStore::with_route_mode(shards, mode))
    }

    /// The store behind this handle, if this is the last handle.
    ///
    /// # Errors
    /// Gives the handle back when other clones exist.
    pub fn try_into_inner(self) -> Result<EmbeddedStore, Self> {
        Arc::try_unwrap(self.inner).map_err(|inner| Self { inner })
    }
}

impl From<EmbeddedStore> for SharedEmbeddedStore {
    fn from(store: EmbeddedStore) -> Self {
        Self {
            inner: Arc::new(store),
        }
    }
}

impl Deref for SharedEmbeddedStore {
    type Target = EmbeddedStore;
    fn deref(&self) -> &EmbeddedStore {
        &self.inner
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<EmbeddedStore>();
    assert_send_sync::<SharedEmbeddedStore>();
};
