//! `DUMP` and `RESTORE` in Redis's serialized-value format (`fc_snapshot::rdb`: the RDB encoding
//! of one value, the RDB version and a CRC64), so keys move between redis-server and fast-cache
//! with the tools built on these two commands.

use fc_shard::{KeyTtl, KeyType, ListEnd, SetExpiry, SetOptions, ZAddOptions, ZRange};
use fc_snapshot::rdb::{self, Limits, StreamValue, Value};

use super::Ctx;
use crate::reply::Reply;

/// The value at `key` as the RDB codec takes it (`None`: missing).
fn read_value(
    store: &mut fc_shard::LocalEmbeddedStore,
    key: &[u8],
) -> Result<Option<Value>, fc_shard::StoreError> {
    let Some(kind) = store.type_of(key)? else {
        return Ok(None);
    };
    Ok(Some(match kind {
        KeyType::String => Value::String(store.get_string(key)?.unwrap_or_default()),
        KeyType::List => Value::List(store.lrange(key, 0, -1)?),
        KeyType::Set => Value::Set(store.smembers(key)?),
        KeyType::Hash => Value::Hash(store.hgetall(key)?),
        KeyType::ZSet => Value::SortedSet(store.zrange(key, ZRange::Rank(0, -1), false, None)?),
        KeyType::Stream => {
            let mut value = None;
            store.stream_read(key, &mut |s| value = Some(StreamValue::from_stream(s)))?;
            match value {
                Some(v) => Value::Stream(Box::new(v)),
                None => return Ok(None),
            }
        }
        // A type the codec has no encoding for.
        _ => return Err(fc_shard::StoreError::WrongType),
    }))
}

/// Creates the stream `key` from a restored value through the logged ops that rebuild it
/// ([`StreamValue::ops`]).
fn write_stream(
    store: &mut fc_shard::LocalEmbeddedStore,
    key: &[u8],
    s: &StreamValue,
) -> Result<(), fc_shard::StoreError> {
    let mut result = Ok(());
    s.ops(&mut |op| {
        if result.is_ok() {
            result = store.stream_apply(key, op);
        }
    });
    result
}

/// `DUMP key`: the serialized value, or nil.
pub(super) fn dump<R: Reply>(ctx: &mut Ctx<'_, R>) {
    match read_value(ctx.store, &ctx.args[1]) {
        Ok(Some(value)) => ctx.out.bulk(&rdb::dump(&value)),
        Ok(None) => ctx.out.null(),
        Err(e) => ctx.store_error(&e),
    }
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`,
/// checked in Redis's order: the options, an existing key (`BUSYKEY` without `REPLACE`), the
/// TTL, the payload's version and checksum, its data. `IDLETIME` and `FREQ` are checked and
/// accepted; fast-cache's eviction keeps its own recency.
pub(super) fn restore<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let args = ctx.args;
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, false, false);
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        match args[i].to_ascii_lowercase().as_slice() {
            b"replace" => replace = true,
            b"absttl" => absttl = true,
            b"idletime" if more && !freq => {
                let Some(n) = ctx.int(i + 1) else { return };
                if n < 0 {
                    return ctx.out.error(b"ERR Invalid IDLETIME value, must be >= 0");
                }
                idle = true;
                i += 1;
            }
            b"freq" if more && !idle => {
                let Some(n) = ctx.int(i + 1) else { return };
                if !(0..=255).contains(&n) {
                    return ctx
                        .out
                        .error(b"ERR Invalid FREQ value, must be >= 0 and <= 255");
                }
                freq = true;
                i += 1;
            }
            _ => return ctx.syntax_error(),
        }
        i += 1;
    }
    let key = &args[1];
    if !replace && !matches!(ctx.store.pttl_millis(key), KeyTtl::Missing) {
        return ctx.out.error(b"BUSYKEY Target key name already exists.");
    }
    let Some(ttl) = ctx.int(2) else { return };
    if ttl < 0 {
        return ctx.out.error(b"ERR Invalid TTL value, must be >= 0");
    }
    let value = match rdb::restore(&args[3], Limits::default()) {
        Ok(value) => value,
        Err(e) => {
            return ctx
                .out
                .error(format!("ERR {}", e.redis_message()).as_bytes());
        }
    };
    if replace && let Err(e) = ctx.store.try_delete(key) {
        return ctx.store_error(&e);
    }
    let now = ctx.store.clock().now_ms();
    let at_ms = match (ttl, absttl) {
        (0, _) => None,
        (t, true) => Some(t as u64),
        (t, false) => Some(now.saturating_add(t as u64)),
    };
    // Already expired: nothing is created (the old key, with REPLACE, is gone).
    if at_ms.is_some_and(|at| at <= now) {
        return ctx.out.ok();
    }
    if let Err(e) = write_value(ctx, &value, at_ms) {
        return ctx.store_error(&e);
    }
    ctx.out.ok();
}

/// Creates `args[1]` holding `value`, expiring at `at_ms`.
fn write_value<R: Reply>(
    ctx: &mut Ctx<'_, R>,
    value: &Value,
    at_ms: Option<u64>,
) -> Result<(), fc_shard::StoreError> {
    let key = &ctx.args[1];
    fn refs(items: &[Vec<u8>]) -> Vec<&[u8]> {
        items.iter().map(Vec::as_slice).collect()
    }
    match value {
        Value::String(v) => {
            let options = SetOptions {
                expiry: at_ms.map_or(SetExpiry::Clear, SetExpiry::AtMs),
                ..SetOptions::default()
            };
            ctx.store.set_with(key, v, options)?;
            return Ok(());
        }
        Value::List(items) => {
            ctx.store.push(key, ListEnd::Right, &refs(items), false)?;
        }
        Value::Set(members) => {
            ctx.store.sadd(key, &refs(members))?;
        }
        Value::Hash(pairs) => {
            let pairs: Vec<(&[u8], &[u8])> = pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect();
            ctx.store.hset(key, &pairs)?;
        }
        Value::SortedSet(entries) => {
            let entries: Vec<(f64, &[u8])> = entries.iter().map(|(m, s)| (*s, &m[..])).collect();
            ctx.store.zadd(key, &entries, ZAddOptions::default())?;
        }
        Value::Stream(s) => write_stream(ctx.store, key, s)?,
    }
    if let Some(at) = at_ms {
        ctx.store.expire_at_ms(key, at);
    }
    Ok(())
}
