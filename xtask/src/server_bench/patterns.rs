//! `bench-server`'s application patterns, each server under the same load in the same run:
//!
//! - **pub/sub fan-out** (`pubsub-N`): N subscriber connections on one channel and a publisher
//!   sending batches of 16 `PUBLISH`es (64-byte messages); the publisher starts its next batch
//!   once every subscriber has received the last one, so no server buffers without bound. The
//!   rate is messages *delivered* per second (publishes × N); latency is a batch's round trip
//!   from the first `PUBLISH` written to the last delivery read.
//! - **blocking queue** (`queue-C`): one producer pushing batches of 16 `LPUSH`es, C consumers
//!   each looping on `BRPOP q 0`; the producer stays at most 1,000 items ahead. The rate is
//!   items consumed per second; latency is the producer's batch round trip.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Sample, ServerProcess, count_replies, cpu_seconds, pin_self, push_command};

/// One pattern.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pattern {
    /// Subscribers.
    Fanout(usize),
    /// Consumers.
    Queue(usize),
    /// Consumers of one stream consumer group.
    Stream(usize),
}

impl Pattern {
    pub(crate) fn name(self) -> String {
        match self {
            Self::Fanout(n) => format!("pubsub-{n}"),
            Self::Queue(c) => format!("queue-{c}"),
            Self::Stream(c) => format!("stream-{c}"),
        }
    }
}

/// Commands per batch (publisher, producer).
pub(crate) const BATCH: usize = 16;
const PAYLOAD: usize = 64;

/// Runs `pattern` against `server` for `warmup` + `duration`, the load pinned to `load_cores`.
pub(crate) fn run(
    server: &ServerProcess,
    pattern: Pattern,
    warmup: Duration,
    duration: Duration,
    load_cores: &[usize],
) -> anyhow::Result<Sample> {
    let addr = server.addr.clone();
    let cores = load_cores.to_vec();
    let counted = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&counted);
    let pid = server.child.id();
    let handle = std::thread::spawn(move || -> anyhow::Result<Sample> {
        pin_self(&cores);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
            let (measure_from, end) = match pattern {
                Pattern::Fanout(n) => {
                    fanout(&addr, n, warmup, duration, &counter, &latencies).await?
                }
                Pattern::Queue(c) => {
                    queue(&addr, c, warmup, duration, &counter, &latencies).await?
                }
                Pattern::Stream(c) => {
                    stream(&addr, c, warmup, duration, &counter, &latencies).await?
                }
            };
            let mut lat = std::mem::take(&mut *latencies.lock().unwrap());
            lat.retain(|&(at, _)| at >= measure_from && at <= end);
            let mut lat: Vec<u32> = lat.into_iter().map(|(_, l)| l).collect();
            lat.sort_unstable();
            let pct = |p: f64| {
                lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
                    .map_or(0.0, |&v| f64::from(v))
            };
            Ok(Sample {
                ops: 0.0,
                p50: pct(0.5),
                p99: pct(0.99),
                cpu: 0.0,
            })
        })
    });
    // The window: counts and server CPU read at its two ends.
    std::thread::sleep(warmup + Duration::from_millis(200));
    let (n0, cpu0, t0) = (
        counted.load(Ordering::Relaxed),
        cpu_seconds(pid),
        Instant::now(),
    );
    std::thread::sleep(duration);
    let (n1, cpu1, t1) = (
        counted.load(Ordering::Relaxed),
        cpu_seconds(pid),
        Instant::now(),
    );
    let mut sample = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the pattern load panicked"))??;
    let secs = t1.duration_since(t0).as_secs_f64();
    sample.ops = (n1 - n0) as f64 / secs;
    sample.cpu = (cpu1 - cpu0) / secs;
    Ok(sample)
}

type Latencies = Arc<std::sync::Mutex<Vec<(Instant, u32)>>>;

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u128::from(u32::MAX)) as u32
}

/// Reads until `want` complete replies (RESP elements, see `count_replies`) arrived.
async fn read_replies(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    want: usize,
) -> anyhow::Result<()> {
    let mut got = 0;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let (count, used) = count_replies(buf);
        if got + count >= want {
            // Only whole batches are awaited: what is left belongs to no later batch.
            buf.drain(..used);
            return Ok(());
        }
        got += count;
        buf.drain(..used);
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Returns the measured window's bounds (for the latencies).
async fn fanout(
    addr: &str,
    subscribers: usize,
    warmup: Duration,
    duration: Duration,
    delivered: &Arc<AtomicU64>,
    latencies: &Latencies,
) -> anyhow::Result<(Instant, Instant)> {
    let payload = vec![b'm'; PAYLOAD];
    let mut message = Vec::new();
    message.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$2\r\nfo\r\n");
    message.extend_from_slice(format!("${PAYLOAD}\r\n").as_bytes());
    message.extend_from_slice(&payload);
    message.extend_from_slice(b"\r\n");
    let message_len = message.len() as u64;
    let received = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..subscribers {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        s.write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nfo\r\n")
            .await?;
        let confirm = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nfo\r\n:1\r\n";
        let mut buf = vec![0u8; confirm.len()];
        s.read_exact(&mut buf).await?;
        if buf != confirm {
            bail!(
                "unexpected SUBSCRIBE reply {:?}",
                String::from_utf8_lossy(&buf)
            );
        }
        let received = Arc::clone(&received);
        tasks.push(tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            let mut bytes = 0u64;
            let mut counted = 0u64;
            while let Ok(n) = s.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                bytes += n as u64;
                let whole = bytes / message_len;
                received.fetch_add(whole - counted, Ordering::Relaxed);
                counted = whole;
            }
        }));
    }
    let mut publisher = TcpStream::connect(addr).await?;
    publisher.set_nodelay(true)?;
    let mut batch = Vec::new();
    for _ in 0..BATCH {
        push_command(&mut batch, &[b"PUBLISH", b"fo", &payload]);
    }
    let start = Instant::now();
    let (measure_from, end) = (
        start + warmup,
        start + warmup + duration + Duration::from_millis(400),
    );
    let mut rbuf = Vec::new();
    let mut published = 0u64;
    while Instant::now() < end {
        let t = Instant::now();
        publisher.write_all(&batch).await?;
        read_replies(&mut publisher, &mut rbuf, BATCH).await?;
        published += BATCH as u64;
        let target = published * subscribers as u64;
        let stuck = Instant::now() + Duration::from_secs(10);
        while received.load(Ordering::Relaxed) < target {
            if Instant::now() > stuck {
                bail!(
                    "subscribers stopped receiving ({} of {target})",
                    received.load(Ordering::Relaxed)
                );
            }
            tokio::task::yield_now().await;
        }
        delivered.fetch_add((BATCH * subscribers) as u64, Ordering::Relaxed);
        let done = Instant::now();
        latencies.lock().unwrap().push((done, micros(done - t)));
    }
    for t in tasks {
        t.abort();
    }
    Ok((measure_from, end))
}

async fn queue(
    addr: &str,
    consumers: usize,
    warmup: Duration,
    duration: Duration,
    consumed: &Arc<AtomicU64>,
    latencies: &Latencies,
) -> anyhow::Result<(Instant, Instant)> {
    let payload = vec![b'j'; PAYLOAD];
    let mut setup = TcpStream::connect(addr).await?;
    setup.write_all(b"*2\r\n$3\r\nDEL\r\n$1\r\nq\r\n").await?;
    read_replies(&mut setup, &mut Vec::new(), 1).await?;
    let mut tasks = Vec::new();
    for _ in 0..consumers {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let consumed = Arc::clone(consumed);
        tasks.push(tokio::spawn(async move {
            let mut buf = Vec::new();
            loop {
                if s.write_all(b"*3\r\n$5\r\nBRPOP\r\n$1\r\nq\r\n$1\r\n0\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                // `*2`, the key, the element.
                if read_replies(&mut s, &mut buf, 3).await.is_err() {
                    return;
                }
                consumed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut batch = Vec::new();
    for _ in 0..BATCH {
        push_command(&mut batch, &[b"LPUSH", b"q", &payload]);
    }
    let window = produce(addr, &batch, warmup, duration, consumed, latencies).await;
    for t in tasks {
        t.abort();
    }
    window
}

/// The producer of `queue` and `stream`: sends `batch` (`BATCH` commands) and waits for its
/// replies, again and again, at most 1,000 items ahead of the consumers; returns the measured
/// window's bounds.
async fn produce(
    addr: &str,
    batch: &[u8],
    warmup: Duration,
    duration: Duration,
    consumed: &Arc<AtomicU64>,
    latencies: &Latencies,
) -> anyhow::Result<(Instant, Instant)> {
    let mut producer = TcpStream::connect(addr).await?;
    producer.set_nodelay(true)?;
    let start = Instant::now();
    let (measure_from, end) = (
        start + warmup,
        start + warmup + duration + Duration::from_millis(400),
    );
    let mut rbuf = Vec::new();
    let mut produced = 0u64;
    while Instant::now() < end {
        if produced > consumed.load(Ordering::Relaxed) + 1000 {
            tokio::task::yield_now().await;
            continue;
        }
        let t = Instant::now();
        producer.write_all(batch).await?;
        read_replies(&mut producer, &mut rbuf, BATCH).await?;
        produced += BATCH as u64;
        let done = Instant::now();
        latencies.lock().unwrap().push((done, micros(done - t)));
    }
    Ok((measure_from, end))
}

/// Consumers of one consumer group reading one new entry at a time (`XREADGROUP ... COUNT 1
/// BLOCK 0 NOACK`, so nothing is acknowledged) while one producer appends in batches, kept at
/// most 1,000 entries ahead of them; the stream is capped with `MAXLEN ~ 100000`.
async fn stream(
    addr: &str,
    consumers: usize,
    warmup: Duration,
    duration: Duration,
    consumed: &Arc<AtomicU64>,
    latencies: &Latencies,
) -> anyhow::Result<(Instant, Instant)> {
    let payload = vec![b'e'; PAYLOAD];
    let mut setup = TcpStream::connect(addr).await?;
    let mut commands = Vec::new();
    push_command(&mut commands, &[b"DEL", b"s"]);
    push_command(
        &mut commands,
        &[b"XGROUP", b"CREATE", b"s", b"g", b"$", b"MKSTREAM"],
    );
    setup.write_all(&commands).await?;
    read_replies(&mut setup, &mut Vec::new(), 2).await?;
    let mut tasks = Vec::new();
    for c in 0..consumers {
        let mut s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let consumed = Arc::clone(consumed);
        let mut read = Vec::new();
        let name = format!("c{c}");
        push_command(
            &mut read,
            &[
                b"XREADGROUP",
                b"GROUP",
                b"g",
                name.as_bytes(),
                b"COUNT",
                b"1",
                b"BLOCK",
                b"0",
                b"NOACK",
                b"STREAMS",
                b"s",
                b">",
            ],
        );
        tasks.push(tokio::spawn(async move {
            let mut buf = Vec::new();
            loop {
                if s.write_all(&read).await.is_err() {
                    return;
                }
                // `[[s, [[id, [f, v]]]]]`: nine RESP elements (see `count_replies`).
                if read_replies(&mut s, &mut buf, 9).await.is_err() {
                    return;
                }
                consumed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut batch = Vec::new();
    for _ in 0..BATCH {
        push_command(
            &mut batch,
            &[
                b"XADD", b"s", b"MAXLEN", b"~", b"100000", b"*", b"f", &payload,
            ],
        );
    }
    let window = produce(addr, &batch, warmup, duration, consumed, latencies).await;
    for t in tasks {
        t.abort();
    }
    window
}
