//! Golden bytes for every reply shape in RESP2 and RESP3, and the decoder reading them back.

use bytes::{Bytes, BytesMut};
use fc_resp::{DecodeLimits, Encoder, Frame, FrameDecoder, ProtocolError, RespVersion};

fn enc(version: RespVersion, write: impl FnOnce(&mut Encoder<'_>)) -> Vec<u8> {
    let mut buf = BytesMut::new();
    write(&mut Encoder::new(&mut buf, version));
    buf.to_vec()
}

fn both(write: impl Fn(&mut Encoder<'_>)) -> (Vec<u8>, Vec<u8>) {
    (
        enc(RespVersion::Resp2, &write),
        enc(RespVersion::Resp3, &write),
    )
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn scalar_shapes() {
    assert_eq!(both(|e| e.ok()), (b("+OK\r\n"), b("+OK\r\n")));
    assert_eq!(
        both(|e| e.simple(b"PONG")),
        (b("+PONG\r\n"), b("+PONG\r\n"))
    );
    assert_eq!(
        both(|e| e.error(b"ERR unknown command 'x'")),
        (
            b("-ERR unknown command 'x'\r\n"),
            b("-ERR unknown command 'x'\r\n")
        )
    );
    assert_eq!(both(|e| e.integer(-42)), (b(":-42\r\n"), b(":-42\r\n")));
    assert_eq!(
        both(|e| e.integer(i64::MIN)),
        (
            b(":-9223372036854775808\r\n"),
            b(":-9223372036854775808\r\n")
        )
    );
    assert_eq!(
        both(|e| e.bulk(b"hello")),
        (b("$5\r\nhello\r\n"), b("$5\r\nhello\r\n"))
    );
    assert_eq!(both(|e| e.bulk(b"")), (b("$0\r\n\r\n"), b("$0\r\n\r\n")));
    assert_eq!(
        both(|e| e.bulk_integer(1234)),
        (b("$4\r\n1234\r\n"), b("$4\r\n1234\r\n"))
    );
    assert_eq!(both(|e| e.null()), (b("$-1\r\n"), b("_\r\n")));
    assert_eq!(both(|e| e.null_array()), (b("*-1\r\n"), b("_\r\n")));
    assert_eq!(both(|e| e.double(1.5)), (b("$3\r\n1.5\r\n"), b(",1.5\r\n")));
    assert_eq!(
        both(|e| e.double(f64::INFINITY)),
        (b("$3\r\ninf\r\n"), b(",inf\r\n"))
    );
    assert_eq!(
        both(|e| e.double(f64::NEG_INFINITY)),
        (b("$4\r\n-inf\r\n"), b(",-inf\r\n"))
    );
    assert_eq!(both(|e| e.boolean(true)), (b(":1\r\n"), b("#t\r\n")));
    assert_eq!(both(|e| e.boolean(false)), (b(":0\r\n"), b("#f\r\n")));
    assert_eq!(
        both(|e| e.big_number(b"3492890328409238509324850943850943825024385")),
        (
            b("$43\r\n3492890328409238509324850943850943825024385\r\n"),
            b("(3492890328409238509324850943850943825024385\r\n")
        )
    );
    assert_eq!(
        both(|e| e.verbatim(*b"txt", b"Some string")),
        (b("$11\r\nSome string\r\n"), b("=15\r\ntxt:Some string\r\n"))
    );
    assert_eq!(
        both(|e| e.blob_error(b"SYNTAX invalid syntax")),
        (
            b("-SYNTAX invalid syntax\r\n"),
            b("!21\r\nSYNTAX invalid syntax\r\n")
        )
    );
}

#[test]
fn status_and_error_lines_cannot_break_the_stream() {
    assert_eq!(
        both(|e| e.error(b"ERR bad\r\n+OK")),
        (b("-ERR bad  +OK\r\n"), b("-ERR bad  +OK\r\n"))
    );
    assert_eq!(both(|e| e.simple(b"a\nb")), (b("+a b\r\n"), b("+a b\r\n")));
}

#[test]
fn aggregate_shapes() {
    assert_eq!(both(|e| e.array_len(2)), (b("*2\r\n"), b("*2\r\n")));
    assert_eq!(both(|e| e.map_len(3)), (b("*6\r\n"), b("%3\r\n")));
    assert_eq!(both(|e| e.set_len(2)), (b("*2\r\n"), b("~2\r\n")));
    assert_eq!(both(|e| e.push_len(3)), (b("*3\r\n"), b(">3\r\n")));
    // HELLO's reply: a map in RESP3, a flat array in RESP2.
    let hello = Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("fast-cache")),
        (Frame::bulk("proto"), Frame::Integer(3)),
        (Frame::bulk("modules"), Frame::Array(vec![])),
    ]);
    assert_eq!(
        both(|e| e.frame(&hello)),
        (
            b(
                "*6\r\n$6\r\nserver\r\n$10\r\nfast-cache\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n"
            ),
            b(
                "%3\r\n$6\r\nserver\r\n$10\r\nfast-cache\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n"
            )
        )
    );
    let attr = Frame::Attribute {
        attributes: vec![(Frame::simple("ttl"), Frame::Integer(10))],
        value: Box::new(Frame::Set(vec![Frame::Boolean(true), Frame::Double(0.5)])),
    };
    assert_eq!(
        both(|e| e.frame(&attr)),
        (
            b("*2\r\n:1\r\n$3\r\n0.5\r\n"),
            b("|1\r\n+ttl\r\n:10\r\n~2\r\n#t\r\n,0.5\r\n")
        )
    );
    let push = Frame::Push(vec![
        Frame::bulk("message"),
        Frame::bulk("ch"),
        Frame::bulk("hi"),
    ]);
    assert_eq!(
        both(|e| e.frame(&push)),
        (
            b("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"),
            b(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n")
        )
    );
}

fn decode(input: &[u8]) -> Result<Option<Frame>, ProtocolError> {
    FrameDecoder::default().decode(&mut BytesMut::from(input))
}

#[test]
fn decodes_every_type() {
    let cases: Vec<(&[u8], Frame)> = vec![
        (b"+OK\r\n", Frame::simple("OK")),
        (b"-ERR x\r\n", Frame::error("ERR x")),
        (b":-7\r\n", Frame::Integer(-7)),
        (
            b"$3\r\na\r\n\r\n",
            Frame::bulk(Bytes::from_static(b"a\r\n")),
        ),
        (b"$-1\r\n", Frame::Null),
        (b"*-1\r\n", Frame::NullArray),
        (b"_\r\n", Frame::Null),
        (b"#t\r\n", Frame::Boolean(true)),
        (b"#f\r\n", Frame::Boolean(false)),
        (b",1.23\r\n", Frame::Double(1.23)),
        (b",10\r\n", Frame::Double(10.0)),
        (b",-inf\r\n", Frame::Double(f64::NEG_INFINITY)),
        (b",nan\r\n", Frame::Double(f64::NAN)),
        (b",1e+100\r\n", Frame::Double(1e100)),
        (b"(-123\r\n", Frame::BigNumber(Bytes::from_static(b"-123"))),
        (
            b"!3\r\nERR\r\n",
            Frame::BlobError(Bytes::from_static(b"ERR")),
        ),
        (
            b"=8\r\nmkd:# hi\r\n",
            Frame::Verbatim {
                format: *b"mkd",
                text: Bytes::from_static(b"# hi"),
            },
        ),
        (b"*0\r\n", Frame::Array(vec![])),
        (
            b"*2\r\n:1\r\n*1\r\n$0\r\n\r\n",
            Frame::Array(vec![Frame::Integer(1), Frame::Array(vec![Frame::bulk("")])]),
        ),
        (b"~1\r\n+a\r\n", Frame::Set(vec![Frame::simple("a")])),
        (b">1\r\n+a\r\n", Frame::Push(vec![Frame::simple("a")])),
        (
            b"%1\r\n+k\r\n:1\r\n",
            Frame::Map(vec![(Frame::simple("k"), Frame::Integer(1))]),
        ),
        (
            b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
            Frame::Attribute {
                attributes: vec![(Frame::simple("ttl"), Frame::Integer(3))],
                value: Box::new(Frame::bulk("v")),
            },
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            decode(input).unwrap(),
            Some(want.clone()),
            "{}",
            input.escape_ascii()
        );
        // Every proper prefix is incomplete, never an error.
        for cut in 0..input.len() {
            assert_eq!(
                decode(&input[..cut]).unwrap(),
                None,
                "{}",
                input[..cut].escape_ascii()
            );
        }
    }
}

#[test]
fn rejects_malformed_replies() {
    for input in [
        &b"?3\r\n"[..],
        b":12a\r\n",
        b":\r\n",
        b"#x\r\n",
        b",abc\r\n",
        b"(12x\r\n",
        b"_x\r\n",
        b"$-2\r\n",
        b"$3\r\nabcXY",
        b"=3\r\ntxt\r\n",
        b"*-2\r\n",
        b"%-1\r\n",
        b"+OK\rX",
        b"$?\r\n",
        b"*?\r\n",
    ] {
        assert!(decode(input).is_err(), "{}", input.escape_ascii());
    }
}

#[test]
fn reply_limits() {
    let limits = DecodeLimits {
        max_bulk_len: 10,
        max_aggregate_len: 3,
        max_line_len: 8,
        max_depth: 2,
    };
    let d = |input: &[u8]| FrameDecoder::new(limits).decode(&mut BytesMut::from(input));
    assert!(matches!(
        d(b"$11\r\n"),
        Err(ProtocolError::StringTooLong { len: 11, limit: 10 })
    ));
    assert!(matches!(
        d(b"*4\r\n"),
        Err(ProtocolError::AggregateTooLong { len: 4, limit: 3 })
    ));
    assert!(matches!(
        d(b"+123456789"),
        Err(ProtocolError::LineTooLong { limit: 8 })
    ));
    // The same error whatever the read boundaries (the fuzzer found one that differed).
    let mut dec = FrameDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut err = None;
    for &byte in b"+1234567890123" {
        buf.extend_from_slice(&[byte]);
        if let Err(e) = dec.decode(&mut buf) {
            err = Some(e);
            break;
        }
    }
    assert_eq!(err, Some(ProtocolError::LineTooLong { limit: 8 }));
    assert!(matches!(
        d(b"*1\r\n*1\r\n*1\r\n"),
        Err(ProtocolError::TooDeep(2))
    ));
    assert!(matches!(d(b"*1\r\n*1\r\n:1\r\n"), Ok(Some(_))));
    // A chain of attributes nests like any aggregate.
    assert!(matches!(
        d(b"|1\r\n+a\r\n+b\r\n|1\r\n+a\r\n+b\r\n|1\r\n"),
        Err(ProtocolError::TooDeep(2))
    ));
    // The claimed count of `*2147483647` does not allocate (see tests/memory.rs): it waits.
    assert!(matches!(
        FrameDecoder::default().decode(&mut BytesMut::from(&b"*2147483647\r\n:1\r\n"[..])),
        Ok(None)
    ));
}

#[test]
fn decoding_resumes_across_reads_and_splits_off_each_reply() {
    let mut dec = FrameDecoder::default();
    let mut buf = BytesMut::new();
    let input = b"*3\r\n$5\r\nhello\r\n:1\r\n%1\r\n+a\r\n#t\r\n+NEXT\r\n";
    let mut got = Vec::new();
    for &byte in input {
        buf.extend_from_slice(&[byte]);
        while let Some(frame) = dec.decode(&mut buf).unwrap() {
            got.push(frame);
        }
    }
    assert_eq!(
        got,
        vec![
            Frame::Array(vec![
                Frame::bulk("hello"),
                Frame::Integer(1),
                Frame::Map(vec![(Frame::simple("a"), Frame::Boolean(true))]),
            ]),
            Frame::simple("NEXT"),
        ]
    );
    assert!(buf.is_empty());
}

#[test]
fn replies_with_more_elements_than_the_record_holds() {
    let n = fc_resp::MAX_TOKENS * 2 + 7;
    let want = Frame::Array(
        (0..n)
            .map(|i| Frame::Array(vec![Frame::Integer(i as i64), Frame::bulk(i.to_string())]))
            .collect(),
    );
    let mut input = BytesMut::new();
    Encoder::new(&mut input, RespVersion::Resp3).frame(&want);
    input.extend_from_slice(b"+after\r\n");
    for chunk in [input.len(), 1000, 7] {
        let mut dec = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for piece in input.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(frame) = dec.decode(&mut buf).unwrap() {
                got.push(frame);
            }
        }
        assert_eq!(
            got,
            vec![want.clone(), Frame::simple("after")],
            "chunk {chunk}"
        );
    }
}
