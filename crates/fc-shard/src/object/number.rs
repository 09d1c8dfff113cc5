//! Numbers in string values, as Redis reads and writes them.

use super::long_double::LongDouble;
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

/// Redis's `string2ld`: a whole decimal or hexadecimal float (`inf` and exponents accepted)
/// read as an x87 `long double`, no leading space, nothing trailing, not NaN, not out of range.
/// `None` for anything else.
pub(crate) fn parse_float(bytes: &[u8]) -> Option<LongDouble> {
    LongDouble::parse(bytes)
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

/// `current + delta` for `INCRBYFLOAT`/`HINCRBYFLOAT` with Redis's errors, as the text Redis
/// stores and replies.
///
/// Redis reads both numbers with `strtold`, adds them in C `long double` (on x86-64 the x87
/// 80-bit format, 64 significant bits) and prints `%.17Lf` with the trailing zeros and dot
/// removed: never an exponent, `-0` written `0`. This computes exactly that (see
/// [`LongDouble`]), so `0.1 + 0.1 + 0.1` is `0.3` and `9223372036854775807 + 0` stays exact, as
/// in Redis. A sum that overflows (or `inf` in either operand) is
/// [`StoreError::NanOrInfinity`].
pub(crate) fn incr_float(
    current: Option<&[u8]>,
    delta: LongDouble,
    hash: bool,
) -> Result<Vec<u8>, StoreError> {
    let value = match current {
        None => LongDouble::ZERO,
        Some(text) => parse_float(text).ok_or(if hash {
            StoreError::HashValueNotAFloat
        } else {
            StoreError::NotAFloat
        })?,
    };
    match value.add(delta) {
        Some(sum) if sum.is_finite() => Ok(sum.to_human()),
        _ => Err(StoreError::NanOrInfinity),
    }
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

    fn float(text: &str) -> LongDouble {
        parse_float(text.as_bytes()).expect("a float")
    }

    #[test]
    fn floats_as_string2ld() {
        for good in [
            "10.5", "5.0e3", "-.5", "inf", "-inf", "0x1p4", "1e4000", "5e-4950",
        ] {
            assert!(parse_float(good.as_bytes()).is_some(), "{good:?}");
        }
        for bad in ["", " 1", "1 ", "nan", "abc", "1.5x", "1e5000", "1e-5000"] {
            assert_eq!(parse_float(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn floats_add_as_redis_does() {
        // The INCRBYFLOAT examples of Redis's documentation.
        assert_eq!(
            incr_float(Some(b"10.50"), float("0.1"), false).unwrap(),
            b"10.6"
        );
        assert_eq!(
            incr_float(Some(b"10.6"), float("-5"), false).unwrap(),
            b"5.6"
        );
        assert_eq!(
            incr_float(Some(b"5.0e3"), float("2.0e2"), false).unwrap(),
            b"5200"
        );
        // Where an f64 sum would show its rounding, the long double one does not.
        assert_eq!(
            incr_float(Some(b"0.2"), float("0.1"), false).unwrap(),
            b"0.3"
        );
        assert_eq!(
            incr_float(Some(b"9223372036854775807"), float("0"), false).unwrap(),
            b"9223372036854775807"
        );
        assert_eq!(incr_float(None, float("-0"), false).unwrap(), b"0");
        assert_eq!(
            incr_float(None, float("1e21"), false).unwrap(),
            b"1000000000000000000000"
        );
        // Past f64's range, printed in full.
        let big = incr_float(Some(b"1.7976931348623157e308"), float("1e308"), false).unwrap();
        assert_eq!(big.len(), 309);
        assert!(big.starts_with(b"2797693134862315"));
        assert_eq!(
            incr_float(Some(b"1e4932"), float("1e4932"), false),
            Err(StoreError::NanOrInfinity)
        );
        assert_eq!(
            incr_float(Some(b"inf"), float("-inf"), false),
            Err(StoreError::NanOrInfinity)
        );
        assert_eq!(
            incr_float(Some(b"x"), float("1"), true),
            Err(StoreError::HashValueNotAFloat)
        );
        assert_eq!(
            incr_float(Some(b"x"), float("1"), false),
            Err(StoreError::NotAFloat)
        );
    }
}
