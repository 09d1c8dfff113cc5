//! Snapshot images and restart recovery: random histories over every type reopen to the same
//! digest through image + log tail; old segments go once two images cover them; a damaged or
//! truncated newest image falls back to the older one (strict refuses); a crash between the
//! temporary write and the rename leaves the previous state; a missing image whose log was
//! trimmed refuses to start, naming the gap.

use std::fs;
use std::path::{Path, PathBuf};

use fc_shard::{
    GroupReadFrom, GroupStart, ListEnd, ManualClock, StreamId, XAddId, XAddOptions, ZAddOptions,
};
use fc_snapshot::{PersistentStore, image_dir};
use fc_wal::{RecoveryMode, WalConfig, WalError};
use proptest::prelude::*;

const START_MS: u64 = 1_700_000_000_000;

fn open(config: &WalConfig, mode: RecoveryMode) -> Result<PersistentStore, WalError> {
    PersistentStore::open(config, 4, mode, |b| b)
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn fill(store: &PersistentStore, from: usize, to: usize) {
    for i in from..to {
        store.set(format!("k{i}"), format!("v{i}"), None);
        let field = format!("f{i}");
        store
            .hset(
                format!("h{}", i % 7).as_bytes(),
                &[(field.as_bytes(), &b"x"[..])],
            )
            .unwrap();
    }
}

#[test]
fn image_plus_tail_recovers_and_trims_the_log() {
    // One log per shard, and two logs shared by the four shards (a segment of a shared log
    // goes only once both of its shards' images cover it).
    for logs in [0, 2] {
        image_plus_tail(logs);
    }
}

fn image_plus_tail(logs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        segment_bytes: 512,
        logs,
        ..WalConfig::new(dir.path())
    };
    let digest = {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        fill(&store, 0, 200);
        let first = store.snapshot().unwrap();
        assert_eq!(first.keys, 207);
        fill(&store, 200, 300);
        store.snapshot().unwrap();
        fill(&store, 300, 320);
        // Two images per shard are kept, and the log back to the older one: the third
        // snapshot deletes the segments the first image alone covered.
        let segments_before = files(dir.path(), "fcw").len();
        store.snapshot().unwrap();
        assert!(files(dir.path(), "fcw").len() < segments_before);
        fill(&store, 320, 330);
        assert_eq!(files(dir.path(), "fcs").len(), 8);
        store.digest()
    };
    let store = open(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest);
    assert_eq!(store.recovery().images, 4);
    assert_eq!(store.recovery().image_keys, 327);
    // Only the writes after the newest image come from the log.
    assert_eq!(store.recovery().wal.frames(), 20);
}

#[test]
fn a_damaged_newest_image_falls_back_to_the_older_one() {
    for damage in ["flip", "truncate", "trailer"] {
        let dir = tempfile::tempdir().unwrap();
        let config = WalConfig::new(dir.path());
        let digest = {
            let store = open(&config, RecoveryMode::Strict).unwrap();
            fill(&store, 0, 50);
            store.snapshot().unwrap();
            fill(&store, 50, 90);
            store.snapshot().unwrap();
            fill(&store, 90, 100);
            store.digest()
        };
        let newest = files(&image_dir(dir.path(), 0), "fcs").pop().unwrap();
        let mut bytes = fs::read(&newest).unwrap();
        match damage {
            "flip" => {
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x10;
            }
            "truncate" => bytes.truncate(bytes.len() * 2 / 3),
            _ => {
                let n = bytes.len();
                bytes[n - 24..n].fill(0);
            }
        }
        fs::write(&newest, &bytes).unwrap();
        let err = open(&config, RecoveryMode::Strict).unwrap_err();
        assert!(
            matches!(&err, WalError::Corrupt { path, .. } if *path == newest),
            "{damage}: {err}"
        );
        let store = open(&config, RecoveryMode::TolerateTail).unwrap();
        assert_eq!(store.digest(), digest, "{damage}");
        assert_eq!(store.recovery().skipped_images.len(), 1, "{damage}");
    }
}

#[test]
fn a_crash_between_temp_write_and_rename_keeps_the_previous_state() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    let digest = {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        fill(&store, 0, 60);
        store.snapshot().unwrap();
        fill(&store, 60, 80);
        store.digest()
    };
    // What a crash after the temporary file's write, before its rename, leaves behind.
    for shard in 0..4 {
        let dir = image_dir(dir.path(), shard);
        fs::write(
            dir.join("00000000000000099999.fcs.tmp"),
            b"FCSN half an image",
        )
        .unwrap();
    }
    let store = open(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest);
    // The next snapshot clears the leftovers.
    store.snapshot().unwrap();
    assert!(files(dir.path(), "tmp").is_empty());
}

#[test]
fn a_missing_image_over_a_trimmed_log_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        segment_bytes: 256,
        ..WalConfig::new(dir.path())
    };
    {
        let store = open(&config, RecoveryMode::Strict).unwrap();
        for round in 0..3 {
            fill(&store, round * 40, round * 40 + 40);
            store.snapshot().unwrap();
        }
        fill(&store, 120, 130);
    }
    for image in files(&image_dir(dir.path(), 1), "fcs") {
        fs::remove_file(image).unwrap();
    }
    for mode in [RecoveryMode::Strict, RecoveryMode::TolerateTail] {
        let err = open(&config, mode).unwrap_err();
        assert!(
            matches!(&err, WalError::Corrupt { reason, .. } if reason.contains("was due")),
            "{err}"
        );
    }
}

#[test]
fn expiries_and_every_type_survive_an_image() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig::new(dir.path());
    let clock = ManualClock::new(START_MS);
    let digest = {
        let store =
            PersistentStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone()))
                .unwrap();
        store.set(b"s", b"v", Some(60_000));
        store.set(b"gone", b"v", Some(10));
        store.hset(b"h", &[(b"a", b"1"), (b"b", b"2")]).unwrap();
        let items: Vec<Vec<u8>> = (0..3000u32).map(|i| i.to_le_bytes().to_vec()).collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        store.push(b"l", ListEnd::Right, &refs, false).unwrap();
        store.sadd(b"set", &refs[..2500]).unwrap();
        let entries: Vec<(f64, &[u8])> = refs.iter().map(|m| (f64::from(m[0]), *m)).collect();
        store.zadd(b"z", &entries, ZAddOptions::default()).unwrap();
        store.expire(b"z", 90_000);
        // A stream with a group, consumers and pending entries (more than one export chunk).
        for i in 0..1500u64 {
            let id = XAddId::Explicit(StreamId::new(START_MS + i, 0));
            store
                .xadd(b"x", id, &[b"f", &i.to_le_bytes()], XAddOptions::default())
                .unwrap();
        }
        store.xdel(b"x", &[StreamId::new(START_MS + 7, 0)]).unwrap();
        store
            .xgroup_create(b"x", b"g", GroupStart::Id(StreamId::MIN), false, None)
            .unwrap();
        store
            .xreadgroup(b"x", b"g", b"alice", GroupReadFrom::New, 1200, false)
            .unwrap();
        store
            .xreadgroup(b"x", b"g", b"bob", GroupReadFrom::New, 10, false)
            .unwrap();
        store.xgroup_createconsumer(b"x", b"g", b"idle").unwrap();
        clock.advance_ms(100);
        let report = store.snapshot().unwrap();
        assert_eq!(report.keys, 6, "the expired key is not imaged");
        store.digest()
    };
    let store = PersistentStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone()))
        .unwrap();
    assert_eq!(store.digest(), digest);
    assert_eq!(store.llen(b"l").unwrap(), 3000);
    assert_eq!(store.recovery().wal.frames(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Random writes over every type with snapshots at random points, then a reopen: the
    /// recovered store's digest equals the live one's.
    #[test]
    fn random_histories_recover_exactly_through_images(
        ops in proptest::collection::vec((0u8..16, 0u8..6, any::<u8>(), -3i64..4), 1..150),
        segment_bytes in prop_oneof![Just(200u64), Just(64 << 20)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(START_MS);
        let config = WalConfig { segment_bytes, ..WalConfig::new(dir.path()) };
        let digest = {
            let store = PersistentStore::open(&config, 4, RecoveryMode::Strict, |b| {
                b.clock(clock.clone())
            })
            .unwrap();
            for (op, k, v, n) in ops {
                let key = format!("{{k}}{k}").into_bytes();
                let other = format!("{{k}}{}", (k + 1) % 6).into_bytes();
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
                    13 => store.snapshot().map(drop).map_err(|e| panic!("{e}")),
                    _ => store.incr_by(&key, n).map(drop),
                };
            }
            store.digest()
        };
        let store = PersistentStore::open(&config, 4, RecoveryMode::Strict, |b| b.clock(clock.clone()))
            .unwrap();
        prop_assert_eq!(store.digest(), digest);
    }
}

/// An image is written only after the log frames it covers are durable. Here the frames of
/// the last writes are still gathered in memory (a write buffer) when the image is taken, and
/// the process is then killed (no drop: nothing more is written). Had the image outlived the
/// frames it covers, the restart would continue the log after the image's sequence, behind a
/// segment that ends early, and the restart after that would refuse the hole ("zeros where
/// frames were due"; seen with a replica killed twice around a `BGSAVE` in `repl_chaos`).
#[test]
fn a_kill_after_an_image_leaves_a_log_the_next_two_starts_recover() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        write_buffer_bytes: 1 << 20,
        logs: 2,
        ..WalConfig::new(dir.path())
    };
    let store = open(&config, RecoveryMode::Strict).unwrap();
    fill(&store, 0, 100);
    // What a server writes before its replies: these frames are in the segment.
    store.wal().flush_all().unwrap();
    // These are gathered, not written, when the images are taken.
    fill(&store, 100, 200);
    store.snapshot().unwrap();
    let digest = store.digest();
    std::mem::forget(store);
    let store = open(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest, "the first start after the kill");
    fill(&store, 200, 300);
    store.wal().flush_all().unwrap();
    let digest = store.digest();
    std::mem::forget(store);
    let store = open(&config, RecoveryMode::Strict).unwrap();
    assert_eq!(store.digest(), digest, "the second start");
    assert_eq!(store.get(b"k299"), Some(b"v299".to_vec()));
}
