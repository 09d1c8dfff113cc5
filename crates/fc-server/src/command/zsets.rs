//! Sorted sets.

use fc_shard::{LexBound, ScoreBound, ScoredMember, ZAddOptions, ZRange};

use super::{Ctx, count, parse_float};
use crate::reply::Reply;

pub(super) fn zadd<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let mut options = ZAddOptions::default();
    let mut i = 2;
    while i < ctx.args.len() {
        match ctx.args[i].to_ascii_lowercase().as_slice() {
            b"nx" => options.only_new = true,
            b"xx" => options.only_existing = true,
            b"gt" => options.greater = true,
            b"lt" => options.less = true,
            b"ch" => options.changed = true,
            b"incr" => options.incr = true,
            _ => break,
        }
        i += 1;
    }
    let rest = &ctx.args[i..];
    if rest.is_empty() || !rest.len().is_multiple_of(2) {
        return ctx.syntax_error();
    }
    if options.only_new && options.only_existing {
        return ctx
            .out
            .error(b"ERR XX and NX options at the same time are not compatible");
    }
    if (options.greater && options.less) || ((options.greater || options.less) && options.only_new)
    {
        return ctx
            .out
            .error(b"ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if options.incr && rest.len() > 2 {
        return ctx
            .out
            .error(b"ERR INCR option supports a single increment-element pair");
    }
    let mut entries = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks(2) {
        let Some(score) = parse_float(&pair[0]) else {
            return ctx.out.error(b"ERR value is not a valid float");
        };
        entries.push((score, &pair[1][..]));
    }
    let r = ctx.store.zadd(&ctx.args[1], &entries, options);
    ctx.reply(r, |out, o| {
        if options.incr {
            match o.score {
                Some(s) => out.double(s),
                None => out.null(),
            }
        } else {
            count(out, o.count);
        }
    });
}

pub(super) fn zincrby<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(d) = ctx.float(2) else { return };
    let r = ctx.store.zincrby(&ctx.args[1], d, &ctx.args[3]);
    ctx.reply(r, |out, s| out.double(s));
}

pub(super) fn zrem<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let m: Vec<&[u8]> = ctx.args[2..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.zrem(&ctx.args[1], &m);
    ctx.reply(r, count);
}

pub(super) fn zscore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.zscore(&ctx.args[1], &ctx.args[2]);
    ctx.reply(r, |out, s| match s {
        Some(s) => out.double(s),
        None => out.null(),
    });
}

pub(super) fn zcard<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let r = ctx.store.zcard(&ctx.args[1]);
    ctx.reply(r, count);
}

fn rank<R: Reply>(ctx: &mut Ctx<'_, R>, rev: bool) {
    let with_score = match ctx.args.len() {
        3 => false,
        4 if ctx.is(3, "withscore") => true,
        _ => return ctx.syntax_error(),
    };
    let r = ctx.store.zrank(&ctx.args[1], &ctx.args[2], rev);
    ctx.reply(r, |out, found| match found {
        None if with_score => out.null_array(),
        None => out.null(),
        Some((rank, score)) if with_score => {
            out.array_len(2);
            out.integer(rank as i64);
            out.double(score);
        }
        Some((rank, _)) => out.integer(rank as i64),
    });
}

pub(super) fn zrank<R: Reply>(ctx: &mut Ctx<'_, R>) {
    rank(ctx, false);
}

pub(super) fn zrevrank<R: Reply>(ctx: &mut Ctx<'_, R>) {
    rank(ctx, true);
}

/// A score bound: `(x` exclusive, `-inf`/`+inf`.
fn score_bound(bytes: &[u8]) -> Option<ScoreBound> {
    match bytes.strip_prefix(b"(") {
        Some(rest) => parse_float(rest).map(ScoreBound::exclusive),
        None => parse_float(bytes).map(ScoreBound::inclusive),
    }
}

fn write_entries<R: Reply>(ctx: &mut Ctx<'_, R>, entries: Vec<ScoredMember>, with_scores: bool) {
    if with_scores {
        ctx.out.pairs_len(entries.len());
        for (m, s) in entries {
            ctx.out.pair();
            ctx.out.bulk(&m);
            ctx.out.double(s);
        }
    } else {
        ctx.out.array_len(entries.len());
        for (m, _) in entries {
            ctx.out.bulk(&m);
        }
    }
}

/// Writes a range the store visits in place straight into the reply (members, or pairs with
/// their scores), stopping once the sink is past the client's output limit.
struct RangeStream<'a, R> {
    out: &'a mut R,
    with_scores: bool,
}

impl<R: Reply> fc_shard::ScoredVisitor for RangeStream<'_, R> {
    fn len(&mut self, n: usize) {
        if self.with_scores {
            self.out.pairs_len(n);
        } else {
            self.out.array_len(n);
        }
    }

    fn entry(&mut self, member: &[u8], score: f64) -> bool {
        if self.with_scores {
            self.out.pair();
            self.out.bulk(member);
            self.out.double(score);
        } else {
            self.out.bulk(member);
        }
        !self.out.full()
    }
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`: picks written as they are drawn (a count of
/// billions stops at the output limit).
pub(super) fn zrandmember<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (count, with_scores) = match ctx.args.len() {
        2 => (None, false),
        3 | 4 => {
            let Some(n) = super::random_count(ctx, 2) else {
                return;
            };
            if ctx.args.len() == 4 && !ctx.is(3, "withscores") {
                return ctx.syntax_error();
            }
            let with_scores = ctx.args.len() == 4;
            // Twice the picks would overflow Redis's reply length.
            if with_scores && n < -(i64::MAX / 2) {
                return ctx.out.error(b"ERR value is out of range");
            }
            (Some(n), with_scores)
        }
        _ => return ctx.syntax_error(),
    };
    if count.is_none() {
        struct One(Option<Vec<u8>>);
        impl fc_shard::ScoredVisitor for One {
            fn len(&mut self, _n: usize) {}
            fn entry(&mut self, member: &[u8], _score: f64) -> bool {
                self.0 = Some(member.to_vec());
                false
            }
        }
        let mut one = One(None);
        return match ctx.store.zrandmember_visit(&ctx.args[1], None, &mut one) {
            Ok(()) => super::bulk_or_null(ctx.out, one.0),
            Err(e) => ctx.store_error(&e),
        };
    }
    let mut stream = RangeStream {
        out: &mut *ctx.out,
        with_scores,
    };
    if let Err(e) = ctx
        .store
        .zrandmember_visit(&ctx.args[1], count, &mut stream)
    {
        ctx.store_error(&e);
    }
}

/// Replies the range of the sorted set at `args[1]`, streamed (see [`RangeStream`]).
fn reply_range<R: Reply>(
    ctx: &mut Ctx<'_, R>,
    range: ZRange<'_>,
    rev: bool,
    limit: Option<(usize, i64)>,
    with_scores: bool,
) {
    let mut stream = RangeStream {
        out: &mut *ctx.out,
        with_scores,
    };
    if let Err(e) = ctx
        .store
        .zrange_visit(&ctx.args[1], range, rev, limit, &mut stream)
    {
        ctx.store_error(&e);
    }
}

/// What `ZRANGE`'s arguments ask for.
struct RangeArgs<'a> {
    range: ZRange<'a>,
    rev: bool,
    limit: Option<(usize, i64)>,
    with_scores: bool,
}

/// The range arguments of `ZRANGE` and `ZRANGESTORE`: the bounds at `at` and `at + 1`, then
/// `[BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]` (WITHSCORES only where
/// `scores_allowed`). `None` after replying Redis's error.
fn range_args<'a, R: Reply>(
    ctx: &mut Ctx<'a, R>,
    at: usize,
    scores_allowed: bool,
) -> Option<RangeArgs<'a>> {
    #[derive(PartialEq)]
    enum By {
        Rank,
        Score,
        Lex,
    }
    let (mut by, mut rev, mut with_scores, mut limit) = (By::Rank, false, false, None);
    let mut i = at + 2;
    while i < ctx.args.len() {
        match ctx.args[i].to_ascii_lowercase().as_slice() {
            // BYSCORE/BYLEX once, REV once (a second is a syntax error, as in Redis).
            b"byscore" if by == By::Rank => by = By::Score,
            b"bylex" if by == By::Rank => by = By::Lex,
            b"rev" if !rev => rev = true,
            b"withscores" if scores_allowed => with_scores = true,
            b"limit" if i + 2 < ctx.args.len() => {
                let offset = ctx.int(i + 1)?;
                let n = ctx.int(i + 2)?;
                // A negative offset skips everything (Redis counts it down past zero).
                limit = Some((usize::try_from(offset).unwrap_or(usize::MAX), n));
                i += 2;
            }
            _ => {
                ctx.syntax_error();
                return None;
            }
        }
        i += 1;
    }
    // Redis refuses only a LIMIT with a count (`LIMIT n -1` is no limit, and ignored by rank).
    if by == By::Rank && limit.is_some_and(|(_, n)| n != -1) {
        ctx.out.error(
            b"ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
        return None;
    }
    if with_scores && by == By::Lex {
        ctx.out
            .error(b"ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return None;
    }
    let args = ctx.args;
    // With REV the bounds of BYSCORE and BYLEX come max first.
    let (lo, hi) = if rev && by != By::Rank {
        (at + 1, at)
    } else {
        (at, at + 1)
    };
    let range = match by {
        By::Score => {
            let (Some(min), Some(max)) = (score_bound(&args[lo]), score_bound(&args[hi])) else {
                ctx.out.error(b"ERR min or max is not a float");
                return None;
            };
            ZRange::Score(min, max)
        }
        By::Lex => {
            let (Some(min), Some(max)) = (lex_bound(&args[lo]), lex_bound(&args[hi])) else {
                ctx.out.error(b"ERR min or max not valid string range item");
                return None;
            };
            ZRange::Lex(min, max)
        }
        By::Rank => {
            limit = None;
            ZRange::Rank(ctx.int(lo)?, ctx.int(hi)?)
        }
    };
    Some(RangeArgs {
        range,
        rev,
        limit,
        with_scores,
    })
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
pub(super) fn zrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(a) = range_args(ctx, 2, true) else {
        return;
    };
    reply_range(ctx, a.range, a.rev, a.limit, a.with_scores);
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`: the size of the
/// range stored at `dst` (both keys on one shard: a hash tag).
pub(super) fn zrangestore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(a) = range_args(ctx, 3, false) else {
        return;
    };
    let args = ctx.args;
    let r = ctx
        .store
        .zrange_store(&args[1], &args[2], a.range, a.rev, a.limit);
    ctx.reply(r, count);
}

/// `[_, src, min, max, options...]`: the range `ZRANGESTORE dst src min max options...`
/// would store, with scores (its options and errors are `ZRANGESTORE`'s): the read half of a
/// `ZRANGESTORE` whose keys are on different shards (`crate::multi`).
pub(crate) fn zrange_scored<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(a) = range_args(ctx, 2, false) else {
        return;
    };
    reply_range(ctx, a.range, a.rev, a.limit, true);
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub(super) fn zrangebyscore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (mut with_scores, mut limit) = (false, None);
    let mut i = 4;
    while i < ctx.args.len() {
        if ctx.is(i, "withscores") {
            with_scores = true;
        } else if ctx.is(i, "limit") && i + 2 < ctx.args.len() {
            let Some(offset) = ctx.int(i + 1) else { return };
            let Some(n) = ctx.int(i + 2) else { return };
            // A negative offset skips everything (Redis counts it down past zero).
            limit = Some((usize::try_from(offset).unwrap_or(usize::MAX), n));
            i += 2;
        } else {
            return ctx.syntax_error();
        }
        i += 1;
    }
    let (Some(min), Some(max)) = (score_bound(&ctx.args[2]), score_bound(&ctx.args[3])) else {
        return ctx.out.error(b"ERR min or max is not a float");
    };
    reply_range(ctx, ZRange::Score(min, max), false, limit, with_scores);
}

pub(super) fn zcount<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (Some(min), Some(max)) = (score_bound(&ctx.args[2]), score_bound(&ctx.args[3])) else {
        return ctx.out.error(b"ERR min or max is not a float");
    };
    let r = ctx.store.zcount(&ctx.args[1], ZRange::Score(min, max));
    ctx.reply(r, count);
}

/// A lex bound: `-`, `+`, `[x`, `(x`.
fn lex_bound(bytes: &[u8]) -> Option<LexBound<'_>> {
    match bytes {
        b"-" => Some(LexBound::Min),
        b"+" => Some(LexBound::Max),
        [b'[', rest @ ..] => Some(LexBound::Inclusive(rest)),
        [b'(', rest @ ..] => Some(LexBound::Exclusive(rest)),
        _ => None,
    }
}

/// Options after the bounds: WITHSCORES (when allowed) and LIMIT.
fn range_options<R: Reply>(
    ctx: &mut Ctx<'_, R>,
    from: usize,
    scores_allowed: bool,
) -> Option<(bool, Option<(usize, i64)>)> {
    let (mut with_scores, mut limit) = (false, None);
    let mut i = from;
    while i < ctx.args.len() {
        if scores_allowed && ctx.is(i, "withscores") {
            with_scores = true;
        } else if ctx.is(i, "limit") && i + 2 < ctx.args.len() {
            let offset = ctx.int(i + 1)?;
            let n = ctx.int(i + 2)?;
            // A negative offset skips everything (Redis counts it down past zero).
            limit = Some((usize::try_from(offset).unwrap_or(usize::MAX), n));
            i += 2;
        } else {
            ctx.syntax_error();
            return None;
        }
        i += 1;
    }
    Some((with_scores, limit))
}

pub(super) fn zrevrange<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let with_scores = match ctx.args.len() {
        4 => false,
        5 if ctx.is(4, "withscores") => true,
        _ => return ctx.syntax_error(),
    };
    let Some(a) = ctx.int(2) else { return };
    let Some(b) = ctx.int(3) else { return };
    reply_range(ctx, ZRange::Rank(a, b), true, None, with_scores);
}

pub(super) fn zrevrangebyscore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some((with_scores, limit)) = range_options(ctx, 4, true) else {
        return;
    };
    let (Some(max), Some(min)) = (score_bound(&ctx.args[2]), score_bound(&ctx.args[3])) else {
        return ctx.out.error(b"ERR min or max is not a float");
    };
    reply_range(ctx, ZRange::Score(min, max), true, limit, with_scores);
}

fn lex_range<R: Reply>(ctx: &mut Ctx<'_, R>, rev: bool) {
    let Some((_, limit)) = range_options(ctx, 4, false) else {
        return;
    };
    let (lo, hi) = if rev { (3, 2) } else { (2, 3) };
    let args = ctx.args;
    let (Some(min), Some(max)) = (lex_bound(&args[lo]), lex_bound(&args[hi])) else {
        return ctx.out.error(b"ERR min or max not valid string range item");
    };
    reply_range(ctx, ZRange::Lex(min, max), rev, limit, false);
}

pub(super) fn zrangebylex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    lex_range(ctx, false);
}

pub(super) fn zrevrangebylex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    lex_range(ctx, true);
}

pub(super) fn zlexcount<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    let (Some(min), Some(max)) = (lex_bound(&args[2]), lex_bound(&args[3])) else {
        return ctx.out.error(b"ERR min or max not valid string range item");
    };
    let r = ctx.store.zcount(&args[1], ZRange::Lex(min, max));
    ctx.reply(r, count);
}

fn zpop<R: Reply>(ctx: &mut Ctx<'_, R>, highest: bool) {
    let with_count = match ctx.args.len() {
        2 => None,
        3 => match fc_resp::number::parse_i64(&ctx.args[2]) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => {
                return ctx
                    .out
                    .error(b"ERR value is out of range, must be positive");
            }
        },
        _ => return ctx.syntax_error(),
    };
    let r = ctx
        .store
        .zpop(&ctx.args[1], highest, with_count.unwrap_or(1));
    match r {
        // Without a count, one flat [member, score] in every protocol (Redis 7).
        Ok(entries) if with_count.is_none() => {
            ctx.out.array_len(2 * entries.len());
            for (m, s) in entries {
                ctx.out.bulk(&m);
                ctx.out.double(s);
            }
        }
        Ok(entries) => write_entries(ctx, entries, true),
        Err(e) => ctx.store_error(&e),
    }
}

pub(super) fn zpopmin<R: Reply>(ctx: &mut Ctx<'_, R>) {
    zpop(ctx, false);
}

pub(super) fn zpopmax<R: Reply>(ctx: &mut Ctx<'_, R>) {
    zpop(ctx, true);
}

pub(super) fn zremrangebyrank<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(a) = ctx.int(2) else { return };
    let Some(b) = ctx.int(3) else { return };
    let r = ctx.store.zremrange(&ctx.args[1], ZRange::Rank(a, b));
    ctx.reply(r, count);
}

pub(super) fn zremrangebyscore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (Some(min), Some(max)) = (score_bound(&ctx.args[2]), score_bound(&ctx.args[3])) else {
        return ctx.out.error(b"ERR min or max is not a float");
    };
    let r = ctx.store.zremrange(&ctx.args[1], ZRange::Score(min, max));
    ctx.reply(r, count);
}

pub(super) fn zremrangebylex<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    let (Some(min), Some(max)) = (lex_bound(&args[2]), lex_bound(&args[3])) else {
        return ctx.out.error(b"ERR min or max not valid string range item");
    };
    let r = ctx.store.zremrange(&args[1], ZRange::Lex(min, max));
    ctx.reply(r, count);
}

pub(super) fn zmscore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let m: Vec<&[u8]> = ctx.args[2..].iter().map(|a| &a[..]).collect();
    let r = ctx.store.zmscore(&ctx.args[1], &m);
    ctx.reply(r, |out, scores| {
        out.array_len(scores.len());
        for s in scores {
            match s {
                Some(s) => out.double(s),
                None => out.null(),
            }
        }
    });
}

pub(super) fn zscan<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    let Some((cursor, pattern, count)) = super::keys::object_scan_args(ctx, args, args.len())
    else {
        return;
    };
    let r = ctx.store.zscan(&args[1], cursor, pattern, count);
    ctx.reply(r, |out, (next, entries)| {
        out.array_len(2);
        out.bulk(next.to_string().as_bytes());
        out.array_len(entries.len() * 2);
        for (m, s) in entries {
            out.bulk(&m);
            out.double(s);
        }
    });
}
