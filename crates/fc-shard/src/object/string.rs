//! Strings beyond `GET`/`SET`: counters, ranges, `APPEND`, and `SET`'s options.
//!
//! Every write here goes through [`Shard::set`], so it is one [`crate::Mutation::Set`] with the
//! whole resulting value and its expiry: a replay cannot compute a different number.

use super::number::{incr_float, incr_i64, parse_float};
use crate::arena::{self, KIND_STRING};
use crate::clock::Clock;
use crate::error::{RedisObjectResult, StoreError};
use crate::shard::Shard;

/// Redis's largest string (`proto-max-bulk-len`, 512 MiB).
pub const MAX_STRING_LEN: usize = 512 * 1024 * 1024;

/// When `SET` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SetCondition {
    /// Always (plain `SET`).
    #[default]
    Always,
    /// Only when the key does not exist (`NX`).
    IfAbsent,
    /// Only when the key exists (`XX`).
    IfPresent,
}

/// The expiry a write leaves on its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SetExpiry {
    /// No expiry (plain `SET` clears any).
    #[default]
    Clear,
    /// Keep the key's current expiry (`KEEPTTL`).
    Keep,
    /// Expire this many milliseconds from now (`EX`, `PX`).
    InMs(u64),
    /// Expire at this Unix time in milliseconds (`EXAT`, `PXAT`).
    AtMs(u64),
}

/// What `GETEX` does to the expiry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GetExExpiry {
    /// Leave it.
    #[default]
    Keep,
    /// Remove it (`PERSIST`).
    Persist,
    /// Expire this many milliseconds from now (`EX`, `PX`).
    InMs(u64),
    /// Expire at this Unix time in milliseconds (`EXAT`, `PXAT`); a time not after now
    /// deletes the key (the value is still returned), as Redis does.
    AtMs(u64),
}

/// `SET`'s options together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetOptions {
    /// `NX` / `XX`.
    pub condition: SetCondition,
    /// `EX`/`PX`/`EXAT`/`PXAT`/`KEEPTTL`.
    pub expiry: SetExpiry,
    /// `GET`: return the old value (and fail with WRONGTYPE, writing nothing, if the key holds
    /// another type).
    pub get: bool,
}

/// What `SET` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetOutcome {
    /// Whether the value was written (false when `NX`/`XX` said no).
    pub written: bool,
    /// With [`SetOptions::get`]: the old value, if there was one.
    pub previous: Option<Vec<u8>>,
}

impl Shard {
    /// The live string value of `key` for a read-modify-write: its location, value and expiry.
    fn string_entry(
        &mut self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<(Vec<u8>, Option<u64>)>> {
        let Some(loc) = self.live_entry(tag, key, clock) else {
            return Ok(None);
        };
        let chunk = self.chunk(loc);
        if arena::kind_of(chunk) != KIND_STRING {
            return Err(StoreError::WrongType);
        }
        Ok(Some((
            arena::value_of(chunk).to_vec(),
            arena::expiry_of(chunk),
        )))
    }

    /// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT|KEEPTTL]`.
    pub(crate) fn set_with(
        &mut self,
        tag: u32,
        key: &[u8],
        value: &[u8],
        options: SetOptions,
        clock: &Clock,
    ) -> RedisObjectResult<SetOutcome> {
        let plain = !options.get && options.condition == SetCondition::Always;
        if plain && !matches!(options.expiry, SetExpiry::Keep) {
            // Nothing of the old entry is read: one lookup, unless it has expired.
            let expire_at = match options.expiry {
                SetExpiry::InMs(ms) => Some(clock.now_ms().saturating_add(ms)),
                SetExpiry::AtMs(at) => Some(at),
                SetExpiry::Clear | SetExpiry::Keep => None,
            };
            if self.set_unless_expired(tag, key, value, expire_at, clock, true)? {
                return Ok(SetOutcome {
                    written: true,
                    previous: None,
                });
            }
        }
        let current = self.live_entry(tag, key, clock);
        let mut outcome = SetOutcome::default();
        let mut old_expiry = None;
        if let Some(loc) = current {
            let chunk = self.chunk(loc);
            old_expiry = arena::expiry_of(chunk);
            if options.get {
                if arena::kind_of(chunk) != KIND_STRING {
                    return Err(StoreError::WrongType);
                }
                outcome.previous = Some(arena::value_of(chunk).to_vec());
            }
        }
        let allowed = match options.condition {
            SetCondition::Always => true,
            SetCondition::IfAbsent => current.is_none(),
            SetCondition::IfPresent => current.is_some(),
        };
        if !allowed {
            return Ok(outcome);
        }
        let expire_at = match options.expiry {
            SetExpiry::Clear => None,
            SetExpiry::Keep => old_expiry,
            SetExpiry::InMs(ms) => Some(clock.now_ms().saturating_add(ms)),
            SetExpiry::AtMs(at) => Some(at),
        };
        self.set(tag, key, value, expire_at, clock)?;
        outcome.written = true;
        Ok(outcome)
    }

    /// `INCRBY` (and `INCR`, `DECR`, `DECRBY`): the new value; the key keeps its expiry.
    pub(crate) fn incr_by(
        &mut self,
        tag: u32,
        key: &[u8],
        delta: i64,
        clock: &Clock,
    ) -> RedisObjectResult<i64> {
        // Read in place (no copy of the old value, nor of the new one's text).
        let (value, expiry) = match self.live_entry(tag, key, clock) {
            None => (incr_i64(None, delta, false)?, None),
            Some(loc) => {
                let chunk = self.chunk(loc);
                if arena::kind_of(chunk) != KIND_STRING {
                    return Err(StoreError::WrongType);
                }
                let value = incr_i64(Some(arena::value_of(chunk)), delta, false)?;
                (value, arena::expiry_of(chunk))
            }
        };
        let mut text = itoa::Buffer::new();
        self.set(tag, key, text.format(value).as_bytes(), expiry, clock)?;
        Ok(value)
    }

    /// `INCRBYFLOAT`: the new value as stored; the key keeps its expiry. `delta` is the
    /// increment's text, read as Redis reads it (a `long double`) after the type check.
    pub(crate) fn incr_by_float(
        &mut self,
        tag: u32,
        key: &[u8],
        delta: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Vec<u8>> {
        let current = self.string_entry(tag, key, clock)?;
        let delta = parse_float(delta).ok_or(StoreError::NotAFloat)?;
        let text = incr_float(current.as_ref().map(|(v, _)| &v[..]), delta, false)?;
        let expiry = current.and_then(|(_, e)| e);
        self.set(tag, key, &text, expiry, clock)?;
        Ok(text)
    }

    /// `APPEND`: the new length (a missing key starts empty).
    pub(crate) fn append(
        &mut self,
        tag: u32,
        key: &[u8],
        suffix: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let (mut value, expiry) = self.string_entry(tag, key, clock)?.unwrap_or_default();
        if value.len() + suffix.len() > MAX_STRING_LEN {
            return Err(StoreError::StringTooLong);
        }
        value.extend_from_slice(suffix);
        self.set(tag, key, &value, expiry, clock)?;
        Ok(value.len())
    }

    /// `SETRANGE`: overwrites from `offset` (zero-padding a gap), the new length. An empty
    /// `bytes` changes nothing (and creates no key).
    pub(crate) fn set_range(
        &mut self,
        tag: u32,
        key: &[u8],
        offset: i64,
        bytes: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<usize> {
        let offset = usize::try_from(offset).map_err(|_| StoreError::OffsetOutOfRange)?;
        let current = self.string_entry(tag, key, clock)?;
        if bytes.is_empty() {
            return Ok(current.map_or(0, |(v, _)| v.len()));
        }
        if offset.saturating_add(bytes.len()) > MAX_STRING_LEN {
            return Err(StoreError::StringTooLong);
        }
        let (mut value, expiry) = current.unwrap_or_default();
        if value.len() < offset + bytes.len() {
            value.resize(offset + bytes.len(), 0);
        }
        value[offset..offset + bytes.len()].copy_from_slice(bytes);
        self.set(tag, key, &value, expiry, clock)?;
        Ok(value.len())
    }

    /// `GETDEL`.
    pub(crate) fn get_del(
        &mut self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<u8>>> {
        let Some((value, _)) = self.string_entry(tag, key, clock)? else {
            return Ok(None);
        };
        self.delete(tag, key, clock);
        Ok(Some(value))
    }

    /// `GETEX`.
    pub(crate) fn get_ex(
        &mut self,
        tag: u32,
        key: &[u8],
        expiry: GetExExpiry,
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<u8>>> {
        let Some((value, _)) = self.string_entry(tag, key, clock)? else {
            return Ok(None);
        };
        let now = clock.now_ms();
        match expiry {
            GetExExpiry::Keep => {}
            GetExExpiry::Persist => {
                self.set_expiry(tag, key, None, clock);
            }
            GetExExpiry::InMs(ms) => {
                self.set_expiry(tag, key, Some(now.saturating_add(ms)), clock);
            }
            GetExExpiry::AtMs(at) if at <= now => {
                self.delete(tag, key, clock);
            }
            GetExExpiry::AtMs(at) => {
                self.set_expiry(tag, key, Some(at), clock);
            }
        }
        Ok(Some(value))
    }

    /// `STRLEN`.
    pub(crate) fn strlen(&self, tag: u32, key: &[u8], clock: &Clock) -> RedisObjectResult<usize> {
        Ok(self.read_string(tag, key, clock)?.map_or(0, <[u8]>::len))
    }

    /// `GETRANGE`: bytes `start..=end` (negative counts from the end), clamped as Redis does;
    /// empty for a missing key.
    pub(crate) fn get_range(
        &self,
        tag: u32,
        key: &[u8],
        start: i64,
        end: i64,
        clock: &Clock,
    ) -> RedisObjectResult<Vec<u8>> {
        let Some(value) = self.read_string(tag, key, clock)? else {
            return Ok(Vec::new());
        };
        Ok(range_of(value, start, end).to_vec())
    }

    /// The live string value of `key`, copied; WRONGTYPE for an object.
    pub(crate) fn get_string(
        &self,
        tag: u32,
        key: &[u8],
        clock: &Clock,
    ) -> RedisObjectResult<Option<Vec<u8>>> {
        Ok(self.read_string(tag, key, clock)?.map(<[u8]>::to_vec))
    }

    /// Whether the key exists (any type, for `MSETNX`).
    pub(crate) fn occupied(&mut self, tag: u32, key: &[u8], clock: &Clock) -> bool {
        self.live_entry(tag, key, clock).is_some()
    }
}

/// Redis's `GETRANGE` clamping.
pub(crate) fn range_of(value: &[u8], start: i64, end: i64) -> &[u8] {
    let len = value.len() as i64;
    if start < 0 && end < 0 && start > end {
        return &[];
    }
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { (len + end).max(0) } else { end };
    let end = end.min(len - 1);
    if len == 0 || start > end {
        return &[];
    }
    &value[start as usize..=end as usize]
}

#[cfg(test)]
mod tests {
    use super::range_of;

    #[test]
    fn getrange_clamps_as_redis() {
        // Redis's documentation: SET mykey "This is a string".
        let v = b"This is a string";
        assert_eq!(range_of(v, 0, 3), b"This");
        assert_eq!(range_of(v, -3, -1), b"ing");
        assert_eq!(range_of(v, 0, -1), v);
        assert_eq!(range_of(v, 10, 100), b"string");
        assert_eq!(range_of(v, 5, 3), b"");
        assert_eq!(range_of(v, -1, -5), b"");
        assert_eq!(range_of(v, -100, 3), b"This");
        assert_eq!(range_of(b"", 0, -1), b"");
    }
}
