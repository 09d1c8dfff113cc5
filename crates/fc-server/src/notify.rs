//! Keyspace notifications (`notify-keyspace-events`): every change a command, active expiry
//! or eviction makes is published to `__keyspace@0__:<key>` (the event as payload) and
//! `__keyevent@0__:<event>` (the key as payload), for the classes enabled with Redis's flag
//! letters (`K`, `E`, `g`, `$`, `l`, `s`, `h`, `z`, `x`, `e`, `t`, `m`, `d`, `n`, `A`).
//!
//! Events come from the mutation stream (the server sink calls [`Notifier::mutation`] on the
//! owner worker's thread, in the order the changes happen), named as Redis names them: the
//! mutation says what changed (a push at the left, a field set, an expiry), and the command
//! running on that thread, recorded by [`record_command`] only while notifications are on,
//! picks the name where Redis's depends on it (`INCR` sets a string: `incrby`; `ZINCRBY` adds
//! to a sorted set: `zincr`; `SPOP` removes members: `spop`). With notifications off (the
//! default) this costs one relaxed load per command and per mutation.
//!
//! Differences from Redis (documented in `docs/ARCHITECTURE.md`): a pop or removal that
//! empties an aggregate does not add Redis's `del` event after its own, `new` (`n`) events are
//! not sent, and `m` (key misses) are not sent.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use fc_shard::{ListEnd, Mutation, StreamOp};

use crate::pubsub::PubSub;

/// Event classes, as bits.
const G: u32 = 1;
const STRING: u32 = 1 << 1;
const LIST: u32 = 1 << 2;
const SET: u32 = 1 << 3;
const HASH: u32 = 1 << 4;
const ZSET: u32 = 1 << 5;
const EXPIRED: u32 = 1 << 6;
const EVICTED: u32 = 1 << 7;
const STREAM: u32 = 1 << 8;
const MODULE: u32 = 1 << 9;
const NEW: u32 = 1 << 10;
const KEYSPACE: u32 = 1 << 11;
const KEYEVENT: u32 = 1 << 12;
const MISS: u32 = 1 << 13;
/// `A`: every class but `m` and `n`.
const ALL: u32 = G | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The letters in the order Redis prints them (after `A`, which stands for all of them).
const LETTERS: &[(u32, char)] = &[
    (G, 'g'),
    (STRING, '$'),
    (LIST, 'l'),
    (SET, 's'),
    (HASH, 'h'),
    (ZSET, 'z'),
    (EXPIRED, 'x'),
    (EVICTED, 'e'),
    (STREAM, 't'),
    (MODULE, 'd'),
    (NEW, 'n'),
];

/// Parses Redis's flag letters; `None` for a character Redis refuses.
pub(crate) fn parse_flags(text: &str) -> Option<u32> {
    let mut flags = 0;
    for c in text.chars() {
        flags |= match c {
            'A' => ALL,
            'g' => G,
            '$' => STRING,
            'l' => LIST,
            's' => SET,
            'h' => HASH,
            'z' => ZSET,
            'x' => EXPIRED,
            'e' => EVICTED,
            't' => STREAM,
            'd' => MODULE,
            'n' => NEW,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => MISS,
            _ => return None,
        };
    }
    Some(flags)
}

/// The flags as `CONFIG GET` shows them (Redis's order: `A` or the class letters, then `K`,
/// `E`, `m`).
pub(crate) fn format_flags(flags: u32) -> String {
    let mut text = String::new();
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for &(bit, c) in LETTERS {
            if flags & bit != 0 {
                text.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (MISS, 'm')] {
        if flags & bit != 0 {
            text.push(c);
        }
    }
    text
}

thread_local! {
    /// The command running on this worker thread (while notifications are on).
    static COMMAND: RefCell<Bytes> = const { RefCell::new(Bytes::new()) };
}

/// Publishes keyspace events.
pub(crate) struct Notifier {
    flags: AtomicU32,
    pubsub: Arc<PubSub>,
}

impl Notifier {
    pub(crate) fn new(pubsub: Arc<PubSub>) -> Self {
        Self {
            flags: AtomicU32::new(0),
            pubsub,
        }
    }

    /// The current flags (`CONFIG GET notify-keyspace-events`).
    pub(crate) fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }

    pub(crate) fn set_flags(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// Whether any event can be sent (a class and `K` or `E`).
    #[inline]
    fn on(&self) -> bool {
        let flags = self.flags.load(Ordering::Relaxed);
        flags & (KEYSPACE | KEYEVENT) != 0 && flags & (ALL | NEW) != 0
    }

    /// Records the command about to run on this thread (its name as sent), when events may
    /// be sent.
    #[inline]
    pub(crate) fn record_command(&self, name: &Bytes) {
        if self.on() {
            COMMAND.with(|c| c.borrow_mut().clone_from(name));
        }
    }

    /// Publishes the events of one mutation (on the thread that made it).
    pub(crate) fn mutation(&self, mutation: &Mutation<'_>) {
        if !self.on() {
            return;
        }
        COMMAND.with(|c| {
            // A keyspace-wide command's name carries its database (`command::into_db`).
            let name = fc_shard::split_namespace(&c.borrow())
                .1
                .to_ascii_lowercase();
            for_events(&name, mutation, |key, event, class| {
                self.publish(key, event, class);
            });
        });
    }

    fn publish(&self, key: &[u8], event: &'static str, class: u32) {
        let flags = self.flags.load(Ordering::Relaxed);
        if flags & class == 0 {
            return;
        }
        let now = fc_snapshot::unix_ms();
        let (db, key) = fc_shard::split_namespace(key);
        if flags & KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            self.pubsub.publish(
                &Bytes::from(channel),
                &Bytes::copy_from_slice(event.as_bytes()),
                false,
                now,
            );
        }
        if flags & KEYEVENT != 0 {
            let channel = format!("__keyevent@{db}__:{event}");
            self.pubsub.publish(
                &Bytes::from(channel),
                &Bytes::copy_from_slice(key),
                false,
                now,
            );
        }
    }
}

/// Calls `emit(key, event, class)` for each event Redis sends for `mutation` made by command
/// `cmd` (lowercase; empty for active expiry and eviction), in Redis's order.
fn for_events(cmd: &[u8], mutation: &Mutation<'_>, mut emit: impl FnMut(&[u8], &'static str, u32)) {
    let end_name = |end: &ListEnd, left: &'static str, right: &'static str| match end {
        ListEnd::Left => left,
        ListEnd::Right => right,
    };
    match mutation {
        Mutation::Set {
            key, expire_at_ms, ..
        } => {
            let event = match cmd {
                b"incr" | b"decr" | b"incrby" | b"decrby" => "incrby",
                b"incrbyfloat" => "incrbyfloat",
                b"append" => "append",
                b"setrange" => "setrange",
                b"setbit" | b"bitfield" => "setbit",
                b"pfadd" | b"pfmerge" => "pfadd",
                // PFCOUNT caches the count in the key: Redis sends no event for it.
                b"pfcount" => return,
                _ => "set",
            };
            emit(key, event, STRING);
            let sets_expiry =
                matches!(cmd, b"setex" | b"psetex") || (cmd == b"set" && expire_at_ms.is_some());
            if sets_expiry {
                emit(key, "expire", G);
            }
        }
        // FLUSHDB's deletions notify nothing, as Redis's FLUSHDB.
        Mutation::Delete { .. } if cmd == b"flushdb" => {}
        Mutation::Delete { key } => emit(key, "del", G),
        Mutation::Expire { key, .. } => emit(key, "expire", G),
        Mutation::Persist { key } => emit(key, "persist", G),
        Mutation::Expired { key } => emit(key, "expired", EXPIRED),
        Mutation::Evicted { key } => emit(key, "evicted", EVICTED),
        // SWAPDB notifies nothing; MOVE is a rename between databases.
        Mutation::Rename { .. } if cmd == b"swapdb" => {}
        Mutation::Rename { from, to } if cmd == b"move" => {
            emit(from, "move_from", G);
            emit(to, "move_to", G);
        }
        Mutation::Rename { from, to } => {
            emit(from, "rename_from", G);
            emit(to, "rename_to", G);
        }
        Mutation::HSet { key, .. } => {
            let event = match cmd {
                b"hincrby" => "hincrby",
                b"hincrbyfloat" => "hincrbyfloat",
                _ => "hset",
            };
            emit(key, event, HASH);
        }
        Mutation::HDel { key, .. } => emit(key, "hdel", HASH),
        Mutation::ListPush { key, end, .. } => {
            emit(key, end_name(end, "lpush", "rpush"), LIST);
        }
        Mutation::ListPop { key, end, .. } => emit(key, end_name(end, "lpop", "rpop"), LIST),
        Mutation::ListSet { key, .. } => emit(key, "lset", LIST),
        Mutation::ListTrim { key, .. } => emit(key, "ltrim", LIST),
        Mutation::ListRem { key, .. } => emit(key, "lrem", LIST),
        Mutation::ListInsert { key, .. } => emit(key, "linsert", LIST),
        Mutation::SAdd { key, .. } => {
            let event = match cmd {
                b"sinterstore" => "sinterstore",
                b"sunionstore" => "sunionstore",
                b"sdiffstore" => "sdiffstore",
                _ => "sadd",
            };
            emit(key, event, SET);
        }
        Mutation::SRem { key, .. } => {
            let event = if cmd == b"spop" { "spop" } else { "srem" };
            emit(key, event, SET);
        }
        Mutation::ZAdd { key, .. } => {
            let event = match cmd {
                b"zincrby" => "zincr",
                b"zrangestore" => "zrangestore",
                _ => "zadd",
            };
            emit(key, event, ZSET);
        }
        Mutation::ZRem { key, .. } => {
            let event = match cmd {
                b"zpopmin" | b"bzpopmin" | b"zmpop" | b"bzmpop" => "zpopmin",
                b"zpopmax" | b"bzpopmax" => "zpopmax",
                b"zremrangebyscore" => "zremrangebyscore",
                b"zremrangebyrank" => "zremrangebyrank",
                b"zremrangebylex" => "zremrangebylex",
                _ => "zrem",
            };
            emit(key, event, ZSET);
        }
        Mutation::Stream { key, op } => {
            let event = match op {
                StreamOp::Add { .. } => "xadd",
                StreamOp::Trim { .. } => "xtrim",
                StreamOp::Delete { .. } => "xdel",
                StreamOp::SetId { .. } => "xsetid",
                StreamOp::GroupCreate { .. } => "xgroup-create",
                StreamOp::GroupSetId { .. } => "xgroup-setid",
                StreamOp::GroupDestroy { .. } => "xgroup-destroy",
                StreamOp::ConsumerCreate { .. } => "xgroup-createconsumer",
                StreamOp::ConsumerDelete { .. } => "xgroup-delconsumer",
                // A created stream (MKSTREAM) and a group's reads and claims send nothing.
                StreamOp::Create
                | StreamOp::Advance { .. }
                | StreamOp::Touch { .. }
                | StreamOp::Claim { .. }
                | StreamOp::Ack { .. } => return,
            };
            emit(key, event, STREAM);
        }
        Mutation::Flush
        | Mutation::TxBegin { .. }
        | Mutation::TxEnd { .. }
        | Mutation::ReplMark { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_print_as_redis_prints_them() {
        for (given, shown) in [
            ("KEA", "AKE"),
            ("Elg", "glE"),
            ("Kmn$", "$nKm"),
            ("AnKm", "AKm"),
            ("dtexzhsl$g", "A"),
            ("", ""),
        ] {
            assert_eq!(format_flags(parse_flags(given).unwrap()), shown, "{given}");
        }
        assert_eq!(parse_flags("Kq"), None);
    }

    #[test]
    fn events_are_named_by_the_mutation_and_the_command() {
        let mut seen = Vec::new();
        let set = Mutation::Set {
            key: b"k",
            value: b"1",
            expire_at_ms: Some(5),
        };
        for_events(b"set", &set, |k, e, _| seen.push((k.to_vec(), e)));
        for_events(b"incr", &set, |k, e, _| seen.push((k.to_vec(), e)));
        let rename = Mutation::Rename {
            from: b"a",
            to: b"b",
        };
        for_events(b"rename", &rename, |k, e, _| seen.push((k.to_vec(), e)));
        assert_eq!(
            seen,
            [
                (b"k".to_vec(), "set"),
                (b"k".to_vec(), "expire"),
                (b"k".to_vec(), "incrby"),
                (b"a".to_vec(), "rename_from"),
                (b"b".to_vec(), "rename_to"),
            ]
        );
    }
}
