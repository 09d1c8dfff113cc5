//! The pump's state and its sweep ([`Pump`]): the export rings' entries into batches, the
//! batches encoded into the backlog, the links the pump writes given what they lack. Run by
//! the pump's thread (`repl_links::primary::pump`) and by a worker that runs out of work
//! ([`super::Repl::worker_idle`]), whichever holds [`super::Repl::pump`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{Drain, Flushed, Outlet, Repl, lock};

/// What the pump keeps from one sweep to the next: the shards' batchers, spare buffers,
/// the links it writes. Held under `Repl::pump` by whichever thread sweeps.
pub(crate) struct Pump {
    drain: Drain,
    sealed: Vec<fc_repl::Sealed>,
    /// Buffers of frames the backlog evicted, to encode the next frames into.
    spare: Vec<Vec<u8>>,
    /// The links' outputs (those their tasks handed over are written here).
    outlets: Vec<Arc<Outlet>>,
    outlets_seen: u64,
    /// The `WAIT` requests the pump's links have been asked for (see `Repl::request_acks`).
    acks_asked: u64,
    compression: fc_repl::Compression,
}

impl Pump {
    pub(crate) fn new(repl: &Repl) -> Self {
        Self {
            drain: Drain::new(&repl.source),
            sealed: Vec::new(),
            spare: Vec::new(),
            outlets: Vec::new(),
            outlets_seen: u64::MAX,
            acks_asked: repl.ack_requests.load(Ordering::Acquire),
            compression: repl.compression(),
        }
    }

    /// One sweep: the rings' entries into batches, the sealed ones encoded into the
    /// backlog, the links the pump writes given what they lack.
    pub(crate) fn sweep(&mut self, repl: &Repl) -> Swept {
        let source = &repl.source;
        // Read before the sweep: what a `WAIT` wrote before asking is in the rings by then,
        // so the request goes after it.
        let asked = repl.ack_requests.load(Ordering::Acquire);
        source.sweeping();
        self.drain.sweep(source, &mut self.sealed);
        let mut swept = Swept {
            sent: !self.sealed.is_empty(),
            unfinished: self.drain.holds_open(),
        };
        let changed = repl.outlets_changed.load(Ordering::Acquire);
        if changed != self.outlets_seen {
            self.outlets_seen = changed;
            self.outlets.clone_from(&lock(&repl.outlets));
        }
        if self.sealed.is_empty() && self.outlets.is_empty() {
            return swept;
        }
        let mut frames = Vec::with_capacity(self.sealed.len());
        for batch in self.sealed.drain(..) {
            let mut wire = frame_buffer(
                &mut self.spare,
                batch.frame.payload.len() + fc_repl::HEADER_LEN,
            );
            batch.frame.encode(self.compression, &mut wire);
            frames.push((
                batch.frame.shard as usize,
                batch.first_seq,
                batch.last_seq,
                wire,
            ));
            self.drain.recycle(batch.frame.payload);
        }
        let pushed = !frames.is_empty();
        let now = Instant::now();
        {
            let mut log = lock(&repl.backlog);
            for (shard, first, last, wire) in frames {
                log.push(shard, first, last, wire);
            }
            log.recycle_into(&mut self.spare);
            repl.backlog_bytes
                .store(log.bytes() as u64, Ordering::Relaxed);
            // What the links the pump writes have not had yet, copied past their cursors
            // under the same lock (see `crate::repl::Outlet`).
            for outlet in &self.outlets {
                outlet.take(&log, || source.latest(), now, asked != self.acks_asked);
            }
            self.acks_asked = asked;
        }
        if pushed {
            repl.fresh.send_modify(|g| *g = g.wrapping_add(1));
        }
        for outlet in &self.outlets {
            // A full socket: the rest goes at the next sweep.
            swept.unfinished |= outlet.flush(&repl.sent_bytes, now) == Flushed::Pending;
        }
        swept
    }
}

/// What a sweep did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Swept {
    /// It sent batches (more are likely soon).
    pub(crate) sent: bool,
    /// It left work for the next sweep: a batch held open (it ends on a transaction's begin
    /// marker), or a link's socket full.
    pub(crate) unfinished: bool,
}

impl Swept {
    /// The pump comes back within a tick.
    pub(crate) fn busy(self) -> bool {
        self.sent || self.unfinished
    }
}

/// A buffer for a frame of up to `needed` bytes: one the backlog evicted, of the same size
/// class, when one of the last few is; else a new one of that class. Frame buffers come in
/// classes (powers of two from 256 B to 4 KiB, multiples of 4 KiB up to 64 KiB, powers of two
/// above) so that frames of similar sizes reuse each other's memory; a buffer freed and
/// allocated again per frame made the kernel zero fresh pages for the pump all the time. The
/// backlog counts a frame's capacity, so the classes are what `backlog_bytes` holds: with
/// 4 KiB the least, a frame of one `SET` (~150 B) took 4 KiB, and a 64 MiB backlog held 16k
/// such writes.
fn frame_buffer(spare: &mut Vec<Vec<u8>>, needed: usize) -> Vec<u8> {
    let class = frame_class(needed);
    let from = spare.len().saturating_sub(16);
    match spare[from..].iter().rposition(|b| b.capacity() == class) {
        Some(at) => {
            let mut buffer = spare.swap_remove(from + at);
            buffer.clear();
            buffer
        }
        None => Vec::with_capacity(class),
    }
}

/// The capacity a frame of `needed` bytes is encoded into (see [`frame_buffer`]).
fn frame_class(needed: usize) -> usize {
    if needed <= 4096 {
        needed.next_power_of_two().max(256)
    } else if needed <= 64 << 10 {
        needed.div_ceil(4096) * 4096
    } else {
        needed.next_power_of_two()
    }
}

#[cfg(test)]
mod tests {
    use super::{frame_buffer, frame_class};

    #[test]
    fn frame_classes_hold_a_frame_with_at_most_twice_its_bytes_and_reuse_spares() {
        for needed in [
            1,
            150,
            256,
            257,
            1000,
            4096,
            4097,
            9000,
            65536,
            65537,
            1 << 20,
        ] {
            let class = frame_class(needed);
            assert!(class >= needed, "{needed} -> {class}");
            assert!(class <= (2 * needed).max(256), "{needed} -> {class}");
        }
        assert_eq!(frame_class(150), 256);
        assert_eq!(frame_class(5000), 8192);
        // A spare of the same class is reused (and cleared); another class is not.
        let mut old = Vec::with_capacity(frame_class(300));
        old.extend_from_slice(b"old frame");
        let mut spare = vec![Vec::with_capacity(frame_class(3000)), old];
        let reused = frame_buffer(&mut spare, 400);
        assert_eq!((reused.capacity(), reused.len()), (512, 0));
        assert_eq!(spare.len(), 1);
        let fresh = frame_buffer(&mut spare, 100);
        assert_eq!(fresh.capacity(), 256);
        assert_eq!(spare.len(), 1);
    }
}
