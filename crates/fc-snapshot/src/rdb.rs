//! Redis's serialized-value format: the payload `DUMP` returns and `RESTORE` takes.
//!
//! A payload is one value in RDB object encoding (a type byte, then the value), the RDB version
//! (2 bytes, little-endian) and a CRC64 of everything before it (8 bytes, little-endian; Redis's
//! Jones polynomial, reflected, initial value 0 — `src/crc64.c`).
//!
//! [`dump`] writes a value as redis-server 7.0 does, encodings chosen by Redis's default
//! thresholds for the same content:
//!
//! | value | encoding written |
//! | --- | --- |
//! | string | integer-encoded (INT8/16/32) when Redis would, LZF when longer than 20 bytes and LZF saves 4 bytes or more, raw otherwise |
//! | list | quicklist (type 18) of listpack nodes, filled as `RPUSH` fills them (8 KiB nodes, `list-max-listpack-size -2`) |
//! | set | intset (11) when every member is an integer and there are at most 512, else a plain set (2) in the given order |
//! | sorted set | listpack (17) when at most 128 members of at most 64 bytes, else `ZSET_2` (5, binary doubles, greatest first) |
//! | hash | listpack (16) when at most 512 pairs of at most 64 bytes each, else a plain hash (4) in the given order |
//! | stream | `STREAM_LISTPACKS_2` (19): each node's listpack (master entry, entries with their flags and id deltas, deleted ones included) as [`StreamValue`] gives the nodes, then counters, groups, PELs, consumers |
//!
//! Blobs (listpacks, intsets) and strings are LZF-compressed exactly as Redis's `lzf_c.c`
//! (liblzf 3.6) compresses them, so a payload equals redis-server 7.0.15's byte for byte
//! wherever the value's order is Redis's own (see `tests/rdb.rs` for what was compared against
//! redis-server). The one layout `dump` cannot know is a list's node boundaries when Redis built
//! the list other than by appending (`LPUSH`, `LINSERT`, ...): the payload then differs from
//! Redis's but holds the same list. The compressor's 256 KiB hash table is kept per thread.
//!
//! As Redis 7.0 does, a payload is checked against its CRC64 always (a zero checksum is no
//! exception) and refused when its RDB version is newer than [`RDB_VERSION_MAX`]; Redis 7.0
//! itself refuses version 11, hence [`RDB_VERSION`] 10.
//!
//! [`restore`] reads every encoding Redis 2.4 to 7.2 writes for strings, lists, sets, sorted
//! sets and hashes: raw, integer and LZF strings; list (1), ziplist (10), quicklist (14) and
//! quicklist 2 (18); set (2), intset (11) and listpack set (20); sorted set (3, 5), ziplist (12)
//! and listpack (17); hash (4), zipmap (9), ziplist (13) and listpack (16); and streams of
//! types 15 (Redis 5 to 6.2: counters estimated as Redis 7 estimates them), 19 (7.0) and 21
//! (7.2: consumers' active times). Module values are [`RdbError::Unsupported`]. Every length read from the payload is checked against
//! the bytes left and against [`Limits`] before anything is allocated for it, every blob is
//! validated in full (Redis's deep sanitization), and no input makes it panic.

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;

pub use fc_shard::StreamId;
use fc_shard::{PendingSet, StreamOp};

/// The RDB version [`dump`] writes: Redis 7.0's, which Redis 7.0 and every later Redis accept.
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version [`restore`] accepts without [`Limits::relaxed_version_check`]: Redis
/// 7.2's.
pub const RDB_VERSION_MAX: u16 = 11;

/// Redis's default `hash-max-listpack-entries`: larger hashes are dumped as plain hashes.
pub const HASH_MAX_LISTPACK_ENTRIES: usize = 512;
/// Redis's default `hash-max-listpack-value`: a longer field or value makes a plain hash.
pub const HASH_MAX_LISTPACK_VALUE: usize = 64;
/// Redis's default `zset-max-listpack-entries`: larger sorted sets are dumped as `ZSET_2`.
pub const ZSET_MAX_LISTPACK_ENTRIES: usize = 128;
/// Redis's default `zset-max-listpack-value`: a longer member makes a `ZSET_2`.
pub const ZSET_MAX_LISTPACK_VALUE: usize = 64;
/// Redis's default `set-max-intset-entries`: larger all-integer sets are dumped as plain sets.
pub const SET_MAX_INTSET_ENTRIES: usize = 512;
/// Bytes of one quicklist node under Redis's default `list-max-listpack-size -2`.
pub const LIST_MAX_LISTPACK_BYTES: usize = 8192;

/// RDB object types (Redis's `RDB_TYPE_*`).
mod ty {
    pub(super) const STRING: u8 = 0;
    pub(super) const LIST: u8 = 1;
    pub(super) const SET: u8 = 2;
    pub(super) const ZSET: u8 = 3;
    pub(super) const HASH: u8 = 4;
    pub(super) const ZSET_2: u8 = 5;
    pub(super) const MODULE_PRE_GA: u8 = 6;
    pub(super) const MODULE_2: u8 = 7;
    pub(super) const HASH_ZIPMAP: u8 = 9;
    pub(super) const LIST_ZIPLIST: u8 = 10;
    pub(super) const SET_INTSET: u8 = 11;
    pub(super) const ZSET_ZIPLIST: u8 = 12;
    pub(super) const HASH_ZIPLIST: u8 = 13;
    pub(super) const LIST_QUICKLIST: u8 = 14;
    pub(super) const STREAM_LISTPACKS: u8 = 15;
    pub(super) const HASH_LISTPACK: u8 = 16;
    pub(super) const ZSET_LISTPACK: u8 = 17;
    pub(super) const LIST_QUICKLIST_2: u8 = 18;
    pub(super) const STREAM_LISTPACKS_2: u8 = 19;
    pub(super) const SET_LISTPACK: u8 = 20;
    pub(super) const STREAM_LISTPACKS_3: u8 = 21;
}

/// Quicklist node containers (type 18).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;
/// Elements this long get a plain quicklist node of their own (Redis's `packed_threshold`).
const PACKED_THRESHOLD: usize = 1 << 30;
/// Redis's estimate of a listpack entry's overhead when deciding whether a node has room.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;

/// One value as `DUMP` and `RESTORE` carry it.
///
/// Order: a list's as stored; a set's and a hash's as given to [`dump`] (Redis dumps its
/// hash-table encodings in its dictionary's order, which [`restore`] keeps; an intset is
/// dumped and restored in ascending order); a sorted set's members are dumped and restored in
/// Redis's order (score, then member bytes) whatever order they are given in.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set; members must be distinct.
    Set(Vec<Vec<u8>>),
    /// A sorted set as (member, score); members distinct, scores not NaN.
    SortedSet(Vec<(Vec<u8>, f64)>),
    /// A hash as (field, value); fields distinct.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A stream, as Redis's radix tree of listpacks holds it.
    Stream(Box<StreamValue>),
}

/// A stream as `DUMP` and `RESTORE` carry it: the nodes of Redis's radix tree with every
/// entry their listpacks hold (deleted ones too), the stream's metadata and its consumer
/// groups.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamValue {
    /// The nodes, ascending by master id.
    pub nodes: Vec<StreamNodeValue>,
    /// Live entries (`XLEN`).
    pub length: u64,
    /// The last id generated or set.
    pub last_id: StreamId,
    /// The first live entry's id (`0-0` when empty). Read from RDB type 19 and 21, derived
    /// from the nodes for type 15.
    pub first_id: StreamId,
    /// The largest deleted id.
    pub max_deleted: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The consumer groups, by name.
    pub groups: Vec<StreamGroupValue>,
}

/// One radix-tree node: a listpack of entries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamNodeValue {
    /// The node's key: the id the entries' ids are stored relative to.
    pub master: StreamId,
    /// The master entry's field names (an entry with exactly these fields stores only its
    /// values). Redis uses the node's first entry's fields.
    pub master_fields: Vec<Vec<u8>>,
    /// The entries, ascending by id.
    pub entries: Vec<StreamEntryValue>,
}

/// One entry of a node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamEntryValue {
    /// Its id.
    pub id: StreamId,
    /// Deleted (`XDEL`, or an exact trim inside the node): still in the listpack, flagged.
    pub deleted: bool,
    /// Field, value, field, value...
    pub fields: Vec<Vec<u8>>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamGroupValue {
    /// Its name.
    pub name: Vec<u8>,
    /// The last id delivered to it.
    pub last_id: StreamId,
    /// Its read counter, -1 when unknown (type 15 payloads get Redis's estimate).
    pub entries_read: i64,
    /// Its pending entries (PEL), ascending by id.
    pub pel: Vec<StreamPendingValue>,
    /// Its consumers, by name.
    pub consumers: Vec<StreamConsumerValue>,
}

/// One pending entry of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamPendingValue {
    /// The entry's id.
    pub id: StreamId,
    /// Last delivery, Unix ms (Redis's signed milliseconds, as their bits).
    pub delivery_ms: u64,
    /// Deliveries so far.
    pub delivery_count: u64,
}

/// One consumer of a group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamConsumerValue {
    /// Its name.
    pub name: Vec<u8>,
    /// Last seen, Unix ms.
    pub seen_ms: u64,
    /// Last active, Unix ms (`None`: never). Type 21 carries it; type 19 and 15 payloads take
    /// the seen time, as Redis 7.2 does; [`dump`] (type 19) does not write it.
    pub active_ms: Option<u64>,
    /// The ids of the group's pending entries it owns, ascending.
    pub pending: Vec<StreamId>,
}

impl Value {
    /// The name `TYPE` replies for this value.
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::String(_) => "string",
            Self::List(_) => "list",
            Self::Set(_) => "set",
            Self::SortedSet(_) => "zset",
            Self::Hash(_) => "hash",
            Self::Stream(_) => "stream",
        }
    }
}

/// Most ids in one op of [`StreamValue::ops`] (a snapshot's export splits its ops the same
/// way).
const OPS_CHUNK: usize = 1024;

impl StreamValue {
    /// The stream `s` as `DUMP` writes it: its modelled radix-tree nodes with their deleted
    /// entries (each node's master fields its first entry's, as in Redis), metadata, groups.
    #[must_use]
    pub fn from_stream(s: &fc_shard::Stream) -> Self {
        let nodes = s
            .nodes()
            .map(|node| {
                let entries: Vec<StreamEntryValue> = node
                    .entries
                    .into_iter()
                    .map(|(id, deleted, fields)| StreamEntryValue {
                        id,
                        deleted,
                        fields: fields.map(<[u8]>::to_vec).collect(),
                    })
                    .collect();
                let master_fields = entries
                    .first()
                    .map(|e| e.fields.iter().step_by(2).cloned().collect())
                    .unwrap_or_default();
                StreamNodeValue {
                    master: node.master,
                    master_fields,
                    entries,
                }
            })
            .collect();
        let groups = s
            .groups()
            .map(|(name, g)| StreamGroupValue {
                name: name.to_vec(),
                last_id: g.last_id(),
                entries_read: g.entries_read().map_or(-1, |n| n as i64),
                pel: g
                    .pel()
                    .iter()
                    .map(|(id, p)| StreamPendingValue {
                        id: *id,
                        delivery_ms: p.delivery_ms(),
                        delivery_count: p.delivery_count(),
                    })
                    .collect(),
                consumers: g
                    .consumers()
                    .map(|(name, c)| StreamConsumerValue {
                        name: name.to_vec(),
                        seen_ms: c.seen_ms(),
                        active_ms: c.active_ms(),
                        pending: c.pending().iter().copied().collect(),
                    })
                    .collect(),
            })
            .collect();
        Self {
            nodes,
            length: s.len() as u64,
            last_id: s.last_id(),
            first_id: s.first_id(),
            max_deleted: s.max_deleted_id(),
            entries_added: s.entries_added(),
            groups,
        }
    }

    /// The ops that create this stream from nothing, in order, into `emit` (`RESTORE`): every
    /// entry the nodes hold appended in order (deleted ones too, then deleted again, so the
    /// nodes come back as Redis cut them when it cut them under its default node limits),
    /// the metadata, then the groups with their consumers and pending entries.
    pub fn ops(&self, emit: &mut dyn FnMut(&StreamOp<'_>)) {
        emit(&StreamOp::Create);
        let mut deleted: Vec<StreamId> = Vec::new();
        let mut fields: Vec<&[u8]> = Vec::new();
        for e in self.nodes.iter().flat_map(|n| &n.entries) {
            fields.clear();
            fields.extend(e.fields.iter().map(Vec::as_slice));
            emit(&StreamOp::Add {
                id: e.id,
                fields: &fields,
            });
            if e.deleted {
                deleted.push(e.id);
            }
        }
        for part in deleted.chunks(OPS_CHUNK) {
            emit(&StreamOp::Delete { ids: part });
        }
        emit(&StreamOp::SetId {
            last_id: self.last_id,
            entries_added: self.entries_added,
            max_deleted: self.max_deleted,
        });
        for g in &self.groups {
            emit(&StreamOp::GroupCreate {
                group: &g.name,
                last_id: g.last_id,
                entries_read: g.entries_read,
            });
            for c in &g.consumers {
                emit(&StreamOp::ConsumerCreate {
                    group: &g.name,
                    consumer: &c.name,
                    seen_ms: c.seen_ms,
                });
                emit(&StreamOp::Touch {
                    group: &g.name,
                    consumer: &c.name,
                    seen_ms: c.seen_ms,
                    active_ms: c.active_ms,
                });
                let entries: Vec<PendingSet> = c
                    .pending
                    .iter()
                    .filter_map(|id| {
                        let i = g.pel.binary_search_by_key(id, |p| p.id).ok()?;
                        let p = &g.pel[i];
                        Some(PendingSet {
                            id: p.id,
                            delivery_ms: p.delivery_ms,
                            delivery_count: p.delivery_count,
                        })
                    })
                    .collect();
                for part in entries.chunks(OPS_CHUNK) {
                    emit(&StreamOp::Claim {
                        group: &g.name,
                        consumer: &c.name,
                        entries: part,
                    });
                }
            }
        }
    }
}

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RdbError {
    /// Shorter than the trailer, an RDB version above [`RDB_VERSION_MAX`], or a CRC64 that does
    /// not match (Redis: `ERR DUMP payload version or checksum are wrong`).
    BadVersionOrChecksum,
    /// The value's encoding is damaged or inconsistent (Redis: `ERR Bad data format`).
    Malformed(&'static str),
    /// A value this codec does not decode: module values, types of newer RDB versions.
    Unsupported(&'static str),
    /// The value holds more elements or bytes than the [`Limits`] allow.
    TooLarge,
}

impl RdbError {
    /// The error text Redis replies for this refusal (without the `ERR ` prefix).
    #[must_use]
    pub fn redis_message(&self) -> &'static str {
        match self {
            Self::BadVersionOrChecksum => "DUMP payload version or checksum are wrong",
            Self::Malformed(_) | Self::Unsupported(_) | Self::TooLarge => "Bad data format",
        }
    }
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadVersionOrChecksum => f.write_str("DUMP payload version or checksum are wrong"),
            Self::Malformed(why) => write!(f, "bad data format: {why}"),
            Self::Unsupported(what) => write!(f, "unsupported value: {what}"),
            Self::TooLarge => f.write_str("value exceeds the restore limits"),
        }
    }
}

impl std::error::Error for RdbError {}

/// Bounds on what [`restore`] builds from one payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most elements: list items, set members, sorted-set members, hash pairs (a string is 1).
    pub max_elements: usize,
    /// Most bytes allocated from the payload's lengths: the value's strings, integers written
    /// out in decimal, and LZF-decompressed blobs while they are decoded. (The value's own
    /// bookkeeping, about 24 bytes a string, comes on top: bounded by `max_elements`.)
    pub max_bytes: usize,
    /// Accept RDB versions above [`RDB_VERSION_MAX`] (Redis 7.4's `rdb-version-check relaxed`):
    /// the value is decoded when its type is one this codec knows.
    pub relaxed_version_check: bool,
}

impl Limits {
    /// Limits of `max_elements` elements and `max_bytes` bytes, strict version check.
    #[must_use]
    pub const fn new(max_elements: usize, max_bytes: usize) -> Self {
        Self {
            max_elements,
            max_bytes,
            relaxed_version_check: false,
        }
    }

    /// The same limits with the version check relaxed (or not).
    #[must_use]
    pub const fn with_relaxed_version_check(mut self, relaxed: bool) -> Self {
        self.relaxed_version_check = relaxed;
        self
    }
}

impl Default for Limits {
    /// 64 Mi elements and 512 MiB (Redis's `proto-max-bulk-len`), strict version check.
    fn default() -> Self {
        Self::new(64 << 20, 512 << 20)
    }
}

// ---------------------------------------------------------------------------------------------
// CRC64 (Jones polynomial, reflected, as Redis's crc64.c).

const CRC64_POLY: u64 = 0xad93_d235_94c9_35a9_u64.reverse_bits();

static CRC64_TABLE: [[u64; 256]; 8] = crc64_table();

const fn crc64_table() -> [[u64; 256]; 8] {
    let mut table = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ CRC64_POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = table[k - 1][i];
            table[k][i] = (prev >> 8) ^ table[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    table
}

/// Redis's CRC64 of `data`, continuing from `crc` (0 to start): the checksum of a `DUMP`
/// payload is `crc64(0, everything before it)`.
#[must_use]
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = &CRC64_TABLE;
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        crc ^= u64::from_le_bytes(word);
        crc = t[7][(crc & 0xff) as usize]
            ^ t[6][((crc >> 8) & 0xff) as usize]
            ^ t[5][((crc >> 16) & 0xff) as usize]
            ^ t[4][((crc >> 24) & 0xff) as usize]
            ^ t[3][((crc >> 32) & 0xff) as usize]
            ^ t[2][((crc >> 40) & 0xff) as usize]
            ^ t[1][((crc >> 48) & 0xff) as usize]
            ^ t[0][(crc >> 56) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

// ---------------------------------------------------------------------------------------------
// LZF, as Redis's lzf_c.c and lzf_d.c (liblzf 3.6: HLOG 16, VERY_FAST, STRICT_ALIGN off).

mod lzf {
    const HLOG: u32 = 16;
    const HSIZE: usize = 1 << HLOG;
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);

    /// The compressor's hash table, reused across calls: a slot holds `base + position` of the
    /// call that wrote it, so slots written by earlier calls (below the current base) read as
    /// empty, as in a freshly zeroed table.
    pub(super) struct Table {
        slots: Vec<u32>,
        base: u32,
    }

    impl Table {
        pub(super) fn new() -> Self {
            Self {
                slots: vec![0; HSIZE],
                base: 1,
            }
        }
    }

    fn idx(h: u32) -> usize {
        ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
    }

    /// Compresses `input` into `out` (resized) as `lzf_compress(input, len, out, out_len)`
    /// does; false where that returns 0 (the result would not fit in `out_len` bytes).
    pub(super) fn compress(
        table: &mut Table,
        input: &[u8],
        out: &mut Vec<u8>,
        out_len: usize,
    ) -> bool {
        // Positions are stamped in 32 bits, as Redis's `unsigned int` lengths are.
        if input.is_empty() || out_len == 0 || input.len() >= (u32::MAX - 1) as usize {
            return false;
        }
        let len = input.len() as u32;
        if u32::MAX - table.base <= len {
            table.slots.fill(0);
            table.base = 1;
        }
        let base = table.base;
        out.clear();
        out.resize(out_len, 0);
        let written = compress_into(&mut table.slots, base, input, out);
        table.base += len;
        match written {
            Some(n) => {
                out.truncate(n);
                true
            }
            None => false,
        }
    }

    fn put(out: &mut [u8], at: usize, byte: u8) -> Option<()> {
        *out.get_mut(at)? = byte;
        Some(())
    }

    fn compress_into(slots: &mut [u32], base: u32, input: &[u8], out: &mut [u8]) -> Option<usize> {
        let in_len = input.len();
        let out_len = out.len();
        let mut ip = 0usize;
        let mut op = 1usize; // the first literal run's length byte
        let mut lit = 0usize;
        let mut hval: u32 = if in_len >= 2 {
            (u32::from(input[0]) << 8) | u32::from(input[1])
        } else {
            0
        };
        while ip + 2 < in_len {
            hval = (hval << 8) | u32::from(input[ip + 2]);
            let slot = idx(hval);
            let stored = slots[slot];
            slots[slot] = base + ip as u32;
            let reference = stored.checked_sub(base).map(|r| r as usize).filter(|&r| {
                r > 0 && r < ip && ip - r - 1 < MAX_OFF && input[r..r + 3] == input[ip..ip + 3]
            });
            if let Some(r) = reference {
                let off = ip - r - 1;
                let mut len = 2usize;
                let maxlen = (in_len - ip - len).min(MAX_REF);
                // Stop the literal run (dropping it when empty).
                put(out, op - lit - 1, (lit as u8).wrapping_sub(1))?;
                if lit == 0 {
                    op -= 1;
                }
                if op + 3 + 1 >= out_len {
                    return None;
                }
                'extend: {
                    if maxlen > 16 {
                        for _ in 0..16 {
                            len += 1;
                            if input[r + len] != input[ip + len] {
                                break 'extend;
                            }
                        }
                    }
                    loop {
                        len += 1;
                        if !(len < maxlen && input[r + len] == input[ip + len]) {
                            break;
                        }
                    }
                }
                len -= 2;
                ip += 1;
                if len < 7 {
                    put(out, op, ((off >> 8) + (len << 5)) as u8)?;
                    op += 1;
                } else {
                    put(out, op, ((off >> 8) + (7 << 5)) as u8)?;
                    put(out, op + 1, (len - 7) as u8)?;
                    op += 2;
                }
                put(out, op, off as u8)?;
                op += 1;
                lit = 0;
                op += 1; // the next literal run's length byte
                ip += len + 1;
                if ip + 2 >= in_len {
                    break;
                }
                ip -= 2;
                hval = (u32::from(input[ip]) << 8) | u32::from(input[ip + 1]);
                hval = (hval << 8) | u32::from(input[ip + 2]);
                slots[idx(hval)] = base + ip as u32;
                ip += 1;
                hval = (hval << 8) | u32::from(input[ip + 2]);
                slots[idx(hval)] = base + ip as u32;
                ip += 1;
            } else {
                if op >= out_len {
                    return None;
                }
                put(out, op, input[ip])?;
                lit += 1;
                op += 1;
                ip += 1;
                if lit == MAX_LIT {
                    put(out, op - lit - 1, (lit - 1) as u8)?;
                    lit = 0;
                    op += 1;
                }
            }
        }
        if op + 3 > out_len {
            return None;
        }
        while ip < in_len {
            put(out, op, input[ip])?;
            lit += 1;
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                put(out, op - lit - 1, (lit - 1) as u8)?;
                lit = 0;
                op += 1;
            }
        }
        put(out, op - lit - 1, (lit as u8).wrapping_sub(1))?;
        if lit == 0 {
            op -= 1;
        }
        Some(op)
    }

    /// Decompresses `input`, which must expand to exactly `expected` bytes.
    pub(super) fn decompress(input: &[u8], expected: usize) -> Option<Vec<u8>> {
        let mut out: Vec<u8> = Vec::with_capacity(expected);
        let mut ip = 0usize;
        while ip < input.len() {
            let ctrl = usize::from(input[ip]);
            ip += 1;
            if ctrl < 32 {
                let n = ctrl + 1;
                if out.len() + n > expected {
                    return None;
                }
                out.extend_from_slice(input.get(ip..ip + n)?);
                ip += n;
            } else {
                let mut n = ctrl >> 5;
                if n == 7 {
                    n += usize::from(*input.get(ip)?);
                    ip += 1;
                }
                let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(ip)?) + 1;
                ip += 1;
                n += 2;
                if out.len() + n > expected {
                    return None;
                }
                let start = out.len().checked_sub(back)?;
                if start + n <= out.len() {
                    out.extend_from_within(start..start + n);
                } else {
                    for i in start..start + n {
                        let byte = out[i];
                        out.push(byte);
                    }
                }
            }
        }
        (out.len() == expected).then_some(out)
    }
}

thread_local! {
    static LZF_TABLE: RefCell<Option<lzf::Table>> = const { RefCell::new(None) };
}

/// `lzf_compress(input, out, out_len)` with this thread's table.
fn lzf_compress(input: &[u8], out: &mut Vec<u8>, out_len: usize) -> bool {
    LZF_TABLE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => lzf::compress(
            slot.get_or_insert_with(lzf::Table::new),
            input,
            out,
            out_len,
        ),
        Err(_) => lzf::compress(&mut lzf::Table::new(), input, out, out_len),
    })
}

// ---------------------------------------------------------------------------------------------
// Shared helpers.

/// Redis's `string2ll` / `lpStringToInt64`: the integer a string spells exactly (no sign but
/// `-`, no leading zeros, no spaces), so that printing it gives the string back.
fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        (v <= 1 << 63).then(|| 0i64.wrapping_sub_unsigned(v))
    } else {
        i64::try_from(v).ok()
    }
}

fn decimal(v: i64) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// Redis's `d2string` in 7.0: integers below 2^52 in decimal, other finite values as
/// `%.17g`, and `inf`, `-inf`, `nan`, `-0`.
fn d2string(v: f64) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.to_owned()
    } else if v == 0.0 {
        if v.is_sign_negative() { "-0" } else { "0" }.to_owned()
    } else if v > -4_503_599_627_370_495.0 && v < 4_503_599_627_370_496.0 && v == (v as i64) as f64
    {
        (v as i64).to_string()
    } else {
        format_g17(v)
    }
}

/// C's `printf("%.17g", v)` for a finite `v`.
fn format_g17(v: f64) -> String {
    let sci = format!("{:.16e}", v.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let mut out = String::with_capacity(24);
    if v.is_sign_negative() {
        out.push('-');
    }
    let push_digits = |out: &mut String, ds: &[u8]| out.extend(ds.iter().map(|&d| char::from(d)));
    let trim = |ds: &[u8]| -> usize { ds.iter().rposition(|&d| d != b'0').map_or(0, |i| i + 1) };
    if !(-4..17).contains(&exponent) {
        push_digits(&mut out, &digits[..1]);
        let frac = &digits[1..];
        let keep = trim(frac);
        if keep > 0 {
            out.push('.');
            push_digits(&mut out, &frac[..keep]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let e = exponent.unsigned_abs();
        if e < 10 {
            out.push('0');
        }
        out.push_str(&e.to_string());
    } else if exponent >= 0 {
        let split = (exponent as usize + 1).min(digits.len());
        push_digits(&mut out, &digits[..split]);
        let frac = &digits[split..];
        let keep = trim(frac);
        if keep > 0 {
            out.push('.');
            push_digits(&mut out, &frac[..keep]);
        }
    } else {
        out.push_str("0.");
        for _ in 0..(-exponent - 1) {
            out.push('0');
        }
        let keep = trim(&digits);
        push_digits(&mut out, &digits[..keep]);
    }
    out
}

/// Scores in Redis's order (NaN, which no sorted set holds, last).
fn cmp_score(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| a.is_nan().cmp(&b.is_nan()))
}

fn cmp_member(a: &(Vec<u8>, f64), b: &(Vec<u8>, f64)) -> Ordering {
    cmp_score(a.1, b.1).then_with(|| a.0.cmp(&b.0))
}

/// A listpack entry's back-length for an entry of `l` bytes (Redis's `lpEncodeBacklen`).
fn encode_backlen(l: usize, buf: &mut [u8; 5]) -> usize {
    let l = l as u64;
    if l <= 127 {
        buf[0] = l as u8;
        1
    } else if l < 16383 {
        buf[0] = (l >> 7) as u8;
        buf[1] = ((l & 127) | 128) as u8;
        2
    } else if l < 2_097_151 {
        buf[0] = (l >> 14) as u8;
        buf[1] = (((l >> 7) & 127) | 128) as u8;
        buf[2] = ((l & 127) | 128) as u8;
        3
    } else if l < 268_435_455 {
        buf[0] = (l >> 21) as u8;
        buf[1] = (((l >> 14) & 127) | 128) as u8;
        buf[2] = (((l >> 7) & 127) | 128) as u8;
        buf[3] = ((l & 127) | 128) as u8;
        4
    } else {
        buf[0] = (l >> 28) as u8;
        buf[1] = (((l >> 21) & 127) | 128) as u8;
        buf[2] = (((l >> 14) & 127) | 128) as u8;
        buf[3] = (((l >> 7) & 127) | 128) as u8;
        buf[4] = ((l & 127) | 128) as u8;
        5
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP.

/// A listpack built by appending, as Redis's `lpAppend`.
struct Listpack {
    buf: Vec<u8>,
    count: usize,
}

impl Listpack {
    fn new() -> Self {
        Self {
            buf: vec![0; 6],
            count: 0,
        }
    }

    /// `lpBytes` of the listpack so far (header, entries, terminator).
    fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    fn push(&mut self, ele: &[u8]) {
        match parse_i64(ele) {
            Some(v) => self.push_int(v),
            None => self.push_str(ele),
        }
    }

    /// `lpAppendInteger`.
    fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        {
            if (0..=127).contains(&v) {
                self.buf.push(v as u8);
            } else if (-4096..=4095).contains(&v) {
                let u = (v as u64) & 0x1fff;
                self.buf.extend([0xc0 | (u >> 8) as u8, u as u8]);
            } else if let Ok(v) = i16::try_from(v) {
                self.buf.push(0xf1);
                self.buf.extend(v.to_le_bytes());
            } else if (-8_388_608..=8_388_607).contains(&v) {
                self.buf.push(0xf2);
                self.buf.extend(&v.to_le_bytes()[..3]);
            } else if let Ok(v) = i32::try_from(v) {
                self.buf.push(0xf3);
                self.buf.extend(v.to_le_bytes());
            } else {
                self.buf.push(0xf4);
                self.buf.extend(v.to_le_bytes());
            }
        }
        self.end_entry(start);
    }

    /// A string element, never integer-encoded.
    fn push_str(&mut self, ele: &[u8]) {
        let start = self.buf.len();
        {
            let len = ele.len();
            if len < 64 {
                self.buf.push(0x80 | len as u8);
            } else if len < 4096 {
                self.buf.extend([0xe0 | (len >> 8) as u8, len as u8]);
            } else {
                self.buf.push(0xf0);
                self.buf.extend((len as u32).to_le_bytes());
            }
            self.buf.extend_from_slice(ele);
        }
        self.end_entry(start);
    }

    /// The back-length of the element written from `start`.
    fn end_entry(&mut self, start: usize) {
        let mut backlen = [0u8; 5];
        let n = encode_backlen(self.buf.len() - start, &mut backlen);
        self.buf.extend_from_slice(&backlen[..n]);
        self.count += 1;
    }

    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        let count = u16::try_from(self.count).unwrap_or(u16::MAX);
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    scratch: Vec<u8>,
}

impl Writer {
    /// `rdbSaveLen`.
    fn len(&mut self, n: usize) {
        let n = n as u64;
        if n < 1 << 6 {
            self.out.push(n as u8);
        } else if n < 1 << 14 {
            self.out.extend([0x40 | (n >> 8) as u8, n as u8]);
        } else if n <= u64::from(u32::MAX) {
            self.out.push(0x80);
            self.out.extend((n as u32).to_be_bytes());
        } else {
            self.out.push(0x81);
            self.out.extend(n.to_be_bytes());
        }
    }

    /// `rdbSaveRawString`: integer encoding for short integers, LZF for longer strings it
    /// shrinks by 4 bytes or more, verbatim otherwise.
    fn raw_string(&mut self, s: &[u8]) {
        if s.len() <= 11
            && let Some(v) = parse_i64(s)
        {
            if let Ok(v) = i8::try_from(v) {
                self.out.extend([0xc0, v as u8]);
                return;
            } else if let Ok(v) = i16::try_from(v) {
                self.out.push(0xc1);
                self.out.extend(v.to_le_bytes());
                return;
            } else if let Ok(v) = i32::try_from(v) {
                self.out.push(0xc2);
                self.out.extend(v.to_le_bytes());
                return;
            }
        }
        if s.len() > 20 {
            let mut scratch = std::mem::take(&mut self.scratch);
            if lzf_compress(s, &mut scratch, s.len() - 4) {
                self.out.push(0xc3);
                self.len(scratch.len());
                self.len(s.len());
                self.out.extend_from_slice(&scratch);
                self.scratch = scratch;
                return;
            }
            self.scratch = scratch;
        }
        self.len(s.len());
        self.out.extend_from_slice(s);
    }

    fn list(&mut self, items: &[Vec<u8>]) {
        enum Node<'a> {
            Packed(Listpack),
            Plain(&'a [u8]),
        }
        let mut nodes: Vec<Node<'_>> = Vec::new();
        for item in items {
            if item.len() >= PACKED_THRESHOLD {
                nodes.push(Node::Plain(item));
                continue;
            }
            match nodes.last_mut() {
                Some(Node::Packed(lp))
                    if lp.bytes() + item.len() + SIZE_ESTIMATE_OVERHEAD
                        <= LIST_MAX_LISTPACK_BYTES =>
                {
                    lp.push(item);
                }
                _ => {
                    let mut lp = Listpack::new();
                    lp.push(item);
                    nodes.push(Node::Packed(lp));
                }
            }
        }
        self.out.push(ty::LIST_QUICKLIST_2);
        self.len(nodes.len());
        for node in nodes {
            match node {
                Node::Packed(lp) => {
                    self.len(CONTAINER_PACKED as usize);
                    self.raw_string(&lp.finish());
                }
                Node::Plain(item) => {
                    self.len(CONTAINER_PLAIN as usize);
                    self.raw_string(item);
                }
            }
        }
    }

    fn set(&mut self, members: &[Vec<u8>]) {
        if members.len() <= SET_MAX_INTSET_ENTRIES
            && let Some(mut ints) = members
                .iter()
                .map(|m| parse_i64(m))
                .collect::<Option<Vec<i64>>>()
        {
            ints.sort_unstable();
            ints.dedup();
            let width: usize = if ints.iter().all(|&v| i16::try_from(v).is_ok()) {
                2
            } else if ints.iter().all(|&v| i32::try_from(v).is_ok()) {
                4
            } else {
                8
            };
            let mut blob = Vec::with_capacity(8 + width * ints.len());
            blob.extend((width as u32).to_le_bytes());
            blob.extend((ints.len() as u32).to_le_bytes());
            for v in ints {
                blob.extend_from_slice(&v.to_le_bytes()[..width]);
            }
            self.out.push(ty::SET_INTSET);
            self.raw_string(&blob);
            return;
        }
        self.out.push(ty::SET);
        self.len(members.len());
        for m in members {
            self.raw_string(m);
        }
    }

    fn zset(&mut self, pairs: &[(Vec<u8>, f64)]) {
        let mut sorted: Vec<&(Vec<u8>, f64)> = pairs.iter().collect();
        sorted.sort_by(|a, b| cmp_member(a, b));
        if pairs.len() <= ZSET_MAX_LISTPACK_ENTRIES
            && pairs
                .iter()
                .all(|(m, _)| m.len() <= ZSET_MAX_LISTPACK_VALUE)
        {
            let mut lp = Listpack::new();
            for (member, score) in sorted {
                lp.push(member);
                lp.push(d2string(*score).as_bytes());
            }
            self.out.push(ty::ZSET_LISTPACK);
            self.raw_string(&lp.finish());
        } else {
            self.out.push(ty::ZSET_2);
            self.len(sorted.len());
            for (member, score) in sorted.into_iter().rev() {
                self.raw_string(member);
                self.out.extend(score.to_le_bytes());
            }
        }
    }

    fn hash(&mut self, pairs: &[(Vec<u8>, Vec<u8>)]) {
        if pairs.len() <= HASH_MAX_LISTPACK_ENTRIES
            && pairs.iter().all(|(f, v)| {
                f.len() <= HASH_MAX_LISTPACK_VALUE && v.len() <= HASH_MAX_LISTPACK_VALUE
            })
        {
            let mut lp = Listpack::new();
            for (field, value) in pairs {
                lp.push(field);
                lp.push(value);
            }
            self.out.push(ty::HASH_LISTPACK);
            self.raw_string(&lp.finish());
        } else {
            self.out.push(ty::HASH);
            self.len(pairs.len());
            for (field, value) in pairs {
                self.raw_string(field);
                self.raw_string(value);
            }
        }
    }

    /// A stream id as Redis writes it raw (PEL entries, radix-tree keys): big-endian ms, seq.
    fn raw_id(&mut self, id: StreamId) {
        self.out.extend(id.ms.to_be_bytes());
        self.out.extend(id.seq.to_be_bytes());
    }

    /// A stream as Redis's `rdbSaveObject` writes it: `kind` 19 (`STREAM_LISTPACKS_2`) as
    /// Redis 7.0; 15 (Redis 5 to 6.2: no first id, deletion and read counters) and 21 (Redis
    /// 7.2: consumers' active times) for tests of the reader.
    fn stream(&mut self, s: &StreamValue, kind: u8) {
        self.out.push(kind);
        self.len(s.nodes.len());
        for node in &s.nodes {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&node.master.ms.to_be_bytes());
            key[8..].copy_from_slice(&node.master.seq.to_be_bytes());
            self.raw_string(&key);
            self.raw_string(&stream_listpack(node));
        }
        self.len_u64(s.length);
        self.len_u64(s.last_id.ms);
        self.len_u64(s.last_id.seq);
        if kind != ty::STREAM_LISTPACKS {
            self.len_u64(s.first_id.ms);
            self.len_u64(s.first_id.seq);
            self.len_u64(s.max_deleted.ms);
            self.len_u64(s.max_deleted.seq);
            self.len_u64(s.entries_added);
        }
        self.len(s.groups.len());
        for g in &s.groups {
            self.raw_string(&g.name);
            self.len_u64(g.last_id.ms);
            self.len_u64(g.last_id.seq);
            if kind != ty::STREAM_LISTPACKS {
                self.len_u64(g.entries_read as u64);
            }
            self.len(g.pel.len());
            for p in &g.pel {
                self.raw_id(p.id);
                self.out.extend(p.delivery_ms.to_le_bytes());
                self.len_u64(p.delivery_count);
            }
            self.len(g.consumers.len());
            for c in &g.consumers {
                self.raw_string(&c.name);
                self.out.extend(c.seen_ms.to_le_bytes());
                if kind == ty::STREAM_LISTPACKS_3 {
                    self.out
                        .extend(c.active_ms.unwrap_or(u64::MAX).to_le_bytes());
                }
                self.len(c.pending.len());
                for &id in &c.pending {
                    self.raw_id(id);
                }
            }
        }
    }

    fn len_u64(&mut self, n: u64) {
        match usize::try_from(n) {
            Ok(n) => self.len(n),
            Err(_) => {
                self.out.push(0x81);
                self.out.extend(n.to_be_bytes());
            }
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.out.extend(RDB_VERSION.to_le_bytes());
        let crc = crc64(0, &self.out);
        self.out.extend(crc.to_le_bytes());
        self.out
    }
}

/// A node's listpack as Redis's `streamAppendItem` builds it: the master entry (live count,
/// deleted count, field count, fields, 0), then each entry (flags, ms and seq relative to the
/// master id, [field count, fields,] values, element count).
fn stream_listpack(node: &StreamNodeValue) -> Vec<u8> {
    let deleted = node.entries.iter().filter(|e| e.deleted).count();
    let mut lp = Listpack::new();
    lp.push_int((node.entries.len() - deleted) as i64);
    lp.push_int(deleted as i64);
    lp.push_int(node.master_fields.len() as i64);
    for f in &node.master_fields {
        lp.push(f);
    }
    lp.push_int(0);
    for e in &node.entries {
        let pairs = e.fields.len() / 2;
        let same = pairs == node.master_fields.len()
            && e.fields
                .iter()
                .step_by(2)
                .zip(&node.master_fields)
                .all(|(f, m)| f == m);
        let flags = i64::from(e.deleted) | if same { STREAM_ITEM_SAME_FIELDS } else { 0 };
        lp.push_int(flags);
        lp.push_int(e.id.ms.wrapping_sub(node.master.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(node.master.seq) as i64);
        let mut count = pairs + 3;
        if !same {
            lp.push_int(pairs as i64);
            count += pairs + 1;
        }
        for pair in e.fields.chunks(2) {
            if !same {
                lp.push(&pair[0]);
            }
            if let Some(v) = pair.get(1) {
                lp.push(v);
            }
        }
        lp.push_int(count as i64);
    }
    lp.finish()
}

/// Stream entry flags in a node's listpack.
const STREAM_ITEM_DELETED: i64 = 1;
const STREAM_ITEM_SAME_FIELDS: i64 = 2;

/// `DUMP`'s payload for `value`, as redis-server 7.0 writes it (encodings and thresholds in
/// the [module documentation](self)). An empty collection gives a payload that `RESTORE`
/// refuses, as Redis holds no empty collections.
#[must_use]
pub fn dump(value: &Value) -> Vec<u8> {
    let mut w = Writer::default();
    match value {
        Value::String(s) => {
            w.out.push(ty::STRING);
            w.raw_string(s);
        }
        Value::List(items) => w.list(items),
        Value::Set(members) => w.set(members),
        Value::SortedSet(pairs) => w.zset(pairs),
        Value::Hash(pairs) => w.hash(pairs),
        Value::Stream(s) => w.stream(s, ty::STREAM_LISTPACKS_2),
    }
    w.finish()
}

// ---------------------------------------------------------------------------------------------
// RESTORE.

/// `RDB_OPCODE_FUNCTION2`: a function library's code in a `FUNCTION DUMP` payload.
const OPCODE_FUNCTION2: u8 = 0xf5;

/// `FUNCTION DUMP`'s payload: each library's code after `RDB_OPCODE_FUNCTION2`, then the
/// trailer (RDB version, CRC64), as Redis 7 writes it.
#[must_use]
pub fn dump_functions<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut w = Writer::default();
    for code in codes {
        w.out.push(OPCODE_FUNCTION2);
        w.raw_string(code);
    }
    w.finish()
}

/// The libraries' codes of a `FUNCTION RESTORE` payload (any Redis 7 writes).
///
/// # Errors
/// [`RdbError::BadVersionOrChecksum`] for the trailer, [`RdbError::Malformed`] for anything
/// but function entries, [`RdbError::TooLarge`] past `limits`.
pub fn restore_functions(payload: &[u8], limits: Limits) -> Result<Vec<Vec<u8>>> {
    let (_, body) = verify_payload(payload, &limits)?;
    let mut r = Reader { data: body, pos: 0 };
    let mut budget = Budget {
        elements: limits.max_elements,
        bytes: limits.max_bytes,
    };
    let mut codes = Vec::new();
    while r.remaining() > 0 {
        if r.byte()? != OPCODE_FUNCTION2 {
            return Err(RdbError::Malformed("given type is not a function"));
        }
        codes.push(r.string(&mut budget)?.into_owned());
    }
    Ok(codes)
}

type Result<T> = std::result::Result<T, RdbError>;

const TRUNCATED: RdbError = RdbError::Malformed("truncated");

/// What is left of the [`Limits`] while one payload is decoded.
struct Budget {
    elements: usize,
    bytes: usize,
}

impl Budget {
    /// Charges one element.
    fn element(&mut self) -> Result<()> {
        self.elements = self.elements.checked_sub(1).ok_or(RdbError::TooLarge)?;
        Ok(())
    }

    /// Checks that `n` more elements would fit (before reserving room for them).
    fn fits_elements(&self, n: u64) -> Result<usize> {
        let n = usize::try_from(n).map_err(|_| RdbError::TooLarge)?;
        if n > self.elements {
            return Err(RdbError::TooLarge);
        }
        Ok(n)
    }

    /// Charges `n` bytes about to be allocated.
    fn bytes(&mut self, n: usize) -> Result<()> {
        self.bytes = self.bytes.checked_sub(n).ok_or(RdbError::TooLarge)?;
        Ok(())
    }

    /// An owned copy of `s`, charged.
    fn own(&mut self, s: Cow<'_, [u8]>) -> Result<Vec<u8>> {
        match s {
            Cow::Borrowed(b) => {
                self.bytes(b.len())?;
                Ok(b.to_vec())
            }
            // Integer-encoded and decompressed strings were charged when they were made.
            Cow::Owned(v) => Ok(v),
        }
    }

    fn int(&mut self, v: i64) -> Result<Vec<u8>> {
        let s = decimal(v);
        self.bytes(s.len())?;
        Ok(s)
    }

    fn elem(&mut self, e: Elem<'_>) -> Result<Vec<u8>> {
        match e {
            Elem::Str(s) => self.own(Cow::Borrowed(s)),
            Elem::Int(v) => self.int(v),
        }
    }
}

/// Room to reserve for `declared` items when at least `min_bytes` bytes of input each are
/// still to come: never more than the input could hold.
fn reserve(declared: usize, remaining: usize, min_bytes: usize) -> Result<usize> {
    if declared > remaining / min_bytes {
        return Err(RdbError::Malformed("length beyond the payload"));
    }
    Ok(declared)
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(TRUNCATED);
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn byte(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// `rdbLoadLenByRef`.
    fn len_or_encoding(&mut self) -> Result<Len> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3f)),
            1 => Len::Plain((u64::from(first & 0x3f) << 8) | u64::from(self.byte()?)),
            3 => Len::Encoded(first & 0x3f),
            _ if first == 0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
            _ if first == 0x81 => Len::Plain(u64::from_be_bytes(self.array()?)),
            _ => return Err(RdbError::Malformed("unknown length encoding")),
        })
    }

    fn length(&mut self) -> Result<u64> {
        match self.len_or_encoding()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(RdbError::Malformed("encoded value where a length belongs")),
        }
    }

    /// A count of items each taking at least `min_bytes` of the payload, checked against the
    /// limits and the input left.
    fn count(&mut self, budget: &Budget, min_bytes: usize) -> Result<usize> {
        let n = budget.fits_elements(self.length()?)?;
        reserve(n, self.remaining(), min_bytes)
    }

    /// `rdbGenericLoadStringObject`: raw (borrowed), integer-encoded or LZF (charged).
    fn string(&mut self, budget: &mut Budget) -> Result<Cow<'a, [u8]>> {
        match self.len_or_encoding()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| TRUNCATED)?;
                Ok(Cow::Borrowed(self.take(n)?))
            }
            Len::Encoded(0) => Ok(Cow::Owned(budget.int(i64::from(self.byte()? as i8))?)),
            Len::Encoded(1) => Ok(Cow::Owned(
                budget.int(i64::from(i16::from_le_bytes(self.array()?)))?,
            )),
            Len::Encoded(2) => Ok(Cow::Owned(
                budget.int(i64::from(i32::from_le_bytes(self.array()?)))?,
            )),
            Len::Encoded(3) => {
                let clen = self.length()?;
                let len = self.length()?;
                let clen = usize::try_from(clen).map_err(|_| TRUNCATED)?;
                if clen > self.remaining() {
                    return Err(TRUNCATED);
                }
                let len = usize::try_from(len).map_err(|_| RdbError::TooLarge)?;
                // A back-reference of 3 bytes expands to at most 264: nothing longer than
                // 88 times the input can come out of it.
                if len > clen.saturating_mul(88) {
                    return Err(RdbError::Malformed("invalid LZF compressed string"));
                }
                budget.bytes(len)?;
                let data = self.take(clen)?;
                lzf::decompress(data, len)
                    .map(Cow::Owned)
                    .ok_or(RdbError::Malformed("invalid LZF compressed string"))
            }
            Len::Encoded(_) => Err(RdbError::Malformed("unknown string encoding")),
        }
    }

    /// `rdbLoadDoubleValue` (sorted sets of RDB type 3).
    fn text_double(&mut self) -> Result<f64> {
        match self.byte()? {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            n => parse_score(self.take(usize::from(n))?),
        }
    }
}

/// A listpack or ziplist element.
#[derive(Clone, Copy)]
enum Elem<'b> {
    Str(&'b [u8]),
    Int(i64),
}

/// A score stored as text in a listpack or ziplist (`zzlStrtod`), or a legacy text double.
fn parse_score(text: &[u8]) -> Result<f64> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or(RdbError::Malformed("invalid score"))
}

fn elem_score(e: Elem<'_>) -> Result<f64> {
    match e {
        Elem::Int(v) => Ok(v as f64),
        Elem::Str(s) => parse_score(s),
    }
}

/// Something that yields listpack or ziplist elements, validating as it goes.
trait Elems<'b> {
    fn next_elem(&mut self) -> Result<Option<Elem<'b>>>;
}

/// A listpack, validated entry by entry (header, encodings, back-lengths, terminator, count).
struct ListpackReader<'b> {
    lp: &'b [u8],
    pos: usize,
    declared: u16,
    seen: usize,
}

impl<'b> ListpackReader<'b> {
    fn new(lp: &'b [u8]) -> Result<Self> {
        const BAD: RdbError = RdbError::Malformed("listpack integrity check failed");
        if lp.len() < 7 || lp[lp.len() - 1] != 0xff {
            return Err(BAD);
        }
        let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]);
        if usize::try_from(total).ok() != Some(lp.len()) {
            return Err(BAD);
        }
        Ok(Self {
            lp,
            pos: 6,
            declared: u16::from_le_bytes([lp[4], lp[5]]),
            seen: 0,
        })
    }
}

impl<'b> Elems<'b> for ListpackReader<'b> {
    fn next_elem(&mut self) -> Result<Option<Elem<'b>>> {
        const BAD: RdbError = RdbError::Malformed("listpack integrity check failed");
        let lp = self.lp;
        let end = lp.len() - 1; // the terminator
        let p = self.pos;
        let b = *lp.get(p).ok_or(BAD)?;
        if b == 0xff {
            if p != end || (self.declared != u16::MAX && usize::from(self.declared) != self.seen) {
                return Err(BAD);
            }
            return Ok(None);
        }
        let at = |i: usize| -> Result<u8> { if p + i < end { Ok(lp[p + i]) } else { Err(BAD) } };
        let le = |n: usize| -> Result<u64> {
            let mut v = 0u64;
            for i in 0..n {
                v |= u64::from(at(1 + i)?) << (8 * i);
            }
            Ok(v)
        };
        let sign = |v: u64, bits: u32| -> i64 {
            if v >= 1 << (bits - 1) {
                (v as i64) - (1i64 << bits)
            } else {
                v as i64
            }
        };
        let (elem_header, data_len, int): (usize, usize, Option<i64>) = if b & 0x80 == 0 {
            (1, 0, Some(i64::from(b & 0x7f)))
        } else if b & 0xc0 == 0x80 {
            (1, usize::from(b & 0x3f), None)
        } else if b & 0xe0 == 0xc0 {
            let v = (u64::from(b & 0x1f) << 8) | u64::from(at(1)?);
            (2, 0, Some(sign(v, 13)))
        } else if b & 0xf0 == 0xe0 {
            (2, (usize::from(b & 0x0f) << 8) | usize::from(at(1)?), None)
        } else {
            match b {
                0xf0 => (5, usize::try_from(le(4)?).map_err(|_| BAD)?, None),
                0xf1 => (3, 0, Some(sign(le(2)?, 16))),
                0xf2 => (4, 0, Some(sign(le(3)?, 24))),
                0xf3 => (5, 0, Some(sign(le(4)?, 32))),
                0xf4 => (9, 0, Some(le(8)? as i64)),
                _ => return Err(BAD),
            }
        };
        let enclen = elem_header.checked_add(data_len).ok_or(BAD)?;
        let mut backlen = [0u8; 5];
        let n = encode_backlen(enclen, &mut backlen);
        let next = p
            .checked_add(enclen)
            .and_then(|x| x.checked_add(n))
            .filter(|&x| x <= end)
            .ok_or(BAD)?;
        if lp[p + enclen..next] != backlen[..n] {
            return Err(BAD);
        }
        self.pos = next;
        self.seen += 1;
        Ok(Some(match int {
            Some(v) => Elem::Int(v),
            None => Elem::Str(&lp[p + elem_header..p + enclen]),
        }))
    }
}

/// A ziplist, validated entry by entry (header, previous-entry lengths, encodings, tail
/// offset, terminator, count).
struct ZiplistReader<'b> {
    zl: &'b [u8],
    pos: usize,
    prev_len: usize,
    last: usize,
    declared: u16,
    seen: usize,
}

impl<'b> ZiplistReader<'b> {
    fn new(zl: &'b [u8]) -> Result<Self> {
        const BAD: RdbError = RdbError::Malformed("ziplist integrity check failed");
        if zl.len() < 11 || zl[zl.len() - 1] != 0xff {
            return Err(BAD);
        }
        let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]);
        if usize::try_from(total).ok() != Some(zl.len()) {
            return Err(BAD);
        }
        Ok(Self {
            zl,
            pos: 10,
            prev_len: 0,
            last: 10,
            declared: u16::from_le_bytes([zl[8], zl[9]]),
            seen: 0,
        })
    }
}

impl<'b> Elems<'b> for ZiplistReader<'b> {
    fn next_elem(&mut self) -> Result<Option<Elem<'b>>> {
        const BAD: RdbError = RdbError::Malformed("ziplist integrity check failed");
        let zl = self.zl;
        let end = zl.len() - 1;
        let p = self.pos;
        let first = *zl.get(p).ok_or(BAD)?;
        if first == 0xff {
            let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]);
            if p != end
                || usize::try_from(tail).ok() != Some(self.last)
                || (self.declared != u16::MAX && usize::from(self.declared) != self.seen)
            {
                return Err(BAD);
            }
            return Ok(None);
        }
        let at = |i: usize| -> Result<u8> { if p + i < end { Ok(zl[p + i]) } else { Err(BAD) } };
        let (prev_len, prev_size) = if first < 254 {
            (usize::from(first), 1)
        } else {
            let v = u32::from_le_bytes([at(1)?, at(2)?, at(3)?, at(4)?]);
            (usize::try_from(v).map_err(|_| BAD)?, 5)
        };
        if prev_len != self.prev_len {
            return Err(BAD);
        }
        let e = at(prev_size)?;
        let le = |n: usize| -> Result<u64> {
            let mut v = 0u64;
            for i in 0..n {
                v |= u64::from(at(prev_size + 1 + i)?) << (8 * i);
            }
            Ok(v)
        };
        let (enc_size, data_len, int): (usize, usize, Option<i64>) = match e >> 6 {
            0 => (1, usize::from(e & 0x3f), None),
            1 => (
                2,
                (usize::from(e & 0x3f) << 8) | usize::from(at(prev_size + 1)?),
                None,
            ),
            2 => {
                let b = [
                    at(prev_size + 1)?,
                    at(prev_size + 2)?,
                    at(prev_size + 3)?,
                    at(prev_size + 4)?,
                ];
                (
                    5,
                    usize::try_from(u32::from_be_bytes(b)).map_err(|_| BAD)?,
                    None,
                )
            }
            _ => match e {
                0xc0 => (1, 2, Some(i64::from(le(2)? as u16 as i16))),
                0xd0 => (1, 4, Some(i64::from(le(4)? as u32 as i32))),
                0xe0 => (1, 8, Some(le(8)? as i64)),
                0xf0 => {
                    let v = le(3)?;
                    let v = if v >= 1 << 23 {
                        v as i64 - (1 << 24)
                    } else {
                        v as i64
                    };
                    (1, 3, Some(v))
                }
                0xfe => (1, 1, Some(i64::from(le(1)? as u8 as i8))),
                0xf1..=0xfd => (1, 0, Some(i64::from(e & 0x0f) - 1)),
                _ => return Err(BAD),
            },
        };
        let entry_len = prev_size
            .checked_add(enc_size)
            .and_then(|x| x.checked_add(data_len))
            .ok_or(BAD)?;
        let next = p.checked_add(entry_len).filter(|&x| x <= end).ok_or(BAD)?;
        self.last = p;
        self.prev_len = entry_len;
        self.pos = next;
        self.seen += 1;
        Ok(Some(match int {
            Some(v) => Elem::Int(v),
            None => Elem::Str(&zl[p + prev_size + enc_size..next]),
        }))
    }
}

/// Every element of `src` into `out`, one element each.
fn collect_items<'b>(
    src: &mut impl Elems<'b>,
    budget: &mut Budget,
    out: &mut Vec<Vec<u8>>,
) -> Result<()> {
    while let Some(e) = src.next_elem()? {
        budget.element()?;
        out.push(budget.elem(e)?);
    }
    Ok(())
}

/// Elements of `src` taken two at a time, one element per pair.
fn collect_pairs<'b>(
    src: &mut impl Elems<'b>,
    budget: &mut Budget,
    mut each: impl FnMut(&mut Budget, Elem<'b>, Elem<'b>) -> Result<()>,
) -> Result<()> {
    while let Some(first) = src.next_elem()? {
        let second = src.next_elem()?.ok_or(RdbError::Malformed(
            "odd number of elements in a pair encoding",
        ))?;
        budget.element()?;
        each(budget, first, second)?;
    }
    Ok(())
}

fn intset(blob: &[u8], budget: &mut Budget) -> Result<Vec<Vec<u8>>> {
    const BAD: RdbError = RdbError::Malformed("intset integrity check failed");
    if blob.len() < 8 {
        return Err(BAD);
    }
    let width = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]);
    let count = u32::from_le_bytes([blob[4], blob[5], blob[6], blob[7]]);
    let width = match width {
        2 | 4 | 8 => width as usize,
        _ => return Err(BAD),
    };
    let count = usize::try_from(count).map_err(|_| BAD)?;
    if count == 0 || count.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(blob.len()) {
        return Err(BAD);
    }
    budget.fits_elements(count as u64)?;
    let mut out = Vec::with_capacity(count);
    let mut prev: Option<i64> = None;
    for chunk in blob[8..].chunks_exact(width) {
        let v = match *chunk {
            [a, b] => i64::from(i16::from_le_bytes([a, b])),
            [a, b, c, d] => i64::from(i32::from_le_bytes([a, b, c, d])),
            [a, b, c, d, e, f, g, h] => i64::from_le_bytes([a, b, c, d, e, f, g, h]),
            _ => return Err(BAD),
        };
        if prev.is_some_and(|p| p >= v) {
            return Err(BAD);
        }
        prev = Some(v);
        budget.element()?;
        out.push(budget.int(v)?);
    }
    Ok(out)
}

/// A zipmap (hashes of RDB type 9, Redis 2.4 and older).
fn zipmap(zm: &[u8], budget: &mut Budget) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    const BAD: RdbError = RdbError::Malformed("zipmap integrity check failed");
    if zm.len() < 2 || zm[zm.len() - 1] != 0xff {
        return Err(BAD);
    }
    let end = zm.len() - 1;
    let mut r = Reader {
        data: &zm[..end],
        pos: 1,
    };
    let zm_len = |r: &mut Reader<'_>, key: bool| -> Result<usize> {
        let b = r.byte().map_err(|_| BAD)?;
        if key && b == 0xff {
            // The end marker, before the end.
            Err(BAD)
        } else if b < 254 {
            Ok(usize::from(b))
        } else {
            let v = u32::from_le_bytes(r.array().map_err(|_| BAD)?);
            usize::try_from(v).map_err(|_| BAD)
        }
    };
    let mut out = Vec::new();
    while r.remaining() > 0 {
        let klen = zm_len(&mut r, true)?;
        let key = r.take(klen).map_err(|_| BAD)?;
        let vlen = zm_len(&mut r, false)?;
        let free = usize::from(r.byte().map_err(|_| BAD)?);
        let value = r.take(vlen).map_err(|_| BAD)?;
        r.take(free).map_err(|_| BAD)?;
        budget.element()?;
        let key = budget.own(Cow::Borrowed(key))?;
        let value = budget.own(Cow::Borrowed(value))?;
        out.push((key, value));
    }
    if out.is_empty() || (zm[0] < 254 && usize::from(zm[0]) != out.len()) {
        return Err(BAD);
    }
    Ok(out)
}

fn no_duplicates<'x>(keys: impl ExactSizeIterator<Item = &'x [u8]>) -> Result<()> {
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(keys.len());
    for k in keys {
        if !seen.insert(k) {
            return Err(RdbError::Malformed("duplicate members"));
        }
    }
    Ok(())
}

fn nonempty<T>(items: &[T]) -> Result<()> {
    if items.is_empty() {
        Err(RdbError::Malformed("empty keys are not allowed"))
    } else {
        Ok(())
    }
}

fn finish_set(members: Vec<Vec<u8>>) -> Result<Value> {
    nonempty(&members)?;
    no_duplicates(members.iter().map(Vec::as_slice))?;
    Ok(Value::Set(members))
}

fn finish_hash(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Value> {
    nonempty(&pairs)?;
    no_duplicates(pairs.iter().map(|(f, _)| f.as_slice()))?;
    Ok(Value::Hash(pairs))
}

fn finish_zset(mut pairs: Vec<(Vec<u8>, f64)>) -> Result<Value> {
    nonempty(&pairs)?;
    if pairs.iter().any(|(_, s)| s.is_nan()) {
        return Err(RdbError::Malformed("sorted set with a NaN score"));
    }
    no_duplicates(pairs.iter().map(|(m, _)| m.as_slice()))?;
    pairs.sort_by(cmp_member);
    Ok(Value::SortedSet(pairs))
}

fn finish_list(items: Vec<Vec<u8>>) -> Result<Value> {
    nonempty(&items)?;
    Ok(Value::List(items))
}

fn pairs_of<'b>(src: &mut impl Elems<'b>, budget: &mut Budget) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut pairs = Vec::new();
    collect_pairs(src, budget, |budget, f, v| {
        let f = budget.elem(f)?;
        let v = budget.elem(v)?;
        pairs.push((f, v));
        Ok(())
    })?;
    Ok(pairs)
}

fn scored_of<'b>(src: &mut impl Elems<'b>, budget: &mut Budget) -> Result<Vec<(Vec<u8>, f64)>> {
    let mut pairs = Vec::new();
    collect_pairs(src, budget, |budget, m, s| {
        let score = elem_score(s)?;
        let m = budget.elem(m)?;
        pairs.push((m, score));
        Ok(())
    })?;
    Ok(pairs)
}

fn decode_object(kind: u8, r: &mut Reader<'_>, budget: &mut Budget) -> Result<Value> {
    match kind {
        ty::STRING => {
            budget.element()?;
            let s = r.string(budget)?;
            Ok(Value::String(budget.own(s)?))
        }
        ty::LIST => {
            let n = r.count(budget, 1)?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                budget.element()?;
                let s = r.string(budget)?;
                items.push(budget.own(s)?);
            }
            finish_list(items)
        }
        ty::SET => {
            let n = r.count(budget, 1)?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                budget.element()?;
                let s = r.string(budget)?;
                members.push(budget.own(s)?);
            }
            finish_set(members)
        }
        ty::ZSET | ty::ZSET_2 => {
            let n = r.count(budget, 2)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                budget.element()?;
                let m = r.string(budget)?;
                let m = budget.own(m)?;
                let score = if kind == ty::ZSET_2 {
                    f64::from_le_bytes(r.array()?)
                } else {
                    r.text_double()?
                };
                pairs.push((m, score));
            }
            finish_zset(pairs)
        }
        ty::HASH => {
            let n = r.count(budget, 2)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                budget.element()?;
                let f = r.string(budget)?;
                let f = budget.own(f)?;
                let v = r.string(budget)?;
                let v = budget.own(v)?;
                pairs.push((f, v));
            }
            finish_hash(pairs)
        }
        ty::LIST_QUICKLIST | ty::LIST_QUICKLIST_2 => {
            let nodes = r.count(budget, 1)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                let container = if kind == ty::LIST_QUICKLIST_2 {
                    r.length()?
                } else {
                    CONTAINER_PACKED
                };
                let blob = r.string(budget)?;
                if blob.is_empty() {
                    return Err(RdbError::Malformed("empty quicklist node"));
                }
                match container {
                    CONTAINER_PLAIN => {
                        budget.element()?;
                        items.push(budget.own(blob)?);
                    }
                    CONTAINER_PACKED if kind == ty::LIST_QUICKLIST_2 => {
                        collect_items(&mut ListpackReader::new(&blob)?, budget, &mut items)?;
                    }
                    CONTAINER_PACKED => {
                        collect_items(&mut ZiplistReader::new(&blob)?, budget, &mut items)?;
                    }
                    _ => return Err(RdbError::Malformed("quicklist integrity check failed")),
                }
            }
            finish_list(items)
        }
        ty::HASH_ZIPMAP
        | ty::LIST_ZIPLIST
        | ty::SET_INTSET
        | ty::ZSET_ZIPLIST
        | ty::HASH_ZIPLIST
        | ty::HASH_LISTPACK
        | ty::ZSET_LISTPACK
        | ty::SET_LISTPACK => {
            let blob = r.string(budget)?;
            let blob: &[u8] = &blob;
            match kind {
                ty::HASH_ZIPMAP => finish_hash(zipmap(blob, budget)?),
                ty::LIST_ZIPLIST => {
                    let mut items = Vec::new();
                    collect_items(&mut ZiplistReader::new(blob)?, budget, &mut items)?;
                    finish_list(items)
                }
                ty::SET_INTSET => finish_set(intset(blob, budget)?),
                ty::ZSET_ZIPLIST => finish_zset(scored_of(&mut ZiplistReader::new(blob)?, budget)?),
                ty::HASH_ZIPLIST => finish_hash(pairs_of(&mut ZiplistReader::new(blob)?, budget)?),
                ty::HASH_LISTPACK => {
                    finish_hash(pairs_of(&mut ListpackReader::new(blob)?, budget)?)
                }
                ty::ZSET_LISTPACK => {
                    finish_zset(scored_of(&mut ListpackReader::new(blob)?, budget)?)
                }
                _ => {
                    let mut members = Vec::new();
                    collect_items(&mut ListpackReader::new(blob)?, budget, &mut members)?;
                    finish_set(members)
                }
            }
        }
        ty::STREAM_LISTPACKS | ty::STREAM_LISTPACKS_2 | ty::STREAM_LISTPACKS_3 => {
            Ok(Value::Stream(Box::new(decode_stream(kind, r, budget)?)))
        }
        ty::MODULE_PRE_GA | ty::MODULE_2 => Err(RdbError::Unsupported("module value")),
        22.. => Err(RdbError::Unsupported("object type of a newer RDB version")),
        _ => Err(RdbError::Malformed("unknown object type")),
    }
}

const BAD_STREAM: RdbError = RdbError::Malformed("stream integrity check failed");

impl Reader<'_> {
    /// A stream id written raw: big-endian ms, seq (PEL entries).
    fn raw_id(&mut self) -> Result<StreamId> {
        let ms = u64::from_be_bytes(self.array()?);
        let seq = u64::from_be_bytes(self.array()?);
        Ok(StreamId::new(ms, seq))
    }

    /// A stream id as two lengths (last id, first id, ...).
    fn len_id(&mut self) -> Result<StreamId> {
        let ms = self.length()?;
        let seq = self.length()?;
        Ok(StreamId::new(ms, seq))
    }

    /// `rdbLoadMillisecondTime`: 8 bytes, little-endian.
    fn ms_time(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
}

/// An integer element of a stream listpack (`lpGetIntegerIfValid`: a string spelling one
/// counts).
fn stream_int(e: Option<Elem<'_>>) -> Result<i64> {
    match e.ok_or(BAD_STREAM)? {
        Elem::Int(v) => Ok(v),
        Elem::Str(s) => parse_i64(s).ok_or(BAD_STREAM),
    }
}

/// A count in a stream listpack: at least 0, and no more than the listpack could hold (each
/// element takes 2 bytes or more).
fn stream_count(e: Option<Elem<'_>>, lp: &[u8]) -> Result<usize> {
    let v = stream_int(e)?;
    usize::try_from(v)
        .ok()
        .filter(|&n| n <= lp.len() / 2)
        .ok_or(BAD_STREAM)
}

/// One node's listpack (Redis's `streamValidateListpackIntegrity`, deep): the master entry,
/// then every entry, each one's element count checked, nothing after the last.
fn stream_node(master: StreamId, lp: &[u8], budget: &mut Budget) -> Result<StreamNodeValue> {
    let mut rd = ListpackReader::new(lp)?;
    let live = stream_count(rd.next_elem()?, lp)?;
    let deleted = stream_count(rd.next_elem()?, lp)?;
    let master_count = stream_count(rd.next_elem()?, lp)?;
    let mut master_fields = Vec::with_capacity(master_count);
    for _ in 0..master_count {
        master_fields.push(budget.elem(rd.next_elem()?.ok_or(BAD_STREAM)?)?);
    }
    if stream_int(rd.next_elem()?)? != 0 {
        return Err(BAD_STREAM);
    }
    let total = live + deleted;
    let mut entries: Vec<StreamEntryValue> = Vec::new();
    let mut seen_deleted = 0usize;
    for _ in 0..total {
        let flags = stream_int(rd.next_elem()?)?;
        if !(0..=STREAM_ITEM_DELETED | STREAM_ITEM_SAME_FIELDS).contains(&flags) {
            return Err(BAD_STREAM);
        }
        let ms = stream_int(rd.next_elem()?)?;
        let seq = stream_int(rd.next_elem()?)?;
        let id = StreamId::new(
            master.ms.wrapping_add(ms as u64),
            master.seq.wrapping_add(seq as u64),
        );
        if id < master || entries.last().is_some_and(|e| e.id >= id) {
            return Err(BAD_STREAM);
        }
        let same = flags & STREAM_ITEM_SAME_FIELDS != 0;
        let pairs = if same {
            master_count
        } else {
            stream_count(rd.next_elem()?, lp)?
        };
        budget.element()?;
        let mut fields = Vec::with_capacity(2 * pairs);
        for i in 0..pairs {
            if same && let Some(f) = master_fields.get(i) {
                budget.bytes(f.len())?;
                fields.push(f.clone());
            } else {
                fields.push(budget.elem(rd.next_elem()?.ok_or(BAD_STREAM)?)?);
            }
            fields.push(budget.elem(rd.next_elem()?.ok_or(BAD_STREAM)?)?);
        }
        let expected = pairs + 3 + if same { 0 } else { pairs + 1 };
        if usize::try_from(stream_int(rd.next_elem()?)?).ok() != Some(expected) {
            return Err(BAD_STREAM);
        }
        let is_deleted = flags & STREAM_ITEM_DELETED != 0;
        seen_deleted += usize::from(is_deleted);
        entries.push(StreamEntryValue {
            id,
            deleted: is_deleted,
            fields,
        });
    }
    if rd.next_elem()?.is_some() || seen_deleted != deleted {
        return Err(BAD_STREAM);
    }
    if entries.is_empty() {
        return Err(RdbError::Malformed("empty listpack inside stream"));
    }
    Ok(StreamNodeValue {
        master,
        master_fields,
        entries,
    })
}

/// Redis's `streamEstimateDistanceFromFirstEverEntry` for a type-15 payload (no deletions
/// known, every entry ever added still there): a group's read counter, -1 when unknown.
fn estimate_entries_read(s: &StreamValue, id: StreamId) -> i64 {
    let added = s.entries_added as i64;
    if s.entries_added == 0 {
        return 0;
    }
    if (s.length == 0 && id <= s.last_id) || id == s.last_id {
        return added;
    }
    if id > s.last_id {
        return -1;
    }
    if id < s.first_id {
        return added - s.length as i64;
    }
    if id == s.first_id {
        return added - s.length as i64 + 1;
    }
    -1
}

/// A stream of RDB type 15 (Redis 5 to 6.2), 19 (7.0) or 21 (7.2), validated as Redis's deep
/// sanitization does, and further: ids ascending across nodes, the length equal to the live
/// entries, no entry above the last id, each pending entry owned by exactly one consumer.
fn decode_stream(kind: u8, r: &mut Reader<'_>, budget: &mut Budget) -> Result<StreamValue> {
    let node_count = r.count(budget, 2)?;
    let mut s = StreamValue {
        nodes: Vec::with_capacity(node_count),
        ..StreamValue::default()
    };
    let mut live = 0u64;
    for _ in 0..node_count {
        let key = r.string(budget)?;
        let key: &[u8] = &key;
        let Ok(key) = <[u8; 16]>::try_from(key) else {
            return Err(RdbError::Malformed(
                "stream node key entry is not the size of a stream ID",
            ));
        };
        let master = Reader { data: &key, pos: 0 }.raw_id()?;
        if s.nodes.last().is_some_and(|n: &StreamNodeValue| {
            n.master >= master || n.entries.last().is_some_and(|e| e.id >= master)
        }) {
            return Err(BAD_STREAM);
        }
        let lp = r.string(budget)?;
        let node = stream_node(master, &lp, budget)?;
        live += node.entries.iter().filter(|e| !e.deleted).count() as u64;
        s.nodes.push(node);
    }
    s.length = r.length()?;
    s.last_id = r.len_id()?;
    let first_live = s
        .nodes
        .iter()
        .flat_map(|n| &n.entries)
        .find(|e| !e.deleted)
        .map(|e| e.id);
    if kind == ty::STREAM_LISTPACKS {
        s.first_id = first_live.unwrap_or_default();
        s.entries_added = s.length;
    } else {
        s.first_id = r.len_id()?;
        s.max_deleted = r.len_id()?;
        s.entries_added = r.length()?;
    }
    let last_entry = s.nodes.last().and_then(|n| n.entries.last()).map(|e| e.id);
    if s.length != live || last_entry.is_some_and(|id| id > s.last_id) {
        return Err(BAD_STREAM);
    }
    let group_count = r.count(budget, 4)?;
    s.groups = Vec::with_capacity(group_count);
    for _ in 0..group_count {
        budget.element()?;
        let name = r.string(budget)?;
        let name = budget.own(name)?;
        let last_id = r.len_id()?;
        let entries_read = if kind == ty::STREAM_LISTPACKS {
            estimate_entries_read(&s, last_id)
        } else {
            r.length()? as i64
        };
        let pel_count = r.count(budget, 17)?;
        let mut pel: Vec<StreamPendingValue> = Vec::with_capacity(pel_count);
        for _ in 0..pel_count {
            budget.element()?;
            let id = r.raw_id()?;
            let delivery_ms = r.ms_time()?;
            let delivery_count = r.length()?;
            pel.push(StreamPendingValue {
                id,
                delivery_ms,
                delivery_count,
            });
        }
        pel.sort_unstable_by_key(|p| p.id);
        if pel.windows(2).any(|w| w[0].id == w[1].id) {
            return Err(RdbError::Malformed("duplicated global PEL entry"));
        }
        let mut owned = vec![false; pel.len()];
        let consumer_count = r.count(budget, 10)?;
        let mut consumers: Vec<StreamConsumerValue> = Vec::with_capacity(consumer_count);
        for _ in 0..consumer_count {
            budget.element()?;
            let cname = r.string(budget)?;
            let cname = budget.own(cname)?;
            let seen_ms = r.ms_time()?;
            let active_ms = if kind == ty::STREAM_LISTPACKS_3 {
                Some(r.ms_time()?).filter(|&t| t != u64::MAX)
            } else {
                Some(seen_ms)
            };
            let n = r.count(budget, 16)?;
            let mut pending = Vec::with_capacity(n);
            for _ in 0..n {
                let id = r.raw_id()?;
                let i = pel
                    .binary_search_by_key(&id, |p| p.id)
                    .map_err(|_| RdbError::Malformed("consumer entry not found in group PEL"))?;
                if std::mem::replace(&mut owned[i], true) {
                    return Err(RdbError::Malformed("duplicated consumer PEL entry"));
                }
                pending.push(id);
            }
            pending.sort_unstable();
            consumers.push(StreamConsumerValue {
                name: cname,
                seen_ms,
                active_ms,
                pending,
            });
        }
        if owned.contains(&false) {
            return Err(RdbError::Malformed(
                "stream group PEL entry without consumer",
            ));
        }
        consumers.sort_by(|a, b| a.name.cmp(&b.name));
        if consumers.windows(2).any(|w| w[0].name == w[1].name) {
            return Err(RdbError::Malformed("duplicate stream consumer"));
        }
        s.groups.push(StreamGroupValue {
            name,
            last_id,
            entries_read,
            pel,
            consumers,
        });
    }
    s.groups.sort_by(|a, b| a.name.cmp(&b.name));
    if s.groups.windows(2).any(|w| w[0].name == w[1].name) {
        return Err(RdbError::Malformed("duplicated consumer group name"));
    }
    Ok(s)
}

/// Checks a payload's trailer (length, RDB version, CRC64) and returns the RDB version and
/// the encoded value before the trailer.
///
/// # Errors
/// [`RdbError::BadVersionOrChecksum`], as Redis's `verifyDumpPayload` (the version check
/// relaxed by [`Limits::relaxed_version_check`]).
pub fn verify_payload<'a>(
    payload: &'a [u8],
    limits: &Limits,
) -> std::result::Result<(u16, &'a [u8]), RdbError> {
    let len = payload.len();
    if len < 10 {
        return Err(RdbError::BadVersionOrChecksum);
    }
    let version = u16::from_le_bytes([payload[len - 10], payload[len - 9]]);
    if version > RDB_VERSION_MAX && !limits.relaxed_version_check {
        return Err(RdbError::BadVersionOrChecksum);
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&payload[len - 8..]);
    if crc64(0, &payload[..len - 8]) != u64::from_le_bytes(stored) {
        return Err(RdbError::BadVersionOrChecksum);
    }
    Ok((version, &payload[..len - 10]))
}

/// Decodes a `RESTORE` payload: verifies its trailer, then decodes the value in any encoding
/// Redis 2.4 to 7.2 writes (see the [module documentation](self)).
///
/// Stricter than Redis where no Redis writes what is refused: bytes left between the value
/// and the trailer (Redis ignores them), and streams whose parts disagree (a length other than
/// the live entries, an entry above the last id, ids out of order, a pending entry owned by
/// two consumers). Validation is Redis's deep sanitization: duplicates, empty collections,
/// NaN scores and inconsistent blobs are all refused.
///
/// # Errors
/// [`RdbError::BadVersionOrChecksum`] for the trailer, [`RdbError::Malformed`] for a damaged
/// value, [`RdbError::Unsupported`] for module values, [`RdbError::TooLarge`] past
/// `limits`.
pub fn restore(payload: &[u8], limits: Limits) -> std::result::Result<Value, RdbError> {
    let (_, body) = verify_payload(payload, &limits)?;
    let mut r = Reader { data: body, pos: 0 };
    let mut budget = Budget {
        elements: limits.max_elements,
        bytes: limits.max_bytes,
    };
    let kind = r.byte()?;
    let value = decode_object(kind, &mut r, &mut budget)?;
    if r.remaining() != 0 {
        return Err(RdbError::Malformed("bytes after the value"));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_matches_redis_check_value() {
        // Redis's crc64.c self-test: crc64(0, "123456789") == 0xe9c6d914c4b8d9ca.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let split = crc64(crc64(0, &data[..333]), &data[333..]);
        assert_eq!(split, crc64(0, &data));
        // Bytewise reference.
        let mut crc = 0u64;
        for &b in &data {
            crc ^= u64::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ CRC64_POLY
                } else {
                    crc >> 1
                };
            }
        }
        assert_eq!(crc, crc64(0, &data));
    }

    #[test]
    fn parse_i64_is_strict() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"007",
            b"+1",
            b" 1",
            b"1 ",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"1.0",
            b"18446744073709551616",
        ] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn d2string_matches_printf() {
        let cases: [(f64, &str); 14] = [
            (1.0, "1"),
            (-3.0, "-3"),
            (2.5, "2.5"),
            (1.1, "1.1000000000000001"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (3e-7, "2.9999999999999999e-07"),
            (2.5e-5, "2.5000000000000001e-05"),
            (4_503_599_627_370_496.0, "4503599627370496"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (5e-324, "4.9406564584124654e-324"),
        ];
        for (v, want) in cases {
            assert_eq!(d2string(v), want, "{v:e}");
        }
    }

    fn lzf_round_trip(data: &[u8]) {
        let mut out = Vec::new();
        if lzf_compress(data, &mut out, data.len() + 64) {
            assert_eq!(lzf::decompress(&out, data.len()).as_deref(), Some(data));
        } else {
            assert!(data.is_empty());
        }
    }

    #[test]
    fn lzf_round_trips() {
        lzf_round_trip(b"");
        lzf_round_trip(b"a");
        lzf_round_trip(b"ab");
        lzf_round_trip(&[b'a'; 1000]);
        let text = b"The quick brown fox jumps over the lazy dog. ".repeat(100);
        lzf_round_trip(&text);
        let mut x = 12345u32;
        let noise: Vec<u8> = (0..5000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8 & 0x0f
            })
            .collect();
        lzf_round_trip(&noise);
    }

    #[test]
    fn lzf_decompress_refuses_bad_input() {
        assert_eq!(lzf::decompress(&[0x01, b'a'], 2), None); // literal past the input
        assert_eq!(lzf::decompress(&[0x20, 0x00], 3), None); // reference before the start
        assert_eq!(lzf::decompress(&[0x00, b'a'], 2), None); // too short
        assert_eq!(
            lzf::decompress(&[0x00, b'a', 0x20, 0x00], 4).as_deref(),
            Some(&b"aaaa"[..])
        );
    }

    fn sample_stream() -> StreamValue {
        let id = StreamId::new;
        let entry = |ms, seq, deleted, fields: &[&str]| StreamEntryValue {
            id: id(ms, seq),
            deleted,
            fields: fields.iter().map(|f| f.as_bytes().to_vec()).collect(),
        };
        StreamValue {
            nodes: vec![StreamNodeValue {
                master: id(5, 0),
                master_fields: vec![b"a".to_vec()],
                entries: vec![
                    entry(5, 0, true, &["a", "1"]),
                    entry(5, 1, false, &["a", "2"]),
                    entry(7, 0, false, &["b", "x", "c", "-100000"]),
                ],
            }],
            length: 2,
            last_id: id(7, 0),
            first_id: id(5, 1),
            max_deleted: id(5, 0),
            entries_added: 3,
            groups: vec![StreamGroupValue {
                name: b"g".to_vec(),
                last_id: id(5, 1),
                entries_read: 2,
                pel: vec![StreamPendingValue {
                    id: id(5, 1),
                    delivery_ms: 1_700_000_000_000,
                    delivery_count: 3,
                }],
                consumers: vec![
                    StreamConsumerValue {
                        name: b"alice".to_vec(),
                        seen_ms: 1_700_000_000_500,
                        active_ms: Some(1_700_000_000_400),
                        pending: vec![id(5, 1)],
                    },
                    StreamConsumerValue {
                        name: b"bob".to_vec(),
                        seen_ms: 1_700_000_000_600,
                        active_ms: None,
                        pending: vec![],
                    },
                ],
            }],
        }
    }

    fn dump_as(s: &StreamValue, kind: u8) -> Vec<u8> {
        let mut w = Writer::default();
        w.stream(s, kind);
        w.finish()
    }

    #[test]
    fn streams_of_types_15_19_and_21_restore() {
        let s = sample_stream();
        let decoded = |kind| match restore(&dump_as(&s, kind), Limits::default()) {
            Ok(Value::Stream(v)) => *v,
            other => panic!("type {kind}: {other:?}"),
        };
        // Type 19 (Redis 7.0): everything but the active times, which take the seen time.
        let mut want = s.clone();
        for c in &mut want.groups[0].consumers {
            c.active_ms = Some(c.seen_ms);
        }
        assert_eq!(decoded(ty::STREAM_LISTPACKS_2), want);
        // Type 21 (Redis 7.2): the active times too, -1 as never.
        assert_eq!(decoded(ty::STREAM_LISTPACKS_3), s);
        // Type 15 (Redis 5 to 6.2): no deletions known, entries added = length, the read
        // counter estimated (the group sits on the first entry: 3 - 2 + 1).
        let mut want15 = want.clone();
        want15.max_deleted = StreamId::MIN;
        want15.entries_added = 2;
        want15.groups[0].entries_read = 1;
        assert_eq!(decoded(ty::STREAM_LISTPACKS), want15);
        // `dump` writes type 19 whatever it read.
        let v = Value::Stream(Box::new(decoded(ty::STREAM_LISTPACKS_3)));
        assert_eq!(dump(&v)[0], ty::STREAM_LISTPACKS_2);
        assert_eq!(dump(&v), dump_as(&s, ty::STREAM_LISTPACKS_2));
    }

    #[test]
    fn stream_read_counters_are_estimated_as_redis_does() {
        let mut s = sample_stream();
        s.max_deleted = StreamId::MIN;
        s.entries_added = 2;
        let at = |ms, seq| estimate_entries_read(&s, StreamId::new(ms, seq));
        assert_eq!(at(7, 0), 2); // the last id
        assert_eq!(at(9, 0), -1); // past it
        assert_eq!(at(1, 0), 0); // before the first entry
        assert_eq!(at(5, 1), 1); // the first entry
        assert_eq!(at(6, 0), -1); // inside
    }

    proptest::proptest! {
        #[test]
        fn lzf_round_trips_random(data in proptest::collection::vec(0u8..4, 0..3000)) {
            lzf_round_trip(&data);
        }

        #[test]
        fn lzf_decompress_never_panics(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            len in 0usize..2000,
        ) {
            let _ = lzf::decompress(&data, len);
        }
    }
}
