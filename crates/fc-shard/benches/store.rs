//! 64-byte GET and SET over 100k preloaded keys for the three store kinds, with `DashMap` in the
//! same run as the reference. Each sample runs 1024 operations on keys drawn by a seeded
//! xorshift; setup (preload, key sequence) is outside the timed closure.
//!
//! Run: `cargo bench -p fc-shard --bench store`

use std::hint::black_box;

use dashmap::DashMap;
use divan::Bencher;
use divan::counter::ItemsCount;
use fc_shard::{EmbeddedStore, LocalEmbeddedStore, SharedEmbeddedStore};

const KEYS: usize = 100_000;
const OPS: usize = 1024;
const SHARDS: usize = 16;

fn main() {
    divan::main();
}

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS)
        .map(|i| format!("key:{i:012}").into_bytes())
        .collect()
}

/// Indexes into `keys()` from a seeded xorshift64.
fn sequence(seed: u64) -> Vec<usize> {
    let mut x = seed;
    (0..OPS * 64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % KEYS as u64) as usize
        })
        .collect()
}

fn value() -> Vec<u8> {
    vec![0xAB; 64]
}

fn embedded() -> (EmbeddedStore, Vec<Vec<u8>>) {
    let store = EmbeddedStore::new(SHARDS);
    let keys = keys();
    for k in &keys {
        store.set(k, value(), None);
    }
    (store, keys)
}

fn local() -> (LocalEmbeddedStore, Vec<Vec<u8>>) {
    let (store, keys) = embedded();
    let local = store.into_local_stores(1).pop().expect("one worker");
    (local, keys)
}

type Map = DashMap<Vec<u8>, Vec<u8>>;

fn dashmap() -> (Map, Vec<Vec<u8>>) {
    let map = DashMap::new();
    let keys = keys();
    for k in &keys {
        map.insert(k.clone(), value());
    }
    (map, keys)
}

/// Runs `op` on OPS keys per sample, walking the precomputed sequence.
fn run(bencher: Bencher<'_, '_>, keys: &[Vec<u8>], mut op: impl FnMut(&[u8])) {
    let seq = sequence(0x9E37_79B9_7F4A_7C15);
    let mut at = 0;
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for _ in 0..OPS {
            op(&keys[seq[at]]);
            at = (at + 1) % seq.len();
        }
    });
}

mod get_64b {
    use super::*;

    #[divan::bench]
    fn local_view(bencher: Bencher<'_, '_>) {
        let (mut store, keys) = local();
        run(bencher, &keys, |k| {
            black_box(store.get_view(k).map(<[u8]>::len));
        });
    }

    #[divan::bench]
    fn embedded_view(bencher: Bencher<'_, '_>) {
        let (store, keys) = embedded();
        run(bencher, &keys, |k| {
            black_box(store.get_view(k).map(|v| v.len()));
        });
    }

    #[divan::bench]
    fn shared_view(bencher: Bencher<'_, '_>) {
        let (store, keys) = embedded();
        let store = SharedEmbeddedStore::from(store);
        run(bencher, &keys, |k| {
            black_box(store.get_view(k).map(|v| v.len()));
        });
    }

    #[divan::bench]
    fn dashmap_ref(bencher: Bencher<'_, '_>) {
        let (map, keys) = dashmap();
        run(bencher, &keys, |k| {
            black_box(map.get(k).map(|v| v.len()));
        });
    }

    #[divan::bench]
    fn local_copy(bencher: Bencher<'_, '_>) {
        let (mut store, keys) = local();
        run(bencher, &keys, |k| {
            black_box(store.get(k));
        });
    }

    #[divan::bench]
    fn dashmap_copy(bencher: Bencher<'_, '_>) {
        let (map, keys) = dashmap();
        run(bencher, &keys, |k| {
            black_box(map.get(k).map(|v| v.clone()));
        });
    }
}

mod set_64b {
    use super::*;

    #[divan::bench]
    fn local(bencher: Bencher<'_, '_>) {
        let (mut store, keys) = super::local();
        let v = value();
        run(bencher, &keys, |k| store.set_value_bytes(k, &v, None));
    }

    #[divan::bench]
    fn embedded(bencher: Bencher<'_, '_>) {
        let (store, keys) = super::embedded();
        let v = value();
        run(bencher, &keys, |k| store.set_value_bytes(k, &v, None));
    }

    #[divan::bench]
    fn shared(bencher: Bencher<'_, '_>) {
        let (store, keys) = super::embedded();
        let store = SharedEmbeddedStore::from(store);
        let v = value();
        run(bencher, &keys, |k| store.set_value_bytes(k, &v, None));
    }

    /// DashMap needs owned keys and values: the caller's clone is part of its cost, as it is for
    /// any application that inserts borrowed data.
    #[divan::bench]
    fn dashmap(bencher: Bencher<'_, '_>) {
        let (map, keys) = super::dashmap();
        let v = value();
        run(bencher, &keys, |k| {
            map.insert(k.to_vec(), v.clone());
        });
    }
}

/// Runs `op` on OPS keys per sample in batches of `BATCH` consecutive keys of the sequence.
fn run_batches(bencher: Bencher<'_, '_>, keys: &[Vec<u8>], mut op: impl FnMut(&[&[u8]])) {
    const BATCH: usize = 32;
    let seq = sequence(0x9E37_79B9_7F4A_7C15);
    let batches: Vec<Vec<&[u8]>> = seq
        .chunks(BATCH)
        .map(|c| c.iter().map(|&i| &keys[i][..]).collect())
        .collect();
    let mut at = 0;
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for _ in 0..OPS / BATCH {
            op(&batches[at]);
            at = (at + 1) % batches.len();
        }
    });
}

/// 32 keys at a time (a pipelined client's batch): one lookup after another, the batch API
/// (which prefetches each window's buckets and entries first), and single lookups after
/// `prefetch_routes` (what the server does with a pipelined read).
mod batch_get_64b {
    use super::*;

    #[divan::bench]
    fn local_one_by_one(bencher: Bencher<'_, '_>) {
        let (mut store, keys) = local();
        run_batches(bencher, &keys, |batch| {
            for k in batch {
                black_box(store.get_view(k).map(<[u8]>::len));
            }
        });
    }

    #[divan::bench]
    fn local_batch_view(bencher: Bencher<'_, '_>) {
        let (mut store, keys) = local();
        run_batches(bencher, &keys, |batch| {
            black_box(store.batch_get_view(batch).len());
        });
    }

    #[divan::bench]
    fn local_prefetched(bencher: Bencher<'_, '_>) {
        let (mut store, keys) = local();
        let mut routes = Vec::with_capacity(32);
        run_batches(bencher, &keys, |batch| {
            routes.clear();
            routes.extend(batch.iter().map(|k| store.route_key(k)));
            store.prefetch_routes(&routes);
            for (route, k) in routes.iter().zip(batch) {
                black_box(store.get_view_routed(route, k).map(<[u8]>::len));
            }
        });
    }

    #[divan::bench]
    fn dashmap_one_by_one(bencher: Bencher<'_, '_>) {
        let (map, keys) = dashmap();
        run_batches(bencher, &keys, |batch| {
            for k in batch {
                black_box(map.get(*k).map(|v| v.len()));
            }
        });
    }
}
