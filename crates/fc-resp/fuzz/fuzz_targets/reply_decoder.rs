//! Reply decoder: arbitrary bytes in arbitrary pieces.
//!
//! Asserts, beyond "no panic":
//! - the same frames and the same error come out whole, in the fuzzer's pieces and one byte at
//!   a time;
//! - no frame breaks the limits (depth, aggregate length, string length);
//! - every decoded frame encodes (RESP3) and decodes back to itself.
#![no_main]

use bytes::BytesMut;
use fc_resp::{DecodeLimits, Encoder, Frame, FrameDecoder, ProtocolError, RespVersion};
use libfuzzer_sys::fuzz_target;

fn limits() -> DecodeLimits {
    DecodeLimits {
        max_bulk_len: 4096,
        max_aggregate_len: 256,
        max_line_len: 1024,
        max_depth: 16,
    }
}

fn run(input: &[u8], chunk: usize) -> (Vec<Frame>, Option<ProtocolError>) {
    let mut decoder = FrameDecoder::new(limits());
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => out.push(frame),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fn check(frame: &Frame, depth: usize, limits: &DecodeLimits) {
    assert!(depth <= limits.max_depth + 1);
    if let Some(bytes) = frame.as_bytes() {
        assert!(bytes.len() as u64 <= limits.max_bulk_len.max(limits.max_line_len as u64));
    }
    match frame {
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            assert!(items.len() as u64 <= limits.max_aggregate_len);
            items.iter().for_each(|f| check(f, depth + 1, limits));
        }
        Frame::Map(pairs) => {
            assert!(pairs.len() as u64 <= limits.max_aggregate_len);
            for (k, v) in pairs {
                check(k, depth + 1, limits);
                check(v, depth + 1, limits);
            }
        }
        Frame::Attribute { attributes, value } => {
            assert!(attributes.len() as u64 <= limits.max_aggregate_len);
            for (k, v) in attributes {
                check(k, depth + 1, limits);
                check(v, depth + 1, limits);
            }
            check(value, depth + 1, limits);
        }
        _ => {}
    }
}

/// RESP3 has one null.
fn resp3(frame: &Frame) -> Frame {
    let pairs = |p: &[(Frame, Frame)]| p.iter().map(|(k, v)| (resp3(k), resp3(v))).collect();
    match frame {
        Frame::NullArray => Frame::Null,
        Frame::Array(items) => Frame::Array(items.iter().map(resp3).collect()),
        Frame::Set(items) => Frame::Set(items.iter().map(resp3).collect()),
        Frame::Push(items) => Frame::Push(items.iter().map(resp3).collect()),
        Frame::Map(p) => Frame::Map(pairs(p)),
        Frame::Attribute { attributes, value } => Frame::Attribute {
            attributes: pairs(attributes),
            value: Box::new(resp3(value)),
        },
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, input)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk % 64) + 1;
    let whole = run(input, input.len());
    assert_eq!(run(input, chunk), whole);
    assert_eq!(run(input, 1), whole);
    let limits = limits();
    let mut encoded = BytesMut::new();
    for frame in &whole.0 {
        check(frame, 0, &limits);
        Encoder::new(&mut encoded, RespVersion::Resp3).frame(frame);
    }
    let want: Vec<Frame> = whole.0.iter().map(resp3).collect();
    let (again, err) = run(&encoded, encoded.len());
    assert!(err.is_none(), "{err:?}");
    assert_eq!(again, want);
});
