//! Hashes.

use super::{Ctx, Route, Spec, bulk_array, bulk_or_null, count, spec};

pub(super) fn specs() -> Vec<Spec> {
    let k = Route::Key;
    vec![
        spec("hset", -4, k, hset),
        spec("hmset", -4, k, hmset),
        spec("hsetnx", 4, k, hsetnx),
        spec("hget", 3, k, hget),
        spec("hmget", -3, k, hmget),
        spec("hdel", -3, k, hdel),
        spec("hgetall", 2, k, hgetall),
        spec("hlen", 2, k, hlen),
        spec("hexists", 3, k, hexists),
        spec("hkeys", 2, k, hkeys),
        spec("hvals", 2, k, hvals),
        spec("hincrby", 4, k, hincrby),
        spec("hincrbyfloat", 4, k, hincrbyfloat),
        spec("hstrlen", 3, k, hstrlen),
        spec("hscan", -3, k, hscan),
        spec("hrandfield", -2, k, hrandfield),
    ]
}

fn pairs(args: &[bytes::Bytes]) -> Option<Vec<(&[u8], &[u8])>> {
    if !args.len().is_multiple_of(2) {
        return None;
    }
    Some(
        args[2..]
            .chunks(2)
            .map(|p| (&p[0][..], &p[1][..]))
            .collect(),
    )
}

fn hset(ctx: &mut Ctx<'_>) {
    let Some(p) = pairs(ctx.args) else {
        let name = ctx.args[0].clone();
        return super::wrong_arity(&name, &mut ctx.out);
    };
    let r = ctx.store.hset(&ctx.args[1], &p);
    ctx.reply(r, count);
}

fn hmset(ctx: &mut Ctx<'_>) {
    let Some(p) = pairs(ctx.args) else {
        let name = ctx.args[0].clone();
        return super::wrong_arity(&name, &mut ctx.out);
    };
    let r = ctx.store.hset(&ctx.args[1], &p);
    ctx.reply(r, |out, _| out.ok());
}

fn hsetnx(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hsetnx(&ctx.args[1], &ctx.args[2], &ctx.args[3]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}

fn hget(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hget(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, bulk_or_null);
}

fn fields(args: &[bytes::Bytes], from: usize) -> Vec<&[u8]> {
    args[from..].iter().map(|a| &a[..]).collect()
}

fn hmget(ctx: &mut Ctx<'_>) {
    let f = fields(ctx.args, 2);
    let r = ctx.store.hmget(&ctx.args[1], &f);
    ctx.reply(r, |out, values| {
        out.array_len(values.len());
        for v in values {
            bulk_or_null(out, v);
        }
    });
}

fn hdel(ctx: &mut Ctx<'_>) {
    let f = fields(ctx.args, 2);
    let r = ctx.store.hdel(&ctx.args[1], &f);
    ctx.reply(r, count);
}

fn hgetall(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hgetall(&ctx.args[1]);
    ctx.reply(r, |out, all| {
        out.map_len(all.len());
        for (f, v) in all {
            out.bulk(&f);
            out.bulk(&v);
        }
    });
}

fn hlen(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hlen(&ctx.args[1]);
    ctx.reply(r, count);
}

fn hexists(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hexists(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}

fn hkeys(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hkeys(&ctx.args[1]);
    ctx.reply(r, |out, v| bulk_array(out, &v));
}

fn hvals(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hvals(&ctx.args[1]);
    ctx.reply(r, |out, v| bulk_array(out, &v));
}

fn hincrby(ctx: &mut Ctx<'_>) {
    let Some(n) = ctx.int(3) else {
        return;
    };
    let r = ctx.store.hincrby(&ctx.args[1], &ctx.args[2], n);
    ctx.reply(r, |out, v| out.integer(v));
}

fn hincrbyfloat(ctx: &mut Ctx<'_>) {
    let Some(d) = ctx.float(3) else {
        return;
    };
    let r = ctx.store.hincrbyfloat(&ctx.args[1], &ctx.args[2], d);
    ctx.reply(r, |out, v| out.bulk(&v));
}

fn hstrlen(ctx: &mut Ctx<'_>) {
    let r = ctx.store.hstrlen(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, count);
}

fn hscan(ctx: &mut Ctx<'_>) {
    let args = ctx.args;
    let novalues = args.len() > 3 && args[args.len() - 1].eq_ignore_ascii_case(b"novalues");
    let until = args.len() - usize::from(novalues);
    let Some((cursor, pattern, count)) = super::keys::object_scan_args(ctx, args, until) else {
        return;
    };
    let r = ctx.store.hscan(&args[1], cursor, pattern, count);
    ctx.reply(r, |out, (next, pairs)| {
        out.array_len(2);
        out.bulk(next.to_string().as_bytes());
        out.array_len(pairs.len() * if novalues { 1 } else { 2 });
        for (f, v) in pairs {
            out.bulk(&f);
            if !novalues {
                out.bulk(&v);
            }
        }
    });
}

fn hrandfield(ctx: &mut Ctx<'_>) {
    let (count, with_values) = match ctx.args.len() {
        2 => (None, false),
        3 | 4 => {
            let Some(n) = ctx.int(2) else { return };
            if ctx.args.len() == 4 && !ctx.is(3, "withvalues") {
                return ctx.syntax_error();
            }
            (Some(n), ctx.args.len() == 4)
        }
        _ => return ctx.syntax_error(),
    };
    let r = ctx.store.hrandfield(&ctx.args[1], count, with_values);
    ctx.reply(r, |out, picks| match count {
        None => match picks.into_iter().next() {
            Some((f, _)) => out.bulk(&f),
            None => out.null(),
        },
        Some(_) => {
            out.array_len(picks.len() * if with_values { 2 } else { 1 });
            for (f, v) in picks {
                out.bulk(&f);
                if let Some(v) = v {
                    out.bulk(&v);
                }
            }
        }
    });
}
