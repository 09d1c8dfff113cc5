//! The entry arena: every entry of a shard lives in one chunk of a size-class page.
//!
//! Why: one heap allocation per entry costs 16–32 bytes of allocator overhead and a `malloc` per
//! write; a slab of fixed-size chunks costs neither, lets an overwrite of the same size class write
//! in place, and gives every entry a stable 32-bit location that the index, the expiry sweep and
//! (later) eviction share.
//!
//! ## Location (`u32`)
//! `class << 25 | index`: 7 bits of size class, 25 bits of chunk index inside the class (so at most
//! 2^25 entries per class per shard). Class [`LARGE_CLASS`] holds entries bigger than
//! [`MAX_SMALL_ENTRY`] bytes, each in its own exact-size allocation.
//!
//! ## Chunk layout (little-endian)
//! ```text
//! 0..4    word0: key length (bits 0..26) | reserved, 0 (bits 26..28) | kind (bits 28..31)
//!         | has-expiry (bit 31)
//! 4..8    value length (u32)
//! 8..16   only when has-expiry is set: absolute expiry, Unix ms (u64)
//! 8.. or 16..   key bytes, then value bytes, then unused slack up to the class size
//! ```
//! The expiry is stored only by entries that have one, so the common entry pays an 8-byte
//! header (a 16-byte key and a 64-byte value fill an 88-byte chunk, not 96). Setting an
//! expiry on an entry without one moves its key and value 8 bytes up inside its chunk when
//! the chunk's slack allows, and into the next size class otherwise
//! ([`Arena::set_expiry`] returns the new location); clearing one moves them back down.
//! Size classes are multiples of 8, so chunks are 8-byte aligned.
//!
//! A freed chunk has kind [`KIND_FREE`], so a sweep over a class can skip it.
//!
//! ## Eviction metadata beside the chunks
//! - `freq`: a 2-bit saturating access counter per chunk, 32 chunks per `AtomicU64`. A read
//!   under a shared lock bumps it with one relaxed compare-and-swap (a lost race loses one count;
//!   a saturated counter costs a load). CLOCK treats a non-zero count as "recently read";
//!   S3-FIFO uses the count. 100k entries need 25 KiB, which stay in cache. Only stores whose
//!   eviction policy reads them maintain them.
//! - `meta`: one byte per chunk, touched only with exclusive access: which S3-FIFO queue holds
//!   the entry (2 bits) and a 6-bit generation bumped whenever the chunk is freed, so a queue
//!   can tell its stale positions from the entry now living in a reused chunk.

use crate::copy::{copy_large, extend_large};
use std::sync::atomic::{AtomicU64, Ordering};

/// Header bytes in front of an entry without an expiry (word0 and the value length).
pub(crate) const HEADER: usize = 8;
/// Header bytes in front of an entry with an expiry (the expiry follows the value length).
pub(crate) const EXPIRY_HEADER: usize = 16;
/// Largest entry (header + key + value) stored in a shared page; larger ones get their own
/// allocation.
pub(crate) const MAX_SMALL_ENTRY: usize = 16 * 1024;
/// Keys are limited to 2^26 - 1 bytes (64 MiB) by the header format.
pub(crate) const MAX_KEY_LEN: usize = (1 << 26) - 1;
/// Values are limited to 2^32 - 1 bytes by the header format.
pub(crate) const MAX_VALUE_LEN: usize = u32::MAX as usize;

const INDEX_BITS: u32 = 25;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
pub(crate) const MAX_CHUNKS_PER_CLASS: u32 = 1 << INDEX_BITS;
/// The class of individually allocated large entries.
pub(crate) const LARGE_CLASS: u32 = 127;
/// Target bytes of one page of small chunks.
const PAGE_TARGET: usize = 64 * 1024;

/// Entry kind: a string value.
pub(crate) const KIND_STRING: u32 = 0;
/// Entry kinds of Redis objects: the value is the 4-byte slot of the object in the shard.
pub(crate) const KIND_HASH: u32 = 1;
pub(crate) const KIND_LIST: u32 = 2;
pub(crate) const KIND_SET: u32 = 3;
pub(crate) const KIND_ZSET: u32 = 4;
pub(crate) const KIND_STREAM: u32 = 5;
const KIND_BITS: u32 = 7 << 28;
/// Kind of a freed chunk.
const KIND_FREE: u32 = 7;
const KEY_LEN_MASK: u32 = (1 << 26) - 1;
const HAS_EXPIRY: u32 = 1 << 31;

/// Size classes: multiples of 8, growing by at most 6.25% (so slack is at most ~6%).
const fn build_classes() -> ([u32; 128], usize) {
    let mut sizes = [0u32; 128];
    let mut n = 0;
    let mut s: u32 = 16;
    while s as usize <= MAX_SMALL_ENTRY {
        sizes[n] = s;
        n += 1;
        let grown = (s + s / 16 + 7) & !7;
        s = if grown < s + 8 { s + 8 } else { grown };
    }
    if sizes[n - 1] as usize != MAX_SMALL_ENTRY {
        sizes[n] = MAX_SMALL_ENTRY as u32;
        n += 1;
    }
    (sizes, n)
}

const CLASSES: ([u32; 128], usize) = build_classes();
const CLASS_COUNT: usize = CLASSES.1;
const _: () = assert!(CLASS_COUNT < LARGE_CLASS as usize);

/// `SIZE_TO_CLASS[(len + 7) / 8]` is the smallest class holding `len` bytes.
const SIZE_TO_CLASS: [u8; MAX_SMALL_ENTRY / 8 + 1] = {
    let mut table = [0u8; MAX_SMALL_ENTRY / 8 + 1];
    let mut slot = 0;
    let mut class = 0;
    while slot < table.len() {
        while (CLASSES.0[class] as usize) < slot * 8 {
            class += 1;
        }
        table[slot] = class as u8;
        slot += 1;
    }
    table
};

/// Header bytes of an entry with or without an expiry.
#[inline(always)]
pub(crate) const fn header_len(has_expiry: bool) -> usize {
    if has_expiry { EXPIRY_HEADER } else { HEADER }
}

/// Header bytes of the entry whose first word is `word0`.
#[inline(always)]
const fn header_len_of(word0: u32) -> usize {
    HEADER + ((word0 >> 31) as usize) * (EXPIRY_HEADER - HEADER)
}

/// Bytes of arena memory an entry of `key_len + value_len` bytes occupies: its chunk's whole
/// size class (header and slack included), or its exact allocation when large.
#[inline]
pub(crate) fn footprint(key_len: usize, value_len: usize, has_expiry: bool) -> usize {
    let len = header_len(has_expiry) + key_len + value_len;
    match class_for(len) {
        LARGE_CLASS => len,
        class => CLASSES.0[class as usize] as usize,
    }
}

/// The size class for an entry of `len` bytes (header included).
#[inline]
pub(crate) fn class_for(len: usize) -> u32 {
    if len <= MAX_SMALL_ENTRY {
        u32::from(SIZE_TO_CLASS[len.div_ceil(8)])
    } else {
        LARGE_CLASS
    }
}

#[inline]
pub(crate) const fn class_of(loc: u32) -> u32 {
    loc >> INDEX_BITS
}

#[inline]
const fn index_of(loc: u32) -> u32 {
    loc & INDEX_MASK
}

#[inline]
const fn make_loc(class: u32, index: u32) -> u32 {
    (class << INDEX_BITS) | index
}

/// Decoded chunk header.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub(crate) key_len: usize,
    pub(crate) value_len: usize,
    pub(crate) kind: u32,
    pub(crate) expire_at_ms: Option<u64>,
}

#[inline(always)]
fn read_u32(chunk: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&chunk[at..at + 4]);
    u32::from_le_bytes(word)
}

#[inline(always)]
pub(crate) fn header(chunk: &[u8]) -> Header {
    let word0 = read_u32(chunk, 0);
    let value_len = read_u32(chunk, 4) as usize;
    let expire_at_ms = if word0 & HAS_EXPIRY != 0 {
        let mut word = [0u8; 8];
        word.copy_from_slice(&chunk[8..16]);
        Some(u64::from_le_bytes(word))
    } else {
        None
    };
    Header {
        key_len: (word0 & KEY_LEN_MASK) as usize,
        value_len,
        kind: (word0 >> 28) & 7,
        expire_at_ms,
    }
}

#[inline(always)]
pub(crate) fn key_of(chunk: &[u8]) -> &[u8] {
    let word0 = read_u32(chunk, 0);
    let at = header_len_of(word0);
    &chunk[at..at + (word0 & KEY_LEN_MASK) as usize]
}

#[inline(always)]
pub(crate) fn value_of(chunk: &[u8]) -> &[u8] {
    &chunk[value_range(chunk)]
}

/// Where the value lies in `chunk`.
#[inline(always)]
pub(crate) fn value_range(chunk: &[u8]) -> std::ops::Range<usize> {
    let word0 = read_u32(chunk, 0);
    let at = header_len_of(word0) + (word0 & KEY_LEN_MASK) as usize;
    let value_len = read_u32(chunk, 4) as usize;
    at..at + value_len
}

/// Non-zero unless the entry is a string without an expiry (one test for the common case).
#[inline(always)]
pub(crate) fn special_bits(chunk: &[u8]) -> u32 {
    read_u32(chunk, 0) & (HAS_EXPIRY | KIND_BITS)
}

/// The entry's kind.
#[inline(always)]
pub(crate) fn kind_of(chunk: &[u8]) -> u32 {
    (read_u32(chunk, 0) >> 28) & 7
}

/// Expiry of the entry, if any, without decoding the rest.
#[inline(always)]
pub(crate) fn expiry_of(chunk: &[u8]) -> Option<u64> {
    if read_u32(chunk, 0) & HAS_EXPIRY == 0 {
        return None;
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(&chunk[8..16]);
    Some(u64::from_le_bytes(word))
}

/// Writes word0 (the has-expiry bit from `has_expiry`; the expiry itself is written apart).
#[inline]
fn write_word0(chunk: &mut [u8], key_len: usize, kind: u32, has_expiry: bool) {
    let mut word0 = key_len as u32 | (kind << 28);
    if has_expiry {
        word0 |= HAS_EXPIRY;
    }
    chunk[0..4].copy_from_slice(&word0.to_le_bytes());
}

/// Writes the header of a string entry; returns where its key starts.
#[inline]
fn write_header(
    chunk: &mut [u8],
    key_len: usize,
    value_len: usize,
    expire_at_ms: Option<u64>,
) -> usize {
    write_word0(chunk, key_len, KIND_STRING, expire_at_ms.is_some());
    chunk[4..8].copy_from_slice(&(value_len as u32).to_le_bytes());
    if let Some(at) = expire_at_ms {
        chunk[8..16].copy_from_slice(&at.to_le_bytes());
    }
    header_len(expire_at_ms.is_some())
}

/// Writes a whole entry at the start of `chunk`.
#[inline]
fn write_entry(chunk: &mut [u8], key: &[u8], value: &[u8], expire_at_ms: Option<u64>) {
    let at = write_header(chunk, key.len(), value.len(), expire_at_ms);
    chunk[at..at + key.len()].copy_from_slice(key);
    let at = at + key.len();
    copy_large(&mut chunk[at..at + value.len()], value);
}

/// A large entry in its own exact-size allocation, written once (no zero-fill first: at 64 KiB
/// the memset cost as much as the copy).
fn large_entry(key: &[u8], value: &[u8], expire_at_ms: Option<u64>) -> Box<[u8]> {
    let mut header = [0u8; EXPIRY_HEADER];
    let at = write_header(&mut header, key.len(), value.len(), expire_at_ms);
    let mut data = Vec::with_capacity(at + key.len() + value.len());
    data.extend_from_slice(&header[..at]);
    data.extend_from_slice(key);
    extend_large(&mut data, value);
    data.into_boxed_slice()
}

/// An entry (no expiry) in an allocation of its own, built without the shard: what
/// [`Arena::insert_built`] and [`Arena::replace_built`] take.
pub(crate) fn built_entry(key: &[u8], value: &[u8]) -> Box<[u8]> {
    large_entry(key, value, None)
}

/// [`built_entry`] into an allocation of exactly its length (an old entry's, reused).
pub(crate) fn rebuild_entry(data: &mut [u8], key: &[u8], value: &[u8]) {
    debug_assert_eq!(data.len(), HEADER + key.len() + value.len());
    write_entry(data, key, value, None);
}

/// Rewrites the value (and expiry) of an entry whose key stays in its chunk (moved 8 bytes up
/// or down when the expiry comes or goes); the chunk must hold the new entry.
#[inline]
fn write_value(chunk: &mut [u8], key_len: usize, value: &[u8], expire_at_ms: Option<u64>) {
    let from = header_len_of(read_u32(chunk, 0));
    let at = header_len(expire_at_ms.is_some());
    if from != at {
        chunk.copy_within(from..from + key_len, at);
    }
    write_header(chunk, key_len, value.len(), expire_at_ms);
    let at = at + key_len;
    copy_large(&mut chunk[at..at + value.len()], value);
}

/// A chunk's place in its arena ([`Arena::span`]), or a range inside it ([`Span::narrow`]),
/// valid until the arena changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// The region of a size-class chunk, or [`LARGE_SPAN`].
    region: u32,
    /// The index of a large allocation.
    large: u32,
    start: usize,
    end: usize,
}

impl Span {
    /// The part `range` of this span (offsets from its start). Panics when `range` reaches
    /// past the span, as slicing the span's bytes would (a header never says so).
    #[inline(always)]
    pub(crate) fn narrow(self, range: std::ops::Range<usize>) -> Span {
        assert!(
            range.start <= range.end && range.end <= self.end - self.start,
            "range {range:?} outside a span of {} bytes",
            self.end - self.start
        );
        Span {
            start: self.start + range.start,
            end: self.start + range.end,
            ..self
        }
    }
}

/// `Span::region` of a large allocation.
const LARGE_SPAN: u32 = u32::MAX;

/// Where a page of a size class lives: a region and a byte offset in it.
#[derive(Debug, Clone, Copy)]
struct PageRef {
    region: u32,
    offset: u32,
}

/// Smallest region: one page of the largest size.
const MIN_REGION: usize = PAGE_TARGET;
/// Largest region: one transparent huge page on x86-64 and aarch64 (4 KiB base pages).
const MAX_REGION: usize = 2 << 20;
/// Regions are advised into huge pages once the shard already maps this much: a huge page is
/// resident in full as soon as it is touched, so a shard can hold up to one region's worth of
/// unused tail; from 8 MiB on that is at most a fifth of the shard, and shrinking.
const HUGE_FROM: usize = 8 << 20;

/// The memory behind a shard's pages: anonymous mappings that grow geometrically from 64 KiB to
/// 2 MiB. Once a shard maps 8 MiB, new regions are advised `MADV_HUGEPAGE` (Linux), so a large
/// shard's entries sit in huge pages and a random read misses the TLB far less (the dominant cost of a read on a
/// virtual machine with nested paging). Pages are carved from the newest region; the tail that
/// does not fit the next page is left unused (under 64 KiB per region).
#[derive(Debug, Default)]
struct Regions {
    maps: Vec<memmap2::MmapMut>,
    used: usize,
    total: usize,
}

impl Regions {
    fn alloc(&mut self, bytes: usize) -> PageRef {
        let room = self.maps.last().map_or(0, |m| m.len() - self.used);
        if room < bytes {
            let size = self.total.clamp(MIN_REGION, MAX_REGION).max(bytes);
            let map = memmap2::MmapMut::map_anon(size).unwrap_or_else(|err| {
                // Same outcome as a failed heap allocation.
                panic!("fast-cache: mapping {size} bytes for a shard's entries failed: {err}")
            });
            #[cfg(target_os = "linux")]
            if size == MAX_REGION && self.total >= HUGE_FROM {
                // Advisory only: without transparent huge pages the region works the same.
                let _ = map.advise(memmap2::Advice::HugePage);
            }
            self.total += size;
            self.maps.push(map);
            self.used = 0;
        }
        let page = PageRef {
            region: (self.maps.len() - 1) as u32,
            offset: self.used as u32,
        };
        self.used += bytes;
        page
    }
}

/// One size class: pages of equal chunks, a free list and a bump index.
#[derive(Debug)]
struct SizeClass {
    chunk_bytes: u32,
    per_page_shift: u32,
    pages: Vec<PageRef>,
    free: Vec<u32>,
    bump: u32,
    freq: Vec<AtomicU64>,
    meta: Vec<u8>,
}

impl SizeClass {
    fn new(chunk_bytes: u32) -> Self {
        let per_page = (PAGE_TARGET / chunk_bytes as usize).max(1);
        Self {
            chunk_bytes,
            per_page_shift: usize::BITS - 1 - per_page.leading_zeros(),
            pages: Vec::new(),
            free: Vec::new(),
            bump: 0,
            freq: Vec::new(),
            meta: Vec::new(),
        }
    }

    /// Sizes `freq` and `meta` for every chunk of the class's pages.
    fn grow_metadata(&mut self) {
        let chunks = self.pages.len() << self.per_page_shift;
        self.freq
            .resize_with(chunks.div_ceil(32), AtomicU64::default);
        self.meta.resize(chunks, 0);
    }

    /// Region and byte range of chunk `index`.
    #[inline(always)]
    fn locate(&self, index: u32) -> (usize, usize, usize) {
        let page = self.pages[(index >> self.per_page_shift) as usize];
        let within =
            (index & ((1 << self.per_page_shift) - 1)) as usize * self.chunk_bytes as usize;
        let start = page.offset as usize + within;
        (
            page.region as usize,
            start,
            start + self.chunk_bytes as usize,
        )
    }

    fn page_bytes(&self) -> usize {
        (self.chunk_bytes as usize) << self.per_page_shift
    }

    /// Returns a free chunk index and whether it needs a new page first; `None` when the class
    /// is full.
    fn alloc(&mut self) -> Option<(u32, bool)> {
        if let Some(index) = self.free.pop() {
            return Some((index, false));
        }
        if self.bump >= MAX_CHUNKS_PER_CLASS {
            return None;
        }
        let index = self.bump;
        self.bump += 1;
        Some((
            index,
            (index >> self.per_page_shift) as usize == self.pages.len(),
        ))
    }
}

/// Error: a size class of one shard has no chunk index left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ArenaFull;

/// All entries of one shard.
#[derive(Debug)]
pub(crate) struct Arena {
    classes: Vec<SizeClass>,
    regions: Regions,
    large: Vec<Box<[u8]>>,
    large_free: Vec<u32>,
    large_freq: Vec<AtomicU64>,
    large_meta: Vec<u8>,
    /// The allocation of the large entry removed last, kept for the next large insert of the same
    /// size: a bounded cache overwriting same-size values (evict one, insert one) then skips the
    /// allocator's free and malloc, and their page faults once the heap is trimmed. Counted in
    /// `allocated_bytes` while held.
    large_spare: Option<Box<[u8]>>,
    /// Large allocations replaced by built entries, not yet handed to the caller
    /// ([`Arena::take_retired`]). Not counted in `allocated_bytes`.
    retired: Vec<Box<[u8]>>,
    allocated_bytes: usize,
    /// Sum of the footprints of live entries (see [`footprint`]).
    live_bytes: usize,
    /// Whether the eviction metadata (`freq`, `meta`) is kept: only for bounded shards, so an
    /// unbounded store pays neither its memory (~1.3 bytes per entry) nor its upkeep.
    eviction_metadata: bool,
}

impl Arena {
    pub(crate) fn new() -> Self {
        let classes = CLASSES.0[..CLASS_COUNT]
            .iter()
            .map(|&bytes| SizeClass::new(bytes))
            .collect();
        Self {
            classes,
            regions: Regions::default(),
            large: Vec::new(),
            large_free: Vec::new(),
            large_freq: Vec::new(),
            large_meta: Vec::new(),
            large_spare: None,
            retired: Vec::new(),
            allocated_bytes: 0,
            live_bytes: 0,
            eviction_metadata: false,
        }
    }

    /// Bytes held in page regions and large allocations (slack, free chunks and region tails
    /// included).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.allocated_bytes
    }

    /// Starts keeping the eviction metadata for every chunk (a bounded shard calls this).
    pub(crate) fn keep_eviction_metadata(&mut self) {
        if self.eviction_metadata {
            return;
        }
        self.eviction_metadata = true;
        for class in &mut self.classes {
            class.grow_metadata();
        }
        self.large_freq
            .resize_with(self.large.len().div_ceil(32), AtomicU64::default);
        self.large_meta.resize(self.large.len(), 0);
    }

    /// Sum of the footprints of the live entries: what a memory budget charges for them.
    pub(crate) fn live_bytes(&self) -> usize {
        self.live_bytes
    }

    /// The whole chunk (or large allocation) of `loc`.
    #[inline(always)]
    pub(crate) fn chunk(&self, loc: u32) -> &[u8] {
        self.at(self.span(loc))
    }

    /// Where the chunk of `loc` lies: the class and page tables read once, so a lookup that
    /// compares the key and then reads the header and the value resolves `loc` once.
    #[inline(always)]
    pub(crate) fn span(&self, loc: u32) -> Span {
        let class = class_of(loc);
        if class == LARGE_CLASS {
            let large = index_of(loc);
            Span {
                region: LARGE_SPAN,
                large,
                start: 0,
                end: self.large[large as usize].len(),
            }
        } else {
            let (region, start, end) = self.classes[class as usize].locate(index_of(loc));
            Span {
                region: region as u32,
                large: 0,
                start,
                end,
            }
        }
    }

    /// The bytes of a span taken from this arena since its last change (a stale span is a
    /// wrong chunk or a panic, never unsafety).
    #[inline(always)]
    pub(crate) fn at(&self, span: Span) -> &[u8] {
        if span.region == LARGE_SPAN {
            &self.large[span.large as usize][span.start..span.end]
        } else {
            &self.regions.maps[span.region as usize][span.start..span.end]
        }
    }

    #[inline(always)]
    fn chunk_mut(&mut self, loc: u32) -> &mut [u8] {
        let class = class_of(loc);
        if class == LARGE_CLASS {
            &mut self.large[index_of(loc) as usize]
        } else {
            let (region, start, end) = self.classes[class as usize].locate(index_of(loc));
            &mut self.regions.maps[region][start..end]
        }
    }

    #[inline(always)]
    pub(crate) fn key(&self, loc: u32) -> &[u8] {
        key_of(self.chunk(loc))
    }

    #[inline(always)]
    pub(crate) fn value(&self, loc: u32) -> &[u8] {
        value_of(self.chunk(loc))
    }

    /// Stores a new entry and returns its location.
    pub(crate) fn insert(
        &mut self,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull> {
        let len = header_len(expire_at_ms.is_some()) + key.len() + value.len();
        let class = class_for(len);
        let loc = if class == LARGE_CLASS {
            let data = match self.large_spare.take() {
                Some(mut spare) if spare.len() == len => {
                    // Already counted in `allocated_bytes`.
                    self.allocated_bytes -= len;
                    write_entry(&mut spare, key, value, expire_at_ms);
                    spare
                }
                other => {
                    if let Some(spare) = other {
                        self.allocated_bytes -= spare.len();
                    }
                    large_entry(key, value, expire_at_ms)
                }
            };
            self.place_large(data)?
        } else {
            let size_class = &mut self.classes[class as usize];
            let (index, new_page) = size_class.alloc().ok_or(ArenaFull)?;
            if new_page {
                let bytes = size_class.page_bytes();
                let before = self.regions.total;
                size_class.pages.push(self.regions.alloc(bytes));
                if self.eviction_metadata {
                    size_class.grow_metadata();
                }
                self.allocated_bytes += self.regions.total - before;
            }
            self.live_bytes += size_class.chunk_bytes as usize;
            let loc = make_loc(class, index);
            write_entry(self.chunk_mut(loc), key, value, expire_at_ms);
            loc
        };
        Ok(loc)
    }

    /// Gives a large entry's own allocation (header, key and value written) a slot.
    fn place_large(&mut self, data: Box<[u8]>) -> Result<u32, ArenaFull> {
        let index = match self.large_free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(self.large.len()).map_err(|_| ArenaFull)?;
                if index >= MAX_CHUNKS_PER_CLASS {
                    return Err(ArenaFull);
                }
                self.large.push(Box::default());
                if self.eviction_metadata {
                    self.large_freq
                        .resize_with(self.large.len().div_ceil(32), AtomicU64::default);
                    self.large_meta.resize(self.large.len(), 0);
                }
                index
            }
        };
        self.allocated_bytes += data.len();
        self.live_bytes += data.len();
        self.large[index as usize] = data;
        Ok(make_loc(LARGE_CLASS, index))
    }

    /// Stores an entry built by [`built_entry`]: a large one moves in as it is (no copy),
    /// a small one is copied into a chunk of its class.
    pub(crate) fn insert_built(&mut self, data: Box<[u8]>) -> Result<u32, ArenaFull> {
        if class_for(data.len()) == LARGE_CLASS {
            self.place_large(data)
        } else {
            self.insert(key_of(&data), value_of(&data), expiry_of(&data))
        }
    }

    /// Replaces the entry at `loc` (same key) with one built by [`built_entry`], as
    /// [`Arena::replace`] does; a large allocation it replaces goes to the retired list
    /// ([`Arena::take_retired`]), to be freed once the shard's lock is released.
    pub(crate) fn replace_built(&mut self, loc: u32, data: Box<[u8]>) -> Result<u32, ArenaFull> {
        if class_for(data.len()) != LARGE_CLASS {
            return self.replace(loc, key_of(&data), value_of(&data), expiry_of(&data));
        }
        if class_of(loc) == LARGE_CLASS {
            let len = data.len();
            let old = std::mem::replace(&mut self.large[index_of(loc) as usize], data);
            self.allocated_bytes = self.allocated_bytes + len - old.len();
            self.live_bytes = self.live_bytes + len - old.len();
            self.retired.push(old);
            return Ok(loc);
        }
        let new_loc = self.place_large(data)?;
        self.remove(loc);
        Ok(new_loc)
    }

    /// The large allocations replaced by built entries since the last call: the caller
    /// drops them after unlocking (freeing megabytes can mean an `munmap`).
    pub(crate) fn take_retired(&mut self) -> Vec<Box<[u8]>> {
        std::mem::take(&mut self.retired)
    }

    /// Replaces the value of the entry at `loc` (its key is `key`). Writes in place when the new
    /// entry needs the same size class (or the same large size); otherwise moves it and returns the
    /// new location.
    pub(crate) fn replace(
        &mut self,
        loc: u32,
        key: &[u8],
        value: &[u8],
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull> {
        let len = header_len(expire_at_ms.is_some()) + key.len() + value.len();
        let class = class_of(loc);
        let fits = if class == LARGE_CLASS {
            self.large[index_of(loc) as usize].len() == len
        } else {
            class_for(len) == class
        };
        if fits {
            write_value(self.chunk_mut(loc), key.len(), value, expire_at_ms);
            return Ok(loc);
        }
        if class == LARGE_CLASS && class_for(len) == LARGE_CLASS {
            // Same large slot, new exact-size allocation.
            let data = large_entry(key, value, expire_at_ms);
            let old = std::mem::replace(&mut self.large[index_of(loc) as usize], data);
            self.allocated_bytes = self.allocated_bytes + len - old.len();
            self.live_bytes = self.live_bytes + len - old.len();
            return Ok(loc);
        }
        let new_loc = self.insert(key, value, expire_at_ms)?;
        self.remove(loc);
        Ok(new_loc)
    }

    /// Marks the entry at `loc` as holding an object of `kind`.
    pub(crate) fn set_kind(&mut self, loc: u32, kind: u32) {
        let chunk = self.chunk_mut(loc);
        let head = header(chunk);
        write_word0(chunk, head.key_len, kind, head.expire_at_ms.is_some());
    }

    /// Sets or clears the expiry of the entry at `loc`, and returns its location: the same one
    /// unless an expiry was added and the chunk has no 8 bytes of slack for it, in which case
    /// the entry moved to the next size class (with its kind and its read count; the caller
    /// re-queues it) and the old chunk is free. A large entry keeps its slot.
    pub(crate) fn set_expiry(
        &mut self,
        loc: u32,
        expire_at_ms: Option<u64>,
    ) -> Result<u32, ArenaFull> {
        let chunk = self.chunk_mut(loc);
        let head = header(chunk);
        let body = head.key_len + head.value_len;
        match (head.expire_at_ms.is_some(), expire_at_ms) {
            (true, Some(at)) => chunk[8..16].copy_from_slice(&at.to_le_bytes()),
            (false, None) => {}
            (true, None) => {
                chunk.copy_within(EXPIRY_HEADER..EXPIRY_HEADER + body, HEADER);
                write_word0(chunk, head.key_len, head.kind, false);
            }
            (false, Some(at)) if chunk.len() >= EXPIRY_HEADER + body => {
                chunk.copy_within(HEADER..HEADER + body, EXPIRY_HEADER);
                chunk[8..16].copy_from_slice(&at.to_le_bytes());
                write_word0(chunk, head.key_len, head.kind, true);
            }
            (false, Some(_)) if class_of(loc) == LARGE_CLASS => {}
            (false, Some(at)) => {
                // A small chunk (at most 16 KiB): copied out, as `insert` needs the arena.
                let body = chunk[HEADER..HEADER + body].to_vec();
                let (key, value) = body.split_at(head.key_len);
                let new_loc = self.insert(key, value, Some(at))?;
                self.set_kind(new_loc, head.kind);
                if self.eviction_metadata {
                    let freq = self.freq(loc);
                    self.remove(loc);
                    self.set_freq(new_loc, freq);
                } else {
                    self.remove(loc);
                }
                return Ok(new_loc);
            }
        }
        if let (None, Some(at)) = (head.expire_at_ms, expire_at_ms)
            && class_of(loc) == LARGE_CLASS
        {
            // A large entry without slack: a new exact-size allocation in the same slot, built
            // straight from the old one (one copy of the value).
            let index = index_of(loc) as usize;
            let old = &self.large[index];
            let data = large_entry(key_of(old), value_of(old), Some(at));
            let grown = data.len() - old.len();
            self.allocated_bytes += grown;
            self.live_bytes += grown;
            self.large[index] = data;
            self.set_kind(loc, head.kind);
        }
        Ok(loc)
    }

    /// The counter word of `loc` and the counter's bit offset in it.
    #[inline(always)]
    fn freq_slot(&self, loc: u32) -> (&AtomicU64, u32) {
        let class = class_of(loc);
        let index = index_of(loc) as usize;
        let words = if class == LARGE_CLASS {
            &self.large_freq
        } else {
            &self.classes[class as usize].freq
        };
        (&words[index / 32], (index % 32) as u32 * 2)
    }

    #[inline(always)]
    fn freq_slot_mut(&mut self, loc: u32) -> (&mut u64, u32) {
        let class = class_of(loc);
        let index = index_of(loc) as usize;
        let words = if class == LARGE_CLASS {
            &mut self.large_freq
        } else {
            &mut self.classes[class as usize].freq
        };
        (words[index / 32].get_mut(), (index % 32) as u32 * 2)
    }

    /// Counts one read of the entry at `loc` (shared access: one relaxed compare-and-swap,
    /// none once the counter is saturated at 3).
    #[inline(always)]
    pub(crate) fn bump_freq(&self, loc: u32) {
        let (word, shift) = self.freq_slot(loc);
        let current = word.load(Ordering::Relaxed);
        if (current >> shift) & 3 != 3 {
            let _ = word.compare_exchange(
                current,
                current + (1 << shift),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// [`Arena::bump_freq`] with exclusive access (no atomic instruction).
    #[inline(always)]
    pub(crate) fn bump_freq_mut(&mut self, loc: u32) {
        let (word, shift) = self.freq_slot_mut(loc);
        if (*word >> shift) & 3 != 3 {
            *word += 1 << shift;
        }
    }

    /// The access counter of `loc` (0..=3).
    pub(crate) fn freq(&mut self, loc: u32) -> u8 {
        let (word, shift) = self.freq_slot_mut(loc);
        ((*word >> shift) & 3) as u8
    }

    /// Sets the access counter of `loc` (0..=3).
    pub(crate) fn set_freq(&mut self, loc: u32, value: u8) {
        let (word, shift) = self.freq_slot_mut(loc);
        *word = (*word & !(3 << shift)) | (u64::from(value & 3) << shift);
    }

    /// Clears the counter of `loc` and returns whether it was non-zero (CLOCK's second chance).
    pub(crate) fn take_mark(&mut self, loc: u32) -> bool {
        let was = self.freq(loc) != 0;
        self.set_freq(loc, 0);
        was
    }

    /// The queue byte of `loc`: generation (6 bits) << 2 | queue (2 bits).
    pub(crate) fn meta(&self, loc: u32) -> u8 {
        let class = class_of(loc);
        let index = index_of(loc) as usize;
        if class == LARGE_CLASS {
            self.large_meta[index]
        } else {
            self.classes[class as usize].meta[index]
        }
    }

    /// Sets the queue byte of `loc`.
    pub(crate) fn set_meta(&mut self, loc: u32, byte: u8) {
        let class = class_of(loc);
        let index = index_of(loc) as usize;
        if class == LARGE_CLASS {
            self.large_meta[index] = byte;
        } else {
            self.classes[class as usize].meta[index] = byte;
        }
    }

    /// Frees the chunk at `loc`.
    pub(crate) fn remove(&mut self, loc: u32) {
        if self.eviction_metadata {
            self.set_freq(loc, 0);
            // Out of any queue, and a new generation for whoever reuses the chunk.
            let byte = (self.meta(loc) & !3).wrapping_add(4);
            self.set_meta(loc, byte);
        }
        let class = class_of(loc);
        let index = index_of(loc);
        if class == LARGE_CLASS {
            let old = std::mem::take(&mut self.large[index as usize]);
            self.live_bytes -= old.len();
            self.large_free.push(index);
            // Keep the newest removed allocation for the next insert; drop the one it replaces.
            if let Some(dropped) = self.large_spare.replace(old) {
                self.allocated_bytes -= dropped.len();
            }
        } else {
            self.live_bytes -= self.classes[class as usize].chunk_bytes as usize;
            write_word0(self.chunk_mut(loc), 0, KIND_FREE, false);
            self.classes[class as usize].free.push(index);
        }
    }

    /// Drops every page and large allocation.
    pub(crate) fn clear(&mut self) {
        let keep_metadata = self.eviction_metadata;
        *self = Self::new();
        if keep_metadata {
            self.keep_eviction_metadata();
        }
    }

    /// The next chunk location at or after `cursor` in sweep order (classes in order, then large
    /// entries), live or not, or `None` when the sweep is past the end.
    pub(crate) fn sweep_next(&self, cursor: u32) -> Option<u32> {
        let mut class = class_of(cursor);
        let mut index = index_of(cursor);
        loop {
            if class == LARGE_CLASS {
                return ((index as usize) < self.large.len()).then(|| make_loc(class, index));
            }
            if let Some(size_class) = self.classes.get(class as usize) {
                if index < size_class.bump {
                    return Some(make_loc(class, index));
                }
                class += 1;
            } else {
                class = LARGE_CLASS;
            }
            index = 0;
        }
    }

    /// Whether the chunk at `loc` holds an entry (not a freed chunk).
    #[inline]
    pub(crate) fn is_live(&self, loc: u32) -> bool {
        let chunk = self.chunk(loc);
        !chunk.is_empty() && (read_u32(chunk, 0) >> 28) & 7 != KIND_FREE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_ordered_with_bounded_slack() {
        let sizes = &CLASSES.0[..CLASS_COUNT];
        assert_eq!(sizes[0], 16);
        assert_eq!(*sizes.last().unwrap() as usize, MAX_SMALL_ENTRY);
        for pair in sizes.windows(2) {
            assert!(pair[0] < pair[1]);
            assert_eq!(pair[1] % 8, 0);
            // Slack for the smallest entry of the next class is under 6.25% (or 8 bytes).
            assert!(pair[1] - pair[0] <= (pair[0] / 16 + 8).max(8));
        }
        for len in 0..=MAX_SMALL_ENTRY {
            let class = class_for(len) as usize;
            assert!(CLASSES.0[class] as usize >= len, "len {len}");
            assert!(
                class == 0 || (CLASSES.0[class - 1] as usize) < len,
                "len {len}"
            );
        }
        assert_eq!(class_for(MAX_SMALL_ENTRY + 1), LARGE_CLASS);
    }

    #[test]
    fn insert_replace_remove_round_trip() {
        let mut arena = Arena::new();
        arena.keep_eviction_metadata();
        // With an expiry from the start, so the rewrites below keep the size class.
        let a = arena.insert(b"key", b"value", Some(1)).unwrap();
        assert_eq!(arena.key(a), b"key");
        assert_eq!(arena.value(a), b"value");
        let same = arena.replace(a, b"key", b"VALUE", Some(42)).unwrap();
        assert_eq!(same, a, "same class rewrites in place");
        assert_eq!(header(arena.chunk(a)).expire_at_ms, Some(42));
        assert_eq!(arena.freq(a), 0);
        arena.bump_freq_mut(a);
        let same = arena.replace(a, b"key", b"VALU2", Some(42)).unwrap();
        assert_eq!(
            (same, arena.freq(a)),
            (a, 1),
            "in-place overwrite keeps the count"
        );
        assert_eq!(arena.value(a), b"VALU2");
        let big = vec![7u8; 100_000];
        let moved = arena.replace(a, b"key", &big, None).unwrap();
        assert_eq!(class_of(moved), LARGE_CLASS);
        assert!(!arena.is_live(a));
        assert_eq!(arena.value(moved), &big[..]);
        for _ in 0..5 {
            arena.bump_freq_mut(moved);
        }
        assert_eq!(arena.freq(moved), 3, "saturates");
        assert_eq!(arena.set_expiry(moved, Some(7)).unwrap(), moved);
        assert_eq!(arena.freq(moved), 3, "expiry changes keep the count");
        let again = arena.replace(moved, b"key", &big[..50_000], None).unwrap();
        assert_eq!(again, moved, "large entries keep their slot");
        arena.remove(again);
        assert_eq!(arena.sweep_next(0), Some(a));
    }

    #[test]
    fn an_entry_without_expiry_pays_an_8_byte_header() {
        // 16-byte key, 64-byte value: 88 bytes, its own class.
        assert_eq!(footprint(16, 64, false), 88);
        assert_eq!(footprint(16, 64, true), 96);
        let mut arena = Arena::new();
        let a = arena.insert(&[1u8; 16], &[2u8; 64], None).unwrap();
        assert_eq!(arena.chunk(a).len(), 88);
        assert_eq!(arena.live_bytes(), 88);
        let b = arena.insert(&[1u8; 16], &[2u8; 64], Some(5)).unwrap();
        assert_eq!(arena.chunk(b).len(), 96);
        assert_eq!(expiry_of(arena.chunk(b)), Some(5));
    }

    /// Key, value, kind and expiry of the entry at `loc`.
    fn entry(arena: &Arena, loc: u32) -> (Vec<u8>, Vec<u8>, u32, Option<u64>) {
        let chunk = arena.chunk(loc);
        let head = header(chunk);
        (
            key_of(chunk).to_vec(),
            value_of(chunk).to_vec(),
            head.kind,
            head.expire_at_ms,
        )
    }

    #[test]
    fn expiry_changes_move_the_entry_in_its_chunk_or_to_the_next_class() {
        let mut arena = Arena::new();
        arena.keep_eviction_metadata();
        // 8 + 16 + 64 = 88 fills its chunk exactly: an expiry needs the next class.
        let (key, value) = (vec![3u8; 16], vec![4u8; 64]);
        let full = arena.insert(&key, &value, None).unwrap();
        arena.set_kind(full, KIND_HASH);
        arena.bump_freq_mut(full);
        let moved = arena.set_expiry(full, Some(99)).unwrap();
        assert_ne!(moved, full);
        assert!(!arena.is_live(full));
        assert_eq!(
            entry(&arena, moved),
            (key.clone(), value.clone(), KIND_HASH, Some(99))
        );
        assert_eq!(arena.freq(moved), 1, "the read count moves along");
        assert_eq!(arena.live_bytes(), 96);
        // Changing an existing expiry, then clearing it: in place.
        assert_eq!(arena.set_expiry(moved, Some(7)).unwrap(), moved);
        assert_eq!(entry(&arena, moved).3, Some(7));
        assert_eq!(arena.set_expiry(moved, None).unwrap(), moved);
        assert_eq!(
            entry(&arena, moved),
            (key.clone(), value.clone(), KIND_HASH, None)
        );
        assert_eq!(arena.live_bytes(), 96, "the chunk stays");
        // Classes 8 bytes apart never leave 8 bytes of slack: find a length in a wider class.
        let spare = (0..200)
            .find(|&v| footprint(16, v, false) == footprint(16, v, true))
            .expect("some class has 8 bytes of slack");
        let value = vec![5u8; spare];
        let roomy = arena.insert(&key, &value, None).unwrap();
        assert_eq!(
            arena.set_expiry(roomy, Some(11)).unwrap(),
            roomy,
            "fits in place"
        );
        assert_eq!(
            entry(&arena, roomy),
            (key.clone(), value.clone(), KIND_STRING, Some(11))
        );
        // A replace that drops the expiry moves the key back down and keeps it intact.
        let other = vec![9u8; spare];
        let same = arena.replace(roomy, &key, &other, None).unwrap();
        assert_eq!(same, roomy);
        assert_eq!(
            entry(&arena, roomy),
            (key.clone(), other, KIND_STRING, None)
        );
        // And one that adds it moves the key up.
        let same = arena.replace(roomy, &key, &value, Some(12)).unwrap();
        assert_eq!(same, roomy);
        assert_eq!(
            entry(&arena, roomy),
            (key.clone(), value, KIND_STRING, Some(12))
        );
        // A large entry keeps its slot and grows its allocation by 8 bytes.
        let big = vec![6u8; 100_000];
        let large = arena.insert(&key, &big, None).unwrap();
        let before = arena.live_bytes();
        assert_eq!(arena.set_expiry(large, Some(1)).unwrap(), large);
        assert_eq!(arena.live_bytes(), before + 8);
        assert_eq!(
            entry(&arena, large),
            (key.clone(), big.clone(), KIND_STRING, Some(1))
        );
        assert_eq!(arena.set_expiry(large, None).unwrap(), large);
        assert_eq!(entry(&arena, large), (key, big, KIND_STRING, None));
    }
}
