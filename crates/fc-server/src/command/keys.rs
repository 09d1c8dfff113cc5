//! Keys: DEL, EXISTS, EXPIRE family, TTL family, PERSIST, TYPE, RENAME, KEYS, DBSIZE, FLUSHALL.

use fc_shard::{KeyTtl, KeyType, ScanOptions};

use super::{Ctx, count};
use crate::reply::Reply;

pub(super) fn del_one<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let gone = ctx.store.try_delete(&ctx.args[1]).unwrap_or(false);
    ctx.out.integer(i64::from(gone));
}

pub(super) fn exists_one<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let found = ctx.store.exists(&ctx.args[1]);
    ctx.out.integer(i64::from(found));
}

pub(super) fn dbsize<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let db = super::db_of(ctx.args);
    count(ctx.out, ctx.store.db_len(db));
}

/// SWAPDB on one worker: `args[1]` and `args[2]` are database numbers (checked by the
/// session).
pub(super) fn swapdb_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let db = |i: usize| {
        std::str::from_utf8(&ctx.args[i])
            .ok()
            .and_then(|t| t.parse::<u32>().ok())
    };
    if let (Some(a), Some(b)) = (db(1), db(2)) {
        ctx.store.swap_dbs(a, b);
    }
    ctx.out.ok();
}

/// FLUSHDB on one worker: the keys of the client's database.
pub(super) fn flushdb<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let db = super::db_of(ctx.args);
    ctx.store.clear_db(db);
    ctx.out.ok();
}

pub(super) fn flushall<R: Reply>(ctx: &mut Ctx<'_, R>) {
    ctx.store.clear();
    ctx.out.ok();
}

pub(super) fn keys<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let pattern = ctx.args[1].clone();
    let options = ScanOptions {
        pattern: (&pattern[..] != b"*").then_some(&pattern[..]),
        count: 4096,
        db: super::db_of(ctx.args),
        ..ScanOptions::default()
    };
    // Written as found (one scan window's keys at a time), the array's length set at the
    // end: memory stays within the client's output limit, whatever the key count.
    let mark = ctx.out.array_deferred();
    let (mut cursor, mut n) = (0, 0);
    'scan: loop {
        let (next, keys) = ctx.store.scan(cursor, options);
        for key in &keys {
            ctx.out.bulk(key);
            n += 1;
            if ctx.out.full() {
                break 'scan;
            }
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    ctx.out.array_fill(mark, n);
}

fn now_ms<R: Reply>(ctx: &Ctx<'_, R>) -> u64 {
    ctx.store.clock().now_ms()
}

/// EXPIRE's NX/XX/GT/LT options.
#[derive(Clone, Copy)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// The options after the time, read before the time itself (Redis's order); `None` after
/// replying Redis's error.
fn expire_flags<R: Reply>(ctx: &mut Ctx<'_, R>) -> Option<ExpireFlags> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..ctx.args.len() {
        match ctx.args[i].to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => {
                let text = format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(&ctx.args[i])
                );
                ctx.out.error(text.as_bytes());
                return None;
            }
        }
    }
    if nx && (xx || gt || lt) {
        ctx.out
            .error(b"ERR NX and XX, GT or LT options at the same time are not compatible");
        return None;
    }
    if gt && lt {
        ctx.out
            .error(b"ERR GT and LT options at the same time are not compatible");
        return None;
    }
    Some(ExpireFlags { nx, xx, gt, lt })
}

/// EXPIRE and friends: `at_ms` absolute; a time not after now deletes.
fn expire_common<R: Reply>(ctx: &mut Ctx<'_, R>, at_ms: i128, flags: ExpireFlags) {
    let ExpireFlags { nx, xx, gt, lt } = flags;
    let key = ctx.args[1].clone();
    let current = ctx.store.pttl_millis(&key);
    let now = now_ms(ctx);
    let current_at = match current {
        KeyTtl::Missing => return ctx.out.integer(0),
        KeyTtl::Persistent => None,
        KeyTtl::ExpiresIn(ms) => Some(i128::from(now + ms)),
    };
    let allowed = match current_at {
        None => !xx && !gt,
        Some(cur) => !nx && (!gt || at_ms > cur) && (!lt || at_ms < cur),
    };
    if !allowed {
        return ctx.out.integer(0);
    }
    if at_ms <= i128::from(now) {
        let _ = ctx.store.try_delete(&key);
    } else {
        ctx.store
            .expire_at_ms(&key, u64::try_from(at_ms).unwrap_or(u64::MAX));
    }
    ctx.out.integer(1);
}

/// The relative or absolute time argument, scaled to ms; Redis's overflow error.
fn time_arg<R: Reply>(ctx: &mut Ctx<'_, R>, scale: i128, relative: bool) -> Option<i128> {
    let n = i128::from(ctx.int(2)?);
    let base = if relative { i128::from(now_ms(ctx)) } else { 0 };
    let at = n * scale + base;
    if n.abs() > i128::from(i64::MAX) / scale || at > i128::from(i64::MAX) {
        let name = String::from_utf8_lossy(&ctx.args[0]).to_ascii_lowercase();
        let text = format!("ERR invalid expire time in '{name}' command");
        ctx.out.error(text.as_bytes());
        return None;
    }
    Some(at)
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: the options, then the time, then the key.
fn expire_generic<R: Reply>(ctx: &mut Ctx<'_, R>, scale: i128, relative: bool) {
    let Some(flags) = expire_flags(ctx) else {
        return;
    };
    if let Some(at) = time_arg(ctx, scale, relative) {
        expire_common(ctx, at, flags);
    }
}

pub(super) fn expire<R: Reply>(ctx: &mut Ctx<'_, R>) {
    expire_generic(ctx, 1000, true);
}

pub(super) fn pexpire<R: Reply>(ctx: &mut Ctx<'_, R>) {
    expire_generic(ctx, 1, true);
}

pub(super) fn expireat<R: Reply>(ctx: &mut Ctx<'_, R>) {
    expire_generic(ctx, 1000, false);
}

pub(super) fn pexpireat<R: Reply>(ctx: &mut Ctx<'_, R>) {
    expire_generic(ctx, 1, false);
}

pub(super) fn ttl<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let t = ctx.store.ttl_seconds(&ctx.args[1]);
    ctx.out.integer(t.to_redis());
}

pub(super) fn pttl<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let t = ctx.store.pttl_millis(&ctx.args[1]);
    ctx.out.integer(t.to_redis());
}

fn expiretime_in<R: Reply>(ctx: &mut Ctx<'_, R>, scale: u64) {
    let now = now_ms(ctx);
    match ctx.store.pttl_millis(&ctx.args[1]) {
        KeyTtl::Missing => ctx.out.integer(-2),
        KeyTtl::Persistent => ctx.out.integer(-1),
        KeyTtl::ExpiresIn(ms) => ctx.out.integer(((now + ms) / scale) as i64),
    }
}

pub(super) fn expiretime<R: Reply>(ctx: &mut Ctx<'_, R>) {
    expiretime_in(ctx, 1000);
}

pub(super) fn pexpiretime<R: Reply>(ctx: &mut Ctx<'_, R>) {
    expiretime_in(ctx, 1);
}

pub(super) fn persist<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let done = ctx.store.persist(&ctx.args[1]);
    ctx.out.integer(i64::from(done));
}

pub(super) fn key_type<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let t = ctx.store.type_of(&ctx.args[1]);
    ctx.reply(t, |out, t| {
        out.simple(t.map_or("none", |t| t.redis_name()).as_bytes());
    });
}

pub(super) fn rename<R: Reply>(ctx: &mut Ctx<'_, R>) {
    // A missing source is "no such key" whatever the destination's shard (as Redis answers).
    if !ctx.store.exists(&ctx.args[1]) {
        return ctx.out.error(b"ERR no such key");
    }
    let r = ctx.store.rename(&ctx.args[1], &ctx.args[2], false);
    ctx.reply(r, |out, _| out.ok());
}

pub(super) fn renamenx<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if !ctx.store.exists(&ctx.args[1]) {
        return ctx.out.error(b"ERR no such key");
    }
    let r = ctx.store.rename(&ctx.args[1], &ctx.args[2], true);
    ctx.reply(r, |out, done| out.integer(i64::from(done)));
}

/// SCAN's options from argument `from` on (MATCH, COUNT, and with `allow_type` TYPE); `None`
/// after replying an error. The flag says TYPE named no type (then nothing matches).
pub(super) fn scan_options<'a, R: Reply>(
    ctx: &mut Ctx<'_, R>,
    args: &'a [bytes::Bytes],
    from: usize,
    allow_type: bool,
) -> Option<(ScanOptions<'a>, bool)> {
    let mut options = ScanOptions::default();
    let mut no_such_type = false;
    let mut i = from;
    while i < args.len() {
        if i + 1 >= args.len() {
            ctx.syntax_error();
            return None;
        }
        if args[i].eq_ignore_ascii_case(b"match") {
            options.pattern = Some(&args[i + 1]);
        } else if args[i].eq_ignore_ascii_case(b"count") {
            let n = ctx.int(i + 1)?;
            if n < 1 {
                ctx.syntax_error();
                return None;
            }
            options.count = n as usize;
        } else if allow_type && args[i].eq_ignore_ascii_case(b"type") {
            options.key_type = KeyType::from_redis_name(&args[i + 1]);
            no_such_type = options.key_type.is_none();
        } else {
            ctx.syntax_error();
            return None;
        }
        i += 2;
    }
    Some((options, no_such_type))
}

/// `HSCAN`/`SSCAN`/`ZSCAN key cursor [MATCH p] [COUNT n]` arguments from `until` (exclusive):
/// the cursor, pattern and count, or `None` after replying the error.
pub(super) fn object_scan_args<'a, R: Reply>(
    ctx: &mut Ctx<'_, R>,
    args: &'a [bytes::Bytes],
    until: usize,
) -> Option<(u64, Option<&'a [u8]>, usize)> {
    let cursor = cursor_arg(ctx, 2)?;
    let (options, _) = scan_options(ctx, &args[..until], 3, false)?;
    Some((cursor, options.pattern, options.count))
}

/// A SCAN cursor argument (Redis: "ERR invalid cursor").
pub(super) fn cursor_arg<R: Reply>(ctx: &mut Ctx<'_, R>, i: usize) -> Option<u64> {
    let c = std::str::from_utf8(&ctx.args[i])
        .ok()
        .and_then(|s| s.parse::<u64>().ok());
    if c.is_none() {
        ctx.out.error(b"ERR invalid cursor");
    }
    c
}

/// SCAN on the worker owning the cursor's shard: one shard per step, in shard order.
pub(super) fn scan<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let Some(cursor) = cursor_arg(ctx, 1) else {
        return;
    };
    let args = ctx.args;
    let Some((mut options, no_such_type)) = scan_options(ctx, args, 2, true) else {
        return;
    };
    options.db = super::db_of(args);
    let (next, mut keys) = match ctx.store.scan_shard(cursor, options) {
        Ok(found) => found,
        Err(e) => return ctx.store_error(&e),
    };
    if no_such_type {
        keys.clear();
    }
    ctx.out.array_len(2);
    ctx.out.bulk(next.to_string().as_bytes());
    super::bulk_array(ctx.out, &keys);
}

/// DEBUG on one worker: DIGEST gives its digest as an integer.
pub(super) fn debug_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    if ctx.is(1, "digest") && ctx.args.len() == 2 {
        let d = ctx.store.digest();
        ctx.out.integer(d as i64);
    } else {
        let text = format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&ctx.args[1])
        );
        ctx.out.error(text.as_bytes());
    }
}

/// RANDOMKEY on one worker: one of its keys, or nil.
pub(super) fn randomkey_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let db = super::db_of(ctx.args);
    if db != 0 || ctx.store.db_counts().keys().any(|&d| d != 0) {
        return randomkey_in(ctx, db);
    }
    let start = fastrand_u64() as usize;
    let shards: Vec<usize> = ctx.store.owned_shards().collect();
    for k in 0..shards.len() {
        let shard = shards[(start + k) % shards.len()];
        let (_, keys) = ctx.store.scan(
            (shard as u64) << 32 | (fastrand_u64() & 0xFFFF_FFFF),
            ScanOptions {
                count: 1,
                ..ScanOptions::default()
            },
        );
        if let Some(key) = keys.into_iter().next() {
            return ctx.out.bulk(&key);
        }
        let (_, keys) = ctx.store.scan(
            (shard as u64) << 32,
            ScanOptions {
                count: 1,
                ..ScanOptions::default()
            },
        );
        if let Some(key) = keys.into_iter().next() {
            return ctx.out.bulk(&key);
        }
    }
    ctx.out.null();
}

/// RANDOMKEY on one worker that holds keys of several databases, whose keys may be few among
/// many:
/// a random starting shard and position, then on until one is found (only when this worker
/// has keys of the database).
fn randomkey_in<R: Reply>(ctx: &mut Ctx<'_, R>, db: u32) {
    if ctx.store.db_len(db) == 0 {
        return ctx.out.null();
    }
    let options = ScanOptions {
        count: 1,
        db,
        ..ScanOptions::default()
    };
    let shards: Vec<usize> = ctx.store.owned_shards().collect();
    let start = (shards[fastrand_u64() as usize % shards.len()] as u64) << 32
        | (fastrand_u64() & 0xFFFF_FFFF);
    // From the random point to the end of this worker's shards, then from their start.
    for mut cursor in [start, (shards[0] as u64) << 32] {
        loop {
            let (next, keys) = ctx.store.scan(cursor, options);
            if let Some(key) = keys.into_iter().next() {
                return ctx.out.bulk(&key);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    ctx.out.null();
}

/// A cheap random number (time-seeded SplitMix64 per thread).
fn fastrand_u64() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64),
        );
    }
    STATE.with(|s| {
        let x = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// Redis's `string2ll`: whether `value` is the canonical text of a 64-bit integer.
fn is_integer(value: &[u8]) -> bool {
    value.len() <= 20 && fc_resp::number::parse_i64(value).is_some()
}

/// `[sub, key, thresholds...]` from the connection (`OBJECT sub key`): `ENCODING` names the
/// encoding Redis would use for the value by its size thresholds (passed in, as configured:
/// hash entries/value, zset entries/value, intset entries, set listpack entries/value, list
/// listpack bytes), so tools that check them see Redis's names; `REFCOUNT` is 1 (2147483647
/// for the integers 0..9999, which Redis shares); `IDLETIME` is 0 (fast-cache keeps no per-key
/// access time); `FREQ` is refused as Redis refuses it without an LFU policy.
pub(super) fn object<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let key = ctx.args[1].clone();
    let sub = ctx.args[0].to_ascii_lowercase();
    let threshold = |i: usize| -> usize {
        ctx.args
            .get(i)
            .and_then(|a| std::str::from_utf8(a).ok()?.parse().ok())
            .unwrap_or(0)
    };
    let (hash_n, hash_v, zset_n, zset_v, intset_n, set_n, set_v, list_bytes) = (
        threshold(2),
        threshold(3),
        threshold(4),
        threshold(5),
        threshold(6),
        threshold(7),
        threshold(8),
        threshold(9),
    );
    let kind = match ctx.store.type_of(&key) {
        Ok(Some(kind)) => kind,
        Ok(None) => return ctx.out.null(),
        Err(e) => return ctx.store_error(&e),
    };
    match sub.as_slice() {
        b"freq" => {
            return ctx.out.error(
                b"ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
            );
        }
        b"idletime" => return ctx.out.integer(0),
        b"refcount" => {
            let shared = kind == fc_shard::KeyType::String
                && ctx
                    .store
                    .get_string(&key)
                    .ok()
                    .flatten()
                    .and_then(|v| fc_resp::number::parse_i64(&v))
                    .is_some_and(|n| (0..10_000).contains(&n));
            return ctx.out.integer(if shared { 2_147_483_647 } else { 1 });
        }
        _ => {}
    }
    let small = |items: &[Vec<u8>], n: usize, v: usize| {
        items.len() <= n && items.iter().all(|i| i.len() <= v)
    };
    let name: &[u8] = match kind {
        fc_shard::KeyType::String => match ctx.store.get_string(&key) {
            Ok(Some(v)) if is_integer(&v) => b"int",
            Ok(Some(v)) if v.len() <= 44 => b"embstr",
            _ => b"raw",
        },
        fc_shard::KeyType::List => match ctx.store.lrange(&key, 0, -1) {
            // A listpack entry costs its bytes plus about two of header and backlen.
            Ok(items) if items.iter().map(|i| i.len() + 2).sum::<usize>() + 7 <= list_bytes => {
                b"listpack"
            }
            _ => b"quicklist",
        },
        fc_shard::KeyType::Set => match ctx.store.smembers(&key) {
            Ok(m) if m.len() <= intset_n && m.iter().all(|x| is_integer(x)) => b"intset",
            Ok(m) if small(&m, set_n, set_v) => b"listpack",
            _ => b"hashtable",
        },
        fc_shard::KeyType::Hash => match ctx.store.hgetall(&key) {
            Ok(pairs)
                if pairs.len() <= hash_n
                    && pairs
                        .iter()
                        .all(|(f, v)| f.len() <= hash_v && v.len() <= hash_v) =>
            {
                b"listpack"
            }
            _ => b"hashtable",
        },
        fc_shard::KeyType::ZSet => {
            match ctx
                .store
                .zrange(&key, fc_shard::ZRange::Rank(0, -1), false, None)
            {
                Ok(e) if e.len() <= zset_n && e.iter().all(|(m, _)| m.len() <= zset_v) => {
                    b"listpack"
                }
                _ => b"skiplist",
            }
        }
        fc_shard::KeyType::Stream => b"stream",
        _ => b"raw",
    };
    ctx.out.bulk(name);
}

/// `[_, key]`: the bytes `key` is charged to the memory budget (its entry's size class, its
/// index slot and an object's estimate), or nil.
pub(super) fn memory_usage<R: Reply>(ctx: &mut Ctx<'_, R>) {
    match ctx.store.memory_usage(&ctx.args[1]) {
        Ok(Some(n)) => ctx.out.integer(n as i64),
        Ok(None) => ctx.out.null(),
        Err(e) => ctx.store_error(&e),
    }
}
