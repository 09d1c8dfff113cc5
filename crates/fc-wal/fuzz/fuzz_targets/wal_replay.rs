//! The WAL's readers on arbitrary bytes: payload decoding, and recovery of a log whose frames
//! are valid (right checksum, right sequence) but whose payloads are anything — the mutations
//! and transaction markers of a newer or buggy writer, in any order.
//!
//! Input: chunks, each a length byte and that many bytes; every chunk is one frame's payload.
//! Asserts, beyond "no panic": decoding and recovery never allocate past the input's size
//! (libFuzzer's RSS limit), recovery either succeeds or names its error, and point-in-time
//! recovery changes nothing on disk.
#![no_main]

use fc_shard::EmbeddedStore;
use fc_wal::{Record, RecoveryMode, SegmentHeader, WalConfig, encode_frame, segment_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Record::decode(data);
    let _ = Record::decode_batch(data, false);
    let _ = Record::decode_batch(data, true);

    let mut payloads = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        payloads.push(&tail[..len]);
        rest = &tail[len..];
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = WalConfig::new(dir.path());
    let log = config.log_dir(0);
    std::fs::create_dir_all(&log).expect("the log directory");
    let mut segment = SegmentHeader {
        shard: 0,
        shard_count: 1,
        first_seq: 1,
        logs: 0,
    }
    .encode()
    .to_vec();
    for (i, payload) in payloads.iter().enumerate() {
        encode_frame(i as u64 + 1, payload, &mut segment);
    }
    let path = log.join(segment_name(1));
    std::fs::write(&path, &segment).expect("the segment");
    let store = EmbeddedStore::new(1);
    let _ = fc_wal::recover(&config, &store, RecoveryMode::PointInTime);
    assert_eq!(
        std::fs::read(&path).expect("the segment"),
        segment,
        "point-in-time recovery changed the log"
    );
    let _ = store.digest();
    let store = EmbeddedStore::new(1);
    let _ = fc_wal::recover(&config, &store, RecoveryMode::TolerateTail);
    let _ = store.digest();
});
