//! Reply encoding for RESP2 and RESP3.
//!
//! A command handler writes one reply through an [`Encoder`]; the connection's
//! [`RespVersion`] (RESP2 until `HELLO 3`) picks the wire shape, as Redis does:
//!
//! | value | RESP3 | RESP2 |
//! | --- | --- | --- |
//! | null | `_\r\n` | `$-1\r\n` (`*-1\r\n` for a null array) |
//! | map of n pairs | `%n` + pairs | `*2n` + flattened pairs |
//! | set, push | `~n`, `>n` | `*n` |
//! | double | `,1.5\r\n` | `$3\r\n1.5\r\n` |
//! | boolean | `#t\r\n` | `:1\r\n` |
//! | big number | `(123…\r\n` | bulk string |
//! | verbatim | `=len\r\ntxt:…\r\n` | bulk string of the text |
//! | blob error | `!len\r\n…\r\n` | `-…\r\n` |
//! | attribute | `\|n` + pairs, then the value | the value alone |
//!
//! Status and error lines cannot carry `\r` or `\n`; the encoder turns them into spaces (Redis
//! does the same for error messages), so a reply can never break the stream.

use bytes::{BufMut, BytesMut};

use crate::Frame;
use crate::number::{MAX_DOUBLE_LEN, format_double};

/// The protocol a connection speaks (`HELLO 2` / `HELLO 3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum RespVersion {
    /// RESP2, every connection's start.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

/// Writes replies into a buffer in one protocol version.
#[derive(Debug)]
pub struct Encoder<'a> {
    out: &'a mut BytesMut,
    version: RespVersion,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `out`.
    pub fn new(out: &'a mut BytesMut, version: RespVersion) -> Self {
        Self { out, version }
    }

    /// The version replies are shaped for.
    #[must_use]
    pub fn version(&self) -> RespVersion {
        self.version
    }

    /// The buffer written to.
    pub fn buffer(&mut self) -> &mut BytesMut {
        self.out
    }

    #[inline]
    fn number_line(&mut self, kind: u8, n: impl itoa::Integer) {
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(n).as_bytes();
        self.out.reserve(digits.len() + 3);
        self.out.put_u8(kind);
        self.out.put_slice(digits);
        self.out.put_slice(b"\r\n");
    }

    #[inline]
    fn text_line(&mut self, kind: u8, text: &[u8]) {
        self.out.reserve(text.len() + 3);
        self.out.put_u8(kind);
        if memchr::memchr2(b'\r', b'\n', text).is_none() {
            self.out.put_slice(text);
        } else {
            self.out.extend(
                text.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
        }
        self.out.put_slice(b"\r\n");
    }

    /// `+text` (a status; `\r`/`\n` become spaces).
    pub fn simple(&mut self, text: &[u8]) {
        self.text_line(b'+', text);
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// `-text`: `text` starts with the error code (`ERR …`, `WRONGTYPE …`); `\r`/`\n` become
    /// spaces.
    pub fn error(&mut self, text: &[u8]) {
        self.text_line(b'-', text);
    }

    /// `:n`.
    #[inline]
    pub fn integer(&mut self, n: i64) {
        self.number_line(b':', n);
    }

    /// `$len\r\n<data>\r\n`.
    #[inline]
    pub fn bulk(&mut self, data: &[u8]) {
        let mut buf = itoa::Buffer::new();
        let len = buf.format(data.len()).as_bytes();
        self.out.reserve(data.len() + len.len() + 5);
        self.out.put_u8(b'$');
        self.out.put_slice(len);
        self.out.put_slice(b"\r\n");
        self.out.put_slice(data);
        self.out.put_slice(b"\r\n");
    }

    /// A bulk string holding the decimal text of `n` (how Redis returns numbers stored as
    /// strings).
    pub fn bulk_integer(&mut self, n: i64) {
        let mut buf = itoa::Buffer::new();
        let text = buf.format(n);
        self.bulk(text.as_bytes());
    }

    /// The null of a missing string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        self.out.extend_from_slice(match self.version {
            RespVersion::Resp2 => b"$-1\r\n",
            RespVersion::Resp3 => b"_\r\n",
        });
    }

    /// The null of a missing array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        self.out.extend_from_slice(match self.version {
            RespVersion::Resp2 => b"*-1\r\n",
            RespVersion::Resp3 => b"_\r\n",
        });
    }

    /// `*n`: an array of `n` values follows.
    #[inline]
    pub fn array_len(&mut self, n: usize) {
        self.number_line(b'*', n);
    }

    /// A map of `pairs` key/value pairs follows: `%n` in RESP3, `*2n` in RESP2.
    pub fn map_len(&mut self, pairs: usize) {
        match self.version {
            RespVersion::Resp2 => self.number_line(b'*', pairs.saturating_mul(2)),
            RespVersion::Resp3 => self.number_line(b'%', pairs),
        }
    }

    /// A set of `n` values follows: `~n` in RESP3, `*n` in RESP2.
    pub fn set_len(&mut self, n: usize) {
        let kind = match self.version {
            RespVersion::Resp2 => b'*',
            RespVersion::Resp3 => b'~',
        };
        self.number_line(kind, n);
    }

    /// A push of `n` values follows: `>n` in RESP3, `*n` in RESP2.
    pub fn push_len(&mut self, n: usize) {
        let kind = match self.version {
            RespVersion::Resp2 => b'*',
            RespVersion::Resp3 => b'>',
        };
        self.number_line(kind, n);
    }

    /// A double, formatted as Redis does (see [`crate::number::format_double`]): `,x` in RESP3,
    /// a bulk string in RESP2.
    pub fn double(&mut self, value: f64) {
        let mut buf = [0; MAX_DOUBLE_LEN];
        self.double_text(format_double(value, &mut buf));
    }

    /// A double whose text the caller formatted (Redis replies some doubles in other forms than
    /// [`Self::double`]'s, e.g. `GEOPOS`'s 17 decimals): `,text` in RESP3, a bulk string in
    /// RESP2.
    pub fn double_text(&mut self, text: &[u8]) {
        match self.version {
            RespVersion::Resp2 => self.bulk(text),
            RespVersion::Resp3 => {
                self.out.reserve(text.len() + 3);
                self.out.put_u8(b',');
                self.out.put_slice(text);
                self.out.put_slice(b"\r\n");
            }
        }
    }

    /// `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, value: bool) {
        self.out.extend_from_slice(match (self.version, value) {
            (RespVersion::Resp2, true) => b":1\r\n",
            (RespVersion::Resp2, false) => b":0\r\n",
            (RespVersion::Resp3, true) => b"#t\r\n",
            (RespVersion::Resp3, false) => b"#f\r\n",
        });
    }

    /// A big number (`digits` is `[-]d+`): `(digits` in RESP3, a bulk string in RESP2.
    pub fn big_number(&mut self, digits: &[u8]) {
        match self.version {
            RespVersion::Resp2 => self.bulk(digits),
            RespVersion::Resp3 => self.text_line(b'(', digits),
        }
    }

    /// A verbatim string (`format` is `txt` or `mkd`): `=len\r\nfmt:text` in RESP3, a bulk
    /// string of `text` in RESP2.
    pub fn verbatim(&mut self, format: [u8; 3], text: &[u8]) {
        match self.version {
            RespVersion::Resp2 => self.bulk(text),
            RespVersion::Resp3 => {
                self.number_line(b'=', text.len() + 4);
                self.out.reserve(text.len() + 6);
                self.out.put_slice(&format);
                self.out.put_u8(b':');
                self.out.put_slice(text);
                self.out.put_slice(b"\r\n");
            }
        }
    }

    /// A binary-safe error: `!len` in RESP3, a `-` line in RESP2.
    pub fn blob_error(&mut self, text: &[u8]) {
        match self.version {
            RespVersion::Resp2 => self.error(text),
            RespVersion::Resp3 => {
                self.number_line(b'!', text.len());
                self.out.reserve(text.len() + 2);
                self.out.put_slice(text);
                self.out.put_slice(b"\r\n");
            }
        }
    }

    /// Writes a whole [`Frame`] in this encoder's version.
    pub fn frame(&mut self, frame: &Frame) {
        match frame {
            Frame::Simple(text) => self.simple(text),
            Frame::Error(text) => self.error(text),
            Frame::Integer(n) => self.integer(*n),
            Frame::Bulk(data) => self.bulk(data),
            Frame::Null => self.null(),
            Frame::NullArray => self.null_array(),
            Frame::Array(items) => {
                self.array_len(items.len());
                items.iter().for_each(|f| self.frame(f));
            }
            Frame::Boolean(b) => self.boolean(*b),
            Frame::Double(d) => self.double(*d),
            Frame::BigNumber(digits) => self.big_number(digits),
            Frame::BlobError(text) => self.blob_error(text),
            Frame::Verbatim { format, text } => self.verbatim(*format, text),
            Frame::Map(pairs) => {
                self.map_len(pairs.len());
                for (k, v) in pairs {
                    self.frame(k);
                    self.frame(v);
                }
            }
            Frame::Set(items) => {
                self.set_len(items.len());
                items.iter().for_each(|f| self.frame(f));
            }
            Frame::Push(items) => {
                self.push_len(items.len());
                items.iter().for_each(|f| self.frame(f));
            }
            Frame::Attribute { attributes, value } => {
                if self.version == RespVersion::Resp3 {
                    self.number_line(b'|', attributes.len());
                    for (k, v) in attributes {
                        self.frame(k);
                        self.frame(v);
                    }
                }
                self.frame(value);
            }
        }
    }
}
