//! Copies of large values into memory that is not in the CPU cache.
//!
//! A bounded cache overwriting large values writes each one over the memory of an entry evicted
//! because nobody touched it for a long time: the destination is cold. An ordinary copy first
//! reads every destination cache line from DRAM (read-for-ownership) and writes it back later,
//! so it moves twice the bytes it copies. With the `unsafe` feature on x86-64, copies of at least
//! [`STREAM_THRESHOLD`] bytes use non-temporal stores, which write whole lines without reading
//! them and without evicting the hot working set from the cache. Without the feature (and on other
//! targets) they are ordinary copies; both give the same bytes, and the same tests run on both.

/// Smallest copy that streams: below it the destination is likely cached and streaming (which
/// bypasses the cache) would cost a later reader a miss.
#[cfg_attr(
    not(any(test, all(feature = "unsafe", target_arch = "x86_64"))),
    expect(dead_code, reason = "the safe copy has no threshold")
)]
pub(crate) const STREAM_THRESHOLD: usize = 16 * 1024;

/// Copies `src` into `dst` (equal lengths) as the store copies large values: with the
/// `unsafe` feature on x86-64, copies of at least 16 KiB use non-temporal stores, which write
/// whole cache lines without first reading them and without evicting the cache's working
/// set; otherwise an ordinary copy. For a destination nothing reads soon through the CPU's
/// cache (a DMA staging buffer, a value going cold).
///
/// # Panics
/// When the lengths differ.
#[inline]
pub fn copy_large(dst: &mut [u8], src: &[u8]) {
    #[cfg(all(feature = "unsafe", target_arch = "x86_64"))]
    if src.len() >= STREAM_THRESHOLD {
        assert_eq!(dst.len(), src.len(), "copy_large: lengths differ");
        stream::copy(dst.as_mut_ptr(), src.as_ptr(), src.len());
        return;
    }
    dst.copy_from_slice(src);
}

/// Appends `src` to `vec`, which has room for it (see [`copy_large`]).
#[inline]
pub(crate) fn extend_large(vec: &mut Vec<u8>, src: &[u8]) {
    #[cfg(all(feature = "unsafe", target_arch = "x86_64"))]
    if src.len() >= STREAM_THRESHOLD {
        vec.reserve(src.len());
        let spare = vec.spare_capacity_mut();
        assert!(spare.len() >= src.len(), "extend_large: no room");
        stream::copy(spare.as_mut_ptr().cast::<u8>(), src.as_ptr(), src.len());
        let len = vec.len() + src.len();
        // SAFETY: `stream::copy` initialised the `src.len()` bytes after the old length, which
        // are within the capacity (`spare.len() >= src.len()` was asserted above).
        #[expect(unsafe_code, reason = "setting the length over bytes just written")]
        unsafe {
            vec.set_len(len);
        }
        return;
    }
    vec.extend_from_slice(src);
}

#[cfg(all(feature = "unsafe", target_arch = "x86_64"))]
#[expect(
    unsafe_code,
    reason = "non-temporal stores through raw pointers (SAFETY.md)"
)]
mod stream {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// Copies `len` bytes from `src` to `dst` with non-temporal 16-byte stores for the aligned
    /// middle and ordinary copies for the unaligned head and tail, then fences so the streamed
    /// stores are ordered before any later store (in particular the unlock that publishes them).
    ///
    /// The callers pass pointers derived from a `&mut [u8]` (or a `Vec`'s spare capacity) and a
    /// `&[u8]` of at least `len` bytes each; a shared and an exclusive borrow cannot overlap.
    #[inline]
    pub(super) fn copy(dst: *mut u8, src: *const u8, len: usize) {
        let head = dst.align_offset(16).min(len);
        // SAFETY: `dst` is valid for `len` writes and `src` for `len` reads (the callers' slices),
        // they do not overlap (an exclusive and a shared borrow), and every offset below stays
        // under `len`: the head is at most `len`, the loop stops 64 bytes before the end, and the
        // tail copies exactly what is left. `dst + head` is 16-byte aligned as `_mm_stream_si128`
        // requires; loads are unaligned (`loadu`). SSE2 is part of the x86-64 baseline.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let mut i = head;
            while i + 64 <= len {
                let a = _mm_loadu_si128(src.add(i).cast::<__m128i>());
                let b = _mm_loadu_si128(src.add(i + 16).cast::<__m128i>());
                let c = _mm_loadu_si128(src.add(i + 32).cast::<__m128i>());
                let d = _mm_loadu_si128(src.add(i + 48).cast::<__m128i>());
                _mm_stream_si128(dst.add(i).cast::<__m128i>(), a);
                _mm_stream_si128(dst.add(i + 16).cast::<__m128i>(), b);
                _mm_stream_si128(dst.add(i + 32).cast::<__m128i>(), c);
                _mm_stream_si128(dst.add(i + 48).cast::<__m128i>(), d);
                i += 64;
            }
            std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
            _mm_sfence();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..STREAM_THRESHOLD * 2 + 200)
            .map(|i| (i * 31 + 7) as u8)
            .collect();
        for len in [
            0,
            1,
            63,
            64,
            STREAM_THRESHOLD - 1,
            STREAM_THRESHOLD,
            STREAM_THRESHOLD + 77,
        ] {
            for offset in 0..17 {
                let mut dst = vec![0u8; len + offset];
                copy_large(&mut dst[offset..], &src[offset..offset + len]);
                assert_eq!(
                    &dst[offset..],
                    &src[offset..offset + len],
                    "len {len} offset {offset}"
                );
                let mut vec = vec![9u8; offset];
                extend_large(&mut vec, &src[..len]);
                assert_eq!(&vec[..offset], &vec![9u8; offset][..]);
                assert_eq!(
                    &vec[offset..],
                    &src[..len],
                    "extend len {len} offset {offset}"
                );
            }
        }
    }
}
