//! `cargo xtask hitratio`: hit ratios of fast-cache's eviction policies and the peers' on the
//! same request sequences.
//!
//! Each request is a read; a miss is followed by a write of the key (a read-through cache).
//! Workloads (seeded, over `--keys` keys, `--requests` requests):
//! - `zipf-0.9`, `zipf-0.99`: Zipf-distributed key popularity (ranks shuffled over key ids);
//! - `scan-zipf-0.99`: the same Zipf stream, with a scan of one-time keys (half the key space)
//!   inserted after every quarter of the requests — what a cache must not let flush its hot set;
//! - `loop`: keys cycled in order over a range 1.5× the largest capacity (LRU's worst case).
//!
//! Capacities are a share of the key space: entries for the peers; for fast-cache a `max_memory`
//! of that many entries times what one entry is charged (values are 32 bytes). Writes
//! `bench-matrix/<run-id>/hitratio.csv` and `hitratio.md`.

use std::fmt::Write as _;
use std::fs;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use anyhow::Context;
use fc_shard::{EmbeddedStore, EvictionPolicy};

#[derive(clap::Args)]
pub(crate) struct HitRatioArgs {
    /// Distinct keys of the Zipf workloads.
    #[arg(long, default_value_t = 100_000)]
    keys: usize,
    /// Requests per workload.
    #[arg(long, default_value_t = 2_000_000)]
    requests: usize,
    /// Capacities in percent of the key space.
    #[arg(long, value_delimiter = ',', default_value = "1,10,25")]
    capacities: Vec<u32>,
    /// Shards of the fast-cache stores (the budget is split evenly over them).
    #[arg(long, default_value_t = 16)]
    shards: usize,
    /// Seed of the request streams.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// A seconds-long smoke (20k keys, 200k requests) for CI.
    #[arg(long)]
    quick: bool,
    /// Output directory (default `bench-matrix/<run-id>/`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run id (default: the UTC time).
    #[arg(long)]
    run_id: Option<String>,
}

const VALUE: [u8; 32] = [0x5A; 32];

/// One cache under test: `access` reads `key` and writes it on a miss; true on a hit.
trait Sim {
    fn access(&mut self, key: u64) -> bool;
}

struct Fc(EmbeddedStore);

impl Sim for Fc {
    fn access(&mut self, key: u64) -> bool {
        let key = key.to_le_bytes();
        if self.0.get_view(&key).is_some() {
            return true;
        }
        self.0.set(key, VALUE, None);
        false
    }
}

struct Moka(moka::sync::Cache<u64, [u8; 32]>, u64);

impl Sim for Moka {
    fn access(&mut self, key: u64) -> bool {
        self.1 += 1;
        if self.1.is_multiple_of(1024) {
            // Moka applies its policy in batches; run them so its size stays honest.
            self.0.run_pending_tasks();
        }
        if self.0.get(&key).is_some() {
            return true;
        }
        self.0.insert(key, VALUE);
        false
    }
}

struct QuickCache(quick_cache::unsync::Cache<u64, [u8; 32]>);

impl Sim for QuickCache {
    fn access(&mut self, key: u64) -> bool {
        if self.0.get(&key).is_some() {
            return true;
        }
        self.0.insert(key, VALUE);
        false
    }
}

struct Lru(lru::LruCache<u64, [u8; 32]>);

impl Sim for Lru {
    fn access(&mut self, key: u64) -> bool {
        if self.0.get(&key).is_some() {
            return true;
        }
        self.0.put(key, VALUE);
        false
    }
}

const BACKENDS: [&str; 5] = ["fc-s3fifo", "fc-lru", "moka", "quick_cache", "lru"];

fn fc_entry_charge() -> u64 {
    let probe = EmbeddedStore::new(1);
    probe.set(0u64.to_le_bytes(), VALUE, None);
    probe.stats_snapshot().total().used_memory
}

fn make(backend: &str, entries: usize, shards: usize) -> Box<dyn Sim> {
    let entries = entries.max(1);
    let fc = |policy| {
        Box::new(Fc(EmbeddedStore::builder(shards)
            .max_memory(fc_entry_charge() * entries as u64)
            .eviction_policy(policy)
            .build())) as Box<dyn Sim>
    };
    match backend {
        "fc-s3fifo" => fc(EvictionPolicy::S3Fifo),
        "fc-lru" => fc(EvictionPolicy::Lru),
        "moka" => Box::new(Moka(
            moka::sync::Cache::builder()
                .max_capacity(entries as u64)
                .build(),
            0,
        )),
        "quick_cache" => Box::new(QuickCache(quick_cache::unsync::Cache::new(entries))),
        _ => Box::new(Lru(lru::LruCache::new(
            NonZeroUsize::new(entries).expect("non-zero"),
        ))),
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Zipf(`s`) samples over `n` ranks by inverse CDF, ranks mapped to shuffled key ids.
fn zipf_stream(n: usize, s: f64, requests: usize, rng: &mut XorShift) -> Vec<u64> {
    let mut cdf = Vec::with_capacity(n);
    let mut total = 0.0;
    for rank in 1..=n {
        total += 1.0 / (rank as f64).powf(s);
        cdf.push(total);
    }
    let mut ids: Vec<u64> = (0..n as u64).collect();
    for i in (1..n).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        ids.swap(i, j);
    }
    (0..requests)
        .map(|_| {
            let u = rng.unit() * total;
            let rank = cdf.partition_point(|&c| c < u).min(n - 1);
            ids[rank]
        })
        .collect()
}

fn workloads(
    keys: usize,
    requests: usize,
    max_capacity: usize,
    seed: u64,
) -> Vec<(&'static str, Vec<u64>)> {
    let mut rng = XorShift(seed | 1);
    let z09 = zipf_stream(keys, 0.9, requests, &mut rng);
    let z099 = zipf_stream(keys, 0.99, requests, &mut rng);
    // Scans of one-time keys (ids beyond the key space, never repeated) after each quarter.
    let mut scan = Vec::with_capacity(requests * 3 / 2);
    let mut next_scan_key = keys as u64 * 10;
    for (i, &k) in z099.iter().enumerate() {
        scan.push(k);
        if (i + 1).is_multiple_of((requests / 4).max(1)) {
            for _ in 0..keys / 2 {
                scan.push(next_scan_key);
                next_scan_key += 1;
            }
        }
    }
    let span = (max_capacity * 3 / 2).max(2) as u64;
    let looped = (0..requests as u64).map(|i| i % span).collect();
    vec![
        ("zipf-0.9", z09),
        ("zipf-0.99", z099),
        ("scan-zipf-0.99", scan),
        ("loop", looped),
    ]
}

pub(crate) fn hitratio(args: HitRatioArgs) -> anyhow::Result<()> {
    let (keys, requests) = if args.quick {
        (20_000, 200_000)
    } else {
        (args.keys, args.requests)
    };
    let run_id = args.run_id.clone().unwrap_or_else(crate::bench::utc_run_id);
    let root = crate::bench::workspace_root()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| root.join("bench-matrix").join(&run_id));
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let max_capacity = keys * *args.capacities.iter().max().unwrap_or(&25) as usize / 100;
    let streams = workloads(keys, requests, max_capacity, args.seed);
    let mut csv = String::from("backend,workload,capacity_pct,requests,hit_ratio\n");
    let mut rows = Vec::new();
    for (workload, stream) in &streams {
        for &pct in &args.capacities {
            let entries = keys * pct as usize / 100;
            for backend in BACKENDS {
                let mut sim = make(backend, entries, args.shards);
                let hits = stream.iter().filter(|&&k| sim.access(k)).count();
                let ratio = hits as f64 / stream.len() as f64;
                println!("{backend:<12} {workload:<15} {pct:>3}%  {ratio:.4}");
                writeln!(
                    csv,
                    "{backend},{workload},{pct},{},{ratio:.6}",
                    stream.len()
                )?;
                rows.push((*workload, pct, backend, ratio));
            }
        }
    }
    fs::write(out.join("hitratio.csv"), csv)?;
    let mut md = format!(
        "# Hit ratios — run {run_id}\n\n`{}` · {keys} keys, {requests} requests per workload, \
         32-byte values, fast-cache with {} shards. A miss is followed by a write (read-through).\n\n\
         | workload | capacity | {} | fc-s3fifo − best peer |\n| --- | ---: |{} ---: |\n",
        crate::bench::command_line(),
        args.shards,
        BACKENDS.join(" | "),
        " ---: |".repeat(BACKENDS.len()),
    );
    for (workload, _) in &streams {
        for &pct in &args.capacities {
            let of = |b: &str| {
                rows.iter()
                    .find(|r| r.0 == *workload && r.1 == pct && r.2 == b)
                    .map_or(0.0, |r| r.3)
            };
            let cells: Vec<String> = BACKENDS
                .iter()
                .map(|b| format!("{:.2}%", of(b) * 100.0))
                .collect();
            let best_peer = ["moka", "quick_cache", "lru"]
                .iter()
                .map(|b| of(b))
                .fold(0.0, f64::max);
            writeln!(
                md,
                "| {workload} | {pct}% | {} | {:+.2} pt |",
                cells.join(" | "),
                (of("fc-s3fifo") - best_peer) * 100.0
            )?;
        }
    }
    fs::write(out.join("hitratio.md"), &md)?;
    crate::charts::draw_and_link(&out, &out.join("hitratio.md"))?;
    crate::bench::write_meta(&out, &run_id, &crate::bench::command_line(), args.seed)?;
    println!("\n{md}\nhitratio: wrote {}", out.display());
    Ok(())
}
