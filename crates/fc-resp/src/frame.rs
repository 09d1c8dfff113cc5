//! RESP2/RESP3 values as a tree: what [`crate::FrameDecoder`] returns and
//! [`crate::Encoder::frame`] writes.

use bytes::Bytes;

/// One RESP value. Strings share the decoded buffer's memory.
#[derive(Debug, Clone)]
pub enum Frame {
    /// `+text` — a status reply.
    Simple(Bytes),
    /// `-CODE text` — an error reply.
    Error(Bytes),
    /// `:n`
    Integer(i64),
    /// `$len` + bytes — a binary-safe string.
    Bulk(Bytes),
    /// `$-1` (RESP2's null bulk string) or `_` (RESP3's null).
    Null,
    /// `*-1`: RESP2's null array (written as `_` in RESP3).
    NullArray,
    /// `*n` + n values.
    Array(Vec<Frame>),
    /// `#t` / `#f` (RESP3; `:1` / `:0` in RESP2, as Redis does).
    Boolean(bool),
    /// `,x` (RESP3; a bulk string in RESP2).
    Double(f64),
    /// `(digits` (RESP3; a bulk string in RESP2).
    BigNumber(Bytes),
    /// `!len` + bytes (RESP3; a simple error in RESP2).
    BlobError(Bytes),
    /// `=len` + `fmt:` + text (RESP3; a bulk string of the text in RESP2).
    Verbatim {
        /// Three bytes: `txt` or `mkd`.
        format: [u8; 3],
        /// The text after `fmt:`.
        text: Bytes,
    },
    /// `%n` + n key/value pairs (RESP3; a flat array of 2n in RESP2).
    Map(Vec<(Frame, Frame)>),
    /// `~n` + n values (RESP3; an array in RESP2).
    Set(Vec<Frame>),
    /// `>n` + n values: out-of-band data (RESP3; an array in RESP2).
    Push(Vec<Frame>),
    /// `|n` + n pairs, then the value they describe (RESP3 only; RESP2 writes the value alone).
    Attribute {
        /// The attribute pairs.
        attributes: Vec<(Frame, Frame)>,
        /// The value that follows them.
        value: Box<Frame>,
    },
}

impl Frame {
    /// A bulk string from anything byte-like.
    pub fn bulk(bytes: impl Into<Bytes>) -> Self {
        Self::Bulk(bytes.into())
    }

    /// A status reply from anything byte-like.
    pub fn simple(text: impl Into<Bytes>) -> Self {
        Self::Simple(text.into())
    }

    /// An error reply (`ERR …`, `WRONGTYPE …`) from anything byte-like.
    pub fn error(text: impl Into<Bytes>) -> Self {
        Self::Error(text.into())
    }

    /// True for `Error` and `BlobError`.
    #[must_use]
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error(_) | Self::BlobError(_))
    }

    /// The bytes of a `Simple`, `Error`, `Bulk`, `BigNumber`, `BlobError` or `Verbatim` text.
    #[must_use]
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Self::Simple(b) | Self::Error(b) | Self::Bulk(b) | Self::BigNumber(b) => Some(b),
            Self::BlobError(b) => Some(b),
            Self::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }
}

fn same_pairs(a: &[(Frame, Frame)], b: &[(Frame, Frame)]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1 == y.1)
}

/// Structural equality; doubles compare equal when `==` holds or both are NaN.
impl PartialEq for Frame {
    fn eq(&self, other: &Self) -> bool {
        use Frame::*;
        match (self, other) {
            (Simple(a), Simple(b))
            | (Error(a), Error(b))
            | (Bulk(a), Bulk(b))
            | (BigNumber(a), BigNumber(b))
            | (BlobError(a), BlobError(b)) => a == b,
            (Integer(a), Integer(b)) => a == b,
            (Null, Null) | (NullArray, NullArray) => true,
            (Array(a), Array(b)) | (Set(a), Set(b)) | (Push(a), Push(b)) => a == b,
            (Boolean(a), Boolean(b)) => a == b,
            (Double(a), Double(b)) => a == b || (a.is_nan() && b.is_nan()),
            (
                Verbatim {
                    format: fa,
                    text: ta,
                },
                Verbatim {
                    format: fb,
                    text: tb,
                },
            ) => fa == fb && ta == tb,
            (Map(a), Map(b)) => same_pairs(a, b),
            (
                Attribute {
                    attributes: aa,
                    value: va,
                },
                Attribute {
                    attributes: ab,
                    value: vb,
                },
            ) => same_pairs(aa, ab) && va == vb,
            _ => false,
        }
    }
}
