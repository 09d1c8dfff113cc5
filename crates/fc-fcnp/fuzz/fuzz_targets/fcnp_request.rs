//! FCNP request decoder: arbitrary bytes in arbitrary pieces.
//!
//! Asserts, beyond "no panic":
//! - the same requests and the same error come out whole and one byte at a time;
//! - no request passes the limits (items, item length);
//! - a decoded request re-encoded decodes to itself, and its command (when valid) starts with
//!   a non-empty name;
//! - `decode_command` (the server's path) gives the same command or the same refusal.
#![no_main]

use bytes::BytesMut;
use fc_fcnp::{FrameError, Limits, Request, RequestDecoder, encode_request};
use libfuzzer_sys::fuzz_target;

const LIMITS: Limits = Limits {
    max_body: 4096,
    max_items: 16,
    max_item: 512,
};

fn run(input: &[u8], chunk: usize) -> (Vec<Request>, Option<FrameError>) {
    let decoder = RequestDecoder::new(LIMITS);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(request)) => out.push(request),
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
    assert_eq!(whole, bytewise);
    assert_eq!(whole_err, bytewise_err);
    for request in whole {
        assert!(request.items.len() as u64 <= LIMITS.max_items);
        assert!(request.items.iter().all(|i| i.len() as u64 <= LIMITS.max_item));
        let mut again = BytesMut::new();
        encode_request(&mut again, &request.header, &request.items);
        let back = RequestDecoder::new(LIMITS)
            .decode(&mut again)
            .expect("a re-encoded request decodes")
            .expect("whole");
        assert_eq!(back, request);
        // The server's path (straight into an argument vector) means the same command.
        let mut again = BytesMut::new();
        encode_request(&mut again, &request.header, &request.items);
        let mut args = Vec::new();
        let decoded = RequestDecoder::new(LIMITS)
            .decode_command(&mut again, &mut args)
            .expect("a re-encoded request decodes")
            .expect("whole");
        match request.into_command() {
            Ok((command, shape)) => {
                assert!(!command.is_empty());
                assert_eq!(decoded.outcome, Ok(shape));
                assert_eq!(args, command);
            }
            Err(err) => {
                assert_eq!(decoded.outcome, Err(err));
                assert!(args.is_empty());
            }
        }
    }
});
