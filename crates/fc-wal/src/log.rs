//! The writing side: one [`ShardLog`] per shard (segments, rotation, fsync policy, poisoning)
//! and [`WalSink`], the [`MutationSink`] that feeds them.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fc_shard::{Mutation, MutationSink};
use parking_lot::Mutex;

use crate::error::WalError;
use crate::frame::SegmentHeader;
use crate::record::encode_mutation;

/// When appended frames are forced to disk (`fdatasync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum FsyncPolicy {
    /// After every frame, before the write returns (nothing acknowledged is ever lost).
    Always,
    /// At most a second after a frame was written (a power loss loses up to ~1 s per shard).
    #[default]
    EverySec,
    /// Never: the OS writes back when it likes.
    No,
}

impl FsyncPolicy {
    /// The policy of a Redis `appendfsync` name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "always" => Some(Self::Always),
            "everysec" => Some(Self::EverySec),
            "no" => Some(Self::No),
            _ => None,
        }
    }

    /// Its Redis `appendfsync` name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::EverySec => "everysec",
            Self::No => "no",
        }
    }
}

/// Where and how the log is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalConfig {
    /// The data directory (segments go under `<dir>/wal/shard-NNNN/`).
    pub dir: PathBuf,
    /// When frames reach the disk.
    pub fsync: FsyncPolicy,
    /// A segment is closed and a new one started once it passes this many bytes.
    pub segment_bytes: u64,
    /// Frames are gathered in memory up to this many bytes before one `write(2)` (0: every
    /// frame is written at once). A process killed before [`WalSink::flush_all`] loses what
    /// was gathered, so a server flushes before it sends the replies of a batch of commands;
    /// `always` writes every frame at once regardless.
    pub write_buffer_bytes: usize,
    /// Group commit: with [`FsyncPolicy::Always`], an append only gathers its frame, and
    /// [`WalSink::commit`] (called before any reply that acknowledges a write) writes and syncs
    /// everything appended so far, many writers' frames in one `fdatasync` per dirty shard.
    /// Without it, `always` syncs inside every append.
    pub group_commit: bool,
}

impl WalConfig {
    /// Defaults (`everysec`, 64 MiB segments) under `dir`.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            fsync: FsyncPolicy::EverySec,
            segment_bytes: 64 << 20,
            write_buffer_bytes: 0,
            group_commit: false,
        }
    }

    /// The directory of shard `shard`'s segments.
    #[must_use]
    pub fn shard_dir(&self, shard: usize) -> PathBuf {
        self.dir.join("wal").join(format!("shard-{shard:04}"))
    }
}

/// The file name of a segment whose first frame has sequence number `first_seq`.
#[must_use]
pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.fcw")
}

/// Counters of a log (or the sum over shards).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalStatsSnapshot {
    /// Frames appended.
    pub frames: u64,
    /// Bytes appended (frames and segment headers).
    pub bytes: u64,
    /// `fdatasync` calls.
    pub fsyncs: u64,
    /// Total time in `fdatasync`, microseconds.
    pub fsync_micros: u64,
    /// Longest single `fdatasync`, microseconds.
    pub fsync_max_micros: u64,
    /// Segments opened.
    pub segments: u64,
    /// Failed writes truncated back to the last good frame.
    pub truncations: u64,
}

impl WalStatsSnapshot {
    fn add(&mut self, other: &Self) {
        self.frames += other.frames;
        self.bytes += other.bytes;
        self.fsyncs += other.fsyncs;
        self.fsync_micros += other.fsync_micros;
        self.fsync_max_micros = self.fsync_max_micros.max(other.fsync_max_micros);
        self.segments += other.segments;
        self.truncations += other.truncations;
    }
}

/// One shard's log.
#[derive(Debug)]
pub struct ShardLog {
    shard: u32,
    shard_count: u32,
    dir: PathBuf,
    fsync: FsyncPolicy,
    segment_bytes: u64,
    group_commit: bool,
    file: Option<(Arc<File>, PathBuf)>,
    /// Bytes of the current segment written to the OS (all whole frames).
    segment_len: u64,
    /// Frames encoded but not yet written.
    pending: Vec<u8>,
    buffer_bytes: usize,
    next_seq: u64,
    last_sync: Instant,
    dirty: bool,
    poisoned: Option<WalError>,
    /// Set (for the whole sink) when this log is poisoned: a lock-free health check.
    failed: Arc<AtomicBool>,
    stats: WalStatsSnapshot,
}

fn io_error(path: &Path, err: &std::io::Error) -> WalError {
    WalError::Io {
        path: path.to_path_buf(),
        message: err.to_string(),
    }
}

/// Fsyncs a directory so a created or renamed name in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, &e))
}

impl ShardLog {
    /// A log for shard `shard` of `shard_count` whose next frame has sequence `next_seq`; its
    /// first append starts a new segment.
    ///
    /// # Errors
    /// [`WalError::Io`] when the shard's directory cannot be created.
    pub fn open(
        config: &WalConfig,
        shard: usize,
        shard_count: usize,
        next_seq: u64,
    ) -> Result<Self, WalError> {
        let dir = config.shard_dir(shard);
        fs::create_dir_all(&dir).map_err(|e| io_error(&dir, &e))?;
        Ok(Self {
            shard: shard as u32,
            shard_count: shard_count as u32,
            dir,
            fsync: config.fsync,
            segment_bytes: config.segment_bytes.max(1),
            group_commit: config.group_commit,
            file: None,
            segment_len: 0,
            pending: Vec::new(),
            buffer_bytes: config.write_buffer_bytes,
            next_seq: next_seq.max(1),
            last_sync: Instant::now(),
            dirty: false,
            poisoned: None,
            failed: Arc::new(AtomicBool::new(false)),
            stats: WalStatsSnapshot::default(),
        })
    }

    /// The sequence number the next frame gets.
    #[must_use]
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The error that stopped this log, if one did.
    #[must_use]
    pub fn poisoned(&self) -> Option<&WalError> {
        self.poisoned.as_ref()
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> WalStatsSnapshot {
        self.stats
    }

    fn fail(&mut self, err: WalError) -> WalError {
        self.poisoned = Some(err.clone());
        self.failed.store(true, Ordering::Release);
        err
    }

    /// Closes the current segment (fsynced) and opens the next, named by `first_seq`.
    fn rotate(&mut self) -> Result<(), WalError> {
        if self.file.is_some() {
            self.sync()?;
        }
        let path = self.dir.join(segment_name(self.next_seq));
        // Never over an existing segment: a name taken means frames this log would overwrite
        // (recovery removes frame-less segments), so that is an error, not a truncation.
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| io_error(&path, &e))?;
        let header = SegmentHeader {
            shard: self.shard,
            shard_count: self.shard_count,
            first_seq: self.next_seq,
        }
        .encode();
        file.write_all(&header)
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error(&path, &e))?;
        sync_dir(&self.dir)?;
        self.segment_len = header.len() as u64;
        self.stats.bytes += header.len() as u64;
        self.stats.segments += 1;
        self.file = Some((Arc::new(file), path));
        Ok(())
    }

    /// Appends `mutation` as the next frame; returns its sequence number. The frame is written
    /// to the OS now (or, with a write buffer, by the next [`ShardLog::flush`]); with
    /// [`FsyncPolicy::Always`] it is on disk when this returns.
    ///
    /// # Errors
    /// [`WalError::Poisoned`] after an earlier failure; otherwise the I/O error, which poisons
    /// the log (after truncating a partial frame away).
    pub fn append(&mut self, mutation: &Mutation<'_>) -> Result<u64, WalError> {
        if let Some(err) = &self.poisoned {
            return Err(WalError::Poisoned {
                shard: self.shard as usize,
                cause: Box::new(err.clone()),
            });
        }
        if self.file.is_none() || self.segment_len + self.pending.len() as u64 >= self.segment_bytes
        {
            self.rotate().map_err(|e| self.fail(e))?;
        }
        let seq = self.next_seq;
        let before = self.pending.len();
        // The payload is encoded in place, after a header whose length is filled in after.
        self.pending.extend_from_slice(&crate::frame::FRAME_MAGIC);
        self.pending.extend_from_slice(&[0u8; 8]); // flags, reserved, length
        self.pending.extend_from_slice(&seq.to_le_bytes());
        encode_mutation(mutation, &mut self.pending);
        let len = self.pending.len() - before - crate::frame::FRAME_HEADER_LEN;
        self.pending[before + 8..before + 12].copy_from_slice(&(len as u32).to_le_bytes());
        let crc = crc32c::crc32c(&self.pending[before + 4..]);
        self.pending.extend_from_slice(&crc.to_le_bytes());
        self.next_seq += 1;
        self.stats.frames += 1;
        self.stats.bytes += (self.pending.len() - before) as u64;
        match self.fsync {
            FsyncPolicy::Always if !self.group_commit => self.sync()?,
            FsyncPolicy::Always => {}
            _ if self.pending.len() >= self.buffer_bytes => self.flush()?,
            _ => {}
        }
        if self.fsync == FsyncPolicy::EverySec && self.last_sync.elapsed() >= Duration::from_secs(1)
        {
            self.sync()?;
        }
        Ok(seq)
    }

    /// Writes the frames gathered in memory to the OS (one `write(2)`).
    ///
    /// # Errors
    /// The I/O error, which poisons the log after cutting the segment back to its last whole
    /// frame.
    pub fn flush(&mut self) -> Result<(), WalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some((file, path)) = self.file.as_mut() else {
            return Ok(());
        };
        if let Err(e) = (&**file).write_all(&self.pending) {
            let err = io_error(path, &e);
            // A short write leaves a partial frame: cut back to the last whole one.
            let _ = file.set_len(self.segment_len);
            self.stats.truncations += 1;
            self.pending.clear();
            return Err(self.fail(err));
        }
        self.segment_len += self.pending.len() as u64;
        self.pending.clear();
        self.dirty = true;
        Ok(())
    }

    /// Writes gathered frames and forces everything written to disk (`fdatasync`).
    ///
    /// # Errors
    /// The I/O error, which poisons the log.
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.flush()?;
        self.last_sync = Instant::now();
        if !self.dirty {
            return Ok(());
        }
        let Some((file, path)) = &self.file else {
            return Ok(());
        };
        let started = Instant::now();
        if let Err(e) = file.sync_data() {
            let err = io_error(path, &e);
            return Err(self.fail(err));
        }
        let micros = started.elapsed().as_micros() as u64;
        self.dirty = false;
        self.stats.fsyncs += 1;
        self.stats.fsync_micros += micros;
        self.stats.fsync_max_micros = self.stats.fsync_max_micros.max(micros);
        Ok(())
    }
}

/// A pending `fdatasync` of one shard's current segment, taken under the log's lock
/// ([`ShardLog::sync_ticket`]) and run without it, so appends go on meanwhile.
#[derive(Debug)]
pub struct SyncTicket {
    shard: usize,
    file: Arc<File>,
    path: PathBuf,
}

impl SyncTicket {
    /// The shard whose log this syncs.
    #[must_use]
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Runs the `fdatasync`; returns its duration in microseconds.
    ///
    /// # Errors
    /// The I/O error (the caller poisons the log: [`ShardLog::sync_failed`]).
    pub fn run(&self) -> Result<u64, WalError> {
        let started = Instant::now();
        self.file
            .sync_data()
            .map_err(|e| io_error(&self.path, &e))?;
        Ok(started.elapsed().as_micros() as u64)
    }
}

impl ShardLog {
    /// Writes gathered frames to the OS and, when anything written is not yet synced, returns
    /// the `fdatasync` to run (outside this log's lock) for everything written so far.
    ///
    /// # Errors
    /// A failed write (the log is poisoned) or an earlier poisoning.
    pub fn sync_ticket(&mut self) -> Result<Option<SyncTicket>, WalError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        self.flush()?;
        self.last_sync = Instant::now();
        if !self.dirty {
            return Ok(None);
        }
        let Some((file, path)) = &self.file else {
            return Ok(None);
        };
        self.dirty = false;
        Ok(Some(SyncTicket {
            shard: self.shard as usize,
            file: Arc::clone(file),
            path: path.clone(),
        }))
    }

    /// Records a ticket's successful sync.
    pub fn sync_done(&mut self, micros: u64) {
        self.stats.fsyncs += 1;
        self.stats.fsync_micros += micros;
        self.stats.fsync_max_micros = self.stats.fsync_max_micros.max(micros);
    }

    /// Poisons the log after a ticket's sync failed: what it covered may not be on disk.
    pub fn sync_failed(&mut self, err: WalError) {
        self.fail(err);
    }

    /// Deletes the closed segments all of whose frames have sequence numbers below `seq`
    /// (covered by a snapshot); never the segment being written. Returns how many.
    ///
    /// # Errors
    /// [`WalError::Io`] listing or removing a segment.
    pub fn delete_segments_before(&mut self, seq: u64) -> Result<usize, WalError> {
        let current = self.file.as_ref().map(|(_, path)| path.clone());
        let mut firsts: Vec<(u64, PathBuf)> = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, &e))? {
            let path = entry.map_err(|e| io_error(&self.dir, &e))?.path();
            let first = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".fcw"))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(first) = first {
                firsts.push((first, path));
            }
        }
        firsts.sort();
        let mut deleted = 0;
        // Segment i holds frames [first_i, first_{i+1}): removable when first_{i+1} <= seq.
        for pair in firsts.windows(2) {
            let ((_, path), (next_first, _)) = (&pair[0], &pair[1]);
            if *next_first > seq || current.as_ref() == Some(path) {
                break;
            }
            fs::remove_file(path).map_err(|e| io_error(path, &e))?;
            deleted += 1;
        }
        if deleted > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(deleted)
    }
}

/// The [`MutationSink`] that logs a store: one [`ShardLog`] per shard, each behind its own
/// lock (taken inside the store's shard lock, so never contended by another shard).
///
/// A sink cannot fail a store's write, so an append error is kept: [`WalSink::health`] reports
/// it and every later append of that shard fails fast (poisoned). A server checks `health`
/// before accepting writes (Redis's `MISCONF` behaviour).
#[derive(Debug)]
pub struct WalSink {
    logs: Vec<Mutex<ShardLog>>,
    /// While recovery replays the log into the store, the store's own mutations are not logged
    /// again.
    replaying: AtomicBool,
    /// Frames appended (all shards), counted after each frame is in its log's buffer.
    appended: AtomicU64,
    /// Every frame counted in `appended` up to this value is durable.
    durable: AtomicU64,
    /// One group commit at a time; later callers find their frames already durable.
    committing: Mutex<()>,
    /// Whether any shard's log is poisoned.
    failed: Arc<AtomicBool>,
    /// Every frame counted in `appended` up to this value has been written to the OS.
    flushed: AtomicU64,
}

impl WalSink {
    /// A sink over one log per shard, the next sequence numbers given per shard.
    ///
    /// # Errors
    /// [`WalError::Io`] when a shard's directory cannot be created.
    pub fn open(config: &WalConfig, next_seqs: &[u64]) -> Result<Self, WalError> {
        let count = next_seqs.len();
        let failed = Arc::new(AtomicBool::new(false));
        let logs = next_seqs
            .iter()
            .enumerate()
            .map(|(shard, &next)| {
                ShardLog::open(config, shard, count, next).map(|mut log| {
                    log.failed = Arc::clone(&failed);
                    Mutex::new(log)
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            logs,
            failed,
            flushed: AtomicU64::new(0),
            replaying: AtomicBool::new(false),
            appended: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            committing: Mutex::new(()),
        })
    }

    /// While set, the store's mutations are not logged (recovery replaying the log or images
    /// into the store).
    pub fn set_replaying(&self, replaying: bool) {
        self.replaying.store(replaying, Ordering::Release);
    }

    /// Sets each shard's next sequence number (after recovery).
    pub fn set_next_seqs(&self, next: &[u64]) {
        for (log, &seq) in self.logs.iter().zip(next) {
            log.lock().next_seq = seq.max(1);
        }
    }

    /// `Err` with the first shard's failure when any shard's log has failed.
    ///
    /// # Errors
    /// The [`WalError`] that poisoned a shard's log.
    pub fn health(&self) -> Result<(), WalError> {
        for log in &self.logs {
            if let Some(err) = log.lock().poisoned() {
                return Err(err.clone());
            }
        }
        Ok(())
    }

    /// Writes every shard's gathered frames to the OS (a server calls it before sending the
    /// replies of the commands it just ran).
    ///
    /// # Errors
    /// The first failure (every shard is still attempted).
    pub fn flush_all(&self) -> Result<(), WalError> {
        let mut first = Ok(());
        for log in &self.logs {
            if let Err(err) = log.lock().flush() {
                first = first.and(Err(err));
            }
        }
        first
    }

    /// Fsyncs every shard's log (the `everysec` timer, `SAVE`, shutdown).
    ///
    /// # Errors
    /// The first failure (every shard is still attempted).
    pub fn sync_all(&self) -> Result<(), WalError> {
        let mut first = Ok(());
        for log in &self.logs {
            if let Err(err) = log.lock().sync() {
                first = first.and(Err(err));
            }
        }
        first
    }

    /// Whether a shard's log has failed (lock-free; [`WalSink::health`] says why).
    #[must_use]
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Writes every frame appended so far to the OS unless that is known done (a server calls
    /// it before the replies of a batch: a killed process then loses nothing it acknowledged;
    /// only the OS crashing can, up to the fsync policy's window).
    ///
    /// # Errors
    /// The first failure (every shard is still attempted).
    pub fn flush_appended(&self) -> Result<(), WalError> {
        let position = self.appended();
        if self.flushed.load(Ordering::Acquire) >= position {
            return Ok(());
        }
        self.flush_all()?;
        self.flushed.fetch_max(position, Ordering::AcqRel);
        Ok(())
    }

    /// Whether every frame appended up to `position` has been written to the OS.
    #[must_use]
    pub fn is_flushed(&self, position: u64) -> bool {
        self.flushed.load(Ordering::Acquire) >= position
    }

    /// Frames appended since the sink opened (a position to pass to [`WalSink::commit_to`]).
    #[must_use]
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// Whether every frame appended up to `position` is known durable.
    #[must_use]
    pub fn is_durable(&self, position: u64) -> bool {
        self.durable.load(Ordering::Acquire) >= position
    }

    /// Group commit: makes every frame appended so far durable (write, then `fdatasync` of each
    /// dirty shard, in parallel and outside the shard logs' locks). Concurrent callers share
    /// one commit: whoever waits for the lock finds its frames covered and returns at once.
    ///
    /// # Errors
    /// The first failure; the failing shard's log is poisoned (nothing after it is acked).
    pub fn commit(&self) -> Result<(), WalError> {
        self.commit_to(self.appended())
    }

    /// As [`WalSink::commit`], for the frames up to `position` (from [`WalSink::appended`]).
    ///
    /// # Errors
    /// As [`WalSink::commit`].
    pub fn commit_to(&self, position: u64) -> Result<(), WalError> {
        if self.is_durable(position) {
            return self.health();
        }
        let _one = self.committing.lock();
        if self.is_durable(position) {
            return self.health();
        }
        // Everything counted before this load is in its log's buffer already.
        let target = self.appended();
        let mut tickets = Vec::new();
        let mut first = Ok(());
        for log in &self.logs {
            match log.lock().sync_ticket() {
                Ok(Some(ticket)) => tickets.push(ticket),
                Ok(None) => {}
                Err(err) => first = first.and(Err(err)),
            }
        }
        let results: Vec<Result<u64, WalError>> = if tickets.len() <= 1 {
            tickets.iter().map(SyncTicket::run).collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = tickets
                    .iter()
                    .map(|t| scope.spawn(move || t.run()))
                    .collect();
                handles
                    .into_iter()
                    .zip(&tickets)
                    .map(|(h, t)| {
                        // A sync that did not finish is not durable.
                        h.join().unwrap_or_else(|_| {
                            Err(WalError::Io {
                                path: t.path.clone(),
                                message: "fdatasync thread panicked".into(),
                            })
                        })
                    })
                    .collect()
            })
        };
        for (ticket, result) in tickets.iter().zip(results) {
            let mut log = self.logs[ticket.shard()].lock();
            match result {
                Ok(micros) => log.sync_done(micros),
                Err(err) => {
                    log.sync_failed(err.clone());
                    first = first.and(Err(err));
                }
            }
        }
        first?;
        self.durable.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Runs `f` on shard `shard`'s log under its lock (for snapshots: its next sequence
    /// number; for segment deletion).
    ///
    /// # Panics
    /// When `shard` is out of range.
    pub fn with_log<R>(&self, shard: usize, f: impl FnOnce(&mut ShardLog) -> R) -> R {
        f(&mut self.logs[shard].lock())
    }

    /// The number of shard logs.
    #[must_use]
    pub fn shard_count(&self) -> usize {
        self.logs.len()
    }

    /// Counters summed over shards.
    #[must_use]
    pub fn stats(&self) -> WalStatsSnapshot {
        let mut total = WalStatsSnapshot::default();
        for log in &self.logs {
            total.add(&log.lock().stats());
        }
        total
    }
}

impl MutationSink for WalSink {
    fn on_mutation(&self, shard: usize, _seq: u64, mutation: &Mutation<'_>) {
        if self.replaying.load(Ordering::Acquire) {
            return;
        }
        if let Some(log) = self.logs.get(shard) {
            // The error is kept in the log (poisoned) and reported by `health`.
            let _ = log.lock().append(mutation);
            self.appended.fetch_add(1, Ordering::AcqRel);
        }
    }
}
