//! The WAL TCP export (`[persistence.tcp_export]`): the log's frames, the same `FCW2` bytes
//! the segments get, streamed live to subscribers that connect (`listen`) or to one collector
//! this server connects to (`connect`). A live path, not a replay API: segments and snapshots
//! stay the recovery source.
//!
//! Each log's writer hands every run of frames it wrote to the OS to [`Tap`] (fc-wal's
//! [`WalTap`]), which queues a copy for the exporter thread; the exporter fans it out to each
//! subscriber's own queue, written by the subscriber's thread. With `backpressure_on_full =
//! false` a full queue loses that run from the export only (counted, and visible to the
//! subscriber as a jump in the log's sequence numbers) and the disk WAL goes on; with `true`
//! a full queue makes the writers wait. Layout and handshake: `docs/DURABILITY.md`.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded, select, unbounded};
use fc_wal::{SegmentHeader, WalSink, WalTap};
use subtle::ConstantTimeEq;

use crate::TcpExportConfig;

/// The export's figures (`INFO persistence`).
#[derive(Debug, Default)]
pub(crate) struct ExportStats {
    pub(crate) subscribers: AtomicU64,
    pub(crate) frames_sent: AtomicU64,
    pub(crate) bytes_sent: AtomicU64,
    pub(crate) frames_dropped: AtomicU64,
    pub(crate) bytes_dropped: AtomicU64,
    pub(crate) refused: AtomicU64,
}

impl ExportStats {
    fn dropped(&self, frames: &[u8]) {
        self.frames_dropped
            .fetch_add(count_frames(frames), Ordering::Relaxed);
        self.bytes_dropped
            .fetch_add(frames.len() as u64, Ordering::Relaxed);
    }
}

/// Whole frames in `bytes` (their headers give their lengths).
fn count_frames(bytes: &[u8]) -> u64 {
    let (mut at, mut n) = (0usize, 0u64);
    while at + fc_wal::FRAME_HEADER_LEN <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().expect("4")) as usize;
        at += fc_wal::FRAME_HEADER_LEN + len + fc_wal::FRAME_TRAILER_LEN;
        n += 1;
    }
    n
}

/// One log's run of frames.
struct Chunk {
    log: usize,
    next_seq: u64,
    frames: Bytes,
}

/// What each log's writer calls.
#[derive(Debug)]
struct Tap {
    tx: Sender<Chunk>,
    backpressure: bool,
    stats: Arc<ExportStats>,
    flow: Arc<Flow>,
}

/// What the tap and the exporter share: whether anyone listens, and where each log is.
#[derive(Debug)]
struct Flow {
    /// Whether a subscriber is registered. Without one the tap copies nothing (an export
    /// configured but not subscribed to costs each write an atomic store and a load).
    active: AtomicBool,
    /// Per log: the sequence number of its next frame, as the tap last heard it. A new
    /// subscriber starts there.
    next: Vec<AtomicU64>,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").field("log", &self.log).finish()
    }
}

impl WalTap for Tap {
    fn frames(&self, log: usize, next_seq: u64, frames: &[u8]) {
        // Sequentially consistent with the exporter's registration (it sets `active`, then
        // reads `next`): either this run is sent, or the new subscriber starts after it.
        if let Some(next) = self.flow.next.get(log) {
            next.store(next_seq, Ordering::SeqCst);
        }
        if !self.flow.active.load(Ordering::SeqCst) {
            return;
        }
        let chunk = Chunk {
            log,
            next_seq,
            frames: Bytes::copy_from_slice(frames),
        };
        if self.backpressure {
            let _ = self.tx.send(chunk);
        } else if let Err(TrySendError::Full(chunk)) = self.tx.try_send(chunk) {
            self.stats.dropped(&chunk.frames);
        }
    }
}

/// A subscriber's queue, as the exporter holds it.
struct Subscriber {
    tx: Sender<Bytes>,
}

/// The running export.
pub(crate) struct Export {
    pub(crate) stats: Arc<ExportStats>,
    /// The bound address (`listen`), or the collector's (`connect`).
    pub(crate) addr: SocketAddr,
    pub(crate) listen: bool,
    stop: Arc<AtomicBool>,
}

impl Drop for Export {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Starts the export of `wal`'s frames: binds the subscription port (`listen`) or starts
/// connecting to the collector (`connect`), and taps the logs.
pub(crate) fn start(wal: &WalSink, config: &TcpExportConfig) -> anyhow::Result<Export> {
    let stats = Arc::new(ExportStats::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = bounded(config.channel_capacity);
    let (register, registrations) = unbounded();
    let headers = wal.headers_now();
    let flow = Arc::new(Flow {
        active: AtomicBool::new(false),
        next: headers
            .iter()
            .map(|h| AtomicU64::new(h.first_seq))
            .collect(),
    });
    let listener = if config.listen {
        let listener = TcpListener::bind(config.addr)
            .map_err(|e| anyhow::anyhow!("WAL export: cannot listen on {}: {e}", config.addr))?;
        listener.set_nonblocking(true)?;
        Some(listener)
    } else {
        None
    };
    let addr = listener
        .as_ref()
        .map_or(Ok(config.addr), TcpListener::local_addr)?;
    {
        let (stats, config, flow) = (Arc::clone(&stats), config.clone(), Arc::clone(&flow));
        std::thread::Builder::new()
            .name("fc-wal-export".into())
            .spawn(move || fan_out(&rx, &registrations, headers, &config, &stats, &flow))?;
    }
    {
        let (stats, stop, config) = (Arc::clone(&stats), Arc::clone(&stop), config.clone());
        let name = if config.listen {
            "fc-export-accept"
        } else {
            "fc-export-connect"
        };
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || match listener {
                Some(listener) => accept(&listener, &register, &config, &stats, &stop),
                None => connect(&register, &config, &stats, &stop),
            })?;
    }
    let tap: Arc<dyn WalTap> = Arc::new(Tap {
        tx,
        backpressure: config.backpressure_on_full,
        stats: Arc::clone(&stats),
        flow,
    });
    wal.set_tap(&tap);
    Ok(Export {
        stats,
        addr,
        listen: config.listen,
        stop,
    })
}

/// The exporter: every run of frames to every subscriber's queue; a new subscriber first
/// gets each log's segment header, its sequence the next frame it will see, and then only
/// runs after it (a run the tap sent just before may still be queued here).
fn fan_out(
    rx: &Receiver<Chunk>,
    registrations: &Receiver<Subscriber>,
    headers: Vec<SegmentHeader>,
    config: &TcpExportConfig,
    stats: &ExportStats,
    flow: &Flow,
) {
    let mut next: Vec<SegmentHeader> = headers;
    // Each subscriber, with the sequence it starts at per log.
    let mut subscribers: Vec<(Subscriber, Vec<u64>)> = Vec::new();
    loop {
        select! {
            recv(registrations) -> sub => {
                let Ok(sub) = sub else { continue };
                // Listening first, then where each log is (see `Tap::frames`).
                flow.active.store(true, Ordering::SeqCst);
                let mut start = Vec::with_capacity(next.len() * fc_wal::SEGMENT_HEADER_LEN);
                let mut from = Vec::with_capacity(next.len());
                // The tap stores a log's next sequence before it sends the run that ends
                // there, so this is never behind a run received here.
                for (header, at) in next.iter_mut().zip(&flow.next) {
                    header.first_seq = at.load(Ordering::SeqCst);
                    from.push(header.first_seq);
                    start.extend_from_slice(&header.encode());
                }
                if sub.tx.send(Bytes::from(start)).is_ok() {
                    subscribers.push((sub, from));
                }
                if subscribers.is_empty() {
                    flow.active.store(false, Ordering::SeqCst);
                }
            }
            recv(rx) -> chunk => {
                let Ok(chunk) = chunk else { return };
                subscribers.retain(|(sub, from)| {
                    // A run from before this subscriber's start (its frames all precede
                    // `next_seq`, and runs end where the tap's `next` stopped).
                    if from.get(chunk.log).is_some_and(|&from| chunk.next_seq <= from) {
                        return true;
                    }
                    let sent = if config.backpressure_on_full {
                        sub.tx.send(chunk.frames.clone()).map_err(|_| ())
                    } else {
                        match sub.tx.try_send(chunk.frames.clone()) {
                            Ok(()) => Ok(()),
                            Err(TrySendError::Full(frames)) => {
                                stats.dropped(&frames);
                                Ok(())
                            }
                            Err(TrySendError::Disconnected(_)) => Err(()),
                        }
                    };
                    sent.is_ok()
                });
                if subscribers.is_empty() {
                    flow.active.store(false, Ordering::SeqCst);
                }
            }
        }
    }
}

/// Writes a subscriber's queue to its socket until either ends.
fn write_out(mut stream: TcpStream, rx: &Receiver<Bytes>, stats: &ExportStats) {
    stats.subscribers.fetch_add(1, Ordering::Relaxed);
    let mut first = true;
    for bytes in rx {
        if stream.write_all(&bytes).is_err() {
            break;
        }
        // The first message is the segment headers, not frames.
        if !first {
            stats
                .frames_sent
                .fetch_add(count_frames(&bytes), Ordering::Relaxed);
        }
        first = false;
        stats
            .bytes_sent
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    }
    stats.subscribers.fetch_sub(1, Ordering::Relaxed);
}

/// `listen`: authenticates each connection (`AUTH <token>\r\n`, answered `+OK\r\n` or an
/// error line), then streams to it on a thread of its own.
fn accept(
    listener: &TcpListener,
    register: &Sender<Subscriber>,
    config: &TcpExportConfig,
    stats: &Arc<ExportStats>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(_) => continue,
        };
        let (register, config, stats) = (register.clone(), config.clone(), Arc::clone(stats));
        let _ = std::thread::Builder::new()
            .name("fc-export-sub".into())
            .spawn(move || subscribe(stream, &register, &config, &stats));
    }
}

fn subscribe(
    mut stream: TcpStream,
    register: &Sender<Subscriber>,
    config: &TcpExportConfig,
    stats: &ExportStats,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = Vec::new();
    let read = stream
        .try_clone()
        .map(|s| BufReader::new(s).take_line(&mut line, 1024));
    let token = line
        .strip_prefix(b"AUTH")
        .map(|rest| rest.trim_ascii())
        .filter(|_| matches!(read, Ok(true)));
    let expected = config.auth_token.as_deref().unwrap_or("").as_bytes();
    let refusal: Option<&[u8]> = match token {
        None => Some(b"-ERR expected AUTH <token>\r\n"),
        Some(token) if !bool::from(token.ct_eq(expected)) => Some(b"-ERR invalid token\r\n"),
        Some(_) if stats.subscribers.load(Ordering::Relaxed) >= config.max_subscribers as u64 => {
            Some(b"-ERR max subscribers reached\r\n")
        }
        Some(_) => None,
    };
    if let Some(refusal) = refusal {
        stats.refused.fetch_add(1, Ordering::Relaxed);
        let _ = stream.write_all(refusal);
        return;
    }
    if stream.write_all(b"+OK\r\n").is_err() {
        return;
    }
    let _ = stream.set_read_timeout(None);
    let (tx, rx) = bounded(config.channel_capacity);
    if register.send(Subscriber { tx }).is_ok() {
        write_out(stream, &rx, stats);
    }
}

/// Reads one line (at most `limit` bytes) into `line`, without its line end.
trait TakeLine {
    fn take_line(self, line: &mut Vec<u8>, limit: u64) -> bool;
}

impl<R: std::io::Read> TakeLine for BufReader<R> {
    fn take_line(self, line: &mut Vec<u8>, limit: u64) -> bool {
        let mut limited = std::io::Read::take(self, limit);
        let ok = limited.read_until(b'\n', line).is_ok() && line.ends_with(b"\n");
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        ok
    }
}

/// `connect`: keeps one connection to the collector (`AUTH <token>\r\n` first when a token
/// is set), reconnecting every second while it is down.
fn connect(
    register: &Sender<Subscriber>,
    config: &TcpExportConfig,
    stats: &ExportStats,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Acquire) {
        if let Ok(mut stream) = TcpStream::connect_timeout(&config.addr, Duration::from_secs(2)) {
            let _ = stream.set_nodelay(true);
            let hello = match &config.auth_token {
                Some(token) => stream.write_all(format!("AUTH {token}\r\n").as_bytes()),
                None => Ok(()),
            };
            let (tx, rx) = bounded(config.channel_capacity);
            if hello.is_ok() && register.send(Subscriber { tx }).is_ok() {
                write_out(stream, &rx, stats);
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}
