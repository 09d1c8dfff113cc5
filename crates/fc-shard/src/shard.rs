//! One shard: an exclusively owned [`Index`] over an [`Arena`] of entries.
//!
//! The index holds 32 bits of the key hash and the entry's arena location per entry, in
//! cache-line buckets. Lookups compare the hash bits, then the key bytes in the arena (one cache
//! miss for the bucket, one for the entry). Nothing here locks or allocates on a read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::arena::{self, Arena, ArenaFull, MAX_KEY_LEN, MAX_VALUE_LEN, Span};
use crate::built::BuiltEntry;
use crate::clock::Clock;
use crate::error::RedisObjectResult;
use crate::error::StoreError;
use crate::eviction::{EvictionPolicy, INDEX_BYTES_PER_ENTRY, charge, footprint_charge};
use crate::index::Index;
use crate::listener::{Listener, Removal, RemovalCause};
use crate::mutation::{Mutation, MutationSink};
use crate::object::{Emitter, KeyType, Object, Objects, slot_of};
use crate::s3fifo::{self, Queued, Queues};
use crate::stats::{KeyTtl, MaintenanceReport, ShardStatsSnapshot};

/// Most elements one exported mutation carries (bounds a snapshot frame's size).
pub(crate) const EXPORT_CHUNK: usize = 1024;

/// The index tag of a key hash. The shard was chosen from the *top* bits of the route hash, so
/// the index uses the low 32 bits of the key hash, independent of the shard.
#[inline]
pub(crate) fn tag_of(key_hash: u64) -> u32 {
    key_hash as u32
}

/// Key equality without a library call for keys of 8 to 16 bytes (two overlapping 8-byte
/// words per side), `memcmp` otherwise.
#[inline(always)]
fn same_key(stored: &[u8], key: &[u8]) -> bool {
    let n = key.len();
    if stored.len() != n {
        return false;
    }
    if (8..=16).contains(&n) {
        let word = |s: &[u8], at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&s[at..at + 8]);
            u64::from_le_bytes(w)
        };
        return (word(stored, 0) ^ word(key, 0)) | (word(stored, n - 8) ^ word(key, n - 8)) == 0;
    }
    stored == key
}

/// Whether an entry with this expiry is expired at `now_ms` (Redis: expired when now > at).
#[inline]
fn is_expired(expire_at_ms: Option<u64>, clock: &Clock) -> bool {
    expire_at_ms.is_some_and(|at| clock.now_ms() > at)
}

/// What a read-only lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The entry's location and where its value lies (for [`Shard::value_at`]).
    Hit(u32, Span),
    Miss,
    /// Present but expired: a caller with write access should remove it.
    Expired,
}

/// The budget of a shard built bounded whose limit was lifted: no limit, but the eviction
/// bookkeeping carries on (so a limit can come back).
const UNLIMITED_TRACKED: u64 = u64::MAX - 1;

pub(crate) type Sink = Option<Arc<dyn MutationSink>>;

/// One shard of a store.
pub(crate) struct Shard {
    id: usize,
    index: Index,
    arena: Arena,
    sink: Sink,
    seq: u64,
    expires: u64,
    /// Keys and expiring keys of each database other than 0 (see [`Namespaces`]).
    namespaces: Namespaces,
    stored_bytes: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    sets: u64,
    deletes: u64,
    expired: u64,
    sweep_cursor: u32,
    /// Memory budget; `u64::MAX` when unlimited.
    budget: u64,
    policy: EvictionPolicy,
    /// Whether reads set reference bits (only when a bounded shard evicts by them).
    track_reads: bool,
    /// The CLOCK hand: the next chunk location eviction examines.
    hand: u32,
    evicted: u64,
    evicted_bytes: u64,
    /// S3-FIFO queues, when the shard is bounded and evicts by S3-FIFO.
    queues: Option<Box<Queues>>,
    /// Told about every removed entry, when set.
    listener: Option<Arc<Listener>>,
    /// Whether removals reach the listener at once (a lock-free local store) or wait in
    /// `removals` until the caller has released the shard's lock.
    deliver_inline: bool,
    removals: Vec<Removal>,
    /// Redis objects of the shard's hash, list, set and sorted-set keys.
    objects: Objects,
}

/// Reads an entry needs while in S3-FIFO's small queue to move to the main queue.
const S3_PROMOTE_AFTER_READS: u8 = 1;
/// The small queue's share of the budget, in percent. The paper's default is 10; on
/// `cargo xtask hitratio`'s Zipf 0.9/0.99 and scan rows (1/10/25% capacity, 16 shards or one,
/// two seeds) 5 (with the ghost below) ends within 0.1 point of the best peer everywhere and
/// ahead of it at 10% and 25%, where 10 trailed by up to 1.1 points at 1%.
pub(crate) const S3_SMALL_PERCENT: u64 = 5;

/// Chunk slots the eviction path examines for expired entries before it evicts a live one.
const EXPIRED_SCAN_BEFORE_EVICTION: usize = 256;

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("id", &self.id)
            .field("keys", &self.index.len())
            .finish_non_exhaustive()
    }
}

/// Rejects keys and values the entry format cannot hold.
#[inline]
pub(crate) fn check_sizes(key: &[u8], value: &[u8]) -> Result<(), StoreError> {
    check_lens(key.len(), value.len())
}

/// [`check_sizes`] of a key and a value of these lengths.
#[inline]
pub(crate) fn check_lens(key_len: usize, value_len: usize) -> Result<(), StoreError> {
    if key_len > MAX_KEY_LEN {
        return Err(StoreError::KeyTooLarge {
            len: key_len,
            max: MAX_KEY_LEN,
        });
    }
    if value_len > MAX_VALUE_LEN - arena::HEADER - key_len {
        return Err(StoreError::ValueTooLarge {
            len: value_len,
            max: MAX_VALUE_LEN - arena::HEADER - key_len,
        });
    }
    Ok(())
}

/// What a string write stores: borrowed bytes, copied into the arena, or a
/// [`BuiltEntry`], whose allocation moves in (large entries) with no copy under the lock.
pub(crate) trait Incoming<'v> {
    fn value_len(&self) -> usize;
    /// The value, when it outlives the write (borrowed bytes); a built entry's is read
    /// back from the arena once it is there.
    fn borrowed(&self) -> Option<&'v [u8]>;
    fn insert(
        self,
        arena: &mut Arena,
        key: &[u8],
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull>;
    fn replace(
        self,
        arena: &mut Arena,
        loc: u32,
        key: &[u8],
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull>;
}

impl<'v> Incoming<'v> for &'v [u8] {
    #[inline(always)]
    fn value_len(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn borrowed(&self) -> Option<&'v [u8]> {
        Some(*self)
    }
    #[inline(always)]
    fn insert(
        self,
        arena: &mut Arena,
        key: &[u8],
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull> {
        arena.insert(key, self, expire_at_ms)
    }
    #[inline(always)]
    fn replace(
        self,
        arena: &mut Arena,
        loc: u32,
        key: &[u8],
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull> {
        arena.replace(loc, key, self, expire_at_ms)
    }
}

impl Incoming<'static> for BuiltEntry {
    fn value_len(&self) -> usize {
        self.value().len()
    }
    fn borrowed(&self) -> Option<&'static [u8]> {
        None
    }
    fn insert(self, arena: &mut Arena, _: &[u8], _: Option<u64>) -> Result<u32, ArenaFull> {
        arena.insert_built(self.into_data())
    }
    fn replace(
        self,
        arena: &mut Arena,
        loc: u32,
        _: &[u8],
        _: Option<u64>,
    ) -> Result<u32, ArenaFull> {
        arena.replace_built(loc, self.into_data())
    }
}

impl Shard {
    pub(crate) fn new(id: usize, sink: Sink) -> Self {
        Self {
            id,
            index: Index::new(),
            arena: Arena::new(),
            sink,
            seq: 0,
            expires: 0,
            namespaces: Namespaces::default(),
            stored_bytes: 0,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            sets: 0,
            deletes: 0,
            expired: 0,
            sweep_cursor: 0,
            budget: u64::MAX,
            policy: EvictionPolicy::NoEviction,
            track_reads: false,
            hand: 0,
            evicted: 0,
            evicted_bytes: 0,
            queues: None,
            listener: None,
            deliver_inline: false,
            removals: Vec::new(),
            objects: Objects::default(),
        }
    }

    /// Panics the listener raised (0 without one).
    pub(crate) fn listener_panics(&self) -> u64 {
        self.listener.as_ref().map_or(0, |l| l.panics())
    }

    /// Sets the removal listener.
    pub(crate) fn set_listener(&mut self, listener: Option<Arc<Listener>>) {
        self.listener = listener;
    }

    /// Whether removals are delivered as they happen (true in a local store, which holds no
    /// lock) or queued for [`Shard::take_removals`].
    pub(crate) fn set_deliver_inline(&mut self, inline: bool) {
        self.deliver_inline = inline;
        if inline && let Some(listener) = &self.listener {
            listener.deliver_all(std::mem::take(&mut self.removals));
        }
    }

    /// Whether removals wait for delivery.
    #[inline(always)]
    pub(crate) fn has_removals(&self) -> bool {
        !self.removals.is_empty()
    }

    /// Queued removals and the listener to deliver them to (nothing without a listener).
    #[inline]
    pub(crate) fn take_removals(&mut self) -> Option<(Arc<Listener>, Vec<Removal>)> {
        if self.removals.is_empty() {
            return None;
        }
        let listener = self.listener.clone()?;
        Some((listener, std::mem::take(&mut self.removals)))
    }

    /// Tells the listener (now or once the lock is released) that the entry at `loc` leaves.
    #[inline]
    fn note_removal(&mut self, loc: u32, cause: RemovalCause) {
        if self.listener.is_some() {
            self.record_removal(loc, cause);
        }
    }

    #[cold]
    #[inline(never)]
    fn record_removal(&mut self, loc: u32, cause: RemovalCause) {
        let Some(listener) = &self.listener else {
            return;
        };
        let chunk = self.arena.chunk(loc);
        // An object is reported by its key alone (its value is not a byte string).
        let value = if arena::kind_of(chunk) == arena::KIND_STRING {
            arena::value_of(chunk)
        } else {
            &[]
        };
        if self.deliver_inline {
            listener.deliver(arena::key_of(chunk), value, cause);
        } else {
            self.removals.push(Removal {
                key: arena::key_of(chunk).into(),
                value: value.into(),
                cause,
            });
        }
    }

    /// Sets the memory budget (`None`: unlimited) and what a write that would exceed it does.
    pub(crate) fn set_budget(&mut self, budget: Option<u64>, policy: EvictionPolicy) {
        self.budget = budget.unwrap_or(u64::MAX);
        self.policy = policy;
        self.track_reads = budget.is_some() && policy != EvictionPolicy::NoEviction;
        self.queues = (budget.is_some() && policy == EvictionPolicy::S3Fifo).then(Box::default);
        if budget.is_some() {
            self.arena.keep_eviction_metadata();
        }
    }

    /// Changes the budget of a shard built with one (`None`: no limit, bookkeeping kept), and
    /// under an evicting policy evicts down to the new budget at once. `false`, and nothing
    /// changes, when the shard was built without a budget: the policy's per-entry bookkeeping
    /// must exist from the first entry on.
    pub(crate) fn resize_budget(&mut self, budget: Option<u64>, clock: &Clock) -> bool {
        if self.budget == u64::MAX {
            return false;
        }
        self.budget = budget.map_or(UNLIMITED_TRACKED, |b| b.clamp(1, UNLIMITED_TRACKED));
        if self.policy != EvictionPolicy::NoEviction {
            self.shrink_to_budget(u32::MAX, clock);
        }
        true
    }

    pub(crate) fn id(&self) -> usize {
        self.id
    }

    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    pub(crate) fn stored_bytes(&self) -> u64 {
        self.stored_bytes
    }

    #[inline]
    fn emit(&mut self, mutation: impl FnOnce() -> Mutation<'static>) {
        self.seq += 1;
        if let Some(sink) = &self.sink {
            sink.on_mutation(self.id, self.seq, &mutation());
        }
    }

    /// Runs `op`, an operation whose several mutations (`LMOVE`'s pop and push, `SMOVE`'s
    /// remove and add, a `*STORE`'s delete and add) a consumer must apply together, between
    /// [`Mutation::TxBegin`] and [`Mutation::TxEnd`] with id 0: a group of this shard's stream
    /// only (see [`Mutation::TxBegin`]).
    pub(crate) fn grouped<R>(&mut self, op: impl FnOnce(&mut Self) -> R) -> R {
        self.emit(|| Mutation::TxBegin { id: 0 });
        let result = op(self);
        self.emit(|| Mutation::TxEnd { id: 0 });
        result
    }

    #[inline]
    fn emit_borrowed(sink: &Sink, id: usize, seq: &mut u64, mutation: Mutation<'_>) {
        *seq += 1;
        if let Some(sink) = sink {
            sink.on_mutation(id, *seq, &mutation);
        }
    }

    /// Starts loading the index bucket a lookup of `tag` reads first (see [`crate::prefetch`]).
    #[inline(always)]
    pub(crate) fn prefetch_index(&self, tag: u32) {
        self.index.prefetch_home(tag);
    }

    /// Starts loading the entry a lookup of `tag` will most likely compare: best after
    /// [`Shard::prefetch_index`] of a whole batch, when the bucket is already on its way.
    #[inline(always)]
    pub(crate) fn prefetch_entry(&self, tag: u32) {
        if let Some(loc) = self.index.home_candidate(tag) {
            // The header and key are in the chunk's first line; a small value may end in the
            // next (a large one is streamed by the hardware prefetcher once its copy starts).
            let chunk = self.arena.chunk(loc);
            let head = &chunk[..chunk.len().min(128)];
            if let (Some(first), Some(last)) = (head.first(), head.last()) {
                crate::prefetch::prefetch(first);
                crate::prefetch::prefetch(last);
            }
        }
    }

    /// Finds the entry of `key` without judging its expiry.
    #[inline(always)]
    fn find(&self, tag: u32, key: &[u8]) -> Option<u32> {
        self.find_span(tag, key).map(|(loc, ..)| loc)
    }

    /// [`Shard::find`] that also returns where the entry's chunk lies and its bytes (resolved
    /// once, for the key comparison).
    #[inline(always)]
    fn find_span(&self, tag: u32, key: &[u8]) -> Option<(u32, Span, &[u8])> {
        let arena = &self.arena;
        let mut found = None;
        let loc = self.index.find(tag, |loc| {
            let span = arena.span(loc);
            let chunk = arena.at(span);
            let same = same_key(arena::key_of(chunk), key);
            if same {
                found = Some((span, chunk));
            }
            same
        })?;
        found.map(|(span, chunk)| (loc, span, chunk))
    }

    /// Read-only lookup (usable under a shared lock): counts a hit or a miss.
    #[inline(always)]
    pub(crate) fn lookup(&self, tag: u32, key: &[u8], clock: &Clock) -> Lookup {
        let found = match self.find_span(tag, key) {
            Some((loc, span, chunk)) => {
                let value = span.narrow(arena::value_range(chunk));
                if arena::special_bits(chunk) == 0 {
                    Lookup::Hit(loc, value)
                } else if is_expired(arena::expiry_of(chunk), clock) {
                    Lookup::Expired
                } else if arena::kind_of(chunk) != arena::KIND_STRING {
                    // String reads see strings only (the typed reads report WRONGTYPE).
                    Lookup::Miss
                } else {
                    Lookup::Hit(loc, value)
                }
            }
            None => Lookup::Miss,
        };
        let counter = if let Lookup::Hit(loc, _) = found {
            if self.track_reads {
                self.arena.bump_freq(loc);
            }
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Exclusive lookup: removes an expired entry on the way, counts the hit or miss without
    /// atomics and, in a bounded shard, counts the read for eviction. A string without an
    /// expiry (the common entry) passes with one test of its first word.
    #[inline(always)]
    pub(crate) fn lookup_mut(&mut self, tag: u32, key: &[u8], clock: &Clock) -> Option<u32> {
        self.lookup_span_mut(tag, key, clock).map(|(loc, _)| loc)
    }

    /// [`Shard::lookup_mut`] with where the entry's value lies (see [`Shard::value_at`]).
    #[inline(always)]
    pub(crate) fn lookup_span_mut(
        &mut self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> Option<(u32, Span)> {
        let Some((loc, span, chunk)) = self.find_span(tag, key) else {
            *self.misses.get_mut() += 1;
            return None;
        };
        let value = span.narrow(arena::value_range(chunk));
        if arena::special_bits(chunk) != 0 {
            let expired = is_expired(arena::expiry_of(chunk), clock);
            let kind = arena::kind_of(chunk);
            if expired {
                self.remove_expired(tag, loc);
            }
            if expired || kind != arena::KIND_STRING {
                *self.misses.get_mut() += 1;
                return None;
            }
        }
        *self.hits.get_mut() += 1;
        if self.track_reads {
            self.arena.bump_freq_mut(loc);
        }
        Some((loc, value))
    }

    /// The value bytes at `span` (from [`Shard::lookup_span_mut`] or [`Lookup::Hit`], with no
    /// change to the shard since).
    #[inline(always)]
    pub(crate) fn value_at(&self, span: Span) -> &[u8] {
        self.arena.at(span)
    }

    /// The live entry of `key`, any kind (expired entries are reaped); counts nothing.
    pub(crate) fn live_entry(&mut self, tag: u32, key: &[u8], clock: &Clock) -> Option<u32> {
        self.find_live_mut(tag, key, clock)
    }

    /// The chunk of the entry at `loc`.
    pub(crate) fn chunk(&self, loc: u32) -> &[u8] {
        self.arena.chunk(loc)
    }

    /// `TYPE` as an object operation.
    pub(crate) fn type_of(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<KeyType>> {
        Ok(self.key_type(tag, key, clock))
    }

    /// Exclusive lookup without counting a hit or miss (EXISTS, TTL, writes).
    #[inline(always)]
    fn find_live_mut(&mut self, tag: u32, key: &[u8], clock: &Clock) -> Option<u32> {
        let loc = self.find(tag, key)?;
        if is_expired(arena::expiry_of(self.arena.chunk(loc)), clock) {
            self.remove_expired(tag, loc);
            return None;
        }
        Some(loc)
    }

    /// Value bytes of the entry at `loc`.
    #[inline(always)]
    pub(crate) fn value(&self, loc: u32) -> &[u8] {
        self.arena.value(loc)
    }

    /// Removes the entry at `loc` (found through `tag`) because it expired.
    pub(crate) fn remove_expired(&mut self, tag: u32, loc: u32) {
        if !self.index.remove_loc(tag, loc) {
            return;
        }
        let chunk = self.arena.chunk(loc);
        let head = arena::header(chunk);
        self.stored_bytes -= (head.key_len + head.value_len) as u64;
        Self::leave_queue(&mut self.queues, &self.arena, loc, head);
        if head.expire_at_ms.is_some() {
            self.expires -= 1;
        }
        self.namespaces.note(
            arena::key_of(chunk),
            -1,
            -i64::from(head.expire_at_ms.is_some()),
        );
        self.expired += 1;
        Self::emit_borrowed(
            &self.sink,
            self.id,
            &mut self.seq,
            Mutation::Expired {
                key: arena::key_of(chunk),
            },
        );
        self.note_removal(loc, RemovalCause::Expired);
        self.free_entry(loc);
    }

    /// Re-checks under exclusive access and removes `key` if it is still expired.
    pub(crate) fn reap_if_expired(&mut self, tag: u32, key: &[u8], clock: &Clock) {
        if let Some(loc) = self.find(tag, key)
            && is_expired(arena::expiry_of(self.arena.chunk(loc)), clock)
        {
            self.remove_expired(tag, loc);
        }
    }

    /// Stores `value` under `key`, replacing any previous value and expiry. Past the memory
    /// budget, [`EvictionPolicy::NoEviction`] fails with [`StoreError::OutOfMemory`] having
    /// changed nothing; [`EvictionPolicy::Lru`] writes, then evicts other entries until the shard
    /// is back within its budget (allocating before freeing keeps the allocator from handing
    /// memory back and forth at every large write).
    pub(crate) fn set(
        &mut self,
        tag: u32,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
        clock: &Clock,
    ) -> Result<(), StoreError> {
        self.set_unless_expired(tag, key, value, expire_at_ms, clock, false)
            .map(|_| ())
    }

    /// [`Shard::set`] of a built entry (no expiry): a large one's allocation moves in; the
    /// one it replaces waits in [`Shard::take_retired`].
    pub(crate) fn set_built(
        &mut self,
        tag: u32,
        entry: BuiltEntry,
        clock: &Clock,
    ) -> Result<(), StoreError> {
        let key = entry.key().to_vec();
        self.set_unless_expired(tag, &key, entry, None, clock, false)
            .map(|_| ())
    }

    /// Large allocations that built entries replaced: drop them after unlocking.
    pub(crate) fn take_retired(&mut self) -> Vec<Box<[u8]>> {
        self.arena.take_retired()
    }

    /// [`Shard::set`] with one lookup for a write that does not read the old entry (a plain
    /// `SET`): `Ok(false)`, nothing done, when `key`'s entry has expired and `bail` is set, so
    /// the caller removes it as expired first (its expiry is reported, as a lookup's is).
    #[inline(always)]
    pub(crate) fn set_unless_expired<'v>(
        &mut self,
        tag: u32,
        key: &[u8],
        value: impl Incoming<'v>,
        expire_at_ms: Option<u64>,
        clock: &Clock,
        bail: bool,
    ) -> Result<bool, StoreError> {
        let arena = &mut self.arena;
        let pos = self.index.find_pos(tag, |loc| arena.key(loc) == key);
        let old = pos.map(|p| arena::header(arena.chunk(self.index.loc(p))));
        if bail && old.is_some_and(|h| is_expired(h.expire_at_ms, clock)) {
            return Ok(false);
        }
        let value_len = value.value_len();
        let borrowed = value.borrowed();
        check_lens(key.len(), value_len)?;
        // Everything a budget needs stays off the unbounded path (out of line, behind one flag).
        let bounded = self.budget != u64::MAX;
        let (over_budget, new_charge, old_charge) = if bounded {
            self.check_budget(key.len(), value_len, expire_at_ms.is_some(), old)?
        } else {
            (false, 0, 0)
        };
        let shard = self.id;
        let full = |_: ArenaFull| StoreError::ShardFull { shard };
        let loc = match (pos, old) {
            (Some(pos), Some(old)) => {
                let loc = self.index.loc(pos);
                if self.listener.is_some() {
                    let cause = if is_expired(old.expire_at_ms, clock) {
                        RemovalCause::Expired
                    } else {
                        RemovalCause::Replaced
                    };
                    self.record_removal(loc, cause);
                }
                // A string replacing an object: the object goes once the write has succeeded.
                let old_object =
                    (old.kind != arena::KIND_STRING).then(|| slot_of(self.arena.value(loc)));
                let arena = &mut self.arena;
                let queue = if bounded { arena.meta(loc) & 3 } else { 0 };
                let new_loc = match value.replace(arena, loc, key, expire_at_ms) {
                    Ok(new_loc) => new_loc,
                    Err(err) => {
                        // Nothing was replaced: withdraw the note (a local store's listener
                        // has already seen it; the class is full only at 2^25 entries).
                        if self.listener.is_some() && !self.deliver_inline {
                            self.removals.pop();
                        }
                        return Err(full(err));
                    }
                };
                self.index.set_loc(pos, new_loc);
                if let Some(slot) = old_object {
                    self.objects.remove(slot);
                }
                self.stored_bytes = self.stored_bytes + value_len as u64 - old.value_len as u64;
                if old.expire_at_ms.is_some() {
                    self.expires -= 1;
                    self.namespaces.note(key, 0, -1);
                }
                if bounded {
                    self.after_bounded_overwrite(loc, new_loc, queue, old_charge, new_charge);
                }
                new_loc
            }
            _ => {
                let loc = value
                    .insert(&mut self.arena, key, expire_at_ms)
                    .map_err(full)?;
                self.index.insert(tag, loc);
                self.namespaces.note(key, 1, 0);
                self.stored_bytes += (key.len() + value_len) as u64;
                if bounded {
                    self.after_bounded_insert(tag, loc, new_charge);
                }
                loc
            }
        };
        if expire_at_ms.is_some() {
            self.expires += 1;
            self.namespaces.note(key, 0, 1);
        }
        self.sets += 1;
        Self::emit_borrowed(
            &self.sink,
            self.id,
            &mut self.seq,
            Mutation::Set {
                key,
                value: borrowed.unwrap_or_else(|| self.arena.value(loc)),
                expire_at_ms,
            },
        );
        if over_budget {
            self.shrink_to_budget(loc, clock);
        }
        Ok(true)
    }

    /// For a bounded shard: the (queue) charges of a write replacing `old` and whether it goes
    /// over the budget; under [`EvictionPolicy::NoEviction`] going over is the error.
    #[inline(never)]
    fn check_budget(
        &self,
        key_len: usize,
        value_len: usize,
        has_expiry: bool,
        old: Option<arena::Header>,
    ) -> Result<(bool, u64, u64), StoreError> {
        let adds = footprint_charge(key_len, value_len, has_expiry);
        let frees = old.map_or(0, |h| {
            footprint_charge(h.key_len, h.value_len, h.expire_at_ms.is_some())
        });
        let used = self.used_memory();
        let over = used.saturating_sub(frees) + adds > self.budget;
        if over && self.policy == EvictionPolicy::NoEviction {
            return Err(StoreError::OutOfMemory {
                shard: self.id,
                used,
                budget: self.budget,
                needed: adds.saturating_sub(frees),
            });
        }
        let new_charge = charge(key_len, value_len);
        let old_charge = old.map_or(0, |h| charge(h.key_len, h.value_len));
        Ok((over, new_charge, old_charge))
    }

    /// Eviction bookkeeping after an overwrite that left the entry at `new_loc` (it was at
    /// `loc`, in `queue`).
    #[inline(never)]
    fn after_bounded_overwrite(
        &mut self,
        loc: u32,
        new_loc: u32,
        queue: u8,
        old_charge: u64,
        new_charge: u64,
    ) {
        if let Some(queues) = &mut self.queues {
            if new_loc == loc {
                if queue == s3fifo::SMALL {
                    queues.small_bytes = queues.small_bytes + new_charge - old_charge;
                }
            } else {
                // The entry moved to another size class: its old position is stale.
                Self::queue_left(queues, queue, old_charge);
                Self::queue_join(queues, &mut self.arena, new_loc, queue, new_charge);
            }
        }
        if self.track_reads {
            // An overwrite is a use (as in Redis's LRU clock).
            self.arena.bump_freq_mut(new_loc);
        }
    }

    /// Eviction bookkeeping after inserting a new entry at `loc`. Under CLOCK it starts
    /// unmarked: of entries nobody read, the oldest goes first, as in LRU. Under S3-FIFO it
    /// joins the small queue, or the main queue when its key was evicted unread recently.
    #[inline(never)]
    fn after_bounded_insert(&mut self, tag: u32, loc: u32, new_charge: u64) {
        if let Some(queues) = &mut self.queues {
            let queue = if queues.in_ghost(tag) {
                s3fifo::MAIN
            } else {
                s3fifo::SMALL
            };
            let arena = &mut self.arena;
            Self::queue_join(queues, arena, loc, queue, new_charge);
            queues.compact(|q| arena.meta(q.loc) == q.meta);
        }
    }

    /// Frees charged bytes until the shard is within its budget again, sparing the entry just
    /// written at `protect`: expired entries first (a bounded sweep), then CLOCK victims. An
    /// entry that does not fit even alone stays: a shard exceeds its budget by at most that one
    /// entry.
    fn shrink_to_budget(&mut self, protect: u32, clock: &Clock) {
        if self.expires > 0 {
            self.reclaim_expired(EXPIRED_SCAN_BEFORE_EVICTION, Some(protect), clock);
        }
        while self.used_memory() > self.budget {
            let freed = if self.queues.is_some() {
                self.s3_evict_one(protect, clock)
            } else {
                self.evict_one(Some(protect), clock)
            };
            if !freed {
                break;
            }
        }
    }

    /// Puts the entry at `loc` at the back of `queue`.
    fn queue_join(queues: &mut Queues, arena: &mut Arena, loc: u32, queue: u8, charge: u64) {
        let meta = (arena.meta(loc) & !3) | queue;
        arena.set_meta(loc, meta);
        let queued = Queued { loc, meta };
        if queue == s3fifo::SMALL {
            queues.small.push_back(queued);
            queues.small_live += 1;
            queues.small_bytes += charge;
        } else {
            queues.main.push_back(queued);
            queues.main_live += 1;
        }
    }

    /// Accounts for an entry of `queue` that leaves it (its position goes stale).
    fn queue_left(queues: &mut Queues, queue: u8, charge: u64) {
        if queue == s3fifo::SMALL {
            queues.small_live -= 1;
            queues.small_bytes -= charge;
        } else if queue == s3fifo::MAIN {
            queues.main_live -= 1;
        }
    }

    /// Called before the entry at `loc` is freed.
    fn leave_queue(queues: &mut Option<Box<Queues>>, arena: &Arena, loc: u32, head: arena::Header) {
        if let Some(queues) = queues {
            let cost = charge(head.key_len, head.value_len);
            Self::queue_left(queues, arena.meta(loc) & 3, cost);
        }
    }

    /// Bytes charged against the budget: entries' footprints plus their index share.
    #[inline]
    pub(crate) fn used_memory(&self) -> u64 {
        self.arena.live_bytes() as u64
            + INDEX_BYTES_PER_ENTRY * self.index.len() as u64
            + self.objects.bytes
    }

    /// One S3-FIFO eviction (or expired reclaim), sparing `protect`; false when nothing but
    /// `protect` is left.
    fn s3_evict_one(&mut self, protect: u32, clock: &Clock) -> bool {
        let now = if self.expires > 0 { clock.now_ms() } else { 0 };
        let small_share = self.budget * S3_SMALL_PERCENT / 100;
        // A queue whose only live entry is `protect` cannot give a victim: use the other one.
        let (mut skip_small, mut skip_main) = (false, false);
        loop {
            let Some(queues) = self.queues.as_deref_mut() else {
                return false;
            };
            if queues.small_live + queues.main_live <= 1 || (skip_small && skip_main) {
                // Only the entry just written (or nothing) is left.
                return false;
            }
            let preferred = queues.main_live == 0
                || (queues.small_live > 0 && queues.small_bytes > small_share);
            let from_small = if preferred { !skip_small } else { skip_main };
            let popped = if from_small {
                queues.small.pop_front()
            } else {
                queues.main.pop_front()
            };
            let Some(queued) = popped else {
                if from_small {
                    skip_small = true;
                } else {
                    skip_main = true;
                }
                continue;
            };
            let loc = queued.loc;
            if self.arena.meta(loc) != queued.meta {
                continue; // stale: freed or reused since it was queued
            }
            let queue = queued.meta & 3;
            if loc == protect {
                if queue == s3fifo::SMALL {
                    queues.small.push_back(queued);
                    skip_small |= queues.small_live == 1;
                } else {
                    queues.main.push_back(queued);
                    skip_main |= queues.main_live == 1;
                }
                continue;
            }
            let expiry = arena::expiry_of(self.arena.chunk(loc));
            let tag = tag_of(fc_route::hash_bytes(self.arena.key(loc)));
            if expiry.is_some_and(|at| now > at) {
                self.remove_expired(tag, loc);
                return true;
            }
            let freq = self.arena.freq(loc);
            if queue == s3fifo::SMALL {
                if freq >= S3_PROMOTE_AFTER_READS {
                    // Read since it arrived: on to the main queue, counting afresh.
                    let head = arena::header(self.arena.chunk(loc));
                    let cost = charge(head.key_len, head.value_len);
                    Self::queue_left(queues, s3fifo::SMALL, cost);
                    self.arena.set_freq(loc, 0);
                    Self::queue_join(queues, &mut self.arena, loc, s3fifo::MAIN, cost);
                    skip_main = false;
                    continue;
                }
                queues.remember(tag);
            } else if freq > 0 {
                self.arena.set_freq(loc, freq - 1);
                queues.main.push_back(queued);
                continue;
            }
            self.evict(tag, loc);
            return true;
        }
    }

    /// Reclaims expired entries among the next `budget` chunk slots of the expiry sweep.
    fn reclaim_expired(&mut self, budget: usize, protect: Option<u32>, clock: &Clock) {
        let now = clock.now_ms();
        for _ in 0..budget {
            let Some(loc) = self.arena.sweep_next(self.sweep_cursor) else {
                self.sweep_cursor = 0;
                return;
            };
            self.sweep_cursor = loc.wrapping_add(1);
            if protect == Some(loc) || !self.arena.is_live(loc) {
                continue;
            }
            let chunk = self.arena.chunk(loc);
            if arena::expiry_of(chunk).is_some_and(|at| now > at) {
                let tag = tag_of(fc_route::hash_bytes(arena::key_of(chunk)));
                self.remove_expired(tag, loc);
            }
        }
    }

    /// Moves the CLOCK hand to the next victim and removes it: an expired entry is reclaimed, an
    /// entry read since the last pass loses its mark and is passed over, any other is evicted.
    /// False when nothing but `protect` is left.
    fn evict_one(&mut self, protect: Option<u32>, clock: &Clock) -> bool {
        // Three wraps: the first may start mid-way, the second clears every mark, the third
        // must find an unmarked entry.
        let mut wraps = 0;
        let now = if self.expires > 0 { clock.now_ms() } else { 0 };
        loop {
            let Some(loc) = self.arena.sweep_next(self.hand) else {
                self.hand = 0;
                wraps += 1;
                if wraps > 3 {
                    return false;
                }
                continue;
            };
            self.hand = loc.wrapping_add(1);
            if protect == Some(loc) || !self.arena.is_live(loc) {
                continue;
            }
            let expiry = arena::expiry_of(self.arena.chunk(loc));
            if self.track_reads && expiry.is_none_or(|at| now <= at) && self.arena.take_mark(loc) {
                continue;
            }
            let tag = tag_of(fc_route::hash_bytes(self.arena.key(loc)));
            if expiry.is_some_and(|at| now > at) {
                self.remove_expired(tag, loc);
            } else {
                self.evict(tag, loc);
            }
            return true;
        }
    }

    /// Removes the live entry at `loc` to make room.
    fn evict(&mut self, tag: u32, loc: u32) {
        if !self.index.remove_loc(tag, loc) {
            return;
        }
        let chunk = self.arena.chunk(loc);
        let head = arena::header(chunk);
        let freed = footprint_charge(head.key_len, head.value_len, head.expire_at_ms.is_some())
            + self.object_bytes_of(chunk);
        self.stored_bytes -= (head.key_len + head.value_len) as u64;
        Self::leave_queue(&mut self.queues, &self.arena, loc, head);
        if head.expire_at_ms.is_some() {
            self.expires -= 1;
        }
        self.namespaces.note(
            arena::key_of(chunk),
            -1,
            -i64::from(head.expire_at_ms.is_some()),
        );
        self.evicted += 1;
        self.evicted_bytes += freed;
        Self::emit_borrowed(
            &self.sink,
            self.id,
            &mut self.seq,
            Mutation::Evicted {
                key: arena::key_of(chunk),
            },
        );
        self.note_removal(loc, RemovalCause::Evicted);
        self.free_entry(loc);
    }

    /// Deletes `key`; true when a live entry was removed (an expired one is reaped and reported
    /// as [`Mutation::Expired`], and the call returns false). One index probe.
    pub(crate) fn delete(&mut self, tag: u32, key: &[u8], clock: &Clock) -> bool {
        let arena = &self.arena;
        let Some(pos) = self.index.find_pos(tag, |loc| arena.key(loc) == key) else {
            return false;
        };
        let loc = self.index.remove(pos);
        let head = arena::header(self.arena.chunk(loc));
        self.stored_bytes -= (head.key_len + head.value_len) as u64;
        Self::leave_queue(&mut self.queues, &self.arena, loc, head);
        if head.expire_at_ms.is_some() {
            self.expires -= 1;
        }
        self.namespaces
            .note(key, -1, -i64::from(head.expire_at_ms.is_some()));
        let live = !is_expired(head.expire_at_ms, clock);
        let (mutation, cause) = if live {
            self.deletes += 1;
            (Mutation::Delete { key }, RemovalCause::Deleted)
        } else {
            self.expired += 1;
            (Mutation::Expired { key }, RemovalCause::Expired)
        };
        Self::emit_borrowed(&self.sink, self.id, &mut self.seq, mutation);
        self.note_removal(loc, cause);
        self.free_entry(loc);
        live
    }

    /// Whether a live entry exists (counts no hit or miss).
    pub(crate) fn exists(&mut self, tag: u32, key: &[u8], clock: &Clock) -> bool {
        self.find_live_mut(tag, key, clock).is_some()
    }

    /// Read-only existence check (under a shared lock); `None` when the entry is expired.
    pub(crate) fn exists_shared(&self, tag: u32, key: &[u8], clock: &Clock) -> Lookup {
        match self.find_span(tag, key) {
            Some((_, _, chunk)) if is_expired(arena::expiry_of(chunk), clock) => Lookup::Expired,
            Some((loc, span, chunk)) => Lookup::Hit(loc, span.narrow(arena::value_range(chunk))),
            None => Lookup::Miss,
        }
    }

    /// Sets (`Some`) or clears (`None`) the expiry of a live key; true when the key exists and,
    /// for `None`, had an expiry to clear. Also false, changing nothing, in the one case where
    /// an expiry cannot be stored: the entry must move to a size class of this shard that
    /// already holds 2^25 entries.
    pub(crate) fn set_expiry(
        &mut self,
        tag: u32,
        key: &[u8],
        expire_at_ms: Option<u64>,
        clock: &Clock,
    ) -> bool {
        let Some(loc) = self.find_live_mut(tag, key, clock) else {
            return false;
        };
        let had = arena::expiry_of(self.arena.chunk(loc)).is_some();
        match expire_at_ms {
            None if !had => return false,
            None => {
                self.expires -= 1;
                self.namespaces.note(key, 0, -1);
                let same = self.arena.set_expiry(loc, None);
                debug_assert!(matches!(same, Ok(l) if l == loc), "clearing stays in place");
                self.emit_key(loc, |key| Mutation::Persist { key });
            }
            Some(at) => {
                let queue = if self.queues.is_some() {
                    self.arena.meta(loc) & 3
                } else {
                    0
                };
                // Adding an expiry may move the entry to the next size class (8 more bytes).
                let Ok(moved) = self.arena.set_expiry(loc, Some(at)) else {
                    // That class of this shard is full (2^25 chunks): nothing changed.
                    return false;
                };
                if moved != loc {
                    self.relocated(tag, loc, moved, queue);
                }
                let loc = moved;
                if !had {
                    self.expires += 1;
                    self.namespaces.note(key, 0, 1);
                }
                self.emit_key(loc, |key| Mutation::Expire {
                    key,
                    expire_at_ms: at,
                });
                // A move grew the entry by its expiry's bytes: an evicting shard makes room
                // (as Redis, an expiry change is never refused for memory under noeviction).
                if self.budget != u64::MAX
                    && self.policy != EvictionPolicy::NoEviction
                    && self.used_memory() > self.budget
                {
                    self.shrink_to_budget(loc, clock);
                }
            }
        }
        true
    }

    /// Points the index (and, under S3-FIFO, the entry's queue) at `to`, where the arena moved
    /// the entry of `tag` that was at `from`.
    fn relocated(&mut self, tag: u32, from: u32, to: u32, queue: u8) {
        let pos = self
            .index
            .find_pos(tag, |loc| loc == from)
            .expect("a live entry is indexed");
        self.index.set_loc(pos, to);
        if let Some(queues) = &mut self.queues {
            let head = arena::header(self.arena.chunk(to));
            let cost = charge(head.key_len, head.value_len);
            Self::queue_left(queues, queue, cost);
            Self::queue_join(queues, &mut self.arena, to, queue, cost);
        }
    }

    fn emit_key(&mut self, loc: u32, make: impl for<'k> FnOnce(&'k [u8]) -> Mutation<'k>) {
        self.seq += 1;
        if let Some(sink) = &self.sink {
            sink.on_mutation(self.id, self.seq, &make(self.arena.key(loc)));
        }
    }

    /// Remaining time to live in milliseconds.
    pub(crate) fn ttl_ms(&mut self, tag: u32, key: &[u8], clock: &Clock) -> KeyTtl {
        let Some(loc) = self.find_live_mut(tag, key, clock) else {
            return KeyTtl::Missing;
        };
        match arena::expiry_of(self.arena.chunk(loc)) {
            None => KeyTtl::Persistent,
            Some(at) => KeyTtl::ExpiresIn(at.saturating_sub(clock.now_ms())),
        }
    }

    /// Removes expired entries, examining at most `budget` entry slots from where the last call
    /// stopped.
    pub(crate) fn process_maintenance(
        &mut self,
        budget: usize,
        clock: &Clock,
    ) -> MaintenanceReport {
        let mut report = MaintenanceReport::default();
        if self.expires == 0 {
            report.completed_pass = true;
            self.sweep_cursor = 0;
            return report;
        }
        let now = clock.now_ms();
        while (report.scanned as usize) < budget {
            let Some(loc) = self.arena.sweep_next(self.sweep_cursor) else {
                self.sweep_cursor = 0;
                report.completed_pass = true;
                break;
            };
            self.sweep_cursor = loc + 1;
            report.scanned += 1;
            if !self.arena.is_live(loc) {
                continue;
            }
            let chunk = self.arena.chunk(loc);
            let Some(at) = arena::expiry_of(chunk) else {
                continue;
            };
            report.with_ttl += 1;
            if now > at {
                let tag = tag_of(fc_route::hash_bytes(arena::key_of(chunk)));
                self.remove_expired(tag, loc);
                report.expired += 1;
            }
        }
        report
    }

    /// Removes every entry.
    pub(crate) fn clear(&mut self) {
        if self.index.is_empty() {
            return;
        }
        self.index = Index::new();
        self.arena.clear();
        self.objects.clear();
        self.stored_bytes = 0;
        self.hand = 0;
        if let Some(queues) = &mut self.queues {
            **queues = Queues::default();
        }
        self.expires = 0;
        self.namespaces = Namespaces::default();
        self.sweep_cursor = 0;
        self.emit(|| Mutation::Flush);
    }

    /// Appends every live key to `out`.
    pub(crate) fn collect_keys(&self, clock: &Clock, out: &mut Vec<Vec<u8>>) {
        let now = if self.expires > 0 { clock.now_ms() } else { 0 };
        out.extend(self.index.iter().filter_map(|loc| {
            let chunk = self.arena.chunk(loc);
            let live = arena::expiry_of(chunk).is_none_or(|at| now <= at);
            live.then(|| arena::key_of(chunk).to_vec())
        }));
    }

    // ----- Redis objects ------------------------------------------------------------------------

    /// Estimated bytes of the object an entry's chunk points at (0 for a string).
    fn object_bytes_of(&self, chunk: &[u8]) -> u64 {
        if arena::kind_of(chunk) == arena::KIND_STRING {
            0
        } else {
            self.objects
                .get(slot_of(arena::value_of(chunk)))
                .mem_bytes() as u64
        }
    }

    /// Frees the entry at `loc` (already out of the index), with its object if it has one.
    fn free_entry(&mut self, loc: u32) {
        let chunk = self.arena.chunk(loc);
        if arena::kind_of(chunk) != arena::KIND_STRING {
            self.objects.remove(slot_of(arena::value_of(chunk)));
        }
        self.arena.remove(loc);
    }

    /// The live entry of `key` for a read, counting the hit or miss (and, in a bounded shard,
    /// the use); any kind.
    fn lookup_entry(&self, tag: u32, key: &[u8], clock: &Clock) -> Option<u32> {
        let found = self
            .find(tag, key)
            .filter(|&loc| !is_expired(arena::expiry_of(self.arena.chunk(loc)), clock));
        if let Some(loc) = found {
            if self.track_reads {
                self.arena.bump_freq(loc);
            }
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// The object of `key` when it is of `kind` (`Ok(None)` when missing or expired),
    /// WRONGTYPE for another type; counts the hit or miss.
    pub(crate) fn object_ref(
        &self,
        tag: u32,
        key: &[u8],
        kind: u32,
        clock: &Clock,
    ) -> RedisObjectResult<Option<&Object>> {
        let Some(loc) = self.lookup_entry(tag, key, clock) else {
            return Ok(None);
        };
        let chunk = self.arena.chunk(loc);
        if arena::kind_of(chunk) != kind {
            return Err(StoreError::WrongType);
        }
        Ok(Some(self.objects.get(slot_of(arena::value_of(chunk)))))
    }

    /// [`StoreError::WrongType`] when `key` is live and holds a type other than `kind`.
    pub(crate) fn expect_kind(
        &mut self,
        tag: u32,
        key: &[u8],
        kind: u32,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        match self.find_live_mut(tag, key, clock) {
            Some(loc) if arena::kind_of(self.arena.chunk(loc)) != kind => {
                Err(StoreError::WrongType)
            }
            _ => Ok(()),
        }
    }

    /// Runs `read` on the object of `key` when it is of `kind` (`Ok(None)` when the key is
    /// missing or expired, [`StoreError::WrongType`] when it holds another type). Works under a
    /// shared lock: an expired key reads as missing and is left for a writer to reclaim.
    pub(crate) fn read_object<R>(
        &self,
        tag: u32,
        key: &[u8],
        kind: u32,
        clock: &Clock,
        read: impl FnOnce(&Object) -> R,
    ) -> RedisObjectResult<Option<R>> {
        let Some(loc) = self.lookup_entry(tag, key, clock) else {
            return Ok(None);
        };
        let chunk = self.arena.chunk(loc);
        if arena::kind_of(chunk) != kind {
            return Err(StoreError::WrongType);
        }
        Ok(Some(read(
            self.objects.get(slot_of(arena::value_of(chunk))),
        )))
    }

    /// The live string value of `key`: [`StoreError::WrongType`] for an object.
    pub(crate) fn read_string(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<&[u8]>> {
        let Some(loc) = self.lookup_entry(tag, key, clock) else {
            return Ok(None);
        };
        let chunk = self.arena.chunk(loc);
        if arena::kind_of(chunk) != arena::KIND_STRING {
            return Err(StoreError::WrongType);
        }
        Ok(Some(arena::value_of(chunk)))
    }

    /// Under [`EvictionPolicy::NoEviction`], a write that may grow the shard is refused once the
    /// shard is at or past its budget (as Redis refuses `denyoom` commands over `maxmemory`).
    fn check_object_room(&self, adding: u64) -> Result<(), StoreError> {
        if self.budget == u64::MAX || self.policy != EvictionPolicy::NoEviction {
            return Ok(());
        }
        let used = self.used_memory();
        if used + adding > self.budget {
            return Err(StoreError::OutOfMemory {
                shard: self.id,
                used,
                budget: self.budget,
                needed: adding,
            });
        }
        Ok(())
    }

    /// Runs `write` on the object of `key` when it is of `kind`; creates it with `create` when
    /// the key is missing (without `create`, a missing key gives `Ok(None)` and changes nothing).
    /// [`StoreError::WrongType`] when the key holds another type. Afterwards: an object left
    /// empty is deleted with its key (Redis never keeps an empty aggregate), its memory estimate
    /// is re-charged, and a bounded shard evicts back to its budget. `write` emits its own
    /// mutations through the [`Emitter`]; an error from it must leave the object unchanged.
    pub(crate) fn write_object<R>(
        &mut self,
        tag: u32,
        key: &[u8],
        kind: u32,
        create: Option<fn() -> Object>,
        clock: &Clock,
        write: impl FnOnce(&mut Object, &mut Emitter<'_>) -> RedisObjectResult<R>,
    ) -> RedisObjectResult<Option<R>> {
        let bounded = self.budget != u64::MAX;
        let loc = match self.find_live_mut(tag, key, clock) {
            Some(loc) => {
                if arena::kind_of(self.arena.chunk(loc)) != kind {
                    return Err(StoreError::WrongType);
                }
                if create.is_some() {
                    self.check_object_room(0)?;
                }
                loc
            }
            None => {
                let Some(make) = create else {
                    return Ok(None);
                };
                check_sizes(key, &[0; 4])?;
                self.check_object_room(charge(key.len(), 4))?;
                let slot = self.objects.insert(make());
                let loc = match self.arena.insert(key, &slot.to_le_bytes(), None) {
                    Ok(loc) => loc,
                    Err(ArenaFull) => {
                        self.objects.remove(slot);
                        return Err(StoreError::ShardFull { shard: self.id });
                    }
                };
                self.arena.set_kind(loc, kind);
                self.index.insert(tag, loc);
                self.namespaces.note(key, 1, 0);
                self.stored_bytes += (key.len() + 4) as u64;
                if bounded {
                    self.after_bounded_insert(tag, loc, charge(key.len(), 4));
                }
                loc
            }
        };
        let object = self.objects.get_mut(slot_of(self.arena.value(loc)));
        let before = object.mem_bytes() as u64;
        let mut emitter = Emitter {
            sink: self.sink.as_deref(),
            shard: self.id,
            seq: &mut self.seq,
            key,
        };
        let result = write(object, &mut emitter);
        let (after, empty) = (object.mem_bytes() as u64, object.is_empty());
        self.objects.bytes = self.objects.bytes + after - before;
        if empty {
            self.remove_emptied(tag, loc);
        } else if bounded {
            if self.track_reads {
                self.arena.bump_freq_mut(loc);
            }
            if self.used_memory() > self.budget {
                self.shrink_to_budget(loc, clock);
            }
        }
        result.map(Some)
    }

    /// Removes an object key whose last element a write removed (the write's own mutation
    /// says so; no separate delete is emitted).
    fn remove_emptied(&mut self, tag: u32, loc: u32) {
        if !self.index.remove_loc(tag, loc) {
            return;
        }
        let head = arena::header(self.arena.chunk(loc));
        self.stored_bytes -= (head.key_len + head.value_len) as u64;
        Self::leave_queue(&mut self.queues, &self.arena, loc, head);
        if head.expire_at_ms.is_some() {
            self.expires -= 1;
        }
        self.namespaces.note(
            arena::key_of(self.arena.chunk(loc)),
            -1,
            -i64::from(head.expire_at_ms.is_some()),
        );
        self.note_removal(loc, RemovalCause::Deleted);
        self.free_entry(loc);
    }

    /// The type of a live key.
    /// `MEMORY USAGE`: the bytes `key` is charged to the budget (what `used_memory` counts for
    /// it): its arena entry's size class, its index slot, and an object's own estimate.
    pub(crate) fn memory_usage(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<u64>> {
        let Some(loc) = self.lookup_entry(tag, key, clock) else {
            return Ok(None);
        };
        let chunk = self.arena.chunk(loc);
        let entry = arena::footprint(
            arena::key_of(chunk).len(),
            arena::value_of(chunk).len(),
            arena::expiry_of(chunk).is_some(),
        ) as u64
            + crate::eviction::INDEX_BYTES_PER_ENTRY;
        let object = if arena::kind_of(chunk) == arena::KIND_STRING {
            0
        } else {
            self.objects
                .get(slot_of(arena::value_of(chunk)))
                .mem_bytes() as u64
        };
        Ok(Some(entry + object))
    }

    pub(crate) fn key_type(&self, tag: u32, key: &[u8], clock: &Clock) -> Option<KeyType> {
        let loc = self.find(tag, key)?;
        let chunk = self.arena.chunk(loc);
        if is_expired(arena::expiry_of(chunk), clock) {
            return None;
        }
        Some(KeyType::of_kind(arena::kind_of(chunk)))
    }

    /// Calls `emit` with mutations that recreate every live key of this shard from nothing:
    /// `Set` for a string (with its expiry); `HSet` / `ListPush` (tail) / `SAdd` / `ZAdd` for an
    /// aggregate, the `Stream` ops of `Stream::export` for a stream, split into mutations of at most [`EXPORT_CHUNK`] elements, then `Expire` when
    /// it expires. Replaying them into an empty shard gives the same digest. Returns the number
    /// of keys exported.
    pub(crate) fn export(&self, clock: &Clock, emit: &mut dyn FnMut(&Mutation<'_>)) -> u64 {
        let now = clock.now_ms();
        let mut keys = 0;
        for loc in self.index.iter() {
            keys += u64::from(self.export_entry(loc, now, emit));
        }
        keys
    }

    /// Emits the mutations that recreate the live key `key` (as [`Shard::export`] does for
    /// every key); `false` when it is missing or expired.
    pub(crate) fn export_key(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
        emit: &mut dyn FnMut(&Mutation<'_>),
    ) -> bool {
        match self.find(tag, key) {
            Some(loc) => self.export_entry(loc, clock.now_ms(), emit),
            None => false,
        }
    }

    /// [`Shard::export_key`] of the entry at `loc`; `false` when it expired before `now`.
    fn export_entry(&self, loc: u32, now: u64, emit: &mut dyn FnMut(&Mutation<'_>)) -> bool {
        let chunk = self.arena.chunk(loc);
        let head = arena::header(chunk);
        if head.expire_at_ms.is_some_and(|at| now > at) {
            return false;
        }
        let key = arena::key_of(chunk);
        if head.kind == arena::KIND_STRING {
            emit(&Mutation::Set {
                key,
                value: arena::value_of(chunk),
                expire_at_ms: head.expire_at_ms,
            });
            return true;
        }
        match self.objects.get(slot_of(arena::value_of(chunk))) {
            Object::Hash(hash) => {
                let pairs: Vec<(&[u8], &[u8])> = hash.iter().collect();
                for part in pairs.chunks(EXPORT_CHUNK) {
                    emit(&Mutation::HSet { key, pairs: part });
                }
            }
            Object::List(list) => {
                let items: Vec<&[u8]> = list.iter().collect();
                for part in items.chunks(EXPORT_CHUNK) {
                    emit(&Mutation::ListPush {
                        key,
                        end: crate::ListEnd::Right,
                        items: part,
                    });
                }
            }
            Object::Set(set) => {
                let members: Vec<&[u8]> = set.iter().collect();
                for part in members.chunks(EXPORT_CHUNK) {
                    emit(&Mutation::SAdd { key, members: part });
                }
            }
            Object::ZSet(zset) => {
                let entries: Vec<(f64, &[u8])> = zset.entries(0..zset.len()).collect();
                for part in entries.chunks(EXPORT_CHUNK) {
                    emit(&Mutation::ZAdd { key, entries: part });
                }
            }
            Object::Stream(stream) => stream.export(&mut |op| {
                emit(&Mutation::Stream { key, op: *op });
            }),
        }
        if let Some(expire_at_ms) = head.expire_at_ms {
            emit(&Mutation::Expire { key, expire_at_ms });
        }
        true
    }

    /// An order-independent digest of the live contents: the wrapping sum over keys of a hash
    /// of (key, type, expiry, value digest). Two shards with the same keys, types, values and
    /// expiries agree however they got there.
    pub(crate) fn digest(&self, clock: &Clock) -> u64 {
        let now = clock.now_ms();
        self.index.iter().fold(0u64, |sum, loc| {
            let chunk = self.arena.chunk(loc);
            let head = arena::header(chunk);
            if head.expire_at_ms.is_some_and(|at| now > at) {
                return sum;
            }
            let value = if head.kind == arena::KIND_STRING {
                crate::object::digest_parts(&[arena::value_of(chunk)])
            } else {
                self.objects.get(slot_of(arena::value_of(chunk))).digest()
            };
            let expiry = head.expire_at_ms.map_or([0xFF; 8], u64::to_le_bytes);
            sum.wrapping_add(crate::object::digest_parts(&[
                arena::key_of(chunk),
                &[head.kind as u8],
                &expiry,
                &value.to_le_bytes(),
            ]))
        })
    }

    /// One step of `SCAN` over this shard: the keys whose index position falls in the next
    /// window after `cursor` (positions in the index's 32-bit hash order, so the cursor means
    /// the same thing however the index grows), filtered by `pattern` and `key_type`. Returns
    /// the next cursor (`None` when the shard is done). Only the keys of database `db` are
    /// visited, returned without their namespace.
    pub(crate) fn scan(
        &self,
        cursor: u64,
        options: &crate::ScanOptions<'_>,
        clock: &Clock,
        out: &mut Vec<Vec<u8>>,
    ) -> Option<u64> {
        let crate::ScanOptions {
            pattern,
            key_type,
            count,
            db,
        } = *options;
        let now = if self.expires > 0 { clock.now_ms() } else { 0 };
        let pattern = pattern.map(|p| crate::glob::GlobPattern::new(p, false));
        self.index.scan(cursor, count, |loc| {
            let chunk = self.arena.chunk(loc);
            let (key_db, key) = fc_route::split_namespace(arena::key_of(chunk));
            if key_db != db {
                return;
            }
            let live = arena::expiry_of(chunk).is_none_or(|at| now <= at);
            if live
                && key_type.is_none_or(|t| KeyType::of_kind(arena::kind_of(chunk)) == t)
                && pattern.as_ref().is_none_or(|p| p.matches(key))
            {
                out.push(key.to_vec());
            }
        })
    }

    /// Moves the value, type and expiry of `from` to `to` (replacing what `to` held); the
    /// caller has routed both keys here. `Ok(false)` for `RENAMENX` when `to` exists.
    pub(crate) fn rename(
        &mut self,
        from: (u32, &[u8]),
        to: (u32, &[u8]),
        only_if_absent: bool,
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        let (from_tag, from_key) = from;
        let (to_tag, to_key) = to;
        let Some(loc) = self.find_live_mut(from_tag, from_key, clock) else {
            return Err(StoreError::NoSuchKey);
        };
        check_sizes(to_key, &[])?;
        if from_key == to_key {
            return Ok(!only_if_absent);
        }
        if self.find_live_mut(to_tag, to_key, clock).is_some() {
            if only_if_absent {
                return Ok(false);
            }
            self.delete(to_tag, to_key, clock);
        }
        let chunk = self.arena.chunk(loc);
        let head = arena::header(chunk);
        let value = arena::value_of(chunk).to_vec();
        let freq = if self.track_reads {
            self.arena.freq(loc)
        } else {
            0
        };
        // Out of the index and the queues under the old key, in under the new one; an object
        // keeps its slot (the new entry's value is the same slot number).
        self.index.remove_loc(from_tag, loc);
        Self::leave_queue(&mut self.queues, &self.arena, loc, head);
        self.stored_bytes -= (head.key_len + head.value_len) as u64;
        self.arena.remove(loc);
        let new_loc = match self.arena.insert(to_key, &value, head.expire_at_ms) {
            Ok(new_loc) => new_loc,
            Err(ArenaFull) => {
                // Put the old entry back where it can go (its own class has room: it just
                // freed a chunk).
                let back = self
                    .arena
                    .insert(from_key, &value, head.expire_at_ms)
                    .expect("the chunk just freed");
                self.arena.set_kind(back, head.kind);
                self.index.insert(from_tag, back);
                self.stored_bytes += (head.key_len + head.value_len) as u64;
                if self.budget != u64::MAX {
                    self.after_bounded_insert(from_tag, back, charge(head.key_len, head.value_len));
                }
                return Err(StoreError::ShardFull { shard: self.id });
            }
        };
        self.arena.set_kind(new_loc, head.kind);
        self.index.insert(to_tag, new_loc);
        let expiring = i64::from(head.expire_at_ms.is_some());
        self.namespaces.note(from_key, -1, -expiring);
        self.namespaces.note(to_key, 1, expiring);
        self.stored_bytes += (to_key.len() + value.len()) as u64;
        if self.budget != u64::MAX {
            self.after_bounded_insert(to_tag, new_loc, charge(to_key.len(), value.len()));
            if self.track_reads {
                self.arena.set_freq(new_loc, freq);
            }
        }
        Self::emit_borrowed(
            &self.sink,
            self.id,
            &mut self.seq,
            Mutation::Rename {
                from: from_key,
                to: to_key,
            },
        );
        if self.used_memory() > self.budget {
            self.shrink_to_budget(new_loc, clock);
        }
        Ok(true)
    }

    /// The stored keys (namespace included) of database `db`, live or not yet reaped.
    fn stored_keys_of_db(&self, db: u32) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        let mut cursor = 0;
        loop {
            let next = self.index.scan(cursor, 4096, |loc| {
                let key = arena::key_of(self.arena.chunk(loc));
                if fc_route::split_namespace(key).0 == db {
                    keys.push(key.to_vec());
                }
            });
            match next {
                Some(next) => cursor = next,
                None => return keys,
            }
        }
    }

    /// `FLUSHDB` of database `db` (not the whole shard: [`Shard::clear`] is that): deletes
    /// each of its keys, logged as one group. How many live keys went.
    pub(crate) fn clear_db(&mut self, db: u32, clock: &Clock) -> usize {
        if db == 0 && self.namespaces.0.is_empty() {
            let live = self.len();
            self.clear();
            return live;
        }
        if db != 0 && !self.namespaces.0.contains_key(&db) {
            return 0;
        }
        let keys = self.stored_keys_of_db(db);
        self.grouped(|shard| {
            keys.iter()
                .filter(|key| shard.delete(tag_of(fc_route::hash_bytes(key)), key, clock))
                .count()
        })
    }

    /// `SWAPDB a b` on this shard: every key of database `a` moves to `b` and every key of `b`
    /// to `a` (renames through a namespace no database uses, logged as one group).
    pub(crate) fn swap_dbs(&mut self, a: u32, b: u32, clock: &Clock) {
        if a == b {
            return;
        }
        let (keys_a, keys_b) = (self.stored_keys_of_db(a), self.stored_keys_of_db(b));
        if keys_a.is_empty() && keys_b.is_empty() {
            return;
        }
        let park = u32::MAX;
        self.grouped(|shard| {
            let mut moved = |from: &[u8], to_db: u32| {
                let user = fc_route::split_namespace(from).1;
                let to = fc_route::namespaced(to_db, user);
                let tags = (
                    tag_of(fc_route::hash_bytes(from)),
                    tag_of(fc_route::hash_bytes(&to)),
                );
                // A key that expired meanwhile is reaped by the rename's lookup.
                let _ = shard.rename((tags.0, from), (tags.1, &to), false, clock);
                to
            };
            let parked: Vec<Vec<u8>> = keys_a.iter().map(|k| moved(k, park)).collect();
            for key in &keys_b {
                moved(key, a);
            }
            for key in &parked {
                moved(key, b);
            }
        });
    }

    /// Keys and expiring keys of each database other than 0 that has keys here.
    pub(crate) fn namespace_counts(&self) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        self.namespaces
            .0
            .iter()
            .filter(|(_, c)| c.0 > 0)
            .map(|(&db, &(keys, expires))| (db, keys, expires))
    }

    /// Counters and sizes.
    pub(crate) fn stats(&self) -> ShardStatsSnapshot {
        ShardStatsSnapshot {
            shard: self.id,
            keys: self.index.len() as u64,
            expires: self.expires,
            stored_bytes: self.stored_bytes,
            allocated_bytes: (self.arena.allocated_bytes() + self.index.allocated_bytes()) as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            sets: self.sets,
            deletes: self.deletes,
            expired: self.expired,
            evicted: self.evicted,
            evicted_bytes: self.evicted_bytes,
            used_memory: self.used_memory(),
            max_memory: if self.budget >= UNLIMITED_TRACKED {
                0
            } else {
                self.budget
            },
            mutation_seq: self.seq,
        }
    }
}

/// Per-database counts of keys and expiring keys, for the databases other than 0 (keys stored
/// as `fc_route::namespaced`): `DBSIZE` and `INFO keyspace` of a database in O(1). A plain
/// key costs one byte compare per change.
#[derive(Debug, Default)]
struct Namespaces(std::collections::BTreeMap<u32, (u64, u64)>);

impl Namespaces {
    /// Adds `keys` and `expires` (each -1, 0 or 1) to the counts of `key`'s database.
    #[inline(always)]
    fn note(&mut self, key: &[u8], keys: i64, expires: i64) {
        if key.first() == Some(&fc_route::NAMESPACE_MARK) {
            self.note_marked(key, keys, expires);
        }
    }

    #[cold]
    fn note_marked(&mut self, key: &[u8], keys: i64, expires: i64) {
        let (db, _) = fc_route::split_namespace(key);
        if db == 0 {
            return;
        }
        let counts = self.0.entry(db).or_default();
        counts.0 = counts.0.wrapping_add_signed(keys);
        counts.1 = counts.1.wrapping_add_signed(expires);
        if counts.0 == 0 {
            self.0.remove(&db);
        }
    }
}
