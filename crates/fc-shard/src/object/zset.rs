//! Sorted sets: `ZADD` and its family.
//!
//! A sorted set keeps a member → score map (O(1) `ZSCORE`) and the `(score, member)` pairs in
//! order in sorted blocks of at most [`BLOCK_MAX`] entries: a search is a binary search over
//! block ends then inside one block, an insert or a removal moves at most one block's entries
//! (a cache-friendly B-tree of height two), and a rank sums the lengths of the blocks before
//! (one pass over a small array). Members are stored once, shared by the map and the order.
//!
//! Order: score, then member bytes, as Redis. Scores are never NaN; `-0` is stored as `0`.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{FastMap, Object, digest_parts, scan_window};
use crate::arena::KIND_ZSET;
use crate::clock::Clock;
use crate::error::{RedisObjectResult, StoreError};
use crate::glob::GlobPattern;
use crate::mutation::Mutation;
use crate::shard::Shard;

/// Most entries in one ordered block (blocks split in half past it).
pub(crate) const BLOCK_MAX: usize = 128;
/// Estimated bytes per member beyond its bytes: the map entry and index (~40), the ordered
/// entry (24, in blocks half to fully used after splits: ~48), the shared allocation's counts
/// (16) and the allocator's header and rounding (~40). `tests/object_memory.rs` checks the
/// charge against the bytes really requested.
pub(crate) const MEMBER_OVERHEAD: usize = 144;
const ZSET_OVERHEAD: usize = 96;

type Member = Arc<[u8]>;

/// One end of a score range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    /// The score (`f64::NEG_INFINITY` / `f64::INFINITY` for `-inf` / `+inf`).
    pub value: f64,
    /// `(value`: the value itself is outside.
    pub exclusive: bool,
}

impl ScoreBound {
    /// An inclusive bound.
    #[must_use]
    pub fn inclusive(value: f64) -> Self {
        Self {
            value,
            exclusive: false,
        }
    }

    /// An exclusive bound.
    #[must_use]
    pub fn exclusive(value: f64) -> Self {
        Self {
            value,
            exclusive: true,
        }
    }

    fn admits_from_below(self, score: f64) -> bool {
        if self.exclusive {
            score > self.value
        } else {
            score >= self.value
        }
    }

    fn admits_from_above(self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

/// Sorted sets up to this size walk lexicographic ranges as Redis's listpack encoding does
/// ([`ZSet::lex_scan`]); larger ones search them as sorted (Redis's skiplist assumes so too).
const LEX_SCAN_MAX: usize = 128;

/// One end of a lexicographic range (`-`, `+`, `[member`, `(member`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LexBound<'a> {
    /// `-`: before every member.
    Min,
    /// `+`: after every member.
    Max,
    /// `[member`.
    Inclusive(&'a [u8]),
    /// `(member`.
    Exclusive(&'a [u8]),
}

impl LexBound<'_> {
    fn admits_from_below(self, member: &[u8]) -> bool {
        match self {
            Self::Min => true,
            Self::Max => false,
            Self::Inclusive(b) => member >= b,
            Self::Exclusive(b) => member > b,
        }
    }

    fn admits_from_above(self, member: &[u8]) -> bool {
        match self {
            Self::Min => false,
            Self::Max => true,
            Self::Inclusive(b) => member <= b,
            Self::Exclusive(b) => member < b,
        }
    }
}

/// Which entries `ZRANGE` (and the range removals and counts) select.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ZRange<'a> {
    /// Ranks `start..=stop` (negative from the end), as `ZRANGE key start stop`.
    Rank(i64, i64),
    /// Scores between two bounds (`BYSCORE`), lower bound first.
    Score(ScoreBound, ScoreBound),
    /// Members between two bounds (`BYLEX`), lower bound first.
    Lex(LexBound<'a>, LexBound<'a>),
}

/// `ZADD`'s conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZAddOptions {
    /// `NX`: only add new members.
    pub only_new: bool,
    /// `XX`: only update existing members.
    pub only_existing: bool,
    /// `GT`: only update when the new score is greater.
    pub greater: bool,
    /// `LT`: only update when the new score is less.
    pub less: bool,
    /// `CH`: count changed members too, not only added ones.
    pub changed: bool,
    /// `INCR`: add the score to the member's (one pair only) and return the result.
    pub incr: bool,
}

/// What `ZADD` did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ZAddOutcome {
    /// Members added (with `CH`: added or changed).
    pub count: usize,
    /// With `INCR`: the member's new score, or `None` when a condition said no.
    pub score: Option<f64>,
}

/// A member and its score, owned.
pub type ScoredMember = (Vec<u8>, f64);

fn cmp_entry(a: (f64, &[u8]), b: (f64, &[u8])) -> Ordering {
    if a.0 < b.0 {
        Ordering::Less
    } else if a.0 > b.0 {
        Ordering::Greater
    } else {
        a.1.cmp(b.1)
    }
}

/// One sorted-set value.
#[derive(Debug, Default)]
pub(crate) struct ZSet {
    scores: FastMap<Member, f64>,
    blocks: Vec<Vec<(f64, Member)>>,
    payload: usize,
}

impl ZSet {
    fn new_object() -> Object {
        Object::ZSet(Self::default())
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        ZSET_OVERHEAD + self.payload + self.scores.len() * MEMBER_OVERHEAD
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.scores.len()
    }

    pub(crate) fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// The block holding (or that would hold) `entry`, and the position in it.
    fn locate(&self, entry: (f64, &[u8])) -> (usize, Result<usize, usize>) {
        let b = self
            .blocks
            .partition_point(|blk| {
                let last = blk.last().expect("blocks are never empty");
                cmp_entry((last.0, &last.1), entry) == Ordering::Less
            })
            .min(self.blocks.len().saturating_sub(1));
        let Some(block) = self.blocks.get(b) else {
            return (0, Err(0));
        };
        (b, block.binary_search_by(|e| cmp_entry((e.0, &e.1), entry)))
    }

    fn order_insert(&mut self, score: f64, member: Member) {
        let (b, at) = self.locate((score, &member));
        let at = at.expect_err("a member is in the order once");
        if self.blocks.is_empty() {
            self.blocks.push(Vec::with_capacity(8));
        }
        let block = &mut self.blocks[b];
        block.insert(at, (score, member));
        if block.len() > BLOCK_MAX {
            let tail = block.split_off(BLOCK_MAX / 2);
            self.blocks.insert(b + 1, tail);
        }
    }

    fn order_remove(&mut self, score: f64, member: &[u8]) {
        let (b, at) = self.locate((score, member));
        let at = at.expect("the order holds every member");
        self.blocks[b].remove(at);
        let len = self.blocks[b].len();
        if len == 0 {
            self.blocks.remove(b);
        } else if len < BLOCK_MAX / 4
            && b + 1 < self.blocks.len()
            && len + self.blocks[b + 1].len() <= BLOCK_MAX
        {
            let next = self.blocks.remove(b + 1);
            self.blocks[b].extend(next);
        }
    }

    /// Where `member` is in the score map, and its score.
    fn find(&self, member: &[u8]) -> Option<(usize, f64)> {
        self.scores.get_full(member).map(|(i, _, &s)| (i, s))
    }

    /// Moves the member at map position `i` (score `old`) to `score`.
    fn rescore(&mut self, i: usize, old: f64, score: f64) {
        let score = if score == 0.0 { 0.0 } else { score };
        if old != score {
            let shared = Arc::clone(self.scores.get_index(i).expect("found").0);
            self.order_remove(old, &shared);
            self.order_insert(score, shared);
            self.scores[i] = score;
        }
    }

    /// Adds a member known to be absent.
    fn add_new(&mut self, member: &[u8], score: f64) {
        let score = if score == 0.0 { 0.0 } else { score };
        let shared: Member = member.into();
        self.scores.insert(Arc::clone(&shared), score);
        self.order_insert(score, shared);
        self.payload += member.len();
    }

    /// Removes `member`; true when it was there.
    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.swap_remove(member) {
            Some(score) => {
                self.order_remove(score, member);
                self.payload -= member.len();
                true
            }
            None => false,
        }
    }

    /// Rank (0-based, ascending) of a member with this score.
    fn rank_of(&self, score: f64, member: &[u8]) -> usize {
        let (b, at) = self.locate((score, member));
        let before: usize = self.blocks[..b].iter().map(Vec::len).sum();
        before + at.expect("the order holds every member")
    }

    /// Rank of the first entry at or after `entry`'s place (the count of entries before it).
    fn rank_before(&self, admits: impl Fn((f64, &[u8])) -> bool) -> usize {
        // First block whose last entry is admitted, then inside it.
        let b = self.blocks.partition_point(|blk| {
            let last = blk.last().expect("blocks are never empty");
            !admits((last.0, &last.1))
        });
        let before: usize = self.blocks[..b].iter().map(Vec::len).sum();
        let inside = self
            .blocks
            .get(b)
            .map_or(0, |blk| blk.partition_point(|e| !admits((e.0, &e.1))));
        before + inside
    }

    /// The rank range (`start..end`) a [`ZRange`] selects (`rev`: walked from the high end,
    /// which matters only to a lexicographic range over members of different scores).
    pub(crate) fn ranks(&self, range: ZRange<'_>, rev: bool) -> std::ops::Range<usize> {
        let len = self.len();
        match range {
            ZRange::Rank(start, stop) => super::list::clamp_range(start, stop, len),
            ZRange::Score(min, max) => {
                let start = self.rank_before(|(s, _)| min.admits_from_below(s));
                let end = self.rank_before(|(s, _)| !max.admits_from_above(s));
                start..end.max(start)
            }
            ZRange::Lex(min, max) if len <= LEX_SCAN_MAX => self.lex_scan(min, max, rev),
            ZRange::Lex(min, max) => {
                let start = self.rank_before(|(_, m)| min.admits_from_below(m));
                let end = self.rank_before(|(_, m)| !max.admits_from_above(m));
                start..end.max(start)
            }
        }
    }

    /// A lexicographic range the way Redis walks a small sorted set (its listpack encoding):
    /// from the low end, the first member at or above `min`, then members while they are at
    /// or below `max` (`rev`: from the high end, the first at or below `max`, then while at or
    /// above `min`). Over members of one score this is the sorted range; over different
    /// scores, where Redis calls the result unspecified, it is what Redis answers.
    fn lex_scan(&self, min: LexBound<'_>, max: LexBound<'_>, rev: bool) -> std::ops::Range<usize> {
        let members: Vec<&[u8]> = self.entries(0..self.len()).map(|(_, m)| m).collect();
        // Redis's early exits: crossed bounds, the last member below `min`, the first above
        // `max`.
        fn order<'b>(b: LexBound<'b>) -> (u8, &'b [u8]) {
            match b {
                LexBound::Min => (0, &[]),
                LexBound::Inclusive(v) | LexBound::Exclusive(v) => (1, v),
                LexBound::Max => (2, &[]),
            }
        }
        let exclusive = |b: LexBound<'_>| matches!(b, LexBound::Exclusive(_));
        let crossed = match order(min).cmp(&order(max)) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => exclusive(min) || exclusive(max),
            std::cmp::Ordering::Less => false,
        };
        let (Some(first), Some(last)) = (members.first(), members.last()) else {
            return 0..0;
        };
        if crossed || !min.admits_from_below(last) || !max.admits_from_above(first) {
            return 0..0;
        }
        if rev {
            let Some(last) = members.iter().rposition(|m| max.admits_from_above(m)) else {
                return 0..0;
            };
            let run = members[..=last]
                .iter()
                .rev()
                .take_while(|m| min.admits_from_below(m))
                .count();
            last + 1 - run..last + 1
        } else {
            let Some(first) = members.iter().position(|m| min.admits_from_below(m)) else {
                return 0..0;
            };
            let run = members[first..]
                .iter()
                .take_while(|m| max.admits_from_above(m))
                .count();
            first..first + run
        }
    }

    /// Entries with ranks in `range`, ascending.
    pub(crate) fn entries(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl DoubleEndedIterator<Item = (f64, &[u8])> {
        // Find the block of the first rank from whichever end is nearer.
        let (mut first, mut skip) = (0, range.start);
        if range.start > self.len() / 2 {
            let mut start = self.len();
            first = self.blocks.len();
            while first > 0 && start > range.start {
                first -= 1;
                start -= self.blocks[first].len();
            }
            skip = range.start - start;
        }
        while first < self.blocks.len() && skip >= self.blocks[first].len() {
            skip -= self.blocks[first].len();
            first += 1;
        }
        self.blocks[first.min(self.blocks.len())..]
            .iter()
            .flatten()
            .skip(skip)
            .take(range.len())
            .map(|e| (e.0, &*e.1))
            .collect::<Vec<_>>()
            .into_iter()
    }

    pub(crate) fn digest(&self) -> u64 {
        self.entries(0..self.len()).fold(0u64, |sum, (s, m)| {
            sum.wrapping_add(digest_parts(&[m, &s.to_bits().to_le_bytes()]))
        })
    }
}

pub(crate) fn as_zset(object: &Object) -> &ZSet {
    match object {
        Object::ZSet(z) => z,
        _ => unreachable!("kind checked by the shard"),
    }
}

pub(crate) fn as_zset_mut(object: &mut Object) -> &mut ZSet {
    match object {
        Object::ZSet(z) => z,
        _ => unreachable!("kind checked by the shard"),
    }
}

fn owned(entries: impl Iterator<Item = (f64, impl AsRef<[u8]>)>) -> Vec<ScoredMember> {
    entries.map(|(s, m)| (m.as_ref().to_vec(), s)).collect()
}

impl Shard {
    /// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
    /// [`StoreError::NotAFloat`] for a NaN score; with `INCR`, [`StoreError::ScoreNan`] when
    /// the sum is NaN. Logged as `ZAdd` of the resulting scores of the members it changed.
    pub(crate) fn zadd(
        &mut self,
        tag: u32,
        key: &[u8],
        entries: &[(f64, &[u8])],
        options: ZAddOptions,
        clock: &Clock,
    ) -> RedisObjectResult<ZAddOutcome> {
        if entries.iter().any(|(s, _)| s.is_nan()) {
            return Err(StoreError::NotAFloat);
        }
        let create = (!options.only_existing && !entries.is_empty())
            .then_some(ZSet::new_object as fn() -> Object);
        let outcome = self.write_object(tag, key, KIND_ZSET, create, clock, |object, emit| {
            let zset = as_zset_mut(object);
            let mut outcome = ZAddOutcome::default();
            let logging = emit.sink.is_some();
            let mut logged: Vec<(f64, &[u8])> = Vec::new();
            let mut changes = 0;
            for &(score, member) in entries {
                let found = zset.find(member);
                let old = found.map(|(_, s)| s);
                let new = match old {
                    None if options.only_existing => continue,
                    Some(_) if options.only_new => continue,
                    Some(old) if options.incr => old + score,
                    _ => score,
                };
                if new.is_nan() {
                    return Err(StoreError::ScoreNan);
                }
                if let Some(old) = old
                    && ((options.greater && new <= old) || (options.less && new >= old))
                {
                    continue;
                }
                if options.incr {
                    outcome.score = Some(if new == 0.0 { 0.0 } else { new });
                }
                match found {
                    None => {
                        zset.add_new(member, new);
                        outcome.count += 1;
                    }
                    Some((i, old)) if old != new => {
                        zset.rescore(i, old, new);
                        if options.changed {
                            outcome.count += 1;
                        }
                    }
                    Some(_) => continue,
                }
                changes += 1;
                if logging {
                    logged.push((new, member));
                }
            }
            if changes > 0 {
                emit.emit(Mutation::ZAdd {
                    key: emit.key,
                    entries: &logged,
                });
            }
            Ok(outcome)
        })?;
        Ok(outcome.unwrap_or_default())
    }

    /// `ZINCRBY`: the member's new score.
    pub(crate) fn zincrby(
        &mut self,
        tag: u32,
        key: &[u8],
        delta: f64,
        member: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<f64> {
        let options = ZAddOptions {
            incr: true,
            ..ZAddOptions::default()
        };
        let outcome = self.zadd(tag, key, &[(delta, member)], options, clock)?;
        Ok(outcome.score.unwrap_or(delta))
    }

    /// `ZREM`: how many members were there.
    pub(crate) fn zrem(
        &mut self,
        tag: u32,
        key: &[u8],
        members: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        self.remove_elements(tag, key, KIND_ZSET, members, clock, |key, members| {
            Mutation::ZRem { key, members }
        })
    }

    /// `ZREMRANGEBYRANK`/`ZREMRANGEBYSCORE`/`ZREMRANGEBYLEX`: how many went (logged as the
    /// concrete members removed).
    pub(crate) fn zremrange(
        &mut self,
        tag: u32,
        key: &[u8],
        range: ZRange<'_>,
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let removed = self.write_object(tag, key, KIND_ZSET, None, clock, |object, emit| {
            let zset = as_zset_mut(object);
            let ranks = zset.ranks(range, false);
            let doomed: Vec<Vec<u8>> = zset.entries(ranks).map(|(_, m)| m.to_vec()).collect();
            for m in &doomed {
                zset.remove(m);
            }
            if !doomed.is_empty() {
                let refs: Vec<&[u8]> = doomed.iter().map(Vec::as_slice).collect();
                emit.emit(Mutation::ZRem {
                    key: emit.key,
                    members: &refs,
                });
            }
            Ok(doomed.len())
        })?;
        Ok(removed.unwrap_or(0))
    }

    /// `ZPOPMIN`/`ZPOPMAX key count`: lowest (or highest) first.
    pub(crate) fn zpop(
        &mut self,
        tag: u32,
        key: &[u8],
        highest: bool,
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<ScoredMember>> {
        let popped = self.write_object(tag, key, KIND_ZSET, None, clock, |object, emit| {
            let zset = as_zset_mut(object);
            let len = zset.len();
            let n = count.min(len);
            let ranks = if highest { len - n..len } else { 0..n };
            let mut popped = owned(zset.entries(ranks));
            if highest {
                popped.reverse();
            }
            for (m, _) in &popped {
                zset.remove(m);
            }
            if !popped.is_empty() {
                let refs: Vec<&[u8]> = popped.iter().map(|(m, _)| m.as_slice()).collect();
                emit.emit(Mutation::ZRem {
                    key: emit.key,
                    members: &refs,
                });
            }
            Ok(popped)
        })?;
        Ok(popped.unwrap_or_default())
    }

    fn read_zset<R>(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
        read: impl FnOnce(&ZSet) -> R,
    ) -> RedisObjectResult<Option<R>> {
        self.read_object(tag, key, KIND_ZSET, clock, |o| read(as_zset(o)))
    }

    /// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]` (with scores; the
    /// caller drops them without `WITHSCORES`). `rev` walks from the high end; `limit` skips
    /// `offset` entries then returns at most `count` (negative: all).
    pub(crate) fn zrange(
        &self,
        tag: u32,
        key: &[u8],
        range: ZRange<'_>,
        rev: bool,
        limit: Option<(usize, i64)>,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<ScoredMember>> {
        /// Copies every entry visited.
        struct Collect(Vec<ScoredMember>);
        impl crate::ScoredVisitor for Collect {
            fn len(&mut self, n: usize) {
                self.0.reserve_exact(n);
            }
            fn entry(&mut self, member: &[u8], score: f64) -> bool {
                self.0.push((member.to_vec(), score));
                true
            }
        }
        let mut all = Collect(Vec::new());
        self.zrange_visit(tag, key, range, rev, limit, &mut all, clock)?;
        Ok(all.0)
    }

    /// `ZRANGESTORE destination source ...`: the range of `source` (as [`Shard::zrange`])
    /// stored at `destination` (replacing whatever it held; an empty range deletes it), its
    /// size. WRONGTYPE for a source of another type, changing nothing. Logged as a delete of
    /// the destination and a `ZAdd` of the range, one group ([`Shard::grouped`]).
    pub(crate) fn zrange_store(
        &mut self,
        destination: (u32, &[u8]),
        source: (u32, &[u8]),
        range: ZRange<'_>,
        rev: bool,
        limit: Option<(usize, i64)>,
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let entries = self.zrange(source.0, source.1, range, rev, limit, clock)?;
        let scored: Vec<(f64, &[u8])> = entries.iter().map(|(m, s)| (*s, &m[..])).collect();
        let (tag, key) = destination;
        self.grouped(|shard| {
            shard.delete(tag, key, clock);
            if !scored.is_empty() {
                shard.zadd(tag, key, &scored, ZAddOptions::default(), clock)?;
            }
            Ok(scored.len())
        })
    }

    /// [`Shard::zrange`] read in place into `visitor` (see [`crate::ScoredVisitor`]).
    #[expect(clippy::too_many_arguments, reason = "zrange's, plus the visitor")]
    pub(crate) fn zrange_visit(
        &self,
        tag: u32,
        key: &[u8],
        range: ZRange<'_>,
        rev: bool,
        limit: Option<(usize, i64)>,
        visitor: &mut dyn crate::ScoredVisitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_zset(tag, key, clock, |z| {
            let ranks = match range {
                // With REV, ranks count from the high end.
                ZRange::Rank(start, stop) if rev => {
                    let r = super::list::clamp_range(start, stop, z.len());
                    z.len() - r.end..z.len() - r.start
                }
                other => z.ranks(other, rev),
            };
            let (offset, count) = limit.unwrap_or((0, -1));
            let take = usize::try_from(count).unwrap_or(usize::MAX);
            visitor.len(ranks.len().saturating_sub(offset).min(take));
            let entries = z.entries(ranks);
            let mut each = |(score, member): (f64, &[u8])| visitor.entry(member, score);
            if rev {
                entries.rev().skip(offset).take(take).all(&mut each);
            } else {
                entries.skip(offset).take(take).all(&mut each);
            }
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `ZRANDMEMBER key [count]`: one random member (`count` `None`), up to `count` distinct
    /// ones, or `-count` with repetitions, each visited as it is drawn (a count of billions
    /// stops when the visitor says so).
    pub(crate) fn zrandmember_visit(
        &self,
        tag: u32,
        key: &[u8],
        count: Option<i64>,
        visitor: &mut dyn crate::ScoredVisitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_zset(tag, key, clock, |z| {
            super::visit_random_with(
                z.len(),
                count,
                visitor,
                |v, n| v.len(n),
                |i, v| match z.scores.get_index(i) {
                    Some((m, s)) => v.entry(m, *s),
                    None => false,
                },
            );
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `ZCOUNT` / `ZLEXCOUNT` (and the size of any [`ZRange`]).
    pub(crate) fn zcount(
        &self,
        tag: u32,
        key: &[u8],
        range: ZRange<'_>,
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        Ok(self
            .read_zset(tag, key, clock, |z| z.ranks(range, false).len())?
            .unwrap_or(0))
    }

    /// `ZSCORE`.
    pub(crate) fn zscore(
        &self,
        tag: u32,
        key: &[u8],
        member: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<f64>> {
        Ok(self
            .read_zset(tag, key, clock, |z| z.score(member))?
            .flatten())
    }

    /// `ZMSCORE`: one answer per member.
    pub(crate) fn zmscore(
        &self,
        tag: u32,
        key: &[u8],
        members: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<Option<f64>>> {
        Ok(self
            .read_zset(tag, key, clock, |z| {
                members.iter().map(|m| z.score(m)).collect()
            })?
            .unwrap_or_else(|| vec![None; members.len()]))
    }

    /// `ZCARD`.
    pub(crate) fn zcard(&self, tag: u32, key: &[u8], clock: &Clock) -> RedisObjectResult<usize> {
        Ok(self.read_zset(tag, key, clock, ZSet::len)?.unwrap_or(0))
    }

    /// `ZRANK` (or `ZREVRANK` with `rev`): the member's rank and score.
    pub(crate) fn zrank(
        &self,
        tag: u32,
        key: &[u8],
        member: &[u8],
        rev: bool,
        clock: &Clock,
    ) -> RedisObjectResult<Option<(usize, f64)>> {
        Ok(self
            .read_zset(tag, key, clock, |z| {
                let score = z.score(member)?;
                let rank = z.rank_of(score, member);
                Some((if rev { z.len() - 1 - rank } else { rank }, score))
            })?
            .flatten())
    }

    /// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
    pub(crate) fn zscan(
        &self,
        tag: u32,
        key: &[u8],
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<(u64, Vec<ScoredMember>)> {
        Ok(self
            .read_zset(tag, key, clock, |z| {
                let pattern = pattern.map(|p| GlobPattern::new(p, false));
                let (window, next) = scan_window(cursor, z.len(), count);
                let found = window
                    .rev()
                    .filter_map(|i| z.scores.get_index(i))
                    .filter(|(m, _)| pattern.as_ref().is_none_or(|p| p.matches(m)))
                    .map(|(m, &s)| (m.to_vec(), s))
                    .collect();
                (next, found)
            })?
            .unwrap_or((0, Vec::new())))
    }
}
