//! Numbers as Redis reads and writes them.
//!
//! [`parse_i64`] is Redis's `string2ll`: an optional `-`, then either `0` alone or a digit
//! `1`–`9` followed by digits, fitting in an `i64`. No `+`, no spaces, no leading zeros, no
//! `-0`. Lengths on the wire and integer arguments both use it.
//!
//! [`format_double`] writes a double the way Redis 7.2+ replies with one (`fpconv_dtoa`): the
//! shortest digits that read back as the same number, laid out without an exponent when that is
//! short (`1.5`, `100`, `0.001`) and as `d.ddde±x` otherwise (`1e+100`, `1.5e-10`); `inf`,
//! `-inf` and `nan` for the special values.

/// Parses a decimal integer exactly as Redis's `string2ll` does; `None` for anything else.
#[must_use]
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [] => return None,
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) || digits.len() > 19 {
        return None;
    }
    let mut value = u64::from(first - b'0');
    for &b in rest {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    if negative {
        if value <= i64::MAX as u64 + 1 {
            Some((value as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(value).ok()
    }
}

/// Longest text [`format_double`] writes (`-d.ddddddddddddddddde-308` is 25 bytes).
pub const MAX_DOUBLE_LEN: usize = 32;

/// Writes `value` as Redis replies with a double; returns the used prefix of `buf`.
pub fn format_double(value: f64, buf: &mut [u8; MAX_DOUBLE_LEN]) -> &[u8] {
    if value.is_nan() {
        return copy_into(buf, b"nan");
    }
    if value.is_infinite() {
        return copy_into(buf, if value > 0.0 { b"inf" } else { b"-inf" });
    }
    if value == 0.0 {
        return copy_into(
            buf,
            if value.is_sign_negative() {
                b"-0"
            } else {
                b"0"
            },
        );
    }
    // Rust's `{:e}` prints the shortest digits that round-trip: `d[.ddd]e<exp>`.
    let mut sci = [0u8; MAX_DOUBLE_LEN];
    let sci_len = {
        use std::io::Write;
        let mut cursor = std::io::Cursor::new(&mut sci[..]);
        // Cannot fail: at most 1 + 17 + 1 + 1 + 1 + 4 bytes fit in 32.
        let _ = write!(cursor, "{:e}", value.abs());
        cursor.position() as usize
    };
    let sci = &sci[..sci_len];
    let e_at = sci.iter().position(|&b| b == b'e').unwrap_or(sci_len);
    let mut digits = [0u8; 20];
    let mut ndigits = 0;
    for &b in &sci[..e_at] {
        if b.is_ascii_digit() && ndigits < digits.len() {
            digits[ndigits] = b;
            ndigits += 1;
        }
    }
    let exp10: i32 = std::str::from_utf8(&sci[(e_at + 1).min(sci_len)..])
        .ok()
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    // value = digits × 10^k
    let k = exp10 - (ndigits as i32 - 1);
    let mut out = Writer { buf, len: 0 };
    if value < 0.0 {
        out.push(b'-');
    }
    emit_digits(&digits[..ndigits], k, value < 0.0, &mut out);
    let len = out.len;
    &buf[..len]
}

struct Writer<'a> {
    buf: &'a mut [u8; MAX_DOUBLE_LEN],
    len: usize,
}

impl Writer<'_> {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
    fn extend(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.push(b);
        }
    }
}

/// `fpconv`'s layout of `digits × 10^k` (the rules Redis's `fpconv_dtoa` uses).
fn emit_digits(digits: &[u8], k: i32, negative: bool, out: &mut Writer<'_>) {
    let ndigits = digits.len() as i32;
    let exp = (k + ndigits - 1).abs();
    let max_trailing_zeros = if negative { 6 } else { 7 };
    // A plain integer: digits then k zeros.
    if k >= 0 && exp < ndigits + max_trailing_zeros {
        out.extend(digits);
        for _ in 0..k {
            out.push(b'0');
        }
        return;
    }
    // A decimal without exponent.
    if k < 0 && (k > -7 || exp < 4) {
        let offset = ndigits - k.abs();
        if offset <= 0 {
            out.extend(b"0.");
            for _ in 0..(-offset) {
                out.push(b'0');
            }
            out.extend(digits);
        } else {
            let (int, frac) = digits.split_at(offset as usize);
            out.extend(int);
            out.push(b'.');
            out.extend(frac);
        }
        return;
    }
    // Scientific notation.
    out.push(digits[0]);
    if digits.len() > 1 {
        out.push(b'.');
        out.extend(&digits[1..]);
    }
    out.push(b'e');
    out.push(if k + ndigits - 1 < 0 { b'-' } else { b'+' });
    let mut buf = itoa::Buffer::new();
    out.extend(buf.format(exp).as_bytes());
}

fn copy_into<'a>(buf: &'a mut [u8; MAX_DOUBLE_LEN], text: &[u8]) -> &'a [u8] {
    buf[..text.len()].copy_from_slice(text);
    &buf[..text.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_accepts_exactly_redis_integers() {
        for (text, want) in [
            (&b"0"[..], Some(0)),
            (b"1", Some(1)),
            (b"-1", Some(-1)),
            (b"12345", Some(12345)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"99999999999999999999", None),
            (b"", None),
            (b"-", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"1a", None),
            (b"blabla", None),
        ] {
            assert_eq!(parse_i64(text), want, "{}", text.escape_ascii());
        }
    }

    fn fmt(v: f64) -> String {
        let mut buf = [0; MAX_DOUBLE_LEN];
        String::from_utf8(format_double(v, &mut buf).to_vec()).unwrap()
    }

    #[test]
    fn doubles_are_laid_out_as_redis_replies_them() {
        for (value, want) in [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (100.0, "100"),
            (-2.0, "-2"),
            (3.0e10, "3e+10"),
            (1e7, "10000000"),
            (-1e7, "-1e+7"),
            (1e8, "1e+8"),
            (12_345_678.0, "12345678"),
            (1e15, "1e+15"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (1.5e-10, "1.5e-10"),
            (0.001, "0.001"),
            (1e-7, "1e-7"),
            (123.456, "123.456"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
        ] {
            assert_eq!(fmt(value), want, "{value:e}");
        }
    }

    #[test]
    fn formatted_doubles_read_back_exactly() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_finite() {
                let text = fmt(v);
                assert_eq!(
                    text.parse::<f64>().unwrap().to_bits(),
                    v.to_bits(),
                    "{text}"
                );
            }
        }
    }
}
