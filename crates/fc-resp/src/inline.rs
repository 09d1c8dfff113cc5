//! Inline requests (`PING\r\n`, `SET k "a b"\r\n`): the line split as Redis's `sdssplitargs`.
//!
//! Tokens are separated by blanks (space, `\t`, `\n`, `\r`, `\v`, `\f`). A `"` starts a quoted
//! part where `\xHH`, `\n`, `\r`, `\t`, `\b`, `\a` and `\<c>` are escapes; a `'` starts a quoted
//! part where only `\'` is an escape. A closing quote must be followed by a blank or the end of
//! the line, and every quote must close; otherwise the request is rejected with
//! [`ProtocolError::UnbalancedQuotes`].

use crate::ProtocolError;
use crate::request::Span;

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits `line` into arguments appended to `out`; their spans in `out` are pushed to `spans`. The end of `line` plays the part of C's terminating NUL.
pub(crate) fn split_args(
    line: &[u8],
    out: &mut Vec<u8>,
    spans: &mut Vec<Span>,
) -> Result<(), ProtocolError> {
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(());
        }
        let start = out.len();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(p);
            if in_double {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && let (Some(hi), Some(lo)) = (hex_value(at(p + 2)), hex_value(at(p + 3)))
                {
                    out.push(hi * 16 + lo);
                    p += 3;
                } else if c == b'\\' && p + 1 < line.len() {
                    p += 1;
                    out.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if p + 1 < line.len() && !is_space(line[p + 1]) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else if p >= line.len() {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    out.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    out.push(b'\'');
                } else if c == b'\'' {
                    if p + 1 < line.len() && !is_space(line[p + 1]) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    p += 1;
                    break;
                } else if p >= line.len() {
                    return Err(ProtocolError::UnbalancedQuotes);
                } else {
                    out.push(c);
                }
            } else if p >= line.len() {
                break;
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' => {
                        p += 1;
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    // A NUL ends the token (C string semantics); the loop then skips on.
                    0 => {
                        p += 1;
                        break;
                    }
                    _ => out.push(c),
                }
            }
            p += 1;
        }
        spans.push(Span::new(start, out.len() - start)?);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
        let (mut out, mut spans) = (Vec::new(), Vec::new());
        split_args(line, &mut out, &mut spans)?;
        Ok(spans
            .into_iter()
            .map(|s| out[s.range_from(0)].to_vec())
            .collect())
    }

    fn v(items: &[&[u8]]) -> Vec<Vec<u8>> {
        items.iter().map(|i| i.to_vec()).collect()
    }

    #[test]
    fn splits_like_sdssplitargs() {
        assert_eq!(split(b"").unwrap(), v(&[]));
        assert_eq!(split(b"   ").unwrap(), v(&[]));
        assert_eq!(split(b"PING").unwrap(), v(&[b"PING"]));
        assert_eq!(split(b"  set  k   v ").unwrap(), v(&[b"set", b"k", b"v"]));
        assert_eq!(split(b"set k \"a b\"").unwrap(), v(&[b"set", b"k", b"a b"]));
        assert_eq!(split(b"set k 'a b'").unwrap(), v(&[b"set", b"k", b"a b"]));
        assert_eq!(
            split(b"\"\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\"").unwrap(),
            v(&[b"AJ\n\r\t\x08\x07\\\"q"])
        );
        // An incomplete hex escape is the plain escape of 'x'.
        assert_eq!(split(b"\"\\x4\"").unwrap(), v(&[b"x4"]));
        assert_eq!(split(b"'it\\'s' \"\"").unwrap(), v(&[b"it's", b""]));
        // A quote inside a token opens a quoted part of the same token.
        assert_eq!(split(b"a\"b c\"").unwrap(), v(&[b"ab c"]));
        // Vertical tab and form feed are skipped between tokens but belong to an unquoted
        // token once it has started, as in Redis.
        assert_eq!(split(b"\x0ba\x0c b").unwrap(), v(&[b"a\x0c", b"b"]));
    }

    #[test]
    fn unbalanced_quotes_are_rejected() {
        for bad in [
            &b"set \"\"\"test-key\"\"\" test-value"[..],
            b"\"abc",
            b"'abc",
            b"\"a\"b",
            b"'a'b",
            b"\"abc\\",
        ] {
            assert_eq!(
                split(bad),
                Err(ProtocolError::UnbalancedQuotes),
                "{}",
                bad.escape_ascii()
            );
        }
    }
}
