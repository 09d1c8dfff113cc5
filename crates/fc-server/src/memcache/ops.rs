//! memcached's item operations as one store handler run on the key's owner (the same way a
//! RESP command runs there): strings of the shared keyspace, with the flags and CAS values
//! `mc_meta` keeps beside them.
//!
//! Arguments: `[mc, key, op, ...]` (below); the reply is always an array of five: status,
//! value (bulk or null), flags, CAS, seconds to live (-1: none).

use bytes::Bytes;

use crate::command::{Ctx, Handler, store};
use crate::mc_meta::{self, Meta};
use crate::reply::Reply;

/// The handler.
pub(crate) const MC: Handler = store!(mc_op);

/// How an operation changes a key's expiry, as its argument text: `keep` (leave it), `none`
/// (never expires), `now` (already expired: the item goes), or milliseconds from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    Keep,
    Never,
    Now,
    In(u64),
}

impl Expiry {
    /// memcached's `exptime`: 0 never; negative, or an absolute time in the past, now; up to
    /// 30 days, seconds from now; beyond, a Unix time. memcached keeps it in 32 bits, so a
    /// larger number wraps as it does there.
    pub(crate) fn from_exptime(exptime: i64, now_unix: i64) -> Self {
        const MONTH: i64 = 60 * 60 * 24 * 30;
        let exptime = i64::from(exptime as i32);
        if exptime == 0 {
            Self::Never
        } else if exptime < 0 {
            Self::Now
        } else if exptime <= MONTH {
            Self::In(exptime as u64 * 1000)
        } else if exptime > now_unix {
            Self::In((exptime - now_unix) as u64 * 1000)
        } else {
            Self::Now
        }
    }

    pub(crate) fn arg(self) -> Bytes {
        match self {
            Self::Keep => Bytes::from_static(b"keep"),
            Self::Never => Bytes::from_static(b"none"),
            Self::Now => Bytes::from_static(b"now"),
            Self::In(ms) => Bytes::from(ms.to_string()),
        }
    }

    fn parse(arg: &[u8]) -> Self {
        match arg {
            b"none" => Self::Never,
            b"now" => Self::Now,
            b"keep" | b"" => Self::Keep,
            ms => std::str::from_utf8(ms)
                .ok()
                .and_then(|t| t.parse().ok())
                .map_or(Self::Keep, Self::In),
        }
    }
}

/// The item's state after an operation, as the edge reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) status: Bytes,
    pub(crate) value: Option<Bytes>,
    pub(crate) flags: u32,
    pub(crate) cas: u64,
    pub(crate) ttl: i64,
}

fn arg<'c>(ctx: &'c Ctx<'_, impl Reply>, i: usize) -> &'c [u8] {
    ctx.args.get(i).map_or(&[][..], |a| &a[..])
}

fn num<T: std::str::FromStr>(bytes: &[u8]) -> Option<T> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// The reply: status, value, flags, CAS, TTL in seconds.
fn reply<R: Reply>(out: &mut R, status: &[u8], value: Option<&[u8]>, meta: Meta, ttl: i64) {
    out.array_len(5);
    out.simple(status);
    match value {
        Some(v) => out.bulk(v),
        None => out.null(),
    }
    out.integer(i64::from(meta.flags));
    out.integer(meta.cas as i64);
    out.integer(ttl);
}

fn miss<R: Reply>(out: &mut R, status: &[u8]) {
    reply(out, status, None, Meta { flags: 0, cas: 0 }, -1);
}

struct Key<'a> {
    key: &'a [u8],
    shard: usize,
    worker: usize,
    /// CAS values are drawn in strides of this (at least the worker count: the shard count),
    /// each worker from its own offset, so no two workers draw the same value.
    stride: usize,
}

impl Key<'_> {
    fn meta(&self) -> Option<Meta> {
        mc_meta::get(self.shard, self.key)
    }

    /// The item's metadata, drawing a CAS value when it has none yet.
    fn meta_or_new(&self) -> Meta {
        self.meta().unwrap_or_else(|| {
            let meta = Meta {
                flags: 0,
                cas: mc_meta::next_cas(self.worker, self.stride),
            };
            mc_meta::set(self.shard, self.key, meta);
            meta
        })
    }

    /// Records a new version's metadata (after the write, whose mutation dropped the old):
    /// only when it has flags or its CAS is asked for now (else it is drawn when asked).
    fn stamp(&self, flags: u32, want_cas: bool) -> Meta {
        if flags == 0 && !want_cas {
            return Meta { flags: 0, cas: 0 };
        }
        let meta = Meta {
            flags,
            cas: mc_meta::next_cas(self.worker, self.stride),
        };
        mc_meta::set(self.shard, self.key, meta);
        meta
    }
}

fn ttl_secs(ctx: &mut Ctx<'_, impl Reply>, key: &[u8]) -> i64 {
    match ctx.store.pttl_millis(key) {
        fc_shard::KeyTtl::ExpiresIn(ms) => ms.div_ceil(1000) as i64,
        _ => -1,
    }
}

/// Writes `value` with `expiry` (keeping the current one for `Keep`); false when the store
/// refused (out of memory).
fn write(ctx: &mut Ctx<'_, impl Reply>, key: &[u8], value: &[u8], expiry: Expiry) -> bool {
    let ttl = match expiry {
        Expiry::Never => None,
        Expiry::In(ms) => Some(ms.max(1)),
        Expiry::Now => {
            ctx.store.delete(key);
            return true;
        }
        Expiry::Keep => match ctx.store.pttl_millis(key) {
            fc_shard::KeyTtl::ExpiresIn(ms) => Some(ms.max(1)),
            _ => None,
        },
    };
    let route = ctx.store.route_key(key);
    ctx.store.try_set_routed(&route, key, value, ttl).is_ok()
}

fn mc_op<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let key_bytes = ctx.args[1].clone();
    let key = &key_bytes[..];
    let route = ctx.store.route_key(key);
    let k = Key {
        key,
        shard: ctx.store.router().shard_of(&route),
        worker: ctx.store.owner_of(&route),
        stride: ctx.store.router().shard_count().max(1),
    };
    let op = ctx.args[2].clone();
    match &op[..] {
        b"get" => {
            let want_cas = arg(ctx, 3) == b"1";
            let touch = Expiry::parse(arg(ctx, 4));
            let Some(value) = ctx.store.get_view_routed(&route, key).map(<[u8]>::to_vec) else {
                return miss(ctx.out, b"MISS");
            };
            match touch {
                Expiry::Never => {
                    ctx.store.persist(key);
                }
                Expiry::In(ms) => {
                    ctx.store.expire(key, ms.max(1));
                }
                Expiry::Now => {
                    // memcached answers with the item, then it is gone.
                    let meta = k.meta().unwrap_or(Meta { flags: 0, cas: 0 });
                    ctx.store.delete(key);
                    return reply(ctx.out, b"HIT", Some(&value), meta, -1);
                }
                Expiry::Keep => {}
            }
            let meta = if want_cas {
                k.meta_or_new()
            } else {
                k.meta().unwrap_or(Meta { flags: 0, cas: 0 })
            };
            let ttl = ttl_secs(ctx, key);
            reply(ctx.out, b"HIT", Some(&value), meta, ttl);
        }
        b"store" => {
            let mode = ctx.args[3].clone();
            let data = ctx.args[4].clone();
            let flags: u32 = num(arg(ctx, 5)).unwrap_or(0);
            let expiry = Expiry::parse(arg(ctx, 6));
            let compare: Option<u64> = num(arg(ctx, 7));
            let want_cas = arg(ctx, 8) == b"1";
            // A plain set needs no look first.
            let exists = (&mode[..] != b"set" || compare.is_some()) && ctx.store.exists(key);
            let current = || k.meta();
            // The checks each mode makes before writing.
            let refused: Option<&[u8]> = match &mode[..] {
                b"add" if exists => Some(b"NOT_STORED"),
                b"replace" | b"append" | b"prepend" if !exists => Some(b"NOT_STORED"),
                b"cas" if !exists => Some(b"NOT_FOUND"),
                _ => None,
            };
            if let Some(status) = refused {
                return miss(ctx.out, status);
            }
            if let Some(cas) = compare
                && (!exists || current().map(|m| m.cas) != Some(cas))
            {
                return miss(ctx.out, if exists { b"EXISTS" } else { b"NOT_FOUND" });
            }
            let (value, flags, expiry) = match &mode[..] {
                b"append" | b"prepend" => {
                    let Some(old) = ctx.store.get_view_routed(&route, key).map(<[u8]>::to_vec)
                    else {
                        return miss(ctx.out, b"NOT_STORED");
                    };
                    let joined = if &mode[..] == b"append" {
                        [&old[..], &data[..]].concat()
                    } else {
                        [&data[..], &old[..]].concat()
                    };
                    // memcached keeps the item's flags and expiry.
                    (joined, current().map_or(0, |m| m.flags), Expiry::Keep)
                }
                _ => (data.to_vec(), flags, expiry),
            };
            if !write(ctx, key, &value, expiry) {
                return miss(ctx.out, b"OOM");
            }
            if expiry == Expiry::Now {
                return miss(ctx.out, b"STORED");
            }
            let meta = k.stamp(flags, want_cas);
            let ttl = if want_cas { ttl_secs(ctx, key) } else { -1 };
            reply(ctx.out, b"STORED", None, meta, ttl);
        }
        b"delta" => {
            let incr = arg(ctx, 3) == b"incr";
            let delta: u64 = num(arg(ctx, 4)).unwrap_or(0);
            let vivify: Option<u64> = num(arg(ctx, 5));
            let vivify_expiry = Expiry::parse(arg(ctx, 6));
            let compare: Option<u64> = num(arg(ctx, 7));
            let touch = Expiry::parse(arg(ctx, 8));
            let want_cas = arg(ctx, 9) == b"1";
            let Some(old) = ctx.store.get_view_routed(&route, key).map(<[u8]>::to_vec) else {
                let Some(initial) = vivify else {
                    return miss(ctx.out, b"NOT_FOUND");
                };
                let text = initial.to_string();
                if !write(ctx, key, text.as_bytes(), vivify_expiry) {
                    return miss(ctx.out, b"OOM");
                }
                let meta = k.stamp(0, want_cas);
                let ttl = ttl_secs(ctx, key);
                return reply(ctx.out, b"STORED", Some(text.as_bytes()), meta, ttl);
            };
            if let Some(cas) = compare
                && k.meta().map(|m| m.cas) != Some(cas)
            {
                return miss(ctx.out, b"EXISTS");
            }
            // memcached reads the value as an unsigned decimal (trailing spaces allowed: its
            // own padding after a decr).
            let digits = old.strip_suffix(b" ").map_or(&old[..], |_| {
                let end = old.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
                &old[..end]
            });
            let current = (!digits.is_empty() && digits.len() <= 20)
                .then(|| num::<u64>(digits))
                .flatten();
            let Some(current) = current else {
                return miss(ctx.out, b"NON_NUMERIC");
            };
            let next = if incr {
                current.wrapping_add(delta)
            } else {
                current.saturating_sub(delta)
            };
            let mut text = next.to_string().into_bytes();
            let shown = text.clone();
            // Shorter than the old value: padded with spaces, as memcached rewrites in place.
            if text.len() < old.len() {
                text.resize(old.len(), b' ');
            }
            let flags = k.meta().map_or(0, |m| m.flags);
            if !write(ctx, key, &text, touch) {
                return miss(ctx.out, b"OOM");
            }
            let meta = k.stamp(flags, want_cas);
            let ttl = ttl_secs(ctx, key);
            reply(ctx.out, b"OK", Some(&shown), meta, ttl);
        }
        b"touch" => {
            let expiry = Expiry::parse(arg(ctx, 3));
            if !ctx.store.exists(key) {
                return miss(ctx.out, b"NOT_FOUND");
            }
            match expiry {
                Expiry::Never => {
                    ctx.store.persist(key);
                }
                Expiry::In(ms) => {
                    ctx.store.expire(key, ms.max(1));
                }
                Expiry::Now => {
                    ctx.store.delete(key);
                }
                Expiry::Keep => {}
            }
            let meta = k.meta().unwrap_or(Meta { flags: 0, cas: 0 });
            let ttl = ttl_secs(ctx, key);
            reply(ctx.out, b"TOUCHED", None, meta, ttl);
        }
        b"delete" => {
            let compare: Option<u64> = num(arg(ctx, 3));
            if !ctx.store.exists(key) {
                return miss(ctx.out, b"NOT_FOUND");
            }
            if let Some(cas) = compare
                && k.meta().map(|m| m.cas) != Some(cas)
            {
                return miss(ctx.out, b"EXISTS");
            }
            ctx.store.delete(key);
            miss(ctx.out, b"DELETED");
        }
        _ => ctx.out.error(b"ERR unknown memcached operation"),
    }
}

/// Reads a handler's reply back.
pub(crate) fn item(replies: &crate::reply::Replies) -> Item {
    use crate::reply::Token;
    let tokens = replies.tokens();
    let text = |t: Option<&Token>| match t {
        Some(Token::Simple(r) | Token::Bulk(r) | Token::Error(r)) => {
            Some(Bytes::copy_from_slice(replies.bytes(r)))
        }
        _ => None,
    };
    let int = |t: Option<&Token>| match t {
        Some(Token::Integer(n)) => *n,
        _ => 0,
    };
    Item {
        status: text(tokens.get(1)).unwrap_or_else(|| {
            text(tokens.first()).unwrap_or_else(|| Bytes::from_static(b"ERROR"))
        }),
        value: text(tokens.get(2)),
        flags: int(tokens.get(3)) as u32,
        cas: int(tokens.get(4)) as u64,
        ttl: int(tokens.get(5)),
    }
}
