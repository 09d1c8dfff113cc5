//! FCRP frames from arbitrary bytes, whole and one byte at a time, and every payload decoder
//! a frame can reach (hello, welcome, watermarks, batch).
//!
//! Asserts, beyond "no panic": both ways give the same frames and the same error; a decoded
//! frame re-encoded (uncompressed) decodes to itself.
#![no_main]

use fc_repl::{Frame, FrameDecoder, FrameError, Hello, Kind, Welcome, decode_batch, decode_watermarks};
use libfuzzer_sys::fuzz_target;

const DECODER: FrameDecoder = FrameDecoder { max_payload: 1 << 16 };

fn run(input: &[u8], chunk: usize) -> (Vec<Frame>, Option<FrameError>) {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match DECODER.decode(&mut buf) {
                Ok(Some(frame)) => out.push(frame),
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
    for frame in whole {
        let mut again = Vec::new();
        frame.encode(fc_repl::Compression::None, &mut again);
        assert_eq!(DECODER.decode(&mut again).unwrap(), Some(frame.clone()));
        match frame.kind {
            Kind::Hello => {
                let _ = Hello::decode(&frame);
            }
            Kind::Welcome => {
                let _ = Welcome::decode(&frame);
            }
            Kind::Ack | Kind::Heartbeat => {
                let _ = decode_watermarks(&frame);
            }
            Kind::Batch => {
                let _ = decode_batch(&frame);
            }
            _ => {}
        }
    }
});
