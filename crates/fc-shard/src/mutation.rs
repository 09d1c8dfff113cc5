//! Storage-level mutation events: what persistence and replication consume.
//!
//! Every mutation is deterministic: applying a shard's mutations in sequence order to a store
//! that held the same contents gives the same contents (random choices — `SPOP`, `SRANDMEMBER`
//! — and computed values — `INCRBYFLOAT`, `HINCRBYFLOAT` — are logged as their results).
//!
//! A store built with a [`MutationSink`] calls it for every change, inside the owning shard's
//! critical section, in the order the changes happen, each with the shard's next sequence number
//! (per shard, starting at 1, no gaps). A store without a sink pays one branch per write.

/// One change to a shard's contents, or a transaction's boundary. Borrowed: a sink that keeps
/// it must copy what it needs.
///
/// Deliberately exhaustive (not `#[non_exhaustive]`): a new variant must fail to compile in
/// every encoder and applier (the WAL's, a replica's) instead of reaching a wildcard arm at
/// run time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mutation<'a> {
    /// `key` now holds `value`, expiring at `expire_at_ms` (absolute Unix ms) or never.
    Set {
        /// The key.
        key: &'a [u8],
        /// The new value.
        value: &'a [u8],
        /// Absolute expiry, Unix milliseconds.
        expire_at_ms: Option<u64>,
    },
    /// `key` was deleted by a caller.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// `key` now expires at `expire_at_ms` (absolute Unix ms).
    Expire {
        /// The key.
        key: &'a [u8],
        /// Absolute expiry, Unix milliseconds.
        expire_at_ms: u64,
    },
    /// `key` no longer expires.
    Persist {
        /// The key.
        key: &'a [u8],
    },
    /// `key` reached its expiry and was removed (lazily on access or by maintenance).
    Expired {
        /// The key.
        key: &'a [u8],
    },
    /// `key` was evicted to keep the shard within its memory budget.
    Evicted {
        /// The key.
        key: &'a [u8],
    },
    /// Every key of the shard was removed.
    Flush,
    /// `key` was renamed to `to` (within the shard), keeping its value, type and expiry and
    /// replacing whatever `to` held.
    Rename {
        /// The old name.
        from: &'a [u8],
        /// The new name.
        to: &'a [u8],
    },
    /// The hash at `key` (created if missing) now maps each field to its value, in order.
    HSet {
        /// The key.
        key: &'a [u8],
        /// Field/value pairs.
        pairs: &'a [(&'a [u8], &'a [u8])],
    },
    /// These fields were removed from the hash at `key` (the key goes with its last field).
    HDel {
        /// The key.
        key: &'a [u8],
        /// The fields removed (only those that existed).
        fields: &'a [&'a [u8]],
    },
    /// `items` were pushed, one at a time in order, at `end` of the list at `key` (created if
    /// missing).
    ListPush {
        /// The key.
        key: &'a [u8],
        /// Which end.
        end: crate::ListEnd,
        /// The elements, in push order.
        items: &'a [&'a [u8]],
    },
    /// `count` elements were popped from `end` of the list at `key`.
    ListPop {
        /// The key.
        key: &'a [u8],
        /// Which end.
        end: crate::ListEnd,
        /// How many (at least one).
        count: usize,
    },
    /// The element at position `index` (from the head) of the list at `key` is now `value`.
    ListSet {
        /// The key.
        key: &'a [u8],
        /// Position from the head.
        index: usize,
        /// The new element.
        value: &'a [u8],
    },
    /// `LTRIM key start stop` was applied (Redis's clamping).
    ListTrim {
        /// The key.
        key: &'a [u8],
        /// First rank kept.
        start: i64,
        /// Last rank kept.
        stop: i64,
    },
    /// `LREM key count value` was applied.
    ListRem {
        /// The key.
        key: &'a [u8],
        /// Occurrences from the head (> 0), the tail (< 0) or all (0).
        count: i64,
        /// The element removed.
        value: &'a [u8],
    },
    /// `value` was inserted next to the first `pivot` of the list at `key`.
    ListInsert {
        /// The key.
        key: &'a [u8],
        /// Before or after the pivot.
        position: crate::InsertPosition,
        /// The element it went next to.
        pivot: &'a [u8],
        /// The element inserted.
        value: &'a [u8],
    },
    /// Members added to the set at `key` (created if missing).
    SAdd {
        /// The key.
        key: &'a [u8],
        /// Members that were new.
        members: &'a [&'a [u8]],
    },
    /// Members removed from the set at `key` (the key goes with its last member).
    SRem {
        /// The key.
        key: &'a [u8],
        /// Members that were there.
        members: &'a [&'a [u8]],
    },
    /// Members of the sorted set at `key` (created if missing) now have these scores.
    ZAdd {
        /// The key.
        key: &'a [u8],
        /// `(score, member)`, the resulting scores.
        entries: &'a [(f64, &'a [u8])],
    },
    /// Members removed from the sorted set at `key` (the key goes with its last member).
    ZRem {
        /// The key.
        key: &'a [u8],
        /// Members that were there.
        members: &'a [&'a [u8]],
    },
    /// A change to the stream at `key` (see [`crate::StreamOp`]; `Create` and `Add` create
    /// it when missing).
    Stream {
        /// The key.
        key: &'a [u8],
        /// What changed.
        op: crate::StreamOp<'a>,
    },
    /// The mutations that follow on this stream, up to [`Mutation::TxEnd`] with the same `id`,
    /// belong to transaction `id` (`EXEC`, a multi-key write across workers): a consumer applies
    /// them all or none. A transaction spanning several streams (a server's per-worker logs)
    /// has a group on each stream that changed, all with the same `id`; it is whole only when
    /// every stream's group is whole. Id 0 is one operation's group on one shard's stream (a
    /// shard emits it around an operation of several mutations: `LMOVE`, `SMOVE`, a `*STORE`);
    /// inside a transaction's group it adds nothing. Transactions' groups never nest or
    /// interleave on one stream. The shard a sink is told with a transaction's marker is one
    /// of the stream's shards, not necessarily a changed one.
    TxBegin {
        /// The transaction's id: unique over the life of the data (a server takes them from
        /// a clock-seeded counter), the same on every stream it spans.
        id: u64,
    },
    /// Transaction `id`'s group on this stream is complete (see [`Mutation::TxBegin`]).
    TxEnd {
        /// The transaction's id.
        id: u64,
    },
    /// A replica's watermark: what precedes it on this shard's stream holds the changes of
    /// primary `primary` up to its sequence number `seq` for this shard. Never emitted by a
    /// store: a replicating server writes it to its own log after the changes it applied, so
    /// that a restart resumes from there. Appliers ignore it.
    ReplMark {
        /// The primary's id (its run id).
        primary: &'a [u8],
        /// The primary's sequence number for this shard.
        seq: u64,
    },
}

impl Mutation<'_> {
    /// The key this mutation changes (for a rename, the old name), if it concerns a key.
    #[must_use]
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Self::Set { key, .. }
            | Self::Delete { key }
            | Self::Expire { key, .. }
            | Self::Persist { key }
            | Self::Expired { key }
            | Self::Evicted { key }
            | Self::HSet { key, .. }
            | Self::HDel { key, .. }
            | Self::ListPush { key, .. }
            | Self::ListPop { key, .. }
            | Self::ListSet { key, .. }
            | Self::ListTrim { key, .. }
            | Self::ListRem { key, .. }
            | Self::ListInsert { key, .. }
            | Self::SAdd { key, .. }
            | Self::SRem { key, .. }
            | Self::ZAdd { key, .. }
            | Self::ZRem { key, .. }
            | Self::Stream { key, .. } => Some(key),
            Self::Rename { from, .. } => Some(from),
            Self::Flush | Self::TxBegin { .. } | Self::TxEnd { .. } | Self::ReplMark { .. } => None,
        }
    }
}

/// Receives a store's mutations. Called with the shard's lock held (or on the owning thread for
/// a local store), so it must be quick: copy into a buffer or a queue, never block on I/O.
pub trait MutationSink: Send + Sync {
    /// One mutation of shard `shard` with that shard's sequence number `seq`.
    fn on_mutation(&self, shard: usize, seq: u64, mutation: &Mutation<'_>);
}

impl<F> MutationSink for F
where
    F: Fn(usize, u64, &Mutation<'_>) + Send + Sync,
{
    fn on_mutation(&self, shard: usize, seq: u64, mutation: &Mutation<'_>) {
        self(shard, seq, mutation);
    }
}
