//! Claimed lengths cost nothing: a parser fed `*2147483647`, `$536870912` or a reply claiming
//! billions of elements holds (almost) no memory of its own while the bytes trickle in.
//!
//! The global allocator here counts live bytes (the `cap` crate); one test function runs every
//! scenario in turn so no other test's allocations mix in.

use std::alloc::System;

use bytes::BytesMut;
use cap::Cap;
use fc_resp::{FrameDecoder, Limits, RequestParser};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Most bytes the codec itself may hold for any of these inputs (1024 pre-allocated argument
/// slots are 8 KiB), beyond what arguments that really arrived need.
const BUDGET: usize = 64 * 1024;

/// Argument slots that really arrived: 8 bytes per argument of at least 6 bytes on the wire,
/// doubled by `Vec` growth: at most 2 × 8 / 6 ≈ 2.7 bytes per byte received.
const PER_BYTE_RECEIVED: usize = 3;

fn request_parser_peak(input: &[u8]) -> usize {
    let mut parser = RequestParser::new(Limits::default());
    let base = ALLOCATOR.allocated();
    let mut peak = 0;
    let mut end = 0;
    while end < input.len() {
        end = (end + 4096).min(input.len());
        assert!(parser.parse(&input[..end]).expect("no error").is_none());
        let held = ALLOCATOR.allocated().saturating_sub(base);
        peak = peak.max(held.saturating_sub(PER_BYTE_RECEIVED * end));
    }
    peak
}

fn decoder_peak(input: &[u8]) -> usize {
    let mut decoder = FrameDecoder::default();
    // The buffer is the caller's; reserve it before measuring.
    let mut buf = BytesMut::with_capacity(input.len());
    let base = ALLOCATOR.allocated();
    let mut peak = 0;
    for piece in input.chunks(4096) {
        buf.extend_from_slice(piece);
        assert!(decoder.decode(&mut buf).expect("no error").is_none());
        peak = peak.max(ALLOCATOR.allocated().saturating_sub(base));
    }
    peak
}

#[test]
fn claimed_lengths_do_not_allocate() {
    let mut huge_count = b"*2147483647\r\n".to_vec();
    for _ in 0..100_000 {
        huge_count.extend_from_slice(b"$1\r\nx\r\n");
    }
    let peak = request_parser_peak(&huge_count);
    assert!(
        peak <= BUDGET,
        "*2147483647 with 100k arguments held {peak} bytes beyond 3 per byte received"
    );

    let mut huge_bulk = b"*2\r\n$3\r\nSET\r\n$536870912\r\n".to_vec();
    huge_bulk.extend(std::iter::repeat_n(b'x', 4 << 20));
    let peak = request_parser_peak(&huge_bulk);
    assert!(peak <= BUDGET, "$536870912 with 4 MiB held {peak} bytes");

    let mut reply = b"*2147483647\r\n".to_vec();
    for _ in 0..100_000 {
        reply.extend_from_slice(b":1\r\n");
    }
    let peak = decoder_peak(&reply);
    assert!(peak <= BUDGET, "reply *2147483647 held {peak} bytes");

    let mut map = b"%2147483647\r\n".to_vec();
    for _ in 0..100 {
        map.extend_from_slice(b"*1000000\r\n");
    }
    let peak = decoder_peak(&map);
    assert!(peak <= BUDGET, "nested huge maps held {peak} bytes");

    let mut bulk = b"$536870912\r\n".to_vec();
    bulk.extend(std::iter::repeat_n(b'x', 4 << 20));
    let peak = decoder_peak(&bulk);
    assert!(peak <= BUDGET, "reply $536870912 held {peak} bytes");
}
