//! The primary's backlog: each shard's most recent batch frames (encoded, shared by every
//! replica link), bounded in bytes. A replica whose watermark is inside it catches up from it;
//! an older one needs a snapshot; a newer one is refused.

use std::collections::VecDeque;
use std::sync::Arc;

/// Each shard's recent frames, `limit` bytes per shard at most.
#[derive(Debug, Clone)]
pub struct Backlog {
    limit: usize,
    shards: Vec<ShardLog>,
}

#[derive(Debug, Clone, Default)]
struct ShardLog {
    /// (first sequence, last sequence, the encoded frame)
    frames: VecDeque<(u64, u64, Arc<[u8]>)>,
    bytes: usize,
    /// The last sequence any frame covered (kept when frames are evicted).
    latest: u64,
}

/// The backlog no longer holds what the replica needs: send a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeedSnapshot;

impl Backlog {
    /// A backlog of `shards` shards holding `total_bytes` in all (split evenly: each shard's
    /// lane is its own).
    #[must_use]
    pub fn new(shards: usize, total_bytes: usize) -> Self {
        Self {
            limit: total_bytes / shards.max(1),
            shards: vec![ShardLog::default(); shards],
        }
    }

    /// Adds a shard's encoded frame covering `first..=last` (a marker-only frame: both 0),
    /// evicting the oldest past the limit (the newest always stays).
    pub fn push(&mut self, shard: usize, first: u64, last: u64, frame: Arc<[u8]>) {
        let log = &mut self.shards[shard];
        let (first, last) = if last == 0 {
            (log.latest, log.latest)
        } else {
            (first, last)
        };
        log.latest = log.latest.max(last);
        log.bytes += frame.len();
        log.frames.push_back((first, last, frame));
        while log.bytes > self.limit && log.frames.len() > 1 {
            if let Some((_, _, old)) = log.frames.pop_front() {
                log.bytes -= old.len();
            }
        }
    }

    /// The oldest sequence a shard's backlog can resume from (`None`: it holds nothing).
    #[must_use]
    pub fn oldest(&self, shard: usize) -> Option<u64> {
        self.shards[shard].frames.front().map(|(first, ..)| *first)
    }

    /// The latest sequence a shard's frames covered.
    #[must_use]
    pub fn latest(&self, shard: usize) -> u64 {
        self.shards[shard].latest
    }

    /// Bytes held.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.bytes).sum()
    }

    /// The frames a replica at `watermark` on `shard` needs, in order.
    ///
    /// # Errors
    /// [`NeedSnapshot`] when the backlog no longer reaches back to `watermark + 1`.
    pub fn since(&self, shard: usize, watermark: u64) -> Result<Vec<Arc<[u8]>>, NeedSnapshot> {
        let log = &self.shards[shard];
        if watermark >= log.latest {
            return Ok(Vec::new());
        }
        match log.frames.front() {
            Some((first, ..)) if *first <= watermark + 1 => {}
            _ => return Err(NeedSnapshot),
        }
        Ok(log
            .frames
            .iter()
            .filter(|(_, last, _)| *last > watermark)
            .map(|(.., frame)| Arc::clone(frame))
            .collect())
    }
}
