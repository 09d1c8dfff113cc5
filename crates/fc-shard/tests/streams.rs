//! Streams: a model-based proptest (entries, ids, groups and their pending entries against
//! `BTreeMap` models), the mutation stream replayed into a replica and a snapshot-style export
//! replayed into a third store (their digests must match), and the memory charge.

use std::collections::BTreeMap;
use std::sync::Arc;

use fc_shard::{
    EmbeddedStore, GroupReadFrom, GroupStart, KeyType, ManualClock, Mutation, StoreError,
    StreamError, StreamId, StreamTrim, TrimStrategy, XAddId, XAddOptions, XClaimOptions,
};
use proptest::prelude::*;

mod common;
use common::replay;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

type Entries = BTreeMap<StreamId, Vec<Vec<u8>>>;
/// A group as compared: last delivered id, PEL (id, consumer).
type GroupView = (StreamId, Vec<(StreamId, Vec<u8>)>);

/// Reads the whole stream: (entries, last id, entries added, max deleted id).
fn read_all(store: &EmbeddedStore, key: &[u8]) -> Option<(Entries, StreamId, u64, StreamId)> {
    let mut out = None;
    store
        .stream_read(key, &mut |s| {
            let entries = s
                .range(StreamId::MIN, StreamId::MAX)
                .map(|(id, f)| (id, f.map(<[u8]>::to_vec).collect()))
                .collect();
            out = Some((entries, s.last_id(), s.entries_added(), s.max_deleted_id()));
        })
        .unwrap();
    out
}

#[test]
fn stream_commands_follow_redis() {
    let clock = ManualClock::new(1_000);
    let store = EmbeddedStore::builder(4).clock(clock.clone()).build();
    let add = |id, f: &[&[u8]]| store.xadd(b"s", id, f, XAddOptions::default());
    assert_eq!(
        add(XAddId::Explicit(id(0, 0)), &[b"f", b"v"]),
        Err(StreamError::IdZero.into())
    );
    assert_eq!(
        add(XAddId::Explicit(id(2_000, 1)), &[b"f", b"v"]),
        Ok(Some(id(2_000, 1)))
    );
    assert_eq!(
        add(XAddId::Explicit(id(2_000, 1)), &[b"f", b"v"]),
        Err(StoreError::Stream(StreamError::IdTooSmall))
    );
    assert_eq!(
        add(XAddId::AutoSeq(2_000), &[b"a", b"b"]),
        Ok(Some(id(2_000, 2)))
    );
    // The clock is behind the last id: the sequence goes on.
    assert_eq!(add(XAddId::Auto, &[b"a", b"b"]), Ok(Some(id(2_000, 3))));
    clock.advance_ms(1_010);
    assert_eq!(add(XAddId::Auto, &[b"a", b"b"]), Ok(Some(id(2_010, 0))));
    assert_eq!(store.type_of(b"s"), Ok(Some(KeyType::Stream)));
    assert_eq!(KeyType::Stream.redis_name(), "stream");
    // NOMKSTREAM
    let nomk = XAddOptions {
        no_mkstream: true,
        trim: None,
    };
    assert_eq!(
        store.xadd(b"none", XAddId::Auto, &[b"f", b"v"], nomk),
        Ok(None)
    );
    assert!(!store.exists(b"none"));
    // XDEL keeps an empty stream and records the largest deleted id.
    assert_eq!(store.xdel(b"s", &[id(2_000, 1), id(9, 9)]), Ok(1));
    let trim = StreamTrim {
        strategy: TrimStrategy::MaxLen(0),
        approx: false,
        limit: 0,
    };
    assert_eq!(store.xtrim(b"s", trim), Ok(3));
    let (entries, last, added, max_deleted) = read_all(&store, b"s").unwrap();
    assert!(entries.is_empty());
    assert_eq!((last, added, max_deleted), (id(2_010, 0), 4, id(2_000, 1)));
    assert!(store.exists(b"s"), "an empty stream stays");
    // Exhausted ids.
    store
        .xsetid(b"s", StreamId::MAX, None, None)
        .expect("setid on an empty stream");
    assert_eq!(
        add(XAddId::Auto, &[b"f", b"v"]),
        Err(StoreError::Stream(StreamError::Exhausted))
    );
    assert_eq!(
        store.xgroup_create(b"missing", b"g", GroupStart::Last, false, None),
        Err(StoreError::Stream(StreamError::GroupNeedsKey))
    );
    assert_eq!(
        StreamError::BusyGroup.to_string(),
        "BUSYGROUP Consumer Group name already exists"
    );
}

#[test]
fn groups_deliver_claim_and_acknowledge() {
    let clock = ManualClock::new(1_000);
    let store = EmbeddedStore::builder(2).clock(clock.clone()).build();
    for i in 1..=4 {
        store
            .xadd(
                b"s",
                XAddId::Explicit(id(i, 0)),
                &[b"f", b"v"],
                XAddOptions::default(),
            )
            .unwrap();
    }
    store
        .xgroup_create(b"s", b"g", GroupStart::Id(StreamId::MIN), false, None)
        .unwrap();
    assert_eq!(
        store.xgroup_create(b"s", b"g", GroupStart::Last, false, None),
        Err(StoreError::Stream(StreamError::BusyGroup))
    );
    let read = store
        .xreadgroup(b"s", b"g", b"alice", GroupReadFrom::New, 2, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        read.iter().map(|e| e.0).collect::<Vec<_>>(),
        [id(1, 0), id(2, 0)]
    );
    clock.advance_ms(100);
    // History reads count a delivery; deleted entries read as None.
    store.xdel(b"s", &[id(2, 0)]).unwrap();
    let history = store
        .xreadgroup(
            b"s",
            b"g",
            b"alice",
            GroupReadFrom::History(StreamId::MIN),
            0,
            false,
        )
        .unwrap()
        .unwrap();
    assert_eq!(history.len(), 2);
    assert!(history[0].1.is_some() && history[1].1.is_none());
    // XCLAIM of a deleted entry drops it from the PEL; of an idle one moves it.
    clock.advance_ms(50);
    let claimed = store
        .xclaim(
            b"s",
            b"g",
            b"bob",
            10,
            &[id(1, 0), id(2, 0)],
            XClaimOptions::default(),
        )
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let mut pel = Vec::new();
    store
        .stream_read(b"s", &mut |s| {
            let g = s.group(b"g").unwrap();
            pel = g
                .pel()
                .iter()
                .map(|(id, p)| (*id, p.consumer().to_vec(), p.delivery_count()))
                .collect();
        })
        .unwrap();
    assert_eq!(pel, vec![(id(1, 0), b"bob".to_vec(), 3)]);
    assert_eq!(
        store.xack(b"s", b"g", &[id(1, 0), id(1, 0), id(3, 0)]),
        Ok(1)
    );
    assert_eq!(store.xgroup_delconsumer(b"s", b"g", b"alice"), Ok(0));
    assert_eq!(store.xgroup_destroy(b"s", b"g"), Ok(true));
    assert_eq!(store.xgroup_destroy(b"s", b"g"), Ok(false));
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, u8, u8),
    AddSeq(u8, u8),
    Del(Vec<(u8, u8)>),
    TrimLen(u8, bool),
    TrimMin(u8, bool),
    Create(u8, u8),
    Destroy(u8),
    Read(u8, u8, u8, bool),
    History(u8, u8),
    Ack(u8, Vec<(u8, u8)>),
    Claim(u8, u8, Vec<(u8, u8)>, bool),
    AutoClaim(u8, u8, u8),
    DelConsumer(u8, u8),
    SetId(u8),
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    let pair = (0u8..12, 0u8..3);
    prop_oneof![
        6 => (0u8..12, 0u8..3, 1u8..3).prop_map(|(m, s, n)| Op::Add(m, s, n)),
        3 => (0u8..12, 1u8..3).prop_map(|(m, n)| Op::AddSeq(m, n)),
        2 => proptest::collection::vec(pair.clone(), 1..4).prop_map(Op::Del),
        1 => (0u8..6, any::<bool>()).prop_map(|(n, a)| Op::TrimLen(n, a)),
        1 => (0u8..12, any::<bool>()).prop_map(|(m, a)| Op::TrimMin(m, a)),
        2 => (0u8..3, 0u8..12).prop_map(|(g, m)| Op::Create(g, m)),
        1 => (0u8..3).prop_map(Op::Destroy),
        4 => (0u8..3, 0u8..3, 0u8..4, any::<bool>()).prop_map(|(g, c, n, a)| Op::Read(g, c, n, a)),
        1 => (0u8..3, 0u8..3).prop_map(|(g, c)| Op::History(g, c)),
        2 => (0u8..3, proptest::collection::vec(pair.clone(), 1..4)).prop_map(|(g, i)| Op::Ack(g, i)),
        2 => (0u8..3, 0u8..3, proptest::collection::vec(pair, 1..4), any::<bool>())
            .prop_map(|(g, c, i, f)| Op::Claim(g, c, i, f)),
        1 => (0u8..3, 0u8..3, 1u8..4).prop_map(|(g, c, n)| Op::AutoClaim(g, c, n)),
        1 => (0u8..3, 0u8..3).prop_map(|(g, c)| Op::DelConsumer(g, c)),
        1 => (0u8..20).prop_map(Op::SetId),
        1 => Just(Op::Tick),
    ]
}

/// The model: entries, last id, added count, and per group (last id, PEL id → consumer).
#[derive(Debug, Default)]
struct Model {
    exists: bool,
    entries: BTreeMap<StreamId, Vec<Vec<u8>>>,
    last: StreamId,
    added: u64,
    groups: BTreeMap<u8, (StreamId, BTreeMap<StreamId, u8>)>,
}

fn gname(g: u8) -> Vec<u8> {
    format!("g{g}").into_bytes()
}

fn cname(c: u8) -> Vec<u8> {
    format!("c{c}").into_bytes()
}

fn sid((m, s): (u8, u8)) -> StreamId {
    id(u64::from(m), u64::from(s))
}

/// Runs `op` on the store and the model; returns (store's answer, model's answer) as text.
fn step(store: &EmbeddedStore, m: &mut Model, op: &Op, clock: &ManualClock) -> (String, String) {
    let key = b"s";
    let fields = |n: u8| -> Vec<Vec<u8>> {
        (0..n)
            .flat_map(|i| [format!("f{i}").into_bytes(), b"v".to_vec()])
            .collect()
    };
    match op {
        Op::Add(ms, seq, n) => {
            let f = fields(*n);
            let refs: Vec<&[u8]> = f.iter().map(Vec::as_slice).collect();
            let want = id(u64::from(*ms), u64::from(*seq));
            let got = store.xadd(key, XAddId::Explicit(want), &refs, XAddOptions::default());
            let model = if want.is_zero() {
                Err(StoreError::Stream(StreamError::IdZero))
            } else if m.exists && want <= m.last {
                Err(StoreError::Stream(StreamError::IdTooSmall))
            } else {
                m.exists = true;
                m.entries.insert(want, f);
                m.last = want;
                m.added += 1;
                Ok(Some(want))
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::AddSeq(ms, n) => {
            let f = fields(*n);
            let refs: Vec<&[u8]> = f.iter().map(Vec::as_slice).collect();
            let ms = u64::from(*ms);
            let got = store.xadd(key, XAddId::AutoSeq(ms), &refs, XAddOptions::default());
            let last = if m.exists { m.last } else { StreamId::MIN };
            let new = if ms > last.ms {
                Some(id(ms, 0))
            } else if ms == last.ms {
                Some(id(ms, last.seq + 1))
            } else {
                None
            };
            let model = match new {
                Some(new) => {
                    m.exists = true;
                    m.entries.insert(new, f);
                    m.last = new;
                    m.added += 1;
                    Ok(Some(new))
                }
                None => Err(StoreError::Stream(StreamError::IdTooSmall)),
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::Del(ids) => {
            let ids: Vec<StreamId> = ids.iter().copied().map(sid).collect();
            let got = store.xdel(key, &ids);
            let mut uniq = ids.clone();
            uniq.sort();
            uniq.dedup();
            let n = uniq
                .iter()
                .filter(|i| m.entries.remove(i).is_some())
                .count();
            (
                format!("{got:?}"),
                format!("{:?}", Ok::<usize, StoreError>(n)),
            )
        }
        Op::TrimLen(n, approx) => {
            let trim = StreamTrim {
                strategy: TrimStrategy::MaxLen(u64::from(*n)),
                approx: *approx,
                limit: 0,
            };
            let got = store.xtrim(key, trim).unwrap();
            // Exact trims keep `n`; approximate ones keep at least `n`, always a prefix.
            let before = m.entries.len();
            let removed = if *approx {
                got
            } else {
                before.saturating_sub(usize::from(*n))
            };
            for _ in 0..removed {
                m.entries.pop_first();
            }
            (
                format!("{got} {}", before - removed >= usize::from(*n).min(before)),
                format!("{removed} true"),
            )
        }
        Op::TrimMin(ms, approx) => {
            let min = id(u64::from(*ms), 0);
            let trim = StreamTrim {
                strategy: TrimStrategy::MinId(min),
                approx: *approx,
                limit: 0,
            };
            let got = store.xtrim(key, trim).unwrap();
            let below = m.entries.range(..min).count();
            let removed = if *approx { got.min(below) } else { below };
            for _ in 0..removed {
                m.entries.pop_first();
            }
            (format!("{got} {}", got <= below), format!("{removed} true"))
        }
        Op::Create(g, ms) => {
            let start = id(u64::from(*ms), 0);
            let got = store.xgroup_create(key, &gname(*g), GroupStart::Id(start), false, None);
            let model = if !m.exists {
                Err(StoreError::Stream(StreamError::GroupNeedsKey))
            } else if m.groups.contains_key(g) {
                Err(StoreError::Stream(StreamError::BusyGroup))
            } else {
                m.groups.insert(*g, (start, BTreeMap::new()));
                Ok(())
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::Destroy(g) => {
            let got = store.xgroup_destroy(key, &gname(*g));
            let model = if m.exists {
                Ok(m.groups.remove(g).is_some())
            } else {
                Err(StoreError::NoSuchKey)
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::Read(g, c, n, noack) => {
            let got = store
                .xreadgroup(
                    key,
                    &gname(*g),
                    &cname(*c),
                    GroupReadFrom::New,
                    usize::from(*n),
                    *noack,
                )
                .map(|r| r.map(|v| v.into_iter().map(|e| e.0).collect::<Vec<_>>()));
            let model = match m.groups.get_mut(g) {
                Some((last, pel)) if m.exists => {
                    let limit = if *n == 0 { usize::MAX } else { usize::from(*n) };
                    let ids: Vec<StreamId> = m
                        .entries
                        .range(last.next().unwrap_or(StreamId::MAX)..)
                        .take(limit)
                        .map(|(i, _)| *i)
                        .collect();
                    if let Some(&l) = ids.last() {
                        *last = l;
                    }
                    if !*noack {
                        for i in &ids {
                            pel.insert(*i, *c);
                        }
                    }
                    Ok((!ids.is_empty()).then_some(ids))
                }
                _ => Err(StoreError::Stream(StreamError::NoGroup)),
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::History(g, c) => {
            let got = store
                .xreadgroup(
                    key,
                    &gname(*g),
                    &cname(*c),
                    GroupReadFrom::History(StreamId::MIN),
                    0,
                    false,
                )
                .map(|r| {
                    r.map(|v| {
                        v.into_iter()
                            .map(|e| (e.0, e.1.is_some()))
                            .collect::<Vec<_>>()
                    })
                });
            let model = match m.groups.get(g) {
                Some((_, pel)) if m.exists => Ok(Some(
                    pel.iter()
                        .filter(|(_, owner)| *owner == c)
                        .map(|(i, _)| (*i, m.entries.contains_key(i)))
                        .collect::<Vec<_>>(),
                )),
                _ => Err(StoreError::Stream(StreamError::NoGroup)),
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::Ack(g, ids) => {
            let ids: Vec<StreamId> = ids.iter().copied().map(sid).collect();
            let got = store.xack(key, &gname(*g), &ids);
            let n = match m.groups.get_mut(g) {
                Some((_, pel)) => {
                    let mut uniq = ids.clone();
                    uniq.sort();
                    uniq.dedup();
                    uniq.iter().filter(|i| pel.remove(i).is_some()).count()
                }
                None => 0,
            };
            (
                format!("{got:?}"),
                format!("{:?}", Ok::<usize, StoreError>(n)),
            )
        }
        Op::Claim(g, c, ids, force) => {
            let ids: Vec<StreamId> = ids.iter().copied().map(sid).collect();
            let options = XClaimOptions {
                force: *force,
                just_id: true,
                ..XClaimOptions::default()
            };
            let got = store
                .xclaim(key, &gname(*g), &cname(*c), 0, &ids, options)
                .map(|v| v.into_iter().map(|e| e.0).collect::<Vec<_>>());
            let model = match m.groups.get_mut(g) {
                Some((_, pel)) if m.exists => {
                    let mut out = Vec::new();
                    for i in &ids {
                        if !m.entries.contains_key(i) {
                            pel.remove(i);
                            continue;
                        }
                        if pel.contains_key(i) || *force {
                            pel.insert(*i, *c);
                            out.push(*i);
                        }
                    }
                    Ok(out)
                }
                _ => Err(StoreError::Stream(StreamError::NoGroup)),
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::AutoClaim(g, c, n) => {
            let got = store
                .xautoclaim(
                    key,
                    &gname(*g),
                    &cname(*c),
                    0,
                    StreamId::MIN,
                    usize::from(*n),
                    true,
                )
                .map(|r| {
                    (
                        r.claimed.into_iter().map(|e| e.0).collect::<Vec<_>>(),
                        r.deleted,
                    )
                });
            let model = match m.groups.get_mut(g) {
                Some((_, pel)) if m.exists => {
                    let mut claimed = Vec::new();
                    let mut deleted = Vec::new();
                    let ids: Vec<StreamId> = pel.keys().take(usize::from(*n)).copied().collect();
                    for i in ids {
                        if m.entries.contains_key(&i) {
                            pel.insert(i, *c);
                            claimed.push(i);
                        } else {
                            pel.remove(&i);
                            deleted.push(i);
                        }
                    }
                    Ok((claimed, deleted))
                }
                _ => Err(StoreError::Stream(StreamError::NoGroup)),
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::DelConsumer(g, c) => {
            let got = store.xgroup_delconsumer(key, &gname(*g), &cname(*c));
            let model = match m.groups.get_mut(g) {
                Some((_, pel)) if m.exists => {
                    let before = pel.len();
                    pel.retain(|_, owner| owner != c);
                    Ok(before - pel.len())
                }
                _ => Err(StoreError::Stream(StreamError::NoGroup)),
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::SetId(ms) => {
            let to = id(u64::from(*ms), 0);
            let got = store.xsetid(key, to, None, None);
            let model = if !m.exists {
                Err(StoreError::NoSuchKey)
            } else if m.entries.last_key_value().is_some_and(|(top, _)| to < *top) {
                Err(StoreError::Stream(StreamError::SetIdTooSmall))
            } else {
                m.last = to;
                Ok(())
            };
            (format!("{got:?}"), format!("{model:?}"))
        }
        Op::Tick => {
            clock.advance_ms(7);
            (String::new(), String::new())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn streams_match_the_model_replay_and_export(ops in proptest::collection::vec(op(), 1..120)) {
        let clock = ManualClock::new(5_000);
        let replica = Arc::new(EmbeddedStore::new(2));
        let target = Arc::clone(&replica);
        let store = EmbeddedStore::builder(4)
            .clock(clock.clone())
            .mutation_sink(Arc::new(move |_s: usize, _q: u64, m: &Mutation<'_>| replay(&target, m)))
            .build();
        let mut m = Model::default();
        for op in &ops {
            let (got, want) = step(&store, &mut m, op, &clock);
            prop_assert_eq!(&got, &want, "{:?}", op);
            if m.exists {
                let (entries, last, added, _) = read_all(&store, b"s").unwrap();
                prop_assert_eq!(&entries, &m.entries, "{:?}", op);
                prop_assert_eq!((last, added), (m.last, m.added));
                let mut pels = BTreeMap::new();
                store.stream_read(b"s", &mut |s| {
                    for (name, g) in s.groups() {
                        let pel: Vec<(StreamId, Vec<u8>)> =
                            g.pel().iter().map(|(i, p)| (*i, p.consumer().to_vec())).collect();
                        // Every pending id is in its consumer's own list.
                        for (i, owner) in &pel {
                            assert!(g.consumer(owner).unwrap().pending().contains(i));
                        }
                        let own: usize = g.consumers().map(|(_, c)| c.pending().len()).sum();
                        assert_eq!(own, pel.len());
                        pels.insert(name.to_vec(), (g.last_id(), pel));
                    }
                }).unwrap();
                let want: BTreeMap<Vec<u8>, GroupView> = m
                    .groups
                    .iter()
                    .map(|(g, (last, pel))| {
                        (gname(*g), (*last, pel.iter().map(|(i, c)| (*i, cname(*c))).collect()))
                    })
                    .collect();
                prop_assert_eq!(pels, want, "{:?}", op);
            }
        }
        prop_assert_eq!(replica.digest(), store.digest());
        // A snapshot's export, replayed into an empty store, gives the same contents.
        let restored = EmbeddedStore::new(8);
        for shard in 0..store.shard_count() {
            store.export_shard(shard, || (), |m| replay(&restored, m));
        }
        prop_assert_eq!(restored.digest(), store.digest());
    }
}
