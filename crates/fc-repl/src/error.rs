//! The errors of this crate.

/// Bytes that are not a valid FCRP frame: the link is closed, nothing of the frame applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Not `FCRP`.
    #[error("FCRP: bad magic")]
    BadMagic,
    /// Another protocol version.
    #[error("FCRP: unsupported version {0}")]
    BadVersion(u8),
    /// A frame kind this version does not define.
    #[error("FCRP: unknown frame kind {0}")]
    BadKind(u8),
    /// Reserved flag bits set.
    #[error("FCRP: reserved bits set")]
    ReservedBits,
    /// A payload longer than the limit (refused from the header).
    #[error("FCRP: payload of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Bytes claimed.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The checksum does not match.
    #[error("FCRP: CRC mismatch")]
    BadCrc,
    /// A compressed payload that does not decompress within the limit.
    #[error("FCRP: bad zstd payload")]
    BadZstd,
    /// A payload that does not hold what its kind says.
    #[error("FCRP: malformed {0} payload")]
    Malformed(&'static str),
}

/// Why a link is refused or must resynchronize.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    /// The replica's token is not the primary's.
    #[error("replication: authentication failed")]
    BadToken,
    /// The two stores have different shard counts.
    #[error("replication: shard count {replica} does not match the primary's {primary}")]
    ShardCount {
        /// The replica's.
        replica: u32,
        /// The primary's.
        primary: u32,
    },
    /// The replica claims a sequence the primary has not reached on that shard.
    #[error("replication: shard {shard} watermark {watermark} is ahead of the primary's {primary}")]
    FromTheFuture {
        /// The shard.
        shard: u32,
        /// The replica's watermark.
        watermark: u64,
        /// The primary's latest sequence.
        primary: u64,
    },
    /// Records were skipped: the replica must catch up again (from the backlog or a
    /// snapshot).
    #[error("replication: shard {shard} expected sequence {expected}, got {got}")]
    Gap {
        /// The shard.
        shard: u32,
        /// The next sequence the replica needs.
        expected: u64,
        /// What came.
        got: u64,
    },
    /// A record could not be decoded or applied.
    #[error("replication: {0}")]
    Record(String),
}
