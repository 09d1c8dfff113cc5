//! Request parser: arbitrary bytes in arbitrary pieces.
//!
//! Asserts, beyond "no panic":
//! - the same commands and the same error come out whole, in the fuzzer's pieces, one byte at a
//!   time, and through `parse_owned`;
//! - every command has 1..=max arguments, each within the bulk (or inline) limit, and the
//!   unauthenticated parser never lets more than 10 arguments or a 16 KiB argument through;
//! - a parsed command re-encoded as multibulk parses back to the same arguments.
#![no_main]

use bytes::BytesMut;
use fc_resp::{Limits, OwnedCommand, RequestParser, encode_command};
use libfuzzer_sys::fuzz_target;

type Outcome = (Vec<Vec<Vec<u8>>>, Option<String>);

fn limits() -> Limits {
    // Small, so inputs of a few KiB reach every limit; the query buffer stays far above any
    // input (whether it trips depends on where reads end, by design).
    Limits {
        max_bulk_len: 512,
        max_multibulk_len: 16,
        max_inline_len: 64,
        max_query_buffer: 1 << 20,
    }
}

fn borrowed(mut parser: RequestParser, input: &[u8], chunk: usize) -> Outcome {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match parser.parse(&buf) {
                Ok(Some(cmd)) => out.push(cmd.args().map(<[u8]>::to_vec).collect()),
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

fn owned(mut parser: RequestParser, input: &[u8], chunk: usize) -> Outcome {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match parser.parse_owned(&mut buf) {
                Ok(Some(OwnedCommand { args })) => out.push(args.iter().map(|a| a.to_vec()).collect()),
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }
    (out, None)
}

fn check_limits(commands: &[Vec<Vec<u8>>], limits: &Limits) {
    for cmd in commands {
        assert!(!cmd.is_empty());
        assert!(cmd.len() as u64 <= limits.max_multibulk_len.max(limits.max_inline_len as u64));
        for arg in cmd {
            assert!(arg.len() as u64 <= limits.max_bulk_len.max(limits.max_inline_len as u64));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, input)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk % 64) + 1;
    let limits = limits();

    let whole = borrowed(RequestParser::new(limits), input, input.len());
    assert_eq!(borrowed(RequestParser::new(limits), input, chunk), whole);
    assert_eq!(borrowed(RequestParser::new(limits), input, 1), whole);
    assert_eq!(owned(RequestParser::new(limits), input, chunk), whole);
    check_limits(&whole.0, &limits);

    // Round trip through the multibulk encoding.
    let mut again = BytesMut::new();
    for cmd in &whole.0 {
        encode_command(&mut again, cmd);
    }
    let big = Limits { max_inline_len: 1 << 16, ..Limits::default() };
    assert_eq!(borrowed(RequestParser::new(big), &again, again.len()), (whole.0.clone(), None));

    // Before authentication nothing larger than Redis's pre-auth limits gets through.
    let pre = Limits::unauthenticated();
    let unauth = borrowed(RequestParser::with_auth_required(limits, pre), input, chunk);
    for cmd in &unauth.0 {
        // Redis limits the count of multibulk arguments only; an inline command is bounded by
        // its line instead.
        let inline_size: usize = cmd.iter().map(|a| a.len() + 1).sum();
        assert!(cmd.len() <= 10 || inline_size <= limits.max_inline_len + 1);
        for arg in cmd {
            assert!(arg.len() <= 16 * 1024);
        }
    }
});
