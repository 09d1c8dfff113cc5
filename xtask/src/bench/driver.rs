//! Runs one window of one cell of the matrix: pinned worker threads, a warmup, then a timed
//! window. Repeats are interleaved across backends by the caller.

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::backends::Worker;
use super::{Mix, ReadMode};

/// Operations between two looks at the stop flag.
const STRIDE: u64 = 256;

/// What one repeat measured, summed over the workers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    /// Operations per second, summed over workers (each worker's ops over its own wall time).
    pub(crate) ops_per_sec: f64,
    /// Worker CPU time over worker wall time, averaged over workers (1.0 = every worker busy).
    pub(crate) cpu_util: f64,
    /// Reads that found their key over all reads (1.0 when the mix has no reads).
    pub(crate) hit_ratio: f64,
}

/// How the workers run.
pub(crate) struct Plan<'a> {
    pub(crate) keys: &'a [[u8; 16]],
    pub(crate) value: &'a [u8],
    pub(crate) mix: Mix,
    pub(crate) read_mode: ReadMode,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    pub(crate) seed: u64,
    /// CPUs to pin worker `i` to (`cpus[i % len]`); empty means no pinning.
    pub(crate) cpus: &'a [usize],
}

/// xorshift64: the key and operation sequence of every backend (same seed, same sequence).
#[inline(always)]
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Seed of worker `index`: distinct per worker, identical across backends.
pub(crate) fn worker_seed(seed: u64, index: usize) -> u64 {
    let s = seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    if s == 0 { 1 } else { s }
}

/// Per-worker counters of one timed loop.
#[derive(Default)]
struct Counts {
    ops: u64,
    gets: u64,
    hits: u64,
    sink: u64,
}

/// The measured loop. `pool` holds the key indexes this worker draws from, uniformly.
#[inline(never)]
fn drive<W: Worker>(
    worker: &mut W,
    plan: &Plan<'_>,
    pool: &[u32],
    rng: &mut u64,
    stop: &AtomicBool,
    buf: &mut Vec<u8>,
) -> Counts {
    let mut c = Counts::default();
    let len = pool.len() as u64;
    // 80/20: a read when the low 32 bits fall under 80% of 2^32.
    let read_below: u64 = match plan.mix {
        Mix::Get => u64::MAX,
        Mix::Set => 0,
        Mix::ReadMostly => (u64::from(u32::MAX) + 1) * 4 / 5,
    };
    loop {
        for _ in 0..STRIDE {
            let r = next(rng);
            let key = &plan.keys[pool[(((r >> 32) * len) >> 32) as usize] as usize];
            if (r & 0xFFFF_FFFF) < read_below {
                c.gets += 1;
                let hit = match plan.read_mode {
                    ReadMode::Ref => worker.get_ref(key).map(u64::from),
                    ReadMode::Copy => worker.get_copy(key, buf).then_some(buf.len() as u64),
                };
                if let Some(h) = hit {
                    c.hits += 1;
                    c.sink = c.sink.wrapping_add(h);
                }
            } else {
                worker.set(key, plan.value);
            }
        }
        c.ops += STRIDE;
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    c
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        eprintln!("bench: could not pin a worker to CPU {cpu}: {e}");
    }
}

/// CPUs this process may run on, in order.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Runs `workers` (one thread each, with `pools[i]` as worker `i`'s keys) through a warmup and
/// one timed window, and returns what the window measured.
pub(crate) fn run<W: Worker>(workers: &mut [W], pools: &[Vec<u32>], plan: &Plan<'_>) -> Sample {
    let n = workers.len();
    assert_eq!(n, pools.len(), "one key pool per worker");
    let barrier = Barrier::new(n + 1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(i, worker)| {
                let (barrier, stop, pool) = (&barrier, &stop, &pools[i]);
                scope.spawn(move || {
                    if !plan.cpus.is_empty() {
                        pin(plan.cpus[i % plan.cpus.len()]);
                    }
                    let mut rng = worker_seed(plan.seed, i);
                    let mut buf = Vec::with_capacity(plan.value.len());
                    barrier.wait();
                    black_box(drive(worker, plan, pool, &mut rng, stop, &mut buf).sink);
                    barrier.wait();
                    barrier.wait();
                    let (w0, c0) = (Instant::now(), thread_cpu());
                    let c = drive(worker, plan, pool, &mut rng, stop, &mut buf);
                    let (wall, cpu) = (w0.elapsed(), thread_cpu() - c0);
                    black_box(c.sink);
                    barrier.wait();
                    (c, wall, cpu)
                })
            })
            .collect();
        let phase = |length: Duration| {
            barrier.wait();
            std::thread::sleep(length);
            stop.store(true, Ordering::Relaxed);
            barrier.wait();
            stop.store(false, Ordering::Relaxed);
        };
        phase(plan.warmup);
        phase(plan.duration);
        let mut s = Sample::default();
        let (mut gets, mut hits) = (0u64, 0u64);
        for h in handles {
            let (c, wall, cpu) = h.join().expect("bench worker panicked");
            s.ops_per_sec += c.ops as f64 / wall.as_secs_f64();
            s.cpu_util += cpu.as_secs_f64() / wall.as_secs_f64() / n as f64;
            gets += c.gets;
            hits += c.hits;
        }
        s.hit_ratio = if gets == 0 {
            1.0
        } else {
            hits as f64 / gets as f64
        };
        s
    })
}
