//! Redis's protocol test cases (`tests/unit/protocol.tcl` and the README's abuse list) with the
//! outcome Redis gives: the commands it executes and the error it replies with before closing.

use bytes::BytesMut;
use fc_resp::{Limits, ProtocolError, RequestParser};

#[derive(Debug, PartialEq)]
enum Outcome {
    /// Every complete command, then the error (if any) that ends the connection.
    Commands(Vec<Vec<Vec<u8>>>, Option<String>),
}

/// Feeds `input` whole, then again one byte at a time; both must agree.
fn run(parser: &RequestParser, input: &[u8]) -> Outcome {
    let whole = run_chunked(parser.clone(), input, input.len().max(1));
    let bytewise = run_chunked(parser.clone(), input, 1);
    assert_eq!(
        whole,
        bytewise,
        "whole vs byte-at-a-time for {}",
        input.escape_ascii()
    );
    whole
}

fn run_chunked(mut parser: RequestParser, input: &[u8], chunk: usize) -> Outcome {
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            match parser.parse(&buf) {
                Ok(Some(cmd)) => commands.push(cmd.args().map(<[u8]>::to_vec).collect()),
                Ok(None) => break,
                Err(e) => {
                    let mut reply = BytesMut::new();
                    e.write_reply(&mut reply);
                    return Outcome::Commands(
                        commands,
                        Some(String::from_utf8_lossy(&reply).into_owned()),
                    );
                }
            }
        }
        let n = parser.take_consumed();
        let _ = buf.split_to(n);
    }
    Outcome::Commands(commands, None)
}

fn cmds(list: &[&[&str]]) -> Vec<Vec<Vec<u8>>> {
    list.iter()
        .map(|c| c.iter().map(|a| a.as_bytes().to_vec()).collect())
        .collect()
}

fn ok(list: &[&[&str]]) -> Outcome {
    Outcome::Commands(cmds(list), None)
}

fn err(list: &[&[&str]], text: &str) -> Outcome {
    Outcome::Commands(cmds(list), Some(format!("-ERR {text}\r\n")))
}

fn parser() -> RequestParser {
    RequestParser::new(Limits::default())
}

#[test]
fn handle_an_empty_query() {
    assert_eq!(run(&parser(), b"\r\nPING\r\n"), ok(&[&["PING"]]));
    assert_eq!(run(&parser(), b"\n\n  \r\n"), ok(&[]));
}

#[test]
fn negative_and_zero_multibulk_lengths_are_skipped() {
    assert_eq!(run(&parser(), b"*-10\r\nPING\r\n"), ok(&[&["PING"]]));
    assert_eq!(
        run(&parser(), b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"),
        ok(&[&["PING"]])
    );
}

#[test]
fn out_of_range_multibulk_length() {
    let want = err(&[], "Protocol error: invalid multibulk length");
    assert_eq!(run(&parser(), b"*3000000000\r\n"), want);
    assert_eq!(run(&parser(), b"*2147483648\r\n"), want);
    assert_eq!(run(&parser(), b"*4294967295\r\n"), want);
    assert_eq!(run(&parser(), b"*99999999999999999999\r\n"), want);
    assert_eq!(run(&parser(), b"*blabla\r\n"), want);
    assert_eq!(run(&parser(), b"*+1\r\n"), want);
    assert_eq!(run(&parser(), b"*01\r\n"), want);
    assert_eq!(run(&parser(), b"*\r\n"), want);
}

#[test]
fn wrong_multibulk_payload_header() {
    assert_eq!(
        run(&parser(), b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n"),
        err(&[], "Protocol error: expected '$', got 'f'")
    );
}

#[test]
fn negative_multibulk_payload_length() {
    assert_eq!(
        run(&parser(), b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n"),
        err(&[], "Protocol error: invalid bulk length")
    );
}

#[test]
fn out_of_range_multibulk_payload_length() {
    assert_eq!(
        run(&parser(), b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n"),
        err(&[], "Protocol error: invalid bulk length")
    );
}

#[test]
fn non_number_multibulk_payload_length() {
    assert_eq!(
        run(&parser(), b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n"),
        err(&[], "Protocol error: invalid bulk length")
    );
}

#[test]
fn multibulk_request_not_followed_by_bulk_arguments() {
    assert_eq!(
        run(&parser(), b"*1\r\nfoo\r\n"),
        err(&[], "Protocol error: expected '$', got 'f'")
    );
    // Redis waits for the end of the line before it judges it.
    assert_eq!(run(&parser(), b"*1\r\nfoo"), ok(&[]));
}

#[test]
fn unbalanced_number_of_quotes() {
    assert_eq!(
        run(
            &parser(),
            b"set \"\"\"test-key\"\"\" test-value\r\nping\r\n"
        ),
        err(&[], "Protocol error: unbalanced quotes in request")
    );
}

/// Redis's "protocol desync regression" tests: a NUL, then junk that never ends a line (the
/// Tcl test writes the literal word `payload` over and over), must end in a protocol error once
/// 64 KiB are pending, not buffer forever.
#[test]
fn protocol_desync_regressions() {
    for (seq, text) in [
        (&b"\x00"[..], "Protocol error: too big inline request"),
        (b"*\x00", "Protocol error: too big mbulk count string"),
        (b"$\x00", "Protocol error: too big inline request"),
    ] {
        let mut input = seq.to_vec();
        while input.len() < 70 * 1024 {
            input.extend_from_slice(b"payload");
        }
        assert_eq!(
            run(&parser(), &input),
            err(&[], text),
            "{}",
            seq.escape_ascii()
        );
    }
    // NUL bytes and then long junk *lines*: a line never ends after a NUL (C string semantics,
    // as Redis's strchr), so these also end in the inline limit instead of executing junk.
    let mut input = b"\x00".to_vec();
    while input.len() < 70 * 1024 {
        input.extend_from_slice(&[b'A'; 1024]);
        input.push(b'\n');
    }
    assert_eq!(
        run(&parser(), &input),
        err(&[], "Protocol error: too big inline request")
    );
    // Inside a multibulk request, a length line that never ends.
    let mut input = b"*2\r\n$3\r\nGET\r\n$".to_vec();
    input.extend(std::iter::repeat_n(b'1', 70 * 1024));
    assert_eq!(
        run(&parser(), &input),
        err(&[], "Protocol error: too big bulk count string")
    );
}

#[test]
fn too_big_inline_request() {
    let mut input = b"SET k ".to_vec();
    input.extend(std::iter::repeat_n(b'v', 64 * 1024));
    input.extend_from_slice(b"\r\n");
    assert_eq!(
        run(&parser(), &input),
        err(&[], "Protocol error: too big inline request")
    );
    // Exactly at the limit is fine.
    let mut input = b"E ".to_vec();
    input.extend(std::iter::repeat_n(b'v', 64 * 1024 - 2));
    input.extend_from_slice(b"\r\n");
    let Outcome::Commands(cmds, None) = run(&parser(), &input) else {
        panic!("a 64 KiB inline line is allowed");
    };
    assert_eq!(cmds[0][1].len(), 64 * 1024 - 2);
}

#[test]
fn a_bulk_claiming_512_mib_waits_without_error() {
    let mut input = b"*2\r\n$3\r\nSET\r\n$536870912\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 100_000));
    assert_eq!(run(&parser(), &input), ok(&[]));
    assert_eq!(
        run(&parser(), b"*2\r\n$3\r\nSET\r\n$536870913\r\n"),
        err(&[], "Protocol error: invalid bulk length")
    );
}

#[test]
fn unauthenticated_limits() {
    let p = RequestParser::with_auth_required(Limits::default(), Limits::unauthenticated());
    let mut eleven = b"*11\r\n".to_vec();
    for _ in 0..11 {
        eleven.extend_from_slice(b"$1\r\na\r\n");
    }
    assert_eq!(
        run(&p, &eleven),
        err(&[], "Protocol error: unauthenticated multibulk length")
    );
    assert_eq!(
        run(&p, b"*2\r\n$4\r\nAUTH\r\n$16385\r\n"),
        err(&[], "Protocol error: unauthenticated bulk length")
    );
    // The regular limits come first, with the regular text.
    assert_eq!(
        run(&p, b"*3000000000\r\n"),
        err(&[], "Protocol error: invalid multibulk length")
    );
    assert_eq!(
        run(&p, b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"),
        ok(&[&["AUTH", "pw"]])
    );
    let mut p = p;
    p.authenticate();
    let Outcome::Commands(cmds, None) = run(&p, &eleven) else {
        panic!("authenticated clients may send 11 arguments");
    };
    assert_eq!(cmds.len(), 1);
}

#[test]
fn query_buffer_limit_closes_without_reply() {
    let limits = Limits {
        max_query_buffer: 1000,
        ..Limits::default()
    };
    let mut input = b"*2\r\n$3\r\nSET\r\n$5000\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 2000));
    let mut p = RequestParser::new(limits);
    let e = p.parse(&input).unwrap_err();
    assert!(
        matches!(e, ProtocolError::QueryBufferLimit { limit: 1000, .. }),
        "{e:?}"
    );
    let mut reply = BytesMut::new();
    e.write_reply(&mut reply);
    assert!(reply.is_empty());
    // Pre-authentication limits apply on top (Redis: 1 MiB; here 100 bytes to reach it).
    let pre = Limits {
        max_query_buffer: 100,
        ..Limits::unauthenticated()
    };
    let mut p = RequestParser::with_auth_required(Limits::default(), pre);
    let mut input = b"*2\r\n$4\r\nAUTH\r\n$1000\r\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 200));
    assert!(matches!(
        p.parse(&input),
        Err(ProtocolError::QueryBufferLimit { limit: 100, .. })
    ));
    p.authenticate();
    p.reset();
    assert!(matches!(p.parse(&input), Ok(None)));
}

#[test]
fn redis_skips_the_bytes_after_an_argument_without_checking_them() {
    // Redis reads `bulklen + 2` bytes and never looks at the last two.
    assert_eq!(run(&parser(), b"*1\r\n$4\r\nPINGxx"), ok(&[&["PING"]]));
    assert_eq!(run(&parser(), b"*1\r\n$4\r\nPING\r"), ok(&[]));
}

#[test]
fn inline_commands() {
    assert_eq!(
        run(&parser(), b"PING\r\nset k \"a b\\x21\"\nGET\t'k'\r\n"),
        ok(&[&["PING"], &["set", "k", "a b!"], &["GET", "k"]])
    );
}

#[test]
fn expected_dollar_with_unprintable_bytes() {
    let mut reply = BytesMut::new();
    ProtocolError::ExpectedDollar(b'\r').write_reply(&mut reply);
    assert_eq!(
        &reply[..],
        b"-ERR Protocol error: expected '$', got ' '\r\n"
    );
    assert_eq!(
        run(&parser(), b"*1\r\n\xff\r\n"),
        Outcome::Commands(
            vec![],
            Some("-ERR Protocol error: expected '$', got '\u{fffd}'\r\n".into())
        )
    );
}
