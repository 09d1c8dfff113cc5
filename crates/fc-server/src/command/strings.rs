//! Strings: GET, SET and its options, counters, ranges, MGET/MSET parts.

use fc_shard::{GetExExpiry, SetCondition, SetExpiry, SetOptions};

use super::{Ctx, bulk_or_null, count};
use crate::reply::Reply;

pub(super) fn get<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let route = ctx.key_route();
    // Encoded straight from the store's memory: no copy of the value on the way.
    match ctx.store.get_string_view_routed(&route, &ctx.args[1]) {
        Ok(Some(v)) => ctx.out.bulk(v),
        Ok(None) => ctx.out.null(),
        Err(e) => super::store_error(ctx.out, &e),
    }
}

/// `MGET`'s part: a key of another type reads as nil.
pub(super) fn mget_one<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let v = ctx.store.get_string(&ctx.args[1]).unwrap_or(None);
    bulk_or_null(ctx.out, v);
}

/// `MSET`'s part.
pub(super) fn mset_one<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.try_set(&ctx.args[1], &ctx.args[2], None);
    ctx.reply(r, |out, ()| out.ok());
}

pub(super) fn invalid_expire<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let name = String::from_utf8_lossy(&ctx.args[0]).to_ascii_lowercase();
    ctx.out
        .error(format!("ERR invalid expire time in '{name}' command").as_bytes());
}

/// A positive time argument in ms (`scale` 1000 for seconds), or Redis's error.
fn positive_ms<R: Reply>(ctx: &mut Ctx<'_, R>, i: usize, scale: i64) -> Option<u64> {
    let n = ctx.int(i)?;
    match n.checked_mul(scale) {
        Some(ms) if n > 0 => Some(ms as u64),
        _ => {
            invalid_expire(ctx);
            None
        }
    }
}

pub(super) fn set<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut options = SetOptions::default();
    let mut expiry_given = false;
    // EX/PX/EXAT/PXAT's argument, checked once every option has been read (as Redis does).
    let mut expiry_at = None;
    let mut i = 3;
    while i < ctx.args.len() {
        let word = ctx.args[i].to_ascii_lowercase();
        let has_value = i + 1 < ctx.args.len();
        match word.as_slice() {
            b"nx" if options.condition == SetCondition::Always => {
                options.condition = SetCondition::IfAbsent;
            }
            b"xx" if options.condition == SetCondition::Always => {
                options.condition = SetCondition::IfPresent;
            }
            b"get" => options.get = true,
            b"keepttl" if !expiry_given => {
                options.expiry = SetExpiry::Keep;
                expiry_given = true;
            }
            b"ex" | b"px" | b"exat" | b"pxat" if !expiry_given && has_value => {
                expiry_at = Some((i, word));
                expiry_given = true;
                i += 1;
            }
            _ => return ctx.syntax_error(),
        }
        i += 1;
    }
    if let Some((i, word)) = expiry_at {
        let scale = if word[0] == b'e' { 1000 } else { 1 };
        let Some(ms) = positive_ms(ctx, i + 1, scale) else {
            return;
        };
        options.expiry = if word.len() == 2 {
            SetExpiry::InMs(ms)
        } else {
            SetExpiry::AtMs(ms)
        };
    }
    let route = ctx.key_route();
    let r = ctx
        .store
        .set_with_routed(&route, &ctx.args[1], &ctx.args[2], options);
    ctx.reply(r, |out, outcome| {
        if options.get {
            bulk_or_null(out, outcome.previous);
        } else if outcome.written {
            out.ok();
        } else {
            out.null();
        }
    });
}

pub(super) fn setnx<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let options = SetOptions {
        condition: SetCondition::IfAbsent,
        ..SetOptions::default()
    };
    let r = ctx.store.set_with(&ctx.args[1], &ctx.args[2], options);
    ctx.reply(r, |out, o| out.integer(i64::from(o.written)));
}

fn set_in<R: Reply>(ctx: &mut Ctx<'_, R>, scale: i64) {
    let Some(ms) = positive_ms(ctx, 2, scale) else {
        return;
    };
    let options = SetOptions {
        expiry: SetExpiry::InMs(ms),
        ..SetOptions::default()
    };
    let r = ctx.store.set_with(&ctx.args[1], &ctx.args[3], options);
    ctx.reply(r, |out, _| out.ok());
}

pub(super) fn setex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    set_in(ctx, 1000);
}

pub(super) fn psetex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    set_in(ctx, 1);
}

pub(super) fn getset<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.get_set(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, bulk_or_null);
}

pub(super) fn getdel<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.get_del(&ctx.args[1]);
    ctx.reply(r, bulk_or_null);
}

/// `GETEX key [EX s|PX ms|EXAT ts|PXAT ts-ms|PERSIST]`: the options' syntax first, then the
/// key (missing: nil, another type: WRONGTYPE), then the time (Redis's order).
pub(super) fn getex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let expiry = match ctx.args.len() {
        2 => GetExExpiry::Keep,
        3 if ctx.is(2, "persist") => GetExExpiry::Persist,
        4 => {
            let word = ctx.args[2].to_ascii_lowercase();
            let scale = match word.as_slice() {
                b"ex" | b"exat" => 1000,
                b"px" | b"pxat" => 1,
                _ => return ctx.syntax_error(),
            };
            let valid = fc_resp::number::parse_i64(&ctx.args[3])
                .and_then(|n| n.checked_mul(scale).filter(|_| n > 0));
            if valid.is_none() {
                // The key decides first: nil when missing, WRONGTYPE for another type.
                match ctx.store.get_string(&ctx.args[1]) {
                    Ok(None) => return ctx.out.null(),
                    Err(e) => return ctx.store_error(&e),
                    Ok(Some(_)) => {}
                }
            }
            let Some(ms) = positive_ms(ctx, 3, scale) else {
                return;
            };
            if word.len() == 2 {
                GetExExpiry::InMs(ms)
            } else {
                GetExExpiry::AtMs(ms)
            }
        }
        _ => return ctx.syntax_error(),
    };
    let r = ctx.store.get_ex(&ctx.args[1], expiry);
    ctx.reply(r, bulk_or_null);
}

pub(super) fn append<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.append(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, count);
}

pub(super) fn strlen<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.strlen(&ctx.args[1]);
    ctx.reply(r, count);
}

fn incr_by<R: Reply>(ctx: &mut Ctx<'_, R>, delta: i64) {
    let route = ctx.key_route();
    let r = ctx.store.routed(route).incr_by(&ctx.args[1], delta);
    ctx.reply(r, |out, n| out.integer(n));
}

pub(super) fn incr<R: Reply>(ctx: &mut Ctx<'_, R>) {
    incr_by(ctx, 1);
}

pub(super) fn decr<R: Reply>(ctx: &mut Ctx<'_, R>) {
    incr_by(ctx, -1);
}

pub(super) fn incrby<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if let Some(n) = ctx.int(2) {
        incr_by(ctx, n);
    }
}

pub(super) fn decrby<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(n) = ctx.int(2) else {
        return;
    };
    match n.checked_neg() {
        Some(n) => incr_by(ctx, n),
        None => ctx.out.error(b"ERR decrement would overflow"),
    }
}

/// The store reads the increment (as Redis does, a `long double`, after the type check) and
/// answers "ERR value is not a valid float" for one that is not a float.
pub(super) fn incrbyfloat<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.incr_by_float(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, |out, v| out.bulk(&v));
}

pub(super) fn getrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(start) = ctx.int(2) else {
        return;
    };
    let Some(end) = ctx.int(3) else {
        return;
    };
    let r = ctx.store.get_range(&ctx.args[1], start, end);
    ctx.reply(r, |out, v| out.bulk(&v));
}

pub(super) fn setrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(offset) = ctx.int(2) else {
        return;
    };
    let r = ctx.store.set_range(&ctx.args[1], offset, &ctx.args[3]);
    ctx.reply(r, count);
}

pub(super) fn msetnx<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if ctx.args.len().is_multiple_of(2) {
        return super::wrong_arity(&ctx.args[0].clone(), ctx.out);
    }
    let pairs: Vec<(&[u8], &[u8])> = ctx.args[1..]
        .chunks(2)
        .map(|p| (&p[0][..], &p[1][..]))
        .collect();
    let r = ctx.store.msetnx(&pairs);
    ctx.reply(r, |out, done| out.integer(i64::from(done)));
}

/// A bit offset of `SETBIT`/`GETBIT`: below 2^32 (a string is at most 512 MiB).
fn bit_offset<R: Reply>(ctx: &mut Ctx<'_, R>, i: usize) -> Option<u64> {
    let n = fc_resp::number::parse_i64(&ctx.args[i]).filter(|n| (0..1i64 << 32).contains(n));
    if n.is_none() {
        ctx.out
            .error(b"ERR bit offset is not an integer or out of range");
    }
    n.map(|n| n as u64)
}

/// The byte holding bit `offset` of `key`'s string (0 past its end or when missing).
fn byte_at<R: Reply>(ctx: &mut Ctx<'_, R>, offset: u64) -> Option<u8> {
    let byte = (offset >> 3) as i64;
    match ctx.store.get_range(&ctx.args[1], byte, byte) {
        Ok(v) => Some(v.first().copied().unwrap_or(0)),
        Err(e) => {
            ctx.store_error(&e);
            None
        }
    }
}

pub(super) fn setbit<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(offset) = bit_offset(ctx, 2) else {
        return;
    };
    let bit = match &ctx.args[3][..] {
        b"0" => false,
        b"1" => true,
        _ => return ctx.out.error(b"ERR bit is not an integer or out of range"),
    };
    let Some(old) = byte_at(ctx, offset) else {
        return;
    };
    let mask = 0x80u8 >> (offset & 7);
    let new = if bit { old | mask } else { old & !mask };
    // Grows the string with zero bytes up to the offset, keeping its TTL (as SETRANGE).
    let r = ctx
        .store
        .set_range(&ctx.args[1], (offset >> 3) as i64, &[new]);
    ctx.reply(r, |out, _| out.integer(i64::from(old & mask != 0)));
}

pub(super) fn getbit<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(offset) = bit_offset(ctx, 2) else {
        return;
    };
    if let Some(byte) = byte_at(ctx, offset) {
        ctx.out
            .integer(i64::from(byte & (0x80u8 >> (offset & 7)) != 0));
    }
}

/// `start end` normalized as Redis does for `BITCOUNT`/`BITPOS` over `len` units: negative
/// from the end, clamped; `None` when the range is empty.
fn bit_range(start: i64, end: i64, len: i64) -> Option<(i64, i64)> {
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    (len > 0 && start <= end).then_some((start, end))
}

/// Whether bit `i` (from the most significant bit of byte 0) of `bytes` is set.
fn bit(bytes: &[u8], i: i64) -> bool {
    bytes[(i >> 3) as usize] & (0x80u8 >> (i & 7)) != 0
}

/// `BYTE` (the default) or `BIT` at argument `i`: whether it is `BIT`; `None` after a syntax
/// error.
fn bit_unit<R: Reply>(ctx: &mut Ctx<'_, R>, i: usize) -> Option<bool> {
    match ctx.args.get(i) {
        None => Some(false),
        Some(a) if a.eq_ignore_ascii_case(b"byte") => Some(false),
        Some(a) if a.eq_ignore_ascii_case(b"bit") => Some(true),
        Some(_) => {
            ctx.syntax_error();
            None
        }
    }
}

/// `key`'s string for `BITCOUNT`/`BITPOS`: `Err(())` after replying (another type); `None`
/// when missing.
fn bit_string<R: Reply>(ctx: &mut Ctx<'_, R>) -> Result<Option<Vec<u8>>, ()> {
    ctx.store
        .get_string(&ctx.args[1])
        .map_err(|e| ctx.store_error(&e))
}

/// `BITCOUNT key [start end [BYTE|BIT]]`. As in Redis 7.0 and 7.2, the key is looked up before
/// the arguments are read (a missing key counts 0 whatever follows it).
pub(super) fn bitcount<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Ok(value) = bit_string(ctx) else { return };
    let Some(value) = value else {
        return ctx.out.integer(0);
    };
    let range = match ctx.args.len() {
        2 => None,
        4 | 5 => {
            let Some(start) = ctx.int(2) else { return };
            let Some(end) = ctx.int(3) else { return };
            // Both from the end and crossed: empty, before the unit is read (BITPOS has no
            // such rule).
            if start < 0 && end < 0 && start > end {
                return ctx.out.integer(0);
            }
            let Some(bits) = bit_unit(ctx, 4) else {
                return;
            };
            Some((start, end, bits))
        }
        _ => return ctx.syntax_error(),
    };
    let n = match range {
        None => value.iter().map(|b| u64::from(b.count_ones())).sum(),
        Some((start, end, false)) => match bit_range(start, end, value.len() as i64) {
            Some((s, e)) => value[s as usize..=e as usize]
                .iter()
                .map(|b| u64::from(b.count_ones()))
                .sum(),
            None => 0,
        },
        Some((start, end, true)) => match bit_range(start, end, value.len() as i64 * 8) {
            Some((s, e)) => (s..=e).filter(|&i| bit(&value, i)).count() as u64,
            None => 0,
        },
    };
    ctx.out.integer(n as i64);
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`: the bit argument first, then the key (a missing
/// key is all zeros), then the range (Redis 7.0 and 7.2's order).
pub(super) fn bitpos<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(wanted) = ctx.int(2) else { return };
    if !(0..=1).contains(&wanted) {
        return ctx.out.error(b"ERR The bit argument must be 1 or 0.");
    }
    let wanted = wanted == 1;
    let Ok(value) = bit_string(ctx) else { return };
    let Some(value) = value else {
        return ctx.out.integer(if wanted { -1 } else { 0 });
    };
    // Redis's order: too many arguments, the start, the unit, then the end.
    if ctx.args.len() > 6 {
        return ctx.syntax_error();
    }
    let start = match ctx.args.get(3) {
        Some(_) => match ctx.int(3) {
            Some(n) => n,
            None => return,
        },
        None => 0,
    };
    let Some(bits) = bit_unit(ctx, 5) else {
        return;
    };
    let end_given = ctx.args.len() > 4;
    let end = if end_given {
        match ctx.int(4) {
            Some(n) => n,
            None => return,
        }
    } else {
        -1
    };
    let unit = if bits { 1 } else { 8 };
    let Some((s, e)) = bit_range(start, end, value.len() as i64 * 8 / unit) else {
        return ctx.out.integer(-1);
    };
    let (first, last) = (s * unit, e * unit + unit - 1);
    match (first..=last).find(|&i| bit(&value, i) == wanted) {
        Some(i) => ctx.out.integer(i),
        // Looking for a 0 past a string of ones with no end given: the bit after the string.
        None if !wanted && !end_given => ctx.out.integer(value.len() as i64 * 8),
        None => ctx.out.integer(-1),
    }
}
