//! A cache-line prefetch hint: starts loading the line holding a value without waiting for it.
//!
//! A batch of lookups (a pipelined read from a client, `batch_get`) is a chain of cache misses
//! per key: the index bucket, then the entry it points to. Issued one key at a time they run
//! one after another; prefetching every key's bucket, then every key's entry, before the
//! lookups overlaps them. A prefetch has no effect on what the program computes (it never
//! faults, even for an address it cannot load), only on when memory arrives.
//!
//! On x86 this is `PREFETCHT0` through `safe_arch` (a safe wrapper, so no `unsafe` here);
//! elsewhere it compiles to nothing.

/// Hints the CPU to bring the cache line holding `at` into every cache level.
#[inline(always)]
pub(crate) fn prefetch<T>(at: &T) {
    #[cfg(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    ))]
    safe_arch::prefetch_t0(at);
    #[cfg(not(all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse"
    )))]
    let _ = at;
}
