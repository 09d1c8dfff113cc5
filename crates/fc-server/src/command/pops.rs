//! The pops over several keys (`BLPOP`, `BRPOP`, `BLMPOP`, `LMPOP`, `BLMOVE`, `BRPOPLPUSH`,
//! `BZPOPMIN`, `BZPOPMAX`, `BZMPOP`, `ZMPOP`): their arguments ([`Block::parse`]) and the
//! store step that serves one key on its owner ([`TRY`]). Where they run and how a client
//! waits is `crate::blocking`'s.

use std::borrow::Cow;
use std::time::Duration;

use bytes::Bytes;
use fc_shard::ListEnd;

use super::{Ctx, Handler};
use crate::reply::Reply;

/// The blocking and multi-key pop commands ([`super::Route::Pop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
    Blpop,
    Brpop,
    Blmpop,
    Lmpop,
    Blmove,
    Brpoplpush,
    Bzpopmin,
    Bzpopmax,
    Bzmpop,
    Zmpop,
    /// `XREAD` (blocks with `BLOCK`).
    Xread,
    /// `XREADGROUP` (blocks with `BLOCK` when every id is `>`).
    Xreadgroup,
}

/// What serving a key does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Pop from a list: one element (`[key, element]`), or up to `count` (`[key, [elements]]`).
    Pop { end: ListEnd, count: Option<usize> },
    /// Pop from a sorted set: one member (`[key, member, score]`), or up to `count`
    /// (`[key, [[member, score], ...]]`).
    ZPop { max: bool, count: Option<usize> },
    /// Move one element to `dst` (the element).
    Move {
        dst: Bytes,
        from: ListEnd,
        to: ListEnd,
    },
    /// Read a stream after an id (`XREAD`): `ids` pairs each key with its id (`$` resolved
    /// by `crate::blocking` before a client waits), `count` 0 for no limit.
    XRead {
        ids: Vec<(Bytes, Bytes)>,
        count: usize,
    },
    /// Read a group's entries (`XREADGROUP`); `ids` as for `XRead` (`>` for a new read,
    /// else a history id).
    XReadGroup {
        group: Bytes,
        consumer: Bytes,
        count: usize,
        no_ack: bool,
        ids: Vec<(Bytes, Bytes)>,
    },
}

/// A parsed command.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) keys: Vec<Bytes>,
    pub(crate) op: Op,
    /// `None`: never blocks (`LMPOP`, `ZMPOP`); `Some(None)`: forever.
    pub(crate) timeout: Option<Option<Duration>>,
}

pub(crate) fn end_word(arg: &[u8]) -> Option<ListEnd> {
    if arg.eq_ignore_ascii_case(b"left") {
        Some(ListEnd::Left)
    } else if arg.eq_ignore_ascii_case(b"right") {
        Some(ListEnd::Right)
    } else {
        None
    }
}

/// `XREAD`/`XREADGROUP`'s arguments, checked in Redis's order (the per-key checks, which need
/// the keys, are `crate::blocking`'s).
fn stream_read_plan(args: &[Bytes], group: bool) -> Result<Plan, Vec<u8>> {
    let mut timeout = None;
    let mut count = 0usize;
    let mut names = None;
    let mut no_ack = false;
    let mut streams_at = 0;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let is = |w: &str| args[i].eq_ignore_ascii_case(w.as_bytes());
        if is("block") && more > 0 {
            i += 1;
            let ms = fc_resp::number::parse_i64(&args[i])
                .ok_or(b"ERR timeout is not an integer or out of range".to_vec())?;
            if ms < 0 {
                return Err(b"ERR timeout is negative".to_vec());
            }
            timeout = Some((ms > 0).then(|| Duration::from_millis(ms as u64)));
        } else if is("count") && more > 0 {
            i += 1;
            let n = fc_resp::number::parse_i64(&args[i])
                .ok_or(b"ERR value is not an integer or out of range".to_vec())?;
            count = n.max(0) as usize;
        } else if is("streams") && more > 0 {
            streams_at = i + 1;
            if !(args.len() - streams_at).is_multiple_of(2) {
                let (name, symbol) = if group {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return Err(format!("ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{symbol}' must be specified.").into_bytes());
            }
            break;
        } else if is("group") && more >= 2 {
            if !group {
                return Err(b"ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.".to_vec());
            }
            names = Some((args[i + 1].clone(), args[i + 2].clone()));
            i += 2;
        } else if is("noack") {
            if !group {
                return Err(b"ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.".to_vec());
            }
            no_ack = true;
        } else {
            return Err(b"ERR syntax error".to_vec());
        }
        i += 1;
    }
    if streams_at == 0 {
        return Err(b"ERR syntax error".to_vec());
    }
    let n = (args.len() - streams_at) / 2;
    let keys = args[streams_at..streams_at + n].to_vec();
    let ids: Vec<(Bytes, Bytes)> = keys
        .iter()
        .cloned()
        .zip(args[streams_at + n..].iter().cloned())
        .collect();
    let op = if group {
        let Some((group, consumer)) = names else {
            return Err(b"ERR Missing GROUP option for XREADGROUP".to_vec());
        };
        Op::XReadGroup {
            group,
            consumer,
            count,
            no_ack,
            ids,
        }
    } else {
        Op::XRead { ids, count }
    };
    Ok(Plan { keys, op, timeout })
}

/// A blocking timeout in seconds as Redis 7.0 reads it: a float, rounded up to milliseconds;
/// 0 is forever; a value whose milliseconds do not fit a signed 64-bit number reads as
/// negative, as Redis's conversion makes it.
fn timeout(arg: &[u8]) -> Result<Option<Duration>, &'static [u8]> {
    let secs = super::parse_float(arg).ok_or(&b"ERR timeout is not a float or out of range"[..])?;
    let ms = (secs * 1000.0).ceil();
    if !(0.0..9.223_372_036_854_775e18).contains(&ms) {
        return Err(b"ERR timeout is negative");
    }
    Ok((ms > 0.0).then(|| Duration::from_millis(ms as u64)))
}

/// `LMPOP`'s and `ZMPOP`'s arguments after the timeout: the keys, the direction word, the
/// count (1 when not given).
type MpopArgs<'a> = (Vec<Bytes>, &'a Bytes, Option<usize>);

/// `numkeys key... WHERE [COUNT count]` from `args[at]` (`LMPOP`, `ZMPOP` and their blocking
/// forms), checked in Redis's order: numkeys, the direction word (`valid`), the count.
fn mpop_args(
    args: &[Bytes],
    at: usize,
    valid: fn(&[u8]) -> bool,
) -> Result<MpopArgs<'_>, &'static [u8]> {
    let numkeys = fc_resp::number::parse_i64(&args[at])
        .filter(|&n| n > 0)
        .ok_or(&b"ERR numkeys should be greater than 0"[..])? as usize;
    let first = at + 1;
    // The keys, then the direction word.
    if numkeys >= args.len() - first {
        return Err(b"ERR syntax error");
    }
    let keys = args[first..first + numkeys].to_vec();
    let word = &args[first + numkeys];
    if !valid(word) {
        return Err(b"ERR syntax error");
    }
    let mut count = None;
    let mut i = first + numkeys + 1;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"count") && i + 1 < args.len() && count.is_none() {
            let n = fc_resp::number::parse_i64(&args[i + 1])
                .filter(|&n| n > 0)
                .ok_or(&b"ERR count should be greater than 0"[..])?;
            count = Some(n as usize);
            i += 2;
        } else {
            return Err(b"ERR syntax error");
        }
    }
    Ok((keys, word, Some(count.unwrap_or(1))))
}

impl Block {
    /// Parses a whole command (arity already checked).
    pub(crate) fn parse(self, args: &[Bytes]) -> Result<Plan, Cow<'static, [u8]>> {
        match self {
            Self::Xread | Self::Xreadgroup => {
                stream_read_plan(args, self == Self::Xreadgroup).map_err(Cow::Owned)
            }
            _ => self.parse_static(args).map_err(Cow::Borrowed),
        }
    }

    fn parse_static(self, args: &[Bytes]) -> Result<Plan, &'static [u8]> {
        let last = args.len() - 1;
        let plan = match self {
            Self::Xread | Self::Xreadgroup => unreachable!("stream reads parse in `parse`"),
            Self::Blpop | Self::Brpop | Self::Bzpopmin | Self::Bzpopmax => {
                let op = match self {
                    Self::Blpop => Op::Pop {
                        end: ListEnd::Left,
                        count: None,
                    },
                    Self::Brpop => Op::Pop {
                        end: ListEnd::Right,
                        count: None,
                    },
                    _ => Op::ZPop {
                        max: self == Self::Bzpopmax,
                        count: None,
                    },
                };
                Plan {
                    keys: args[1..last].to_vec(),
                    op,
                    timeout: Some(timeout(&args[last])?),
                }
            }
            Self::Blmove | Self::Brpoplpush => {
                let (from, to) = if self == Self::Blmove {
                    match (end_word(&args[3]), end_word(&args[4])) {
                        (Some(from), Some(to)) => (from, to),
                        _ => return Err(b"ERR syntax error"),
                    }
                } else {
                    (ListEnd::Right, ListEnd::Left)
                };
                Plan {
                    keys: vec![args[1].clone()],
                    op: Op::Move {
                        dst: args[2].clone(),
                        from,
                        to,
                    },
                    timeout: Some(timeout(&args[last])?),
                }
            }
            Self::Blmpop | Self::Lmpop | Self::Bzmpop | Self::Zmpop => {
                let blocking = matches!(self, Self::Blmpop | Self::Bzmpop);
                let list = matches!(self, Self::Blmpop | Self::Lmpop);
                let valid: fn(&[u8]) -> bool = if list {
                    |w| end_word(w).is_some()
                } else {
                    |w| w.eq_ignore_ascii_case(b"min") || w.eq_ignore_ascii_case(b"max")
                };
                let (keys, word, count) = mpop_args(args, usize::from(blocking) + 1, valid)?;
                // The timeout is read last, as Redis's blocking pop does.
                let wait = if blocking {
                    Some(timeout(&args[1])?)
                } else {
                    None
                };
                let op = if list {
                    Op::Pop {
                        end: end_word(word).ok_or(&b"ERR syntax error"[..])?,
                        count,
                    }
                } else {
                    let max = if word.eq_ignore_ascii_case(b"max") {
                        true
                    } else if word.eq_ignore_ascii_case(b"min") {
                        false
                    } else {
                        return Err(b"ERR syntax error");
                    };
                    Op::ZPop { max, count }
                };
                Plan {
                    keys,
                    op,
                    timeout: wait,
                }
            }
        };
        Ok(plan)
    }
}

impl Op {
    /// The internal command [`TRY`] runs for `key` (named after the pop it makes, which is
    /// also what keyspace events call it).
    pub(crate) fn args(&self, key: &Bytes) -> Vec<Bytes> {
        let end = |e: &ListEnd| match e {
            ListEnd::Left => Bytes::from_static(b"left"),
            ListEnd::Right => Bytes::from_static(b"right"),
        };
        let count = |n: &Option<usize>| match n {
            Some(n) => Bytes::from(n.to_string()),
            None => Bytes::new(),
        };
        match self {
            Self::Pop { end: e, count: n } => {
                let name: &'static [u8] = match e {
                    ListEnd::Left => b"lpop",
                    ListEnd::Right => b"rpop",
                };
                vec![Bytes::from_static(name), key.clone(), end(e), count(n)]
            }
            Self::ZPop { max, count: n } => {
                let (name, word): (&'static [u8], &'static [u8]) = if *max {
                    (b"zpopmax", b"max")
                } else {
                    (b"zpopmin", b"min")
                };
                vec![
                    Bytes::from_static(name),
                    key.clone(),
                    Bytes::from_static(word),
                    count(n),
                ]
            }
            Self::Move { dst, from, to } => vec![
                Bytes::from_static(b"lmove"),
                key.clone(),
                dst.clone(),
                end(from),
                end(to),
            ],
            // Served from a waiter: the whole one-key reply (`wrap`).
            Self::XRead { ids, count: n } => vec![
                Bytes::from_static(b"xread"),
                key.clone(),
                id_of(ids, key),
                Bytes::from(n.to_string()),
                Bytes::from_static(b"1"),
            ],
            Self::XReadGroup {
                group,
                consumer,
                count: n,
                no_ack,
                ids,
            } => vec![
                Bytes::from_static(b"xreadgroup"),
                key.clone(),
                group.clone(),
                consumer.clone(),
                id_of(ids, key),
                Bytes::from(n.to_string()),
                if *no_ack {
                    Bytes::from_static(b"1")
                } else {
                    Bytes::new()
                },
                Bytes::from_static(b"1"),
            ],
        }
    }

    /// What a client that got nothing is answered: on timeout (a null array, as Redis 7.0
    /// answers every blocking pop, `BLMOVE` included) or inside `MULTI` (`BLMOVE` and
    /// `BRPOPLPUSH` then act as `LMOVE`: a null string).
    pub(crate) fn nothing<R: Reply>(&self, out: &mut R, in_multi: bool) {
        match self {
            Self::Move { .. } if in_multi => out.null(),
            _ => out.null_array(),
        }
    }
}

/// The id a stream read waits after for `key` (its first pairing).
fn id_of(ids: &[(Bytes, Bytes)], key: &Bytes) -> Bytes {
    ids.iter()
        .find(|(k, _)| k == key)
        .map_or_else(|| Bytes::from_static(b"0-0"), |(_, id)| id.clone())
}

/// Serves one key on its owner, if it can: `[kind, key, ...]` from [`Op::args`]. Replies
/// nothing at all when the key is missing or empty (the caller tries the next key, or
/// waits); `WRONGTYPE` when it holds another type; else what the command answers.
fn attempt<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    let key = &args[1];
    let count = || fc_resp::number::parse_i64(&args[3]).map(|n| n as usize);
    match &args[0][..] {
        b"lpop" | b"rpop" | b"lmove" => {
            match ctx.store.llen(key) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => return ctx.store_error(&e),
            }
            if &args[0][..] == b"lmove" {
                let (Some(from), Some(to)) = (end_word(&args[3]), end_word(&args[4])) else {
                    return ctx.syntax_error();
                };
                let r = ctx.store.lmove(key, &args[2], from, to);
                return ctx.reply(r, super::bulk_or_null);
            }
            let Some(end) = end_word(&args[2]) else {
                return ctx.syntax_error();
            };
            let n = count();
            let r = ctx.store.pop(key, end, n.unwrap_or(1));
            ctx.reply(r, |out, popped| {
                let items = popped.unwrap_or_default();
                out.array_len(2);
                out.bulk(super::user_key(key));
                match n {
                    Some(_) => super::bulk_array(out, &items),
                    None => match items.first() {
                        Some(item) => out.bulk(item),
                        None => out.null(),
                    },
                }
            });
        }
        b"zpopmin" | b"zpopmax" => {
            match ctx.store.zcard(key) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => return ctx.store_error(&e),
            }
            let n = count();
            let r = ctx
                .store
                .zpop(key, args[2].as_ref() == b"max", n.unwrap_or(1));
            ctx.reply(r, |out, entries| match n {
                Some(_) => {
                    out.array_len(2);
                    out.bulk(super::user_key(key));
                    out.array_len(entries.len());
                    for (member, score) in entries {
                        out.array_len(2);
                        out.bulk(&member);
                        out.double(score);
                    }
                }
                None => {
                    out.array_len(3);
                    out.bulk(super::user_key(key));
                    match entries.into_iter().next() {
                        Some((member, score)) => {
                            out.bulk(&member);
                            out.double(score);
                        }
                        None => {
                            out.null();
                            out.null();
                        }
                    }
                }
            });
        }
        b"xread" => super::streams::read_step(ctx),
        b"xreadgroup" => super::streams::group_step(ctx),
        b"xresolve" => super::streams::resolve_step(ctx),
        b"xgroupcheck" => super::streams::group_check(ctx),
        _ => ctx.out.error(b"ERR unknown pop"),
    }
}

/// [`attempt`] as a store handler (it runs on the key's owner).
pub(crate) const TRY: Handler = store!(attempt);

/// The workers the keys of a queued pop command touch (`EXEC` holds them).
pub(crate) fn keys_of(kind: Block, args: &[Bytes]) -> Vec<Bytes> {
    kind.parse(args)
        .map(|plan| {
            let mut keys = plan.keys;
            if let Op::Move { dst, .. } = plan.op {
                keys.push(dst);
            }
            keys
        })
        .unwrap_or_default()
}
