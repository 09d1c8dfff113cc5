//! Redis objects: hashes, lists, sets, sorted sets and streams, stored beside the arena.
//!
//! An object key is an ordinary arena entry whose kind bits name the type and whose 4-byte
//! value is the object's slot in the shard's [`Objects`] table. The entry keeps what every key
//! has (its place in the index, its expiry, its eviction metadata), so `EXPIRE`, `DEL`, `TTL`,
//! eviction and the expiry sweep work on objects unchanged; the object's own memory is charged
//! to the shard's budget from the estimate each object keeps (`mem_bytes`).
//!
//! The per-type modules hold the data structure and the shard-level operations (`impl Shard`
//! blocks that go through [`crate::shard::Shard::read_object`] and
//! [`crate::shard::Shard::write_object`], which own the type check, creation, deletion of an
//! emptied object, accounting and eviction).

pub mod geo;
pub(crate) mod hash;
pub mod hll;
pub(crate) mod list;
pub(crate) mod long_double;
pub(crate) mod number;
pub(crate) mod set;
pub(crate) mod stream;
pub(crate) mod string;
pub(crate) mod zset;

use std::cell::Cell;

use crate::arena;
use crate::mutation::{Mutation, MutationSink};

pub(crate) use hash::Hash;
pub(crate) use list::List;
pub(crate) use set::Set;
pub(crate) use stream::Stream;
pub(crate) use zset::ZSet;

/// The hasher of object tables: foldhash (fast, seeded per table, the one hashbrown uses).
pub(crate) type Hasher = foldhash::fast::RandomState;
/// An insertion-indexed hash map: O(1) lookup, O(1) random access by position (random fields,
/// stable scan cursors), O(1) `swap_remove`.
pub(crate) type FastMap<K, V> = indexmap::IndexMap<K, V, Hasher>;
/// The set counterpart of [`FastMap`].
pub(crate) type FastSet<T> = indexmap::IndexSet<T, Hasher>;

/// The Redis type of a key (`TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyType {
    /// A byte string.
    String,
    /// A hash of fields to values.
    Hash,
    /// A list.
    List,
    /// A set.
    Set,
    /// A sorted set.
    ZSet,
    /// A stream.
    Stream,
}

impl KeyType {
    /// The name `TYPE` replies with.
    #[must_use]
    pub fn redis_name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Hash => "hash",
            Self::List => "list",
            Self::Set => "set",
            Self::ZSet => "zset",
            Self::Stream => "stream",
        }
    }

    /// The type a `TYPE` name (as `SCAN ... TYPE` takes it) denotes, case-insensitively.
    #[must_use]
    pub fn from_redis_name(name: &[u8]) -> Option<Self> {
        [
            Self::String,
            Self::Hash,
            Self::List,
            Self::Set,
            Self::ZSet,
            Self::Stream,
        ]
        .into_iter()
        .find(|t| t.redis_name().as_bytes().eq_ignore_ascii_case(name))
    }

    pub(crate) fn of_kind(kind: u32) -> Self {
        match kind {
            arena::KIND_HASH => Self::Hash,
            arena::KIND_LIST => Self::List,
            arena::KIND_SET => Self::Set,
            arena::KIND_ZSET => Self::ZSet,
            arena::KIND_STREAM => Self::Stream,
            _ => Self::String,
        }
    }
}

/// One Redis object.
#[derive(Debug)]
pub(crate) enum Object {
    Hash(Hash),
    List(List),
    Set(Set),
    ZSet(ZSet),
    /// Boxed: a stream's fields are several maps, the other kinds a few words.
    Stream(Box<Stream>),
}

impl Object {
    /// Estimated heap bytes (charged against the memory budget).
    pub(crate) fn mem_bytes(&self) -> usize {
        match self {
            Self::Hash(h) => h.mem_bytes(),
            Self::List(l) => l.mem_bytes(),
            Self::Set(s) => s.mem_bytes(),
            Self::ZSet(z) => z.mem_bytes(),
            Self::Stream(s) => s.mem_bytes(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Self::Hash(h) => h.is_empty(),
            Self::List(l) => l.is_empty(),
            Self::Set(s) => s.is_empty(),
            Self::ZSet(z) => z.is_empty(),
            // Redis keeps an empty stream (its last id and groups live on).
            Self::Stream(_) => false,
        }
    }

    /// Removes one field (hash) or member (set, sorted set); true when it was there. Lists
    /// have no keyed elements.
    pub(crate) fn remove_element(&mut self, element: &[u8]) -> bool {
        match self {
            Self::Hash(h) => h.remove(element),
            Self::Set(s) => s.remove(element),
            Self::ZSet(z) => z.remove(element),
            Self::List(_) | Self::Stream(_) => false,
        }
    }

    /// A digest of the contents that does not depend on the order of unordered collections.
    pub(crate) fn digest(&self) -> u64 {
        match self {
            Self::Hash(h) => h.digest(),
            Self::List(l) => l.digest(),
            Self::Set(s) => s.digest(),
            Self::ZSet(z) => z.digest(),
            Self::Stream(s) => s.digest(),
        }
    }
}

/// The shard's table of objects: slots reused through a free list.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    slots: Vec<Option<Object>>,
    free: Vec<u32>,
    /// Sum of `mem_bytes` over the objects (kept by the shard as objects change).
    pub(crate) bytes: u64,
}

impl Objects {
    pub(crate) fn insert(&mut self, object: Object) -> u32 {
        self.bytes += object.mem_bytes() as u64;
        if let Some(slot) = self.free.pop() {
            self.slots[slot as usize] = Some(object);
            slot
        } else {
            self.slots.push(Some(object));
            (self.slots.len() - 1) as u32
        }
    }

    pub(crate) fn get(&self, slot: u32) -> &Object {
        self.slots[slot as usize]
            .as_ref()
            .expect("an object entry points at a live slot")
    }

    pub(crate) fn get_mut(&mut self, slot: u32) -> &mut Object {
        self.slots[slot as usize]
            .as_mut()
            .expect("an object entry points at a live slot")
    }

    pub(crate) fn remove(&mut self, slot: u32) -> Object {
        let object = self.slots[slot as usize]
            .take()
            .expect("an object entry points at a live slot");
        self.bytes -= object.mem_bytes() as u64;
        self.free.push(slot);
        object
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }
}

/// The object slot an object entry's value holds.
#[inline]
pub(crate) fn slot_of(value: &[u8]) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&value[..4]);
    u32::from_le_bytes(word)
}

/// Receives a collection read in place, without copying it (`LRANGE`, `HGETALL`,
/// `SMEMBERS`... of millions): [`Visitor::len`] once with the number of elements (pairs for
/// `hgetall_visit`) that follow, then [`Visitor::item`] for each element (a pair as its field,
/// then its value) until one returns `false`. A server writes each straight into a reply and
/// stops when the client's output limit is reached, so one command never copies a whole
/// collection first.
pub trait Visitor {
    /// How many elements (or pairs) follow; called exactly once (0 for a missing key).
    fn len(&mut self, n: usize);
    /// One element; `false` stops the visit.
    fn item(&mut self, item: &[u8]) -> bool;
}

/// [`Visitor`] for a sorted set's range (`ZRANGE` and friends): [`ScoredVisitor::len`] once,
/// then [`ScoredVisitor::entry`] for each member with its score, in the range's order, until
/// one returns `false`.
pub trait ScoredVisitor {
    /// How many entries follow; called exactly once (0 for a missing key).
    fn len(&mut self, n: usize);
    /// One member and its score; `false` stops the visit.
    fn entry(&mut self, member: &[u8], score: f64) -> bool;
}

/// A [`Visitor`] that copies what it is given (the `Vec`-returning reads built on a visit).
#[derive(Default)]
pub(crate) struct Collect(pub(crate) Vec<Vec<u8>>);

impl Visitor for Collect {
    fn len(&mut self, n: usize) {
        // A claimed length is not an allocation: a count of billions is drawn one at a time.
        self.0.reserve(n.min(1 << 16));
    }

    fn item(&mut self, item: &[u8]) -> bool {
        self.0.push(item.to_vec());
        true
    }
}

/// The random picks of `SRANDMEMBER`/`HRANDFIELD` over `len` elements, into `visitor`: one
/// (`count` `None`), up to `count` distinct positions, or `-count` positions with
/// repetitions, each visited by `pick` (which returns whether to go on) as it is drawn.
pub(crate) fn visit_random(
    len: usize,
    count: Option<i64>,
    visitor: &mut dyn Visitor,
    mut pick: impl FnMut(usize, &mut dyn Visitor) -> bool,
) {
    visit_random_with(len, count, visitor, |v, n| v.len(n), |i, v| pick(i, v));
}

/// [`visit_random`] for any visitor (`set_len` announces how many picks follow).
pub(crate) fn visit_random_with<V: ?Sized>(
    len: usize,
    count: Option<i64>,
    visitor: &mut V,
    mut set_len: impl FnMut(&mut V, usize),
    mut pick: impl FnMut(usize, &mut V) -> bool,
) {
    match count {
        None => {
            set_len(visitor, 1);
            pick(random_below(len), visitor);
        }
        Some(n) if n >= 0 => {
            let n = (n as u64).min(len as u64) as usize;
            set_len(visitor, n);
            for i in hash::distinct_positions(len, n) {
                if !pick(i, visitor) {
                    break;
                }
            }
        }
        Some(n) => {
            let n = n.unsigned_abs();
            set_len(visitor, usize::try_from(n).unwrap_or(usize::MAX));
            for _ in 0..n {
                if !pick(random_below(len), visitor) {
                    break;
                }
            }
        }
    }
}

/// Which parts of a hash's pairs a visit reads (`HGETALL`, `HKEYS`, `HVALS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashPart {
    /// Field, then value, of each pair ([`Visitor::len`] counts pairs).
    Pairs,
    /// The fields.
    Fields,
    /// The values.
    Values,
}

/// Emits the mutations of one object write, in order, with the shard's sequence numbers.
pub(crate) struct Emitter<'a> {
    pub(crate) sink: Option<&'a dyn MutationSink>,
    pub(crate) shard: usize,
    pub(crate) seq: &'a mut u64,
    /// The key being written.
    pub(crate) key: &'a [u8],
}

impl Emitter<'_> {
    /// Emits one mutation (the sequence number advances with or without a sink).
    #[inline]
    pub(crate) fn emit(&mut self, mutation: Mutation<'_>) {
        *self.seq += 1;
        if let Some(sink) = self.sink {
            sink.on_mutation(self.shard, *self.seq, &mutation);
        }
    }
}

thread_local! {
    static RNG: Cell<u64> = Cell::new({
        let local = 0u8;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (&raw const local as u64).rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15
    });
}

/// A random number in `0..bound` (`bound > 0`) for the random-member commands (SplitMix64 on
/// a per-thread state: fast, not for cryptography).
pub(crate) fn random_below(bound: usize) -> usize {
    let x = RNG.with(|state| {
        let next = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(next);
        let mut z = next;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    });
    ((u128::from(x) * bound as u128) >> 64) as usize
}

/// Hash of a sequence of byte strings (lengths included, so boundaries count).
pub(crate) fn digest_parts(parts: &[&[u8]]) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hasher.digest()
}

/// Where a scan of positions `0..len` that walks downwards resumes, from a Redis-style cursor
/// (0 starts; a scan ends by returning 0). Walking down keeps the guarantee under
/// `swap_remove`: only the last element moves, into a hole below it, and an element that was
/// unvisited stays unvisited (a visited one may be seen twice, which Redis allows).
pub(crate) fn scan_window(cursor: u64, len: usize, count: usize) -> (std::ops::Range<usize>, u64) {
    let top = if cursor == 0 {
        len
    } else {
        (cursor as usize).min(len)
    };
    let bottom = top.saturating_sub(count.max(1));
    (bottom..top, bottom as u64)
}

impl crate::shard::Shard {
    /// `HDEL` / `SREM` / `ZREM`: removes the listed elements from the object of `kind` at `key`
    /// and logs the ones that were there with `log`; how many went (the key goes with its last
    /// element).
    pub(crate) fn remove_elements(
        &mut self,
        tag: u32,
        key: &[u8],
        kind: u32,
        elements: &[&[u8]],
        clock: &crate::clock::Clock,
        log: for<'m> fn(&'m [u8], &'m [&'m [u8]]) -> Mutation<'m>,
    ) -> crate::error::RedisObjectResult<usize> {
        let removed = self.write_object(tag, key, kind, None, clock, |object, emit| {
            let gone: Vec<&[u8]> = elements
                .iter()
                .copied()
                .filter(|e| object.remove_element(e))
                .collect();
            if !gone.is_empty() {
                emit.emit(log(emit.key, &gone));
            }
            Ok(gone.len())
        })?;
        Ok(removed.unwrap_or(0))
    }
}
