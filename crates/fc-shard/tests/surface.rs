//! One key-value surface: the same script of every shared point, `try_*`, batch, session and
//! whole-store method runs against `EmbeddedStore`, `SharedEmbeddedStore` and a
//! `LocalEmbeddedStore` (one worker, owning every shard). A method missing on one kind fails
//! to compile here; a method meaning something else on one kind fails the transcript
//! comparison. The borrowed batch reads (`batch_get_view`, `batch_get_session_view`) differ
//! in shape — a visitor under the shared stores' read locks, plain borrows on a local store —
//! and are checked against `batch_get` per kind below.

use fc_shard::{
    EmbeddedStore, KeyTtl, LocalEmbeddedStore, ManualClock, PackedSessionWrite, SetOptions,
    SharedEmbeddedStore, StoreError,
};

const START_MS: u64 = 1_700_000_000_000;

fn builder(clock: &ManualClock) -> fc_shard::EmbeddedStoreBuilder {
    EmbeddedStore::builder(4)
        .clock(clock.clone())
        .max_memory(64 << 20)
}

/// Runs every shared method on `$store` (a binding, `mut` where needed) and returns what each
/// answered, as text.
macro_rules! script {
    ($store:ident, $clock:ident) => {{
        let mut t: Vec<String> = Vec::new();
        let mut log = |what: &str, v: String| t.push(format!("{what}: {v}"));
        // Point writes.
        $store.set(b"a", b"1", None);
        $store.set_value_bytes(b"b", b"2", Some(10_000));
        log("try_set", format!("{:?}", $store.try_set(b"c", b"3", None)));
        let route = $store.route_key(b"d");
        log(
            "try_set_routed",
            format!("{:?}", $store.try_set_routed(&route, b"d", b"4", None)),
        );
        let route = $store.route_key(b"e");
        $store.set_routed(&route, b"e", b"5", None);
        let prepared = $store.prepare_point_key(b"f".to_vec());
        $store.set_prepared(&prepared, b"6", None);
        let route = $store.route_key(b"g");
        let outcome = $store
            .set_with_routed(&route, b"g", b"7", SetOptions::default())
            .map(|o| o.written);
        log("set_with_routed", format!("{outcome:?}"));
        // Point reads.
        log("get", format!("{:?}", $store.get(b"a")));
        log("try_get", format!("{:?}", $store.try_get(b"b")));
        let route = $store.route_key(b"c");
        log(
            "get_routed",
            format!("{:?}", $store.get_routed(&route, b"c")),
        );
        log(
            "get_prepared",
            format!("{:?}", $store.get_prepared(&prepared)),
        );
        log(
            "get_view",
            format!("{:?}", $store.get_view(b"d").map(|v| v.to_vec())),
        );
        let route = $store.route_key(b"e");
        log(
            "get_view_routed",
            format!(
                "{:?}",
                $store.get_view_routed(&route, b"e").map(|v| v.to_vec())
            ),
        );
        log(
            "get_view_prepared",
            format!(
                "{:?}",
                $store.get_view_prepared(&prepared).map(|v| v.to_vec())
            ),
        );
        let route = $store.route_key(b"g");
        log(
            "get_string_view_routed",
            format!(
                "{:?}",
                $store
                    .get_string_view_routed(&route, b"g")
                    .map(|v| v.map(|v| v.to_vec()))
            ),
        );
        $store.hset(b"h", &[(b"f", b"v")]).unwrap();
        log("try_get wrong type", format!("{:?}", $store.try_get(b"h")));
        let route = $store.route_key(b"h");
        log(
            "get_string_view_routed wrong type",
            format!(
                "{:?}",
                $store
                    .get_string_view_routed(&route, b"h")
                    .map(|v| v.map(|v| v.to_vec()))
            ),
        );
        log("exists", format!("{}", $store.exists(b"a")));
        let route = $store.route_key(b"zz");
        log(
            "exists_routed",
            format!("{}", $store.exists_routed(&route, b"zz")),
        );
        log(
            "exists_prepared",
            format!("{}", $store.exists_prepared(&prepared)),
        );
        // Expiry.
        log("pttl_millis", format!("{:?}", $store.pttl_millis(b"b")));
        log("ttl_seconds", format!("{:?}", $store.ttl_seconds(b"b")));
        log("expire", format!("{}", $store.expire(b"a", 5_000)));
        log(
            "expire_at_ms",
            format!("{}", $store.expire_at_ms(b"c", START_MS + 1_000)),
        );
        log("persist", format!("{}", $store.persist(b"a")));
        log(
            "ttl after persist",
            format!("{:?}", $store.pttl_millis(b"a")),
        );
        $clock.advance_ms(1_001);
        log("expired", format!("{:?}", $store.get(b"c")));
        // Deletes.
        log("delete", format!("{}", $store.delete(b"a")));
        log("try_delete", format!("{:?}", $store.try_delete(b"a")));
        let route = $store.route_key(b"d");
        log(
            "delete_routed",
            format!("{}", $store.delete_routed(&route, b"d")),
        );
        log(
            "delete_prepared",
            format!("{}", $store.delete_prepared(&prepared)),
        );
        // Batches.
        $store.batch_set([(b"x1", b"1"), (b"x2", b"2")], None);
        log(
            "try_batch_set",
            format!("{:?}", $store.try_batch_set([(b"x3", b"3")], Some(60_000))),
        );
        log(
            "batch_get",
            format!("{:?}", $store.batch_get([&b"x1"[..], b"nope", b"x3"])),
        );
        let packed = $store.batch_get_packed(&[&b"x2"[..], b"nope"]);
        log(
            "batch_get_packed",
            format!("{:?}", packed.iter().collect::<Vec<_>>()),
        );
        log(
            "batch_delete",
            format!("{}", $store.batch_delete(&[&b"x1"[..], b"nope"])),
        );
        // Sessions.
        $store.batch_set_session_owned_no_ttl(b"s:1", vec![(b"s:1:a".to_vec(), b"A".to_vec())]);
        let mut write = PackedSessionWrite::with_capacity(b"s:1".to_vec(), 1, 8);
        write.push_record(b"s:1:b", b"B");
        $store.batch_set_session_packed_no_ttl(write);
        log(
            "batch_get_session",
            format!(
                "{:?}",
                $store.batch_get_session(b"s:1", &[&b"s:1:a"[..], b"s:1:b"])
            ),
        );
        let packed = $store.batch_get_session_packed(b"s:1", &[&b"s:1:b"[..], b"s:1:z"]);
        log(
            "batch_get_session_packed",
            format!("{:?}", packed.iter().collect::<Vec<_>>()),
        );
        let _ = $store.route_session(b"s:1");
        // The whole store.
        log("len", format!("{}", $store.len()));
        log("is_empty", format!("{}", $store.is_empty()));
        log("stored_bytes > 0", format!("{}", $store.stored_bytes() > 0));
        let mut keys = $store.key_snapshot();
        keys.sort();
        log("key_snapshot", format!("{keys:?}"));
        log("shard_count", format!("{}", $store.shard_count()));
        let shard = $store.shard_for_key(b"x2");
        log(
            "shard_for_key < count",
            format!("{}", shard < $store.shard_count()),
        );
        log(
            "stats hits",
            format!("{}", $store.stats_snapshot().shards.len()),
        );
        log(
            "set_max_memory",
            format!("{:?}", $store.set_max_memory(Some(32 << 20))),
        );
        log(
            "maintenance",
            format!("{:?}", $store.process_maintenance().expired),
        );
        log(
            "maintenance budget",
            format!("{:?}", $store.process_maintenance_with_budget(8).expired),
        );
        log(
            "listener panics",
            format!("{}", $store.removal_listener_panics()),
        );
        log("clock", format!("{}", $store.clock().now_ms()));
        $store.clear_shard(shard);
        log("cleared shard", format!("{:?}", $store.get(b"x2")));
        $store.clear();
        log("cleared", format!("{}", $store.len()));
        t
    }};
}

#[test]
fn every_store_kind_answers_the_same_script_the_same() {
    let clock = ManualClock::new(START_MS);
    let embedded = builder(&clock).build();
    let embedded_t = script!(embedded, clock);

    let clock = ManualClock::new(START_MS);
    let shared = SharedEmbeddedStore::from(builder(&clock).build());
    let shared_t = script!(shared, clock);

    let clock = ManualClock::new(START_MS);
    let mut local: LocalEmbeddedStore = builder(&clock).build().into_local_stores(1).remove(0);
    let local_t = script!(local, clock);
    // Exclusive configuration (not on a shared handle): the clock can be replaced.
    let mut embedded = embedded;
    embedded.set_clock(ManualClock::new(1));
    local.set_clock(ManualClock::new(1));
    assert_eq!(embedded.clock().now_ms(), local.clock().now_ms());

    assert_eq!(embedded_t, shared_t);
    assert_eq!(embedded_t, local_t);
    // The script checks something: a few answers, spelled out.
    assert!(embedded_t.contains(&"get: Some([49])".to_string()));
    assert!(embedded_t.contains(&"try_get wrong type: Err(WrongType)".to_string()));
    assert!(embedded_t.contains(&"expired: None".to_string()));
    assert!(embedded_t.contains(&format!("ttl after persist: {:?}", KeyTtl::Persistent)));
    assert!(embedded_t.contains(&"cleared: 0".to_string()));
}

#[test]
fn borrowed_batch_reads_match_the_copies_on_every_kind() {
    let keys: [&[u8]; 3] = [b"k1", b"missing", b"k2"];
    let clock = ManualClock::new(START_MS);
    let embedded = builder(&clock).build();
    embedded.batch_set([(b"k1", b"1"), (b"k2", b"2")], None);
    let mut seen = vec![None; keys.len()];
    embedded.batch_get_view(&keys, |i, v| seen[i] = v.map(<[u8]>::to_vec));
    assert_eq!(seen, embedded.batch_get(keys));
    embedded.batch_set_session_owned_no_ttl(b"s", vec![(b"s:a".to_vec(), b"A".to_vec())]);
    let mut seen = vec![None; 2];
    embedded.batch_get_session_view(b"s", &[&b"s:a"[..], b"s:b"], |i, v| {
        seen[i] = v.map(<[u8]>::to_vec);
    });
    assert_eq!(seen, vec![Some(b"A".to_vec()), None]);

    let mut local = builder(&clock).build().into_local_stores(1).remove(0);
    local.batch_set([(b"k1", b"1"), (b"k2", b"2")], None);
    let views: Vec<Option<Vec<u8>>> = local
        .batch_get_view(&keys)
        .into_iter()
        .map(|v| v.map(<[u8]>::to_vec))
        .collect();
    assert_eq!(views, local.batch_get(keys));
    let tried: Vec<Option<Vec<u8>>> = local
        .try_batch_get_view(&keys)
        .unwrap()
        .into_iter()
        .map(|v| v.map(<[u8]>::to_vec))
        .collect();
    assert_eq!(tried, views);
}

#[test]
fn a_local_store_reports_keys_it_does_not_own_through_every_try_method() {
    let mut stores = EmbeddedStore::new(4).into_local_stores(2);
    let (worker0, worker1) = {
        let mut it = stores.drain(..);
        (it.next().unwrap(), it.next().unwrap())
    };
    let mut store = worker0;
    let foreign = (0..1000)
        .map(|i| format!("key{i}").into_bytes())
        .find(|k| !store.owns(k))
        .unwrap();
    let not_owner = |r: Result<(), StoreError>| matches!(r, Err(StoreError::NotOwner { .. }));
    assert!(not_owner(store.try_set(&foreign, b"v", None)));
    assert!(not_owner(store.try_get(&foreign).map(|_| ())));
    assert!(not_owner(store.try_delete(&foreign).map(|_| ())));
    assert!(not_owner(store.try_batch_set([(&foreign, b"v")], None)));
    assert!(not_owner(store.try_batch_get_view(&[&foreign]).map(|_| ())));
    // Clearing a shard another worker owns changes nothing here.
    let shard = store.shard_for_key(&foreign);
    store.clear_shard(shard);
    drop(worker1);
}
