//! Time source for expiry. Stores read the clock only when an entry has (or gets) an expiry.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a store reads "now" from, in Unix milliseconds.
///
/// Expiry instants are absolute Unix milliseconds (as Redis's `PEXPIREAT`), so they survive a
/// restart and mean the same on a replica.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Clock {
    /// The system wall clock.
    #[default]
    System,
    /// A clock that moves only when told to: tests and simulations.
    Manual(ManualClock),
}

impl Clock {
    /// Current time in Unix milliseconds.
    #[inline]
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        match self {
            Self::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            Self::Manual(manual) => manual.now_ms(),
        }
    }
}

/// A shared, manually advanced clock. Clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_ms: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `now_ms`.
    #[must_use]
    pub fn new(now_ms: u64) -> Self {
        Self {
            now_ms: Arc::new(AtomicU64::new(now_ms)),
        }
    }

    /// Current time in Unix milliseconds.
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Acquire)
    }

    /// Moves the clock forward by `ms`.
    pub fn advance_ms(&self, ms: u64) {
        self.now_ms.fetch_add(ms, Ordering::AcqRel);
    }

    /// Sets the clock to `now_ms`.
    pub fn set_ms(&self, now_ms: u64) {
        self.now_ms.store(now_ms, Ordering::Release);
    }
}

impl From<ManualClock> for Clock {
    fn from(clock: ManualClock) -> Self {
        Self::Manual(clock)
    }
}
