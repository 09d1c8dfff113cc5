//! The command table: every command's name, arity, how it is routed, and its handler.
//!
//! Handlers run on the worker that owns the key's shard, against that worker's
//! `LocalEmbeddedStore`, and write their reply through an [`Encoder`]. They never await and
//! never see the connection; connection-level commands (`HELLO`, `AUTH`, `SELECT`, ...) are the
//! connection's own (`conn.rs`). One module per command family.

mod hashes;
mod keys;
mod lists;
mod sets;
mod strings;
mod zsets;

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;
use fc_resp::{Encoder, number::parse_i64};
use fc_shard::{EmbeddedKeyRoute, LocalEmbeddedStore, StoreError};

/// A command's implementation.
pub(crate) type Handler = fn(&mut Ctx<'_>);

/// How replies of a command split over several keys are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// One array of the parts' replies, in key order (`MGET`).
    Array,
    /// The sum of the parts' integer replies (`DEL`, `EXISTS`).
    Sum,
    /// `+OK` once every part answered (`MSET`, `FLUSHALL`).
    Ok,
    /// The parts' arrays concatenated (`KEYS`).
    Concat,
    /// The wrapping sum of the parts' integers, as 16 hex digits (`DEBUG DIGEST`).
    Digest,
    /// The first non-null part, trying the workers from a random one (`RANDOMKEY`).
    Random,
}

/// Where a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// On the connection (no key, or connection state).
    Connection,
    /// On the owner of argument 1's shard (a second key must share the shard).
    Key,
    /// Split per key (`step` arguments per key from argument 1), each part on its owner with
    /// the part handler, replies merged.
    PerKey { step: usize, merge: Merge },
    /// On every worker, replies merged.
    AllWorkers(Merge),
    /// On the owner of the shard a `SCAN` cursor (argument 1) is in.
    Cursor,
}

/// One command.
#[derive(Debug)]
pub(crate) struct Spec {
    /// Lowercase name.
    pub(crate) name: &'static str,
    /// Redis arity: positive = exactly, negative = at least (the name counts).
    pub(crate) arity: i32,
    pub(crate) route: Route,
    pub(crate) handler: Handler,
    /// Whether it may change data (refused with `MISCONF` once the log has failed).
    pub(crate) write: bool,
    /// Whether a connection may run it in place when its key is on the connection's worker:
    /// a keyed command that `conn::dispatch` and `conn::run` handle like any other (not one
    /// of [`GENERAL_PATH_ONLY`]).
    pub(crate) direct: bool,
    /// Whether the commands after it must wait to be parsed until it has run: `AUTH`,
    /// `HELLO` and `RESET` change the limits the parser applies.
    pub(crate) barrier: bool,
}

/// Keyed commands that `conn::run` handles itself (so they never take the in-place path):
/// `MSETNX` checks whether its keys span workers first.
pub(crate) const GENERAL_PATH_ONLY: &[&str] = &["msetnx"];

impl Spec {
    pub(crate) fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

/// What a handler works with.
pub(crate) struct Ctx<'a> {
    pub(crate) store: &'a mut LocalEmbeddedStore,
    pub(crate) args: &'a [Bytes],
    /// The route of `args[1]` when the caller already hashed it (a keyed command's key, routed
    /// once for its owner and its prefetch): handlers on the hot path reuse it.
    pub(crate) route: Option<EmbeddedKeyRoute>,
    pub(crate) out: Encoder<'a>,
}

impl Ctx<'_> {
    /// The route of the key in `args[1]`.
    pub(crate) fn key_route(&self) -> EmbeddedKeyRoute {
        self.route
            .unwrap_or_else(|| self.store.route_key(&self.args[1]))
    }

    /// Argument `i` as an integer; on failure replies Redis's error and returns `None`.
    pub(crate) fn int(&mut self, i: usize) -> Option<i64> {
        let n = parse_i64(&self.args[i]);
        if n.is_none() {
            self.out
                .error(b"ERR value is not an integer or out of range");
        }
        n
    }

    /// Argument `i` as a float (Redis's `strtold` rules: `inf` allowed, NaN not).
    pub(crate) fn float(&mut self, i: usize) -> Option<f64> {
        let f = parse_float(&self.args[i]);
        if f.is_none() {
            self.out.error(b"ERR value is not a valid float");
        }
        f
    }

    pub(crate) fn syntax_error(&mut self) {
        self.out.error(b"ERR syntax error");
    }

    /// Replies with the store's error as Redis words it.
    pub(crate) fn store_error(&mut self, err: &StoreError) {
        store_error(&mut self.out, err);
    }

    /// Replies with `result`'s value through `ok`, or its error.
    pub(crate) fn reply<T>(
        &mut self,
        result: Result<T, StoreError>,
        ok: impl FnOnce(&mut Encoder<'_>, T),
    ) {
        match result {
            Ok(v) => ok(&mut self.out, v),
            Err(e) => self.store_error(&e),
        }
    }

    /// Whether argument `i` equals `word`, ASCII case-insensitively.
    pub(crate) fn is(&self, i: usize, word: &str) -> bool {
        self.args[i].eq_ignore_ascii_case(word.as_bytes())
    }
}

/// A float as Redis reads one (`inf`, `-inf`, `+inf` accepted; NaN and spaces refused).
pub(crate) fn parse_float(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() || bytes[0].is_ascii_whitespace() {
        return None;
    }
    let v: f64 = std::str::from_utf8(bytes).ok()?.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Reply helpers shared by the families.
/// Redis's reply for a store error.
pub(crate) fn store_error(out: &mut Encoder<'_>, err: &StoreError) {
    match err {
        e if e.is_redis_reply() => out.error(e.to_string().as_bytes()),
        StoreError::OutOfMemory { .. } => {
            out.error(b"OOM command not allowed when used memory > 'maxmemory'.");
        }
        StoreError::CrossShard { .. } | StoreError::NotOwner { .. } => {
            out.error(b"CROSSSLOT Keys in request don't hash to the same slot");
        }
        e => out.error(format!("ERR {e}").as_bytes()),
    }
}

pub(crate) fn bulk_or_null(out: &mut Encoder<'_>, v: Option<Vec<u8>>) {
    match v {
        Some(v) => out.bulk(&v),
        None => out.null(),
    }
}

pub(crate) fn bulk_array(out: &mut Encoder<'_>, items: &[Vec<u8>]) {
    out.array_len(items.len());
    for item in items {
        out.bulk(item);
    }
}

pub(crate) fn count(out: &mut Encoder<'_>, n: usize) {
    out.integer(n as i64);
}

/// A no-op handler for connection-routed commands (the connection answers them).
fn connection_only(_: &mut Ctx<'_>) {}

fn spec(name: &'static str, arity: i32, route: Route, handler: Handler) -> Spec {
    Spec {
        name,
        arity,
        route,
        handler,
        write: WRITE_COMMANDS.contains(&name),
        direct: matches!(route, Route::Key) && !GENERAL_PATH_ONLY.contains(&name),
        barrier: matches!(name, "auth" | "hello" | "reset"),
    }
}

/// Commands that may change data (Redis's `write` flag).
const WRITE_COMMANDS: &[&str] = &[
    "set",
    "setnx",
    "setex",
    "psetex",
    "mset",
    "msetnx",
    "getset",
    "getdel",
    "getex",
    "append",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "incrbyfloat",
    "setrange",
    "del",
    "unlink",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "rename",
    "renamenx",
    "flushall",
    "flushdb",
    "hset",
    "hmset",
    "hsetnx",
    "hdel",
    "hincrby",
    "hincrbyfloat",
    "lpush",
    "rpush",
    "lpushx",
    "rpushx",
    "lpop",
    "rpop",
    "lset",
    "lrem",
    "ltrim",
    "linsert",
    "lmove",
    "rpoplpush",
    "sadd",
    "srem",
    "spop",
    "smove",
    "sinterstore",
    "sunionstore",
    "sdiffstore",
    "zadd",
    "zincrby",
    "zrem",
    "zpopmin",
    "zpopmax",
    "zremrangebyrank",
    "zremrangebyscore",
    "zremrangebylex",
];

/// Every command, by its lowercase name packed into an integer ([`packed_name`]: the lookup
/// is on every command's path, and an integer key is one compare, not a `memcmp`).
pub(crate) static TABLE: LazyLock<HashMap<u128, Spec, foldhash::fast::FixedState>> =
    LazyLock::new(|| {
        use Route::{AllWorkers, Connection, PerKey};
        let conn = |name, arity| spec(name, arity, Connection, connection_only);
        let mut all = vec![
            conn("ping", -1),
            conn("echo", 2),
            conn("hello", -1),
            conn("auth", -2),
            conn("select", 2),
            conn("quit", -1),
            conn("reset", 1),
            conn("client", -2),
            conn("command", -1),
            conn("info", -1),
            conn("time", 1),
            conn("config", -2),
            conn("multi", 1),
            conn("exec", 1),
            conn("discard", 1),
            conn("watch", -2),
            conn("unwatch", 1),
            conn("shutdown", -1),
            conn("save", 1),
            conn("bgsave", -1),
            conn("lastsave", 1),
            spec("dbsize", 1, AllWorkers(Merge::Sum), keys::dbsize),
            spec("flushall", -1, AllWorkers(Merge::Ok), keys::flushall),
            spec("flushdb", -1, AllWorkers(Merge::Ok), keys::flushall),
            spec("keys", 2, AllWorkers(Merge::Concat), keys::keys),
            spec(
                "del",
                -2,
                PerKey {
                    step: 1,
                    merge: Merge::Sum,
                },
                keys::del_one,
            ),
            spec(
                "unlink",
                -2,
                PerKey {
                    step: 1,
                    merge: Merge::Sum,
                },
                keys::del_one,
            ),
            spec(
                "exists",
                -2,
                PerKey {
                    step: 1,
                    merge: Merge::Sum,
                },
                keys::exists_one,
            ),
            spec(
                "touch",
                -2,
                PerKey {
                    step: 1,
                    merge: Merge::Sum,
                },
                keys::exists_one,
            ),
            spec(
                "mget",
                -2,
                PerKey {
                    step: 1,
                    merge: Merge::Array,
                },
                strings::mget_one,
            ),
            spec(
                "mset",
                -3,
                PerKey {
                    step: 2,
                    merge: Merge::Ok,
                },
                strings::mset_one,
            ),
            spec("scan", -2, Route::Cursor, keys::scan),
            spec("debug", -2, AllWorkers(Merge::Digest), keys::debug_part),
            spec(
                "randomkey",
                1,
                AllWorkers(Merge::Random),
                keys::randomkey_part,
            ),
        ];
        all.extend(keys::specs());
        all.extend(strings::specs());
        all.extend(hashes::specs());
        all.extend(lists::specs());
        all.extend(sets::specs());
        all.extend(zsets::specs());
        all.into_iter()
            .map(|s| {
                let key = packed_name(s.name.as_bytes())
                    .unwrap_or_else(|| panic!("command name over 16 bytes: {}", s.name));
                (key, s)
            })
            .collect()
    });

/// A command name of at most 16 bytes, lowercased, as a little-endian integer padded with
/// zeros (the length is compared after the lookup, so `get\0` is not `get`).
#[inline]
fn packed_name(name: &[u8]) -> Option<u128> {
    let mut lower = [0u8; 16];
    lower.get_mut(..name.len())?.copy_from_slice(name);
    lower.make_ascii_lowercase();
    Some(u128::from_le_bytes(lower))
}

/// The spec of a command known to exist (by lowercase name).
pub(crate) fn spec_of(name: &str) -> &'static Spec {
    lookup(name.as_bytes()).unwrap_or_else(|| panic!("no command {name}"))
}

/// The spec of a command name (any case).
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Spec> {
    TABLE
        .get(&packed_name(name)?)
        .filter(|spec| spec.name.len() == name.len())
}

/// Redis's reply for an unknown command (clients match its prefix).
pub(crate) fn unknown_command(args: &[Bytes], out: &mut Encoder<'_>) {
    let mut text = String::from("ERR unknown command '");
    text.push_str(&String::from_utf8_lossy(&args[0]));
    text.push_str("', with args beginning with: ");
    for arg in args.iter().skip(1).take(20) {
        text.push('\'');
        text.push_str(&String::from_utf8_lossy(arg));
        text.push_str("' ");
    }
    out.error(text.as_bytes());
}

/// Redis's reply for a wrong argument count.
pub(crate) fn wrong_arity(name: &[u8], out: &mut Encoder<'_>) {
    let text = format!(
        "ERR wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name).to_ascii_lowercase()
    );
    out.error(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::{TABLE, lookup};

    #[test]
    fn every_command_is_found_by_its_name_in_any_case() {
        for spec in TABLE.values() {
            assert_eq!(
                lookup(spec.name.as_bytes()).map(|s| s.name),
                Some(spec.name)
            );
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).map(|s| s.name), Some(spec.name));
        }
        assert_eq!(lookup(b"GeT").map(|s| s.name), Some("get"));
    }

    #[test]
    fn near_names_are_unknown() {
        for name in [
            &b"get\0"[..],
            b"ge",
            b"",
            b"\0",
            b"getx",
            b"zremrangebyscorex",
            b"a-name-far-longer-than-sixteen-bytes",
        ] {
            assert!(
                lookup(name).is_none(),
                "{:?}",
                String::from_utf8_lossy(name)
            );
        }
    }
}
