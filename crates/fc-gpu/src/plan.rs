//! Transfer descriptors: where each chunk of a batch sits in a host buffer, where it goes in
//! device memory, and the fewest copies that move them all (adjacent spans coalesced).
//! Pure data: built and checked without a GPU.

use std::ops::Range;

/// Why a plan cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// As many destinations as chunks are needed.
    #[error("{chunks} chunks but {offsets} device offsets")]
    CountMismatch {
        /// Chunks in the batch.
        chunks: usize,
        /// Device offsets given.
        offsets: usize,
    },
    /// A chunk the batch does not have (its key missed).
    #[error("chunk {index} is missing (its key was not found)")]
    Missing {
        /// The chunk's index (its key's position).
        index: usize,
    },
    /// A chunk's host span runs past the host buffer.
    #[error("chunk {index}'s host span ends at {end}, past the buffer's {len} bytes")]
    HostBounds {
        /// The chunk.
        index: usize,
        /// Where its span ends.
        end: usize,
        /// The host buffer's length.
        len: usize,
    },
    /// A chunk's device span runs past the device buffer.
    #[error("chunk {index}'s device span ends at {end}, past the device buffer's {len} bytes")]
    DeviceBounds {
        /// The chunk.
        index: usize,
        /// Where its span ends.
        end: u64,
        /// The device buffer's length.
        len: u64,
    },
    /// A device offset is not a multiple of the alignment.
    #[error("chunk {index}'s device offset {offset} is not a multiple of {align}")]
    Misaligned {
        /// The chunk.
        index: usize,
        /// Its device offset.
        offset: u64,
        /// The alignment asked for.
        align: u64,
    },
    /// Two chunks would be written over each other on the device.
    #[error("chunks {first} and {second} overlap on the device")]
    Overlap {
        /// The chunk whose span starts first.
        first: usize,
        /// The chunk that starts inside it.
        second: usize,
    },
    /// The alignment is not a power of two.
    #[error("alignment {0} is not a power of two")]
    BadAlignment(u64),
}

/// One chunk: its key's index in the batch, its bytes in the host buffer, its place on the
/// device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The chunk's index (its key's position in the batch).
    pub index: usize,
    /// Its bytes in the host buffer.
    pub host: Range<usize>,
    /// Where it starts in device memory (bytes from the device buffer's start).
    pub device: u64,
}

impl Chunk {
    /// Its length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.host.len()
    }

    /// Whether it is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.host.is_empty()
    }
}

/// One copy: a host span onto a device span of the same length, covering one or more chunks
/// that lie next to each other on both sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// The host bytes.
    pub host: Range<usize>,
    /// Where they go (or come from) on the device.
    pub device: u64,
    /// How many chunks it covers.
    pub chunks: usize,
}

impl Copy {
    /// Its length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.host.len()
    }

    /// Whether it is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.host.is_empty()
    }
}

/// A checked plan: every chunk, and the copies that move them (host → device for a load,
/// device → host for a store, the same descriptors either way).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransferPlan {
    chunks: Vec<Chunk>,
    copies: Vec<Copy>,
    bytes: usize,
}

/// Rounds `n` up to a multiple of `align` (a power of two).
#[must_use]
pub const fn align_up(n: u64, align: u64) -> u64 {
    (n + align - 1) & !(align - 1)
}

impl TransferPlan {
    /// Plans the chunks of a gathered batch (`host_spans[i]`: chunk `i`'s bytes in a host
    /// buffer of `host_len` bytes, `None` when its key missed) onto `device_offsets[i]` in a
    /// device buffer of `device_len` bytes, each offset a multiple of `align`.
    ///
    /// Checks, in this order, before anything moves: the counts agree, no chunk is missing,
    /// every span lies inside its buffer, every device offset is aligned, and no two chunks
    /// overlap on the device (host spans may be shared: one value loaded twice is fine).
    /// Then chunks adjacent on both sides are coalesced into one copy.
    ///
    /// # Errors
    /// The first [`PlanError`] found.
    pub fn new(
        host_spans: &[Option<Range<usize>>],
        host_len: usize,
        device_offsets: &[u64],
        device_len: u64,
        align: u64,
    ) -> Result<Self, PlanError> {
        if !align.is_power_of_two() {
            return Err(PlanError::BadAlignment(align));
        }
        if host_spans.len() != device_offsets.len() {
            return Err(PlanError::CountMismatch {
                chunks: host_spans.len(),
                offsets: device_offsets.len(),
            });
        }
        let mut chunks = Vec::with_capacity(host_spans.len());
        for (index, (span, &device)) in host_spans.iter().zip(device_offsets).enumerate() {
            let host = span.clone().ok_or(PlanError::Missing { index })?;
            if host.end > host_len || host.start > host.end {
                return Err(PlanError::HostBounds {
                    index,
                    end: host.end,
                    len: host_len,
                });
            }
            let end = device.saturating_add(host.len() as u64);
            if end > device_len {
                return Err(PlanError::DeviceBounds {
                    index,
                    end,
                    len: device_len,
                });
            }
            if device % align != 0 {
                return Err(PlanError::Misaligned {
                    index,
                    offset: device,
                    align,
                });
            }
            chunks.push(Chunk {
                index,
                host,
                device,
            });
        }
        // Overlaps on the device: sorted by device offset, each non-empty chunk must start at
        // or after the end of the one before.
        let mut by_device: Vec<&Chunk> = chunks.iter().filter(|c| !c.is_empty()).collect();
        by_device.sort_by_key(|c| (c.device, c.index));
        for pair in by_device.windows(2) {
            if pair[1].device < pair[0].device + pair[0].len() as u64 {
                return Err(PlanError::Overlap {
                    first: pair[0].index,
                    second: pair[1].index,
                });
            }
        }
        // Coalescing: in host order, a chunk that starts where the last copy ends on both
        // sides extends it.
        let mut by_host: Vec<&Chunk> = chunks.iter().filter(|c| !c.is_empty()).collect();
        by_host.sort_by_key(|c| (c.host.start, c.index));
        let mut copies: Vec<Copy> = Vec::new();
        for chunk in by_host {
            if let Some(last) = copies.last_mut()
                && last.host.end == chunk.host.start
                && last.device + last.len() as u64 == chunk.device
            {
                last.host.end = chunk.host.end;
                last.chunks += 1;
                continue;
            }
            copies.push(Copy {
                host: chunk.host.clone(),
                device: chunk.device,
                chunks: 1,
            });
        }
        let bytes = copies.iter().map(Copy::len).sum();
        Ok(Self {
            chunks,
            copies,
            bytes,
        })
    }

    /// Device offsets that pack `lens` one after another from `base`, each aligned to
    /// `align` (a power of two): the layout of a contiguous device region.
    #[must_use]
    pub fn packed_offsets(lens: &[usize], base: u64, align: u64) -> Vec<u64> {
        let mut at = align_up(base, align);
        lens.iter()
            .map(|&len| {
                let offset = at;
                at = align_up(at + len as u64, align);
                offset
            })
            .collect()
    }

    /// Every chunk, in index order.
    #[must_use]
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The copies to issue, in host order.
    #[must_use]
    pub fn copies(&self) -> &[Copy] {
        &self.copies
    }

    /// The plan's copies cut to the host bytes `host` (a piece of a pipelined gather): each
    /// copy that overlaps it, clipped to it, as (host span, device offset). Issuing the
    /// copies of every piece of a partition of the host buffer moves exactly the plan's
    /// bytes.
    pub fn copies_in(&self, host: Range<usize>) -> impl Iterator<Item = (Range<usize>, u64)> + '_ {
        self.copies.iter().filter_map(move |copy| {
            let start = copy.host.start.max(host.start);
            let end = copy.host.end.min(host.end);
            (start < end).then(|| (start..end, copy.device + (start - copy.host.start) as u64))
        })
    }

    /// Bytes moved.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}
