//! `fc_snapshot::rdb` streams against payloads recorded from redis-server 7.0.15
//! (`tests/fixtures/rdb/streams.txt`, written by `gen_streams.py` beside it):
//!
//! - every recorded payload restores to what Redis reported of the key (`XRANGE`, `XINFO
//!   STREAM FULL`: length, ids, counters, node count, groups, PELs, consumers);
//! - `dump` of the restored value equals Redis's payload byte for byte (node listpacks with
//!   deleted entries and same-fields flags, LZF, metadata, groups);
//! - damaged payloads (every byte flipped, truncated, random listpacks) are refused without a
//!   panic, inconsistent ones with Redis's `Bad data format`, and `Limits` hold.

use fc_snapshot::rdb::{Limits, RdbError, StreamId, StreamValue, Value, crc64, dump, restore};
use proptest::prelude::*;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn token(s: &str) -> Vec<u8> {
    if let Some(t) = s.strip_prefix("t:") {
        t.as_bytes().to_vec()
    } else {
        unhex(s.strip_prefix("x:").expect("token"))
    }
}

fn id(s: &str) -> StreamId {
    let (ms, seq) = s.split_once('-').expect("id");
    StreamId::new(ms.parse().expect("ms"), seq.parse().expect("seq"))
}

#[derive(Default)]
struct Group {
    name: Vec<u8>,
    last_id: StreamId,
    entries_read: i64,
    /// (id, consumer, delivery ms, count)
    pel: Vec<(StreamId, Vec<u8>, u64, u64)>,
    /// (name, seen ms, pending ids)
    consumers: Vec<(Vec<u8>, u64, Vec<StreamId>)>,
}

#[derive(Default)]
struct Case {
    name: String,
    payload: Vec<u8>,
    meta: Vec<String>,
    entries: Vec<(StreamId, Vec<Vec<u8>>)>,
    groups: Vec<Group>,
}

fn fixture() -> Vec<Case> {
    let text = include_str!("fixtures/rdb/streams.txt");
    let mut out = Vec::new();
    let mut case = Case::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut words = line.split(' ');
        match words.next() {
            Some("case") => case.name = words.next().expect("name").to_owned(),
            Some("dump") => case.payload = unhex(words.next().expect("hex")),
            Some("meta") => case.meta = words.map(str::to_owned).collect(),
            Some("e") => {
                let eid = id(words.next().expect("id"));
                case.entries.push((eid, words.map(token).collect()));
            }
            Some("g") => case.groups.push(Group {
                name: token(words.next().expect("group")),
                last_id: id(words.next().expect("last id")),
                entries_read: match words.next().expect("entries-read") {
                    "nil" => -1,
                    n => n.parse().expect("entries-read"),
                },
                ..Group::default()
            }),
            Some("p") => {
                let g = case.groups.last_mut().expect("group");
                let pid = id(words.next().expect("id"));
                let consumer = token(words.next().expect("consumer"));
                let ms = words.next().expect("ms").parse().expect("ms");
                let count = words.next().expect("count").parse().expect("count");
                g.pel.push((pid, consumer, ms, count));
            }
            Some("c") => {
                let g = case.groups.last_mut().expect("group");
                let name = token(words.next().expect("consumer"));
                let seen = words.next().expect("seen").parse().expect("seen");
                g.consumers.push((name, seen, words.map(id).collect()));
            }
            Some("end") => out.push(std::mem::take(&mut case)),
            other => panic!("unexpected fixture line {other:?}"),
        }
    }
    assert!(out.len() >= 10, "the fixture has its cases");
    out
}

fn stream_of(v: Value) -> StreamValue {
    match v {
        Value::Stream(s) => *s,
        other => panic!("not a stream: {other:?}"),
    }
}

#[test]
fn recorded_payloads_restore_to_what_redis_reported() {
    for case in fixture() {
        let name = &case.name;
        let s = stream_of(restore(&case.payload, Limits::default()).expect(name));
        let meta = [
            s.length.to_string(),
            s.last_id.to_string(),
            s.first_id.to_string(),
            s.max_deleted.to_string(),
            s.entries_added.to_string(),
            s.nodes.len().to_string(),
        ];
        assert_eq!(meta.to_vec(), case.meta, "{name}: metadata");
        let live: Vec<(StreamId, Vec<Vec<u8>>)> = s
            .nodes
            .iter()
            .flat_map(|n| &n.entries)
            .filter(|e| !e.deleted)
            .map(|e| (e.id, e.fields.clone()))
            .collect();
        assert_eq!(live, case.entries, "{name}: entries");
        assert_eq!(s.groups.len(), case.groups.len(), "{name}: groups");
        for (g, want) in s.groups.iter().zip(&case.groups) {
            assert_eq!(g.name, want.name, "{name}");
            assert_eq!(
                (g.last_id, g.entries_read),
                (want.last_id, want.entries_read)
            );
            let pel: Vec<(StreamId, Vec<u8>, u64, u64)> = g
                .pel
                .iter()
                .map(|p| {
                    let owner = g
                        .consumers
                        .iter()
                        .find(|c| c.pending.contains(&p.id))
                        .expect("owned");
                    (p.id, owner.name.clone(), p.delivery_ms, p.delivery_count)
                })
                .collect();
            assert_eq!(pel, want.pel, "{name}: PEL");
            let consumers: Vec<(Vec<u8>, u64, Vec<StreamId>)> = g
                .consumers
                .iter()
                .map(|c| (c.name.clone(), c.seen_ms, c.pending.clone()))
                .collect();
            assert_eq!(consumers, want.consumers, "{name}: consumers");
            // Type 19 carries no active time: Redis 7.2 takes the seen time.
            assert!(g.consumers.iter().all(|c| c.active_ms == Some(c.seen_ms)));
        }
    }
}

#[test]
fn dump_matches_redis_byte_for_byte() {
    for case in fixture() {
        let v = restore(&case.payload, Limits::default()).expect(&case.name);
        assert_eq!(dump(&v), case.payload, "{}", case.name);
    }
}

#[test]
fn the_fixture_covers_the_stream_layouts() {
    let cases = fixture();
    let get = |n: &str| {
        let c = cases.iter().find(|c| c.name == n).expect(n);
        stream_of(restore(&c.payload, Limits::default()).expect(n))
    };
    // Nodes cut at 100 entries and at 4096 bytes.
    let counts: Vec<usize> = get("x_nodes_count")
        .nodes
        .iter()
        .map(|n| n.entries.len())
        .collect();
    assert_eq!(counts, [100, 100, 50]);
    assert!(get("x_nodes_bytes").nodes.len() >= 4);
    // Deleted entries kept in their node, the master entry among them.
    let deleted = get("x_deleted");
    assert!(deleted.nodes[0].entries[0].deleted);
    assert_eq!(
        deleted.nodes[0]
            .entries
            .iter()
            .filter(|e| e.deleted)
            .count(),
        4
    );
    // An exact trim flags entries inside a node.
    assert!(get("x_trim").nodes[0].entries.iter().any(|e| e.deleted));
    // Entries with fields other than their node's master fields.
    let mixed = get("x_mixed");
    assert!(mixed.nodes.iter().any(|n| {
        n.entries
            .iter()
            .any(|e| e.fields.iter().step_by(2).ne(n.master_fields.iter()))
    }));
    // Groups with consumers and pending entries; an empty stream with groups.
    assert!(get("x_pel").groups.iter().any(|g| g.pel.len() > 5));
    assert_eq!(get("x_empty_groups").groups.len(), 3);
    assert!(get("x_emptied").nodes.is_empty());
}

fn with_crc(mut p: Vec<u8>) -> Vec<u8> {
    let n = p.len();
    let crc = crc64(0, &p[..n - 8]);
    p[n - 8..].copy_from_slice(&crc.to_le_bytes());
    p
}

/// A payload around `body` (type byte first), version 10.
fn payload(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend(10u16.to_le_bytes());
    p.extend([0; 8]);
    with_crc(p)
}

fn body(p: &[u8]) -> &[u8] {
    &p[..p.len() - 10]
}

fn malformed(p: &[u8]) -> bool {
    matches!(restore(p, Limits::default()), Err(RdbError::Malformed(_)))
}

#[test]
fn inconsistent_streams_are_refused() {
    let cases = fixture();
    let pel = &cases
        .iter()
        .find(|c| c.name == "x_pel")
        .expect("x_pel")
        .payload;
    let v = stream_of(restore(pel, Limits::default()).expect("x_pel"));
    let refuse = |edit: &dyn Fn(&mut StreamValue), why: &str| {
        let mut bad = v.clone();
        edit(&mut bad);
        let p = dump(&Value::Stream(Box::new(bad)));
        let r = restore(&p, Limits::default());
        assert!(matches!(r, Err(RdbError::Malformed(_))), "{why}: {r:?}");
        assert_eq!(
            r.expect_err(why).redis_message(),
            "Bad data format",
            "{why}"
        );
    };
    refuse(&|s| s.length += 1, "length beyond the live entries");
    refuse(
        &|s| s.last_id = StreamId::new(1, 0),
        "last id below an entry",
    );
    refuse(
        &|s| s.groups[0].consumers[0].pending.push(StreamId::new(999, 0)),
        "a consumer's id missing from the group PEL",
    );
    refuse(
        &|s| {
            let id = s.groups[0].consumers[0].pending[0];
            s.groups[0].consumers[1].pending.insert(0, id);
        },
        "an entry owned twice",
    );
    refuse(
        &|s| s.groups[0].consumers.clear(),
        "PEL entries without a consumer",
    );
    refuse(
        &|s| {
            let g = s.groups[0].clone();
            s.groups.push(g);
        },
        "a group twice",
    );
    refuse(
        &|s| {
            let c = s.groups[0].consumers[0].clone();
            s.groups[0].consumers.push(c);
        },
        "a consumer twice",
    );
    refuse(
        &|s| {
            let n = s.nodes[0].clone();
            s.nodes.push(n);
        },
        "a node twice",
    );
    refuse(&|s| s.nodes[0].entries.clear(), "an empty node");
    refuse(&|s| s.nodes[0].entries.swap(0, 1), "entries out of order");
    // A node key that is not 16 bytes.
    let simple = &cases
        .iter()
        .find(|c| c.name == "x_simple")
        .expect("x_simple")
        .payload;
    let mut b = body(simple).to_vec();
    assert_eq!(b[2], 16);
    b[2] = 15;
    b.remove(3);
    assert!(malformed(&payload(&b)), "short node key");
    // The listpack's element count for an entry (its last element) off by one.
    let mut b = body(simple).to_vec();
    let lp_start = 2 + 17 + 2;
    let lp_len = usize::from(b[20]);
    let count_at = lp_start + lp_len - 3; // the last entry's count, then its backlen, 0xff
    assert_eq!(b[count_at], 6);
    b[count_at] = 7;
    assert!(malformed(&payload(&b)), "lp-count");
    // A stream cut anywhere.
    for cut in 1..body(simple).len() {
        let p = payload(&body(simple)[..cut]);
        assert!(restore(&p, Limits::default()).is_err(), "cut at {cut}");
    }
}

#[test]
fn limits_hold_for_streams() {
    let cases = fixture();
    let big = &cases
        .iter()
        .find(|c| c.name == "x_nodes_count")
        .expect("case")
        .payload;
    assert_eq!(
        restore(big, Limits::new(100, 1 << 20)),
        Err(RdbError::TooLarge)
    );
    assert_eq!(
        restore(big, Limits::new(1 << 20, 1000)),
        Err(RdbError::TooLarge)
    );
    assert!(restore(big, Limits::new(251, 1 << 20)).is_ok());
    // A node count, a group count, a PEL size far beyond the payload: refused before
    // anything is reserved for them.
    for b in [
        &[19u8, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff][..],
        &[19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff],
        &[
            19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, b'g', 0, 0, 0, 0x80, 0x7f, 0xff, 0xff, 0xff,
        ],
    ] {
        assert!(restore(&payload(b), Limits::default()).is_err(), "{b:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn damaged_stream_payloads_never_panic(
        which in 0usize..64,
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let cases = fixture();
        let p = &cases[which % cases.len()].payload;
        let body_len = p.len() - 10;
        let i = at.index(body_len);
        let mut bad = p.clone();
        bad[i] ^= flip;
        prop_assert_eq!(restore(&bad, Limits::default()), Err(RdbError::BadVersionOrChecksum));
        if let Ok(v) = restore(&with_crc(bad), Limits::default()) {
            // Whatever decodes is a value `dump` writes and reads back.
            let again = dump(&v);
            prop_assert_eq!(restore(&again, Limits::default()), Ok(v));
        }
        let mut cut = p[..i].to_vec();
        cut.extend_from_slice(&p[body_len..]);
        prop_assert!(restore(&with_crc(cut), Limits::default()).is_err());
    }

    #[test]
    fn random_stream_bodies_never_panic(
        kind in prop::sample::select(vec![15u8, 19, 21]),
        nodes in 0u8..3,
        blob in prop::collection::vec(any::<u8>(), 0..300),
        plausible in any::<bool>(),
    ) {
        // A node whose key is right and whose listpack has a plausible header, so the walk
        // gets into the entries.
        let mut blob = blob;
        if plausible && blob.len() >= 7 {
            let n = blob.len() as u32;
            blob[..4].copy_from_slice(&n.to_le_bytes());
            let last = blob.len() - 1;
            blob[last] = 0xff;
        }
        let mut b = vec![kind, nodes, 16];
        b.extend([0u8; 15]);
        b.push(1);
        if blob.len() < 64 {
            b.push(blob.len() as u8);
        } else {
            b.extend([0x40 | (blob.len() >> 8) as u8, blob.len() as u8]);
        }
        b.extend(&blob);
        b.extend([1, 5, 0, 1, 0, 0, 0, 1, 0]);
        let _ = restore(&payload(&b), Limits::default());
        let _ = restore(&payload(&b), Limits::new(3, 100));
    }
}
