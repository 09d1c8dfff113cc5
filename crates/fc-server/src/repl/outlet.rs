//! A replica link's output while the pump writes it ([`Outlet`]).
//!
//! A link that has sent everything the backlog holds hands its socket to the pump: from then
//! on the pump, right after it pushes a sweep's frames into the backlog, copies what each such
//! link has not had yet (from the link's per-shard cursors, under the backlog's lock) and
//! writes it to the socket itself, without blocking. Before, every sweep woke the link's task
//! on the replication thread (an `eventfd` write by the pump, an `epoll` return there) only to
//! copy and write the same bytes: on a primary taking writes, that hop was a third of the two
//! threads' CPU per replicated write.
//!
//! **Who writes.** Exactly one side writes a link's socket at any time: the link's task while
//! `on_pump` is false, the pump while it is true. The task sets it, under the backlog's lock,
//! only when it has written everything up to the backlog's end (so the pump's next copy starts
//! where the task's last one ended, and no frame is sent twice or skipped); the pump clears it
//! when the link needs the task again: its cursors fell out of the backlog (a snapshot of those
//! shards is due: only once everything taken is written), or the socket failed. The task then
//! carries on from the cursors the pump left.
//!
//! **A slow replica** fills its socket: the pump keeps what it could not write (at most
//! [`OUT_LIMIT`] bytes, then it stops copying for that link) and tries again at each sweep,
//! never waiting. A link the backlog leaves behind meanwhile gets snapshots from its task, as
//! a task-driven link does.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fc_repl::{Backlog, Compression, Frame, Kind, watermarks_frame};

use super::lock;

/// Bytes a link may have taken from the backlog and not yet written before the pump stops
/// copying for it (its cursors then wait in the backlog, which bounds the rest).
pub(crate) const OUT_LIMIT: usize = 4 << 20;
/// A link the pump writes gets a heartbeat after this long without a frame.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(1);

/// One replica link's output, shared by its task and the pump.
pub(crate) struct Outlet {
    /// The link's id ([`super::LinkInfo::id`]).
    pub(crate) id: u64,
    /// The link's socket (the same connection as the task's, non-blocking).
    socket: std::net::TcpStream,
    state: Mutex<OutletState>,
    /// Tells the link's task that the pump gave the link back.
    pub(crate) given_back: tokio::sync::Notify,
}

/// What the pump and the link's task share of a link's output.
#[derive(Debug)]
pub(crate) struct OutletState {
    /// The pump writes the socket (false: the link's task does).
    pub(crate) on_pump: bool,
    /// The link ended: nobody writes.
    closed: bool,
    /// Per shard, the index of the next backlog frame to take.
    pub(crate) cursors: Vec<u64>,
    /// Taken from the backlog, not yet written (from `written` on).
    out: Vec<u8>,
    written: usize,
    /// A cursor fell out of the backlog: give the link back once `out` is written.
    behind: bool,
    /// The shard the last take started at.
    first: usize,
    /// The last take stopped at [`OUT_LIMIT`] with frames left.
    more: bool,
    /// Why the socket failed (the link's task ends with it).
    pub(crate) error: Option<String>,
    last_sent: Instant,
}

/// What writing a link's output left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// Nothing is waiting.
    Done,
    /// The socket is full, or frames are left past [`OUT_LIMIT`]: the rest goes at the next
    /// sweep.
    Pending,
    /// The link is back with its task (or ended).
    Off,
}

impl Outlet {
    /// The output of link `id`, writing to `socket` (already non-blocking) once its task
    /// hands it over.
    pub(crate) fn new(id: u64, socket: std::net::TcpStream, shards: usize) -> Self {
        Self {
            id,
            socket,
            state: Mutex::new(OutletState {
                on_pump: false,
                closed: false,
                cursors: vec![0; shards],
                out: Vec::new(),
                written: 0,
                behind: false,
                first: 0,
                more: false,
                error: None,
                last_sent: Instant::now(),
            }),
            given_back: tokio::sync::Notify::new(),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, OutletState> {
        lock(&self.state)
    }

    /// The link's task, holding the backlog's lock (`_log`) and having written everything up
    /// to its end: the pump writes from `cursors` on.
    pub(crate) fn hand_over(&self, _log: &Backlog, cursors: &[u64]) {
        let mut state = self.state();
        if state.closed {
            return;
        }
        state.cursors.clear();
        state.cursors.extend_from_slice(cursors);
        state.behind = false;
        state.last_sent = Instant::now();
        state.on_pump = true;
    }

    /// The link ended (its task's last act): the pump stops writing, and the connection is
    /// shut (the pump's handle on the socket would otherwise keep it open).
    pub(crate) fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.on_pump = false;
        state.out = Vec::new();
        drop(state);
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }

    /// On the pump, holding the backlog's lock: takes the frames past the link's cursors into
    /// its output (up to [`OUT_LIMIT`] waiting), and a heartbeat when it has had nothing for
    /// [`HEARTBEAT`]; after them an `AckRequest` when `ack` (a `WAIT` is waiting).
    pub(crate) fn take(
        &self,
        log: &Backlog,
        latest: impl Fn() -> Vec<u64>,
        now: Instant,
        ack: bool,
    ) {
        let mut state = self.state();
        if !state.on_pump {
            return;
        }
        let state = &mut *state;
        state.more = false;
        if !state.behind {
            // Each take starts at another shard: a link held at the limit by a busy shard
            // still gets the others' frames.
            let limit = state.written + OUT_LIMIT;
            let shards = state.cursors.len();
            state.first = (state.first + 1) % shards.max(1);
            for shard in (state.first..shards).chain(0..state.first) {
                let cursor = &mut state.cursors[shard];
                match log.copy_up_to(shard, *cursor, &mut state.out, limit) {
                    Ok(copied) => *cursor += copied,
                    Err(_) => state.behind = true,
                }
                state.more |= *cursor < log.next_index(shard);
            }
        }
        if ack {
            Frame::empty(Kind::AckRequest).encode(Compression::None, &mut state.out);
        }
        if state.out.len() == state.written && now.duration_since(state.last_sent) >= HEARTBEAT {
            watermarks_frame(Kind::Heartbeat, &latest()).encode(Compression::None, &mut state.out);
        }
    }

    /// On the pump: writes what the link's output holds, without waiting.
    pub(crate) fn flush(&self, sent_bytes: &AtomicU64, now: Instant) -> Flushed {
        let mut state = self.state();
        if !state.on_pump {
            return Flushed::Off;
        }
        let state = &mut *state;
        while state.written < state.out.len() {
            match (&self.socket).write(&state.out[state.written..]) {
                Ok(0) => return self.give_back(state, Some("the replica closed the link".into())),
                Ok(n) => {
                    state.written += n;
                    state.last_sent = now;
                    sent_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Flushed::Pending,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.give_back(state, Some(e.to_string())),
            }
        }
        state.out.clear();
        state.written = 0;
        if state.out.capacity() > OUT_LIMIT {
            state.out = Vec::new();
        }
        if state.behind {
            return self.give_back(state, None);
        }
        if state.more {
            return Flushed::Pending;
        }
        Flushed::Done
    }

    /// Hands the link back to its task (with `error`: to end it).
    fn give_back(&self, state: &mut OutletState, error: Option<String>) -> Flushed {
        state.on_pump = false;
        state.behind = false;
        state.error = error;
        self.given_back.notify_one();
        Flushed::Off
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;
    use std::net::{TcpListener, TcpStream};

    use fc_repl::FrameDecoder;

    use super::*;

    /// A connected pair: the outlet's side (non-blocking, a small send buffer) and the
    /// replica's.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let primary = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (replica, _) = listener.accept().expect("accept");
        primary.set_nonblocking(true).expect("non-blocking");
        (primary, replica)
    }

    fn batch(shard: u32, seq: u64, bytes: usize) -> Vec<u8> {
        let frame = Frame {
            kind: Kind::Batch,
            shard,
            first_seq: seq,
            records: 1,
            payload: vec![seq as u8; bytes],
        };
        let mut wire = Vec::new();
        frame.encode(Compression::None, &mut wire);
        wire
    }

    /// Every frame that arrives, as (shard, first sequence, kind), until `n` came.
    fn read_frames(replica: &mut TcpStream, n: usize) -> Vec<(u32, u64, Kind)> {
        let decoder = FrameDecoder::default();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        let mut chunk = [0u8; 64 << 10];
        while got.len() < n {
            let read = replica.read(&mut chunk).expect("read");
            assert!(read > 0, "the link closed after {} frames", got.len());
            buf.extend_from_slice(&chunk[..read]);
            while let Some((frame, used)) = decoder.decode_slice(&buf).expect("a good frame") {
                buf.drain(..used);
                got.push((frame.shard, frame.first_seq, frame.kind));
            }
        }
        got
    }

    #[test]
    fn the_pump_sends_what_follows_the_cursors_it_was_handed_and_nothing_twice() {
        let (primary, mut replica) = pair();
        let outlet = Outlet::new(1, primary, 2);
        let sent = AtomicU64::new(0);
        let mut log = Backlog::new(2, 1 << 20);
        log.push(0, 1, 1, batch(0, 1, 10));
        log.push(1, 1, 1, batch(1, 1, 10));
        let now = Instant::now();
        // Not handed over: the pump takes and writes nothing.
        outlet.take(&log, Vec::new, now, false);
        assert_eq!(outlet.flush(&sent, now), Flushed::Off);
        // The task wrote shard 0's first frame, not shard 1's.
        outlet.hand_over(&log, &[1, 0]);
        log.push(0, 2, 2, batch(0, 2, 10));
        outlet.take(&log, Vec::new, now, false);
        assert_eq!(outlet.flush(&sent, now), Flushed::Done);
        let mut got = read_frames(&mut replica, 2);
        got.sort_unstable_by_key(|&(shard, seq, _)| (shard, seq));
        assert_eq!(got, vec![(0, 2, Kind::Batch), (1, 1, Kind::Batch)]);
        // Taken again with nothing new: nothing more goes.
        outlet.take(&log, Vec::new, now, false);
        assert_eq!(outlet.flush(&sent, now), Flushed::Done);
        log.push(1, 2, 2, batch(1, 2, 10));
        outlet.take(&log, Vec::new, now, false);
        assert_eq!(outlet.flush(&sent, now), Flushed::Done);
        assert_eq!(read_frames(&mut replica, 1), vec![(1, 2, Kind::Batch)]);
        assert_eq!(outlet.state().cursors, vec![2, 2]);
        assert_eq!(sent.load(Ordering::Relaxed), 3 * (32 + 10));
        // A `WAIT`'s request goes after the frames taken with it.
        log.push(0, 3, 3, batch(0, 3, 10));
        outlet.take(&log, Vec::new, now, true);
        assert_eq!(outlet.flush(&sent, now), Flushed::Done);
        assert_eq!(
            read_frames(&mut replica, 2),
            vec![(0, 3, Kind::Batch), (0, 0, Kind::AckRequest)]
        );
    }

    #[test]
    fn a_full_socket_keeps_the_rest_for_the_next_sweep_and_loses_nothing() {
        let (primary, mut replica) = pair();
        let outlet = Outlet::new(1, primary, 1);
        let sent = AtomicU64::new(0);
        let mut log = Backlog::new(1, 64 << 20);
        outlet.hand_over(&log, &[0]);
        let frames = 400;
        for seq in 1..=frames {
            log.push(0, seq, seq, batch(0, seq, 32 << 10));
        }
        let now = Instant::now();
        outlet.take(&log, Vec::new, now, false);
        // 12.5 MiB cannot all fit the socket's buffers: some waits, and the copy stopped at
        // the limit.
        assert_eq!(outlet.flush(&sent, now), Flushed::Pending);
        assert!(outlet.state().cursors[0] < frames);
        let reader = std::thread::spawn(move || read_frames(&mut replica, frames as usize));
        let started = Instant::now();
        loop {
            outlet.take(&log, Vec::new, Instant::now(), false);
            match outlet.flush(&sent, Instant::now()) {
                Flushed::Done => break,
                Flushed::Pending => std::thread::sleep(Duration::from_millis(1)),
                Flushed::Off => panic!("given back: {:?}", outlet.state().error),
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the reader stalled"
            );
        }
        let got = reader.join().expect("reader");
        let seqs: Vec<u64> = got.iter().map(|&(_, seq, _)| seq).collect();
        assert_eq!(seqs, (1..=frames).collect::<Vec<_>>());
        assert_eq!(outlet.state().cursors, vec![frames]);
    }

    #[test]
    fn a_cursor_the_backlog_evicted_gives_the_link_back_after_what_was_taken_is_written() {
        let (primary, mut replica) = pair();
        let outlet = Outlet::new(1, primary, 2);
        let sent = AtomicU64::new(0);
        // 8 KiB for both shards.
        let mut log = Backlog::new(2, 8 << 10);
        outlet.hand_over(&log, &[0, 0]);
        // Shard 0 overflows before the pump takes anything: its first frames are gone.
        for seq in 1..=4 {
            log.push(0, seq, seq, batch(0, seq, 3 << 10));
        }
        log.push(1, 1, 1, batch(1, 1, 10));
        let now = Instant::now();
        outlet.take(&log, Vec::new, now, false);
        let waiter = outlet.given_back.notified();
        assert_eq!(outlet.flush(&sent, now), Flushed::Off);
        // Shard 1's frame went first; shard 0's cursor is where the task must resend from.
        assert_eq!(read_frames(&mut replica, 1), vec![(1, 1, Kind::Batch)]);
        let state = outlet.state();
        assert!(!state.on_pump);
        assert_eq!(state.error, None);
        assert_eq!(state.cursors, vec![0, 1]);
        assert!(log.copy_from(0, state.cursors[0], &mut Vec::new()).is_err());
        drop(state);
        // The task is told.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .expect("the task is woken");
        });
    }

    #[test]
    fn a_quiet_link_gets_heartbeats_and_a_closed_one_nothing() {
        let (primary, mut replica) = pair();
        let outlet = Outlet::new(1, primary, 1);
        let sent = AtomicU64::new(0);
        let log = Backlog::new(1, 1 << 20);
        outlet.hand_over(&log, &[0]);
        let now = Instant::now();
        outlet.take(&log, || vec![7], now, false);
        assert_eq!(outlet.flush(&sent, now), Flushed::Done);
        assert_eq!(
            sent.load(Ordering::Relaxed),
            0,
            "no heartbeat before one is due"
        );
        let later = now + HEARTBEAT;
        outlet.take(&log, || vec![7], later, false);
        assert_eq!(outlet.flush(&sent, later), Flushed::Done);
        assert_eq!(read_frames(&mut replica, 1), vec![(0, 0, Kind::Heartbeat)]);
        outlet.close();
        outlet.take(&log, || vec![7], later + HEARTBEAT, false);
        assert_eq!(outlet.flush(&sent, later + HEARTBEAT), Flushed::Off);
        // The connection is shut: the replica reads its end.
        replica
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(replica.read(&mut [0u8; 64]).expect("read"), 0);
    }

    #[test]
    fn a_failed_socket_gives_the_link_back_with_the_error() {
        let (primary, replica) = pair();
        let outlet = Outlet::new(1, primary, 1);
        let sent = AtomicU64::new(0);
        let mut log = Backlog::new(1, 1 << 20);
        outlet.hand_over(&log, &[0]);
        // The replica goes away, resetting the connection (unread data).
        drop(replica);
        let started = Instant::now();
        let mut seq = 0;
        loop {
            seq += 1;
            log.push(0, seq, seq, batch(0, seq, 1 << 10));
            outlet.take(&log, Vec::new, Instant::now(), false);
            if outlet.flush(&sent, Instant::now()) == Flushed::Off {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "no error seen");
            std::thread::sleep(Duration::from_millis(5));
        }
        let state = outlet.state();
        assert!(!state.on_pump);
        assert!(state.error.is_some());
    }
}
