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
//!
//! A store runs the other way: a GPU's chunks land in a staging buffer piece by piece, and the
//! pool copies each landed piece's values out ([`Gatherer::build_entries`]) into entries of
//! their own, which the store then takes under its lock without copying them again
//! ([`fc_shard::BuiltEntry`]). Store pieces hold whole values ([`Gatherer::value_pieces`]).

use std::ops::Range;
use std::sync::mpsc;
use std::time::Instant;

use fc_shard::{BuiltEntry, EmbeddedStore, EntryPool, StoreError};

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
    /// Most bytes of the memory of replaced chunks kept to build the next stored chunks of
    /// the same size into ([`EntryPool`]; 0: none kept).
    pub recycle_bytes: usize,
}

impl Default for GatherConfig {
    /// Four threads (or as many as the machine has, if fewer), 1 MiB pieces and 512 MiB
    /// of recycled memory at most.
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            threads: cores.min(4),
            piece_bytes: 1 << 20,
            recycle_bytes: 512 << 20,
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

/// The entries of a store, built ([`Gatherer::build_entries`]).
#[derive(Debug)]
pub struct Built {
    /// One per key, in key order.
    pub entries: Vec<BuiltEntry>,
    /// For each piece, when a thread began building its entries and when it finished.
    pub piece_times: Vec<(Instant, Instant)>,
}

/// Copies sessions' values into staging buffers on a pool of threads, piece by piece.
#[derive(Debug)]
pub struct Gatherer {
    pool: Option<rayon::ThreadPool>,
    config: GatherConfig,
    recycled: EntryPool,
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
        Ok(Self {
            pool,
            config,
            recycled: EntryPool::new(config.recycle_bytes),
        })
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

impl Gatherer {
    /// How a store of values laid out back to back (`spans`, in order) is cut: runs of whole
    /// values (as ranges of their indices), each of at least the piece size that
    /// [`Gatherer::pieces`] would choose for their total, or fewer bytes at the end. A value
    /// larger than that is a run of its own.
    #[must_use]
    pub fn value_pieces(&self, spans: &[Range<usize>]) -> Vec<Range<usize>> {
        let total: usize = spans.iter().map(ExactSizeIterator::len).sum();
        let lanes = self.config.threads.max(1);
        let size = total
            .div_ceil(2 * lanes)
            .clamp(MIN_PIECE, self.config.piece_bytes.max(MIN_PIECE));
        let mut pieces = Vec::new();
        let (mut start, mut bytes) = (0, 0);
        for (i, span) in spans.iter().enumerate() {
            bytes += span.len();
            if bytes >= size {
                pieces.push(start..i + 1);
                (start, bytes) = (i + 1, 0);
            }
        }
        if start < spans.len() {
            pieces.push(start..spans.len());
        }
        pieces
    }

    /// Builds the entries of a store: `keys[i]` with the value `src[spans[i]]`, copied once
    /// each into an allocation of its own ([`BuiltEntry`]; the memory of chunks replaced
    /// before when one of the size is kept, [`GatherConfig::recycle_bytes`]), piece by piece (`pieces`, from
    /// [`Gatherer::value_pieces`]) on the pool. `ready(p)` runs on this thread, in order, before
    /// piece `p` is built, and returns once that piece's bytes are in `src` (its device copy
    /// landed), so earlier pieces are built while later ones are still arriving. The first
    /// error (from `ready`, or a key or value a store refuses) stops the rest.
    ///
    /// # Panics
    /// When `keys` and `spans` differ in length, or `pieces` does not cover them in order.
    pub fn build_entries<K: AsRef<[u8]> + Sync, E: From<StoreError> + Send>(
        &self,
        keys: &[K],
        src: &[u8],
        spans: &[Range<usize>],
        pieces: &[Range<usize>],
        mut ready: impl FnMut(usize) -> Result<(), E>,
    ) -> Result<Built, E> {
        assert_eq!(keys.len(), spans.len(), "one span per key");
        let mut at = 0;
        for piece in pieces {
            assert_eq!(piece.start, at, "the pieces cover the values in order");
            at = piece.end;
        }
        assert_eq!(at, keys.len(), "the pieces cover the values in order");
        let mut built: Vec<Option<Result<BuiltEntry, StoreError>>> =
            (0..keys.len()).map(|_| None).collect();
        let now = Instant::now();
        let mut piece_times = vec![(now, now); pieces.len()];
        let mut slots = Vec::with_capacity(pieces.len());
        let mut rest = &mut built[..];
        for (piece, time) in pieces.iter().zip(&mut piece_times) {
            let (slot, tail) = rest.split_at_mut(piece.len());
            slots.push((piece.clone(), slot, time));
            rest = tail;
        }
        let build = |piece: Range<usize>,
                     slot: &mut [Option<Result<BuiltEntry, StoreError>>],
                     time: &mut (Instant, Instant)| {
            let started = Instant::now();
            for (i, out) in piece.zip(slot) {
                *out = Some(
                    self.recycled
                        .build(keys[i].as_ref(), &src[spans[i].clone()]),
                );
            }
            *time = (started, Instant::now());
        };
        let mut failed = None;
        match &self.pool {
            None => {
                for (p, (piece, slot, time)) in slots.into_iter().enumerate() {
                    if let Err(err) = ready(p) {
                        failed = Some(err);
                        break;
                    }
                    build(piece, slot, time);
                }
            }
            Some(pool) => pool.in_place_scope_fifo(|scope| {
                let build = &build;
                for (p, (piece, slot, time)) in slots.into_iter().enumerate() {
                    if let Err(err) = ready(p) {
                        failed = Some(err);
                        break;
                    }
                    scope.spawn_fifo(move |_| build(piece, slot, time));
                }
            }),
        }
        if let Some(err) = failed {
            return Err(err);
        }
        let entries = built
            .into_iter()
            .map(|entry| entry.expect("every piece was built").map_err(E::from))
            .collect::<Result<_, E>>()?;
        Ok(Built {
            entries,
            piece_times,
        })
    }

    /// Writes a session from a staging buffer: `keys[i]` gets `src[spans[i]]`, the copies
    /// made on the pool ([`Gatherer::build_entries`]), then moved into the store under one
    /// lock per shard ([`EmbeddedStore::try_batch_set_session_built_no_ttl`]). The parallel
    /// counterpart of [`crate::scatter_session`].
    ///
    /// # Errors
    /// What the store refuses: a key or value too large, out of memory under `NoEviction`.
    pub fn scatter_session<K: AsRef<[u8]> + Sync>(
        &self,
        store: &EmbeddedStore,
        prefix: &[u8],
        keys: &[K],
        src: &[u8],
        spans: &[Range<usize>],
    ) -> Result<(), StoreError> {
        let pieces = self.value_pieces(spans);
        let built = self.build_entries(keys, src, spans, &pieces, |_| Ok::<_, StoreError>(()))?;
        self.store_built(store, prefix, built.entries)
    }

    /// Writes built entries as a session and keeps the memory of the chunks they replaced
    /// for the next builds (up to [`GatherConfig::recycle_bytes`]).
    ///
    /// # Errors
    /// What the store refuses (out of memory under `NoEviction`).
    pub fn store_built(
        &self,
        store: &EmbeddedStore,
        prefix: &[u8],
        entries: Vec<BuiltEntry>,
    ) -> Result<(), StoreError> {
        let replaced = store.try_batch_set_session_built_no_ttl(prefix, entries)?;
        self.recycled.give_back(replaced);
        Ok(())
    }

    /// Bytes of replaced chunks' memory kept for the next builds.
    #[must_use]
    pub fn recycled_bytes(&self) -> usize {
        self.recycled.held_bytes()
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
        // The staging buffer is read by the GPU's DMA, not by this CPU: with the `unsafe`
        // feature the copy streams past the cache (no read of the destination's lines).
        fc_shard::copy_large(
            &mut slot[from - range.start..to - range.start],
            &value[from - span.start..to - span.start],
        );
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
            ..GatherConfig::default()
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

    fn spans_of(lens: &[usize]) -> Vec<Range<usize>> {
        let mut at = 0;
        lens.iter()
            .map(|&len| {
                at += len;
                at - len..at
            })
            .collect()
    }

    #[test]
    fn value_pieces_hold_whole_values_and_cover_them_in_order() {
        let g = Gatherer::new(GatherConfig {
            threads: 2,
            piece_bytes: 256 << 10,
            ..GatherConfig::default()
        })
        .unwrap();
        assert!(g.value_pieces(&[]).is_empty());
        // 16 values of 100 KiB: pieces of at least 256 KiB, so three values each, and the
        // last one takes what is left.
        let pieces = g.value_pieces(&spans_of(&[100 << 10; 16]));
        assert_eq!(pieces, vec![0..3, 3..6, 6..9, 9..12, 12..15, 15..16]);
        // A value larger than a piece is a piece of its own; empty values ride along.
        let pieces = g.value_pieces(&spans_of(&[0, 2 << 20, 0, 10, 2 << 20]));
        assert_eq!(pieces, vec![0..2, 2..5]);
        // A small session is one piece of at least MIN_PIECE.
        assert_eq!(g.value_pieces(&spans_of(&[1000; 10])), vec![0..10]);
    }

    #[test]
    fn built_entries_copy_each_value_once_the_piece_is_ready() {
        for threads in [0, 1, 3] {
            let g = Gatherer::new(GatherConfig {
                threads,
                piece_bytes: MIN_PIECE,
                ..GatherConfig::default()
            })
            .unwrap();
            let lens = [40 << 10, 0, 30 << 10, 70 << 10, 5, 64 << 10];
            let spans = spans_of(&lens);
            let src: Vec<u8> = (0..spans.last().unwrap().end)
                .map(|i| (i * 7 % 251) as u8)
                .collect();
            let keys: Vec<String> = (0..lens.len()).map(|i| format!("k{i}")).collect();
            let pieces = g.value_pieces(&spans);
            assert!(pieces.len() > 1, "{pieces:?}");
            let mut asked = Vec::new();
            let built = g
                .build_entries(&keys, &src, &spans, &pieces, |p| {
                    asked.push(p);
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            assert_eq!(asked, (0..pieces.len()).collect::<Vec<_>>());
            assert_eq!(built.piece_times.len(), pieces.len());
            assert!(built.piece_times.iter().all(|(a, b)| a <= b));
            for (i, entry) in built.entries.iter().enumerate() {
                assert_eq!(entry.key(), keys[i].as_bytes());
                assert_eq!(
                    entry.value(),
                    &src[spans[i].clone()],
                    "threads {threads} value {i}"
                );
            }
            // A piece that never lands stops the build.
            let mut asked = 0;
            let err = g
                .build_entries(&keys, &src, &spans, &pieces, |p| {
                    asked += 1;
                    if p == 1 {
                        return Err(StoreError::ShardFull { shard: 9 });
                    }
                    Ok(())
                })
                .unwrap_err();
            assert!(matches!(err, StoreError::ShardFull { shard: 9 }));
            assert_eq!(asked, 2, "nothing is asked after the failure");
        }
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
