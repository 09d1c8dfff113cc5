//! The writing side: one [`ShardLog`] per shard (segments, rotation, fsync policy, poisoning)
//! and [`WalSink`], the [`MutationSink`] that feeds them.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fc_shard::{Mutation, MutationSink};
use parking_lot::Mutex;

use crate::error::WalError;
use crate::faults::{Faults, FileOp};
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
    /// How the shards' frames map to logs. 0 (the default): one log per shard, under
    /// `wal/shard-NNNN/`. `n` > 0: `n` shared logs under `wal/log-NNNN/`, shard `s` writing
    /// to log `s % n` with its number in every frame — a thread-per-core server gives each
    /// worker one log (its shards are `s % workers == worker`), so a group commit runs one
    /// `fdatasync` per worker instead of one per shard. A data directory keeps the layout it
    /// was created with ([`WalConfig::with_layout_on_disk`]).
    pub logs: usize,
    /// With [`FsyncPolicy::EverySec`]: the caller runs [`WalSink::commit`] (or
    /// [`WalSink::sync_all`]) about every second on a thread of its own, as the server's
    /// `fc-persist` thread does, so appends never `fdatasync` themselves and a writer never
    /// waits for the disk. Without it (the default) an append that finds the last sync more
    /// than a second old runs one.
    pub background_sync: bool,
    /// Fault injection for tests (none by default): consulted before every write, sync and
    /// segment creation.
    pub faults: Faults,
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
            logs: 0,
            background_sync: false,
            faults: Faults::none(),
        }
    }

    /// The directory of shard `shard`'s segments (one log per shard).
    #[must_use]
    pub fn shard_dir(&self, shard: usize) -> PathBuf {
        self.dir.join("wal").join(format!("shard-{shard:04}"))
    }

    /// The directory of log `index`'s segments: [`WalConfig::shard_dir`] with one log per
    /// shard, `wal/log-NNNN/` when shards share logs.
    #[must_use]
    pub fn log_dir(&self, index: usize) -> PathBuf {
        if self.logs == 0 {
            self.shard_dir(index)
        } else {
            self.dir.join("wal").join(format!("log-{index:04}"))
        }
    }

    /// How many logs a store of `shard_count` shards writes.
    #[must_use]
    pub fn log_count(&self, shard_count: usize) -> usize {
        if self.logs == 0 {
            shard_count
        } else {
            self.logs.min(shard_count).max(1)
        }
    }

    /// This configuration with the layout (`logs`) the data directory's existing segments
    /// were written in, if it has any — a directory keeps its layout whatever the settings
    /// say now (a server restarted with another thread count reads and extends the logs it
    /// has). Empty log directories do not count.
    ///
    /// # Errors
    /// [`WalError::Io`] reading the directory; [`WalError::Corrupt`] when segments of both
    /// layouts exist, or no shared-log segment has a readable header.
    pub fn with_layout_on_disk(&self) -> Result<Self, WalError> {
        let wal = self.dir.join("wal");
        let entries = match fs::read_dir(&wal) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(self.clone()),
            Err(e) => return Err(io_error(&wal, &e)),
        };
        let (mut per_shard, mut shared, mut shared_logs) = (false, None::<PathBuf>, None);
        for entry in entries {
            let dir = entry.map_err(|e| io_error(&wal, &e))?.path();
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let is_shard = name.starts_with("shard-");
            if !is_shard && !name.starts_with("log-") {
                continue;
            }
            let Ok(files) = fs::read_dir(&dir) else {
                continue;
            };
            for file in files.flatten() {
                let path = file.path();
                if path.extension().is_none_or(|e| e != "fcw") {
                    continue;
                }
                if is_shard {
                    per_shard = true;
                } else {
                    shared = Some(path.clone());
                    let mut head = [0u8; crate::frame::SEGMENT_HEADER_LEN];
                    let read = File::open(&path)
                        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
                    if let (Ok(()), Some(header)) = (read, SegmentHeader::decode(&head))
                        && header.logs > 0
                    {
                        shared_logs = Some(header.logs as usize);
                    }
                }
            }
        }
        let corrupt = |path: PathBuf, reason: &str| WalError::Corrupt {
            path,
            offset: 0,
            reason: reason.to_string(),
        };
        match (per_shard, shared, shared_logs) {
            (true, Some(path), _) => Err(corrupt(
                path,
                "segments of both layouts (per-shard and shared logs) exist",
            )),
            (true, None, _) => Ok(Self {
                logs: 0,
                ..self.clone()
            }),
            (false, Some(_), Some(logs)) => Ok(Self {
                logs,
                ..self.clone()
            }),
            (false, Some(path), None) => {
                Err(corrupt(path, "no shared-log segment has a readable header"))
            }
            (false, None, _) => Ok(self.clone()),
        }
    }
}

/// The file name of a segment whose first frame has sequence number `first_seq`.
#[must_use]
pub fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}.fcw")
}

/// Upper bounds, in microseconds, of the buckets of [`WalStatsSnapshot::sync_histogram`] (the
/// last bucket, past these, holds the slower syncs).
pub const SYNC_BUCKETS_MICROS: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000,
];

/// Counters of a log (or the sum over shards).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalStatsSnapshot {
    /// Frames appended (a batch frame holds every mutation appended since the last write).
    pub frames: u64,
    /// Mutations appended.
    pub mutations: u64,
    /// Bytes appended (frames and segment headers).
    pub bytes: u64,
    /// `fdatasync` calls.
    pub fsyncs: u64,
    /// Total time in `fdatasync`, microseconds.
    pub fsync_micros: u64,
    /// Longest single `fdatasync`, microseconds.
    pub fsync_max_micros: u64,
    /// Sync rounds (one ticket: the `fdatasync` calls one commit or one `everysec` tick
    /// ran) by how long they took: `sync_histogram[i]` counts those of at most
    /// [`SYNC_BUCKETS_MICROS`]`[i]` microseconds and more than the bound before; the last
    /// counts the slower ones.
    pub sync_histogram: [u64; SYNC_BUCKETS_MICROS.len() + 1],
    /// Segments opened.
    pub segments: u64,
    /// Failed writes truncated back to the last good frame.
    pub truncations: u64,
}

impl WalStatsSnapshot {
    fn add(&mut self, other: &Self) {
        self.frames += other.frames;
        self.mutations += other.mutations;
        self.bytes += other.bytes;
        self.fsyncs += other.fsyncs;
        self.fsync_micros += other.fsync_micros;
        self.fsync_max_micros = self.fsync_max_micros.max(other.fsync_max_micros);
        for (total, n) in self.sync_histogram.iter_mut().zip(other.sync_histogram) {
            *total += n;
        }
        self.segments += other.segments;
        self.truncations += other.truncations;
    }
}

/// One log: a shard's own, or (with [`WalConfig::logs`]) one shared by several shards.
#[derive(Debug)]
pub struct ShardLog {
    /// The shard, or the shared log's index.
    shard: u32,
    shard_count: u32,
    /// 0: this log is one shard's; otherwise the number of shared logs.
    logs: u32,
    dir: PathBuf,
    fsync: FsyncPolicy,
    segment_bytes: u64,
    group_commit: bool,
    background_sync: bool,
    file: Option<(Arc<File>, PathBuf)>,
    /// Bytes of the current segment written to the OS (all whole frames).
    segment_len: u64,
    /// Bytes the current segment's file holds: `segment_len` and then zeros, up to a
    /// multiple of [`PREALLOC_BYTES`] (see [`ShardLog::flush`]).
    file_len: u64,
    /// `everysec`: closed segments whose last frames still await their `fdatasync` (the next
    /// sync runs it, before the current segment's: rotation never waits for the disk).
    closing: Vec<(Arc<File>, PathBuf)>,
    /// `everysec`: the current segment's file and its name in the directory are not yet
    /// synced (the next sync does both).
    created: bool,
    /// The current segment's page cache is dropped below this offset (see [`SyncTicket`]).
    dropped: u64,
    /// Frames encoded but not yet written.
    pending: Vec<u8>,
    /// Where the batch frame still open for appends starts in `pending` (its length and
    /// checksum are filled in when it is closed, before `pending` is written).
    open: Option<usize>,
    buffer_bytes: usize,
    next_seq: u64,
    /// When the log was last synced ([`coarse_now`]).
    last_sync: Duration,
    dirty: bool,
    poisoned: Option<WalError>,
    /// Set (for the whole sink) when this log is poisoned: a lock-free health check.
    failed: Arc<AtomicBool>,
    stats: WalStatsSnapshot,
    faults: Faults,
    /// Told of every run of whole frames once it is written to the OS (the WAL TCP export).
    tap: Option<Arc<dyn WalTap>>,
}

/// Receives a log's frames as they are written to the OS: the same bytes as the segment,
/// whole frames only, in order. Called on the writing thread, so it must be quick (copy into
/// a queue); it may block to slow the writers down (an export that backpressures them).
pub trait WalTap: Send + Sync + std::fmt::Debug {
    /// Log `log` wrote `frames` (one or more whole `FCW2` frames); its next frame will have
    /// sequence number `next_seq`.
    fn frames(&self, log: usize, next_seq: u64, frames: &[u8]);
}

/// A segment file grows in steps of this many bytes: a write reaching past the file's end
/// carries zeros up to the next multiple (unused space, which recovery reads as the end of
/// the log), and later writes overwrite those zeros in place. The page cache then holds the
/// log in 64 KiB folios allocated once per step, not a small folio per `write(2)`: in this
/// project's VM that halved the kernel time of writing the log (an append of 9 KB into a
/// fresh page cache costs about 3 µs per page, an overwrite of a cached folio a fraction).
pub const PREALLOC_BYTES: u64 = 64 << 10;

/// A batch frame is closed once its payload reaches this many bytes (it is closed anyway by
/// every write to the OS): a bound on what one torn frame can take with it.
const MAX_BATCH_PAYLOAD: usize = 1 << 20;

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
    /// Log `index` (the shard's own log, or shared log `index` with [`WalConfig::logs`]) of
    /// a store of `shard_count` shards, whose next frame has sequence `next_seq`; its first
    /// append starts a new segment.
    ///
    /// # Errors
    /// [`WalError::Io`] when the log's directory cannot be created.
    pub fn open(
        config: &WalConfig,
        index: usize,
        shard_count: usize,
        next_seq: u64,
    ) -> Result<Self, WalError> {
        let dir = config.log_dir(index);
        fs::create_dir_all(&dir).map_err(|e| io_error(&dir, &e))?;
        let logs = if config.logs == 0 {
            0
        } else {
            config.log_count(shard_count) as u32
        };
        Ok(Self {
            shard: index as u32,
            shard_count: shard_count as u32,
            logs,
            dir,
            fsync: config.fsync,
            segment_bytes: config.segment_bytes.max(1),
            group_commit: config.group_commit,
            background_sync: config.background_sync,
            file: None,
            segment_len: 0,
            file_len: 0,
            closing: Vec::new(),
            created: false,
            dropped: 0,
            pending: Vec::new(),
            open: None,
            buffer_bytes: config.write_buffer_bytes,
            next_seq: next_seq.max(1),
            last_sync: coarse_now(),
            dirty: false,
            poisoned: None,
            failed: Arc::new(AtomicBool::new(false)),
            stats: WalStatsSnapshot::default(),
            faults: config.faults.clone(),
            tap: None,
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

    /// Closes the current segment and opens the next, named by the next sequence number.
    /// Under `everysec` the closed segment's last `fdatasync`, and the new file's and its
    /// directory entry's, are left to the next sync (which runs them in that order, before
    /// any of the new segment's frames count as synced); otherwise they run here.
    fn rotate(&mut self) -> Result<(), WalError> {
        let deferred = self.fsync == FsyncPolicy::EverySec;
        if self.file.is_some() {
            if deferred {
                self.flush()?;
                self.trim_preallocated();
                if let Some(closed) = self.file.take()
                    && self.dirty
                {
                    self.closing.push(closed);
                }
            } else {
                self.flush()?;
                self.trim_preallocated();
                self.sync()?;
            }
        }
        let path = self.dir.join(segment_name(self.next_seq));
        if let Some(fault) = self.faults.check(FileOp::Create, &path) {
            return Err(io_error(&path, &fault.error));
        }
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
            logs: self.logs,
        }
        .encode();
        file.write_all(&header).map_err(|e| io_error(&path, &e))?;
        if deferred {
            self.created = true;
            self.dirty = true;
        } else {
            file.sync_all().map_err(|e| io_error(&path, &e))?;
            sync_dir(&self.dir)?;
        }
        self.segment_len = header.len() as u64;
        self.file_len = self.segment_len;
        self.dropped = 0;
        self.stats.bytes += header.len() as u64;
        self.stats.segments += 1;
        self.file = Some((Arc::new(file), path));
        Ok(())
    }

    /// Appends `mutation` to the log's open batch frame; returns its sequence number. The
    /// frame is closed and written to the OS now (or, with a write buffer, by the next
    /// [`ShardLog::flush`]); with [`FsyncPolicy::Always`] (without group commit) it is on disk
    /// when this returns.
    ///
    /// # Errors
    /// [`WalError::Poisoned`] after an earlier failure; otherwise the I/O error, which poisons
    /// the log (after truncating a partial frame away).
    pub fn append(&mut self, mutation: &Mutation<'_>) -> Result<u64, WalError> {
        self.append_of(self.shard as usize, mutation)
    }

    /// [`ShardLog::append`] of a mutation of shard `shard` (recorded in the frame when the log
    /// is shared).
    ///
    /// # Errors
    /// As [`ShardLog::append`].
    pub fn append_of(&mut self, shard: usize, mutation: &Mutation<'_>) -> Result<u64, WalError> {
        if let Some(err) = &self.poisoned {
            return Err(WalError::Poisoned {
                shard,
                cause: Box::new(err.clone()),
            });
        }
        if self.file.is_none() || self.segment_len + self.pending.len() as u64 >= self.segment_bytes
        {
            self.rotate().map_err(|e| self.fail(e))?;
        }
        let seq = self.next_seq;
        let before = self.pending.len();
        if self
            .open
            .is_some_and(|start| before - start >= MAX_BATCH_PAYLOAD)
        {
            self.close_frame();
        }
        if self.open.is_none() {
            // A batch frame's header, whose length (and trailing checksum) is filled in when
            // it is closed; its mutations are encoded in place after it.
            self.open = Some(self.pending.len());
            self.pending.extend_from_slice(&crate::frame::FRAME_MAGIC);
            self.pending
                .extend_from_slice(&[crate::frame::FLAG_BATCH, 0, 0, 0]); // flags, reserved, shard
            self.pending.extend_from_slice(&[0u8; 4]); // length
            self.pending.extend_from_slice(&seq.to_le_bytes());
            self.stats.frames += 1;
        }
        if self.logs > 0 {
            self.pending
                .extend_from_slice(&(shard as u16).to_le_bytes());
        }
        encode_mutation(mutation, &mut self.pending);
        self.next_seq += 1;
        self.stats.mutations += 1;
        self.stats.bytes += (self.pending.len() - before) as u64;
        match self.fsync {
            FsyncPolicy::Always if !self.group_commit => self.sync()?,
            FsyncPolicy::Always => {}
            _ if self.pending.len() >= self.buffer_bytes => self.flush()?,
            _ => {}
        }
        if self.fsync == FsyncPolicy::EverySec
            && !self.background_sync
            && coarse_now().saturating_sub(self.last_sync) >= Duration::from_secs(1)
        {
            self.sync()?;
        }
        Ok(seq)
    }

    /// Writes the frames gathered in memory to the OS (one `pwrite(2)` at the end of the
    /// segment's frames). A write reaching past the file's end also writes the zeros up to
    /// the next multiple of [`PREALLOC_BYTES`], which later writes overwrite.
    ///
    /// # Errors
    /// The I/O error, which poisons the log after cutting the segment back to its last whole
    /// frame.
    pub fn flush(&mut self) -> Result<(), WalError> {
        if let Some(err) = &self.poisoned {
            return Err(err.clone());
        }
        self.close_frame();
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some((file, path)) = self.file.as_mut() else {
            return Ok(());
        };
        let frames = self.pending.len();
        let end = self.segment_len + frames as u64;
        let file_len = if end > self.file_len {
            let grown = end.next_multiple_of(PREALLOC_BYTES);
            self.pending.resize(frames + (grown - end) as usize, 0);
            grown
        } else {
            self.file_len
        };
        let written = match self.faults.check(FileOp::Write, path) {
            None => file.write_all_at(&self.pending, self.segment_len),
            Some(fault) => {
                let part = &self.pending[..fault.written.min(self.pending.len())];
                file.write_all_at(part, self.segment_len)
                    .and(Err(fault.error))
            }
        };
        if written.is_ok()
            && let Some(tap) = &self.tap
        {
            tap.frames(self.shard as usize, self.next_seq, &self.pending[..frames]);
        }
        self.pending.clear();
        if let Err(e) = written {
            let err = io_error(path, &e);
            // A short write leaves a partial frame: cut back to the last whole one.
            let _ = file.set_len(self.segment_len);
            self.file_len = self.segment_len;
            self.stats.truncations += 1;
            return Err(self.fail(err));
        }
        self.segment_len = end;
        self.file_len = file_len;
        self.dirty = true;
        Ok(())
    }

    /// Cuts the current segment's unused preallocated zeros off (a segment being closed, or
    /// the log being dropped), so a closed segment ends with its last frame. A failure only
    /// leaves the zeros, which recovery reads as the segment's end, so it is ignored.
    fn trim_preallocated(&mut self) {
        if let Some((file, _)) = &self.file
            && self.file_len > self.segment_len
            && self.poisoned.is_none()
            && file.set_len(self.segment_len).is_ok()
        {
            self.file_len = self.segment_len;
        }
    }

    /// Closes the open batch frame: fills in its payload length and appends its checksum.
    fn close_frame(&mut self) {
        let Some(start) = self.open.take() else {
            return;
        };
        let len = self.pending.len() - start - crate::frame::FRAME_HEADER_LEN;
        self.pending[start + 8..start + 12].copy_from_slice(&(len as u32).to_le_bytes());
        let crc = crc32c::crc32c(&self.pending[start + 4..]);
        self.pending.extend_from_slice(&crc.to_le_bytes());
        self.stats.bytes += crate::frame::FRAME_TRAILER_LEN as u64;
    }

    /// Writes gathered frames and forces everything written to disk (`fdatasync`; first of
    /// any closed segment still waiting for it, see [`ShardLog::sync_ticket`]).
    ///
    /// # Errors
    /// The I/O error, which poisons the log.
    pub fn sync(&mut self) -> Result<(), WalError> {
        let Some(ticket) = self.sync_ticket()? else {
            return Ok(());
        };
        match ticket.run() {
            Ok(micros) => {
                self.sync_done(&ticket, micros);
                Ok(())
            }
            Err(err) => Err(self.fail(err)),
        }
    }
}

impl Drop for ShardLog {
    /// Writes what is gathered and trims the preallocated zeros (see [`PREALLOC_BYTES`]); the
    /// owner syncs first when it wants the close durable ([`crate::LoggedStore`] does).
    fn drop(&mut self) {
        if self.poisoned.is_none() && self.flush().is_ok() {
            self.trim_preallocated();
        }
    }
}

/// A pending `fdatasync` of one log, taken under the log's lock ([`ShardLog::sync_ticket`])
/// and run without it, so appends go on meanwhile.
///
/// After each file's sync its page cache is dropped (`posix_fadvise(DONTNEED)`), whole pages
/// below what was written when the ticket was taken: the log is read back only by recovery,
/// so keeping gigabytes of it cached would only push useful pages out, and new writes reuse
/// the freed pages instead of growing the cache (in a virtual machine, first touches of fresh
/// guest memory made the page-cache copy of `write(2)` several times slower).
#[derive(Debug)]
pub struct SyncTicket {
    shard: usize,
    /// Closed segments first (in order), each synced and then dropped whole.
    closing: Vec<(Arc<File>, PathBuf)>,
    /// The current segment: synced with its metadata and directory when it is new.
    current: Option<(Arc<File>, PathBuf)>,
    created: Option<PathBuf>,
    /// The current segment's page-cache range to drop once synced.
    uncache: (u64, u64),
    faults: Faults,
}

impl SyncTicket {
    /// The shard whose log this syncs.
    #[must_use]
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Runs the syncs (closed segments, then the current one with its directory entry when
    /// it is new); returns their duration in microseconds.
    ///
    /// # Errors
    /// The first I/O error (the caller poisons the log: [`ShardLog::sync_failed`]).
    pub fn run(&self) -> Result<u64, WalError> {
        let started = Instant::now();
        for (file, path) in &self.closing {
            self.sync_file(file, path, false)?;
            drop_cached(file, 0, None);
        }
        if let Some((file, path)) = &self.current {
            self.sync_file(file, path, self.created.is_some())?;
            if let Some(dir) = &self.created {
                sync_dir(dir)?;
            }
            drop_cached(file, self.uncache.0, Some(self.uncache.1));
        }
        Ok(started.elapsed().as_micros() as u64)
    }

    /// How many files the ticket syncs.
    #[must_use]
    pub fn files(&self) -> usize {
        self.closing.len() + usize::from(self.current.is_some())
    }

    fn sync_file(&self, file: &File, path: &Path, all: bool) -> Result<(), WalError> {
        match self.faults.check(FileOp::Sync, path) {
            None if all => file.sync_all(),
            None => file.sync_data(),
            Some(fault) => Err(fault.error),
        }
        .map_err(|e| io_error(path, &e))
    }

    /// The file a failure names: the current segment's, else the first closed one's.
    fn path(&self) -> PathBuf {
        self.current
            .as_ref()
            .or(self.closing.first())
            .map(|(_, path)| path.clone())
            .unwrap_or_default()
    }
}

/// Drops the pages of `file` from `from` to `to` (`None`: the end) from the page cache, in
/// whole [`PREALLOC_BYTES`] steps (the folios the log is written in): the step holding `from`
/// too (everything before `to` was just synced), not the one holding `to` (the next frames
/// go there). Advice: a failure changes nothing but memory use, so it is ignored.
fn drop_cached(file: &File, from: u64, to: Option<u64>) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let from = from - from % PREALLOC_BYTES;
        let len = match to {
            None => None,
            Some(to) => {
                let to = to - to % PREALLOC_BYTES;
                if to <= from {
                    return;
                }
                std::num::NonZeroU64::new(to - from)
            }
        };
        let _ = rustix::fs::fadvise(file, from, len, rustix::fs::Advice::DontNeed);
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (file, from, to);
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
        self.last_sync = coarse_now();
        if !self.dirty && self.closing.is_empty() {
            return Ok(None);
        }
        let current = if self.dirty { self.file.clone() } else { None };
        let uncache = (self.dropped, self.segment_len);
        self.dropped = self.dropped.max(self.segment_len);
        let created = std::mem::take(&mut self.created).then(|| self.dir.clone());
        self.dirty = false;
        Ok(Some(SyncTicket {
            shard: self.shard as usize,
            closing: std::mem::take(&mut self.closing),
            current,
            created,
            uncache,
            faults: self.faults.clone(),
        }))
    }

    /// Records a ticket's successful sync (`fsyncs` counts each file it synced).
    pub fn sync_done(&mut self, ticket: &SyncTicket, micros: u64) {
        self.stats.fsyncs += ticket.files() as u64;
        self.stats.fsync_micros += micros;
        self.stats.fsync_max_micros = self.stats.fsync_max_micros.max(micros);
        let bucket = SYNC_BUCKETS_MICROS.partition_point(|&bound| bound < micros);
        self.stats.sync_histogram[bucket] += 1;
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

/// The [`MutationSink`] that logs a store: one [`ShardLog`] per shard (or per group of shards,
/// [`WalConfig::logs`]), each behind its own lock (taken inside the store's shard lock; with one
/// log per shard, never contended by another shard).
///
/// A sink cannot fail a store's write, so an append error is kept: [`WalSink::health`] reports
/// it and every later append of that shard fails fast (poisoned). A server checks `health`
/// before accepting writes (Redis's `MISCONF` behaviour).
#[derive(Debug)]
pub struct WalSink {
    logs: Vec<Mutex<ShardLog>>,
    /// Per shard: the log sequence the shard's oldest kept snapshot image covers (0: not
    /// known in this process) — a shared log's segment goes only once every shard writing to
    /// it has an image past it.
    covered: Vec<AtomicU64>,
    /// While recovery replays the log into the store, the store's own mutations are not logged
    /// again.
    replaying: AtomicBool,
    /// Mutations appended (all shards), counted after each is in its log's buffer.
    appended: AtomicU64,
    /// Every frame counted in `appended` up to this value is durable.
    durable: AtomicU64,
    /// Per log: mutations appended, and how many of them are known durable.
    log_appended: Vec<AtomicU64>,
    log_durable: Vec<AtomicU64>,
    /// Per log: one group commit at a time; later callers find their frames durable.
    committing: Vec<Mutex<()>>,
    /// Whether any shard's log is poisoned.
    failed: Arc<AtomicBool>,
    /// Every mutation counted in `appended` up to this value has been written to the OS.
    flushed: AtomicU64,
}

impl WalSink {
    /// A sink for a store of `shard_count` shards over the logs `config` lays out (their
    /// sequence numbers start at 1 until [`WalSink::set_next_seqs`]).
    ///
    /// # Errors
    /// [`WalError::Io`] when a log's directory cannot be created; [`WalError::Corrupt`] when
    /// shared logs are asked for more shards than a frame can name.
    pub fn open(config: &WalConfig, shard_count: usize) -> Result<Self, WalError> {
        if config.logs > 0 && shard_count > crate::frame::MAX_SHARED_LOG_SHARDS {
            return Err(WalError::Corrupt {
                path: config.dir.clone(),
                offset: 0,
                reason: format!(
                    "shared logs name at most {} shards; the store has {shard_count}",
                    crate::frame::MAX_SHARED_LOG_SHARDS
                ),
            });
        }
        let failed = Arc::new(AtomicBool::new(false));
        let count = config.log_count(shard_count);
        let logs = (0..count)
            .map(|index| {
                ShardLog::open(config, index, shard_count, 1).map(|mut log| {
                    log.failed = Arc::clone(&failed);
                    Mutex::new(log)
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            logs,
            covered: (0..shard_count).map(|_| AtomicU64::new(0)).collect(),
            failed,
            flushed: AtomicU64::new(0),
            replaying: AtomicBool::new(false),
            appended: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            log_appended: (0..count).map(|_| AtomicU64::new(0)).collect(),
            log_durable: (0..count).map(|_| AtomicU64::new(0)).collect(),
            committing: (0..count).map(|_| Mutex::new(())).collect(),
        })
    }

    /// While set, the store's mutations are not logged (recovery replaying the log or images
    /// into the store).
    pub fn set_replaying(&self, replaying: bool) {
        self.replaying.store(replaying, Ordering::Release);
    }

    /// Sets each log's next sequence number (after recovery: [`crate::RecoveryReport::next_seqs`]).
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
        for (log, committing) in self.logs.iter().zip(&self.committing) {
            // After any commit of this log in flight: its ticket took frames (and closed
            // segments) this sync must not report synced before that ticket has run.
            let _one = committing.lock();
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
        // Every log's commit lock, in order (a single-log commit takes one, so no deadlock).
        let _all: Vec<_> = self.committing.iter().map(|c| c.lock()).collect();
        if self.is_durable(position) {
            return self.health();
        }
        // Everything counted before these loads is in its log's buffer already.
        let target = self.appended();
        let targets: Vec<u64> = self
            .log_appended
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .collect();
        let mut tickets = Vec::new();
        let mut first = Ok(());
        for (index, log) in self.logs.iter().enumerate() {
            match log.lock().sync_ticket() {
                Ok(Some(ticket)) => tickets.push((index, ticket)),
                Ok(None) => {}
                Err(err) => first = first.and(Err(err)),
            }
        }
        let results: Vec<Result<u64, WalError>> = if tickets.len() <= 1 {
            tickets.iter().map(|(_, t)| t.run()).collect()
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = tickets
                    .iter()
                    .map(|(_, t)| scope.spawn(move || t.run()))
                    .collect();
                handles
                    .into_iter()
                    .zip(&tickets)
                    .map(|(h, (_, t))| {
                        // A sync that did not finish is not durable.
                        h.join().unwrap_or_else(|_| {
                            Err(WalError::Io {
                                path: t.path(),
                                message: "fdatasync thread panicked".into(),
                            })
                        })
                    })
                    .collect()
            })
        };
        for ((index, ticket), result) in tickets.iter().zip(results) {
            let mut log = self.logs[*index].lock();
            match result {
                Ok(micros) => log.sync_done(ticket, micros),
                Err(err) => {
                    log.sync_failed(err.clone());
                    first = first.and(Err(err));
                }
            }
        }
        first?;
        for (durable, target) in self.log_durable.iter().zip(targets) {
            durable.fetch_max(target, Ordering::AcqRel);
        }
        self.durable.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Frames appended to log `log` so far (a position for [`WalSink::log_durable`]).
    ///
    /// # Panics
    /// When `log` is out of range.
    #[must_use]
    pub fn log_appended(&self, log: usize) -> u64 {
        self.log_appended[log].load(Ordering::Acquire)
    }

    /// How many of log `log`'s frames are known durable.
    ///
    /// # Panics
    /// When `log` is out of range.
    #[must_use]
    pub fn log_durable(&self, log: usize) -> u64 {
        self.log_durable[log].load(Ordering::Acquire)
    }

    /// Group commit of one log (a thread-per-core server's worker commits its own): writes and
    /// `fdatasync`s everything appended to it so far, once for all its waiters.
    ///
    /// # Errors
    /// The log's failure (it is poisoned: nothing after it is acknowledged).
    ///
    /// # Panics
    /// When `log` is out of range.
    pub fn commit_log(&self, log: usize) -> Result<(), WalError> {
        let health = |wal: &Self| match wal.logs[log].lock().poisoned() {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        };
        if self.log_durable(log) >= self.log_appended(log) {
            return health(self);
        }
        let _one = self.committing[log].lock();
        // Everything counted before this load is in the log's buffer already.
        let target = self.log_appended(log);
        if self.log_durable(log) >= target {
            return health(self);
        }
        self.sync_unlocked(log)?;
        self.log_durable[log].fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Writes what log `log` holds and runs its `fdatasync` outside the log's lock (appends go
    /// on meanwhile); the caller holds `committing[log]`.
    fn sync_unlocked(&self, log: usize) -> Result<(), WalError> {
        let ticket = self.logs[log].lock().sync_ticket()?;
        if let Some(ticket) = ticket {
            let result = ticket.run();
            let mut state = self.logs[log].lock();
            match result {
                Ok(micros) => state.sync_done(&ticket, micros),
                Err(err) => {
                    state.sync_failed(err.clone());
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// Writes and `fdatasync`s everything the log shard `shard` writes to holds, whatever
    /// the counters say: a snapshot image is written only after the frames it covers are
    /// durable, and the image's covered sequence may count a frame whose append has not yet
    /// been added to [`WalSink::appended`] (the counter moves after the log's lock is
    /// released), which [`WalSink::commit_log`] would take as already durable.
    ///
    /// # Errors
    /// The log's failure (it is poisoned).
    ///
    /// # Panics
    /// When `shard` is out of range.
    pub fn sync_log_of(&self, shard: usize) -> Result<(), WalError> {
        let log = self.log_of(shard);
        // After any commit of this log in flight (as `sync_all`).
        let _one = self.committing[log].lock();
        self.sync_unlocked(log)
    }

    /// Runs `f` on the log shard `shard` writes to, under its lock (for snapshots: its next
    /// sequence number).
    ///
    /// # Panics
    /// When `shard` is out of range.
    pub fn with_log<R>(&self, shard: usize, f: impl FnOnce(&mut ShardLog) -> R) -> R {
        assert!(shard < self.covered.len(), "shard {shard} out of range");
        f(&mut self.logs[self.log_of(shard)].lock())
    }

    /// The log shard `shard` writes to.
    #[must_use]
    pub fn log_of(&self, shard: usize) -> usize {
        shard % self.logs.len()
    }

    /// Records that shard `shard`'s oldest kept snapshot image covers its log below `seq`,
    /// then deletes the segments of its log that every shard writing to that log has covered
    /// (never the segment being written). Returns how many.
    ///
    /// # Errors
    /// [`WalError::Io`] listing or removing a segment.
    pub fn trim(&self, shard: usize, seq: u64) -> Result<usize, WalError> {
        self.covered[shard].fetch_max(seq, Ordering::AcqRel);
        let log = self.log_of(shard);
        let below = (log..self.covered.len())
            .step_by(self.logs.len())
            .map(|s| self.covered[s].load(Ordering::Acquire))
            .min()
            .unwrap_or(0);
        if below <= 1 {
            return Ok(0);
        }
        self.logs[log].lock().delete_segments_before(below)
    }

    /// The number of shards logged.
    #[must_use]
    pub fn shard_count(&self) -> usize {
        self.covered.len()
    }

    /// The number of logs (the shard count, or fewer shared ones).
    #[must_use]
    pub fn log_count(&self) -> usize {
        self.logs.len()
    }

    /// Tells `tap` every run of frames each log writes from now on (the WAL TCP export).
    pub fn set_tap(&self, tap: &Arc<dyn WalTap>) {
        for log in &self.logs {
            log.lock().tap = Some(Arc::clone(tap));
        }
    }

    /// Each log's segment header as a segment started now would carry it (its next frame's
    /// sequence): what a live reader of the frames is told first.
    #[must_use]
    pub fn headers_now(&self) -> Vec<SegmentHeader> {
        self.logs
            .iter()
            .map(|log| {
                let log = log.lock();
                SegmentHeader {
                    shard: log.shard,
                    shard_count: log.shard_count,
                    first_seq: log.next_seq,
                    logs: log.logs,
                }
            })
            .collect()
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
        if shard < self.covered.len() {
            // The error is kept in the log (poisoned) and reported by `health`.
            let log = self.log_of(shard);
            let _ = self.logs[log].lock().append_of(shard, mutation);
            self.log_appended[log].fetch_add(1, Ordering::AcqRel);
            self.appended.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// Monotonic time for the `everysec` check on every append: the kernel's coarse clock (a read
/// of the vDSO's last tick, a few milliseconds fine) where there is one, since a precise clock
/// read per frame cost 2% of a pipelined `SET` in fc-server; `Instant` elsewhere.
fn coarse_now() -> Duration {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed()
    }
}
