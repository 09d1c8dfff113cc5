//! Watching the server as Redis's tools do: the slow log (`SLOWLOG`), the latency monitor
//! (`LATENCY` events `command` and `fast-command`), `MONITOR` lines, and their settings
//! (`slowlog-log-slower-than`, `slowlog-max-len`, `latency-monitor-threshold`,
//! `latency-tracking`, `latency-tracking-info-percentiles`).
//!
//! What a command pays: the connection times it (one clock read per command, see
//! [`crate::stats::Ticks`]), adds it to its worker's counters ([`crate::stats`]), and compares
//! the time with one threshold read once per batch ([`Gate::slow_ticks`]: the smallest of the
//! slow log's and the latency monitor's, 0 while a client monitors). Only a command at or past
//! it takes [`Observe::after`], which takes the slow log's or the latency monitor's lock when
//! the command qualifies and formats the monitor line when a monitor listens.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use bytes::Bytes;

use crate::clients::Client;
use crate::command::{self, F, Session, Spec};
use crate::pubsub::PubSub;
use crate::stats::Ticks;

/// Arguments kept per slow log entry, at most (the last says how many more there were).
const SLOWLOG_ARGS: usize = 32;
/// Bytes kept per slow log argument, at most.
const SLOWLOG_ARG_BYTES: usize = 128;
/// Samples kept per latency event (one per second at most).
const LATENCY_SAMPLES: usize = 160;

/// One slow log entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    /// Unix seconds when it was logged.
    pub(crate) time: u64,
    /// Microseconds the command took.
    pub(crate) micros: u64,
    pub(crate) args: Vec<Bytes>,
    pub(crate) addr: String,
    pub(crate) name: Bytes,
}

#[derive(Debug, Default)]
struct SlowLog {
    next_id: u64,
    /// Newest first.
    entries: VecDeque<Entry>,
}

/// One latency sample: the worst latency (ms) of one second.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    pub(crate) time: u64,
    pub(crate) ms: u64,
}

/// One latency event's samples (a ring, oldest overwritten) and its worst ever.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    samples: [Sample; LATENCY_SAMPLES],
    next: usize,
    pub(crate) max: u64,
}

impl Series {
    fn new() -> Self {
        Self {
            samples: [Sample::default(); LATENCY_SAMPLES],
            next: 0,
            max: 0,
        }
    }

    /// Redis's `latencyAddSample`: one sample per second, the worst of that second.
    fn add(&mut self, now: u64, ms: u64) {
        self.max = self.max.max(ms);
        let prev = (self.next + LATENCY_SAMPLES - 1) % LATENCY_SAMPLES;
        if self.samples[prev].time == now {
            self.samples[prev].ms = self.samples[prev].ms.max(ms);
            return;
        }
        self.samples[self.next] = Sample { time: now, ms };
        self.next = (self.next + 1) % LATENCY_SAMPLES;
    }

    /// The samples, oldest first.
    pub(crate) fn samples(&self) -> Vec<Sample> {
        (0..LATENCY_SAMPLES)
            .map(|j| self.samples[(self.next + j) % LATENCY_SAMPLES])
            .filter(|s| s.time != 0)
            .collect()
    }

    /// The latest sample.
    pub(crate) fn latest(&self) -> Sample {
        self.samples[(self.next + LATENCY_SAMPLES - 1) % LATENCY_SAMPLES]
    }
}

/// What every connection reads once per batch of commands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gate {
    /// Commands that took at least this many clock ticks go through [`Observe::after`]
    /// (`u64::MAX`: none; 0: all, while a client monitors).
    pub(crate) slow_ticks: u64,
    /// Whether a command's arguments must outlive it (the slow log is on, or a client
    /// monitors): the connection keeps them for [`Observe::after`] when the command takes
    /// them away (a command sent to another worker).
    pub(crate) keep_args: bool,
}

/// The settings, the slow log and the latency events, shared by every worker.
#[derive(Debug)]
pub(crate) struct Observe {
    /// `slowlog-log-slower-than`, microseconds (negative: off).
    slower_than: AtomicI64,
    /// `slowlog-max-len`.
    max_len: AtomicU64,
    /// `latency-monitor-threshold`, milliseconds (0: off).
    latency_ms: AtomicU64,
    /// `latency-tracking`.
    tracking: AtomicBool,
    /// `latency-tracking-info-percentiles`.
    percentiles: RwLock<Vec<f64>>,
    /// The slow log's threshold in clock ticks (`u64::MAX`: off).
    slowlog_ticks: AtomicU64,
    /// The latency monitor's threshold in clock ticks (`u64::MAX`: off).
    latency_ticks: AtomicU64,
    /// The clock every worker times commands with (the thresholds' unit).
    ticks: Ticks,
    slowlog: Mutex<SlowLog>,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The configured values of the settings (the TOML file's, Redis's defaults otherwise).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) slower_than: i64,
    pub(crate) max_len: u64,
    pub(crate) latency_ms: u64,
}

impl Observe {
    pub(crate) fn new(settings: Settings, ticks: Ticks) -> Self {
        let observe = Self {
            slower_than: AtomicI64::new(settings.slower_than),
            max_len: AtomicU64::new(settings.max_len),
            latency_ms: AtomicU64::new(settings.latency_ms),
            tracking: AtomicBool::new(true),
            percentiles: RwLock::new(vec![50.0, 99.0, 99.9]),
            slowlog_ticks: AtomicU64::new(u64::MAX),
            latency_ticks: AtomicU64::new(u64::MAX),
            ticks,
            slowlog: Mutex::default(),
            events: Mutex::default(),
        };
        observe.thresholds();
        observe
    }

    /// The clock commands are timed with.
    pub(crate) fn ticks(&self) -> &Ticks {
        &self.ticks
    }

    /// Recomputes the thresholds in ticks from the settings.
    fn thresholds(&self) {
        let slower_than = self.slower_than();
        let slowlog = if slower_than >= 0 && self.max_len() > 0 {
            self.ticks
                .ticks_of((slower_than as u64).saturating_mul(1000))
        } else {
            u64::MAX
        };
        let latency = match self.latency_ms() {
            0 => u64::MAX,
            ms => self.ticks.ticks_of(ms.saturating_mul(1_000_000)),
        };
        self.slowlog_ticks.store(slowlog, Ordering::Relaxed);
        self.latency_ticks.store(latency, Ordering::Relaxed);
    }

    /// What commands pay now: read once per batch.
    #[inline]
    pub(crate) fn gate(&self, pubsub: &PubSub) -> Gate {
        let slowlog = self.slowlog_ticks.load(Ordering::Relaxed);
        let latency = self.latency_ticks.load(Ordering::Relaxed);
        let monitoring = pubsub.monitoring();
        Gate {
            slow_ticks: if monitoring { 0 } else { slowlog.min(latency) },
            keep_args: slowlog != u64::MAX || monitoring,
        }
    }

    pub(crate) fn slower_than(&self) -> i64 {
        self.slower_than.load(Ordering::Relaxed)
    }

    pub(crate) fn max_len(&self) -> u64 {
        self.max_len.load(Ordering::Relaxed)
    }

    pub(crate) fn latency_ms(&self) -> u64 {
        self.latency_ms.load(Ordering::Relaxed)
    }

    pub(crate) fn tracking(&self) -> bool {
        self.tracking.load(Ordering::Relaxed)
    }

    pub(crate) fn percentiles(&self) -> Vec<f64> {
        self.percentiles
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_slower_than(&self, micros: i64) {
        self.slower_than.store(micros, Ordering::Relaxed);
        self.thresholds();
        self.trim();
    }

    pub(crate) fn set_max_len(&self, len: u64) {
        self.max_len.store(len, Ordering::Relaxed);
        self.thresholds();
        self.trim();
    }

    pub(crate) fn set_latency_ms(&self, ms: u64) {
        self.latency_ms.store(ms, Ordering::Relaxed);
        self.thresholds();
    }

    pub(crate) fn set_tracking(&self, on: bool) {
        self.tracking.store(on, Ordering::Relaxed);
    }

    pub(crate) fn set_percentiles(&self, percentiles: Vec<f64>) {
        *self
            .percentiles
            .write()
            .unwrap_or_else(PoisonError::into_inner) = percentiles;
    }

    /// Redis trims the slow log to its length after every command while it is on; the length
    /// changes only by `CONFIG SET` (trimmed here) and by new entries.
    fn trim(&self) {
        let max_len = self.max_len();
        if self.slower_than() < 0 || max_len == 0 {
            return;
        }
        let mut log = lock(&self.slowlog);
        log.entries
            .truncate(usize::try_from(max_len).unwrap_or(usize::MAX));
    }

    /// After a command (in statistics slot `slot`) that took `ticks`, at or past
    /// [`Gate::slow_ticks`]: the monitor line (when `feed`), the slow log entry, the latency
    /// sample, each when it is due. `args` is the command as the client sent it (`None` when
    /// it was not kept: neither the slow log nor a monitor wants it).
    #[expect(
        clippy::too_many_arguments,
        reason = "the command's whole context, once"
    )]
    pub(crate) fn after(
        &self,
        pubsub: &PubSub,
        client: &Client,
        now_ms: u64,
        spec: &'static Spec,
        slot: usize,
        args: Option<&[Bytes]>,
        ticks: u64,
        feed: bool,
    ) {
        let ns = self.ticks.nanos(ticks);
        let flags = command::slot_flags(slot);
        let args = args.map(|a| redact(spec, a));
        if let Some(args) = &args
            && feed
        {
            Self::feed(pubsub, client, now_ms, flags, args);
        }
        let max_len = self.max_len();
        if let Some(args) = &args
            && ticks >= self.slowlog_ticks.load(Ordering::Relaxed)
            && flags & F::SKIP_SLOWLOG == 0
        {
            let entry_args = slowlog_args(args);
            let name = client.name().unwrap_or_default();
            let mut log = lock(&self.slowlog);
            let id = log.next_id;
            log.next_id += 1;
            log.entries.push_front(Entry {
                id,
                time: unix_now().0,
                micros: ns / 1000,
                args: entry_args,
                addr: client.addr.clone(),
                name,
            });
            log.entries
                .truncate(usize::try_from(max_len).unwrap_or(usize::MAX));
        }
        if ticks >= self.latency_ticks.load(Ordering::Relaxed) {
            let ms = ns / 1_000_000;
            let event = if flags & F::FAST != 0 {
                "fast-command"
            } else {
                "command"
            };
            lock(&self.events)
                .entry(event)
                .or_insert_with(Series::new)
                .add(unix_now().0, ms);
        }
    }

    /// The monitor line of a command (in statistics slot `slot`) that just ran, unless it is
    /// one Redis keeps from monitors (`admin`, `skip_monitor`) or no one monitors.
    pub(crate) fn monitor(
        pubsub: &PubSub,
        client: &Client,
        now_ms: u64,
        spec: &'static Spec,
        slot: usize,
        args: &[Bytes],
    ) {
        let flags = command::slot_flags(slot);
        Self::feed(pubsub, client, now_ms, flags, &redact(spec, args));
    }

    fn feed(pubsub: &PubSub, client: &Client, now_ms: u64, flags: u32, args: &[Bytes]) {
        if flags & (F::SKIP_MONITOR | F::ADMIN) == 0 && pubsub.monitoring() {
            let db = client.db.load(std::sync::atomic::Ordering::Relaxed);
            pubsub.feed_monitors(monitor_line(db, &client.addr, args), now_ms);
        }
    }

    /// `SLOWLOG GET`: the newest `count` entries (all with `None`).
    pub(crate) fn slowlog(&self, count: Option<usize>) -> Vec<Entry> {
        let log = lock(&self.slowlog);
        log.entries
            .iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub(crate) fn slowlog_len(&self) -> usize {
        lock(&self.slowlog).entries.len()
    }

    pub(crate) fn slowlog_reset(&self) {
        lock(&self.slowlog).entries.clear();
    }

    /// Every latency event with its series.
    pub(crate) fn events(&self) -> Vec<(&'static str, Series)> {
        lock(&self.events)
            .iter()
            .map(|(name, series)| (*name, series.clone()))
            .collect()
    }

    /// One event's series (its name as given: Redis looks it up case-sensitively).
    pub(crate) fn event(&self, name: &[u8]) -> Option<(&'static str, Series)> {
        lock(&self.events)
            .iter()
            .find(|(event, _)| event.as_bytes() == name)
            .map(|(name, series)| (*name, series.clone()))
    }

    /// `LATENCY RESET`: the events named (any case), or all; how many were reset.
    pub(crate) fn reset_events(&self, names: &[Bytes]) -> usize {
        let mut events = lock(&self.events);
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let mut resets = 0;
        for name in names {
            let found = events
                .keys()
                .copied()
                .find(|event| event.as_bytes().eq_ignore_ascii_case(name));
            if let Some(event) = found {
                events.remove(event);
                resets += 1;
            }
        }
        resets
    }
}

/// Unix time now: seconds and microseconds.
fn unix_now() -> (u64, u32) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (now.as_secs(), now.subsec_micros())
}

/// `(redacted)`, in place of a secret.
fn redacted() -> Bytes {
    Bytes::from_static(b"(redacted)")
}

/// The arguments as the slow log and monitors show them: Redis redacts `AUTH`'s password
/// (and user), `HELLO ... AUTH`'s user and password, and `CONFIG SET requirepass`'s value —
/// only where its own command redacts them (a malformed `AUTH` or a `HELLO` refused before its
/// options are read keeps them).
fn redact<'a>(spec: &'static Spec, args: &'a [Bytes]) -> Cow<'a, [Bytes]> {
    match spec.session() {
        Some(Session::Auth) if args.len() <= 3 => {
            let mut out = args.to_vec();
            out[1..].iter_mut().for_each(|a| *a = redacted());
            Cow::Owned(out)
        }
        Some(Session::Hello) if args.len() > 2 => {
            if !matches!(fc_resp::number::parse_i64(&args[1]), Some(2 | 3)) {
                return Cow::Borrowed(args);
            }
            let mut out = args.to_vec();
            let mut j = 2;
            while j < out.len() {
                let more = out.len() - 1 - j;
                if out[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                    out[j + 1] = redacted();
                    out[j + 2] = redacted();
                    j += 3;
                } else if out[j].eq_ignore_ascii_case(b"setname")
                    && more >= 1
                    && valid_client_name(&out[j + 1])
                {
                    j += 2;
                } else {
                    break;
                }
            }
            Cow::Owned(out)
        }
        Some(Session::Config)
            if args.len() >= 4
                && args[1].eq_ignore_ascii_case(b"set")
                && args[2..]
                    .chunks(2)
                    .any(|p| p[0].eq_ignore_ascii_case(b"requirepass")) =>
        {
            let mut out = args.to_vec();
            for pair in out[2..].chunks_mut(2) {
                if pair.len() == 2 && pair[0].eq_ignore_ascii_case(b"requirepass") {
                    pair[1] = redacted();
                }
            }
            Cow::Owned(out)
        }
        _ => Cow::Borrowed(args),
    }
}

/// Whether `name` may be a client's name (`CLIENT SETNAME`, `HELLO ... SETNAME`).
pub(crate) fn valid_client_name(name: &[u8]) -> bool {
    !name.iter().any(|&b| b <= b' ' || b > b'~')
}

/// A slow log entry's arguments: at most 32 (the last one then says how many more there were)
/// and each at most 128 bytes (then followed by how many more it had), as Redis keeps them.
fn slowlog_args(args: &[Bytes]) -> Vec<Bytes> {
    let kept = args.len().min(SLOWLOG_ARGS);
    (0..kept)
        .map(|j| {
            if kept != args.len() && j == kept - 1 {
                Bytes::from(format!("... ({} more arguments)", args.len() - kept + 1))
            } else if args[j].len() > SLOWLOG_ARG_BYTES {
                let mut cut = args[j][..SLOWLOG_ARG_BYTES].to_vec();
                let more = args[j].len() - SLOWLOG_ARG_BYTES;
                cut.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
                Bytes::from(cut)
            } else {
                args[j].clone()
            }
        })
        .collect()
}

/// A `MONITOR` line without its `+` and line end: `<unix>.<micros> [<db> <addr>] "arg" ...`,
/// each argument quoted as Redis's `sdscatrepr` quotes it.
fn monitor_line(db: u32, addr: &str, args: &[Bytes]) -> Bytes {
    let (secs, micros) = unix_now();
    let mut line = Vec::with_capacity(48 + args.iter().map(|a| a.len() + 3).sum::<usize>());
    line.extend_from_slice(format!("{secs}.{micros:06} [{db} {addr}]").as_bytes());
    for arg in args {
        line.push(b' ');
        repr(&mut line, arg);
    }
    Bytes::from(line)
}

/// Redis's `sdscatrepr`: quoted, with `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b` escaped and
/// other bytes outside printable ASCII as `\xhh`.
pub(crate) fn repr(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// A percentile as Redis prints one (`%f` without trailing zeros: `99.9`, `50`).
pub(crate) fn percentile_text(p: f64) -> String {
    let text = format!("{p:.6}");
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_string()
}

/// Parses `latency-tracking-info-percentiles` as Redis does; the reason on failure.
pub(crate) fn parse_percentiles(text: &str) -> Result<Vec<f64>, &'static str> {
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        let p: f64 = word
            .parse()
            .ok()
            .filter(|p: &f64| !p.is_nan())
            .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
            );
        }
        out.push(p);
    }
    Ok(out)
}

/// `LATENCY GRAPH`'s text: a header, a rule, and Redis's sparkline of the samples (4 rows,
/// 80 columns per block, labelled with their age).
pub(crate) fn graph(event: &str, series: &Series) -> String {
    let now = unix_now().0;
    let samples = series.samples();
    let (mut low, mut high) = (0, 0);
    let mut points = Vec::with_capacity(samples.len());
    for (i, s) in samples.iter().enumerate() {
        if i == 0 {
            (low, high) = (s.ms, s.ms);
        } else {
            low = low.min(s.ms);
            high = high.max(s.ms);
        }
        let elapsed = now.saturating_sub(s.time);
        let label = if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 86_400 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / 86_400)
        };
        points.push((s.ms as f64, label));
    }
    let mut out = format!(
        "{event} - high {high} ms, low {low} ms (all time high {} ms)\n",
        series.max
    );
    out.push_str(&"-".repeat(80));
    out.push('\n');
    sparkline(&mut out, &points, 80, 4);
    out
}

/// Redis's `sparklineRender` with `SPARKLINE_FILL`.
fn sparkline(out: &mut String, points: &[(f64, String)], columns: usize, rows: usize) {
    let (min, max) = points
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (v, _)| {
            (lo.min(*v), hi.max(*v))
        });
    let labels = points.iter().filter(|(_, l)| !l.is_empty()).count();
    let mut start = 0;
    while start < points.len() {
        let len = (points.len() - start).min(columns);
        if start != 0 {
            out.push('\n');
        }
        let chunk = &points[start..start + len];
        let relmax = if max - min == 0.0 { 1.0 } else { max - min };
        let steps = (3 * rows) as f64;
        let mut row = 0;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; len];
            for (j, (value, label)) in chunk.iter().enumerate() {
                let relval = value - min;
                let step = (((relval * steps) as i64) as f64 / relmax) as i64;
                let step = step.clamp(0, steps as i64 - 1);
                if row < rows {
                    let charidx = step - ((rows - row - 1) * 3) as i64;
                    more = true;
                    if (0..3).contains(&charidx) {
                        chars[j] = b"_o#"[charidx as usize];
                    } else if charidx >= 3 {
                        chars[j] = b'|';
                    }
                } else {
                    if labels > 0 && row - rows < 1 {
                        more = true;
                        break;
                    }
                    let at = row - rows - 1;
                    if let Some(&c) = label.as_bytes().get(at) {
                        more = true;
                        chars[j] = c;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
        start += columns;
    }
}

/// `LATENCY DOCTOR`'s report, as Redis words it for the events fc-server records.
pub(crate) fn doctor(
    events: &[(&'static str, Series)],
    slower_than: i64,
    latency_ms: u64,
) -> String {
    if events.is_empty() && latency_ms == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".to_string();
    }
    let now = unix_now().0;
    let mut report = String::new();
    let (mut slowlog_enable, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut large_objects) = (false, false);
    let mut advices = 0;
    for (n, (event, series)) in events.iter().enumerate() {
        if n == 0 {
            report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let samples = series.samples();
        let count = samples.len() as u64;
        let sum: u64 = samples.iter().map(|s| s.ms).sum();
        let avg = sum.checked_div(count).unwrap_or(0);
        let mad = samples
            .iter()
            .map(|s| (avg as i64 - s.ms as i64).unsigned_abs())
            .sum::<u64>()
            .checked_div(count)
            .unwrap_or(0);
        let oldest = samples.iter().map(|s| s.time).min().unwrap_or(0);
        let period = if count > 0 {
            now.saturating_sub(oldest).max(1)
        } else {
            0
        };
        let _ = write!(
            report,
            "{}. {event}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
            n + 1,
            period as f64 / count as f64,
            series.max
        );
        if *event == "command" {
            if slower_than < 0 {
                slowlog_enable = true;
                advices += 1;
            } else if slower_than / 1000 > latency_ms as i64 {
                slowlog_tuning = true;
                advices += 1;
            }
            slowlog_inspect = true;
            large_objects = true;
            advices += 2;
        }
        if *event == "fast-command" {
            scheduler = true;
            advices += 1;
        }
        report.push('\n');
    }
    if events.is_empty() && advices == 0 {
        report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    } else if advices == 0 {
        report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    } else {
        report.push_str("\nI have a few advices for you:\n\n");
        if slowlog_enable {
            let _ = writeln!(
                report,
                "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.",
                latency_ms * 1000
            );
        }
        if slowlog_tuning {
            let _ = writeln!(
                report,
                "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.",
                latency_ms * 1000
            );
        }
        if slowlog_inspect {
            report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
        }
        if scheduler {
            report.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
        }
        if large_objects {
            report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&[u8]]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::copy_from_slice(s)).collect()
    }

    #[test]
    fn slowlog_arguments_are_cut_as_redis_cuts_them() {
        let long = vec![b'x'; 200];
        let cut = slowlog_args(&args(&[b"set", b"k", &long]));
        assert_eq!(cut[2].len(), 128 + "... (72 more bytes)".len());
        assert!(cut[2].ends_with(b"x... (72 more bytes)"));
        let many: Vec<Bytes> = (0..42).map(|i| Bytes::from(i.to_string())).collect();
        let cut = slowlog_args(&many);
        assert_eq!(cut.len(), 32);
        assert_eq!(&cut[31][..], b"... (11 more arguments)");
        assert_eq!(&cut[30][..], b"30");
        let exact: Vec<Bytes> = (0..32).map(|i| Bytes::from(i.to_string())).collect();
        assert_eq!(slowlog_args(&exact), exact);
    }

    #[test]
    fn monitor_quotes_as_sdscatrepr() {
        let mut out = Vec::new();
        repr(&mut out, b"v\x01\"\\\n\r\t\x07\x08\xc3\xa9 ~");
        assert_eq!(out, b"\"v\\x01\\\"\\\\\\n\\r\\t\\a\\b\\xc3\\xa9 ~\"");
    }

    #[test]
    fn percentiles_print_and_parse_as_redis() {
        assert_eq!(percentile_text(99.9), "99.9");
        assert_eq!(percentile_text(50.0), "50");
        assert_eq!(percentile_text(0.0), "0");
        assert_eq!(parse_percentiles("50 99 99.9"), Ok(vec![50.0, 99.0, 99.9]));
        assert_eq!(parse_percentiles(""), Ok(vec![]));
        assert!(parse_percentiles("50 101").is_err());
        assert!(parse_percentiles("abc").is_err());
    }

    #[test]
    fn the_graph_is_redis_sparkline() {
        let mut series = Series::new();
        let now = unix_now().0;
        series.add(now, 50);
        let text = graph("command", &series);
        assert_eq!(
            text,
            format!(
                "command - high 50 ms, low 50 ms (all time high 50 ms)\n{}\n \n \n \n_\n \n0\ns\n",
                "-".repeat(80)
            )
        );
    }

    #[test]
    fn series_keep_the_worst_of_each_second() {
        let mut series = Series::new();
        series.add(100, 5);
        series.add(100, 3);
        series.add(101, 7);
        assert_eq!(series.samples().len(), 2);
        assert_eq!(series.latest().ms, 7);
        assert_eq!(series.samples()[0].ms, 5);
        assert_eq!(series.max, 7);
    }
}
