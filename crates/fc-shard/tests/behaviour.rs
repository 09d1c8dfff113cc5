//! Edge cases of the public API: sizes, odd keys, ownership, expiry, stats and mutation events.

use std::sync::{Arc, Mutex};

use fc_shard::{
    EmbeddedRouteMode, EmbeddedStore, KeyTtl, LocalEmbeddedStoreBootstrap, ManualClock, Mutation,
    MutationSink, PackedSessionWrite, SetExpiry, SetOptions, StoreError,
};

const NOW: u64 = 1_700_000_000_000;

fn store_with_clock(shards: usize) -> (EmbeddedStore, ManualClock) {
    let clock = ManualClock::new(NOW);
    (
        EmbeddedStore::builder(shards).clock(clock.clone()).build(),
        clock,
    )
}

#[test]
fn large_values_round_trip_and_resize() {
    let store = EmbeddedStore::new(4);
    let mib: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    store.set(b"big", &mib, None);
    assert_eq!(store.get(b"big").as_deref(), Some(&mib[..]));
    assert_eq!(store.get_view(b"big").map(|v| v.len()), Some(1 << 20));
    // Shrink to a small value, grow back, same size again: all must read back exactly.
    store.set(b"big", b"tiny", None);
    assert_eq!(store.get(b"big"), Some(b"tiny".to_vec()));
    store.set(b"big", &mib[..70_000], None);
    store.set(b"big", &mib[1..70_001], None);
    assert_eq!(store.get(b"big").as_deref(), Some(&mib[1..70_001]));
    assert_eq!(store.stored_bytes(), 3 + 70_000);
    assert!(store.delete(b"big"));
    assert_eq!(store.stored_bytes(), 0);
}

#[test]
fn every_value_size_class_round_trips() {
    let store = EmbeddedStore::new(2);
    for len in (0..20_000)
        .step_by(97)
        .chain([16_367, 16_368, 16_369, 16_384])
    {
        let key = format!("len:{len}");
        let value = vec![(len % 256) as u8; len];
        store.set(&key, &value, None);
        assert_eq!(store.get(key.as_bytes()), Some(value), "len {len}");
    }
}

#[test]
fn empty_and_binary_keys_and_values() {
    let store = EmbeddedStore::new(8);
    store.set(b"", b"empty key", None);
    store.set(b"empty value", b"", None);
    let binary = [0u8, 255, 13, 10, 0, 123, 125];
    store.set(binary, [0u8; 3], None);
    assert_eq!(store.get(b""), Some(b"empty key".to_vec()));
    assert_eq!(store.get(b"empty value"), Some(Vec::new()));
    assert!(store.exists(b"empty value"));
    assert_eq!(store.get(&binary), Some(vec![0; 3]));
    let mut keys = store.key_snapshot();
    keys.sort();
    assert_eq!(
        keys,
        vec![b"".to_vec(), binary.to_vec(), b"empty value".to_vec()]
    );
}

#[test]
fn key_and_value_limits_are_errors_not_corruption() {
    let store = EmbeddedStore::new(1);
    let key = vec![b'k'; fc_shard::MAX_KEY_LEN + 1];
    let err = store.try_set(&key, b"v", None).unwrap_err();
    assert!(matches!(err, StoreError::KeyTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("exceeds the limit"));
    assert!(store.is_empty());
}

#[test]
fn invalid_shard_counts_are_named() {
    for bad in [0, 3, 24, 1 << 17] {
        let err = EmbeddedStore::try_new(bad).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("invalid shard count {bad}")),
            "{err}"
        );
    }
}

#[test]
#[should_panic(expected = "invalid shard count 6")]
fn new_panics_on_invalid_shard_count() {
    let _ = EmbeddedStore::new(6);
}

#[test]
fn not_owner_is_explicit_and_stores_nothing() {
    let bootstrap = LocalEmbeddedStoreBootstrap::from_embedded(EmbeddedStore::new(8), 2);
    let owner = bootstrap.owner_of_key(b"key");
    let mut stores = bootstrap.into_stores();
    let other = 1 - owner;
    let err = stores[other].try_set(b"key", b"v", None).unwrap_err();
    match err {
        StoreError::NotOwner {
            owner: o, worker, ..
        } => {
            assert_eq!((o, worker), (owner, other));
        }
        e => panic!("unexpected {e}"),
    }
    assert!(stores[other].is_empty());
    assert!(matches!(
        stores[other].try_get(b"key"),
        Err(StoreError::NotOwner { .. })
    ));
    assert!(matches!(
        stores[other].try_delete(b"key"),
        Err(StoreError::NotOwner { .. })
    ));
    // A batch with one foreign key stores nothing at all.
    let mine: Vec<u8> = (0..100)
        .map(|i| format!("k{i}").into_bytes())
        .find(|k| stores[other].owns(k))
        .unwrap();
    let batch = vec![
        (mine.clone(), b"1".to_vec()),
        (b"key".to_vec(), b"2".to_vec()),
    ];
    assert!(stores[other].try_batch_set(batch, None).is_err());
    assert!(stores[other].is_empty());
    stores[owner].set(b"key", b"v", None);
    assert_eq!(stores[owner].get(b"key"), Some(b"v".to_vec()));
}

#[test]
fn routed_string_reads_and_writes_match_the_plain_ones() {
    use fc_shard::{SetCondition, SetOptions};
    let mut stores = EmbeddedStore::new(8).into_local_stores(2);
    let owner = stores[0].owner_of_key(b"s");
    let other = 1 - owner;
    let route = stores[owner].route_key(b"s");
    let store = &mut stores[owner];
    assert_eq!(store.get_string_view_routed(&route, b"s"), Ok(None));
    let nx = SetOptions {
        condition: SetCondition::IfAbsent,
        ..SetOptions::default()
    };
    assert!(
        store
            .set_with_routed(&route, b"s", b"one", nx)
            .unwrap()
            .written
    );
    assert!(
        !store
            .set_with_routed(&route, b"s", b"two", nx)
            .unwrap()
            .written
    );
    assert_eq!(
        store.get_string_view_routed(&route, b"s"),
        Ok(Some(&b"one"[..]))
    );
    assert_eq!(store.get_string(b"s"), Ok(Some(b"one".to_vec())));
    // Another type under the key: WRONGTYPE, as the unrouted GET says.
    store.delete(b"s");
    store
        .hset(b"s", &[(b"f".as_slice(), b"v".as_slice())])
        .unwrap();
    assert_eq!(
        store.get_string_view_routed(&route, b"s"),
        Err(StoreError::WrongType)
    );
    // A foreign worker reports the owner and writes nothing.
    assert!(matches!(
        stores[other].get_string_view_routed(&route, b"s"),
        Err(StoreError::NotOwner { .. })
    ));
    assert!(matches!(
        stores[other].set_with_routed(&route, b"s", b"x", SetOptions::default()),
        Err(StoreError::NotOwner { .. })
    ));
    assert!(stores[other].is_empty());
}

#[test]
#[should_panic(expected = "not by this worker")]
fn plain_methods_panic_on_foreign_keys() {
    let mut stores = EmbeddedStore::new(4).into_local_stores(2);
    let owner = stores[0].owner_of_key(b"x");
    let _ = stores[1 - owner].get(b"x");
}

#[test]
fn invalid_worker_counts() {
    assert!(matches!(
        EmbeddedStore::new(4).try_into_local_stores(0),
        Err(StoreError::InvalidWorkerCount { .. })
    ));
    assert!(EmbeddedStore::new(4).try_into_local_stores(5).is_err());
    assert_eq!(EmbeddedStore::new(4).into_local_stores(3).len(), 3);
}

#[test]
fn ttl_reports_like_redis() {
    let (store, clock) = store_with_clock(4);
    assert_eq!(store.ttl_seconds(b"none"), KeyTtl::Missing);
    assert_eq!(KeyTtl::Missing.to_redis(), -2);
    store.set(b"p", b"v", None);
    assert_eq!(store.pttl_millis(b"p"), KeyTtl::Persistent);
    assert_eq!(store.ttl_seconds(b"p").to_redis(), -1);
    store.set(b"t", b"v", Some(10_400));
    assert_eq!(store.ttl_seconds(b"t"), KeyTtl::ExpiresIn(10));
    clock.advance_ms(400);
    assert_eq!(store.pttl_millis(b"t"), KeyTtl::ExpiresIn(10_000));
    clock.advance_ms(10_000);
    assert_eq!(store.pttl_millis(b"t"), KeyTtl::ExpiresIn(0)); // at the instant: still alive
    assert!(store.exists(b"t"));
    clock.advance_ms(1);
    assert_eq!(store.pttl_millis(b"t"), KeyTtl::Missing);
    // Overwriting with no TTL clears the expiry, as SET does in Redis.
    store.set(b"x", b"1", Some(5));
    store.set(b"x", b"2", None);
    clock.advance_ms(10);
    assert_eq!(store.get(b"x"), Some(b"2".to_vec()));
    assert!(!store.persist(b"x"));
    assert!(store.expire(b"x", 1));
    assert!(store.persist(b"x"));
    clock.advance_ms(10);
    assert!(store.exists(b"x"));
    assert!(!store.expire(b"missing", 1));
}

#[test]
fn maintenance_is_bounded_and_reclaims_everything_eventually() {
    let (store, clock) = store_with_clock(2);
    for i in 0..1_000 {
        store.set(
            format!("k{i}"),
            b"v",
            if i % 2 == 0 { Some(100) } else { None },
        );
    }
    assert_eq!(store.stats_snapshot().total().expires, 500);
    clock.advance_ms(101);
    let first = store.process_maintenance_with_budget(64);
    assert!(first.scanned <= 2 * 64, "{first:?}");
    assert!(!first.completed_pass);
    let mut expired = first.expired;
    let mut calls = 1;
    loop {
        let report = store.process_maintenance_with_budget(64);
        expired += report.expired;
        calls += 1;
        if store.stats_snapshot().total().expires == 0 {
            break;
        }
        assert!(calls < 100, "maintenance makes progress");
    }
    assert_eq!(expired, 500);
    assert_eq!(store.len(), 500);
    let stats = store.stats_snapshot().total();
    assert_eq!(stats.expired, 500);
    // Nothing left to expire: a call costs nothing.
    let idle = store.process_maintenance();
    assert_eq!((idle.scanned, idle.completed_pass), (0, true));
}

#[test]
fn stats_count_hits_misses_and_bytes() {
    let store = EmbeddedStore::new(4);
    store.set(b"a", b"12345", None);
    let _ = store.get(b"a");
    let _ = store.get_view(b"a");
    let _ = store.get(b"b");
    let _ = store.batch_get([b"a", b"c"]);
    let total = store.stats_snapshot().total();
    assert_eq!((total.hits, total.misses), (3, 2));
    assert_eq!(total.stored_bytes, 6);
    assert_eq!(total.keys, 1);
    assert!(total.allocated_bytes >= 6);
    assert_eq!(store.stats_snapshot().shards.len(), 4);
    assert!((store.stats_snapshot().hit_ratio() - 0.6).abs() < 1e-9);
}

#[derive(Default)]
struct Recorder(Mutex<Vec<(usize, u64, String)>>);

impl MutationSink for Recorder {
    fn on_mutation(&self, shard: usize, seq: u64, mutation: &Mutation<'_>) {
        let text = match mutation {
            Mutation::Set {
                key,
                value,
                expire_at_ms,
            } => format!(
                "set {} {} {expire_at_ms:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(value)
            ),
            Mutation::Delete { key } => format!("del {}", String::from_utf8_lossy(key)),
            Mutation::Expire { key, expire_at_ms } => {
                format!("expire {} {expire_at_ms}", String::from_utf8_lossy(key))
            }
            Mutation::Persist { key } => format!("persist {}", String::from_utf8_lossy(key)),
            Mutation::Expired { key } => format!("expired {}", String::from_utf8_lossy(key)),
            Mutation::Flush => "flush".to_string(),
            _ => format!("{mutation:?}"),
        };
        self.0.lock().unwrap().push((shard, seq, text));
    }
}

#[test]
fn mutations_are_emitted_in_order_with_per_shard_sequences() {
    let recorder = Arc::new(Recorder::default());
    let clock = ManualClock::new(NOW);
    let store = EmbeddedStore::builder(1)
        .clock(clock.clone())
        .mutation_sink(recorder.clone())
        .build();
    store.set(b"a", b"1", None);
    store.set(b"b", b"2", Some(10));
    assert!(store.expire(b"a", 50));
    assert!(store.persist(b"a"));
    assert!(!store.persist(b"a")); // no change, no event
    assert!(store.delete(b"a"));
    assert!(!store.delete(b"a"));
    clock.advance_ms(11);
    assert_eq!(store.get(b"b"), None); // lazy expiry emits
    store.set(b"c", b"3", None);
    store.clear();
    let log = recorder.0.lock().unwrap().clone();
    let texts: Vec<&str> = log.iter().map(|(_, _, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        vec![
            "set a 1 None".to_string(),
            format!("set b 2 Some({})", NOW + 10),
            format!("expire a {}", NOW + 50),
            "persist a".to_string(),
            "del a".to_string(),
            "expired b".to_string(),
            "set c 3 None".to_string(),
            "flush".to_string(),
        ]
    );
    let seqs: Vec<u64> = log.iter().map(|(_, s, _)| *s).collect();
    assert_eq!(seqs, (1..=8).collect::<Vec<_>>());
    assert_eq!(store.stats_snapshot().shards[0].mutation_seq, 8);
}

/// A plain `SET` reads nothing of the old entry and looks the key up once; over an entry
/// that has expired it still removes it as expired first (the event a lookup emits), as
/// `SET` with options does.
#[test]
fn a_plain_set_over_an_expired_key_reports_the_expiry_first() {
    let recorder = Arc::new(Recorder::default());
    let clock = ManualClock::new(NOW);
    let store = EmbeddedStore::builder(1)
        .clock(clock.clone())
        .mutation_sink(recorder.clone())
        .build();
    let plain = SetOptions::default();
    let px = SetOptions {
        expiry: SetExpiry::InMs(10),
        ..SetOptions::default()
    };
    assert!(store.set_with(b"a", b"1", px).unwrap().written);
    assert!(store.set_with(b"a", b"2", plain).unwrap().written); // live: replaced
    assert!(store.set_with(b"b", b"1", px).unwrap().written);
    clock.advance_ms(11);
    assert!(store.set_with(b"b", b"2", plain).unwrap().written); // expired first
    assert!(store.set_with(b"b", b"3", px).unwrap().written); // live again
    let texts: Vec<String> = recorder
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, _, t)| t.clone())
        .collect();
    assert_eq!(
        texts,
        vec![
            format!("set a 1 Some({})", NOW + 10),
            "set a 2 None".to_string(),
            format!("set b 1 Some({})", NOW + 10),
            "expired b".to_string(),
            "set b 2 None".to_string(),
            format!("set b 3 Some({})", NOW + 21),
        ]
    );
    assert_eq!(store.get(b"a"), Some(b"2".to_vec()));
    assert_eq!(store.pttl_millis(b"a").to_redis(), -1);
    assert_eq!(store.get(b"b"), Some(b"3".to_vec()));
}

#[test]
fn closures_are_sinks_and_sessions_co_locate_in_session_mode() {
    let shards_seen = Arc::new(Mutex::new(Vec::new()));
    let seen = shards_seen.clone();
    let store = EmbeddedStore::builder(16)
        .route_mode(EmbeddedRouteMode::session_prefix())
        .mutation_sink(Arc::new(
            move |shard: usize, _seq: u64, _m: &Mutation<'_>| {
                seen.lock().unwrap().push(shard);
            },
        ))
        .build();
    let mut write = PackedSessionWrite::with_capacity(b"session:7".to_vec(), 8, 64);
    for layer in 0..8 {
        write.push_record(
            format!("session:7:layer:{layer}").as_bytes(),
            &[layer as u8; 8],
        );
    }
    assert_eq!(write.len(), 8);
    store.batch_set_session_packed_no_ttl(write);
    let shards = shards_seen.lock().unwrap().clone();
    assert_eq!(shards.len(), 8);
    assert!(
        shards.iter().all(|&s| s == shards[0]),
        "one shard per session: {shards:?}"
    );
    // Point reads find session records, and the packed read is one contiguous buffer.
    assert_eq!(store.get(b"session:7:layer:3"), Some(vec![3; 8]));
    let keys: Vec<Vec<u8>> = (0..8)
        .map(|l| format!("session:7:layer:{l}").into_bytes())
        .collect();
    let batch = store.batch_get_session_packed(b"session:7", &keys);
    assert!(batch.all_hit());
    assert_eq!(batch.as_bytes().len(), 64);
    assert_eq!(batch.get(5), Some(&[5u8; 8][..]));
    assert_eq!(batch.range(1), Some(8..16));
}

#[test]
fn session_views_borrow_every_value_at_once_and_slices_write_back() {
    let clock = ManualClock::new(NOW);
    let store = EmbeddedStore::builder(8)
        .route_mode(EmbeddedRouteMode::session_prefix())
        .clock(clock.clone())
        .build();
    let keys: Vec<String> = (0..4).map(|l| format!("session:3:layer:{l}")).collect();
    let values: Vec<Vec<u8>> = (0..4).map(|l| vec![l as u8; 10 + l]).collect();
    let borrowed: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    store
        .try_batch_set_session_no_ttl(b"session:3", &keys, &borrowed)
        .unwrap();
    assert_eq!(store.get(b"session:3:layer:2"), Some(vec![2; 12]));
    // One of them expires; one key was never written.
    store.set(b"session:3:layer:1", vec![9; 3], Some(5));
    clock.advance_ms(10);
    let mut asked: Vec<String> = keys.clone();
    asked.push("session:3:layer:9".into());
    assert_eq!(store.len(), 4, "the expired entry is still there");
    let lens = store.with_session_views(b"session:3", &asked, |views| {
        views.iter().map(|v| v.map(<[u8]>::len)).collect::<Vec<_>>()
    });
    assert_eq!(lens, [Some(10), None, Some(12), Some(13), None]);
    // The expired one was reaped once the views were done.
    assert_eq!(store.len(), 3);
}

#[test]
fn prepared_and_routed_operations_agree_with_plain_ones() {
    let store = EmbeddedStore::new(8);
    let key = store.prepare_point_key(b"prepared".to_vec());
    store.set_prepared(&key, b"v1", None);
    assert_eq!(store.get(b"prepared"), Some(b"v1".to_vec()));
    assert_eq!(store.get_prepared(&key), Some(b"v1".to_vec()));
    assert_eq!(store.get_view_prepared(&key).as_deref(), Some(&b"v1"[..]));
    assert!(store.exists_prepared(&key));
    let route = store.route_key(b"prepared");
    assert_eq!(route, key.route());
    store.set_routed(&route, b"prepared", b"v2", None);
    assert_eq!(store.get_routed(&route, b"prepared"), Some(b"v2".to_vec()));
    assert!(store.delete_prepared(&key));
    assert!(!store.exists(b"prepared"));

    let mut local = EmbeddedStore::new(8).into_local_stores(1).pop().unwrap();
    let key = local.prepare_point_key(b"p".to_vec());
    local.set_prepared(&key, b"x", None);
    assert_eq!(local.get_view_prepared(&key), Some(&b"x"[..]));
    assert!(local.exists_prepared(&key));
    assert!(local.delete_prepared(&key));
}

#[test]
fn hash_tags_co_locate_keys() {
    let store = EmbeddedStore::new(64);
    let a = store.shard_for_key(b"{user:1}:cart");
    assert_eq!(a, store.shard_for_key(b"{user:1}:profile"));
    assert_eq!(a, store.shard_for_key(b"user:1"));
}

#[test]
fn overwrites_across_size_classes_keep_accounting_exact() {
    let store = EmbeddedStore::new(1);
    let mut expected = 0u64;
    for round in 0..50usize {
        for i in 0..40usize {
            let len = (round * 131 + i * 17) % 3_000;
            let key = format!("k{i}");
            if round > 0 {
                expected -= (key.len() + ((round - 1) * 131 + i * 17) % 3_000) as u64;
            }
            store.set(&key, vec![i as u8; len], None);
            expected += (key.len() + len) as u64;
        }
    }
    assert_eq!(store.stored_bytes(), expected);
    assert_eq!(store.len(), 40);
    store.clear();
    assert_eq!(store.stored_bytes(), 0);
    assert!(store.is_empty());
    assert_eq!(store.stats_snapshot().total().allocated_bytes, 0);
}

#[test]
fn several_sinks_each_receive_every_mutation_in_the_order_added() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (first, second) = (Arc::clone(&order), Arc::clone(&order));
    let store = EmbeddedStore::builder(2)
        .mutation_sink(Arc::new(move |_: usize, seq: u64, _: &Mutation<'_>| {
            first.lock().unwrap().push(("first", seq));
        }))
        .mutation_sink(Arc::new(move |_: usize, seq: u64, _: &Mutation<'_>| {
            second.lock().unwrap().push(("second", seq));
        }))
        .build();
    store.set(b"a", b"1", None);
    assert!(store.delete(b"a"));
    assert_eq!(
        *order.lock().unwrap(),
        [("first", 1), ("second", 1), ("first", 2), ("second", 2)]
    );
}

#[test]
fn prefetch_is_a_hint_that_changes_nothing() {
    let mut stores = EmbeddedStore::new(8).into_local_stores(2);
    let mut other = stores.pop().unwrap();
    let mut mine = stores.pop().unwrap();
    let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("k{i}").into_bytes()).collect();
    for key in &keys {
        if mine.owns(key) {
            mine.set(key, key, None);
        } else {
            other.set(key, key, None);
        }
    }
    // Every route, owned or not, present or not (and none at all): no panic, no counts.
    let mut routes: Vec<_> = keys.iter().map(|k| mine.route_key(k)).collect();
    routes.push(mine.route_key(b"absent"));
    let before = mine.stats_snapshot().total();
    mine.prefetch_routes(&routes);
    mine.prefetch_routes(&[]);
    let after = mine.stats_snapshot().total();
    assert_eq!((before.hits, before.misses), (after.hits, after.misses));
    let owned: Vec<&Vec<u8>> = keys.iter().filter(|k| mine.owns(k)).collect();
    assert!(!owned.is_empty() && owned.len() < keys.len());
    for key in owned {
        assert_eq!(mine.get_view(key), Some(&key[..]));
    }
    // Also on a store that has never held a key (an empty index).
    let empty = EmbeddedStore::new(1).into_local_stores(1).pop().unwrap();
    empty.prefetch_routes(&routes);
}
