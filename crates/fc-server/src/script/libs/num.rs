//! C number conversions the libraries rely on: `printf("%.Ng")`, `strtod`
//! and x86-64 double-to-integer casts.

/// 2^63, exactly.
const TWO63: f64 = 9_223_372_036_854_775_808_u64 as f64;

/// `(int64_t)d` as x86-64 computes it: out of range and NaN give `i64::MIN`.
pub(super) fn double_to_i64(d: f64) -> i64 {
    if d.is_nan() || !(-TWO63..TWO63).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// `(int)d` as x86-64 computes it: out of range and NaN give `i32::MIN`.
pub(super) fn double_to_i32(d: f64) -> i32 {
    if d.is_nan() || !(-2_147_483_649.0 < d && d < 2_147_483_648.0) {
        i32::MIN
    } else {
        d as i32
    }
}

/// `(uint64_t)d` for `d >= 0` as gcc compiles it on x86-64.
pub(super) fn double_to_u64(d: f64) -> u64 {
    if d < TWO63 {
        double_to_i64(d) as u64
    } else {
        (double_to_i64(d - TWO63) as u64) ^ (1 << 63)
    }
}

fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `printf("%.{prec}g", x)` as glibc prints it.
pub(super) fn fmt_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    let p = prec.max(1);
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let sci = format!("{:.*e}", p - 1, x);
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip_fraction_zeros(mant), exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_fraction_zeros(&format!("{x:.decimals$}")).to_owned()
    }
}

fn starts_with_ci(s: &[u8], word: &[u8]) -> bool {
    s.len() >= word.len() && s[..word.len()].eq_ignore_ascii_case(word)
}

/// glibc `strtod` on the start of `s` (no leading blanks expected): the value
/// and how many bytes it used, or `None` when no number starts there.
pub(super) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = 0;
    let neg = match at(0) {
        b'-' => {
            i = 1;
            true
        }
        b'+' => {
            i = 1;
            false
        }
        _ => false,
    };
    let signed = |v: f64| if neg { -v } else { v };
    let rest = &s[i.min(s.len())..];
    if starts_with_ci(rest, b"inf") {
        let len = if starts_with_ci(rest, b"infinity") {
            8
        } else {
            3
        };
        return Some((signed(f64::INFINITY), i + len));
    }
    if starts_with_ci(rest, b"nan") {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut k = end + 1;
            while at(k).is_ascii_alphanumeric() || at(k) == b'_' {
                k += 1;
            }
            if at(k) == b')' {
                end = k + 1;
            }
        }
        return Some((signed(f64::NAN), end));
    }
    if at(i) == b'0'
        && at(i + 1) | 0x20 == b'x'
        && (at(i + 2).is_ascii_hexdigit() || (at(i + 2) == b'.' && at(i + 3).is_ascii_hexdigit()))
    {
        let (v, used) = hex_float(&s[i + 2..]);
        return Some((signed(v), i + 2 + used));
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one digit.
    let start = i;
    let mut int_digits = String::new();
    while at(i).is_ascii_digit() {
        int_digits.push(at(i) as char);
        i += 1;
    }
    let mut frac_digits = String::new();
    if at(i) == b'.' && (at(i + 1).is_ascii_digit() || !int_digits.is_empty()) {
        i += 1;
        while at(i).is_ascii_digit() {
            frac_digits.push(at(i) as char);
            i += 1;
        }
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return None;
    }
    let _ = start;
    let mut exp = String::from("0");
    if at(i) | 0x20 == b'e' {
        let mut j = i + 1;
        let mut e = String::new();
        if at(j) == b'-' || at(j) == b'+' {
            if at(j) == b'-' {
                e.push('-');
            }
            j += 1;
        }
        if at(j).is_ascii_digit() {
            let mut digits = String::new();
            while at(j).is_ascii_digit() {
                digits.push(at(j) as char);
                j += 1;
            }
            let digits = digits.trim_start_matches('0');
            // Exponents this long only mean overflow or underflow.
            e.push_str(if digits.len() > 9 {
                "999999999"
            } else if digits.is_empty() {
                "0"
            } else {
                digits
            });
            exp = e;
            i = j;
        }
    }
    let text = format!(
        "{}.{}e{exp}",
        if int_digits.is_empty() {
            "0"
        } else {
            &int_digits
        },
        if frac_digits.is_empty() {
            "0"
        } else {
            &frac_digits
        },
    );
    let v: f64 = text.parse().unwrap_or(0.0);
    Some((signed(v), i))
}

/// Parses hex digits `h[.h][p[sign]d]` (after `0x`): value and bytes used.
fn hex_float(s: &[u8]) -> (f64, usize) {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut mant: u64 = 0;
    let mut exp: i64 = 0;
    let mut sticky = false;
    let mut i = 0;
    let mut push = |d: u64, frac: bool, exp: &mut i64| {
        if mant >> 56 == 0 {
            mant = (mant << 4) | d;
            if frac {
                *exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !frac {
                *exp += 4;
            }
        }
    };
    while at(i).is_ascii_hexdigit() {
        push(hexval(at(i)), false, &mut exp);
        i += 1;
    }
    if at(i) == b'.' {
        i += 1;
        while at(i).is_ascii_hexdigit() {
            push(hexval(at(i)), true, &mut exp);
            i += 1;
        }
    }
    if at(i) | 0x20 == b'p' {
        let mut j = i + 1;
        let neg = at(j) == b'-';
        if at(j) == b'-' || at(j) == b'+' {
            j += 1;
        }
        if at(j).is_ascii_digit() {
            let mut e: i64 = 0;
            while at(j).is_ascii_digit() {
                e = (e * 10 + i64::from(at(j) - b'0')).min(100_000);
                j += 1;
            }
            exp += if neg { -e } else { e };
            i = j;
        }
    }
    if sticky {
        mant |= 1;
    }
    let v = mant as f64 * 2f64.powi(exp.clamp(-5000, 5000) as i32);
    (v, i)
}

fn hexval(c: u8) -> u64 {
    u64::from(match c {
        b'0'..=b'9' => c - b'0',
        _ => (c | 0x20) - b'a' + 10,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_formatting() {
        assert_eq!(fmt_g(0.1, 14), "0.1");
        assert_eq!(fmt_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fmt_g(1e20, 14), "1e+20");
        assert_eq!(fmt_g(1e-5, 14), "1e-05");
        assert_eq!(fmt_g(123456789012345678.0, 14), "1.2345678901235e+17");
        assert_eq!(fmt_g(100000000000000.0, 14), "1e+14");
        assert_eq!(fmt_g(-0.0, 14), "-0");
        assert_eq!(fmt_g(3.0, 1), "3");
    }

    #[test]
    fn strtod_forms() {
        assert_eq!(strtod(b"12abc"), Some((12.0, 2)));
        assert_eq!(strtod(b"0x10"), Some((16.0, 4)));
        assert_eq!(strtod(b"0x"), Some((0.0, 1)));
        assert_eq!(strtod(b"1.5e3,"), Some((1500.0, 5)));
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(strtod(b"-Infinity"), Some((f64::NEG_INFINITY, 9)));
        assert_eq!(strtod(b"1e400").map(|p| p.0), Some(f64::INFINITY));
    }
}
