//! Removal listeners: a callback told about every entry that leaves a store, and why.
//!
//! A shard never calls user code while it holds its lock. With a listener set, a shard copies
//! each removed entry (key, value, cause) into a short queue; an [`crate::EmbeddedStore`]
//! delivers the queue after it releases the shard's lock, a [`crate::LocalEmbeddedStore`]
//! (which has no lock) as the entry goes. A listener that panics is caught: the panic is counted
//! (`listener_panics` in the stats) and the store carries on. A store without a listener copies
//! nothing and pays one branch per removal.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why an entry left the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemovalCause {
    /// Its time to live ran out (found on access, by maintenance, or before an eviction).
    Expired,
    /// The memory budget needed its room.
    Evicted,
    /// A write stored a new value under its key (the listener sees the old value).
    Replaced,
    /// A caller deleted it.
    Deleted,
}

/// Receives the entries that leave a store. Called outside every shard lock, so it may use the
/// store; it should still be quick, because the caller whose operation removed the entry runs
/// it before that operation returns.
pub trait RemovalListener: Send + Sync {
    /// `key` held `value` and left the store because of `cause`.
    fn on_removal(&self, key: &[u8], value: &[u8], cause: RemovalCause);
}

impl<F> RemovalListener for F
where
    F: Fn(&[u8], &[u8], RemovalCause) + Send + Sync,
{
    fn on_removal(&self, key: &[u8], value: &[u8], cause: RemovalCause) {
        self(key, value, cause);
    }
}

/// One removed entry, copied out of the shard.
#[derive(Debug)]
pub(crate) struct Removal {
    pub(crate) key: Box<[u8]>,
    pub(crate) value: Box<[u8]>,
    pub(crate) cause: RemovalCause,
}

/// A listener shared by every shard of a store, with its panic count.
pub(crate) struct Listener {
    callback: Arc<dyn RemovalListener>,
    panics: AtomicU64,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("panics", &self.panics.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Listener {
    pub(crate) fn new(callback: Arc<dyn RemovalListener>) -> Self {
        Self {
            callback,
            panics: AtomicU64::new(0),
        }
    }

    /// Runs the callback for one removal; a panic is caught and counted.
    pub(crate) fn deliver(&self, key: &[u8], value: &[u8], cause: RemovalCause) {
        let call = AssertUnwindSafe(|| self.callback.on_removal(key, value, cause));
        if catch_unwind(call).is_err() {
            self.panics.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Delivers queued removals in order.
    pub(crate) fn deliver_all(&self, removals: Vec<Removal>) {
        for removal in removals {
            self.deliver(&removal.key, &removal.value, removal.cause);
        }
    }

    pub(crate) fn panics(&self) -> u64 {
        self.panics.load(Ordering::Relaxed)
    }
}
