//! # fc-snapshot — snapshots, restart recovery, and the persistent embedded store
//!
//! **Owns:** per-shard snapshot images (header, the `FCW2` frames of mutations that recreate
//! every key, a trailer with counts and a CRC32C over the whole file; written temp → fsync →
//! rename → directory fsync, the two newest kept), taking them without stopping the store (one
//! shard's read lock at a time: readers go on, that shard's writers wait for its export),
//! deleting log segments a kept image covers, restart recovery (newest complete image per
//! shard, the older one if the newest is damaged, then the log after it), and
//! [`PersistentStore`] — an [`EmbeddedStore`] that does all of it in-process, with no runtime.
//! Layouts and what each step may lose: `docs/DURABILITY.md`. Also [`rdb`]: Redis's
//! serialized-value format (`DUMP` / `RESTORE` payloads: RDB object encoding, RDB version,
//! CRC64), written as redis-server 7.0 writes it and read in every encoding Redis 2.4–7.2
//! writes, so that keys move between redis-server and fast-cache.
//!
//! **Must not depend on:** tokio or any runtime, the network, or workspace crates above
//! `fc-wal`.
//!
//! Images reuse the log's frame and mutation encoding (`fc_wal::encode_mutation`): one codec,
//! fuzzed and property-tested once, for both files. (The specification names rkyv for images;
//! a zero-copy archive would not save the work that dominates loading — inserting every entry
//! into the arena — so the log's codec serves instead.)
//!
//! ## Example
//! ```
//! use fc_snapshot::PersistentStore;
//! use fc_wal::{RecoveryMode, WalConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let config = WalConfig::new(dir.path());
//! {
//!     let store = PersistentStore::open(&config, 4, RecoveryMode::default(), |b| b)?;
//!     store.set(b"greeting", b"hello", None);
//!     store.snapshot()?; // an image of every shard; the log restarts after it
//!     store.sadd(b"langs", &[b"rust", b"c"])?;
//! }
//! let store = PersistentStore::open(&config, 4, RecoveryMode::default(), |b| b)?;
//! assert_eq!(store.get(b"greeting"), Some(b"hello".to_vec()));
//! assert_eq!(store.scard(b"langs")?, 2);
//! assert_eq!(store.recovery().image_keys, 1); // from the image
//! assert_eq!(store.recovery().wal.frames(), 1); // from the log after it
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod image;
pub mod rdb;
mod saver;

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fc_shard::{EmbeddedStore, EmbeddedStoreBuilder, Mutation};
use fc_wal::{RecoveryMode, RecoveryReport, WalConfig, WalError, WalSink, recover_from};

pub use image::{
    IMAGE_END_MAGIC, IMAGE_HEADER_LEN, IMAGE_MAGIC, IMAGE_TRAILER_LEN, IMAGE_VERSION, IMAGES_KEPT,
    Image, ImageHeader, ImageWriter, image_dir, image_name, write_image,
};
pub use saver::{BackgroundSaves, SaveRule};

/// What loading images and replaying the log did.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Images applied (at most one per shard).
    pub images: usize,
    /// Keys those images held.
    pub image_keys: u64,
    /// Bytes of images read.
    pub image_bytes: u64,
    /// Newest images that were damaged and skipped for the older one: (file, reason).
    pub skipped_images: Vec<(PathBuf, String)>,
    /// The log replay after the images.
    pub wal: RecoveryReport,
    /// Time taken, images and log together.
    pub elapsed: Duration,
}

/// Milliseconds since the Unix epoch now.
#[must_use]
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Loads each shard's newest complete image into `store` (empty, `shard_count` shards, its sink
/// not logging), then replays the log after the images. A damaged newest image falls back to
/// the older one under [`RecoveryMode::TolerateTail`] and [`RecoveryMode::PointInTime`] (and
/// is reported); [`RecoveryMode::Strict`] refuses to start.
///
/// # Errors
/// [`WalError::Corrupt`] for damage the mode refuses (file and offset), a missing stretch of
/// log, [`WalError::ShardCount`], [`WalError::Apply`], [`WalError::Io`].
pub fn load(
    config: &WalConfig,
    store: &EmbeddedStore,
    mode: RecoveryMode,
) -> Result<LoadReport, WalError> {
    let started = Instant::now();
    let mut report = LoadReport::default();
    let mut starts = vec![1u64; store.shard_count()];
    for (shard, start) in starts.iter_mut().enumerate() {
        let dir = image_dir(&config.dir, shard);
        let images = image::list_images(&dir)?;
        for (_, path) in images.iter().rev() {
            match Image::read(path) {
                Ok(found) => {
                    let header = found.header;
                    if header.shard as usize != shard
                        || header.shard_count as usize != store.shard_count()
                    {
                        return Err(WalError::ShardCount {
                            path: path.clone(),
                            shard: header.shard,
                            shard_count: header.shard_count,
                            expected: store.shard_count(),
                        });
                    }
                    found.apply(store)?;
                    report.images += 1;
                    report.image_keys += found.keys;
                    report.image_bytes += found.bytes;
                    *start = header.covered_seq;
                    break;
                }
                Err(err) if mode == RecoveryMode::Strict => return Err(err),
                Err(err) => report.skipped_images.push((path.clone(), err.to_string())),
            }
        }
    }
    report.wal = recover_from(config, store, mode, &starts)?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Builds the image of one shard: `export` gets the writer's push function, returns the
/// covered log sequence (read under the shard's lock) and the key count.
pub fn build_image(
    shard: usize,
    shard_count: usize,
    export: impl FnOnce(&mut dyn FnMut(&Mutation<'_>)) -> (u64, u64),
) -> (ImageHeader, Vec<u8>) {
    let mut header = ImageHeader {
        shard: shard as u32,
        shard_count: shard_count as u32,
        covered_seq: 0,
        created_ms: unix_ms(),
    };
    let mut writer = ImageWriter::new(header);
    let (covered_seq, keys) = export(&mut |m| writer.push(m));
    header.covered_seq = covered_seq;
    writer.set_header(header);
    (header, writer.finish(keys))
}

/// Writes an image built by [`build_image`] and deletes the log segments the older kept image
/// covers. Returns the image's size in bytes.
///
/// The log the image's shard writes to is made durable first ([`WalSink::sync_log_of`]: what
/// it holds is written and synced), so the frames the image covers are on disk before the
/// image is. An image ahead of its log would outlive a crash that took the log's last frames
/// (a kill before the frames were written, a power loss before they were synced); recovery
/// then continues the log after the image's sequence, and the log keeps a hole that the next
/// recovery refuses.
///
/// # Errors
/// [`WalError::Io`] syncing the log, writing the image or deleting segments.
pub fn commit_image(
    data_dir: &Path,
    wal: &WalSink,
    header: &ImageHeader,
    bytes: &[u8],
) -> Result<u64, WalError> {
    wal.sync_log_of(header.shard as usize)?;
    let oldest_kept = write_image(data_dir, header, bytes)?;
    wal.trim(header.shard as usize, oldest_kept)?;
    Ok(bytes.len() as u64)
}

/// What one snapshot wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotReport {
    /// Keys imaged.
    pub keys: u64,
    /// Bytes of images written.
    pub bytes: u64,
    /// Longest time one shard's export held its lock, microseconds.
    pub max_pause_micros: u64,
}

/// Snapshots every shard of `store` (logged by `wal`) under `data_dir`, one shard at a time.
///
/// # Errors
/// [`WalError::Io`]; shards imaged before the failure keep their new images.
pub fn snapshot_store(
    data_dir: &Path,
    store: &EmbeddedStore,
    wal: &WalSink,
) -> Result<SnapshotReport, WalError> {
    let mut report = SnapshotReport::default();
    let count = store.shard_count();
    for shard in 0..count {
        let (mut pause, mut keys) = (0, 0);
        let (header, bytes) = build_image(shard, count, |push| {
            let started = Instant::now();
            let out = store.export_shard(shard, || wal.with_log(shard, |l| l.next_seq()), push);
            pause = started.elapsed().as_micros() as u64;
            keys = out.1;
            out
        });
        report.max_pause_micros = report.max_pause_micros.max(pause);
        report.keys += keys;
        report.bytes += commit_image(data_dir, wal, &header, &bytes)?;
    }
    Ok(report)
}

/// An [`EmbeddedStore`] that survives restarts: opening loads the newest snapshot images and
/// replays the log after them; every change is logged under the configured fsync policy, and
/// [`PersistentStore::snapshot`] writes new images and trims the log. Derefs to the store.
#[derive(Debug)]
pub struct PersistentStore {
    store: EmbeddedStore,
    wal: Arc<WalSink>,
    dir: PathBuf,
    recovery: LoadReport,
    last_save_ms: AtomicU64,
}

impl PersistentStore {
    /// Opens (or creates) the store persisted under `config.dir` with `shards` shards: builds
    /// the store (`configure` adds budgets, a clock, a listener, ...), loads images and the
    /// log into it with `mode`, then logs every change from there on.
    ///
    /// # Errors
    /// What [`load`] reports, [`WalError::Io`], or [`WalError::Apply`] holding the store's
    /// error (for example an unusable shard count).
    pub fn open(
        config: &WalConfig,
        shards: usize,
        mode: RecoveryMode,
        configure: impl FnOnce(EmbeddedStoreBuilder) -> EmbeddedStoreBuilder,
    ) -> Result<Self, WalError> {
        let config = &config.with_layout_on_disk()?;
        let (mut store, wal) = fc_wal::build_logged(config, shards, configure)?;
        let recovery = load_into(config, &mut store, &wal, mode)?;
        Ok(Self {
            store,
            wal,
            dir: config.dir.clone(),
            recovery,
            last_save_ms: AtomicU64::new(0),
        })
    }

    /// What opening loaded and repaired.
    #[must_use]
    pub fn recovery(&self) -> &LoadReport {
        &self.recovery
    }

    /// The log (health, stats, sync, group commit).
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

    /// Writes a new image of every shard (one shard's lock at a time) and deletes the log
    /// segments the kept images cover.
    ///
    /// # Errors
    /// [`WalError::Io`].
    pub fn snapshot(&self) -> Result<SnapshotReport, WalError> {
        let report = snapshot_store(&self.dir, &self.store, &self.wal)?;
        self.last_save_ms.store(unix_ms(), Ordering::Relaxed);
        Ok(report)
    }

    /// When the last [`PersistentStore::snapshot`] of this process finished (Unix ms; 0:
    /// none yet).
    #[must_use]
    pub fn last_snapshot_ms(&self) -> u64 {
        self.last_save_ms.load(Ordering::Relaxed)
    }
}

/// Loads images and the log into `store` (built with `wal` as its sink) through
/// [`fc_wal::replay_into`] (clock stopped, nothing re-logged), then sets the log's next
/// sequence numbers.
///
/// # Errors
/// As [`load`].
pub fn load_into(
    config: &WalConfig,
    store: &mut EmbeddedStore,
    wal: &WalSink,
    mode: RecoveryMode,
) -> Result<LoadReport, WalError> {
    let report = fc_wal::replay_into(store, wal, |store| load(config, store, mode))?;
    wal.set_next_seqs(&report.wal.next_seqs());
    Ok(report)
}

impl Deref for PersistentStore {
    type Target = EmbeddedStore;

    fn deref(&self) -> &EmbeddedStore {
        &self.store
    }
}

impl Drop for PersistentStore {
    fn drop(&mut self) {
        // Best effort: what `everysec` has not yet synced goes to disk on a clean close.
        let _ = self.wal.sync_all();
    }
}
