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
//! - `fc-gpu`: `Gpu::load_session` (one gather from the store into pinned staging, coalesced
//!   copies) and `Gpu::store_session` (copies into pinned staging, one packed session write).
//!
//! Usage: `gpu_bench [--out gpu.csv] [--iterations 10] [--device 0]`.

use std::time::Instant;

use fc_gpu::cuda::{Gpu, Pinned};
use fc_gpu::{StagingPool, TransferPlan};
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
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = args.next().ok_or("--out needs a path")?,
            "--iterations" => iterations = args.next().ok_or("--iterations needs n")?.parse()?,
            "--device" => device = args.next().ok_or("--device needs n")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let gpu = Gpu::open(device, 2)?;
    let pool = StagingPool::new(Pinned::new(&gpu), 2 << 30);
    let stream = gpu.context().default_stream();
    let mut csv = String::from("direction,chunk_bytes,chunks,path,gb_per_s,ms\n");
    for &size in &SIZES {
        for &count in &COUNTS {
            let total = size * count;
            let store = EmbeddedStore::with_route_mode(16, EmbeddedRouteMode::session_prefix());
            let keys: Vec<String> = (0..count).map(|i| format!("session:1:chunk:{i}")).collect();
            let mut write = PackedSessionWrite::with_capacity(b"session:1".to_vec(), count, total);
            for (i, key) in keys.iter().enumerate() {
                write.push_record(key.as_bytes(), &vec![i as u8; size]);
            }
            store.batch_set_session_packed_no_ttl(write);
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
        }
    }
    std::fs::write(&out, csv)?;
    eprintln!("wrote {out}; staging pool: {:?}", pool.stats());
    Ok(())
}
