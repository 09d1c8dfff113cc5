//! What a protocol adds to a connection's loop (`conn::run`): how requests are read into a
//! command's arguments, and how each reply, written in RESP by the handlers, leaves. RESP
//! itself ([`RespEdge`]) adds nothing; FCNP (`fcnp::FcnpEdge`) frames each reply with its
//! request's id. Everything between — the command table, the in-place path, sessions,
//! transactions, ACLs, statistics — is the same for both.

use bytes::{Bytes, BytesMut};
use fc_resp::RequestParser;

use crate::reply::Resp;

/// A parsed request's edge data (RESP: none; FCNP: id, reply shape, refusal).
pub(crate) type Tag = u64;

/// The protocol's side of a connection.
pub(crate) trait Edge {
    /// A framing error, which ends the connection after [`Edge::write_fatal`].
    type Fatal;

    /// Whether the connection's replies are RESP3 from the start (FCNP re-encodes RESP3's
    /// typed values).
    const RESP3: bool;

    /// Whether the busy-script hook may answer the connection (`parked`): it speaks RESP.
    const SPEAKS_RESP: bool;

    /// Takes the next complete request off `rbuf` into `args` (name first): `Ok(None)` while
    /// incomplete. `authed` says which limits apply; `parser` is the RESP parser (the session
    /// keeps its authentication state). A request the edge refuses itself comes back with
    /// empty `args` and a tag [`Edge::refused`] recognises. The second value is the route
    /// hash the client claims for the first key, if it sent one.
    fn parse(
        &mut self,
        parser: &mut RequestParser,
        rbuf: &mut BytesMut,
        args: &mut Vec<Bytes>,
        authed: bool,
    ) -> Result<Option<(Tag, Option<u64>)>, Self::Fatal>;

    /// Whether the request tagged `tag` is one the edge refused (its reply is
    /// [`Edge::write_refusal`]'s).
    fn refused(tag: Tag) -> bool;

    /// Marks a parsed request as refused with `text` (a route the server disagrees with).
    fn refuse(&mut self, tag: Tag, text: Bytes) -> Tag;

    /// Writes the reply of a refused request.
    fn write_refusal(&mut self, out: &mut BytesMut, tag: Tag);

    /// Turns the RESP reply written at `out[mark..]` into the protocol's reply to `tag`.
    fn finish(&mut self, out: &mut BytesMut, mark: usize, tag: Tag);

    /// Writes what the client is told before a framing error closes it.
    fn write_fatal(&mut self, err: Self::Fatal, out: &mut Resp);
}

/// RESP: the handlers' replies are the protocol's.
#[derive(Debug, Default)]
pub(crate) struct RespEdge;

impl Edge for RespEdge {
    type Fatal = fc_resp::ProtocolError;
    const RESP3: bool = false;
    const SPEAKS_RESP: bool = true;

    #[inline]
    fn parse(
        &mut self,
        parser: &mut RequestParser,
        rbuf: &mut BytesMut,
        args: &mut Vec<Bytes>,
        _authed: bool,
    ) -> Result<Option<(Tag, Option<u64>)>, Self::Fatal> {
        Ok(parser.parse_into(rbuf, args)?.then_some((0, None)))
    }

    #[inline]
    fn refused(_tag: Tag) -> bool {
        false
    }

    fn refuse(&mut self, tag: Tag, _text: Bytes) -> Tag {
        tag
    }

    fn write_refusal(&mut self, _out: &mut BytesMut, _tag: Tag) {}

    #[inline]
    fn finish(&mut self, _out: &mut BytesMut, _mark: usize, _tag: Tag) {}

    fn write_fatal(&mut self, err: Self::Fatal, out: &mut Resp) {
        // Redis answers the protocol error and closes this client only.
        let before = out.buf.len();
        err.write_reply(&mut out.buf);
        if out.buf.len() > before {
            out.count_error(b"ERR");
        }
    }
}
