//! Commands: the table ([`table::COMMANDS`], one entry per command: the single source of
//! truth for its properties and its route), the handlers that run against a worker's store
//! (one module per family: argument parsing, the storage call, the reply), and the
//! introspection commands generated from the table (`COMMAND ...`, in [`introspect`]).
//!
//! A store handler runs on the worker that owns its key's shard, against that worker's
//! `LocalEmbeddedStore`, and writes its reply through a [`Reply`] sink it is generic over: it
//! is instantiated once per sink ([`Handler`]: RESP for the connection's own worker, the typed
//! [`Replies`] buffer for work sent to another worker), so the hot path is static dispatch.
//! Handlers never await and never see the connection. Connection-level commands
//! ([`Session`]) run on the connection (`crate::session`, `crate::cross`).

/// A [`Handler`] from a handler generic over its sink: every instantiation the server uses.
macro_rules! store {
    ($f:path) => {
        $crate::command::Handler {
            resp: $f,
            typed: $f,
            #[cfg(test)]
            text: $f,
        }
    };
}
pub(crate) use store;

/// `PFDEBUG`'s part on the key's owner, its arguments `PFDEBUG key subcommand`
/// ([`hyperloglog::pfdebug`]).
pub(crate) const PFDEBUG: Handler = store!(hyperloglog::pfdebug);

/// `SWAPDB`'s part on each worker ([`keys::swapdb_part`]).
pub(crate) const SWAPDB_PART: Handler = store!(keys::swapdb_part);

/// `RENAMENX` on the key's owner (`MOVE`'s rename between databases).
pub(crate) const RENAMENX: Handler = store!(keys::renamenx);

/// The sort half of a `SORT ... STORE` across shards ([`sort::export`]).
pub(crate) const SORT_EXPORT: Handler = store!(sort::export);

/// `MEMORY USAGE`'s part on the key's owner ([`keys::memory_usage`]).
pub(crate) const MEMORY_USAGE: Handler = store!(keys::memory_usage);

/// `OBJECT`'s subcommands on the key's owner ([`keys::object`]).
pub(crate) const OBJECT: Handler = store!(keys::object);

/// The search half of a storing GEO search across shards ([`geo::export`]).
pub(crate) const GEO_EXPORT: Handler = store!(geo::export);

/// The read half of a `ZRANGESTORE` across shards ([`zsets::zrange_scored`]).
pub(crate) const ZRANGE_SCORED: Handler = store!(zsets::zrange_scored);

mod bitfield;
mod dump;
pub(crate) mod geo;
mod hashes;
pub(crate) mod hyperloglog;
pub(crate) mod introspect;
mod keys;
mod lists;
pub(crate) mod pops;
mod sets;
mod sort;
pub(crate) mod streams;
mod strings;
mod sub_table;
mod subs;
mod table;
#[cfg(test)]
mod table_tests;
mod zsets;

use std::collections::HashMap;
use std::sync::LazyLock;

use bytes::Bytes;
use fc_resp::number::parse_i64;
use fc_shard::{EmbeddedKeyRoute, LocalEmbeddedStore, StoreError};

use crate::reply::{Replies, Reply, Resp};

pub(crate) use subs::{
    SUBCOMMANDS, Selected, Sub, select, slot_count, slot_flags, slot_name, slots_named,
};
pub(crate) use table::COMMANDS;

/// `DEBUG`'s part on each worker (`DEBUG DIGEST`, the unknown subcommands).
pub(crate) const DEBUG_PART: Handler = store!(keys::debug_part);

/// A store handler, instantiated for every sink (see [`store!`]).
#[derive(Clone, Copy)]
pub(crate) struct Handler {
    /// Writing RESP straight into a connection's buffer.
    pub(crate) resp: fn(&mut Ctx<'_, Resp>),
    /// Writing typed replies (work for another worker, fanned-out parts).
    pub(crate) typed: fn(&mut Ctx<'_, Replies>),
    /// Writing the test-only text protocol (`reply::tests::TextSink`).
    #[cfg(test)]
    pub(crate) text: fn(&mut Ctx<'_, crate::reply::tests::TextSink>),
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

/// `EXISTS`'s per-key part: a touch of the key on its owner (an expired key is reclaimed by
/// it), for `WATCH`, `EXEC` and `MSETNX`.
pub(crate) const EXISTS_ONE: Handler = store!(keys::exists_one);

/// `MSET`'s per-key part (`MSETNX` across workers).
pub(crate) const MSET_ONE: Handler = store!(strings::mset_one);

/// How replies of a command split over several keys or workers are merged.
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

/// Connection-level commands: they run on the connection, with its session state, and never
/// on a worker's store directly (`crate::session::run` dispatches them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Session {
    Acl,
    Auth,
    Bgsave,
    Client,
    Command,
    Config,
    Discard,
    Echo,
    Exec,
    Hello,
    Info,
    Lastsave,
    Multi,
    Ping,
    Quit,
    Reset,
    Save,
    Select,
    Shutdown,
    Time,
    Unwatch,
    Watch,
    /// `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT|HELP`.
    Object,
    /// `WAIT numreplicas timeout`.
    Wait,
    Role,
    ReplicaOf,
    Lolwut,
    /// `MOVE key db`: a rename into another database on the key's owner.
    Move,
    /// `SWAPDB a b`, on every worker held.
    Swapdb,
    /// `MODULE LIST|LOAD|LOADEX|UNLOAD|HELP`: no modules, and loading refused as Redis's
    /// default `enable-module-command no` refuses it.
    Module,
    /// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key` on the key's owner.
    PfDebug,
    /// `PFSELFTEST`.
    PfSelfTest,
    /// `CLUSTER`, `ASKING`, `READONLY`, `READWRITE`: cluster support is off, as on a
    /// standalone Redis.
    NoCluster,
    /// `BGREWRITEAOF`: a snapshot, which trims the log as Redis's rewrite trims its AOF.
    Bgrewriteaof,
    /// `MEMORY USAGE|DOCTOR|MALLOC-STATS|PURGE|STATS|HELP`.
    Memory,
    /// `DEBUG SLEEP` on the connection's worker, the rest on every worker.
    Debug,
    /// `MONITOR`.
    Monitor,
    /// `SLOWLOG GET|LEN|RESET|HELP`.
    Slowlog,
    /// `LATENCY LATEST|HISTORY|RESET|GRAPH|DOCTOR|HISTOGRAM|HELP`.
    Latency,
    /// The pub/sub commands (`crate::pubsub`).
    PubSub(Ps),
    /// The scripting commands (`crate::script`).
    Script(Sc),
}

/// The scripting commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sc {
    Eval,
    EvalSha,
    EvalRo,
    EvalShaRo,
    Fcall,
    FcallRo,
    Script,
    Function,
}

/// The declared key count (`numkeys`, argument 2) of `EVAL`, `EVALSHA`, `FCALL` and their
/// `_RO` forms, or Redis's error for it.
pub(crate) fn numkeys(args: &[Bytes]) -> Result<usize, &'static [u8]> {
    // Redis's `string2ll`: no `+`, no leading zeros (`01` is refused, as Redis refuses it).
    let n = args
        .get(2)
        .and_then(|a| fc_resp::number::parse_i64(a))
        .ok_or(&b"ERR value is not an integer or out of range"[..])?;
    if n < 0 {
        return Err(b"ERR Number of keys can't be negative");
    }
    if n as u64 > args.len().saturating_sub(3) as u64 {
        return Err(b"ERR Number of keys can't be greater than number of args");
    }
    Ok(n as usize)
}

/// The pub/sub commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ps {
    Publish,
    Pubsub,
    Psubscribe,
    Punsubscribe,
    Spublish,
    Ssubscribe,
    Subscribe,
    Sunsubscribe,
    Unsubscribe,
}

/// Where a command runs, with the handler(s) it runs there.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    /// On the connection (no key, or connection state).
    Session(Session),
    /// On the owner of argument 1's shard (a second key must share the shard).
    Key(Handler),
    /// A container whose subcommands name a key in argument 2 (`XGROUP`, `XINFO`): on that
    /// key's owner (here when there is none: `HELP`).
    SubKey(Handler),
    /// Split per key (`step` arguments per key from argument 1), each part on its owner,
    /// replies merged.
    PerKey {
        step: usize,
        merge: Merge,
        part: Handler,
    },
    /// On every worker, replies merged.
    AllWorkers { merge: Merge, part: Handler },
    /// On the owner of the shard a `SCAN` cursor (argument 1) is in.
    Cursor(Handler),
    /// Keys every `step` arguments from argument 1, all or nothing (`MSETNX`): on their owner
    /// when one worker owns them all, else held across their workers (`crate::cross`).
    Atomic { step: usize, part: Handler },
    /// A pop over several keys that may block (`BLPOP`, `LMPOP`, ...): on the connection,
    /// each key tried on its owner (`crate::blocking`).
    Pop(pops::Block),
    /// Several keys that may live on different shards (`RENAME`, `LMOVE`, `SINTER`...): the
    /// handler on the owner when they share a shard, else composed from single-key steps
    /// with their workers held (`crate::multi`); no handler: always composed.
    Multi {
        handler: Option<Handler>,
        multi: Multi,
    },
}

/// How a [`Route::Multi`] command is composed across shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Multi {
    Rename {
        nx: bool,
    },
    Copy,
    LMove,
    SMove,
    SetAlgebra {
        op: SetOp,
        store: bool,
    },
    SInterCard,
    /// `BITOP`.
    BitOp,
    /// `ZRANGESTORE`.
    ZRangeStore,
    /// `LCS`.
    Lcs,
    /// `PFCOUNT` of several keys.
    PfCount,
    /// `PFMERGE`.
    PfMerge,
    /// A GEO search that stores its result (`STORE`, `STOREDIST`, `GEOSEARCHSTORE`).
    GeoStore,
    /// `SORT ... STORE`.
    SortStore,
    /// `ZUNION`, `ZINTER`, `ZDIFF` (`store`: their `STORE`s; `card`: `ZINTERCARD`).
    ZAlgebra {
        op: SetOp,
        store: bool,
        card: bool,
    },
}

/// The set operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SetOp {
    Inter,
    Union,
    Diff,
}

/// Redis 7 command flags (`COMMAND INFO`'s third element), as bits.
#[expect(
    non_snake_case,
    reason = "a namespace of flag constants, named as Redis names them"
)]
pub(crate) mod F {
    pub(crate) const WRITE: u32 = 1;
    pub(crate) const READONLY: u32 = 1 << 1;
    pub(crate) const DENYOOM: u32 = 1 << 2;
    pub(crate) const ADMIN: u32 = 1 << 3;
    pub(crate) const PUBSUB: u32 = 1 << 4;
    pub(crate) const NOSCRIPT: u32 = 1 << 5;
    pub(crate) const BLOCKING: u32 = 1 << 6;
    pub(crate) const LOADING: u32 = 1 << 7;
    pub(crate) const STALE: u32 = 1 << 8;
    pub(crate) const SKIP_MONITOR: u32 = 1 << 9;
    pub(crate) const SKIP_SLOWLOG: u32 = 1 << 10;
    pub(crate) const FAST: u32 = 1 << 11;
    pub(crate) const NO_AUTH: u32 = 1 << 12;
    pub(crate) const MAY_REPLICATE: u32 = 1 << 13;
    pub(crate) const NO_MANDATORY_KEYS: u32 = 1 << 14;
    pub(crate) const NO_MULTI: u32 = 1 << 15;
    pub(crate) const MOVABLEKEYS: u32 = 1 << 16;
    pub(crate) const ALLOW_BUSY: u32 = 1 << 17;
    pub(crate) const NO_ASYNC_LOADING: u32 = 1 << 18;

    /// Every flag with its Redis name, in the order Redis lists them.
    pub(crate) const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Redis 7 ACL categories (`COMMAND INFO`'s seventh element), as bits.
#[expect(
    non_snake_case,
    reason = "a namespace of category constants, named as Redis names them"
)]
pub(crate) mod A {
    pub(crate) const KEYSPACE: u32 = 1;
    pub(crate) const READ: u32 = 1 << 1;
    pub(crate) const WRITE: u32 = 1 << 2;
    pub(crate) const SET: u32 = 1 << 3;
    pub(crate) const SORTEDSET: u32 = 1 << 4;
    pub(crate) const LIST: u32 = 1 << 5;
    pub(crate) const HASH: u32 = 1 << 6;
    pub(crate) const STRING: u32 = 1 << 7;
    pub(crate) const BITMAP: u32 = 1 << 8;
    pub(crate) const HYPERLOGLOG: u32 = 1 << 9;
    pub(crate) const GEO: u32 = 1 << 10;
    pub(crate) const STREAM: u32 = 1 << 11;
    pub(crate) const PUBSUB: u32 = 1 << 12;
    pub(crate) const ADMIN: u32 = 1 << 13;
    pub(crate) const FAST: u32 = 1 << 14;
    pub(crate) const SLOW: u32 = 1 << 15;
    pub(crate) const BLOCKING: u32 = 1 << 16;
    pub(crate) const DANGEROUS: u32 = 1 << 17;
    pub(crate) const CONNECTION: u32 = 1 << 18;
    pub(crate) const TRANSACTION: u32 = 1 << 19;
    pub(crate) const SCRIPTING: u32 = 1 << 20;

    /// Every category with its Redis name (without the `@`).
    pub(crate) const NAMES: &[(u32, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];
}

/// Where a key spec starts looking for keys (Redis 7 key specs).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Begin {
    /// At this argument.
    Index(i32),
    /// After the argument `keyword`, searching from `start_from` (negative: from the end).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    /// Not described by a spec (`SORT`'s BY/GET keys and STORE): the command finds them.
    Unknown,
}

/// How a key spec finds its keys from where it begins.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Find {
    /// Keys every `step` arguments up to `last` (relative; -1 is the last argument), the
    /// count divided by `limit` when it is not 0.
    Range { last: i32, step: i32, limit: i32 },
    /// The argument `keynum_index` gives the key count; keys start at `first_key`.
    Keynum {
        keynum_index: i32,
        first_key: i32,
        step: i32,
    },
    /// Not described by a spec (see [`Begin::Unknown`]).
    Unknown,
}

/// One Redis 7 key spec.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeySpec {
    /// Redis's note on the flags ("" for none).
    pub(crate) notes: &'static str,
    /// `RO`, `RW`, `OW`, `RM`, `access`, `update`, `insert`, `delete`...
    pub(crate) flags: &'static [&'static str],
    pub(crate) begin: Begin,
    pub(crate) find: Find,
}

/// A command's documentation (`COMMAND DOCS`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Doc {
    pub(crate) group: &'static str,
    pub(crate) since: &'static str,
    pub(crate) complexity: &'static str,
    pub(crate) summary: &'static str,
}

/// One command. Aligned to 256 bytes so that its position in the table (its statistics slot,
/// [`Spec::index`], computed for every command run) is a subtraction and a shift.
#[derive(Debug)]
#[repr(align(256))]
pub(crate) struct Spec {
    /// Lowercase name.
    pub(crate) name: &'static str,
    /// Redis arity: positive = exactly, negative = at least (the name counts).
    pub(crate) arity: i32,
    /// [`F`] bits.
    pub(crate) flags: u32,
    /// [`A`] bits.
    pub(crate) acl: u32,
    /// First key, last key (negative: from the end), step; `(0, 0, 0)`: no keys.
    pub(crate) keys: (i32, i32, i32),
    pub(crate) key_specs: &'static [KeySpec],
    /// Redis's command tips (`nondeterministic_output`, request and response policies).
    pub(crate) tips: &'static [&'static str],
    pub(crate) doc: Doc,
    pub(crate) route: Route,
}

impl Spec {
    pub(crate) fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    pub(crate) fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// Whether it may change data (refused with `MISCONF` once the log has failed).
    pub(crate) fn write(&self) -> bool {
        self.has(F::WRITE)
    }

    /// The handler of a command that runs on its key's owner as is: a connection may run it
    /// in place when its key is on the connection's worker.
    #[inline]
    pub(crate) fn direct(&self) -> Option<Handler> {
        match self.route {
            Route::Key(handler) => Some(handler),
            _ => None,
        }
    }

    /// The connection-level command this is, if it is one.
    pub(crate) fn session(&self) -> Option<Session> {
        match self.route {
            Route::Session(s) => Some(s),
            _ => None,
        }
    }

    /// Whether it runs a script or a library function (`EVAL`, `EVALSHA`, `FCALL` and their
    /// `_RO` forms).
    pub(crate) fn script(&self) -> bool {
        matches!(
            self.route,
            Route::Session(Session::Script(
                Sc::Eval | Sc::EvalSha | Sc::EvalRo | Sc::EvalShaRo | Sc::Fcall | Sc::FcallRo
            ))
        )
    }

    /// Whether the commands after it must wait to be parsed until it has run: `AUTH`,
    /// `HELLO` and `RESET` change the limits the parser applies.
    pub(crate) fn barrier(&self) -> bool {
        matches!(
            self.session(),
            Some(Session::Auth | Session::Hello | Session::Reset)
        )
    }

    /// Whether `MULTI` queues it (transaction control and `QUIT`/`RESET` run at once).
    pub(crate) fn queues(&self) -> bool {
        !matches!(
            self.session(),
            Some(
                Session::Multi
                    | Session::Exec
                    | Session::Discard
                    | Session::Watch
                    | Session::Quit
                    | Session::Reset
            )
        )
    }

    /// For a [`Route::Key`] command (whose one key is argument 1: a table test checks it),
    /// whether its key does not begin with [`fc_shard::NAMESPACE_MARK`]: database 0 then
    /// stores it as it is (see [`into_db`]). One byte compare.
    #[inline]
    pub(crate) fn plain_key(args: &[Bytes]) -> bool {
        args.get(1)
            .is_none_or(|k| k.first() != Some(&fc_shard::NAMESPACE_MARK))
    }

    /// The key argument positions of `args` (a whole command), from the first-last-step
    /// range: `COMMAND GETKEYS`, the workers a queued command touches.
    pub(crate) fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let (first, last, step) = self.keys;
        let last = if last < 0 {
            argc as i32 + last
        } else {
            last.min(argc as i32 - 1)
        };
        let (first, last, step) = (first.max(0) as usize, last.max(0) as usize, step.max(1));
        (first..=last)
            .step_by(step as usize)
            .filter(move |&i| first > 0 && i < argc)
    }
}

impl Spec {
    /// The keys of `args` (a whole command) as its key specs find them, each with its spec,
    /// in spec order (Redis's `getKeysUsingKeySpecs`: `COMMAND GETKEYS`, `GETKEYSANDFLAGS`).
    /// A spec whose keyword is missing finds nothing; a key count that is not a number makes
    /// the command invalid (`None`).
    pub(crate) fn spec_keys(&self, args: &[Bytes]) -> Option<Vec<(usize, &'static KeySpec)>> {
        keys_by_specs(self.key_specs, args)
    }
}

/// The keys of `args` (a whole command) that `key_specs` find (see [`Spec::spec_keys`]; a
/// subcommand's key specs count the container's name, as its arguments do).
pub(crate) fn keys_by_specs(
    key_specs: &'static [KeySpec],
    args: &[Bytes],
) -> Option<Vec<(usize, &'static KeySpec)>> {
    let argc = args.len() as i64;
    let mut found = Vec::new();
    for ks in key_specs {
        let first = match ks.begin {
            Begin::Index(i) => i64::from(i),
            Begin::Keyword {
                keyword,
                start_from,
            } => {
                let start = i64::from(start_from);
                let (from, backwards) = if start > 0 {
                    (start, false)
                } else {
                    (argc + start, true)
                };
                let mut i = from;
                let mut at = None;
                while i >= 1 && i < argc {
                    if args[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                        at = Some(i + 1);
                        break;
                    }
                    i += if backwards { -1 } else { 1 };
                }
                match at {
                    Some(i) => i,
                    None => continue,
                }
            }
            Begin::Unknown => continue,
        };
        let (first, last, step) = match ks.find {
            Find::Range { last, step, limit } => {
                let last = i64::from(last);
                let end = if last >= 0 {
                    first + last
                } else if limit <= 1 {
                    argc + last
                } else {
                    first + ((argc - first) / i64::from(limit) + last)
                };
                (first, end, i64::from(step.max(1)))
            }
            Find::Keynum {
                keynum_index,
                first_key,
                step,
            } => {
                let at = first + i64::from(keynum_index);
                let n = args
                    .get(at as usize)
                    .and_then(|a| parse_i64(a))
                    .filter(|&n| n >= 0)?;
                let step = i64::from(step.max(1));
                let start = first + i64::from(first_key);
                // A count past the arguments finds what is there (no overflow).
                let n = n.min(argc);
                (start, start + (n - 1) * step, step)
            }
            Find::Unknown => continue,
        };
        let mut i = first;
        while i <= last && i < argc && i >= 1 {
            found.push((i as usize, ks));
            i += step;
        }
    }
    Some(found)
}

/// Rewrites a command for database `db` (see [`fc_shard::namespaced`]): each key its key specs
/// find (and `SORT`'s `STORE` destination, which they cannot, and a container's key: `OBJECT`,
/// `XINFO`, `XGROUP`, `MEMORY USAGE`, `DEBUG OBJECT`) becomes its stored form, and
/// the name of a keyspace-wide command (`DBSIZE`, `KEYS`, `SCAN`, `FLUSHDB`...) carries the
/// database for its handler ([`db_of`]). In database 0 only a key that begins with
/// [`fc_shard::NAMESPACE_MARK`] changes, so the common case costs a byte compare per argument.
pub(crate) fn into_db(spec: &'static Spec, args: &mut [Bytes], db: u32) {
    let mark = Some(&fc_shard::NAMESPACE_MARK);
    if db == 0 && !args[1..].iter().any(|a| a.first() == mark) {
        return;
    }
    if matches!(spec.route, Route::AllWorkers { .. } | Route::Cursor(_)) {
        if db != 0 {
            args[0] = Bytes::from(fc_shard::namespaced(db, &args[0]));
        }
        return;
    }
    // `DEBUG OBJECT key` (`DEBUG` has no key specs).
    if spec.name == "debug"
        && args
            .get(1)
            .is_some_and(|a| a.eq_ignore_ascii_case(b"object"))
    {
        if let Some(key) = args.get_mut(2) {
            *key = Bytes::from(fc_shard::namespaced(db, key));
        }
        return;
    }
    // A container's keys are its subcommand's (`OBJECT ENCODING key`, `MEMORY USAGE key`).
    let found = match args.get(1).and_then(|sub| spec.subcommand(sub)) {
        Some(sub) => sub.spec_keys(args),
        None => spec.spec_keys(args),
    };
    let Some(found) = found else {
        return;
    };
    // Shard channels (`SSUBSCRIBE`, `SPUBLISH`) are found by key specs but are not keys.
    let mut positions: Vec<usize> = found
        .into_iter()
        .filter(|(_, ks)| !ks.flags.contains(&"not_key"))
        .map(|(i, _)| i)
        .collect();
    positions.extend(store_destinations(spec.name, args));
    positions.sort_unstable();
    positions.dedup();
    for i in positions {
        args[i] = Bytes::from(fc_shard::namespaced(db, &args[i]));
    }
}

/// The destinations of `SORT ... STORE` and `GEORADIUS[BYMEMBER] ... STORE|STOREDIST` (every
/// one given: the last is the one used, which key specs do not name), found by walking the
/// options as the commands parse them, so an option's own argument is never mistaken for one.
pub(crate) fn store_destinations(name: &str, args: &[Bytes]) -> Vec<usize> {
    let (mut i, geo) = match name {
        "sort" | "sort_ro" => (2, false),
        "georadius" => (5, true),
        "georadiusbymember" => (4, true),
        _ => return Vec::new(),
    };
    let mut found = Vec::new();
    while i < args.len() {
        let word = args[i].to_ascii_lowercase();
        let skip = match word.as_slice() {
            b"store" => {
                found.push(i + 1);
                1
            }
            b"storedist" if geo => {
                found.push(i + 1);
                1
            }
            b"limit" if !geo => 2,
            b"by" | b"get" if !geo => 1,
            b"count" if geo => 1,
            _ => 0,
        };
        i += 1 + skip;
    }
    found.retain(|&at| at < args.len());
    found
}

/// The database a keyspace-wide command runs in (its name carries it: [`into_db`]).
pub(crate) fn db_of(args: &[Bytes]) -> u32 {
    fc_shard::split_namespace(&args[0]).0
}

/// A stored key as its client knows it (without its database's namespace).
pub(crate) fn user_key(stored: &[u8]) -> &[u8] {
    fc_shard::split_namespace(stored).1
}

/// What a handler works with.
pub(crate) struct Ctx<'a, R> {
    pub(crate) store: &'a mut LocalEmbeddedStore,
    pub(crate) args: &'a [Bytes],
    /// The route of `args[1]` when the caller already hashed it (a keyed command's key, routed
    /// once for its owner and its prefetch): handlers on the hot path reuse it.
    pub(crate) route: Option<EmbeddedKeyRoute>,
    pub(crate) out: &'a mut R,
}

impl<R: Reply> Ctx<'_, R> {
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
        store_error(self.out, err);
    }

    /// Replies with `result`'s value through `ok`, or its error.
    pub(crate) fn reply<T>(&mut self, result: Result<T, StoreError>, ok: impl FnOnce(&mut R, T)) {
        match result {
            Ok(v) => ok(self.out, v),
            Err(e) => self.store_error(&e),
        }
    }

    /// Whether argument `i` equals `word`, ASCII case-insensitively.
    pub(crate) fn is(&self, i: usize, word: &str) -> bool {
        self.args[i].eq_ignore_ascii_case(word.as_bytes())
    }
}

/// `SELECT`'s database index (`databases` of them).
pub(crate) fn select_index(databases: u32, arg: &[u8]) -> Result<u32, &'static [u8]> {
    match parse_i64(arg) {
        Some(n) if (0..i64::from(databases)).contains(&n) => Ok(n as u32),
        Some(_) => Err(b"ERR DB index is out of range"),
        None => Err(b"ERR value is not an integer or out of range"),
    }
}

/// `TIME`'s reply: seconds and microseconds of the Unix time, as bulk strings.
pub(crate) fn time<R: Reply>(out: &mut R) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    out.array_len(2);
    out.bulk(now.as_secs().to_string().as_bytes());
    out.bulk(now.subsec_micros().to_string().as_bytes());
}

/// A float as Redis reads one (`inf`, `-inf`, `+inf` accepted; NaN and spaces refused).
pub(crate) fn parse_float(bytes: &[u8]) -> Option<f64> {
    if bytes.is_empty() || bytes[0].is_ascii_whitespace() {
        return None;
    }
    let v: f64 = std::str::from_utf8(bytes).ok()?.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Redis's reply for a store error.
pub(crate) fn store_error<R: Reply>(out: &mut R, err: &StoreError) {
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

pub(crate) fn bulk_or_null<R: Reply>(out: &mut R, v: Option<Vec<u8>>) {
    match v {
        Some(v) => out.bulk(&v),
        None => out.null(),
    }
}

/// The aggregate a streamed collection is written as.
#[derive(Clone, Copy)]
pub(crate) enum Shape {
    Array,
    Map,
    Set,
}

/// Writes a collection the store visits in place ([`fc_shard::Visitor`]) straight into a
/// reply, stopping once the sink is past the client's output limit: a large `LRANGE`,
/// `HGETALL` or `SMEMBERS` is never copied out of the store first.
pub(crate) struct Stream<'a, R> {
    pub(crate) out: &'a mut R,
    pub(crate) shape: Shape,
}

impl<R: Reply> fc_shard::Visitor for Stream<'_, R> {
    fn len(&mut self, n: usize) {
        match self.shape {
            Shape::Array => self.out.array_len(n),
            Shape::Map => self.out.map_len(n),
            Shape::Set => self.out.set_len(n),
        }
    }

    #[inline]
    fn item(&mut self, item: &[u8]) -> bool {
        self.out.bulk(item);
        !self.out.full()
    }
}

impl<R: Reply> Ctx<'_, R> {
    /// Streams what `visit` reads from the store into the reply as `shape`, or the store's
    /// error.
    pub(crate) fn stream(
        &mut self,
        shape: Shape,
        visit: impl FnOnce(
            &mut LocalEmbeddedStore,
            &[Bytes],
            &mut dyn fc_shard::Visitor,
        ) -> Result<(), StoreError>,
    ) {
        let mut stream = Stream {
            out: &mut *self.out,
            shape,
        };
        if let Err(e) = visit(self.store, self.args, &mut stream) {
            self.store_error(&e);
        }
    }
}

/// The count of `SRANDMEMBER`/`HRANDFIELD`/`ZRANDMEMBER` at argument `i`: Redis refuses
/// `i64::MIN` (whose magnitude has no `i64`). `None` after replying the error.
pub(crate) fn random_count<R: Reply>(ctx: &mut Ctx<'_, R>, i: usize) -> Option<i64> {
    let n = ctx.int(i)?;
    if n == i64::MIN {
        ctx.out.error(
            b"ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        );
        return None;
    }
    Some(n)
}

pub(crate) fn bulk_array<R: Reply>(out: &mut R, items: &[Vec<u8>]) {
    out.array_len(items.len());
    for item in items {
        out.bulk(item);
    }
}

pub(crate) fn count<R: Reply>(out: &mut R, n: usize) {
    out.integer(n as i64);
}

/// Every command of at most 16 bytes, by its lowercase name packed into an integer
/// ([`packed_name`]: the lookup is on every command's path, and an integer key is one compare,
/// not a `memcmp`).
static TABLE: LazyLock<HashMap<u128, &'static Spec, foldhash::fast::FixedState>> =
    LazyLock::new(|| {
        COMMANDS
            .iter()
            .filter_map(|s| Some((packed_name(s.name.as_bytes())?, s)))
            .collect()
    });

/// The few commands whose names are longer than 16 bytes (`GEORADIUSBYMEMBER_RO`), searched
/// one by one.
static LONG_NAMES: LazyLock<Vec<&'static Spec>> =
    LazyLock::new(|| COMMANDS.iter().filter(|s| s.name.len() > 16).collect());

/// A command name of at most 16 bytes, lowercased, as a little-endian integer padded with
/// zeros (the length is compared after the lookup, so `get\0` is not `get`).
#[inline]
fn packed_name(name: &[u8]) -> Option<u128> {
    let mut lower = [0u8; 16];
    lower.get_mut(..name.len())?.copy_from_slice(name);
    lower.make_ascii_lowercase();
    Some(u128::from_le_bytes(lower))
}

/// The spec of a command name (any case).
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Spec> {
    match packed_name(name) {
        Some(key) => TABLE
            .get(&key)
            .copied()
            .filter(|spec| spec.name.len() == name.len()),
        None => LONG_NAMES
            .iter()
            .copied()
            .find(|spec| spec.name.as_bytes().eq_ignore_ascii_case(name)),
    }
}

/// The last two command names a connection looked up, as sent (any case), with their specs: a
/// pipeline repeats a few names, and comparing a short name's bytes costs less than
/// lowercasing and hashing it ([`lookup`] was 5% of the server's CPU at pipeline 64).
#[derive(Default)]
pub(crate) struct RecentNames {
    names: [([u8; 16], u8, Option<&'static Spec>); 2],
    next: usize,
}

impl RecentNames {
    /// [`lookup`], answered from the last two names when `name` is one of them.
    #[inline]
    pub(crate) fn lookup(&mut self, name: &[u8]) -> Option<&'static Spec> {
        for (bytes, len, spec) in &self.names {
            // A byte loop: names are a few bytes, shorter than a call to `bcmp` takes.
            if spec.is_some()
                && usize::from(*len) == name.len()
                && bytes.iter().zip(name).all(|(a, b)| a == b)
            {
                return *spec;
            }
        }
        let spec = lookup(name)?;
        let mut bytes = [0u8; 16];
        // A name over 16 bytes is looked up each time (not remembered).
        let Some(slot) = bytes.get_mut(..name.len()) else {
            return Some(spec);
        };
        slot.copy_from_slice(name);
        self.names[self.next] = (bytes, name.len() as u8, Some(spec));
        self.next ^= 1;
        Some(spec)
    }
}

/// Redis's reply for an unknown command (clients match its prefix).
pub(crate) fn unknown_command<R: Reply>(args: &[Bytes], out: &mut R) {
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

/// A `HELP` subcommand's reply: one status line per line of text.
pub(crate) fn help<R: Reply>(out: &mut R, lines: &[&[u8]]) {
    out.array_len(lines.len());
    lines.iter().for_each(|line| out.simple(line));
}

/// Redis's reply for an unknown subcommand of `command` (named in capitals, as in the text).
pub(crate) fn unknown_subcommand<R: Reply>(out: &mut R, command: &str, sub: &[u8]) {
    // Redis prints at most 128 bytes of it (`%.128s`).
    let text = format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    );
    out.error(text.as_bytes());
}

/// Redis's reply for a wrong argument count of `command|sub` (`command` in lowercase).
pub(crate) fn wrong_subcommand_arity<R: Reply>(out: &mut R, command: &str, sub: &[u8]) {
    let text = format!(
        "ERR wrong number of arguments for '{command}|{}' command",
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    );
    out.error(text.as_bytes());
}

/// Redis's reply for a wrong argument count.
pub(crate) fn wrong_arity<R: Reply>(name: &[u8], out: &mut R) {
    let text = format!(
        "ERR wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name).to_ascii_lowercase()
    );
    out.error(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::{COMMANDS, lookup};

    #[test]
    fn every_command_is_found_by_its_name_in_any_case() {
        for spec in COMMANDS {
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
    fn the_table_is_sorted_and_names_are_unique() {
        for pair in COMMANDS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    /// The in-place path checks argument 1 alone for a namespaced key (`Spec::plain_key`).
    #[test]
    fn a_keyed_command_has_one_key_argument_1() {
        for spec in COMMANDS {
            if matches!(spec.route, super::Route::Key(_)) {
                assert_eq!((spec.keys.0, spec.keys.1), (1, 1), "{}", spec.name);
            }
        }
    }

    #[test]
    fn write_and_readonly_are_exclusive_and_every_keyed_command_has_key_specs() {
        use super::{F, Route};
        for spec in COMMANDS {
            assert!(
                !(spec.has(F::WRITE) && spec.has(F::READONLY)),
                "{}",
                spec.name
            );
            // Session commands may name keys (WATCH) without being routed by them.
            let keyed = match spec.route {
                // Scripts declare their keys with a count (`numkeys`).
                Route::Session(super::Session::Script(_)) => !spec.key_specs.is_empty(),
                Route::Session(_) => spec.keys.0 > 0,
                // `LMPOP`'s keys follow a count: Redis gives no first key.
                Route::Pop(_) | Route::Multi { .. } => !spec.key_specs.is_empty(),
                Route::AllWorkers { .. } | Route::Cursor(_) | Route::SubKey(_) => false,
                _ => true,
            };
            assert_eq!(
                keyed,
                spec.keys.0 > 0 || spec.has(F::MOVABLEKEYS),
                "{}: route and first key disagree",
                spec.name
            );
            assert_eq!(keyed, !spec.key_specs.is_empty(), "{}", spec.name);
        }
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

/// `SHUTDOWN`'s flags (`[NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`).
#[derive(Clone, Copy, Default)]
pub(crate) struct ShutdownFlags {
    pub(crate) save: bool,
    pub(crate) nosave: bool,
    pub(crate) force: bool,
    pub(crate) abort: bool,
}

/// Parses `SHUTDOWN`'s flags; Redis's error for an unknown flag or a bad combination
/// (`SAVE` with `NOSAVE`, `ABORT` with anything).
pub(crate) fn shutdown_flags(args: &[Bytes]) -> Result<ShutdownFlags, &'static [u8]> {
    let mut flags = ShutdownFlags::default();
    let mut now = false;
    for arg in &args[1..] {
        match arg.to_ascii_lowercase().as_slice() {
            b"save" => flags.save = true,
            b"nosave" => flags.nosave = true,
            b"force" => flags.force = true,
            b"now" => now = true,
            b"abort" => flags.abort = true,
            _ => return Err(b"ERR syntax error"),
        }
    }
    let others = flags.save || flags.nosave || flags.force || now;
    if (flags.save && flags.nosave) || (flags.abort && others) {
        return Err(b"ERR syntax error");
    }
    Ok(flags)
}
