//! Bytes per entry beyond key and value: RSS growth while loading N entries (16-byte keys,
//! V-byte values) into one store kind, in this process. Run one backend per process so earlier
//! allocations do not hide later ones:
//!
//! `cargo run --release -p fc-shard --example bytes_per_entry -- <fc|dashmap> [entries] [value_bytes]`

use std::hint::black_box;

use dashmap::DashMap;
use fc_shard::EmbeddedStore;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn key(i: usize) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..4].copy_from_slice(b"key:");
    k[4..].copy_from_slice(format!("{i:012}").as_bytes());
    k
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let backend = args.get(1).map_or("fc", String::as_str);
    let entries: usize = args.get(2).map_or(1_000_000, |s| s.parse().unwrap());
    let value_bytes: usize = args.get(3).map_or(64, |s| s.parse().unwrap());
    let value = vec![0x5Au8; value_bytes];
    let before = rss_bytes();
    match backend {
        "fc" => {
            let store = EmbeddedStore::new(16);
            for i in 0..entries {
                store.set(key(i), &value, None);
            }
            let after = rss_bytes();
            report(backend, entries, value_bytes, after - before);
            black_box(store);
        }
        "dashmap" => {
            let map: DashMap<Vec<u8>, Vec<u8>> = DashMap::new();
            for i in 0..entries {
                map.insert(key(i).to_vec(), value.clone());
            }
            let after = rss_bytes();
            report(backend, entries, value_bytes, after - before);
            black_box(map);
        }
        other => panic!("unknown backend {other}: use fc or dashmap"),
    }
}

fn report(backend: &str, entries: usize, value_bytes: usize, grown: u64) {
    let per_entry = grown as f64 / entries as f64;
    let payload = (16 + value_bytes) as f64;
    println!(
        "{backend},{value_bytes},{entries},{per_entry:.1},{:.1}",
        per_entry - payload
    );
}
