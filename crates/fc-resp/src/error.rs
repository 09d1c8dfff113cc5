//! The one error type of this crate.

use std::fmt;

/// A protocol violation found while parsing a request or decoding a reply.
///
/// "The bytes so far are an incomplete frame" is not an error: parsers return `Ok(None)` for it.
///
/// For request errors the [`Display`](fmt::Display) text is exactly Redis's (the part after
/// `-ERR `), because clients and tests match on it; [`ProtocolError::write_reply`] writes the
/// whole `-ERR Protocol error: …\r\n` line that Redis sends before closing the connection.
/// Redis closes a client whose query buffer outgrows its limit without a reply, and so does
/// [`ProtocolError::write_reply`] for [`ProtocolError::QueryBufferLimit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// `*<n>` with `n` not an integer, above `INT_MAX`, or above the multibulk limit.
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<n>` with `n` not an integer, negative, or above the bulk limit.
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An argument of a multibulk request did not start with `$`.
    #[error("Protocol error: expected '$', got '{}'", char::from(*.0))]
    ExpectedDollar(u8),
    /// An inline request line longer than the inline limit.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// A `*<n>` line longer than the inline limit.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMultibulkCount,
    /// A `$<n>` line longer than the inline limit.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline request with an unterminated quote (or a closing quote not followed by a space).
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// More arguments than an unauthenticated client may send.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// A longer argument than an unauthenticated client may send.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// The unparsed part of the input outgrew the query buffer limit.
    #[error("query buffer of {len} bytes exceeds the limit of {limit} bytes")]
    QueryBufferLimit {
        /// Bytes held unparsed.
        len: usize,
        /// The limit in force.
        limit: usize,
    },
    /// A reply began with a byte that is no RESP2/RESP3 type.
    #[error("Protocol error: unknown reply type byte 0x{0:02x}")]
    UnknownType(u8),
    /// A reply line or length was malformed (`kind` says which).
    #[error("Protocol error: bad {kind} value")]
    BadValue {
        /// `integer`, `double`, `boolean`, `big number`, `null`, `verbatim`, `line` (a status or
        /// error with a bare `\n`) or `terminator`.
        kind: &'static str,
    },
    /// A reply aggregate claimed more elements than the limit.
    #[error("Protocol error: aggregate of {len} elements exceeds the limit of {limit}")]
    AggregateTooLong {
        /// Claimed element count.
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// A reply string claimed more bytes than the limit.
    #[error("Protocol error: string of {len} bytes exceeds the limit of {limit}")]
    StringTooLong {
        /// Claimed (or seen) length.
        len: u64,
        /// The limit in force.
        limit: u64,
    },
    /// A reply line (status, error, number) ran past the line limit without ending.
    #[error("Protocol error: line longer than {limit} bytes")]
    LineTooLong {
        /// The limit in force.
        limit: u64,
    },
    /// Reply aggregates nested deeper than the limit.
    #[error("Protocol error: nesting deeper than {0} levels")]
    TooDeep(usize),
}

impl ProtocolError {
    /// Writes the reply Redis sends for this error before it closes the connection:
    /// `-ERR <text>\r\n`. Writes nothing for [`ProtocolError::QueryBufferLimit`] (Redis closes
    /// such a client silently).
    pub fn write_reply(&self, out: &mut bytes::BytesMut) {
        if matches!(self, Self::QueryBufferLimit { .. }) {
            return;
        }
        out.extend_from_slice(b"-ERR ");
        if let Self::ExpectedDollar(byte) = *self {
            // Redis writes the raw byte with `%c`; a CR or LF would break the reply line, and
            // Redis turns those into spaces.
            out.extend_from_slice(b"Protocol error: expected '$', got '");
            out.extend_from_slice(&[if byte == b'\r' || byte == b'\n' {
                b' '
            } else {
                byte
            }]);
            out.extend_from_slice(b"'");
        } else {
            out.extend_from_slice(self.to_string().as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;

pub(crate) struct Printable<'a>(pub(crate) &'a [u8]);

impl fmt::Debug for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.0.escape_ascii())
    }
}
