//! The shard index: cache-line buckets of 32-bit hash tags and 32-bit arena locations.
//!
//! Why not a general hash table: a lookup in a SwissTable reads its control group, then the slot
//! (another cache line), then the entry — three dependent misses. Here a bucket is exactly one
//! 64-byte line holding 7 tags, their 7 locations and an overflow count, so a lookup is one
//! miss for the bucket and one for the entry. The tags are 32 bits of the key hash, so a false
//! tag match (which costs a key comparison in the arena) happens about once per 600 million
//! probes, and the home bucket is derived from the tag alone: growing never touches the entries.
//!
//! Collisions use bucket-level linear probing. Each bucket counts the entries that probed past it
//! (`overflow`, as in Folly's F14); a lookup stops at the first bucket whose count is zero, and a
//! removal decrements the counts on its probe path, so deletes leave no tombstones.

/// Slots per bucket.
const SLOTS: usize = 7;
/// Buckets are grown when the average bucket holds more than this many entries (6 of 7 slots:
/// a load factor of 85.7%).
const MAX_AVG_FILL: usize = 6;

/// Bucket count after a growth from `n`: half as many again. Doubling would leave a table
/// that just outgrew its last size at 43% load (twice the bytes per entry, and an index that
/// no longer fits the caches a smaller one would: at 100k keys in 16 shards the doubled index
/// was 2 MiB at 43% load, and a read of it about 15% slower than of a 1 MiB one); growing
/// by half keeps the load between 57% and 86%.
fn grown(n: usize) -> usize {
    (n + n / 2).max(n + 1)
}

/// One cache line: 7 tags and the overflow count in `words` (compared 8 lanes at a time), then
/// the 7 locations.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    /// `words[0..7]`: tags (0 = empty slot); `words[7]`: entries that probed past this bucket.
    words: [u32; 8],
    locs: [u32; 8],
}

const OVERFLOW: usize = 7;

impl Bucket {
    /// Bit `i` set when slot `i` holds `tag`.
    #[inline(always)]
    fn matches(&self, tag: u32) -> u32 {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            // Two 4-lane compares and their sign masks (safe_arch's safe SSE2 wrappers): 8
            // instructions where LLVM made some 25 of the loop below.
            use safe_arch::{
                cast_to_m128_from_m128i, cmp_eq_mask_i32_m128i, m128i, move_mask_m128,
                set_splat_i32_m128i,
            };
            let [w0, w1, w2, w3, w4, w5, w6, w7] = self.words;
            let wanted = set_splat_i32_m128i(tag as i32);
            let lanes = |words: [u32; 4]| {
                let eq = cmp_eq_mask_i32_m128i(m128i::from(words), wanted);
                move_mask_m128(cast_to_m128_from_m128i(eq)) as u32
            };
            (lanes([w0, w1, w2, w3]) | lanes([w4, w5, w6, w7]) << 4) & ((1 << SLOTS) - 1)
        }
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        {
            self.matches_portable(tag)
        }
    }

    /// [`Bucket::matches`] without SIMD (the other targets; the reference in tests).
    #[inline(always)]
    #[cfg_attr(
        all(target_arch = "x86_64", target_feature = "sse2", not(test)),
        expect(dead_code)
    )]
    fn matches_portable(&self, tag: u32) -> u32 {
        let mut mask = 0u32;
        for (i, &w) in self.words.iter().enumerate() {
            mask |= u32::from(w == tag) << i;
        }
        mask & ((1 << SLOTS) - 1)
    }

    #[inline(always)]
    fn overflow(&self) -> u32 {
        self.words[OVERFLOW]
    }
}

/// Where an entry sits in the index (valid until the next insert or removal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    bucket: usize,
    slot: usize,
}

/// The index of one shard.
#[derive(Clone)]
pub(crate) struct Index {
    buckets: Vec<Bucket>,
    len: usize,
    /// This index's spot multiplier (odd, top bit set), drawn at random per index: an
    /// index's bucket order is its own, so copying one index's entries into another in
    /// iteration order (loading a snapshot image, a replica's full sync, moving keys between
    /// stores) lands them on uncorrelated homes. With one fixed multiplier every index of
    /// every process shares one order, and such a copy fills a growing table front to back:
    /// linear probing then walks one ever-longer cluster and the load turns quadratic
    /// (measured: 1M keys from a snapshot took 3 s, 87% of it probing).
    mult: u64,
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("len", &self.len)
            .field("buckets", &self.buckets.len())
            .finish()
    }
}

/// Stored tags are never 0 (the empty marker).
#[inline(always)]
fn stored(tag: u32) -> u32 {
    if tag == 0 { 1 } else { tag }
}

/// A tag's position in an index's 32-bit hash order: the high half of a multiplicative hash
/// with the index's multiplier.
#[inline(always)]
fn spot(tag: u32, mult: u64) -> u64 {
    u64::from(tag).wrapping_mul(mult) >> 32
}

/// The home bucket of a (stored) tag among `n`: its spot scaled to the bucket count (a
/// multiply and a shift, any `n`), so buckets are in spot order whatever their number (which
/// is what keeps a scan cursor, a spot, meaningful across growth).
#[inline(always)]
fn home(tag: u32, n: usize, mult: u64) -> usize {
    home_of_spot(spot(tag, mult), n)
}

#[inline(always)]
fn home_of_spot(spot: u64, n: usize) -> usize {
    ((spot * n as u64) >> 32) as usize
}

/// The first spot whose home among `n` buckets is bucket `b` (`SPOTS` for `b == n`).
fn first_spot(b: usize, n: usize) -> u64 {
    ((b as u64) << 32).div_ceil(n as u64)
}

/// The bucket after `b` among `n`, wrapping.
#[inline(always)]
fn after(b: usize, n: usize) -> usize {
    if b + 1 == n { 0 } else { b + 1 }
}

/// A fresh random multiplier: odd (so distinct tags spread), top bit set (so the high half
/// of the product covers the whole spot range).
fn random_mult() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    // RandomState's keys come from the OS once per thread and change per instance.
    let n = DRAWN.fetch_add(1, Ordering::Relaxed);
    RandomState::new().hash_one(n) | (1 << 63) | 1
}

/// One past the last spot.
const SPOTS: u64 = 1 << 32;

impl Index {
    pub(crate) fn new() -> Self {
        Self {
            buckets: Vec::new(),
            len: 0,
            mult: random_mult(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held by the bucket array.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Bucket>()
    }

    /// The position of the entry whose tag is `tag` and for whose location `eq` says yes.
    #[inline(always)]
    pub(crate) fn find_pos(&self, tag: u32, mut eq: impl FnMut(u32) -> bool) -> Option<Pos> {
        if self.buckets.is_empty() {
            return None;
        }
        let tag = stored(tag);
        let n = self.buckets.len();
        let mut b = home(tag, n, self.mult);
        // At most every bucket once: overflow counts only say "someone probed past here", and
        // with churn every bucket of a small index can carry one (bucket A overflowed into B
        // once, B later into A), so a miss must not rely on meeting a zero (F14 bounds its
        // probes the same way).
        for _ in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            let mut m = bucket.matches(tag);
            while m != 0 {
                let slot = m.trailing_zeros() as usize;
                if eq(bucket.locs[slot]) {
                    return Some(Pos { bucket: b, slot });
                }
                m &= m - 1;
            }
            if bucket.overflow() == 0 {
                return None;
            }
            b = after(b, n);
        }
        None
    }

    /// Starts loading the home bucket of `tag` (the first line a lookup reads).
    #[inline(always)]
    pub(crate) fn prefetch_home(&self, tag: u32) {
        if self.buckets.is_empty() {
            return;
        }
        let b = home(stored(tag), self.buckets.len(), self.mult);
        crate::prefetch::prefetch(&self.buckets[b]);
    }

    /// The location in `tag`'s home bucket with that tag, if any: the entry a lookup of a key
    /// with this tag will most likely compare (no key comparison here, so no entry read).
    #[inline(always)]
    pub(crate) fn home_candidate(&self, tag: u32) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let tag = stored(tag);
        let bucket = &self.buckets[home(tag, self.buckets.len(), self.mult)];
        match bucket.matches(tag) {
            0 => None,
            m => Some(bucket.locs[m.trailing_zeros() as usize]),
        }
    }

    /// The location of the entry whose tag is `tag` and for whose location `eq` says yes.
    #[inline(always)]
    pub(crate) fn find(&self, tag: u32, eq: impl FnMut(u32) -> bool) -> Option<u32> {
        self.find_pos(tag, eq).map(|p| self.loc(p))
    }

    #[inline(always)]
    pub(crate) fn loc(&self, pos: Pos) -> u32 {
        self.buckets[pos.bucket].locs[pos.slot]
    }

    /// Points the entry at `pos` to a new location.
    #[inline]
    pub(crate) fn set_loc(&mut self, pos: Pos, loc: u32) {
        self.buckets[pos.bucket].locs[pos.slot] = loc;
    }

    /// Adds an entry known to be absent.
    pub(crate) fn insert(&mut self, tag: u32, loc: u32) {
        if self.len + 1 > self.buckets.len() * MAX_AVG_FILL {
            self.grow();
        }
        Self::place(&mut self.buckets, stored(tag), loc, self.mult);
        self.len += 1;
    }

    /// Puts `(tag, loc)` into the first free slot from its home bucket on, counting the overflow
    /// on every full bucket it passes. The caller guarantees a free slot exists.
    fn place(buckets: &mut [Bucket], tag: u32, loc: u32, mult: u64) {
        let n = buckets.len();
        let mut b = home(tag, n, mult);
        loop {
            let bucket = &mut buckets[b];
            if let Some(slot) = bucket.words[..SLOTS].iter().position(|&w| w == 0) {
                bucket.words[slot] = tag;
                bucket.locs[slot] = loc;
                return;
            }
            bucket.words[OVERFLOW] += 1;
            b = after(b, n);
        }
    }

    fn grow(&mut self) {
        let count = grown(self.buckets.len());
        let mut buckets = vec![Bucket::default(); count];
        for bucket in &self.buckets {
            for slot in 0..SLOTS {
                if bucket.words[slot] != 0 {
                    Self::place(
                        &mut buckets,
                        bucket.words[slot],
                        bucket.locs[slot],
                        self.mult,
                    );
                }
            }
        }
        self.buckets = buckets;
    }

    /// Removes the entry at `pos` and returns its location.
    pub(crate) fn remove(&mut self, pos: Pos) -> u32 {
        let n = self.buckets.len();
        let tag = self.buckets[pos.bucket].words[pos.slot];
        let loc = self.buckets[pos.bucket].locs[pos.slot];
        self.buckets[pos.bucket].words[pos.slot] = 0;
        let mut b = home(tag, n, self.mult);
        while b != pos.bucket {
            self.buckets[b].words[OVERFLOW] -= 1;
            b = after(b, n);
        }
        self.len -= 1;
        loc
    }

    /// Removes the entry with this tag and location; false when there is none.
    pub(crate) fn remove_loc(&mut self, tag: u32, loc: u32) -> bool {
        match self.find_pos(tag, |l| l == loc) {
            Some(pos) => {
                self.remove(pos);
                true
            }
            None => false,
        }
    }

    /// Visits the entries whose spots lie in the window that starts at `cursor` and holds
    /// about `count` entries, and returns where the next window starts (`None` after the last
    /// spot). A spot is a fixed function of the key's tag, so an entry present from the first
    /// window to the last is visited exactly once, however the index grows or shrinks between
    /// calls.
    pub(crate) fn scan(
        &self,
        cursor: u64,
        count: usize,
        mut visit: impl FnMut(u32),
    ) -> Option<u64> {
        if cursor >= SPOTS {
            return None;
        }
        if self.buckets.is_empty() {
            return None;
        }
        // A window of enough buckets for `count` entries on average, from the cursor's home
        // bucket to the first spot of the bucket after the window.
        let n = self.buckets.len();
        let fill = (self.len / n).max(1);
        let buckets = count.max(1).div_ceil(fill);
        let first = home_of_spot(cursor, n);
        let end = first_spot(first.saturating_add(buckets).min(n), n);
        let last = home_of_spot(end - 1, n);
        // The window's entries sit in its home buckets or, displaced by probing, in the run of
        // buckets after them up to the first one nobody probed past.
        let mut b = first;
        for step in 0..self.buckets.len() {
            let bucket = &self.buckets[b];
            for slot in 0..SLOTS {
                let tag = bucket.words[slot];
                if tag != 0 && (cursor..end).contains(&spot(tag, self.mult)) {
                    visit(bucket.locs[slot]);
                }
            }
            let in_window = step < last - first;
            if !in_window && bucket.overflow() == 0 {
                break;
            }
            b = after(b, n);
        }
        (end < SPOTS).then_some(end)
    }

    /// Every `(tag, loc)` in bucket order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.buckets.iter().flat_map(|b| {
            (0..SLOTS)
                .filter(move |&s| b.words[s] != 0)
                .map(move |s| b.locs[s])
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// Homes of any bucket count are contiguous spot ranges in bucket order, and `first_spot`
    /// is where each starts: what `scan` relies on to turn a window of buckets into spots.
    #[test]
    fn spot_ranges_tile_the_spot_space_for_any_bucket_count() {
        for n in [1usize, 2, 3, 7, 9, 1066, 1599, 12_138, (1 << 20) + 3] {
            assert_eq!(first_spot(0, n), 0);
            assert_eq!(first_spot(n, n), SPOTS);
            assert_eq!(home_of_spot(SPOTS - 1, n), n - 1);
            let step = (n / 97).max(1);
            for b in (1..n).step_by(step) {
                let start = first_spot(b, n);
                assert_eq!(home_of_spot(start, n), b, "n={n} b={b}");
                assert_eq!(home_of_spot(start - 1, n), b - 1, "n={n} b={b}");
            }
        }
        let mut n = 1;
        for _ in 0..40 {
            let next = grown(n);
            assert!(next > n && next <= n + n / 2 + 1, "{n} -> {next}");
            n = next;
        }
    }

    #[test]
    fn a_scan_with_the_largest_count_visits_everything_at_once() {
        let mut index = Index::new();
        for loc in 0..1_000u32 {
            index.insert(loc.wrapping_mul(0x9E37_79B9), loc);
        }
        let mut seen = 0;
        assert_eq!(index.scan(0, usize::MAX, |_| seen += 1), None);
        assert_eq!(seen, 1_000);
        // A sparse index (fewer entries than buckets) and a cursor past its first bucket: the
        // window's bucket count is the count itself, and must not overflow past the end.
        for loc in 1..1_000u32 {
            assert!(index.remove_loc(loc.wrapping_mul(0x9E37_79B9), loc));
        }
        let mut seen = 0;
        assert_eq!(index.scan(SPOTS - 1, usize::MAX, |_| seen += 1), None);
        assert!(seen <= 1);
    }

    proptest! {
        /// The SIMD compare agrees with the portable loop, overflow word included (never a
        /// slot), with tags drawn from a few values so that many slots match.
        #[test]
        fn simd_matches_agree_with_the_loop(
            words in proptest::array::uniform8(0u32..4),
            locs in proptest::array::uniform8(any::<u32>()),
            tag in 0u32..4,
        ) {
            let bucket = Bucket { words, locs };
            prop_assert_eq!(bucket.matches(tag), bucket.matches_portable(tag));
            prop_assert!(bucket.matches(tag) < 1 << SLOTS);
        }
    }

    #[test]
    fn bucket_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
        assert_eq!(std::mem::align_of::<Bucket>(), 64);
    }

    #[test]
    fn a_miss_ends_when_every_bucket_has_overflowed() {
        // Two buckets, A and B. Fill A until an entry spills into B, free room in A, then fill B
        // until an entry spills into A: both overflow counts are non-zero, and a miss must still
        // end (it used to probe forever).
        let mult = random_mult();
        let homed = move |bucket: usize| (1u32..).filter(move |&t| home(t, 2, mult) == bucket);
        let tags_a: Vec<u32> = homed(0).take(8).collect();
        let tags_b: Vec<u32> = homed(1).take(8).collect();
        let mut index = Index {
            buckets: vec![Bucket::default(); 2],
            len: 0,
            mult,
        };
        for (i, &t) in tags_a.iter().enumerate() {
            index.insert(t, i as u32);
        }
        assert_eq!(index.buckets[0].overflow(), 1);
        for (i, &t) in tags_a.iter().enumerate().take(3) {
            assert!(index.remove_loc(t, i as u32));
        }
        for (i, &t) in tags_b.iter().enumerate().take(7) {
            index.insert(t, 100 + i as u32);
        }
        assert_eq!(index.buckets.len(), 2);
        assert!(index.buckets.iter().all(|b| b.overflow() > 0));
        let missing = homed(0).nth(20).unwrap();
        assert_eq!(index.find(missing, |_| true), None);
        for (i, &t) in tags_b.iter().enumerate().take(7) {
            assert_eq!(index.find(t, |l| l == 100 + i as u32), Some(100 + i as u32));
        }
    }

    /// Copying an index into a fresh one in its bucket order (what loading a snapshot image
    /// does) keeps probe runs short: the copy's homes are uncorrelated with the source order.
    /// With a multiplier shared by both, the copy's early entries all home into its first
    /// buckets and pile into one run as long as the table.
    #[test]
    fn a_copy_in_bucket_order_does_not_cluster() {
        let mut source = Index::new();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for loc in 0..200_000u32 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            source.insert(state as u32, loc);
        }
        let tags: Vec<(u32, u32)> = source
            .buckets
            .iter()
            .flat_map(|b| {
                (0..SLOTS)
                    .filter(|&s| b.words[s] != 0)
                    .map(|s| (b.words[s], b.locs[s]))
            })
            .collect();
        let mut copy = Index::new();
        for (i, &(tag, loc)) in tags.iter().enumerate() {
            copy.insert(tag, loc);
            // Between growths is where a correlated copy clusters (a growth re-places
            // everything in the copy's own order), so look all along the way.
            if i % 5_000 == 4_999 {
                let longest = copy.buckets.iter().map(Bucket::overflow).max().unwrap_or(0);
                assert!(
                    longest < 64,
                    "after {i} entries a probe run passes {longest} full buckets"
                );
            }
        }
        for &(tag, loc) in tags.iter().step_by(97) {
            assert_eq!(copy.find(tag, |l| l == loc), Some(loc));
        }
    }

    #[test]
    fn tag_zero_is_stored_and_found() {
        let mut index = Index::new();
        index.insert(0, 5);
        assert_eq!(index.find(0, |l| l == 5), Some(5));
        assert!(index.remove_loc(0, 5));
        assert!(index.is_empty());
    }

    #[test]
    fn one_tag_many_entries_overflows_and_recovers() {
        // 100 entries with the same tag: they share a home bucket and probe far past it.
        let mut index = Index::new();
        for loc in 0..100 {
            index.insert(7, loc);
        }
        for loc in 0..100 {
            assert_eq!(index.find(7, |l| l == loc), Some(loc));
        }
        for loc in (0..100).step_by(2) {
            assert!(index.remove_loc(7, loc));
        }
        for loc in 0..100 {
            assert_eq!(index.find(7, |l| l == loc).is_some(), loc % 2 == 1);
        }
        for loc in (1..100).step_by(2) {
            assert!(index.remove_loc(7, loc));
        }
        assert!(index.is_empty());
        assert!(index.buckets.iter().all(|b| b.overflow() == 0));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u32),
        Remove(usize),
        Move(usize, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..64).prop_map(Op::Insert),
            2 => any::<usize>().prop_map(Op::Remove),
            1 => (any::<usize>(), any::<u32>()).prop_map(|(i, l)| Op::Move(i, l)),
        ]
    }

    proptest! {
        /// Against a map from location to tag, with a tiny tag space so that buckets fill,
        /// overflow and wrap around.
        #[test]
        fn matches_a_model(ops in proptest::collection::vec(op(), 1..400)) {
            let mut index = Index::new();
            let mut model: HashMap<u32, u32> = HashMap::new();
            let mut next_loc = 0u32;
            for op in ops {
                match op {
                    Op::Insert(tag) => {
                        index.insert(tag, next_loc);
                        model.insert(next_loc, tag);
                        next_loc += 1;
                    }
                    Op::Remove(i) if !model.is_empty() => {
                        let mut locs: Vec<u32> = model.keys().copied().collect();
                        locs.sort_unstable();
                        let loc = locs[i % locs.len()];
                        let tag = model.remove(&loc).unwrap();
                        prop_assert!(index.remove_loc(tag, loc));
                    }
                    Op::Move(i, new_loc) if !model.is_empty() => {
                        let mut locs: Vec<u32> = model.keys().copied().collect();
                        locs.sort_unstable();
                        let loc = locs[i % locs.len()];
                        let new_loc = new_loc | 1 << 31;
                        if model.contains_key(&new_loc) { continue; }
                        let tag = model.remove(&loc).unwrap();
                        let pos = index.find_pos(tag, |l| l == loc).unwrap();
                        index.set_loc(pos, new_loc);
                        model.insert(new_loc, tag);
                    }
                    _ => {}
                }
                prop_assert_eq!(index.len(), model.len());
            }
            for (&loc, &tag) in &model {
                prop_assert_eq!(index.find(tag, |l| l == loc), Some(loc));
                prop_assert_eq!(index.find(tag.wrapping_add(64), |l| l == loc), None);
            }
            let mut seen: Vec<u32> = index.iter().collect();
            seen.sort_unstable();
            let mut want: Vec<u32> = model.keys().copied().collect();
            want.sort_unstable();
            prop_assert_eq!(seen, want);
            for (&loc, &tag) in &model {
                prop_assert!(index.remove_loc(tag, loc));
            }
            prop_assert!(index.buckets.iter().all(|b| b.overflow() == 0));
        }
    }

    /// Entries whose tags crowd few home buckets (so many sit displaced past their home).
    fn crowded_tags() -> impl Strategy<Value = Vec<u32>> {
        proptest::collection::vec(
            prop_oneof![any::<u32>(), (0u32..4).prop_map(|t| t * 7 + 1)],
            1..600,
        )
    }

    proptest! {
        #[test]
        fn scan_visits_each_entry_once_across_growth(
            tags in crowded_tags(),
            counts in proptest::collection::vec(1usize..40, 1..50),
            grow_after in 0usize..30,
        ) {
            let mut index = Index::new();
            let (first, later) = tags.split_at(tags.len() / 2);
            for (loc, &tag) in first.iter().enumerate() {
                index.insert(tag, loc as u32);
            }
            let mut seen = HashMap::new();
            let mut cursor = 0;
            let mut calls = 0;
            loop {
                let count = counts[calls % counts.len()];
                let next = index.scan(cursor, count, |loc| *seen.entry(loc).or_insert(0) += 1);
                calls += 1;
                if calls == grow_after {
                    // Doubles the index (maybe more than once) mid-scan.
                    for (i, &tag) in later.iter().enumerate() {
                        index.insert(tag, (first.len() + i) as u32);
                    }
                }
                match next {
                    Some(c) => { prop_assert!(c > cursor); cursor = c; }
                    None => break,
                }
            }
            for loc in 0..first.len() as u32 {
                prop_assert_eq!(seen.get(&loc), Some(&1), "loc {} of {}", loc, first.len());
            }
            prop_assert!(seen.values().all(|&n| n == 1));
        }
    }
}
