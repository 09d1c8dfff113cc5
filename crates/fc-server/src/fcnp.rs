//! The FCNP edge: requests decoded by `fc-fcnp` become the command table's argument vectors,
//! and each reply, written in RESP3 by the same handlers RESP uses, is re-encoded as an FCNP
//! response carrying its request's id (a typed value, or a packed batch for `MGET`).
//!
//! What FCNP does not carry: out-of-band pushes. `SUBSCRIBE`, `PSUBSCRIBE`, `SSUBSCRIBE`,
//! `MONITOR` and `CLIENT TRACKING` are refused on an FCNP connection (use RESP for them).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use fc_fcnp::{
    FrameError, Limits, PackedWriter, ReplyShape, RequestDecoder, ResponseKind, begin_response,
    finish_response, put, tag,
};
use fc_resp::{DecodeLimits, Frame, FrameDecoder, RequestParser};

use crate::edge::{Edge, Tag};
use crate::reply::Resp;

const PACKED: Tag = 1 << 32;
const REFUSED: Tag = 1 << 33;

/// One FCNP connection's edge state.
#[derive(Debug)]
pub(crate) struct FcnpEdge {
    decoder: RequestDecoder,
    /// The RESP reply being re-encoded (reused).
    scratch: BytesMut,
    /// The texts of refused requests, in request order.
    refusals: VecDeque<Bytes>,
    frames: FrameDecoder,
}

impl Default for FcnpEdge {
    fn default() -> Self {
        Self {
            decoder: RequestDecoder::default(),
            scratch: BytesMut::with_capacity(4096),
            refusals: VecDeque::new(),
            frames: FrameDecoder::new(DecodeLimits::default()),
        }
    }
}

/// The FCNP limits matching the RESP parser's (`proto-max-bulk-len`,
/// `client-query-buffer-limit`), or Redis's pre-authentication ones.
fn limits(parser: &RequestParser, authed: bool) -> Limits {
    if !authed {
        return Limits::unauthenticated();
    }
    let resp = parser.limits();
    Limits {
        max_body: resp.max_query_buffer as u64,
        max_items: resp.max_multibulk_len,
        max_item: resp.max_bulk_len,
    }
}

/// Commands whose replies arrive out of band, which FCNP has no frame for.
fn pushes(args: &[Bytes]) -> bool {
    let name = &args[0][..];
    [&b"SUBSCRIBE"[..], b"PSUBSCRIBE", b"SSUBSCRIBE", b"MONITOR"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
        || (name.eq_ignore_ascii_case(b"CLIENT")
            && args
                .get(1)
                .is_some_and(|s| s.eq_ignore_ascii_case(b"TRACKING")))
}

impl Edge for FcnpEdge {
    type Fatal = FrameError;
    const RESP3: bool = true;
    const SPEAKS_RESP: bool = false;

    fn parse(
        &mut self,
        parser: &mut RequestParser,
        rbuf: &mut BytesMut,
        args: &mut Vec<Bytes>,
        authed: bool,
    ) -> Result<Option<(Tag, Option<u64>)>, FrameError> {
        self.decoder.set_limits(limits(parser, authed));
        let Some(decoded) = self.decoder.decode_command(rbuf, args)? else {
            return Ok(None);
        };
        let id = Tag::from(decoded.header.id);
        match decoded.outcome {
            Ok(shape) => {
                if pushes(args) {
                    let text = format!(
                        "ERR {} is not available over FCNP (it replies out of band): use RESP",
                        String::from_utf8_lossy(&args[0]).to_ascii_uppercase()
                    );
                    args.clear();
                    return Ok(Some((self.refuse(id, text.into()), None)));
                }
                let tag = if shape == ReplyShape::Packed {
                    id | PACKED
                } else {
                    id
                };
                Ok(Some((tag, decoded.header.route)))
            }
            Err(err) => Ok(Some((self.refuse(id, err.to_string().into()), None))),
        }
    }

    #[inline]
    fn refused(tag: Tag) -> bool {
        tag & REFUSED != 0
    }

    fn refuse(&mut self, tag: Tag, text: Bytes) -> Tag {
        self.refusals.push_back(text);
        tag | REFUSED
    }

    fn write_refusal(&mut self, out: &mut BytesMut, tag: Tag) {
        let text = self.refusals.pop_front().unwrap_or_default();
        let mark = begin_response(out, ResponseKind::Value, tag as u32);
        put::bytes(out, tag::ERROR, &text);
        finish_response(out, mark);
    }

    fn finish(&mut self, out: &mut BytesMut, mark: usize, tag: Tag) {
        if out.len() <= mark {
            return;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&out[mark..]);
        out.truncate(mark);
        let id = tag as u32;
        if tag & PACKED != 0 && packed(&self.scratch, out, id) {
            return;
        }
        let start = begin_response(out, ResponseKind::Value, id);
        if !simple(&self.scratch, out) {
            let bytes = Bytes::copy_from_slice(&self.scratch);
            match self.frames.decode_bytes(&bytes) {
                Ok(Some((frame, _))) => put_frame(out, frame),
                _ => put::bytes(out, tag::ERROR, b"ERR reply too deep for FCNP"),
            }
        }
        finish_response(out, start);
    }

    fn write_fatal(&mut self, err: FrameError, out: &mut Resp) {
        fc_fcnp::encode_fatal(&mut out.buf, &err.to_string());
        out.count_error(b"ERR");
    }
}

/// The line at `at` (without `\r\n`) and where the next one starts.
fn line(src: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = src.get(at..)?;
    let end = memchr_crlf(rest)?;
    Some((&rest[..end], at + end + 2))
}

fn memchr_crlf(s: &[u8]) -> Option<usize> {
    s.windows(2).position(|w| w == b"\r\n")
}

fn number(digits: &[u8]) -> Option<i64> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// A bulk (`$n`) or null at `at`: its bytes (`None`: null) and where the next value starts.
fn bulk_at(src: &[u8], at: usize) -> Option<(Option<&[u8]>, usize)> {
    match src.get(at)? {
        b'_' => Some((None, at + 3)),
        b'$' => {
            let (head, body) = line(src, at + 1)?;
            let n = number(head)?;
            if n < 0 {
                return Some((None, body));
            }
            let end = body.checked_add(n as usize)?;
            Some((Some(src.get(body..end)?), end + 2))
        }
        _ => None,
    }
}

/// Re-encodes the one-line and bulk replies (nearly every reply of a cache) without decoding
/// frames; `false` for anything else.
fn simple(src: &[u8], out: &mut BytesMut) -> bool {
    let Some(&first) = src.first() else {
        return false;
    };
    match first {
        b'$' | b'_' => match bulk_at(src, 0) {
            Some((Some(data), end)) if end == src.len() => put::bytes(out, tag::BULK, data),
            Some((None, end)) if end == src.len() => put::nil(out),
            _ => return false,
        },
        b'+' | b'-' | b':' => {
            let Some((text, end)) = line(src, 1) else {
                return false;
            };
            if end != src.len() {
                return false;
            }
            match first {
                b'+' => put::bytes(out, tag::STATUS, text),
                b'-' => put::bytes(out, tag::ERROR, text),
                _ => match number(text) {
                    Some(n) => put::int(out, n),
                    None => return false,
                },
            }
        }
        b'*' if src.starts_with(b"*-1\r\n") && src.len() == 5 => put::nil(out),
        _ => return false,
    }
    true
}

/// An array of bulks and nulls (an `MGET`'s reply) as one packed response; `false` when the
/// reply is anything else (an error), which then goes as a value.
fn packed(src: &[u8], out: &mut BytesMut, id: u32) -> bool {
    if src.first() != Some(&b'*') {
        return false;
    }
    let Some((head, mut at)) = line(src, 1) else {
        return false;
    };
    let Some(n) = number(head).and_then(|n| usize::try_from(n).ok()) else {
        return false;
    };
    // Check the whole reply first: the response is written only when it is all packable.
    let first = at;
    for _ in 0..n {
        match bulk_at(src, at) {
            Some((_, next)) => at = next,
            None => return false,
        }
    }
    if at != src.len() {
        return false;
    }
    let mut writer = PackedWriter::begin(out, id, n);
    at = first;
    for _ in 0..n {
        let Some((value, next)) = bulk_at(src, at) else {
            unreachable!("checked above");
        };
        writer.push(out, value);
        at = next;
    }
    writer.finish(out);
    true
}

fn put_frame(out: &mut BytesMut, frame: Frame) {
    match frame {
        Frame::Simple(s) => put::bytes(out, tag::STATUS, &s),
        Frame::Error(s) | Frame::BlobError(s) => put::bytes(out, tag::ERROR, &s),
        Frame::Integer(n) => put::int(out, n),
        Frame::Bulk(b) => put::bytes(out, tag::BULK, &b),
        Frame::Null | Frame::NullArray => put::nil(out),
        Frame::Boolean(b) => put::boolean(out, b),
        Frame::Double(d) => put::double(out, d),
        Frame::BigNumber(b) => put::bytes(out, tag::BIG_NUMBER, &b),
        Frame::Verbatim { format, text } => put::verbatim(out, format, &text),
        Frame::Array(items) => put_all(out, tag::ARRAY, items),
        Frame::Set(items) => put_all(out, tag::SET, items),
        Frame::Push(items) => put_all(out, tag::PUSH, items),
        Frame::Map(pairs) => {
            put::aggregate(out, tag::MAP, pairs.len());
            for (k, v) in pairs {
                put_frame(out, k);
                put_frame(out, v);
            }
        }
        Frame::Attribute { value, .. } => put_frame(out, *value),
    }
}

fn put_all(out: &mut BytesMut, kind: u8, items: Vec<Frame>) {
    put::aggregate(out, kind, items.len());
    for item in items {
        put_frame(out, item);
    }
}
