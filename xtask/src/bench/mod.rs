//! `cargo xtask bench`: the embedded matrix (fast-cache's three store kinds against DashMap, Moka,
//! lru and quick_cache) and, with `--memory`, bytes per entry measured in fresh child processes.
//!
//! Output goes to `bench-matrix/<run-id>/` (`embedded.csv`, `memory.csv`, `meta.json`,
//! `summary.md`); a full run updates `bench-matrix/LATEST`. See `bench-matrix/README.md`.

mod backends;
pub(crate) mod driver;
mod memory;
pub(crate) mod report;

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use fc_shard::{EmbeddedStore, LocalEmbeddedStoreBootstrap, SharedEmbeddedStore};

use backends::{Backend, FcLocalWorker, FcRefWorker, FcSharedWorker};
use driver::{Plan, Sample};
pub(crate) use memory::{MemoryChildArgs, memory_child};
pub(crate) use report::{command_line, utc_run_id, workspace_root, write_meta};

/// Values larger than this many bytes in total get fewer keys (the `keys` column says how many).
const DATA_BUDGET: usize = 512 << 20;

/// Operation mix of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Mix {
    /// Reads only.
    #[value(name = "get")]
    Get,
    /// Writes only (overwrites of preloaded keys, or inserts of evicted ones).
    #[value(name = "set")]
    Set,
    /// 80% reads, 20% writes.
    #[value(name = "80-20")]
    ReadMostly,
}

/// Whether writes carry a TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum TtlMode {
    /// No TTL.
    #[value(name = "none")]
    None,
    /// Every write carries a one-hour TTL (nothing expires during the run).
    #[value(name = "active")]
    Active,
}

/// Capacity bound of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Eviction {
    /// Unbounded: every key stays resident.
    #[value(name = "none")]
    None,
    /// LRU-like eviction with room for 25% of the keys.
    #[value(name = "lru25")]
    Lru25,
}

/// How reads use the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum ReadMode {
    /// Borrow the value (or the clone a cache hands out) and read its first byte.
    #[value(name = "ref")]
    Ref,
    /// Copy the value into a reusable buffer.
    #[value(name = "copy")]
    Copy,
}

macro_rules! display_via_value_enum {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let v = clap::ValueEnum::to_possible_value(self).expect("no skipped variants");
                f.write_str(v.get_name())
            }
        }
    )*};
}
display_via_value_enum!(Mix, TtlMode, Eviction, ReadMode, Backend);

/// One row shape of the matrix (every backend runs it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Shape {
    pub(crate) ttl: TtlMode,
    pub(crate) eviction: Eviction,
    pub(crate) read_mode: ReadMode,
    pub(crate) threads: usize,
    pub(crate) value_bytes: usize,
    pub(crate) mix: Mix,
    pub(crate) keys: usize,
}

impl Shape {
    /// Entries a bounded backend keeps for `keys` keys.
    pub(crate) fn resident(&self, keys: usize) -> usize {
        match self.eviction {
            Eviction::None => keys,
            Eviction::Lru25 => keys / 4,
        }
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct BenchArgs {
    /// Seconds measured per repeat [default: 0.5; --quick: 0.03].
    #[arg(long)]
    duration: Option<f64>,
    /// Seconds of warmup before each timed window [default: 0.1; --quick: 0.01].
    #[arg(long)]
    warmup: Option<f64>,
    /// Timed windows per cell, interleaved across backends; the CSV reports medians [default: 7;
    /// --quick: 1].
    #[arg(long)]
    repeats: Option<usize>,
    /// Worker thread counts, comma-separated [default: 1..=nproc]. Workers are pinned one per CPU.
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Value sizes in bytes [default: 64,512,4096,65536,1048576; --quick: 64,4096].
    #[arg(long, value_delimiter = ',')]
    values: Option<Vec<usize>>,
    /// Operation mixes [default: get,set,80-20].
    #[arg(long, value_delimiter = ',')]
    mixes: Option<Vec<Mix>>,
    /// Backends [default: all].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<Backend>>,
    /// TTL modes [default: none; --quick: none,active].
    #[arg(long, value_delimiter = ',')]
    ttl: Option<Vec<TtlMode>>,
    /// Eviction modes [default: none,lru25].
    #[arg(long, value_delimiter = ',')]
    eviction: Option<Vec<Eviction>>,
    /// Read modes for rows with reads [default: ref; --quick: ref,copy].
    #[arg(long = "read-mode", value_delimiter = ',')]
    read_mode: Option<Vec<ReadMode>>,
    /// Keys in the key space (fewer for large values: at most 512 MiB of values) [default:
    /// 100000; --quick: 10000].
    #[arg(long)]
    keys: Option<usize>,
    /// Seed of the key and operation sequences.
    #[arg(long, default_value_t = 0x5EED_CAFE_F00D_0001)]
    seed: u64,
    /// A seconds-long smoke of every backend and mode (CI): small defaults, not for publishing.
    #[arg(long)]
    quick: bool,
    /// Measure bytes per entry (1M entries per backend and value size, each in a fresh child
    /// process; --quick: 100k) instead of throughput; writes memory.csv.
    #[arg(long)]
    memory: bool,
    /// Memory rows: value sizes [default: 16,64,256,1024].
    #[arg(long = "memory-values", value_delimiter = ',')]
    memory_values: Option<Vec<usize>>,
    /// Output directory [default: bench-matrix/<run-id>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run identifier [default: UTC time of the run]. Reuse one to add memory rows to a run.
    #[arg(long = "run-id")]
    run_id: Option<String>,
    /// Do not pin workers to CPUs.
    #[arg(long = "no-pin")]
    no_pin: bool,
    /// fast-cache's eviction policy in `lru25` rows, as each peer runs its own (Moka
    /// TinyLFU, quick_cache CLOCK-Pro-like, lru exact LRU). S3-FIFO is the one fast-cache
    /// recommends for a bounded cache (a better hit ratio than LRU on every Zipf and scan row of
    /// `cargo xtask hitratio`); `lru` measures the CLOCK approximation of LRU.
    #[arg(long = "fc-policy", value_enum, default_value = "s3fifo")]
    fc_policy: FcPolicy,
}

/// fast-cache eviction policies selectable for `lru25` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FcPolicy {
    /// `EvictionPolicy::Lru` (CLOCK).
    Lru,
    /// `EvictionPolicy::S3Fifo`.
    S3fifo,
}

/// The policy `fc_store` builds bounded stores with (set once from the command line).
pub(crate) static FC_POLICY: std::sync::OnceLock<FcPolicy> = std::sync::OnceLock::new();

/// The policy of this run's bounded fast-cache stores: the command line's, S3-FIFO by default.
pub(crate) fn fc_policy() -> FcPolicy {
    FC_POLICY.get().copied().unwrap_or(FcPolicy::S3fifo)
}

/// The resolved settings of a run.
struct Settings {
    duration: Duration,
    warmup: Duration,
    repeats: usize,
    threads: Vec<usize>,
    values: Vec<usize>,
    mixes: Vec<Mix>,
    backends: Vec<Backend>,
    ttl: Vec<TtlMode>,
    eviction: Vec<Eviction>,
    read_mode: Vec<ReadMode>,
    keys: usize,
}

fn resolve(args: &BenchArgs) -> anyhow::Result<Settings> {
    let q = args.quick;
    let nproc = std::thread::available_parallelism().map_or(1, |n| n.get());
    let secs = |v: Option<f64>, full: f64, quick: f64| -> anyhow::Result<Duration> {
        let s = v.unwrap_or(if q { quick } else { full });
        Duration::try_from_secs_f64(s).with_context(|| format!("bad duration {s}"))
    };
    let s = Settings {
        duration: secs(args.duration, 0.5, 0.03)?,
        warmup: secs(args.warmup, 0.1, 0.01)?,
        repeats: args.repeats.unwrap_or(if q { 1 } else { 7 }),
        threads: args
            .threads
            .clone()
            .unwrap_or_else(|| (1..=nproc).collect()),
        values: args.values.clone().unwrap_or_else(|| {
            if q {
                vec![64, 4096]
            } else {
                vec![64, 512, 4096, 65536, 1 << 20]
            }
        }),
        mixes: args
            .mixes
            .clone()
            .unwrap_or_else(|| vec![Mix::Get, Mix::Set, Mix::ReadMostly]),
        backends: args
            .backends
            .clone()
            .unwrap_or_else(|| Backend::ALL.to_vec()),
        ttl: args.ttl.clone().unwrap_or_else(|| {
            if q {
                vec![TtlMode::None, TtlMode::Active]
            } else {
                vec![TtlMode::None]
            }
        }),
        eviction: args
            .eviction
            .clone()
            .unwrap_or_else(|| vec![Eviction::None, Eviction::Lru25]),
        read_mode: args.read_mode.clone().unwrap_or_else(|| {
            if q {
                vec![ReadMode::Ref, ReadMode::Copy]
            } else {
                vec![ReadMode::Ref]
            }
        }),
        keys: args.keys.unwrap_or(if q { 10_000 } else { 100_000 }),
    };
    if s.repeats == 0 || s.keys < 16 || s.threads.contains(&0) || s.values.contains(&0) {
        bail!("--repeats, --threads and --values must be positive and --keys at least 16");
    }
    Ok(s)
}

/// Every shape of the matrix, in the order rows are written.
fn shapes(s: &Settings) -> Vec<Shape> {
    let mut out = Vec::new();
    for &ttl in &s.ttl {
        for &eviction in &s.eviction {
            for &threads in &s.threads {
                for &value_bytes in &s.values {
                    for &mix in &s.mixes {
                        // Write-only rows read nothing: one row, filed under the first read mode.
                        let modes = if mix == Mix::Set {
                            &s.read_mode[..1]
                        } else {
                            &s.read_mode[..]
                        };
                        for &read_mode in modes {
                            let keys = s.keys.min((DATA_BUDGET / value_bytes).max(1024));
                            out.push(Shape {
                                ttl,
                                eviction,
                                read_mode,
                                threads,
                                value_bytes,
                                mix,
                                keys,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// One measured row of `embedded.csv`.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(crate) backend: Backend,
    pub(crate) shape: Shape,
    pub(crate) ops_per_sec: f64,
    pub(crate) cpu_util: f64,
    pub(crate) hit_ratio: f64,
    pub(crate) repeats: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `16`-byte keys `key:000000000042`.
fn make_keys(n: usize) -> Vec<[u8; 16]> {
    (0..n)
        .map(|i| {
            let mut k = [0u8; 16];
            k.copy_from_slice(format!("key:{i:012}").as_bytes());
            k
        })
        .collect()
}

/// A backend built and preloaded for one shape, kept alive across the interleaved repeats.
enum Loaded {
    FcLocal(Vec<FcLocalWorker>, Vec<Vec<u32>>),
    FcEmbedded(EmbeddedStore),
    FcShared(SharedEmbeddedStore),
    Dashmap(backends::DashMapCache),
    Moka(backends::MokaCache),
    Lru(backends::LruCache),
    QuickCache(backends::QuickCache),
}

impl Loaded {
    fn new(backend: Backend, shape: &Shape, keys: &[[u8; 16]], value: &[u8]) -> Self {
        let t = shape.threads;
        match backend {
            Backend::FcLocal => {
                let store = backends::fc_store(shape, keys, value);
                let boot = LocalEmbeddedStoreBootstrap::from_embedded(store, t);
                let mut pools = vec![Vec::new(); t];
                for (i, key) in keys.iter().enumerate() {
                    pools[boot.owner_of_key(key)].push(i as u32);
                }
                let workers = boot
                    .into_stores()
                    .into_iter()
                    .map(|l| FcLocalWorker::new(l, shape))
                    .collect();
                Loaded::FcLocal(workers, pools)
            }
            Backend::FcEmbedded => Loaded::FcEmbedded(backends::fc_store(shape, keys, value)),
            Backend::FcShared => Loaded::FcShared(SharedEmbeddedStore::from(backends::fc_store(
                shape, keys, value,
            ))),
            Backend::Dashmap => Loaded::Dashmap(backends::dashmap(keys, value)),
            Backend::Moka => Loaded::Moka(backends::moka(shape, keys, value)),
            Backend::Lru => Loaded::Lru(backends::lru(shape, keys, value)),
            Backend::QuickCache => Loaded::QuickCache(backends::quick_cache(shape, keys, value)),
        }
    }

    /// One warmup and one timed window with `shape.threads` workers.
    fn measure(&mut self, shape: &Shape, all: &[Vec<u32>], plan: &Plan<'_>) -> Sample {
        let t = shape.threads;
        match self {
            Loaded::FcLocal(workers, pools) => driver::run(workers, pools, plan),
            Loaded::FcEmbedded(store) => {
                let mut w: Vec<_> = (0..t).map(|_| FcRefWorker::new(store, shape)).collect();
                driver::run(&mut w, all, plan)
            }
            Loaded::FcShared(store) => {
                let mut w: Vec<_> = (0..t)
                    .map(|_| FcSharedWorker::new(store.clone(), shape))
                    .collect();
                driver::run(&mut w, all, plan)
            }
            Loaded::Dashmap(map) => driver::run(&mut vec![&*map; t], all, plan),
            Loaded::Moka(cache) => driver::run(&mut vec![&*cache; t], all, plan),
            Loaded::Lru(cache) => driver::run(&mut vec![&*cache; t], all, plan),
            Loaded::QuickCache(cache) => driver::run(&mut vec![&*cache; t], all, plan),
        }
    }
}

/// Entry point of `cargo xtask bench`.
pub(crate) fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let settings = resolve(&args)?;
    let _ = FC_POLICY.set(args.fc_policy);
    let run_id = args.run_id.clone().unwrap_or_else(report::utc_run_id);
    let root = report::workspace_root()?;
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => root.join("bench-matrix").join(&run_id),
    };
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let command = report::command_line();

    if args.memory {
        let values = args
            .memory_values
            .clone()
            .unwrap_or_else(|| vec![16, 64, 256, 1024]);
        let entries = if args.quick { 100_000 } else { 1_000_000 };
        let rows = memory::run(&settings.backends, &values, entries)?;
        memory::write_csv(&out.join("memory.csv"), &rows)?;
    } else {
        let rows = run_matrix(&settings, args.seed, !args.no_pin)?;
        write_embedded_csv(&out.join("embedded.csv"), &run_id, &rows)?;
    }
    report::write_meta(&out, &run_id, &command, args.seed)?;
    report::write_summary(&out, &run_id)?;
    crate::charts::draw_and_link(&out, &out.join("summary.md"))?;
    if args.out.is_none() && !args.quick {
        fs::write(
            root.join("bench-matrix").join("LATEST"),
            format!("{run_id}\n"),
        )?;
    }
    println!("bench: wrote {}", out.display());
    Ok(())
}

/// Runs every shape. Within a shape, all backends are loaded first and the repeats are
/// interleaved (repeat 1 of every backend, then repeat 2, ...; the starting backend rotates), so
/// a slow spell of this shared machine lands on every backend rather than on one.
fn run_matrix(s: &Settings, seed: u64, pin: bool) -> anyhow::Result<Vec<Row>> {
    let cpus = if pin {
        driver::allowed_cpus()
    } else {
        Vec::new()
    };
    let mut rows = Vec::new();
    let mut keys_cache: Option<Vec<[u8; 16]>> = None;
    let all_shapes = shapes(s);
    let progress = crate::progress::bar(all_shapes.len() as u64, "bench");
    for shape in &all_shapes {
        progress.inc(1);
        if keys_cache.as_ref().is_none_or(|k| k.len() != shape.keys) {
            keys_cache = Some(make_keys(shape.keys));
        }
        let keys = keys_cache.as_deref().expect("keys made above");
        let value: Vec<u8> = (0..shape.value_bytes).map(|i| (i % 251) as u8).collect();
        let backends: Vec<Backend> = s
            .backends
            .iter()
            .copied()
            .filter(|b| b.supports(shape).is_ok())
            .collect();
        if backends.is_empty() {
            continue;
        }
        // Loaded last-listed first, so the peers get their memory before fast-cache does (the
        // first backend loaded gets the least fragmented memory).
        let mut loaded: Vec<Loaded> = backends
            .iter()
            .rev()
            .map(|&b| Loaded::new(b, shape, keys, &value))
            .collect();
        loaded.reverse();
        let all = vec![(0..keys.len() as u32).collect::<Vec<u32>>(); shape.threads];
        let plan = Plan {
            keys,
            value: &value,
            mix: shape.mix,
            read_mode: shape.read_mode,
            warmup: s.warmup,
            duration: s.duration,
            seed,
            cpus: &cpus,
        };
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); backends.len()];
        for r in 0..s.repeats {
            for k in 0..backends.len() {
                let i = (k + r) % backends.len();
                samples[i].push(loaded[i].measure(shape, &all, &plan));
            }
        }
        drop(loaded);
        for (backend, samples) in backends.into_iter().zip(samples) {
            let row = Row {
                backend,
                shape: *shape,
                ops_per_sec: median(samples.iter().map(|x| x.ops_per_sec).collect()),
                cpu_util: median(samples.iter().map(|x| x.cpu_util).collect()),
                hit_ratio: median(samples.iter().map(|x| x.hit_ratio).collect()),
                repeats: samples.len(),
            };
            progress.suspend(|| println!(
                "{:<12} t={} v={:<8} {:<6} ttl={:<6} ev={:<5} read={:<4} keys={:<6} {:>14.0} ops/s  cpu {:.2}  hit {:.3}",
                backend.name(),
                shape.threads,
                shape.value_bytes,
                shape.mix,
                shape.ttl,
                shape.eviction,
                shape.read_mode,
                shape.keys,
                row.ops_per_sec,
                row.cpu_util,
                row.hit_ratio
            ));
            rows.push(row);
        }
    }
    progress.finish_and_clear();
    if rows.is_empty() {
        bail!("no backend supports any requested shape");
    }
    Ok(rows)
}

pub(crate) const EMBEDDED_HEADER: &str = "run_id,backend,threads,value_bytes,mix,ttl,eviction,read_mode,keys,ops_per_sec,gb_per_sec,cpu_util,hit_ratio,repeats";

fn write_embedded_csv(path: &Path, run_id: &str, rows: &[Row]) -> anyhow::Result<()> {
    let mut text = String::from(EMBEDDED_HEADER);
    text.push('\n');
    for r in rows {
        let s = &r.shape;
        text.push_str(&format!(
            "{run_id},{},{},{},{},{},{},{},{},{:.0},{:.4},{:.3},{:.4},{}\n",
            r.backend,
            s.threads,
            s.value_bytes,
            s.mix,
            s.ttl,
            s.eviction,
            s.read_mode,
            s.keys,
            r.ops_per_sec,
            r.ops_per_sec * s.value_bytes as f64 / 1e9,
            r.cpu_util,
            r.hit_ratio,
            r.repeats
        ));
    }
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
