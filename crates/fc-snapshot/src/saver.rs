//! Snapshots in the background by rules, as the server's `save` takes them
//! ([`PersistentStore::save_in_background`]).

use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::PersistentStore;

/// A snapshot rule, as Redis's `save <seconds> <changes>`: snapshot once at least `changes`
/// writes were logged and at least `seconds` passed since the last snapshot (or since the
/// saver started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveRule {
    /// Seconds since the last snapshot.
    pub seconds: u64,
    /// Writes (logged mutations) since the last snapshot.
    pub changes: u64,
}

impl SaveRule {
    /// Redis's default rules: `3600 1 300 100 60 10000`.
    #[must_use]
    pub fn redis_defaults() -> Vec<Self> {
        [(3600, 1), (300, 100), (60, 10_000)]
            .into_iter()
            .map(|(seconds, changes)| Self { seconds, changes })
            .collect()
    }

    fn met(self, elapsed: Duration, changes: u64) -> bool {
        changes >= self.changes.max(1) && elapsed.as_secs() >= self.seconds
    }
}

/// How often the rules are checked (Redis checks at every `serverCron`, 10 times a second).
const CHECK_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct State {
    stop: bool,
    saves: u64,
    last_error: Option<String>,
}

/// The background saver of a [`PersistentStore`]: dropping it (or [`BackgroundSaves::stop`])
/// stops the thread after the snapshot it may be taking.
#[derive(Debug)]
pub struct BackgroundSaves {
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl BackgroundSaves {
    /// Snapshots taken so far.
    #[must_use]
    pub fn saves(&self) -> u64 {
        self.lock().saves
    }

    /// The last failed snapshot's error (`None` after a success).
    #[must_use]
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn halt(&mut self) {
        self.lock().stop = true;
        self.shared.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for BackgroundSaves {
    fn drop(&mut self) {
        self.halt();
    }
}

impl PersistentStore {
    /// Takes snapshots in the background by `rules` (as the server's `save`; see
    /// [`SaveRule`]): a thread checks them ten times a second and snapshots when one is met,
    /// one shard at a time as [`PersistentStore::snapshot`] does (readers never wait; each
    /// shard's writers wait for its export). A failed snapshot is kept in
    /// [`BackgroundSaves::last_error`] and tried again at the next check (a rule is still met).
    /// The thread holds the store weakly: it also ends when the last `Arc` is dropped.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use fc_snapshot::{PersistentStore, SaveRule};
    /// use fc_wal::{RecoveryMode, WalConfig};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Arc::new(PersistentStore::open(&WalConfig::new(dir.path()), 4, RecoveryMode::default(), |b| b)?);
    /// let saves = store.save_in_background(vec![SaveRule { seconds: 0, changes: 1 }]);
    /// store.set(b"k", b"v", None);
    /// while saves.saves() == 0 {
    ///     std::thread::sleep(std::time::Duration::from_millis(20));
    /// }
    /// saves.stop();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "dropping the handle stops the saver"]
    pub fn save_in_background(self: &Arc<Self>, rules: Vec<SaveRule>) -> BackgroundSaves {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let store: Weak<Self> = Arc::downgrade(self);
        let state = Arc::clone(&shared);
        // Counted from now, before the caller's next write (the thread may start after it).
        let mut since = Instant::now();
        let mut base = self.wal().stats().mutations;
        let thread = std::thread::Builder::new()
            .name("fc-snapshot-saver".into())
            .spawn(move || {
                loop {
                    {
                        let (lock, cvar) = &*state;
                        let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
                        let (guard, _) = cvar
                            .wait_timeout_while(guard, CHECK_EVERY, |s| !s.stop)
                            .unwrap_or_else(PoisonError::into_inner);
                        if guard.stop {
                            return;
                        }
                    }
                    let Some(store) = store.upgrade() else {
                        return;
                    };
                    let logged = store.wal().stats().mutations;
                    let changes = logged.saturating_sub(base);
                    if !rules.iter().any(|r| r.met(since.elapsed(), changes)) {
                        continue;
                    }
                    let result = store.snapshot();
                    let mut s = state.0.lock().unwrap_or_else(PoisonError::into_inner);
                    match result {
                        Ok(_) => {
                            s.saves += 1;
                            s.last_error = None;
                            since = Instant::now();
                            base = logged;
                        }
                        Err(err) => s.last_error = Some(err.to_string()),
                    }
                }
            })
            .expect("spawning the snapshot saver thread");
        BackgroundSaves {
            shared,
            thread: Some(thread),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fc_wal::{RecoveryMode, WalConfig};

    fn open(dir: &std::path::Path) -> Arc<PersistentStore> {
        Arc::new(
            PersistentStore::open(&WalConfig::new(dir), 4, RecoveryMode::default(), |b| b).unwrap(),
        )
    }

    fn wait_for(what: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_met_rule_snapshots_and_the_data_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let saves = store.save_in_background(vec![SaveRule {
            seconds: 0,
            changes: 3,
        }]);
        store.set(b"a", b"1", None);
        store.set(b"b", b"2", None);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(saves.saves(), 0, "two changes do not meet a rule of three");
        store.set(b"c", b"3", None);
        assert!(wait_for(|| saves.saves() == 1), "the third change does");
        assert!(store.last_snapshot_ms() > 0);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(saves.saves(), 1, "no change since: no snapshot");
        saves.stop();
        drop(store);
        let store = open(dir.path());
        assert_eq!(store.recovery().image_keys, 3, "loaded from the images");
        assert_eq!(store.get(b"c"), Some(b"3".to_vec()));
    }

    #[test]
    fn seconds_hold_a_snapshot_back_and_dropping_the_store_ends_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let saves = store.save_in_background(vec![SaveRule {
            seconds: 3600,
            changes: 1,
        }]);
        store.set(b"a", b"1", None);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(saves.saves(), 0, "an hour has not passed");
        drop(store);
        // The thread sees the store gone at its next check; stopping joins it.
        saves.stop();
        assert_eq!(SaveRule::redis_defaults().len(), 3);
    }
}
