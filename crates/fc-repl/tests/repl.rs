//! fc-repl's core: frames (round trips at every split, corruption and abuse refused), the
//! handshake's checks and plans, a primary's mutation stream replicated through batchers and
//! applied idempotently (replays, duplicates, gaps, transactions), the backlog, the batchers.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fc_repl::{
    Applier, Backlog, Batcher, Compression, Entry, FLAG_ZSTD, Frame, FrameDecoder, FrameError,
    HEADER_LEN, Hello, Kind, LinkError, NeedSnapshot, Plan, Sealed, SendPolicy, Welcome,
    decode_watermarks, watermarks_frame,
};
use fc_shard::{EmbeddedStore, ListEnd, Mutation};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Hello),
        Just(Kind::Welcome),
        Just(Kind::Batch),
        Just(Kind::Heartbeat),
        Just(Kind::Ack),
        Just(Kind::AckRequest),
        Just(Kind::Refused),
    ]
}

/// A frame's fields, and whether to send it zstd-compressed.
type FrameSpec = (Kind, u32, u64, u32, Vec<u8>, bool);

fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    (
        kind(),
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        proptest::collection::vec(any::<u8>(), 0..300),
        any::<bool>(),
    )
}

/// The frames' bytes one after another, and the frames.
fn encode_all(frames: Vec<FrameSpec>) -> (Vec<u8>, Vec<Frame>) {
    let mut wire = Vec::new();
    let mut expected = Vec::new();
    for (kind, shard, first_seq, records, payload, zstd) in frames {
        // A repetitive payload so that zstd sometimes pays.
        let payload = if zstd { payload.repeat(4) } else { payload };
        let frame = Frame {
            kind,
            shard,
            first_seq,
            records,
            payload,
        };
        let compression = if zstd {
            Compression::Zstd(3)
        } else {
            Compression::None
        };
        frame.encode(compression, &mut wire);
        expected.push(frame);
    }
    (wire, expected)
}

proptest! {
    #[test]
    fn frames_round_trip_at_every_split(
        frames in proptest::collection::vec(frame_spec(), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let (wire, expected) = encode_all(frames);
        let decoder = FrameDecoder::default();
        let at = cut.index(wire.len() + 1);
        let mut buf = wire[..at].to_vec();
        let mut got = Vec::new();
        while let Some(f) = decoder.decode(&mut buf).unwrap() {
            got.push(f);
        }
        buf.extend_from_slice(&wire[at..]);
        while let Some(f) = decoder.decode(&mut buf).unwrap() {
            got.push(f);
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got, expected);
    }

    /// A reader that keeps its buffer (`decode_ref`): each frame as `decode` gives it, an
    /// uncompressed payload borrowed from the buffer at `HEADER_LEN`, and `missing` saying
    /// exactly how many bytes each incomplete frame still needs.
    #[test]
    fn frames_read_in_place_are_the_same_frames(
        frames in proptest::collection::vec(frame_spec(), 1..5),
    ) {
        let (wire, expected) = encode_all(frames);
        let decoder = FrameDecoder::default();
        let (mut at, mut got) = (0, Vec::new());
        // Fed as a reader that reads exactly what `missing` asks for.
        let mut have = 0;
        while at < wire.len() {
            match decoder.decode_ref(&wire[at..have]).unwrap() {
                Some((frame, used)) => {
                    let flags = wire[at + 6];
                    match &frame.payload {
                        Cow::Borrowed(payload) => {
                            prop_assert_eq!(flags & FLAG_ZSTD, 0);
                            prop_assert!(std::ptr::eq(payload.as_ptr(), wire[at + HEADER_LEN..].as_ptr()));
                        }
                        Cow::Owned(_) => prop_assert_ne!(flags & FLAG_ZSTD, 0),
                    }
                    got.push(frame.into_owned());
                    at += used;
                }
                None => {
                    let missing = decoder.missing(&wire[at..have]);
                    prop_assert!(missing > 0);
                    prop_assert!(have + missing <= wire.len());
                    if have - at >= HEADER_LEN {
                        // The header known: the frame is whole with what is missing, not before.
                        prop_assert!(decoder.decode_ref(&wire[at..have + missing]).unwrap().is_some());
                        prop_assert!(decoder.decode_ref(&wire[at..have + missing - 1]).unwrap().is_none());
                    } else {
                        prop_assert_eq!(missing, HEADER_LEN - (have - at));
                    }
                    have += missing;
                }
            }
        }
        prop_assert_eq!(have, wire.len());
        prop_assert_eq!(got, expected);
    }

    /// Any byte changed anywhere: an error, never a different frame.
    #[test]
    fn corruption_is_refused(payload in proptest::collection::vec(any::<u8>(), 1..100),
                             at in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let frame = Frame { kind: Kind::Batch, shard: 3, first_seq: 9, records: 1, payload };
        let mut wire = Vec::new();
        frame.encode(Compression::None, &mut wire);
        let i = at.index(wire.len());
        wire[i] ^= flip;
        let decoded = FrameDecoder::default().decode(&mut wire);
        prop_assert!(!matches!(decoded, Ok(Some(_))), "corrupted frame accepted: {decoded:?}");
    }
}

#[test]
fn abuse_is_refused_from_the_header() {
    let decoder = FrameDecoder { max_payload: 1024 };
    assert_eq!(
        decoder.decode(&mut b"*1\r\n".to_vec()),
        Err(FrameError::BadMagic)
    );
    let mut frame = Vec::new();
    Frame::empty(Kind::Heartbeat).encode(Compression::None, &mut frame);
    let mut future = frame.clone();
    future[4] = 9;
    assert_eq!(decoder.decode(&mut future), Err(FrameError::BadVersion(9)));
    let mut reserved = frame.clone();
    reserved[6] = 0x80;
    assert_eq!(decoder.decode(&mut reserved), Err(FrameError::ReservedBits));
    let mut huge = frame.clone();
    huge[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        decoder.decode(&mut huge),
        Err(FrameError::TooLarge { .. })
    ));
    // A compressed payload that would inflate past the limit.
    let bomb = Frame {
        payload: vec![0u8; 64 << 10],
        ..Frame::empty(Kind::Batch)
    };
    let mut wire = Vec::new();
    bomb.encode(Compression::Zstd(3), &mut wire);
    assert!(wire.len() < 1024, "compressed");
    assert_eq!(decoder.decode(&mut wire), Err(FrameError::BadZstd));
    // An incomplete frame consumes nothing.
    let mut partial = frame[..20].to_vec();
    assert_eq!(decoder.decode(&mut partial), Ok(None));
    assert_eq!(partial.len(), 20);
}

#[test]
fn the_handshake_checks_token_shards_and_plans_each_shard() {
    let hello = Hello {
        token: b"s3cret".to_vec(),
        replica_id: "replica-1".into(),
        port: 6381,
        primary_id: "primary-1".into(),
        watermarks: vec![0, 10, 50, 100],
    };
    let back = Hello::decode(&hello.frame()).unwrap();
    assert_eq!(back, hello);
    assert_eq!(
        hello.answer(b"wrong", "p", &[0; 4], &[None; 4]),
        Err(LinkError::BadToken)
    );
    assert!(matches!(
        hello.answer(b"s3cret", "p", &[0; 2], &[None; 2]),
        Err(LinkError::ShardCount {
            replica: 4,
            primary: 2
        })
    ));
    assert!(matches!(
        hello.answer(b"s3cret", "primary-1", &[0, 10, 40, 100], &[None; 4]),
        Err(LinkError::FromTheFuture {
            shard: 2,
            watermark: 50,
            primary: 40
        })
    ));
    // Shard 0: caught up; 1: the backlog reaches back to 11; 2: it starts at 60 (too late);
    // 3: nothing in the backlog and behind.
    let welcome = hello
        .answer(
            b"s3cret",
            "primary-1",
            &[0, 20, 80, 120],
            &[None, Some(11), Some(60), None],
        )
        .unwrap();
    assert_eq!(
        welcome.shards,
        [
            (Plan::Backlog, 0),
            (Plan::Backlog, 20),
            (Plan::Snapshot, 80),
            (Plan::Snapshot, 120)
        ]
    );
    assert_eq!(Welcome::decode(&welcome.frame()).unwrap(), welcome);
    // Under another primary (or a restarted one: a new id) the watermarks mean nothing: each
    // shard is planned as from zero, and none is "from the future".
    let other = hello
        .answer(
            b"s3cret",
            "primary-2",
            &[0, 10, 40, 0],
            &[None, Some(1), None, None],
        )
        .unwrap();
    assert_eq!(
        other.shards,
        [
            (Plan::Backlog, 0),
            (Plan::Backlog, 10),
            (Plan::Snapshot, 40),
            (Plan::Backlog, 0)
        ]
    );
    let ack = watermarks_frame(Kind::Ack, &[1, 2, 3]);
    assert_eq!(decode_watermarks(&ack).unwrap(), [1, 2, 3]);
    // Malformed payloads are errors, not panics or huge allocations.
    let mut bad = hello.frame();
    bad.payload.truncate(bad.payload.len() - 3);
    assert!(Hello::decode(&bad).is_err());
    let mut claim = watermarks_frame(Kind::Ack, &[]);
    claim.payload[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_watermarks(&claim).is_err());
}

/// A primary whose mutations go to per-shard batchers.
fn primary(shards: usize, policy: SendPolicy) -> (EmbeddedStore, Arc<Mutex<Vec<Sealed>>>) {
    let sealed: Arc<Mutex<Vec<Sealed>>> = Arc::default();
    let batchers: Arc<Mutex<Vec<Batcher>>> = Arc::new(Mutex::new(
        (0..shards)
            .map(|s| Batcher::new(s as u32, policy))
            .collect(),
    ));
    let (out, lanes) = (Arc::clone(&sealed), batchers);
    let store = EmbeddedStore::builder(shards)
        .mutation_sink(Arc::new(move |shard: usize, seq: u64, m: &Mutation<'_>| {
            let mut lanes = lanes.lock().unwrap();
            if let Some(s) = lanes[shard].push(seq, m, Instant::now()) {
                out.lock().unwrap().push(s);
            }
        }))
        .build();
    (store, sealed)
}

fn frames(sealed: &Arc<Mutex<Vec<Sealed>>>) -> Vec<Frame> {
    sealed
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.frame.clone())
        .collect()
}

#[test]
fn a_replica_applies_each_mutation_once_whatever_is_replayed() {
    let (primary, sealed) = primary(4, SendPolicy::Immediate);
    for i in 0..200u32 {
        let key = format!("key:{}", i % 37);
        match i % 5 {
            0 | 1 => primary.set(key.as_bytes(), format!("v{i}").as_bytes(), None),
            2 => {
                let _ = primary.hset(format!("h:{}", i % 7).as_bytes(), &[(b"f", key.as_bytes())]);
            }
            3 => {
                primary.delete(key.as_bytes());
            }
            _ => {
                primary.expire(key.as_bytes(), 3_600_000);
            }
        }
    }
    let frames = frames(&sealed);
    let replica = EmbeddedStore::new(4);
    let mut applier = Applier::new(vec![0; 4]);
    let mut applied = 0;
    for frame in &frames {
        applied += applier.apply(frame, &replica).unwrap().applied;
    }
    // Every mutation the primary made (a delete or expire of a missing key makes none).
    let made: usize = frames.iter().map(|f| f.records as usize).sum();
    assert!(made > 100, "{made}");
    assert_eq!(applied, made);
    // Everything again, then a second copy of every other frame: nothing changes.
    let watermarks = applier.watermarks().to_vec();
    for frame in frames.iter().chain(frames.iter().step_by(2)) {
        let done = applier.apply(frame, &replica).unwrap();
        assert_eq!(done.applied, 0);
    }
    assert_eq!(applier.watermarks(), &watermarks[..]);
    for i in 0..37 {
        let key = format!("key:{i}");
        assert_eq!(
            primary.get(key.as_bytes()),
            replica.get(key.as_bytes()),
            "{key}"
        );
        assert_eq!(
            primary.pttl_millis(key.as_bytes()).to_redis() > 0,
            replica.pttl_millis(key.as_bytes()).to_redis() > 0,
            "{key}'s expiry"
        );
    }
    for i in 0..7 {
        let key = format!("h:{i}");
        assert_eq!(
            primary.hget(key.as_bytes(), b"f").unwrap(),
            replica.hget(key.as_bytes(), b"f").unwrap()
        );
    }
}

#[test]
fn a_missing_batch_is_a_gap_and_nothing_after_it_applies() {
    let (primary, sealed) = primary(1, SendPolicy::Immediate);
    for i in 0..5 {
        primary.set(format!("k{i}").as_bytes(), b"v", None);
    }
    let frames = frames(&sealed);
    let replica = EmbeddedStore::new(1);
    let mut applier = Applier::new(vec![0]);
    applier.apply(&frames[0], &replica).unwrap();
    assert_eq!(
        applier.apply(&frames[2], &replica),
        Err(LinkError::Gap {
            shard: 0,
            expected: 2,
            got: 3
        })
    );
    assert_eq!(applier.watermarks(), [1]);
    assert_eq!(replica.get(b"k2"), None);
}

/// `SET k v`, no expiry.
fn set(k: &'static [u8]) -> Mutation<'static> {
    Mutation::Set {
        key: k,
        value: b"v",
        expire_at_ms: None,
    }
}

#[test]
fn a_transaction_applies_whole_at_its_end() {
    let mut batcher = Batcher::new(0, SendPolicy::Immediate);
    let now = Instant::now();
    // The begin leaves with the mutation after it, even in immediate batches.
    assert!(batcher.push(0, &Mutation::TxBegin { id: 7 }, now).is_none());
    let first = [
        batcher.push(1, &set(b"a"), now).unwrap(),
        batcher.push(2, &set(b"b"), now).unwrap(),
    ];
    assert_eq!(first[0].frame.records, 2);
    let end = batcher.push(0, &Mutation::TxEnd { id: 7 }, now).unwrap();
    let replica = EmbeddedStore::new(1);
    let mut applier = Applier::new(vec![0]);
    for s in &first {
        applier.apply(&s.frame, &replica).unwrap();
    }
    assert_eq!((replica.get(b"a"), replica.get(b"b")), (None, None), "held");
    let done = applier.apply(&end.frame, &replica).unwrap();
    assert_eq!(done.applied, 2);
    assert_eq!(replica.get(b"a"), Some(b"v".to_vec()));
    assert_eq!(replica.get(b"b"), Some(b"v".to_vec()));
    assert_eq!(applier.watermarks(), [2]);
}

#[test]
fn entries_point_into_their_frame_and_a_transactions_are_held_copies() {
    let mut batcher = Batcher::new(0, SendPolicy::Immediate);
    let now = Instant::now();
    let plain = batcher.push(1, &set(b"p"), now).unwrap();
    assert!(batcher.push(0, &Mutation::TxBegin { id: 3 }, now).is_none());
    let inside = batcher.push(2, &set(b"t"), now).unwrap();
    let end = batcher.push(0, &Mutation::TxEnd { id: 3 }, now).unwrap();
    let mut applier = Applier::new(vec![0]);
    // The entries a frame makes due, with their shards.
    let mut due = |frame: &Frame| {
        let mut got = Vec::new();
        applier
            .apply_entries(&frame.view(), |shard, entry| {
                got.push((shard, entry));
                Ok(())
            })
            .unwrap();
        got
    };
    let got = due(&plain.frame);
    let [(0, Entry::InFrame(range))] = &got[..] else {
        panic!("{got:?}");
    };
    // The range is the record's own bytes in the frame.
    let view = fc_wal::RecordView::decode(&plain.frame.payload[range.clone()]).unwrap();
    assert_eq!(view.key(), Some(&b"p"[..]));
    assert!(due(&inside.frame).is_empty(), "held until its end");
    let got = due(&end.frame);
    let [(0, Entry::Held(bytes))] = &got[..] else {
        panic!("{got:?}");
    };
    assert_eq!(got[0].1.bytes(&end.frame.payload), &bytes[..]);
    assert_eq!(
        fc_wal::Record::decode(bytes).unwrap(),
        fc_wal::Record::Set {
            key: b"t".to_vec(),
            value: b"v".to_vec(),
            expire_at_ms: None
        }
    );
    assert_eq!(applier.watermarks(), [2]);
}

#[test]
fn a_shards_own_groups_count_in_the_watermark_and_nest_in_transactions() {
    // LMOVE and SMOVE are groups of one shard: markers with id 0 that take sequences.
    let (primary, sealed) = primary(1, SendPolicy::Immediate);
    primary.rpush(b"l", &[b"a", b"b", b"c"]).unwrap();
    primary
        .lmove(b"l", b"l", ListEnd::Left, ListEnd::Right)
        .unwrap();
    primary.sadd(b"s", &[b"x"]).unwrap();
    primary.smove(b"s", b"t", b"x").unwrap();
    let mut frames = frames(&sealed);
    // And one inside a server transaction: its markers take no sequence.
    let mut batcher = Batcher::new(
        0,
        SendPolicy::Batch {
            max_records: 1000,
            max_bytes: 1 << 20,
            max_delay: Duration::from_secs(60),
        },
    );
    let now = Instant::now();
    let last = frames.iter().map(|f| f.first_seq).max().unwrap();
    let next = last + 5;
    batcher.push(0, &Mutation::TxBegin { id: 9 }, now);
    batcher.push(next, &Mutation::TxBegin { id: 0 }, now);
    batcher.push(
        next + 1,
        &Mutation::Set {
            key: b"in",
            value: b"1",
            expire_at_ms: None,
        },
        now,
    );
    batcher.push(next + 2, &Mutation::TxEnd { id: 0 }, now);
    batcher.push(
        next + 3,
        &Mutation::Set {
            key: b"in2",
            value: b"2",
            expire_at_ms: None,
        },
        now,
    );
    let replica = EmbeddedStore::new(1);
    let mut applier = Applier::new(vec![0]);
    for frame in &frames {
        applier.apply(frame, &replica).unwrap();
    }
    assert_eq!(
        replica.lrange(b"l", 0, -1).unwrap(),
        primary.lrange(b"l", 0, -1).unwrap()
    );
    assert_eq!(replica.scard(b"t").unwrap(), 1);
    // Every sequence, markers' included, is accounted for.
    assert_eq!(applier.watermarks(), [last]);
    let mut open = batcher.seal().unwrap().frame;
    open.first_seq = next;
    applier.reset_shard(0, next - 1);
    let done = applier.apply(&open, &replica).unwrap();
    assert_eq!(
        (done.applied, done.held),
        (0, 2),
        "held until the outer end"
    );
    let end = {
        batcher.push(0, &Mutation::TxEnd { id: 9 }, now);
        batcher.seal().unwrap().frame
    };
    let done = applier.apply(&end, &replica).unwrap();
    assert_eq!(done.applied, 2);
    assert_eq!(replica.get(b"in2"), Some(b"2".to_vec()));
    assert_eq!(applier.watermarks(), [next + 3]);
    // Replayed whole: nothing changes.
    frames.push(open);
    frames.push(end);
    for frame in &frames {
        assert_eq!(applier.apply(frame, &replica).unwrap().applied, 0);
    }
}

/// A link cut while a transaction was half-gathered: the next link resends from the
/// watermark, begin included, and the transaction applies once, whole. (A kept half-gathered
/// group took the resent begin as a nested one and never closed: a replica stuck on that
/// shard forever, seen in `repl_chaos`.)
#[test]
fn a_transaction_cut_off_by_a_lost_link_comes_again_whole() {
    for policy in [
        SendPolicy::Immediate,
        SendPolicy::Batch {
            max_records: 2,
            max_bytes: 1 << 20,
            max_delay: Duration::ZERO,
        },
    ] {
        let mut batcher = Batcher::new(0, policy);
        let now = Instant::now();
        let mut sealed = Vec::new();
        sealed.extend(batcher.push(1, &set(b"before"), now));
        // Full (two records) or due, a batch still does not end on the begin.
        assert!(batcher.push(0, &Mutation::TxBegin { id: 3 }, now).is_none());
        assert!(batcher.due(now + Duration::from_secs(1)).is_none());
        sealed.extend(batcher.push(2, &set(b"a"), now));
        sealed.extend(batcher.push(3, &set(b"b"), now));
        sealed.extend(batcher.push(0, &Mutation::TxEnd { id: 3 }, now));
        sealed.extend(batcher.seal());
        let mut backlog = Backlog::new(1, 1 << 20);
        for s in &sealed {
            backlog.push(0, s.first_seq, s.last_seq, encoded(&s.frame));
        }
        let decode = |bytes: &[u8]| {
            FrameDecoder::default()
                .decode_slice(bytes)
                .unwrap()
                .unwrap()
                .0
        };
        let replica = EmbeddedStore::new(1);
        let mut applier = Applier::new(vec![0]);
        // The first link gets the frames up to the one holding `a`, then is cut.
        let upto = sealed
            .iter()
            .position(|s| s.last_seq >= 2)
            .expect("a frame holds a");
        for s in &sealed[..=upto] {
            applier.apply(&s.frame, &replica).unwrap();
        }
        assert_eq!(applier.watermarks(), [1], "{policy:?}");
        assert_eq!(replica.get(b"a"), None, "held");
        // The next link: from the watermark on.
        applier.abandon_groups();
        let mut applied = 0;
        for frame in backlog.since(0, applier.watermarks()[0]).unwrap() {
            applied += applier.apply(&decode(frame), &replica).unwrap().applied;
        }
        assert_eq!(applied, 2, "{policy:?}");
        assert_eq!(applier.watermarks(), [3], "{policy:?}");
        assert_eq!(replica.get(b"b"), Some(b"v".to_vec()));
    }
}

#[test]
fn batchers_seal_by_count_bytes_and_delay() {
    let now = Instant::now();
    let set = Mutation::Set {
        key: b"key",
        value: b"value",
        expire_at_ms: None,
    };
    let policy = SendPolicy::Batch {
        max_records: 3,
        max_bytes: 1 << 20,
        max_delay: Duration::from_millis(5),
    };
    let mut by_count = Batcher::new(0, policy);
    assert!(by_count.push(1, &set, now).is_none());
    assert!(by_count.push(2, &set, now).is_none());
    let sealed = by_count.push(3, &set, now).unwrap();
    assert_eq!(
        (sealed.first_seq, sealed.last_seq, sealed.frame.records),
        (1, 3, 3)
    );
    let mut by_bytes = Batcher::new(
        0,
        SendPolicy::Batch {
            max_records: 1000,
            max_bytes: 40,
            max_delay: Duration::from_secs(1),
        },
    );
    assert!(by_bytes.push(1, &set, now).is_none());
    assert!(
        by_bytes.push(2, &set, now).is_some(),
        "two records pass 40 bytes"
    );
    let mut by_delay = Batcher::new(0, policy);
    assert!(by_delay.push(1, &set, now).is_none());
    assert_eq!(by_delay.deadline(), Some(now + Duration::from_millis(5)));
    assert!(by_delay.due(now + Duration::from_millis(1)).is_none());
    let late = by_delay.due(now + Duration::from_millis(6)).unwrap();
    assert_eq!(late.frame.records, 1);
    assert!(by_delay.deadline().is_none());
}

#[test]
fn a_sweep_takes_the_open_batch_unless_it_ends_on_a_transactions_begin() {
    let now = Instant::now();
    let set = Mutation::Set {
        key: b"key",
        value: b"value",
        expire_at_ms: None,
    };
    let mut batcher = Batcher::new(0, SendPolicy::default());
    assert!(batcher.sweep().is_none(), "nothing open");
    batcher.push(1, &set, now);
    batcher.push(2, &set, now);
    // Whatever its age: a sender sweeping every max_delay keeps every wait under it.
    let swept = batcher.sweep().unwrap();
    assert_eq!(
        (swept.first_seq, swept.last_seq, swept.frame.records),
        (1, 2, 2)
    );
    assert!(!batcher.is_open());
    // A server transaction's begin waits for the mutation after it.
    batcher.push(0, &Mutation::TxBegin { id: 7 }, now);
    assert!(batcher.sweep().is_none());
    assert!(batcher.is_open());
    batcher.push(3, &set, now);
    let swept = batcher.sweep().unwrap();
    assert_eq!(
        (swept.first_seq, swept.last_seq, swept.frame.records),
        (3, 3, 2)
    );
    // A sender gives a spent payload buffer back: the next batch is written into it.
    assert!(batcher.needs_buffer());
    let spent = swept.frame.payload;
    let (at, room) = (spent.as_ptr(), spent.capacity());
    batcher.reuse(spent);
    assert!(!batcher.needs_buffer());
    batcher.push(4, &set, now);
    let next = batcher.sweep().unwrap();
    assert_eq!(
        (next.frame.payload.as_ptr(), next.frame.payload.capacity()),
        (at, room)
    );
    assert_eq!((next.first_seq, next.frame.records), (4, 1));
    // A builder that has a buffer keeps it.
    batcher.reuse(next.frame.payload);
    batcher.reuse(vec![0u8; 3]);
    batcher.push(5, &set, now);
    assert_eq!(batcher.sweep().unwrap().frame.payload.as_ptr(), at);
}

#[test]
fn the_backlog_serves_recent_watermarks_and_asks_older_ones_for_a_snapshot() {
    let mut backlog = Backlog::new(2, 300);
    let frame = |n: usize| -> bytes::Bytes { vec![0u8; n].into() };
    for seq in 1..=10u64 {
        backlog.push(0, seq, seq, frame(100));
    }
    // 300 bytes: the three newest stay.
    assert_eq!(backlog.oldest(0), Some(8));
    assert_eq!(backlog.latest(0), 10);
    assert_eq!(backlog.since(0, 7).unwrap().len(), 3);
    assert_eq!(backlog.since(0, 9).unwrap().len(), 1);
    assert!(backlog.since(0, 10).unwrap().is_empty(), "caught up");
    assert_eq!(backlog.since(0, 6), Err(NeedSnapshot));
    // A shard that wrote nothing needs nothing.
    assert_eq!(backlog.oldest(1), None);
    assert!(backlog.since(1, 0).unwrap().is_empty());
    // A frame larger than the whole budget still stays (the one pushed always does), and
    // every older frame of every shard goes.
    backlog.push(1, 1, 1, frame(1000));
    assert_eq!(backlog.oldest(1), Some(1));
    assert_eq!(backlog.bytes(), 1000);
    assert_eq!(backlog.oldest(0), None);
    assert!(
        backlog.since(0, 10).unwrap().is_empty(),
        "shard 0 at its latest"
    );
    assert_eq!(backlog.since(0, 9), Err(NeedSnapshot));
}

#[test]
fn one_budget_keeps_every_shard_back_to_the_same_moment() {
    // Four shards, 1000 bytes in all; the writes go to shard 0 nine times in ten.
    let mut backlog = Backlog::new(4, 1000);
    let frame = |n: usize| -> bytes::Bytes { vec![0u8; n].into() };
    let mut seqs = [0u64; 4];
    for i in 0..100usize {
        let shard = if i % 10 == 9 { 1 + (i / 10) % 3 } else { 0 };
        seqs[shard] += 1;
        backlog.push(shard, seqs[shard], seqs[shard], frame(100));
    }
    assert_eq!(backlog.bytes(), 1000);
    // The ten newest frames stay, whatever their shards: the hot shard keeps nine of them
    // (the budget is not split into four lanes of 250 bytes, which would have kept two).
    assert_eq!(backlog.since(0, seqs[0] - 9).unwrap().len(), 9);
    assert_eq!(backlog.since(0, seqs[0] - 10), Err(NeedSnapshot));
    // The cold shards: the one written in the last ten pushes keeps its frame, the others
    // hold none (at their latest they need nothing; before it, a snapshot).
    let kept: Vec<usize> = (1..4).filter(|&s| backlog.oldest(s).is_some()).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    for (shard, &latest) in seqs.iter().enumerate().skip(1) {
        assert!(backlog.since(shard, latest).unwrap().is_empty());
        if !kept.contains(&shard) {
            assert_eq!(backlog.since(shard, latest - 1), Err(NeedSnapshot));
        }
    }
    // Eviction is by age: a push to a cold shard evicts the hot shard's oldest frame.
    let oldest_hot = backlog.oldest(0).unwrap();
    backlog.push(2, seqs[2] + 1, seqs[2] + 1, frame(100));
    assert_eq!(backlog.oldest(0), Some(oldest_hot + 1));
}

#[test]
fn backlog_cursors_follow_frame_indexes_across_markers_and_evictions() {
    let mut backlog = Backlog::new(1, 1000);
    let frame = |n: usize| -> bytes::Bytes { vec![n as u8; n].into() };
    assert_eq!(backlog.push(0, 1, 2, frame(100)), 0);
    // A marker-only frame (a transaction's end) covers no sequence: a replica already at
    // the latest sequence still needs it.
    assert_eq!(backlog.push(0, 0, 0, frame(10)), 1);
    assert_eq!(backlog.since_index(0, 2), Ok(1));
    assert_eq!(backlog.since(0, 2).unwrap().len(), 1);
    assert_eq!(backlog.push(0, 3, 3, frame(100)), 2);
    assert_eq!(backlog.from_index(0, 1).unwrap().len(), 2);
    assert!(backlog.from_index(0, 3).unwrap().is_empty());
    // Evictions keep indexes: a cursor behind them needs a snapshot.
    for seq in 4..20u64 {
        backlog.push(0, seq, seq, frame(100));
    }
    assert_eq!(backlog.next_index(0), 19);
    assert_eq!(backlog.from_index(0, 1), Err(NeedSnapshot));
    assert_eq!(backlog.from_index(0, 15).unwrap().len(), 4);
    assert_eq!(backlog.since_index(0, 2), Err(NeedSnapshot));
}

#[test]
fn a_link_copies_up_to_a_limit_and_goes_on_from_where_it_stopped() {
    let mut backlog = Backlog::new(1, 1 << 20);
    for seq in 1..=5 {
        backlog.push(0, seq, seq, vec![seq as u8; 100]);
    }
    let mut out = vec![0; 50];
    // Frames are whole: the one that starts below the limit is copied, the next is not.
    assert_eq!(backlog.copy_up_to(0, 0, &mut out, 200), Ok(2));
    assert_eq!(out.len(), 250);
    assert_eq!(
        backlog.copy_up_to(0, 2, &mut out, 250),
        Ok(0),
        "at the limit"
    );
    out.clear();
    assert_eq!(backlog.copy_up_to(0, 2, &mut out, usize::MAX), Ok(3));
    assert!(out[..100].iter().all(|&b| b == 3) && out[200..].iter().all(|&b| b == 5));
    assert_eq!(
        backlog.copy_up_to(0, 5, &mut out, usize::MAX),
        Ok(0),
        "nothing new"
    );
}

#[test]
fn links_copy_frames_out_and_evicted_buffers_come_back_for_reuse() {
    let mut backlog = Backlog::new(1, 300);
    let frame = |n: usize, fill: u8| vec![fill; n];
    let first = frame(100, 1);
    let first_at = first.as_ptr();
    backlog.push(0, 1, 1, first);
    backlog.push(0, 2, 2, frame(100, 2));
    backlog.push(0, 3, 3, frame(100, 3));
    let mut out = b"head".to_vec();
    assert_eq!(backlog.copy_from(0, 1, &mut out), Ok(2));
    assert_eq!(out.len(), 4 + 200);
    assert!(out[4..104].iter().all(|&b| b == 2) && out[104..].iter().all(|&b| b == 3));
    assert_eq!(backlog.copy_from(0, 3, &mut out), Ok(0), "nothing new");
    // A fourth frame evicts the first: its buffer comes back, the same memory.
    backlog.push(0, 4, 4, frame(100, 4));
    assert_eq!(backlog.bytes(), 300);
    let mut pool = Vec::new();
    backlog.recycle_into(&mut pool);
    assert_eq!(pool.len(), 1);
    assert_eq!(pool[0].as_ptr(), first_at);
    backlog.recycle_into(&mut pool);
    assert_eq!(pool.len(), 1, "given once");
    // A link behind the eviction needs a snapshot, and copies nothing.
    let before = out.len();
    assert_eq!(backlog.copy_from(0, 0, &mut out), Err(NeedSnapshot));
    assert_eq!(out.len(), before);
    // A frame counts its buffer's capacity.
    let mut roomy = Vec::with_capacity(250);
    roomy.extend_from_slice(&[5; 10]);
    backlog.push(0, 5, 5, roomy);
    assert_eq!(backlog.bytes(), 250, "the older frames made room");
}

fn encoded(frame: &Frame) -> bytes::Bytes {
    let mut out = Vec::new();
    frame.encode(Compression::None, &mut out);
    out.into()
}

#[test]
fn entries_encoded_elsewhere_make_the_same_batches_as_mutations() {
    let now = Instant::now();
    let policy = SendPolicy::Batch {
        max_records: 3,
        max_bytes: 1 << 20,
        max_delay: Duration::from_millis(1),
    };
    let stream = [
        (0, Mutation::TxBegin { id: 9 }),
        (
            1,
            Mutation::Set {
                key: b"a",
                value: b"1",
                expire_at_ms: Some(5),
            },
        ),
        (2, Mutation::Delete { key: b"b" }),
        (0, Mutation::TxEnd { id: 9 }),
        (3, Mutation::Flush),
    ];
    let mut by_mutation = Batcher::new(2, policy);
    let mut by_entry = Batcher::new(2, policy);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (seq, mutation) in &stream {
        a.extend(by_mutation.push(*seq, mutation, now));
        // The entry as a batch lays it out: sequence, length, the WAL's encoding.
        let mut entry = seq.to_le_bytes().to_vec();
        let mut encoded = Vec::new();
        fc_wal::encode_mutation(mutation, &mut encoded);
        entry.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        entry.extend_from_slice(&encoded);
        let begins = *seq == 0 && matches!(mutation, Mutation::TxBegin { .. });
        b.extend(by_entry.push_encoded(&entry, begins, now));
    }
    a.extend(by_mutation.sweep());
    b.extend(by_entry.sweep());
    assert_eq!(a.len(), 2);
    assert_eq!(a.len(), b.len());
    for (a, b) in a.iter().zip(&b) {
        assert_eq!((a.first_seq, a.last_seq), (b.first_seq, b.last_seq));
        assert_eq!(a.frame, b.frame);
    }
}
