//! Log append bandwidth against a plain sequential write of the same bytes, in the same run
//! (fsync `no` for both: this measures the encoding and `write(2)` path, not the disk flush).
//! Each sample appends 4096 64-byte `SET` mutations (16-byte keys) to one shard's log, or
//! writes the identical frame bytes with one `write_all` per frame to a plain file, or in one
//! `write_all` per sample (what `dd` measures).
//!
//! Run: `cargo bench -p fc-wal --bench append`

use std::fs::File;
use std::hint::black_box;
use std::io::Write;

use divan::Bencher;
use divan::counter::BytesCount;
use fc_shard::Mutation;
use fc_wal::{FsyncPolicy, ShardLog, WalConfig, encode_frame, encode_mutation};

const FRAMES: usize = 4096;

fn main() {
    divan::main();
}

fn keys() -> Vec<Vec<u8>> {
    (0..FRAMES)
        .map(|i| format!("key:{i:012}").into_bytes())
        .collect()
}

fn frames(keys: &[Vec<u8>], value: &[u8]) -> Vec<Vec<u8>> {
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            let mut payload = Vec::new();
            encode_mutation(
                &Mutation::Set {
                    key,
                    value,
                    expire_at_ms: None,
                },
                &mut payload,
            );
            let mut frame = Vec::new();
            encode_frame(i as u64 + 1, &payload, &mut frame);
            frame
        })
        .collect()
}

#[divan::bench]
fn wal_append(bencher: Bencher<'_, '_>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WalConfig {
        fsync: FsyncPolicy::No,
        segment_bytes: 1 << 40,
        ..WalConfig::new(dir.path())
    };
    let mut log = ShardLog::open(&config, 0, 1, 1).expect("open");
    let keys = keys();
    let value = [0xAB; 64];
    let bytes: usize = frames(&keys, &value).iter().map(Vec::len).sum();
    bencher.counter(BytesCount::new(bytes)).bench_local(|| {
        for key in &keys {
            let m = Mutation::Set {
                key,
                value: &value,
                expire_at_ms: None,
            };
            black_box(log.append(&m).expect("append"));
        }
    });
}

/// The log with a 64 KiB write buffer (one `write(2)` per ~64 KiB of frames).
#[divan::bench]
fn wal_append_buffered(bencher: Bencher<'_, '_>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = WalConfig {
        fsync: FsyncPolicy::No,
        segment_bytes: 1 << 40,
        write_buffer_bytes: 64 << 10,
        ..WalConfig::new(dir.path())
    };
    let mut log = ShardLog::open(&config, 0, 1, 1).expect("open");
    let keys = keys();
    let value = [0xAB; 64];
    let bytes: usize = frames(&keys, &value).iter().map(Vec::len).sum();
    bencher.counter(BytesCount::new(bytes)).bench_local(|| {
        for key in &keys {
            let m = Mutation::Set {
                key,
                value: &value,
                expire_at_ms: None,
            };
            black_box(log.append(&m).expect("append"));
        }
        log.flush().expect("flush");
    });
}

#[divan::bench]
fn plain_write(bencher: Bencher<'_, '_>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut file = File::create(dir.path().join("plain")).expect("create");
    let frames = frames(&keys(), &[0xAB; 64]);
    let bytes: usize = frames.iter().map(Vec::len).sum();
    bencher.counter(BytesCount::new(bytes)).bench_local(|| {
        for frame in &frames {
            file.write_all(frame).expect("write");
        }
    });
}

/// The same bytes in one `write_all` per sample: what `dd` measures (the ceiling a batching
/// log could approach).
#[divan::bench]
fn plain_write_batched(bencher: Bencher<'_, '_>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut file = File::create(dir.path().join("plain")).expect("create");
    let all: Vec<u8> = frames(&keys(), &[0xAB; 64]).concat();
    bencher.counter(BytesCount::new(all.len())).bench_local(|| {
        file.write_all(&all).expect("write");
    });
}
