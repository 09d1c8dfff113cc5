//! # fc-fcnp — FCNP, fast-cache's native binary protocol, sans-IO
//!
//! **Owns:** the bytes of FCNP version 1 (`docs/FCNP.md` gives them in full): request frames
//! (a fixed 16-byte little-endian header — magic `0xFC`, version, opcode, flags, request id,
//! item count, body length — then the optional route hash and TTL extensions, then
//! length-prefixed items), response frames (a 12-byte header echoing the request id, then one
//! typed [`Value`], a [`Packed`] batch whose values share one buffer, or a fatal error), what
//! each opcode means as a Redis command ([`Request::into_command`]), and the limits checked
//! before anything is allocated.
//!
//! **Must not depend on:** any other workspace crate, any runtime, any I/O. Bytes in, values
//! out: the server (`fc-server`) and the client (`fc-client`) own sockets and buffers.
//!
//! ## Why a second protocol
//! RESP spends its bytes on decimal lengths and `\r\n`, and its replies cannot say which
//! request they answer. An FCNP request has fixed-width lengths (no scanning for line ends,
//! no decimal parsing), carries an id that its response echoes (a client may keep many
//! requests in flight and match responses by id, not by position), batches keys and values in
//! one frame, and gets a batch's values back in one contiguous buffer (an LLM server reading a
//! session's KV chunks hands that buffer on without copying each value).
//!
//! ## Limits and abuse
//! A request header is checked as soon as its 16 bytes are there: magic, version, reserved
//! flags, the body's length (1 GiB by default), the item count (each item needs at least its
//! 4-byte length, so a count the body cannot hold is refused before any allocation), and each
//! item's length (512 MiB, Redis's `proto-max-bulk-len`). Before authentication the limits
//! are Redis's: 10 items of 16 KiB, 1 MiB ([`Limits::unauthenticated`]). A framing error
//! ([`FrameError`]) ends the connection; a well-framed request that asks for something
//! invalid ([`RequestError`]) gets an error reply and the stream goes on. Reply decoding caps
//! nesting (128 levels) and pre-allocates only what the remaining bytes could hold.
//!
//! ## Example
//! ```
//! use bytes::BytesMut;
//! use fc_fcnp::{
//!     Body, Flags, Opcode, ReplyShape, RequestDecoder, RequestHeader, ResponseDecoder, Value,
//!     encode_request, encode_value_response,
//! };
//!
//! // The client: two pipelined requests, a SET with a TTL and a GET.
//! let mut wire = BytesMut::new();
//! let set = RequestHeader::new(Opcode::Set, 1).with_ttl_ms(60_000).with_flags(Flags::NX);
//! encode_request(&mut wire, &set, &[&b"user:1"[..], b"alice"]);
//! encode_request(&mut wire, &RequestHeader::new(Opcode::Get, 2), &[b"user:1"]);
//!
//! // The server: each request is a command of its table.
//! let decoder = RequestDecoder::default();
//! let first = decoder.decode(&mut wire)?.expect("a whole frame");
//! let (command, shape) = first.into_command()?;
//! assert_eq!(command, ["SET", "user:1", "alice", "PX", "60000", "NX"]);
//! assert_eq!(shape, ReplyShape::Value);
//! let second = decoder.decode(&mut wire)?.expect("a whole frame");
//! assert_eq!(second.header.id, 2);
//! assert!(decoder.decode(&mut wire)?.is_none());
//!
//! // Its reply, matched by id on the client.
//! let mut replies = BytesMut::new();
//! encode_value_response(&mut replies, 2, &Value::Bulk("alice".into()));
//! let reply = ResponseDecoder::default().decode(&mut replies)?.expect("a whole frame");
//! assert_eq!(reply.id, 2);
//! assert_eq!(reply.body, Body::Value(Value::Bulk("alice".into())));
//!
//! // Abuse is refused from the header alone.
//! let mut huge = BytesMut::from(&[0xFC, 1, 0x20, 0, 7, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255][..]);
//! assert!(decoder.decode(&mut huge).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod request;
mod response;
mod value;

pub use error::{FrameError, RequestError};
pub use request::{
    Decoded, Flags, Limits, Opcode, REQUEST_HEADER_LEN, ReplyShape, Request, RequestDecoder,
    RequestHeader, encode_request,
};
pub use response::{
    Body, PACKED_MISSING, Packed, PackedWriter, RESPONSE_HEADER_LEN, Response, ResponseDecoder,
    ResponseKind, ResponseLimits, begin_response, encode_fatal, encode_value_response,
    finish_response,
};
pub use value::{Value, put, tag};

/// The first byte of every FCNP frame. No RESP request starts with it (RESP's are `*` or a
/// printable inline command), so a server can tell the two apart from a connection's first
/// byte.
pub const MAGIC: u8 = 0xFC;

/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
