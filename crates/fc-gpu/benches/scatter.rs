//! Writing a session's KV chunks from a staging buffer into the store, without a GPU: the
//! host half of a device → host store. `scatter_session` copies every chunk on the calling
//! thread, under the session's shard lock (writing over the old values in place);
//! `Gatherer::scatter_session` builds each chunk's entry on the calling thread or on 1, 2 or
//! 4 threads with no lock held, then moves the entries in under the lock. 64 chunks of 256 KiB and of 2 MiB, each
//! iteration overwriting the same session (as `gpu_bench`'s device → host rows do).
//!
//! Bytes per second is the figure to set against the bus (~50 GB/s for PCIe 5 x16): with the
//! GPU, the copies out of staging overlap the device copies of later pieces, so a store goes
//! as fast as the slower of the two.
//!
//! Run: `cargo bench -p fc-gpu --bench scatter [--features unsafe] -- <name>`. Run one
//! function at a time: on the development VM a function's figure depended on which ran
//! before it in the same process (the heap's layout), by up to 3x for 256 KiB chunks.

use std::ops::Range;

use divan::Bencher;
use divan::counter::BytesCount;
use fc_gpu::{GatherConfig, Gatherer, scatter_session};
use fc_shard::{EmbeddedRouteMode, EmbeddedStore};

const CHUNKS: usize = 64;

fn main() {
    divan::main();
}

struct Staged {
    store: EmbeddedStore,
    keys: Vec<String>,
    src: Vec<u8>,
    spans: Vec<Range<usize>>,
}

/// A staging buffer of `CHUNKS` chunks and a store already holding the session once.
fn staged(chunk: usize) -> Staged {
    let store = EmbeddedStore::with_route_mode(16, EmbeddedRouteMode::session_prefix());
    let keys: Vec<String> = (0..CHUNKS)
        .map(|i| format!("session:1:chunk:{i}"))
        .collect();
    let src: Vec<u8> = (0..chunk * CHUNKS).map(|i| (i >> 6) as u8).collect();
    let spans: Vec<Range<usize>> = (0..CHUNKS).map(|i| i * chunk..(i + 1) * chunk).collect();
    scatter_session(&store, b"session:1", &keys, &src, &spans).expect("first write");
    Staged {
        store,
        keys,
        src,
        spans,
    }
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn in_place_one_thread(bencher: Bencher<'_, '_>, chunk: usize) {
    let s = staged(chunk);
    bencher
        .counter(BytesCount::new(chunk * CHUNKS))
        .bench_local(|| scatter_session(&s.store, b"session:1", &s.keys, &s.src, &s.spans));
}

fn built(bencher: Bencher<'_, '_>, chunk: usize, threads: usize) {
    let s = staged(chunk);
    let gatherer = Gatherer::new(GatherConfig {
        threads,
        piece_bytes: 1 << 20,
        ..GatherConfig::default()
    })
    .expect("gather threads");
    bencher
        .counter(BytesCount::new(chunk * CHUNKS))
        .bench_local(|| {
            gatherer.scatter_session(&s.store, b"session:1", &s.keys, &s.src, &s.spans)
        });
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn built_1_thread(bencher: Bencher<'_, '_>, chunk: usize) {
    built(bencher, chunk, 1);
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn built_2_threads(bencher: Bencher<'_, '_>, chunk: usize) {
    built(bencher, chunk, 2);
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn built_4_threads(bencher: Bencher<'_, '_>, chunk: usize) {
    built(bencher, chunk, 4);
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn built_calling_thread(bencher: Bencher<'_, '_>, chunk: usize) {
    built(bencher, chunk, 0);
}
