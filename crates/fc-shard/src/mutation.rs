//! Storage-level mutation events: what persistence and replication consume.
//!
//! A store built with a [`MutationSink`] calls it for every change, inside the owning shard's
//! critical section, in the order the changes happen, each with the shard's next sequence number
//! (per shard, starting at 1, no gaps). A store without a sink pays one branch per write.

/// One change to a shard's contents. Borrowed: a sink that keeps it must copy what it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
            | Self::HDel { key, .. } => Some(key),
            Self::Rename { from, .. } => Some(from),
            Self::Flush => None,
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
