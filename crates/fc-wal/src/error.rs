//! The log's error type.

use std::path::PathBuf;

/// Everything writing or recovering the log can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// A file operation failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// The shard's log failed earlier and accepts nothing until it is reopened.
    #[error("the log of shard {shard} failed and accepts no writes: {cause}")]
    Poisoned {
        /// The shard.
        shard: usize,
        /// The failure that stopped it.
        cause: Box<WalError>,
    },
    /// Damage the recovery mode does not allow: where it is and what it is.
    #[error("{path} at byte {offset}: {reason}")]
    Corrupt {
        /// The segment.
        path: PathBuf,
        /// Byte offset of the damage in the segment.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// The log was written by a store of another shard count.
    #[error("{path} belongs to shard {shard} of {shard_count}; this store has {expected} shards")]
    ShardCount {
        /// The segment.
        path: PathBuf,
        /// Its shard.
        shard: u32,
        /// Its store's shard count.
        shard_count: u32,
        /// This store's shard count.
        expected: usize,
    },
    /// The log was written in another layout of shared logs ([`crate::WalConfig::logs`]).
    #[error(
        "{path} belongs to a layout of {logs} logs (0: one per shard); this store expects {expected}"
    )]
    Layout {
        /// The segment.
        path: PathBuf,
        /// Its layout.
        logs: u32,
        /// The layout expected.
        expected: usize,
    },
    /// A logged change could not be applied to the store.
    #[error("{path} at byte {offset}: cannot apply the logged change: {message}")]
    Apply {
        /// The segment.
        path: PathBuf,
        /// Byte offset of the frame.
        offset: u64,
        /// The store's error.
        message: String,
    },
}
