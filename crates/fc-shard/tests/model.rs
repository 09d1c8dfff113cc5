//! Model-based tests: random operation sequences run against each store kind and against a
//! `BTreeMap` model with a manual clock; every result and the final contents must agree.
//!
//! Reproduce a failure with `PROPTEST_SEED`-free proptest persistence (the failing case is printed
//! and saved under `proptest-regressions/`), or raise the case count with `PROPTEST_CASES=10000`.

use std::collections::BTreeMap;

use fc_shard::{
    EmbeddedRouteMode, EmbeddedStore, KeyTtl, LocalEmbeddedStore, ManualClock, PackedSessionWrite,
    SharedEmbeddedStore,
};
use proptest::prelude::*;

const START_MS: u64 = 1_700_000_000_000;

#[derive(Debug, Clone)]
enum Op {
    Set(Key, Vec<u8>, Option<u64>),
    Get(Key),
    Delete(Key),
    Exists(Key),
    Expire(Key, u64),
    Persist(Key),
    Ttl(Key),
    Advance(u64),
    BatchSet(Vec<(Key, Vec<u8>)>, Option<u64>),
    BatchGet(Vec<Key>),
    SessionWrite(u8, Vec<(u8, Vec<u8>)>),
    SessionGet(u8, Vec<u8>),
    Maintenance,
}

#[derive(Debug, Clone)]
struct Key(Vec<u8>);

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        (0u8..24).prop_map(|i| Key(format!("k{i}").into_bytes())),
        (0u8..4).prop_map(|i| Key(format!("{{tag}}:{i}").into_bytes())),
        (0u8..3, 0u8..4).prop_map(|(s, l)| Key(session_key(s, l))),
        Just(Key(Vec::new())),
        Just(Key(vec![0, 255, b'\r', b'\n', 0])),
    ]
}

fn session_key(session: u8, layer: u8) -> Vec<u8> {
    format!("session:{session}:layer:{layer}").into_bytes()
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..80),
        1 => (0usize..3).prop_map(|i| vec![i as u8; [300, 5_000, 40_000][i]]),
    ]
}

/// Durations that often coincide exactly with clock advances, so the expiry boundary
/// (expired only once the clock is *past* the instant) is exercised.
fn millis() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => prop::sample::select(vec![0u64, 1, 2, 100, 1_000]),
        1 => 0u64..3_000,
    ]
}

fn ttl() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![3 => Just(None), 2 => millis().prop_map(Some)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key(), value(), ttl()).prop_map(|(k, v, t)| Op::Set(k, v, t)),
        6 => key().prop_map(Op::Get),
        2 => key().prop_map(Op::Delete),
        2 => key().prop_map(Op::Exists),
        2 => (key(), millis()).prop_map(|(k, t)| Op::Expire(k, t)),
        1 => key().prop_map(Op::Persist),
        2 => key().prop_map(Op::Ttl),
        2 => millis().prop_map(Op::Advance),
        1 => (proptest::collection::vec((key(), value()), 0..40), ttl())
            .prop_map(|(items, t)| Op::BatchSet(items, t)),
        2 => proptest::collection::vec(key(), 0..40).prop_map(Op::BatchGet),
        1 => (0u8..3, proptest::collection::vec((0u8..4, value()), 0..5))
            .prop_map(|(s, r)| Op::SessionWrite(s, r)),
        1 => (0u8..3, proptest::collection::vec(0u8..4, 0..5)).prop_map(|(s, l)| Op::SessionGet(s, l)),
        1 => Just(Op::Maintenance),
    ]
}

/// The reference: a sorted map of key → (value, absolute expiry).
#[derive(Default)]
struct Model {
    map: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>,
}

impl Model {
    fn live(&mut self, key: &[u8], now: u64) -> Option<&mut (Vec<u8>, Option<u64>)> {
        if self
            .map
            .get(key)
            .is_some_and(|(_, at)| at.is_some_and(|at| now > at))
        {
            self.map.remove(key);
        }
        self.map.get_mut(key)
    }

    fn live_keys(&self, now: u64) -> Vec<Vec<u8>> {
        self.map
            .iter()
            .filter(|(_, (_, at))| at.is_none_or(|at| now <= at))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// The operations under test, over any store kind.
trait Subject {
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Option<u64>);
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>>;
    fn delete(&mut self, key: &[u8]) -> bool;
    fn exists(&mut self, key: &[u8]) -> bool;
    fn expire(&mut self, key: &[u8], ttl: u64) -> bool;
    fn persist(&mut self, key: &[u8]) -> bool;
    fn pttl(&mut self, key: &[u8]) -> KeyTtl;
    fn batch_set(&mut self, items: &[(Vec<u8>, Vec<u8>)], ttl: Option<u64>);
    fn batch_get(&mut self, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>>;
    fn session_write(&mut self, prefix: &[u8], records: &[(Vec<u8>, Vec<u8>)]);
    fn session_get(&mut self, prefix: &[u8], keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>>;
    fn maintenance(&mut self);
    fn keys(&mut self) -> Vec<Vec<u8>>;
    fn len(&mut self) -> usize;
}

fn packed(prefix: &[u8], records: &[(Vec<u8>, Vec<u8>)]) -> PackedSessionWrite {
    let mut write = PackedSessionWrite::with_capacity(prefix.to_vec(), records.len(), 64);
    for (k, v) in records {
        write.push_record(k, v);
    }
    write
}

impl Subject for EmbeddedStore {
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Option<u64>) {
        EmbeddedStore::set(self, key, value, ttl);
    }
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let copy = EmbeddedStore::get(self, key);
        let view = self.get_view(key).map(|v| v.to_vec());
        assert_eq!(copy, view, "get and get_view disagree");
        copy
    }
    fn delete(&mut self, key: &[u8]) -> bool {
        EmbeddedStore::delete(self, key)
    }
    fn exists(&mut self, key: &[u8]) -> bool {
        EmbeddedStore::exists(self, key)
    }
    fn expire(&mut self, key: &[u8], ttl: u64) -> bool {
        EmbeddedStore::expire(self, key, ttl)
    }
    fn persist(&mut self, key: &[u8]) -> bool {
        EmbeddedStore::persist(self, key)
    }
    fn pttl(&mut self, key: &[u8]) -> KeyTtl {
        self.pttl_millis(key)
    }
    fn batch_set(&mut self, items: &[(Vec<u8>, Vec<u8>)], ttl: Option<u64>) {
        EmbeddedStore::batch_set(self, items.iter().map(|(k, v)| (k, v)), ttl);
    }
    fn batch_get(&mut self, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        let copies = EmbeddedStore::batch_get(self, keys);
        let packed = self.batch_get_packed(keys);
        let from_packed: Vec<Option<Vec<u8>>> =
            packed.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
        assert_eq!(
            copies, from_packed,
            "batch_get and batch_get_packed disagree"
        );
        let mut viewed = vec![None; keys.len()];
        self.batch_get_view(keys, |i, v| viewed[i] = v.map(<[u8]>::to_vec));
        assert_eq!(copies, viewed, "batch_get and batch_get_view disagree");
        copies
    }
    fn session_write(&mut self, prefix: &[u8], records: &[(Vec<u8>, Vec<u8>)]) {
        if records.len().is_multiple_of(2) {
            self.batch_set_session_packed_no_ttl(packed(prefix, records));
        } else {
            self.batch_set_session_owned_no_ttl(prefix, records.to_vec());
        }
    }
    fn session_get(&mut self, prefix: &[u8], keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        let copies = self.batch_get_session(prefix, keys);
        let packed = self.batch_get_session_packed(prefix, keys);
        assert_eq!(packed.all_hit(), copies.iter().all(Option::is_some));
        assert_eq!(
            packed.total_bytes(),
            copies.iter().flatten().map(Vec::len).sum::<usize>()
        );
        let mut viewed = vec![None; keys.len()];
        self.batch_get_session_view(prefix, keys, |i, v| viewed[i] = v.map(<[u8]>::to_vec));
        assert_eq!(copies, viewed);
        copies
    }
    fn maintenance(&mut self) {
        self.process_maintenance_with_budget(7);
    }
    fn keys(&mut self) -> Vec<Vec<u8>> {
        self.key_snapshot()
    }
    fn len(&mut self) -> usize {
        EmbeddedStore::len(self)
    }
}

/// Every operation through a clone, so the shared handle is what is tested.
struct Shared(SharedEmbeddedStore);

impl Subject for Shared {
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Option<u64>) {
        self.0.clone().set(key, value, ttl);
    }
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        self.0.clone().get(key)
    }
    fn delete(&mut self, key: &[u8]) -> bool {
        self.0.clone().delete(key)
    }
    fn exists(&mut self, key: &[u8]) -> bool {
        self.0.exists(key)
    }
    fn expire(&mut self, key: &[u8], ttl: u64) -> bool {
        self.0.expire(key, ttl)
    }
    fn persist(&mut self, key: &[u8]) -> bool {
        self.0.persist(key)
    }
    fn pttl(&mut self, key: &[u8]) -> KeyTtl {
        self.0.pttl_millis(key)
    }
    fn batch_set(&mut self, items: &[(Vec<u8>, Vec<u8>)], ttl: Option<u64>) {
        self.0.batch_set(items.to_vec(), ttl);
    }
    fn batch_get(&mut self, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        self.0.batch_get(keys.to_vec())
    }
    fn session_write(&mut self, prefix: &[u8], records: &[(Vec<u8>, Vec<u8>)]) {
        self.0
            .batch_set_session_packed_no_ttl(packed(prefix, records));
    }
    fn session_get(&mut self, prefix: &[u8], keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        self.0.batch_get_session(prefix, keys)
    }
    fn maintenance(&mut self) {
        self.0.process_maintenance();
    }
    fn keys(&mut self) -> Vec<Vec<u8>> {
        self.0.key_snapshot()
    }
    fn len(&mut self) -> usize {
        self.0.len()
    }
}

/// Several owner-local stores; each operation goes to the owning worker(s).
struct Locals(Vec<LocalEmbeddedStore>);

impl Locals {
    fn owner(&self, key: &[u8]) -> usize {
        self.0[0].owner_of_key(key)
    }

    /// Splits `keys` by owner, calls `read` per owner with its subset, merges in key order.
    fn split_read(
        &mut self,
        keys: &[Vec<u8>],
        mut read: impl FnMut(&mut LocalEmbeddedStore, &[Vec<u8>]) -> Vec<Option<Vec<u8>>>,
    ) -> Vec<Option<Vec<u8>>> {
        let mut out = vec![None; keys.len()];
        for worker in 0..self.0.len() {
            let idx: Vec<usize> = (0..keys.len())
                .filter(|&i| self.owner(&keys[i]) == worker)
                .collect();
            let subset: Vec<Vec<u8>> = idx.iter().map(|&i| keys[i].clone()).collect();
            let values = read(&mut self.0[worker], &subset);
            for (i, v) in idx.into_iter().zip(values) {
                out[i] = v;
            }
        }
        out
    }

    fn split_write(
        &mut self,
        items: &[(Vec<u8>, Vec<u8>)],
        mut write: impl FnMut(&mut LocalEmbeddedStore, Vec<(Vec<u8>, Vec<u8>)>),
    ) {
        for worker in 0..self.0.len() {
            let subset: Vec<(Vec<u8>, Vec<u8>)> = items
                .iter()
                .filter(|(k, _)| self.owner(k) == worker)
                .cloned()
                .collect();
            write(&mut self.0[worker], subset);
        }
    }
}

impl Subject for Locals {
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Option<u64>) {
        let w = self.owner(key);
        self.0[w].set(key, value, ttl);
    }
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let w = self.owner(key);
        let other = (w + 1) % self.0.len();
        if other != w {
            assert!(self.0[other].try_get(key).is_err(), "non-owner must refuse");
        }
        let copy = self.0[w].get(key);
        assert_eq!(self.0[w].get_view(key).map(<[u8]>::to_vec), copy);
        copy
    }
    fn delete(&mut self, key: &[u8]) -> bool {
        let w = self.owner(key);
        self.0[w].delete(key)
    }
    fn exists(&mut self, key: &[u8]) -> bool {
        let w = self.owner(key);
        self.0[w].exists(key)
    }
    fn expire(&mut self, key: &[u8], ttl: u64) -> bool {
        let w = self.owner(key);
        self.0[w].expire(key, ttl)
    }
    fn persist(&mut self, key: &[u8]) -> bool {
        let w = self.owner(key);
        self.0[w].persist(key)
    }
    fn pttl(&mut self, key: &[u8]) -> KeyTtl {
        let w = self.owner(key);
        self.0[w].pttl_millis(key)
    }
    fn batch_set(&mut self, items: &[(Vec<u8>, Vec<u8>)], ttl: Option<u64>) {
        self.split_write(items, |store, subset| store.batch_set(subset, ttl));
    }
    fn batch_get(&mut self, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        self.split_read(keys, |store, subset| {
            let copies = store.batch_get(subset);
            let packed = store.batch_get_packed(subset);
            assert_eq!(
                packed
                    .iter()
                    .map(|v| v.map(<[u8]>::to_vec))
                    .collect::<Vec<_>>(),
                copies
            );
            copies
        })
    }
    fn session_write(&mut self, prefix: &[u8], records: &[(Vec<u8>, Vec<u8>)]) {
        let prefix = prefix.to_vec();
        self.split_write(records, |store, subset| {
            store.batch_set_session_packed_no_ttl(packed(&prefix, &subset));
        });
    }
    fn session_get(&mut self, prefix: &[u8], keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
        self.split_read(keys, |store, subset| {
            let copies = store.batch_get_session(prefix, subset);
            let packed = store.batch_get_session_packed(prefix, subset);
            assert_eq!(packed.all_hit(), copies.iter().all(Option::is_some));
            copies
        })
    }
    fn maintenance(&mut self) {
        for store in &mut self.0 {
            store.process_maintenance_with_budget(5);
        }
    }
    fn keys(&mut self) -> Vec<Vec<u8>> {
        self.0
            .iter()
            .flat_map(LocalEmbeddedStore::key_snapshot)
            .collect()
    }
    fn len(&mut self) -> usize {
        self.0.iter().map(LocalEmbeddedStore::len).sum()
    }
}

fn run(subject: &mut dyn Subject, clock: &ManualClock, ops: &[Op]) {
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        let now = clock.now_ms();
        match op {
            Op::Set(k, v, ttl) => {
                subject.set(&k.0, v, *ttl);
                model
                    .map
                    .insert(k.0.clone(), (v.clone(), ttl.map(|t| now + t)));
            }
            Op::Get(k) => {
                let expected = model.live(&k.0, now).map(|(v, _)| v.clone());
                assert_eq!(subject.get(&k.0), expected, "step {step}: {op:?}");
            }
            Op::Delete(k) => {
                let expected = model.live(&k.0, now).is_some();
                model.map.remove(&k.0);
                assert_eq!(subject.delete(&k.0), expected, "step {step}: {op:?}");
            }
            Op::Exists(k) => {
                let expected = model.live(&k.0, now).is_some();
                assert_eq!(subject.exists(&k.0), expected, "step {step}: {op:?}");
            }
            Op::Expire(k, ttl) => {
                let entry = model.live(&k.0, now);
                let expected = entry.is_some();
                if let Some(e) = entry {
                    e.1 = Some(now + ttl);
                }
                assert_eq!(subject.expire(&k.0, *ttl), expected, "step {step}: {op:?}");
            }
            Op::Persist(k) => {
                let expected = match model.live(&k.0, now) {
                    Some(e) => e.1.take().is_some(),
                    None => false,
                };
                assert_eq!(subject.persist(&k.0), expected, "step {step}: {op:?}");
            }
            Op::Ttl(k) => {
                let expected = match model.live(&k.0, now) {
                    None => KeyTtl::Missing,
                    Some((_, None)) => KeyTtl::Persistent,
                    Some((_, Some(at))) => KeyTtl::ExpiresIn(*at - now),
                };
                assert_eq!(subject.pttl(&k.0), expected, "step {step}: {op:?}");
            }
            Op::Advance(ms) => clock.advance_ms(*ms),
            Op::BatchSet(items, ttl) => {
                let items: Vec<(Vec<u8>, Vec<u8>)> = items
                    .iter()
                    .map(|(k, v)| (k.0.clone(), v.clone()))
                    .collect();
                subject.batch_set(&items, *ttl);
                for (k, v) in items {
                    model.map.insert(k, (v, ttl.map(|t| now + t)));
                }
            }
            Op::BatchGet(keys) => {
                let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.0.clone()).collect();
                let expected: Vec<Option<Vec<u8>>> = keys
                    .iter()
                    .map(|k| model.live(k, now).map(|(v, _)| v.clone()))
                    .collect();
                assert_eq!(subject.batch_get(&keys), expected, "step {step}: {op:?}");
            }
            Op::SessionWrite(s, records) => {
                let prefix = format!("session:{s}").into_bytes();
                let records: Vec<(Vec<u8>, Vec<u8>)> = records
                    .iter()
                    .map(|(l, v)| (session_key(*s, *l), v.clone()))
                    .collect();
                subject.session_write(&prefix, &records);
                for (k, v) in records {
                    model.map.insert(k, (v, None));
                }
            }
            Op::SessionGet(s, layers) => {
                let prefix = format!("session:{s}").into_bytes();
                let keys: Vec<Vec<u8>> = layers.iter().map(|l| session_key(*s, *l)).collect();
                let expected: Vec<Option<Vec<u8>>> = keys
                    .iter()
                    .map(|k| model.live(k, now).map(|(v, _)| v.clone()))
                    .collect();
                assert_eq!(
                    subject.session_get(&prefix, &keys),
                    expected,
                    "step {step}: {op:?}"
                );
            }
            Op::Maintenance => subject.maintenance(),
        }
    }
    let now = clock.now_ms();
    let mut keys = subject.keys();
    keys.sort();
    assert_eq!(keys, model.live_keys(now), "final key snapshot");
    // A full sweep reclaims every expired entry, after which len counts only live keys.
    for _ in 0..64 {
        subject.maintenance();
    }
    assert_eq!(
        subject.len(),
        model.live_keys(now).len(),
        "len after maintenance"
    );
}

fn mode(session: bool) -> EmbeddedRouteMode {
    if session {
        EmbeddedRouteMode::session_prefix()
    } else {
        EmbeddedRouteMode::FullKey
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn embedded_store_matches_model(ops in proptest::collection::vec(op(), 1..120), session in any::<bool>(), bits in 0u32..4) {
        let clock = ManualClock::new(START_MS);
        let mut store = EmbeddedStore::builder(1 << bits).route_mode(mode(session)).clock(clock.clone()).build();
        run(&mut store, &clock, &ops);
    }

    #[test]
    fn shared_store_matches_model(ops in proptest::collection::vec(op(), 1..120), session in any::<bool>()) {
        let clock = ManualClock::new(START_MS);
        let store = EmbeddedStore::builder(4).route_mode(mode(session)).clock(clock.clone()).build_shared();
        run(&mut Shared(store), &clock, &ops);
    }

    #[test]
    fn local_stores_match_model(ops in proptest::collection::vec(op(), 1..120), session in any::<bool>(), workers in 1usize..4) {
        let clock = ManualClock::new(START_MS);
        let store = EmbeddedStore::builder(8).route_mode(mode(session)).clock(clock.clone()).build();
        let mut locals = Locals(store.into_local_stores(workers));
        run(&mut locals, &clock, &ops);
        // Joining the workers back gives one store with the same contents.
        let joined = EmbeddedStore::from_local_stores(locals.0).expect("complete split");
        let mut keys = joined.key_snapshot();
        keys.sort();
        keys.dedup();
        prop_assert_eq!(keys.len(), joined.key_snapshot().len());
    }
}
