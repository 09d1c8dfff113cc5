//! Batches of one shard's mutations: what the primary's batchers build (each mutation encoded
//! as the WAL encodes it, with its sequence number) and what a replica applies, idempotently
//! against its per-shard watermarks, transactions whole.

use std::ops::Range;
use std::time::{Duration, Instant};

use fc_shard::{EmbeddedStore, Mutation};
use fc_wal::{Record, RecordView};

use crate::error::{FrameError, LinkError};
use crate::frame::{Frame, FrameRef, Kind};

/// Builds one shard's batch frame: entries of (sequence, length, the WAL's encoding of the
/// mutation); transaction markers carry sequence 0 (they take none).
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    shard: u32,
    first_seq: u64,
    last_seq: u64,
    records: u32,
    payload: Vec<u8>,
}

impl BatchBuilder {
    /// An empty batch of `shard`.
    #[must_use]
    pub fn new(shard: u32) -> Self {
        Self {
            shard,
            first_seq: 0,
            last_seq: 0,
            records: 0,
            payload: Vec::new(),
        }
    }

    /// Adds a mutation with its sequence number (0 for transaction markers).
    pub fn push(&mut self, seq: u64, mutation: &Mutation<'_>) {
        self.count(seq);
        // Encoded in place after a length placeholder (no second copy).
        self.payload.extend_from_slice(&seq.to_le_bytes());
        let at = self.payload.len();
        self.payload.extend_from_slice(&[0; 4]);
        fc_wal::encode_mutation(mutation, &mut self.payload);
        let len = (self.payload.len() - at - 4) as u32;
        self.payload[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Counts one more entry, of sequence `seq` (0: a marker, outside the span).
    fn count(&mut self, seq: u64) {
        if seq != 0 {
            if self.first_seq == 0 {
                self.first_seq = seq;
            }
            self.last_seq = seq;
        }
        self.records += 1;
    }

    /// Adds an entry already encoded as [`BatchBuilder::push`] writes it (sequence, length,
    /// the WAL's encoding: a server's writers encode on their own thread, and the batches are
    /// built elsewhere). Returns its sequence number.
    ///
    /// # Panics
    /// When `entry` is shorter than an entry's 12-byte head, or its length field disagrees
    /// with its size (a caller's bug, not input).
    pub fn push_encoded(&mut self, entry: &[u8]) -> u64 {
        assert!(entry.len() >= 12, "a batch entry has a 12-byte head");
        let seq = u64::from_le_bytes(entry[..8].try_into().expect("8"));
        let len = u32::from_le_bytes(entry[8..12].try_into().expect("4")) as usize;
        assert_eq!(len, entry.len() - 12, "a batch entry's length field");
        self.count(seq);
        self.payload.extend_from_slice(entry);
        seq
    }

    /// Gives the builder a buffer to write its next batch into (one the sender is done
    /// with: its memory is still in cache, and nothing is allocated), when it has none.
    pub fn reuse(&mut self, mut buffer: Vec<u8>) {
        if self.payload.capacity() == 0 {
            buffer.clear();
            self.payload = buffer;
        }
    }

    /// Whether the builder has no buffer (its next push allocates one).
    #[must_use]
    pub fn needs_buffer(&self) -> bool {
        self.payload.capacity() == 0
    }

    /// Records in it.
    #[must_use]
    pub fn records(&self) -> u32 {
        self.records
    }

    /// Payload bytes in it.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.payload.len()
    }

    /// The batch as a frame (with the sequence span it covers: first and last), leaving the
    /// builder empty; `None` when empty.
    pub fn take(&mut self) -> Option<(Frame, u64, u64)> {
        if self.records == 0 {
            return None;
        }
        let frame = Frame {
            kind: Kind::Batch,
            shard: self.shard,
            first_seq: self.first_seq,
            records: self.records,
            payload: std::mem::take(&mut self.payload),
        };
        let span = (self.first_seq, self.last_seq);
        self.first_seq = 0;
        self.last_seq = 0;
        self.records = 0;
        Some((frame, span.0, span.1))
    }
}

/// A batch's entries: (sequence, record).
///
/// # Errors
/// [`FrameError::Malformed`] for a payload that does not hold `frame.records` whole entries
/// (nothing is returned, so nothing of it is applied).
pub fn decode_batch(frame: &Frame) -> Result<Vec<(u64, Record)>, FrameError> {
    let mut entries = Vec::new();
    split_batch(&frame.view(), &mut entries)?;
    entries
        .into_iter()
        .map(|entry| {
            let record = Record::decode(&frame.payload[entry.range])
                .map_err(|_| FrameError::Malformed("batch"))?;
            Ok((entry.seq, record))
        })
        .collect()
}

/// What an entry is to the applier's grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Begin,
    End,
    Change,
}

/// One entry of a batch, checked: its sequence, its record's bytes in the payload, and what
/// it is.
#[derive(Debug, Clone)]
struct Split {
    seq: u64,
    range: Range<usize>,
    marker: Marker,
}

/// A batch's entries into `out` (cleared first), every record read (in place: a `Set` or a
/// delete allocates nothing) before any is returned, so a bad one rejects the whole frame.
fn split_batch(frame: &FrameRef<'_>, out: &mut Vec<Split>) -> Result<(), FrameError> {
    out.clear();
    if frame.kind != Kind::Batch {
        return Err(FrameError::Malformed("batch"));
    }
    let payload = &frame.payload[..];
    // Each entry takes at least 12 bytes: the count is checked before allocating.
    let n = frame.records as usize;
    if n.checked_mul(12).is_none_or(|b| b > payload.len()) {
        return Err(FrameError::Malformed("batch"));
    }
    out.reserve(n);
    let mut at = 0;
    for _ in 0..n {
        let Some(head) = payload.get(at..at + 12) else {
            return Err(FrameError::Malformed("batch"));
        };
        let seq = u64::from_le_bytes(head[..8].try_into().expect("8"));
        let len = u32::from_le_bytes(head[8..12].try_into().expect("4")) as usize;
        at += 12;
        if len > payload.len() - at {
            return Err(FrameError::Malformed("batch"));
        }
        let range = at..at + len;
        let view = RecordView::decode(&payload[range.clone()])
            .map_err(|_| FrameError::Malformed("batch"))?;
        let marker = if view.is_tx_begin() {
            Marker::Begin
        } else if view.is_tx_end() {
            Marker::End
        } else {
            Marker::Change
        };
        at += len;
        out.push(Split { seq, range, marker });
    }
    if at != payload.len() {
        out.clear();
        return Err(FrameError::Malformed("batch"));
    }
    Ok(())
}

/// A record due to be applied, as its encoded bytes ([`RecordView::decode`] reads them in
/// place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// In the frame being applied: these bytes of its payload.
    InFrame(Range<usize>),
    /// Held since an earlier entry (a transaction's change, gathered until its end).
    Held(Vec<u8>),
}

impl Entry {
    /// Its bytes, `payload` being the frame's being applied.
    #[must_use]
    pub fn bytes<'a>(&'a self, payload: &'a [u8]) -> &'a [u8] {
        match self {
            Self::InFrame(range) => &payload[range.clone()],
            Self::Held(bytes) => bytes,
        }
    }
}

/// What applying a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applied {
    /// Mutations applied.
    pub applied: usize,
    /// Mutations skipped: already applied (a replayed or duplicated batch).
    pub skipped: usize,
    /// Mutations held: inside a transaction whose end has not come yet.
    pub held: usize,
}

/// A replica's side: per-shard watermarks (the last sequence applied) and the transactions
/// being gathered, applying batches idempotently.
#[derive(Debug, Clone)]
pub struct Applier {
    watermarks: Vec<u64>,
    /// Per shard, an open group's entries, applied together at its (outermost) end.
    open: Vec<Option<Group>>,
    /// The entries of the frame being applied (kept: a frame's split allocates nothing).
    splits: Vec<Split>,
}

impl Applier {
    /// An applier that has applied up to `watermarks` (per shard; 0: nothing).
    #[must_use]
    pub fn new(watermarks: Vec<u64>) -> Self {
        let open = vec![None; watermarks.len()];
        Self {
            watermarks,
            open,
            splits: Vec::new(),
        }
    }

    /// The watermarks (what to persist with the data, and to send in `Hello` and `Ack`).
    #[must_use]
    pub fn watermarks(&self) -> &[u64] {
        &self.watermarks
    }

    /// Drops the transactions being gathered, keeping the watermarks: a new link resends
    /// from the watermarks, so a group still open is sent again from its begin marker (a
    /// [`Batcher`] never ends a batch between a transaction's begin and the mutation after
    /// it). Kept, an open group would take the resent begin as a nested one and never close.
    pub fn abandon_groups(&mut self) {
        self.open.iter_mut().for_each(|g| *g = None);
    }

    /// Sets a shard's watermark (after a snapshot of it was loaded).
    pub fn reset_shard(&mut self, shard: usize, watermark: u64) {
        self.watermarks[shard] = watermark;
        self.open[shard] = None;
    }

    /// Applies a batch frame to `store`: each mutation at most once, in sequence order; a
    /// transaction's mutations all at its end marker.
    ///
    /// # Errors
    /// [`LinkError::Gap`] when a sequence is missing (nothing after it is applied: the
    /// replica must catch up again), [`LinkError::Record`] for a payload or a store refusal.
    pub fn apply(&mut self, frame: &Frame, store: &EmbeddedStore) -> Result<Applied, LinkError> {
        self.apply_with(frame, |shard, record| {
            record.apply(store, shard).map_err(|e| e.to_string())
        })
    }

    /// [`Applier::apply`] through `apply`, which is given each record due, in order, with
    /// its shard (a server hands them to the worker owning the shard). The watermark moves
    /// past a record once `apply` took it. Groups nest (a shard's own group, such as
    /// `LMOVE`'s, inside a server transaction): the outermost end applies them all. Markers
    /// that carry a sequence (a shard's own groups) take their place in the watermark.
    ///
    /// # Errors
    /// As [`Applier::apply`]; an `Err` from `apply` becomes [`LinkError::Record`].
    pub fn apply_with(
        &mut self,
        frame: &Frame,
        mut apply: impl FnMut(usize, Record) -> Result<(), String>,
    ) -> Result<Applied, LinkError> {
        self.apply_entries(&frame.view(), |shard, entry| {
            let record = Record::decode(entry.bytes(&frame.payload)).map_err(|e| e.to_string())?;
            apply(shard, record)
        })
    }

    /// [`Applier::apply_with`], each record given as its bytes ([`Entry`]): what is in the
    /// frame stays there, so a server can hand the frame's payload to its workers whole and
    /// have each read its records in place. Every record of the frame is read (without
    /// allocating, for sets and deletes) before any is given, so a bad one rejects the frame.
    ///
    /// # Errors
    /// As [`Applier::apply_with`].
    pub fn apply_entries(
        &mut self,
        frame: &FrameRef<'_>,
        mut apply: impl FnMut(usize, Entry) -> Result<(), String>,
    ) -> Result<Applied, LinkError> {
        let shard = frame.shard as usize;
        if shard >= self.watermarks.len() {
            return Err(LinkError::Record(format!("batch of unknown shard {shard}")));
        }
        let mut entries = std::mem::take(&mut self.splits);
        let done = split_batch(frame, &mut entries)
            .map_err(|e| LinkError::Record(e.to_string()))
            .and_then(|()| self.apply_split(shard, frame, &entries, &mut apply));
        self.splits = entries;
        done
    }

    /// [`Applier::apply_entries`] of a frame's checked entries.
    fn apply_split(
        &mut self,
        shard: usize,
        frame: &FrameRef<'_>,
        entries: &[Split],
        apply: &mut impl FnMut(usize, Entry) -> Result<(), String>,
    ) -> Result<Applied, LinkError> {
        let mut done = Applied::default();
        for split in entries {
            let (seq, range) = (split.seq, split.range.clone());
            match split.marker {
                Marker::Begin => {
                    let group = self.open[shard].get_or_insert_with(Group::default);
                    group.depth += 1;
                    if seq != 0 {
                        group.held.push((seq, None));
                    }
                }
                Marker::End => {
                    let Some(group) = &mut self.open[shard] else {
                        // An end whose start this replica never saw (it began before a
                        // snapshot): only its sequence counts.
                        if seq != 0 {
                            self.apply_one(shard, seq, None, apply, &mut done)?;
                        }
                        continue;
                    };
                    if seq != 0 {
                        group.held.push((seq, None));
                    }
                    group.depth -= 1;
                    if group.depth == 0 {
                        let held = self.open[shard].take().map(|g| g.held).unwrap_or_default();
                        let records = held.iter().filter(|(_, r)| r.is_some()).count();
                        done.held = done.held.saturating_sub(records);
                        for (seq, bytes) in held {
                            let entry = bytes.map(Entry::Held);
                            self.apply_one(shard, seq, entry, apply, &mut done)?;
                        }
                    }
                }
                Marker::Change => {
                    if let Some(group) = &mut self.open[shard] {
                        group.held.push((seq, Some(frame.payload[range].to_vec())));
                        done.held += 1;
                    } else {
                        let entry = Some(Entry::InFrame(range));
                        self.apply_one(shard, seq, entry, apply, &mut done)?;
                    }
                }
            }
        }
        Ok(done)
    }

    /// Applies one entry (a marker's: `None`, its sequence only) unless already applied.
    fn apply_one(
        &mut self,
        shard: usize,
        seq: u64,
        record: Option<Entry>,
        apply: &mut impl FnMut(usize, Entry) -> Result<(), String>,
        done: &mut Applied,
    ) -> Result<(), LinkError> {
        let watermark = self.watermarks[shard];
        if seq != 0 && seq <= watermark {
            if record.is_some() {
                done.skipped += 1;
            }
            return Ok(());
        }
        if seq != 0 && seq != watermark + 1 {
            return Err(LinkError::Gap {
                shard: shard as u32,
                expected: watermark + 1,
                got: seq,
            });
        }
        if let Some(record) = record {
            apply(shard, record).map_err(LinkError::Record)?;
            done.applied += 1;
        }
        if seq != 0 {
            self.watermarks[shard] = seq;
        }
        Ok(())
    }
}

/// A group being gathered: its nesting depth and its entries (their records' bytes; markers
/// with a sequence as `None`).
#[derive(Debug, Clone, Default)]
struct Group {
    depth: u32,
    held: Vec<(u64, Option<Vec<u8>>)>,
}

/// When a primary's batch leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendPolicy {
    /// Every mutation as a batch of one.
    Immediate,
    /// When a batch reaches `max_records` or `max_bytes`, or is `max_delay` old.
    Batch {
        /// Most records in a batch.
        max_records: u32,
        /// Most payload bytes in a batch.
        max_bytes: usize,
        /// Longest a mutation waits in a batch.
        max_delay: Duration,
    },
}

impl Default for SendPolicy {
    /// The specification's defaults: batches of 64 records or 256 KiB, 250 µs at most.
    fn default() -> Self {
        Self::Batch {
            max_records: 64,
            max_bytes: 256 << 10,
            max_delay: Duration::from_micros(250),
        }
    }
}

/// A sealed batch: its frame and the sequence span it covers.
#[derive(Debug, Clone)]
pub struct Sealed {
    /// The frame.
    pub frame: Frame,
    /// The first sequence in it (0: markers only).
    pub first_seq: u64,
    /// The last sequence in it (0: markers only).
    pub last_seq: u64,
}

/// One shard's batcher on the primary (each shard has its own: a saturated lane holds only
/// its shard). Time comes from the caller (sans-IO).
#[derive(Debug, Clone)]
pub struct Batcher {
    policy: SendPolicy,
    builder: BatchBuilder,
    opened: Option<Instant>,
    /// The last mutation added is a transaction's begin marker without a sequence: the batch
    /// waits for the mutation after it.
    begun: bool,
}

impl Batcher {
    /// A batcher for `shard`.
    #[must_use]
    pub fn new(shard: u32, policy: SendPolicy) -> Self {
        Self {
            policy,
            builder: BatchBuilder::new(shard),
            opened: None,
            begun: false,
        }
    }

    /// [`BatchBuilder::reuse`]: a buffer for the next batch, when the batcher has none.
    pub fn reuse(&mut self, buffer: Vec<u8>) {
        self.builder.reuse(buffer);
    }

    /// [`BatchBuilder::needs_buffer`].
    #[must_use]
    pub fn needs_buffer(&self) -> bool {
        self.builder.needs_buffer()
    }

    /// Whether a batch is open (a caller that reads the clock only to open one checks).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.opened.is_some()
    }

    /// Adds a mutation; returns the batch when it is to leave now. `now` matters only when
    /// this opens a batch.
    ///
    /// A server transaction's begin marker (sequence 0) never ends a batch, whether full or
    /// due: it leaves with the mutation after it. A replica resuming from its watermark `w`
    /// is sent the frames from the one holding `w + 1` on; the begin of a transaction it had
    /// not finished gathering is in that frame.
    pub fn push(&mut self, seq: u64, mutation: &Mutation<'_>, now: Instant) -> Option<Sealed> {
        self.builder.push(seq, mutation);
        self.pushed(
            seq == 0 && matches!(mutation, Mutation::TxBegin { .. }),
            now,
        )
    }

    /// [`Batcher::push`] of an entry already encoded ([`BatchBuilder::push_encoded`]);
    /// `begins`: it is a transaction's begin marker (sequence 0), which never ends a batch.
    pub fn push_encoded(&mut self, entry: &[u8], begins: bool, now: Instant) -> Option<Sealed> {
        self.builder.push_encoded(entry);
        self.pushed(begins, now)
    }

    fn pushed(&mut self, begins: bool, now: Instant) -> Option<Sealed> {
        self.opened.get_or_insert(now);
        self.begun = begins;
        if begins {
            return None;
        }
        let full = match self.policy {
            SendPolicy::Immediate => true,
            SendPolicy::Batch {
                max_records,
                max_bytes,
                ..
            } => self.builder.records() >= max_records || self.builder.bytes() >= max_bytes,
        };
        full.then(|| self.seal()).flatten()
    }

    /// The batch, when its oldest mutation has waited `max_delay` by `now`.
    pub fn due(&mut self, now: Instant) -> Option<Sealed> {
        let max_delay = match self.policy {
            SendPolicy::Immediate => Duration::ZERO,
            SendPolicy::Batch { max_delay, .. } => max_delay,
        };
        let opened = self.opened?;
        (!self.begun && now.duration_since(opened) >= max_delay)
            .then(|| self.seal())
            .flatten()
    }

    /// The open batch, whatever its age, unless its last mutation is a transaction's begin
    /// marker (which leaves with the mutation after it): what a sender that sweeps every
    /// `max_delay` takes at each sweep, so that no mutation waits longer than `max_delay`
    /// plus the sweep's own lateness, and half of it on average.
    pub fn sweep(&mut self) -> Option<Sealed> {
        if self.begun {
            return None;
        }
        self.seal()
    }

    /// When the open batch is due (`None`: nothing waits).
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        let max_delay = match self.policy {
            SendPolicy::Immediate => Duration::ZERO,
            SendPolicy::Batch { max_delay, .. } => max_delay,
        };
        self.opened.map(|o| o + max_delay)
    }

    /// The open batch, whatever its size (shutdown, a transaction's end).
    pub fn seal(&mut self) -> Option<Sealed> {
        self.opened = None;
        self.begun = false;
        let (frame, first_seq, last_seq) = self.builder.take()?;
        Some(Sealed {
            frame,
            first_seq,
            last_seq,
        })
    }
}
