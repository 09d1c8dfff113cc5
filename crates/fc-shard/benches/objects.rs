//! Redis object operations at 10, 1k and 100k members: hset/hget, lpush+lpop, sadd+srem,
//! sismember,
//! zadd/zrank/zrange, and for sorted sets a `BTreeMap` baseline (ordered `(score, member)` set
//! plus a member → score `HashMap`, the obvious Rust structure) in the same run. Each sample
//! runs 256 operations on members drawn by a seeded xorshift; building the collection is
//! outside the timed closure. One owner-local store (no lock) so the numbers are the data
//! structures'.
//!
//! Run: `cargo bench -p fc-shard --bench objects`

use std::collections::{BTreeSet, HashMap};
use std::hint::black_box;

use divan::Bencher;
use divan::counter::ItemsCount;
use fc_shard::{EmbeddedStore, LocalEmbeddedStore, ZAddOptions, ZRange};

const OPS: usize = 256;
const SIZES: [usize; 3] = [10, 1_000, 100_000];
const KEY: &[u8] = b"object";

fn main() {
    divan::main();
}

fn store() -> LocalEmbeddedStore {
    EmbeddedStore::new(1)
        .into_local_stores(1)
        .pop()
        .expect("one worker")
}

fn member(i: usize) -> Vec<u8> {
    format!("member:{i:08}").into_bytes()
}

/// Member indexes below `n` from a seeded xorshift64.
fn sequence(n: usize) -> Vec<usize> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..OPS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        })
        .collect()
}

fn score(i: usize, round: usize) -> f64 {
    ((i * 7919 + round * 104_729) % 1_000_003) as f64
}

// ----- hashes ---------------------------------------------------------------------------------

fn hash_of(n: usize) -> (LocalEmbeddedStore, Vec<Vec<u8>>) {
    let mut s = store();
    let members: Vec<Vec<u8>> = (0..n).map(member).collect();
    for chunk in members.chunks(1024) {
        let pairs: Vec<(&[u8], &[u8])> = chunk.iter().map(|m| (&m[..], &b"value-64"[..])).collect();
        s.hset(KEY, &pairs).expect("hset");
    }
    (s, members)
}

#[divan::bench(args = SIZES)]
fn hset_overwrite(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, members) = hash_of(n);
    let seq = sequence(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for &i in &seq {
            black_box(s.hset(KEY, &[(&members[i], b"value-65")]).expect("hset"));
        }
    });
}

#[divan::bench(args = SIZES)]
fn hget(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, members) = hash_of(n);
    let seq = sequence(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for &i in &seq {
            black_box(s.hget(KEY, &members[i]).expect("hget"));
        }
    });
}

// ----- lists ----------------------------------------------------------------------------------

#[divan::bench(args = SIZES)]
fn lpush_lpop(bencher: Bencher<'_, '_>, n: usize) {
    let mut s = store();
    let members: Vec<Vec<u8>> = (0..n).map(member).collect();
    for chunk in members.chunks(1024) {
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        s.rpush(KEY, &refs).expect("rpush");
    }
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for i in 0..OPS {
            s.lpush(KEY, &[&members[i % n]]).expect("lpush");
            black_box(s.lpop(KEY, 1).expect("lpop"));
        }
    });
}

// ----- sets -----------------------------------------------------------------------------------

fn set_of(n: usize) -> (LocalEmbeddedStore, Vec<Vec<u8>>) {
    let mut s = store();
    let members: Vec<Vec<u8>> = (0..n).map(member).collect();
    for chunk in members.chunks(1024) {
        let refs: Vec<&[u8]> = chunk.iter().map(Vec::as_slice).collect();
        s.sadd(KEY, &refs).expect("sadd");
    }
    (s, members)
}

#[divan::bench(args = SIZES)]
fn sadd_srem(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, members) = set_of(n);
    let seq = sequence(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for &i in &seq {
            s.srem(KEY, &[&members[i]]).expect("srem");
            black_box(s.sadd(KEY, &[&members[i]]).expect("sadd"));
        }
    });
}

#[divan::bench(args = SIZES)]
fn sismember(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, members) = set_of(n);
    let seq = sequence(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for &i in &seq {
            black_box(s.sismember(KEY, &members[i]).expect("sismember"));
        }
    });
}

// ----- sorted sets ----------------------------------------------------------------------------

fn zset_of(n: usize) -> (LocalEmbeddedStore, Vec<Vec<u8>>) {
    let mut s = store();
    let members: Vec<Vec<u8>> = (0..n).map(member).collect();
    for (c, chunk) in members.chunks(1024).enumerate() {
        let entries: Vec<(f64, &[u8])> = chunk
            .iter()
            .enumerate()
            .map(|(j, m)| (score(c * 1024 + j, 0), &m[..]))
            .collect();
        s.zadd(KEY, &entries, ZAddOptions::default()).expect("zadd");
    }
    (s, members)
}

/// The baseline: an ordered set of `(score bits, member)` and a member → score map.
struct Baseline {
    order: BTreeSet<(u64, Vec<u8>)>,
    scores: HashMap<Vec<u8>, f64>,
}

impl Baseline {
    fn of(n: usize) -> (Self, Vec<Vec<u8>>) {
        let members: Vec<Vec<u8>> = (0..n).map(member).collect();
        let mut b = Self {
            order: BTreeSet::new(),
            scores: HashMap::new(),
        };
        for (i, m) in members.iter().enumerate() {
            b.add(m, score(i, 0));
        }
        (b, members)
    }

    /// Positive scores only, so the bits order as the numbers.
    fn add(&mut self, m: &[u8], s: f64) {
        if let Some(old) = self.scores.insert(m.to_vec(), s) {
            self.order.remove(&(old.to_bits(), m.to_vec()));
        }
        self.order.insert((s.to_bits(), m.to_vec()));
    }

    fn rank(&self, m: &[u8]) -> Option<usize> {
        let s = self.scores.get(m)?;
        Some(self.order.range(..(s.to_bits(), m.to_vec())).count())
    }
}

#[divan::bench(args = SIZES)]
fn zadd_rescore(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, members) = zset_of(n);
    let seq = sequence(n);
    let mut round = 0;
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        round += 1;
        for &i in &seq {
            let e = [(score(i, round), &members[i][..])];
            black_box(s.zadd(KEY, &e, ZAddOptions::default()).expect("zadd"));
        }
    });
}

#[divan::bench(args = SIZES)]
fn zadd_rescore_btreemap(bencher: Bencher<'_, '_>, n: usize) {
    let (mut b, members) = Baseline::of(n);
    let seq = sequence(n);
    let mut round = 0;
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        round += 1;
        for &i in &seq {
            b.add(&members[i], score(i, round));
        }
        black_box(b.order.len());
    });
}

#[divan::bench(args = SIZES)]
fn zrank(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, members) = zset_of(n);
    let seq = sequence(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for &i in &seq {
            black_box(s.zrank(KEY, &members[i], false).expect("zrank"));
        }
    });
}

#[divan::bench(args = SIZES)]
fn zrank_btreemap(bencher: Bencher<'_, '_>, n: usize) {
    let (b, members) = Baseline::of(n);
    let seq = sequence(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for &i in &seq {
            black_box(b.rank(&members[i]));
        }
    });
}

#[divan::bench(args = SIZES)]
fn zrange_top10(bencher: Bencher<'_, '_>, n: usize) {
    let (mut s, _) = zset_of(n);
    bencher.counter(ItemsCount::new(OPS)).bench_local(|| {
        for _ in 0..OPS {
            black_box(
                s.zrange(KEY, ZRange::Rank(0, 9), true, None)
                    .expect("zrange"),
            );
        }
    });
}
