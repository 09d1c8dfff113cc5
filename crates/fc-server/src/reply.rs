//! Replies, protocol-neutral: handlers write through the [`Reply`] trait (static dispatch, one
//! instantiation per sink), and a protocol is a sink plus an edge.
//!
//! - [`Resp`]: the RESP2/RESP3 sink, a connection's write buffer. A keyed command run on the
//!   connection's own worker writes straight into it (GET encodes the value from the store's
//!   memory: no copy on the way).
//! - [`Replies`]: a typed reply buffer (tokens over one byte arena). Work run on another
//!   worker, and every part of a fanned-out command, comes back as one; merging reads its
//!   tokens (an integer is an `i64`, never re-parsed from protocol bytes), and
//!   [`Replies::replay`] writes the result into the connection's sink in its protocol.
//!
//! A sink only shapes values; which values a command replies is the handler's, so every
//! protocol gets the same answers. Shapes that differ between RESP2 and RESP3 (maps, sets,
//! doubles, pair lists) are sink methods, never a version test in a handler.

use std::ops::Range;
use std::rc::Rc;

use bytes::BytesMut;
use fc_resp::{Encoder, RespVersion};

/// Where a handler writes its reply. Every method appends one value (or the header of an
/// aggregate whose elements follow).
pub(crate) trait Reply {
    /// A status line (`OK`, `QUEUED`, `PONG`...).
    fn simple(&mut self, text: &[u8]);
    /// An error: `text` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    fn error(&mut self, text: &[u8]);
    /// An integer.
    fn integer(&mut self, n: i64);
    /// A binary-safe string.
    fn bulk(&mut self, data: &[u8]);
    /// A missing string (`GET` of a missing key).
    fn null(&mut self);
    /// A missing aggregate (an aborted `EXEC`, a timed-out blocking pop).
    fn null_array(&mut self);
    /// An array of `n` values follows.
    fn array_len(&mut self, n: usize);
    /// A map of `pairs` key/value pairs follows.
    fn map_len(&mut self, pairs: usize);
    /// A set of `n` values follows.
    fn set_len(&mut self, n: usize);
    /// A list of `n` pairs follows (`ZRANGE ... WITHSCORES`): a flat array of `2n` values in
    /// RESP2, an array of `n` two-element arrays in RESP3. Each pair starts with
    /// [`Reply::pair`].
    fn pairs_len(&mut self, n: usize);
    /// The start of one pair of a [`Reply::pairs_len`] list.
    fn pair(&mut self);
    /// `n` key/value pairs that Redis sends as a map in RESP3 and as an array of
    /// two-element arrays in RESP2 (`XREAD`'s streams). Each pair starts with
    /// [`Reply::keyed`].
    fn keyed_len(&mut self, n: usize);
    /// The start of one pair of a [`Reply::keyed_len`] list.
    fn keyed(&mut self);
    /// A double.
    fn double(&mut self, value: f64);
    /// A double already formatted (`,text` in RESP3, a bulk in RESP2).
    fn double_text(&mut self, text: &[u8]);
    /// A boolean.
    fn boolean(&mut self, value: bool);
    /// A text meant for people (`INFO`, `CLIENT LIST`); `format` is `txt` or `mkd`.
    fn verbatim(&mut self, format: [u8; 3], text: &[u8]);
    /// A big number (`[-]digits`): RESP3 `(`, a bulk string in RESP2.
    fn big_number(&mut self, digits: &[u8]);

    /// `OK`.
    fn ok(&mut self) {
        self.simple(b"OK");
    }

    /// Whether the sink went past its output limit: a handler streaming a large reply stops
    /// producing (the client is closed, unsent, as Redis closes one past its hard limit).
    fn full(&self) -> bool {
        false
    }

    /// Marks the sink past its limit (a part built elsewhere went past it).
    fn overflow(&mut self) {}

    /// An array whose length is known only once its elements are written (`KEYS`): returns a
    /// mark for [`Reply::array_fill`], which sets the length.
    fn array_deferred(&mut self) -> usize;

    /// Sets the length of the array begun at `mark` by [`Reply::array_deferred`] to `n`.
    fn array_fill(&mut self, mark: usize, n: usize);
}

/// [`Resp::failed_slot`] when no command's failure is to be counted.
pub(crate) const NO_SLOT: usize = usize::MAX;

/// The RESP sink: a connection's write buffer and the version it speaks.
///
/// With an output limit ([`Resp::set_limit`]) the buffer never grows past it while a reply is
/// being built: once it does, what is pending is dropped (the client is to be closed, as
/// Redis closes a client over its hard limit) and [`Resp::overflowed`] says so, so one
/// `LRANGE 0 -1` or `KEYS *` cannot grow a connection's memory without bound.
#[derive(Debug)]
pub(crate) struct Resp {
    /// The encoded replies not yet written to the socket.
    pub(crate) buf: BytesMut,
    version: RespVersion,
    /// Most bytes `buf` may hold (`usize::MAX`: no limit).
    limit: usize,
    overflowed: bool,
    /// The statistics slot of the command whose reply is being written ([`NO_SLOT`]: none,
    /// or its failure was counted): its first error reply counts it as failed.
    pub(crate) failed_slot: usize,
    /// The worker's statistics, which count each error reply by its code.
    stats: Option<Rc<crate::stats::WorkerStats>>,
}

impl Default for Resp {
    fn default() -> Self {
        Self::new(0)
    }
}

impl Resp {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(capacity),
            version: RespVersion::Resp2,
            limit: usize::MAX,
            overflowed: false,
            failed_slot: NO_SLOT,
            stats: None,
        }
    }

    /// Counts every error reply written from now on in `stats` (`INFO errorstats`).
    pub(crate) fn count_errors(&mut self, stats: Rc<crate::stats::WorkerStats>) {
        self.stats = Some(stats);
    }

    /// Counts the running command as failed without an error of its own: Redis counts a
    /// command as failed when any error reply was written while it ran, another client's
    /// included (`CLIENT UNBLOCK id ERROR`).
    pub(crate) fn fail_current(&mut self) {
        if let Some(stats) = &self.stats
            && self.failed_slot != NO_SLOT
        {
            stats.fail(self.failed_slot);
            self.failed_slot = NO_SLOT;
        }
    }

    /// An error reply written outside any command's reply (a protocol error): counted in
    /// the error statistics only.
    pub(crate) fn count_error(&mut self, text: &[u8]) {
        if let Some(stats) = &self.stats {
            stats.error(text);
        }
    }

    /// Bounds the buffer at `bytes` (0: no limit).
    pub(crate) fn set_limit(&mut self, bytes: u64) {
        self.limit = match bytes {
            0 => usize::MAX,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
    }

    /// Whether the buffer went past its limit (its contents were dropped).
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Drops what is pending once past the limit (checked after each value and aggregate
    /// header, so the buffer stays within the limit plus one value).
    #[inline]
    fn check_limit(&mut self) {
        if self.buf.len() > self.limit {
            self.overflowed = true;
            self.buf.clear();
        }
    }

    pub(crate) fn version(&self) -> RespVersion {
        self.version
    }

    pub(crate) fn set_version(&mut self, version: RespVersion) {
        self.version = version;
    }

    /// A push of `n` values follows (pub/sub messages and confirmations): a RESP3 push, a
    /// RESP2 array.
    pub(crate) fn push_len(&mut self, n: usize) {
        self.enc().push_len(n);
        self.check_limit();
    }

    #[inline]
    fn enc(&mut self) -> Encoder<'_> {
        Encoder::new(&mut self.buf, self.version)
    }
}

impl Reply for Resp {
    #[inline]
    fn simple(&mut self, text: &[u8]) {
        self.enc().simple(text);
    }
    #[inline]
    fn ok(&mut self) {
        self.enc().ok();
    }
    #[inline]
    fn error(&mut self, text: &[u8]) {
        if let Some(stats) = &self.stats {
            stats.error(text);
            if self.failed_slot != NO_SLOT {
                stats.fail(self.failed_slot);
                self.failed_slot = NO_SLOT;
            }
        }
        self.enc().error(text);
    }
    #[inline]
    fn integer(&mut self, n: i64) {
        self.enc().integer(n);
    }
    #[inline]
    fn bulk(&mut self, data: &[u8]) {
        self.enc().bulk(data);
        self.check_limit();
    }
    #[inline]
    fn null(&mut self) {
        self.enc().null();
    }
    fn null_array(&mut self) {
        self.enc().null_array();
    }
    #[inline]
    fn array_len(&mut self, n: usize) {
        self.enc().array_len(n);
        self.check_limit();
    }
    fn map_len(&mut self, pairs: usize) {
        self.enc().map_len(pairs);
        self.check_limit();
    }
    fn set_len(&mut self, n: usize) {
        self.enc().set_len(n);
        self.check_limit();
    }
    fn pairs_len(&mut self, n: usize) {
        match self.version {
            RespVersion::Resp2 => self.enc().array_len(n.saturating_mul(2)),
            RespVersion::Resp3 => self.enc().array_len(n),
        }
    }
    fn pair(&mut self) {
        if self.version == RespVersion::Resp3 {
            self.enc().array_len(2);
        }
    }
    fn keyed_len(&mut self, n: usize) {
        match self.version {
            RespVersion::Resp2 => self.enc().array_len(n),
            RespVersion::Resp3 => self.enc().map_len(n),
        }
    }
    fn keyed(&mut self) {
        if self.version == RespVersion::Resp2 {
            self.enc().array_len(2);
        }
    }
    fn double(&mut self, value: f64) {
        self.enc().double(value);
    }
    fn double_text(&mut self, text: &[u8]) {
        self.enc().double_text(text);
        self.check_limit();
    }
    fn boolean(&mut self, value: bool) {
        self.enc().boolean(value);
    }
    fn verbatim(&mut self, format: [u8; 3], text: &[u8]) {
        self.enc().verbatim(format, text);
        self.check_limit();
    }
    fn big_number(&mut self, digits: &[u8]) {
        self.enc().big_number(digits);
        self.check_limit();
    }
    #[inline]
    fn full(&self) -> bool {
        self.overflowed
    }
    fn overflow(&mut self) {
        self.overflowed = true;
        self.buf.clear();
    }
    fn array_deferred(&mut self) -> usize {
        self.buf.len()
    }
    fn array_fill(&mut self, mark: usize, n: usize) {
        if self.overflowed || mark > self.buf.len() {
            return;
        }
        // The header goes in front of the elements: they move once (within the limit).
        let elements = self.buf.split_off(mark);
        Encoder::new(&mut self.buf, self.version).array_len(n);
        self.buf.extend_from_slice(&elements);
        self.check_limit();
    }
}

/// One value (or aggregate header) of a [`Replies`] buffer; byte strings are ranges of its
/// arena.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    Simple(Range<usize>),
    Error(Range<usize>),
    Integer(i64),
    Bulk(Range<usize>),
    Null,
    NullArray,
    Array(usize),
    Map(usize),
    Set(usize),
    Pairs(usize),
    Pair,
    Keyed(usize),
    KeyedEntry,
    Double(f64),
    DoubleText(Range<usize>),
    Boolean(bool),
    Verbatim([u8; 3], Range<usize>),
    BigNumber(Range<usize>),
}

/// A typed reply buffer: what a handler wrote, as tokens, without any protocol's bytes.
///
/// With a limit ([`Replies::with_limit`], the client output limit) it stops growing as
/// [`Resp`] does: past it, what it holds is dropped and [`Replies::replay`] marks the
/// connection's sink overflowed.
#[derive(Debug, Clone)]
pub(crate) struct Replies {
    tokens: Vec<Token>,
    bytes: Vec<u8>,
    /// Most bytes (tokens and arena) it may hold.
    limit: usize,
    overflowed: bool,
}

impl Default for Replies {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            bytes: Vec::new(),
            limit: usize::MAX,
            overflowed: false,
        }
    }
}

impl Replies {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// A buffer bounded at `bytes` (0: no limit).
    pub(crate) fn with_limit(bytes: u64) -> Self {
        Self {
            limit: match bytes {
                0 => usize::MAX,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            },
            ..Self::default()
        }
    }

    fn text(&mut self, data: &[u8]) -> Range<usize> {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(data);
        start..self.bytes.len()
    }

    /// Pushes a token, dropping everything once past the limit.
    #[inline]
    fn push(&mut self, token: Token) {
        if self.overflowed {
            return;
        }
        self.tokens.push(token);
        if self.bytes.len() + self.tokens.len() * std::mem::size_of::<Token>() > self.limit {
            self.overflowed = true;
            self.tokens = Vec::new();
            self.bytes = Vec::new();
        }
    }

    /// Empties it for reuse (keeping its memory), bounded at `bytes` (0: no limit).
    pub(crate) fn reset(&mut self, bytes: u64) {
        self.tokens.clear();
        self.bytes.clear();
        self.overflowed = false;
        self.limit = match bytes {
            0 => usize::MAX,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
    }

    /// The memory its buffers hold.
    pub(crate) fn held(&self) -> usize {
        self.bytes.capacity() + self.tokens.capacity() * std::mem::size_of::<Token>()
    }

    /// The tokens written.
    pub(crate) fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// The bytes of a range a token holds.
    pub(crate) fn bytes(&self, range: &Range<usize>) -> &[u8] {
        &self.bytes[range.clone()]
    }

    /// The error text when the first value is an error.
    pub(crate) fn error_text(&self) -> Option<&[u8]> {
        match self.tokens.first() {
            Some(Token::Error(r)) => Some(self.bytes(r)),
            _ => None,
        }
    }

    /// The first value when it is an integer.
    pub(crate) fn integer_value(&self) -> Option<i64> {
        match self.tokens.first() {
            Some(Token::Integer(n)) => Some(*n),
            _ => None,
        }
    }

    /// Every integer token, in order (the elements of an array of integers).
    pub(crate) fn integers(&self) -> impl Iterator<Item = i64> + '_ {
        self.tokens.iter().filter_map(|t| match t {
            Token::Integer(n) => Some(*n),
            _ => None,
        })
    }

    /// Whether it went past its limit (and holds nothing).
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Writes every token into `out` (or, past its limit, marks `out` overflowed).
    pub(crate) fn replay<R: Reply>(&self, out: &mut R) {
        if self.overflowed {
            return out.overflow();
        }
        self.replay_tokens(&self.tokens, out);
    }

    /// Writes `tokens` (a run of this buffer's tokens) into `out`.
    pub(crate) fn replay_tokens<R: Reply>(&self, tokens: &[Token], out: &mut R) {
        for token in tokens {
            match token {
                Token::Simple(r) => out.simple(self.bytes(r)),
                Token::Error(r) => out.error(self.bytes(r)),
                Token::Integer(n) => out.integer(*n),
                Token::Bulk(r) => out.bulk(self.bytes(r)),
                Token::Null => out.null(),
                Token::NullArray => out.null_array(),
                Token::Array(n) => out.array_len(*n),
                Token::Map(n) => out.map_len(*n),
                Token::Set(n) => out.set_len(*n),
                Token::Pairs(n) => out.pairs_len(*n),
                Token::Pair => out.pair(),
                Token::Keyed(n) => out.keyed_len(*n),
                Token::KeyedEntry => out.keyed(),
                Token::Double(v) => out.double(*v),
                Token::DoubleText(r) => out.double_text(self.bytes(r)),
                Token::Boolean(b) => out.boolean(*b),
                Token::Verbatim(f, r) => out.verbatim(*f, self.bytes(r)),
                Token::BigNumber(r) => out.big_number(self.bytes(r)),
            }
        }
    }
}

impl Reply for Replies {
    fn simple(&mut self, text: &[u8]) {
        let r = self.text(text);
        self.push(Token::Simple(r));
    }
    fn error(&mut self, text: &[u8]) {
        let r = self.text(text);
        self.push(Token::Error(r));
    }
    fn integer(&mut self, n: i64) {
        self.push(Token::Integer(n));
    }
    fn bulk(&mut self, data: &[u8]) {
        let r = self.text(data);
        self.push(Token::Bulk(r));
    }
    fn null(&mut self) {
        self.push(Token::Null);
    }
    fn null_array(&mut self) {
        self.push(Token::NullArray);
    }
    fn array_len(&mut self, n: usize) {
        self.push(Token::Array(n));
    }
    fn map_len(&mut self, pairs: usize) {
        self.push(Token::Map(pairs));
    }
    fn set_len(&mut self, n: usize) {
        self.push(Token::Set(n));
    }
    fn pairs_len(&mut self, n: usize) {
        self.push(Token::Pairs(n));
    }
    fn pair(&mut self) {
        self.push(Token::Pair);
    }
    fn keyed_len(&mut self, n: usize) {
        self.push(Token::Keyed(n));
    }
    fn keyed(&mut self) {
        self.push(Token::KeyedEntry);
    }
    fn double(&mut self, value: f64) {
        self.push(Token::Double(value));
    }
    fn double_text(&mut self, text: &[u8]) {
        let r = self.text(text);
        self.push(Token::DoubleText(r));
    }
    fn boolean(&mut self, value: bool) {
        self.push(Token::Boolean(value));
    }
    fn verbatim(&mut self, format: [u8; 3], text: &[u8]) {
        let r = self.text(text);
        self.push(Token::Verbatim(format, r));
    }
    fn big_number(&mut self, digits: &[u8]) {
        let r = self.text(digits);
        self.push(Token::BigNumber(r));
    }
    fn full(&self) -> bool {
        self.overflowed
    }
    fn overflow(&mut self) {
        self.overflowed = true;
        self.tokens = Vec::new();
        self.bytes = Vec::new();
    }
    fn array_deferred(&mut self) -> usize {
        self.push(Token::Array(0));
        self.tokens.len().wrapping_sub(1)
    }
    fn array_fill(&mut self, mark: usize, n: usize) {
        if let Some(Token::Array(len)) = self.tokens.get_mut(mark) {
            *len = n;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    //! A second protocol, for tests only: a line-based text sink (one value per line,
    //! aggregates as `[n]`), to show that a protocol is a sink plus an edge and reuses every
    //! handler unchanged.

    use super::{Replies, Reply, Resp};
    use fc_resp::RespVersion;

    /// Values as lines of text: `+status`, `!error`, `#integer`, `"bulk` (escaped), `nil`,
    /// `[n]` arrays, `{n}` maps, `<n>` sets, `(n)` pair lists, `~double`, `?bool`.
    #[derive(Debug, Default)]
    pub(crate) struct TextSink {
        pub(crate) lines: Vec<String>,
        /// Lines it holds before it is full (0: never), to see a streamed reply stop.
        pub(crate) cap: usize,
    }

    impl Reply for TextSink {
        fn simple(&mut self, text: &[u8]) {
            self.lines
                .push(format!("+{}", String::from_utf8_lossy(text)));
        }
        fn error(&mut self, text: &[u8]) {
            self.lines
                .push(format!("!{}", String::from_utf8_lossy(text)));
        }
        fn integer(&mut self, n: i64) {
            self.lines.push(format!("#{n}"));
        }
        fn bulk(&mut self, data: &[u8]) {
            self.lines.push(format!("\"{}", data.escape_ascii()));
        }
        fn null(&mut self) {
            self.lines.push("nil".into());
        }
        fn null_array(&mut self) {
            self.lines.push("nil".into());
        }
        fn array_len(&mut self, n: usize) {
            self.lines.push(format!("[{n}]"));
        }
        fn map_len(&mut self, pairs: usize) {
            self.lines.push(format!("{{{pairs}}}"));
        }
        fn set_len(&mut self, n: usize) {
            self.lines.push(format!("<{n}>"));
        }
        fn pairs_len(&mut self, n: usize) {
            self.lines.push(format!("({n})"));
        }
        fn pair(&mut self) {}
        fn keyed_len(&mut self, n: usize) {
            self.lines.push(format!("{{{n}}}"));
        }
        fn keyed(&mut self) {}
        fn double(&mut self, value: f64) {
            self.lines.push(format!("~{value}"));
        }
        fn double_text(&mut self, text: &[u8]) {
            self.lines.push(format!("~{}", text.escape_ascii()));
        }
        fn boolean(&mut self, value: bool) {
            self.lines.push(format!("?{value}"));
        }
        fn verbatim(&mut self, _format: [u8; 3], text: &[u8]) {
            self.lines.push(format!("\"{}", text.escape_ascii()));
        }
        fn big_number(&mut self, digits: &[u8]) {
            self.lines.push(format!("({}", digits.escape_ascii()));
        }
        fn full(&self) -> bool {
            self.cap > 0 && self.lines.len() >= self.cap
        }
        fn array_deferred(&mut self) -> usize {
            self.lines.push(String::new());
            self.lines.len() - 1
        }
        fn array_fill(&mut self, mark: usize, n: usize) {
            self.lines[mark] = format!("[{n}]");
        }
    }

    fn sample<R: Reply>(out: &mut R) {
        out.array_len(9);
        out.ok();
        out.integer(-7);
        out.bulk(b"a\r\nb");
        out.null();
        out.map_len(1);
        out.bulk(b"k");
        out.double(1.5);
        out.pairs_len(2);
        out.pair();
        out.bulk(b"m1");
        out.double(1.0);
        out.pair();
        out.bulk(b"m2");
        out.double(2.5);
        out.set_len(0);
        out.boolean(true);
        out.error(b"ERR no");
    }

    #[test]
    fn a_replayed_buffer_encodes_as_the_handler_would_have() {
        for version in [RespVersion::Resp2, RespVersion::Resp3] {
            let mut direct = Resp::new(0);
            direct.set_version(version);
            sample(&mut direct);
            let mut typed = Replies::new();
            sample(&mut typed);
            let mut replayed = Resp::new(0);
            replayed.set_version(version);
            typed.replay(&mut replayed);
            assert_eq!(direct.buf, replayed.buf, "{version:?}");
        }
    }

    #[test]
    fn the_output_limit_bounds_the_buffer_while_a_reply_is_built() {
        let mut out = Resp::new(0);
        out.set_limit(1000);
        out.array_len(100_000);
        let mut most = 0;
        for _ in 0..100_000 {
            out.bulk(b"0123456789");
            most = most.max(out.buf.len());
        }
        assert!(out.overflowed());
        assert!(most <= 1000 + 17, "{most}");
        let mut free = Resp::new(0);
        free.set_limit(0);
        (0..1000).for_each(|_| free.bulk(b"0123456789"));
        assert!(!free.overflowed());
        assert_eq!(free.buf.len(), 17_000);
    }

    #[test]
    fn pair_lists_are_flat_in_resp2_and_nested_in_resp3() {
        let mut resp2 = Resp::new(0);
        resp2.pairs_len(1);
        resp2.pair();
        resp2.bulk(b"m");
        resp2.double(2.0);
        assert_eq!(&resp2.buf[..], b"*2\r\n$1\r\nm\r\n$1\r\n2\r\n");
        let mut resp3 = Resp::new(0);
        resp3.set_version(RespVersion::Resp3);
        resp3.pairs_len(1);
        resp3.pair();
        resp3.bulk(b"m");
        resp3.double(2.0);
        assert_eq!(&resp3.buf[..], b"*1\r\n*2\r\n$1\r\nm\r\n,2\r\n");
    }

    #[test]
    fn typed_replies_read_without_parsing() {
        let mut r = Replies::new();
        r.array_len(2);
        r.integer(3);
        r.integer(4);
        assert_eq!(r.integers().sum::<i64>(), 7);
        assert_eq!(r.error_text(), None);
        let mut e = Replies::new();
        e.error(b"ERR x");
        assert_eq!(e.error_text(), Some(&b"ERR x"[..]));
        let mut text = TextSink::default();
        sample(&mut text);
        assert_eq!(text.lines[0], "[9]");
        assert_eq!(text.lines[3], "\"a\\r\\nb");
    }

    #[test]
    fn a_deferred_array_gets_its_length_in_front_of_its_elements() {
        let mut out = Resp::new(0);
        out.simple(b"before");
        let mark = out.array_deferred();
        out.bulk(b"a");
        out.bulk(b"bc");
        out.array_fill(mark, 2);
        assert_eq!(&out.buf[..], b"+before\r\n*2\r\n$1\r\na\r\n$2\r\nbc\r\n");
        let mut typed = Replies::new();
        let mark = typed.array_deferred();
        typed.bulk(b"a");
        typed.array_fill(mark, 1);
        let mut out = Resp::new(0);
        typed.replay(&mut out);
        assert_eq!(&out.buf[..], b"*1\r\n$1\r\na\r\n");
    }

    #[test]
    fn typed_replies_past_their_limit_overflow_the_connections_sink() {
        let mut typed = Replies::with_limit(4096);
        typed.array_len(1000);
        for _ in 0..1000 {
            typed.bulk(&[b'x'; 100]);
            if typed.full() {
                break;
            }
        }
        assert!(typed.overflowed() && typed.tokens().is_empty());
        let mut out = Resp::new(0);
        out.simple(b"earlier");
        typed.replay(&mut out);
        assert!(out.overflowed() && out.buf.is_empty());
        // Within the limit, nothing changes.
        let mut small = Replies::with_limit(4096);
        small.bulk(b"ok");
        let mut out = Resp::new(0);
        small.replay(&mut out);
        assert!(!out.overflowed());
        assert_eq!(&out.buf[..], b"$2\r\nok\r\n");
    }
}
