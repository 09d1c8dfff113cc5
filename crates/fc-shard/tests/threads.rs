//! Concurrency: several threads on one store with overlapping keys; owner-local workers on their
//! own threads. Final states are checked exactly.

use std::sync::Arc;
use std::thread;

use fc_shard::{EmbeddedStore, SharedEmbeddedStore};

const THREADS: usize = 4;
const KEYS: usize = 512;
const ROUNDS: usize = 4_000;

fn key(i: usize) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

/// Each thread writes `value = thread:round` for overlapping keys, then every thread's final
/// write to a key it alone owns last (an odd-even split) is checked; shared keys must hold one of
/// the written values, intact.
fn hammer(set: impl Fn(&[u8], &[u8]) + Sync, get: impl Fn(&[u8]) -> Option<Vec<u8>> + Sync) {
    thread::scope(|s| {
        for t in 0..THREADS {
            let set = &set;
            let get = &get;
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let k = key((round * 7 + t) % KEYS);
                    let value = format!("{t}:{round}:{}", "x".repeat(round % 40));
                    set(&k, value.as_bytes());
                    if let Some(v) = get(&key((round * 13) % KEYS)) {
                        let text = String::from_utf8(v).expect("values are never torn");
                        let mut parts = text.splitn(3, ':');
                        let writer: usize = parts.next().unwrap().parse().unwrap();
                        let r: usize = parts.next().unwrap().parse().unwrap();
                        assert!(writer < THREADS);
                        assert_eq!(parts.next().unwrap().len(), r % 40, "value intact");
                    }
                }
                // A private key per thread: its last write must be visible at the end.
                set(
                    format!("private:{t}").as_bytes(),
                    format!("done:{t}").as_bytes(),
                );
            });
        }
    });
    for t in 0..THREADS {
        assert_eq!(
            get(format!("private:{t}").as_bytes()),
            Some(format!("done:{t}").into_bytes())
        );
    }
    // Every key was written by someone: key i is written by thread t when (round*7+t)%KEYS == i.
    for i in 0..KEYS {
        assert!(get(&key(i)).is_some(), "key {i} lost");
    }
}

#[test]
fn embedded_store_under_contention() {
    let store = EmbeddedStore::new(8);
    hammer(|k, v| store.set(k, v, None), |k| store.get(k));
    assert_eq!(store.len(), KEYS + THREADS);
    let stats = store.stats_snapshot().total();
    assert_eq!(stats.keys as usize, KEYS + THREADS);
    assert_eq!(stats.sets as usize, THREADS * (ROUNDS + 1));
}

#[test]
fn shared_store_clones_under_contention() {
    let store = SharedEmbeddedStore::new(4);
    let handles: Vec<SharedEmbeddedStore> = (0..THREADS).map(|_| store.clone()).collect();
    let handles = Arc::new(handles);
    hammer(
        |k, v| handles[k.len() % THREADS].set(k, v, None),
        |k| handles[(k.len() + 1) % THREADS].get(k),
    );
    assert_eq!(store.len(), KEYS + THREADS);
}

#[test]
fn deletes_and_sets_race_to_a_consistent_count() {
    let store = EmbeddedStore::new(4);
    thread::scope(|s| {
        for t in 0..THREADS {
            let store = &store;
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let k = key(round % 64);
                    if (round + t) % 3 == 0 {
                        store.delete(&k);
                    } else {
                        store.set(&k, [t as u8; 24], None);
                    }
                }
            });
        }
    });
    let live = (0..64).filter(|&i| store.exists(&key(i))).count();
    assert_eq!(store.len(), live);
    let stats = store.stats_snapshot().total();
    assert_eq!(stats.keys as usize, live);
    assert_eq!(
        stats.stored_bytes as usize,
        store
            .key_snapshot()
            .iter()
            .map(|k| k.len() + 24)
            .sum::<usize>()
    );
}

#[test]
fn local_workers_each_own_their_shards() {
    let workers = 3;
    let stores = EmbeddedStore::new(16).into_local_stores(workers);
    let per_worker: Vec<Vec<Vec<u8>>> = {
        let probe = &stores[0];
        let mut split = vec![Vec::new(); workers];
        for i in 0..3_000 {
            let k = key(i);
            split[probe.owner_of_key(&k)].push(k);
        }
        split
    };
    assert!(per_worker.iter().all(|keys| !keys.is_empty()));
    let stores: Vec<_> = thread::scope(|s| {
        let joins: Vec<_> = stores
            .into_iter()
            .zip(&per_worker)
            .map(|(mut store, keys)| {
                s.spawn(move || {
                    for (n, k) in keys.iter().enumerate() {
                        store.set(k, n.to_le_bytes(), None);
                    }
                    for (n, k) in keys.iter().enumerate() {
                        assert_eq!(store.get_view(k), Some(&n.to_le_bytes()[..]));
                    }
                    store
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for (w, store) in stores.iter().enumerate() {
        assert_eq!(store.len(), per_worker[w].len());
        assert!(store.owned_shards().all(|s| s % workers == w));
    }
    let joined = EmbeddedStore::from_local_stores(stores).unwrap();
    assert_eq!(joined.len(), 3_000);
    for i in 0..3_000 {
        assert!(joined.exists(&key(i)));
    }
}
