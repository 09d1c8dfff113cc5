//! The memory an object is charged against the budget is an honest estimate: compared with
//! the bytes its structures really request from the allocator (counted by `cap` as the global
//! allocator), for each type at several sizes. The charge may exceed the requested bytes (it
//! also covers the allocator's own headers and rounding, which `cap` cannot see) but never by
//! much, and must never be below them.
//!
//! One test function runs every scenario in turn, so no other test's allocations mix in.

use std::alloc::System;

use cap::Cap;
use fc_shard::{
    EmbeddedStore, GroupReadFrom, GroupStart, StreamId, XAddId, XAddOptions, ZAddOptions,
};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Builds one object from the members.
type Fill = Box<dyn Fn(&EmbeddedStore, &[Vec<u8>])>;

fn member(i: usize) -> Vec<u8> {
    format!("member:{i:08}").into_bytes()
}

/// Requested bytes and charged bytes of one object of `n` elements built by `fill`.
fn measure(n: usize, fill: impl Fn(&EmbeddedStore, &[Vec<u8>])) -> (usize, u64) {
    let members: Vec<Vec<u8>> = (0..n).map(member).collect();
    let store = EmbeddedStore::new(1);
    // A first key so the shard's own tables exist before the measurement.
    store.set(b"warm", b"x", None);
    let before_bytes = ALLOCATOR.allocated();
    let before_charge = store.stats_snapshot().total().used_memory;
    fill(&store, &members);
    let requested = ALLOCATOR.allocated() - before_bytes;
    let charged = store.stats_snapshot().total().used_memory - before_charge;
    drop(store);
    (requested, charged)
}

#[test]
fn object_charges_track_real_allocations() {
    let mut report = Vec::new();
    for n in [100, 10_000] {
        let cases: [(&str, Fill); 6] = [
            (
                "hash",
                Box::new(|s, m| {
                    for x in m {
                        s.hset(b"o", &[(x, b"value-16-bytes!!")]).unwrap();
                    }
                }),
            ),
            (
                "list",
                Box::new(|s, m| {
                    for x in m {
                        s.rpush(b"o", &[x]).unwrap();
                    }
                }),
            ),
            (
                "set",
                Box::new(|s, m| {
                    for x in m {
                        s.sadd(b"o", &[x]).unwrap();
                    }
                }),
            ),
            (
                "zset",
                Box::new(|s, m| {
                    for (i, x) in m.iter().enumerate() {
                        s.zadd(b"o", &[(i as f64, x)], ZAddOptions::default())
                            .unwrap();
                    }
                }),
            ),
            (
                "stream",
                Box::new(|s, m| {
                    for (i, x) in m.iter().enumerate() {
                        let id = XAddId::Explicit(StreamId::new(i as u64 + 1, 0));
                        s.xadd(b"o", id, &[b"field", x], XAddOptions::default())
                            .unwrap();
                    }
                }),
            ),
            (
                "stream with every entry pending",
                Box::new(|s, m| {
                    for (i, x) in m.iter().enumerate() {
                        let id = XAddId::Explicit(StreamId::new(i as u64 + 1, 0));
                        s.xadd(b"o", id, &[b"field", x], XAddOptions::default())
                            .unwrap();
                    }
                    s.xgroup_create(b"o", b"group", GroupStart::Id(StreamId::MIN), false, None)
                        .unwrap();
                    s.xreadgroup(b"o", b"group", b"consumer", GroupReadFrom::New, 0, false)
                        .unwrap();
                }),
            ),
        ];
        for (name, fill) in &cases {
            let (requested, charged) = measure(n, fill);
            let ratio = charged as f64 / requested as f64;
            report.push(format!(
                "{name} n={n}: requested {requested} B ({:.1}/element), charged {charged} B ({:.1}/element), ratio {ratio:.2}",
                requested as f64 / n as f64,
                charged as f64 / n as f64
            ));
            assert!(
                (1.0..=1.6).contains(&ratio),
                "{name} at {n}: charged {charged} for {requested} requested\n{}",
                report.join("\n")
            );
        }
    }
    println!("{}", report.join("\n"));
}
