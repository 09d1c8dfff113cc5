//! Host↔device throughput of session batches of KV-cache chunks (`cargo xtask bench-gpu`
//! runs it and writes `bench-matrix/<run>/gpu.csv`; it needs an NVIDIA GPU and its driver).
//!
//! For each chunk size (16 KiB, 256 KiB, 2 MiB) and batch (16, 64, 256 chunks), in the same
//! run, the median of `--iterations` transfers of:
//! - `contiguous`: one copy of one pinned buffer of the batch's total size (the bus's
//!   practical limit);
//! - `naive`: what a user writes without fc-gpu: the values fetched as `Vec`s from the store
//!   (`batch_get_session`), then one copy per chunk from that pageable memory (device → host:
//!   one copy per chunk into a `Vec`, then a `set` per chunk);
//! - `fc-gpu`: `Gpu::load_session` (the session gathered from the store into pinned staging by
//!   `--gather-threads` threads, piece by piece, each piece's coalesced copies issued as soon
//!   as it is gathered) and `Gpu::store_session` (copies into pinned staging piece by piece;
//!   as each piece lands, the gather threads build its chunks' entries, which then move into
//!   the store under one lock).
//!
//! Then, host → device for 64 chunks of 2 MiB, `fc-gpu-threads-N`: the same load with 1, 2, 4
//! and 8 gather threads. Last, a traced load (`Gpu::load_sessions_traced`) of 8 sessions of 64
//! chunks of 256 KiB, double-buffered: every piece's gather (host clock) and copy (CUDA
//! events) on one time axis, written to `--timeline` (default `gpu-timeline.csv` beside
//! `--out`), with the time both ran at once printed. And a traced store
//! (`Gpu::store_session_traced`) of 64 chunks of 2 MiB: each piece's device → host copy and
//! the building of its entries, written to `gpu-store-timeline.csv` beside the load's.
//!
//! Each size and batch is also checked: a session loaded and stored back under other keys
//! must read back byte for byte (the run fails otherwise).
//!
//! Usage: `gpu_bench [--out gpu.csv] [--iterations 10] [--device 0] [--gather-threads 4]
//! [--timeline gpu-timeline.csv]`.

use std::path::Path;
use std::time::Instant;

use fc_gpu::cuda::{Gpu, GpuOptions, Pinned, SessionLoad};
use fc_gpu::{GatherConfig, StagingPool, TransferPlan};
use fc_shard::{EmbeddedRouteMode, EmbeddedStore, PackedSessionWrite};

const SIZES: [usize; 3] = [16 << 10, 256 << 10, 2 << 20];
const COUNTS: [usize; 3] = [16, 64, 256];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut out = String::from("gpu.csv");
    let mut iterations = 10usize;
    let mut device = 0usize;
    let mut gather = GatherConfig::default();
    let mut timeline = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().ok_or("--out needs a path")?,
            "--iterations" => iterations = args.next().ok_or("--iterations needs n")?.parse()?,
            "--device" => device = args.next().ok_or("--device needs n")?.parse()?,
            "--gather-threads" => {
                gather.threads = args.next().ok_or("--gather-threads needs n")?.parse()?;
            }
            "--timeline" => timeline = Some(args.next().ok_or("--timeline needs a path")?),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let timeline = timeline.unwrap_or_else(|| {
        Path::new(&out)
            .with_file_name("gpu-timeline.csv")
            .to_string_lossy()
            .into_owned()
    });
    let open = |threads: usize| {
        Gpu::open_with(
            device,
            GpuOptions {
                streams: 2,
                gather: GatherConfig { threads, ..gather },
            },
        )
    };
    let gpu = open(gather.threads)?;
    eprintln!("gather: {:?}", gpu.gather_config());
    let pool = StagingPool::new(Pinned::new(&gpu), 2 << 30);
    let stream = gpu.context().default_stream();
    let mut csv = String::from("direction,chunk_bytes,chunks,path,gb_per_s,ms\n");
    for &size in &SIZES {
        for &count in &COUNTS {
            let total = size * count;
            let (store, keys) = session(size, count);
            let offsets = TransferPlan::packed_offsets(&vec![size; count], 0, 256);
            let mut dev = gpu.alloc(total)?;
            let mut row = |direction: &str, path: &str, seconds: Vec<f64>| {
                let s = median(seconds);
                let line = format!(
                    "{direction},{size},{count},{path},{:.2},{:.3}\n",
                    total as f64 / s / 1e9,
                    s * 1e3
                );
                eprint!("{line}");
                csv.push_str(&line);
            };
            // Host → device.
            let mut pinned = pool.acquire(total)?;
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                stream.memcpy_htod(&pinned[..], dev.as_cuda_mut())?;
                stream.synchronize()?;
                times.push(t.elapsed().as_secs_f64());
            }
            row("htod", "contiguous", times);
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                let values = store.batch_get_session(b"session:1", &keys);
                let dst = dev.as_cuda_mut();
                for (value, &off) in values.iter().zip(&offsets) {
                    let value = value.as_deref().ok_or("missing chunk")?;
                    let off = off as usize;
                    stream.memcpy_htod(value, &mut dst.slice_mut(off..off + value.len()))?;
                }
                stream.synchronize()?;
                times.push(t.elapsed().as_secs_f64());
            }
            row("htod", "naive", times);
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                gpu.load_session(&pool, &store, b"session:1", &keys, &offsets, &mut dev, 256)?;
                times.push(t.elapsed().as_secs_f64());
            }
            row("htod", "fc-gpu", times);
            // Device → host.
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                stream.memcpy_dtoh(dev.as_cuda(), &mut pinned[..])?;
                stream.synchronize()?;
                times.push(t.elapsed().as_secs_f64());
            }
            row("dtoh", "contiguous", times);
            drop(pinned);
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                for (key, &off) in keys.iter().zip(&offsets) {
                    let mut value = vec![0u8; size];
                    let off = off as usize;
                    stream.memcpy_dtoh(&dev.as_cuda().slice(off..off + size), &mut value[..])?;
                    stream.synchronize()?;
                    store.set(key.as_bytes(), value, None);
                }
                times.push(t.elapsed().as_secs_f64());
            }
            row("dtoh", "naive", times);
            let lens = vec![size; count];
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                gpu.store_session(&pool, &dev, &offsets, &lens, &store, b"session:1", &keys)?;
                times.push(t.elapsed().as_secs_f64());
            }
            row("dtoh", "fc-gpu", times);
            // Round trip: what was loaded, stored under other keys, reads back the same.
            let copies: Vec<String> = (0..count).map(|i| format!("session:2:chunk:{i}")).collect();
            gpu.load_session(&pool, &store, b"session:1", &keys, &offsets, &mut dev, 256)?;
            gpu.store_session(&pool, &dev, &offsets, &lens, &store, b"session:2", &copies)?;
            if store.batch_get_session(b"session:1", &keys)
                != store.batch_get_session(b"session:2", &copies)
            {
                return Err(format!("round trip of {count} x {size} B changed the bytes").into());
            }
        }
    }
    // Gather threads, host → device, 64 chunks of 2 MiB.
    {
        let (size, count) = (2 << 20, 64);
        let (store, keys) = session(size, count);
        let offsets = TransferPlan::packed_offsets(&vec![size; count], 0, 256);
        for threads in [1, 2, 4, 8] {
            let gpu = open(threads)?;
            let pool = StagingPool::new(Pinned::new(&gpu), 1 << 30);
            let mut dev = gpu.alloc(size * count)?;
            let mut times = Vec::new();
            for _ in 0..iterations {
                let t = Instant::now();
                gpu.load_session(&pool, &store, b"session:1", &keys, &offsets, &mut dev, 256)?;
                times.push(t.elapsed().as_secs_f64());
            }
            let s = median(times);
            let line = format!(
                "htod,{size},{count},fc-gpu-threads-{threads},{:.2},{:.3}\n",
                (size * count) as f64 / s / 1e9,
                s * 1e3
            );
            eprint!("{line}");
            csv.push_str(&line);
        }
    }
    std::fs::write(&out, csv)?;
    eprintln!("wrote {out}; staging pool: {:?}", pool.stats());
    trace(&gpu, &pool, &timeline)?;
    let store_timeline = Path::new(&timeline)
        .with_file_name("gpu-store-timeline.csv")
        .to_string_lossy()
        .into_owned();
    trace_store(&gpu, &pool, &store_timeline)?;
    Ok(())
}

/// A store holding one session (`session:1`) of `count` chunks of `size` bytes, and its keys.
fn session(size: usize, count: usize) -> (EmbeddedStore, Vec<String>) {
    let store = EmbeddedStore::with_route_mode(16, EmbeddedRouteMode::session_prefix());
    let keys = write_session(&store, "session:1", size, count);
    (store, keys)
}

/// Writes session `prefix`: `count` chunks of `size` bytes; returns their keys.
fn write_session(store: &EmbeddedStore, prefix: &str, size: usize, count: usize) -> Vec<String> {
    let keys: Vec<String> = (0..count).map(|i| format!("{prefix}:chunk:{i}")).collect();
    let mut write =
        PackedSessionWrite::with_capacity(prefix.as_bytes().to_vec(), count, size * count);
    for (i, key) in keys.iter().enumerate() {
        // Every 64-byte run of every chunk differs from its neighbours, so a misplaced
        // copy shows in the round-trip check.
        let value: Vec<u8> = (0..size).map(|j| (i as u8) ^ ((j >> 6) as u8)).collect();
        write.push_record(key.as_bytes(), &value);
    }
    store.batch_set_session_packed_no_ttl(write);
    keys
}

/// The traced load: 8 sessions of 64 chunks of 256 KiB, each to its own device region.
fn trace(
    gpu: &Gpu,
    pool: &StagingPool<Pinned>,
    path: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    const SESSIONS: usize = 8;
    let (size, count) = (256 << 10, 64);
    let store = EmbeddedStore::with_route_mode(16, EmbeddedRouteMode::session_prefix());
    let prefixes: Vec<String> = (0..SESSIONS).map(|s| format!("session:{s}")).collect();
    let keys: Vec<Vec<String>> = prefixes
        .iter()
        .map(|p| write_session(&store, p, size, count))
        .collect();
    let region = (size * count) as u64;
    let offsets: Vec<Vec<u64>> = (0..SESSIONS)
        .map(|s| TransferPlan::packed_offsets(&vec![size; count], s as u64 * region, 256))
        .collect();
    let loads: Vec<SessionLoad<'_, String>> = (0..SESSIONS)
        .map(|s| SessionLoad {
            prefix: prefixes[s].as_bytes(),
            keys: &keys[s],
            device_offsets: &offsets[s],
        })
        .collect();
    let mut dev = gpu.alloc(SESSIONS * size * count)?;
    // Once untimed (staging buffers allocated), then traced.
    gpu.load_sessions(pool, &store, &loads, &mut dev, 256)?;
    let (_, timeline) = gpu.load_sessions_traced(pool, &store, &loads, &mut dev, 256)?;
    std::fs::write(path, timeline.to_csv())?;
    let bytes = SESSIONS * size * count;
    eprintln!(
        "timeline: {SESSIONS} sessions x {count} x {} KiB ({} MiB), {} pieces: wall {:.0} us ({:.2} GB/s); gather busy {:.0} us, copy busy {:.0} us, both at once {:.0} us ({:.0}% of the gather hidden behind copies); wrote {path}",
        size >> 10,
        bytes >> 20,
        timeline.pieces.len(),
        timeline.wall_us,
        bytes as f64 / timeline.wall_us / 1e3,
        timeline.gather_busy_us(),
        timeline.copy_busy_us(),
        timeline.overlap_us(),
        100.0 * timeline.overlap_us() / timeline.gather_busy_us().max(1e-9),
    );
    Ok(())
}

/// The traced store: one session of 64 chunks of 2 MiB copied to the host piece by piece,
/// each piece's entries built as it lands.
fn trace_store(
    gpu: &Gpu,
    pool: &StagingPool<Pinned>,
    path: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let (size, count) = (2 << 20, 64);
    let (store, keys) = session(size, count);
    let lens = vec![size; count];
    let offsets = TransferPlan::packed_offsets(&lens, 0, 256);
    let mut dev = gpu.alloc(size * count)?;
    gpu.load_session(pool, &store, b"session:1", &keys, &offsets, &mut dev, 256)?;
    // Once untimed (staging buffer allocated, replaced chunks' memory kept), then traced.
    gpu.store_session(pool, &dev, &offsets, &lens, &store, b"session:1", &keys)?;
    let (_, timeline) =
        gpu.store_session_traced(pool, &dev, &offsets, &lens, &store, b"session:1", &keys)?;
    std::fs::write(path, timeline.to_csv())?;
    let bytes = size * count;
    eprintln!(
        "store timeline: {count} x {} MiB, {} pieces: wall {:.0} us ({:.2} GB/s); copy busy {:.0} us, build busy {:.0} us, both at once {:.0} us ({:.0}% of the build hidden behind copies); wrote {path}",
        size >> 20,
        timeline.pieces.len(),
        timeline.wall_us,
        bytes as f64 / timeline.wall_us / 1e3,
        timeline.copy_busy_us(),
        timeline.gather_busy_us(),
        timeline.overlap_us(),
        100.0 * timeline.overlap_us() / timeline.gather_busy_us().max(1e-9),
    );
    Ok(())
}
