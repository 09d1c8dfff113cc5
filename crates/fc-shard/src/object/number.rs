//! Numbers in string values, as Redis reads and writes them.

use crate::error::StoreError;

/// Redis's `string2ll`: an optional `-`, then `0` alone or a digit 1-9 followed by digits; no
/// spaces, no `+`, no leading zeros, within `i64`. `None` for anything else.
pub(crate) fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes {
        [b'0'] => return Some(0),
        [b'-', rest @ ..] => (true, rest),
        _ => (false, bytes),
    };
    match digits.first() {
        Some(b'1'..=b'9') if digits.len() <= 19 => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if magnitude > i64::MAX as u64 + 1 {
            return None;
        }
        Some((magnitude as i64).wrapping_neg())
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Redis's `string2ld` (on `f64`): a whole decimal float (`inf` and exponents accepted), no
/// leading space, nothing trailing, not NaN. `None` for anything else.
pub(crate) fn parse_f64(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() || bytes.len() > 5 * 1024 || bytes[0].is_ascii_whitespace() {
        return None;
    }
    let value: f64 = std::str::from_utf8(bytes).ok()?.parse().ok()?;
    (!value.is_nan()).then_some(value)
}

/// The text `INCRBYFLOAT`/`HINCRBYFLOAT` store and reply: the shortest decimal that reads back
/// as the same `f64`, never in exponent form, `-0` written `0`.
///
/// Redis computes these increments in `long double` and prints 17 decimals, trimmed; this
/// engine computes in `f64`, so a sum whose binary rounding shows in 17 digits (`0.1 + 0.2`)
/// reads `0.30000000000000004` here and `0.3` in Redis. Every other documented case agrees.
pub(crate) fn format_f64(value: f64) -> Vec<u8> {
    let value = if value == 0.0 { 0.0 } else { value };
    format!("{value}").into_bytes()
}

/// `current + delta` with Redis's errors; `current` is the stored text (absent reads as 0).
pub(crate) fn incr_i64(current: Option<&[u8]>, delta: i64, hash: bool) -> Result<i64, StoreError> {
    let value = match current {
        None => 0,
        Some(text) => parse_i64(text).ok_or(if hash {
            StoreError::HashValueNotAnInteger
        } else {
            StoreError::NotAnInteger
        })?,
    };
    value.checked_add(delta).ok_or(StoreError::Overflow)
}

/// `current + delta` for floats with Redis's errors, formatted as stored.
pub(crate) fn incr_f64(
    current: Option<&[u8]>,
    delta: f64,
    hash: bool,
) -> Result<Vec<u8>, StoreError> {
    let value = match current {
        None => 0.0,
        Some(text) => parse_f64(text).ok_or(if hash {
            StoreError::HashValueNotAFloat
        } else {
            StoreError::NotAFloat
        })?,
    };
    let sum = value + delta;
    if !sum.is_finite() {
        return Err(StoreError::NanOrInfinity);
    }
    Ok(format_f64(sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_string2ll() {
        for (text, want) in [
            ("0", Some(0)),
            ("-1", Some(-1)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("-0", None),
            ("01", None),
            ("+1", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("-", None),
            ("1.0", None),
            ("99999999999999999999", None),
        ] {
            assert_eq!(parse_i64(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn floats_as_string2ld() {
        assert_eq!(parse_f64(b"10.5"), Some(10.5));
        assert_eq!(parse_f64(b"5.0e3"), Some(5000.0));
        assert_eq!(parse_f64(b"-.5"), Some(-0.5));
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        for bad in ["", " 1", "1 ", "nan", "abc", "1.5x"] {
            assert_eq!(parse_f64(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn floats_print_as_redis_documents() {
        // The INCRBYFLOAT examples of Redis's documentation.
        assert_eq!(incr_f64(Some(b"10.50"), 0.1, false).unwrap(), b"10.6");
        assert_eq!(incr_f64(Some(b"10.6"), -5.0, false).unwrap(), b"5.6");
        assert_eq!(incr_f64(Some(b"5.0e3"), 200.0, false).unwrap(), b"5200");
        assert_eq!(format_f64(-0.0), b"0");
        assert_eq!(format_f64(1e21), b"1000000000000000000000");
        assert_eq!(
            incr_f64(Some(b"1.7976931348623157e308"), 1e308, false),
            Err(StoreError::NanOrInfinity)
        );
        assert_eq!(
            incr_f64(Some(b"x"), 1.0, true),
            Err(StoreError::HashValueNotAFloat)
        );
    }
}
