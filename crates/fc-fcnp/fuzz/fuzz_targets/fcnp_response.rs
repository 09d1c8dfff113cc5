//! FCNP response decoder: arbitrary bytes, whole and one byte at a time.
//!
//! Asserts, beyond "no panic": both ways give the same responses and the same error, and a
//! decoded value re-encoded is the same bytes.
#![no_main]

use bytes::BytesMut;
use fc_fcnp::{Body, FrameError, Response, ResponseDecoder, ResponseLimits};
use libfuzzer_sys::fuzz_target;

const LIMITS: ResponseLimits = ResponseLimits {
    max_body: 4096,
    max_depth: 16,
};

fn run(input: &[u8], chunk: usize) -> (Vec<Response>, Option<FrameError>) {
    let decoder = ResponseDecoder::new(LIMITS);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(response)) => out.push(response),
                Ok(None) => break,
                Err(err) => return (out, Some(err)),
            }
        }
    }
    (out, None)
}

fuzz_target!(|input: &[u8]| {
    let (whole, whole_err) = run(input, input.len());
    let (bytewise, bytewise_err) = run(input, 1);
    // NaN doubles compare unequal: compare the encodings instead.
    assert_eq!(format!("{whole:?}"), format!("{bytewise:?}"));
    assert_eq!(whole_err, bytewise_err);
    for response in whole {
        if let Body::Value(value) = response.body {
            let mut once = BytesMut::new();
            value.encode(&mut once);
            let back = fc_fcnp::Value::decode(once.clone().freeze(), 16).expect("re-decodes");
            let mut twice = BytesMut::new();
            back.encode(&mut twice);
            assert_eq!(once, twice);
        }
    }
});
