//! Sets: `SADD` and its family.
//!
//! A set is an insertion-indexed hash set (O(1) membership, O(1) random member for `SPOP` and
//! `SRANDMEMBER`, a scan cursor stable under writes). Operations over several keys need them
//! on one shard (the store checks).

use super::{FastSet, Hasher, Object, digest_parts, random_below, scan_window};
use crate::arena::KIND_SET;
use crate::clock::Clock;
use crate::error::RedisObjectResult;
use crate::glob::GlobPattern;
use crate::mutation::Mutation;
use crate::shard::Shard;

/// Estimated bytes per member beyond its bytes: the entry (hash + box: 24), index and control
/// (~10, up to twice that just after the table grows) and the allocation header with rounding
/// (~16).
pub(crate) const MEMBER_OVERHEAD: usize = 56;
const SET_OVERHEAD: usize = 64;

/// How several sets combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetAlgebra {
    /// Members of every set (`SINTER`).
    Intersection,
    /// Members of any set (`SUNION`).
    Union,
    /// Members of the first set and of no other (`SDIFF`).
    Difference,
}

/// One set value.
#[derive(Debug, Default)]
pub(crate) struct Set {
    members: FastSet<Box<[u8]>>,
    payload: usize,
}

impl Set {
    fn new_object() -> Object {
        Object::Set(Self::default())
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        SET_OVERHEAD + self.payload + self.members.len() * MEMBER_OVERHEAD
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    pub(crate) fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    pub(crate) fn insert(&mut self, member: &[u8]) -> bool {
        let added = self.members.insert(member.into());
        if added {
            self.payload += member.len();
        }
        added
    }

    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        let removed = self.members.swap_remove(member);
        if removed {
            self.payload -= member.len();
        }
        removed
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.members.iter().map(|m| &**m)
    }

    pub(crate) fn digest(&self) -> u64 {
        self.iter()
            .fold(0u64, |sum, m| sum.wrapping_add(digest_parts(&[m])))
    }
}

pub(crate) fn as_set(object: &Object) -> &Set {
    match object {
        Object::Set(s) => s,
        _ => unreachable!("kind checked by the shard"),
    }
}

pub(crate) fn as_set_mut(object: &mut Object) -> &mut Set {
    match object {
        Object::Set(s) => s,
        _ => unreachable!("kind checked by the shard"),
    }
}

/// What the set commands return for several members, owned.
pub type Members = Vec<Vec<u8>>;

impl Shard {
    /// `SADD`: how many members were new.
    pub(crate) fn sadd(
        &mut self,
        tag: u32,
        key: &[u8],
        members: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let create = (!members.is_empty()).then_some(Set::new_object as fn() -> Object);
        let added = self.write_object(tag, key, KIND_SET, create, clock, |object, emit| {
            let set = as_set_mut(object);
            let added: Vec<&[u8]> = members.iter().copied().filter(|m| set.insert(m)).collect();
            if !added.is_empty() {
                emit.emit(Mutation::SAdd {
                    key: emit.key,
                    members: &added,
                });
            }
            Ok(added.len())
        })?;
        Ok(added.unwrap_or(0))
    }

    /// `SREM`: how many members were there (the key goes with its last member).
    pub(crate) fn srem(
        &mut self,
        tag: u32,
        key: &[u8],
        members: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        self.remove_elements(tag, key, KIND_SET, members, clock, |key, members| {
            Mutation::SRem { key, members }
        })
    }

    /// `SPOP key [count]`: removes and returns up to `count` random members, logged as the
    /// concrete members removed (a replay removes the same ones).
    pub(crate) fn spop(
        &mut self,
        tag: u32,
        key: &[u8],
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<Members> {
        let popped = self.write_object(tag, key, KIND_SET, None, clock, |object, emit| {
            let set = as_set_mut(object);
            let mut popped = Vec::with_capacity(count.min(set.len()));
            while popped.len() < count && !set.is_empty() {
                let i = random_below(set.len());
                let member = set.members.swap_remove_index(i).expect("index below len");
                set.payload -= member.len();
                popped.push(member.into_vec());
            }
            if !popped.is_empty() {
                let refs: Vec<&[u8]> = popped.iter().map(Vec::as_slice).collect();
                emit.emit(Mutation::SRem {
                    key: emit.key,
                    members: &refs,
                });
            }
            Ok(popped)
        })?;
        Ok(popped.unwrap_or_default())
    }

    /// `SMOVE`: true when `member` was in `source` (and is now in `destination`).
    pub(crate) fn smove(
        &mut self,
        source: (u32, &[u8]),
        destination: (u32, &[u8]),
        member: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        // Redis's order: a missing source is 0 whatever the destination holds.
        if !self.exists(source.0, source.1, clock) {
            return Ok(false);
        }
        self.expect_kind(source.0, source.1, KIND_SET, clock)?;
        self.expect_kind(destination.0, destination.1, KIND_SET, clock)?;
        self.grouped(|shard| {
            if shard.srem(source.0, source.1, &[member], clock)? == 0 {
                return Ok(false);
            }
            shard.sadd(destination.0, destination.1, &[member], clock)?;
            Ok(true)
        })
    }

    /// `SINTERSTORE`/`SUNIONSTORE`/`SDIFFSTORE`: stores the result at `destination`
    /// (replacing whatever it held; an empty result deletes it), its size. Logged as a delete
    /// of the destination and an `SAdd` of the result, one group ([`Shard::grouped`]).
    pub(crate) fn set_store(
        &mut self,
        destination: (u32, &[u8]),
        keys: &[(u32, &[u8])],
        algebra: SetAlgebra,
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let result = self.set_combine(keys, algebra, usize::MAX, clock)?;
        let (tag, key) = destination;
        let refs: Vec<&[u8]> = result.iter().map(Vec::as_slice).collect();
        self.grouped(|shard| {
            shard.delete(tag, key, clock);
            shard.sadd(tag, key, &refs, clock)
        })
    }

    /// The live set of `key` (`None` when missing), WRONGTYPE for another type.
    fn set_ref(&self, tag: u32, key: &[u8], clock: &Clock) -> RedisObjectResult<Option<&Set>> {
        Ok(self.object_ref(tag, key, KIND_SET, clock)?.map(as_set))
    }

    /// `SINTER`/`SUNION`/`SDIFF` (at most `limit` members, for `SINTERCARD`).
    pub(crate) fn set_combine(
        &self,
        keys: &[(u32, &[u8])],
        algebra: SetAlgebra,
        limit: usize,
        clock: &Clock,
    ) -> RedisObjectResult<Members> {
        let sets = keys
            .iter()
            .map(|&(tag, key)| self.set_ref(tag, key, clock))
            .collect::<RedisObjectResult<Vec<_>>>()?;
        let mut out = Vec::new();
        match algebra {
            SetAlgebra::Intersection => {
                if sets.iter().any(Option::is_none) {
                    return Ok(out);
                }
                let mut sets: Vec<&Set> = sets.into_iter().flatten().collect();
                sets.sort_by_key(|s| s.len());
                let Some((smallest, rest)) = sets.split_first() else {
                    return Ok(out);
                };
                for m in smallest.iter() {
                    if out.len() >= limit {
                        break;
                    }
                    if rest.iter().all(|s| s.contains(m)) {
                        out.push(m.to_vec());
                    }
                }
            }
            SetAlgebra::Union => {
                let mut seen: FastSet<&[u8]> = FastSet::with_hasher(Hasher::default());
                for set in sets.iter().flatten() {
                    for m in set.iter() {
                        if seen.len() >= limit {
                            break;
                        }
                        seen.insert(m);
                    }
                }
                out = seen.into_iter().map(<[u8]>::to_vec).collect();
            }
            SetAlgebra::Difference => {
                let Some(Some(first)) = sets.first() else {
                    return Ok(out);
                };
                for m in first.iter() {
                    if out.len() >= limit {
                        break;
                    }
                    if !sets[1..].iter().flatten().any(|s| s.contains(m)) {
                        out.push(m.to_vec());
                    }
                }
            }
        }
        Ok(out)
    }

    fn read_set<R>(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
        read: impl FnOnce(&Set) -> R,
    ) -> RedisObjectResult<Option<R>> {
        self.read_object(tag, key, KIND_SET, clock, |o| read(as_set(o)))
    }

    /// `SMEMBERS`.
    pub(crate) fn smembers(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Members> {
        Ok(self
            .read_set(tag, key, clock, |s| s.iter().map(<[u8]>::to_vec).collect())?
            .unwrap_or_default())
    }

    /// `SMEMBERS` read in place into `visitor` (see [`crate::Visitor`]).
    pub(crate) fn smembers_visit(
        &self,
        tag: u32,
        key: &[u8],
        visitor: &mut dyn crate::Visitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_set(tag, key, clock, |s| {
            visitor.len(s.len());
            for member in s.iter() {
                if !visitor.item(member) {
                    break;
                }
            }
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `SISMEMBER`.
    pub(crate) fn sismember(
        &self,
        tag: u32,
        key: &[u8],
        member: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        Ok(self.read_set(tag, key, clock, |s| s.contains(member))? == Some(true))
    }

    /// `SMISMEMBER`: one answer per member.
    pub(crate) fn smismember(
        &self,
        tag: u32,
        key: &[u8],
        members: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<bool>> {
        Ok(self
            .read_set(tag, key, clock, |s| {
                members.iter().map(|m| s.contains(m)).collect()
            })?
            .unwrap_or_else(|| vec![false; members.len()]))
    }

    /// `SCARD`.
    pub(crate) fn scard(&self, tag: u32, key: &[u8], clock: &Clock) -> RedisObjectResult<usize> {
        Ok(self.read_set(tag, key, clock, Set::len)?.unwrap_or(0))
    }

    /// `SRANDMEMBER key [count]`: `None` gives at most one member; a positive count that many
    /// distinct members; a negative count exactly `-count`, repeats allowed.
    pub(crate) fn srandmember(
        &self,
        tag: u32,
        key: &[u8],
        count: Option<i64>,
        clock: &Clock,
    ) -> RedisObjectResult<Members> {
        let mut picks = super::Collect::default();
        self.srandmember_visit(tag, key, count, &mut picks, clock)?;
        Ok(picks.0)
    }

    /// `SRANDMEMBER key [count]` read in place into `visitor` (see [`crate::Visitor`]): one
    /// member (`count` `None`; [`crate::Visitor::len`] is 1, or 0 for a missing key), up to
    /// `count` distinct ones, or `-count` with repetitions, each written as it is drawn (a
    /// count of billions never allocates for them all).
    pub(crate) fn srandmember_visit(
        &self,
        tag: u32,
        key: &[u8],
        count: Option<i64>,
        visitor: &mut dyn crate::Visitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_set(tag, key, clock, |s| {
            let len = s.len();
            super::visit_random(len, count, visitor, |i, v| v.item(&s.members[i]));
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
    pub(crate) fn sscan(
        &self,
        tag: u32,
        key: &[u8],
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<(u64, Members)> {
        Ok(self
            .read_set(tag, key, clock, |s| {
                let pattern = pattern.map(|p| GlobPattern::new(p, false));
                let (window, next) = scan_window(cursor, s.len(), count);
                let found = window
                    .rev()
                    .map(|i| &*s.members[i])
                    .filter(|m| pattern.as_ref().is_none_or(|p| p.matches(m)))
                    .map(<[u8]>::to_vec)
                    .collect();
                (next, found)
            })?
            .unwrap_or((0, Vec::new())))
    }
}
