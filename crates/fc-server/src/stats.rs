//! Per-worker command statistics (`INFO commandstats`, `errorstats`, `latencystats`,
//! `LATENCY HISTOGRAM`) and the clock that times commands.
//!
//! Each worker owns a [`WorkerStats`]: plain counters (`Cell`s, no atomics) per statistics
//! slot — a command's position in the table, or past the table a subcommand's (`config|get`)
//! — written only by the worker's own thread. Readers (`INFO`, `CONFIG RESETSTAT`,
//! `LATENCY HISTOGRAM`) ask every worker for its part by message and sum the parts, so the
//! hot path never touches a line another core writes. The worker thread's stats are also
//! reachable through a thread-local ([`with_current`]) for the handlers that report them.
//!
//! The hot path counts in clock ticks ([`Ticks`]): a call adds its ticks to its slot and one
//! to a histogram of ticks with HDR's buckets (128 per power of two, exact below 256: see
//! [`tick_index`]) up to one second (about 4000 counters, allocated on a command's first
//! call). Readers convert: the sum to microseconds,
//! and the histogram, bucket by bucket, into one of nanoseconds with Redis's parameters (1 ns
//! to 1 s, two significant figures: [`Histogram`]), read with Redis's percentile and
//! cumulative-distribution walks, so `INFO latencystats` and `LATENCY HISTOGRAM` print what
//! Redis prints for the same samples (to the histograms' precision, 1/128).

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Counters of a Redis latency histogram: HDR of 1 ns..=1 s at two significant figures
/// (Redis's `LATENCY_HISTOGRAM_MIN_VALUE`, `_MAX_VALUE`, `_PRECISION`), 23 buckets of 128.
pub(crate) const HIST_LEN: usize = 3072;

/// The largest value a nanosecond histogram records (larger ones are recorded as it).
const HIST_MAX: u64 = 1_000_000_000;

/// The counter index of `value` in an HDR histogram of unit 1 and 256 sub-buckets (128 per
/// power of two past the first 256), as hdr_histogram's `counts_index_for` computes it.
#[inline]
pub(crate) fn hist_index(value: u64) -> usize {
    let bucket = 56 - (value | 255).leading_zeros();
    ((bucket as usize) << 7) + (value >> bucket) as usize
}

/// The tick histogram's counter of `ticks`: the exponent and the top 7 bits of the mantissa
/// of `ticks` as a double, which are HDR's buckets (128 per power of two, unit-wide below
/// 256) for four instructions instead of nine. Past the counters (and for 0, or a negative
/// time read as a huge one) the bounds check fails and [`WorkerStats::record`] takes its
/// rare path.
#[inline]
pub(crate) fn tick_index(ticks: u64) -> usize {
    ((ticks as i64 as f64).to_bits() >> 45).wrapping_sub(1023 << 7) as usize
}

/// The smallest tick count of counter `index` of a tick histogram, and how many it covers.
fn tick_range(index: usize) -> (u64, u64) {
    let low = f64::from_bits(((index as u64) + (1023 << 7)) << 45) as u64;
    let exponent = index >> 7;
    (low, 1 << exponent.saturating_sub(7))
}

/// The bucket (power-of-two magnitude) `value` falls in.
fn bucket_of(value: u64) -> u32 {
    56 - (value | 255).leading_zeros()
}

/// The smallest value of counter `index` (hdr's `hdr_value_at_index`).
pub(crate) fn value_at_index(index: usize) -> u64 {
    let bucket = (index >> 7) as i64 - 1;
    let mut sub = (index & 127) as u64 + 128;
    if bucket < 0 {
        sub -= 128;
        return sub;
    }
    sub << bucket
}

/// The smallest value recorded in the same counter as `value`.
fn lowest_equivalent(value: u64) -> u64 {
    let b = bucket_of(value);
    (value >> b) << b
}

/// The largest value recorded in the same counter as `value`.
fn highest_equivalent(value: u64) -> u64 {
    lowest_equivalent(value) + (1 << bucket_of(value)) - 1
}

/// A histogram summed over workers (plain counts), for reading.
#[derive(Debug, Clone)]
pub(crate) struct Histogram {
    pub(crate) counts: Vec<u64>,
    pub(crate) total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: vec![0; HIST_LEN],
            total: 0,
        }
    }
}

impl Histogram {
    /// Adds `count` samples of `ns` nanoseconds (at most 1 s, as Redis records them).
    pub(crate) fn add(&mut self, ns: u64, count: u64) {
        self.counts[hist_index(ns.min(HIST_MAX))] += count;
        self.total += count;
    }

    /// The value at `percentile` (0 to 100), in nanoseconds, as hdr_histogram's
    /// `hdr_value_at_percentile`: the lowest equivalent value for 0, the highest otherwise.
    pub(crate) fn value_at_percentile(&self, percentile: f64) -> u64 {
        let requested = percentile.min(100.0);
        let wanted = (((requested / 100.0) * self.total as f64) + 0.5) as u64;
        let wanted = wanted.max(1).min(self.total);
        let mut seen = 0;
        let mut value = 0;
        for (index, &count) in self.counts.iter().enumerate() {
            if seen >= wanted {
                break;
            }
            seen += count;
            value = value_at_index(index);
        }
        if percentile == 0.0 {
            lowest_equivalent(value)
        } else {
            highest_equivalent(value)
        }
    }

    /// `LATENCY HISTOGRAM`'s cumulative distribution: (microseconds, samples at or below) at
    /// each power of two from 1024 ns on, as Redis reports it from hdr_histogram's
    /// logarithmic iterator (steps where the cumulative count did not grow are left out).
    pub(crate) fn cdf(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        // The iterator's state.
        let mut index: i64 = -1;
        let mut cumulative = 0u64;
        let mut value = 0u64;
        let mut highest = 0u64;
        let mut level = 1024u64;
        let mut level_lowest = lowest_equivalent(level);
        let mut previous = 0u64;
        loop {
            let more = cumulative < self.total
                || ((index as usize) < HIST_LEN || index < 0)
                    && value_at_index((index + 1) as usize) > level_lowest;
            if !more {
                break;
            }
            loop {
                if value >= level_lowest {
                    level *= 2;
                    level_lowest = lowest_equivalent(level);
                    break;
                }
                index += 1;
                let Some(&count) = self.counts.get(index as usize) else {
                    break;
                };
                cumulative += count;
                value = value_at_index(index as usize);
                highest = lowest_equivalent(value) + (1 << bucket_of(value)) - 1;
            }
            if cumulative > previous {
                out.push((highest / 1000, cumulative));
            }
            previous = cumulative;
            if index as usize >= HIST_LEN && index >= 0 {
                break;
            }
        }
        out
    }
}

/// One statistics slot of one worker: 64 bytes, so that its address is a shift of its index.
#[derive(Default)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// The histogram of its calls' ticks, from its first call: every call is in it (see
    /// [`WorkerStats::set_tracking`] for `latency-tracking no`).
    hist: OnceCell<Box<[Cell<u64>]>>,
    /// Ticks its calls took, together.
    pub(crate) ticks: Cell<u64>,
    pub(crate) failed: Cell<u64>,
    pub(crate) rejected: Cell<u64>,
}

impl Slot {
    /// Its calls: what its histogram counts (one increment a call, not two).
    pub(crate) fn calls(&self) -> u64 {
        self.hist.get().map_or(0, |h| h.iter().map(Cell::get).sum())
    }

    /// Its histogram's counters now.
    fn counts(&self) -> Option<Vec<u64>> {
        self.hist.get().map(|h| h.iter().map(Cell::get).collect())
    }

    fn reset(&self) {
        self.ticks.set(0);
        self.failed.set(0);
        self.rejected.set(0);
        if let Some(counts) = self.hist.get() {
            counts.iter().for_each(|c| c.set(0));
        }
    }
}

/// `latency-tracking`, applied by the readers: the histograms count every call (no test on
/// the hot path), and what was counted while tracking was off is subtracted.
#[derive(Default)]
struct Tracking {
    /// Per slot, the counts to subtract: those made while tracking was off.
    offset: BTreeMap<usize, Vec<u64>>,
    /// While tracking is off, the counts when it went off (a slot missing: none).
    frozen: Option<BTreeMap<usize, Vec<u64>>>,
}

/// Distinct error codes counted at most; further codes count as `ERRORSTATS_OVERFLOW`
/// (Redis 7.2's limit).
const ERROR_CODES: usize = 128;

/// Statistics slots per worker: a power of two past the table's commands and subcommands,
/// so that a slot index is masked rather than bounds-checked.
pub(crate) const SLOTS: usize = 512;

/// One worker's statistics.
pub(crate) struct WorkerStats {
    slots: Box<[Slot; SLOTS]>,
    /// Counters per tick histogram: enough for one second.
    hist_len: usize,
    /// Error replies by code (`ERR`, `WRONGTYPE`...).
    errors: RefCell<BTreeMap<Box<[u8]>, u64>>,
    total_errors: Cell<u64>,
    /// The store's counters (hits, misses, expired, evicted) at the last `CONFIG RESETSTAT`:
    /// `INFO` reports what was counted since.
    pub(crate) store_base: Cell<[u64; 4]>,
    tracking: RefCell<Tracking>,
    /// Messages this worker sent another to run something there (a command or a script on
    /// its keys, a transaction's hold and each of its commands): cross-worker hops, which
    /// a client on a direct shard port never causes.
    pub(crate) hops: Cell<u64>,
}

impl std::fmt::Debug for WorkerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerStats")
            .field("slots", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl WorkerStats {
    /// Statistics timed with `ticks`.
    pub(crate) fn new(ticks: &Ticks) -> Self {
        Self {
            slots: Box::new(std::array::from_fn(|_| Slot::default())),
            hist_len: tick_index(ticks.ticks_of(HIST_MAX)) + 1,
            errors: RefCell::default(),
            total_errors: Cell::new(0),
            store_base: Cell::new([0; 4]),
            tracking: RefCell::default(),
            hops: Cell::new(0),
        }
    }

    /// A call of the command in `slot` that took `ticks`.
    #[inline]
    pub(crate) fn record(&self, slot: usize, ticks: u64) {
        let s = &self.slots[slot & (SLOTS - 1)];
        // The common case inline: a histogram exists and the time fits in it.
        if let Some(c) = s.hist.get().and_then(|h| h.get(tick_index(ticks))) {
            c.set(c.get() + 1);
            s.ticks.set(s.ticks.get() + ticks);
        } else {
            self.record_rare(s, ticks);
        }
    }

    /// [`WorkerStats::record`] on a first call (allocating the histogram), past a second
    /// (counted as one second, as Redis does), or for a time that went backwards (counted
    /// as 0).
    #[cold]
    #[inline(never)]
    fn record_rare(&self, s: &Slot, ticks: u64) {
        let ticks = if ticks > i64::MAX as u64 { 0 } else { ticks };
        s.ticks.set(s.ticks.get() + ticks);
        let hist = s
            .hist
            .get_or_init(|| (0..self.hist_len).map(|_| Cell::new(0)).collect());
        let c = &hist[tick_index(ticks.max(1)).min(hist.len() - 1)];
        c.set(c.get() + 1);
    }

    /// `latency-tracking yes|no` on this worker: off, the histograms read as they are now
    /// until it is on again, and what they count meanwhile is never reported.
    pub(crate) fn set_tracking(&self, on: bool) {
        let mut tracking = self.tracking.borrow_mut();
        match (on, tracking.frozen.take()) {
            (false, None) => {
                let now = self.snapshot();
                tracking.frozen = Some(now);
            }
            (true, Some(frozen)) => {
                for (slot, now) in self.snapshot() {
                    let offset = tracking
                        .offset
                        .entry(slot)
                        .or_insert_with(|| vec![0; now.len()]);
                    let then = frozen.get(&slot);
                    for (i, (o, n)) in offset.iter_mut().zip(&now).enumerate() {
                        *o += n - then.map_or(0, |t| t[i]);
                    }
                }
            }
            (_, frozen) => tracking.frozen = frozen,
        }
    }

    /// Every histogram's counters now, by slot.
    fn snapshot(&self) -> BTreeMap<usize, Vec<u64>> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.counts()?)))
            .collect()
    }

    /// The latency histogram of `slot` as `LATENCY HISTOGRAM` and `INFO latencystats`
    /// report it: the calls made while `latency-tracking` was on.
    pub(crate) fn tracked(&self, slot: usize) -> Option<Vec<u64>> {
        let tracking = self.tracking.borrow();
        let mut counts = match &tracking.frozen {
            Some(frozen) => frozen.get(&slot)?.clone(),
            None => self.slots.get(slot)?.counts()?,
        };
        if let Some(offset) = tracking.offset.get(&slot) {
            counts.iter_mut().zip(offset).for_each(|(c, o)| *c -= o);
        }
        Some(counts)
    }

    /// A call of the command in `slot` that answered an error (counted once per call: see
    /// [`crate::reply::Resp::failed_slot`]).
    pub(crate) fn fail(&self, slot: usize) {
        if let Some(s) = self.slots.get(slot) {
            s.failed.set(s.failed.get() + 1);
        }
    }

    /// A command refused before it ran (arity, authentication, ...).
    pub(crate) fn reject(&self, slot: usize) {
        if let Some(s) = self.slots.get(slot) {
            s.rejected.set(s.rejected.get() + 1);
        }
    }

    /// An error reply: counted under its code, the text's first word (Redis's rule: a space
    /// within its first 31 bytes ends the code, else it counts as `ERR`).
    pub(crate) fn error(&self, text: &[u8]) {
        self.total_errors.set(self.total_errors.get() + 1);
        let code = match text.iter().take(31).position(|&b| b == b' ') {
            Some(end) => &text[..end],
            None => b"ERR",
        };
        let mut errors = self.errors.borrow_mut();
        if let Some(n) = errors.get_mut(code) {
            *n += 1;
        } else if errors.len() < ERROR_CODES {
            errors.insert(code.into(), 1);
        } else {
            *errors.entry(b"ERRORSTATS_OVERFLOW"[..].into()).or_insert(0) += 1;
        }
    }

    pub(crate) fn slots(&self) -> &[Slot] {
        &self.slots[..]
    }

    pub(crate) fn total_errors(&self) -> u64 {
        self.total_errors.get()
    }

    /// Error counts by code, in code order.
    pub(crate) fn errors(&self) -> Vec<(Box<[u8]>, u64)> {
        self.errors
            .borrow()
            .iter()
            .map(|(code, n)| (code.clone(), *n))
            .collect()
    }

    /// `CONFIG RESETSTAT`: every counter to zero (`store_base` is the caller's).
    pub(crate) fn reset(&self) {
        self.slots.iter().for_each(Slot::reset);
        self.errors.borrow_mut().clear();
        self.total_errors.set(0);
        let mut tracking = self.tracking.borrow_mut();
        tracking.offset.clear();
        if let Some(frozen) = &mut tracking.frozen {
            frozen.clear();
        }
    }
}

thread_local! {
    /// The statistics of the worker running on this thread.
    static CURRENT: RefCell<Option<Rc<WorkerStats>>> = const { RefCell::new(None) };
}

/// Makes `stats` this thread's worker statistics.
pub(crate) fn set_current(stats: Rc<WorkerStats>) {
    CURRENT.with(|c| *c.borrow_mut() = Some(stats));
}

tokio::task_local! {
    /// Set while the server observes itself (an admin port scrape, `INFO`): its own messages to
    /// other workers are not the clients' hops.
    static UNCOUNTED: ();
}

/// Runs `work` without counting its cross-worker hops.
pub(crate) async fn uncounted<F: std::future::Future>(work: F) -> F::Output {
    UNCOUNTED.scope((), work).await
}

/// Counts a cross-worker hop of this thread's worker (see [`WorkerStats::hops`]).
pub(crate) fn hop() {
    if UNCOUNTED.try_with(|()| ()).is_ok() {
        return;
    }
    with_current(|stats| {
        if let Some(stats) = stats {
            stats.hops.set(stats.hops.get() + 1);
        }
    });
}

/// Runs `f` with this thread's worker statistics (`None` off a worker thread).
pub(crate) fn with_current<T>(f: impl FnOnce(Option<&WorkerStats>) -> T) -> T {
    CURRENT.with(|c| f(c.borrow().as_deref()))
}

/// The clock commands are timed with. On x86-64, the TSC, read inline (`rdtsc`: about 20
/// cycles and three instructions per command boundary), at the rate `quanta` calibrated
/// against the monotonic clock when it found the TSC invariant, else at a rate measured here
/// over 2 ms (a TSC that is not invariant may then drift with the CPU's frequency); elsewhere
/// the monotonic clock through `quanta`. Counters keep ticks; readers convert them.
#[derive(Clone, Debug)]
pub(crate) struct Ticks {
    #[cfg_attr(
        target_arch = "x86_64",
        expect(dead_code, reason = "read on other targets")
    )]
    clock: quanta::Clock,
    /// Nanoseconds per 2^32 ticks.
    scale: u64,
}

impl Ticks {
    pub(crate) fn new() -> Self {
        let clock = quanta::Clock::new();
        let mut scale = clock.delta_as_nanos(0, 1 << 32).max(1);
        if cfg!(target_arch = "x86_64") {
            // quanta reads the TSC exactly when its raw value falls between two reads of it;
            // otherwise its scale is the monotonic clock's, and the TSC's is measured here.
            let quanta_tsc = (0..8).any(|_| {
                let before = rdtsc();
                let raw = clock.raw();
                let after = rdtsc();
                before <= raw && raw <= after
            });
            if !quanta_tsc {
                let (t0, c0) = (std::time::Instant::now(), rdtsc());
                while t0.elapsed() < std::time::Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
                let (ns, ticks) = (t0.elapsed().as_nanos(), rdtsc().wrapping_sub(c0));
                scale = u64::try_from((ns << 32) / u128::from(ticks.max(1))).unwrap_or(1 << 32);
            }
        }
        Self { clock, scale }
    }

    /// Now, in ticks.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            rdtsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.clock.raw()
        }
    }

    /// Ticks from `start` to `end` (a huge count if the counter went backwards, as across
    /// cores whose counters disagree: [`WorkerStats::record`] counts it as 0).
    #[inline]
    pub(crate) fn since(start: u64, end: u64) -> u64 {
        end.wrapping_sub(start)
    }

    /// Ticks in nanoseconds.
    pub(crate) fn nanos(&self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.scale)) >> 32) as u64
    }

    /// Nanoseconds in ticks (saturating).
    pub(crate) fn ticks_of(&self, ns: u64) -> u64 {
        u64::try_from((u128::from(ns) << 32) / u128::from(self.scale)).unwrap_or(u64::MAX)
    }

    /// A tick histogram's counters as a histogram of nanoseconds: each counter's samples
    /// at the middle of its range.
    pub(crate) fn add_to(&self, hist: &mut Histogram, index: usize, count: u64) {
        let (low, width) = tick_range(index);
        hist.add(self.nanos(low + width / 2), count);
    }
}

/// The time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtsc() -> u64 {
    safe_arch::read_timestamp_counter()
}

/// No time-stamp counter here (never read).
#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_match_hdr_histogram() {
        // Unit resolution below 256, then 128 sub-buckets per power of two.
        assert_eq!(hist_index(1), 1);
        assert_eq!(hist_index(255), 255);
        assert_eq!(hist_index(256), 256);
        assert_eq!(hist_index(257), 256);
        assert_eq!(hist_index(1024), 3 * 128 + 128);
        for v in [1u64, 200, 256, 1000, 1031, 4096, 50_000_000, 999_999_999] {
            let i = hist_index(v);
            assert!(value_at_index(i) <= v && v <= highest_equivalent(value_at_index(i)));
        }
        assert_eq!(highest_equivalent(1024), 1031);
        assert_eq!(highest_equivalent(32768), 33023);
    }

    fn histogram(values: &[u64]) -> Histogram {
        let mut h = Histogram::default();
        for &v in values {
            h.add(v, 1);
        }
        h
    }

    #[test]
    fn percentiles_and_cdf_read_as_redis_does() {
        // Redis records whole microseconds as nanoseconds.
        let h = histogram(&[2000, 3000, 5000, 32000]);
        assert_eq!(h.value_at_percentile(0.0), 2000);
        assert_eq!(h.value_at_percentile(50.0), 3007);
        assert_eq!(h.value_at_percentile(100.0), 32127);
        // Samples at 1, 2, 4 and 33 us, as Redis prints them.
        let h = histogram(&[1, 1500, 3000, 30000]);
        assert_eq!(h.cdf(), vec![(1, 1), (2, 2), (4, 3), (33, 4)]);
        let h = histogram(&[50_100_000]);
        assert_eq!(h.cdf(), vec![(67633, 1)]);
        assert_eq!(histogram(&[]).cdf(), vec![]);
    }

    #[test]
    fn tick_indexes_are_hdr_buckets() {
        // Unit-wide below 256, then 128 per power of two, as hdr_histogram's.
        let mut previous = 0;
        for v in 1u64..100_000 {
            let i = tick_index(v);
            let (low, width) = tick_range(i);
            assert!(low <= v && v < low + width, "{v}: {low} {width}");
            assert!(i >= previous);
            previous = i;
            assert_eq!(
                hist_index(v) - hist_index(low),
                0,
                "{v} shares its HDR counter with {low}"
            );
        }
        assert!(tick_index(0) > 1 << 40);
        assert!(tick_index(u64::MAX) > 100_000);
    }

    #[test]
    fn errors_count_by_code() {
        let ticks = Ticks::new();
        let stats = WorkerStats::new(&ticks);
        stats.error(b"ERR unknown command");
        stats.error(b"WRONGTYPE Operation against a key");
        stats.error(b"ERR syntax error");
        stats.error(b"NOSPACEWITHINTHEFIRSTTHIRTYONEBYTESATALL");
        assert_eq!(stats.total_errors(), 4);
        assert_eq!(
            stats.errors(),
            vec![(b"ERR"[..].into(), 3), (b"WRONGTYPE"[..].into(), 1)]
        );
        stats.record(2, 1500);
        stats.record(2, 1 << 40);
        stats.fail(2);
        stats.reject(2);
        assert_eq!(stats.slots()[2].calls(), 2);
        let hist = stats.slots()[2].hist.get().unwrap();
        assert_eq!(hist[tick_index(1500)].get(), 1);
        assert_eq!(hist[hist.len() - 1].get(), 1);
        let mut ns = Histogram::default();
        ticks.add_to(&mut ns, tick_index(1500), 1);
        assert_eq!(ns.total, 1);
        // Negative (wrapped) times count as 0.
        stats.record(2, 5u64.wrapping_sub(9));
        assert_eq!(stats.slots()[2].ticks.get(), 1500 + (1 << 40));
        assert_eq!(stats.slots()[2].calls(), 3);
        assert_eq!(stats.slots()[2].failed.get(), 1);
        assert_eq!(stats.slots()[2].rejected.get(), 1);
        // Tracking off: calls are counted, histograms read as they were.
        let total = |stats: &WorkerStats| stats.tracked(2).unwrap().iter().sum::<u64>();
        stats.set_tracking(false);
        stats.record(2, 1500);
        stats.record(3, 1500);
        assert_eq!((stats.slots()[2].calls(), total(&stats)), (4, 3));
        assert_eq!(stats.tracked(3), None);
        stats.set_tracking(true);
        stats.record(2, 1500);
        assert_eq!((stats.slots()[2].calls(), total(&stats)), (5, 4));
        assert_eq!(stats.tracked(3).unwrap().iter().sum::<u64>(), 0);
        stats.reset();
        assert_eq!(stats.total_errors(), 0);
        assert_eq!(stats.slots()[2].calls(), 0);
        assert_eq!(total(&stats), 0);
    }
}
