//! Parse and encode throughput of fc-resp, with the `redis-protocol` crate (6.0, its fastest
//! zero-copy entry points) measured in the same run as the reference.
//!
//! - `parse_*`: a read buffer holding 1000 pipelined commands (`GET key:<12 digits>`, or `SET`
//!   of the same keys with 64-byte values), parsed to the end. fc's borrowed `parse` is what the
//!   server runs; `parse_owned` splits `Bytes` per argument (for commands that hop threads).
//!   `redis-protocol`'s `decode_range` yields offsets without copying; `decode_bytes_mut` splits
//!   `Bytes`.
//! - `encode_bulk_*`: 1000 bulk replies of 64 B or 4 KiB appended to a reused buffer.
//! - `decode_reply_mget`: an `MGET` reply of 100 × 64-byte values.
//!
//! Run: `cargo bench -p fc-resp --bench codec` (divan prints medians; bytes/s and items/s are
//! per core, one thread).

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use divan::Bencher;
use divan::counter::{BytesCount, ItemsCount};
use fc_resp::{Encoder, FrameDecoder, Limits, RequestParser, RespVersion, encode_command};
use redis_protocol::resp2::{decode as rp_decode, encode as rp_encode, types::BorrowedFrame};

const COMMANDS: usize = 1000;

fn main() {
    divan::main();
}

fn pipeline(set: bool) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let value = [b'v'; 64];
    for i in 0..COMMANDS {
        let key = format!("key:{i:012}");
        if set {
            encode_command(&mut buf, &[&b"SET"[..], key.as_bytes(), &value]);
        } else {
            encode_command(&mut buf, &[&b"GET"[..], key.as_bytes()]);
        }
    }
    buf.to_vec()
}

fn fc_parse(bencher: Bencher<'_, '_>, input: &[u8]) {
    let mut parser = RequestParser::new(Limits::default());
    bencher
        .counter(BytesCount::new(input.len()))
        .counter(ItemsCount::new(COMMANDS))
        .bench_local(|| {
            let mut args = 0;
            while let Some(cmd) = parser.parse(black_box(input)).unwrap() {
                args += cmd.len();
                black_box(cmd.arg(1));
            }
            parser.take_consumed();
            args
        });
}

fn fc_parse_owned(bencher: Bencher<'_, '_>, input: &[u8]) {
    let mut parser = RequestParser::new(Limits::default());
    bencher
        .counter(BytesCount::new(input.len()))
        .counter(ItemsCount::new(COMMANDS))
        .with_inputs(|| BytesMut::from(input))
        .bench_local_values(|mut buf| {
            let mut n = 0;
            while let Some(cmd) = parser.parse_owned(&mut buf).unwrap() {
                n += cmd.args.len();
                black_box(cmd);
            }
            n
        });
}

fn rp_parse_range(bencher: Bencher<'_, '_>, input: &[u8]) {
    bencher
        .counter(BytesCount::new(input.len()))
        .counter(ItemsCount::new(COMMANDS))
        .bench_local(|| {
            let mut at = 0;
            let mut n = 0;
            while let Some((frame, used)) =
                rp_decode::decode_range(black_box(&input[at..])).unwrap()
            {
                black_box(&frame);
                at += used;
                n += 1;
            }
            n
        });
}

fn rp_parse_bytes_mut(bencher: Bencher<'_, '_>, input: &[u8]) {
    bencher
        .counter(BytesCount::new(input.len()))
        .counter(ItemsCount::new(COMMANDS))
        .with_inputs(|| BytesMut::from(input))
        .bench_local_values(|mut buf| {
            let mut n = 0;
            while let Some((frame, _, _)) = rp_decode::decode_bytes_mut(&mut buf).unwrap() {
                black_box(frame);
                n += 1;
            }
            n
        });
}

#[divan::bench]
fn parse_get_fc(bencher: Bencher<'_, '_>) {
    fc_parse(bencher, &pipeline(false));
}

#[divan::bench]
fn parse_get_fc_owned(bencher: Bencher<'_, '_>) {
    fc_parse_owned(bencher, &pipeline(false));
}

#[divan::bench]
fn parse_get_redis_protocol_range(bencher: Bencher<'_, '_>) {
    rp_parse_range(bencher, &pipeline(false));
}

#[divan::bench]
fn parse_get_redis_protocol_bytes_mut(bencher: Bencher<'_, '_>) {
    rp_parse_bytes_mut(bencher, &pipeline(false));
}

#[divan::bench]
fn parse_set64_fc(bencher: Bencher<'_, '_>) {
    fc_parse(bencher, &pipeline(true));
}

#[divan::bench]
fn parse_set64_fc_owned(bencher: Bencher<'_, '_>) {
    fc_parse_owned(bencher, &pipeline(true));
}

#[divan::bench]
fn parse_set64_redis_protocol_range(bencher: Bencher<'_, '_>) {
    rp_parse_range(bencher, &pipeline(true));
}

#[divan::bench]
fn parse_set64_redis_protocol_bytes_mut(bencher: Bencher<'_, '_>) {
    rp_parse_bytes_mut(bencher, &pipeline(true));
}

const SIZES: [usize; 2] = [64, 4096];

#[divan::bench(consts = SIZES)]
fn encode_bulk_fc<const N: usize>(bencher: Bencher<'_, '_>) {
    let value = vec![b'v'; N];
    let mut out = BytesMut::with_capacity(COMMANDS * (N + 16));
    bencher
        .counter(BytesCount::new(COMMANDS * N))
        .counter(ItemsCount::new(COMMANDS))
        .bench_local(|| {
            out.clear();
            let mut enc = Encoder::new(&mut out, RespVersion::Resp2);
            for _ in 0..COMMANDS {
                enc.bulk(black_box(&value));
            }
            out.len()
        });
}

#[divan::bench(consts = SIZES)]
fn encode_bulk_redis_protocol<const N: usize>(bencher: Bencher<'_, '_>) {
    let value = vec![b'v'; N];
    let mut out = BytesMut::with_capacity(COMMANDS * (N + 16));
    bencher
        .counter(BytesCount::new(COMMANDS * N))
        .counter(ItemsCount::new(COMMANDS))
        .bench_local(|| {
            out.clear();
            for _ in 0..COMMANDS {
                let frame = BorrowedFrame::BulkString(black_box(&value));
                rp_encode::extend_encode_borrowed(&mut out, &frame, false).unwrap();
            }
            out.len()
        });
}

fn mget_reply() -> Bytes {
    let mut out = BytesMut::new();
    let mut enc = Encoder::new(&mut out, RespVersion::Resp2);
    enc.array_len(100);
    for _ in 0..100 {
        enc.bulk(&[b'v'; 64]);
    }
    out.freeze()
}

#[divan::bench]
fn decode_reply_mget_fc(bencher: Bencher<'_, '_>) {
    let reply = mget_reply();
    let mut decoder = FrameDecoder::default();
    bencher
        .counter(BytesCount::new(reply.len()))
        .bench_local(|| decoder.decode_bytes(black_box(&reply)).unwrap());
}

#[divan::bench]
fn decode_reply_mget_redis_protocol(bencher: Bencher<'_, '_>) {
    let reply = mget_reply();
    bencher
        .counter(BytesCount::new(reply.len()))
        .bench_local(|| rp_decode::decode_bytes(black_box(&reply)).unwrap());
}
