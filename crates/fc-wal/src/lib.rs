//! # fc-wal — the fast-cache write-ahead log
//!
//! **Owns:** the on-disk log of a store's [`fc_shard::Mutation`]s: per-shard segment files of
//! `FCW2` frames (magic, flags, length, sequence, payload, CRC32C), the compact encoding of
//! each mutation ([`encode_mutation`], [`Record`]), fsync policies ([`FsyncPolicy`]), rotation,
//! poisoning after a failed write, recovery with named damage policies ([`RecoveryMode`]), and
//! [`LoggedStore`], an [`fc_shard::EmbeddedStore`] that recovers on open and logs every
//! change — with no async runtime. Byte layouts and loss semantics: `docs/DURABILITY.md`.
//!
//! **Must not depend on:** tokio or any runtime, the network, or any workspace crate but
//! `fc-shard` (and what it uses).
//!
//! ## Limits
//! Frame payloads up to 1 GiB (checked before allocation); one log per shard; a log replays
//! only into a store of the shard count that wrote it.
//!
//! ## Example
//! ```
//! use fc_wal::{LoggedStore, RecoveryMode, WalConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let config = WalConfig::new(dir.path());
//! {
//!     let store = LoggedStore::open(&config, 4, RecoveryMode::default(), |b| b)?;
//!     store.set(b"greeting", b"hello", None);
//!     store.hset(b"user:1", &[(b"name", b"ada")])?;
//!     store.sync()?;
//! }
//! let store = LoggedStore::open(&config, 4, RecoveryMode::default(), |b| b)?;
//! assert_eq!(store.get(b"greeting"), Some(b"hello".to_vec()));
//! assert_eq!(store.hget(b"user:1", b"name")?, Some(b"ada".to_vec()));
//! assert_eq!(store.recovery().frames(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod faults;
mod frame;
mod log;
mod record;
mod recover;

use std::ops::Deref;
use std::sync::Arc;

use fc_shard::{EmbeddedStore, EmbeddedStoreBuilder};

pub use error::WalError;
pub use faults::{Fault, Faults, FileOp};
pub use frame::{
    FLAG_BATCH, FLAG_SHARD, FORMAT_VERSION, FRAME_HEADER_LEN, FRAME_MAGIC, FRAME_TRAILER_LEN,
    FrameRead, MAX_PAYLOAD_LEN, MAX_SHARED_LOG_SHARDS, MIN_FORMAT_VERSION, SEGMENT_HEADER_LEN,
    SEGMENT_MAGIC, SegmentHeader, decode_frame, encode_frame, encode_frame_of,
};
pub use log::{
    FsyncPolicy, PREALLOC_BYTES, SYNC_BUCKETS_MICROS, ShardLog, SyncTicket, WalConfig, WalSink,
    WalStatsSnapshot, WalTap, segment_name,
};
pub use record::{PayloadError, Record, RecordView, StreamRecord, encode_mutation};
pub use recover::{Damage, LogRecovery, RecoveryMode, RecoveryReport, recover, recover_from};

/// An [`EmbeddedStore`] that survives restarts: opening replays the log, and every change is
/// logged by a [`WalSink`] under the configured fsync policy. Derefs to the store.
#[derive(Debug)]
pub struct LoggedStore {
    store: EmbeddedStore,
    wal: Arc<WalSink>,
    recovery: RecoveryReport,
}

impl LoggedStore {
    /// Opens (or creates) the store logged under `config.dir` with `shards` shards: builds the
    /// store (`configure` adds budgets, a clock, a listener, ...), replays the log into it with
    /// `mode`, then logs every change from there on.
    ///
    /// # Errors
    /// What [`recover`] reports (damage, another shard count), [`WalError::Io`], or a
    /// [`WalError::Apply`] holding the store's error (for example an unusable shard count).
    pub fn open(
        config: &WalConfig,
        shards: usize,
        mode: RecoveryMode,
        configure: impl FnOnce(EmbeddedStoreBuilder) -> EmbeddedStoreBuilder,
    ) -> Result<Self, WalError> {
        let config = &config.with_layout_on_disk()?;
        let (mut store, wal) = build_logged(config, shards, configure)?;
        let recovery = replay_into(&mut store, &wal, |store| recover(config, store, mode))?;
        wal.set_next_seqs(&recovery.next_seqs());
        Ok(Self {
            store,
            wal,
            recovery,
        })
    }

    /// What opening replayed and repaired.
    #[must_use]
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// The log (health, stats, sync).
    #[must_use]
    pub fn wal(&self) -> &WalSink {
        &self.wal
    }

    /// Forces every shard's log to disk.
    ///
    /// # Errors
    /// The first shard's failure.
    pub fn sync(&self) -> Result<(), WalError> {
        self.wal.sync_all()
    }
}

/// Builds a store of `shards` shards (`configure` adds budgets, a clock, a listener, ...)
/// whose every mutation goes to a new [`WalSink`] over `config`.
///
/// # Errors
/// [`WalError::Io`] creating the log's directories, or [`WalError::Apply`] holding the
/// store's error (for example an unusable shard count).
pub fn build_logged(
    config: &WalConfig,
    shards: usize,
    configure: impl FnOnce(EmbeddedStoreBuilder) -> EmbeddedStoreBuilder,
) -> Result<(EmbeddedStore, Arc<WalSink>), WalError> {
    let wal = Arc::new(WalSink::open(config, shards)?);
    let sink: Arc<dyn fc_shard::MutationSink> = wal.clone();
    let store = configure(EmbeddedStore::builder(shards))
        .mutation_sink(sink)
        .try_build()
        .map_err(|e| WalError::Apply {
            path: config.dir.clone(),
            offset: 0,
            message: e.to_string(),
        })?;
    Ok((store, wal))
}

/// Runs `replay` (recovery applying the log or images to `store`) with the store's clock
/// stopped at 0 — no entry expires halfway through its own history (a PERSIST after a short
/// TTL must find the key) — and `wal` not logging what is replayed. The real clock comes back
/// after, whatever `replay` returns.
///
/// # Errors
/// What `replay` returns.
pub fn replay_into<R>(
    store: &mut EmbeddedStore,
    wal: &WalSink,
    replay: impl FnOnce(&EmbeddedStore) -> Result<R, WalError>,
) -> Result<R, WalError> {
    let clock = store.clock().clone();
    store.set_clock(fc_shard::ManualClock::new(0));
    wal.set_replaying(true);
    let replayed = replay(store);
    wal.set_replaying(false);
    store.set_clock(clock);
    replayed
}

impl Deref for LoggedStore {
    type Target = EmbeddedStore;

    fn deref(&self) -> &EmbeddedStore {
        &self.store
    }
}

impl Drop for LoggedStore {
    fn drop(&mut self) {
        // Best effort: what `everysec` has not yet synced goes to disk on a clean close.
        let _ = self.wal.sync_all();
    }
}
