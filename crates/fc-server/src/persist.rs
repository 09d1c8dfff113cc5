//! Persistence of the server: the write-ahead log every worker's shards append to (one log per
//! worker), the acknowledgement gate (nothing is replied before its frames are written to the
//! OS, and with `appendfsync always` before they are on disk: each worker commits its own log
//! once its ready connections have run, one `fdatasync` for all of them), snapshots taken by the workers themselves one shard at a time (`SAVE`, `BGSAVE`,
//! the `save` rules), the `everysec` syncer, and the `INFO persistence` fields.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fc_snapshot::{LoadReport, unix_ms};
use fc_wal::{FsyncPolicy, WalSink};

use crate::PersistenceConfig;
use tokio::sync::Notify;

/// A server's persistence state, shared by every worker.
pub(crate) struct Persist {
    pub(crate) wal: Arc<WalSink>,
    pub(crate) dir: PathBuf,
    pub(crate) fsync: FsyncPolicy,
    /// The `save` rules (`CONFIG SET save` changes them).
    pub(crate) save: Mutex<Vec<(u64, u64)>>,
    pub(crate) loaded: LoadReport,
    /// Unix seconds of the last successful snapshot (or of startup).
    pub(crate) last_save: AtomicU64,
    pub(crate) last_save_ok: AtomicBool,
    pub(crate) last_save_secs: AtomicU64,
    /// Snapshots completed since the start (`rdb_saves`).
    pub(crate) saves: AtomicU64,
    pub(crate) saving: AtomicBool,
    /// `wal.appended()` when the last snapshot began.
    pub(crate) appended_at_save: AtomicU64,
    /// Per log: wakes its committer (a connection waits for its frames).
    wanted: Vec<Notify>,
    /// Per log: woken after each commit of it (`always`).
    committed: Vec<Notify>,
    /// Commits a waiter had to run itself because none came within [`COMMIT_FALLBACK`]
    /// (every write path schedules its worker's commit, so this stays 0).
    pub(crate) fallback_commits: AtomicU64,
    /// The WAL TCP export, when configured.
    pub(crate) export: Option<crate::export::Export>,
}

/// How long a connection waits for its frames' commit before running one itself.
const COMMIT_FALLBACK: Duration = Duration::from_millis(50);

impl Persist {
    pub(crate) fn new(
        wal: Arc<WalSink>,
        config: &PersistenceConfig,
        dir: PathBuf,
        loaded: LoadReport,
        export: Option<crate::export::Export>,
    ) -> Self {
        Self {
            dir,
            fsync: config.appendfsync,
            save: Mutex::new(config.save.clone()),
            loaded,
            last_save: AtomicU64::new(unix_ms() / 1000),
            last_save_ok: AtomicBool::new(true),
            last_save_secs: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            saving: AtomicBool::new(false),
            appended_at_save: AtomicU64::new(0),
            wanted: (0..wal.log_count()).map(|_| Notify::new()).collect(),
            committed: (0..wal.log_count()).map(|_| Notify::new()).collect(),
            fallback_commits: AtomicU64::new(0),
            export,
            wal,
        }
    }

    /// The `save` rules now.
    pub(crate) fn save_rules(&self) -> Vec<(u64, u64)> {
        self.save
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn has_save_rules(&self) -> bool {
        !self.save_rules().is_empty()
    }

    pub(crate) fn set_save_rules(&self, rules: Vec<(u64, u64)>) {
        *self
            .save
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rules;
    }

    /// Makes what was just executed safe to acknowledge: written to the OS always, and on disk
    /// under `always` (every log's frames so far durable: the owning workers' commits, see
    /// [`committer`]). `false`: the log failed and the replies include a write's (`wrote`),
    /// so they must not be sent; read-only replies still go (writes are refused with
    /// `MISCONF` from then on, reads are served, as Redis does).
    pub(crate) async fn acknowledge(self: &Arc<Self>, wrote: bool) -> bool {
        match self.fsync {
            FsyncPolicy::Always => {
                for log in 0..self.committed.len() {
                    let position = self.wal.log_appended(log);
                    if self.wal.log_durable(log) < position {
                        self.durable(log, position).await;
                    }
                }
                !(wrote && self.wal.has_failed())
            }
            _ => {
                // Let this worker's other ready connections run their batches first, so one
                // write per dirty shard covers all of them (as Redis's beforeSleep writes the
                // AOF once per event-loop turn); whoever comes later finds its frames flushed.
                if !self.wal.is_flushed(self.wal.appended()) {
                    tokio::task::yield_now().await;
                }
                self.wal.flush_appended().is_ok() || !wrote
            }
        }
    }

    /// Waits until log `log` is durable up to `position` (or the log failed).
    async fn durable(self: &Arc<Self>, log: usize, position: u64) {
        loop {
            let committed = self.committed[log].notified();
            tokio::pin!(committed);
            committed.as_mut().enable();
            if self.wal.log_durable(log) >= position || self.wal.has_failed() {
                return;
            }
            self.wanted[log].notify_one();
            if tokio::time::timeout(COMMIT_FALLBACK, committed)
                .await
                .is_err()
            {
                // No commit came: run one (never expected; counted in INFO).
                self.fallback_commits.fetch_add(1, Ordering::Relaxed);
                let persist = Arc::clone(self);
                let _ = tokio::task::spawn_blocking(move || persist.commit(log)).await;
            }
        }
    }

    /// Commits log `log` and wakes its waiters. A failure poisons the log: writes are
    /// refused from then on.
    fn commit(&self, log: usize) {
        if let Err(err) = self.wal.commit_log(log) {
            tracing::error!("WAL commit failed, refusing writes: {err}");
        }
        self.committed[log].notify_waiters();
    }

    /// Whether writes are refused (the log has failed; see [`Persist::misconf`]).
    pub(crate) fn refuses_writes(&self) -> bool {
        self.wal.has_failed()
    }

    /// Redis's refusal of writes once the log has failed.
    pub(crate) fn misconf(&self) -> Option<String> {
        if !self.wal.has_failed() {
            return None;
        }
        let cause = self
            .wal
            .health()
            .err()
            .map_or_else(String::new, |e| e.to_string());
        Some(format!("MISCONF Errors writing to the AOF file: {cause}"))
    }

    /// Writes made since the last snapshot began.
    pub(crate) fn changes_since_save(&self) -> u64 {
        self.wal
            .appended()
            .saturating_sub(self.appended_at_save.load(Ordering::Relaxed))
    }

    /// The `# Persistence` section of `INFO`: Redis's fields (the write-ahead log reported as
    /// its append-only file, snapshots as its RDB saves), then the log's own.
    pub(crate) fn info(&self, text: &mut String) {
        let stats = self.wal.stats();
        let status = |ok: bool| if ok { "ok" } else { "err" };
        let saving = self.saving.load(Ordering::Relaxed);
        let _ = write!(
            text,
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\nrdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:-1\r\nrdb_saves:{}\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:0\r\nrdb_last_load_keys_loaded:{}\r\naof_enabled:1\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_rewrites_consecutive_failures:0\r\naof_last_write_status:{}\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\nappendfsync:{}\r\nwal_frames:{}\r\nwal_mutations:{}\r\nwal_bytes:{}\r\nwal_fsyncs:{}\r\nwal_fsync_micros:{}\r\nwal_fsync_max_micros:{}\r\nwal_commit_fallbacks:{}\r\nwal_segments_opened:{}\r\nloaded_keys_from_snapshot:{}\r\nloaded_wal_frames:{}\r\nloaded_wal_mutations:{}\r\nloaded_wal_torn_transactions:{}\r\nload_time_ms:{}\r\n",
            self.changes_since_save(),
            u8::from(saving),
            self.last_save.load(Ordering::Relaxed),
            status(self.last_save_ok.load(Ordering::Relaxed)),
            self.last_save_secs.load(Ordering::Relaxed),
            self.saves.load(Ordering::Relaxed),
            self.loaded.image_keys,
            u8::from(saving),
            status(!self.wal.has_failed()),
            self.fsync.name(),
            stats.frames,
            stats.mutations,
            stats.bytes,
            stats.fsyncs,
            stats.fsync_micros,
            stats.fsync_max_micros,
            self.fallback_commits.load(Ordering::Relaxed),
            stats.segments,
            self.loaded.image_keys,
            self.loaded.wal.frames(),
            self.loaded.wal.mutations(),
            self.loaded.wal.torn_transactions,
            self.loaded.elapsed.as_millis(),
        );
        if let Some(export) = &self.export {
            let s = &export.stats;
            let _ = write!(
                text,
                "wal_export_mode:{}\r\nwal_export_addr:{}\r\nwal_export_subscribers:{}\r\nwal_export_frames_sent:{}\r\nwal_export_bytes_sent:{}\r\nwal_export_frames_dropped:{}\r\nwal_export_bytes_dropped:{}\r\nwal_export_refused:{}\r\n",
                if export.listen { "listen" } else { "connect" },
                export.addr,
                s.subscribers.load(Ordering::Relaxed),
                s.frames_sent.load(Ordering::Relaxed),
                s.bytes_sent.load(Ordering::Relaxed),
                s.frames_dropped.load(Ordering::Relaxed),
                s.bytes_dropped.load(Ordering::Relaxed),
                s.refused.load(Ordering::Relaxed),
            );
        }
    }
}

/// `INFO persistence` of a server without a data directory: Redis's fields with nothing
/// saved or logged (the last save time is the start, as `LASTSAVE` answers).
pub(crate) fn in_memory_info(started_unix: u64) -> String {
    IN_MEMORY_INFO.replace(
        "rdb_last_save_time:0",
        &format!("rdb_last_save_time:{started_unix}"),
    )
}

const IN_MEMORY_INFO: &str = "# Persistence\r\nloading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_cow_size_age:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:0\r\nrdb_last_bgsave_status:ok\r\nrdb_last_bgsave_time_sec:-1\r\nrdb_current_bgsave_time_sec:-1\r\nrdb_saves:0\r\nrdb_last_cow_size:0\r\nrdb_last_load_keys_expired:0\r\nrdb_last_load_keys_loaded:0\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_rewrite_time_sec:-1\r\naof_current_rewrite_time_sec:-1\r\naof_last_bgrewrite_status:ok\r\naof_rewrites:0\r\naof_rewrites_consecutive_failures:0\r\naof_last_write_status:ok\r\naof_last_cow_size:0\r\nmodule_fork_in_progress:0\r\nmodule_fork_last_cow_size:0\r\n";

/// The group commit of log `log` (`appendfsync always`), a task on the worker owning its
/// shards. Woken by a connection waiting for frames of it, it first lets every ready
/// connection and job of the worker run (Redis's beforeSleep), then one `fdatasync` covers
/// all of them. The sync runs off the worker thread, which meanwhile executes the next
/// commands; whoever waits for those wakes it again, and their commit follows at once.
///
/// Tried and measured (64B SET, 50 connections at pipeline 1, one worker): starting the next
/// sync as soon as one returns, without the yield (or looping on the blocking thread), keeps
/// the disk busier but cuts the frames per sync from 29 to 19-24, each sync gets slower, and
/// throughput drops about 20%: on this disk the rate of syncs, not their idle gaps, is the
/// limit, so the batch size is what to grow.
pub(crate) async fn committer(persist: Arc<Persist>, log: usize) {
    loop {
        persist.wanted[log].notified().await;
        tokio::task::yield_now().await;
        let persist = Arc::clone(&persist);
        let _ = tokio::task::spawn_blocking(move || persist.commit(log)).await;
    }
}

/// How often the `everysec` syncer runs: four times a second, so each `fdatasync` (whose
/// page submission runs on this thread, beside the workers) writes a quarter of a second's
/// frames, not a burst of a whole second's.
const EVERYSEC_SYNC: Duration = Duration::from_millis(250);

/// The `everysec` syncer thread (`fc-fsync`): commits the log every [`EVERYSEC_SYNC`] (the
/// workers never sync themselves: `WalConfig::background_sync`). A thread of its own, so a
/// snapshot running on `fc-persist` never holds the syncs back. Stops when `stop` is set.
pub(crate) fn syncer(persist: Arc<Persist>, stop: Arc<AtomicBool>) {
    let mut last_sync = Instant::now();
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
        if last_sync.elapsed() >= EVERYSEC_SYNC {
            last_sync = Instant::now();
            if let Err(err) = persist.wal.commit() {
                tracing::error!("WAL sync failed, refusing writes: {err}");
            }
        }
    }
}
