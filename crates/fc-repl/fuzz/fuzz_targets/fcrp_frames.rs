//! FCRP frames from arbitrary bytes, whole and one byte at a time, and every payload decoder
//! a frame can reach (hello, welcome, watermarks, batch).
//!
//! Asserts, beyond "no panic": both ways, and a reader that keeps its buffer and reads what
//! `missing` asks for (`decode_ref`, as a replica's link does), give the same frames and the
//! same error; a decoded frame re-encoded (uncompressed) decodes to itself; a batch goes
//! through an applier.
#![no_main]

use fc_repl::{
    Applier, Entry, Frame, FrameDecoder, FrameError, Hello, Kind, Welcome, decode_batch,
    decode_watermarks,
};
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

/// The frames as a reader that keeps its buffer takes them: each read brings what `missing`
/// says the frame begun lacks (or what is left).
fn run_in_place(input: &[u8]) -> (Vec<Frame>, Option<FrameError>) {
    let (mut at, mut have, mut out) = (0, 0, Vec::new());
    loop {
        match DECODER.decode_ref(&input[at..have]) {
            Ok(Some((frame, used))) => {
                out.push(frame.into_owned());
                at += used;
            }
            Ok(None) if have == input.len() => return (out, None),
            Ok(None) => {
                let missing = DECODER.missing(&input[at..have]);
                assert!(missing > 0);
                have = (have + missing).min(input.len());
            }
            Err(err) => return (out, Some(err)),
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let (whole, whole_err) = run(input, input.len());
    let (bytewise, bytewise_err) = run(input, 1);
    assert_eq!(whole, bytewise);
    assert_eq!(whole_err, bytewise_err);
    let (in_place, in_place_err) = run_in_place(input);
    assert_eq!(whole, in_place);
    assert_eq!(whole_err, in_place_err);
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
                let mut applier = Applier::new(vec![0; 4]);
                let _ = applier.apply_entries(&frame.view(), |_, entry| {
                    if let Entry::InFrame(range) = entry {
                        assert!(range.start <= range.end && range.end <= frame.payload.len());
                    }
                    Ok(())
                });
            }
            _ => {}
        }
    }
});
