//! Fault injection in the log's file layer: a hook consulted before every write, `fdatasync`
//! and segment creation, so tests can make the disk fill up (ENOSPC), fail (EIO) or write
//! short at a chosen moment and check what the log, the store and the server do about it.
//! Without a hook (the default) each operation pays one branch.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A file operation of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileOp {
    /// `write(2)` of gathered frames to a segment.
    Write,
    /// `fdatasync(2)` of a segment.
    Sync,
    /// Creating a segment (its header written and synced, the directory synced).
    Create,
}

/// What an injected fault does.
#[derive(Debug)]
pub struct Fault {
    /// Bytes of a [`FileOp::Write`] that still reach the file before the error (a short
    /// write); ignored for other operations.
    pub written: usize,
    /// The error the operation returns.
    pub error: io::Error,
}

impl Fault {
    /// The operation fails with the OS error `errno` (e.g. `libc`'s ENOSPC = 28, EIO = 5)
    /// and writes nothing.
    #[must_use]
    pub fn os(errno: i32) -> Self {
        Self {
            written: 0,
            error: io::Error::from_raw_os_error(errno),
        }
    }

    /// A write that stores its first `written` bytes, then fails with `errno`.
    #[must_use]
    pub fn short(written: usize, errno: i32) -> Self {
        Self {
            written,
            error: io::Error::from_raw_os_error(errno),
        }
    }
}

type Hook = dyn Fn(FileOp, &Path) -> Option<Fault> + Send + Sync;

/// The hook of [`crate::WalConfig::faults`]: `None` from it lets the operation run.
#[derive(Clone, Default)]
pub struct Faults(Option<Arc<Hook>>);

impl Faults {
    /// No faults (the default).
    #[must_use]
    pub fn none() -> Self {
        Self(None)
    }

    /// Consults `hook` before every file operation.
    pub fn new(hook: impl Fn(FileOp, &Path) -> Option<Fault> + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(hook)))
    }

    /// The fault to inject into `op` on `path`, if any.
    pub(crate) fn check(&self, op: FileOp, path: &Path) -> Option<Fault> {
        self.0.as_ref().and_then(|hook| hook(op, path))
    }
}

impl fmt::Debug for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Faults(hook)"
        } else {
            "Faults(none)"
        })
    }
}

impl PartialEq for Faults {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Faults {}
