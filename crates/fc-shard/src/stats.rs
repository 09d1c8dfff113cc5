//! Statistics snapshots: plain per-shard counters, summed on read.

/// Counters and sizes of one shard at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardStatsSnapshot {
    /// Shard index.
    pub shard: usize,
    /// Entries in the shard (may include expired entries not yet reclaimed, as Redis's `DBSIZE`).
    pub keys: u64,
    /// Entries that carry an expiry.
    pub expires: u64,
    /// Key plus value bytes of every entry.
    pub stored_bytes: u64,
    /// Bytes the shard holds for entries: pages, large allocations and its index.
    pub allocated_bytes: u64,
    /// Reads that found a live entry.
    pub hits: u64,
    /// Reads that found nothing (or an expired entry).
    pub misses: u64,
    /// Entries written (inserted or overwritten).
    pub sets: u64,
    /// Entries deleted by callers.
    pub deletes: u64,
    /// Entries removed because they expired.
    pub expired: u64,
    /// Entries removed by eviction.
    pub evicted: u64,
    /// Bytes freed by eviction (as charged against the budget).
    pub evicted_bytes: u64,
    /// Bytes charged against the memory budget: every entry's chunk plus its index share (see
    /// [`crate::INDEX_BYTES_PER_ENTRY`]).
    pub used_memory: u64,
    /// The shard's memory budget; 0 when unlimited.
    pub max_memory: u64,
    /// Mutations so far (the sequence number of the last [`crate::Mutation`]).
    pub mutation_seq: u64,
}

/// Statistics of every shard of a store (or of a worker's shards), with totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierStatsSnapshot {
    /// One entry per shard, in shard order.
    pub shards: Vec<ShardStatsSnapshot>,
}

impl TierStatsSnapshot {
    /// The sum over all shards (`shard` is the number of shards summed).
    #[must_use]
    pub fn total(&self) -> ShardStatsSnapshot {
        let mut total = ShardStatsSnapshot {
            shard: self.shards.len(),
            ..ShardStatsSnapshot::default()
        };
        for s in &self.shards {
            total.keys += s.keys;
            total.expires += s.expires;
            total.stored_bytes += s.stored_bytes;
            total.allocated_bytes += s.allocated_bytes;
            total.hits += s.hits;
            total.misses += s.misses;
            total.sets += s.sets;
            total.deletes += s.deletes;
            total.expired += s.expired;
            total.evicted += s.evicted;
            total.evicted_bytes += s.evicted_bytes;
            total.used_memory += s.used_memory;
            total.max_memory += s.max_memory;
            total.mutation_seq += s.mutation_seq;
        }
        total
    }

    /// Hits ÷ (hits + misses), or 0 with no reads.
    #[must_use]
    pub fn hit_ratio(&self) -> f64 {
        let t = self.total();
        let reads = t.hits + t.misses;
        if reads == 0 {
            0.0
        } else {
            t.hits as f64 / reads as f64
        }
    }
}

/// Outcome of one [`process_maintenance`](crate::EmbeddedStore::process_maintenance) call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaintenanceReport {
    /// Entry slots examined.
    pub scanned: u64,
    /// Expired entries removed.
    pub expired: u64,
    /// Live entries with an expiry examined (expired or not): `expired / with_ttl` estimates
    /// how stale the keys with a TTL are.
    pub with_ttl: u64,
    /// Whether the sweep reached the end of every shard it visited (a full pass completed).
    pub completed_pass: bool,
}

impl MaintenanceReport {
    pub(crate) fn merge(&mut self, other: Self) {
        self.scanned += other.scanned;
        self.expired += other.expired;
        self.with_ttl += other.with_ttl;
        self.completed_pass &= other.completed_pass;
    }
}

/// Remaining time to live of a key, as `TTL`/`PTTL` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyTtl {
    /// No such key (Redis: -2).
    Missing,
    /// The key exists and never expires (Redis: -1).
    Persistent,
    /// The key expires after this many units (seconds or milliseconds, per the method).
    ExpiresIn(u64),
}

impl KeyTtl {
    /// Redis's integer encoding: -2 missing, -1 persistent, else the remaining time.
    #[must_use]
    pub fn to_redis(self) -> i64 {
        match self {
            Self::Missing => -2,
            Self::Persistent => -1,
            Self::ExpiresIn(n) => i64::try_from(n).unwrap_or(i64::MAX),
        }
    }
}
