//! Redis objects and string commands on the store kinds: one list, two thin adapters.
//!
//! Each operation lives once, on the shard (`object/*.rs`); the macro below gives
//! [`EmbeddedStore`] (read lock for reads, write lock for writes; [`SharedEmbeddedStore`]
//! derefs to it) and [`LocalEmbeddedStore`] (no lock; [`StoreError::NotOwner`] for a key of
//! another worker) the same method with the same documentation.
//!
//! [`SharedEmbeddedStore`]: crate::SharedEmbeddedStore

use super::{EmbeddedStore, LocalEmbeddedStore, Routed};
use crate::clock::Clock;
use crate::error::{RedisObjectResult, StoreError};
use crate::object::KeyType;
use crate::object::hash::{FieldValue, RandomField};
use crate::object::list::{InsertPosition, ListEnd, LposOptions};
use crate::object::set::{Members, SetAlgebra};
use crate::object::stream::{
    GroupReadFrom, GroupStart, Stream, StreamEntry, StreamId, StreamOp, StreamTrim, XAddId,
    XAddOptions, XAutoClaim, XClaimOptions,
};
use crate::object::string::{GetExExpiry, SetOptions, SetOutcome};
use crate::object::zset::{ScoredMember, ZAddOptions, ZAddOutcome, ZRange};
use crate::shard::Shard;

macro_rules! object_ops {
    ($(
        $(#[$meta:meta])*
        $mode:ident fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;
    )*) => {
        impl EmbeddedStore {
            $(
                $(#[$meta])*
                ///
                /// # Errors
                /// [`StoreError::WrongType`] when the key holds another type, and the errors the
                /// operation names.
                pub fn $name(&self, key: &[u8] $(, $arg: $ty)*) -> RedisObjectResult<$ret> {
                    object_ops!(@$mode self, key, |shard, tag, clock| {
                        shard.$name(tag, key $(, $arg)*, clock)
                    })
                }
            )*
        }

        impl LocalEmbeddedStore {
            $(
                $(#[$meta])*
                ///
                /// # Errors
                /// [`StoreError::NotOwner`] for a key of another worker,
                /// [`StoreError::WrongType`] when the key holds another type, and the errors
                /// the operation names.
                pub fn $name(&mut self, key: &[u8] $(, $arg: $ty)*) -> RedisObjectResult<$ret> {
                    self.with_owned_shard(key, |shard, tag, clock| {
                        shard.$name(tag, key $(, $arg)*, clock)
                    })
                }
            )*
        }

        impl Routed<'_> {
            $(
                $(#[$meta])*
                ///
                /// With the key's route already known (see [`Routed`]).
                ///
                /// # Errors
                /// As [`LocalEmbeddedStore`]'s method of the same name.
                pub fn $name(self, key: &[u8] $(, $arg: $ty)*) -> RedisObjectResult<$ret> {
                    self.with_shard(key, |shard, tag, clock| {
                        shard.$name(tag, key $(, $arg)*, clock)
                    })
                }
            )*
        }
    };
    (@read $store:ident, $key:ident, $f:expr) => { $store.with_shard_read($key, $f) };
    (@write $store:ident, $key:ident, $f:expr) => { $store.with_shard_write($key, $f) };
}

object_ops! {
    // ----- keys ---------------------------------------------------------------------------------

    /// `TYPE`: the type of a live key.
    read fn type_of() -> Option<KeyType>;
    /// `MEMORY USAGE`: the bytes a live key is charged (entry, index slot, object estimate).
    read fn memory_usage() -> Option<u64>;

    // ----- strings ------------------------------------------------------------------------------

    /// `GET` that tells a key of another type ([`StoreError::WrongType`]) from a missing one.
    read fn get_string() -> Option<Vec<u8>>;
    /// `SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT|KEEPTTL]`.
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, SetCondition, SetOptions};
    ///
    /// let store = EmbeddedStore::new(4);
    /// let nx = SetOptions { condition: SetCondition::IfAbsent, ..SetOptions::default() };
    /// assert!(store.set_with(b"lock", b"me", nx)?.written);
    /// assert!(!store.set_with(b"lock", b"you", nx)?.written);
    /// let get = SetOptions { get: true, ..SetOptions::default() };
    /// assert_eq!(store.set_with(b"lock", b"free", get)?.previous, Some(b"me".to_vec()));
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    write fn set_with(value: &[u8], options: SetOptions) -> SetOutcome;
    /// `INCRBY` (`INCR`, `DECR` and `DECRBY` are [`EmbeddedStore::incr`] and friends): the new
    /// value. A missing key counts from 0; the key keeps its expiry.
    /// [`StoreError::NotAnInteger`] when the value is not an integer in Redis's strict form,
    /// [`StoreError::Overflow`] past the `i64` range.
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, StoreError};
    ///
    /// let store = EmbeddedStore::new(4);
    /// assert_eq!(store.incr_by(b"hits", 5)?, 5);
    /// store.set(b"name", b"ada", None);
    /// assert_eq!(store.incr_by(b"name", 1), Err(StoreError::NotAnInteger));
    /// assert_eq!(
    ///     StoreError::NotAnInteger.to_string(),
    ///     "ERR value is not an integer or out of range"
    /// );
    /// # Ok::<(), StoreError>(())
    /// ```
    write fn incr_by(delta: i64) -> i64;
    /// `INCRBYFLOAT`: the new value as stored. `delta` is the increment as the client wrote it;
    /// both numbers are read and added as Redis does (x87 `long double`) and the sum is written
    /// as Redis writes it (`%.17Lf`, trailing zeros trimmed), byte for byte.
    /// [`StoreError::NotAFloat`] for a stored value or an increment that is not a float (checked
    /// after the type), [`StoreError::NanOrInfinity`].
    ///
    /// ```
    /// use fc_shard::EmbeddedStore;
    ///
    /// let store = EmbeddedStore::new(4);
    /// store.set(b"f", b"0.1", None);
    /// assert_eq!(store.incr_by_float(b"f", b"0.2")?, b"0.3");
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    write fn incr_by_float(delta: &[u8]) -> Vec<u8>;
    /// `APPEND`: the new length. [`StoreError::StringTooLong`] past 512 MiB.
    write fn append(suffix: &[u8]) -> usize;
    /// `SETRANGE`: the new length. [`StoreError::OffsetOutOfRange`] for a negative offset,
    /// [`StoreError::StringTooLong`] past 512 MiB.
    write fn set_range(offset: i64, bytes: &[u8]) -> usize;
    /// `GETDEL`.
    write fn get_del() -> Option<Vec<u8>>;
    /// `GETEX`.
    write fn get_ex(expiry: GetExExpiry) -> Option<Vec<u8>>;
    /// `STRLEN` (0 for a missing key).
    read fn strlen() -> usize;
    /// `GETRANGE` (empty for a missing key).
    read fn get_range(start: i64, end: i64) -> Vec<u8>;

    // ----- hashes -------------------------------------------------------------------------------

    /// `HSET key field value [field value ...]`: how many fields were new.
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, KeyType, StoreError};
    ///
    /// let store = EmbeddedStore::new(4);
    /// assert_eq!(store.hset(b"user:1", &[(b"name", b"ada"), (b"lang", b"en")])?, 2);
    /// assert_eq!(store.hget(b"user:1", b"name")?, Some(b"ada".to_vec()));
    /// assert_eq!(store.type_of(b"user:1")?, Some(KeyType::Hash));
    /// assert_eq!(store.hincrby(b"user:1", b"visits", 3)?, 3);
    /// store.set(b"plain", b"x", None);
    /// assert_eq!(store.hget(b"plain", b"name"), Err(StoreError::WrongType));
    /// // Removing the last field removes the key.
    /// assert_eq!(store.hdel(b"user:1", &[b"name", b"lang", b"visits"])?, 3);
    /// assert!(!store.exists(b"user:1"));
    /// # Ok::<(), StoreError>(())
    /// ```
    write fn hset(pairs: &[(&[u8], &[u8])]) -> usize;
    /// `HSETNX`: true when the field was absent and is now set.
    write fn hsetnx(field: &[u8], value: &[u8]) -> bool;
    /// `HDEL`: how many of the fields existed (the key goes with its last field).
    write fn hdel(fields: &[&[u8]]) -> usize;
    /// `HINCRBY`: the field's new value. [`StoreError::HashValueNotAnInteger`],
    /// [`StoreError::Overflow`].
    write fn hincrby(field: &[u8], delta: i64) -> i64;
    /// `HINCRBYFLOAT`: the field's new value as stored, computed as `incr_by_float` computes
    /// (`delta` is the increment's text). Before the key is read: [`StoreError::NotAFloat`] for
    /// an increment that is not a float, [`StoreError::IncrementNanOrInfinity`] for an
    /// infinite one. Then [`StoreError::HashValueNotAFloat`], [`StoreError::NanOrInfinity`].
    write fn hincrbyfloat(field: &[u8], delta: &[u8]) -> Vec<u8>;
    /// `HGET`.
    read fn hget(field: &[u8]) -> Option<Vec<u8>>;
    /// `HMGET`: one answer per field.
    read fn hmget(fields: &[&[u8]]) -> Vec<Option<Vec<u8>>>;
    /// `HGETALL`: field/value pairs.
    read fn hgetall() -> Vec<FieldValue>;
    /// `HGETALL`/`HKEYS`/`HVALS` read in place into `visitor`, without copying the hash (see
    /// [`crate::Visitor`]).
    read fn hash_visit(part: crate::HashPart, visitor: &mut dyn crate::Visitor) -> ();
    /// `HKEYS`.
    read fn hkeys() -> Vec<Vec<u8>>;
    /// `HVALS`.
    read fn hvals() -> Vec<Vec<u8>>;
    /// `HLEN`.
    read fn hlen() -> usize;
    /// `HEXISTS`.
    read fn hexists(field: &[u8]) -> bool;
    /// `HSTRLEN`.
    read fn hstrlen(field: &[u8]) -> usize;
    /// `HRANDFIELD key [count [WITHVALUES]]`: no count gives at most one field; a positive
    /// count that many distinct fields; a negative count exactly `-count`, repeats allowed.
    read fn hrandfield(count: Option<i64>, with_values: bool) -> Vec<RandomField>;
    /// `hrandfield` read in place into `visitor`: each pick's field, then its value with
    /// `with_values`, written as it is drawn (see [`crate::Visitor`]).
    read fn hrandfield_visit(
        count: Option<i64>,
        with_values: bool,
        visitor: &mut dyn crate::Visitor
    ) -> ();
    /// `HSCAN key cursor [MATCH pattern] [COUNT count]`: the next cursor (0 when done) and
    /// field/value pairs. A field present for the whole scan is returned at least once.
    read fn hscan(cursor: u64, pattern: Option<&[u8]>, count: usize) -> (u64, Vec<FieldValue>);

    // ----- lists --------------------------------------------------------------------------------

    /// `LPUSH`/`RPUSH`, or with `only_if_exists` `LPUSHX`/`RPUSHX`: the new length (0 when
    /// `only_if_exists` and the key is missing). Elements are pushed one at a time, so
    /// `LPUSH k a b c` leaves `c b a`.
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, ListEnd};
    ///
    /// let store = EmbeddedStore::new(4);
    /// store.lpush(b"jobs", &[b"a", b"b"])?;
    /// store.rpush(b"jobs", &[b"z"])?;
    /// assert_eq!(store.lrange(b"jobs", 0, -1)?, vec![b"b".to_vec(), b"a".to_vec(), b"z".to_vec()]);
    /// assert_eq!(store.pop(b"jobs", ListEnd::Right, 1)?, Some(vec![b"z".to_vec()]));
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    write fn push(end: ListEnd, items: &[&[u8]], only_if_exists: bool) -> usize;
    /// `LPUSH`: the new length.
    write fn lpush(items: &[&[u8]]) -> usize;
    /// `RPUSH`: the new length.
    write fn rpush(items: &[&[u8]]) -> usize;
    /// `LPOP`/`RPOP key count`: up to `count` elements; `None` when the key is missing.
    write fn pop(end: ListEnd, count: usize) -> Option<Members>;
    /// `LPOP key count`.
    write fn lpop(count: usize) -> Option<Members>;
    /// `RPOP key count`.
    write fn rpop(count: usize) -> Option<Members>;
    /// `LSET`. [`StoreError::NoSuchKey`], [`StoreError::IndexOutOfRange`].
    write fn lset(index: i64, value: &[u8]) -> ();
    /// `LREM`: how many occurrences went (count > 0 from the head, < 0 from the tail, 0 all).
    write fn lrem(count: i64, value: &[u8]) -> usize;
    /// `LTRIM` (an empty range deletes the key).
    write fn ltrim(start: i64, stop: i64) -> ();
    /// `LINSERT`: the new length; -1 when the pivot is absent; 0 when the key is.
    write fn linsert(position: InsertPosition, pivot: &[u8], value: &[u8]) -> i64;
    /// `LRANGE` (negative indexes from the tail, clamped as Redis).
    read fn lrange(start: i64, stop: i64) -> Members;
    /// `LRANGE` read in place into `visitor`, without copying the list (see
    /// [`crate::Visitor`]).
    read fn lrange_visit(start: i64, stop: i64, visitor: &mut dyn crate::Visitor) -> ();
    /// `LLEN`.
    read fn llen() -> usize;
    /// `LINDEX`.
    read fn lindex(index: i64) -> Option<Vec<u8>>;
    /// `LPOS key element [RANK rank] [COUNT count] [MAXLEN maxlen]`: positions of matches.
    /// [`StoreError::RankZero`].
    read fn lpos(element: &[u8], options: LposOptions) -> Vec<usize>;

    // ----- sets ---------------------------------------------------------------------------------

    /// `SADD`: how many members were new.
    ///
    /// ```
    /// use fc_shard::EmbeddedStore;
    ///
    /// let store = EmbeddedStore::new(4);
    /// assert_eq!(store.sadd(b"tags", &[b"rust", b"cache", b"rust"])?, 2);
    /// assert!(store.sismember(b"tags", b"cache")?);
    /// assert_eq!(store.scard(b"tags")?, 2);
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    write fn sadd(members: &[&[u8]]) -> usize;
    /// `SREM`: how many members were there.
    write fn srem(members: &[&[u8]]) -> usize;
    /// `SPOP key count`: up to `count` random members, removed.
    write fn spop(count: usize) -> Members;
    /// `SMEMBERS`.
    read fn smembers() -> Members;
    /// `SMEMBERS` read in place into `visitor`, without copying the set (see
    /// [`crate::Visitor`]).
    read fn smembers_visit(visitor: &mut dyn crate::Visitor) -> ();
    /// `SISMEMBER`.
    read fn sismember(member: &[u8]) -> bool;
    /// `SMISMEMBER`.
    read fn smismember(members: &[&[u8]]) -> Vec<bool>;
    /// `SCARD`.
    read fn scard() -> usize;
    /// `SRANDMEMBER key [count]`: `None` at most one; positive: distinct; negative: exactly
    /// `-count`, repeats allowed.
    read fn srandmember(count: Option<i64>) -> Members;
    /// `srandmember` read in place into `visitor`, each pick written as it is drawn (see
    /// [`crate::Visitor`]).
    read fn srandmember_visit(count: Option<i64>, visitor: &mut dyn crate::Visitor) -> ();
    /// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
    read fn sscan(cursor: u64, pattern: Option<&[u8]>, count: usize) -> (u64, Members);

    // ----- sorted sets --------------------------------------------------------------------------

    /// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ...`. [`StoreError::NotAFloat`] for
    /// a NaN score, [`StoreError::ScoreNan`] when `INCR` gives NaN. (The option combinations
    /// Redis refuses — `NX` with `XX`, `GT`/`LT` with `NX`, `INCR` with several pairs — are
    /// the caller's to refuse.)
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, ZAddOptions, ZRange};
    ///
    /// let store = EmbeddedStore::new(4);
    /// let entries: [(f64, &[u8]); 3] = [(1.0, b"one"), (2.0, b"two"), (3.0, b"three")];
    /// assert_eq!(store.zadd(b"board", &entries, ZAddOptions::default())?.count, 3);
    /// assert_eq!(store.zrank(b"board", b"three", true)?, Some((0, 3.0)));
    /// let top = store.zrange(b"board", ZRange::Rank(0, 1), true, None)?;
    /// assert_eq!(top, vec![(b"three".to_vec(), 3.0), (b"two".to_vec(), 2.0)]);
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    write fn zadd(entries: &[(f64, &[u8])], options: ZAddOptions) -> ZAddOutcome;
    /// `ZINCRBY`: the member's new score.
    write fn zincrby(delta: f64, member: &[u8]) -> f64;
    /// `ZREM`: how many members were there.
    write fn zrem(members: &[&[u8]]) -> usize;
    /// `ZREMRANGEBYRANK`/`ZREMRANGEBYSCORE`/`ZREMRANGEBYLEX`: how many went.
    write fn zremrange(range: ZRange<'_>) -> usize;
    /// `ZPOPMIN` (or `ZPOPMAX` with `highest`) `key count`.
    write fn zpop(highest: bool, count: usize) -> Vec<ScoredMember>;
    /// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]` with scores
    /// (bounds lower first; `rev` walks from the top; `limit` = `(offset, count)`, a negative
    /// count meaning all). Covers `ZRANGEBYSCORE`, `ZREVRANGEBYSCORE`, `ZRANGEBYLEX`, ...
    read fn zrange(range: ZRange<'_>, rev: bool, limit: Option<(usize, i64)>) -> Vec<ScoredMember>;
    /// `zrange` read in place into `visitor`, without copying the range (see
    /// [`crate::ScoredVisitor`]).
    read fn zrange_visit(
        range: ZRange<'_>,
        rev: bool,
        limit: Option<(usize, i64)>,
        visitor: &mut dyn crate::ScoredVisitor
    ) -> ();
    /// `ZCOUNT` / `ZLEXCOUNT`: how many entries a range selects.
    read fn zcount(range: ZRange<'_>) -> usize;
    /// `ZSCORE`.
    /// `ZRANDMEMBER key [count]`, each pick visited as it is drawn (see `srandmember_visit`).
    read fn zrandmember_visit(count: Option<i64>, visitor: &mut dyn crate::ScoredVisitor) -> ();
    read fn zscore(member: &[u8]) -> Option<f64>;
    /// `ZMSCORE`.
    read fn zmscore(members: &[&[u8]]) -> Vec<Option<f64>>;
    /// `ZCARD`.
    read fn zcard() -> usize;
    /// `ZRANK` (`ZREVRANK` with `rev`): the rank and the score.
    read fn zrank(member: &[u8], rev: bool) -> Option<(usize, f64)>;
    /// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
    read fn zscan(cursor: u64, pattern: Option<&[u8]>, count: usize) -> (u64, Vec<ScoredMember>);

    // ----- streams ------------------------------------------------------------------------------

    /// `XADD`: the new entry's id (`None` with `NOMKSTREAM` on a missing key), then the trim.
    /// [`crate::StreamError::IdTooSmall`], [`crate::StreamError::IdZero`],
    /// [`crate::StreamError::Exhausted`].
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, StreamId, XAddId, XAddOptions};
    ///
    /// let store = EmbeddedStore::new(4);
    /// let id = store.xadd(b"s", XAddId::AutoSeq(5), &[b"f", b"v"], XAddOptions::default())?;
    /// assert_eq!(id, Some(StreamId::new(5, 0)));
    /// let mut len = 0;
    /// store.stream_read(b"s", &mut |s| len = s.len())?;
    /// assert_eq!(len, 1);
    /// # Ok::<(), fc_shard::StoreError>(())
    /// ```
    write fn xadd(id: XAddId, fields: &[&[u8]], options: XAddOptions) -> Option<StreamId>;
    /// `XDEL`: how many of the ids existed.
    write fn xdel(ids: &[StreamId]) -> usize;
    /// `XTRIM`: how many entries went.
    write fn xtrim(trim: StreamTrim) -> usize;
    /// `XSETID`. [`StoreError::NoSuchKey`] and the stream errors.
    write fn xsetid(
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>
    ) -> ();
    /// `XGROUP CREATE`. [`crate::StreamError::BusyGroup`],
    /// [`crate::StreamError::GroupNeedsKey`].
    write fn xgroup_create(
        group: &[u8],
        start: GroupStart,
        mkstream: bool,
        entries_read: Option<i64>
    ) -> ();
    /// `XGROUP SETID`. [`crate::StreamError::NoGroup`].
    write fn xgroup_setid(group: &[u8], start: GroupStart, entries_read: Option<i64>) -> ();
    /// `XGROUP DESTROY`: whether the group existed. [`StoreError::NoSuchKey`].
    write fn xgroup_destroy(group: &[u8]) -> bool;
    /// `XGROUP CREATECONSUMER`: whether it was created. [`crate::StreamError::NoGroup`].
    write fn xgroup_createconsumer(group: &[u8], consumer: &[u8]) -> bool;
    /// `XGROUP DELCONSUMER`: the consumer's pending count. [`crate::StreamError::NoGroup`].
    write fn xgroup_delconsumer(group: &[u8], consumer: &[u8]) -> usize;
    /// `XREADGROUP` on one stream (`None`: nothing new). [`crate::StreamError::NoGroup`].
    write fn xreadgroup(
        group: &[u8],
        consumer: &[u8],
        from: GroupReadFrom,
        count: usize,
        no_ack: bool
    ) -> Option<Vec<StreamEntry>>;
    /// `XACK`: how many ids were pending.
    write fn xack(group: &[u8], ids: &[StreamId]) -> usize;
    /// `XCLAIM`. [`crate::StreamError::NoGroup`].
    write fn xclaim(
        group: &[u8],
        consumer: &[u8],
        min_idle_ms: u64,
        ids: &[StreamId],
        options: XClaimOptions
    ) -> Vec<StreamEntry>;
    /// `XAUTOCLAIM`. [`crate::StreamError::NoGroup`].
    #[expect(clippy::too_many_arguments, reason = "XAUTOCLAIM's arguments, one each")]
    write fn xautoclaim(
        group: &[u8],
        consumer: &[u8],
        min_idle_ms: u64,
        start: StreamId,
        count: usize,
        just_id: bool
    ) -> XAutoClaim;
    /// Applies a logged stream change (a log replay, a key moved between shards).
    write fn stream_apply(op: &StreamOp<'_>) -> ();
    /// Runs `read` on the stream (`XRANGE`, `XREAD`, `XINFO`, `XPENDING`...): `false` when
    /// the key is missing.
    read fn stream_read(read: &mut dyn FnMut(&Stream)) -> bool;
}

/// The keys' shard (all must share it) and their tags.
fn one_shard(
    router: &fc_route::ShardRouter,
    keys: &[&[u8]],
) -> RedisObjectResult<(usize, Vec<u32>)> {
    let routes: Vec<_> = keys.iter().map(|k| router.route_key(k)).collect();
    let first = routes.first().map_or(0, |r| router.shard_of(r));
    for route in &routes {
        let shard = router.shard_of(route);
        if shard != first {
            return Err(StoreError::CrossShard {
                first,
                second: shard,
            });
        }
    }
    let tags = routes
        .iter()
        .map(|r| crate::shard::tag_of(r.key_hash()))
        .collect();
    Ok((first, tags))
}

/// Operations over several keys of one shard, shared by both store kinds.
fn multi_key<R>(
    keys: &[&[u8]],
    router: &fc_route::ShardRouter,
    run: impl FnOnce(usize, &[u32]) -> RedisObjectResult<R>,
) -> RedisObjectResult<R> {
    let (shard, tags) = one_shard(router, keys)?;
    run(shard, &tags)
}

macro_rules! multi_key_ops {
    ($store:ty, $self_ty:ty, $with:ident) => {
        impl $store {
            /// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT` (and `RPOPLPUSH`): the element
            /// moved, `None` when the source is missing. Both keys must share a shard (use a
            /// hash tag).
            ///
            /// # Errors
            /// [`StoreError::WrongType`] (nothing moves), [`StoreError::CrossShard`].
            pub fn lmove(
                self: $self_ty,
                source: &[u8],
                destination: &[u8],
                from: ListEnd,
                to: ListEnd,
            ) -> RedisObjectResult<Option<Vec<u8>>> {
                self.$with(&[source, destination], |shard, tags, clock| {
                    shard.lmove((tags[0], source), (tags[1], destination), from, to, clock)
                })
            }

            /// `SMOVE`: true when `member` moved. Both keys must share a shard.
            ///
            /// # Errors
            /// [`StoreError::WrongType`] (nothing moves), [`StoreError::CrossShard`].
            pub fn smove(
                self: $self_ty,
                source: &[u8],
                destination: &[u8],
                member: &[u8],
            ) -> RedisObjectResult<bool> {
                self.$with(&[source, destination], |shard, tags, clock| {
                    shard.smove((tags[0], source), (tags[1], destination), member, clock)
                })
            }

            /// `SINTER` / `SUNION` / `SDIFF` over keys of one shard (missing keys are empty
            /// sets).
            ///
            /// # Errors
            /// [`StoreError::WrongType`], [`StoreError::CrossShard`].
            pub fn set_combine(
                self: $self_ty,
                keys: &[&[u8]],
                algebra: SetAlgebra,
            ) -> RedisObjectResult<Members> {
                self.$with(keys, |shard, tags, clock| {
                    let pairs: Vec<(u32, &[u8])> =
                        tags.iter().copied().zip(keys.iter().copied()).collect();
                    shard.set_combine(&pairs, algebra, usize::MAX, clock)
                })
            }

            /// `SINTERCARD numkeys key ... [LIMIT limit]` (`limit` 0: no limit).
            ///
            /// # Errors
            /// [`StoreError::WrongType`], [`StoreError::CrossShard`].
            pub fn sintercard(
                self: $self_ty,
                keys: &[&[u8]],
                limit: usize,
            ) -> RedisObjectResult<usize> {
                let limit = if limit == 0 { usize::MAX } else { limit };
                self.$with(keys, |shard, tags, clock| {
                    let pairs: Vec<(u32, &[u8])> =
                        tags.iter().copied().zip(keys.iter().copied()).collect();
                    Ok(shard
                        .set_combine(&pairs, SetAlgebra::Intersection, limit, clock)?
                        .len())
                })
            }

            /// `ZRANGESTORE destination source ...`: the range of `source` (as `zrange`)
            /// stored at `destination` (replaced whatever its type; deleted when the range is
            /// empty), its size. Both keys must share a shard.
            ///
            /// # Errors
            /// [`StoreError::WrongType`] for the source (nothing changes),
            /// [`StoreError::CrossShard`].
            pub fn zrange_store(
                self: $self_ty,
                destination: &[u8],
                source: &[u8],
                range: ZRange<'_>,
                rev: bool,
                limit: Option<(usize, i64)>,
            ) -> RedisObjectResult<usize> {
                self.$with(&[destination, source], |shard, tags, clock| {
                    shard.zrange_store(
                        (tags[0], destination),
                        (tags[1], source),
                        range,
                        rev,
                        limit,
                        clock,
                    )
                })
            }

            /// `SINTERSTORE` / `SUNIONSTORE` / `SDIFFSTORE`: the result's size; `destination`
            /// is replaced (whatever its type) or, for an empty result, deleted.
            ///
            /// # Errors
            /// [`StoreError::WrongType`] for a source, [`StoreError::CrossShard`].
            pub fn set_store(
                self: $self_ty,
                destination: &[u8],
                keys: &[&[u8]],
                algebra: SetAlgebra,
            ) -> RedisObjectResult<usize> {
                let mut all = vec![destination];
                all.extend_from_slice(keys);
                self.$with(&all, |shard, tags, clock| {
                    let pairs: Vec<(u32, &[u8])> = tags[1..]
                        .iter()
                        .copied()
                        .zip(keys.iter().copied())
                        .collect();
                    shard.set_store((tags[0], destination), &pairs, algebra, clock)
                })
            }
        }
    };
}

impl EmbeddedStore {
    /// Runs `f` on the one shard all `keys` route to, under its write lock.
    fn with_keys_shard<R>(
        &self,
        keys: &[&[u8]],
        f: impl FnOnce(&mut Shard, &[u32], &Clock) -> RedisObjectResult<R>,
    ) -> RedisObjectResult<R> {
        multi_key(keys, self.router(), |shard, tags| {
            self.with_shards_write(&[shard], |guards, clock| f(&mut guards[0], tags, clock))
        })
    }
}

impl LocalEmbeddedStore {
    /// Runs `f` on the one owned shard all `keys` route to.
    fn with_keys_shard<R>(
        &mut self,
        keys: &[&[u8]],
        f: impl FnOnce(&mut Shard, &[u32], &Clock) -> RedisObjectResult<R>,
    ) -> RedisObjectResult<R> {
        let router = *self.router();
        multi_key(keys, &router, |_, tags| {
            let Some(first) = keys.first() else {
                return f(&mut Shard::new(0, None), tags, &Clock::System);
            };
            let (i, _) = self.locate_key(first)?;
            let (shards, clock) = self.shards_and_clock();
            f(&mut shards[i], tags, clock)
        })
    }
}

multi_key_ops!(EmbeddedStore, &Self, with_keys_shard);
multi_key_ops!(LocalEmbeddedStore, &mut Self, with_keys_shard);

/// `SCAN`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanOptions<'a> {
    /// `MATCH`: a glob pattern keys must match.
    pub pattern: Option<&'a [u8]>,
    /// `TYPE`: the type keys must have.
    pub key_type: Option<KeyType>,
    /// `COUNT`: about how many keys to examine per call (default 10).
    pub count: usize,
    /// The database whose keys are visited (0 by default): stored keys made by
    /// [`fc_route::namespaced`] for it, returned (and matched) without their namespace.
    pub db: u32,
}

impl Default for ScanOptions<'_> {
    fn default() -> Self {
        Self {
            pattern: None,
            key_type: None,
            count: 10,
            db: 0,
        }
    }
}

/// Shard and in-shard position of a `SCAN` cursor (0 starts at shard 0).
fn split_cursor(cursor: u64) -> (usize, u64) {
    ((cursor >> 32) as usize, cursor & 0xFFFF_FFFF)
}

/// The cursor after a window of `shard`: continue in it at `next`, or move to `next_shard`
/// (`None`: the scan is over, cursor 0).
fn join_cursor(shard: usize, next: Option<u64>, next_shard: Option<usize>) -> u64 {
    match (next, next_shard) {
        (Some(pos), _) => ((shard as u64) << 32) | pos,
        (None, Some(s)) => (s as u64) << 32,
        (None, None) => 0,
    }
}

/// Windows one `SCAN` call may walk while collecting fewer than `count` keys.
const SCAN_WINDOWS_PER_CALL: usize = 64;

impl EmbeddedStore {
    /// `INCR`.
    ///
    /// # Errors
    /// As [`EmbeddedStore::incr_by`].
    pub fn incr(&self, key: &[u8]) -> RedisObjectResult<i64> {
        self.incr_by(key, 1)
    }

    /// `DECR`.
    ///
    /// # Errors
    /// As [`EmbeddedStore::incr_by`].
    pub fn decr(&self, key: &[u8]) -> RedisObjectResult<i64> {
        self.incr_by(key, -1)
    }

    /// `DECRBY` (Redis refuses `i64::MIN` as a decrement: it cannot be negated).
    ///
    /// # Errors
    /// [`StoreError::Overflow`] for `i64::MIN`, and as [`EmbeddedStore::incr_by`].
    pub fn decr_by(&self, key: &[u8], delta: i64) -> RedisObjectResult<i64> {
        self.incr_by(key, delta.checked_neg().ok_or(StoreError::Overflow)?)
    }

    /// `GETSET`: stores `value` (clearing any expiry) and returns the old value.
    ///
    /// # Errors
    /// [`StoreError::WrongType`], writing nothing.
    pub fn get_set(&self, key: &[u8], value: &[u8]) -> RedisObjectResult<Option<Vec<u8>>> {
        let options = SetOptions {
            get: true,
            ..SetOptions::default()
        };
        Ok(self.set_with(key, value, options)?.previous)
    }

    /// `MSETNX`: sets every pair only if none of the keys exists (of any type), atomically
    /// (every shard involved is locked, in shard order, for the check and the writes).
    ///
    /// # Errors
    /// The first write error (for example [`StoreError::OutOfMemory`]); writes made before it
    /// stay.
    pub fn msetnx(&self, pairs: &[(&[u8], &[u8])]) -> RedisObjectResult<bool> {
        let routes: Vec<_> = pairs.iter().map(|(k, _)| self.route_key(k)).collect();
        let mut shards: Vec<usize> = routes.iter().map(|r| self.router().shard_of(r)).collect();
        shards.sort_unstable();
        shards.dedup();
        self.with_shards_write(&shards, |guards, clock| {
            let slot = |route| shards.binary_search(&route).expect("locked above");
            let tag = |r: &fc_route::EmbeddedKeyRoute| crate::shard::tag_of(r.key_hash());
            for ((key, _), route) in pairs.iter().zip(&routes) {
                let i = slot(self.router().shard_of(route));
                if guards[i].occupied(tag(route), key, clock) {
                    return Ok(false);
                }
            }
            for ((key, value), route) in pairs.iter().zip(&routes) {
                let i = slot(self.router().shard_of(route));
                guards[i].set(tag(route), key, value, None, clock)?;
            }
            Ok(true)
        })
    }

    /// `RENAME` (or `RENAMENX` with `only_if_absent`): moves the value, type and expiry of
    /// `from` to `to`, replacing what `to` held. Both keys must route to one shard (as in a
    /// Redis cluster slot: use a hash tag, `{user:1}:a` and `{user:1}:b`). `Ok(false)` when
    /// `only_if_absent` and `to` exists.
    ///
    /// # Errors
    /// [`StoreError::NoSuchKey`] when `from` does not exist, [`StoreError::CrossShard`].
    pub fn rename(&self, from: &[u8], to: &[u8], only_if_absent: bool) -> RedisObjectResult<bool> {
        let (a, b) = (self.route_key(from), self.route_key(to));
        let (sa, sb) = (self.router().shard_of(&a), self.router().shard_of(&b));
        if sa != sb {
            return Err(StoreError::CrossShard {
                first: sa,
                second: sb,
            });
        }
        self.with_shards_write(&[sa], |guards, clock| {
            let tag = |r: &fc_route::EmbeddedKeyRoute| crate::shard::tag_of(r.key_hash());
            guards[0].rename((tag(&a), from), (tag(&b), to), only_if_absent, clock)
        })
    }

    /// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: the next cursor (0 when the
    /// scan is complete) and a batch of keys. As in Redis, a key present from the first call
    /// to the last is returned (here exactly once), a key added or removed meanwhile may or may
    /// not be, and a batch may be empty before the end.
    ///
    /// ```
    /// use fc_shard::{EmbeddedStore, ScanOptions};
    ///
    /// let store = EmbeddedStore::new(4);
    /// for i in 0..100 {
    ///     store.set(format!("user:{i}"), b"x", None);
    /// }
    /// let options = ScanOptions { pattern: Some(b"user:1*"), ..ScanOptions::default() };
    /// let (mut cursor, mut found) = (0, Vec::new());
    /// loop {
    ///     let (next, keys) = store.scan(cursor, options);
    ///     found.extend(keys);
    ///     if next == 0 { break; }
    ///     cursor = next;
    /// }
    /// assert_eq!(found.len(), 11); // user:1, user:10..user:19
    /// ```
    #[must_use]
    pub fn scan(&self, cursor: u64, options: ScanOptions<'_>) -> (u64, Vec<Vec<u8>>) {
        let (mut shard, mut pos) = split_cursor(cursor);
        let mut out = Vec::new();
        let shards = self.shard_count();
        if shard >= shards {
            return (0, out);
        }
        for _ in 0..SCAN_WINDOWS_PER_CALL {
            let next = self
                .with_shard_index_read(shard, |s, clock| s.scan(pos, &options, clock, &mut out));
            let next_shard = (shard + 1 < shards).then_some(shard + 1);
            let cursor = join_cursor(shard, next, next_shard);
            if cursor == 0 || out.len() >= options.count {
                return (cursor, out);
            }
            (shard, pos) = split_cursor(cursor);
        }
        let next = ((shard as u64) << 32) | pos;
        (next, out)
    }

    /// Exports shard `shard` for a snapshot: `start` runs first, then `emit` gets mutations that
    /// recreate every live key of the shard (see `Shard::export`), all under the shard's read
    /// lock — so what `start` reads (a log position) matches the image exactly. Readers go on;
    /// writers of this shard wait for the export (one shard at a time). Returns `start`'s result
    /// and the number of keys exported.
    ///
    /// # Panics
    /// When `shard` is not below [`EmbeddedStore::shard_count`].
    pub fn export_shard<R>(
        &self,
        shard: usize,
        start: impl FnOnce() -> R,
        mut emit: impl FnMut(&crate::Mutation<'_>),
    ) -> (R, u64) {
        self.with_shard_index_read(shard, |shard, clock| {
            let first = start();
            (first, shard.export(clock, &mut emit))
        })
    }

    /// An order-independent digest of the live contents (keys, types, values, expiries): two
    /// stores with the same contents agree, whatever their shard counts or histories.
    #[must_use]
    pub fn digest(&self) -> u64 {
        let mut sum = 0u64;
        self.for_each_shard_read(|_, shard, clock| sum = sum.wrapping_add(shard.digest(clock)));
        sum
    }
}

impl LocalEmbeddedStore {
    /// `INCR`.
    ///
    /// # Errors
    /// As [`LocalEmbeddedStore::incr_by`].
    pub fn incr(&mut self, key: &[u8]) -> RedisObjectResult<i64> {
        self.incr_by(key, 1)
    }

    /// `DECR`.
    ///
    /// # Errors
    /// As [`LocalEmbeddedStore::incr_by`].
    pub fn decr(&mut self, key: &[u8]) -> RedisObjectResult<i64> {
        self.incr_by(key, -1)
    }

    /// `DECRBY`.
    ///
    /// # Errors
    /// [`StoreError::Overflow`] for `i64::MIN`, and as [`LocalEmbeddedStore::incr_by`].
    pub fn decr_by(&mut self, key: &[u8], delta: i64) -> RedisObjectResult<i64> {
        self.incr_by(key, delta.checked_neg().ok_or(StoreError::Overflow)?)
    }

    /// `GETSET`.
    ///
    /// # Errors
    /// [`StoreError::WrongType`], [`StoreError::NotOwner`].
    pub fn get_set(&mut self, key: &[u8], value: &[u8]) -> RedisObjectResult<Option<Vec<u8>>> {
        let options = SetOptions {
            get: true,
            ..SetOptions::default()
        };
        Ok(self.set_with(key, value, options)?.previous)
    }

    /// `MSETNX` over keys this worker owns (see [`EmbeddedStore::msetnx`]).
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] (before anything is written), and the first write error.
    pub fn msetnx(&mut self, pairs: &[(&[u8], &[u8])]) -> RedisObjectResult<bool> {
        let located = pairs
            .iter()
            .map(|(k, _)| self.locate_key(k))
            .collect::<Result<Vec<_>, _>>()?;
        let (shards, clock) = self.shards_and_clock();
        for ((key, _), &(i, tag)) in pairs.iter().zip(&located) {
            if shards[i].occupied(tag, key, clock) {
                return Ok(false);
            }
        }
        for ((key, value), &(i, tag)) in pairs.iter().zip(&located) {
            shards[i].set(tag, key, value, None, clock)?;
        }
        Ok(true)
    }

    /// `RENAME` / `RENAMENX` within one owned shard (see [`EmbeddedStore::rename`]).
    ///
    /// # Errors
    /// [`StoreError::NoSuchKey`], [`StoreError::CrossShard`], [`StoreError::NotOwner`].
    pub fn rename(
        &mut self,
        from: &[u8],
        to: &[u8],
        only_if_absent: bool,
    ) -> RedisObjectResult<bool> {
        let (i, from_tag) = self.locate_key(from)?;
        let (j, to_tag) = self.locate_key(to)?;
        if i != j {
            return Err(StoreError::CrossShard {
                first: self.global_shard(i),
                second: self.global_shard(j),
            });
        }
        let (shards, clock) = self.shards_and_clock();
        shards[i].rename((from_tag, from), (to_tag, to), only_if_absent, clock)
    }

    /// `SCAN` over this worker's shards (see [`EmbeddedStore::scan`]); the cursor names shards
    /// of the whole store, so it is only meaningful to the worker that returned it.
    #[must_use]
    pub fn scan(&mut self, cursor: u64, options: ScanOptions<'_>) -> (u64, Vec<Vec<u8>>) {
        let (global, mut pos) = split_cursor(cursor);
        let mut out = Vec::new();
        let owned: Vec<usize> = self.owned_shards().collect();
        let Some(mut i) = owned.iter().position(|&s| s >= global) else {
            return (0, out);
        };
        if owned[i] != global {
            pos = 0;
        }
        let (shards, clock) = self.shards_and_clock();
        for _ in 0..SCAN_WINDOWS_PER_CALL {
            let next = shards[i].scan(pos, &options, clock, &mut out);
            let cursor = join_cursor(owned[i], next, owned.get(i + 1).copied());
            if cursor == 0 || out.len() >= options.count {
                return (cursor, out);
            }
            if next.is_none() {
                i += 1;
            }
            pos = split_cursor(cursor).1;
        }
        (((owned[i] as u64) << 32) | pos, out)
    }

    /// One step of `SCAN` that stays in the cursor's shard, for a server that walks the
    /// store's shards in order across workers: the next cursor is in the same shard, or the
    /// start of the next shard of the store (`0` after the last). A key present for the whole
    /// walk is returned exactly once.
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] when the cursor's shard belongs to another worker.
    pub fn scan_shard(
        &mut self,
        cursor: u64,
        options: ScanOptions<'_>,
    ) -> RedisObjectResult<(u64, Vec<Vec<u8>>)> {
        let (shard, mut pos) = split_cursor(cursor);
        let shard_count = self.router().shard_count();
        if shard >= shard_count {
            return Ok((0, Vec::new()));
        }
        let i = self.local_shard_index(shard)?;
        let (shards, clock) = self.shards_and_clock();
        let mut out = Vec::new();
        for _ in 0..SCAN_WINDOWS_PER_CALL {
            let next = shards[i].scan(pos, &options, clock, &mut out);
            match next {
                Some(p) if out.len() < options.count => pos = p,
                Some(p) => return Ok((((shard as u64) << 32) | p, out)),
                None => {
                    let next = if shard + 1 < shard_count {
                        ((shard + 1) as u64) << 32
                    } else {
                        0
                    };
                    return Ok((next, out));
                }
            }
        }
        Ok((((shard as u64) << 32) | pos, out))
    }

    /// Exports shard `shard` (a store-wide shard number this worker owns) for a snapshot, as
    /// [`EmbeddedStore::export_shard`]; nothing else runs on it meanwhile (owner-local).
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] when this worker does not own `shard`.
    pub fn export_shard<R>(
        &mut self,
        shard: usize,
        start: impl FnOnce() -> R,
        mut emit: impl FnMut(&crate::Mutation<'_>),
    ) -> RedisObjectResult<(R, u64)> {
        let i = self.local_shard_index(shard)?;
        let (shards, clock) = self.shards_and_clock();
        let first = start();
        Ok((first, shards[i].export(clock, &mut emit)))
    }

    /// Emits the mutations that recreate the live key `key` — its value, then its expiry — as
    /// a snapshot's export does (a key of any type; large aggregates in several mutations):
    /// replaying them into an empty key of any store recreates it. Moving a key between
    /// workers or shards (`RENAME`, `COPY`) builds on it. `false` when the key is missing.
    ///
    /// # Errors
    /// [`StoreError::NotOwner`] for a key of another worker.
    pub fn export_key(
        &mut self,
        key: &[u8],
        mut emit: impl FnMut(&crate::Mutation<'_>),
    ) -> RedisObjectResult<bool> {
        self.with_owned_shard(key, |shard, tag, clock| {
            Ok(shard.export_key(tag, key, clock, &mut emit))
        })
    }

    /// The digest of this worker's shards (see [`EmbeddedStore::digest`]); the digests of all
    /// workers of one store add up (wrapping) to the store's.
    #[must_use]
    pub fn digest(&mut self) -> u64 {
        let (shards, clock) = self.shards_and_clock();
        shards
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.digest(clock)))
    }
}
