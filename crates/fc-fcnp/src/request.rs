//! Requests: the header, the items, decoding with limits, encoding, and what each opcode
//! means as a command.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::{FrameError, RequestError};
use crate::{MAGIC, VERSION};

/// Bytes of a request header.
pub const REQUEST_HEADER_LEN: usize = 16;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum Opcode {
    /// `GET key` → bulk or nil.
    Get = 0x01,
    /// `SET key value` (flags: `TTL` → `PX`, `NX`, `XX`, `GET`, `KEEPTTL`) → `OK`, nil, or the
    /// old value with `GET`.
    Set = 0x02,
    /// `DEL key [key ...]` → integer.
    Del = 0x03,
    /// `EXISTS key [key ...]` → integer.
    Exists = 0x04,
    /// `PEXPIRE key <TTL>` (flags: `TTL` required, `NX`, `XX`) → integer.
    Expire = 0x05,
    /// `PTTL key` → integer (milliseconds, -1 no expiry, -2 missing).
    Ttl = 0x06,
    /// `PERSIST key` → integer.
    Persist = 0x07,
    /// `INCRBY key delta` (the delta an 8-byte little-endian `i64`) → integer.
    IncrBy = 0x08,
    /// `APPEND key value` → integer.
    Append = 0x09,
    /// `GETDEL key` → bulk or nil.
    GetDel = 0x0a,
    /// `MGET key [key ...]` → a packed reply: every value in one buffer.
    MGet = 0x10,
    /// `MSET key value [key value ...]` → `OK`.
    MSet = 0x11,
    /// Any command of the server's table: the items are its name and arguments → its typed
    /// reply.
    Command = 0x20,
}

impl Opcode {
    /// The opcode of a byte, if this version defines one.
    #[must_use]
    pub const fn from_u8(byte: u8) -> Option<Self> {
        Some(match byte {
            0x01 => Self::Get,
            0x02 => Self::Set,
            0x03 => Self::Del,
            0x04 => Self::Exists,
            0x05 => Self::Expire,
            0x06 => Self::Ttl,
            0x07 => Self::Persist,
            0x08 => Self::IncrBy,
            0x09 => Self::Append,
            0x0a => Self::GetDel,
            0x10 => Self::MGet,
            0x11 => Self::MSet,
            0x20 => Self::Command,
            _ => return None,
        })
    }

    /// Its name in errors and documentation.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Set => "SET",
            Self::Del => "DEL",
            Self::Exists => "EXISTS",
            Self::Expire => "EXPIRE",
            Self::Ttl => "TTL",
            Self::Persist => "PERSIST",
            Self::IncrBy => "INCRBY",
            Self::Append => "APPEND",
            Self::GetDel => "GETDEL",
            Self::MGet => "MGET",
            Self::MSet => "MSET",
            Self::Command => "COMMAND",
        }
    }
}

/// Request flag bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// An 8-byte route hash follows the header (fc-route's `route_hash` of the first key).
    pub const ROUTE: u8 = 0x01;
    /// An 8-byte TTL in milliseconds follows the header (after the route hash).
    pub const TTL: u8 = 0x02;
    /// Only if the key does not exist (`SET`), or has no expiry (`EXPIRE`).
    pub const NX: u8 = 0x04;
    /// Only if the key exists (`SET`), or has an expiry (`EXPIRE`).
    pub const XX: u8 = 0x08;
    /// `SET` replies the old value.
    pub const GET: u8 = 0x10;
    /// `SET` keeps the key's expiry.
    pub const KEEPTTL: u8 = 0x20;
    /// Bits this version reserves: a frame with any of them set is refused.
    pub const RESERVED: u8 = 0xc0;

    /// Whether every bit of `bits` is set.
    #[must_use]
    pub const fn has(self, bits: u8) -> bool {
        self.0 & bits == bits
    }
}

/// Decoding limits for requests (the server side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body of one frame, in bytes.
    pub max_body: u64,
    /// Most items in one frame.
    pub max_items: u64,
    /// Largest item, in bytes (Redis's `proto-max-bulk-len`).
    pub max_item: u64,
}

impl Limits {
    /// Redis's defaults in FCNP's terms: 512 MiB items, bodies up to 1 GiB (the query buffer
    /// limit), `INT_MAX` items.
    pub const DEFAULT: Self = Self {
        max_body: 1 << 30,
        max_items: i32::MAX as u64,
        max_item: 512 << 20,
    };

    /// What a client that must still authenticate may send, as Redis limits one: 10 items of
    /// 16 KiB, 1 MiB in all.
    #[must_use]
    pub const fn unauthenticated() -> Self {
        Self {
            max_body: 1 << 20,
            max_items: 10,
            max_item: 16 << 10,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The fixed part of a request: what it asks, its id, and its extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestHeader {
    /// The opcode byte ([`Opcode::from_u8`] reads it; an unknown one is answered with
    /// [`RequestError::UnknownOpcode`], the stream goes on).
    pub opcode: u8,
    /// Flag bits ([`Flags`]); `ROUTE` and `TTL` are set by the encoder from the fields below.
    pub flags: Flags,
    /// Echoed in the response: a client matches responses to requests by it.
    pub id: u32,
    /// The route hash of the first key, when the client routed the request itself: the server
    /// checks it against its own routing and refuses a request that disagrees.
    pub route: Option<u64>,
    /// The TTL in milliseconds (`SET` with an expiry, `EXPIRE`).
    pub ttl_ms: Option<u64>,
}

impl RequestHeader {
    /// A header for `opcode` with request id `id` and nothing else.
    #[must_use]
    pub const fn new(opcode: Opcode, id: u32) -> Self {
        Self {
            opcode: opcode as u8,
            flags: Flags(0),
            id,
            route: None,
            ttl_ms: None,
        }
    }

    /// Adds flag bits ([`Flags::NX`], [`Flags::XX`], [`Flags::GET`], [`Flags::KEEPTTL`]).
    #[must_use]
    pub const fn with_flags(mut self, bits: u8) -> Self {
        self.flags = Flags(self.flags.0 | bits);
        self
    }

    /// Sets the TTL extension.
    #[must_use]
    pub const fn with_ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }

    /// Sets the route hash extension.
    #[must_use]
    pub const fn with_route(mut self, route_hash: u64) -> Self {
        self.route = Some(route_hash);
        self
    }
}

/// One decoded request: its header and its items (slices of the read buffer, no copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The header.
    pub header: RequestHeader,
    /// The items: keys and values, or a command's name and arguments.
    pub items: Vec<Bytes>,
}

/// How the server shapes a request's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyShape {
    /// One typed value ([`crate::ResponseKind::Value`]).
    Value,
    /// Every value of a batch in one buffer ([`crate::ResponseKind::Packed`]).
    Packed,
}

const fn name(opcode: Opcode) -> Bytes {
    Bytes::from_static(match opcode {
        Opcode::Get => b"GET",
        Opcode::Set => b"SET",
        Opcode::Del => b"DEL",
        Opcode::Exists => b"EXISTS",
        Opcode::Expire => b"PEXPIRE",
        Opcode::Ttl => b"PTTL",
        Opcode::Persist => b"PERSIST",
        Opcode::IncrBy => b"INCRBY",
        Opcode::Append => b"APPEND",
        Opcode::GetDel => b"GETDEL",
        Opcode::MGet => b"MGET",
        Opcode::MSet => b"MSET",
        Opcode::Command => b"",
    })
}

impl Request {
    /// The command this request means, as the server's table reads it (name first), and the
    /// shape its reply takes. Moves the items out.
    ///
    /// # Errors
    /// [`RequestError`] for an unknown opcode, a wrong item count, flags the opcode does not
    /// take, a missing TTL or a malformed integer; the server answers it and goes on.
    pub fn into_command(self) -> Result<(Vec<Bytes>, ReplyShape), RequestError> {
        let Self { header, items } = self;
        let mut args = Vec::with_capacity(items.len() + 4);
        let start = match Opcode::from_u8(header.opcode) {
            Some(Opcode::Command) | None => 0,
            Some(opcode) => {
                args.push(name(opcode));
                1
            }
        };
        args.extend(items);
        let shape = shape_command(&header, &mut args, start)?;
        Ok((args, shape))
    }
}

/// Checks a request's items (`args[start..]`; the command's name already at `args[0]` when
/// `start` is 1) against its opcode, and appends the words its flags and extensions stand for.
fn shape_command(
    header: &RequestHeader,
    args: &mut Vec<Bytes>,
    start: usize,
) -> Result<ReplyShape, RequestError> {
    let opcode =
        Opcode::from_u8(header.opcode).ok_or(RequestError::UnknownOpcode(header.opcode))?;
    let flags = header.flags.0 & !(Flags::ROUTE | Flags::TTL);
    let n = args.len() - start;
    let count = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(RequestError::ItemCount {
                opcode: opcode.name(),
                got: n,
            })
        }
    };
    let bad_flags = || RequestError::Flags {
        opcode: opcode.name(),
        flags: header.flags.0,
    };
    // Flags outside `mask` (or NX with XX), or a TTL where none is taken, are refused.
    let allowed = |mask: u8, ttl: bool| {
        let both = flags & Flags::NX != 0 && flags & Flags::XX != 0;
        if flags & !mask != 0 || both || (!ttl && header.ttl_ms.is_some()) {
            Err(bad_flags())
        } else {
            Ok(())
        }
    };
    let mut shape = ReplyShape::Value;
    match opcode {
        Opcode::Get | Opcode::Ttl | Opcode::Persist | Opcode::GetDel => {
            count(n == 1)?;
            allowed(0, false)?;
        }
        Opcode::Del | Opcode::Exists | Opcode::Command => {
            count(n >= 1)?;
            allowed(0, false)?;
        }
        Opcode::MGet => {
            count(n >= 1)?;
            allowed(0, false)?;
            shape = ReplyShape::Packed;
        }
        Opcode::Append => {
            count(n == 2)?;
            allowed(0, false)?;
        }
        Opcode::MSet => {
            count(n >= 2 && n.is_multiple_of(2))?;
            allowed(0, false)?;
        }
        Opcode::IncrBy => {
            count(n == 2)?;
            allowed(0, false)?;
            let raw: [u8; 8] = args[start + 1][..]
                .try_into()
                .map_err(|_| RequestError::BadInteger(opcode.name()))?;
            let mut text = itoa::Buffer::new();
            args[start + 1] =
                Bytes::copy_from_slice(text.format(i64::from_le_bytes(raw)).as_bytes());
        }
        Opcode::Set => {
            count(n == 2)?;
            allowed(Flags::NX | Flags::XX | Flags::GET | Flags::KEEPTTL, true)?;
            if header.flags.has(Flags::KEEPTTL) && header.ttl_ms.is_some() {
                return Err(bad_flags());
            }
            if let Some(ttl) = header.ttl_ms {
                let mut text = itoa::Buffer::new();
                args.push(Bytes::from_static(b"PX"));
                args.push(Bytes::copy_from_slice(text.format(ttl).as_bytes()));
            }
            for (bit, word) in [
                (Flags::NX, &b"NX"[..]),
                (Flags::XX, b"XX"),
                (Flags::GET, b"GET"),
                (Flags::KEEPTTL, b"KEEPTTL"),
            ] {
                if flags & bit != 0 {
                    args.push(Bytes::from_static(word));
                }
            }
        }
        Opcode::Expire => {
            count(n == 1)?;
            allowed(Flags::NX | Flags::XX, true)?;
            let ttl = header
                .ttl_ms
                .ok_or(RequestError::MissingTtl(opcode.name()))?;
            let mut text = itoa::Buffer::new();
            args.push(Bytes::copy_from_slice(text.format(ttl).as_bytes()));
            if flags & Flags::NX != 0 {
                args.push(Bytes::from_static(b"NX"));
            }
            if flags & Flags::XX != 0 {
                args.push(Bytes::from_static(b"XX"));
            }
        }
    }
    Ok(shape)
}

/// A request decoded straight into a command's arguments ([`RequestDecoder::decode_command`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The request's header.
    pub header: RequestHeader,
    /// The reply's shape, or why the request is refused (then the arguments are cleared).
    pub outcome: Result<ReplyShape, RequestError>,
}

/// Writes one request frame: the header, its extensions, and `items`.
///
/// # Panics
/// When there are more than `u32::MAX` items, an item is longer than `u32::MAX` bytes, or the
/// body would be (no server accepts such a frame; split it).
pub fn encode_request<I: AsRef<[u8]>>(dst: &mut BytesMut, header: &RequestHeader, items: &[I]) {
    let body: usize = items.iter().map(|i| 4 + i.as_ref().len()).sum();
    let count = u32::try_from(items.len()).expect("at most u32::MAX items");
    let body_len = u32::try_from(body).expect("an FCNP body fits in u32");
    let mut flags = header.flags.0 & !(Flags::ROUTE | Flags::TTL);
    if header.route.is_some() {
        flags |= Flags::ROUTE;
    }
    if header.ttl_ms.is_some() {
        flags |= Flags::TTL;
    }
    dst.reserve(REQUEST_HEADER_LEN + 16 + body);
    dst.put_u8(MAGIC);
    dst.put_u8(VERSION);
    dst.put_u8(header.opcode);
    dst.put_u8(flags);
    dst.put_u32_le(header.id);
    dst.put_u32_le(count);
    dst.put_u32_le(body_len);
    if let Some(route) = header.route {
        dst.put_u64_le(route);
    }
    if let Some(ttl) = header.ttl_ms {
        dst.put_u64_le(ttl);
    }
    for item in items {
        let item = item.as_ref();
        dst.put_u32_le(u32::try_from(item.len()).expect("an FCNP item fits in u32"));
        dst.put_slice(item);
    }
}

/// Decodes request frames from a read buffer (sans-IO: the caller reads, this consumes).
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestDecoder {
    limits: Limits,
}

impl RequestDecoder {
    /// A decoder with `limits`.
    #[must_use]
    pub const fn new(limits: Limits) -> Self {
        Self { limits }
    }

    /// The limits in force.
    #[must_use]
    pub const fn limits(&self) -> Limits {
        self.limits
    }

    /// Changes the limits (a client authenticated, or the operator changed them).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Takes one complete request off the front of `buf`: `Ok(None)` while it is incomplete
    /// (nothing is consumed). The header is checked against the limits as soon as its 16
    /// bytes are there, before the body is waited for or anything is allocated.
    ///
    /// # Errors
    /// [`FrameError`] when the bytes cannot be a valid frame; the connection should end.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Request>, FrameError> {
        let mut items = Vec::new();
        let Some(header) = self.decode_items(buf, &mut items, |_, _| {})? else {
            return Ok(None);
        };
        Ok(Some(Request { header, items }))
    }

    /// [`RequestDecoder::decode`] straight into a command's arguments (the server's path):
    /// `args` (emptied first) gets the command's name, the items and the words of the flags,
    /// with no allocation beyond `args`'s own growth and the TTL's digits; the items are
    /// slices of `buf`.
    ///
    /// # Errors
    /// As [`RequestDecoder::decode`]; a request error is in [`Decoded::outcome`].
    pub fn decode_command(
        &self,
        buf: &mut BytesMut,
        args: &mut Vec<Bytes>,
    ) -> Result<Option<Decoded>, FrameError> {
        args.clear();
        let mut start = 0;
        let decoded = self.decode_items(buf, args, |opcode, args| {
            if let Some(opcode) = Opcode::from_u8(opcode)
                && opcode != Opcode::Command
            {
                args.push(name(opcode));
                start = 1;
            }
        })?;
        let Some(header) = decoded else {
            return Ok(None);
        };
        let outcome = shape_command(&header, args, start);
        if outcome.is_err() {
            args.clear();
        }
        Ok(Some(Decoded { header, outcome }))
    }

    /// Checks the header, waits for the whole frame, then calls `before` with the opcode and
    /// pushes the items onto `items`.
    fn decode_items(
        &self,
        buf: &mut BytesMut,
        items: &mut Vec<Bytes>,
        before: impl FnOnce(u8, &mut Vec<Bytes>),
    ) -> Result<Option<RequestHeader>, FrameError> {
        let Some(&head) = buf.first_chunk::<REQUEST_HEADER_LEN>() else {
            // A wrong first byte is refused at once, not after 16 bytes arrive.
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
        let flags = head[3];
        if flags & Flags::RESERVED != 0 {
            return Err(FrameError::ReservedFlags(flags & Flags::RESERVED));
        }
        let word =
            |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let id = word(4);
        let count = u64::from(word(8));
        let body = u64::from(word(12));
        if body > self.limits.max_body {
            return Err(FrameError::BodyTooLarge {
                len: body,
                limit: self.limits.max_body,
            });
        }
        if count > self.limits.max_items {
            return Err(FrameError::TooManyItems {
                count,
                limit: self.limits.max_items,
            });
        }
        // Each item takes at least its 4-byte length.
        if count * 4 > body {
            return Err(FrameError::TooManyItems {
                count,
                limit: body / 4,
            });
        }
        let ext =
            8 * (usize::from(flags & Flags::ROUTE != 0) + usize::from(flags & Flags::TTL != 0));
        let total = REQUEST_HEADER_LEN + ext + body as usize;
        if buf.len() < total {
            return Ok(None);
        }
        let mut frame = buf.split_to(total).freeze();
        frame.advance(REQUEST_HEADER_LEN);
        let route = (flags & Flags::ROUTE != 0).then(|| frame.get_u64_le());
        let ttl_ms = (flags & Flags::TTL != 0).then(|| frame.get_u64_le());
        items.reserve(count as usize + 4);
        before(head[2], items);
        for _ in 0..count {
            if frame.remaining() < 4 {
                return Err(FrameError::BodyMismatch { body });
            }
            let len = u64::from(frame.get_u32_le());
            if len > self.limits.max_item {
                return Err(FrameError::ItemTooLarge {
                    len,
                    limit: self.limits.max_item,
                });
            }
            if len > frame.remaining() as u64 {
                return Err(FrameError::BodyMismatch { body });
            }
            items.push(frame.split_to(len as usize));
        }
        if frame.has_remaining() {
            return Err(FrameError::BodyMismatch { body });
        }
        Ok(Some(RequestHeader {
            opcode: head[2],
            flags: Flags(flags),
            id,
            route,
            ttl_ms,
        }))
    }
}
