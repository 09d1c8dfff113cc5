//! Responses: a 12-byte header (magic, version, kind, flags, the request's id, the body's
//! length) and a body: one typed value, a packed batch, or a fatal error's text.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::FrameError;
use crate::value::Value;
use crate::{MAGIC, VERSION};

/// Bytes of a response header.
pub const RESPONSE_HEADER_LEN: usize = 12;

/// The `u32` length a packed batch gives a missing value.
pub const PACKED_MISSING: u32 = u32::MAX;

/// What a response's body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ResponseKind {
    /// One typed value ([`Value`]).
    Value = 0,
    /// A packed batch ([`Packed`]).
    Packed = 1,
    /// The connection's last frame: the text of the framing error that ends it (request id 0).
    Fatal = 2,
}

/// Writes a response header with a placeholder length and returns where it starts, for
/// [`finish_response`] once the body is written after it.
pub fn begin_response(dst: &mut BytesMut, kind: ResponseKind, id: u32) -> usize {
    let mark = dst.len();
    dst.reserve(RESPONSE_HEADER_LEN);
    dst.put_u8(MAGIC);
    dst.put_u8(VERSION);
    dst.put_u8(kind as u8);
    dst.put_u8(0);
    dst.put_u32_le(id);
    dst.put_u32_le(0);
    mark
}

/// Sets the body length of the response begun at `mark` to what follows its header.
///
/// # Panics
/// When the body is longer than `u32::MAX` bytes.
pub fn finish_response(dst: &mut BytesMut, mark: usize) {
    let body = dst.len() - mark - RESPONSE_HEADER_LEN;
    let len = u32::try_from(body).expect("an FCNP response body fits in u32");
    dst[mark + 8..mark + 12].copy_from_slice(&len.to_le_bytes());
}

/// Writes a whole value response.
pub fn encode_value_response(dst: &mut BytesMut, id: u32, value: &Value) {
    let mark = begin_response(dst, ResponseKind::Value, id);
    value.encode(dst);
    finish_response(dst, mark);
}

/// Writes the fatal-error frame a server sends before it closes the connection.
pub fn encode_fatal(dst: &mut BytesMut, text: &str) {
    let mark = begin_response(dst, ResponseKind::Fatal, 0);
    dst.put_slice(text.as_bytes());
    finish_response(dst, mark);
}

/// Writes a packed batch body, value by value (the server's side).
#[derive(Debug)]
pub struct PackedWriter {
    mark: usize,
    lens_at: usize,
    n: usize,
    next: usize,
}

impl PackedWriter {
    /// Begins a packed response of `n` values for request `id`.
    ///
    /// # Panics
    /// When `n` is over `u32::MAX`.
    pub fn begin(dst: &mut BytesMut, id: u32, n: usize) -> Self {
        let mark = begin_response(dst, ResponseKind::Packed, id);
        dst.put_u32_le(u32::try_from(n).expect("at most u32::MAX values"));
        let lens_at = dst.len();
        dst.put_bytes(0, 4 * n);
        Self {
            mark,
            lens_at,
            n,
            next: 0,
        }
    }

    /// Appends the next value (`None`: missing).
    ///
    /// # Panics
    /// Past the `n` values announced, or for a value of `u32::MAX` bytes or more.
    pub fn push(&mut self, dst: &mut BytesMut, value: Option<&[u8]>) {
        assert!(self.next < self.n, "more values than announced");
        let len = match value {
            Some(v) => {
                dst.put_slice(v);
                u32::try_from(v.len())
                    .ok()
                    .filter(|&l| l != PACKED_MISSING)
                    .expect("a packed value is under 4 GiB")
            }
            None => PACKED_MISSING,
        };
        let at = self.lens_at + 4 * self.next;
        dst[at..at + 4].copy_from_slice(&len.to_le_bytes());
        self.next += 1;
    }

    /// Ends the response.
    ///
    /// # Panics
    /// When fewer values than announced were pushed.
    pub fn finish(self, dst: &mut BytesMut) {
        assert_eq!(self.next, self.n, "fewer values than announced");
        finish_response(dst, self.mark);
    }
}

/// A batch's values in one contiguous buffer (an `MGET`'s reply): each value is a slice of
/// [`Packed::data`], found by its length.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Packed {
    /// Each value's length ([`PACKED_MISSING`]: missing).
    pub lens: Vec<u32>,
    /// Every present value, back to back.
    pub data: Bytes,
    /// Where each value starts in `data`.
    starts: Vec<usize>,
}

impl Packed {
    /// Reads a packed body.
    ///
    /// # Errors
    /// [`FrameError::BadValue`] when the count or the lengths do not match the body.
    pub fn decode(mut body: Bytes) -> Result<Self, FrameError> {
        let bad = |what| FrameError::BadValue { what };
        if body.remaining() < 4 {
            return Err(bad("packed count runs past the body"));
        }
        let n = body.get_u32_le() as usize;
        if n.checked_mul(4).is_none_or(|b| b > body.remaining()) {
            return Err(bad("packed lengths run past the body"));
        }
        let mut lens = Vec::with_capacity(n);
        let mut starts = Vec::with_capacity(n);
        let mut total = 0usize;
        for _ in 0..n {
            let len = body.get_u32_le();
            starts.push(total);
            if len != PACKED_MISSING {
                total = total
                    .checked_add(len as usize)
                    .ok_or(bad("packed values overflow"))?;
            }
            lens.push(len);
        }
        if total != body.remaining() {
            return Err(bad("packed values do not fill the body"));
        }
        Ok(Self {
            lens,
            data: body,
            starts,
        })
    }

    /// How many values (present or missing).
    #[must_use]
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Whether the batch is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// The `i`th value (`None`: missing, or out of range).
    #[must_use]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let len = *self.lens.get(i)?;
        if len == PACKED_MISSING {
            return None;
        }
        let start = self.starts[i];
        Some(&self.data[start..start + len as usize])
    }

    /// The `i`th value as a `Bytes` slice of the buffer (no copy).
    #[must_use]
    pub fn get_bytes(&self, i: usize) -> Option<Bytes> {
        let len = *self.lens.get(i)?;
        if len == PACKED_MISSING {
            return None;
        }
        let start = self.starts[i];
        Some(self.data.slice(start..start + len as usize))
    }

    /// Every value in order.
    pub fn iter(&self) -> impl Iterator<Item = Option<&[u8]>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// A decoded response's body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One typed value.
    Value(Value),
    /// A packed batch.
    Packed(Packed),
    /// The server's last words before closing the connection.
    Fatal(String),
}

/// One decoded response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The request it answers (0 for [`Body::Fatal`]).
    pub id: u32,
    /// What it holds.
    pub body: Body,
}

/// Decoding limits for responses (the client side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Largest body, in bytes.
    pub max_body: u64,
    /// Deepest nesting of values.
    pub max_depth: usize,
}

impl Default for ResponseLimits {
    /// 4 GiB - 1 bodies (the format's limit), 128 levels.
    fn default() -> Self {
        Self {
            max_body: u64::from(u32::MAX),
            max_depth: 128,
        }
    }
}

/// Decodes response frames from a read buffer (sans-IO).
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseDecoder {
    limits: ResponseLimits,
}

impl ResponseDecoder {
    /// A decoder with `limits`.
    #[must_use]
    pub const fn new(limits: ResponseLimits) -> Self {
        Self { limits }
    }

    /// Takes one complete response off the front of `buf`: `Ok(None)` while incomplete
    /// (nothing consumed).
    ///
    /// # Errors
    /// [`FrameError`] when the bytes cannot be a response; the connection is unusable.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Response>, FrameError> {
        let Some(&head) = buf.first_chunk::<RESPONSE_HEADER_LEN>() else {
            if let Some(&first) = buf.first()
                && first != MAGIC
            {
                return Err(FrameError::BadMagic(first));
            }
            return Ok(None);
        };
        if head[0] != MAGIC {
            return Err(FrameError::BadMagic(head[0]));
        }
        if head[1] != VERSION {
            return Err(FrameError::BadVersion(head[1]));
        }
        if head[3] != 0 {
            return Err(FrameError::ReservedFlags(head[3]));
        }
        let id = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let len = u64::from(u32::from_le_bytes([head[8], head[9], head[10], head[11]]));
        if len > self.limits.max_body {
            return Err(FrameError::BodyTooLarge {
                len,
                limit: self.limits.max_body,
            });
        }
        let kind = head[2];
        if kind > ResponseKind::Fatal as u8 {
            return Err(FrameError::BadKind(kind));
        }
        let total = RESPONSE_HEADER_LEN + len as usize;
        if buf.len() < total {
            return Ok(None);
        }
        let mut frame = buf.split_to(total).freeze();
        frame.advance(RESPONSE_HEADER_LEN);
        let body = match kind {
            0 => Body::Value(Value::decode(frame, self.limits.max_depth)?),
            1 => Body::Packed(Packed::decode(frame)?),
            _ => Body::Fatal(String::from_utf8_lossy(&frame).into_owned()),
        };
        Ok(Some(Response { id, body }))
    }
}
