//! # fc-resp — the RESP2/RESP3 codec of fast-cache
//!
//! **Owns:** parsing requests (multibulk and inline) with Redis's limits and exact error texts,
//! encoding every RESP2 and RESP3 reply type with a per-connection [`RespVersion`], decoding
//! every reply type (for clients, replicas and tests), and numbers as Redis reads and writes
//! them ([`number`]).
//!
//! **Must not depend on:** any other workspace crate, any runtime, any I/O. It is sans-IO: bytes
//! in, values out; the server owns sockets and buffers.
//!
//! **It is not:** a client, a command table, or a RESP3 streaming (`$?`/`*?`) implementation
//! (Redis never sends streamed types; the decoder rejects them as invalid lengths).
//!
//! ## Limits and abuse
//! Every length from the wire is parsed into 64 bits and checked against [`Limits`] (requests)
//! or [`DecodeLimits`] (replies) before any allocation or arithmetic: bulk strings 512 MiB,
//! arguments `INT_MAX`, inline lines 64 KiB, query buffer 1 GiB; before authentication 10
//! arguments of 16 KiB and 1 MiB ([`Limits::unauthenticated`]). A claimed count pre-allocates at
//! most 1024 slots; buffers grow only as bytes arrive, so `*4294967295` or a `$536870912` that
//! never arrives costs nothing. Reply nesting is capped (128 levels) and walked without
//! recursion before anything is built.
//!
//! Errors carry Redis's texts (`Protocol error: invalid multibulk length`, `invalid bulk
//! length`, `expected '$', got 'x'`, `too big inline request`, `unbalanced quotes in request`,
//! `unauthenticated multibulk length`, `unauthenticated bulk length`);
//! [`ProtocolError::write_reply`] writes the `-ERR …` line a server sends before closing.
//!
//! ## Example
//! ```
//! use bytes::BytesMut;
//! use fc_resp::{Encoder, Limits, RequestParser, RespVersion};
//!
//! // A pipelined read: one multibulk SET, one inline GET, half of another command.
//! let mut input = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nGET k\r\n*2\r\n$3"[..]);
//! let mut parser = RequestParser::new(Limits::default());
//! let mut replies = BytesMut::new();
//! while let Some(cmd) = parser.parse(&input)? {
//!     let mut out = Encoder::new(&mut replies, RespVersion::Resp2);
//!     match cmd.name().to_ascii_uppercase().as_slice() {
//!         b"SET" => out.ok(),
//!         b"GET" => out.bulk(b"hello"),
//!         _ => out.error(b"ERR unknown command"),
//!     }
//! }
//! let used = parser.take_consumed();
//! let _ = input.split_to(used); // keep the incomplete tail for the next read
//! assert_eq!(&replies[..], b"+OK\r\n$5\r\nhello\r\n");
//! assert_eq!(&input[..], b"*2\r\n$3");
//!
//! // Abuse is refused before anything is allocated, with Redis's words.
//! let err = RequestParser::default().parse(b"*3000000000\r\n").unwrap_err();
//! assert_eq!(err.to_string(), "Protocol error: invalid multibulk length");
//! # Ok::<(), fc_resp::ProtocolError>(())
//! ```
//!
//! Decoding a RESP3 reply:
//! ```
//! use bytes::BytesMut;
//! use fc_resp::{Frame, FrameDecoder};
//!
//! let mut buf = BytesMut::from(&b"%1\r\n+proto\r\n:3\r\n"[..]);
//! let frame = FrameDecoder::default().decode(&mut buf)?.expect("complete");
//! assert_eq!(frame, Frame::Map(vec![(Frame::simple("proto"), Frame::Integer(3))]));
//! # Ok::<(), fc_resp::ProtocolError>(())
//! ```
//!
//! ## Fuzzing and benchmarks
//! `fuzz/` holds two cargo-fuzz targets, `request_parser` and `reply_decoder`. Both feed
//! arbitrary bytes whole, in the fuzzer's pieces and one byte at a time, and assert that the
//! outcomes agree, that nothing exceeds the limits, and that what decodes re-encodes to itself.
//! `cargo xtask fuzz --seconds N` runs each for `N` seconds (CI: 10; needs the nightly
//! toolchain and `cargo install cargo-fuzz`); seeds are in `fuzz/seeds/<target>/`.
//!
//! `cargo bench -p fc-resp --bench codec` measures parsing of pipelined `GET` and 64-byte `SET`
//! batches, bulk-reply encoding (64 B, 4 KiB) and an `MGET` reply decode, with the
//! `redis-protocol` crate in the same run.

mod decode;
mod encode;
mod error;
mod frame;
mod inline;
mod limits;
pub mod number;
mod request;

pub use decode::{FrameDecoder, MAX_TOKENS};
pub use encode::{Encoder, RespVersion};
pub use error::{ProtocolError, Result};
pub use frame::Frame;
pub use limits::{DecodeLimits, Limits};
pub use request::{Command, OwnedCommand, RequestParser, encode_command};
