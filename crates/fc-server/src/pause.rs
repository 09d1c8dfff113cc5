//! `CLIENT PAUSE timeout [WRITE|ALL]` and `CLIENT UNPAUSE`: the server-wide pause state.
//!
//! A paused command waits, before it runs (or is queued by `MULTI`), on a watch channel every
//! worker shares: it wakes when the pause changes (`CLIENT UNPAUSE`, a new `CLIENT PAUSE`) or
//! at the pause's end, whichever comes first — no polling. `ALL` pauses every command, the
//! pausing client's own (`CLIENT UNPAUSE` included) as in Redis; `WRITE` pauses the commands
//! that may change data or propagate (`write` and `may_replicate` flags: `PUBLISH`, `EVAL`...,
//! and an `EXEC` whose queue holds one). Active expiry stops while any pause lasts, as in
//! Redis.
//!
//! The connections' in-place path reads [`Pause::maybe`] (one relaxed load) once per batch of
//! pipelined commands: a batch already running when a pause begins finishes in place.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::watch;

/// The pause in effect.
#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// When it ends (`None`: no pause).
    until: Option<Instant>,
    /// `ALL` (else `WRITE`).
    all: bool,
}

/// The server's pause.
pub(crate) struct Pause {
    state: watch::Sender<State>,
    /// Set while a pause may be in effect.
    on: AtomicBool,
    /// Clients waiting (counted in `blocked_clients`, as Redis counts them).
    waiting: AtomicUsize,
}

impl Pause {
    pub(crate) fn new() -> Self {
        Self {
            state: watch::Sender::new(State::default()),
            on: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Whether a pause may be in effect (the in-place path's test).
    #[inline]
    pub(crate) fn maybe(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Pauses until `until` (a later end of a pause in effect is kept; the mode is the new
    /// one, as in Redis).
    pub(crate) fn pause(&self, until: Instant, all: bool) {
        self.state.send_modify(|state| {
            state.until = Some(state.until.map_or(until, |u| u.max(until)));
            state.all = all;
            self.on.store(true, Ordering::Relaxed);
        });
    }

    /// Ends the pause.
    pub(crate) fn unpause(&self) {
        self.state.send_modify(|state| {
            *state = State::default();
            self.on.store(false, Ordering::Relaxed);
        });
    }

    /// Whether `state` holds a command (`write`: it may change data), and until when; a
    /// pause found over is cleared.
    fn holds_in(&self, state: State, write: bool) -> Option<Instant> {
        let until = state.until?;
        if Instant::now() >= until {
            // Over: the in-place path may run again (unless a new pause began meanwhile).
            self.state.send_if_modified(|s| {
                if s.until.is_some_and(|u| Instant::now() >= u) {
                    *s = State::default();
                    self.on.store(false, Ordering::Relaxed);
                }
                false
            });
            return None;
        }
        (state.all || write).then_some(until)
    }

    /// Whether any pause is in effect (active expiry waits it out).
    pub(crate) fn active(&self) -> bool {
        self.blocks(true)
    }

    /// Whether a command must wait now.
    pub(crate) fn blocks(&self, write: bool) -> bool {
        if !self.maybe() {
            return false;
        }
        // Copied out first: the read guard must be gone before `holds_in` clears an ended
        // pause under the write lock (as one expression, the guard lived on and the worker
        // deadlocked on its own lock).
        let state = *self.state.borrow();
        self.holds_in(state, write).is_some()
    }

    /// Waits while a pause holds a command (`write`: it may change data).
    pub(crate) async fn wait(&self, write: bool) {
        /// Uncounts the wait however it ends (a killed client's is dropped midway).
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let mut changes = self.state.subscribe();
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let _counted = Counted(&self.waiting);
        loop {
            let state = *changes.borrow_and_update();
            let Some(until) = self.holds_in(state, write) else {
                return;
            };
            tokio::select! {
                _ = changes.changed() => {}
                () = tokio::time::sleep_until(until.into()) => {}
            }
        }
    }

    /// Clients waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_pause_that_ended_unwatched_is_cleared_by_the_next_check() {
        let pause = Pause::new();
        pause.pause(Instant::now() + Duration::from_millis(20), false);
        assert!(pause.blocks(true), "a write is held while the pause lasts");
        assert!(!pause.blocks(false), "a WRITE pause lets reads run");
        std::thread::sleep(Duration::from_millis(40));
        // No client waited: the first check after the end clears the pause (this check
        // deadlocked on the watch channel's lock before).
        assert!(!pause.blocks(true));
        assert!(!pause.maybe(), "the in-place path runs again");
        assert!(!pause.active());
    }
}
