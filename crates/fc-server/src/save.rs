//! Snapshots of the whole server: `SAVE`, `BGSAVE`, `SHUTDOWN SAVE` and the `save` rules'
//! background thread. Each worker exports its own shards ([`Job::Snapshot`]); this gathers
//! their reports and records the outcome in [`crate::persist::Persist`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fc_snapshot::{SnapshotReport, unix_ms};
use tokio::sync::oneshot;

use crate::shared::{Job, Shared};

/// Snapshots every worker's shards (each worker exports its own, one shard at a time, between
/// its other work) and records the outcome. `Err` when one is already running or a write
/// failed.
pub(crate) async fn snapshot(shared: &Shared) -> Result<SnapshotReport, String> {
    let Some(persist) = &shared.persist else {
        return Err("ERR persistence is not configured (start fc-server with --data-dir)".into());
    };
    if persist.saving.swap(true, Ordering::AcqRel) {
        return Err("ERR Background save already in progress".into());
    }
    let started = Instant::now();
    persist
        .appended_at_save
        .store(persist.wal.appended(), Ordering::Relaxed);
    let mut answers = Vec::new();
    for inbox in &shared.inboxes {
        let (reply, answer) = oneshot::channel();
        if inbox.send(Job::Snapshot { reply }).is_err() {
            persist.saving.store(false, Ordering::Release);
            return Err("ERR server is shutting down".into());
        }
        answers.push(answer);
    }
    let mut total = SnapshotReport::default();
    let mut failure = None;
    for answer in answers {
        match answer.await {
            Ok(Ok(report)) => {
                total.keys += report.keys;
                total.bytes += report.bytes;
                total.max_pause_micros = total.max_pause_micros.max(report.max_pause_micros);
            }
            Ok(Err(err)) => failure = Some(err.to_string()),
            Err(_) => failure = Some("a worker stopped".into()),
        }
    }
    persist
        .last_save_secs
        .store(started.elapsed().as_secs(), Ordering::Relaxed);
    persist
        .last_save_ok
        .store(failure.is_none(), Ordering::Relaxed);
    if failure.is_none() {
        persist.last_save.store(unix_ms() / 1000, Ordering::Relaxed);
        persist.saves.fetch_add(1, Ordering::Relaxed);
    }
    persist.saving.store(false, Ordering::Release);
    match failure {
        None => Ok(total),
        Some(err) => Err(format!("ERR snapshot failed: {err}")),
    }
}

/// The background thread (`fc-persist`): starts snapshots when a `save` rule is met. Stops when
/// `stop` is set.
pub(crate) fn background(shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let Some(persist) = shared.persist.clone() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("the persistence thread's runtime");
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
        let since = (unix_ms() / 1000).saturating_sub(persist.last_save.load(Ordering::Relaxed));
        let changes = persist.changes_since_save();
        let due = persist
            .save_rules()
            .iter()
            .any(|&(seconds, min)| since >= seconds && changes >= min.max(1));
        if due && !persist.saving.load(Ordering::Acquire) {
            match runtime.block_on(snapshot(&shared)) {
                Ok(report) => tracing::info!(
                    "snapshot: {} keys, {} bytes, longest shard pause {} us",
                    report.keys,
                    report.bytes,
                    report.max_pause_micros
                ),
                Err(err) => tracing::error!("snapshot failed: {err}"),
            }
        }
    }
}
