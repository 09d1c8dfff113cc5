//! Hashes.

use fc_shard::HashPart;

use super::{Ctx, Shape, Stream, bulk_or_null, count};
use crate::reply::Reply;

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

pub(super) fn hset<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(p) = pairs(ctx.args) else {
        let name = ctx.args[0].clone();
        return super::wrong_arity(&name, ctx.out);
    };
    let r = ctx.store.hset(&ctx.args[1], &p);
    ctx.reply(r, count);
}

pub(super) fn hmset<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(p) = pairs(ctx.args) else {
        let name = ctx.args[0].clone();
        return super::wrong_arity(&name, ctx.out);
    };
    let r = ctx.store.hset(&ctx.args[1], &p);
    ctx.reply(r, |out, _| out.ok());
}

pub(super) fn hsetnx<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.hsetnx(&ctx.args[1], &ctx.args[2], &ctx.args[3]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}

pub(super) fn hget<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.hget(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, bulk_or_null);
}

fn fields(args: &[bytes::Bytes], from: usize) -> Vec<&[u8]> {
    args[from..].iter().map(|a| &a[..]).collect()
}

pub(super) fn hmget<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let f = fields(ctx.args, 2);
    let r = ctx.store.hmget(&ctx.args[1], &f);
    ctx.reply(r, |out, values| {
        out.array_len(values.len());
        for v in values {
            bulk_or_null(out, v);
        }
    });
}

pub(super) fn hdel<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let f = fields(ctx.args, 2);
    let r = ctx.store.hdel(&ctx.args[1], &f);
    ctx.reply(r, count);
}

pub(super) fn hgetall<R: Reply>(ctx: &mut Ctx<'_, R>) {
    ctx.stream(Shape::Map, |store, args, v| {
        store.hash_visit(&args[1], HashPart::Pairs, v)
    });
}

pub(super) fn hlen<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.hlen(&ctx.args[1]);
    ctx.reply(r, count);
}

pub(super) fn hexists<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.hexists(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, |out, b| out.integer(i64::from(b)));
}

pub(super) fn hkeys<R: Reply>(ctx: &mut Ctx<'_, R>) {
    ctx.stream(Shape::Array, |store, args, v| {
        store.hash_visit(&args[1], HashPart::Fields, v)
    });
}

pub(super) fn hvals<R: Reply>(ctx: &mut Ctx<'_, R>) {
    ctx.stream(Shape::Array, |store, args, v| {
        store.hash_visit(&args[1], HashPart::Values, v)
    });
}

pub(super) fn hincrby<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(n) = ctx.int(3) else {
        return;
    };
    let r = ctx.store.hincrby(&ctx.args[1], &ctx.args[2], n);
    ctx.reply(r, |out, v| out.integer(v));
}

/// The store reads the increment (as Redis does, a `long double`) before the key: "ERR value is
/// not a valid float" for one that is not a float, "ERR value is NaN or Infinity" for an
/// infinite one (INCRBYFLOAT has no such check).
pub(super) fn hincrbyfloat<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx
        .store
        .hincrbyfloat(&ctx.args[1], &ctx.args[2], &ctx.args[3]);
    ctx.reply(r, |out, v| out.bulk(&v));
}

pub(super) fn hstrlen<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.hstrlen(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, count);
}

pub(super) fn hscan<R: Reply>(ctx: &mut Ctx<'_, R>) {
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

pub(super) fn hrandfield<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (count, with_values) = match ctx.args.len() {
        2 => (None, false),
        3 | 4 => {
            let Some(n) = super::random_count(ctx, 2) else {
                return;
            };
            if ctx.args.len() == 4 && !ctx.is(3, "withvalues") {
                return ctx.syntax_error();
            }
            // Twice the picks would overflow Redis's reply length.
            if ctx.args.len() == 4 && n < -(i64::MAX / 2) {
                return ctx.out.error(b"ERR value is out of range");
            }
            (Some(n), ctx.args.len() == 4)
        }
        _ => return ctx.syntax_error(),
    };
    if count.is_none() {
        let r = ctx.store.hrandfield(&ctx.args[1], None, false);
        return ctx.reply(r, |out, picks| match picks.into_iter().next() {
            Some((f, _)) => out.bulk(&f),
            None => out.null(),
        });
    }
    // Picks are written as they are drawn: a count of billions stops at the output limit.
    // With values each pick is two elements (RESP2's flat field/value list).
    let mut stream = Doubled {
        inner: Stream {
            out: &mut *ctx.out,
            shape: Shape::Array,
        },
        double: with_values,
    };
    if let Err(e) = ctx
        .store
        .hrandfield_visit(&ctx.args[1], count, with_values, &mut stream)
    {
        ctx.store_error(&e);
    }
}

/// A [`Stream`] whose length counts two elements per pick (`HRANDFIELD ... WITHVALUES`).
struct Doubled<'a, R> {
    inner: Stream<'a, R>,
    double: bool,
}

impl<R: Reply> fc_shard::Visitor for Doubled<'_, R> {
    fn len(&mut self, n: usize) {
        let n = if self.double { n.saturating_mul(2) } else { n };
        self.inner.len(n);
    }

    fn item(&mut self, item: &[u8]) -> bool {
        self.inner.item(item)
    }
}
