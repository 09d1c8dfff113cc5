//! Lists.

use fc_shard::{InsertPosition, ListEnd, LposOptions};

use super::{Ctx, Shape, bulk_array, bulk_or_null, count};
use crate::reply::Reply;

fn push<R: Reply>(ctx: &mut Ctx<'_, R>, end: ListEnd, only_if_exists: bool) {
    let items: Vec<&[u8]> = ctx.args[2..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.push(&ctx.args[1], end, &items, only_if_exists);
    ctx.reply(r, count);
}

pub(super) fn lpush<R: Reply>(ctx: &mut Ctx<'_, R>) {
    push(ctx, ListEnd::Left, false);
}

pub(super) fn rpush<R: Reply>(ctx: &mut Ctx<'_, R>) {
    push(ctx, ListEnd::Right, false);
}

pub(super) fn lpushx<R: Reply>(ctx: &mut Ctx<'_, R>) {
    push(ctx, ListEnd::Left, true);
}

pub(super) fn rpushx<R: Reply>(ctx: &mut Ctx<'_, R>) {
    push(ctx, ListEnd::Right, true);
}

fn pop<R: Reply>(ctx: &mut Ctx<'_, R>, end: ListEnd) {
    let with_count = match ctx.args.len() {
        2 => None,
        3 => match fc_resp::number::parse_i64(&ctx.args[2]) {
            Some(n) if n >= 0 => Some(n as usize),
            // Not a number reads as out of range too (Redis's getPositiveLong...).
            _ => {
                return ctx
                    .out
                    .error(b"ERR value is out of range, must be positive");
            }
        },
        _ => return super::wrong_arity(&ctx.args[0], ctx.out),
    };
    let r = ctx.store.pop(&ctx.args[1], end, with_count.unwrap_or(1));
    ctx.reply(r, |out, popped| match (with_count, popped) {
        (None, Some(mut items)) => bulk_or_null(out, items.pop()),
        (None, None) => out.null(),
        (Some(_), Some(items)) => bulk_array(out, &items),
        (Some(_), None) => out.null_array(),
    });
}

pub(super) fn lpop<R: Reply>(ctx: &mut Ctx<'_, R>) {
    pop(ctx, ListEnd::Left);
}

pub(super) fn rpop<R: Reply>(ctx: &mut Ctx<'_, R>) {
    pop(ctx, ListEnd::Right);
}

pub(super) fn lrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(a) = ctx.int(2) else { return };
    let Some(b) = ctx.int(3) else { return };
    ctx.stream(Shape::Array, |store, args, v| {
        store.lrange_visit(&args[1], a, b, v)
    });
}

pub(super) fn llen<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.llen(&ctx.args[1]);
    ctx.reply(r, count);
}

/// Whether `key` holds a list, for the commands Redis checks the key of before their
/// arguments: `Ok(false)` when missing; `Err(())` after replying WRONGTYPE.
fn list_exists<R: Reply>(ctx: &mut Ctx<'_, R>) -> Result<bool, ()> {
    match ctx.store.llen(&ctx.args[1]) {
        Ok(n) => Ok(n > 0),
        Err(e) => {
            ctx.store_error(&e);
            Err(())
        }
    }
}

/// `LINDEX key index`: the key first (nil when missing), then the index, as in Redis.
pub(super) fn lindex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if fc_resp::number::parse_i64(&ctx.args[2]).is_none() {
        match list_exists(ctx) {
            Ok(false) => return ctx.out.null(),
            Err(()) => return,
            Ok(true) => {}
        }
    }
    let Some(i) = ctx.int(2) else { return };
    let r = ctx.store.lindex(&ctx.args[1], i);
    ctx.reply(r, bulk_or_null);
}

/// `LSET key index element`: the key first (`no such key`, WRONGTYPE), then the index.
pub(super) fn lset<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if fc_resp::number::parse_i64(&ctx.args[2]).is_none() {
        match list_exists(ctx) {
            Ok(false) => return ctx.out.error(b"ERR no such key"),
            Err(()) => return,
            Ok(true) => {}
        }
    }
    let Some(i) = ctx.int(2) else { return };
    let r = ctx.store.lset(&ctx.args[1], i, &ctx.args[3]);
    ctx.reply(r, |out, ()| out.ok());
}

pub(super) fn lrem<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(n) = ctx.int(2) else { return };
    let r = ctx.store.lrem(&ctx.args[1], n, &ctx.args[3]);
    ctx.reply(r, count);
}

pub(super) fn ltrim<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(a) = ctx.int(2) else { return };
    let Some(b) = ctx.int(3) else { return };
    let r = ctx.store.ltrim(&ctx.args[1], a, b);
    ctx.reply(r, |out, ()| out.ok());
}

pub(super) fn linsert<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let position = if ctx.is(2, "before") {
        InsertPosition::Before
    } else if ctx.is(2, "after") {
        InsertPosition::After
    } else {
        return ctx.syntax_error();
    };
    let r = ctx
        .store
        .linsert(&ctx.args[1], position, &ctx.args[3], &ctx.args[4]);
    ctx.reply(r, |out, n| out.integer(n));
}

pub(super) fn lpos<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut options = LposOptions::default();
    let mut with_count = false;
    let mut i = 3;
    while i < ctx.args.len() {
        if i + 1 >= ctx.args.len() {
            return ctx.syntax_error();
        }
        // The option's name before its value, as Redis reads them.
        if !(ctx.is(i, "rank") || ctx.is(i, "count") || ctx.is(i, "maxlen")) {
            return ctx.syntax_error();
        }
        // COUNT and MAXLEN read a non-number as negative (Redis's texts).
        let n = if ctx.is(i, "count") || ctx.is(i, "maxlen") {
            fc_resp::number::parse_i64(&ctx.args[i + 1]).unwrap_or(-1)
        } else {
            let Some(n) = ctx.int(i + 1) else { return };
            n
        };
        if ctx.is(i, "rank") {
            if n == i64::MIN {
                return ctx.out.error(
                    b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
                );
            }
            if n == 0 {
                return ctx.out.error(
                    b"ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                );
            }
            options.rank = n;
        } else if ctx.is(i, "count") {
            if n < 0 {
                return ctx.out.error(b"ERR COUNT can't be negative");
            }
            options.count = n as usize;
            with_count = true;
        } else if ctx.is(i, "maxlen") {
            if n < 0 {
                return ctx.out.error(b"ERR MAXLEN can't be negative");
            }
            options.maxlen = n as usize;
        } else {
            return ctx.syntax_error();
        }
        i += 2;
    }
    let r = ctx.store.lpos(&ctx.args[1], &ctx.args[2], options);
    ctx.reply(r, |out, found| {
        if with_count {
            out.array_len(found.len());
            for p in found {
                out.integer(p as i64);
            }
        } else {
            match found.first() {
                Some(&p) => out.integer(p as i64),
                None => out.null(),
            }
        }
    });
}

fn end_of<R: Reply>(ctx: &Ctx<'_, R>, i: usize) -> Option<ListEnd> {
    if ctx.is(i, "left") {
        Some(ListEnd::Left)
    } else if ctx.is(i, "right") {
        Some(ListEnd::Right)
    } else {
        None
    }
}

pub(super) fn lmove<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (Some(from), Some(to)) = (end_of(ctx, 3), end_of(ctx, 4)) else {
        return ctx.syntax_error();
    };
    let r = ctx.store.lmove(&ctx.args[1], &ctx.args[2], from, to);
    ctx.reply(r, bulk_or_null);
}

pub(super) fn rpoplpush<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx
        .store
        .lmove(&ctx.args[1], &ctx.args[2], ListEnd::Right, ListEnd::Left);
    ctx.reply(r, bulk_or_null);
}
