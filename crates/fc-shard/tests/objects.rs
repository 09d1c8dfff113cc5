//! Redis objects and string commands: model-based proptests against `BTreeMap`s, Redis's edge
//! cases with its exact error texts, scan guarantees, rename, digests, accounting, and a
//! replay of the mutation stream that must rebuild the same store.
//!
//! Randomized cases are proptests (raise with `PROPTEST_CASES=10000`; failures are saved under
//! `tests/objects.proptest-regressions`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use fc_shard::{
    EmbeddedStore, EvictionPolicy, GetExExpiry, KeyTtl, KeyType, LocalEmbeddedStore, ManualClock,
    Mutation, RemovalCause, ScanOptions, SetCondition, SetExpiry, SetOptions, StoreError,
};
use proptest::prelude::*;

mod common;
use common::replay;

const START_MS: u64 = 1_700_000_000_000;

fn clocked(shards: usize) -> (EmbeddedStore, ManualClock) {
    let clock = ManualClock::new(START_MS);
    (
        EmbeddedStore::builder(shards).clock(clock.clone()).build(),
        clock,
    )
}

// ----- strings --------------------------------------------------------------------------------

#[test]
fn counters_follow_redis() {
    let (store, clock) = clocked(4);
    assert_eq!(store.incr(b"n"), Ok(1));
    assert_eq!(store.incr_by(b"n", 41), Ok(42));
    assert_eq!(store.decr(b"n"), Ok(41));
    assert_eq!(store.decr_by(b"n", 40), Ok(1));
    assert_eq!(store.get(b"n"), Some(b"1".to_vec()));
    store.set(b"max", i64::MAX.to_string(), None);
    assert_eq!(store.incr(b"max"), Err(StoreError::Overflow));
    assert_eq!(store.get(b"max"), Some(i64::MAX.to_string().into_bytes()));
    assert_eq!(store.decr_by(b"n", i64::MIN), Err(StoreError::Overflow));
    for bad in ["1.5", " 1", "01", "abc", "", "99999999999999999999"] {
        store.set(b"bad", bad, None);
        assert_eq!(store.incr(b"bad"), Err(StoreError::NotAnInteger), "{bad:?}");
    }
    // The key keeps its expiry.
    store.set(b"ttl", b"10", Some(5_000));
    assert_eq!(store.incr(b"ttl"), Ok(11));
    assert_eq!(store.pttl_millis(b"ttl"), KeyTtl::ExpiresIn(5_000));
    clock.advance_ms(5_001);
    assert_eq!(store.incr(b"ttl"), Ok(1), "an expired counter starts again");
    // Error texts are Redis's reply lines.
    assert_eq!(
        StoreError::Overflow.to_string(),
        "ERR increment or decrement would overflow"
    );
    assert_eq!(
        StoreError::WrongType.to_string(),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn incrbyfloat_follows_redis_documentation() {
    let (store, _) = clocked(1);
    store.set(b"mykey", b"10.50", None);
    assert_eq!(store.incr_by_float(b"mykey", b"0.1"), Ok(b"10.6".to_vec()));
    assert_eq!(store.incr_by_float(b"mykey", b"-5"), Ok(b"5.6".to_vec()));
    store.set(b"mykey", b"5.0e3", None);
    assert_eq!(
        store.incr_by_float(b"mykey", b"2.0e2"),
        Ok(b"5200".to_vec())
    );
    assert_eq!(store.get(b"mykey"), Some(b"5200".to_vec()));
    assert_eq!(store.incr_by_float(b"new", b"1.5"), Ok(b"1.5".to_vec()));
    assert_eq!(
        store.incr_by_float(b"new", b"inf"),
        Err(StoreError::NanOrInfinity)
    );
    store.set(b"word", b"abc", None);
    assert_eq!(
        store.incr_by_float(b"word", b"1.0"),
        Err(StoreError::NotAFloat)
    );
    assert_eq!(
        StoreError::NotAFloat.to_string(),
        "ERR value is not a valid float"
    );
}

#[test]
fn append_setrange_getrange() {
    let (store, _) = clocked(2);
    assert_eq!(store.append(b"s", b"Hello"), Ok(5));
    assert_eq!(store.append(b"s", b" World"), Ok(11));
    assert_eq!(store.get(b"s"), Some(b"Hello World".to_vec()));
    assert_eq!(store.strlen(b"s"), Ok(11));
    assert_eq!(store.strlen(b"none"), Ok(0));
    // SETRANGE: Redis's documentation examples.
    store.set(b"key1", b"Hello World", None);
    assert_eq!(store.set_range(b"key1", 6, b"Redis"), Ok(11));
    assert_eq!(store.get(b"key1"), Some(b"Hello Redis".to_vec()));
    assert_eq!(store.set_range(b"key2", 6, b"Redis"), Ok(11));
    assert_eq!(store.get(b"key2"), Some(b"\0\0\0\0\0\0Redis".to_vec()));
    assert_eq!(store.set_range(b"key3", 3, b""), Ok(0));
    assert!(!store.exists(b"key3"), "an empty SETRANGE creates nothing");
    assert_eq!(store.set_range(b"key1", 100, b""), Ok(11));
    assert_eq!(
        store.set_range(b"key1", -1, b"x"),
        Err(StoreError::OffsetOutOfRange)
    );
    assert_eq!(
        store.set_range(b"key1", 512 * 1024 * 1024, b"x"),
        Err(StoreError::StringTooLong)
    );
    assert_eq!(
        StoreError::StringTooLong.to_string(),
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
    );
    // GETRANGE: Redis's documentation examples.
    store.set(b"mykey", b"This is a string", None);
    assert_eq!(store.get_range(b"mykey", 0, 3), Ok(b"This".to_vec()));
    assert_eq!(store.get_range(b"mykey", -3, -1), Ok(b"ing".to_vec()));
    assert_eq!(
        store.get_range(b"mykey", 0, -1),
        Ok(b"This is a string".to_vec())
    );
    assert_eq!(store.get_range(b"mykey", 10, 100), Ok(b"string".to_vec()));
    assert_eq!(store.get_range(b"missing", 0, -1), Ok(Vec::new()));
}

#[test]
fn set_options_and_get_variants() {
    let (store, clock) = clocked(4);
    let opts = |condition, expiry, get| SetOptions {
        condition,
        expiry,
        get,
    };
    let nx = opts(SetCondition::IfAbsent, SetExpiry::Clear, false);
    let xx = opts(SetCondition::IfPresent, SetExpiry::Clear, false);
    assert!(!store.set_with(b"k", b"v", xx).unwrap().written);
    assert!(!store.exists(b"k"));
    assert!(store.set_with(b"k", b"v1", nx).unwrap().written);
    assert!(!store.set_with(b"k", b"v2", nx).unwrap().written);
    assert_eq!(store.get(b"k"), Some(b"v1".to_vec()));
    // EX then KEEPTTL keeps it; a plain SET clears it.
    let ex = opts(SetCondition::Always, SetExpiry::InMs(10_000), false);
    let keep = opts(SetCondition::Always, SetExpiry::Keep, true);
    store.set_with(b"k", b"v3", ex).unwrap();
    let out = store.set_with(b"k", b"v4", keep).unwrap();
    assert_eq!(out.previous, Some(b"v3".to_vec()));
    assert_eq!(store.pttl_millis(b"k"), KeyTtl::ExpiresIn(10_000));
    let at = opts(SetCondition::Always, SetExpiry::AtMs(START_MS + 500), false);
    store.set_with(b"k", b"v5", at).unwrap();
    assert_eq!(store.pttl_millis(b"k"), KeyTtl::ExpiresIn(500));
    store.set(b"k", b"v6", None);
    assert_eq!(store.pttl_millis(b"k"), KeyTtl::Persistent);
    // GET on another type: WRONGTYPE, nothing written. Without GET, SET replaces any type.
    store.hset(b"h", &[(b"f", b"v")]).unwrap();
    let get = opts(SetCondition::Always, SetExpiry::Clear, true);
    assert_eq!(store.set_with(b"h", b"x", get), Err(StoreError::WrongType));
    assert_eq!(store.type_of(b"h"), Ok(Some(KeyType::Hash)));
    assert_eq!(store.get_set(b"h", b"x"), Err(StoreError::WrongType));
    store.set(b"h", b"now a string", None);
    assert_eq!(store.type_of(b"h"), Ok(Some(KeyType::String)));
    assert_eq!(store.hget(b"h", b"f"), Err(StoreError::WrongType));
    assert_eq!(
        store.get_set(b"h", b"again"),
        Ok(Some(b"now a string".to_vec()))
    );
    // GETDEL and GETEX.
    assert_eq!(store.get_del(b"h"), Ok(Some(b"again".to_vec())));
    assert!(!store.exists(b"h"));
    assert_eq!(store.get_del(b"h"), Ok(None));
    store.set(b"g", b"v", None);
    assert_eq!(
        store.get_ex(b"g", GetExExpiry::InMs(2_000)),
        Ok(Some(b"v".to_vec()))
    );
    assert_eq!(store.pttl_millis(b"g"), KeyTtl::ExpiresIn(2_000));
    assert_eq!(
        store.get_ex(b"g", GetExExpiry::Persist),
        Ok(Some(b"v".to_vec()))
    );
    assert_eq!(store.pttl_millis(b"g"), KeyTtl::Persistent);
    assert_eq!(
        store.get_ex(b"g", GetExExpiry::AtMs(clock.now_ms())),
        Ok(Some(b"v".to_vec()))
    );
    assert!(
        !store.exists(b"g"),
        "GETEX with a past time deletes the key"
    );
    // Plain reads of an object see nothing; try_get says why.
    store.hset(b"obj", &[(b"f", b"v")]).unwrap();
    assert_eq!(store.get(b"obj"), None);
    assert_eq!(store.batch_get([b"obj"].as_slice()), vec![None]);
    assert_eq!(store.try_get(b"obj"), Err(StoreError::WrongType));
    assert!(store.exists(b"obj"));
}

#[test]
fn msetnx_is_all_or_nothing() {
    let (store, _) = clocked(8);
    let pairs: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"b", b"2"), (b"c", b"3")];
    assert_eq!(store.msetnx(&pairs), Ok(true));
    let more: Vec<(&[u8], &[u8])> = vec![(b"d", b"4"), (b"a", b"x")];
    assert_eq!(store.msetnx(&more), Ok(false));
    assert!(!store.exists(b"d"));
    assert_eq!(store.get(b"a"), Some(b"1".to_vec()));
    store.hset(b"h", &[(b"f", b"v")]).unwrap();
    let over_hash: Vec<(&[u8], &[u8])> = vec![(b"e", b"5"), (b"h", b"x")];
    assert_eq!(
        store.msetnx(&over_hash),
        Ok(false),
        "a key of any type blocks"
    );
}

// ----- hashes ---------------------------------------------------------------------------------

#[test]
fn hash_commands_follow_redis() {
    let (store, clock) = clocked(4);
    assert_eq!(store.hset(b"h", &[(b"f1", b"a"), (b"f2", b"b")]), Ok(2));
    assert_eq!(store.hset(b"h", &[(b"f1", b"A"), (b"f3", b"c")]), Ok(1));
    assert_eq!(store.hsetnx(b"h", b"f1", b"nope"), Ok(false));
    assert_eq!(store.hsetnx(b"h", b"f4", b"d"), Ok(true));
    assert_eq!(store.hlen(b"h"), Ok(4));
    assert_eq!(store.hget(b"h", b"f1"), Ok(Some(b"A".to_vec())));
    assert_eq!(store.hget(b"h", b"zz"), Ok(None));
    assert_eq!(store.hget(b"missing", b"f"), Ok(None));
    assert_eq!(
        store.hmget(b"h", &[b"f2", b"zz", b"f3"]),
        Ok(vec![Some(b"b".to_vec()), None, Some(b"c".to_vec())])
    );
    assert_eq!(store.hmget(b"missing", &[b"a", b"b"]), Ok(vec![None, None]));
    assert_eq!(store.hexists(b"h", b"f4"), Ok(true));
    assert_eq!(store.hstrlen(b"h", b"f1"), Ok(1));
    assert_eq!(store.hstrlen(b"h", b"zz"), Ok(0));
    let all: BTreeMap<_, _> = store.hgetall(b"h").unwrap().into_iter().collect();
    assert_eq!(all.len(), 4);
    assert_eq!(store.hkeys(b"h").unwrap().len(), 4);
    assert_eq!(store.hvals(b"h").unwrap().len(), 4);
    // Counters in fields.
    assert_eq!(store.hincrby(b"h", b"n", 5), Ok(5));
    assert_eq!(store.hincrby(b"h", b"n", -7), Ok(-2));
    assert_eq!(
        store.hincrby(b"h", b"f1", 1),
        Err(StoreError::HashValueNotAnInteger)
    );
    assert_eq!(
        StoreError::HashValueNotAnInteger.to_string(),
        "ERR hash value is not an integer"
    );
    store
        .hset(b"h", &[(b"big", i64::MAX.to_string().as_bytes())])
        .unwrap();
    assert_eq!(store.hincrby(b"h", b"big", 1), Err(StoreError::Overflow));
    // HINCRBYFLOAT: Redis's documentation example.
    store.hset(b"mykey", &[(b"field", b"10.50")]).unwrap();
    assert_eq!(
        store.hincrbyfloat(b"mykey", b"field", b"0.1"),
        Ok(b"10.6".to_vec())
    );
    assert_eq!(
        store.hincrbyfloat(b"mykey", b"field", b"-5.0"),
        Ok(b"5.6".to_vec())
    );
    store.hset(b"mykey", &[(b"field", b"5.0e3")]).unwrap();
    assert_eq!(
        store.hincrbyfloat(b"mykey", b"field", b"2.0e2"),
        Ok(b"5200".to_vec())
    );
    store.hset(b"mykey", &[(b"word", b"x")]).unwrap();
    assert_eq!(
        store.hincrbyfloat(b"mykey", b"word", b"1"),
        Err(StoreError::HashValueNotAFloat)
    );
    // Writing keeps the TTL; the last HDEL deletes the key.
    store.expire(b"h", 10_000);
    store.hset(b"h", &[(b"f9", b"z")]).unwrap();
    assert_eq!(store.pttl_millis(b"h"), KeyTtl::ExpiresIn(10_000));
    let fields: Vec<Vec<u8>> = store.hkeys(b"h").unwrap();
    let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
    assert_eq!(store.hdel(b"h", &[b"nope"]), Ok(0));
    assert_eq!(store.hdel(b"h", &refs), Ok(refs.len()));
    assert!(!store.exists(b"h"));
    assert_eq!(store.type_of(b"h"), Ok(None));
    // Expiry applies to hashes.
    store.hset(b"t", &[(b"f", b"v")]).unwrap();
    store.expire(b"t", 100);
    clock.advance_ms(101);
    assert_eq!(store.hget(b"t", b"f"), Ok(None));
    assert_eq!(store.hlen(b"t"), Ok(0));
    // Type errors in both directions, nothing changed.
    store.set(b"s", b"x", None);
    assert_eq!(
        store.hset(b"s", &[(b"f", b"v")]),
        Err(StoreError::WrongType)
    );
    assert_eq!(store.hdel(b"s", &[b"f"]), Err(StoreError::WrongType));
    assert_eq!(store.get(b"s"), Some(b"x".to_vec()));
    store.hset(b"hh", &[(b"f", b"v")]).unwrap();
    assert_eq!(store.incr(b"hh"), Err(StoreError::WrongType));
    assert_eq!(store.append(b"hh", b"x"), Err(StoreError::WrongType));
    assert_eq!(store.strlen(b"hh"), Err(StoreError::WrongType));
}

#[test]
fn hrandfield_counts() {
    let (store, _) = clocked(1);
    assert_eq!(store.hrandfield(b"none", None, false), Ok(vec![]));
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..20)
        .map(|i| (format!("f{i}").into_bytes(), format!("v{i}").into_bytes()))
        .collect();
    let refs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
    store.hset(b"h", &refs).unwrap();
    let one = store.hrandfield(b"h", None, true).unwrap();
    assert_eq!(one.len(), 1);
    let (f, v) = &one[0];
    assert_eq!(store.hget(b"h", f).unwrap().as_ref(), v.as_ref());
    let distinct = store.hrandfield(b"h", Some(15), false).unwrap();
    let set: BTreeSet<_> = distinct.iter().map(|(f, _)| f.clone()).collect();
    assert_eq!((distinct.len(), set.len()), (15, 15));
    assert_eq!(store.hrandfield(b"h", Some(100), false).unwrap().len(), 20);
    assert_eq!(store.hrandfield(b"h", Some(-50), false).unwrap().len(), 50);
    assert_eq!(store.hrandfield(b"h", Some(0), false).unwrap().len(), 0);
}

#[test]
fn hscan_returns_every_stable_field_despite_writes() {
    let (store, _) = clocked(1);
    let stable: BTreeSet<Vec<u8>> = (0..500).map(|i| format!("s{i}").into_bytes()).collect();
    for f in &stable {
        store.hset(b"h", &[(f, b"v")]).unwrap();
    }
    let (mut cursor, mut seen, mut round) = (0u64, BTreeSet::new(), 0);
    loop {
        let (next, batch) = store.hscan(b"h", cursor, None, 25).unwrap();
        seen.extend(batch.into_iter().map(|(f, _)| f));
        // Churn between calls: new fields, and removals of other fields.
        round += 1;
        for j in 0..10 {
            let f = format!("t{round}-{j}");
            store.hset(b"h", &[(f.as_bytes(), b"x")]).unwrap();
        }
        let old = format!("t{}-3", round.max(2) - 1);
        store.hdel(b"h", &[old.as_bytes()]).unwrap();
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert!(stable.is_subset(&seen));
    let (_, matched) = store.hscan(b"h", 0, Some(b"s1?"), 10_000).unwrap();
    assert_eq!(matched.len(), 10);
}

// ----- keys: scan, rename, digest --------------------------------------------------------------

fn scan_all(
    store: &EmbeddedStore,
    options: ScanOptions<'_>,
    mut between: impl FnMut(),
) -> Vec<Vec<u8>> {
    let (mut cursor, mut out) = (0, Vec::new());
    loop {
        let (next, keys) = store.scan(cursor, options);
        out.extend(keys);
        between();
        if next == 0 {
            return out;
        }
        cursor = next;
    }
}

#[test]
fn scan_returns_each_stable_key_once_while_the_index_grows() {
    let (store, _) = clocked(4);
    for i in 0..2_000 {
        store.set(format!("stable:{i}"), b"v", None);
    }
    let mut added = 0;
    let options = ScanOptions {
        count: 50,
        ..ScanOptions::default()
    };
    let found = scan_all(&store, options, || {
        // More new keys per call than the call returns: the store about doubles during the
        // scan (every shard's index grows at least once: 500 keys a shard sit in 94 buckets,
        // which hold up to 564), and some of the new keys go again. How many calls the scan takes
        // depends on the index's random spot order, so the growth varies from run to run.
        for _ in 0..60 {
            store.set(format!("new:{added}"), b"v", None);
            added += 1;
        }
        store.delete(format!("new:{}", added / 2).as_bytes());
    });
    let stable: Vec<_> = found.iter().filter(|k| k.starts_with(b"stable:")).collect();
    let unique: BTreeSet<_> = stable.iter().collect();
    assert_eq!(unique.len(), 2_000, "every stable key");
    assert_eq!(stable.len(), 2_000, "exactly once");
    assert!(store.len() > 3_600, "the index grew: {}", store.len());
}

/// `SCAN 0 COUNT 9223372036854775807` (Redis accepts any positive `long`): one call returns
/// every key and ends the scan, from the first cursor or a later one.
#[test]
fn scan_with_the_largest_count_returns_everything_in_one_call() {
    let (store, _) = clocked(4);
    for i in 0..100 {
        store.set(format!("k:{i}"), b"v", None);
    }
    for count in [i64::MAX as usize, usize::MAX] {
        let options = ScanOptions {
            count,
            ..ScanOptions::default()
        };
        let (next, keys) = store.scan(0, options);
        assert_eq!(next, 0);
        assert_eq!(keys.iter().collect::<BTreeSet<_>>().len(), 100);
        // From a cursor inside the scan: the rest, once, and the end.
        let (later, first) = store.scan(
            0,
            ScanOptions {
                count: 1,
                ..options
            },
        );
        assert_ne!(later, 0);
        let (next, rest) = store.scan(later, options);
        assert_eq!(next, 0);
        let all: BTreeSet<_> = first.iter().chain(&rest).collect();
        assert_eq!(all.len(), 100);
        assert_eq!(first.len() + rest.len(), 100);
    }
}

#[test]
fn scan_filters_by_pattern_and_type() {
    let (store, clock) = clocked(2);
    for i in 0..50 {
        store.set(format!("str:{i}"), b"v", None);
        store
            .hset(format!("hash:{i}").as_bytes(), &[(b"f", b"v")])
            .unwrap();
    }
    store.set(b"str:dying", b"v", Some(10));
    clock.advance_ms(11);
    let strings = ScanOptions {
        key_type: Some(KeyType::String),
        count: 7,
        ..ScanOptions::default()
    };
    let found = scan_all(&store, strings, || {});
    assert_eq!(found.len(), 50, "live strings only");
    assert!(found.iter().all(|k| k.starts_with(b"str:")));
    let hashes = ScanOptions {
        pattern: Some(b"hash:1*"),
        key_type: Some(KeyType::Hash),
        count: 1000,
        db: 0,
    };
    assert_eq!(scan_all(&store, hashes, || {}).len(), 11);
    // Owner-local stores scan their own shards; together they cover the store.
    let mut total = 0;
    for mut local in store.into_local_stores(2) {
        let (mut cursor, mut n) = (0, 0);
        loop {
            let (next, keys) = local.scan(cursor, ScanOptions::default());
            n += keys.len();
            if next == 0 {
                break;
            }
            cursor = next;
        }
        total += n;
    }
    assert_eq!(total, 100);
}

#[test]
fn rename_moves_value_type_and_ttl() {
    let (store, _) = clocked(8);
    store.hset(b"{u}:a", &[(b"f", b"v")]).unwrap();
    store.expire(b"{u}:a", 9_000);
    store.set(b"{u}:b", b"old", None);
    assert_eq!(store.rename(b"{u}:a", b"{u}:b", true), Ok(false));
    assert_eq!(store.rename(b"{u}:a", b"{u}:b", false), Ok(true));
    assert!(!store.exists(b"{u}:a"));
    assert_eq!(store.hget(b"{u}:b", b"f"), Ok(Some(b"v".to_vec())));
    assert_eq!(store.pttl_millis(b"{u}:b"), KeyTtl::ExpiresIn(9_000));
    assert_eq!(
        store.rename(b"{u}:a", b"{u}:c", false),
        Err(StoreError::NoSuchKey)
    );
    assert_eq!(StoreError::NoSuchKey.to_string(), "ERR no such key");
    assert_eq!(store.rename(b"{u}:b", b"{u}:b", false), Ok(true));
    assert_eq!(store.rename(b"{u}:b", b"{u}:b", true), Ok(false));
    // Keys of different shards are refused.
    let far = (0..1000)
        .map(|i| format!("other{i}"))
        .find(|k| store.shard_for_key(k.as_bytes()) != store.shard_for_key(b"{u}:b"))
        .unwrap();
    assert!(matches!(
        store.rename(b"{u}:b", far.as_bytes(), false),
        Err(StoreError::CrossShard { .. })
    ));
}

#[test]
fn digests_agree_on_contents_not_history() {
    let fill = |store: &EmbeddedStore, order: &[usize]| {
        for &i in order {
            store.set(format!("k{i}"), format!("v{i}"), None);
            store
                .hset(
                    format!("h{}", i % 7).as_bytes(),
                    &[(format!("f{i}").as_bytes(), b"x")],
                )
                .unwrap();
        }
    };
    let (a, _) = clocked(4);
    let (b, _) = clocked(16);
    let order: Vec<usize> = (0..100).collect();
    let reversed: Vec<usize> = (0..100).rev().collect();
    fill(&a, &order);
    fill(&b, &reversed);
    assert_eq!(a.digest(), b.digest());
    b.expire(b"k5", 1_000);
    assert_ne!(a.digest(), b.digest(), "expiry counts");
    b.persist(b"k5");
    assert_eq!(a.digest(), b.digest());
    b.hset(b"h1", &[(b"f1", b"y")]).unwrap();
    assert_ne!(a.digest(), b.digest(), "a field value counts");
}

// ----- memory ---------------------------------------------------------------------------------

#[test]
fn objects_are_charged_and_evicted() {
    let store = EmbeddedStore::builder(1)
        .max_memory(64 * 1024)
        .eviction_policy(EvictionPolicy::Lru)
        .build();
    store.hset(b"h", &[(b"f", b"v")]).unwrap();
    let small = store.stats_snapshot().total().used_memory;
    for i in 0..100 {
        store
            .hset(b"h", &[(format!("field{i}").as_bytes(), &[0u8; 100])])
            .unwrap();
    }
    let grown = store.stats_snapshot().total().used_memory;
    assert!(grown >= small + 100 * 100, "{small} -> {grown}");
    store.delete(b"h");
    assert_eq!(store.stats_snapshot().total().used_memory, 0);
    // Many hashes past the budget: evicted, never over it by more than one entry.
    for i in 0..2_000 {
        store
            .hset(format!("h{i}").as_bytes(), &[(b"f", &[1u8; 64])])
            .unwrap();
    }
    let stats = store.stats_snapshot().total();
    assert!(stats.evicted > 0 && stats.used_memory <= stats.max_memory);
    // NoEviction refuses growth once full, and still allows removals.
    let strict = EmbeddedStore::builder(1).max_memory(16 * 1024).build();
    let mut refused = None;
    for i in 0..1_000 {
        if let Err(err) = strict.hset(b"h", &[(format!("f{i}").as_bytes(), &[0u8; 64])]) {
            refused = Some((i, err));
            break;
        }
    }
    let (i, err) = refused.expect("the budget ends the growth");
    assert!(matches!(err, StoreError::OutOfMemory { .. }));
    assert_eq!(strict.hlen(b"h"), Ok(i));
    assert_eq!(strict.hdel(b"h", &[b"f0"]), Ok(1));
}

#[test]
fn the_listener_hears_of_emptied_and_evicted_objects() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&log);
    let store = EmbeddedStore::builder(1)
        .eviction_listener(move |key: &[u8], value: &[u8], cause: RemovalCause| {
            sink.lock()
                .unwrap()
                .push((key.to_vec(), value.to_vec(), cause));
        })
        .build();
    store.hset(b"h", &[(b"f", b"v")]).unwrap();
    store.hdel(b"h", &[b"f"]).unwrap();
    store.hset(b"h2", &[(b"f", b"v")]).unwrap();
    store.set(b"h2", b"string now", None);
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            (b"h".to_vec(), Vec::new(), RemovalCause::Deleted),
            (b"h2".to_vec(), Vec::new(), RemovalCause::Replaced),
        ]
    );
}

// ----- model-based ----------------------------------------------------------------------------

/// The reference model: what Redis would hold.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Value {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8, u8),
    Incr(u8, i8),
    Append(u8, u8),
    HSet(u8, Vec<(u8, u8)>),
    HSetNx(u8, u8, u8),
    HDel(u8, Vec<u8>),
    HIncrBy(u8, u8, i8),
    HGet(u8, u8),
    HGetAll(u8),
    HLen(u8),
    Del(u8),
    Rename(u8, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..6;
    let field = 0u8..8;
    prop_oneof![
        1 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Op::Set(k, v % 4)),
        1 => (key.clone(), any::<i8>()).prop_map(|(k, d)| Op::Incr(k, d)),
        1 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Op::Append(k, v)),
        4 => (key.clone(), proptest::collection::vec((field.clone(), any::<u8>()), 1..4))
            .prop_map(|(k, p)| Op::HSet(k, p)),
        1 => (key.clone(), field.clone(), any::<u8>()).prop_map(|(k, f, v)| Op::HSetNx(k, f, v)),
        2 => (key.clone(), proptest::collection::vec(field.clone(), 1..4)).prop_map(|(k, f)| Op::HDel(k, f)),
        1 => (key.clone(), field.clone(), any::<i8>()).prop_map(|(k, f, d)| Op::HIncrBy(k, f, d)),
        1 => (key.clone(), field.clone()).prop_map(|(k, f)| Op::HGet(k, f)),
        1 => key.clone().prop_map(Op::HGetAll),
        1 => key.clone().prop_map(Op::HLen),
        1 => key.clone().prop_map(Op::Del),
        1 => (key.clone(), key).prop_map(|(a, b)| Op::Rename(a, b)),
    ]
}

/// Keys share a hash tag so RENAME stays within a shard.
fn k(i: u8) -> Vec<u8> {
    format!("{{t}}:{i}").into_bytes()
}

fn f(i: u8) -> Vec<u8> {
    format!("field{i}").into_bytes()
}

/// Either store kind behind one interface.
enum Any {
    Shared(EmbeddedStore),
    Local(LocalEmbeddedStore),
}

macro_rules! both {
    ($store:expr, $s:ident => $e:expr) => {
        match $store {
            Any::Shared($s) => $e,
            Any::Local($s) => $e,
        }
    };
}

/// Redis's strict integers: exactly the canonical decimal form of an `i64`.
fn strict_int(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let n: i64 = text.parse().ok()?;
    (n.to_string() == text).then_some(n)
}

/// Applies `op` to the model, giving the expected result (rendered as text).
fn model_apply(model: &mut BTreeMap<Vec<u8>, Value>, op: &Op) -> String {
    let wrong = || format!("{:?}", Err::<(), _>(StoreError::WrongType));
    match op {
        Op::Set(key, v) => {
            model.insert(k(*key), Value::Str(vec![b'0' + v]));
            "ok".into()
        }
        Op::Incr(key, d) => match model.get(&k(*key)) {
            Some(Value::Hash(_)) => wrong(),
            current => {
                let n = match current {
                    Some(Value::Str(s)) => strict_int(s),
                    _ => Some(0),
                };
                match n {
                    None => format!("{:?}", Err::<i64, _>(StoreError::NotAnInteger)),
                    Some(n) => {
                        let new = n + i64::from(*d);
                        model.insert(k(*key), Value::Str(new.to_string().into_bytes()));
                        format!("{:?}", Ok::<i64, StoreError>(new))
                    }
                }
            }
        },
        Op::Append(key, v) => match model.entry(k(*key)).or_insert(Value::Str(Vec::new())) {
            Value::Hash(_) => wrong(),
            Value::Str(s) => {
                s.push(*v);
                format!("{:?}", Ok::<usize, StoreError>(s.len()))
            }
        },
        Op::HSet(key, pairs) => {
            let entry = model
                .entry(k(*key))
                .or_insert_with(|| Value::Hash(BTreeMap::new()));
            match entry {
                Value::Str(_) => wrong(),
                Value::Hash(h) => {
                    let mut added = 0;
                    for (field, v) in pairs {
                        added += usize::from(h.insert(f(*field), vec![*v]).is_none());
                    }
                    format!("{:?}", Ok::<usize, StoreError>(added))
                }
            }
        }
        Op::HSetNx(key, field, v) => {
            let entry = model
                .entry(k(*key))
                .or_insert_with(|| Value::Hash(BTreeMap::new()));
            match entry {
                Value::Str(_) => wrong(),
                Value::Hash(h) => {
                    let new = !h.contains_key(&f(*field));
                    if new {
                        h.insert(f(*field), vec![*v]);
                    }
                    format!("{:?}", Ok::<bool, StoreError>(new))
                }
            }
        }
        Op::HDel(key, fields) => match model.get_mut(&k(*key)) {
            Some(Value::Str(_)) => wrong(),
            None => format!("{:?}", Ok::<usize, StoreError>(0)),
            Some(Value::Hash(h)) => {
                let gone = fields
                    .iter()
                    .filter(|x| h.remove(&f(**x)).is_some())
                    .count();
                if h.is_empty() {
                    model.remove(&k(*key));
                }
                format!("{:?}", Ok::<usize, StoreError>(gone))
            }
        },
        Op::HIncrBy(key, field, d) => {
            let entry = model
                .entry(k(*key))
                .or_insert_with(|| Value::Hash(BTreeMap::new()));
            match entry {
                Value::Str(_) => wrong(),
                Value::Hash(h) => {
                    let current = h.get(&f(*field)).map(|v| strict_int(v));
                    let result = match current {
                        Some(None) => {
                            format!("{:?}", Err::<i64, _>(StoreError::HashValueNotAnInteger))
                        }
                        other => {
                            let new = other.flatten().unwrap_or(0) + i64::from(*d);
                            h.insert(f(*field), new.to_string().into_bytes());
                            format!("{:?}", Ok::<i64, StoreError>(new))
                        }
                    };
                    if h.is_empty() {
                        model.remove(&k(*key));
                    }
                    result
                }
            }
        }
        Op::HGet(key, field) => match model.get(&k(*key)) {
            Some(Value::Str(_)) => wrong(),
            Some(Value::Hash(h)) => {
                format!("{:?}", Ok::<_, StoreError>(h.get(&f(*field)).cloned()))
            }
            None => format!("{:?}", Ok::<Option<Vec<u8>>, StoreError>(None)),
        },
        Op::HGetAll(key) => match model.get(&k(*key)) {
            Some(Value::Str(_)) => wrong(),
            Some(Value::Hash(h)) => format!("{:?}", Ok::<_, StoreError>(h.clone())),
            None => format!(
                "{:?}",
                Ok::<_, StoreError>(BTreeMap::<Vec<u8>, Vec<u8>>::new())
            ),
        },
        Op::HLen(key) => match model.get(&k(*key)) {
            Some(Value::Str(_)) => wrong(),
            Some(Value::Hash(h)) => format!("{:?}", Ok::<usize, StoreError>(h.len())),
            None => format!("{:?}", Ok::<usize, StoreError>(0)),
        },
        Op::Del(key) => format!("{}", model.remove(&k(*key)).is_some()),
        Op::Rename(a, b) => match model.remove(&k(*a)) {
            None => format!("{:?}", Err::<bool, _>(StoreError::NoSuchKey)),
            Some(v) => {
                model.insert(k(*b), v);
                format!("{:?}", Ok::<bool, StoreError>(true))
            }
        },
    }
}

fn store_apply(store: &mut Any, op: &Op) -> String {
    let pairs = |p: &Vec<(u8, u8)>| -> Vec<(Vec<u8>, Vec<u8>)> {
        p.iter().map(|(x, v)| (f(*x), vec![*v])).collect()
    };
    match op {
        Op::Set(key, v) => {
            both!(store, s => s.set(k(*key), [b'0' + v], None));
            "ok".into()
        }
        Op::Incr(key, d) => format!(
            "{:?}",
            both!(store, s => s.incr_by(&k(*key), i64::from(*d)))
        ),
        Op::Append(key, v) => format!("{:?}", both!(store, s => s.append(&k(*key), &[*v]))),
        Op::HSet(key, p) => {
            let owned = pairs(p);
            let refs: Vec<(&[u8], &[u8])> = owned.iter().map(|(a, b)| (&a[..], &b[..])).collect();
            format!("{:?}", both!(store, s => s.hset(&k(*key), &refs)))
        }
        Op::HSetNx(key, field, v) => {
            format!(
                "{:?}",
                both!(store, s => s.hsetnx(&k(*key), &f(*field), &[*v]))
            )
        }
        Op::HDel(key, fields) => {
            let owned: Vec<Vec<u8>> = fields.iter().map(|x| f(*x)).collect();
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            format!("{:?}", both!(store, s => s.hdel(&k(*key), &refs)))
        }
        Op::HIncrBy(key, field, d) => format!(
            "{:?}",
            both!(store, s => s.hincrby(&k(*key), &f(*field), i64::from(*d)))
        ),
        Op::HGet(key, field) => format!("{:?}", both!(store, s => s.hget(&k(*key), &f(*field)))),
        Op::HGetAll(key) => format!(
            "{:?}",
            both!(store, s => s.hgetall(&k(*key)))
                .map(|all| all.into_iter().collect::<BTreeMap<_, _>>())
        ),
        Op::HLen(key) => format!("{:?}", both!(store, s => s.hlen(&k(*key)))),
        Op::Del(key) => format!("{}", both!(store, s => s.delete(&k(*key)))),
        Op::Rename(a, b) => format!("{:?}", both!(store, s => s.rename(&k(*a), &k(*b), false))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn stores_match_the_model_and_their_mutations_replay(
        ops in proptest::collection::vec(op(), 1..120),
        local in any::<bool>(),
    ) {
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let replica = Arc::new(EmbeddedStore::new(2));
        let target = Arc::clone(&replica);
        let built = EmbeddedStore::builder(4)
            .mutation_sink(Arc::new(move |_shard: usize, _seq: u64, m: &Mutation<'_>| {
                replay(&target, m);
            }))
            .build();
        let mut store = if local {
            Any::Local(built.into_local_stores(1).pop().unwrap())
        } else {
            Any::Shared(built)
        };
        let mut model = BTreeMap::new();
        for op in &ops {
            let want = model_apply(&mut model, op);
            let got = store_apply(&mut store, op);
            prop_assert_eq!(&got, &want, "{:?}", op);
            log.lock().unwrap().push(got);
        }
        // Every key of the model, with its type, and nothing else.
        for (key, value) in &model {
            let want = match value {
                Value::Str(_) => KeyType::String,
                Value::Hash(_) => KeyType::Hash,
            };
            prop_assert_eq!(both!(&mut store, s => s.type_of(key)), Ok(Some(want)));
        }
        let len = both!(&store, s => s.len());
        prop_assert_eq!(len, model.len());
        let digest = both!(&mut store, s => s.digest());
        prop_assert_eq!(replica.digest(), digest, "the replayed replica differs");
    }
}
