//! Lists: `LPUSH` and its family.
//!
//! A list is a `VecDeque` of boxed elements: O(1) at both ends, O(1) by index. Index arguments
//! follow Redis (negative counts from the tail; ranges clamp).

use std::collections::VecDeque;

use super::{Object, digest_parts};
use crate::arena::KIND_LIST;
use crate::clock::Clock;
use crate::error::{RedisObjectResult, StoreError};
use crate::mutation::Mutation;
use crate::shard::Shard;

/// Estimated bytes per element beyond its bytes: the deque slot (16) and the allocation's
/// header with rounding (~16).
pub(crate) const ELEMENT_OVERHEAD: usize = 32;
const LIST_OVERHEAD: usize = 48;

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListEnd {
    /// The head (`LPUSH`, `LPOP`).
    Left,
    /// The tail (`RPUSH`, `RPOP`).
    Right,
}

/// `LINSERT`'s position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InsertPosition {
    /// `BEFORE` the pivot.
    Before,
    /// `AFTER` the pivot.
    After,
}

/// `LPOS`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LposOptions {
    /// `RANK`: start at the rank-th match (negative: counting from the tail). Not 0.
    pub rank: i64,
    /// `COUNT`: how many matches (0: all). Without `COUNT` Redis answers the first alone.
    pub count: usize,
    /// `MAXLEN`: compare at most this many elements (0: the whole list).
    pub maxlen: usize,
}

impl Default for LposOptions {
    fn default() -> Self {
        Self {
            rank: 1,
            count: 1,
            maxlen: 0,
        }
    }
}

/// One list value.
#[derive(Debug, Default)]
pub(crate) struct List {
    items: VecDeque<Box<[u8]>>,
    payload: usize,
}

impl List {
    fn new_object() -> Object {
        Object::List(Self::default())
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        LIST_OVERHEAD + self.payload + self.items.len() * ELEMENT_OVERHEAD
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.items.iter().map(|i| &**i)
    }

    pub(crate) fn push(&mut self, end: ListEnd, item: &[u8]) {
        self.payload += item.len();
        match end {
            ListEnd::Left => self.items.push_front(item.into()),
            ListEnd::Right => self.items.push_back(item.into()),
        }
    }

    pub(crate) fn pop(&mut self, end: ListEnd) -> Option<Box<[u8]>> {
        let item = match end {
            ListEnd::Left => self.items.pop_front(),
            ListEnd::Right => self.items.pop_back(),
        }?;
        self.payload -= item.len();
        Some(item)
    }

    /// Keeps positions `start..end` (already clamped).
    fn keep(&mut self, start: usize, end: usize) {
        for item in self.items.drain(end..) {
            self.payload -= item.len();
        }
        for item in self.items.drain(..start) {
            self.payload -= item.len();
        }
    }

    /// Digest of the elements in order.
    pub(crate) fn digest(&self) -> u64 {
        let parts: Vec<&[u8]> = self.iter().collect();
        digest_parts(&parts)
    }
}

pub(crate) fn as_list(object: &Object) -> &List {
    match object {
        Object::List(l) => l,
        _ => unreachable!("kind checked by the shard"),
    }
}

pub(crate) fn as_list_mut(object: &mut Object) -> &mut List {
    match object {
        Object::List(l) => l,
        _ => unreachable!("kind checked by the shard"),
    }
}

/// Redis's index: negative counts from the tail; `None` when outside.
fn index_of(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let i = if index < 0 { index + len } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

/// Redis's `LRANGE`/`LTRIM` clamping: the positions `start..end` (empty when the range is).
pub(crate) fn clamp_range(start: i64, stop: i64, len: usize) -> std::ops::Range<usize> {
    let n = len as i64;
    let mut start = if start < 0 { start + n } else { start };
    let mut stop = if stop < 0 { stop + n } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= n {
        return 0..0;
    }
    if stop >= n {
        stop = n - 1;
    }
    start as usize..stop as usize + 1
}

impl Shard {
    /// `LPUSH`/`RPUSH` (and, with `only_if_exists`, `LPUSHX`/`RPUSHX`): the new length (0 when
    /// `only_if_exists` and the key is missing).
    pub(crate) fn push(
        &mut self,
        tag: u32,
        key: &[u8],
        end: ListEnd,
        items: &[&[u8]],
        only_if_exists: bool,
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let create =
            (!only_if_exists && !items.is_empty()).then_some(List::new_object as fn() -> Object);
        let len = self.write_object(tag, key, KIND_LIST, create, clock, |object, emit| {
            let list = as_list_mut(object);
            for item in items {
                list.push(end, item);
            }
            if !items.is_empty() {
                emit.emit(Mutation::ListPush {
                    key: emit.key,
                    end,
                    items,
                });
            }
            Ok(list.len())
        })?;
        Ok(len.unwrap_or(0))
    }

    /// `LPOP`/`RPOP key count`: up to `count` elements; `None` when the key is missing.
    pub(crate) fn pop(
        &mut self,
        tag: u32,
        key: &[u8],
        end: ListEnd,
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<Vec<u8>>>> {
        self.write_object(tag, key, KIND_LIST, None, clock, |object, emit| {
            let list = as_list_mut(object);
            let popped: Vec<Vec<u8>> = (0..count)
                .map_while(|_| list.pop(end).map(Vec::from))
                .collect();
            if !popped.is_empty() {
                emit.emit(Mutation::ListPop {
                    key: emit.key,
                    end,
                    count: popped.len(),
                });
            }
            Ok(popped)
        })
    }

    /// `LPUSH`: the new length.
    pub(crate) fn lpush(
        &mut self,
        tag: u32,
        key: &[u8],
        items: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        self.push(tag, key, ListEnd::Left, items, false, clock)
    }

    /// `RPUSH`: the new length.
    pub(crate) fn rpush(
        &mut self,
        tag: u32,
        key: &[u8],
        items: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        self.push(tag, key, ListEnd::Right, items, false, clock)
    }

    /// `LPOP key count`.
    pub(crate) fn lpop(
        &mut self,
        tag: u32,
        key: &[u8],
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<Vec<u8>>>> {
        self.pop(tag, key, ListEnd::Left, count, clock)
    }

    /// `RPOP key count`.
    pub(crate) fn rpop(
        &mut self,
        tag: u32,
        key: &[u8],
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<Vec<u8>>>> {
        self.pop(tag, key, ListEnd::Right, count, clock)
    }

    /// `LSET`. [`StoreError::NoSuchKey`], [`StoreError::IndexOutOfRange`].
    pub(crate) fn lset(
        &mut self,
        tag: u32,
        key: &[u8],
        index: i64,
        value: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        self.write_object(tag, key, KIND_LIST, None, clock, |object, emit| {
            let list = as_list_mut(object);
            let i = index_of(index, list.len()).ok_or(StoreError::IndexOutOfRange)?;
            list.payload = list.payload + value.len() - list.items[i].len();
            list.items[i] = value.into();
            emit.emit(Mutation::ListSet {
                key: emit.key,
                index: i,
                value,
            });
            Ok(())
        })?
        .ok_or(StoreError::NoSuchKey)
    }

    /// `LREM`: removes `count` occurrences of `value` from the head (`count > 0`), the tail
    /// (`count < 0`) or everywhere (`0`); how many went.
    pub(crate) fn lrem(
        &mut self,
        tag: u32,
        key: &[u8],
        count: i64,
        value: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let removed = self.write_object(tag, key, KIND_LIST, None, clock, |object, emit| {
            let list = as_list_mut(object);
            let limit = if count == 0 {
                usize::MAX
            } else {
                count.unsigned_abs() as usize
            };
            let mut removed = 0;
            let mut keep = vec![true; list.len()];
            let positions: Box<dyn Iterator<Item = usize>> = if count < 0 {
                Box::new((0..list.len()).rev())
            } else {
                Box::new(0..list.len())
            };
            for i in positions {
                if removed == limit {
                    break;
                }
                if &*list.items[i] == value {
                    keep[i] = false;
                    removed += 1;
                }
            }
            if removed > 0 {
                let mut flags = keep.into_iter();
                list.items.retain(|_| flags.next().unwrap_or(true));
                list.payload -= removed * value.len();
                emit.emit(Mutation::ListRem {
                    key: emit.key,
                    count,
                    value,
                });
            }
            Ok(removed)
        })?;
        Ok(removed.unwrap_or(0))
    }

    /// `LTRIM`: keeps `start..=stop` (Redis's clamping; an empty range deletes the key).
    pub(crate) fn ltrim(
        &mut self,
        tag: u32,
        key: &[u8],
        start: i64,
        stop: i64,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        self.write_object(tag, key, KIND_LIST, None, clock, |object, emit| {
            let list = as_list_mut(object);
            let range = clamp_range(start, stop, list.len());
            if range != (0..list.len()) {
                list.keep(range.start, range.end);
                emit.emit(Mutation::ListTrim {
                    key: emit.key,
                    start,
                    stop,
                });
            }
            Ok(())
        })?;
        Ok(())
    }

    /// `LINSERT`: the new length, `-1` when the pivot is absent, 0 when the key is.
    pub(crate) fn linsert(
        &mut self,
        tag: u32,
        key: &[u8],
        position: InsertPosition,
        pivot: &[u8],
        value: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<i64> {
        let len = self.write_object(tag, key, KIND_LIST, None, clock, |object, emit| {
            let list = as_list_mut(object);
            let Some(at) = list.items.iter().position(|i| &**i == pivot) else {
                return Ok(-1);
            };
            let at = match position {
                InsertPosition::Before => at,
                InsertPosition::After => at + 1,
            };
            list.items.insert(at, value.into());
            list.payload += value.len();
            emit.emit(Mutation::ListInsert {
                key: emit.key,
                position,
                pivot,
                value,
            });
            Ok(list.len() as i64)
        })?;
        Ok(len.unwrap_or(0))
    }

    /// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT` within this shard: the element moved,
    /// `None` when the source is missing. WRONGTYPE (changing nothing) when either key holds
    /// another type. Logged as a pop from the source and a push to the destination, one group
    /// ([`Shard::grouped`]).
    pub(crate) fn lmove(
        &mut self,
        source: (u32, &[u8]),
        destination: (u32, &[u8]),
        from: ListEnd,
        to: ListEnd,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<u8>>> {
        // Redis's order: a missing source is nil whatever the destination holds; then the
        // source's type, then the destination's.
        if self.read_list(source.0, source.1, clock, |_| ())?.is_none() {
            return Ok(None);
        }
        self.expect_kind(destination.0, destination.1, KIND_LIST, clock)?;
        // A one-element list moved onto itself stays as it is (popping it first would delete
        // the key and its TTL with it; Redis deletes an emptied source only after the push).
        if source == destination
            && let Some(Some(item)) = self.read_list(source.0, source.1, clock, |l| {
                (l.len() == 1)
                    .then(|| l.iter().next().map(<[u8]>::to_vec))
                    .flatten()
            })?
        {
            return Ok(Some(item));
        }
        self.grouped(|shard| {
            let Some(mut popped) = shard.pop(source.0, source.1, from, 1, clock)? else {
                return Ok(None);
            };
            let Some(item) = popped.pop() else {
                return Ok(None);
            };
            shard.push(destination.0, destination.1, to, &[&item], false, clock)?;
            Ok(Some(item))
        })
    }

    fn read_list<R>(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
        read: impl FnOnce(&List) -> R,
    ) -> RedisObjectResult<Option<R>> {
        self.read_object(tag, key, KIND_LIST, clock, |o| read(as_list(o)))
    }

    /// `LRANGE`.
    pub(crate) fn lrange(
        &self,
        tag: u32,
        key: &[u8],
        start: i64,
        stop: i64,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<Vec<u8>>> {
        Ok(self
            .read_list(tag, key, clock, |l| {
                l.items
                    .range(clamp_range(start, stop, l.len()))
                    .map(|i| i.to_vec())
                    .collect()
            })?
            .unwrap_or_default())
    }

    /// `LRANGE` read in place into `visitor` (see [`crate::Visitor`]).
    pub(crate) fn lrange_visit(
        &self,
        tag: u32,
        key: &[u8],
        start: i64,
        stop: i64,
        visitor: &mut dyn crate::Visitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_list(tag, key, clock, |l| {
            let range = clamp_range(start, stop, l.len());
            visitor.len(range.len());
            for item in l.items.range(range) {
                if !visitor.item(item) {
                    break;
                }
            }
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `LLEN`.
    pub(crate) fn llen(&self, tag: u32, key: &[u8], clock: &Clock) -> RedisObjectResult<usize> {
        Ok(self.read_list(tag, key, clock, List::len)?.unwrap_or(0))
    }

    /// `LINDEX`.
    pub(crate) fn lindex(
        &self,
        tag: u32,
        key: &[u8],
        index: i64,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<u8>>> {
        Ok(self
            .read_list(tag, key, clock, |l| {
                index_of(index, l.len()).map(|i| l.items[i].to_vec())
            })?
            .flatten())
    }

    /// `LPOS key element [RANK rank] [COUNT count] [MAXLEN maxlen]`: positions of matches,
    /// the `rank`-th match first (negative: from the tail), at most `count` of them (0: all),
    /// looking at no more than `maxlen` elements (0: all). [`StoreError::RankZero`].
    pub(crate) fn lpos(
        &self,
        tag: u32,
        key: &[u8],
        element: &[u8],
        options: LposOptions,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<usize>> {
        let LposOptions {
            rank,
            count,
            maxlen,
        } = options;
        if rank == 0 || rank == i64::MIN {
            return Err(StoreError::RankZero);
        }
        Ok(self
            .read_list(tag, key, clock, |l| {
                let len = l.len();
                let limit = if maxlen == 0 { len } else { maxlen.min(len) };
                let order: Box<dyn Iterator<Item = usize>> = if rank > 0 {
                    Box::new(0..limit)
                } else {
                    Box::new((len - limit..len).rev())
                };
                let mut skip = rank.unsigned_abs() - 1;
                let want = if count == 0 { usize::MAX } else { count };
                let mut found = Vec::new();
                for i in order {
                    if &*l.items[i] == element {
                        if skip > 0 {
                            skip -= 1;
                            continue;
                        }
                        found.push(i);
                        if found.len() == want {
                            break;
                        }
                    }
                }
                found
            })?
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::clamp_range;

    #[test]
    fn ranges_clamp_as_redis() {
        assert_eq!(clamp_range(0, -1, 3), 0..3);
        assert_eq!(clamp_range(-100, 100, 3), 0..3);
        assert_eq!(clamp_range(5, 10, 3), 0..0);
        assert_eq!(clamp_range(2, 1, 3), 0..0);
        assert_eq!(clamp_range(-2, -1, 3), 1..3);
        assert_eq!(clamp_range(0, 0, 0), 0..0);
    }
}
