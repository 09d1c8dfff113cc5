//! Hashes: `HSET` and its family.
//!
//! A hash is an [`FastMap`] of field → value (insertion-indexed: O(1) lookup, O(1) random
//! field, O(1) removal by swapping the last field into the hole, and a scan cursor that stays
//! valid under writes, see [`super::scan_window`]).

use super::number::{incr_float, incr_i64, parse_float};
use super::{FastMap, Object, digest_parts, random_below, scan_window};
use crate::arena::KIND_HASH;
use crate::clock::Clock;
use crate::error::{RedisObjectResult, StoreError};
use crate::glob::GlobPattern;
use crate::mutation::Mutation;
use crate::shard::Shard;

/// Estimated bytes per field beyond its field and value bytes: the map entry (hash, two boxed
/// slices: 40 bytes), its index slot and control byte (~10 at the map's load factor) and two
/// allocator headers with rounding (~32).
pub(crate) const FIELD_OVERHEAD: usize = 80;
/// Estimated bytes of an empty hash (the map's header and allocations).
const HASH_OVERHEAD: usize = 64;

/// One hash value.
#[derive(Debug, Default)]
pub(crate) struct Hash {
    map: FastMap<Box<[u8]>, Box<[u8]>>,
    /// Field and value bytes of every field.
    payload: usize,
}

impl Hash {
    fn new_object() -> Object {
        Object::Hash(Self::default())
    }

    pub(crate) fn mem_bytes(&self) -> usize {
        HASH_OVERHEAD + self.payload + self.map.len() * FIELD_OVERHEAD
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.map.get(field).map(|v| &**v)
    }

    /// Sets `field`; true when it is new.
    pub(crate) fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(old) = self.map.get_mut(field) {
            self.payload = self.payload + value.len() - old.len();
            *old = value.into();
            false
        } else {
            self.payload += field.len() + value.len();
            self.map.insert(field.into(), value.into());
            true
        }
    }

    /// Removes `field`; true when it was there.
    pub(crate) fn remove(&mut self, field: &[u8]) -> bool {
        match self.map.swap_remove(field) {
            Some(value) => {
                self.payload -= field.len() + value.len();
                true
            }
            None => false,
        }
    }

    /// Fields and values in the map's order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.map.iter().map(|(f, v)| (&**f, &**v))
    }

    /// Sum of per-field digests: independent of field order.
    pub(crate) fn digest(&self) -> u64 {
        self.iter()
            .fold(0u64, |sum, (f, v)| sum.wrapping_add(digest_parts(&[f, v])))
    }
}

fn as_hash(object: &Object) -> &Hash {
    match object {
        Object::Hash(h) => h,
        _ => unreachable!("kind checked by the shard"),
    }
}

fn as_hash_mut(object: &mut Object) -> &mut Hash {
    match object {
        Object::Hash(h) => h,
        _ => unreachable!("kind checked by the shard"),
    }
}

fn owned(pair: (&[u8], &[u8])) -> (Vec<u8>, Vec<u8>) {
    (pair.0.to_vec(), pair.1.to_vec())
}

/// What `HRANDFIELD` returns per pick: the field and, when asked, its value.
pub type RandomField = (Vec<u8>, Option<Vec<u8>>);

/// A field and its value, owned.
pub type FieldValue = (Vec<u8>, Vec<u8>);

impl Shard {
    /// `HSET key field value [field value ...]`: the number of fields that were new.
    pub(crate) fn hset(
        &mut self,
        tag: u32,
        key: &[u8],
        pairs: &[(&[u8], &[u8])],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        if pairs.is_empty() {
            return self.hlen(tag, key, clock).map(|_| 0);
        }
        let added = self.write_object(
            tag,
            key,
            KIND_HASH,
            Some(Hash::new_object),
            clock,
            |object, emit| {
                let hash = as_hash_mut(object);
                let added = pairs.iter().filter(|(f, v)| hash.insert(f, v)).count();
                emit.emit(Mutation::HSet {
                    key: emit.key,
                    pairs,
                });
                Ok(added)
            },
        )?;
        Ok(added.unwrap_or(0))
    }

    /// `HSETNX`: sets `field` only if it is absent; true when it did.
    pub(crate) fn hsetnx(
        &mut self,
        tag: u32,
        key: &[u8],
        field: &[u8],
        value: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        let set = self.write_object(
            tag,
            key,
            KIND_HASH,
            Some(Hash::new_object),
            clock,
            |object, emit| {
                let hash = as_hash_mut(object);
                if hash.get(field).is_some() {
                    return Ok(false);
                }
                hash.insert(field, value);
                emit.emit(Mutation::HSet {
                    key: emit.key,
                    pairs: &[(field, value)],
                });
                Ok(true)
            },
        )?;
        Ok(set == Some(true))
    }

    /// `HDEL`: the number of fields removed (the key goes when its last field does).
    pub(crate) fn hdel(
        &mut self,
        tag: u32,
        key: &[u8],
        fields: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        self.remove_elements(tag, key, KIND_HASH, fields, clock, |key, fields| {
            Mutation::HDel { key, fields }
        })
    }

    /// `HINCRBY`: the field's new integer value.
    pub(crate) fn hincrby(
        &mut self,
        tag: u32,
        key: &[u8],
        field: &[u8],
        delta: i64,
        clock: &Clock,
    ) -> RedisObjectResult<i64> {
        let value = self.write_object(
            tag,
            key,
            KIND_HASH,
            Some(Hash::new_object),
            clock,
            |object, emit| {
                let hash = as_hash_mut(object);
                let value = incr_i64(hash.get(field), delta, true)?;
                let text = itoa::Buffer::new().format(value).as_bytes().to_vec();
                hash.insert(field, &text);
                emit.emit(Mutation::HSet {
                    key: emit.key,
                    pairs: &[(field, &text)],
                });
                Ok(value)
            },
        )?;
        Ok(value.expect("created when missing"))
    }

    /// `HINCRBYFLOAT`: the field's new value as stored (logged as the resulting `HSET`, so a
    /// replay cannot round differently). `delta` is the increment's text, read as Redis reads
    /// it (a `long double`) before the key is looked at, as is the refusal of an infinite one.
    pub(crate) fn hincrbyfloat(
        &mut self,
        tag: u32,
        key: &[u8],
        field: &[u8],
        delta: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<u8>> {
        let delta = parse_float(delta).ok_or(StoreError::NotAFloat)?;
        if !delta.is_finite() {
            return Err(StoreError::IncrementNanOrInfinity);
        }
        let value = self.write_object(
            tag,
            key,
            KIND_HASH,
            Some(Hash::new_object),
            clock,
            |object, emit| {
                let hash = as_hash_mut(object);
                let text = incr_float(hash.get(field), delta, true)?;
                hash.insert(field, &text);
                emit.emit(Mutation::HSet {
                    key: emit.key,
                    pairs: &[(field, &text)],
                });
                Ok(text)
            },
        )?;
        Ok(value.expect("created when missing"))
    }

    fn read_hash<R>(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
        read: impl FnOnce(&Hash) -> R,
    ) -> RedisObjectResult<Option<R>> {
        self.read_object(tag, key, KIND_HASH, clock, |o| read(as_hash(o)))
    }

    /// `HGET`.
    pub(crate) fn hget(
        &self,
        tag: u32,
        key: &[u8],
        field: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<u8>>> {
        Ok(self
            .read_hash(tag, key, clock, |h| h.get(field).map(<[u8]>::to_vec))?
            .flatten())
    }

    /// `HMGET`: one answer per field, in order.
    pub(crate) fn hmget(
        &self,
        tag: u32,
        key: &[u8],
        fields: &[&[u8]],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<Option<Vec<u8>>>> {
        Ok(self
            .read_hash(tag, key, clock, |h| {
                fields
                    .iter()
                    .map(|f| h.get(f).map(<[u8]>::to_vec))
                    .collect()
            })?
            .unwrap_or_else(|| vec![None; fields.len()]))
    }

    /// `HGETALL`.
    pub(crate) fn hgetall(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<(Vec<u8>, Vec<u8>)>> {
        Ok(self
            .read_hash(tag, key, clock, |h| h.iter().map(owned).collect())?
            .unwrap_or_default())
    }

    /// `HGETALL`, `HKEYS` or `HVALS` read in place into `visitor` (see [`crate::Visitor`]).
    pub(crate) fn hash_visit(
        &self,
        tag: u32,
        key: &[u8],
        part: crate::HashPart,
        visitor: &mut dyn crate::Visitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_hash(tag, key, clock, |h| {
            visitor.len(h.len());
            for (field, value) in h.iter() {
                let more = match part {
                    crate::HashPart::Pairs => visitor.item(field) && visitor.item(value),
                    crate::HashPart::Fields => visitor.item(field),
                    crate::HashPart::Values => visitor.item(value),
                };
                if !more {
                    break;
                }
            }
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `HKEYS`.
    pub(crate) fn hkeys(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<Vec<u8>>> {
        Ok(self
            .read_hash(tag, key, clock, |h| {
                h.iter().map(|(f, _)| f.to_vec()).collect()
            })?
            .unwrap_or_default())
    }

    /// `HVALS`.
    pub(crate) fn hvals(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<Vec<u8>>> {
        Ok(self
            .read_hash(tag, key, clock, |h| {
                h.iter().map(|(_, v)| v.to_vec()).collect()
            })?
            .unwrap_or_default())
    }

    /// `HLEN`.
    pub(crate) fn hlen(&self, tag: u32, key: &[u8], clock: &Clock) -> RedisObjectResult<usize> {
        Ok(self.read_hash(tag, key, clock, Hash::len)?.unwrap_or(0))
    }

    /// `HEXISTS`.
    pub(crate) fn hexists(
        &self,
        tag: u32,
        key: &[u8],
        field: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<bool> {
        Ok(self.read_hash(tag, key, clock, |h| h.get(field).is_some())? == Some(true))
    }

    /// `HSTRLEN`: the length of the field's value (0 when absent).
    pub(crate) fn hstrlen(
        &self,
        tag: u32,
        key: &[u8],
        field: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        Ok(self
            .read_hash(tag, key, clock, |h| h.get(field).map_or(0, <[u8]>::len))?
            .unwrap_or(0))
    }

    /// `HRANDFIELD key [count [WITHVALUES]]`. Without a count (`None`): at most one field.
    /// A positive count: that many distinct fields (all of them if fewer). A negative count:
    /// exactly `-count` fields, repeats allowed.
    pub(crate) fn hrandfield(
        &self,
        tag: u32,
        key: &[u8],
        count: Option<i64>,
        with_values: bool,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<RandomField>> {
        let mut picks = super::Collect::default();
        self.hrandfield_visit(tag, key, count, with_values, &mut picks, clock)?;
        let mut items = picks.0.into_iter();
        let mut out = Vec::new();
        while let Some(field) = items.next() {
            out.push((field, if with_values { items.next() } else { None }));
        }
        Ok(out)
    }

    /// `HRANDFIELD key [count [WITHVALUES]]` read in place into `visitor` (see
    /// [`crate::Visitor`]): as [`Shard::hrandfield`], each pick a field (and, with values, its
    /// value after it) written as it is drawn.
    pub(crate) fn hrandfield_visit(
        &self,
        tag: u32,
        key: &[u8],
        count: Option<i64>,
        with_values: bool,
        visitor: &mut dyn crate::Visitor,
        clock: &Clock,
    ) -> RedisObjectResult<()> {
        let visited = self.read_hash(tag, key, clock, |h| {
            super::visit_random(h.len(), count, visitor, |i, v| {
                let (field, value) = h.map.get_index(i).expect("index below len");
                v.item(field) && (!with_values || v.item(value))
            });
        })?;
        if visited.is_none() {
            visitor.len(0);
        }
        Ok(())
    }

    /// `HSCAN key cursor [MATCH pattern] [COUNT count]`: the next cursor (0 when done) and
    /// field/value pairs. Every field present for the whole scan is returned at least once.
    pub(crate) fn hscan(
        &self,
        tag: u32,
        key: &[u8],
        cursor: u64,
        pattern: Option<&[u8]>,
        count: usize,
        clock: &Clock,
    ) -> RedisObjectResult<(u64, Vec<FieldValue>)> {
        Ok(self
            .read_hash(tag, key, clock, |h| {
                let pattern = pattern.map(|p| GlobPattern::new(p, false));
                let (window, next) = scan_window(cursor, h.len(), count);
                let found = window
                    .rev()
                    .filter_map(|i| h.map.get_index(i))
                    .filter(|(f, _)| pattern.as_ref().is_none_or(|p| p.matches(f)))
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect();
                (next, found)
            })?
            .unwrap_or((0, Vec::new())))
    }
}

/// `n` distinct positions out of `0..len` (`n <= len`), in random order.
pub(crate) fn distinct_positions(len: usize, n: usize) -> Vec<usize> {
    if n * 2 >= len {
        // Most of them: shuffle the first n of all positions.
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..n {
            let j = i + random_below(len - i);
            all.swap(i, j);
        }
        all.truncate(n);
        all
    } else {
        let mut chosen = std::collections::HashSet::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let i = random_below(len);
            if chosen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}
