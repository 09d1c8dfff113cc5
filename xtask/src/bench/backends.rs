//! The backends of the matrix: how each one is built, preloaded and driven by a worker thread.
//!
//! Every backend stores the same 16-byte keys and the same preloaded values. Peers are used the
//! way their documentation shows: owned keys and values on insert (`Box<[u8]>`), `Arc<[u8]>`
//! values where the cache hands out clones (Moka, quick_cache).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use fc_shard::{EmbeddedStore, EvictionPolicy, LocalEmbeddedStore, SharedEmbeddedStore};

use super::{Eviction, Shape, TtlMode};

/// TTL given to every write in `--ttl active` rows: long enough that nothing expires while the
/// matrix runs, so the rows measure the cost of carrying and checking an expiry.
pub(crate) const ACTIVE_TTL: Duration = Duration::from_secs(3600);

/// One backend of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Backend {
    /// `LocalEmbeddedStore`: each pinned worker owns its shards and draws keys from them.
    #[value(name = "fc-local")]
    FcLocal,
    /// `EmbeddedStore` shared by `&` between the workers.
    #[value(name = "fc-embedded")]
    FcEmbedded,
    /// `SharedEmbeddedStore`: one clone per worker.
    #[value(name = "fc-shared")]
    FcShared,
    /// `DashMap<Box<[u8]>, Box<[u8]>>`.
    #[value(name = "dashmap")]
    Dashmap,
    /// `moka::sync::Cache<Box<[u8]>, Arc<[u8]>>`.
    #[value(name = "moka")]
    Moka,
    /// `Mutex<lru::LruCache<Box<[u8]>, Box<[u8]>>>` (eviction rows only).
    #[value(name = "lru")]
    Lru,
    /// `quick_cache::sync::Cache<Box<[u8]>, Arc<[u8]>>` (eviction rows only).
    #[value(name = "quick_cache")]
    QuickCache,
}

impl Backend {
    pub(crate) const ALL: [Backend; 7] = [
        Backend::FcLocal,
        Backend::FcEmbedded,
        Backend::FcShared,
        Backend::Dashmap,
        Backend::Moka,
        Backend::Lru,
        Backend::QuickCache,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::FcLocal => "fc-local",
            Backend::FcEmbedded => "fc-embedded",
            Backend::FcShared => "fc-shared",
            Backend::Dashmap => "dashmap",
            Backend::Moka => "moka",
            Backend::Lru => "lru",
            Backend::QuickCache => "quick_cache",
        }
    }

    /// Whether this backend has a row for `shape`, and why not when it has none.
    pub(crate) fn supports(self, shape: &Shape) -> Result<(), &'static str> {
        let fc = matches!(
            self,
            Backend::FcLocal | Backend::FcEmbedded | Backend::FcShared
        );
        if shape.ttl == TtlMode::Active && !(fc || self == Backend::Moka) {
            return Err("no per-entry TTL");
        }
        match shape.eviction {
            Eviction::None if matches!(self, Backend::Lru | Backend::QuickCache) => {
                Err("bounded caches: eviction rows only")
            }
            Eviction::Lru25 if self == Backend::Dashmap => Err("no eviction"),
            _ => Ok(()),
        }
    }
}

/// What a worker thread does to its backend. One implementation per backend, so the measured
/// loop is monomorphized and no virtual call sits between the loop and the cache.
pub(crate) trait Worker: Send {
    /// A borrowed read: the value is not copied, but its first byte is read (the least any use of
    /// a value costs). Returns that byte, or `None` on a miss.
    fn get_ref(&mut self, key: &[u8]) -> Option<u8>;
    /// A copying read into the caller's reusable buffer.
    fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool;
    /// An insert or overwrite.
    fn set(&mut self, key: &[u8], value: &[u8]);
}

#[inline(always)]
fn touch(value: &[u8]) -> u8 {
    value.first().copied().unwrap_or(0)
}

#[inline(always)]
fn copy_into(value: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(value);
}

fn ttl_ms(ttl: TtlMode) -> Option<u64> {
    match ttl {
        TtlMode::None => None,
        TtlMode::Active => Some(ACTIVE_TTL.as_millis() as u64),
    }
}

/// Shards for the fast-cache backends: 16 per worker, a power of two.
pub(crate) fn fc_shards(threads: usize) -> usize {
    std::env::var("FCS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or((threads * 16).next_power_of_two())
}

/// A preloaded `EmbeddedStore` for `shape`.
pub(crate) fn fc_store(shape: &Shape, keys: &[[u8; 16]], value: &[u8]) -> EmbeddedStore {
    let shards = fc_shards(shape.threads);
    let store = match shape.eviction {
        Eviction::None => EmbeddedStore::new(shards),
        Eviction::Lru25 => {
            // Room for the same number of entries as the peers get: a quarter of the keys at
            // what one entry of this shape is charged.
            let probe = EmbeddedStore::new(1);
            probe.set(keys[0], value, None);
            let per_entry = probe.stats_snapshot().total().used_memory;
            EmbeddedStore::builder(shards)
                .max_memory(per_entry * shape.resident(keys.len()) as u64)
                .eviction_policy(match super::fc_policy() {
                    super::FcPolicy::Lru => EvictionPolicy::Lru,
                    super::FcPolicy::S3fifo => EvictionPolicy::S3Fifo,
                })
                .build()
        }
    };
    let ttl = ttl_ms(shape.ttl);
    for key in keys {
        store.set(key, value, ttl);
    }
    store
}

pub(crate) struct FcLocalWorker {
    pub(crate) store: LocalEmbeddedStore,
    pub(crate) ttl: Option<u64>,
}

impl FcLocalWorker {
    pub(crate) fn new(store: LocalEmbeddedStore, shape: &Shape) -> Self {
        Self {
            store,
            ttl: ttl_ms(shape.ttl),
        }
    }
}

impl Worker for FcLocalWorker {
    #[inline]
    fn get_ref(&mut self, key: &[u8]) -> Option<u8> {
        self.store.get_view(key).map(touch)
    }
    #[inline]
    fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        self.store
            .get_view(key)
            .map(|v| copy_into(v, buf))
            .is_some()
    }
    #[inline]
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.store.set_value_bytes(key, value, self.ttl);
    }
}

pub(crate) struct FcRefWorker<'a> {
    pub(crate) store: &'a EmbeddedStore,
    pub(crate) ttl: Option<u64>,
}

impl<'a> FcRefWorker<'a> {
    pub(crate) fn new(store: &'a EmbeddedStore, shape: &Shape) -> Self {
        Self {
            store,
            ttl: ttl_ms(shape.ttl),
        }
    }
}

impl Worker for FcRefWorker<'_> {
    #[inline]
    fn get_ref(&mut self, key: &[u8]) -> Option<u8> {
        self.store.get_view(key).map(|v| touch(&v))
    }
    #[inline]
    fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        self.store
            .get_view(key)
            .map(|v| copy_into(&v, buf))
            .is_some()
    }
    #[inline]
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.store.set(key, value, self.ttl);
    }
}

pub(crate) struct FcSharedWorker {
    pub(crate) store: SharedEmbeddedStore,
    pub(crate) ttl: Option<u64>,
}

impl FcSharedWorker {
    pub(crate) fn new(store: SharedEmbeddedStore, shape: &Shape) -> Self {
        Self {
            store,
            ttl: ttl_ms(shape.ttl),
        }
    }
}

impl Worker for FcSharedWorker {
    #[inline]
    fn get_ref(&mut self, key: &[u8]) -> Option<u8> {
        self.store.get_view(key).map(|v| touch(&v))
    }
    #[inline]
    fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        self.store
            .get_view(key)
            .map(|v| copy_into(&v, buf))
            .is_some()
    }
    #[inline]
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.store.set(key, value, self.ttl);
    }
}

pub(crate) type DashMapCache = DashMap<Box<[u8]>, Box<[u8]>>;

pub(crate) fn dashmap(keys: &[[u8; 16]], value: &[u8]) -> DashMapCache {
    let map = DashMap::with_capacity(keys.len());
    for key in keys {
        map.insert(Box::from(&key[..]), Box::from(value));
    }
    map
}

impl Worker for &DashMapCache {
    #[inline]
    fn get_ref(&mut self, key: &[u8]) -> Option<u8> {
        self.get(key).map(|v| touch(v.value()))
    }
    #[inline]
    fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        self.get(key).map(|v| copy_into(v.value(), buf)).is_some()
    }
    #[inline]
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.insert(Box::from(key), Box::from(value));
    }
}

pub(crate) type MokaCache = moka::sync::Cache<Box<[u8]>, Arc<[u8]>>;

pub(crate) fn moka(shape: &Shape, keys: &[[u8; 16]], value: &[u8]) -> MokaCache {
    let mut builder = moka::sync::Cache::builder();
    if shape.eviction == Eviction::Lru25 {
        builder = builder.max_capacity(shape.resident(keys.len()) as u64);
    }
    if shape.ttl == TtlMode::Active {
        builder = builder.time_to_live(ACTIVE_TTL);
    }
    let cache: MokaCache = builder.build();
    for key in keys {
        cache.insert(Box::from(&key[..]), Arc::from(value));
    }
    cache.run_pending_tasks();
    cache
}

/// The worker of a concurrent cache that hands out `Arc<[u8]>` clones (Moka, quick_cache).
macro_rules! arc_cache_worker {
    ($cache:ty) => {
        impl Worker for &$cache {
            #[inline]
            fn get_ref(&mut self, key: &[u8]) -> Option<u8> {
                self.get(key).map(|v| touch(&v))
            }
            #[inline]
            fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool {
                self.get(key).map(|v| copy_into(&v, buf)).is_some()
            }
            #[inline]
            fn set(&mut self, key: &[u8], value: &[u8]) {
                self.insert(Box::from(key), Arc::from(value));
            }
        }
    };
}

arc_cache_worker!(MokaCache);

pub(crate) type LruCache = Mutex<lru::LruCache<Box<[u8]>, Box<[u8]>>>;

pub(crate) fn lru(shape: &Shape, keys: &[[u8; 16]], value: &[u8]) -> LruCache {
    let capacity = NonZeroUsize::new(shape.resident(keys.len()).max(1)).expect("non-zero");
    let mut cache = lru::LruCache::new(capacity);
    for key in keys {
        cache.put(Box::from(&key[..]), Box::from(value));
    }
    Mutex::new(cache)
}

impl Worker for &LruCache {
    #[inline]
    fn get_ref(&mut self, key: &[u8]) -> Option<u8> {
        let mut cache = self.lock().expect("lru lock");
        cache.get(key).map(|v| touch(v))
    }
    #[inline]
    fn get_copy(&mut self, key: &[u8], buf: &mut Vec<u8>) -> bool {
        let mut cache = self.lock().expect("lru lock");
        cache.get(key).map(|v| copy_into(v, buf)).is_some()
    }
    #[inline]
    fn set(&mut self, key: &[u8], value: &[u8]) {
        let (key, value) = (Box::from(key), Box::from(value));
        self.lock().expect("lru lock").put(key, value);
    }
}

pub(crate) type QuickCache = quick_cache::sync::Cache<Box<[u8]>, Arc<[u8]>>;

pub(crate) fn quick_cache(shape: &Shape, keys: &[[u8; 16]], value: &[u8]) -> QuickCache {
    let cache = QuickCache::new(shape.resident(keys.len()).max(1));
    for key in keys {
        cache.insert(Box::from(&key[..]), Arc::from(value));
    }
    cache
}

arc_cache_worker!(QuickCache);
