//! Parallel, pipelined gathers: a session's values copied into a staging buffer by several
//! threads, piece by piece, each piece handed to the caller as soon as it is complete, so a
//! GPU copy of the first pieces runs while the rest are still being gathered.
//!
//! One thread copying out of the store moves roughly 10–20 GB/s; a PCIe 5 x16 link moves
//! ~50 GB/s. A load that gathered everything on one thread and then copied would spend most
//! of its time gathering. Here the values' lengths are read first (under the shards' read
//! locks, [`EmbeddedStore::with_session_views`]), which fixes where every byte goes; the
//! staging buffer is then cut into pieces of whole bytes (a piece may end inside a chunk),
//! copied by a [`rayon`] pool, and each finished piece is passed to `ready` on the calling
//! thread, which issues its copies while the pool works on the next ones.

use std::ops::Range;
use std::sync::mpsc;
use std::time::Instant;

use fc_shard::EmbeddedStore;

use crate::staging::Gathered;

/// The smallest piece: below this a piece's bookkeeping and its copy's launch cost more than
/// the bytes.
pub const MIN_PIECE: usize = 64 << 10;

/// How a [`Gatherer`] works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatherConfig {
    /// Threads copying (0: none, the calling thread copies every piece itself, in order).
    pub threads: usize,
    /// The largest piece, in bytes (a session is cut into pieces of at most this size, at
    /// least [`MIN_PIECE`]).
    pub piece_bytes: usize,
}

impl Default for GatherConfig {
    /// Four threads (or as many as the machine has, if fewer) and 1 MiB pieces.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            threads: cores.min(4),
            piece_bytes: 1 << 20,
        }
    }
}

/// Why a gatherer could not be made.
#[derive(Debug, thiserror::Error)]
#[error("gather threads: {0}")]
pub struct GatherError(#[from] rayon::ThreadPoolBuildError);

/// A piece of a gather, done: its bytes in the staging buffer, and when a thread copied them.
#[derive(Debug)]
pub struct Piece<'a> {
    /// Its place in the staging buffer.
    pub host: Range<usize>,
    /// Its bytes (the staging buffer's `host` range).
    pub bytes: &'a [u8],
    /// When its copy began.
    pub started: Instant,
    /// When its copy ended.
    pub finished: Instant,
}

/// Copies sessions' values into staging buffers on a pool of threads, piece by piece.
#[derive(Debug)]
pub struct Gatherer {
    pool: Option<rayon::ThreadPool>,
    config: GatherConfig,
}

/// Where each found value goes in a staging buffer of `capacity` bytes: back to back, in key
/// order. All or nothing: when the values need more than `capacity`, no span is set and
/// [`Gathered::fits`] is false ([`Gathered::needed`] says how much).
#[must_use]
pub fn layout(values: &[Option<&[u8]>], capacity: usize) -> Gathered {
    let needed: usize = values.iter().flatten().map(|v| v.len()).sum();
    let hits = values.iter().flatten().count();
    let mut out = Gathered {
        spans: vec![None; values.len()],
        bytes: 0,
        needed,
        hits,
    };
    if needed > capacity {
        return out;
    }
    let mut at = 0;
    for (span, value) in out.spans.iter_mut().zip(values) {
        if let Some(value) = value {
            *span = Some(at..at + value.len());
            at += value.len();
        }
    }
    out.bytes = at;
    out
}

impl Gatherer {
    /// A gatherer with `config.threads` threads of its own.
    ///
    /// # Errors
    /// The threads could not be started.
    pub fn new(config: GatherConfig) -> Result<Self, GatherError> {
        let pool = if config.threads == 0 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(config.threads)
                    .thread_name(|i| format!("fc-gpu-gather-{i}"))
                    .build()?,
            )
        };
        Ok(Self { pool, config })
    }

    /// Its configuration.
    #[must_use]
    pub fn config(&self) -> GatherConfig {
        self.config
    }

    /// How `total` bytes are cut: enough pieces to give every thread two, none larger than
    /// `piece_bytes` nor smaller than [`MIN_PIECE`] (the last one may be), in order.
    #[must_use]
    pub fn pieces(&self, total: usize) -> Vec<Range<usize>> {
        let lanes = self.config.threads.max(1);
        let size = total
            .div_ceil(2 * lanes)
            .clamp(MIN_PIECE, self.config.piece_bytes.max(MIN_PIECE));
        (0..total.div_ceil(size))
            .map(|i| i * size..((i + 1) * size).min(total))
            .collect()
    }

    /// Copies `values` into `dst` as `spans` lays them out ([`layout`]), piece by piece on
    /// the pool, calling `ready` on this thread with each piece as it completes (in the order
    /// they complete). Returns once every piece was handed over.
    ///
    /// # Panics
    /// When `spans` does not fit `dst` or does not match `values` (a bug in the caller: use
    /// [`layout`]).
    pub fn fill(
        &self,
        values: &[Option<&[u8]>],
        spans: &[Option<Range<usize>>],
        dst: &mut [u8],
        mut ready: impl FnMut(Piece<'_>),
    ) {
        assert_eq!(values.len(), spans.len(), "one span per value");
        // The chunks in staging order (layout's spans rise with the key order).
        let mut chunks: Vec<(Range<usize>, &[u8])> = spans
            .iter()
            .zip(values)
            .filter_map(|(span, value)| Some((span.clone()?, (*value)?)))
            .collect();
        chunks.sort_by_key(|(span, _)| span.start);
        let total = chunks.iter().map(|(span, _)| span.end).max().unwrap_or(0);
        assert!(total <= dst.len(), "the layout runs past the buffer");
        let mut slots = Vec::new();
        let mut rest = &mut dst[..total];
        for range in self.pieces(total) {
            let (slot, tail) = rest.split_at_mut(range.len());
            slots.push((range, slot));
            rest = tail;
        }
        let chunks = &chunks;
        match &self.pool {
            None => {
                for (range, slot) in slots {
                    let started = Instant::now();
                    copy_piece(chunks, &range, slot);
                    ready(Piece {
                        host: range,
                        bytes: slot,
                        started,
                        finished: Instant::now(),
                    });
                }
            }
            Some(pool) => pool.in_place_scope_fifo(|scope| {
                let (tx, rx) = mpsc::channel::<Piece<'_>>();
                for (range, slot) in slots {
                    let tx = tx.clone();
                    scope.spawn_fifo(move |_| {
                        let started = Instant::now();
                        copy_piece(chunks, &range, slot);
                        // The receiver lives until every sender is gone.
                        let _ = tx.send(Piece {
                            host: range,
                            bytes: slot,
                            started,
                            finished: Instant::now(),
                        });
                    });
                }
                drop(tx);
                for piece in rx {
                    ready(piece);
                }
            }),
        }
    }

    /// Gathers a session's `keys` from `store` into `dst` ([`layout`] then [`Gatherer::fill`])
    /// under the shards' read locks, calling `ready` with each piece. Nothing is copied when
    /// the values do not fit (`fits()` false: gather again into [`Gathered::needed`] bytes);
    /// missing keys are skipped and counted (`complete()` false).
    pub fn gather_session<K: AsRef<[u8]>>(
        &self,
        store: &EmbeddedStore,
        prefix: &[u8],
        keys: &[K],
        dst: &mut [u8],
        ready: impl FnMut(Piece<'_>),
    ) -> Gathered {
        store.with_session_views(prefix, keys, |values| {
            let gathered = layout(values, dst.len());
            if gathered.fits() {
                self.fill(values, &gathered.spans, dst, ready);
            }
            gathered
        })
    }
}

/// Copies the parts of `chunks` (in staging order) that fall in `range` into `slot` (the
/// staging buffer's `range`).
fn copy_piece(chunks: &[(Range<usize>, &[u8])], range: &Range<usize>, slot: &mut [u8]) {
    let first = chunks.partition_point(|(span, _)| span.end <= range.start);
    for (span, value) in &chunks[first..] {
        if span.start >= range.end {
            break;
        }
        let from = span.start.max(range.start);
        let to = span.end.min(range.end);
        slot[from - range.start..to - range.start]
            .copy_from_slice(&value[from - span.start..to - span.start]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_buffer_in_order_within_their_bounds() {
        let g = Gatherer::new(GatherConfig {
            threads: 2,
            piece_bytes: 256 << 10,
        })
        .unwrap();
        assert!(g.pieces(0).is_empty());
        assert_eq!(g.pieces(10), vec![0..10]);
        let pieces = g.pieces(1 << 20);
        assert_eq!(pieces.len(), 4, "{pieces:?}");
        let pieces = g.pieces(300 << 10);
        assert_eq!(
            pieces,
            vec![
                0..75 << 10,
                75 << 10..150 << 10,
                150 << 10..225 << 10,
                225 << 10..300 << 10
            ]
        );
        let big = g.pieces((10 << 20) + 3);
        assert!(big.iter().all(|p| p.len() <= 256 << 10));
        assert_eq!(big.first().unwrap().start, 0);
        assert_eq!(big.last().unwrap().end, (10 << 20) + 3);
        assert!(big.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn layout_is_all_or_nothing() {
        let a = [1u8; 5];
        let b = [2u8; 7];
        let values = [Some(&a[..]), None, Some(&b[..])];
        let fits = layout(&values, 12);
        assert_eq!(fits.spans, vec![Some(0..5), None, Some(5..12)]);
        assert_eq!((fits.bytes, fits.needed, fits.hits), (12, 12, 2));
        assert!(fits.fits() && !fits.complete());
        let small = layout(&values, 11);
        assert!(!small.fits());
        assert_eq!(small.spans, vec![None, None, None]);
        assert_eq!((small.bytes, small.needed), (0, 12));
    }
}
