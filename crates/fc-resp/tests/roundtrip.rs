//! Property tests: anything encoded decodes to itself, whatever the read boundaries (one byte
//! at a time included), and arbitrary bytes parse the same whole or in pieces.
//!
//! Failing cases are printed and saved under `proptest-regressions/`; raise the case count with
//! `PROPTEST_CASES=10000`.

use bytes::{Bytes, BytesMut};
use fc_resp::number::{MAX_DOUBLE_LEN, format_double};
use fc_resp::{
    Encoder, Frame, FrameDecoder, Limits, OwnedCommand, RequestParser, RespVersion, encode_command,
};
use proptest::prelude::*;

fn arg() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 0..24),
        2 => proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'$'), Just(b'*'), Just(0u8)], 0..8),
        1 => proptest::collection::vec(any::<u8>(), 200..2000),
    ]
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(arg(), 1..7)
}

/// Cut points: chunk lengths cycled over the input.
fn chunks() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        Just(vec![1]),
        proptest::collection::vec(1usize..64, 1..8),
        Just(vec![usize::MAX]),
    ]
}

fn pieces<'a>(input: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < input.len() {
        let n = sizes[i % sizes.len()].min(input.len() - at);
        out.push(&input[at..at + n]);
        at += n;
        i += 1;
    }
    out
}

fn parse_borrowed(input: &[u8], sizes: &[usize]) -> Vec<Vec<Vec<u8>>> {
    let mut parser = RequestParser::new(Limits::default());
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces(input, sizes) {
        buf.extend_from_slice(piece);
        while let Some(cmd) = parser.parse(&buf).expect("valid input") {
            out.push(cmd.args().map(<[u8]>::to_vec).collect());
        }
        let n = parser.take_consumed();
        let _ = buf.split_to(n);
    }
    assert!(buf.is_empty(), "everything was consumed");
    out
}

fn parse_owned(input: &[u8], sizes: &[usize]) -> Vec<Vec<Vec<u8>>> {
    let mut parser = RequestParser::new(Limits::default());
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces(input, sizes) {
        buf.extend_from_slice(piece);
        while let Some(OwnedCommand { args }) = parser.parse_owned(&mut buf).expect("valid input") {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
    }
    assert!(buf.is_empty(), "everything was consumed");
    out
}

/// As `parse_owned`, through `parse_into` with one vector reused for every command.
fn parse_into(input: &[u8], sizes: &[usize]) -> Vec<Vec<Vec<u8>>> {
    let mut parser = RequestParser::new(Limits::default());
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut args = vec![bytes::Bytes::from_static(b"left over")];
    for piece in pieces(input, sizes) {
        buf.extend_from_slice(piece);
        while parser.parse_into(&mut buf, &mut args).expect("valid input") {
            out.push(args.iter().map(|a| a.to_vec()).collect());
        }
        assert!(args.is_empty(), "no command: the vector is left empty");
    }
    assert!(buf.is_empty(), "everything was consumed");
    out
}

/// Writes `arg` as one inline token: double-quoted, with `\xHH` for anything unusual.
fn inline_token(arg: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in arg {
        if b.is_ascii_alphanumeric() || b == b' ' || b == b':' {
            out.push(b);
        } else {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
    out.push(b'"');
}

#[derive(Debug, Clone)]
enum Request {
    Multibulk(Vec<Vec<u8>>),
    Inline(Vec<Vec<u8>>),
    Empty,
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        6 => command().prop_map(Request::Multibulk),
        2 => proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..5).prop_map(Request::Inline),
        1 => Just(Request::Empty),
    ]
}

fn text() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..16,
    )
    .prop_map(Bytes::from)
}

fn blob() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from)
}

fn double() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<f64>(),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(f64::NAN),
        2 => (-1_000_000i64..1_000_000).prop_map(|n| n as f64 / 8.0),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    let leaf = prop_oneof![
        text().prop_map(Frame::Simple),
        text().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        blob().prop_map(Frame::Bulk),
        Just(Frame::Null),
        Just(Frame::NullArray),
        any::<bool>().prop_map(Frame::Boolean),
        double().prop_map(Frame::Double),
        ("-?[1-9][0-9]{0,40}").prop_map(|s| Frame::BigNumber(Bytes::from(s))),
        blob().prop_map(Frame::BlobError),
        (prop_oneof![Just(*b"txt"), Just(*b"mkd")], blob())
            .prop_map(|(format, text)| Frame::Verbatim { format, text }),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Frame::Push),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..4).prop_map(Frame::Map),
            (
                proptest::collection::vec((inner.clone(), inner.clone()), 0..3),
                inner
            )
                .prop_map(|(attributes, value)| Frame::Attribute {
                    attributes,
                    value: Box::new(value)
                }),
        ]
    })
}

/// What a RESP3 round trip yields: RESP3 has one null.
fn as_resp3(frame: &Frame) -> Frame {
    map_frame(frame, &|f| match f {
        Frame::NullArray => Some(Frame::Null),
        _ => None,
    })
}

/// What a RESP2 round trip yields: the RESP2 shape of every RESP3 type.
fn as_resp2(frame: &Frame) -> Frame {
    match frame {
        Frame::Map(pairs) => Frame::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| [as_resp2(k), as_resp2(v)])
                .collect(),
        ),
        Frame::Set(items) | Frame::Push(items) | Frame::Array(items) => {
            Frame::Array(items.iter().map(as_resp2).collect())
        }
        Frame::Attribute { value, .. } => as_resp2(value),
        Frame::Boolean(b) => Frame::Integer(i64::from(*b)),
        Frame::Double(d) => {
            let mut buf = [0; MAX_DOUBLE_LEN];
            Frame::Bulk(Bytes::copy_from_slice(format_double(*d, &mut buf)))
        }
        Frame::BigNumber(digits) => Frame::Bulk(digits.clone()),
        Frame::Verbatim { text, .. } => Frame::Bulk(text.clone()),
        Frame::BlobError(text) => Frame::Error(Bytes::from(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
                .collect::<Vec<u8>>(),
        )),
        other => other.clone(),
    }
}

fn map_frame(frame: &Frame, f: &dyn Fn(&Frame) -> Option<Frame>) -> Frame {
    if let Some(mapped) = f(frame) {
        return mapped;
    }
    let pairs = |p: &[(Frame, Frame)]| {
        p.iter()
            .map(|(k, v)| (map_frame(k, f), map_frame(v, f)))
            .collect()
    };
    match frame {
        Frame::Array(items) => Frame::Array(items.iter().map(|i| map_frame(i, f)).collect()),
        Frame::Set(items) => Frame::Set(items.iter().map(|i| map_frame(i, f)).collect()),
        Frame::Push(items) => Frame::Push(items.iter().map(|i| map_frame(i, f)).collect()),
        Frame::Map(p) => Frame::Map(pairs(p)),
        Frame::Attribute { attributes, value } => Frame::Attribute {
            attributes: pairs(attributes),
            value: Box::new(map_frame(value, f)),
        },
        other => other.clone(),
    }
}

fn decode_all(input: &[u8], sizes: &[usize]) -> Vec<Frame> {
    let mut dec = FrameDecoder::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces(input, sizes) {
        buf.extend_from_slice(piece);
        while let Some(frame) = dec.decode(&mut buf).expect("valid reply") {
            out.push(frame);
        }
    }
    assert!(buf.is_empty());
    out
}

/// Runs arbitrary bytes through a parser in pieces: the commands, then the error text if any.
fn outcome(input: &[u8], sizes: &[usize]) -> (Vec<Vec<Vec<u8>>>, Option<String>) {
    let limits = Limits {
        max_inline_len: 100,
        ..Limits::default()
    };
    let mut parser = RequestParser::new(limits);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces(input, sizes) {
        buf.extend_from_slice(piece);
        loop {
            match parser.parse(&buf) {
                Ok(Some(cmd)) => {
                    assert!(!cmd.is_empty());
                    out.push(cmd.args().map(<[u8]>::to_vec).collect());
                }
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string())),
            }
        }
        let n = parser.take_consumed();
        assert!(n <= buf.len());
        let _ = buf.split_to(n);
    }
    (out, None)
}

fn junk() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            4 => Just(b"*".to_vec()),
            4 => Just(b"$".to_vec()),
            6 => Just(b"\r\n".to_vec()),
            2 => Just(b"\r".to_vec()),
            2 => Just(b"\n".to_vec()),
            3 => (0u32..30).prop_map(|n| n.to_string().into_bytes()),
            1 => Just(b"-1".to_vec()),
            1 => Just(b"\"".to_vec()),
            1 => Just(b"'".to_vec()),
            1 => Just(b"\\".to_vec()),
            1 => Just(vec![0u8]),
            1 => Just(b" ".to_vec()),
            3 => proptest::collection::vec(any::<u8>(), 1..8),
            1 => proptest::collection::vec(b'a'..=b'z', 60..140),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pipelined_requests_round_trip(requests in proptest::collection::vec(request(), 1..10), sizes in chunks()) {
        let mut input = BytesMut::new();
        let mut want = Vec::new();
        for request in &requests {
            match request {
                Request::Multibulk(args) => {
                    encode_command(&mut input, args);
                    want.push(args.clone());
                }
                Request::Inline(args) => {
                    let mut line = Vec::new();
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            line.push(b' ');
                        }
                        inline_token(a, &mut line);
                    }
                    line.extend_from_slice(b"\r\n");
                    input.extend_from_slice(&line);
                    want.push(args.clone());
                }
                Request::Empty => input.extend_from_slice(b"\r\n*0\r\n"),
            }
        }
        prop_assert_eq!(parse_borrowed(&input, &sizes), want.clone());
        prop_assert_eq!(parse_into(&input, &sizes), want.clone());
        prop_assert_eq!(parse_owned(&input, &sizes), want);
    }

    #[test]
    fn replies_round_trip_in_resp3(frames in proptest::collection::vec(frame(), 1..4), sizes in chunks()) {
        let mut buf = BytesMut::new();
        for f in &frames {
            Encoder::new(&mut buf, RespVersion::Resp3).frame(f);
        }
        let want: Vec<Frame> = frames.iter().map(as_resp3).collect();
        prop_assert_eq!(decode_all(&buf, &sizes), want);
    }

    #[test]
    fn replies_take_their_resp2_shape(frames in proptest::collection::vec(frame(), 1..4), sizes in chunks()) {
        let mut buf = BytesMut::new();
        for f in &frames {
            Encoder::new(&mut buf, RespVersion::Resp2).frame(f);
        }
        let want: Vec<Frame> = frames.iter().map(as_resp2).collect();
        prop_assert_eq!(decode_all(&buf, &sizes), want);
    }

    #[test]
    fn arbitrary_bytes_parse_the_same_in_any_pieces(input in junk(), sizes in chunks()) {
        let whole = outcome(&input, &[usize::MAX]);
        prop_assert_eq!(outcome(&input, &sizes), whole.clone());
        prop_assert_eq!(outcome(&input, &[1]), whole);
    }

    #[test]
    fn arbitrary_bytes_never_break_the_reply_decoder(input in junk(), sizes in chunks()) {
        let run = |sizes: &[usize]| {
            let mut dec = FrameDecoder::default();
            let mut buf = BytesMut::new();
            let mut frames = Vec::new();
            for piece in pieces(&input, sizes) {
                buf.extend_from_slice(piece);
                loop {
                    match dec.decode(&mut buf) {
                        Ok(Some(f)) => frames.push(f),
                        Ok(None) => break,
                        Err(e) => return (frames, Some(e)),
                    }
                }
            }
            (frames, None)
        };
        let whole = run(&[usize::MAX]);
        prop_assert_eq!(run(&sizes), whole.clone());
        // Whatever decoded re-encodes (RESP3) and decodes to itself.
        let mut buf = BytesMut::new();
        for f in &whole.0 {
            Encoder::new(&mut buf, RespVersion::Resp3).frame(f);
        }
        let again = decode_all(&buf, &[usize::MAX]);
        let want: Vec<Frame> = whole.0.iter().map(as_resp3).collect();
        prop_assert_eq!(again, want);
    }
}
