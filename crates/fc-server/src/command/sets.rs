//! Sets.

use fc_shard::SetAlgebra;

use super::{Ctx, Shape, bulk_array, count};
use crate::reply::Reply;

fn members(args: &[bytes::Bytes]) -> Vec<&[u8]> {
    args[2..].iter().map(|a| &a[..]).collect()
}

pub(super) fn sadd<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let m = members(ctx.args);
    let r = ctx.store.sadd(&ctx.args[1], &m);
    ctx.reply(r, count);
}

pub(super) fn srem<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let m = members(ctx.args);
    let r = ctx.store.srem(&ctx.args[1], &m);
    ctx.reply(r, count);
}

pub(super) fn smembers<R: Reply>(ctx: &mut Ctx<'_, R>) {
    ctx.stream(Shape::Set, |store, args, v| {
        store.smembers_visit(&args[1], v)
    });
}

pub(super) fn sismember<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.sismember(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}

pub(super) fn smismember<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let m = members(ctx.args);
    let r = ctx.store.smismember(&ctx.args[1], &m);
    ctx.reply(r, |out, v| {
        out.array_len(v.len());
        for b in v {
            out.integer(i64::from(b));
        }
    });
}

pub(super) fn scard<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.scard(&ctx.args[1]);
    ctx.reply(r, count);
}

pub(super) fn spop<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let with_count = match ctx.args.len() {
        2 => None,
        3 => {
            let Some(n) = ctx.int(2) else { return };
            if n < 0 {
                return ctx
                    .out
                    .error(b"ERR value is out of range, must be positive");
            }
            Some(n as usize)
        }
        _ => return ctx.syntax_error(),
    };
    let r = ctx.store.spop(&ctx.args[1], with_count.unwrap_or(1));
    ctx.reply(r, |out, mut v| match with_count {
        None => super::bulk_or_null(out, v.pop()),
        Some(_) => {
            out.set_len(v.len());
            for m in v {
                out.bulk(&m);
            }
        }
    });
}

pub(super) fn srandmember<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let with_count = match ctx.args.len() {
        2 => None,
        3 => {
            let Some(n) = super::random_count(ctx, 2) else {
                return;
            };
            Some(n)
        }
        _ => return ctx.syntax_error(),
    };
    if with_count.is_none() {
        let r = ctx.store.srandmember(&ctx.args[1], None);
        return ctx.reply(r, |out, mut v| super::bulk_or_null(out, v.pop()));
    }
    // Picks are written as they are drawn: a count of billions stops at the output limit.
    ctx.stream(Shape::Array, |store, args, v| {
        store.srandmember_visit(&args[1], with_count, v)
    });
}

pub(super) fn sscan<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    let Some((cursor, pattern, count)) = super::keys::object_scan_args(ctx, args, args.len())
    else {
        return;
    };
    let r = ctx.store.sscan(&args[1], cursor, pattern, count);
    ctx.reply(r, |out, (next, members)| {
        out.array_len(2);
        out.bulk(next.to_string().as_bytes());
        bulk_array(out, &members);
    });
}

fn combine<R: Reply>(ctx: &mut Ctx<'_, R>, algebra: SetAlgebra) {
    let keys: Vec<&[u8]> = ctx.args[1..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.set_combine(&keys, algebra);
    ctx.reply(r, |out, v| {
        out.set_len(v.len());
        for m in v {
            out.bulk(&m);
        }
    });
}

pub(super) fn sinter<R: Reply>(ctx: &mut Ctx<'_, R>) {
    combine(ctx, SetAlgebra::Intersection);
}

pub(super) fn sunion<R: Reply>(ctx: &mut Ctx<'_, R>) {
    combine(ctx, SetAlgebra::Union);
}

pub(super) fn sdiff<R: Reply>(ctx: &mut Ctx<'_, R>) {
    combine(ctx, SetAlgebra::Difference);
}

fn store<R: Reply>(ctx: &mut Ctx<'_, R>, algebra: SetAlgebra) {
    let keys: Vec<&[u8]> = ctx.args[2..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.set_store(&ctx.args[1], &keys, algebra);
    ctx.reply(r, count);
}

pub(super) fn sinterstore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    store(ctx, SetAlgebra::Intersection);
}

pub(super) fn sunionstore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    store(ctx, SetAlgebra::Union);
}

pub(super) fn sdiffstore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    store(ctx, SetAlgebra::Difference);
}

pub(super) fn smove<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.smove(&ctx.args[1], &ctx.args[2], &ctx.args[3]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}
