//! A tour of the embedded API: a shared store, batches, sessions, TTL, then owner-local workers
//! on their own threads. Run: `cargo run --release -p fast-cache --example quickstart`.

use std::thread;
use std::time::Instant;

use fast_cache::storage::{EmbeddedRouteMode, EmbeddedStore, KeyTtl, PackedSessionWrite};

fn main() {
    // 1. A store shared by reference between threads.
    let cache = EmbeddedStore::with_route_mode(16, EmbeddedRouteMode::session_prefix());
    cache.set(b"user:42", b"ready", None);
    cache.set(b"token:42", b"secret", Some(30_000));
    println!(
        "user:42 -> {:?}",
        cache.get(b"user:42").map(String::from_utf8)
    );
    if let KeyTtl::ExpiresIn(s) = cache.ttl_seconds(b"token:42") {
        println!("token:42 expires in {s} s");
    }

    // 2. Batches take each shard's lock once and answer in key order.
    cache.batch_set(
        (0..1_000).map(|i| (format!("item:{i}"), format!("value {i}"))),
        None,
    );
    let values: Vec<Option<String>> = cache
        .batch_get(["item:7", "item:999", "missing"])
        .into_iter()
        .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned()))
        .collect();
    println!("batch_get -> {values:?}");

    // 3. A session's KV-cache chunks land on one shard and come back in one buffer.
    let mut write = PackedSessionWrite::with_capacity(b"session:1".to_vec(), 32, 32 * 4096);
    for layer in 0..32u8 {
        write.push_record(
            format!("session:1:layer:{layer}").as_bytes(),
            &[layer; 4096],
        );
    }
    cache.batch_set_session_packed_no_ttl(write);
    let keys: Vec<String> = (0..32).map(|l| format!("session:1:layer:{l}")).collect();
    let batch = cache.batch_get_session_packed(b"session:1", &keys);
    println!(
        "session read: {} of {} chunks, {} contiguous bytes",
        batch.hit_count(),
        batch.len(),
        batch.total_bytes()
    );

    // 4. Split into owner-local stores: each worker owns its shards, no locks on its path.
    let workers = 2;
    let stores = cache.into_local_stores(workers);
    let started = Instant::now();
    let ops: usize = thread::scope(|s| {
        let handles: Vec<_> = stores
            .into_iter()
            .map(|mut store| {
                s.spawn(move || {
                    let mut ops = 0;
                    for i in 0..200_000u32 {
                        let key = i.to_le_bytes();
                        if store.owns(&key) {
                            store.set(key, [7u8; 64], None);
                            ops += usize::from(store.get_view(&key).is_some());
                        }
                    }
                    ops
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    println!(
        "{workers} owner-local workers: {ops} set+get pairs in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
}
