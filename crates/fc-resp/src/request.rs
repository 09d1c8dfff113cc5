//! Request parsing: multibulk (`*<n>\r\n$<len>\r\n<arg>\r\n…`) and inline commands, with Redis's
//! limits and error texts, incrementally and without copying arguments.
//!
//! The parser keeps its place between calls: a command that arrives in many small reads is
//! scanned once, not once per read, so a client trickling a million-argument command costs
//! linear time.
//!
//! Where Redis accepts something lax, so does this parser, because clients rely on it: the two
//! bytes after a bulk argument and after each `\r` of a length line are skipped, not checked. Like
//! Redis's `strchr` on its NUL-terminated buffer, a line never ends after a NUL byte (such a line
//! can only grow until it is too big).

use std::fmt;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::Printable;
use crate::inline::split_args;
use crate::limits::MAX_PREALLOC;
use crate::{Limits, ProtocolError, Result, number};

/// An incremental request parser for one connection.
///
/// Two ways to drive it:
/// - borrowed: call [`RequestParser::parse`] with the whole unconsumed read buffer until it
///   returns `Ok(None)`, handle each [`Command`] (its arguments borrow the buffer), then drop
///   [`RequestParser::take_consumed`] bytes from the front of the buffer. Between two
///   `take_consumed` calls the buffer may only grow at its end.
/// - owned: call [`RequestParser::parse_owned`] on a `BytesMut`; it splits each command off the
///   buffer and hands out its arguments as [`Bytes`] that share the buffer's memory.
///
/// After an error the connection is unusable (Redis replies and closes it); call
/// [`RequestParser::reset`] before parsing unrelated input with the same parser.
#[derive(Clone)]
pub struct RequestParser {
    limits: Limits,
    pre_auth: Option<Limits>,
    max_line: usize,
    max_query_buffer: usize,
    consumed: usize,
    state: State,
    /// Arguments of the command being read, relative to `cmd_start` (multibulk) or to `scratch`
    /// (inline): 8 bytes per argument, while an argument takes at least 6 bytes on the wire.
    spans: Vec<Span>,
    cmd_start: usize,
    scratch: Vec<u8>,
    /// `(line start, scanned to)`: the line starting at `line start` has no terminator before
    /// `scanned to` (`usize::MAX`: it never ends, a NUL came first). Saves rescanning a line that
    /// arrives a byte at a time.
    line_hint: (usize, usize),
}

#[derive(Clone, Copy, Debug)]
enum State {
    Idle,
    /// A multibulk request is being read: `remaining` arguments to go; the next length line (or,
    /// when `bulk` holds its length, the next argument's bytes) starts at `pos`.
    Multibulk {
        remaining: u64,
        pos: usize,
        bulk: Option<usize>,
    },
}

/// One argument: `len` bytes at `start` (relative to the command or the scratch buffer).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// A span, or the query-buffer error when a command outgrows 4 GiB (beyond any limit Redis
    /// allows a client).
    #[inline]
    pub(crate) fn new(start: usize, len: usize) -> Result<Self> {
        match (u32::try_from(start), u32::try_from(len)) {
            (Ok(start), Ok(len)) if start.checked_add(len).is_some() => Ok(Self { start, len }),
            _ => Err(ProtocolError::QueryBufferLimit {
                len: start.saturating_add(len),
                limit: u32::MAX as usize,
            }),
        }
    }

    #[inline]
    pub(crate) fn range_from(self, base: usize) -> Range<usize> {
        let start = base + self.start as usize;
        start..start + self.len as usize
    }
}

/// Where the spans of a completed command point.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Input,
    Scratch,
}

enum LenLine {
    Value(i64, usize),
    Incomplete,
    Invalid,
}

impl RequestParser {
    /// A parser for a client that needs no authentication.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        let mut parser = Self {
            limits,
            pre_auth: None,
            max_line: 0,
            max_query_buffer: 0,
            consumed: 0,
            state: State::Idle,
            spans: Vec::new(),
            cmd_start: 0,
            scratch: Vec::new(),
            line_hint: (usize::MAX, 0),
        };
        parser.update_effective_limits();
        parser
    }

    /// A parser for a client that must authenticate first: `pre_auth` (usually
    /// [`Limits::unauthenticated`]) applies on top of `limits` until
    /// [`RequestParser::authenticate`], with Redis's `unauthenticated …` errors.
    #[must_use]
    pub fn with_auth_required(limits: Limits, pre_auth: Limits) -> Self {
        let mut parser = Self::new(limits);
        parser.require_auth(pre_auth);
        parser
    }

    /// The client authenticated: only the regular limits apply from now on.
    pub fn authenticate(&mut self) {
        self.pre_auth = None;
        self.update_effective_limits();
    }

    /// The client must authenticate (again, e.g. after `RESET`): `pre_auth` applies too.
    pub fn require_auth(&mut self, pre_auth: Limits) {
        self.pre_auth = Some(pre_auth);
        self.update_effective_limits();
    }

    /// Whether pre-authentication limits are in force.
    #[must_use]
    pub fn requires_auth(&self) -> bool {
        self.pre_auth.is_some()
    }

    /// The regular limits.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Replaces the regular limits (e.g. after `CONFIG SET proto-max-bulk-len`).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.update_effective_limits();
    }

    fn update_effective_limits(&mut self) {
        let pre = self.pre_auth.as_ref();
        self.max_line = pre.map_or(self.limits.max_inline_len, |p| {
            p.max_inline_len.min(self.limits.max_inline_len)
        });
        self.max_query_buffer = pre.map_or(self.limits.max_query_buffer, |p| {
            p.max_query_buffer.min(self.limits.max_query_buffer)
        });
    }

    /// Forgets any partly parsed command and the consumed count.
    pub fn reset(&mut self) {
        self.consumed = 0;
        self.state = State::Idle;
        self.spans.clear();
        self.scratch.clear();
        self.line_hint = (usize::MAX, 0);
    }

    /// Bytes at the front of the buffer that parsed commands (and skipped empty ones) used.
    #[must_use]
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Returns [`RequestParser::consumed`] and rebases the parser's state onto a buffer whose
    /// first that many bytes the caller now drops.
    pub fn take_consumed(&mut self) -> usize {
        let n = std::mem::take(&mut self.consumed);
        self.line_hint = match self.line_hint {
            (start, usize::MAX) if start >= n && start != usize::MAX => (start - n, usize::MAX),
            (start, scanned) if start >= n && start != usize::MAX => (start - n, scanned - n),
            _ => (usize::MAX, 0),
        };
        match &mut self.state {
            State::Multibulk { pos, .. } => {
                *pos -= n;
                self.cmd_start -= n;
            }
            State::Idle => {
                // Give back what one huge command made us hold.
                if self.spans.capacity() > 64 * MAX_PREALLOC {
                    self.spans = Vec::with_capacity(MAX_PREALLOC);
                }
                if self.scratch.capacity() > 4 * self.limits.max_inline_len {
                    self.scratch = Vec::new();
                }
            }
        }
        n
    }

    /// Parses the next complete command from `buf` (the whole unconsumed read buffer, starting at
    /// the same byte as on the previous call unless [`RequestParser::take_consumed`] was called).
    ///
    /// `Ok(None)`: no complete command yet; read more and call again. Empty commands (`\r\n`,
    /// `*0\r\n`, `*-1\r\n`) are skipped without a reply, as Redis does.
    ///
    /// # Errors
    /// A [`ProtocolError`] with Redis's text; the client should get
    /// [`ProtocolError::write_reply`] and be disconnected.
    pub fn parse<'a>(&'a mut self, buf: &'a [u8]) -> Result<Option<Command<'a>>> {
        Ok(self.advance(buf)?.map(|source| Command {
            data: match source {
                Source::Input => &buf[self.cmd_start..],
                Source::Scratch => &self.scratch,
            },
            spans: &self.spans,
        }))
    }

    /// Parses the next complete command and splits it off `buf`; its arguments share `buf`'s
    /// memory (inline commands, whose arguments may be unescaped, are copied).
    ///
    /// # Errors
    /// As [`RequestParser::parse`].
    pub fn parse_owned(&mut self, buf: &mut BytesMut) -> Result<Option<OwnedCommand>> {
        let mut args = Vec::new();
        Ok(self
            .parse_into(buf, &mut args)?
            .then_some(OwnedCommand { args }))
    }

    /// [`RequestParser::parse_owned`] into a caller's vector (cleared first), so a server
    /// can reuse one allocation per pipelined command: `true` when a command was parsed
    /// into `args`.
    ///
    /// # Errors
    /// As [`RequestParser::parse`].
    pub fn parse_into(&mut self, buf: &mut BytesMut, args: &mut Vec<Bytes>) -> Result<bool> {
        args.clear();
        match self.advance(buf)? {
            None => {
                let skipped = self.take_consumed();
                buf.advance(skipped);
                Ok(false)
            }
            Some(source) => {
                let taken = buf.split_to(self.consumed).freeze();
                match source {
                    Source::Input => {
                        let base = self.cmd_start;
                        args.extend(self.spans.iter().map(|s| taken.slice(s.range_from(base))));
                    }
                    Source::Scratch => args.extend(
                        self.spans
                            .iter()
                            .map(|s| Bytes::copy_from_slice(&self.scratch[s.range_from(0)])),
                    ),
                }
                self.take_consumed();
                Ok(true)
            }
        }
    }

    /// Finds `needle` at or after `start` as C's `strchr` would in a NUL-terminated buffer:
    /// `None` when it is not there yet, or never will be (a NUL comes first).
    fn find_terminator(&mut self, buf: &[u8], start: usize, needle: u8) -> Option<usize> {
        let from = match self.line_hint {
            (line, _) if line != start => start,
            (_, usize::MAX) => return None,
            (_, scanned) => scanned.max(start),
        };
        match memchr::memchr2(needle, 0, buf.get(from..)?).map(|j| from + j) {
            Some(at) if buf[at] == needle => Some(at),
            Some(_) => {
                self.line_hint = (start, usize::MAX);
                None
            }
            None => {
                self.line_hint = (start, buf.len());
                None
            }
        }
    }

    /// Finds the `\r` ending the length line that starts at `start` (its `*` or `$`); lines
    /// longer than the limit are `too_big`.
    fn find_line_end(
        &mut self,
        buf: &[u8],
        start: usize,
        too_big: ProtocolError,
    ) -> Result<Option<usize>> {
        match self.find_terminator(buf, start, b'\r') {
            Some(cr) if cr - start > self.max_line => Err(too_big),
            // Redis wants one more byte (the `\n`, unchecked) before it takes the line.
            Some(cr) if cr + 1 < buf.len() => Ok(Some(cr)),
            Some(_) => Ok(None),
            None if buf.len() - start > self.max_line => Err(too_big),
            None => Ok(None),
        }
    }

    /// Reads the number of a `*<n>` or `$<n>` line whose digits start at `at` (just after the
    /// type byte).
    #[inline(always)]
    fn parse_len(&mut self, buf: &[u8], at: usize, too_big: ProtocolError) -> Result<LenLine> {
        // Fast path: 1 to 18 plain digits (no sign, no leading zero) and a `\r` with a byte after.
        let mut i = at;
        let mut value: u64 = 0;
        while let Some(&b) = buf.get(i) {
            let d = b.wrapping_sub(b'0');
            if d < 10 && i - at < 18 {
                value = value * 10 + u64::from(d);
                i += 1;
                continue;
            }
            if b == b'\r' && i > at && (buf[at] != b'0' || i == at + 1) {
                return Ok(if i + 1 < buf.len() {
                    LenLine::Value(value as i64, i + 2)
                } else {
                    LenLine::Incomplete
                });
            }
            return self.parse_len_slow(buf, at, too_big);
        }
        Ok(LenLine::Incomplete)
    }

    #[cold]
    fn parse_len_slow(&mut self, buf: &[u8], at: usize, too_big: ProtocolError) -> Result<LenLine> {
        let Some(cr) = self.find_line_end(buf, at - 1, too_big)? else {
            return Ok(LenLine::Incomplete);
        };
        Ok(match number::parse_i64(&buf[at..cr]) {
            Some(v) => LenLine::Value(v, cr + 2),
            None => LenLine::Invalid,
        })
    }

    fn advance(&mut self, buf: &[u8]) -> Result<Option<Source>> {
        loop {
            if matches!(self.state, State::Multibulk { .. }) {
                return if self.multibulk(buf)? {
                    Ok(Some(Source::Input))
                } else {
                    self.incomplete(buf)
                };
            }
            let start = self.consumed;
            let Some(&first) = buf.get(start) else {
                return Ok(None);
            };
            if first == b'*' {
                let count =
                    match self.parse_len(buf, start + 1, ProtocolError::TooBigMultibulkCount)? {
                        LenLine::Value(n, next) => {
                            self.check_count(n)?;
                            if n <= 0 {
                                self.consumed = next;
                                continue;
                            }
                            self.state = State::Multibulk {
                                remaining: n as u64,
                                pos: next,
                                bulk: None,
                            };
                            n as u64
                        }
                        LenLine::Incomplete => return self.incomplete(buf),
                        LenLine::Invalid => return Err(ProtocolError::InvalidMultibulkLength),
                    };
                self.cmd_start = start;
                self.spans.clear();
                self.spans.reserve(
                    usize::try_from(count)
                        .unwrap_or(MAX_PREALLOC)
                        .min(MAX_PREALLOC),
                );
            } else if self.inline(buf, start)? {
                if self.spans.is_empty() {
                    continue;
                }
                return Ok(Some(Source::Scratch));
            } else {
                return self.incomplete(buf);
            }
        }
    }

    fn incomplete(&self, buf: &[u8]) -> Result<Option<Source>> {
        let len = buf.len() - self.consumed;
        if len > self.max_query_buffer {
            return Err(ProtocolError::QueryBufferLimit {
                len,
                limit: self.max_query_buffer,
            });
        }
        Ok(None)
    }

    fn check_count(&self, n: i64) -> Result<()> {
        if n > i64::from(i32::MAX) || (n > 0 && n as u64 > self.limits.max_multibulk_len) {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        if let Some(pre) = &self.pre_auth
            && n > 0
            && n as u64 > pre.max_multibulk_len
        {
            return Err(ProtocolError::UnauthenticatedMultibulkLength);
        }
        Ok(())
    }

    #[inline(always)]
    fn check_bulk(&self, n: i64) -> Result<usize> {
        if n < 0 || n as u64 > self.limits.max_bulk_len {
            return Err(ProtocolError::InvalidBulkLength);
        }
        if let Some(pre) = &self.pre_auth
            && n as u64 > pre.max_bulk_len
        {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        usize::try_from(n).map_err(|_| ProtocolError::InvalidBulkLength)
    }

    /// Reads arguments of the current multibulk command; `true` once it is complete.
    #[inline]
    fn multibulk(&mut self, buf: &[u8]) -> Result<bool> {
        let State::Multibulk {
            mut remaining,
            mut pos,
            mut bulk,
        } = self.state
        else {
            return Ok(false);
        };
        let len = buf.len();
        while remaining > 0 {
            let n = match bulk.take() {
                Some(n) => n,
                None => {
                    let Some(&kind) = buf.get(pos) else {
                        break;
                    };
                    if kind != b'$' {
                        // Redis looks for the end of the line before it judges the line.
                        return match self.find_line_end(buf, pos, ProtocolError::TooBigBulkCount)? {
                            Some(_) => Err(ProtocolError::ExpectedDollar(kind)),
                            None => {
                                self.state = State::Multibulk {
                                    remaining,
                                    pos,
                                    bulk: None,
                                };
                                Ok(false)
                            }
                        };
                    }
                    match self.parse_len(buf, pos + 1, ProtocolError::TooBigBulkCount)? {
                        LenLine::Value(n, next) => {
                            let n = self.check_bulk(n)?;
                            pos = next;
                            n
                        }
                        LenLine::Incomplete => break,
                        LenLine::Invalid => return Err(ProtocolError::InvalidBulkLength),
                    }
                }
            };
            if len - pos < n + 2 {
                bulk = Some(n);
                break;
            }
            self.spans.push(Span::new(pos - self.cmd_start, n)?);
            pos += n + 2;
            remaining -= 1;
        }
        if remaining == 0 {
            self.state = State::Idle;
            self.consumed = pos;
            Ok(true)
        } else {
            self.state = State::Multibulk {
                remaining,
                pos,
                bulk,
            };
            Ok(false)
        }
    }

    /// Reads an inline command starting at `start`; `true` once a line was split (into
    /// `scratch`/`spans`, possibly no arguments at all).
    fn inline(&mut self, buf: &[u8], start: usize) -> Result<bool> {
        let rest = &buf[start..];
        match self.find_terminator(buf, start, b'\n').map(|at| at - start) {
            Some(nl) => {
                let mut line = &rest[..nl];
                if let [head @ .., b'\r'] = line {
                    line = head;
                }
                if line.len() > self.max_line {
                    return Err(ProtocolError::TooBigInlineRequest);
                }
                self.scratch.clear();
                self.spans.clear();
                split_args(line, &mut self.scratch, &mut self.spans)?;
                self.consumed = start + nl + 1;
                Ok(true)
            }
            None => {
                let so_far = rest.len() - usize::from(rest.last() == Some(&b'\r'));
                if so_far > self.max_line {
                    return Err(ProtocolError::TooBigInlineRequest);
                }
                Ok(false)
            }
        }
    }
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl fmt::Debug for RequestParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestParser")
            .field("limits", &self.limits)
            .field("pre_auth", &self.pre_auth)
            .field("consumed", &self.consumed)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// A parsed command whose arguments borrow the read buffer (or, for inline commands, the parser).
#[derive(Clone, Copy)]
pub struct Command<'a> {
    data: &'a [u8],
    spans: &'a [Span],
}

impl<'a> Command<'a> {
    /// Number of arguments, the command name included (at least 1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Always `false` for a command the parser returned.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The command name as sent (compare with `eq_ignore_ascii_case`).
    #[must_use]
    pub fn name(&self) -> &'a [u8] {
        self.arg(0).unwrap_or_default()
    }

    /// Argument `i` (0 is the name).
    #[must_use]
    pub fn arg(&self, i: usize) -> Option<&'a [u8]> {
        let span = self.spans.get(i)?;
        self.data.get(span.range_from(0))
    }

    /// All arguments, the name first.
    pub fn args(&self) -> impl ExactSizeIterator<Item = &'a [u8]> + 'a {
        let data = self.data;
        self.spans.iter().map(move |s| &data[s.range_from(0)])
    }

    /// Copies the arguments out (to hand the command to another thread).
    #[must_use]
    pub fn to_owned_command(&self) -> OwnedCommand {
        OwnedCommand {
            args: self.args().map(Bytes::copy_from_slice).collect(),
        }
    }
}

impl fmt::Debug for Command<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.args().map(Printable)).finish()
    }
}

/// A parsed command that owns its arguments.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct OwnedCommand {
    /// The arguments, the name first.
    pub args: Vec<Bytes>,
}

impl OwnedCommand {
    /// The command name as sent.
    #[must_use]
    pub fn name(&self) -> &[u8] {
        self.args.first().map_or(&[], |a| &a[..])
    }
}

impl fmt::Debug for OwnedCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.args.iter().map(|a| Printable(a)))
            .finish()
    }
}

/// Appends `args` as a multibulk request (what clients send).
pub fn encode_command<A: AsRef<[u8]>>(out: &mut BytesMut, args: &[A]) {
    let mut itoa = itoa::Buffer::new();
    let total: usize = args.iter().map(|a| a.as_ref().len() + 16).sum();
    out.reserve(total + 16);
    out.extend_from_slice(b"*");
    out.extend_from_slice(itoa.format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(b"$");
        out.extend_from_slice(itoa.format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}
