//! Memory budgets: accounting, `NoEviction`, and CLOCK (`Lru`) eviction on every store kind.
//!
//! Randomized cases are proptests: a failing case is printed and saved under
//! `proptest-regressions/`; raise the count with `PROPTEST_CASES=10000`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fc_shard::{
    EmbeddedStore, EvictionPolicy, LocalEmbeddedStore, ManualClock, Mutation, SharedEmbeddedStore,
    StoreError, TierStatsSnapshot,
};
use proptest::prelude::*;

const START_MS: u64 = 1_700_000_000_000;

/// Records evicted and expired keys (what a WAL or replica would learn).
#[derive(Default)]
struct Removed {
    keys: Mutex<Vec<Vec<u8>>>,
}

fn store(
    shards: usize,
    budget: u64,
    policy: EvictionPolicy,
    clock: &ManualClock,
) -> (EmbeddedStore, Arc<Removed>) {
    let removed = Arc::new(Removed::default());
    let sink = Arc::clone(&removed);
    let store = EmbeddedStore::builder(shards)
        .max_memory(budget)
        .eviction_policy(policy)
        .clock(clock.clone())
        .mutation_sink(Arc::new(
            move |_shard: usize, _seq: u64, m: &Mutation<'_>| {
                if let Mutation::Evicted { key } | Mutation::Expired { key } = m {
                    sink.keys.lock().unwrap().push(key.to_vec());
                }
            },
        ))
        .build();
    (store, removed)
}

/// Every shard within its budget, or holding the single entry that did not fit alone.
fn assert_within_budget(stats: &TierStatsSnapshot) {
    for s in &stats.shards {
        assert!(
            s.used_memory <= s.max_memory || s.keys == 1,
            "shard {} uses {} of {} with {} keys",
            s.shard,
            s.used_memory,
            s.max_memory,
            s.keys
        );
    }
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, usize, Option<u64>),
    Get(u8),
    Delete(u8),
    Advance(u64),
    /// `Some(ms)`: expire in `ms`; `None`: persist.
    Expire(u8, Option<u64>),
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![
        6 => 0usize..200,
        2 => 200usize..3000,
        1 => Just(20_000usize),
    ];
    prop_oneof![
        5 => (0u8..40, size, prop_oneof![3 => Just(None), 1 => (1u64..50).prop_map(Some)])
            .prop_map(|(k, n, ttl)| Op::Set(k, n, ttl)),
        4 => (0u8..40).prop_map(Op::Get),
        1 => (0u8..40).prop_map(Op::Delete),
        1 => (1u64..40).prop_map(Op::Advance),
        1 => (0u8..40, prop_oneof![3 => (1u64..50).prop_map(Some), 1 => Just(None)])
            .prop_map(|(k, ttl)| Op::Expire(k, ttl)),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key:{k}").into_bytes()
}

/// One store of any kind behind the same calls.
enum Under {
    Embedded(EmbeddedStore),
    Shared(SharedEmbeddedStore),
    Local(Vec<LocalEmbeddedStore>),
}

impl Under {
    fn new(kind: u8, store: EmbeddedStore) -> Self {
        match kind {
            0 => Self::Embedded(store),
            1 => Self::Shared(SharedEmbeddedStore::from(store)),
            _ => {
                let workers = store.shard_count().min(2);
                Self::Local(store.into_local_stores(workers))
            }
        }
    }

    fn local(stores: &mut [LocalEmbeddedStore], key: &[u8]) -> usize {
        stores[0].owner_of_key(key)
    }

    fn try_set(&mut self, key: &[u8], value: &[u8], ttl: Option<u64>) -> Result<(), StoreError> {
        match self {
            Self::Embedded(s) => s.try_set(key, value, ttl),
            Self::Shared(s) => s.clone().try_set(key, value, ttl),
            Self::Local(stores) => {
                let w = Self::local(stores, key);
                stores[w].try_set(key, value, ttl)
            }
        }
    }

    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        match self {
            Self::Embedded(s) => s.get(key),
            Self::Shared(s) => s.get(key),
            Self::Local(stores) => {
                let w = Self::local(stores, key);
                stores[w].get(key)
            }
        }
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        match self {
            Self::Embedded(s) => s.delete(key),
            Self::Shared(s) => s.delete(key),
            Self::Local(stores) => {
                let w = Self::local(stores, key);
                stores[w].delete(key)
            }
        }
    }

    /// Sets (`Some`) or clears (`None`) the expiry of `key`.
    fn expire(&mut self, key: &[u8], at_ms: Option<u64>) -> bool {
        match (self, at_ms) {
            (Self::Embedded(s), Some(at)) => s.expire_at_ms(key, at),
            (Self::Embedded(s), None) => s.persist(key),
            (Self::Shared(s), Some(at)) => s.expire_at_ms(key, at),
            (Self::Shared(s), None) => s.persist(key),
            (Self::Local(stores), at) => {
                let w = Self::local(stores, key);
                match at {
                    Some(at) => stores[w].expire_at_ms(key, at),
                    None => stores[w].persist(key),
                }
            }
        }
    }

    fn stats(&self) -> TierStatsSnapshot {
        match self {
            Self::Embedded(s) => s.stats_snapshot(),
            Self::Shared(s) => s.stats_snapshot(),
            Self::Local(stores) => TierStatsSnapshot {
                shards: stores
                    .iter()
                    .flat_map(|s| s.stats_snapshot().shards)
                    .collect(),
            },
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn evicting_stores_stay_within_budget_and_never_return_a_wrong_value(
        ops in proptest::collection::vec(op(), 1..300),
        shards in prop_oneof![Just(1usize), Just(4)],
        budget in prop_oneof![Just(2_000u64), Just(8_000), Just(40_000)],
        kind in 0u8..3,
        policy in prop_oneof![Just(EvictionPolicy::Lru), Just(EvictionPolicy::S3Fifo)],
    ) {
        let clock = ManualClock::new(START_MS);
        let (store, removed) = store(shards, budget, policy, &clock);
        let mut store = Under::new(kind, store);
        let mut model: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Set(k, n, ttl) => {
                    let value = vec![*k; *n];
                    store.try_set(&key(*k), &value, *ttl).expect("evicting stores always accept");
                    model.insert(key(*k), (value, ttl.map(|t| clock.now_ms() + t)));
                }
                Op::Get(k) => {
                    let got = store.get(&key(*k));
                    forget(&mut model, &removed);
                    let now = clock.now_ms();
                    let want = model
                        .get(&key(*k))
                        .filter(|(_, at)| at.is_none_or(|at| now <= at))
                        .map(|(v, _)| v.clone());
                    prop_assert_eq!(got, want, "key {}", k);
                }
                Op::Delete(k) => {
                    store.delete(&key(*k));
                    model.remove(&key(*k));
                }
                Op::Advance(ms) => clock.advance_ms(*ms),
                Op::Expire(k, ttl) => {
                    // Adding an expiry may move the entry to a bigger chunk (and evict others).
                    let now = clock.now_ms();
                    let at = ttl.map(|t| now + t);
                    let done = store.expire(&key(*k), at);
                    forget(&mut model, &removed);
                    let live = model
                        .get_mut(&key(*k))
                        .filter(|(_, old)| old.is_none_or(|old| now <= old));
                    match live {
                        Some((_, old)) => {
                            prop_assert_eq!(done, at.is_some() || old.is_some(), "key {}", k);
                            *old = at;
                        }
                        None => prop_assert!(!done, "key {} is gone", k),
                    }
                }
            }
            forget(&mut model, &removed);
            assert_within_budget(&store.stats());
        }
        // The accounting returns to zero once everything is deleted.
        for k in 0..40 {
            store.delete(&key(k));
        }
        let total = store.stats().total();
        prop_assert_eq!(total.used_memory, 0);
        prop_assert_eq!(total.stored_bytes, 0);
        prop_assert_eq!(total.keys, 0);
    }

    #[test]
    fn no_eviction_refuses_without_changing_anything(
        ops in proptest::collection::vec(op(), 1..200),
        shards in prop_oneof![Just(1usize), Just(4)],
        kind in 0u8..3,
    ) {
        let clock = ManualClock::new(START_MS);
        let (store, removed) = store(shards, 6_000, EvictionPolicy::NoEviction, &clock);
        let mut store = Under::new(kind, store);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in &ops {
            match op {
                Op::Set(k, n, _) => {
                    let value = vec![*k; *n];
                    let before = store.stats().total();
                    match store.try_set(&key(*k), &value, None) {
                        Ok(()) => {
                            model.insert(key(*k), value);
                        }
                        Err(StoreError::OutOfMemory { used, budget, needed, .. }) => {
                            prop_assert!(used + needed > budget);
                            let after = store.stats().total();
                            prop_assert_eq!(before.keys, after.keys);
                            prop_assert_eq!(before.used_memory, after.used_memory);
                            prop_assert_eq!(before.mutation_seq, after.mutation_seq);
                        }
                        Err(other) => prop_assert!(false, "unexpected {other}"),
                    }
                }
                Op::Get(k) => prop_assert_eq!(store.get(&key(*k)), model.get(&key(*k)).cloned()),
                Op::Delete(k) => {
                    prop_assert_eq!(store.delete(&key(*k)), model.remove(&key(*k)).is_some());
                }
                Op::Advance(ms) | Op::Expire(_, Some(ms)) => clock.advance_ms(*ms),
                Op::Expire(_, None) => {}
            }
            let stats = store.stats();
            prop_assert_eq!(stats.total().evicted, 0);
            for s in &stats.shards {
                prop_assert!(s.used_memory <= s.max_memory);
            }
        }
        prop_assert!(removed.keys.lock().unwrap().is_empty());
    }
}

fn forget(model: &mut BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>, removed: &Removed) {
    for k in removed.keys.lock().unwrap().drain(..) {
        model.remove(&k);
    }
}

/// Bytes one entry of `key` (like `key:NNN`) and a `value_len`-byte value is charged.
fn charge_of(value_len: usize) -> u64 {
    charge_with(value_len, None)
}

/// What one entry with a 7-byte key and this value (and TTL) is charged.
fn charge_with(value_len: usize, ttl_ms: Option<u64>) -> u64 {
    let store = EmbeddedStore::new(1);
    store.set(b"key:000", vec![0u8; value_len], ttl_ms);
    store.stats_snapshot().total().used_memory
}

fn k3(i: usize) -> Vec<u8> {
    format!("key:{i:03}").into_bytes()
}

#[test]
fn recently_read_entries_outlive_cold_ones() {
    let clock = ManualClock::new(START_MS);
    let charge = charge_of(64);
    let (store, removed) = store(1, charge * 100, EvictionPolicy::Lru, &clock);
    for i in 0..100 {
        store.set(k3(i), [1u8; 64], None);
    }
    assert_eq!(
        store.stats_snapshot().total().evicted,
        0,
        "100 entries fit exactly"
    );
    for i in 0..50 {
        assert!(store.get(&k3(i)).is_some());
    }
    for i in 100..150 {
        store.set(k3(i), [2u8; 64], None);
    }
    let total = store.stats_snapshot().total();
    assert_eq!(total.evicted, 50);
    assert_eq!(total.evicted_bytes, 50 * charge);
    assert_eq!(total.used_memory, 100 * charge);
    for i in 0..50 {
        assert!(store.exists(&k3(i)), "hot key {i} was evicted");
    }
    for i in 50..100 {
        assert!(!store.exists(&k3(i)), "cold key {i} survived");
    }
    for i in 100..150 {
        assert!(store.exists(&k3(i)), "new key {i} is missing");
    }
    // Each eviction told the mutation sink, oldest first.
    let evicted = removed.keys.lock().unwrap().clone();
    assert_eq!(evicted, (50..100).map(k3).collect::<Vec<_>>());
}

#[test]
fn without_reads_the_oldest_entries_go_first() {
    let clock = ManualClock::new(START_MS);
    let charge = charge_of(64);
    let (store, removed) = store(1, charge * 10, EvictionPolicy::Lru, &clock);
    for i in 0..30 {
        store.set(k3(i), [1u8; 64], None);
        // Overwriting counts as a use: key 0 stays hot.
        store.set(k3(0), [3u8; 64], None);
    }
    let evicted = removed.keys.lock().unwrap().clone();
    assert_eq!(evicted, (1..21).map(k3).collect::<Vec<_>>());
    assert!(store.exists(&k3(0)));
}

#[test]
fn expired_entries_are_reclaimed_before_live_ones_are_evicted() {
    let clock = ManualClock::new(START_MS);
    // Room for exactly the 100 entries below: an entry with a TTL stores it (8 more bytes).
    let budget = charge_of(64) * 50 + charge_with(64, Some(10)) * 50;
    assert!(charge_with(64, Some(10)) > charge_of(64));
    let (store, _) = store(1, budget, EvictionPolicy::Lru, &clock);
    for i in 0..100 {
        let ttl = (i % 2 == 0).then_some(10);
        store.set(k3(i), [1u8; 64], ttl);
    }
    clock.advance_ms(11);
    for i in 100..150 {
        store.set(k3(i), [2u8; 64], None);
    }
    let total = store.stats_snapshot().total();
    assert_eq!(total.expired, 50);
    assert_eq!(total.evicted, 0);
    for i in (1..100).step_by(2) {
        assert!(store.exists(&k3(i)), "live key {i} was evicted");
    }
}

#[test]
fn an_entry_larger_than_the_budget() {
    let clock = ManualClock::new(START_MS);
    let (lru, _) = store(1, 10_000, EvictionPolicy::Lru, &clock);
    for i in 0..20 {
        lru.set(k3(i), [1u8; 64], None);
    }
    // LRU lets it in alone: the shard exceeds its budget by this one entry.
    lru.set(b"big", vec![7u8; 50_000], None);
    let total = lru.stats_snapshot().total();
    assert_eq!(total.keys, 1);
    assert!(lru.exists(b"big"));
    // The next write evicts it.
    lru.set(k3(0), [1u8; 64], None);
    assert!(!lru.exists(b"big"));
    assert!(lru.stats_snapshot().total().used_memory <= 10_000);

    let (strict, _) = store(1, 10_000, EvictionPolicy::NoEviction, &clock);
    assert!(matches!(
        strict.try_set(b"big", &[7u8; 50_000], None),
        Err(StoreError::OutOfMemory { budget: 10_000, .. })
    ));
    assert_eq!(strict.len(), 0);
}

#[test]
fn no_eviction_overwrites() {
    let clock = ManualClock::new(START_MS);
    let charge = charge_of(64);
    let (store, _) = store(1, charge * 10, EvictionPolicy::NoEviction, &clock);
    for i in 0..10 {
        store.set(k3(i), [1u8; 64], None);
    }
    let err = store.try_set(&k3(10), &[1u8; 64], None).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "out of memory: shard 0 uses {} of its {} bytes and the write needs {} more",
            charge * 10,
            charge * 10,
            charge
        )
    );
    // Growing an entry when full fails and keeps the old value; shrinking one works.
    assert!(store.try_set(&k3(3), &[2u8; 4000], None).is_err());
    assert_eq!(store.get(&k3(3)), Some(vec![1u8; 64]));
    store.set(k3(3), [2u8; 8], None);
    assert_eq!(store.get(&k3(3)), Some(vec![2u8; 8]));
    assert!(store.try_set(&k3(10), &[1u8; 8], None).is_ok());
}

#[test]
fn owner_local_stores_keep_their_budgets() {
    let clock = ManualClock::new(START_MS);
    let (store, _) = store(4, 4 * 5_000, EvictionPolicy::Lru, &clock);
    let mut locals = store.into_local_stores(2);
    for i in 0..2_000 {
        let key = k3(i % 1000);
        let w = locals[0].owner_of_key(&key);
        locals[w].set(&key, [1u8; 100], None);
    }
    for local in &locals {
        for s in local.stats_snapshot().shards {
            assert_eq!(s.max_memory, 5_000);
            assert!(s.used_memory <= 5_000);
            assert!(s.evicted > 0);
        }
    }
}

/// S3-FIFO as the paper describes it, over entries of one size: the reference the engine must
/// agree with decision for decision.
#[derive(Default)]
struct RefS3Fifo {
    small: std::collections::VecDeque<u16>,
    main: std::collections::VecDeque<u16>,
    ghost: std::collections::VecDeque<u16>,
    freq: BTreeMap<u16, u8>,
    in_small: BTreeMap<u16, bool>,
    capacity: usize,
    /// Entries the small queue may hold before it is drained first (its byte share / entry).
    small_share_bytes: u64,
    entry_bytes: u64,
}

impl RefS3Fifo {
    fn get(&mut self, k: u16) -> bool {
        match self.freq.get_mut(&k) {
            Some(f) => {
                *f = (*f + 1).min(3);
                true
            }
            None => false,
        }
    }

    fn set(&mut self, k: u16) {
        if let Some(f) = self.freq.get_mut(&k) {
            *f = (*f + 1).min(3);
            return;
        }
        self.freq.insert(k, 0);
        if self.ghost.contains(&k) {
            self.main.push_back(k);
            self.in_small.insert(k, false);
        } else {
            self.small.push_back(k);
            self.in_small.insert(k, true);
        }
        while self.freq.len() > self.capacity && self.freq.len() > 1 {
            self.evict(k);
        }
    }

    fn evict(&mut self, protect: u16) {
        loop {
            let small_bytes = self.small.len() as u64 * self.entry_bytes;
            let mut from_small = self.main.is_empty()
                || (!self.small.is_empty() && small_bytes > self.small_share_bytes);
            // A queue holding nothing but the entry just written gives no victim.
            let only = |q: &std::collections::VecDeque<u16>| q.len() == 1 && q[0] == protect;
            if from_small && only(&self.small) {
                from_small = false;
            } else if !from_small && only(&self.main) {
                from_small = true;
            }
            let queue = if from_small {
                &mut self.small
            } else {
                &mut self.main
            };
            let k = queue.pop_front().expect("non-empty");
            if k == protect {
                queue.push_back(k);
                continue;
            }
            let f = self.freq[&k];
            if from_small {
                if f >= 1 {
                    self.freq.insert(k, 0);
                    self.main.push_back(k);
                    self.in_small.insert(k, false);
                    continue;
                }
                self.ghost.push_back(k);
                while self.ghost.len() > (self.main.len() / 4).max(16) {
                    self.ghost.pop_front();
                }
            } else if f > 0 {
                self.freq.insert(k, f - 1);
                self.main.push_back(k);
                continue;
            }
            self.freq.remove(&k);
            self.in_small.remove(&k);
            return;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn s3fifo_matches_the_reference(
        ops in proptest::collection::vec((any::<bool>(), 0u16..40), 1..300),
        capacity in 2usize..24,
    ) {
        let clock = ManualClock::new(START_MS);
        let entry_bytes = charge_of(32);
        let budget = entry_bytes * capacity as u64;
        let (store, _) = store(1, budget, EvictionPolicy::S3Fifo, &clock);
        let mut reference = RefS3Fifo {
            capacity,
            small_share_bytes: budget * 5 / 100,
            entry_bytes,
            ..RefS3Fifo::default()
        };
        for (read, k) in ops {
            if read {
                prop_assert_eq!(store.get(&k3(k as usize)).is_some(), reference.get(k), "get {}", k);
            } else {
                store.set(k3(k as usize), [1u8; 32], None);
                reference.set(k);
            }
            if !read {
                for k in 0..40u16 {
                    prop_assert_eq!(store.exists(&k3(k as usize)), reference.freq.contains_key(&k), "resident {}", k);
                }
            }
        }
    }
}

#[test]
fn s3fifo_keeps_the_hot_set_through_a_scan_and_lru_does_not() {
    let charge = charge_of(64);
    let mut survivors = Vec::new();
    for policy in [EvictionPolicy::S3Fifo, EvictionPolicy::Lru] {
        let clock = ManualClock::new(START_MS);
        let (store, _) = store(1, charge * 100, policy, &clock);
        for round in 0..3 {
            for i in 0..50 {
                if round == 0 {
                    store.set(k3(i), [1u8; 64], None);
                }
                assert!(store.get(&k3(i)).is_some());
            }
        }
        // A scan of one-time keys, ten times the cache.
        for i in 1000..2000 {
            store.set(k3(i), [2u8; 64], None);
        }
        survivors.push((0..50).filter(|&i| store.exists(&k3(i))).count());
    }
    assert!(
        survivors[0] >= 45,
        "S3-FIFO kept {} of 50 hot keys",
        survivors[0]
    );
    assert_eq!(survivors[1], 0, "LRU is flushed by a scan");
}

#[test]
fn bounded_stores_keep_evicting_after_clear() {
    for policy in [EvictionPolicy::Lru, EvictionPolicy::S3Fifo] {
        let clock = ManualClock::new(START_MS);
        let (store, _) = store(2, 8_000, policy, &clock);
        for round in 0..3 {
            for i in 0..300 {
                store.set(k3(i), [round as u8; 64], None);
                let _ = store.get(&k3(i / 2));
            }
            let stats = store.stats_snapshot();
            assert_within_budget(&stats);
            assert!(stats.total().evicted > 0, "{policy:?} round {round}");
            store.clear();
            assert_eq!(store.stats_snapshot().total().used_memory, 0);
        }
    }
}

#[test]
fn the_budget_changes_live_on_a_bounded_store_and_not_on_an_unbounded_one() {
    for policy in [EvictionPolicy::Lru, EvictionPolicy::S3Fifo] {
        let clock = ManualClock::new(START_MS);
        let (store, removed) = store(4, 4 * 50_000, policy, &clock);
        let mut locals = store.into_local_stores(2);
        for i in 0..1_000 {
            let key = k3(i);
            let w = locals[0].owner_of_key(&key);
            locals[w].set(&key, [1u8; 100], None);
        }
        let before: usize = locals.iter().map(LocalEmbeddedStore::len).sum();
        for local in &mut locals {
            local.set_max_memory(Some(4 * 5_000)).unwrap();
            for s in local.stats_snapshot().shards {
                assert_eq!(s.max_memory, 5_000, "{policy:?}");
                assert!(s.used_memory <= 5_000, "{policy:?}: evicted down at once");
            }
        }
        let after: usize = locals.iter().map(LocalEmbeddedStore::len).sum();
        assert!(after < before / 4, "{policy:?}: {before} -> {after}");
        assert_eq!(removed.keys.lock().unwrap().len(), before - after);
        // Lifted: writes are no longer bounded, and a limit can come back.
        for local in &mut locals {
            local.set_max_memory(None).unwrap();
            assert!(
                local
                    .stats_snapshot()
                    .shards
                    .iter()
                    .all(|s| s.max_memory == 0)
            );
        }
        for i in 0..1_000 {
            let key = k3(i);
            let w = locals[0].owner_of_key(&key);
            locals[w].set(&key, [2u8; 100], None);
        }
        assert_eq!(
            locals.iter().map(LocalEmbeddedStore::len).sum::<usize>(),
            1_000
        );
        for local in &mut locals {
            local.set_max_memory(Some(4 * 5_000)).unwrap();
        }
        assert!(locals.iter().map(LocalEmbeddedStore::len).sum::<usize>() < 250);
    }
    let mut unbounded = EmbeddedStore::builder(2).build().into_local_stores(1);
    unbounded[0].set(b"k", b"v", None);
    assert_eq!(
        unbounded[0].set_max_memory(Some(1 << 20)),
        Err(StoreError::NoBudget)
    );
    assert_eq!(unbounded[0].stats_snapshot().total().max_memory, 0);
}
