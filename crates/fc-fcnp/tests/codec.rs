//! FCNP's codec: round trips (property tests), every split point of a pipelined stream, each
//! opcode's command, and every refusal.

use bytes::{Bytes, BytesMut};
use fc_fcnp::{
    Body, Flags, FrameError, Limits, Opcode, PACKED_MISSING, Packed, PackedWriter, ReplyShape,
    Request, RequestDecoder, RequestError, RequestHeader, ResponseDecoder, ResponseLimits, Value,
    encode_fatal, encode_request, encode_value_response,
};
use proptest::prelude::*;

fn decode_all(decoder: &RequestDecoder, buf: &mut BytesMut) -> Vec<Request> {
    let mut out = Vec::new();
    while let Some(request) = decoder.decode(buf).expect("valid frames") {
        out.push(request);
    }
    out
}

fn header() -> impl Strategy<Value = RequestHeader> {
    (
        any::<u8>(),
        0u8..0x40,
        any::<u32>(),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(opcode, flags, id, route, ttl_ms)| RequestHeader {
            opcode,
            flags: Flags(flags),
            id,
            route,
            ttl_ms,
        })
}

fn items() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8)
}

fn value() -> impl Strategy<Value = Value> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..24).prop_map(Bytes::from);
    let leaf = prop_oneof![
        Just(Value::Nil),
        bytes().prop_map(Value::Status),
        bytes().prop_map(Value::Error),
        any::<i64>().prop_map(Value::Int),
        bytes().prop_map(Value::Bulk),
        any::<f64>()
            .prop_filter("NaN never equals itself", |d| !d.is_nan())
            .prop_map(Value::Double),
        any::<bool>().prop_map(Value::Bool),
        bytes().prop_map(Value::BigNumber),
        bytes().prop_map(|text| Value::Verbatim {
            format: *b"txt",
            text
        }),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Push),
            proptest::collection::vec((inner.clone(), inner), 0..4).prop_map(Value::Map),
        ]
    })
}

proptest! {
    #[test]
    fn requests_round_trip_at_every_split(
        frames in proptest::collection::vec((header(), items()), 1..5),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut wire = BytesMut::new();
        for (header, items) in &frames {
            encode_request(&mut wire, header, items);
        }
        let decoder = RequestDecoder::default();
        // Arriving in two reads, cut anywhere.
        let at = cut.index(wire.len() + 1);
        let mut buf = BytesMut::from(&wire[..at]);
        let mut got = decode_all(&decoder, &mut buf);
        buf.extend_from_slice(&wire[at..]);
        got.extend(decode_all(&decoder, &mut buf));
        prop_assert!(buf.is_empty());
        prop_assert_eq!(got.len(), frames.len());
        for (request, (header, items)) in got.iter().zip(&frames) {
            let mut expected = *header;
            expected.flags = Flags(
                (header.flags.0 & !(Flags::ROUTE | Flags::TTL))
                    | if header.route.is_some() { Flags::ROUTE } else { 0 }
                    | if header.ttl_ms.is_some() { Flags::TTL } else { 0 },
            );
            prop_assert_eq!(request.header, expected);
            let got_items: Vec<&[u8]> = request.items.iter().map(|b| &b[..]).collect();
            let want_items: Vec<&[u8]> = items.iter().map(|b| &b[..]).collect();
            prop_assert_eq!(got_items, want_items);
        }
    }

    #[test]
    fn values_round_trip(value in value(), id in any::<u32>()) {
        let mut wire = BytesMut::new();
        encode_value_response(&mut wire, id, &value);
        let decoded = ResponseDecoder::default().decode(&mut wire).unwrap().unwrap();
        prop_assert!(wire.is_empty());
        prop_assert_eq!(decoded.id, id);
        prop_assert_eq!(decoded.body, Body::Value(value));
    }

    #[test]
    fn packed_round_trips(values in proptest::collection::vec(
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)), 0..20)
    ) {
        let mut wire = BytesMut::new();
        let mut writer = PackedWriter::begin(&mut wire, 9, values.len());
        for v in &values {
            writer.push(&mut wire, v.as_deref());
        }
        writer.finish(&mut wire);
        let decoded = ResponseDecoder::default().decode(&mut wire).unwrap().unwrap();
        let Body::Packed(packed) = decoded.body else { panic!("not packed") };
        prop_assert_eq!(packed.len(), values.len());
        let got: Vec<Option<Vec<u8>>> = packed.iter().map(|v| v.map(<[u8]>::to_vec)).collect();
        prop_assert_eq!(got, values.clone());
        // The values share one buffer, back to back.
        let joined: Vec<u8> = values.iter().flatten().flatten().copied().collect();
        prop_assert_eq!(&packed.data[..], &joined[..]);
    }

    /// Any bytes at all: a request, `None`, or an error; never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = RequestDecoder::new(Limits::unauthenticated()).decode(&mut buf);
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = ResponseDecoder::default().decode(&mut buf);
        let _ = Value::decode(Bytes::from(bytes.clone()), 8);
        let _ = Packed::decode(Bytes::from(bytes));
    }
}

fn command(
    header: RequestHeader,
    items: &[&[u8]],
) -> Result<(Vec<Bytes>, ReplyShape), RequestError> {
    let mut wire = BytesMut::new();
    encode_request(&mut wire, &header, items);
    RequestDecoder::default()
        .decode(&mut wire)
        .unwrap()
        .unwrap()
        .into_command()
}

fn words(command: &[Bytes]) -> Vec<String> {
    command
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

#[test]
fn each_opcode_is_its_command() {
    let h = RequestHeader::new;
    let delta = (-42i64).to_le_bytes();
    let cases: Vec<(RequestHeader, Vec<&[u8]>, &str, ReplyShape)> = vec![
        (h(Opcode::Get, 1), vec![b"k"], "GET k", ReplyShape::Value),
        (
            h(Opcode::Set, 1),
            vec![b"k", b"v"],
            "SET k v",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Set, 1)
                .with_ttl_ms(1500)
                .with_flags(Flags::XX | Flags::GET),
            vec![b"k", b"v"],
            "SET k v PX 1500 XX GET",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Set, 1).with_flags(Flags::KEEPTTL),
            vec![b"k", b"v"],
            "SET k v KEEPTTL",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Del, 1),
            vec![b"a", b"b"],
            "DEL a b",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Exists, 1),
            vec![b"a"],
            "EXISTS a",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Expire, 1).with_ttl_ms(10).with_flags(Flags::NX),
            vec![b"k"],
            "PEXPIRE k 10 NX",
            ReplyShape::Value,
        ),
        (h(Opcode::Ttl, 1), vec![b"k"], "PTTL k", ReplyShape::Value),
        (
            h(Opcode::Persist, 1),
            vec![b"k"],
            "PERSIST k",
            ReplyShape::Value,
        ),
        (
            h(Opcode::IncrBy, 1),
            vec![b"k", &delta],
            "INCRBY k -42",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Append, 1),
            vec![b"k", b"v"],
            "APPEND k v",
            ReplyShape::Value,
        ),
        (
            h(Opcode::GetDel, 1),
            vec![b"k"],
            "GETDEL k",
            ReplyShape::Value,
        ),
        (
            h(Opcode::MGet, 1),
            vec![b"a", b"b"],
            "MGET a b",
            ReplyShape::Packed,
        ),
        (
            h(Opcode::MSet, 1),
            vec![b"a", b"1", b"b", b"2"],
            "MSET a 1 b 2",
            ReplyShape::Value,
        ),
        (
            h(Opcode::Command, 1).with_route(7),
            vec![b"HSET", b"h", b"f", b"v"],
            "HSET h f v",
            ReplyShape::Value,
        ),
    ];
    for (header, items, want, shape) in cases {
        let (got, got_shape) = command(header, &items).unwrap();
        assert_eq!(words(&got).join(" "), want);
        assert_eq!(got_shape, shape, "{want}");
    }
}

#[test]
fn invalid_requests_are_answered_not_fatal() {
    let h = RequestHeader::new;
    let unknown = RequestHeader {
        opcode: 0x7f,
        ..RequestHeader::default()
    };
    assert_eq!(
        command(unknown, &[b"k"]).unwrap_err().to_string(),
        "ERR unknown FCNP opcode 0x7f"
    );
    assert_eq!(
        command(h(Opcode::Get, 1), &[b"a", b"b"])
            .unwrap_err()
            .to_string(),
        "ERR wrong number of items for FCNP GET: 2"
    );
    assert!(matches!(
        command(h(Opcode::MSet, 1), &[b"a", b"1", b"b"]),
        Err(RequestError::ItemCount { .. })
    ));
    assert!(matches!(
        command(
            h(Opcode::Set, 1).with_flags(Flags::NX | Flags::XX),
            &[b"k", b"v"]
        ),
        Err(RequestError::Flags { .. })
    ));
    assert!(matches!(
        command(
            h(Opcode::Set, 1).with_flags(Flags::KEEPTTL).with_ttl_ms(5),
            &[b"k", b"v"]
        ),
        Err(RequestError::Flags { .. })
    ));
    assert!(matches!(
        command(h(Opcode::Get, 1).with_flags(Flags::NX), &[b"k"]),
        Err(RequestError::Flags { .. })
    ));
    assert!(matches!(
        command(h(Opcode::Get, 1).with_ttl_ms(5), &[b"k"]),
        Err(RequestError::Flags { .. })
    ));
    assert_eq!(
        command(h(Opcode::Expire, 1), &[b"k"])
            .unwrap_err()
            .to_string(),
        "ERR FCNP EXPIRE needs a TTL"
    );
    assert_eq!(
        command(h(Opcode::IncrBy, 1), &[b"k", b"12"])
            .unwrap_err()
            .to_string(),
        "ERR FCNP INCRBY takes an 8-byte little-endian integer"
    );
    assert!(matches!(
        command(h(Opcode::Command, 1), &[]),
        Err(RequestError::ItemCount { .. })
    ));
}

fn raw(head: [u8; 16], rest: &[u8]) -> BytesMut {
    let mut b = BytesMut::from(&head[..]);
    b.extend_from_slice(rest);
    b
}

fn head(opcode: u8, flags: u8, count: u32, body: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0] = 0xFC;
    h[1] = 1;
    h[2] = opcode;
    h[3] = flags;
    h[8..12].copy_from_slice(&count.to_le_bytes());
    h[12..16].copy_from_slice(&body.to_le_bytes());
    h
}

#[test]
fn framing_errors_end_the_stream_before_any_allocation() {
    let d = RequestDecoder::default();
    // A RESP client on an FCNP port is told at its first byte.
    assert_eq!(
        d.decode(&mut BytesMut::from(&b"*"[..])).unwrap_err(),
        FrameError::BadMagic(b'*')
    );
    let mut bad = head(1, 0, 1, 5);
    bad[1] = 2;
    assert_eq!(
        d.decode(&mut raw(bad, &[])).unwrap_err(),
        FrameError::BadVersion(2)
    );
    assert_eq!(
        d.decode(&mut raw(head(1, 0x80, 1, 5), &[])).unwrap_err(),
        FrameError::ReservedFlags(0x80)
    );
    // Refused from the header alone: no body bytes are waited for.
    assert!(matches!(
        d.decode(&mut raw(head(0x20, 0, 1, u32::MAX), &[])),
        Err(FrameError::BodyTooLarge { .. })
    ));
    assert!(matches!(
        d.decode(&mut raw(head(0x20, 0, 1000, 100), &[])),
        Err(FrameError::TooManyItems { .. })
    ));
    let strict = RequestDecoder::new(Limits::unauthenticated());
    assert!(matches!(
        strict.decode(&mut raw(head(0x20, 0, 11, 44), &[])),
        Err(FrameError::TooManyItems {
            count: 11,
            limit: 10
        })
    ));
    // An item longer than the limit.
    let mut item = Vec::new();
    item.extend_from_slice(&(20_000u32).to_le_bytes());
    item.extend_from_slice(&[0u8; 20_000]);
    assert!(matches!(
        strict.decode(&mut raw(head(0x20, 0, 1, 20_004), &item)),
        Err(FrameError::ItemTooLarge { .. })
    ));
    // Items that run past the body, or leave bytes in it.
    let mut short = Vec::new();
    short.extend_from_slice(&9u32.to_le_bytes());
    short.extend_from_slice(b"abc");
    assert!(matches!(
        d.decode(&mut raw(head(1, 0, 1, 7), &short)),
        Err(FrameError::BodyMismatch { .. })
    ));
    let mut long = Vec::new();
    long.extend_from_slice(&1u32.to_le_bytes());
    long.extend_from_slice(b"abc");
    assert!(matches!(
        d.decode(&mut raw(head(1, 0, 1, 7), &long)),
        Err(FrameError::BodyMismatch { .. })
    ));
    // An incomplete frame consumes nothing.
    let mut partial = raw(head(1, 0, 1, 7), b"\x03\0\0");
    assert_eq!(d.decode(&mut partial).unwrap(), None);
    assert_eq!(partial.len(), 19);
}

#[test]
fn responses_refuse_what_they_cannot_be() {
    let d = ResponseDecoder::default();
    let mut wire = BytesMut::new();
    encode_fatal(&mut wire, "FCNP protocol error: bad magic byte 0x2a");
    let fatal = d.decode(&mut wire).unwrap().unwrap();
    assert_eq!(
        fatal.body,
        Body::Fatal("FCNP protocol error: bad magic byte 0x2a".into())
    );
    let mut kind = BytesMut::from(&[0xFC, 1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0][..]);
    assert_eq!(d.decode(&mut kind).unwrap_err(), FrameError::BadKind(9));
    let tight = ResponseDecoder::new(ResponseLimits {
        max_body: 10,
        max_depth: 2,
    });
    let mut big = BytesMut::new();
    encode_value_response(&mut big, 1, &Value::Bulk(Bytes::from(vec![0u8; 64])));
    assert!(matches!(
        tight.decode(&mut big),
        Err(FrameError::BodyTooLarge { .. })
    ));
    // Nesting past the limit.
    let deep = Value::Array(vec![Value::Array(vec![Value::Array(vec![Value::Nil])])]);
    let mut body = BytesMut::new();
    deep.encode(&mut body);
    assert_eq!(
        Value::decode(body.freeze(), 2).unwrap_err(),
        FrameError::TooDeep(2)
    );
    // A count the body cannot hold is refused before allocating it.
    let mut claim = BytesMut::from(&[0x05u8][..]);
    claim.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        Value::decode(claim.freeze(), 8),
        Err(FrameError::BadValue { .. })
    ));
    let mut lens = BytesMut::new();
    lens.extend_from_slice(&2u32.to_le_bytes());
    lens.extend_from_slice(&3u32.to_le_bytes());
    lens.extend_from_slice(&PACKED_MISSING.to_le_bytes());
    lens.extend_from_slice(b"ab");
    assert!(matches!(
        Packed::decode(lens.freeze()),
        Err(FrameError::BadValue { .. })
    ));
}

/// The example bytes of `docs/FCNP.md`, exactly.
#[test]
fn the_documented_example_bytes() {
    let mut wire = BytesMut::new();
    encode_request(
        &mut wire,
        &RequestHeader::new(Opcode::Get, 7),
        &[b"user:42"],
    );
    assert_eq!(
        &wire[..],
        [
            0xfc, 0x01, 0x01, 0x00, 0x07, 0, 0, 0, 0x01, 0, 0, 0, 0x0b, 0, 0, 0, 0x07, 0, 0, 0,
            b'u', b's', b'e', b'r', b':', b'4', b'2'
        ]
    );
    let mut reply = BytesMut::new();
    encode_value_response(&mut reply, 7, &Value::Bulk("ready".into()));
    assert_eq!(
        &reply[..],
        [
            0xfc, 0x01, 0x00, 0x00, 0x07, 0, 0, 0, 0x0a, 0, 0, 0, 0x04, 0x05, 0, 0, 0, b'r', b'e',
            b'a', b'd', b'y'
        ]
    );
}

#[test]
fn decode_command_fills_the_callers_vector() {
    let decoder = RequestDecoder::default();
    let mut wire = BytesMut::new();
    let set = RequestHeader::new(Opcode::Set, 3)
        .with_ttl_ms(250)
        .with_flags(Flags::XX);
    encode_request(&mut wire, &set, &[&b"k"[..], b"v"]);
    encode_request(
        &mut wire,
        &RequestHeader::new(Opcode::Command, 4),
        &[&b"PING"[..]],
    );
    encode_request(
        &mut wire,
        &RequestHeader::new(Opcode::Get, 5),
        &[&b"a"[..], b"b"],
    );
    let mut args = vec![Bytes::from_static(b"left over")];
    let first = decoder
        .decode_command(&mut wire, &mut args)
        .unwrap()
        .unwrap();
    assert_eq!(first.outcome, Ok(ReplyShape::Value));
    assert_eq!(words(&args).join(" "), "SET k v PX 250 XX");
    let second = decoder
        .decode_command(&mut wire, &mut args)
        .unwrap()
        .unwrap();
    assert_eq!(second.header.id, 4);
    assert_eq!(words(&args), ["PING"]);
    let third = decoder
        .decode_command(&mut wire, &mut args)
        .unwrap()
        .unwrap();
    assert!(matches!(third.outcome, Err(RequestError::ItemCount { .. })));
    assert!(args.is_empty(), "a refused request leaves no arguments");
    assert_eq!(decoder.decode_command(&mut wire, &mut args).unwrap(), None);
}
