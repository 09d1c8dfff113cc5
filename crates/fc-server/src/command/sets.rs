//! Sets.

use fc_shard::SetAlgebra;

use super::{Ctx, Route, Spec, bulk_array, count, spec};

pub(super) fn specs() -> Vec<Spec> {
    let k = Route::Key;
    vec![
        spec("sadd", -3, k, sadd),
        spec("srem", -3, k, srem),
        spec("smembers", 2, k, smembers),
        spec("sismember", 3, k, sismember),
        spec("smismember", -3, k, smismember),
        spec("scard", 2, k, scard),
        spec("spop", -2, k, spop),
        spec("srandmember", -2, k, srandmember),
        spec("sscan", -3, k, sscan),
        spec("sinter", -2, k, sinter),
        spec("sunion", -2, k, sunion),
        spec("sdiff", -2, k, sdiff),
        spec("sinterstore", -3, k, sinterstore),
        spec("sunionstore", -3, k, sunionstore),
        spec("sdiffstore", -3, k, sdiffstore),
        spec("smove", 4, k, smove),
    ]
}

fn members(args: &[bytes::Bytes]) -> Vec<&[u8]> {
    args[2..].iter().map(|a| &a[..]).collect()
}

fn sadd(ctx: &mut Ctx<'_>) {
    let m = members(ctx.args);
    let r = ctx.store.sadd(&ctx.args[1], &m);
    ctx.reply(r, count);
}

fn srem(ctx: &mut Ctx<'_>) {
    let m = members(ctx.args);
    let r = ctx.store.srem(&ctx.args[1], &m);
    ctx.reply(r, count);
}

fn smembers(ctx: &mut Ctx<'_>) {
    let r = ctx.store.smembers(&ctx.args[1]);
    ctx.reply(r, |out, v| {
        out.set_len(v.len());
        for m in v {
            out.bulk(&m);
        }
    });
}

fn sismember(ctx: &mut Ctx<'_>) {
    let r = ctx.store.sismember(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}

fn smismember(ctx: &mut Ctx<'_>) {
    let m = members(ctx.args);
    let r = ctx.store.smismember(&ctx.args[1], &m);
    ctx.reply(r, |out, v| {
        out.array_len(v.len());
        for b in v {
            out.integer(i64::from(b));
        }
    });
}

fn scard(ctx: &mut Ctx<'_>) {
    let r = ctx.store.scard(&ctx.args[1]);
    ctx.reply(r, count);
}

fn spop(ctx: &mut Ctx<'_>) {
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

fn srandmember(ctx: &mut Ctx<'_>) {
    let with_count = match ctx.args.len() {
        2 => None,
        3 => {
            let Some(n) = ctx.int(2) else { return };
            Some(n)
        }
        _ => return ctx.syntax_error(),
    };
    let r = ctx.store.srandmember(&ctx.args[1], with_count);
    ctx.reply(r, |out, mut v| match with_count {
        None => super::bulk_or_null(out, v.pop()),
        Some(_) => bulk_array(out, &v),
    });
}

fn sscan(ctx: &mut Ctx<'_>) {
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

fn combine(ctx: &mut Ctx<'_>, algebra: SetAlgebra) {
    let keys: Vec<&[u8]> = ctx.args[1..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.set_combine(&keys, algebra);
    ctx.reply(r, |out, v| {
        out.set_len(v.len());
        for m in v {
            out.bulk(&m);
        }
    });
}

fn sinter(ctx: &mut Ctx<'_>) {
    combine(ctx, SetAlgebra::Intersection);
}

fn sunion(ctx: &mut Ctx<'_>) {
    combine(ctx, SetAlgebra::Union);
}

fn sdiff(ctx: &mut Ctx<'_>) {
    combine(ctx, SetAlgebra::Difference);
}

fn store(ctx: &mut Ctx<'_>, algebra: SetAlgebra) {
    let keys: Vec<&[u8]> = ctx.args[2..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.set_store(&ctx.args[1], &keys, algebra);
    ctx.reply(r, count);
}

fn sinterstore(ctx: &mut Ctx<'_>) {
    store(ctx, SetAlgebra::Intersection);
}

fn sunionstore(ctx: &mut Ctx<'_>) {
    store(ctx, SetAlgebra::Union);
}

fn sdiffstore(ctx: &mut Ctx<'_>) {
    store(ctx, SetAlgebra::Difference);
}

fn smove(ctx: &mut Ctx<'_>) {
    let r = ctx.store.smove(&ctx.args[1], &ctx.args[2], &ctx.args[3]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}
