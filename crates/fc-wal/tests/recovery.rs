//! The log round-trips every mutation, a reopened store equals the one that was closed
//! (digest), and damage is handled as `docs/DURABILITY.md` says for each recovery mode: a torn
//! last frame at every byte offset, a flipped bit mid-segment, a zeroed tail, appended junk
//! (reopened ten times), a missing middle segment, another shard count.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use fc_shard::{
    EmbeddedStore, GroupReadFrom, GroupStart, InsertPosition, ListEnd, ManualClock, Mutation,
    StreamId, StreamTrim, TrimStrategy, XAddId, XAddOptions, XClaimOptions, ZAddOptions,
};
use fc_wal::{
    FsyncPolicy, LoggedStore, Record, RecordView, RecoveryMode, WalConfig, WalError,
    encode_mutation,
};
use proptest::prelude::*;

const START_MS: u64 = 1_700_000_000_000;

fn open(config: &WalConfig, mode: RecoveryMode) -> Result<LoggedStore, WalError> {
    LoggedStore::open(config, 4, mode, |b| b)
}

/// The segments of every shard, in order.
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for shard in fs::read_dir(dir.join("wal")).unwrap() {
        for seg in fs::read_dir(shard.unwrap().path()).unwrap() {
            out.push(seg.unwrap().path());
        }
    }
    out.sort();
    out
}

/// Writes one key per shard-ish and returns the store's digest.
fn fill(store: &EmbeddedStore, n: usize) -> u64 {
    for i in 0..n {
        store.set(format!("k{i}"), format!("v{i}"), None);
    }
    store.digest()
}

#[test]
fn every_mutation_kind_round_trips_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(START_MS);
    let config = WalConfig {
        fsync: FsyncPolicy::Always,
        ..WalConfig::new(dir.path())
    };
    let digest = {
        let store = LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone()))
            .unwrap();
        store.set(b"s", b"v", Some(60_000));
        store.set(b"gone", b"v", None);
        store.delete(b"gone");
        store.set(b"p", b"v", Some(5));
        store.persist(b"p");
        store.expire(b"s", 120_000);
        store.set(b"{t}a", b"moved", None);
        store.rename(b"{t}a", b"{t}b", false).unwrap();
        store.incr_by(b"n", 41).unwrap();
        store.append(b"n", b"0").unwrap();
        store.hset(b"h", &[(b"f1", b"a"), (b"f2", b"b")]).unwrap();
        store.hdel(b"h", &[b"f1"]).unwrap();
        store.hincrbyfloat(b"h", b"x", b"1.5").unwrap();
        store.rpush(b"l", &[b"a", b"b", b"c", b"d", b"a"]).unwrap();
        store.pop(b"l", ListEnd::Left, 1).unwrap();
        store.lset(b"l", 0, b"B").unwrap();
        store
            .linsert(b"l", InsertPosition::After, b"B", b"x")
            .unwrap();
        store.lrem(b"l", -1, b"a").unwrap();
        store.ltrim(b"l", 0, 2).unwrap();
        store.sadd(b"set", &[b"a", b"b", b"c"]).unwrap();
        store.srem(b"set", &[b"a"]).unwrap();
        store.spop(b"set", 1).unwrap();
        let d = ZAddOptions::default();
        store
            .zadd(b"z", &[(1.0, b"a"), (2.0, b"b"), (3.0, b"c")], d)
            .unwrap();
        store.zincrby(b"z", 10.0, b"a").unwrap();
        store.zrem(b"z", &[b"b"]).unwrap();
        // Streams: every op kind (auto ids and delivery times are logged as results).
        let no = XAddOptions::default();
        for _ in 0..5 {
            store.xadd(b"x", XAddId::Auto, &[b"f", b"v"], no).unwrap();
        }
        store
            .xadd(b"x", XAddId::AutoSeq(START_MS + 9), &[b"g", b"w"], no)
            .unwrap();
        let first = StreamId::new(START_MS, 0);
        store.xdel(b"x", &[StreamId::new(START_MS, 1)]).unwrap();
        let maxlen = |n| StreamTrim {
            strategy: TrimStrategy::MaxLen(n),
            approx: false,
            limit: 0,
        };
        store.xtrim(b"x", maxlen(4)).unwrap();
        store
            .xgroup_create(b"x", b"g", GroupStart::Id(StreamId::MIN), false, None)
            .unwrap();
        store
            .xgroup_create(b"x", b"gone", GroupStart::Last, false, Some(3))
            .unwrap();
        store.xgroup_destroy(b"x", b"gone").unwrap();
        store
            .xreadgroup(b"x", b"g", b"alice", GroupReadFrom::New, 3, false)
            .unwrap();
        clock.advance_ms(5);
        store
            .xclaim(
                b"x",
                b"g",
                b"bob",
                1,
                &[StreamId::new(START_MS, 2)],
                XClaimOptions::default(),
            )
            .unwrap();
        store
            .xautoclaim(b"x", b"g", b"carol", 0, StreamId::MIN, 1, false)
            .unwrap();
        store
            .xack(b"x", b"g", &[StreamId::new(START_MS, 3)])
            .unwrap();
        store.xgroup_createconsumer(b"x", b"g", b"dave").unwrap();
        store.xgroup_delconsumer(b"x", b"g", b"alice").unwrap();
        store
            .xgroup_setid(b"x", b"g", GroupStart::Id(first), Some(1))
            .unwrap();
        store
            .xsetid(b"x", StreamId::new(START_MS + 100, 0), Some(50), None)
            .unwrap();
        store
            .xgroup_create(b"{t}mk", b"g", GroupStart::Last, true, None)
            .unwrap();
        store.set(b"short", b"v", Some(10));
        clock.advance_ms(11);
        assert_eq!(store.get(b"short"), None); // logged as expired
        store.clear_shard(store.shard_for_key(b"nothing-here-anyway"));
        store.digest()
    };
    let store =
        LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone())).unwrap();
    assert_eq!(store.digest(), digest);
    assert!(store.recovery().frames() > 25);
    assert_eq!(store.wal().stats().frames, 0, "replay is not logged again");
    // Writes continue the sequence, and a third open sees both generations.
    store.set(b"after", b"x", None);
    let digest = store.digest();
    drop(store);
    let store =
        LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone())).unwrap();
    assert_eq!(store.digest(), digest);
}

/// Random operations over every type, on a store that logs to `records`.
fn capture() -> (EmbeddedStore, Arc<Mutex<Vec<Vec<u8>>>>) {
    let payloads = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&payloads);
    let store = EmbeddedStore::builder(2)
        .mutation_sink(Arc::new(move |_s: usize, _q: u64, m: &Mutation<'_>| {
            let mut out = Vec::new();
            encode_mutation(m, &mut out);
            sink.lock().unwrap().push(out);
        }))
        .build();
    (store, payloads)
}

proptest! {
    #[test]
    fn payloads_decode_and_reencode_identically(
        ops in proptest::collection::vec((0u8..11, 0u8..4, any::<u8>(), -3i64..3), 1..60),
    ) {
        let (store, payloads) = capture();
        for (op, k, v, n) in ops {
            let key = [b'k', k];
            let val = [v];
            let _ = match op {
                0 => { store.set(key, val, (v % 2 == 0).then_some(1_000)); Ok(()) }
                1 => store.hset(&key, &[(&val, &val)]).map(drop),
                2 => store.push(&key, ListEnd::Right, &[&val], false).map(drop),
                3 => store.lrem(&key, n, &val).map(drop),
                4 => store.ltrim(&key, n, -n).map(drop),
                5 => store.sadd(&key, &[&val]).map(drop),
                6 => store.zadd(&key, &[(n as f64 / 3.0, &val)], ZAddOptions::default()).map(drop),
                7 => store.zrem(&key, &[&val]).map(drop),
                8 => { store.delete(&key); Ok(()) }
                9 if n > 0 => store
                    .xadd(&key, XAddId::AutoSeq(v.into()), &[&val, &val], XAddOptions::default())
                    .map(drop),
                9 => store
                    .xgroup_create(&key, &val, GroupStart::Id(StreamId::MIN), n == 0, Some(n))
                    .map(drop),
                _ => store.pop(&key, ListEnd::Left, 2).map(drop),
            };
        }
        for payload in payloads.lock().unwrap().iter() {
            let record = Record::decode(payload).unwrap();
            // Every change here is of one key `k?` (what a replica prefetches).
            let key = record.key();
            prop_assert!(key.is_some_and(|k| k.len() == 2 && k[0] == b'k'), "{:?}", record);
            // Re-encode through a replica's sink: the bytes must be identical.
            let (replica, again) = capture();
            record.apply(&replica, 0).ok();
            let again = again.lock().unwrap();
            if let Some(first) = again.first()
                && !matches!(record, Record::Delete { .. } | Record::ListPop { .. } | Record::ListRem { .. } | Record::ListTrim { .. } | Record::SRem { .. } | Record::ZRem { .. } | Record::HDel { .. })
            {
                prop_assert_eq!(first, payload);
            }
        }
        // Read in place, every payload is the same mutation: a set or a delete borrowed,
        // the rest owned.
        for payload in payloads.lock().unwrap().iter() {
            let record = Record::decode(payload).unwrap();
            let view = RecordView::decode(payload).unwrap();
            prop_assert_eq!(view.key(), record.key());
            match (&view, &record) {
                (RecordView::Set { key, value, expire_at_ms }, Record::Set { key: k, value: v, expire_at_ms: e }) => {
                    prop_assert_eq!((*key, *value, expire_at_ms), (&k[..], &v[..], e));
                }
                (RecordView::Delete { key }, Record::Delete { key: k } | Record::Expired { key: k } | Record::Evicted { key: k }) => {
                    prop_assert_eq!(*key, &k[..]);
                }
                (RecordView::Owned(owned), _) => prop_assert_eq!(owned, &record),
                _ => prop_assert!(false, "{:?} read as {:?}", record, view),
            }
            let mut trailing = payload.clone();
            trailing.push(0);
            prop_assert!(RecordView::decode(&trailing).is_err());
        }
        // Truncated payloads are errors, never panics.
        for payload in payloads.lock().unwrap().iter() {
            for cut in 0..payload.len() {
                prop_assert!(Record::decode(&payload[..cut]).is_err());
                prop_assert!(RecordView::decode(&payload[..cut]).is_err());
            }
        }
        // The same mutations as one batch payload (a shared log's: each after its shard)
        // decode to the same records, in order; a cut inside an entry is an error.
        let payloads = payloads.lock().unwrap();
        let mut batch = Vec::new();
        let mut ends = Vec::new();
        for (i, payload) in payloads.iter().enumerate() {
            batch.extend_from_slice(&(i as u16).to_le_bytes());
            batch.extend_from_slice(payload);
            ends.push(batch.len());
        }
        if payloads.is_empty() {
            // Nothing changed the store: an empty batch is not a valid one.
            prop_assert!(Record::decode_batch(&batch, true).is_err());
            return Ok(());
        }
        let decoded = Record::decode_batch(&batch, true).unwrap();
        prop_assert_eq!(decoded.len(), payloads.len());
        for (i, ((shard, record), payload)) in decoded.iter().zip(payloads.iter()).enumerate() {
            prop_assert_eq!(*shard, Some(i as u16));
            prop_assert_eq!(format!("{record:?}"), format!("{:?}", Record::decode(payload).unwrap()));
        }
        for cut in 0..batch.len() {
            let decoded = Record::decode_batch(&batch[..cut], true);
            prop_assert_eq!(decoded.is_ok(), ends.contains(&cut), "cut {}", cut);
        }
    }
}

#[test]
fn a_torn_last_frame_at_every_offset() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    {
        let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
        fill(&store, 20);
        store.set(b"last", b"the last frame", None);
    }
    let seg = segment_files(dir.path()).pop().unwrap();
    let full = fs::read(&seg).unwrap();
    let frame_len = 20 + 1 + 1 + 4 + 1 + 14 + 1 + 4; // header, tag, key, value, flag, crc
    let start = full.len() - frame_len;
    for cut in start..full.len() {
        fs::write(&seg, &full[..cut]).unwrap();
        // Strict refuses (unless the cut is exactly at the frame boundary), naming the file.
        let strict = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b);
        if cut == start {
            assert!(strict.is_ok());
        } else {
            match strict {
                Err(WalError::Corrupt { path, offset, .. }) => {
                    assert_eq!(path, seg);
                    assert_eq!(offset, start as u64);
                }
                other => panic!("cut {cut}: {other:?}"),
            }
            assert_eq!(fs::read(&seg).unwrap().len(), cut, "strict changes nothing");
        }
        // Tolerate-tail truncates to the last whole frame and keeps everything before it.
        let store = LoggedStore::open(&config, 1, RecoveryMode::TolerateTail, |b| b).unwrap();
        assert_eq!(store.len(), 20);
        assert_eq!(store.get(b"last"), None);
        assert_eq!(store.recovery().logs[0].damage.is_some(), cut != start);
        drop(store);
        assert_eq!(fs::read(&seg).unwrap().len(), start, "cut {cut}");
    }
}

#[test]
fn damage_mid_segment_refuses_unless_point_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        store.set(b"first", b"1", None);
        fill(&store, 200);
    }
    // Flip one bit in the middle of the largest segment.
    let seg = segment_files(dir.path())
        .into_iter()
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x04;
    fs::write(&seg, &bytes).unwrap();
    for mode in [RecoveryMode::TolerateTail, RecoveryMode::Strict] {
        match open(&config, mode) {
            Err(WalError::Corrupt { path, offset, .. }) => {
                assert_eq!(path, seg);
                assert!(offset as usize <= mid && mid - (offset as usize) < 64);
            }
            other => panic!("{mode:?}: {other:?}"),
        }
    }
    let store = open(&config, RecoveryMode::PointInTime).unwrap();
    let shard = store
        .recovery()
        .logs
        .iter()
        .find(|s| s.damage.is_some())
        .unwrap();
    assert!(shard.damage.as_ref().unwrap().bytes > 0);
    assert!(store.len() < 201 && store.len() > 100);
    drop(store);
    assert_eq!(
        fs::read(&seg).unwrap().len(),
        bytes.len(),
        "point-in-time deletes nothing"
    );
}

#[test]
fn zeroed_tail_and_appended_junk_are_tails() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    let digest;
    {
        let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
        digest = fill(&store, 300);
    }
    let seg = segment_files(dir.path()).pop().unwrap();
    let good = fs::read(&seg).unwrap();
    // Junk appended, reopened ten times: the same contents every time.
    let mut junk = good.clone();
    junk.extend_from_slice(b"FCW2 this is not a frame at all, just junk");
    fs::write(&seg, &junk).unwrap();
    for round in 0..10 {
        let store = LoggedStore::open(&config, 1, RecoveryMode::TolerateTail, |b| b).unwrap();
        assert_eq!(store.digest(), digest, "round {round}");
        assert_eq!(store.recovery().logs[0].damage.is_some(), round == 0);
    }
    assert_eq!(fs::read(&seg).unwrap(), good);
    // Junk appended five more times between reopenings.
    for _ in 0..5 {
        let mut bytes = fs::read(&seg).unwrap();
        bytes.extend_from_slice(&[0xAB; 37]);
        fs::write(&seg, &bytes).unwrap();
        let store = LoggedStore::open(&config, 1, RecoveryMode::TolerateTail, |b| b).unwrap();
        assert_eq!(store.digest(), digest);
    }
    // The last 2400 bytes zeroed: those frames are gone, the rest stays.
    let mut zeroed = good.clone();
    let len = zeroed.len();
    zeroed[len - 2400..].fill(0);
    fs::write(&seg, &zeroed).unwrap();
    let store = LoggedStore::open(&config, 1, RecoveryMode::TolerateTail, |b| b).unwrap();
    let damage = store.recovery().logs[0].damage.clone().unwrap();
    assert!(damage.offset as usize <= len - 2400);
    assert!(store.len() < 300 && store.len() > 200);
}

#[test]
fn rotation_and_a_missing_middle_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        segment_bytes: 512,
        ..WalConfig::new(dir.path())
    };
    let digest;
    {
        let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
        digest = fill(&store, 200);
        assert!(store.wal().stats().segments > 5);
    }
    let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
    assert_eq!(store.digest(), digest);
    assert_eq!(store.recovery().frames(), 200);
    drop(store);
    let segs = segment_files(dir.path());
    fs::remove_file(&segs[segs.len() / 2]).unwrap();
    for mode in [RecoveryMode::TolerateTail, RecoveryMode::Strict] {
        assert!(matches!(
            open_one(&config, mode),
            Err(WalError::Corrupt { .. })
        ));
    }
    let store = open_one(&config, RecoveryMode::PointInTime).unwrap();
    assert!(store.len() < 200);
}

fn open_one(config: &WalConfig, mode: RecoveryMode) -> Result<LoggedStore, WalError> {
    LoggedStore::open(config, 1, mode, |b| b)
}

#[test]
fn another_shard_count_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        fill(&store, 10);
    }
    let err = LoggedStore::open(&config, 8, RecoveryMode::TolerateTail, |b| b).unwrap_err();
    assert!(matches!(err, WalError::ShardCount { .. }), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random writes over every type, with TTLs and clock jumps, then a reopen: the recovered
    /// store's digest equals the live one's.
    #[test]
    fn random_histories_recover_exactly(
        ops in proptest::collection::vec((0u8..14, 0u8..6, any::<u8>(), -3i64..4), 1..120),
        segment_bytes in prop_oneof![Just(256u64), Just(64 << 20)],
        write_buffer_bytes in prop_oneof![Just(0usize), Just(300), Just(1 << 16)],
        logs in 0usize..4,
        spread in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(START_MS);
        let config = WalConfig {
            segment_bytes,
            write_buffer_bytes,
            logs,
            ..WalConfig::new(dir.path())
        };
        // One hash tag (every key in one shard) or keys spread over the shards (and, with
        // shared logs, several shards' frames interleaved in one log).
        let name = |k: u8| if spread { format!("k{k}") } else { format!("{{k}}{k}") };
        let digest = {
            let store = LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| {
                b.clock(clock.clone())
            })
            .unwrap();
            for (op, k, v, n) in ops {
                let key = name(k).into_bytes();
                let other = name((k + 1) % 6).into_bytes();
                let val = [v];
                let _ = match op {
                    0 => { store.set(&key, val, (n > 0).then(|| n as u64 * 10)); Ok(()) }
                    1 => store.hset(&key, &[(&val, &val)]).map(drop),
                    2 => store.push(&key, ListEnd::Right, &[&val], false).map(drop),
                    3 => store.lrem(&key, n, &val).map(drop),
                    4 => store.ltrim(&key, n, -n).map(drop),
                    5 => store.sadd(&key, &[&val]).map(drop),
                    6 => store.zadd(&key, &[(n as f64 / 3.0, &val)], ZAddOptions::default()).map(drop),
                    7 => store.spop(&key, 1).map(drop),
                    8 => { store.delete(&key); Ok(()) }
                    9 => { store.expire(&key, (n.unsigned_abs() + 1) * 10); Ok(()) }
                    10 => { store.persist(&key); Ok(()) }
                    11 => store.rename(&key, &other, false).map(drop),
                    12 => { clock.advance_ms(v as u64 / 4); Ok(()) }
                    _ => store.incr_by(&key, n).map(drop),
                };
            }
            store.digest()
        };
        let store = LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone()))
            .unwrap();
        prop_assert_eq!(store.digest(), digest);
    }
}

#[test]
fn a_kill_before_flush_loses_only_a_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        write_buffer_bytes: 1 << 12,
        ..WalConfig::new(dir.path())
    };
    let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
    // The digest after every write: the recovered store must equal one of them.
    let mut digests = vec![store.digest()];
    for i in 0..500 {
        store.set(format!("k{i}"), [7u8; 40], None);
        digests.push(store.digest());
        if i == 300 {
            store.wal().flush_all().unwrap();
        }
    }
    // A kill: no drop, no flush; gathered frames are lost.
    std::mem::forget(store);
    let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
    let n = store.len();
    assert!((302..500).contains(&n), "kept {n}");
    assert_eq!(store.digest(), digests[n]);
}

#[test]
fn group_commit_syncs_once_for_many_appends_and_reopens_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        fsync: FsyncPolicy::Always,
        group_commit: true,
        ..WalConfig::new(dir.path())
    };
    let digest = {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        let digest = fill(&store, 100);
        let wal = store.wal();
        assert_eq!(
            wal.stats().fsyncs,
            0,
            "appends only gather under group commit"
        );
        assert!(!wal.is_durable(wal.appended()));
        wal.commit().unwrap();
        assert!(wal.is_durable(wal.appended()));
        // One fdatasync per dirty shard, not per frame.
        let fsyncs = wal.stats().fsyncs;
        assert!((1..=4).contains(&fsyncs), "{fsyncs} fsyncs");
        wal.commit().unwrap();
        assert_eq!(wal.stats().fsyncs, fsyncs, "nothing new: no sync");
        digest
    };
    let store = open(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest);
}

/// The log directories under `dir/wal` that hold segments, by name.
fn log_dirs(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| fs::read_dir(p).unwrap().next().is_some())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[test]
fn shared_logs_hold_every_shard_and_a_directory_keeps_its_layout() {
    let dir = tempfile::tempdir().unwrap();
    let shared = WalConfig {
        fsync: FsyncPolicy::Always,
        group_commit: true,
        logs: 2,
        ..WalConfig::new(dir.path())
    };
    let digest = {
        let store = LoggedStore::open(&shared, 8, RecoveryMode::Strict, |b| b).unwrap();
        assert_eq!(store.wal().log_count(), 2);
        let digest = fill(&store, 200);
        store.wal().commit().unwrap();
        // Eight shards dirty, two logs: two fdatasyncs.
        assert_eq!(store.wal().stats().fsyncs, 2);
        digest
    };
    assert_eq!(log_dirs(dir.path()), ["log-0000", "log-0001"]);
    // Reopened with the default layout (one log per shard) asked for: the directory's own
    // layout is used, and new writes go on in it.
    let per_shard = WalConfig::new(dir.path());
    assert_eq!(per_shard.with_layout_on_disk().unwrap().logs, 2);
    let digest = {
        let store = LoggedStore::open(&per_shard, 8, RecoveryMode::Strict, |b| b).unwrap();
        assert_eq!(store.digest(), digest);
        assert_eq!(store.recovery().logs.len(), 2);
        assert_eq!(store.recovery().mutations(), 200);
        // Group commit wrote each log's 100 mutations in one batch frame.
        assert_eq!(store.recovery().frames(), 2);
        store.set(b"after", b"reopen", None);
        store.digest()
    };
    assert_eq!(log_dirs(dir.path()), ["log-0000", "log-0001"]);
    let store = LoggedStore::open(&shared, 8, RecoveryMode::Strict, |b| b).unwrap();
    assert_eq!(store.digest(), digest);
    assert_eq!(store.get(b"after"), Some(b"reopen".to_vec()));
}

#[test]
fn a_frame_of_a_shard_that_does_not_write_to_its_log_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        logs: 2,
        ..WalConfig::new(dir.path())
    };
    {
        let store = LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b).unwrap();
        fill(&store, 40);
    }
    // A well-formed frame (right CRC, next sequence number) naming shard 1 in log 0, which
    // only shards 0 and 2 write to.
    let log0 = dir.path().join("wal/log-0000");
    let segment = fs::read_dir(&log0).unwrap().next().unwrap().unwrap().path();
    let frames = {
        let store = LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b).unwrap();
        store.recovery().logs[0].last_seq
    };
    let mut payload = Vec::new();
    encode_mutation(
        &Mutation::Set {
            key: b"stray",
            value: b"x",
            expire_at_ms: None,
        },
        &mut payload,
    );
    let mut frame = Vec::new();
    fc_wal::encode_frame_of(Some(1), frames + 1, &payload, &mut frame);
    let len = fs::metadata(&segment).unwrap().len();
    let mut bytes = fs::read(&segment).unwrap();
    bytes.extend_from_slice(&frame);
    fs::write(&segment, &bytes).unwrap();
    let err = LoggedStore::open(&config, 4, RecoveryMode::Strict, |b| b).unwrap_err();
    assert!(
        err.to_string().contains("frame of shard 1 in log 0"),
        "{err}"
    );
    // The default mode cuts it as a damaged tail, and nothing else is lost.
    let store = LoggedStore::open(&config, 4, RecoveryMode::TolerateTail, |b| b).unwrap();
    assert_eq!(store.len(), 40);
    assert_eq!(store.get(b"stray"), None);
    assert_eq!(fs::metadata(&segment).unwrap().len(), len);
}

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

/// A hook failing the `nth` operation `op` (counting from 1) with `fault`, and every later one
/// with the same errno (a full disk stays full).
fn fail_from(op: fc_wal::FileOp, nth: usize, written: usize, errno: i32) -> fc_wal::Faults {
    let seen = std::sync::atomic::AtomicUsize::new(0);
    fc_wal::Faults::new(move |o, _| {
        if o != op {
            return None;
        }
        let n = seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        (n >= nth).then(|| {
            if n == nth {
                fc_wal::Fault::short(written, errno)
            } else {
                fc_wal::Fault::os(errno)
            }
        })
    })
}

#[test]
fn a_full_disk_mid_frame_cuts_the_partial_frame_and_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = WalConfig {
        fsync: FsyncPolicy::No,
        // The third frame's write stores 11 bytes, then the disk is full.
        faults: fail_from(fc_wal::FileOp::Write, 3, 11, ENOSPC),
        ..WalConfig::new(dir.path())
    };
    {
        let store = LoggedStore::open(&faulty, 1, RecoveryMode::Strict, |b| b).unwrap();
        store.set(b"k0", b"v0", None);
        store.set(b"k1", b"v1", None);
        assert!(store.wal().health().is_ok());
        store.set(b"k2", b"v2", None);
        let err = store.wal().health().unwrap_err();
        assert!(err.to_string().contains("No space left on device"), "{err}");
        assert!(store.wal().has_failed());
        assert_eq!(store.wal().stats().truncations, 1);
        // Nothing more is logged, and syncing reports the failure instead of claiming success.
        store.set(b"k3", b"v3", None);
        assert!(store.wal().sync_all().is_err());
        assert_eq!(store.wal().stats().frames, 3);
    }
    // The partial frame was cut: the segment ends at the last whole frame, which even
    // strict recovery accepts, and what reached the log before the failure is all there.
    let store =
        LoggedStore::open(&WalConfig::new(dir.path()), 1, RecoveryMode::Strict, |b| b).unwrap();
    assert_eq!(store.recovery().frames(), 2);
    assert_eq!(store.get(b"k1"), Some(b"v1".to_vec()));
    assert_eq!(store.get(b"k2"), None);
    assert!(store.recovery().logs[0].damage.is_none());
}

#[test]
fn a_failed_fdatasync_fails_the_group_commit_and_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = WalConfig {
        fsync: FsyncPolicy::Always,
        group_commit: true,
        faults: fail_from(fc_wal::FileOp::Sync, 2, 0, EIO),
        ..WalConfig::new(dir.path())
    };
    let store = LoggedStore::open(&faulty, 2, RecoveryMode::Strict, |b| b).unwrap();
    store.set(b"a", b"1", None);
    store.wal().commit().unwrap();
    assert!(store.wal().is_durable(store.wal().appended()));
    store.set(b"b", b"2", None);
    let err = store.wal().commit().unwrap_err();
    assert!(err.to_string().contains("Input/output error"), "{err}");
    // Not durable, and never claimed to be later: the log refuses from now on.
    assert!(!store.wal().is_durable(store.wal().appended()));
    assert!(store.wal().commit().is_err());
    assert!(store.wal().has_failed());
    // One log at a time (the server's path) says the same.
    let log = store.wal().log_of(0);
    store.set(b"c", b"3", None);
    assert!(
        (0..store.wal().log_count()).any(|l| store.wal().commit_log(l).is_err()),
        "log {log}"
    );
}

#[test]
fn a_segment_that_cannot_be_created_poisons_the_log_before_any_frame() {
    let dir = tempfile::tempdir().unwrap();
    let faulty = WalConfig {
        faults: fail_from(fc_wal::FileOp::Create, 1, 0, ENOSPC),
        ..WalConfig::new(dir.path())
    };
    {
        let store = LoggedStore::open(&faulty, 1, RecoveryMode::Strict, |b| b).unwrap();
        store.set(b"k", b"v", None);
        assert!(store.wal().has_failed());
        assert_eq!(store.wal().stats().frames, 0);
    }
    let store =
        LoggedStore::open(&WalConfig::new(dir.path()), 1, RecoveryMode::Strict, |b| b).unwrap();
    assert_eq!(store.len(), 0);
}

/// `everysec`: frames wait in the log's buffer, and the first append a second after the last
/// sync writes them all and syncs (the embedded store has no timer thread: the append path
/// is its clock, read coarsely).
#[test]
fn everysec_syncs_on_the_first_append_after_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        fsync: FsyncPolicy::EverySec,
        ..WalConfig::new(dir.path())
    };
    let mut log = fc_wal::ShardLog::open(&config, 0, 1, 1).unwrap();
    let set = Mutation::Set {
        key: b"k",
        value: b"v",
        expire_at_ms: None,
    };
    log.append(&set).unwrap();
    log.append(&set).unwrap();
    assert_eq!(log.stats().fsyncs, 0);
    let written = |dir: &Path| -> u64 {
        segment_files(dir)
            .iter()
            .map(|p| fs::metadata(p).unwrap().len())
            .sum()
    };
    std::thread::sleep(std::time::Duration::from_millis(1100));
    log.append(&set).unwrap();
    assert_eq!(log.stats().fsyncs, 1, "{:?}", log.stats());
    // The round is in the sync-time histogram, in the bucket of its duration.
    let stats = log.stats();
    assert_eq!(stats.sync_histogram.iter().sum::<u64>(), 1);
    let bucket = stats.sync_histogram.iter().position(|&n| n == 1).unwrap();
    let bound = fc_wal::SYNC_BUCKETS_MICROS
        .get(bucket)
        .copied()
        .unwrap_or(u64::MAX);
    assert!(stats.fsync_micros <= bound, "{stats:?}");
    let on_disk = written(dir.path());
    // Three frames are on disk, nothing is left behind in the buffer.
    log.flush().unwrap();
    assert_eq!(written(dir.path()), on_disk);
    assert!(on_disk > 0);
}

/// `everysec` with a syncing thread of the caller's (`background_sync`, the server's
/// fc-persist): neither a rotation nor an append a second after the last sync waits for the
/// disk; the next sync runs every closed segment's `fdatasync` in order, then the current
/// segment's, and every frame reopens.
#[test]
fn everysec_rotation_leaves_the_closed_segments_sync_to_the_next_one() {
    let dir = tempfile::tempdir().unwrap();
    let synced = Arc::new(Mutex::new(Vec::<PathBuf>::new()));
    let record = Arc::clone(&synced);
    let config = WalConfig {
        fsync: FsyncPolicy::EverySec,
        segment_bytes: 512,
        background_sync: true,
        faults: fc_wal::Faults::new(move |op, path| {
            if op == fc_wal::FileOp::Sync {
                record.lock().unwrap().push(path.to_path_buf());
            }
            None
        }),
        ..WalConfig::new(dir.path())
    };
    let mut log = fc_wal::ShardLog::open(&config, 0, 1, 1).unwrap();
    let value = [b'v'; 40];
    let set = |i: u32| Mutation::Set {
        key: format!("k{i}").into_bytes().leak(),
        value: &value,
        expire_at_ms: None,
    };
    for i in 0..100 {
        log.append(&set(i)).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(1100));
    log.append(&set(100)).unwrap();
    let segments = segment_files(dir.path());
    assert!(segments.len() > 5, "{segments:?}");
    assert_eq!(log.stats().fsyncs, 0);
    assert!(synced.lock().unwrap().is_empty());
    log.sync().unwrap();
    assert_eq!(log.stats().fsyncs, segments.len() as u64);
    // Every segment once, oldest first, the current one last.
    assert_eq!(*synced.lock().unwrap(), segments);
    // Nothing is left to sync.
    log.sync().unwrap();
    assert_eq!(synced.lock().unwrap().len(), segments.len());
    drop(log);
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.recovery().frames(), 101);
    assert_eq!(store.get(b"k100"), Some(value.to_vec()));
}

/// The deferred sync of a closed segment failing poisons the log like any failed sync.
#[test]
fn a_closed_segments_failed_sync_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        fsync: FsyncPolicy::EverySec,
        segment_bytes: 256,
        background_sync: true,
        faults: fail_from(fc_wal::FileOp::Sync, 1, 0, EIO),
        ..WalConfig::new(dir.path())
    };
    let mut log = fc_wal::ShardLog::open(&config, 0, 1, 1).unwrap();
    let set = Mutation::Set {
        key: b"key",
        value: &[b'v'; 100],
        expire_at_ms: None,
    };
    for _ in 0..10 {
        log.append(&set).unwrap();
    }
    let err = log.sync().unwrap_err();
    assert!(err.to_string().contains("Input/output error"), "{err}");
    assert!(log.poisoned().is_some());
    assert!(log.append(&set).is_err());
}

/// A power loss just after an `everysec` rotation: the closed segment lost its last frames
/// (its final sync was still to come) while the next segment reached the disk with only its
/// header. The damage is the log's tail: `TolerateTail` truncates it and removes the
/// frame-less segment after it, keeping exactly what `PointInTime` reads; `Strict` refuses.
/// If the later segment still holds a frame, the hole is in the middle and is refused.
#[test]
fn a_torn_segment_followed_only_by_a_frameless_one_is_a_tail() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        segment_bytes: 512,
        ..WalConfig::new(dir.path())
    };
    {
        let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
        fill(&store, 200);
    }
    let segs = segment_files(dir.path());
    assert!(segs.len() > 3, "{segs:?}");
    let (torn, last) = (&segs[segs.len() - 2], &segs[segs.len() - 1]);
    let cut = |path: &Path, len: u64| {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .unwrap()
            .set_len(len)
            .unwrap();
    };
    cut(torn, fs::metadata(torn).unwrap().len() - 3);

    // The last segment still holds frames: a hole in the middle.
    assert!(matches!(
        open_one(&config, RecoveryMode::TolerateTail),
        Err(WalError::Corrupt { .. })
    ));

    cut(last, fc_wal::SEGMENT_HEADER_LEN as u64);
    assert!(matches!(
        open_one(&config, RecoveryMode::Strict),
        Err(WalError::Corrupt { .. })
    ));
    let kept = open_one(&config, RecoveryMode::PointInTime)
        .unwrap()
        .recovery()
        .frames();
    assert!(kept > 0 && kept < 200, "{kept}");
    let store = open_one(&config, RecoveryMode::TolerateTail).unwrap();
    assert_eq!(store.recovery().frames(), kept);
    let damage = store.recovery().logs[0].damage.clone().expect("damage");
    assert_eq!(&damage.path, torn);
    drop(store);
    assert_eq!(segment_files(dir.path()), segs[..segs.len() - 1].to_vec());
    // Clean from now on: even strict recovery reads it, and the log goes on after it.
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.recovery().frames(), kept);
    store.set(b"after", b"1", None);
    drop(store);
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.recovery().frames(), kept + 1);
    assert_eq!(store.get(b"after"), Some(b"1".to_vec()));
}

/// A store whose log gathers frames (a write buffer) and two explicit writes: 10 mutations,
/// then 5. Returns the segment.
fn two_batches(config: &WalConfig) -> PathBuf {
    let store = LoggedStore::open(config, 1, RecoveryMode::Strict, |b| b).unwrap();
    for i in 0..10 {
        store.set(format!("k{i}"), b"first", None);
    }
    store.wal().flush_all().unwrap();
    for i in 10..15 {
        store.set(format!("k{i}"), b"second", None);
    }
    store.wal().flush_all().unwrap();
    let stats = store.wal().stats();
    assert_eq!(
        (stats.frames, stats.mutations),
        (2, 15),
        "one batch frame per write"
    );
    drop(store);
    segment_files(config.dir.as_path()).pop().unwrap()
}

#[test]
fn batch_frames_replay_whole_and_from_inside_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        write_buffer_bytes: 1 << 16,
        ..WalConfig::new(dir.path())
    };
    let seg = two_batches(&config);
    let bytes = fs::read(&seg).unwrap();
    // Segment header, then a frame flagged as a batch, starting at sequence 1.
    assert_eq!(&bytes[32..36], b"FCW2");
    assert_eq!(bytes[36], fc_wal::FLAG_BATCH);
    assert_eq!(u64::from_le_bytes(bytes[44..52].try_into().unwrap()), 1);
    {
        let store = LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b).unwrap();
        assert_eq!(store.len(), 15);
        assert_eq!(store.recovery().frames(), 2);
        assert_eq!(store.recovery().mutations(), 15);
        assert_eq!(store.recovery().logs[0].last_seq, 15);
    }
    // As after an image covering sequences 1..=6: the first batch is replayed from its
    // seventh mutation on.
    let fresh = EmbeddedStore::new(1);
    let report = fc_wal::recover_from(&config, &fresh, RecoveryMode::Strict, &[7]).unwrap();
    assert_eq!(report.mutations(), 9);
    assert_eq!(report.frames(), 2);
    assert_eq!(fresh.get(b"k5"), None);
    assert_eq!(fresh.get(b"k6"), Some(b"first".to_vec()));
    assert_eq!(fresh.get(b"k14"), Some(b"second".to_vec()));
}

#[test]
fn a_torn_batch_frame_loses_the_whole_batch_and_nothing_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        write_buffer_bytes: 1 << 16,
        ..WalConfig::new(dir.path())
    };
    let seg = two_batches(&config);
    let full = fs::read(&seg).unwrap();
    // The second frame starts after the first: find it by its magic.
    let start = 36 + full[36..].windows(4).position(|w| w == b"FCW2").unwrap();
    for cut in start..full.len() {
        fs::write(&seg, &full[..cut]).unwrap();
        let store = LoggedStore::open(&config, 1, RecoveryMode::TolerateTail, |b| b).unwrap();
        assert_eq!(store.len(), 10, "cut {cut}");
        assert_eq!(store.get(b"k10"), None);
        assert_eq!(store.recovery().logs[0].damage.is_some(), cut != start);
        drop(store);
        assert_eq!(fs::read(&seg).unwrap().len(), start, "cut {cut}");
    }
}

#[test]
fn a_batch_with_an_undecodable_mutation_applies_none_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        write_buffer_bytes: 1 << 16,
        ..WalConfig::new(dir.path())
    };
    let seg = two_batches(&config);
    // A third frame with a valid checksum and the next sequence: a good mutation, then an
    // unknown tag. Nothing of it may be applied.
    let mut payload = Vec::new();
    encode_mutation(
        &Mutation::Set {
            key: b"good",
            value: b"x",
            expire_at_ms: None,
        },
        &mut payload,
    );
    payload.push(0xEE);
    let mut frame = b"FCW2".to_vec();
    frame.extend_from_slice(&[fc_wal::FLAG_BATCH, 0, 0, 0]);
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&16u64.to_le_bytes());
    frame.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&frame[4..]);
    frame.extend_from_slice(&crc.to_le_bytes());
    let mut bytes = fs::read(&seg).unwrap();
    let good_len = bytes.len();
    bytes.extend_from_slice(&frame);
    fs::write(&seg, &bytes).unwrap();
    match LoggedStore::open(&config, 1, RecoveryMode::Strict, |b| b) {
        Err(WalError::Corrupt { offset, reason, .. }) => {
            assert_eq!(offset, good_len as u64);
            assert!(reason.contains("unknown mutation tag 238"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let store = LoggedStore::open(&config, 1, RecoveryMode::PointInTime, |b| b).unwrap();
    assert_eq!(store.len(), 15);
    assert_eq!(store.get(b"good"), None);
}

/// Where a segment's frames end: the start of its trailing zeros (a frame's checksum may end
/// in a zero byte, so only use this where the caller knows zeros follow).
fn frames_end(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// A live segment grows in `PREALLOC_BYTES` steps of zeros that later frames overwrite. A kill
/// leaves them, and every recovery mode reads them as the segment's end (no damage, nothing
/// changed on disk); zeros with frames after them are still damage in the middle.
#[test]
fn preallocated_zeros_end_a_segment_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    let digest = fill(&store, 100);
    store.wal().flush_all().unwrap();
    let seg = segment_files(dir.path()).pop().unwrap();
    let bytes = fs::read(&seg).unwrap();
    assert_eq!(
        bytes.len() as u64,
        fc_wal::PREALLOC_BYTES,
        "one step so far"
    );
    let end = frames_end(&bytes);
    assert!(end > 1000 && end < 4000, "100 small frames end at {end}");
    // A kill: no drop, so the zeros stay.
    std::mem::forget(store);
    for mode in [
        RecoveryMode::Strict,
        RecoveryMode::TolerateTail,
        RecoveryMode::PointInTime,
    ] {
        let store = open_one(&config, mode).unwrap();
        assert_eq!(store.digest(), digest, "{mode:?}");
        assert_eq!(store.recovery().frames(), 100);
        assert_eq!(store.recovery().logs[0].damage, None, "{mode:?}");
    }
    assert_eq!(fs::read(&seg).unwrap(), bytes, "recovery leaves the zeros");

    // Zeros over frames in the middle, frames after them: damage, not the end.
    let mut holed = bytes.clone();
    holed[end / 2..end / 2 + 200].fill(0);
    fs::write(&seg, &holed).unwrap();
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTail] {
        match open_one(&config, mode) {
            Err(WalError::Corrupt { path, offset, .. }) => {
                assert_eq!(path, seg);
                assert!(offset as usize <= end / 2, "{offset}");
            }
            other => panic!("{mode:?}: {other:?}"),
        }
    }
    fs::write(&seg, &bytes).unwrap();

    // The log goes on in a new segment, which a clean close trims to its last frame.
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    store.set(b"after", b"1", None);
    drop(store);
    let newest = segment_files(dir.path()).pop().unwrap();
    assert_ne!(newest, seg);
    let len = fs::metadata(&newest).unwrap().len();
    assert!(len < 100, "trimmed: {len} bytes");
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.recovery().frames(), 101);
}

/// Rotation trims the closed segment's zeros, so only the newest segment can hold them.
#[test]
fn a_closed_segment_ends_with_its_last_frame() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        segment_bytes: 512,
        ..WalConfig::new(dir.path())
    };
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    let digest = fill(&store, 200);
    store.wal().flush_all().unwrap();
    let segs = segment_files(dir.path());
    assert!(segs.len() > 5);
    for seg in &segs[..segs.len() - 1] {
        let len = fs::metadata(seg).unwrap().len();
        assert!(len < 1024, "{seg:?}: {len} bytes");
    }
    let newest = fs::metadata(segs.last().unwrap()).unwrap().len();
    assert_eq!(newest, fc_wal::PREALLOC_BYTES);
    std::mem::forget(store);
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest);
}

/// A newest segment whose size reached the disk but none of its bytes (all zeros, header
/// included) holds nothing: tolerate-tail removes it, strict refuses.
#[test]
fn an_all_zero_newest_segment_was_torn_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    let digest = {
        let store = open_one(&config, RecoveryMode::Strict).unwrap();
        fill(&store, 10)
    };
    let seg = segment_files(dir.path()).pop().unwrap();
    let zeros = seg.with_file_name(fc_wal::segment_name(11));
    fs::write(&zeros, vec![0u8; fc_wal::PREALLOC_BYTES as usize]).unwrap();
    assert!(matches!(
        open_one(&config, RecoveryMode::Strict),
        Err(WalError::Corrupt { offset: 0, .. })
    ));
    let store = open_one(&config, RecoveryMode::TolerateTail).unwrap();
    assert_eq!(store.digest(), digest);
    let damage = store.recovery().logs[0].damage.clone().expect("damage");
    assert_eq!(damage.path, zeros);
    assert!(!zeros.exists());
}

/// Byte offsets where each frame of a segment starts (its header is skipped).
fn frame_starts(bytes: &[u8]) -> Vec<usize> {
    let mut at = fc_wal::SEGMENT_HEADER_LEN;
    let mut out = Vec::new();
    while let fc_wal::FrameRead::Frame { len, .. } = fc_wal::decode_frame(&bytes[at..]) {
        out.push(at);
        at += len;
    }
    out
}

/// A closed segment can end in zeros on disk: its trim at rotation was not yet synced, or
/// (power lost right after an `everysec` rotation) its last frames' writes were lost over the
/// preallocated zeros. When the next segment starts where the zeros start, nothing is missing;
/// when it starts later and holds no frame, the zeros are the log's tail; when later segments
/// hold frames, they are a hole.
#[test]
fn zeros_ending_a_closed_segment() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        segment_bytes: 512,
        ..WalConfig::new(dir.path())
    };
    let digest = {
        let store = open_one(&config, RecoveryMode::Strict).unwrap();
        fill(&store, 200)
    };
    let segs = segment_files(dir.path());
    let (closed, last) = (&segs[segs.len() - 2], &segs[segs.len() - 1]);
    let good = fs::read(closed).unwrap();
    let pad = |bytes: &[u8]| {
        let mut padded = bytes.to_vec();
        padded.resize(fc_wal::PREALLOC_BYTES as usize, 0);
        padded
    };

    // Untrimmed zeros, every frame there: clean in every mode.
    fs::write(closed, pad(&good)).unwrap();
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest);
    assert_eq!(store.recovery().logs[0].damage, None);
    drop(store);

    // The last two frames' bytes lost to zeros, the next segment still holding frames: a hole.
    let starts = frame_starts(&good);
    let cut = starts[starts.len() - 2];
    fs::write(closed, pad(&good[..cut])).unwrap();
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTail] {
        match open_one(&config, mode) {
            Err(WalError::Corrupt { path, offset, .. }) => {
                assert_eq!(&path, closed);
                assert_eq!(offset, cut as u64);
            }
            other => panic!("{mode:?}: {other:?}"),
        }
    }

    // The next segment holding only its header (power lost just after the rotation): the
    // zeros are the tail. Tolerate-tail cuts them, removes the frame-less segment, and the log
    // goes on; strict refuses.
    fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(fc_wal::SEGMENT_HEADER_LEN as u64)
        .unwrap();
    assert!(matches!(
        open_one(&config, RecoveryMode::Strict),
        Err(WalError::Corrupt { .. })
    ));
    let store = open_one(&config, RecoveryMode::TolerateTail).unwrap();
    let damage = store.recovery().logs[0].damage.clone().expect("damage");
    assert_eq!(&damage.path, closed);
    assert_eq!(damage.offset, cut as u64);
    let kept = store.recovery().frames();
    assert!(kept > 150 && kept < 200, "{kept}");
    store.set(b"after", b"1", None);
    drop(store);
    assert_eq!(fs::metadata(closed).unwrap().len(), cut as u64);
    assert!(!last.exists());
    let store = open_one(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.recovery().frames(), kept + 1);
}

/// Writes what `script` sends to a sink over two shared logs (shard `s` to log `s % 2`), as a
/// server's workers would, then recovers it into a fresh store.
fn transactions_case(
    script: impl FnOnce(&fc_wal::WalSink),
) -> (EmbeddedStore, fc_wal::RecoveryReport) {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        logs: 2,
        ..WalConfig::new(dir.path())
    };
    {
        let sink = fc_wal::WalSink::open(&config, 2).unwrap();
        script(&sink);
        // Nothing ends a group on drop: what was written is what a kill leaves.
        sink.flush_all().unwrap();
    }
    let store = EmbeddedStore::new(2);
    let report = fc_wal::recover(&config, &store, RecoveryMode::Strict).unwrap();
    (store, report)
}

fn set<'a>(key: &'a [u8], value: &'a [u8]) -> Mutation<'a> {
    Mutation::Set {
        key,
        value,
        expire_at_ms: None,
    }
}

#[test]
fn a_transaction_is_recovered_whole_or_not_at_all() {
    use fc_shard::MutationSink;
    let get = |store: &EmbeddedStore, key: &[u8]| store.get(key).map(|v| v.to_vec());
    // Both logs' groups ended: applied, on both.
    let (store, report) = transactions_case(|sink| {
        sink.on_mutation(0, 0, &set(b"before", b"1"));
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 7 });
        sink.on_mutation(1, 0, &Mutation::TxBegin { id: 7 });
        sink.on_mutation(0, 0, &set(b"a", b"t7"));
        sink.on_mutation(1, 0, &set(b"b", b"t7"));
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 7 });
        sink.on_mutation(1, 0, &Mutation::TxEnd { id: 7 });
    });
    assert_eq!(get(&store, b"a"), Some(b"t7".to_vec()));
    assert_eq!(get(&store, b"b"), Some(b"t7".to_vec()));
    assert_eq!(get(&store, b"before"), Some(b"1".to_vec()));
    assert_eq!((report.torn_transactions, report.last_txn_id), (0, 7));
    assert_eq!(report.mutations(), 3);

    // Log 1's group never ended (the kill came before its end was written): log 0's ended
    // group is left out too, and so is log 1's; what came before stays.
    let (store, report) = transactions_case(|sink| {
        sink.on_mutation(1, 0, &set(b"kept", b"1"));
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 9 });
        sink.on_mutation(0, 0, &set(b"a", b"t9"));
        sink.on_mutation(0, 0, &set(b"a2", b"t9"));
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 9 });
        sink.on_mutation(1, 0, &Mutation::TxBegin { id: 9 });
        sink.on_mutation(1, 0, &set(b"b", b"t9"));
    });
    assert_eq!(get(&store, b"a"), None);
    assert_eq!(get(&store, b"a2"), None);
    assert_eq!(get(&store, b"b"), None);
    assert_eq!(get(&store, b"kept"), Some(b"1".to_vec()));
    assert_eq!(report.torn_transactions, 1);
    assert_eq!(report.logs[0].torn_groups + report.logs[1].torn_groups, 2);

    // A group followed by anything on its log was whole everywhere (the server wrote every
    // group's end before the next change): applied at once. The log without a group of the
    // transaction (its group trimmed with a snapshot) does not make it torn.
    let (store, report) = transactions_case(|sink| {
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 11 });
        sink.on_mutation(0, 0, &set(b"a", b"t11"));
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 11 });
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 12 });
        sink.on_mutation(0, 0, &set(b"c", b"t12"));
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 12 });
    });
    assert_eq!(get(&store, b"a"), Some(b"t11".to_vec()));
    assert_eq!(get(&store, b"c"), Some(b"t12".to_vec()));
    assert_eq!(report.torn_transactions, 0);

    // One log, its last group open: left out; the ended one before it applied.
    let (store, report) = transactions_case(|sink| {
        sink.on_mutation(1, 0, &Mutation::TxBegin { id: 20 });
        sink.on_mutation(1, 0, &set(b"x", b"t20"));
        sink.on_mutation(1, 0, &Mutation::TxEnd { id: 20 });
        sink.on_mutation(1, 0, &Mutation::TxBegin { id: 21 });
        sink.on_mutation(1, 0, &set(b"x", b"t21"));
        sink.on_mutation(1, 0, &set(b"y", b"t21"));
    });
    assert_eq!(get(&store, b"x"), Some(b"t20".to_vec()));
    assert_eq!(get(&store, b"y"), None);
    assert_eq!((report.torn_transactions, report.last_txn_id), (1, 21));
}

/// A kill at any moment of a server's writes of a two-log transaction (see
/// `fc-server/src/txn.rs`): the logs are written in turn (log 0, then log 1) by each write to
/// the OS, every group's mutations before any group's end, and the kill may tear the write in
/// progress at any byte. Whatever state that leaves, recovery applies the transaction whole
/// or not at all.
#[test]
fn a_transaction_torn_at_every_byte_of_its_writes_applies_whole_or_not_at_all() {
    use fc_shard::MutationSink;
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        logs: 2,
        ..WalConfig::new(dir.path())
    };
    // Each log's length after each write to the OS.
    let mut written: Vec<[usize; 2]> = Vec::new();
    {
        let sink = fc_wal::WalSink::open(&config, 2).unwrap();
        let mut flush = |sink: &fc_wal::WalSink| {
            sink.flush_all().unwrap();
            let len = |s: usize| sink.with_log(s, |l| l.stats().bytes as usize);
            written.push([len(0), len(1)]);
        };
        sink.on_mutation(0, 0, &set(b"before", b"1"));
        sink.on_mutation(1, 0, &set(b"before1", b"1"));
        flush(&sink);
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 5 });
        sink.on_mutation(1, 0, &Mutation::TxBegin { id: 5 });
        for i in 0..20u8 {
            sink.on_mutation(usize::from(i % 2), 0, &set(&[b'k', i], b"t5"));
            // Frames of a few mutations each, as other workers' writes to the OS cut them.
            if i % 3 == 2 {
                flush(&sink);
            }
        }
        flush(&sink);
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 5 });
        sink.on_mutation(1, 0, &Mutation::TxEnd { id: 5 });
        flush(&sink);
    }
    let seg = |log: usize| {
        let d = config.log_dir(log);
        fs::read_dir(&d).unwrap().next().unwrap().unwrap().path()
    };
    let segs = [seg(0), seg(1)];
    // A clean close trimmed each segment to its frames.
    let full = [fs::read(&segs[0]).unwrap(), fs::read(&segs[1]).unwrap()];
    assert_eq!(full[0].len(), written.last().unwrap()[0]);
    let mut states = Vec::new();
    for pair in written.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        // The kill during this write's log 0, or during its log 1 (log 0 written).
        for cut in before[0]..=after[0] {
            states.push([cut, before[1]]);
        }
        for cut in before[1]..=after[1] {
            states.push([after[0], cut]);
        }
    }
    let (mut whole, mut none) = (0, 0);
    for state in states {
        for log in 0..2 {
            fs::write(&segs[log], &full[log][..state[log]]).unwrap();
        }
        let store = EmbeddedStore::new(2);
        fc_wal::recover(&config, &store, RecoveryMode::TolerateTail).unwrap();
        let present = (0..20u8)
            .filter(|&i| store.get(&[b'k', i]).is_some())
            .count();
        assert!(
            present == 0 || present == 20,
            "logs cut at {state:?}: {present} of the transaction's 20 keys"
        );
        if present == 20 {
            whole += 1;
        } else {
            none += 1;
        }
        assert_eq!(store.get(b"before").as_deref(), Some(&b"1"[..]));
    }
    // Only the end's last write (log 1 whole) leaves it whole.
    assert!(whole >= 1 && none > 100, "{whole} whole, {none} none");
}

#[test]
fn operation_groups_nest_in_transactions_and_stand_alone() {
    let get = |store: &EmbeddedStore, key: &[u8]| store.get(key).map(|v| v.to_vec());
    // An operation's group (id 0) inside a transaction's: the transaction decides.
    let (store, report) = transactions_case(|sink| {
        use fc_shard::MutationSink;
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 30 });
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 0 });
        sink.on_mutation(0, 0, &set(b"a", b"t30"));
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 0 });
        sink.on_mutation(0, 0, &set(b"b", b"t30"));
        sink.on_mutation(0, 0, &Mutation::TxEnd { id: 30 });
        // Log 1: an operation's group that ended, as its last group; log 0 later gets an
        // open one. Each is its own log's: the ended one applies, the open one does not.
        sink.on_mutation(1, 0, &Mutation::TxBegin { id: 0 });
        sink.on_mutation(1, 0, &set(b"c", b"op"));
        sink.on_mutation(1, 0, &Mutation::TxEnd { id: 0 });
        sink.on_mutation(0, 0, &Mutation::TxBegin { id: 0 });
        sink.on_mutation(0, 0, &set(b"d", b"op"));
    });
    assert_eq!(get(&store, b"a"), Some(b"t30".to_vec()));
    assert_eq!(get(&store, b"b"), Some(b"t30".to_vec()));
    assert_eq!(get(&store, b"c"), Some(b"op".to_vec()));
    assert_eq!(get(&store, b"d"), None);
    assert_eq!((report.torn_transactions, report.last_txn_id), (1, 30));
}

/// `LMOVE` is a pop and a push, one group of its shard's log: a kill at any byte of its
/// frames (one frame per mutation here) leaves the element in one of the two lists, never in
/// neither or both.
#[test]
fn an_lmove_torn_at_every_byte_moves_its_element_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        fsync: FsyncPolicy::Always,
        group_commit: false,
        ..WalConfig::new(dir.path())
    };
    let before = {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        store.rpush(b"{q}src", &[b"x", b"y"]).unwrap();
        store.rpush(b"{q}dst", &[b"z"]).unwrap();
        let shard = store.shard_for_key(b"{q}src");
        // Bytes of the shard's log so far (written and synced: `always`).
        let before = store.wal().with_log(shard, |l| l.stats().bytes) as usize;
        let moved = store
            .lmove(b"{q}src", b"{q}dst", ListEnd::Left, ListEnd::Right)
            .unwrap();
        assert_eq!(moved, Some(b"x".to_vec()));
        (shard, before)
    };
    let (shard, start) = before;
    let seg = segment_files(dir.path())
        .into_iter()
        .find(|p| p.parent().unwrap().ends_with(format!("shard-{shard:04}")))
        .unwrap();
    let full = fs::read(&seg).unwrap();
    assert!(
        full.len() > start + 2 * fc_wal::FRAME_HEADER_LEN,
        "one frame per mutation"
    );
    let (mut moved, mut not) = (0, 0);
    for cut in start..=full.len() {
        fs::write(&seg, &full[..cut]).unwrap();
        let store = open(&config, RecoveryMode::TolerateTail).unwrap();
        let src = store.lrange(b"{q}src", 0, -1).unwrap();
        let dst = store.lrange(b"{q}dst", 0, -1).unwrap();
        match (src.len(), dst.len()) {
            (2, 1) => not += 1,
            (1, 2) => moved += 1,
            other => panic!("cut at {cut}: src {src:?}, dst {dst:?} ({other:?})"),
        }
        drop(store);
    }
    assert_eq!(moved, 1, "only the whole log has the move");
    assert!(not > 50);
}

/// A replica's watermarks ([`Mutation::ReplMark`]) come back from recovery per shard: the
/// last one of each shard, unless a change of that shard (an expiry or an eviction aside)
/// follows it. They change nothing in the store.
#[test]
fn replica_watermarks_are_recovered_while_nothing_follows_them() {
    use fc_shard::MutationSink;
    let mark = |seq| Mutation::ReplMark {
        primary: b"primary-1",
        seq,
    };
    let (store, report) = transactions_case(|sink| {
        // Shard 0: changes, a mark, an expiry (part of it), a later mark.
        sink.on_mutation(0, 0, &set(b"a", b"1"));
        sink.on_mutation(0, 0, &mark(4));
        sink.on_mutation(0, 0, &Mutation::Expired { key: b"a" });
        sink.on_mutation(0, 0, &set(b"b", b"2"));
        sink.on_mutation(0, 0, &mark(9));
        sink.on_mutation(0, 0, &Mutation::Evicted { key: b"b" });
        // Shard 1: a mark, then a change of its own (a promoted replica's write).
        sink.on_mutation(1, 0, &mark(3));
        sink.on_mutation(1, 0, &set(b"c", b"3"));
    });
    let marks = report.repl_marks(2);
    assert_eq!(marks[0], Some((b"primary-1".to_vec(), 9)));
    assert_eq!(marks[1], None, "a change after the mark voids it");
    assert_eq!(
        report.mutations(),
        5,
        "marks are not mutations of the store"
    );
    assert_eq!(store.get(b"c").map(|v| v.to_vec()), Some(b"3".to_vec()));
    // A shard without any mark has none.
    let (_, report) = transactions_case(|sink| sink.on_mutation(1, 0, &set(b"x", b"1")));
    assert_eq!(report.repl_marks(2), vec![None, None]);
    // The payload round-trips.
    let mut payload = Vec::new();
    encode_mutation(&mark(u64::MAX), &mut payload);
    assert_eq!(
        Record::decode(&payload).unwrap(),
        Record::ReplMark {
            primary: b"primary-1".to_vec(),
            seq: u64::MAX
        }
    );
}
