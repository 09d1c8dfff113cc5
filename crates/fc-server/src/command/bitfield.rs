//! `BITFIELD` and `BITFIELD_RO`: integers of 1 to 64 bits (`u1`..`u63`, `i1`..`i64`) at any
//! bit offset of a string, with Redis's overflow control (`WRAP`, `SAT`, `FAIL`).
//!
//! As in Redis, every operation is parsed before the key is read (a syntax error wins over
//! WRONGTYPE); a command with a write grows the string with zero bytes to its highest written
//! bit before any operation runs, so even a `FAIL`ed `SET` creates or extends the key; bits are
//! numbered from the most significant bit of byte 0.

use fc_shard::{SetExpiry, SetOptions};

use super::Ctx;
use crate::reply::Reply;

/// Redis's limit on a bit offset: inside a 512 MiB string.
const MAX_BIT_OFFSET: u64 = 512 * 1024 * 1024 * 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Set,
    IncrBy,
}

#[derive(Clone, Copy)]
struct Op {
    kind: Kind,
    signed: bool,
    bits: u32,
    offset: u64,
    /// SET's value or INCRBY's increment.
    value: i64,
    overflow: Overflow,
}

/// `i8`, `u16`...: (signed, bits), or Redis's error.
fn encoding(arg: &[u8]) -> Option<(bool, u32)> {
    let (&first, digits) = arg.split_first()?;
    let signed = match first.to_ascii_lowercase() {
        b'i' => true,
        b'u' => false,
        _ => return None,
    };
    let bits: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    let max = if signed { 64 } else { 63 };
    (digits.first().is_some_and(u8::is_ascii_digit) && (1..=max).contains(&bits))
        .then_some((signed, bits))
}

/// A bit offset: a number, or `#n` for the n-th field of this width.
fn offset(arg: &[u8], bits: u32) -> Option<u64> {
    let (by_field, digits) = match arg.split_first() {
        Some((b'#', rest)) => (true, rest),
        _ => (false, arg),
    };
    let n = u64::try_from(fc_resp::number::parse_i64(digits)?).ok()?;
    let n = if by_field {
        n.checked_mul(u64::from(bits))?
    } else {
        n
    };
    (n < MAX_BIT_OFFSET).then_some(n)
}

/// Parses the operations; `None` after replying Redis's error.
fn parse<R: Reply>(ctx: &mut Ctx<'_, R>, read_only: bool) -> Option<Vec<Op>> {
    let args = ctx.args;
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let word = args[i].to_ascii_lowercase();
        let kind = match word.as_slice() {
            b"get" if left >= 2 => Kind::Get,
            b"set" if left >= 3 => Kind::Set,
            b"incrby" if left >= 3 => Kind::IncrBy,
            b"overflow" if left >= 1 => {
                overflow = match args[i + 1].to_ascii_lowercase().as_slice() {
                    b"wrap" => Overflow::Wrap,
                    b"sat" => Overflow::Sat,
                    b"fail" => Overflow::Fail,
                    _ => {
                        ctx.out.error(b"ERR Invalid OVERFLOW type specified");
                        return None;
                    }
                };
                i += 2;
                continue;
            }
            _ => {
                ctx.syntax_error();
                return None;
            }
        };
        let Some((signed, bits)) = encoding(&args[i + 1]) else {
            ctx.out.error(
                b"ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
            );
            return None;
        };
        let Some(offset) = offset(&args[i + 2], bits) else {
            ctx.out
                .error(b"ERR bit offset is not an integer or out of range");
            return None;
        };
        let mut value = 0;
        if kind != Kind::Get {
            value = ctx.int(i + 3)?;
        }
        ops.push(Op {
            kind,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        i += if kind == Kind::Get { 3 } else { 4 };
    }
    if read_only && ops.iter().any(|op| op.kind != Kind::Get) {
        ctx.out
            .error(b"ERR BITFIELD_RO only supports the GET subcommand");
        return None;
    }
    Some(ops)
}

/// The `bits`-bit unsigned integer at bit `offset` (bits past the end read as 0).
fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in 0..u64::from(bits) {
        let bit = offset + j;
        let byte = s.get((bit >> 3) as usize).copied().unwrap_or(0);
        v = (v << 1) | u64::from((byte >> (7 - (bit & 7))) & 1);
    }
    v
}

fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` bits of `v` at bit `offset` (the string is long enough).
fn set_bits(s: &mut [u8], offset: u64, bits: u32, v: u64) {
    for j in 0..u64::from(bits) {
        let bit = offset + j;
        let on = (v >> (u64::from(bits) - 1 - j)) & 1 == 1;
        let byte = &mut s[(bit >> 3) as usize];
        let mask = 1u8 << (7 - (bit & 7));
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Redis's `checkSignedBitfieldOverflow`: `None` when `value + incr` fits; else the value
/// `WRAP`/`SAT` give (`FAIL`: `Some(None)`).
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<i64>> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_incr = max.wrapping_sub(value);
    let min_incr = min.wrapping_sub(value);
    let over = value > max
        || (bits != 64 && incr > max_incr)
        || (value >= 0 && incr > 0 && incr > max_incr);
    let under = !over
        && (value < min
            || (bits != 64 && incr < min_incr)
            || (value < 0 && incr < 0 && incr < min_incr));
    if !over && !under {
        return None;
    }
    Some(match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if over { max } else { min }),
        Overflow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let msb = 1u64 << (bits - 1);
                let mask = u64::MAX << bits;
                if c & msb != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            Some(c as i64)
        }
    })
}

/// Redis's `checkUnsignedBitfieldOverflow`.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<u64>> {
    let max: u64 = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = (value as i64).wrapping_neg();
    let over = value > max || (incr > 0 && incr > max_incr);
    let under = !over && incr < 0 && incr < min_incr;
    if !over && !under {
        return None;
    }
    Some(match ow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if over { max } else { 0 }),
        Overflow::Wrap => {
            let c = value.wrapping_add(incr as u64);
            Some(if bits < 64 { c & max } else { c })
        }
    })
}

fn bitfield_generic<R: Reply>(ctx: &mut Ctx<'_, R>, read_only: bool) {
    let Some(ops) = parse(ctx, read_only) else {
        return;
    };
    let current = match ctx.store.get_string(&ctx.args[1]) {
        Ok(v) => v,
        Err(e) => return ctx.store_error(&e),
    };
    let writes = ops.iter().any(|op| op.kind != Kind::Get);
    let mut value = current.clone().unwrap_or_default();
    // A write grows the string to its highest written bit first.
    let needed = ops
        .iter()
        .filter(|op| op.kind != Kind::Get)
        .map(|op| ((op.offset + u64::from(op.bits) - 1) >> 3) + 1)
        .max()
        .unwrap_or(0);
    if writes && needed as usize > value.len() {
        value.resize(needed as usize, 0);
    }
    // Every operation runs before anything is replied: a failed write (out of memory) is the
    // whole reply.
    let mut results: Vec<Option<i64>> = Vec::with_capacity(ops.len());
    for op in &ops {
        let result = match (op.kind, op.signed) {
            (Kind::Get, true) => Some(get_signed(&value, op.offset, op.bits)),
            (Kind::Get, false) => Some(get_unsigned(&value, op.offset, op.bits) as i64),
            (kind, true) => {
                let old = get_signed(&value, op.offset, op.bits);
                let (base, incr) = match kind {
                    Kind::IncrBy => (old, op.value),
                    _ => (op.value, 0),
                };
                let new = match signed_overflow(base, incr, op.bits, op.overflow) {
                    None => Some(base.wrapping_add(incr)),
                    Some(v) => v,
                };
                new.map(|new| {
                    set_bits(&mut value, op.offset, op.bits, new as u64);
                    if kind == Kind::IncrBy { new } else { old }
                })
            }
            (kind, false) => {
                let old = get_unsigned(&value, op.offset, op.bits);
                let (base, incr) = match kind {
                    Kind::IncrBy => (old, op.value),
                    _ => (op.value as u64, 0),
                };
                let new = match unsigned_overflow(base, incr, op.bits, op.overflow) {
                    None => Some(base.wrapping_add(incr as u64)),
                    Some(v) => v,
                };
                new.map(|new| {
                    set_bits(&mut value, op.offset, op.bits, new);
                    (if kind == Kind::IncrBy { new } else { old }) as i64
                })
            }
        };
        results.push(result);
    }
    if writes && current.as_deref() != Some(&value[..]) {
        let options = SetOptions {
            expiry: SetExpiry::Keep,
            ..SetOptions::default()
        };
        if let Err(e) = ctx.store.set_with(&ctx.args[1], &value, options) {
            return ctx.store_error(&e);
        }
    }
    ctx.out.array_len(results.len());
    for r in results {
        match r {
            Some(n) => ctx.out.integer(n),
            None => ctx.out.null(),
        }
    }
}

/// `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] ...`.
pub(super) fn bitfield<R: Reply>(ctx: &mut Ctx<'_, R>) {
    bitfield_generic(ctx, false);
}

/// `BITFIELD_RO key [GET type offset] ...`.
pub(super) fn bitfield_ro<R: Reply>(ctx: &mut Ctx<'_, R>) {
    bitfield_generic(ctx, true);
}
