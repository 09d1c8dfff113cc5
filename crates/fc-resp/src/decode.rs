//! Reply decoding: every RESP2 and RESP3 type, incrementally and within [`DecodeLimits`].
//!
//! The first pass walks the headers, keeping a stack of "elements still to come" per open
//! aggregate, and keeps its place between calls (a reply that arrives in many reads is walked
//! once). It records what it read for the first [`MAX_TOKENS`] elements (at most 64 KiB,
//! whatever the reply claims). Once the whole reply is present the second pass builds the
//! [`Frame`] tree from that record, re-reading the bytes only for replies with more elements.
//! Strings share the buffer's memory. Nesting is bounded by the first pass, so the second
//! pass's recursion is too.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::limits::MAX_PREALLOC;
use crate::{DecodeLimits, Frame, ProtocolError, Result, number};

/// An incremental decoder of replies (for clients, replicas and tests).
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    limits: DecodeLimits,
    /// Where the first pass stopped.
    pos: usize,
    /// Elements still to come in each open aggregate; the bottom entry is the reply itself.
    stack: Vec<u64>,
    /// What the first pass read, in order, while it fits in [`MAX_TOKENS`].
    tokens: Vec<Item>,
    /// The first pass read more elements than `tokens` holds.
    tokens_overflowed: bool,
}

/// Elements of one reply the first pass records for the second (2048 × 32 bytes).
pub const MAX_TOKENS: usize = 2048;

/// One header and, for strings, its payload range.
#[derive(Debug, Clone)]
enum Item {
    Simple(Range<usize>),
    Error(Range<usize>),
    Integer(i64),
    Double(f64),
    Boolean(bool),
    BigNumber(Range<usize>),
    Null,
    NullArray,
    Bulk(Range<usize>),
    BlobError(Range<usize>),
    Verbatim([u8; 3], Range<usize>),
    /// `kind` is `*`, `~`, `>`, `%` or `|`; `n` elements (pairs for `%` and `|`).
    Aggregate(u8, u64),
}

fn bad(kind: &'static str) -> ProtocolError {
    ProtocolError::BadValue { kind }
}

/// Reads the header at `pos`: `Ok(None)` until all of it (and a string's payload) is present.
fn read_item(buf: &[u8], pos: usize, limits: &DecodeLimits) -> Result<Option<(Item, usize)>> {
    let Some(&kind) = buf.get(pos) else {
        return Ok(None);
    };
    if !matches!(
        kind,
        b'+' | b'-'
            | b':'
            | b'$'
            | b'*'
            | b'_'
            | b'#'
            | b','
            | b'('
            | b'!'
            | b'='
            | b'%'
            | b'~'
            | b'>'
            | b'|'
    ) {
        return Err(ProtocolError::UnknownType(kind));
    }
    let start = pos + 1;
    if matches!(kind, b'$' | b'*' | b':' | b'%' | b'~' | b'>')
        && let Some((n, cr)) = fast_number(buf, start)
    {
        return number_item(buf, kind, n, cr + 2, limits);
    }
    let window_end = buf.len().min(start.saturating_add(limits.max_line_len + 1));
    let Some(cr) = memchr::memchr(b'\r', &buf[start..window_end]).map(|j| start + j) else {
        if buf.len() - start > limits.max_line_len {
            // No length in the error: how much had arrived depends on where reads ended.
            return Err(ProtocolError::LineTooLong {
                limit: limits.max_line_len as u64,
            });
        }
        return Ok(None);
    };
    match buf.get(cr + 1) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => return Err(bad("terminator")),
    }
    let line = &buf[start..cr];
    let next = cr + 2;
    let item = match kind {
        b'+' | b'-' if memchr::memchr(b'\n', line).is_some() => return Err(bad("line")),
        b'+' => Item::Simple(start..cr),
        b'-' => Item::Error(start..cr),
        b':' => Item::Integer(number::parse_i64(line).ok_or(bad("integer"))?),
        b'_' if line.is_empty() => Item::Null,
        b'_' => return Err(bad("null")),
        b'#' => match line {
            b"t" => Item::Boolean(true),
            b"f" => Item::Boolean(false),
            _ => return Err(bad("boolean")),
        },
        b',' => Item::Double(parse_double(line).ok_or(bad("double"))?),
        b'(' => {
            let digits = match line {
                [b'-' | b'+', rest @ ..] => rest,
                _ => line,
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(bad("big number"));
            }
            Item::BigNumber(start..cr)
        }
        b'$' | b'!' | b'=' => {
            let len = number::parse_i64(line).ok_or(ProtocolError::InvalidBulkLength)?;
            return number_item(buf, kind, len, next, limits);
        }
        _ => {
            let n = number::parse_i64(line).ok_or(ProtocolError::InvalidMultibulkLength)?;
            return number_item(buf, kind, n, next, limits);
        }
    };
    Ok(Some((item, next)))
}

/// `-?[0-9]{1,18}\r\n` at `start`: the common shape of lengths and integers, read without a
/// separate search for the line end. `None` sends the line to the general path.
#[inline(always)]
fn fast_number(buf: &[u8], start: usize) -> Option<(i64, usize)> {
    let negative = buf.get(start) == Some(&b'-');
    let digits_at = start + usize::from(negative);
    let mut i = digits_at;
    let mut value: i64 = 0;
    while let Some(&b) = buf.get(i) {
        let d = b.wrapping_sub(b'0');
        if d >= 10 || i - digits_at >= 18 {
            break;
        }
        value = value * 10 + i64::from(d);
        i += 1;
    }
    let digits = i - digits_at;
    let canonical = digits > 0 && (buf[digits_at] != b'0' || (digits == 1 && !negative));
    if canonical && buf.get(i) == Some(&b'\r') && buf.get(i + 1) == Some(&b'\n') {
        Some((if negative { -value } else { value }, i))
    } else {
        None
    }
}

/// The item of a header whose line holds the number `n`; `next` is just past the line.
#[inline(always)]
fn number_item(
    buf: &[u8],
    kind: u8,
    n: i64,
    next: usize,
    limits: &DecodeLimits,
) -> Result<Option<(Item, usize)>> {
    match kind {
        b':' => Ok(Some((Item::Integer(n), next))),
        b'$' | b'!' | b'=' => {
            if n == -1 && kind == b'$' {
                return Ok(Some((Item::Null, next)));
            }
            if n < 0 {
                return Err(ProtocolError::InvalidBulkLength);
            }
            if n as u64 > limits.max_bulk_len {
                return Err(ProtocolError::StringTooLong {
                    len: n as u64,
                    limit: limits.max_bulk_len,
                });
            }
            let len = usize::try_from(n).map_err(|_| ProtocolError::InvalidBulkLength)?;
            if buf.len() - next < len + 2 {
                return Ok(None);
            }
            let data = next..next + len;
            if &buf[data.end..data.end + 2] != b"\r\n" {
                return Err(bad("terminator"));
            }
            let after = data.end + 2;
            let item = match kind {
                b'$' => Item::Bulk(data),
                b'!' => Item::BlobError(data),
                _ => {
                    let payload = &buf[data.clone()];
                    if payload.len() < 4 || payload[3] != b':' {
                        return Err(bad("verbatim"));
                    }
                    Item::Verbatim(
                        [payload[0], payload[1], payload[2]],
                        data.start + 4..data.end,
                    )
                }
            };
            Ok(Some((item, after)))
        }
        _ => {
            if n == -1 && kind == b'*' {
                return Ok(Some((Item::NullArray, next)));
            }
            if n < 0 {
                return Err(ProtocolError::InvalidMultibulkLength);
            }
            if n as u64 > limits.max_aggregate_len {
                return Err(ProtocolError::AggregateTooLong {
                    len: n as u64,
                    limit: limits.max_aggregate_len,
                });
            }
            Ok(Some((Item::Aggregate(kind, n as u64), next)))
        }
    }
}

fn parse_double(line: &[u8]) -> Option<f64> {
    match line {
        b"inf" | b"+inf" => Some(f64::INFINITY),
        b"-inf" => Some(f64::NEG_INFINITY),
        b"nan" | b"-nan" => Some(f64::NAN),
        _ if line
            .iter()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(b)) =>
        {
            std::str::from_utf8(line).ok()?.parse().ok()
        }
        _ => None,
    }
}

impl FrameDecoder {
    /// A decoder with `limits`.
    #[must_use]
    pub fn new(limits: DecodeLimits) -> Self {
        Self {
            limits,
            pos: 0,
            stack: Vec::new(),
            tokens: Vec::new(),
            tokens_overflowed: false,
        }
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> &DecodeLimits {
        &self.limits
    }

    /// Decodes the next reply and splits its bytes off `buf`; `Ok(None)` until it is complete.
    ///
    /// # Errors
    /// A [`ProtocolError`] for malformed input or a broken limit; the stream is unusable after it.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>> {
        let Some(end) = self.scan(buf)? else {
            return Ok(None);
        };
        let bytes = buf.split_to(end).freeze();
        self.finish(&bytes).map(Some)
    }

    /// Decodes one reply from the front of `bytes` without copying its strings; returns it with
    /// the number of bytes it used. Call again with the same (grown) bytes after `Ok(None)`.
    ///
    /// # Errors
    /// As [`FrameDecoder::decode`].
    pub fn decode_bytes(&mut self, bytes: &Bytes) -> Result<Option<(Frame, usize)>> {
        let Some(end) = self.scan(bytes)? else {
            return Ok(None);
        };
        Ok(Some((self.finish(bytes)?, end)))
    }

    /// Forgets a partly scanned reply.
    pub fn reset(&mut self) {
        self.pos = 0;
        self.stack.clear();
        self.tokens.clear();
        self.tokens_overflowed = false;
    }

    /// Second pass, then ready for the next reply.
    fn finish(&mut self, bytes: &Bytes) -> Result<Frame> {
        let frame = if self.tokens_overflowed {
            let mut source = Reparse { pos: 0 };
            self.build(bytes, &mut source, 0)
        } else {
            let mut source = Recorded { next: 0 };
            self.build(bytes, &mut source, 0)
        };
        self.tokens.clear();
        self.tokens_overflowed = false;
        frame
    }

    /// First pass: `Some(end)` once a whole reply is in `buf[..end]`.
    fn scan(&mut self, buf: &[u8]) -> Result<Option<usize>> {
        if self.stack.is_empty() {
            self.pos = 0;
            self.stack.push(1);
        }
        loop {
            while self.stack.last() == Some(&0) {
                self.stack.pop();
            }
            if self.stack.is_empty() {
                return Ok(Some(std::mem::take(&mut self.pos)));
            }
            let Some((item, next)) = read_item(buf, self.pos, &self.limits).inspect_err(|_| {
                self.reset();
            })?
            else {
                return Ok(None);
            };
            self.pos = next;
            if let Some(top) = self.stack.last_mut() {
                *top -= 1;
            }
            if let Item::Aggregate(kind, n) = item {
                if self.stack.len() > self.limits.max_depth {
                    self.reset();
                    return Err(ProtocolError::TooDeep(self.limits.max_depth));
                }
                // An attribute holds its pairs and then the value they describe, so a chain of
                // attributes nests (and is bounded) like any other aggregate.
                let children = match kind {
                    b'%' => n.saturating_mul(2),
                    b'|' => n.saturating_mul(2).saturating_add(1),
                    _ => n,
                };
                self.stack.push(children);
            }
            if self.tokens.len() < MAX_TOKENS {
                self.tokens.push(item);
            } else {
                self.tokens_overflowed = true;
            }
        }
    }

    /// Second pass over a reply the first pass accepted.
    fn build(&self, bytes: &Bytes, source: &mut impl Items, depth: usize) -> Result<Frame> {
        if depth > self.limits.max_depth {
            return Err(ProtocolError::TooDeep(self.limits.max_depth));
        }
        Ok(match source.next(self, bytes)? {
            Item::Simple(r) => Frame::Simple(bytes.slice(r)),
            Item::Error(r) => Frame::Error(bytes.slice(r)),
            Item::Integer(n) => Frame::Integer(n),
            Item::Double(d) => Frame::Double(d),
            Item::Boolean(b) => Frame::Boolean(b),
            Item::BigNumber(r) => Frame::BigNumber(bytes.slice(r)),
            Item::Null => Frame::Null,
            Item::NullArray => Frame::NullArray,
            Item::Bulk(r) => Frame::Bulk(bytes.slice(r)),
            Item::BlobError(r) => Frame::BlobError(bytes.slice(r)),
            Item::Verbatim(format, r) => Frame::Verbatim {
                format,
                text: bytes.slice(r),
            },
            Item::Aggregate(kind, n) => {
                let cap = usize::try_from(n).unwrap_or(MAX_PREALLOC).min(MAX_PREALLOC);
                match kind {
                    b'%' | b'|' => {
                        let mut pairs = Vec::with_capacity(cap);
                        for _ in 0..n {
                            let k = self.build(bytes, source, depth + 1)?;
                            let v = self.build(bytes, source, depth + 1)?;
                            pairs.push((k, v));
                        }
                        if kind == b'%' {
                            Frame::Map(pairs)
                        } else {
                            Frame::Attribute {
                                attributes: pairs,
                                value: Box::new(self.build(bytes, source, depth + 1)?),
                            }
                        }
                    }
                    _ => {
                        let mut items = Vec::with_capacity(cap);
                        for _ in 0..n {
                            items.push(self.build(bytes, source, depth + 1)?);
                        }
                        match kind {
                            b'~' => Frame::Set(items),
                            b'>' => Frame::Push(items),
                            _ => Frame::Array(items),
                        }
                    }
                }
            }
        })
    }
}

/// Where the second pass gets its items: the first pass's record, or the bytes again.
trait Items {
    fn next(&mut self, decoder: &FrameDecoder, bytes: &[u8]) -> Result<Item>;
}

struct Recorded {
    next: usize,
}

impl Items for Recorded {
    #[inline]
    fn next(&mut self, decoder: &FrameDecoder, _: &[u8]) -> Result<Item> {
        let item = decoder
            .tokens
            .get(self.next)
            .cloned()
            .ok_or(bad("terminator"))?;
        self.next += 1;
        Ok(item)
    }
}

struct Reparse {
    pos: usize,
}

impl Items for Reparse {
    fn next(&mut self, decoder: &FrameDecoder, bytes: &[u8]) -> Result<Item> {
        let (item, next) = read_item(bytes, self.pos, &decoder.limits)?.ok_or(bad("terminator"))?;
        self.pos = next;
        Ok(item)
    }
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DecodeLimits::default())
    }
}
