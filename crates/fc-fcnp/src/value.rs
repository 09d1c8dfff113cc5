//! Typed reply values: one tag byte, then a fixed-width payload or a `u32` length or count.
//!
//! | tag | value | payload |
//! | --- | --- | --- |
//! | `0x00` | nil | none |
//! | `0x01` | status | `u32` length, bytes |
//! | `0x02` | error | `u32` length, bytes (`ERR ...`, `WRONGTYPE ...`) |
//! | `0x03` | integer | `i64` |
//! | `0x04` | bulk | `u32` length, bytes |
//! | `0x05` | array | `u32` count, values |
//! | `0x06` | map | `u32` pairs, key and value each |
//! | `0x07` | set | `u32` count, values |
//! | `0x08` | double | `f64` (IEEE 754 bits) |
//! | `0x09` | boolean | `u8` 0 or 1 |
//! | `0x0a` | big number | `u32` length, ASCII digits |
//! | `0x0b` | verbatim | 3-byte format (`txt`, `mkd`), `u32` length, text |
//! | `0x0c` | push | `u32` count, values |

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::FrameError;

/// Value tags.
pub mod tag {
    /// Nil (a missing key, an aborted transaction).
    pub const NIL: u8 = 0x00;
    /// A status (`OK`, `PONG`).
    pub const STATUS: u8 = 0x01;
    /// An error.
    pub const ERROR: u8 = 0x02;
    /// A signed 64-bit integer.
    pub const INT: u8 = 0x03;
    /// A binary-safe string.
    pub const BULK: u8 = 0x04;
    /// An array.
    pub const ARRAY: u8 = 0x05;
    /// A map.
    pub const MAP: u8 = 0x06;
    /// A set.
    pub const SET: u8 = 0x07;
    /// A double.
    pub const DOUBLE: u8 = 0x08;
    /// A boolean.
    pub const BOOL: u8 = 0x09;
    /// A big number.
    pub const BIG_NUMBER: u8 = 0x0a;
    /// A text with its format.
    pub const VERBATIM: u8 = 0x0b;
    /// An out-of-band message.
    pub const PUSH: u8 = 0x0c;
}

/// One typed reply value (the shapes of Redis's RESP3).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value.
    Nil,
    /// A status line.
    Status(Bytes),
    /// An error; its text starts with the code.
    Error(Bytes),
    /// An integer.
    Int(i64),
    /// A binary-safe string.
    Bulk(Bytes),
    /// An array.
    Array(Vec<Value>),
    /// A map, in the server's order.
    Map(Vec<(Value, Value)>),
    /// A set.
    Set(Vec<Value>),
    /// A double.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// A big number's digits.
    BigNumber(Bytes),
    /// A text with its three-letter format.
    Verbatim {
        /// `txt` or `mkd`.
        format: [u8; 3],
        /// The text.
        text: Bytes,
    },
    /// An out-of-band message.
    Push(Vec<Value>),
}

/// Writes values in FCNP's encoding (the server's side; [`Value::encode`] uses it too).
pub mod put {
    use super::{BufMut, BytesMut, tag};

    fn len32(n: usize) -> u32 {
        u32::try_from(n).expect("an FCNP length fits in u32")
    }

    /// Nil.
    pub fn nil(dst: &mut BytesMut) {
        dst.put_u8(tag::NIL);
    }

    /// A length-prefixed value: status, error, bulk or big number (`tag`).
    pub fn bytes(dst: &mut BytesMut, tag: u8, data: &[u8]) {
        dst.reserve(5 + data.len());
        dst.put_u8(tag);
        dst.put_u32_le(len32(data.len()));
        dst.put_slice(data);
    }

    /// An integer.
    pub fn int(dst: &mut BytesMut, n: i64) {
        dst.put_u8(tag::INT);
        dst.put_i64_le(n);
    }

    /// The head of an aggregate (array, map in pairs, set, push) of `n` elements.
    pub fn aggregate(dst: &mut BytesMut, tag: u8, n: usize) {
        dst.put_u8(tag);
        dst.put_u32_le(len32(n));
    }

    /// A double.
    pub fn double(dst: &mut BytesMut, value: f64) {
        dst.put_u8(tag::DOUBLE);
        dst.put_f64_le(value);
    }

    /// A boolean.
    pub fn boolean(dst: &mut BytesMut, value: bool) {
        dst.put_u8(tag::BOOL);
        dst.put_u8(u8::from(value));
    }

    /// A verbatim text.
    pub fn verbatim(dst: &mut BytesMut, format: [u8; 3], text: &[u8]) {
        dst.reserve(8 + text.len());
        dst.put_u8(tag::VERBATIM);
        dst.put_slice(&format);
        dst.put_u32_le(len32(text.len()));
        dst.put_slice(text);
    }
}

impl Value {
    /// Appends this value's encoding.
    pub fn encode(&self, dst: &mut BytesMut) {
        match self {
            Self::Nil => put::nil(dst),
            Self::Status(s) => put::bytes(dst, tag::STATUS, s),
            Self::Error(s) => put::bytes(dst, tag::ERROR, s),
            Self::Int(n) => put::int(dst, *n),
            Self::Bulk(s) => put::bytes(dst, tag::BULK, s),
            Self::BigNumber(s) => put::bytes(dst, tag::BIG_NUMBER, s),
            Self::Double(d) => put::double(dst, *d),
            Self::Bool(b) => put::boolean(dst, *b),
            Self::Verbatim { format, text } => put::verbatim(dst, *format, text),
            Self::Array(items) | Self::Set(items) | Self::Push(items) => {
                let tag = match self {
                    Self::Array(_) => tag::ARRAY,
                    Self::Set(_) => tag::SET,
                    _ => tag::PUSH,
                };
                put::aggregate(dst, tag, items.len());
                for item in items {
                    item.encode(dst);
                }
            }
            Self::Map(pairs) => {
                put::aggregate(dst, tag::MAP, pairs.len());
                for (k, v) in pairs {
                    k.encode(dst);
                    v.encode(dst);
                }
            }
        }
    }

    /// Decodes one value that fills `body` exactly, nesting at most `max_depth` levels.
    /// Strings are slices of `body` (no copy); a claimed count allocates at most what the
    /// remaining bytes could hold (every value takes at least one byte).
    ///
    /// # Errors
    /// [`FrameError::BadValue`] for a malformed value or bytes left over,
    /// [`FrameError::TooDeep`] past `max_depth`.
    pub fn decode(mut body: Bytes, max_depth: usize) -> Result<Self, FrameError> {
        let value = decode_one(&mut body, max_depth, 0)?;
        if body.has_remaining() {
            return Err(FrameError::BadValue {
                what: "bytes after the value",
            });
        }
        Ok(value)
    }

    /// The error text, when this is an error.
    #[must_use]
    pub fn as_error(&self) -> Option<&[u8]> {
        match self {
            Self::Error(text) => Some(text),
            _ => None,
        }
    }
}

fn short() -> FrameError {
    FrameError::BadValue {
        what: "value runs past the body",
    }
}

fn take_bytes(body: &mut Bytes) -> Result<Bytes, FrameError> {
    if body.remaining() < 4 {
        return Err(short());
    }
    let len = body.get_u32_le() as usize;
    if len > body.remaining() {
        return Err(short());
    }
    Ok(body.split_to(len))
}

fn decode_many(
    body: &mut Bytes,
    max_depth: usize,
    depth: usize,
    per: usize,
) -> Result<Vec<Value>, FrameError> {
    if body.remaining() < 4 {
        return Err(short());
    }
    let n = body.get_u32_le() as usize;
    let values = n.checked_mul(per).ok_or_else(short)?;
    if values > body.remaining() {
        return Err(short());
    }
    let mut out = Vec::with_capacity(values);
    for _ in 0..values {
        out.push(decode_one(body, max_depth, depth + 1)?);
    }
    Ok(out)
}

fn decode_one(body: &mut Bytes, max_depth: usize, depth: usize) -> Result<Value, FrameError> {
    if depth > max_depth {
        return Err(FrameError::TooDeep(max_depth));
    }
    if !body.has_remaining() {
        return Err(short());
    }
    Ok(match body.get_u8() {
        tag::NIL => Value::Nil,
        tag::STATUS => Value::Status(take_bytes(body)?),
        tag::ERROR => Value::Error(take_bytes(body)?),
        tag::BULK => Value::Bulk(take_bytes(body)?),
        tag::BIG_NUMBER => Value::BigNumber(take_bytes(body)?),
        tag::INT => {
            if body.remaining() < 8 {
                return Err(short());
            }
            Value::Int(body.get_i64_le())
        }
        tag::DOUBLE => {
            if body.remaining() < 8 {
                return Err(short());
            }
            Value::Double(body.get_f64_le())
        }
        tag::BOOL => {
            if !body.has_remaining() {
                return Err(short());
            }
            match body.get_u8() {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                _ => {
                    return Err(FrameError::BadValue {
                        what: "boolean not 0 or 1",
                    });
                }
            }
        }
        tag::VERBATIM => {
            if body.remaining() < 3 {
                return Err(short());
            }
            let mut format = [0u8; 3];
            body.copy_to_slice(&mut format);
            Value::Verbatim {
                format,
                text: take_bytes(body)?,
            }
        }
        tag::ARRAY => Value::Array(decode_many(body, max_depth, depth, 1)?),
        tag::SET => Value::Set(decode_many(body, max_depth, depth, 1)?),
        tag::PUSH => Value::Push(decode_many(body, max_depth, depth, 1)?),
        tag::MAP => {
            let flat = decode_many(body, max_depth, depth, 2)?;
            let mut pairs = Vec::with_capacity(flat.len() / 2);
            let mut flat = flat.into_iter();
            while let (Some(k), Some(v)) = (flat.next(), flat.next()) {
                pairs.push((k, v));
            }
            Value::Map(pairs)
        }
        _ => {
            return Err(FrameError::BadValue {
                what: "unknown tag",
            });
        }
    })
}
