//! Gathering a session's KV chunks out of the store into a staging buffer, without a GPU: the
//! one-thread `gather_session` against the pipelined `Gatherer` with 1, 2 and 4 threads, for
//! 64 chunks of 256 KiB and of 2 MiB. Bytes per second is the figure to set against the bus
//! (~50 GB/s for PCIe 5 x16): a load can go no faster than its gather unless the gather is
//! hidden behind the copies, and it is hidden only when it keeps up.
//!
//! Run: `cargo bench -p fc-gpu --bench gather`

use divan::Bencher;
use divan::counter::BytesCount;
use fc_gpu::{GatherConfig, Gatherer, gather_session};
use fc_shard::{EmbeddedRouteMode, EmbeddedStore, PackedSessionWrite};

const CHUNKS: usize = 64;

fn main() {
    divan::main();
}

fn session(chunk: usize) -> (EmbeddedStore, Vec<String>) {
    let store = EmbeddedStore::with_route_mode(16, EmbeddedRouteMode::session_prefix());
    let keys: Vec<String> = (0..CHUNKS)
        .map(|i| format!("session:1:chunk:{i}"))
        .collect();
    let mut write =
        PackedSessionWrite::with_capacity(b"session:1".to_vec(), CHUNKS, chunk * CHUNKS);
    for (i, key) in keys.iter().enumerate() {
        write.push_record(key.as_bytes(), &vec![i as u8; chunk]);
    }
    store.batch_set_session_packed_no_ttl(write);
    (store, keys)
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn one_thread(bencher: Bencher<'_, '_>, chunk: usize) {
    let (store, keys) = session(chunk);
    let mut dst = vec![0u8; chunk * CHUNKS];
    bencher
        .counter(BytesCount::new(chunk * CHUNKS))
        .bench_local(|| gather_session(&store, b"session:1", &keys, &mut dst).bytes);
}

fn pipelined(bencher: Bencher<'_, '_>, chunk: usize, threads: usize) {
    let (store, keys) = session(chunk);
    let gatherer = Gatherer::new(GatherConfig {
        threads,
        piece_bytes: 1 << 20,
        ..GatherConfig::default()
    })
    .expect("gather threads");
    let mut dst = vec![0u8; chunk * CHUNKS];
    bencher
        .counter(BytesCount::new(chunk * CHUNKS))
        .bench_local(|| {
            let mut pieces = 0;
            gatherer.gather_session(&store, b"session:1", &keys, &mut dst, |_| pieces += 1);
            pieces
        });
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn gatherer_1_thread(bencher: Bencher<'_, '_>, chunk: usize) {
    pipelined(bencher, chunk, 1);
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn gatherer_2_threads(bencher: Bencher<'_, '_>, chunk: usize) {
    pipelined(bencher, chunk, 2);
}

#[divan::bench(args = [256 << 10, 2 << 20])]
fn gatherer_4_threads(bencher: Bencher<'_, '_>, chunk: usize) {
    pipelined(bencher, chunk, 4);
}
