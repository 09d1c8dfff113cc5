//! The staging pool: host buffers reused across transfers (page-locked ones with the `cuda`
//! feature, so copies run at the bus's speed without the driver's own bounce buffer), bounded
//! in bytes, with statistics; and gathering a session's values straight from the store into a
//! staging buffer with one copy.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use fc_shard::{EmbeddedStore, LocalEmbeddedStore, StoreError};

/// Why a staging buffer could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StagingError {
    /// Handing out `wanted` more bytes would pass the pool's limit.
    #[error("staging pool exhausted: {wanted} bytes wanted, {in_use} of {limit} in use")]
    Exhausted {
        /// Bytes asked for.
        wanted: usize,
        /// Bytes handed out and not returned.
        in_use: usize,
        /// The pool's limit.
        limit: usize,
    },
    /// The memory could not be allocated (the driver refused page-locked memory).
    #[error("host memory allocation of {bytes} bytes failed: {reason}")]
    Allocation {
        /// Bytes asked for.
        bytes: usize,
        /// The allocator's words.
        reason: String,
    },
}

/// Where staging buffers come from.
pub trait HostMemory {
    /// One buffer.
    type Buffer: AsRef<[u8]> + AsMut<[u8]>;

    /// A buffer of exactly `bytes` bytes.
    ///
    /// # Errors
    /// [`StagingError::Allocation`].
    fn allocate(&self, bytes: usize) -> Result<Self::Buffer, StagingError>;

    /// What kind of memory it is (`pageable`, `pinned`), for statistics and reports.
    fn kind(&self) -> &'static str;
}

/// Ordinary (pageable) heap memory: what the pool uses without the `cuda` feature, and what a
/// copy from a `Vec` pays for (the driver stages pageable memory through a pinned buffer of its
/// own, so the copy runs at a fraction of the bus's speed).
#[derive(Debug, Clone, Copy, Default)]
pub struct Pageable;

impl HostMemory for Pageable {
    type Buffer = Box<[u8]>;

    fn allocate(&self, bytes: usize) -> Result<Self::Buffer, StagingError> {
        let mut buffer = Vec::new();
        buffer
            .try_reserve_exact(bytes)
            .map_err(|e| StagingError::Allocation {
                bytes,
                reason: e.to_string(),
            })?;
        buffer.resize(bytes, 0);
        Ok(buffer.into_boxed_slice())
    }

    fn kind(&self) -> &'static str {
        "pageable"
    }
}

/// A pool's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes of every buffer the pool holds (free or handed out).
    pub allocated_bytes: usize,
    /// Bytes handed out now.
    pub in_use_bytes: usize,
    /// Buffers the pool holds.
    pub buffers: usize,
    /// Buffers allocated since the pool was made.
    pub allocations: u64,
    /// Requests served by a buffer already allocated.
    pub reuses: u64,
    /// Requests refused at the limit.
    pub exhausted: u64,
}

#[derive(Debug)]
struct Free<B> {
    buffers: Vec<B>,
    allocated: usize,
    in_use: usize,
    count: usize,
}

/// Staging buffers reused across transfers, at most `limit` bytes in all.
///
/// A request takes the smallest free buffer that fits (best fit), else allocates one if the
/// limit allows; a buffer goes back to the pool when its [`Staged`] guard drops. Sizes are
/// rounded up to 64 KiB so buffers of nearby sizes are shared.
#[derive(Debug)]
pub struct StagingPool<M: HostMemory> {
    memory: M,
    limit: usize,
    free: Mutex<Free<M::Buffer>>,
    allocations: AtomicU64,
    reuses: AtomicU64,
    exhausted: AtomicU64,
}

/// The granularity buffers are allocated in.
pub const STAGING_GRANULE: usize = 64 << 10;

impl<M: HostMemory> StagingPool<M> {
    /// A pool of `memory` holding at most `limit` bytes.
    pub fn new(memory: M, limit: usize) -> Self {
        Self {
            memory,
            limit,
            free: Mutex::new(Free {
                buffers: Vec::new(),
                allocated: 0,
                in_use: 0,
                count: 0,
            }),
            allocations: AtomicU64::new(0),
            reuses: AtomicU64::new(0),
            exhausted: AtomicU64::new(0),
        }
    }

    /// The memory it allocates from.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// A buffer of at least `bytes` bytes, until the guard drops.
    ///
    /// # Errors
    /// [`StagingError::Exhausted`] when no free buffer fits and a new one would pass the
    /// limit (free buffers too small are released first to make room);
    /// [`StagingError::Allocation`] when the memory cannot be had.
    pub fn acquire(&self, bytes: usize) -> Result<Staged<'_, M>, StagingError> {
        let size = bytes.div_ceil(STAGING_GRANULE).max(1) * STAGING_GRANULE;
        let mut free = self.free.lock().expect("staging pool lock");
        let best = free
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.as_ref().len() >= bytes)
            .min_by_key(|(_, b)| b.as_ref().len())
            .map(|(i, _)| i);
        if let Some(i) = best {
            let buffer = free.buffers.swap_remove(i);
            free.in_use += buffer.as_ref().len();
            self.reuses.fetch_add(1, Ordering::Relaxed);
            return Ok(Staged {
                pool: self,
                buffer: Some(buffer),
                len: bytes,
            });
        }
        // Room for a new one: drop free buffers (too small for this request) while needed.
        while free.allocated + size > self.limit {
            let Some(small) = free.buffers.pop() else {
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                return Err(StagingError::Exhausted {
                    wanted: size,
                    in_use: free.in_use,
                    limit: self.limit,
                });
            };
            free.allocated -= small.as_ref().len();
            free.count -= 1;
        }
        let buffer = self.memory.allocate(size)?;
        free.allocated += size;
        free.in_use += size;
        free.count += 1;
        self.allocations.fetch_add(1, Ordering::Relaxed);
        Ok(Staged {
            pool: self,
            buffer: Some(buffer),
            len: bytes,
        })
    }

    /// Its counters now.
    pub fn stats(&self) -> PoolStats {
        let free = self.free.lock().expect("staging pool lock");
        PoolStats {
            allocated_bytes: free.allocated,
            in_use_bytes: free.in_use,
            buffers: free.count,
            allocations: self.allocations.load(Ordering::Relaxed),
            reuses: self.reuses.load(Ordering::Relaxed),
            exhausted: self.exhausted.load(Ordering::Relaxed),
        }
    }

    fn give_back(&self, buffer: M::Buffer) {
        let mut free = self.free.lock().expect("staging pool lock");
        free.in_use -= buffer.as_ref().len();
        free.buffers.push(buffer);
    }
}

/// A staging buffer on loan from its pool ([`StagingPool::acquire`]); `len` bytes of it are
/// the caller's (the buffer itself may be larger).
pub struct Staged<'p, M: HostMemory> {
    pool: &'p StagingPool<M>,
    buffer: Option<M::Buffer>,
    len: usize,
}

impl<M: HostMemory> std::fmt::Debug for Staged<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Staged")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .finish()
    }
}

impl<M: HostMemory> Staged<'_, M> {
    /// The bytes asked for.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether zero bytes were asked for.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole buffer's size.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.as_ref().len())
    }

    /// The buffer itself (for a copy engine that needs its own type, e.g. pinned memory).
    pub fn buffer_mut(&mut self) -> &mut M::Buffer {
        self.buffer.as_mut().expect("held until drop")
    }

    /// The buffer itself.
    #[must_use]
    pub fn buffer(&self) -> &M::Buffer {
        self.buffer.as_ref().expect("held until drop")
    }
}

impl<M: HostMemory> std::ops::Deref for Staged<'_, M> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buffer().as_ref()[..self.len]
    }
}

impl<M: HostMemory> std::ops::DerefMut for Staged<'_, M> {
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.buffer_mut().as_mut()[..len]
    }
}

impl<M: HostMemory> Drop for Staged<'_, M> {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool.give_back(buffer);
        }
    }
}

/// Where a gather put each chunk.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gathered {
    /// Chunk `i`'s bytes in the buffer (`None`: its key missed, or it did not fit).
    pub spans: Vec<Option<Range<usize>>>,
    /// Bytes written.
    pub bytes: usize,
    /// Bytes every found value needs: more than the buffer when [`Gathered::fits`] is false
    /// (gather again into a buffer this large).
    pub needed: usize,
    /// Keys found.
    pub hits: usize,
}

impl Gathered {
    /// Whether every found value was written.
    #[must_use]
    pub fn fits(&self) -> bool {
        self.needed == self.bytes
    }

    /// Whether every key was found (and fitted).
    #[must_use]
    pub fn complete(&self) -> bool {
        self.fits() && self.hits == self.spans.len()
    }
}

/// Copies values, as a store's visitor hands them over (`read` calls it once per key, under
/// the shard's lock, in any order), into `dst` back to back: one copy from the store's memory
/// into the staging buffer.
pub fn gather(
    dst: &mut [u8],
    chunks: usize,
    read: impl FnOnce(&mut dyn FnMut(usize, Option<&[u8]>)),
) -> Gathered {
    let mut out = Gathered {
        spans: vec![None; chunks],
        ..Gathered::default()
    };
    let mut at = 0usize;
    read(&mut |i, value| {
        let Some(value) = value else {
            return;
        };
        out.hits += 1;
        out.needed += value.len();
        if let Some(slot) = dst.get_mut(at..at + value.len()) {
            fc_shard::copy_large(slot, value);
            if let Some(span) = out.spans.get_mut(i) {
                *span = Some(at..at + value.len());
            }
            at += value.len();
        }
    });
    out.bytes = at;
    out
}

/// [`gather`] of a session's `keys` from an [`EmbeddedStore`] (one shard lock per shard).
pub fn gather_session<K: AsRef<[u8]>>(
    store: &EmbeddedStore,
    prefix: &[u8],
    keys: &[K],
    dst: &mut [u8],
) -> Gathered {
    gather(dst, keys.len(), |visit| {
        store.batch_get_session_view(prefix, keys, visit);
    })
}

/// [`gather`] of a session's `keys` from a worker's [`LocalEmbeddedStore`] (no lock).
///
/// # Panics
/// When a key is owned by another worker (as the store's session reads).
pub fn gather_session_local<K: AsRef<[u8]>>(
    store: &mut LocalEmbeddedStore,
    prefix: &[u8],
    keys: &[K],
    dst: &mut [u8],
) -> Gathered {
    let values = store.batch_get_session_view(prefix, keys);
    gather(dst, keys.len(), |visit| {
        for (i, value) in values.into_iter().enumerate() {
            visit(i, value);
        }
    })
}

/// Writes chunks back to the store as one session write (GPU-produced KV blocks stored after
/// a device → host copy): chunk `i` is `src[spans[i]]` under `keys[i]`, copied once, from
/// `src` into the store, under the session's shard lock.
///
/// # Errors
/// [`StoreError`] from the store (out of memory under `noeviction`).
///
/// # Panics
/// When `keys` and `spans` differ in length, or a span runs past `src`.
pub fn scatter_session<K: AsRef<[u8]>>(
    store: &EmbeddedStore,
    prefix: &[u8],
    keys: &[K],
    src: &[u8],
    spans: &[Range<usize>],
) -> Result<(), StoreError> {
    let values: Vec<&[u8]> = spans.iter().map(|span| &src[span.clone()]).collect();
    store.try_batch_set_session_no_ttl(prefix, keys, &values)
}
