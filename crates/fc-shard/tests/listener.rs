//! Removal listeners: every entry that leaves a store is reported once, with its value and the
//! right cause, outside the shard locks, and a panicking listener harms nothing.
//!
//! The proptest replays random writes, deletes, clock jumps and maintenance on a bounded store
//! and rebuilds the store's contents from the writes and the listener's reports alone: they
//! must agree with the store exactly. Raise the case count with `PROPTEST_CASES=10000`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use fc_shard::{
    EmbeddedStore, EvictionPolicy, LocalEmbeddedStore, ManualClock, RemovalCause,
    SharedEmbeddedStore,
};
use proptest::prelude::*;

const START_MS: u64 = 1_700_000_000_000;

type Log = Arc<Mutex<Vec<(Vec<u8>, Vec<u8>, RemovalCause)>>>;

fn logging(log: &Log) -> impl Fn(&[u8], &[u8], RemovalCause) + Send + Sync + 'static {
    let log = Arc::clone(log);
    move |key: &[u8], value: &[u8], cause: RemovalCause| {
        log.lock()
            .unwrap()
            .push((key.to_vec(), value.to_vec(), cause));
    }
}

fn entry(key: &str, value: &str, cause: RemovalCause) -> (Vec<u8>, Vec<u8>, RemovalCause) {
    (key.as_bytes().to_vec(), value.as_bytes().to_vec(), cause)
}

#[test]
fn every_cause_is_reported_with_the_value() {
    let clock = ManualClock::new(START_MS);
    let log = Log::default();
    let store = EmbeddedStore::builder(4)
        .clock(clock.clone())
        .eviction_listener(logging(&log))
        .build();
    store.set(b"a", b"1", None);
    store.set(b"a", b"2", None); // replaced
    assert!(store.delete(b"a")); // deleted
    assert!(!store.delete(b"a")); // nothing left: no report
    store.set(b"lazy", b"x", Some(10));
    store.set(b"swept", b"y", Some(10));
    clock.advance_ms(11);
    assert_eq!(store.get(b"lazy"), None); // expired, found on access
    while !store.process_maintenance().completed_pass {}
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            entry("a", "1", RemovalCause::Replaced),
            entry("a", "2", RemovalCause::Deleted),
            entry("lazy", "x", RemovalCause::Expired),
            entry("swept", "y", RemovalCause::Expired),
        ]
    );
    assert_eq!(store.removal_listener_panics(), 0);
}

#[test]
fn evictions_are_reported() {
    let log = Log::default();
    let store = EmbeddedStore::builder(1)
        .max_memory(8 * 1024)
        .eviction_policy(EvictionPolicy::Lru)
        .eviction_listener(logging(&log))
        .build();
    for i in 0..1_000u32 {
        store.set(format!("k{i}").as_bytes(), i.to_le_bytes(), None);
    }
    let stats = store.stats_snapshot().total();
    let log = log.lock().unwrap();
    assert!(stats.evicted > 0);
    assert_eq!(log.len() as u64, stats.evicted);
    for (key, value, cause) in log.iter() {
        assert_eq!(*cause, RemovalCause::Evicted);
        let i: u32 = std::str::from_utf8(&key[1..]).unwrap().parse().unwrap();
        assert_eq!(value, &i.to_le_bytes());
        assert!(!store.exists(key));
    }
}

#[test]
fn the_listener_may_use_the_store() {
    // Under a shard lock this would deadlock: the listener reads and writes the same shard.
    let cell: Arc<OnceLock<SharedEmbeddedStore>> = Arc::new(OnceLock::new());
    let seen = Arc::clone(&cell);
    let store = SharedEmbeddedStore::from(
        EmbeddedStore::builder(1)
            .max_memory(4 * 1024)
            .eviction_policy(EvictionPolicy::S3Fifo)
            .eviction_listener(move |key: &[u8], value: &[u8], cause: RemovalCause| {
                let store = seen.get().expect("set before the first write");
                assert!(!store.exists(key), "reported after removal");
                if cause == RemovalCause::Evicted && !key.starts_with(b"graveyard:") {
                    let mut grave = b"graveyard:".to_vec();
                    grave.extend_from_slice(key);
                    store.set(grave, value, None);
                }
            })
            .build(),
    );
    assert!(cell.set(store.clone()).is_ok());
    for i in 0..500u32 {
        store.set(format!("k{i}").as_bytes(), [7u8; 32], None);
    }
    assert!(store.stats_snapshot().total().evicted > 0);
    assert_eq!(store.removal_listener_panics(), 0);
    let keys = store.key_snapshot();
    assert!(keys.iter().any(|k| k.starts_with(b"graveyard:")));
}

#[test]
fn a_panicking_listener_is_contained() {
    let clock = ManualClock::new(START_MS);
    let store = EmbeddedStore::builder(2)
        .clock(clock.clone())
        .eviction_listener(|key: &[u8], _value: &[u8], _cause: RemovalCause| {
            assert!(key != b"boom", "listener failure");
        })
        .build();
    store.set(b"boom", b"1", None);
    store.set(b"boom", b"2", None);
    assert!(store.delete(b"boom"));
    store.set(b"quiet", b"1", None);
    assert!(store.delete(b"quiet"));
    assert_eq!(store.removal_listener_panics(), 2);
    // Nothing is wedged: every shard still serves reads and writes.
    for i in 0..100u32 {
        store.set(i.to_le_bytes(), b"v", None);
        assert_eq!(store.get(&i.to_le_bytes()), Some(b"v".to_vec()));
    }
    assert_eq!(store.len(), 100);
}

#[test]
fn local_stores_report_as_entries_go() {
    let clock = ManualClock::new(START_MS);
    let log = Log::default();
    let store = EmbeddedStore::builder(4)
        .clock(clock.clone())
        .eviction_listener(logging(&log))
        .build();
    let mut local = store.into_local_stores(1).pop().unwrap();
    local.set(b"a", b"1", None);
    local.set(b"a", b"2", Some(5));
    clock.advance_ms(6);
    assert_eq!(local.get_view(b"a"), None);
    local.set(b"b", b"3", None);
    assert!(local.delete(b"b"));
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            entry("a", "1", RemovalCause::Replaced),
            entry("a", "2", RemovalCause::Expired),
            entry("b", "3", RemovalCause::Deleted),
        ]
    );
    // Joined again, the store queues reports until its lock is released.
    let store = EmbeddedStore::from_local_stores(vec![local]).unwrap();
    store.set(b"c", b"4", None);
    store.delete(b"c");
    assert_eq!(
        log.lock().unwrap().last(),
        Some(&entry("c", "4", RemovalCause::Deleted))
    );
}

#[derive(Debug, Clone)]
enum Op {
    Set { key: u8, len: u16, ttl: Option<u8> },
    Delete { key: u8 },
    Get { key: u8 },
    Advance { ms: u8 },
    Maintain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..48, 1u16..600, proptest::option::of(1u8..50))
            .prop_map(|(key, len, ttl)| Op::Set { key, len, ttl }),
        2 => (0u8..48).prop_map(|key| Op::Delete { key }),
        3 => (0u8..48).prop_map(|key| Op::Get { key }),
        1 => (1u8..40).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Maintain),
    ]
}

/// Either store kind, driven the same way.
enum Kind {
    Shared(EmbeddedStore),
    Local(LocalEmbeddedStore),
}

impl Kind {
    fn set(&mut self, key: &[u8], value: &[u8], ttl: Option<u64>) {
        match self {
            Self::Shared(s) => s.set(key, value, ttl),
            Self::Local(s) => s.set(key, value, ttl),
        }
    }
    fn delete(&mut self, key: &[u8]) {
        match self {
            Self::Shared(s) => drop(s.delete(key)),
            Self::Local(s) => drop(s.delete(key)),
        }
    }
    fn get(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        match self {
            Self::Shared(s) => s.get(key),
            Self::Local(s) => s.get(key),
        }
    }
    fn maintain(&mut self) {
        match self {
            Self::Shared(s) => drop(s.process_maintenance()),
            Self::Local(s) => drop(s.process_maintenance()),
        }
    }
    fn contents(&mut self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let keys = match self {
            Self::Shared(s) => s.key_snapshot(),
            Self::Local(s) => s.key_snapshot(),
        };
        keys.into_iter()
            .map(|k| {
                let v = self.get(&k).expect("listed key is live");
                (k, v)
            })
            .collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn writes_and_reports_rebuild_the_store(
        ops in proptest::collection::vec(op(), 1..300),
        local in any::<bool>(),
        s3fifo in any::<bool>(),
    ) {
        let clock = ManualClock::new(START_MS);
        let log = Log::default();
        let policy = if s3fifo { EvictionPolicy::S3Fifo } else { EvictionPolicy::Lru };
        let built = EmbeddedStore::builder(2)
            .max_memory(6 * 1024)
            .eviction_policy(policy)
            .clock(clock.clone())
            .eviction_listener(logging(&log))
            .build();
        let mut store = if local {
            Kind::Local(built.into_local_stores(1).pop().unwrap())
        } else {
            Kind::Shared(built)
        };
        // What the caller wrote, minus what the listener reported gone.
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut seen = 0;
        for (step, op) in ops.into_iter().enumerate() {
            match op {
                Op::Set { key, len, ttl } => {
                    let value = vec![step as u8; len as usize];
                    store.set(&[key], &value, ttl.map(u64::from));
                    // The old value is reported (replaced, or expired) before the new one lands.
                    apply(&log, &mut seen, &mut model)?;
                    model.insert(vec![key], value);
                }
                Op::Delete { key } => store.delete(&[key]),
                Op::Get { key } => drop(store.get(&[key])),
                Op::Advance { ms } => clock.advance_ms(u64::from(ms)),
                Op::Maintain => store.maintain(),
            }
            apply(&log, &mut seen, &mut model)?;
        }
        // Expired entries not yet reclaimed are still in the model: reclaim them now.
        clock.advance_ms(1_000);
        for _ in 0..100 {
            store.maintain();
        }
        apply(&log, &mut seen, &mut model)?;
        prop_assert_eq!(store.contents(), model);
    }
}

/// Applies the reports that arrived since `seen`, checking each against the model.
fn apply(
    log: &Log,
    seen: &mut usize,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<(), TestCaseError> {
    let log = log.lock().unwrap();
    for (key, value, _cause) in &log[*seen..] {
        let held = model.remove(key);
        prop_assert_eq!(held.as_ref(), Some(value), "report for {:?}", key);
    }
    *seen = log.len();
    Ok(())
}
