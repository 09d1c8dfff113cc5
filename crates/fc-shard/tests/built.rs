//! Entries built outside the store's locks (`BuiltEntry`) and written as a session: the same
//! store, stats and mutation events as plain writes of the same values, whatever they replace.

use std::sync::{Arc, Mutex};

use fc_shard::{
    BuiltEntry, EmbeddedRouteMode, EmbeddedStore, EntryPool, EvictionPolicy, KeyTtl, KeyType,
    ManualClock, Mutation, StoreError,
};

const NOW: u64 = 1_700_000_000_000;

type Log = Arc<Mutex<Vec<String>>>;

/// A session-routed store whose mutations are logged as text (values by length and a sum).
fn logged(shards: usize) -> (EmbeddedStore, Log) {
    let log: Log = Arc::default();
    let sink = Arc::clone(&log);
    let store = EmbeddedStore::builder(shards)
        .route_mode(EmbeddedRouteMode::session_prefix())
        .clock(ManualClock::new(NOW))
        .mutation_sink(Arc::new(move |shard: usize, seq: u64, m: &Mutation<'_>| {
            let text = match m {
                Mutation::Set {
                    key,
                    value,
                    expire_at_ms,
                } => format!(
                    "{shard}/{seq} set {} {}:{} {expire_at_ms:?}",
                    String::from_utf8_lossy(key),
                    value.len(),
                    value.iter().map(|&b| u64::from(b)).sum::<u64>()
                ),
                other => format!("{shard}/{seq} {other:?}"),
            };
            sink.lock().unwrap().push(text);
        }))
        .build();
    (store, log)
}

fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Sizes on both sides of the 16 KiB line between pooled chunks and own allocations.
const LENS: [usize; 6] = [
    0,
    100,
    16 * 1024 - 40,
    16 * 1024,
    256 << 10,
    (256 << 10) + 8,
];

#[test]
fn built_writes_match_plain_writes_through_every_kind_of_replacement() {
    let (plain, plain_log) = logged(4);
    let (built, built_log) = logged(4);
    let keys: Vec<String> = (0..LENS.len()).map(|i| format!("s:1:chunk:{i}")).collect();
    // Every size replaced by every size (rotating the lengths over the keys), so small
    // replaces large, large replaces small, and large replaces large of the same and of
    // another size.
    for round in 0..LENS.len() {
        let values: Vec<Vec<u8>> = (0..keys.len())
            .map(|i| value(LENS[(i + round) % LENS.len()], round as u8))
            .collect();
        for (key, v) in keys.iter().zip(&values) {
            plain.set(key.as_bytes(), v.clone(), None);
        }
        let entries = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| BuiltEntry::new(k.as_bytes(), v).unwrap())
            .collect();
        built
            .try_batch_set_session_built_no_ttl(b"s:1", entries)
            .unwrap();
        let got = built.batch_get_session(b"s:1", &keys);
        for (i, (got, want)) in got.iter().zip(&values).enumerate() {
            assert_eq!(got.as_deref(), Some(&want[..]), "round {round} key {i}");
        }
        let (p, b) = (
            plain.stats_snapshot().total(),
            built.stats_snapshot().total(),
        );
        assert_eq!((b.keys, b.stored_bytes), (p.keys, p.stored_bytes));
        assert_eq!(b.used_memory, p.used_memory, "round {round}");
    }
    assert_eq!(*built_log.lock().unwrap(), *plain_log.lock().unwrap());
}

#[test]
fn a_built_entry_replaces_an_object_and_an_expiry() {
    let (store, _) = logged(2);
    let key = b"s:2:chunk:0";
    store
        .hset(key, &[(b"f".as_slice(), b"v".as_slice())])
        .unwrap();
    store
        .try_batch_set_session_built_no_ttl(
            b"s:2",
            vec![BuiltEntry::new(key, &value(64 << 10, 1)).unwrap()],
        )
        .unwrap();
    assert_eq!(store.type_of(key), Ok(Some(KeyType::String)));
    assert_eq!(store.get(key), Some(value(64 << 10, 1)));
    store.set(key, value(70 << 10, 2), Some(60_000));
    assert!(matches!(store.ttl_seconds(key), KeyTtl::ExpiresIn(_)));
    store
        .try_batch_set_session_built_no_ttl(
            b"s:2",
            vec![BuiltEntry::new(key, &value(64 << 10, 3)).unwrap()],
        )
        .unwrap();
    assert_eq!(store.ttl_seconds(key), KeyTtl::Persistent);
    assert_eq!(store.get(key), Some(value(64 << 10, 3)));
    let total = store.stats_snapshot().total();
    assert_eq!(
        (total.keys, total.stored_bytes),
        (1, (11 + (64 << 10)) as u64)
    );
}

#[test]
fn built_entries_respect_the_memory_budget() {
    let bounded = |policy| {
        EmbeddedStore::builder(1)
            .route_mode(EmbeddedRouteMode::session_prefix())
            .max_memory(1 << 20)
            .eviction_policy(policy)
            .build()
    };
    let lru = bounded(EvictionPolicy::Lru);
    for round in 0..8u8 {
        let entries = (0..4)
            .map(|i| {
                BuiltEntry::new(format!("s:{round}:c:{i}").as_bytes(), &value(100 << 10, i))
                    .unwrap()
            })
            .collect();
        lru.try_batch_set_session_built_no_ttl(format!("s:{round}").as_bytes(), entries)
            .unwrap();
        let total = lru.stats_snapshot().total();
        assert!(total.used_memory <= 1 << 20, "round {round}: {total:?}");
    }
    assert!(lru.exists(b"s:7:c:3"), "the newest chunk stays");
    assert!(!lru.exists(b"s:0:c:0"), "the oldest was evicted");

    let strict = bounded(EvictionPolicy::NoEviction);
    let entries = (0..16)
        .map(|i| BuiltEntry::new(format!("s:c:{i}").as_bytes(), &value(100 << 10, 0)).unwrap())
        .collect();
    let refused = strict.try_batch_set_session_built_no_ttl(b"s", entries);
    assert!(matches!(refused, Err(StoreError::OutOfMemory { .. })));
    let total = strict.stats_snapshot().total();
    assert!(total.keys < 16 && total.used_memory <= 1 << 20, "{total:?}");
}

#[test]
fn a_built_entry_refuses_what_a_write_refuses() {
    let key = vec![b'k'; (1 << 26) + 1];
    assert!(matches!(
        BuiltEntry::new(&key, b"v"),
        Err(StoreError::KeyTooLarge { .. })
    ));
    let entry = BuiltEntry::new(b"k", &[1, 2, 3]).unwrap();
    assert_eq!((entry.key(), entry.value()), (&b"k"[..], &[1u8, 2, 3][..]));
    assert!(format!("{entry:?}").contains("value_len: 3"));
}

#[test]
fn a_pool_builds_into_the_allocations_a_write_replaced() {
    let store = EmbeddedStore::with_route_mode(2, EmbeddedRouteMode::session_prefix());
    let pool = EntryPool::new(3 * (300 << 10));
    let keys: Vec<String> = (0..4).map(|i| format!("s:9:chunk:{i}")).collect();
    let write = |seed: u8| {
        let entries = keys
            .iter()
            .map(|k| pool.build(k.as_bytes(), &value(256 << 10, seed)).unwrap())
            .collect();
        store
            .try_batch_set_session_built_no_ttl(b"s:9", entries)
            .unwrap()
    };
    assert!(write(1).is_empty(), "nothing was replaced");
    let replaced = write(2);
    assert_eq!(replaced.len(), 4);
    // What comes back are the old entries, released from the store.
    assert!(replaced.iter().all(|e| e.value() == value(256 << 10, 1)));
    let old: Vec<*const u8> = replaced.iter().map(|e| e.value().as_ptr()).collect();
    pool.give_back(replaced);
    // The limit keeps three of the four.
    assert_eq!(pool.held_bytes(), 3 * (8 + 11 + (256 << 10)));
    let rebuilt = pool
        .build(keys[0].as_bytes(), &value(256 << 10, 3))
        .unwrap();
    assert!(
        old.contains(&rebuilt.value().as_ptr()),
        "built into a kept allocation"
    );
    assert_eq!(rebuilt.value(), value(256 << 10, 3));
    assert_eq!(pool.held_bytes(), 2 * (8 + 11 + (256 << 10)));
    // Another size finds no spare and allocates.
    let other = pool.build(b"s:9:x", &value(100 << 10, 4)).unwrap();
    assert!(!old.contains(&other.value().as_ptr()));
    assert_eq!(pool.held_bytes(), 2 * (8 + 11 + (256 << 10)));
    pool.clear();
    assert_eq!(pool.held_bytes(), 0);
    // The store still reads the second write.
    for got in store.batch_get_session(b"s:9", &keys) {
        assert_eq!(got, Some(value(256 << 10, 2)));
    }
}
