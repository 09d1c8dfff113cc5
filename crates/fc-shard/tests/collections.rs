//! Lists, sets and sorted sets: Redis's documented behaviour and edge cases, and one
//! model-based proptest that drives all three types (and strings) on shared keys against
//! `VecDeque`/`BTreeSet`/`BTreeMap` models, on both store kinds, replaying the mutation stream
//! into a replica whose digest must match.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use fc_shard::{
    EmbeddedStore, InsertPosition, KeyType, LexBound, ListEnd, LocalEmbeddedStore, LposOptions,
    Mutation, ScoreBound, SetAlgebra, StoreError, ZAddOptions, ZRange,
};
use proptest::prelude::*;

mod common;
use common::replay;

fn v(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn scored(items: &[(&str, f64)]) -> Vec<(Vec<u8>, f64)> {
    items
        .iter()
        .map(|(m, s)| (m.as_bytes().to_vec(), *s))
        .collect()
}

// ----- lists ----------------------------------------------------------------------------------

#[test]
fn list_commands_follow_redis() {
    let store = EmbeddedStore::new(4);
    assert_eq!(store.lpush(b"l", &[b"a", b"b", b"c"]), Ok(3));
    assert_eq!(store.lrange(b"l", 0, -1), Ok(v(&["c", "b", "a"])));
    assert_eq!(store.rpush(b"l", &[b"d"]), Ok(4));
    assert_eq!(store.push(b"nx", ListEnd::Left, &[b"x"], true), Ok(0));
    assert!(!store.exists(b"nx"), "LPUSHX creates nothing");
    assert_eq!(store.push(b"l", ListEnd::Right, &[b"e"], true), Ok(5));
    assert_eq!(store.llen(b"l"), Ok(5));
    assert_eq!(store.lindex(b"l", 0), Ok(Some(b"c".to_vec())));
    assert_eq!(store.lindex(b"l", -1), Ok(Some(b"e".to_vec())));
    assert_eq!(store.lindex(b"l", 5), Ok(None));
    // LRANGE clamping (Redis's documentation).
    assert_eq!(store.lrange(b"l", -3, 2), Ok(v(&["a"])));
    assert_eq!(store.lrange(b"l", -100, 100).unwrap().len(), 5);
    assert_eq!(store.lrange(b"l", 5, 10), Ok(vec![]));
    // LSET
    assert_eq!(store.lset(b"l", -1, b"E"), Ok(()));
    assert_eq!(store.lset(b"l", 9, b"x"), Err(StoreError::IndexOutOfRange));
    assert_eq!(store.lset(b"missing", 0, b"x"), Err(StoreError::NoSuchKey));
    assert_eq!(
        StoreError::IndexOutOfRange.to_string(),
        "ERR index out of range"
    );
    // LINSERT
    assert_eq!(
        store.linsert(b"l", InsertPosition::Before, b"a", b"x"),
        Ok(6)
    );
    assert_eq!(
        store.linsert(b"l", InsertPosition::After, b"zz", b"x"),
        Ok(-1)
    );
    assert_eq!(
        store.linsert(b"none", InsertPosition::After, b"a", b"x"),
        Ok(0)
    );
    assert_eq!(
        store.lrange(b"l", 0, -1),
        Ok(v(&["c", "b", "x", "a", "d", "E"]))
    );
    // LREM (Redis's documentation: RPUSH hello hello foo hello; LREM -2 hello -> hello foo).
    store
        .rpush(b"r", &[b"hello", b"hello", b"foo", b"hello"])
        .unwrap();
    assert_eq!(store.lrem(b"r", -2, b"hello"), Ok(2));
    assert_eq!(store.lrange(b"r", 0, -1), Ok(v(&["hello", "foo"])));
    assert_eq!(store.lrem(b"r", 0, b"nope"), Ok(0));
    // LPOS (Redis's documentation: RPUSH mylist a b c d 1 2 3 4 3 3 3).
    store
        .rpush(
            b"p",
            &[
                b"a", b"b", b"c", b"d", b"1", b"2", b"3", b"4", b"3", b"3", b"3",
            ],
        )
        .unwrap();
    assert_eq!(
        store.lpos(
            b"p",
            b"3",
            LposOptions {
                rank: 1,
                count: 1,
                maxlen: 0
            }
        ),
        Ok(vec![6])
    );
    assert_eq!(
        store.lpos(
            b"p",
            b"3",
            LposOptions {
                rank: 1,
                count: 0,
                maxlen: 0
            }
        ),
        Ok(vec![6, 8, 9, 10])
    );
    assert_eq!(
        store.lpos(
            b"p",
            b"3",
            LposOptions {
                rank: 2,
                count: 0,
                maxlen: 0
            }
        ),
        Ok(vec![8, 9, 10])
    );
    assert_eq!(
        store.lpos(
            b"p",
            b"3",
            LposOptions {
                rank: -1,
                count: 2,
                maxlen: 0
            }
        ),
        Ok(vec![10, 9])
    );
    assert_eq!(
        store.lpos(
            b"p",
            b"3",
            LposOptions {
                rank: 1,
                count: 0,
                maxlen: 7
            }
        ),
        Ok(vec![6])
    );
    assert_eq!(
        store.lpos(
            b"p",
            b"3",
            LposOptions {
                rank: 0,
                count: 0,
                maxlen: 0
            }
        ),
        Err(StoreError::RankZero)
    );
    // LTRIM, and a list that empties goes away.
    assert_eq!(store.ltrim(b"p", 1, -2), Ok(()));
    assert_eq!(store.llen(b"p"), Ok(9));
    assert_eq!(store.ltrim(b"p", 5, 1), Ok(()));
    assert!(!store.exists(b"p"));
    // Pops with counts.
    assert_eq!(store.lpop(b"missing", 1), Ok(None));
    assert_eq!(store.lpop(b"r", 5), Ok(Some(v(&["hello", "foo"]))));
    assert!(!store.exists(b"r"));
    // Type errors.
    store.set(b"s", b"x", None);
    assert_eq!(store.lpush(b"s", &[b"a"]), Err(StoreError::WrongType));
    assert_eq!(store.lrange(b"s", 0, -1), Err(StoreError::WrongType));
}

#[test]
fn lmove_within_a_shard() {
    let store = EmbeddedStore::new(8);
    store
        .rpush(b"{q}:src", &[b"one", b"two", b"three"])
        .unwrap();
    assert_eq!(
        store.lmove(b"{q}:src", b"{q}:dst", ListEnd::Right, ListEnd::Left),
        Ok(Some(b"three".to_vec()))
    );
    assert_eq!(
        store.lmove(b"{q}:src", b"{q}:dst", ListEnd::Left, ListEnd::Right),
        Ok(Some(b"one".to_vec()))
    );
    assert_eq!(store.lrange(b"{q}:src", 0, -1), Ok(v(&["two"])));
    assert_eq!(store.lrange(b"{q}:dst", 0, -1), Ok(v(&["three", "one"])));
    // Rotation of one list.
    assert_eq!(
        store.lmove(b"{q}:dst", b"{q}:dst", ListEnd::Left, ListEnd::Right),
        Ok(Some(b"three".to_vec()))
    );
    assert_eq!(store.lrange(b"{q}:dst", 0, -1), Ok(v(&["one", "three"])));
    // A destination of another type: nothing moves.
    store.set(b"{q}:str", b"x", None);
    assert_eq!(
        store.lmove(b"{q}:src", b"{q}:str", ListEnd::Left, ListEnd::Left),
        Err(StoreError::WrongType)
    );
    assert_eq!(store.llen(b"{q}:src"), Ok(1));
    assert_eq!(
        store.lmove(b"{q}:none", b"{q}:dst", ListEnd::Left, ListEnd::Left),
        Ok(None)
    );
}

// ----- sets -----------------------------------------------------------------------------------

fn sorted(mut members: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    members.sort();
    members
}

#[test]
fn set_commands_follow_redis() {
    let store = EmbeddedStore::new(4);
    assert_eq!(store.sadd(b"s", &[b"a", b"b", b"c", b"a"]), Ok(3));
    assert_eq!(store.srem(b"s", &[b"a", b"zz"]), Ok(1));
    assert_eq!(sorted(store.smembers(b"s").unwrap()), v(&["b", "c"]));
    assert_eq!(store.smismember(b"s", &[b"b", b"x"]), Ok(vec![true, false]));
    assert_eq!(store.smismember(b"none", &[b"b"]), Ok(vec![false]));
    assert_eq!(store.scard(b"none"), Ok(0));
    // SRANDMEMBER counts.
    assert_eq!(store.srandmember(b"s", Some(5)).unwrap().len(), 2);
    assert_eq!(store.srandmember(b"s", Some(-5)).unwrap().len(), 5);
    assert_eq!(store.srandmember(b"s", None).unwrap().len(), 1);
    assert_eq!(store.srandmember(b"none", None), Ok(vec![]));
    // SPOP removes what it returns, and the emptied key goes.
    let popped = store.spop(b"s", 1).unwrap();
    assert_eq!(popped.len(), 1);
    assert!(!store.sismember(b"s", &popped[0]).unwrap());
    store.spop(b"s", 10).unwrap();
    assert!(!store.exists(b"s"));
    // Algebra (Redis's documentation: key1 = a b c d, key2 = c, key3 = a c e).
    store.sadd(b"{k}1", &[b"a", b"b", b"c", b"d"]).unwrap();
    store.sadd(b"{k}2", &[b"c"]).unwrap();
    store.sadd(b"{k}3", &[b"a", b"c", b"e"]).unwrap();
    let keys: [&[u8]; 3] = [b"{k}1", b"{k}2", b"{k}3"];
    let combine = |a| sorted(store.set_combine(&keys, a).unwrap());
    assert_eq!(combine(SetAlgebra::Intersection), v(&["c"]));
    assert_eq!(combine(SetAlgebra::Union), v(&["a", "b", "c", "d", "e"]));
    assert_eq!(combine(SetAlgebra::Difference), v(&["b", "d"]));
    assert_eq!(store.sintercard(&[b"{k}1", b"{k}3"], 0), Ok(2));
    assert_eq!(store.sintercard(&[b"{k}1", b"{k}3"], 1), Ok(1));
    let with_missing: [&[u8]; 2] = [b"{k}1", b"{k}none"];
    assert_eq!(
        store.set_combine(&with_missing, SetAlgebra::Intersection),
        Ok(vec![])
    );
    // STORE variants replace any type, and an empty result deletes the destination.
    store.set(b"{k}dst", b"a string", None);
    assert_eq!(store.set_store(b"{k}dst", &keys, SetAlgebra::Union), Ok(5));
    assert_eq!(store.type_of(b"{k}dst"), Ok(Some(KeyType::Set)));
    assert_eq!(
        store.set_store(b"{k}dst", &with_missing, SetAlgebra::Intersection),
        Ok(0)
    );
    assert!(!store.exists(b"{k}dst"));
    // SMOVE
    assert_eq!(store.smove(b"{k}1", b"{k}2", b"a"), Ok(true));
    assert_eq!(store.smove(b"{k}1", b"{k}2", b"a"), Ok(false));
    assert!(store.sismember(b"{k}2", b"a").unwrap());
    store.set(b"{k}str", b"x", None);
    assert_eq!(
        store.smove(b"{k}1", b"{k}str", b"b"),
        Err(StoreError::WrongType)
    );
    assert!(store.sismember(b"{k}1", b"b").unwrap(), "nothing moved");
    // Keys of different shards.
    let far = (0..1000)
        .map(|i| format!("far{i}"))
        .find(|k| store.shard_for_key(k.as_bytes()) != store.shard_for_key(b"{k}1"))
        .unwrap();
    assert!(matches!(
        store.set_combine(&[b"{k}1", far.as_bytes()], SetAlgebra::Union),
        Err(StoreError::CrossShard { .. })
    ));
}

#[test]
fn sscan_sees_every_stable_member() {
    let store = EmbeddedStore::new(1);
    let stable: Vec<Vec<u8>> = (0..300).map(|i| format!("m{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = stable.iter().map(Vec::as_slice).collect();
    store.sadd(b"s", &refs).unwrap();
    let (mut cursor, mut seen, mut n) = (0, BTreeSet::new(), 0);
    loop {
        let (next, batch) = store.sscan(b"s", cursor, None, 20).unwrap();
        seen.extend(batch);
        n += 1;
        store.sadd(b"s", &[format!("new{n}").as_bytes()]).unwrap();
        store
            .srem(b"s", &[format!("new{}", n / 2).as_bytes()])
            .unwrap();
        if next == 0 {
            break;
        }
        cursor = next;
    }
    assert!(stable.iter().all(|m| seen.contains(m)));
}

// ----- sorted sets ----------------------------------------------------------------------------

#[test]
fn zset_commands_follow_redis() {
    let store = EmbeddedStore::new(4);
    let d = ZAddOptions::default();
    let e: [(f64, &[u8]); 3] = [(1.0, b"one"), (1.0, b"uno"), (2.0, b"two")];
    assert_eq!(store.zadd(b"z", &e, d).map(|o| o.count), Ok(3));
    assert_eq!(
        store
            .zadd(b"z", &[(3.0, b"two"), (3.0, b"three")], d)
            .map(|o| o.count),
        Ok(1)
    );
    // Redis's documentation: ZRANGE myzset 0 -1 WITHSCORES.
    assert_eq!(
        store.zrange(b"z", ZRange::Rank(0, -1), false, None),
        Ok(scored(&[
            ("one", 1.0),
            ("uno", 1.0),
            ("three", 3.0),
            ("two", 3.0)
        ]))
    );
    assert_eq!(store.zcard(b"z"), Ok(4));
    assert_eq!(store.zscore(b"z", b"two"), Ok(Some(3.0)));
    assert_eq!(
        store.zmscore(b"z", &[b"one", b"nope"]),
        Ok(vec![Some(1.0), None])
    );
    assert_eq!(store.zrank(b"z", b"three", false), Ok(Some((2, 3.0))));
    assert_eq!(store.zrank(b"z", b"three", true), Ok(Some((1, 3.0))));
    assert_eq!(store.zrank(b"z", b"nope", false), Ok(None));
    // Flags.
    let flags = |f: fn(&mut ZAddOptions)| {
        let mut o = ZAddOptions::default();
        f(&mut o);
        o
    };
    let nx = flags(|o| o.only_new = true);
    let xx_ch = flags(|o| {
        o.only_existing = true;
        o.changed = true;
    });
    let gt_ch = flags(|o| {
        o.greater = true;
        o.changed = true;
    });
    let lt = flags(|o| o.less = true);
    let incr = flags(|o| o.incr = true);
    assert_eq!(
        store
            .zadd(b"z", &[(9.0, b"one"), (9.0, b"new")], nx)
            .unwrap()
            .count,
        1
    );
    assert_eq!(store.zscore(b"z", b"one"), Ok(Some(1.0)));
    assert_eq!(
        store
            .zadd(b"z", &[(5.0, b"one"), (5.0, b"nope")], xx_ch)
            .unwrap()
            .count,
        1
    );
    assert_eq!(store.zscore(b"z", b"nope"), Ok(None));
    assert_eq!(
        store
            .zadd(b"z", &[(4.0, b"one"), (6.0, b"uno")], gt_ch)
            .unwrap()
            .count,
        1
    );
    assert_eq!(
        store.zscore(b"z", b"one"),
        Ok(Some(5.0)),
        "GT keeps the higher"
    );
    assert_eq!(store.zadd(b"z", &[(0.5, b"two")], lt).unwrap().count, 0);
    assert_eq!(store.zscore(b"z", b"two"), Ok(Some(0.5)));
    assert_eq!(
        store.zadd(b"z", &[(2.5, b"two")], incr).unwrap().score,
        Some(3.0)
    );
    let nx_incr = flags(|o| {
        o.only_new = true;
        o.incr = true;
    });
    assert_eq!(
        store.zadd(b"z", &[(1.0, b"two")], nx_incr).unwrap().score,
        None
    );
    assert_eq!(store.zincrby(b"z", -1.0, b"two"), Ok(2.0));
    assert_eq!(
        store.zadd(b"z", &[(f64::NAN, b"x")], d),
        Err(StoreError::NotAFloat)
    );
    store.zadd(b"inf", &[(f64::INFINITY, b"m")], d).unwrap();
    assert_eq!(
        store.zincrby(b"inf", f64::NEG_INFINITY, b"m"),
        Err(StoreError::ScoreNan)
    );
    assert_eq!(
        StoreError::ScoreNan.to_string(),
        "ERR resulting score is not a number (NaN)"
    );
    assert_eq!(
        store.zscore(b"inf", b"m"),
        Ok(Some(f64::INFINITY)),
        "unchanged"
    );
}

#[test]
fn zset_ranges_follow_redis() {
    let store = EmbeddedStore::new(2);
    let d = ZAddOptions::default();
    store
        .zadd(b"z", &[(1.0, b"one"), (2.0, b"two"), (3.0, b"three")], d)
        .unwrap();
    let inc = ScoreBound::inclusive;
    let exc = ScoreBound::exclusive;
    let inf = f64::INFINITY;
    // ZRANGEBYSCORE myzset -inf +inf / 1 2 / (1 2 / (1 (2 (Redis's documentation).
    let by = |min, max| {
        store
            .zrange(b"z", ZRange::Score(min, max), false, None)
            .unwrap()
    };
    assert_eq!(by(inc(-inf), inc(inf)).len(), 3);
    assert_eq!(
        by(inc(1.0), inc(2.0)),
        scored(&[("one", 1.0), ("two", 2.0)])
    );
    assert_eq!(by(exc(1.0), inc(2.0)), scored(&[("two", 2.0)]));
    assert_eq!(by(exc(1.0), exc(2.0)), vec![]);
    assert_eq!(store.zcount(b"z", ZRange::Score(exc(1.0), inc(3.0))), Ok(2));
    // REV and LIMIT.
    assert_eq!(
        store.zrange(b"z", ZRange::Score(inc(-inf), inc(inf)), true, Some((1, 1))),
        Ok(scored(&[("two", 2.0)]))
    );
    assert_eq!(
        store.zrange(b"z", ZRange::Rank(0, 0), true, None),
        Ok(scored(&[("three", 3.0)]))
    );
    assert_eq!(
        store.zrange(b"z", ZRange::Rank(-2, -1), false, None),
        Ok(scored(&[("two", 2.0), ("three", 3.0)]))
    );
    // Lex ranges (Redis's documentation: ZADD myzset 0 a 0 b 0 c 0 d 0 e 0 f 0 g).
    let letters: Vec<(f64, &[u8])> = [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
        .iter()
        .map(|m| (0.0, &m[..]))
        .collect();
    store.zadd(b"lex", &letters, d).unwrap();
    let lex = |min, max| {
        store
            .zrange(b"lex", ZRange::Lex(min, max), false, None)
            .unwrap()
            .into_iter()
            .map(|(m, _)| m)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        lex(LexBound::Min, LexBound::Inclusive(b"c")),
        v(&["a", "b", "c"])
    );
    assert_eq!(
        lex(LexBound::Min, LexBound::Exclusive(b"c")),
        v(&["a", "b"])
    );
    assert_eq!(
        lex(LexBound::Inclusive(b"aaa"), LexBound::Exclusive(b"g")),
        v(&["b", "c", "d", "e", "f"])
    );
    assert_eq!(
        store.zcount(b"lex", ZRange::Lex(LexBound::Min, LexBound::Max)),
        Ok(7)
    );
    // Removals by range, pops.
    assert_eq!(
        store.zremrange(
            b"lex",
            ZRange::Lex(LexBound::Min, LexBound::Inclusive(b"b"))
        ),
        Ok(2)
    );
    assert_eq!(store.zremrange(b"lex", ZRange::Rank(0, 1)), Ok(2));
    assert_eq!(store.zcard(b"lex"), Ok(3));
    assert_eq!(
        store.zremrange(b"z", ZRange::Score(inc(-inf), exc(2.0))),
        Ok(1)
    );
    assert_eq!(store.zpop(b"z", true, 1), Ok(scored(&[("three", 3.0)])));
    assert_eq!(store.zpop(b"z", false, 5), Ok(scored(&[("two", 2.0)])));
    assert!(!store.exists(b"z"));
}

#[test]
fn big_zsets_keep_order_and_ranks() {
    let store = EmbeddedStore::new(1);
    let n = 5_000u32;
    // Scores with ties, inserted in a scrambled order, then half rescored.
    for i in 0..n {
        let j = (i * 7919) % n;
        let m = format!("m{j:05}");
        store
            .zadd(
                b"big",
                &[(f64::from(j % 100), m.as_bytes())],
                ZAddOptions::default(),
            )
            .unwrap();
    }
    for j in (0..n).step_by(2) {
        let m = format!("m{j:05}");
        store.zincrby(b"big", 0.5, m.as_bytes()).unwrap();
    }
    let all = store
        .zrange(b"big", ZRange::Rank(0, -1), false, None)
        .unwrap();
    assert_eq!(all.len(), n as usize);
    for w in all.windows(2) {
        assert!((w[0].1, &w[0].0) < (w[1].1, &w[1].0), "{w:?}");
    }
    // Windows from either end, across block boundaries.
    for (start, stop) in [
        (0, 9),
        (-10, -1),
        (2_400, 2_700),
        (-2_600, -2_300),
        (4_990, 6_000),
    ] {
        let got = store
            .zrange(b"big", ZRange::Rank(start, stop), false, None)
            .unwrap();
        let len = all.len() as i64;
        let a = if start < 0 { start + len } else { start } as usize;
        let b = (if stop < 0 { stop + len } else { stop }.min(len - 1)) as usize;
        assert_eq!(got, all[a..=b].to_vec(), "{start}..={stop}");
    }
    for (rank, (m, s)) in all.iter().enumerate().step_by(97) {
        assert_eq!(store.zrank(b"big", m, false), Ok(Some((rank, *s))));
    }
    for j in (0..n).step_by(3) {
        store
            .zrem(b"big", &[format!("m{j:05}").as_bytes()])
            .unwrap();
    }
    let left = store
        .zrange(b"big", ZRange::Rank(0, -1), false, None)
        .unwrap();
    assert_eq!(left.len(), (n - n.div_ceil(3)) as usize);
    assert!(
        left.windows(2)
            .all(|w| (w[0].1, &w[0].0) < (w[1].1, &w[1].0))
    );
}

// ----- model-based, all types together ----------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(Vec<u8>),
    List(VecDeque<u8>),
    Set(BTreeSet<u8>),
    ZSet(BTreeMap<u8, i8>),
}

#[derive(Debug, Clone)]
enum Op {
    Set(u8),
    Push(u8, bool, Vec<u8>),
    Pop(u8, bool, u8),
    LRange(u8, i8, i8),
    LSet(u8, i8, u8),
    LRem(u8, i8, u8),
    LTrim(u8, i8, i8),
    LInsert(u8, bool, u8, u8),
    SAdd(u8, Vec<u8>),
    SRem(u8, Vec<u8>),
    SMembers(u8),
    ZAdd(u8, Vec<(i8, u8)>),
    ZRem(u8, Vec<u8>),
    ZRangeRank(u8, i8, i8),
    ZRangeScore(u8, i8, i8),
    ZRank(u8, u8),
    ZPop(u8, bool, u8),
    Del(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..5;
    let el = 0u8..6;
    let els = proptest::collection::vec(0u8..6, 1..4);
    prop_oneof![
        1 => key.clone().prop_map(Op::Set),
        3 => (key.clone(), any::<bool>(), els.clone()).prop_map(|(k, l, e)| Op::Push(k, l, e)),
        2 => (key.clone(), any::<bool>(), 0u8..4).prop_map(|(k, l, c)| Op::Pop(k, l, c)),
        1 => (key.clone(), -6i8..6, -6i8..6).prop_map(|(k, a, b)| Op::LRange(k, a, b)),
        1 => (key.clone(), -6i8..6, el.clone()).prop_map(|(k, i, e)| Op::LSet(k, i, e)),
        1 => (key.clone(), -3i8..3, el.clone()).prop_map(|(k, c, e)| Op::LRem(k, c, e)),
        1 => (key.clone(), -6i8..6, -6i8..6).prop_map(|(k, a, b)| Op::LTrim(k, a, b)),
        1 => (key.clone(), any::<bool>(), el.clone(), el.clone())
            .prop_map(|(k, b, p, e)| Op::LInsert(k, b, p, e)),
        3 => (key.clone(), els.clone()).prop_map(|(k, e)| Op::SAdd(k, e)),
        2 => (key.clone(), els.clone()).prop_map(|(k, e)| Op::SRem(k, e)),
        1 => key.clone().prop_map(Op::SMembers),
        3 => (key.clone(), proptest::collection::vec((-3i8..3, 0u8..6), 1..4))
            .prop_map(|(k, e)| Op::ZAdd(k, e)),
        2 => (key.clone(), els).prop_map(|(k, e)| Op::ZRem(k, e)),
        1 => (key.clone(), -6i8..6, -6i8..6).prop_map(|(k, a, b)| Op::ZRangeRank(k, a, b)),
        1 => (key.clone(), -4i8..4, -4i8..4).prop_map(|(k, a, b)| Op::ZRangeScore(k, a, b)),
        1 => (key.clone(), el).prop_map(|(k, e)| Op::ZRank(k, e)),
        1 => (key.clone(), any::<bool>(), 0u8..3).prop_map(|(k, h, c)| Op::ZPop(k, h, c)),
        1 => key.prop_map(Op::Del),
    ]
}

fn k(i: u8) -> Vec<u8> {
    format!("{{m}}{i}").into_bytes()
}

fn e(i: u8) -> Vec<u8> {
    vec![b'a' + i]
}

/// Redis's LRANGE/LTRIM clamping on the model.
fn clamp(start: i8, stop: i8, len: usize) -> std::ops::Range<usize> {
    let n = len as i64;
    let mut a = i64::from(start);
    let mut b = i64::from(stop);
    if a < 0 {
        a += n;
    }
    if b < 0 {
        b += n;
    }
    a = a.max(0);
    if a > b || a >= n {
        return 0..0;
    }
    b = b.min(n - 1);
    a as usize..b as usize + 1
}

fn zsorted(z: &BTreeMap<u8, i8>) -> Vec<(Vec<u8>, f64)> {
    let mut all: Vec<(i8, u8)> = z.iter().map(|(&m, &s)| (s, m)).collect();
    all.sort();
    all.into_iter().map(|(s, m)| (e(m), f64::from(s))).collect()
}

const WRONG: &str = "Err(WrongType)";

/// The model's answer to `op`, as text comparable with the store's.
#[expect(
    clippy::too_many_lines,
    reason = "one arm per command, read side by side with the store's"
)]
fn model(m: &mut BTreeMap<Vec<u8>, Value>, op: &Op) -> String {
    macro_rules! typed {
        ($key:expr, $pat:ident, $default:expr, |$x:ident| $body:expr) => {{
            let key = k($key);
            if let Some(other) = m.get(&key)
                && !matches!(other, Value::$pat(_))
            {
                return WRONG.to_string();
            }
            let mut inner = match m.remove(&key) {
                Some(Value::$pat(x)) => x,
                _ => $default,
            };
            let out = {
                let $x = &mut inner;
                $body
            };
            if !is_empty(&inner) {
                m.insert(key, Value::$pat(inner));
            }
            out
        }};
    }
    match op {
        Op::Set(key) => {
            m.insert(k(*key), Value::Str(b"x".to_vec()));
            "ok".into()
        }
        Op::Push(key, left, items) => typed!(*key, List, VecDeque::new(), |l| {
            for &i in items {
                if *left {
                    l.push_front(i)
                } else {
                    l.push_back(i)
                }
            }
            format!("Ok({})", l.len())
        }),
        Op::Pop(key, left, count) => {
            if !m.contains_key(&k(*key)) {
                return "Ok(None)".into();
            }
            typed!(*key, List, VecDeque::new(), |l| {
                let mut out = Vec::new();
                for _ in 0..*count {
                    let x = if *left { l.pop_front() } else { l.pop_back() };
                    match x {
                        Some(x) => out.push(e(x)),
                        None => break,
                    }
                }
                format!("Ok(Some({out:?}))")
            })
        }
        Op::LRange(key, a, b) => typed!(*key, List, VecDeque::new(), |l| {
            let r = clamp(*a, *b, l.len());
            let out: Vec<Vec<u8>> = l.range(r).map(|&x| e(x)).collect();
            format!("Ok({out:?})")
        }),
        Op::LSet(key, i, x) => {
            if !m.contains_key(&k(*key)) {
                return "Err(NoSuchKey)".into();
            }
            typed!(*key, List, VecDeque::new(), |l| {
                let n = l.len() as i64;
                let idx = if *i < 0 {
                    i64::from(*i) + n
                } else {
                    i64::from(*i)
                };
                if (0..n).contains(&idx) {
                    l[idx as usize] = *x;
                    "Ok(())".to_string()
                } else {
                    "Err(IndexOutOfRange)".to_string()
                }
            })
        }
        Op::LRem(key, count, x) => typed!(*key, List, VecDeque::new(), |l| {
            let limit = if *count == 0 {
                usize::MAX
            } else {
                count.unsigned_abs() as usize
            };
            let mut removed = 0;
            let mut keep: Vec<bool> = vec![true; l.len()];
            let order: Vec<usize> = if *count < 0 {
                (0..l.len()).rev().collect()
            } else {
                (0..l.len()).collect()
            };
            for i in order {
                if removed < limit && l[i] == *x {
                    keep[i] = false;
                    removed += 1;
                }
            }
            let mut it = keep.into_iter();
            l.retain(|_| it.next().unwrap());
            format!("Ok({removed})")
        }),
        Op::LTrim(key, a, b) => typed!(*key, List, VecDeque::new(), |l| {
            let r = clamp(*a, *b, l.len());
            *l = l.range(r).copied().collect();
            "Ok(())".to_string()
        }),
        Op::LInsert(key, before, pivot, x) => typed!(*key, List, VecDeque::new(), |l| {
            if l.is_empty() {
                "Ok(0)".to_string()
            } else {
                match l.iter().position(|y| y == pivot) {
                    None => "Ok(-1)".to_string(),
                    Some(p) => {
                        l.insert(if *before { p } else { p + 1 }, *x);
                        format!("Ok({})", l.len())
                    }
                }
            }
        }),
        Op::SAdd(key, items) => typed!(*key, Set, BTreeSet::new(), |s| {
            let added = items.iter().filter(|&&i| s.insert(i)).count();
            format!("Ok({added})")
        }),
        Op::SRem(key, items) => typed!(*key, Set, BTreeSet::new(), |s| {
            let gone = items.iter().filter(|&&i| s.remove(&i)).count();
            format!("Ok({gone})")
        }),
        Op::SMembers(key) => typed!(*key, Set, BTreeSet::new(), |s| {
            let out: Vec<Vec<u8>> = s.iter().map(|&x| e(x)).collect();
            format!("Ok({out:?})")
        }),
        Op::ZAdd(key, items) => typed!(*key, ZSet, BTreeMap::new(), |z| {
            let mut added = 0;
            for &(s, x) in items {
                added += usize::from(z.insert(x, s).is_none());
            }
            format!("Ok({added})")
        }),
        Op::ZRem(key, items) => typed!(*key, ZSet, BTreeMap::new(), |z| {
            let gone = items.iter().filter(|&&i| z.remove(&i).is_some()).count();
            format!("Ok({gone})")
        }),
        Op::ZRangeRank(key, a, b) => typed!(*key, ZSet, BTreeMap::new(), |z| {
            let all = zsorted(z);
            let r = clamp(*a, *b, all.len());
            format!("Ok({:?})", &all[r])
        }),
        Op::ZRangeScore(key, a, b) => typed!(*key, ZSet, BTreeMap::new(), |z| {
            let all: Vec<_> = zsorted(z)
                .into_iter()
                .filter(|(_, s)| *s >= f64::from(*a) && *s < f64::from(*b))
                .collect();
            format!("Ok({all:?})")
        }),
        Op::ZRank(key, x) => typed!(*key, ZSet, BTreeMap::new(), |z| {
            let all = zsorted(z);
            let found = all
                .iter()
                .position(|(m, _)| *m == e(*x))
                .map(|r| (r, all[r].1));
            format!("Ok({found:?})")
        }),
        Op::ZPop(key, highest, count) => typed!(*key, ZSet, BTreeMap::new(), |z| {
            let mut all = zsorted(z);
            if *highest {
                all.reverse();
            }
            all.truncate(*count as usize);
            for (mm, _) in &all {
                z.remove(&(mm[0] - b'a'));
            }
            format!("Ok({all:?})")
        }),
        Op::Del(key) => format!("{}", m.remove(&k(*key)).is_some()),
    }
}

fn is_empty<T: IsEmpty>(v: &T) -> bool {
    v.empty()
}

trait IsEmpty {
    fn empty(&self) -> bool;
}

impl<T> IsEmpty for VecDeque<T> {
    fn empty(&self) -> bool {
        self.is_empty()
    }
}

impl<T> IsEmpty for BTreeSet<T> {
    fn empty(&self) -> bool {
        self.is_empty()
    }
}

impl<K, V> IsEmpty for BTreeMap<K, V> {
    fn empty(&self) -> bool {
        self.is_empty()
    }
}

/// Either store kind.
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

fn short<T: std::fmt::Debug>(r: Result<T, StoreError>) -> String {
    match r {
        Ok(v) => format!("Ok({v:?})"),
        Err(StoreError::WrongType) => WRONG.into(),
        Err(err) => format!("Err({err:?})"),
    }
}

fn apply(store: &mut Any, op: &Op) -> String {
    let els = |x: &[u8]| x.iter().map(|&i| e(i)).collect::<Vec<_>>();
    let end = |left: bool| if left { ListEnd::Left } else { ListEnd::Right };
    match op {
        Op::Set(key) => {
            both!(store, s => s.set(k(*key), b"x", None));
            "ok".into()
        }
        Op::Push(key, left, items) => {
            let owned = els(items);
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            short(both!(store, s => s.push(&k(*key), end(*left), &refs, false)))
        }
        Op::Pop(key, left, count) => {
            short(both!(store, s => s.pop(&k(*key), end(*left), usize::from(*count))))
        }
        Op::LRange(key, a, b) => {
            short(both!(store, s => s.lrange(&k(*key), i64::from(*a), i64::from(*b))))
        }
        Op::LSet(key, i, x) => short(both!(store, s => s.lset(&k(*key), i64::from(*i), &e(*x)))),
        Op::LRem(key, c, x) => short(both!(store, s => s.lrem(&k(*key), i64::from(*c), &e(*x)))),
        Op::LTrim(key, a, b) => {
            short(both!(store, s => s.ltrim(&k(*key), i64::from(*a), i64::from(*b))))
        }
        Op::LInsert(key, before, p, x) => {
            let pos = if *before {
                InsertPosition::Before
            } else {
                InsertPosition::After
            };
            short(both!(store, s => s.linsert(&k(*key), pos, &e(*p), &e(*x))))
        }
        Op::SAdd(key, items) => {
            let owned = els(items);
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            short(both!(store, s => s.sadd(&k(*key), &refs)))
        }
        Op::SRem(key, items) => {
            let owned = els(items);
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            short(both!(store, s => s.srem(&k(*key), &refs)))
        }
        Op::SMembers(key) => short(both!(store, s => s.smembers(&k(*key))).map(|mut all| {
            all.sort();
            all
        })),
        Op::ZAdd(key, items) => {
            let owned: Vec<(f64, Vec<u8>)> =
                items.iter().map(|&(sc, x)| (f64::from(sc), e(x))).collect();
            let refs: Vec<(f64, &[u8])> = owned.iter().map(|(sc, x)| (*sc, &x[..])).collect();
            short(
                both!(store, s => s.zadd(&k(*key), &refs, ZAddOptions::default())).map(|o| o.count),
            )
        }
        Op::ZRem(key, items) => {
            let owned = els(items);
            let refs: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
            short(both!(store, s => s.zrem(&k(*key), &refs)))
        }
        Op::ZRangeRank(key, a, b) => short(both!(store, s => s.zrange(
            &k(*key),
            ZRange::Rank(i64::from(*a), i64::from(*b)),
            false,
            None
        ))),
        Op::ZRangeScore(key, a, b) => short(both!(store, s => s.zrange(
            &k(*key),
            ZRange::Score(
                ScoreBound::inclusive(f64::from(*a)),
                ScoreBound::exclusive(f64::from(*b))
            ),
            false,
            None
        ))),
        Op::ZRank(key, x) => short(both!(store, s => s.zrank(&k(*key), &e(*x), false))),
        Op::ZPop(key, h, c) => short(both!(store, s => s.zpop(&k(*key), *h, usize::from(*c)))),
        Op::Del(key) => format!("{}", both!(store, s => s.delete(&k(*key)))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn collections_match_the_model_and_replay(
        ops in proptest::collection::vec(op(), 1..150),
        local in any::<bool>(),
    ) {
        let replica = Arc::new(EmbeddedStore::new(2));
        let target = Arc::clone(&replica);
        let built = EmbeddedStore::builder(4)
            .mutation_sink(Arc::new(move |_s: usize, _q: u64, m: &Mutation<'_>| replay(&target, m)))
            .build();
        let mut store = if local {
            Any::Local(built.into_local_stores(1).pop().unwrap())
        } else {
            Any::Shared(built)
        };
        let mut m = BTreeMap::new();
        for op in &ops {
            let want = model(&mut m, op);
            let got = apply(&mut store, op);
            prop_assert_eq!(&got, &want, "{:?}", op);
        }
        for (key, value) in &m {
            let want = match value {
                Value::Str(_) => KeyType::String,
                Value::List(_) => KeyType::List,
                Value::Set(_) => KeyType::Set,
                Value::ZSet(_) => KeyType::ZSet,
            };
            prop_assert_eq!(both!(&mut store, s => s.type_of(key)), Ok(Some(want)));
        }
        prop_assert_eq!(both!(&store, s => s.len()), m.len());
        let digest = both!(&mut store, s => s.digest());
        prop_assert_eq!(replica.digest(), digest);
    }
}
