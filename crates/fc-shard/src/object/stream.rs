//! Streams: `XADD` and its family, consumer groups and their pending entries.
//!
//! A stream keeps its entries in a `BTreeMap` from [`StreamId`] to one allocation holding the
//! entry's field/value pairs (a count, then each element's length and bytes), so an entry costs
//! its bytes, one tree slot and one allocation. Beside them it keeps a small model of Redis's
//! radix-tree *nodes* (runs of at most 100 entries or about 4 KiB appended together, Redis's
//! default `stream-node-max-entries`/`-bytes`): approximate trimming (`MAXLEN ~`, `MINID ~`)
//! removes whole nodes as Redis does, so it removes what Redis removes for the same history,
//! and `XINFO STREAM` reports the node count as `radix-tree-keys`.
//!
//! Consumer groups: a name-ordered map (as Redis's rax lists them) of groups, each with its
//! last delivered id, its read counter, its pending entries list (PEL: id → consumer,
//! delivery time, delivery count) and its consumers (name-ordered, each with its own PEL ids
//! and its seen and active times).
//!
//! Every change is logged as a [`crate::Mutation::Stream`] with a [`StreamOp`] that records its
//! result (generated ids, delivery times, what a trim removed), so a replay never reads a
//! clock. A stream is never deleted for being empty (Redis keeps empty streams).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;

use super::{Object, digest_parts};
use crate::arena::KIND_STREAM;
use crate::clock::Clock;
use crate::error::{RedisObjectResult, StoreError};
use crate::mutation::Mutation;
use crate::shard::Shard;

/// Estimated bytes of an empty stream (the struct, its maps' roots, the node deque).
const STREAM_OVERHEAD: usize = 192;
/// Estimated bytes per entry beyond its encoded bytes: the tree slot (key 16 + pointer 16 in
/// leaves about half full: appends split them) and the allocation's header and rounding.
pub(crate) const ENTRY_OVERHEAD: usize = 96;
/// Per modelled node (a deque slot).
const NODE_OVERHEAD: usize = 48;
/// Per group beyond its name (the struct, its two maps, the tree slot).
const GROUP_OVERHEAD: usize = 192;
/// Per consumer beyond its name (the shared name's counts, the struct, its PEL set, the slot).
const CONSUMER_OVERHEAD: usize = 160;
/// Per pending entry: the group PEL slot (id 16 + consumer pointer 16 + times 16) and the
/// consumer PEL slot (16), in trees whose leaves are about half full.
const PENDING_OVERHEAD: usize = 176;

/// Redis's `stream-node-max-entries` default.
const NODE_MAX_ENTRIES: u32 = 100;
/// Redis's `stream-node-max-bytes` default.
const NODE_MAX_BYTES: usize = 4096;

/// A stream entry id: milliseconds and a sequence number, ordered as a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`.
    pub const MIN: Self = Self { ms: 0, seq: 0 };
    /// The largest id.
    pub const MAX: Self = Self {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`.
    #[must_use]
    pub const fn new(ms: u64, seq: u64) -> Self {
        Self { ms, seq }
    }

    /// The id right after this one (`None` after [`StreamId::MAX`]).
    #[must_use]
    pub fn next(self) -> Option<Self> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(Self { ms: self.ms, seq }),
            None => self.ms.checked_add(1).map(|ms| Self { ms, seq: 0 }),
        }
    }

    /// The id right before this one (`None` before `0-0`).
    #[must_use]
    pub fn prev(self) -> Option<Self> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(Self { ms: self.ms, seq }),
            None => self.ms.checked_sub(1).map(|ms| Self { ms, seq: u64::MAX }),
        }
    }

    /// Whether this is `0-0`.
    #[must_use]
    pub fn is_zero(self) -> bool {
        self == Self::MIN
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Stream errors whose texts are Redis's replies. Those that name the key or group
/// (`NOGROUP`) are written by the server, which knows the command's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// `XADD` with an id not above the stream's last.
    #[error("ERR The ID specified in XADD is equal or smaller than the target stream top item")]
    IdTooSmall,
    /// `XADD` with `0-0`.
    #[error("ERR The ID specified in XADD must be greater than 0-0")]
    IdZero,
    /// `XADD` after `18446744073709551615-18446744073709551615`.
    #[error("ERR The stream has exhausted the last possible ID, unable to add more items")]
    Exhausted,
    /// The key or the group does not exist (the server words the reply).
    #[error("NOGROUP No such key or consumer group")]
    NoGroup,
    /// `XGROUP CREATE` of a group that exists.
    #[error("BUSYGROUP Consumer Group name already exists")]
    BusyGroup,
    /// `XGROUP CREATE` on a missing key without `MKSTREAM`.
    #[error(
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."
    )]
    GroupNeedsKey,
    /// `XSETID` below the last id.
    #[error("ERR The ID specified in XSETID is smaller than the target stream top item")]
    SetIdTooSmall,
    /// `XSETID ... ENTRIESADDED` below the length.
    #[error("ERR The entries_added specified in XSETID is smaller than the target stream length")]
    EntriesAddedTooSmall,
}

/// How `XADD` picks the new entry's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAddId {
    /// `*`: from the clock (or the last id's sequence + 1).
    Auto,
    /// `ms-*`: this millisecond, the next free sequence.
    AutoSeq(u64),
    /// `ms-seq` (or `ms`, sequence 0).
    Explicit(StreamId),
}

/// What a trim keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    /// `MAXLEN n`: at most `n` entries.
    MaxLen(u64),
    /// `MINID id`: no entry below `id`.
    MinId(StreamId),
}

/// `XADD`/`XTRIM`'s trimming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTrim {
    /// What to keep.
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only.
    pub approx: bool,
    /// `LIMIT`: at most this many entries removed (0: no limit; only with `~`).
    pub limit: u64,
}

/// Where `XGROUP CREATE`/`SETID` puts a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupStart {
    /// `$`: the stream's last id.
    Last,
    /// An id.
    Id(StreamId),
}

/// One pending entry as a [`StreamOp::Claim`] sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PendingSet {
    /// The entry.
    pub id: StreamId,
    /// Delivery time, Unix ms.
    pub delivery_ms: u64,
    /// Deliveries so far.
    pub delivery_count: u64,
}

/// One change to a stream, as logged ([`crate::Mutation::Stream`]): results, never inputs
/// (generated ids, delivery times, the ids a trim reached), so applying the same ops in order
/// to the same stream gives the same stream. Deliberately exhaustive, as [`crate::Mutation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamOp<'a> {
    /// An empty stream was created (`XGROUP CREATE ... MKSTREAM`).
    Create,
    /// An entry was appended (the stream created when missing): the last id becomes `id`
    /// and the added count grows by one.
    Add {
        /// The entry's id.
        id: StreamId,
        /// Field, value, field, value...
        fields: &'a [&'a [u8]],
    },
    /// These entries were deleted (`XDEL`; only ids that existed): the largest deleted id
    /// is raised to the largest of them.
    Delete {
        /// The ids, ascending.
        ids: &'a [StreamId],
    },
    /// Every entry up to `through` was removed (a trim removes a prefix).
    Trim {
        /// The last id removed.
        through: StreamId,
    },
    /// `XSETID`: the stream's last id, added count and largest deleted id are now these.
    SetId {
        /// Last id.
        last_id: StreamId,
        /// Entries ever added.
        entries_added: u64,
        /// Largest deleted id.
        max_deleted: StreamId,
    },
    /// A group was created.
    GroupCreate {
        /// Its name.
        group: &'a [u8],
        /// Its last delivered id.
        last_id: StreamId,
        /// Its read counter (-1: unknown).
        entries_read: i64,
    },
    /// `XGROUP SETID`: a group's last delivered id and read counter are now these.
    GroupSetId {
        /// The group.
        group: &'a [u8],
        /// Its last delivered id.
        last_id: StreamId,
        /// Its read counter (-1: unknown).
        entries_read: i64,
    },
    /// A read moved a group's last delivered id and read counter (`XREADGROUP`, `XCLAIM ...
    /// LASTID`).
    Advance {
        /// The group.
        group: &'a [u8],
        /// Its last delivered id.
        last_id: StreamId,
        /// Its read counter (-1: unknown).
        entries_read: i64,
    },
    /// A group was destroyed.
    GroupDestroy {
        /// The group.
        group: &'a [u8],
    },
    /// A consumer was created (seen at `seen_ms`, never active).
    ConsumerCreate {
        /// The group.
        group: &'a [u8],
        /// The consumer.
        consumer: &'a [u8],
        /// Its seen time, Unix ms.
        seen_ms: u64,
    },
    /// A consumer was deleted with its pending entries.
    ConsumerDelete {
        /// The group.
        group: &'a [u8],
        /// The consumer.
        consumer: &'a [u8],
    },
    /// A consumer of the group was seen (and, with `active_ms`, read or claimed entries).
    Touch {
        /// The group.
        group: &'a [u8],
        /// The consumer (it exists).
        consumer: &'a [u8],
        /// Seen time, Unix ms.
        seen_ms: u64,
        /// Active time, Unix ms, when it changed.
        active_ms: Option<u64>,
    },
    /// These pending entries now belong to `consumer` with these times and counts (created
    /// when missing, moved from another consumer when owned).
    Claim {
        /// The group.
        group: &'a [u8],
        /// The consumer (it exists).
        consumer: &'a [u8],
        /// The entries.
        entries: &'a [PendingSet],
    },
    /// These pending entries were removed from the group's PEL (`XACK`, or claims of deleted
    /// entries).
    Ack {
        /// The group.
        group: &'a [u8],
        /// The ids that were pending.
        ids: &'a [StreamId],
    },
}

/// Encodes field/value pairs as one entry allocation: element count (u32 LE), then each
/// element's length (u32 LE) and bytes.
fn encode_entry(fields: &[&[u8]]) -> Box<[u8]> {
    let len = 4 + fields.iter().map(|f| 4 + f.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out.into_boxed_slice()
}

/// The elements of one entry (field, value, field, value...), borrowed.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    buf: &'a [u8],
    left: usize,
}

impl<'a> Fields<'a> {
    fn of(entry: &'a [u8]) -> Self {
        let (count, buf) = entry.split_at(4);
        Self {
            buf,
            left: u32::from_le_bytes(count.try_into().expect("4 bytes")) as usize,
        }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (len, rest) = self.buf.split_at(4);
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let (item, rest) = rest.split_at(len);
        self.buf = rest;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Fields<'_> {}

/// A modelled radix-tree node: entries appended together.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// The first id appended to it (Redis's master id).
    master: StreamId,
    /// The last id appended to it.
    last: StreamId,
    /// Entries still there.
    live: u32,
    /// Entries appended (deleted ones included).
    total: u32,
    /// Bytes of Redis's listpack for this node but for its two counters (live and deleted
    /// entries), whose widths change as they count: see [`Node::lp_bytes`].
    fixed: usize,
}

impl Node {
    /// `lpBytes` of the node's listpack in Redis (what `stream-node-max-bytes` is checked
    /// against).
    fn lp_bytes(&self) -> usize {
        self.fixed
            + lp_int_size(i64::from(self.live))
            + lp_int_size(i64::from(self.total - self.live))
    }
}

/// Bytes of a listpack entry's back-length for an entry of `len` bytes.
fn lp_backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..16383 => 2,
        16383..2_097_151 => 3,
        2_097_151..268_435_455 => 4,
        _ => 5,
    }
}

/// Bytes of a listpack element holding the integer `v`.
fn lp_int_size(v: i64) -> usize {
    let enc = if (0..=127).contains(&v) {
        1
    } else if (-4096..=4095).contains(&v) {
        2
    } else if i16::try_from(v).is_ok() {
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        4
    } else if i32::try_from(v).is_ok() {
        5
    } else {
        9
    };
    enc + 1
}

/// Bytes of a listpack element holding `s` (integer-encoded when it spells an integer
/// exactly, as `lpAppend` stores it).
fn lp_str_size(s: &[u8]) -> usize {
    if let Some(v) = super::number::parse_i64(s) {
        return lp_int_size(v);
    }
    let len = s.len();
    let enc = if len < 64 {
        1 + len
    } else if len < 4096 {
        2 + len
    } else {
        5 + len
    };
    enc + lp_backlen_size(enc)
}

/// Whether an entry's fields (`fields`: field, value, ...) are its node's master fields
/// (`master`: the node's first entry, field, value, ...): Redis then stores only the values
/// (`STREAM_ITEM_FLAG_SAMEFIELDS`).
fn same_fields<'a>(fields: &[&[u8]], master: impl ExactSizeIterator<Item = &'a [u8]>) -> bool {
    master.len() == fields.len()
        && master
            .step_by(2)
            .zip(fields.iter().step_by(2))
            .all(|(m, f)| m == *f)
}

/// Bytes of one entry in its node's listpack (flags, id deltas, [field count and fields],
/// values, element count), as Redis's `streamAppendItem` writes it.
fn lp_entry_size(id: StreamId, master: StreamId, fields: &[&[u8]], same: bool) -> usize {
    let pairs = fields.len() / 2;
    let mut size = lp_int_size(if same { 2 } else { 0 })
        + lp_int_size(id.ms.wrapping_sub(master.ms) as i64)
        + lp_int_size(id.seq.wrapping_sub(master.seq) as i64);
    let mut count = pairs + 3;
    if !same {
        size += lp_int_size(pairs as i64);
        size += fields
            .iter()
            .step_by(2)
            .map(|f| lp_str_size(f))
            .sum::<usize>();
        count += pairs + 1;
    }
    size += fields
        .iter()
        .skip(1)
        .step_by(2)
        .map(|v| lp_str_size(v))
        .sum::<usize>();
    size + lp_int_size(count as i64)
}

/// One node of a stream as Redis's radix tree holds it: its master id and its entries in
/// id order, deleted ones (still in Redis's listpack, flagged) included.
#[derive(Debug, Clone)]
pub struct StreamNode<'a> {
    /// The node's master id (its first entry's, deleted or not).
    pub master: StreamId,
    /// (id, deleted, fields) of each entry.
    pub entries: Vec<(StreamId, bool, Fields<'a>)>,
}

/// One pending entry of a group.
#[derive(Debug, Clone)]
pub struct PendingEntry {
    consumer: Arc<[u8]>,
    delivery_ms: u64,
    delivery_count: u64,
}

impl PendingEntry {
    /// The consumer it was delivered to.
    #[must_use]
    pub fn consumer(&self) -> &[u8] {
        &self.consumer
    }

    /// Last delivery time, Unix ms.
    #[must_use]
    pub fn delivery_ms(&self) -> u64 {
        self.delivery_ms
    }

    /// Deliveries so far.
    #[must_use]
    pub fn delivery_count(&self) -> u64 {
        self.delivery_count
    }
}

/// One consumer of a group.
#[derive(Debug, Clone, Default)]
pub struct StreamConsumer {
    seen_ms: u64,
    active_ms: Option<u64>,
    pending: BTreeSet<StreamId>,
}

impl StreamConsumer {
    /// Last time it tried to read or claim, Unix ms.
    #[must_use]
    pub fn seen_ms(&self) -> u64 {
        self.seen_ms
    }

    /// Last time it read or claimed entries, Unix ms (`None`: never).
    #[must_use]
    pub fn active_ms(&self) -> Option<u64> {
        self.active_ms
    }

    /// Its pending ids, ascending.
    #[must_use]
    pub fn pending(&self) -> &BTreeSet<StreamId> {
        &self.pending
    }
}

/// A consumer group.
#[derive(Debug, Clone, Default)]
pub struct StreamGroup {
    last_id: StreamId,
    entries_read: i64,
    pel: BTreeMap<StreamId, PendingEntry>,
    consumers: BTreeMap<Arc<[u8]>, StreamConsumer>,
}

impl StreamGroup {
    /// The last id delivered to the group.
    #[must_use]
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The read counter (`None`: unknown, Redis's -1).
    #[must_use]
    pub fn entries_read(&self) -> Option<u64> {
        u64::try_from(self.entries_read).ok()
    }

    /// The group's pending entries, by id.
    #[must_use]
    pub fn pel(&self) -> &BTreeMap<StreamId, PendingEntry> {
        &self.pel
    }

    /// The consumers, by name.
    pub fn consumers(&self) -> impl Iterator<Item = (&[u8], &StreamConsumer)> {
        self.consumers.iter().map(|(n, c)| (&n[..], c))
    }

    /// One consumer.
    #[must_use]
    pub fn consumer(&self, name: &[u8]) -> Option<&StreamConsumer> {
        self.consumers.get(name)
    }

    /// How many consumers.
    #[must_use]
    pub fn consumer_count(&self) -> usize {
        self.consumers.len()
    }
}

/// One stream value. Read through [`crate::EmbeddedStore::stream_read`] (and the local
/// store's), written through the `x*` operations.
#[derive(Debug, Default)]
pub struct Stream {
    entries: BTreeMap<StreamId, Box<[u8]>>,
    /// Deleted entries whose node lives on: Redis keeps them in the node's listpack, flagged
    /// deleted, until the whole node goes (so `DUMP` writes them as Redis does).
    tombstones: BTreeMap<StreamId, Box<[u8]>>,
    nodes: VecDeque<Node>,
    payload: usize,
    last_id: StreamId,
    entries_added: u64,
    max_deleted: StreamId,
    groups: BTreeMap<Box<[u8]>, StreamGroup>,
    /// Estimated bytes of the groups (names, consumers, pending entries).
    group_bytes: usize,
}

impl Stream {
    fn new_object() -> Object {
        Object::Stream(Box::default())
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        STREAM_OVERHEAD
            + self.payload
            + (self.entries.len() + self.tombstones.len()) * ENTRY_OVERHEAD
            + self.nodes.len() * NODE_OVERHEAD
            + self.group_bytes
    }

    /// Entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it has no entries (an empty stream still exists).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The last id generated (or set by `XSETID`).
    #[must_use]
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// Entries ever added.
    #[must_use]
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// The largest id deleted by `XDEL` (or set by `XSETID`).
    #[must_use]
    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted
    }

    /// The first entry's id, `0-0` when empty (`recorded-first-entry-id`).
    #[must_use]
    pub fn first_id(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or_default()
    }

    /// Modelled radix-tree nodes (`radix-tree-keys`).
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The entries with ids in `start..=end`, ascending (reverse it for `XREVRANGE`).
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, Fields<'_>)> {
        let range = if start <= end {
            Some(self.entries.range(start..=end))
        } else {
            None
        };
        range
            .into_iter()
            .flatten()
            .map(|(id, e)| (*id, Fields::of(e)))
    }

    /// One entry's fields.
    #[must_use]
    pub fn entry(&self, id: StreamId) -> Option<Fields<'_>> {
        self.entries.get(&id).map(|e| Fields::of(e))
    }

    /// The groups, by name.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &StreamGroup)> {
        self.groups.iter().map(|(n, g)| (&n[..], g))
    }

    /// One group.
    #[must_use]
    pub fn group(&self, name: &[u8]) -> Option<&StreamGroup> {
        self.groups.get(name)
    }

    /// How many groups.
    #[must_use]
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Whether a deleted entry may lie in `start..` (Redis's `streamRangeHasTombstones`).
    fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted.is_zero() {
            return false;
        }
        if self.first_id() > self.max_deleted {
            return false;
        }
        start <= self.max_deleted
    }

    /// The number of entries added before and including `id` when it can be known (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`); -1 when not.
    fn estimate_read_counter(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.entries.is_empty() && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return -1;
        }
        let first = self.first_id();
        if self.max_deleted.is_zero() || self.max_deleted < first {
            if id < first {
                return added - self.entries.len() as i64;
            }
            if id == first {
                return added - self.entries.len() as i64 + 1;
            }
        }
        -1
    }

    /// A group's lag (`XINFO GROUPS`): entries not yet delivered to it, when known (negative
    /// when `ENTRIESREAD` set its counter past the entries added, as Redis reports it).
    #[must_use]
    pub fn lag(&self, group: &StreamGroup) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if group.entries_read >= 0 && !self.has_tombstones_from(group.last_id) {
            return Some(added.wrapping_sub(group.entries_read));
        }
        let read = self.estimate_read_counter(group.last_id);
        (read >= 0).then(|| added.wrapping_sub(read))
    }

    /// Estimated listpack bytes of an entry's elements (what Redis's node limit counts).
    fn element_bytes(fields: &[&[u8]]) -> usize {
        fields.iter().map(|f| f.len()).sum()
    }

    // ----- changes (each the application of one StreamOp) -------------------------------------

    /// The fields of an entry, live or deleted.
    fn any_entry(&self, id: StreamId) -> Option<Fields<'_>> {
        self.entries
            .get(&id)
            .or_else(|| self.tombstones.get(&id))
            .map(|e| Fields::of(e))
    }

    fn add(&mut self, id: StreamId, fields: &[&[u8]]) {
        let elements = Self::element_bytes(fields);
        // Redis's `streamAppendItem`: a new node when the last one's listpack would reach
        // `stream-node-max-bytes` or holds `stream-node-max-entries` entries, deleted ones
        // counted.
        let room = self.nodes.back().is_some_and(|n| {
            n.lp_bytes() + elements < NODE_MAX_BYTES && n.total < NODE_MAX_ENTRIES
        });
        let entry = encode_entry(fields);
        self.payload += entry.len();
        self.last_id = id;
        self.entries_added += 1;
        if room && let Some(&Node { master, .. }) = self.nodes.back() {
            let same = self
                .any_entry(master)
                .is_some_and(|m| same_fields(fields, m));
            let size = lp_entry_size(id, master, fields, same);
            if let Some(node) = self.nodes.back_mut() {
                node.last = id;
                node.live += 1;
                node.total += 1;
                node.fixed += size;
            }
        } else {
            // Header (6), terminator (1), then the master entry: [counts,] field count,
            // fields, a zero; then the entry itself, values only.
            let fixed = 7
                + lp_int_size((fields.len() / 2) as i64)
                + fields
                    .iter()
                    .step_by(2)
                    .map(|f| lp_str_size(f))
                    .sum::<usize>()
                + lp_int_size(0)
                + lp_entry_size(id, id, fields, true);
            self.nodes.push_back(Node {
                master: id,
                last: id,
                live: 1,
                total: 1,
                fixed,
            });
        }
        self.entries.insert(id, entry);
    }

    /// Drops the tombstones of a node that went.
    fn drop_tombstones(&mut self, node: &Node) {
        if self.tombstones.is_empty() {
            return;
        }
        let gone: Vec<StreamId> = self
            .tombstones
            .range(node.master..=node.last)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(e) = self.tombstones.remove(&id) {
                self.payload -= e.len();
            }
        }
    }

    /// The nodes of Redis's radix tree for this stream, first to last, with every entry
    /// their listpacks hold (what `DUMP` writes).
    pub fn nodes(&self) -> impl Iterator<Item = StreamNode<'_>> {
        self.nodes.iter().map(|node| {
            let mut entries: Vec<(StreamId, bool, Fields<'_>)> = self
                .entries
                .range(node.master..=node.last)
                .map(|(id, e)| (*id, false, Fields::of(e)))
                .collect();
            if !self.tombstones.is_empty() {
                entries.extend(
                    self.tombstones
                        .range(node.master..=node.last)
                        .map(|(id, e)| (*id, true, Fields::of(e))),
                );
                entries.sort_unstable_by_key(|(id, _, _)| *id);
            }
            StreamNode {
                master: node.master,
                entries,
            }
        })
    }

    /// The node holding `id` (the last node whose master id is at or below it).
    fn node_of(&self, id: StreamId) -> Option<usize> {
        self.nodes
            .partition_point(|n| n.master <= id)
            .checked_sub(1)
    }

    fn remove_entry(&mut self, id: StreamId) -> bool {
        let Some(entry) = self.entries.remove(&id) else {
            return false;
        };
        match self.node_of(id) {
            Some(i) => {
                let node = &mut self.nodes[i];
                node.live = node.live.saturating_sub(1);
                if node.live == 0 {
                    self.payload -= entry.len();
                    if let Some(node) = self.nodes.remove(i) {
                        self.drop_tombstones(&node);
                    }
                } else {
                    self.tombstones.insert(id, entry);
                }
            }
            None => self.payload -= entry.len(),
        }
        // An entry's pending references stay: Redis keeps them until acknowledged or claimed.
        true
    }

    fn delete(&mut self, ids: &[StreamId]) -> Vec<StreamId> {
        let mut gone: Vec<StreamId> = Vec::new();
        for &id in ids {
            if self.remove_entry(id) {
                gone.push(id);
            }
        }
        if let Some(&max) = gone.iter().max()
            && max > self.max_deleted
        {
            self.max_deleted = max;
        }
        gone.sort_unstable();
        gone
    }

    /// Removes every entry up to `through` (a trim's effect); a node left with no live
    /// entry by an exact trim stays, as in Redis, unless all of it went.
    fn trim_through(&mut self, through: StreamId) -> usize {
        let ids: Vec<StreamId> = self.entries.range(..=through).map(|(id, _)| *id).collect();
        let mut removed = Vec::with_capacity(ids.len());
        for id in &ids {
            if let Some(entry) = self.entries.remove(id) {
                removed.push((*id, entry));
            }
        }
        while let Some(&node) = self.nodes.front() {
            if node.last <= through {
                self.nodes.pop_front();
                self.drop_tombstones(&node);
                continue;
            }
            break;
        }
        // What is left of the first node (an exact trim inside it): Redis flags the entries
        // deleted in its listpack.
        let first = self.nodes.front().map(|n| n.master);
        let mut partial = 0u32;
        for (id, entry) in removed {
            if first.is_some_and(|m| id >= m) {
                partial += 1;
                self.tombstones.insert(id, entry);
            } else {
                self.payload -= entry.len();
            }
        }
        if let Some(node) = self.nodes.front_mut() {
            node.live = node.live.saturating_sub(partial);
            if node.live == 0
                && let Some(node) = self.nodes.pop_front()
            {
                self.drop_tombstones(&node);
            }
        }
        ids.len()
    }

    /// What a trim would remove: the last id it reaches (`None`: nothing), as Redis's
    /// `streamTrim` walks nodes.
    fn plan_trim(&self, trim: StreamTrim) -> Option<StreamId> {
        let mut len = self.entries.len() as u64;
        let mut deleted = 0u64;
        let mut through = None;
        let limit = trim.limit;
        for node in &self.nodes {
            if let TrimStrategy::MaxLen(max) = trim.strategy
                && len <= max
            {
                break;
            }
            let entries = u64::from(node.live);
            let remove_node = match trim.strategy {
                TrimStrategy::MaxLen(max) => len - entries >= max,
                TrimStrategy::MinId(min) => node.last < min,
            };
            if remove_node {
                if limit != 0 && deleted + entries > limit {
                    break;
                }
                len -= entries;
                deleted += entries;
                through = Some(node.last);
                continue;
            }
            if trim.approx {
                break;
            }
            // Exact: entry by entry inside this node.
            let upto = self.nodes_end(node);
            for (&id, _) in self.entries.range(node.master..=upto) {
                let stop = match trim.strategy {
                    TrimStrategy::MaxLen(max) => len <= max,
                    TrimStrategy::MinId(min) => id >= min,
                };
                if stop {
                    break;
                }
                len -= 1;
                through = Some(id);
            }
            break;
        }
        through
    }

    /// The last id a node may hold.
    fn nodes_end(&self, node: &Node) -> StreamId {
        node.last
    }

    fn set_group_bytes(&mut self, delta: isize) {
        self.group_bytes = self.group_bytes.saturating_add_signed(delta);
    }

    /// Applies one logged op (replay, or the live change itself).
    pub(crate) fn apply(&mut self, op: &StreamOp<'_>) {
        match *op {
            StreamOp::Create => {}
            StreamOp::Add { id, fields } => self.add(id, fields),
            StreamOp::Delete { ids } => {
                self.delete(ids);
            }
            StreamOp::Trim { through } => {
                self.trim_through(through);
            }
            StreamOp::SetId {
                last_id,
                entries_added,
                max_deleted,
            } => {
                self.last_id = last_id;
                self.entries_added = entries_added;
                self.max_deleted = max_deleted;
            }
            StreamOp::GroupCreate {
                group,
                last_id,
                entries_read,
            } => {
                if !self.groups.contains_key(group) {
                    self.set_group_bytes((GROUP_OVERHEAD + group.len()) as isize);
                }
                self.groups.insert(
                    group.into(),
                    StreamGroup {
                        last_id,
                        entries_read,
                        ..StreamGroup::default()
                    },
                );
            }
            StreamOp::GroupSetId {
                group,
                last_id,
                entries_read,
            }
            | StreamOp::Advance {
                group,
                last_id,
                entries_read,
            } => {
                if let Some(g) = self.groups.get_mut(group) {
                    g.last_id = last_id;
                    g.entries_read = entries_read;
                }
            }
            StreamOp::GroupDestroy { group } => {
                if let Some(g) = self.groups.remove(group) {
                    let bytes = GROUP_OVERHEAD
                        + group.len()
                        + g.pel.len() * PENDING_OVERHEAD
                        + g.consumers
                            .keys()
                            .map(|n| CONSUMER_OVERHEAD + n.len())
                            .sum::<usize>();
                    self.set_group_bytes(-(bytes as isize));
                }
            }
            StreamOp::ConsumerCreate {
                group,
                consumer,
                seen_ms,
            } => {
                if let Some(g) = self.groups.get_mut(group)
                    && !g.consumers.contains_key(consumer)
                {
                    g.consumers.insert(
                        consumer.into(),
                        StreamConsumer {
                            seen_ms,
                            active_ms: None,
                            pending: BTreeSet::new(),
                        },
                    );
                    self.set_group_bytes((CONSUMER_OVERHEAD + consumer.len()) as isize);
                }
            }
            StreamOp::ConsumerDelete { group, consumer } => {
                let Some(g) = self.groups.get_mut(group) else {
                    return;
                };
                let Some(c) = g.consumers.remove(consumer) else {
                    return;
                };
                for id in &c.pending {
                    g.pel.remove(id);
                }
                let bytes = CONSUMER_OVERHEAD + consumer.len() + c.pending.len() * PENDING_OVERHEAD;
                self.set_group_bytes(-(bytes as isize));
            }
            StreamOp::Touch {
                group,
                consumer,
                seen_ms,
                active_ms,
            } => {
                if let Some(c) = self
                    .groups
                    .get_mut(group)
                    .and_then(|g| g.consumers.get_mut(consumer))
                {
                    c.seen_ms = seen_ms;
                    if active_ms.is_some() {
                        c.active_ms = active_ms;
                    }
                }
            }
            StreamOp::Claim {
                group,
                consumer,
                entries,
            } => {
                let Some(g) = self.groups.get_mut(group) else {
                    return;
                };
                let Some(name) = g.consumers.get_key_value(consumer).map(|(n, _)| n.clone()) else {
                    return;
                };
                let mut added = 0usize;
                for e in entries {
                    let previous = g.pel.insert(
                        e.id,
                        PendingEntry {
                            consumer: name.clone(),
                            delivery_ms: e.delivery_ms,
                            delivery_count: e.delivery_count,
                        },
                    );
                    match previous {
                        Some(p) if p.consumer != name => {
                            if let Some(old) = g.consumers.get_mut(&p.consumer) {
                                old.pending.remove(&e.id);
                            }
                        }
                        Some(_) => {}
                        None => added += 1,
                    }
                    if let Some(c) = g.consumers.get_mut(consumer) {
                        c.pending.insert(e.id);
                    }
                }
                self.set_group_bytes((added * PENDING_OVERHEAD) as isize);
            }
            StreamOp::Ack { group, ids } => {
                let Some(g) = self.groups.get_mut(group) else {
                    return;
                };
                let mut gone = 0usize;
                for id in ids {
                    if let Some(p) = g.pel.remove(id) {
                        gone += 1;
                        if let Some(c) = g.consumers.get_mut(&p.consumer) {
                            c.pending.remove(id);
                        }
                    }
                }
                self.set_group_bytes(-((gone * PENDING_OVERHEAD) as isize));
            }
        }
    }

    /// Digest of the contents: entries, metadata, groups with their PELs and consumers.
    pub(crate) fn digest(&self) -> u64 {
        let mut parts: Vec<Vec<u8>> = Vec::new();
        let id_bytes = |id: StreamId| {
            let mut b = id.ms.to_be_bytes().to_vec();
            b.extend_from_slice(&id.seq.to_be_bytes());
            b
        };
        parts.push(id_bytes(self.last_id));
        parts.push(self.entries_added.to_le_bytes().to_vec());
        parts.push(id_bytes(self.max_deleted));
        for (id, entry) in &self.entries {
            parts.push(id_bytes(*id));
            parts.push(entry.to_vec());
        }
        for (name, g) in &self.groups {
            parts.push(name.to_vec());
            parts.push(id_bytes(g.last_id));
            parts.push(g.entries_read.to_le_bytes().to_vec());
            for (id, p) in &g.pel {
                parts.push(id_bytes(*id));
                parts.push(p.consumer.to_vec());
                parts.push(p.delivery_ms.to_le_bytes().to_vec());
                parts.push(p.delivery_count.to_le_bytes().to_vec());
            }
            for (name, c) in &g.consumers {
                parts.push(name.to_vec());
                parts.push(c.seen_ms.to_le_bytes().to_vec());
                parts.push(c.active_ms.unwrap_or(u64::MAX).to_le_bytes().to_vec());
            }
        }
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        digest_parts(&refs)
    }

    /// The ops that recreate this stream from nothing (snapshots, moving a key), in order,
    /// into `emit`.
    pub(crate) fn export(&self, emit: &mut dyn FnMut(&StreamOp<'_>)) {
        emit(&StreamOp::Create);
        // Deleted entries still in a node's listpack are added and deleted again, so the
        // nodes come back as they were (for `DUMP`).
        let mut fields: Vec<&[u8]> = Vec::new();
        let mut deleted: Vec<StreamId> = Vec::new();
        let in_nodes: usize = self
            .nodes
            .iter()
            .map(|n| self.entries.range(n.master..=n.last).count())
            .sum();
        // A deleted entry whose id was added again (after `XSETID` lowered the last id) would
        // be deleted again on replay, taking the live entry with it: then the entries alone.
        let reused = || {
            self.nodes().any(|node| {
                node.entries
                    .into_iter()
                    .any(|(id, dead, _)| dead && self.entries.contains_key(&id))
            })
        };
        if in_nodes == self.entries.len() && !reused() {
            for node in self.nodes() {
                for (id, dead, entry) in node.entries {
                    fields.clear();
                    fields.extend(entry);
                    emit(&StreamOp::Add {
                        id,
                        fields: &fields,
                    });
                    if dead {
                        deleted.push(id);
                    }
                }
            }
        } else {
            // Entries the node model cannot replay (see above): their content matters more.
            for (id, entry) in &self.entries {
                fields.clear();
                fields.extend(Fields::of(entry));
                emit(&StreamOp::Add {
                    id: *id,
                    fields: &fields,
                });
            }
        }
        for part in deleted.chunks(crate::shard::EXPORT_CHUNK) {
            emit(&StreamOp::Delete { ids: part });
        }
        emit(&StreamOp::SetId {
            last_id: self.last_id,
            entries_added: self.entries_added,
            max_deleted: self.max_deleted,
        });
        for (name, g) in &self.groups {
            emit(&StreamOp::GroupCreate {
                group: name,
                last_id: g.last_id,
                entries_read: g.entries_read,
            });
            for (consumer, c) in &g.consumers {
                emit(&StreamOp::ConsumerCreate {
                    group: name,
                    consumer,
                    seen_ms: c.seen_ms,
                });
                emit(&StreamOp::Touch {
                    group: name,
                    consumer,
                    seen_ms: c.seen_ms,
                    active_ms: c.active_ms,
                });
                let pending: Vec<PendingSet> = c
                    .pending
                    .iter()
                    .filter_map(|id| {
                        g.pel.get(id).map(|p| PendingSet {
                            id: *id,
                            delivery_ms: p.delivery_ms,
                            delivery_count: p.delivery_count,
                        })
                    })
                    .collect();
                for part in pending.chunks(crate::shard::EXPORT_CHUNK) {
                    emit(&StreamOp::Claim {
                        group: name,
                        consumer,
                        entries: part,
                    });
                }
            }
        }
    }
}

pub(crate) fn as_stream(object: &Object) -> &Stream {
    match object {
        Object::Stream(s) => s,
        _ => unreachable!("kind checked by the shard"),
    }
}

pub(crate) fn as_stream_mut(object: &mut Object) -> &mut Stream {
    match object {
        Object::Stream(s) => s,
        _ => unreachable!("kind checked by the shard"),
    }
}

/// `XADD`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XAddOptions {
    /// `NOMKSTREAM`: do not create a missing stream.
    pub no_mkstream: bool,
    /// `MAXLEN`/`MINID`.
    pub trim: Option<StreamTrim>,
}

/// `XCLAIM`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XClaimOptions {
    /// `IDLE ms` / `TIME ms` as an absolute delivery time (Unix ms); `None`: now.
    pub delivery_ms: Option<i64>,
    /// `RETRYCOUNT`.
    pub retry_count: Option<u64>,
    /// `FORCE`.
    pub force: bool,
    /// `JUSTID`.
    pub just_id: bool,
    /// `LASTID`.
    pub last_id: Option<StreamId>,
}

/// An entry copied out of a stream: its id and fields (`None`: it was deleted, as history
/// reads report pending entries that no longer exist).
pub type StreamEntry = (StreamId, Option<Vec<Vec<u8>>>);

fn copy_entry(stream: &Stream, id: StreamId) -> StreamEntry {
    (
        id,
        stream.entry(id).map(|f| f.map(<[u8]>::to_vec).collect()),
    )
}

/// What `XAUTOCLAIM` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct XAutoClaim {
    /// Where the next call starts (`0-0`: the PEL was scanned to its end).
    pub next: StreamId,
    /// The claimed entries (fields `None` with `JUSTID`).
    pub claimed: Vec<StreamEntry>,
    /// Pending ids whose entries were deleted (removed from the PEL).
    pub deleted: Vec<StreamId>,
}

/// What `XREADGROUP` reads from one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupReadFrom {
    /// `>`: entries never delivered to the group.
    New,
    /// An id: the consumer's own pending entries from it.
    History(StreamId),
}

impl Shard {
    fn emit_stream(emit: &mut super::Emitter<'_>, op: &StreamOp<'_>) {
        emit.emit(Mutation::Stream {
            key: emit.key,
            op: *op,
        });
    }

    /// `XADD`: the new entry's id (`None` with `NOMKSTREAM` on a missing key). Logged as the
    /// `Add` with the id it got, then the `Trim` it made.
    pub(crate) fn xadd(
        &mut self,
        tag: u32,
        key: &[u8],
        id: XAddId,
        fields: &[&[u8]],
        options: XAddOptions,
        clock: &Clock,
    ) -> RedisObjectResult<Option<StreamId>> {
        if let XAddId::Explicit(id) = id
            && id.is_zero()
        {
            return Err(StoreError::Stream(StreamError::IdZero));
        }
        let create = (!options.no_mkstream).then_some(Stream::new_object as fn() -> Object);
        let now = clock.now_ms();
        let mut stream_error = None;
        let added = self.write_object(tag, key, KIND_STREAM, create, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let last = stream.last_id;
            if last == StreamId::MAX {
                stream_error = Some(StreamError::Exhausted);
                return Ok(None);
            }
            let new_id = match id {
                XAddId::Auto => {
                    if now > last.ms {
                        StreamId::new(now, 0)
                    } else {
                        last.next().unwrap_or(StreamId::MAX)
                    }
                }
                XAddId::AutoSeq(ms) => {
                    if ms > last.ms {
                        StreamId::new(ms, 0)
                    } else if ms == last.ms && last.seq < u64::MAX {
                        StreamId::new(ms, last.seq + 1)
                    } else {
                        stream_error = Some(StreamError::IdTooSmall);
                        return Ok(None);
                    }
                }
                XAddId::Explicit(id) => {
                    if id <= last {
                        stream_error = Some(StreamError::IdTooSmall);
                        return Ok(None);
                    }
                    id
                }
            };
            let op = StreamOp::Add { id: new_id, fields };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            if let Some(trim) = options.trim
                && let Some(through) = stream.plan_trim(trim)
            {
                let op = StreamOp::Trim { through };
                stream.apply(&op);
                Self::emit_stream(emit, &op);
            }
            Ok(Some(new_id))
        });
        if let Some(e) = stream_error {
            return Err(StoreError::Stream(e));
        }
        Ok(added?.flatten())
    }

    /// `XDEL`: how many of the ids existed.
    pub(crate) fn xdel(
        &mut self,
        tag: u32,
        key: &[u8],
        ids: &[StreamId],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let n = self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let mut present: Vec<StreamId> = ids
                .iter()
                .copied()
                .filter(|id| stream.entries.contains_key(id))
                .collect();
            present.sort_unstable();
            present.dedup();
            if !present.is_empty() {
                let op = StreamOp::Delete { ids: &present };
                stream.apply(&op);
                Self::emit_stream(emit, &op);
            }
            Ok(present.len())
        })?;
        Ok(n.unwrap_or(0))
    }

    /// `XTRIM`: how many entries went.
    pub(crate) fn xtrim(
        &mut self,
        tag: u32,
        key: &[u8],
        trim: StreamTrim,
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let n = self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let Some(through) = stream.plan_trim(trim) else {
                return Ok(0);
            };
            let op = StreamOp::Trim { through };
            let before = stream.len();
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(before - stream.len())
        })?;
        Ok(n.unwrap_or(0))
    }

    /// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`. [`StoreError::NoSuchKey`]
    /// for a missing key.
    pub(crate) fn xsetid(
        &mut self,
        tag: u32,
        key: &[u8],
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            // Checked against the last entry (not the last id), as Redis does.
            if let Some((&top, _)) = stream.entries.last_key_value() {
                if last_id < top {
                    return Err(StoreError::Stream(StreamError::SetIdTooSmall));
                }
                if entries_added.is_some_and(|added| added < stream.len() as u64) {
                    return Err(StoreError::Stream(StreamError::EntriesAddedTooSmall));
                }
            }
            let op = StreamOp::SetId {
                last_id,
                entries_added: entries_added.unwrap_or(stream.entries_added),
                max_deleted: max_deleted
                    .filter(|m| !m.is_zero())
                    .unwrap_or(stream.max_deleted),
            };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(())
        })?
        .ok_or(StoreError::NoSuchKey)
    }

    /// `XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`.
    #[expect(
        clippy::too_many_arguments,
        reason = "the store methods' shape: key, the command's arguments, the clock"
    )]
    pub(crate) fn xgroup_create(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        start: GroupStart,
        mkstream: bool,
        entries_read: Option<i64>,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let create = mkstream.then_some(Stream::new_object as fn() -> Object);
        let mut created = false;
        let done = self.write_object(tag, key, KIND_STREAM, create, clock, |object, emit| {
            let stream = as_stream_mut(object);
            if stream.entries_added == 0 && stream.groups.is_empty() && stream.entries.is_empty() {
                // A stream this write made: log its creation first.
                created = true;
            }
            if stream.groups.contains_key(group) {
                return Err(StoreError::Stream(StreamError::BusyGroup));
            }
            if created {
                Self::emit_stream(emit, &StreamOp::Create);
            }
            let last_id = match start {
                GroupStart::Last => stream.last_id,
                GroupStart::Id(id) => id,
            };
            let op = StreamOp::GroupCreate {
                group,
                last_id,
                entries_read: entries_read.unwrap_or(-1),
            };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(())
        })?;
        done.ok_or(StoreError::Stream(StreamError::GroupNeedsKey))
    }

    /// `XGROUP SETID key group id|$ [ENTRIESREAD n]`. [`StreamError::NoGroup`].
    pub(crate) fn xgroup_setid(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        start: GroupStart,
        entries_read: Option<i64>,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            if !stream.groups.contains_key(group) {
                return Err(StoreError::Stream(StreamError::NoGroup));
            }
            let last_id = match start {
                GroupStart::Last => stream.last_id,
                GroupStart::Id(id) => id,
            };
            let op = StreamOp::GroupSetId {
                group,
                last_id,
                entries_read: entries_read.unwrap_or(-1),
            };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(())
        })?
        .ok_or(StoreError::Stream(StreamError::NoGroup))
    }

    /// `XGROUP DESTROY`: whether the group existed. [`StoreError::NoSuchKey`] for a missing
    /// key (Redis's reply then names the key).
    pub(crate) fn xgroup_destroy(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            if !stream.groups.contains_key(group) {
                return Ok(false);
            }
            let op = StreamOp::GroupDestroy { group };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(true)
        })?
        .ok_or(StoreError::NoSuchKey)
    }

    /// `XGROUP CREATECONSUMER`: whether it was created. [`StreamError::NoGroup`].
    pub(crate) fn xgroup_createconsumer(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        consumer: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        let now = clock.now_ms();
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let g = stream
                .groups
                .get(group)
                .ok_or(StoreError::Stream(StreamError::NoGroup))?;
            if g.consumers.contains_key(consumer) {
                return Ok(false);
            }
            let op = StreamOp::ConsumerCreate {
                group,
                consumer,
                seen_ms: now,
            };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(true)
        })?
        .ok_or(StoreError::Stream(StreamError::NoGroup))
    }

    /// `XGROUP DELCONSUMER`: how many pending entries the consumer had (0 when it did not
    /// exist). [`StreamError::NoGroup`].
    pub(crate) fn xgroup_delconsumer(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        consumer: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let g = stream
                .groups
                .get(group)
                .ok_or(StoreError::Stream(StreamError::NoGroup))?;
            let Some(c) = g.consumers.get(consumer) else {
                return Ok(0);
            };
            let pending = c.pending.len();
            let op = StreamOp::ConsumerDelete { group, consumer };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
            Ok(pending)
        })?
        .ok_or(StoreError::Stream(StreamError::NoGroup))
    }

    /// The end of `XCLAIM`/`XAUTOCLAIM`: the pending entries whose stream entries are gone
    /// (`gone`, ascending) leave the PEL, then `claimed` goes to `consumer`, each applied and
    /// logged. The consumer is created (and seen) only when it claims something, as Redis 7.0
    /// does (7.2 creates it either way).
    fn settle_claim(
        stream: &mut Stream,
        emit: &mut super::Emitter<'_>,
        (group, consumer): (&[u8], &[u8]),
        now: u64,
        gone: &[StreamId],
        claimed: &[PendingSet],
    ) {
        if !gone.is_empty() {
            let op = StreamOp::Ack { group, ids: gone };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
        }
        if !claimed.is_empty() {
            Self::touch_consumer(stream, emit, group, consumer, now, true);
            let op = StreamOp::Claim {
                group,
                consumer,
                entries: claimed,
            };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
        }
    }

    /// Creates `consumer` when missing (logged), then marks it seen now; with `active`, active
    /// too.
    fn touch_consumer(
        stream: &mut Stream,
        emit: &mut super::Emitter<'_>,
        group: &[u8],
        consumer: &[u8],
        now: u64,
        active: bool,
    ) {
        let exists = stream
            .groups
            .get(group)
            .is_some_and(|g| g.consumers.contains_key(consumer));
        if !exists {
            let op = StreamOp::ConsumerCreate {
                group,
                consumer,
                seen_ms: now,
            };
            stream.apply(&op);
            Self::emit_stream(emit, &op);
        }
        let op = StreamOp::Touch {
            group,
            consumer,
            seen_ms: now,
            active_ms: active.then_some(now),
        };
        stream.apply(&op);
        Self::emit_stream(emit, &op);
    }

    /// `XREADGROUP` on one stream: the entries read (`New`: the entries after the group's
    /// last delivered id, now pending for `consumer` unless `no_ack`; `History`: the
    /// consumer's pending entries from the id, deliveries counted). `None` when `New` found
    /// nothing (a blocking read waits). [`StreamError::NoGroup`] when the key or group is
    /// missing.
    #[expect(
        clippy::too_many_arguments,
        reason = "the store methods' shape: key, the command's arguments, the clock"
    )]
    pub(crate) fn xreadgroup(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        consumer: &[u8],
        from: GroupReadFrom,
        count: usize,
        no_ack: bool,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<StreamEntry>>> {
        let now = clock.now_ms();
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let g = stream
                .groups
                .get(group)
                .ok_or(StoreError::Stream(StreamError::NoGroup))?;
            let limit = if count == 0 { usize::MAX } else { count };
            match from {
                GroupReadFrom::New => {
                    let start = g.last_id.next();
                    let ids: Vec<StreamId> = match start {
                        Some(start) => stream
                            .entries
                            .range(start..)
                            .take(limit)
                            .map(|(id, _)| *id)
                            .collect(),
                        None => Vec::new(),
                    };
                    // Nothing new: the consumer is neither created nor seen (Redis 7.0 creates
                    // it only when it serves it; 7.2 always).
                    if ids.is_empty() {
                        return Ok(None);
                    }
                    Self::touch_consumer(stream, emit, group, consumer, now, true);
                    // The group's read counter advances as Redis's does entry by entry.
                    let mut read = stream.groups[group].entries_read;
                    let mut last = stream.groups[group].last_id;
                    for &id in &ids {
                        if id > last {
                            if read != -1 && !stream.has_tombstones_from(id) {
                                read += 1;
                            } else if stream.entries_added != 0 {
                                read = stream.estimate_read_counter(id);
                            }
                            last = id;
                        }
                    }
                    let op = StreamOp::Advance {
                        group,
                        last_id: last,
                        entries_read: read,
                    };
                    stream.apply(&op);
                    Self::emit_stream(emit, &op);
                    if !no_ack {
                        let entries: Vec<PendingSet> = ids
                            .iter()
                            .map(|&id| PendingSet {
                                id,
                                delivery_ms: now,
                                delivery_count: 1,
                            })
                            .collect();
                        let op = StreamOp::Claim {
                            group,
                            consumer,
                            entries: &entries,
                        };
                        stream.apply(&op);
                        Self::emit_stream(emit, &op);
                    }
                    Ok(Some(ids.iter().map(|&id| copy_entry(stream, id)).collect()))
                }
                GroupReadFrom::History(from) => {
                    Self::touch_consumer(stream, emit, group, consumer, now, false);
                    let g = &stream.groups[group];
                    let ids: Vec<StreamId> = g
                        .consumers
                        .get(consumer)
                        .map(|c| c.pending.range(from..).take(limit).copied().collect())
                        .unwrap_or_default();
                    let updates: Vec<PendingSet> = ids
                        .iter()
                        .filter(|id| stream.entries.contains_key(id))
                        .filter_map(|id| {
                            g.pel.get(id).map(|p| PendingSet {
                                id: *id,
                                delivery_ms: now,
                                delivery_count: p.delivery_count + 1,
                            })
                        })
                        .collect();
                    if !updates.is_empty() {
                        let op = StreamOp::Claim {
                            group,
                            consumer,
                            entries: &updates,
                        };
                        stream.apply(&op);
                        Self::emit_stream(emit, &op);
                    }
                    Ok(Some(ids.iter().map(|&id| copy_entry(stream, id)).collect()))
                }
            }
        })?
        .ok_or(StoreError::Stream(StreamError::NoGroup))
    }

    /// `XACK`: how many of the ids were pending (0 for a missing key or group).
    pub(crate) fn xack(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        ids: &[StreamId],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let n = self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let Some(g) = stream.groups.get(group) else {
                return Ok(0);
            };
            let mut pending: Vec<StreamId> = ids
                .iter()
                .copied()
                .filter(|id| g.pel.contains_key(id))
                .collect();
            pending.sort_unstable();
            pending.dedup();
            if !pending.is_empty() {
                let op = StreamOp::Ack {
                    group,
                    ids: &pending,
                };
                stream.apply(&op);
                Self::emit_stream(emit, &op);
            }
            Ok(pending.len())
        })?;
        Ok(n.unwrap_or(0))
    }

    /// `XCLAIM`: the entries claimed, in the order asked (fields `None` with `JUSTID`).
    /// Pending ids whose entries were deleted leave the PEL. [`StreamError::NoGroup`].
    #[expect(
        clippy::too_many_arguments,
        reason = "the store methods' shape: key, the command's arguments, the clock"
    )]
    pub(crate) fn xclaim(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        consumer: &[u8],
        min_idle_ms: u64,
        ids: &[StreamId],
        options: XClaimOptions,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<StreamEntry>> {
        let now = clock.now_ms();
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let g = stream
                .groups
                .get(group)
                .ok_or(StoreError::Stream(StreamError::NoGroup))?;
            let delivery_ms = match options.delivery_ms {
                Some(t) if t >= 0 && (t as u64) <= now => t as u64,
                _ => now,
            };
            if let Some(last) = options.last_id
                && last > g.last_id
            {
                let op = StreamOp::Advance {
                    group,
                    last_id: last,
                    entries_read: g.entries_read,
                };
                stream.apply(&op);
                Self::emit_stream(emit, &op);
            }
            let mut claimed: Vec<PendingSet> = Vec::new();
            let mut gone: Vec<StreamId> = Vec::new();
            let g = &stream.groups[group];
            for &id in ids {
                let pending = g.pel.get(&id);
                if !stream.entries.contains_key(&id) {
                    if pending.is_some() && !gone.contains(&id) {
                        gone.push(id);
                    }
                    continue;
                }
                let count = match pending {
                    Some(p) => {
                        if min_idle_ms > 0 && now.saturating_sub(p.delivery_ms) < min_idle_ms {
                            continue;
                        }
                        p.delivery_count
                    }
                    None if options.force => 0,
                    None => continue,
                };
                // An id asked twice is claimed (and counted) twice, as Redis does.
                let count = claimed
                    .iter()
                    .rev()
                    .find(|c| c.id == id)
                    .map_or(count, |c| c.delivery_count);
                let delivery_count = match options.retry_count {
                    Some(n) => n,
                    None if options.just_id => count,
                    None => count + 1,
                };
                claimed.push(PendingSet {
                    id,
                    delivery_ms,
                    delivery_count,
                });
            }
            gone.sort_unstable();
            Self::settle_claim(stream, emit, (group, consumer), now, &gone, &claimed);
            Ok(claimed
                .iter()
                .map(|c| {
                    if options.just_id {
                        (c.id, None)
                    } else {
                        copy_entry(stream, c.id)
                    }
                })
                .collect())
        })?
        .ok_or(StoreError::Stream(StreamError::NoGroup))
    }

    /// `XAUTOCLAIM`: claims up to `count` pending entries from `start` idle at least
    /// `min_idle_ms`, looking at no more than `count × 10`; deleted entries leave the PEL
    /// (and count toward `count`). [`StreamError::NoGroup`].
    #[expect(
        clippy::too_many_arguments,
        reason = "the store methods' shape: key, the command's arguments, the clock"
    )]
    pub(crate) fn xautoclaim(
        &mut self,
        tag: u32,
        key: &[u8],
        group: &[u8],
        consumer: &[u8],
        min_idle_ms: u64,
        start: StreamId,
        count: usize,
        just_id: bool,
        clock: &Clock,
    ) -> RedisObjectResult<XAutoClaim> {
        let now = clock.now_ms();
        self.write_object(tag, key, KIND_STREAM, None, clock, |object, emit| {
            let stream = as_stream_mut(object);
            let g = stream
                .groups
                .get(group)
                .ok_or(StoreError::Stream(StreamError::NoGroup))?;
            let mut attempts = count.saturating_mul(10);
            let mut left = count;
            let mut claimed: Vec<PendingSet> = Vec::new();
            let mut deleted: Vec<StreamId> = Vec::new();
            let mut next = StreamId::MIN;
            let mut pel = g.pel.range(start..);
            loop {
                if attempts == 0 || left == 0 {
                    next = pel.next().map_or(StreamId::MIN, |(id, _)| *id);
                    break;
                }
                attempts -= 1;
                let Some((&id, p)) = pel.next() else {
                    break;
                };
                if !stream.entries.contains_key(&id) {
                    deleted.push(id);
                    left -= 1;
                    continue;
                }
                if min_idle_ms > 0 && now.saturating_sub(p.delivery_ms) < min_idle_ms {
                    continue;
                }
                claimed.push(PendingSet {
                    id,
                    delivery_ms: now,
                    delivery_count: p.delivery_count + u64::from(!just_id),
                });
                left -= 1;
            }
            Self::settle_claim(stream, emit, (group, consumer), now, &deleted, &claimed);
            Ok(XAutoClaim {
                next,
                claimed: claimed
                    .iter()
                    .map(|c| {
                        if just_id {
                            (c.id, None)
                        } else {
                            copy_entry(stream, c.id)
                        }
                    })
                    .collect(),
                deleted,
            })
        })?
        .ok_or(StoreError::Stream(StreamError::NoGroup))
    }

    /// Applies a logged [`StreamOp`] to the stream at `key` (created by `Create` and `Add`),
    /// as a replay or a key's move does.
    pub(crate) fn stream_apply(
        &mut self,
        tag: u32,
        key: &[u8],
        op: &StreamOp<'_>,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let create = matches!(op, StreamOp::Create | StreamOp::Add { .. })
            .then_some(Stream::new_object as fn() -> Object);
        self.write_object(tag, key, KIND_STREAM, create, clock, |object, emit| {
            as_stream_mut(object).apply(op);
            Self::emit_stream(emit, op);
            Ok(())
        })?;
        Ok(())
    }

    /// Runs `read` on the stream at `key`; `false` when the key is missing.
    pub(crate) fn stream_read(
        &self,
        tag: u32,
        key: &[u8],
        read: &mut dyn FnMut(&Stream),
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        Ok(self
            .read_object(tag, key, KIND_STREAM, clock, |o| read(as_stream(o)))?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn ids_step_across_the_sequence() {
        assert_eq!(id(1, u64::MAX).next(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(id(2, 0).prev(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(id(5, 7).to_string(), "5-7");
    }

    #[test]
    fn fields_round_trip() {
        let e = encode_entry(&[b"a", b"", b"long field"]);
        let f: Vec<&[u8]> = Fields::of(&e).collect();
        assert_eq!(f, vec![&b"a"[..], b"", b"long field"]);
    }

    fn filled(n: u64) -> Stream {
        let mut s = Stream::default();
        for i in 1..=n {
            s.add(id(i, 0), &[b"f", b"v"]);
        }
        s
    }

    #[test]
    fn nodes_split_at_a_hundred_entries_and_approximate_trims_remove_whole_nodes() {
        let mut s = filled(250);
        assert_eq!(s.node_count(), 3);
        let approx = |n| StreamTrim {
            strategy: TrimStrategy::MaxLen(n),
            approx: true,
            limit: 0,
        };
        // 250 - 100 >= 120: the first node goes; 150 - 100 < 120: the second stays.
        assert_eq!(s.plan_trim(approx(120)), Some(id(100, 0)));
        s.trim_through(id(100, 0));
        assert_eq!((s.len(), s.node_count()), (150, 2));
        // Exact trims cut inside a node.
        let exact = StreamTrim {
            strategy: TrimStrategy::MaxLen(120),
            approx: false,
            limit: 0,
        };
        assert_eq!(s.plan_trim(exact), Some(id(130, 0)));
        s.trim_through(id(130, 0));
        assert_eq!((s.len(), s.node_count()), (120, 2));
        // A limit below a node's entries stops an approximate trim.
        let limited = StreamTrim {
            limit: 10,
            ..approx(0)
        };
        assert_eq!(s.plan_trim(limited), None);
        let minid = StreamTrim {
            strategy: TrimStrategy::MinId(id(240, 0)),
            approx: false,
            limit: 0,
        };
        assert_eq!(s.plan_trim(minid), Some(id(239, 0)));
    }

    #[test]
    fn deleting_the_last_live_entry_of_a_node_removes_it() {
        let mut s = filled(150);
        let ids: Vec<StreamId> = (1..=100).map(|i| id(i, 0)).collect();
        assert_eq!(s.delete(&ids).len(), 100);
        assert_eq!(s.node_count(), 1);
        assert_eq!(s.max_deleted_id(), id(100, 0));
        assert_eq!(s.first_id(), id(101, 0));
    }

    /// (master, [(id, deleted)]) of every node.
    fn layout(s: &Stream) -> Vec<(StreamId, Vec<(StreamId, bool)>)> {
        s.nodes()
            .map(|n| {
                (
                    n.master,
                    n.entries.iter().map(|(id, d, _)| (*id, *d)).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn deleted_entries_stay_in_their_node_until_it_goes() {
        let mut s = filled(150);
        s.delete(&[id(1, 0), id(50, 0), id(120, 0)]);
        let nodes = layout(&s);
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].1.len(), 100);
        assert_eq!(nodes[0].1[0], (id(1, 0), true));
        assert_eq!(nodes[1].1.iter().filter(|(_, d)| *d).count(), 1);
        // An exact trim flags entries inside the node it stops in.
        s.trim_through(id(110, 0));
        let nodes = layout(&s);
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].0, id(101, 0));
        assert_eq!(nodes[0].1.iter().filter(|(_, d)| *d).count(), 11);
        assert_eq!(s.len(), 39);
        // The last live entry going takes the node and its deleted entries with it.
        let rest: Vec<StreamId> = s
            .range(StreamId::MIN, StreamId::MAX)
            .map(|(i, _)| i)
            .collect();
        s.delete(&rest);
        assert_eq!((s.node_count(), s.tombstones.len(), s.payload), (0, 0, 0));
    }

    #[test]
    fn nodes_are_cut_at_redis_listpack_bytes() {
        // 300-byte values: Redis's listpack passes 4096 bytes after 13 entries of one field.
        let mut s = Stream::default();
        let value = vec![b'v'; 300];
        for i in 1..=30 {
            s.add(id(i, 0), &[b"payload", &value]);
        }
        let sizes: Vec<usize> = layout(&s).iter().map(|(_, e)| e.len()).collect();
        assert_eq!(sizes, [13, 13, 4]);
        // An entry's own size: flags, deltas, the value (2-byte header + 300 + 2-byte backlen),
        // the element count.
        assert_eq!(
            lp_entry_size(id(2, 0), id(1, 0), &[b"payload", &value], true),
            2 + 2 + 2 + 304 + 2
        );
        assert_eq!(lp_str_size(b"-4096"), 3);
        assert_eq!(lp_str_size(b"007"), 5);
    }

    #[test]
    fn export_brings_the_nodes_back() {
        let mut s = filled(230);
        s.delete(&[id(3, 0), id(150, 0), id(229, 0)]);
        s.trim_through(id(10, 0));
        let mut ops: Vec<(u8, Vec<StreamId>)> = Vec::new();
        let mut copy = Stream::default();
        s.export(&mut |op| {
            copy.apply(op);
            if let StreamOp::Delete { ids } = op {
                ops.push((1, ids.to_vec()));
            }
        });
        assert_eq!(layout(&copy), layout(&s));
        assert_eq!(
            (copy.len(), copy.last_id(), copy.max_deleted_id()),
            (s.len(), s.last_id(), s.max_deleted_id())
        );
        assert_eq!(ops.len(), 1);
    }

    #[test]
    fn lag_follows_redis_estimates() {
        let mut s = filled(5);
        let mut g = StreamGroup {
            last_id: id(2, 0),
            entries_read: 2,
            ..StreamGroup::default()
        };
        assert_eq!(s.lag(&g), Some(3));
        s.delete(&[id(4, 0)]);
        // A tombstone ahead of the group: its counter cannot be trusted or estimated.
        assert_eq!(s.lag(&g), None);
        // An unknown counter at the last id is estimated exactly.
        g.last_id = id(5, 0);
        g.entries_read = -1;
        assert_eq!(s.lag(&g), Some(0));
        g.last_id = StreamId::MIN;
        let fresh = filled(3);
        assert_eq!(fresh.lag(&g), Some(3));
    }
}
