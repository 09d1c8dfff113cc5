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
                let scale = if word[0] == b'e' { 1000 } else { 1 };
                let Some(ms) = positive_ms(ctx, i + 1, scale) else {
                    return;
                };
                options.expiry = if word.len() == 2 {
                    SetExpiry::InMs(ms)
                } else {
                    SetExpiry::AtMs(ms)
                };
                expiry_given = true;
                i += 1;
            }
            _ => return ctx.syntax_error(),
        }
        i += 1;
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
    let r = ctx.store.incr_by(&ctx.args[1], delta);
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

pub(super) fn incrbyfloat<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(delta) = ctx.float(2) else {
        return;
    };
    let r = ctx.store.incr_by_float(&ctx.args[1], delta);
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
