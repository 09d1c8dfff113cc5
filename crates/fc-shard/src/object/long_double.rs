//! The x87 80-bit extended format (C's `long double` on x86-64), as Redis uses it for
//! `INCRBYFLOAT` and `HINCRBYFLOAT`.
//!
//! Redis reads the stored value and the increment with `strtold` (`string2ld`), adds them in
//! `long double`, and stores and replies the sum printed with `%.17Lf` and its trailing zeros
//! (and then a trailing dot) removed (`ld2string` with `LD_STR_HUMAN`; `-0` becomes `0`). On
//! x86-64 Linux a `long double` is the x87 extended format: a sign, a 15-bit exponent and a
//! 64-bit significand whose integer bit is explicit, so 64 bits of precision (an `f64` has 53)
//! from 2^-16445 (the smallest subnormal) to just under 2^16384 (about 1.19e4932). The 11 extra
//! bits are why Redis answers `0.3` for `0.1 + 0.1 + 0.1`: the binary rounding error stays below
//! the 17th decimal, where an `f64` sum shows it (`0.30000000000000004`). They are also why
//! `9223372036854775807 + 0` stays exact. No `f64` computation prints Redis's answers, so this
//! module implements the format exactly, in integer arithmetic:
//!
//! - [`LongDouble::parse`] is glibc's `strtold` as `string2ld` calls it: decimal or hexadecimal
//!   (`0x1.8p3`) text, `inf`/`infinity` in any case, an optional sign; correctly rounded (to
//!   nearest, ties to even, on the 64-bit significand, with gradual underflow). It refuses
//!   what `string2ld` refuses: an empty text or one of 5120 bytes or more, anything `strtold`
//!   does not consume whole (leading spaces, trailing bytes), NaN, and a range error (a value
//!   that overflows, or a nonzero one that rounds to zero; a subnormal is kept).
//! - [`LongDouble::add`] is IEEE 754 addition rounded to nearest even, as the x87 FPU adds
//!   under Linux's default 64-bit precision control: the exact sum, rounded once; overflow
//!   gives an infinity (Redis then answers "increment would produce NaN or Infinity").
//! - [`LongDouble::to_human`] is `%.17Lf` as glibc prints it (the exact decimal expansion of
//!   the binary value rounded to 17 decimals, ties to even) trimmed as `ld2string` trims it.
//!   A finite value always fits Redis's 5 KiB buffer (at most 4933 integer digits), so
//!   `ld2string`'s "no room" case cannot arise.
//!
//! Texts of at most 38 significant digits with a decimal exponent in -25..=38 (what clients
//! send, and what `to_human` writes below 10^21) parse in `u128` arithmetic; the rest goes
//! through a small big-integer type, with operands bounded by the range checks (about 24,000
//! bits at most).

use std::cmp::Ordering;

/// `string2ld`'s buffer (`MAX_LONG_DOUBLE_CHARS`): a text must be shorter than this.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;
/// The exponent of the last significand bit of subnormals and of the smallest normal binade:
/// the smallest normal is 2^63 × 2^-16445 = 2^-16382.
const MIN_EXPONENT: i64 = -16445;
/// The exponent of the last significand bit in the largest binade (2^16383 up to 2^16384).
const MAX_EXPONENT: i64 = 16320;
/// Exponents written in a text saturate here: far past any finite or nonzero value, small
/// enough that adding a text's digit count cannot overflow.
const EXPONENT_LIMIT: i64 = 1 << 40;
/// 10^17: `%.17Lf`'s scale.
const SCALE_17: u128 = 100_000_000_000_000_000;

/// A `long double` value (never NaN: no operation here keeps one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LongDouble {
    negative: bool,
    value: Value,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// `significand × 2^exponent`, canonical: a normal value has bit 63 set and an exponent in
    /// `MIN_EXPONENT..=MAX_EXPONENT`; zero and subnormals have bit 63 clear and `MIN_EXPONENT`.
    /// The order of `(exponent, significand)` is then the order of magnitudes.
    Finite {
        significand: u64,
        exponent: i64,
    },
    Infinite,
}

impl LongDouble {
    /// Positive zero.
    pub(crate) const ZERO: Self = Self::zero(false);

    const fn zero(negative: bool) -> Self {
        Self {
            negative,
            value: Value::Finite {
                significand: 0,
                exponent: MIN_EXPONENT,
            },
        }
    }

    const fn infinity(negative: bool) -> Self {
        Self {
            negative,
            value: Value::Infinite,
        }
    }

    /// Whether the value is finite (not an infinity).
    pub(crate) fn is_finite(self) -> bool {
        matches!(self.value, Value::Finite { .. })
    }

    fn is_zero(self) -> bool {
        matches!(self.value, Value::Finite { significand: 0, .. })
    }

    /// Redis's `string2ld`: the value of `text` as glibc's `strtold` rounds it, or `None` where
    /// `string2ld` fails (see the module documentation).
    pub(crate) fn parse(text: &[u8]) -> Option<Self> {
        if text.is_empty() || text.len() >= MAX_LONG_DOUBLE_CHARS {
            return None;
        }
        let (negative, body) = match text {
            [b'-', rest @ ..] => (true, rest),
            [b'+', rest @ ..] => (false, rest),
            _ => (false, text),
        };
        if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
            return Some(Self::infinity(negative));
        }
        // "0x" with no hexadecimal digit after it is strtold's "0" followed by garbage.
        match body {
            [b'0', b'x' | b'X', hex @ ..] => parse_hex(negative, hex),
            _ => parse_decimal(negative, body),
        }
    }

    /// `self + other` rounded to nearest even; `None` for NaN (infinities of both signs).
    pub(crate) fn add(self, other: Self) -> Option<Self> {
        let ((a_sig, a_exp), (b_sig, b_exp)) = match (self.value, other.value) {
            (Value::Infinite, Value::Infinite) => {
                return (self.negative == other.negative).then_some(self);
            }
            (Value::Infinite, _) => return Some(self),
            (_, Value::Infinite) => return Some(other),
            (
                Value::Finite {
                    significand: a,
                    exponent: ae,
                },
                Value::Finite {
                    significand: b,
                    exponent: be,
                },
            ) => ((a, ae), (b, be)),
        };
        if b_sig == 0 {
            // x + 0 is x; 0 + 0 is -0 only when both are -0.
            return Some(if a_sig == 0 {
                Self::zero(self.negative && other.negative)
            } else {
                self
            });
        }
        if a_sig == 0 {
            return Some(other);
        }
        let ((big_neg, big_sig, big_exp), (small_neg, small_sig, small_exp)) =
            if (a_exp, a_sig) >= (b_exp, b_sig) {
                (
                    (self.negative, a_sig, a_exp),
                    (other.negative, b_sig, b_exp),
                )
            } else {
                (
                    (other.negative, b_sig, b_exp),
                    (self.negative, a_sig, a_exp),
                )
            };
        // Both scaled to 2^(big_exp - 62): the larger is exact (62 guard bits, room for the
        // carry); bits of the smaller shifted out past bit 0 are jammed into bit 0, which keeps
        // the sum on the same side of every rounding boundary (they all lie 61 or more bits up
        // whenever something was shifted out).
        let wide_big = u128::from(big_sig) << 62;
        let full_small = u128::from(small_sig) << 62;
        let distance = big_exp - small_exp;
        let wide_small = if distance >= 128 {
            1
        } else {
            let kept = full_small >> distance;
            let lost = full_small & ((1u128 << distance) - 1) != 0;
            kept | u128::from(lost)
        };
        let sum = if big_neg == small_neg {
            wide_big + wide_small
        } else {
            wide_big - wide_small
        };
        if sum == 0 {
            // x + (-x) is +0 when rounding to nearest.
            return Some(Self::zero(false));
        }
        Some(round(big_neg, sum, big_exp - 62, false))
    }

    /// `%.17Lf` with trailing zeros and a trailing dot removed, and `-0` written `0`: Redis's
    /// `ld2string(..., LD_STR_HUMAN)` (an infinity is `inf`/`-inf`, as there).
    pub(crate) fn to_human(self) -> Vec<u8> {
        let (significand, exponent) = match self.value {
            Value::Infinite if self.negative => return b"-inf".to_vec(),
            Value::Infinite => return b"inf".to_vec(),
            Value::Finite {
                significand,
                exponent,
            } => (significand, exponent),
        };
        let mut out = Vec::new();
        if exponent >= 0 {
            // An integer (nonzero: zero has a negative exponent), so 17 zero decimals.
            if self.negative {
                out.push(b'-');
            }
            if exponent < 64 {
                let value = u128::from(significand) << exponent;
                out.extend_from_slice(value.to_string().as_bytes());
            } else {
                let value = Big::from_u64(significand).shl(exponent.unsigned_abs());
                out.extend_from_slice(&value.into_decimal());
            }
            return out;
        }
        // value × 10^17 = significand × 10^17 / 2^k, rounded half to even; < 2^121 before.
        let scaled = u128::from(significand) * SCALE_17;
        let k = exponent.unsigned_abs();
        let rounded = if k >= 128 {
            0 // below 2^121, under half of 2^k
        } else {
            let quotient = scaled >> k;
            let rest = scaled & ((1u128 << k) - 1);
            let half = 1u128 << (k - 1);
            quotient + u128::from(rest > half || (rest == half && quotient & 1 == 1))
        };
        if rounded == 0 {
            // "0.00000000000000000" or "-0.00000000000000000": Redis writes both "0".
            return b"0".to_vec();
        }
        if self.negative {
            out.push(b'-');
        }
        let (whole, fraction) = (rounded / SCALE_17, rounded % SCALE_17);
        out.extend_from_slice(whole.to_string().as_bytes());
        if fraction != 0 {
            let digits = format!("{fraction:017}");
            out.push(b'.');
            out.extend_from_slice(digits.trim_end_matches('0').as_bytes());
        }
        out
    }

    /// The 80-bit x87 encoding (sign, 15-bit biased exponent, 64-bit significand).
    #[cfg(test)]
    fn to_bits(self) -> u128 {
        let sign = u128::from(self.negative) << 79;
        match self.value {
            Value::Infinite => sign | (0x7fff << 64) | (1 << 63),
            Value::Finite {
                significand,
                exponent,
            } => {
                let biased = if significand >> 63 == 1 {
                    (exponent - MIN_EXPONENT + 1).unsigned_abs()
                } else {
                    0
                };
                sign | (u128::from(biased) << 64) | u128::from(significand)
            }
        }
    }
}

/// `m × 2^e` (plus less than `2^e` more when `sticky`) rounded to nearest even. With `sticky`
/// the rounding must drop at least one bit of `m`.
fn round(negative: bool, m: u128, e: i64, sticky: bool) -> LongDouble {
    if m == 0 {
        return LongDouble::zero(negative);
    }
    let bits = i64::from(128 - m.leading_zeros());
    let mut lsb = (e + bits - 64).max(MIN_EXPONENT);
    let shift = lsb - e;
    let mut significand = if shift <= 0 {
        debug_assert!(!sticky, "a sticky bit below the kept ones");
        m << (-shift)
    } else if shift > 128 {
        0 // m < 2^128 <= half the last kept bit
    } else {
        let (quotient, rest) = if shift == 128 {
            (0, m)
        } else {
            (m >> shift, m & ((1u128 << shift) - 1))
        };
        let half = 1u128 << (shift - 1);
        let up = rest > half || (rest == half && (sticky || quotient & 1 == 1));
        quotient + u128::from(up)
    };
    if significand == 1 << 64 {
        significand = 1 << 63;
        lsb += 1;
    }
    if significand == 0 {
        return LongDouble::zero(negative);
    }
    if lsb > MAX_EXPONENT {
        return LongDouble::infinity(negative);
    }
    LongDouble {
        negative,
        value: Value::Finite {
            significand: u64::try_from(significand).expect("rounded to 64 bits"),
            exponent: lsb,
        },
    }
}

/// A parsed nonzero value as `string2ld` keeps it: `None` for strtold's range errors.
fn in_range(value: LongDouble) -> Option<LongDouble> {
    (value.is_finite() && !value.is_zero()).then_some(value)
}

/// An exponent after `e`/`p`: an optional sign and at least one decimal digit, nothing after.
fn parse_exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0i64, |acc, &d| {
        (acc * 10 + i64::from(d - b'0')).min(EXPONENT_LIMIT)
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// Splits `digits[.digits]` off `text` (either part may be empty) with `is_digit`.
fn split_mantissa(text: &[u8], is_digit: fn(&u8) -> bool) -> (&[u8], &[u8], &[u8]) {
    let whole_len = text.iter().take_while(|b| is_digit(b)).count();
    let (whole, rest) = text.split_at(whole_len);
    match rest {
        [b'.', after @ ..] => {
            let fraction_len = after.iter().take_while(|b| is_digit(b)).count();
            let (fraction, rest) = after.split_at(fraction_len);
            (whole, fraction, rest)
        }
        _ => (whole, &[], rest),
    }
}

/// The digits of `whole` then `fraction` (values 0-15) with the positions of the first and
/// last nonzero ones; `None` when all are zero.
struct Digits<'a> {
    whole: &'a [u8],
    fraction: &'a [u8],
    value: fn(u8) -> u8,
    first: usize,
    last: usize,
}

impl<'a> Digits<'a> {
    fn new(whole: &'a [u8], fraction: &'a [u8], value: fn(u8) -> u8) -> Option<Self> {
        let mut digits = Self {
            whole,
            fraction,
            value,
            first: 0,
            last: 0,
        };
        let total = whole.len() + fraction.len();
        digits.first = (0..total).find(|&i| digits.at(i) != 0)?;
        digits.last = (0..total).rfind(|&i| digits.at(i) != 0)?;
        Some(digits)
    }

    fn at(&self, i: usize) -> u8 {
        let byte = match self.whole.get(i) {
            Some(&b) => b,
            None => self.fraction[i - self.whole.len()],
        };
        (self.value)(byte)
    }

    /// How many digits from the first nonzero to the last nonzero.
    fn count(&self) -> usize {
        self.last - self.first + 1
    }

    /// How many zero digits follow the last nonzero one.
    fn trailing_zeros(&self) -> usize {
        self.whole.len() + self.fraction.len() - 1 - self.last
    }

    fn significant(&self) -> impl Iterator<Item = u8> + '_ {
        (self.first..=self.last).map(|i| self.at(i))
    }
}

/// Digits, an optional `.` and digits (at least one digit in all), an optional exponent.
fn parse_decimal(negative: bool, text: &[u8]) -> Option<LongDouble> {
    let (whole, fraction, rest) = split_mantissa(text, u8::is_ascii_digit);
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let exponent = match rest {
        [] => 0,
        [b'e' | b'E', exponent @ ..] => parse_exponent(exponent)?,
        _ => return None,
    };
    let Some(digits) = Digits::new(whole, fraction, |b| b - b'0') else {
        return Some(LongDouble::zero(negative));
    };
    // value = D × 10^scale, D the significant digits as an integer.
    let count = digits.count();
    let scale = exponent - count_i64(fraction.len()) + count_i64(digits.trailing_zeros());
    // 10^(magnitude - 1) <= value < 10^magnitude.
    let magnitude = count_i64(count) + scale;
    if magnitude > 4933 {
        return None; // >= 1e4933: past the largest finite value (about 1.19e4932)
    }
    if magnitude <= -4951 {
        return None; // < 1e-4951: under half the smallest subnormal (about 3.65e-4951)
    }
    if count <= 38 {
        // Below 10^38 < 2^127.
        let d = digits
            .significant()
            .fold(0u128, |acc, d| acc * 10 + u128::from(d));
        if let Some(value) = small_decimal(negative, d, scale) {
            return in_range(value);
        }
    }
    let mut d = Big::from_u64(0);
    let mut chunk = 0u64;
    let mut chunk_len = 0u32;
    for digit in digits.significant() {
        chunk = chunk * 10 + u64::from(digit);
        chunk_len += 1;
        if chunk_len == 19 {
            d.mul_small(10u64.pow(19));
            d.add_small(chunk);
            (chunk, chunk_len) = (0, 0);
        }
    }
    if chunk_len > 0 {
        d.mul_small(10u64.pow(chunk_len));
        d.add_small(chunk);
    }
    in_range(big_decimal(negative, d, scale))
}

/// `d × 10^scale` (`d` nonzero) rounded to nearest even.
fn big_decimal(negative: bool, mut d: Big, scale: i64) -> LongDouble {
    // D × 10^scale = D × 5^scale × 2^scale.
    if scale >= 0 {
        d.mul_pow5(scale.unsigned_abs());
        round_ratio(negative, d, Big::from_u64(1), scale)
    } else {
        round_ratio(negative, d, Big::pow5(scale.unsigned_abs()), scale)
    }
}

/// `d × 10^scale` (`0 < d < 2^127`) in `u128` arithmetic when that is exact enough; `None`
/// otherwise.
fn small_decimal(negative: bool, d: u128, scale: i64) -> Option<LongDouble> {
    if (0..=38).contains(&scale) {
        let m = d.checked_mul(10u128.pow(u32::try_from(scale).ok()?))?;
        return Some(round(negative, m, 0, false));
    }
    if (-25..0).contains(&scale) {
        // d / 10^k = (d × 2^s / 5^k) × 2^-(s + k) with d × 2^s in [2^126, 2^127): the quotient
        // has 68 bits or more (5^25 < 2^59), so the remainder only matters as a sticky bit.
        let k = u32::try_from(-scale).ok()?;
        let s = d.leading_zeros() - 1;
        let n = d << s;
        let p = 5u128.pow(k);
        return Some(round(
            negative,
            n / p,
            -i64::from(s + k),
            !n.is_multiple_of(p),
        ));
    }
    None
}

/// `num / den × 2^e2` (both nonzero) rounded to nearest even.
fn round_ratio(negative: bool, num: Big, den: Big, e2: i64) -> LongDouble {
    // floor(log2(num / den)) is the difference of the bit lengths, or one less.
    let mut log = bits_i64(num.bit_len()) - bits_i64(den.bit_len());
    let below = if log >= 0 {
        num.cmp(&den.shl(log.unsigned_abs())) == Ordering::Less
    } else {
        num.shl(log.unsigned_abs()).cmp(&den) == Ordering::Less
    };
    if below {
        log -= 1;
    }
    let log = log + e2;
    if log > MAX_EXPONENT + 63 {
        return LongDouble::infinity(negative);
    }
    if log < MIN_EXPONENT - 1 {
        return LongDouble::zero(negative); // under half the smallest subnormal
    }
    // The quotient by 2^lsb has at most 64 bits.
    let lsb = (log - 63).max(MIN_EXPONENT);
    let s = e2 - lsb;
    let (num, den) = if s >= 0 {
        (num.shl(s.unsigned_abs()), den)
    } else {
        (num, den.shl(s.unsigned_abs()))
    };
    let (quotient, rest) = divide(num, &den);
    let (half, sticky) = match rest.shl(1).cmp(&den) {
        Ordering::Less => (0, !rest.is_zero()),
        Ordering::Equal => (1, false),
        Ordering::Greater => (1, true),
    };
    round(
        negative,
        (u128::from(quotient) << 1) | half,
        lsb - 1,
        sticky,
    )
}

/// `0x` already read: hexadecimal digits, an optional `.` and digits (at least one digit in
/// all), an optional binary exponent `p`.
fn parse_hex(negative: bool, text: &[u8]) -> Option<LongDouble> {
    let (whole, fraction, rest) = split_mantissa(text, u8::is_ascii_hexdigit);
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let exponent = match rest {
        [] => 0,
        [b'p' | b'P', exponent @ ..] => parse_exponent(exponent)?,
        _ => return None,
    };
    let nibble = |b: u8| match b {
        b'0'..=b'9' => b - b'0',
        _ => (b | 0x20) - b'a' + 10,
    };
    let Some(digits) = Digits::new(whole, fraction, nibble) else {
        return Some(LongDouble::zero(negative));
    };
    // value = H × 2^scale, H the significant nibbles; past 32 of them only the top 128 bits
    // count and the rest (the last one is nonzero) is a sticky bit.
    let kept = digits.count().min(32);
    let m = digits
        .significant()
        .take(kept)
        .fold(0u128, |acc, n| (acc << 4) | u128::from(n));
    let dropped = count_i64(digits.count() - kept);
    let scale = exponent - 4 * count_i64(fraction.len())
        + 4 * count_i64(digits.trailing_zeros())
        + 4 * dropped;
    in_range(round(negative, m, scale, dropped > 0))
}

fn count_i64(n: usize) -> i64 {
    i64::try_from(n).expect("texts are short")
}

fn bits_i64(n: u64) -> i64 {
    i64::try_from(n).expect("numbers are bounded")
}

/// `num / den` where the quotient fits 64 bits: the quotient and the remainder.
fn divide(mut num: Big, den: &Big) -> (u64, Big) {
    let mut quotient = 0u64;
    let mut shifted = den.shl(63);
    for bit in (0..64).rev() {
        if num.cmp(&shifted) != Ordering::Less {
            num.sub_assign(&shifted);
            quotient |= 1 << bit;
        }
        shifted.shr1();
    }
    debug_assert!(num.cmp(den) == Ordering::Less, "the quotient fits 64 bits");
    (quotient, num)
}

/// A nonnegative integer in 64-bit limbs, least significant first, no zero limb on top.
#[derive(Clone, Debug)]
struct Big {
    limbs: Vec<u64>,
}

impl Big {
    fn from_u64(value: u64) -> Self {
        let mut big = Self { limbs: vec![value] };
        big.trim();
        big
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    fn bit_len(&self) -> u64 {
        match self.limbs.last() {
            None => 0,
            Some(top) => {
                let below = u64::try_from(self.limbs.len() - 1).expect("bounded") * 64;
                below + u64::from(64 - top.leading_zeros())
            }
        }
    }

    fn mul_small(&mut self, factor: u64) {
        let mut carry = 0u128;
        for limb in &mut self.limbs {
            let product = u128::from(*limb) * u128::from(factor) + carry;
            *limb = product as u64;
            carry = product >> 64;
        }
        if carry != 0 {
            self.limbs.push(carry as u64);
        }
        self.trim();
    }

    fn add_small(&mut self, addend: u64) {
        let mut carry = addend;
        for limb in &mut self.limbs {
            if carry == 0 {
                return;
            }
            let (sum, overflow) = limb.overflowing_add(carry);
            *limb = sum;
            carry = u64::from(overflow);
        }
        if carry != 0 {
            self.limbs.push(carry);
        }
    }

    /// Multiplies by 5^k.
    fn mul_pow5(&mut self, mut k: u64) {
        const FIVE_27: u64 = 5u64.pow(27);
        while k >= 27 {
            self.mul_small(FIVE_27);
            k -= 27;
        }
        self.mul_small(5u64.pow(u32::try_from(k).expect("below 27")));
    }

    fn pow5(k: u64) -> Self {
        let mut big = Self::from_u64(1);
        big.mul_pow5(k);
        big
    }

    fn shl(&self, bits: u64) -> Self {
        if self.is_zero() {
            return self.clone();
        }
        let limbs = usize::try_from(bits / 64).expect("bounded");
        let bits = (bits % 64) as u32;
        let mut out = vec![0; limbs];
        out.reserve(self.limbs.len() + 1);
        if bits == 0 {
            out.extend_from_slice(&self.limbs);
        } else {
            let mut carry = 0;
            for &limb in &self.limbs {
                out.push((limb << bits) | carry);
                carry = limb >> (64 - bits);
            }
            if carry != 0 {
                out.push(carry);
            }
        }
        Self { limbs: out }
    }

    fn shr1(&mut self) {
        let len = self.limbs.len();
        for i in 0..len {
            let next = self.limbs.get(i + 1).copied().unwrap_or(0);
            self.limbs[i] = (self.limbs[i] >> 1) | (next << 63);
        }
        self.trim();
    }

    fn cmp(&self, other: &Self) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    /// `self -= other`, `other` no larger.
    fn sub_assign(&mut self, other: &Self) {
        let mut borrow = false;
        for (i, limb) in self.limbs.iter_mut().enumerate() {
            let subtrahend = other.limbs.get(i).copied().unwrap_or(0);
            if !borrow && i >= other.limbs.len() {
                break;
            }
            let (diff, b1) = limb.overflowing_sub(subtrahend);
            let (diff, b2) = diff.overflowing_sub(u64::from(borrow));
            *limb = diff;
            borrow = b1 || b2;
        }
        debug_assert!(!borrow, "subtracted a larger number");
        self.trim();
    }

    /// Divides by `divisor`, returning the remainder.
    fn div_rem_small(&mut self, divisor: u64) -> u64 {
        let mut rest = 0u128;
        for limb in self.limbs.iter_mut().rev() {
            let current = (rest << 64) | u128::from(*limb);
            *limb = (current / u128::from(divisor)) as u64;
            rest = current % u128::from(divisor);
        }
        self.trim();
        rest as u64
    }

    fn into_decimal(mut self) -> Vec<u8> {
        const CHUNK: u64 = 10u64.pow(19);
        let mut chunks = Vec::new();
        while !self.is_zero() {
            chunks.push(self.div_rem_small(CHUNK));
        }
        let mut out = Vec::with_capacity(chunks.len() * 19);
        let mut chunks = chunks.into_iter().rev();
        if let Some(top) = chunks.next() {
            out.extend_from_slice(top.to_string().as_bytes());
        } else {
            out.push(b'0');
        }
        for chunk in chunks {
            out.extend_from_slice(format!("{chunk:019}").as_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Option<LongDouble> {
        LongDouble::parse(text.as_bytes())
    }

    fn bits(text: &str) -> u128 {
        parse(text)
            .unwrap_or_else(|| panic!("{text:?} parses"))
            .to_bits()
    }

    fn human(text: &str) -> String {
        String::from_utf8(parse(text).expect("parses").to_human()).expect("ascii")
    }

    fn sum(a: &str, b: &str) -> Option<LongDouble> {
        parse(a).expect("parses").add(parse(b).expect("parses"))
    }

    const ONE: u128 = 0x3fff_8000_0000_0000_0000;
    const MIN_SUBNORMAL: u128 = 1;
    const MIN_NORMAL: u128 = 0x0001_8000_0000_0000_0000;
    const MAX: u128 = 0x7ffe_ffff_ffff_ffff_ffff;

    #[test]
    fn encodings_of_known_values() {
        assert_eq!(bits("1"), ONE);
        assert_eq!(bits("-1"), ONE | 1 << 79);
        assert_eq!(bits("0.1"), 0x3ffb_cccc_cccc_cccc_cccd);
        assert_eq!(bits("0.2"), 0x3ffc_cccc_cccc_cccc_cccd);
        assert_eq!(bits("0.3"), 0x3ffd_9999_9999_9999_999a);
        assert_eq!(bits("1e4932"), 0x7ffe_d72c_b2a9_5c7e_f6cd);
        assert_eq!(bits("9223372036854775807"), 0x403d_ffff_ffff_ffff_fffe);
        assert_eq!(bits("18446744073709551615"), 0x403e_ffff_ffff_ffff_ffff);
        assert_eq!(bits("0"), 0);
        assert_eq!(bits("-0"), 1 << 79);
        assert_eq!(bits("0x10"), 0x4003_8000_0000_0000_0000);
        assert_eq!(bits("0x1p-16445"), MIN_SUBNORMAL);
        assert_eq!(bits("0x1p-16382"), MIN_NORMAL);
        assert_eq!(bits("0x1.fffffffffffffffep16383"), MAX);
        assert_eq!(bits("inf"), 0x7fff_8000_0000_0000_0000);
        assert_eq!(bits("-Infinity"), 0xffff_8000_0000_0000_0000);
        // The same value through the u128 path and the big-integer path.
        assert_eq!(bits("0.1000000000000000000000000000"), bits("0.1"));
        assert_eq!(bits("1e-25"), bits("0.0000000000000000000000001"));
        assert_eq!(bits("1e-26"), bits("0.00000000000000000000000001"));
        assert_eq!(
            bits("12345678901234567890123e-3"),
            bits("12345678901234567890.123")
        );
    }

    #[test]
    fn syntax_as_string2ld() {
        for good in [
            "1",
            "-1",
            "+1",
            "1.",
            ".5",
            "-.5",
            "1e5",
            "1E+5",
            "1e-5",
            "0x1p3",
            "0X1P-3",
            "0x.8",
            "0xA.",
            "0x1.8p+1",
            "inf",
            "INF",
            "+infinity",
            "-iNfInItY",
            "00012",
            "1e00000000000005",
            "0e999999999999999999999",
            "5e-4950",
        ] {
            assert!(parse(good).is_some(), "{good:?}");
        }
        for bad in [
            "",
            " 1",
            "1 ",
            "\t1",
            "1\n",
            "abc",
            "1.5x",
            "nan",
            "-nan",
            "NaN(1)",
            ".",
            "-",
            "+",
            "e5",
            "1e",
            "1e+",
            "1e5.0",
            "0x",
            "0x.",
            "0xg",
            "0x1p",
            "0x1p+",
            "1.2.3",
            "--1",
            "+-1",
            "infinit",
            "infinityy",
            "in",
            "1_000",
            "1,5",
            "0b1",
            "1e5000",
            "-1e5000",
            "1e-5000",
            "0x1p16384",
            "0x1p-16446",
            "1.2e4932",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let long = "1".repeat(MAX_LONG_DOUBLE_CHARS - 1);
        assert!(parse(&long).is_none(), "1e5118 overflows");
        let long_zero = format!("0.{}", "0".repeat(MAX_LONG_DOUBLE_CHARS - 3));
        assert_eq!(parse(&long_zero), Some(LongDouble::zero(false)));
        let too_long = format!("0.{}", "0".repeat(MAX_LONG_DOUBLE_CHARS - 2));
        assert_eq!(parse(&too_long), None);
    }

    #[test]
    fn parsing_rounds_ties_to_even() {
        // 1 + 2^-64 is half way between 1 and the next value: even (1) wins.
        assert_eq!(bits("0x1.0000000000000001p0"), ONE);
        assert_eq!(
            bits("1.0000000000000000000542101086242752217003726400434970855712890625"),
            ONE
        );
        // Anything above half way rounds up.
        assert_eq!(
            bits("1.0000000000000000000542101086242752217003726400434970855712890626"),
            ONE + 1
        );
        assert_eq!(bits("0x1.000000000000000100000000000000000001p0"), ONE + 1);
        // 1 + 3 × 2^-64: half way between odd and even, up to the even one.
        assert_eq!(bits("0x1.0000000000000003p0"), ONE + 2);
        // Next to the largest value: half way overflows (ties to even), just below does not.
        assert_eq!(parse("0x1.ffffffffffffffffp16383"), None);
        assert_eq!(bits("0x1.fffffffffffffffefffffp16383"), MAX);
        assert_eq!(bits("1.18973149535723176502e4932"), MAX);
    }

    #[test]
    fn subnormals_and_underflow() {
        assert_eq!(bits("3.6451995318824746025e-4951"), MIN_SUBNORMAL);
        assert_eq!(bits("-3.6e-4951"), MIN_SUBNORMAL | 1 << 79);
        // Half the smallest subnormal rounds to zero (a range error), a bit more rounds up.
        assert_eq!(parse("0x1p-16446"), None);
        assert_eq!(bits("0x1.0000000001p-16446"), MIN_SUBNORMAL);
        assert_eq!(parse("1.8e-4951"), None);
        assert_eq!(bits("1.9e-4951"), MIN_SUBNORMAL);
        // 1.5 and 2.5 smallest subnormals: ties to even.
        assert_eq!(bits("0x3p-16446"), 2);
        assert_eq!(bits("0x5p-16446"), 2);
        assert_eq!(bits("0x7p-16446"), 4);
        // The largest subnormal, and the step into the normal range.
        assert_eq!(bits("0x0.fffffffffffffffep-16382"), 0x7fff_ffff_ffff_ffff);
        assert_eq!(bits("0x0.ffffffffffffffffp-16382"), MIN_NORMAL);
        // Adding subnormals is exact.
        let min = parse("0x1p-16445").expect("parses");
        assert_eq!(min.add(min).map(LongDouble::to_bits), Some(2));
        let big_sub = parse("0x0.fffffffffffffffep-16382").expect("parses");
        assert_eq!(big_sub.add(min).map(LongDouble::to_bits), Some(MIN_NORMAL));
        assert_eq!(human("0x1p-16445"), "0");
        assert_eq!(human("-0x1p-16445"), "0");
    }

    #[test]
    fn addition_rounds_to_nearest_even() {
        let human_sum = |a, b| String::from_utf8(sum(a, b).expect("not NaN").to_human());
        assert_eq!(human_sum("0.1", "0.2").as_deref(), Ok("0.3"));
        assert_eq!(
            human_sum("9223372036854775807", "0").as_deref(),
            Ok("9223372036854775807")
        );
        assert_eq!(sum("1", "0x1p-64").map(LongDouble::to_bits), Some(ONE));
        assert_eq!(
            sum("0x1.0000000000000002p0", "0x1p-64").map(LongDouble::to_bits),
            Some(ONE + 2)
        );
        assert_eq!(sum("1", "1e-4000").map(LongDouble::to_bits), Some(ONE));
        // Just below 1 the step is 2^-64: 1 - 2^-65 is a tie (to 1, even), a hair more is not.
        assert_eq!(sum("1", "-0x1p-65").map(LongDouble::to_bits), Some(ONE));
        assert_eq!(
            sum("1", "-0x1.0000000000000002p-65").map(LongDouble::to_bits),
            Some(0x3ffe_ffff_ffff_ffff_ffff)
        );
        assert_eq!(
            sum("18446744073709551616", "-1e-30").map(LongDouble::to_human),
            Some(b"18446744073709551616".to_vec())
        );
        // Signs of zero.
        assert_eq!(sum("1", "-1").map(LongDouble::to_bits), Some(0));
        assert_eq!(sum("-0", "-0").map(LongDouble::to_bits), Some(1 << 79));
        assert_eq!(sum("-0", "0").map(LongDouble::to_bits), Some(0));
        assert_eq!(
            sum("-0", "-2").map(LongDouble::to_bits),
            Some(0x4000_8000_0000_0000_0000 | 1 << 79)
        );
    }

    #[test]
    fn overflow_and_infinities() {
        assert_eq!(
            sum("1e4932", "1e4932").map(LongDouble::is_finite),
            Some(false)
        );
        assert_eq!(sum("-1e4932", "-1e4932"), Some(LongDouble::infinity(true)));
        // The largest value plus less than half its last place stays finite.
        assert_eq!(
            sum("0x1.fffffffffffffffep16383", "0x1p16318").map(LongDouble::to_bits),
            Some(MAX)
        );
        assert_eq!(
            sum("0x1.fffffffffffffffep16383", "0x1p16319").map(LongDouble::is_finite),
            Some(false)
        );
        assert_eq!(sum("inf", "1"), Some(LongDouble::infinity(false)));
        assert_eq!(sum("inf", "-inf"), None);
        assert_eq!(sum("-inf", "-inf"), Some(LongDouble::infinity(true)));
    }

    #[test]
    fn printing_as_percent_17lf_trimmed() {
        assert_eq!(human("10.5"), "10.5");
        assert_eq!(human("5.0e3"), "5000");
        assert_eq!(human("0.1"), "0.1");
        assert_eq!(human("-0"), "0");
        assert_eq!(human("-1e-18"), "0");
        assert_eq!(human("-6e-18"), "-0.00000000000000001");
        assert_eq!(human("1e-17"), "0.00000000000000001");
        assert_eq!(human("1.5"), "1.5");
        assert_eq!(human("1e20"), "100000000000000000000");
        assert_eq!(human("0x1p64"), "18446744073709551616");
        assert_eq!(human("0x1p100"), "1267650600228229401496703205376");
        // 2^-18 and 3 × 2^-18 end in an exact 5 at the 18th decimal: ties to even.
        assert_eq!(human("0x1p-18"), "0.00000381469726562");
        assert_eq!(human("0x3p-18"), "0.00001144409179688");
        assert_eq!(human("inf"), "inf");
        assert_eq!(human("-inf"), "-inf");
        let max = human("0x1.fffffffffffffffep16383");
        assert_eq!(max.len(), 4933);
        assert!(
            max.starts_with("118973149535723176502126385303097020516"),
            "{max}"
        );
        assert!(max.ends_with("1989770240"), "{max}");
    }

    #[test]
    fn u128_and_big_integer_paths_agree() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..20_000 {
            let wide = (u128::from(next()) << 64) | u128::from(next());
            let d = match i % 3 {
                0 => wide % 10u128.pow(38),
                1 => u128::from(next() >> (next() % 64)),
                _ => (wide >> 1) >> (next() % 127),
            }
            .max(1);
            let scale = i64::try_from(next() % 64).expect("small") - 25;
            let Some(fast) = small_decimal(false, d, scale) else {
                continue;
            };
            let big = Big {
                limbs: vec![d as u64, (d >> 64) as u64],
            };
            let mut big = big;
            big.trim();
            assert_eq!(fast, big_decimal(false, big, scale), "{d}e{scale}");
        }
    }

    #[test]
    fn big_integer_arithmetic() {
        let mut n = Big::pow5(100);
        let copy = n.clone();
        n.mul_small(3);
        n.sub_assign(&copy);
        n.sub_assign(&copy);
        assert_eq!(n.cmp(&copy), Ordering::Equal);
        assert_eq!(Big::pow5(3).into_decimal(), b"125");
        assert_eq!(Big::from_u64(0).into_decimal(), b"0");
        let big = Big::from_u64(1).shl(200);
        assert_eq!(
            big.clone().into_decimal(),
            b"1606938044258990275541962092341162602522202993782792835301376"
        );
        let (q, r) = divide(big.clone(), &Big::pow5(80));
        assert_eq!(q, 19426);
        assert!(r.cmp(&Big::pow5(80)) == Ordering::Less);
        let mut halved = big;
        halved.shr1();
        assert_eq!(halved.bit_len(), 200);
    }
}
