//! The primary's backlog: each shard's most recent batch frames (encoded, read by every
//! replica link), bounded in bytes. A replica whose watermark is inside it catches up from it;
//! an older one needs a snapshot; a newer one is refused.
//!
//! **One budget for all shards.** Frames are evicted oldest first across every shard, as
//! Redis's single backlog drops its oldest bytes: the backlog reaches back to the same moment
//! for every shard, whichever shards the writes went to. (It was split evenly over the
//! shards: under a load that wrote one shard of 16, that shard had a sixteenth of
//! `backlog_bytes`, and a replica cut off for a moment needed a snapshot of it.) A shard
//! that wrote nothing since its last frame was evicted holds none: a replica at its latest
//! sequence needs nothing from it, an older one needs a snapshot.
//!
//! Frames are plain buffers: a link copies the frames it sends into its own output under the
//! backlog's lock ([`Backlog::copy_from`]), so no frame is shared past it, and an evicted
//! frame's buffer is kept for the next frame to be encoded into ([`Backlog::recycle_into`]).
//! A buffer freed and allocated again per frame cost the primary's replication thread page
//! faults: its allocator returned the memory to the kernel, which zeroed it again on reuse.

use std::collections::VecDeque;

/// Evicted buffers kept for reuse, at most.
const MAX_SPARES: usize = 256;

/// Each shard's recent frames, `limit` bytes in all at most.
#[derive(Debug, Clone)]
pub struct Backlog {
    limit: usize,
    /// Bytes held (the frames' capacities).
    bytes: usize,
    shards: Vec<ShardLog>,
    /// The shard of every frame held, oldest first (the order frames are evicted in).
    order: VecDeque<u32>,
    /// Buffers of evicted frames, for [`Backlog::recycle_into`].
    spares: Vec<Vec<u8>>,
}

#[derive(Debug, Clone, Default)]
struct ShardLog {
    frames: VecDeque<Held>,
    /// The last sequence any frame covered (kept when frames are evicted).
    latest: u64,
    /// The index the next frame pushed gets (frames are numbered from 0 per shard, so a
    /// link's cursor survives evictions and marker-only frames, which cover no sequence).
    next: u64,
}

/// One frame in a shard's backlog.
#[derive(Debug, Clone)]
struct Held {
    index: u64,
    /// The first sequence it covers (a marker-only frame: the one it precedes).
    first: u64,
    /// Where it sorts: its last sequence (a marker-only frame: the one it precedes). A
    /// replica at watermark `w` needs every frame whose `pos` is above `w`.
    pos: u64,
    frame: Vec<u8>,
}

/// The backlog no longer holds what the replica needs: send a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedSnapshot;

impl Backlog {
    /// A backlog of `shards` shards holding `total_bytes` in all (one budget: the oldest
    /// frame goes first, whichever its shard).
    #[must_use]
    pub fn new(shards: usize, total_bytes: usize) -> Self {
        Self {
            limit: total_bytes,
            bytes: 0,
            shards: vec![ShardLog::default(); shards],
            order: VecDeque::new(),
            spares: Vec::new(),
        }
    }

    /// Adds a shard's encoded frame covering `first..=last` (a marker-only frame: both 0),
    /// evicting the oldest frames of any shard past the limit (the one pushed always stays;
    /// evicted buffers are kept for [`Backlog::recycle_into`]). A frame counts its buffer's
    /// capacity. Returns its index.
    pub fn push(&mut self, shard: usize, first: u64, last: u64, frame: impl Into<Vec<u8>>) -> u64 {
        let frame = frame.into();
        let log = &mut self.shards[shard];
        let (first, pos) = if last == 0 {
            (log.latest + 1, log.latest + 1)
        } else {
            (first, last)
        };
        log.latest = log.latest.max(last);
        self.bytes += frame.capacity();
        let index = log.next;
        log.next += 1;
        log.frames.push_back(Held {
            index,
            first,
            pos,
            frame,
        });
        self.order.push_back(shard as u32);
        while self.bytes > self.limit && self.order.len() > 1 {
            // The oldest frame held is the front of its shard's frames (both are in the order
            // frames were pushed).
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(old) = self.shards[oldest as usize].frames.pop_front() {
                self.bytes -= old.frame.capacity();
                if self.spares.len() < MAX_SPARES {
                    self.spares.push(old.frame);
                }
            }
        }
        index
    }

    /// Moves the buffers of evicted frames into `pool` (which keeps at most 256), to encode
    /// the next frames into: memory already mapped, not allocated again.
    pub fn recycle_into(&mut self, pool: &mut Vec<Vec<u8>>) {
        let room = MAX_SPARES.saturating_sub(pool.len());
        if self.spares.len() > room {
            self.spares.truncate(room);
        }
        pool.append(&mut self.spares);
    }

    /// The oldest sequence a shard's backlog can resume from (`None`: it holds nothing).
    #[must_use]
    pub fn oldest(&self, shard: usize) -> Option<u64> {
        self.shards[shard].frames.front().map(|held| held.first)
    }

    /// The index the shard's next frame will get.
    #[must_use]
    pub fn next_index(&self, shard: usize) -> u64 {
        self.shards[shard].next
    }

    /// The latest sequence a shard's frames covered.
    #[must_use]
    pub fn latest(&self, shard: usize) -> u64 {
        self.shards[shard].latest
    }

    /// Bytes held.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The frames a replica at `watermark` on `shard` needs, in order.
    ///
    /// # Errors
    /// [`NeedSnapshot`] when the backlog no longer reaches back to `watermark + 1`.
    pub fn since(&self, shard: usize, watermark: u64) -> Result<Vec<&[u8]>, NeedSnapshot> {
        let index = self.since_index(shard, watermark)?;
        self.from_index(shard, index)
    }

    /// The index of the first frame a replica at `watermark` on `shard` needs (the shard's
    /// next index when it needs none yet): a link's cursor, for [`Backlog::from_index`].
    ///
    /// # Errors
    /// [`NeedSnapshot`] when the backlog no longer reaches back to `watermark + 1`.
    pub fn since_index(&self, shard: usize, watermark: u64) -> Result<u64, NeedSnapshot> {
        let log = &self.shards[shard];
        if watermark < log.latest && log.frames.front().is_none_or(|h| h.first > watermark + 1) {
            return Err(NeedSnapshot);
        }
        let at = log.frames.partition_point(|h| h.pos <= watermark);
        Ok(log.frames.get(at).map_or(log.next, |h| h.index))
    }

    /// The frames from index `index` on (what a link at that cursor sends next), in order.
    ///
    /// # Errors
    /// [`NeedSnapshot`] when frames from `index` were evicted (the link fell too far behind).
    pub fn from_index(&self, shard: usize, index: u64) -> Result<Vec<&[u8]>, NeedSnapshot> {
        Ok(self
            .frames_from(shard, index)?
            .map(|h| h.frame.as_slice())
            .collect())
    }

    /// Appends the frames from index `index` on to `out` (what a link at that cursor sends
    /// next, copied as it goes out: nothing allocated, nothing shared). Returns how many.
    ///
    /// # Errors
    /// [`NeedSnapshot`] when frames from `index` were evicted (the link fell too far behind).
    pub fn copy_from(
        &self,
        shard: usize,
        index: u64,
        out: &mut Vec<u8>,
    ) -> Result<u64, NeedSnapshot> {
        self.copy_up_to(shard, index, out, usize::MAX)
    }

    /// [`Backlog::copy_from`], stopping before a frame that would start at or past `limit`
    /// bytes of `out` (a link that may only hold so much it has not written yet).
    ///
    /// # Errors
    /// [`NeedSnapshot`] when frames from `index` were evicted (the link fell too far behind).
    pub fn copy_up_to(
        &self,
        shard: usize,
        index: u64,
        out: &mut Vec<u8>,
        limit: usize,
    ) -> Result<u64, NeedSnapshot> {
        let mut copied = 0;
        for held in self.frames_from(shard, index)? {
            if out.len() >= limit {
                break;
            }
            out.extend_from_slice(&held.frame);
            copied += 1;
        }
        Ok(copied)
    }

    fn frames_from(
        &self,
        shard: usize,
        index: u64,
    ) -> Result<std::collections::vec_deque::Iter<'_, Held>, NeedSnapshot> {
        let log = &self.shards[shard];
        let front = log.frames.front().map_or(log.next, |h| h.index);
        if index < front {
            return Err(NeedSnapshot);
        }
        let skip = usize::try_from(index - front).unwrap_or(usize::MAX);
        Ok(log.frames.range(skip.min(log.frames.len())..))
    }
}
